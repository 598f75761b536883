//! What a fan-out comparison measured: a markdown table for people, JSON
//! for tools, and the verdict.

use std::fmt;

use serde::Serialize;

use crate::run::{Report, Scenario};

/// Every target's run, in order.
#[derive(Debug, Clone, Serialize)]
pub struct FanoutReport {
    /// The load (each target's URL, token and CA aside).
    pub load: Scenario,
    /// A row per target.
    pub rows: Vec<Row>,
}

/// One target's run.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The target's name.
    pub target: String,
    /// Its URL.
    pub url: String,
    /// Its run's report, if the run started.
    pub run: Option<Report>,
    /// Why the run did not start.
    pub failure: Option<String>,
    /// Deliveries/s over the first target's.
    pub deliveries_ratio: Option<f64>,
    /// Lag p99 over the first target's.
    pub lag_p99_ratio: Option<f64>,
}

impl FanoutReport {
    /// The report of the targets' runs (`(name, url, run)`, in order).
    pub(super) fn new(load: Scenario, runs: Vec<(String, String, anyhow::Result<Report>)>) -> Self {
        let first = runs
            .first()
            .and_then(|(_, _, run)| run.as_ref().ok())
            .and_then(|r| r.watch.clone());
        let rows = runs
            .into_iter()
            .map(|(target, url, run)| {
                let watch = run.as_ref().ok().and_then(|r| r.watch.as_ref());
                let ratio = |of: fn(&crate::run::WatchReport) -> f64| {
                    let (this, first) = (of(watch?), of(first.as_ref()?));
                    (first > 0.0).then(|| this / first)
                };
                Row {
                    target,
                    url,
                    deliveries_ratio: ratio(|w| w.deliveries_per_sec),
                    lag_p99_ratio: ratio(|w| w.lag.p99_ms),
                    failure: run.as_ref().err().map(|e| format!("{e:#}")),
                    run: run.ok(),
                }
            })
            .collect();
        FanoutReport { load, rows }
    }

    /// Whether every target's run started and passed: every watcher got
    /// every event, in order.
    pub fn ok(&self) -> bool {
        self.rows
            .iter()
            .all(|row| row.run.as_ref().is_some_and(Report::ok))
    }
}

/// A ratio cell: `2.5×`, or a dash without one.
fn ratio(value: Option<f64>) -> String {
    value.map_or("–".into(), |r| format!("{r:.2}×"))
}

impl fmt::Display for FanoutReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let load = &self.load;
        let objects = match load.write_objects {
            0 => "any object".to_string(),
            n => format!("{n} objects"),
        };
        writeln!(
            f,
            "{} watchers ({}) over {:?} from {} source addresses; {} writes/s offered \
             to {objects} (pad {} bytes, up to {} in flight), {} s per target. \
             Lag: a write's acknowledgement to a watcher's receipt; write latency: \
             due to acknowledged (ms).\n",
            load.watchers,
            load.watch_filters.join(","),
            load.protocol,
            load.addresses,
            load.writes_per_sec,
            load.write_pad_bytes,
            load.writes_in_flight,
            load.duration_secs
        )?;
        writeln!(
            f,
            "| target | protocol | deliveries/s | MB/s | lag p50 | lag p99 | lag max | \
             writes/s done / offered | write p99 | lost | in order | deliveries/s ratio | lag p99 ratio |"
        )?;
        writeln!(f, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")?;
        for row in &self.rows {
            let Some(run) = &row.run else {
                let failure = row.failure.as_deref().unwrap_or_default();
                let failure = failure.replace(['|', '\n'], " ");
                writeln!(
                    f,
                    "| {} | failed: {failure} |{}",
                    row.target,
                    " |".repeat(11)
                )?;
                continue;
            };
            let writes = format!(
                "{:.1} / {:.1}",
                run.writes as f64 / run.seconds,
                run.writes_offered as f64 / run.seconds
            );
            let write_p99 = format!("{:.1}", run.write_latency.p99_ms);
            match &run.watch {
                Some(w) => {
                    let protocols = w
                        .protocols
                        .iter()
                        .map(|(name, n)| format!("{name} ×{n}"))
                        .collect::<Vec<_>>()
                        .join(", ");
                    writeln!(
                        f,
                        "| {} | {protocols} | {:.0} | {:.1} | {:.1} | {:.1} | {:.1} | {writes} | \
                         {write_p99} | {} | {} | {} | {} |",
                        row.target,
                        w.deliveries_per_sec,
                        w.mb_per_sec,
                        w.lag.p50_ms,
                        w.lag.p99_ms,
                        w.lag.max_ms,
                        w.lost,
                        if w.complete { "yes" } else { "**no**" },
                        ratio(row.deliveries_ratio),
                        ratio(row.lag_p99_ratio)
                    )?;
                }
                None => writeln!(
                    f,
                    "| {} | – | – | – | – | – | – | {writes} | {write_p99} | – | – | – | – |",
                    row.target
                )?,
            }
        }
        Ok(())
    }
}
