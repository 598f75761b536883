//! What a chaos run measured: the phases side by side, for people and as
//! JSON, and the verdict.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::Chaos;
use super::attack::HostileReport;
use super::reviews::ReviewRates;
use crate::run::{OpReport, Report};

/// One phase.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseReport {
    /// `baseline` or `hostile`.
    pub name: &'static str,
    /// Seconds since the run's start when the phase began.
    pub start_secs: f64,
    /// And when it ended.
    pub end_secs: f64,
    /// The well-behaved load's report (`None`: it could not run).
    pub run: Option<Report>,
    /// Why the well-behaved load could not run.
    pub failure: Option<String>,
    /// `/healthz` probes.
    pub healthz: OpReport,
    /// The well-behaved tenant's large lists (`None`: not probed).
    pub large_list: Option<OpReport>,
    /// What the hostile clients met.
    pub hostile: Vec<HostileReport>,
    /// Upstream faults driven, by kind.
    pub faults: BTreeMap<String, u64>,
    /// Reviews the simulated API server was asked, per second (`None`:
    /// the upstream is not the sim).
    pub reviews_per_sec: Option<ReviewRates>,
}

impl PhaseReport {
    /// Whether the well-behaved clients got everything: every request
    /// answered, every event delivered, every probe healthy.
    pub fn ok(&self) -> bool {
        self.problems().is_empty()
    }

    /// What the well-behaved clients missed, one line each, first ones
    /// first (empty: [`PhaseReport::ok`]).
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let Some(run) = &self.run else {
            let why = self.failure.as_deref().unwrap_or_default();
            return vec![format!("{}: the load could not run: {why}", self.name)];
        };
        let ops = run.requests.iter().chain([&self.healthz]);
        for op in ops.chain(&self.large_list).filter(|op| op.errors > 0) {
            let first = op.first_errors.first().map_or("", String::as_str);
            problems.push(format!(
                "{}: {} {} errors, the first: {first}",
                self.name, op.errors, op.op
            ));
        }
        if let Some(watch) = run.watch.as_ref().filter(|w| !w.complete) {
            let first = watch.failures.first().map_or("", String::as_str);
            problems.push(format!(
                "{}: {} watch failures, the first: {first}",
                self.name,
                watch.failures.len()
            ));
        }
        problems
    }

    fn op(&self, op: &str) -> Option<&OpReport> {
        self.run.as_ref()?.requests.iter().find(|r| r.op == op)
    }
}

/// kubecache's RSS over the run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RssReport {
    /// (seconds since the start, MB) pairs.
    pub samples: Vec<(f64, f64)>,
    /// Per phase.
    pub phases: Vec<PhaseRss>,
    /// The first failures to read it.
    pub errors: Vec<String>,
}

/// RSS during one phase, MB.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseRss {
    /// The phase.
    pub phase: &'static str,
    /// At its first sample.
    pub first_mb: Option<f64>,
    /// At its last sample.
    pub last_mb: Option<f64>,
    /// Its largest sample.
    pub max_mb: Option<f64>,
    /// Least-squares slope after the warm-up, MB per minute (`None`: fewer
    /// than two samples).
    pub slope_mb_per_min: Option<f64>,
}

/// The whole chaos run.
#[derive(Debug, Clone, Serialize)]
pub struct ChaosReport {
    /// What was run.
    pub config: Chaos,
    /// Baseline, then hostile.
    pub phases: Vec<PhaseReport>,
    /// kubecache's RSS.
    pub rss: RssReport,
}

impl ChaosReport {
    /// Whether every phase passed.
    pub fn ok(&self) -> bool {
        self.phases.iter().all(PhaseReport::ok)
    }

    /// A phase's GET p99 over the baseline's.
    fn get_p99_ratio(&self, phase: &PhaseReport) -> Option<f64> {
        let p99 = |phase: &PhaseReport| {
            phase
                .op("get")
                .filter(|o| o.latency.count > 0)
                .map(|o| o.latency.p99_ms)
        };
        Some(p99(phase)? / p99(self.phases.first()?)?)
    }

    /// RSS at the end of the phase after the attack over that at the end of
    /// the baseline.
    fn rss_after_ratio(&self) -> Option<f64> {
        let last = |name: &str| {
            self.rss
                .phases
                .iter()
                .find(|p| p.phase == name)
                .and_then(|p| p.last_mb)
        };
        Some(last("after")? / last("baseline")?)
    }
}

/// `p50 / p99` of a request kind, or `-`.
fn percentiles(op: Option<&OpReport>) -> String {
    op.filter(|o| o.latency.count > 0).map_or("-".into(), |o| {
        format!("{:.1} / {:.1}", o.latency.p50_ms, o.latency.p99_ms)
    })
}

fn megabytes(mb: Option<f64>) -> String {
    mb.map_or("-".into(), |mb| format!("{mb:.0}"))
}

impl fmt::Display for ChaosReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<9} {:>6} {:>17} {:>7} {:>17} {:>13} {:>15} {:>18} {:>7} {:>9} {:>13}",
            "phase",
            "s",
            "get p50/p99 ms",
            "p99 ×",
            "list p50/p99 ms",
            "lag p99 ms",
            "healthz p99 ms",
            "healthz ok/max ms",
            "errors",
            "complete",
            "TR/s SAR/s"
        )?;
        for phase in &self.phases {
            let watch = phase.run.as_ref().and_then(|r| r.watch.as_ref());
            let errors: u64 = phase
                .run
                .iter()
                .flat_map(|r| &r.requests)
                .map(|r| r.errors)
                .sum::<u64>()
                + phase.healthz.errors;
            let healthz = &phase.healthz;
            writeln!(
                f,
                "{:<9} {:>6.0} {:>17} {:>7} {:>17} {:>13} {:>15.1} {:>18} {:>7} {:>9} {:>13}",
                phase.name,
                phase.end_secs - phase.start_secs,
                percentiles(phase.op("get")),
                self.get_p99_ratio(phase)
                    .map_or("-".into(), |r| format!("{r:.2}")),
                percentiles(phase.op("list")),
                watch.map_or("-".into(), |w| format!("{:.1}", w.lag.p99_ms)),
                healthz.latency.p99_ms,
                format!(
                    "{}/{} {:.0}",
                    healthz.latency.count,
                    healthz.latency.count as u64 + healthz.errors,
                    healthz.latency.max_ms
                ),
                errors,
                match (&phase.run, watch) {
                    (None, _) => "NOT RUN",
                    (Some(_), None) => "-",
                    (Some(_), Some(w)) if w.complete => "yes",
                    (Some(_), Some(_)) => "NO",
                },
                phase.reviews_per_sec.map_or("-".into(), |r| format!(
                    "{:.1} {:.1}",
                    r.token_reviews, r.subject_access_reviews
                )),
            )?;
        }
        let baseline = self.phases.first().and_then(|p| p.large_list.as_ref());
        for phase in &self.phases {
            let Some(list) = &phase.large_list else {
                continue;
            };
            let ratio = baseline
                .filter(|b| b.latency.p99_ms > 0.0)
                .map_or("-".into(), |b| {
                    format!("{:.2}", list.latency.p99_ms / b.latency.p99_ms)
                });
            writeln!(
                f,
                "large list ({} objects), {}: p50/p99 {} ms, p99 × {ratio}, max {:.0} ms, errors {}",
                self.config.large_list,
                phase.name,
                percentiles(Some(list)),
                list.latency.max_ms,
                list.errors
            )?;
        }
        if let Some(ratio) = self.rss_after_ratio() {
            writeln!(
                f,
                "RSS at the end of the after phase: {:+.0}% of the baseline's",
                (ratio - 1.0) * 100.0
            )?;
        }
        for phase in &self.phases {
            writeln!(f, "\n{}:", phase.name)?;
            match &phase.run {
                Some(run) => write!(f, "{run}")?,
                None => writeln!(
                    f,
                    "  the load could not run: {}",
                    phase.failure.as_deref().unwrap_or_default()
                )?,
            }
            for e in &phase.healthz.first_errors {
                writeln!(f, "  healthz error: {e}")?;
            }
            for e in phase.large_list.iter().flat_map(|l| &l.first_errors) {
                writeln!(f, "  large list error: {e}")?;
            }
            for h in &phase.hostile {
                let outcomes: Vec<String> = h
                    .outcomes
                    .iter()
                    .map(|(o, n)| format!("{o} x{n}"))
                    .collect();
                writeln!(
                    f,
                    "  hostile {} ({}): {}",
                    h.kind,
                    h.clients,
                    outcomes.join(", ")
                )?;
            }
            for (fault, n) in &phase.faults {
                writeln!(f, "  upstream fault x{n}: {fault}")?;
            }
        }
        writeln!(
            f,
            "\nRSS ({} samples; slope after {} s of each phase):",
            self.rss.samples.len(),
            self.config.rss_warmup_secs
        )?;
        for p in &self.rss.phases {
            writeln!(
                f,
                "  {:<9} first {} MB, last {} MB, max {} MB, slope {}",
                p.phase,
                megabytes(p.first_mb),
                megabytes(p.last_mb),
                megabytes(p.max_mb),
                p.slope_mb_per_min
                    .map_or("-".into(), |s| format!("{s:+.2} MB/min"))
            )?;
        }
        for e in &self.rss.errors {
            writeln!(f, "  RSS error: {e}")?;
        }
        let problems: Vec<String> = self.phases.iter().flat_map(PhaseReport::problems).collect();
        if problems.is_empty() {
            writeln!(
                f,
                "\nverdict: the well-behaved clients got every answer and every event in every phase"
            )
        } else {
            writeln!(f, "\nverdict: FAILED:\n  {}", problems.join("\n  "))
        }
    }
}
