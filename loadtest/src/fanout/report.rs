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
    /// CPU seconds its serving processes spent over its run (with
    /// `--target-pids`).
    pub cpu_seconds: Option<f64>,
    /// Deliveries per CPU second of its serving processes.
    pub deliveries_per_cpu_second: Option<f64>,
    /// Deliveries per CPU second over the first target's.
    pub per_cpu_ratio: Option<f64>,
}

/// One target's run as measured: its report, and the CPU its serving
/// processes spent.
pub(super) struct Measured {
    pub target: String,
    pub url: String,
    pub run: anyhow::Result<Report>,
    pub cpu_seconds: Option<f64>,
}

impl Measured {
    fn per_cpu_second(&self) -> Option<f64> {
        let deliveries = self.run.as_ref().ok()?.watch.as_ref()?.deliveries;
        let cpu = self.cpu_seconds.filter(|cpu| *cpu > 0.0)?;
        Some(deliveries as f64 / cpu)
    }
}

impl FanoutReport {
    /// The report of the targets' runs, in order.
    pub(super) fn new(load: Scenario, runs: Vec<Measured>) -> Self {
        let first = runs.first();
        let first_watch = first
            .and_then(|m| m.run.as_ref().ok())
            .and_then(|r| r.watch.clone());
        let first_per_cpu = first.and_then(Measured::per_cpu_second);
        let rows = runs
            .into_iter()
            .map(|measured| {
                let watch = measured.run.as_ref().ok().and_then(|r| r.watch.as_ref());
                let ratio = |of: fn(&crate::run::WatchReport) -> f64| {
                    let (this, first) = (of(watch?), of(first_watch.as_ref()?));
                    (first > 0.0).then(|| this / first)
                };
                let per_cpu = measured.per_cpu_second();
                Row {
                    deliveries_ratio: ratio(|w| w.deliveries_per_sec),
                    lag_p99_ratio: ratio(|w| w.lag.p99_ms),
                    cpu_seconds: measured.cpu_seconds,
                    deliveries_per_cpu_second: per_cpu,
                    per_cpu_ratio: per_cpu.zip(first_per_cpu).map(|(this, first)| this / first),
                    failure: measured.run.as_ref().err().map(|e| format!("{e:#}")),
                    target: measured.target,
                    url: measured.url,
                    run: measured.run.ok(),
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
             writes/s done / offered | write p99 | lost | in order | deliveries/s ratio | lag p99 ratio | \
             server CPU s | deliveries per CPU s | per CPU ratio |"
        )?;
        writeln!(
            f,
            "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
        )?;
        for row in &self.rows {
            let Some(run) = &row.run else {
                let failure = row.failure.as_deref().unwrap_or_default();
                let failure = failure.replace(['|', '\n'], " ");
                writeln!(
                    f,
                    "| {} | failed: {failure} |{}",
                    row.target,
                    " |".repeat(14)
                )?;
                continue;
            };
            let writes = format!(
                "{:.1} / {:.1}",
                run.writes as f64 / run.seconds,
                run.writes_offered as f64 / run.seconds
            );
            let write_p99 = format!("{:.1}", run.write_latency.p99_ms);
            let cpu = format!(
                "{} | {} | {}",
                row.cpu_seconds.map_or("–".into(), |s| format!("{s:.1}")),
                (row.deliveries_per_cpu_second).map_or("–".into(), |d| format!("{d:.0}")),
                ratio(row.per_cpu_ratio)
            );
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
                         {write_p99} | {} | {} | {} | {} | {cpu} |",
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
                    "| {} | – | – | – | – | – | – | {writes} | {write_p99} | – | – | – | – | {cpu} |",
                    row.target
                )?,
            }
        }
        Ok(())
    }
}
