//! `/healthz` probed every 100 ms on a fresh connection, as a kubelet
//! probes: what a starved accept loop or worker shows first.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::task::JoinHandle;

use crate::run::{OpStats, Scenario};
use crate::tls::ClientTls;

/// Probes until dropped.
pub struct Prober {
    stats: Arc<Mutex<OpStats>>,
    task: JoinHandle<()>,
}

impl Drop for Prober {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Prober {
    /// Starts probing kubecache at `load.url`, trusting `tls`.
    pub fn start(load: &Scenario, tls: &ClientTls) -> anyhow::Result<Self> {
        let client = tls
            .http()
            .pool_max_idle_per_host(0)
            .timeout(Duration::from_secs(10))
            .build()?;
        let url = format!("{}/healthz", load.url);
        let stats = Arc::new(Mutex::new(OpStats::new("healthz")));
        let task = tokio::spawn({
            let stats = stats.clone();
            async move {
                let mut tick = tokio::time::interval(Duration::from_millis(100));
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    let started = Instant::now();
                    let outcome = match client.get(&url).send().await {
                        Ok(r) if r.status().is_success() => Ok(0),
                        Ok(r) => Err(format!("GET /healthz: {}", r.status())),
                        Err(e) => Err(format!("GET /healthz: {e}")),
                    };
                    stats.lock().record(started.elapsed(), outcome);
                }
            }
        });
        Ok(Prober { stats, task })
    }

    /// The probes since the last restart; starts counting anew.
    pub fn restart(&self) -> OpStats {
        std::mem::replace(&mut *self.stats.lock(), OpStats::new("healthz"))
    }
}
