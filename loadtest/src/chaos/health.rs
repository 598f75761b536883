//! Probes through every phase: `/healthz` every 100 ms on a fresh
//! connection, as a kubelet probes (what a starved accept loop or worker
//! shows first), and a well-behaved tenant's large list every second (what
//! waits behind a storm of large sends, issue 43).

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::task::JoinHandle;

use crate::run::{OpStats, Scenario};
use crate::tls::ClientTls;

/// Probes until dropped.
pub struct Prober {
    name: &'static str,
    stats: Arc<Mutex<OpStats>>,
    task: JoinHandle<()>,
}

impl Drop for Prober {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Prober {
    /// Probes `/healthz` of kubecache at `load.url`, trusting `tls`.
    pub fn healthz(load: &Scenario, tls: &ClientTls) -> anyhow::Result<Self> {
        let client = tls
            .http()
            .pool_max_idle_per_host(0)
            .timeout(Duration::from_secs(10))
            .build()?;
        let url = format!("{}/healthz", load.url);
        Ok(Self::start(
            "healthz",
            Duration::from_millis(100),
            move || client.get(&url),
        ))
    }

    /// Lists `objects` of `load.path` (`limit`, a consistent read) with
    /// the load's token, on a kept connection, as a tenant's controller
    /// lists: a send large enough to take a seat.
    pub fn large_list(load: &Scenario, tls: &ClientTls, objects: usize) -> anyhow::Result<Self> {
        let client = tls.http().timeout(Duration::from_secs(60)).build()?;
        let url = format!("{}{}?limit={objects}", load.url, load.path);
        let token = load.token.clone();
        Ok(Self::start(
            "large list",
            Duration::from_secs(1),
            move || {
                let request = client.get(&url);
                match &token {
                    Some(token) => request.bearer_auth(token),
                    None => request,
                }
            },
        ))
    }

    /// Sends `request()` every `every`, one at a time.
    fn start(
        name: &'static str,
        every: Duration,
        request: impl Fn() -> reqwest::RequestBuilder + Send + 'static,
    ) -> Self {
        let stats = Arc::new(Mutex::new(OpStats::new(name)));
        let task = tokio::spawn({
            let stats = stats.clone();
            async move {
                let mut tick = tokio::time::interval(every);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    let started = Instant::now();
                    let outcome = match request().send().await {
                        Ok(r) if r.status().is_success() => r
                            .bytes()
                            .await
                            .map(|body| body.len())
                            .map_err(|e| format!("{name}: {:#}", anyhow::Error::new(e))),
                        Ok(r) => Err(format!("{name}: {}", r.status())),
                        Err(e) => Err(format!("{name}: {:#}", anyhow::Error::new(e))),
                    };
                    stats.lock().record(started.elapsed(), outcome);
                }
            }
        });
        Prober { name, stats, task }
    }

    /// The probes since the last restart; starts counting anew.
    pub fn restart(&self) -> OpStats {
        std::mem::replace(&mut *self.stats.lock(), OpStats::new(self.name))
    }
}
