//! kubecache's resident memory over the run, from `/proc/PID/status` or its
//! `process_resident_memory_bytes` metric, and its trend per phase.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use parking_lot::Mutex;
use tokio::task::JoinHandle;

use super::Chaos;
use super::report::{PhaseReport, PhaseRss, RssReport};
use crate::tls::ClientTls;

/// Where the RSS is read.
#[derive(Clone)]
enum Source {
    Proc(u32),
    Metrics {
        client: reqwest::Client,
        url: String,
        token: Option<String>,
    },
}

impl Source {
    /// The RSS now, MB (10^6 bytes).
    async fn read(&self) -> anyhow::Result<f64> {
        let (text, name, scale) = match self {
            Source::Proc(pid) => {
                let path = format!("/proc/{pid}/status");
                let text = tokio::fs::read_to_string(&path)
                    .await
                    .with_context(|| format!("reading {path}"))?;
                (text, "VmRSS:", 1e3)
            }
            Source::Metrics { client, url, token } => {
                let mut request = client.get(url);
                if let Some(token) = token {
                    request = request.bearer_auth(token);
                }
                let response = request.send().await?.error_for_status()?;
                (response.text().await?, "process_resident_memory_bytes", 1.0)
            }
        };
        let value = text
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .with_context(|| format!("no {name}"))?
            .split_whitespace()
            .next()
            .with_context(|| format!("no value of {name}"))?;
        Ok(value.parse::<f64>()? * scale / 1e6)
    }
}

/// Samples every interval until finished.
pub struct Sampler {
    samples: Arc<Mutex<Vec<(f64, f64)>>>,
    errors: Arc<Mutex<Vec<String>>>,
    task: Option<JoinHandle<()>>,
}

impl Sampler {
    /// Starts sampling, if the config names a source (a metrics URL
    /// reached trusting `tls`); times are seconds since `started`.
    pub fn start(config: &Chaos, started: Instant, tls: &ClientTls) -> anyhow::Result<Self> {
        let source = match (config.kubecache_pid, &config.metrics_url) {
            (Some(pid), _) => Some(Source::Proc(pid)),
            (None, Some(url)) => Some(Source::Metrics {
                client: tls.http().timeout(Duration::from_secs(10)).build()?,
                url: url.clone(),
                token: config.load.token.clone(),
            }),
            (None, None) => None,
        };
        if config.rss_interval_secs == 0 {
            bail!("rssIntervalSecs: must be at least 1");
        }
        let interval = Duration::from_secs(config.rss_interval_secs);
        let samples = Arc::new(Mutex::new(Vec::new()));
        let errors = Arc::new(Mutex::new(Vec::new()));
        let task = source.map(|source| {
            let (samples, errors) = (samples.clone(), errors.clone());
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(interval);
                loop {
                    tick.tick().await;
                    match source.read().await {
                        Ok(mb) => samples.lock().push((started.elapsed().as_secs_f64(), mb)),
                        Err(e) => {
                            let mut errors = errors.lock();
                            if errors.len() < 5 {
                                errors.push(format!("{e:#}"));
                            }
                        }
                    }
                }
            })
        });
        Ok(Sampler {
            samples,
            errors,
            task,
        })
    }

    /// Stops sampling: the samples, and each phase's trend after
    /// `warmup_secs` of it.
    pub fn finish(self, phases: &[PhaseReport], warmup_secs: f64) -> RssReport {
        if let Some(task) = &self.task {
            task.abort();
        }
        let samples = std::mem::take(&mut *self.samples.lock());
        let phases = phases
            .iter()
            .map(|phase| {
                let within: Vec<(f64, f64)> = samples
                    .iter()
                    .copied()
                    .filter(|(t, _)| *t >= phase.start_secs && *t <= phase.end_secs)
                    .collect();
                let settled: Vec<(f64, f64)> = within
                    .iter()
                    .copied()
                    .filter(|(t, _)| *t >= phase.start_secs + warmup_secs)
                    .collect();
                PhaseRss {
                    phase: phase.name,
                    first_mb: within.first().map(|s| s.1),
                    last_mb: within.last().map(|s| s.1),
                    max_mb: within.iter().map(|s| s.1).reduce(f64::max),
                    slope_mb_per_min: slope_per_minute(&settled),
                }
            })
            .collect();
        RssReport {
            samples,
            phases,
            errors: std::mem::take(&mut *self.errors.lock()),
        }
    }
}

/// The least-squares slope of (seconds, MB) samples, in MB per minute;
/// `None` without two distinct times.
pub fn slope_per_minute(samples: &[(f64, f64)]) -> Option<f64> {
    let n = samples.len() as f64;
    let mean_t = samples.iter().map(|s| s.0).sum::<f64>() / n;
    let mean_m = samples.iter().map(|s| s.1).sum::<f64>() / n;
    let (mut covariance, mut variance) = (0.0, 0.0);
    for (t, m) in samples {
        covariance += (t - mean_t) * (m - mean_m);
        variance += (t - mean_t) * (t - mean_t);
    }
    (variance > 0.0).then(|| covariance / variance * 60.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slope_is_the_least_squares_trend_in_mb_per_minute() {
        let rising: Vec<(f64, f64)> = (0..10)
            .map(|i| (i as f64, 100.0 + i as f64 * 0.5))
            .collect();
        assert!((slope_per_minute(&rising).unwrap() - 30.0).abs() < 1e-9);
        let flat = [(0.0, 100.0), (1.0, 101.0), (2.0, 100.0)];
        assert_eq!(slope_per_minute(&flat), Some(0.0));
        assert_eq!(slope_per_minute(&[(1.0, 5.0)]), None);
        assert_eq!(slope_per_minute(&[]), None);
    }
}
