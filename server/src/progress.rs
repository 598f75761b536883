//! Progress of the initial sync: a bar per resource on a terminal (objects
//! listed out of the API server's `remainingItemCount`), log lines
//! otherwise; then one "ready" line per resource and a summary every
//! [`SUMMARY_EVERY`].

use std::sync::Arc;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::time::Instant;

use crate::cacher::Caches;

/// How often the bars are redrawn.
const TICK: Duration = Duration::from_millis(200);
/// How often a log line reports a sync in progress.
const LOG_EVERY: Duration = Duration::from_secs(5);
/// How often a summary of every ready resource is logged.
const SUMMARY_EVERY: Duration = Duration::from_secs(300);

/// Reports the sync of `caches` until the process ends: bars when
/// `terminal`, log lines otherwise.
pub async fn report(caches: Arc<Caches>, terminal: bool) {
    let started = Instant::now();
    let bars = MultiProgress::with_draw_target(if terminal {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    });
    let style = ProgressStyle::with_template(
        "{prefix:>24} [{bar:40}] {pos}/{len} objects, {per_sec} {msg}",
    )
    .expect("a valid template")
    .progress_chars("=> ");
    let bars: Vec<ProgressBar> = caches
        .iter()
        .map(|cache| {
            bars.add(ProgressBar::new(0))
                .with_style(style.clone())
                .with_prefix(cache.name())
        })
        .collect();
    let mut announced = vec![false; bars.len()];
    let mut last_log = Instant::now();
    let mut last_summary = Instant::now();
    let mut tick = tokio::time::interval(TICK);
    loop {
        tick.tick().await;
        let log_now = last_log.elapsed() >= LOG_EVERY;
        for ((cache, bar), announced) in caches.iter().zip(&bars).zip(&mut announced) {
            if *announced {
                continue;
            }
            let status = cache.status.borrow().clone();
            if cache.reader.is_ready() {
                *announced = true;
                let objects = cache.reader.snapshot().len();
                bar.finish_with_message(format!("ready ({})", status.strategy));
                tracing::info!(
                    resource = %cache.name(),
                    objects,
                    strategy = status.strategy,
                    elapsed = ?started.elapsed(),
                    "ready"
                );
            } else if let Some((listed, remaining)) = status.progress {
                let total = remaining.map_or(listed, |r| listed + r as usize);
                bar.set_length(total.max(listed) as u64);
                bar.set_position(listed as u64);
                if log_now && !terminal {
                    tracing::info!(resource = %cache.name(), listed, total, strategy = status.strategy, "syncing");
                }
            } else if log_now && !terminal {
                let why = status
                    .last_error
                    .as_deref()
                    .unwrap_or("waiting for the first page");
                tracing::info!(resource = %cache.name(), strategy = status.strategy, why, "syncing");
            }
        }
        if log_now {
            last_log = Instant::now();
        }
        if last_summary.elapsed() >= SUMMARY_EVERY {
            last_summary = Instant::now();
            for cache in caches.iter() {
                let snapshot = cache.reader.snapshot();
                tracing::info!(
                    resource = %cache.name(),
                    ready = cache.reader.is_ready(),
                    objects = snapshot.len(),
                    resource_version = snapshot.resource_version(),
                    watchers = cache.watchers(),
                    "summary"
                );
            }
        }
    }
}
