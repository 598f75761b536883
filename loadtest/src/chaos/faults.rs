//! Upstream faults during the hostile phase: every few seconds, a watch
//! fault is armed on the simulated API server and its open watches are cut,
//! so kubecache's reflector reconnects into it. Every fault here is one a
//! reflector recovers from by resuming its watch (a cut, a dropped stream,
//! 5xx, 429, a stall), so no event may be lost to it; the reference watch
//! resumes the same way.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::task::JoinHandle;

use super::Chaos;
use crate::sim::faults::{Fault, FaultSpec, Target};

/// The faults, in the order they are driven (then again).
const ROTATION: [(&str, Option<Fault>); 6] = [
    ("cut", None),
    (
        "cut, then the resumed watch dropped after 10 events",
        Some(Fault::DropWatch { after_events: 10 }),
    ),
    ("cut, then 500", Some(Fault::InternalError)),
    ("cut, then 503", Some(Fault::ServiceUnavailable)),
    (
        "cut, then 429 (retry after 1 s)",
        Some(Fault::TooManyRequests {
            retry_after_secs: 1,
        }),
    ),
    ("cut, then a 2 s stall", Some(Fault::Stall { secs: 2 })),
];

/// Drives faults until stopped.
pub struct Driver {
    driven: Arc<Mutex<BTreeMap<String, u64>>>,
    task: JoinHandle<()>,
}

impl Driver {
    /// Starts driving faults on `config.load.upstream`.
    pub fn start(config: &Chaos) -> Self {
        let upstream = config.load.upstream.clone();
        let interval = Duration::from_secs(config.fault_interval_secs);
        let driven = Arc::new(Mutex::new(BTreeMap::new()));
        let task = tokio::spawn({
            let driven = driven.clone();
            async move {
                let client = reqwest::Client::new();
                for (name, fault) in ROTATION.iter().cycle() {
                    tokio::time::sleep(interval).await;
                    let outcome = drive(&client, &upstream, *fault).await;
                    let key = match outcome {
                        Ok(()) => (*name).to_string(),
                        Err(e) => format!("{name}: failed: {e}"),
                    };
                    *driven.lock().entry(key).or_default() += 1;
                }
            }
        });
        Driver { driven, task }
    }

    /// Stops: how many of each fault were driven.
    pub fn stop(self) -> BTreeMap<String, u64> {
        self.task.abort();
        std::mem::take(&mut *self.driven.lock())
    }
}

/// Arms `fault` for the next watch, then cuts every open watch.
async fn drive(
    client: &reqwest::Client,
    upstream: &str,
    fault: Option<Fault>,
) -> reqwest::Result<()> {
    if let Some(fault) = fault {
        let spec = FaultSpec {
            target: Target::Watch,
            fault,
            times: 1,
        };
        client
            .post(format!("{upstream}/sim/faults"))
            .json(&spec)
            .send()
            .await?
            .error_for_status()?;
    }
    client
        .post(format!("{upstream}/sim/cut-watches"))
        .send()
        .await?
        .error_for_status()?;
    Ok(())
}
