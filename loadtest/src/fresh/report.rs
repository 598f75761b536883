//! What `fresh` measured, as markdown tables with the ratios kubecache/sim.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::run::percentile_ms;
use crate::sim::Counts;

/// Latencies of one kind of request against one server.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    /// Requests answered 2xx.
    pub ok: usize,
    /// Requests that failed (status, transport, or a read older than the
    /// client's own write).
    pub errors: u64,
    /// The first few failures, for the log.
    pub first_errors: Vec<String>,
    /// Answered requests per second of the phase.
    pub per_sec: f64,
    /// Median, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// 99.9th percentile, ms.
    pub p999_ms: f64,
}

/// Samples of one kind of request, while measuring.
#[derive(Debug, Default)]
pub struct Samples {
    latencies_us: Vec<u64>,
    errors: u64,
    first_errors: Vec<String>,
}

impl Samples {
    /// One request: its latency, or what went wrong.
    pub fn record(&mut self, latency: Duration, outcome: Result<(), String>) {
        match outcome {
            Ok(()) => self.latencies_us.push(latency.as_micros() as u64),
            Err(e) => {
                self.errors += 1;
                if self.first_errors.len() < 3 {
                    self.first_errors.push(e);
                }
            }
        }
    }

    /// Adds another worker's samples.
    pub fn merge(&mut self, other: Samples) {
        self.latencies_us.extend(other.latencies_us);
        self.errors += other.errors;
        let room = 3usize.saturating_sub(self.first_errors.len());
        self.first_errors
            .extend(other.first_errors.into_iter().take(room));
    }

    /// The percentiles, and the rate over `elapsed`.
    pub fn summary(mut self, elapsed: Duration) -> Summary {
        self.latencies_us.sort_unstable();
        let at = |q| percentile_ms(&self.latencies_us, q);
        Summary {
            ok: self.latencies_us.len(),
            errors: self.errors,
            per_sec: self.latencies_us.len() as f64 / elapsed.as_secs_f64().max(1e-9),
            p50_ms: at(0.50),
            p99_ms: at(0.99),
            p999_ms: at(0.999),
            first_errors: self.first_errors,
        }
    }
}

/// One load, against kubecache and against the sim directly.
#[derive(Debug, Clone, Serialize)]
pub struct Compared {
    /// What was measured.
    pub load: String,
    /// Through kubecache.
    pub kubecache: Summary,
    /// The sim directly.
    pub sim: Summary,
}

/// The requests kubecache sent the sim during one phase, per second.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Upstream {
    /// The phase.
    pub phase: String,
    /// Its length, seconds.
    pub seconds: f64,
    /// Lists without resourceVersion (limit=1 ones included).
    pub consistent_lists: f64,
    /// Of which with `limit=1`.
    pub limit_one_lists: f64,
    /// Gets without resourceVersion (passed through).
    pub consistent_gets: f64,
    /// Watches started (probes, and the reflectors' own).
    pub watches: f64,
}

impl Upstream {
    /// The rates of `after - before` (summed over resources) over `elapsed`.
    pub fn between(
        phase: &str,
        before: &[Counts],
        after: &[Counts],
        elapsed: Duration,
    ) -> Upstream {
        let sum = |counts: &[Counts], field: fn(&Counts) -> u64| -> u64 {
            counts.iter().map(field).sum()
        };
        let secs = elapsed.as_secs_f64().max(1e-9);
        let rate = |field: fn(&Counts) -> u64| {
            sum(after, field).saturating_sub(sum(before, field)) as f64 / secs
        };
        Upstream {
            phase: phase.to_string(),
            seconds: elapsed.as_secs_f64(),
            consistent_lists: rate(|c| c.consistent_lists),
            limit_one_lists: rate(|c| c.limit_one_lists),
            consistent_gets: rate(|c| c.consistent_gets),
            watches: rate(|c| c.watches),
        }
    }

    /// Every freshness request per second (a limit=1 list without
    /// resourceVersion is one of the consistent lists).
    pub fn total(&self) -> f64 {
        self.consistent_lists + self.consistent_gets + self.watches
    }
}

/// A client's write through kubecache, then its consistent read.
#[derive(Debug, Clone, Serialize)]
pub struct ReadYourWrites {
    /// Against whom.
    pub target: String,
    /// The write alone.
    pub write: Summary,
    /// The write and the read after it.
    pub write_then_read: Summary,
}

/// The whole benchmark.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Seconds per measured phase.
    pub seconds: f64,
    /// Pod writes per second the writer made during the quiet-resource
    /// and read-your-writes loads.
    pub pod_writes_per_sec: f64,
    /// Consistent reads of pods (which churn), kubecache vs the sim.
    pub reads: Vec<Compared>,
    /// Consistent GETs of the quiet resource, kubecache vs the sim.
    pub quiet: Vec<Compared>,
    /// Read-your-writes.
    pub read_your_writes: Vec<ReadYourWrites>,
    /// kubecache's freshness requests to the sim.
    pub upstream: Vec<Upstream>,
}

/// `a / b`, or `-` when `b` is 0.
fn ratio(a: f64, b: f64) -> String {
    if b == 0.0 {
        "-".into()
    } else {
        format!("{:.2}", a / b)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Consistent reads ({:.0} s each; pod writes during the quiet loads: {:.0}/s)\n",
            self.seconds, self.pod_writes_per_sec
        )?;
        writeln!(
            f,
            "| load | server | reads | req/s | p50 ms | p99 ms | p99.9 ms | errors |"
        )?;
        writeln!(f, "|---|---|---:|---:|---:|---:|---:|---:|")?;
        for c in self.reads.iter().chain(&self.quiet) {
            for (name, s) in [("kubecache", &c.kubecache), ("sim", &c.sim)] {
                writeln!(
                    f,
                    "| {} | {name} | {} | {:.0} | {:.1} | {:.1} | {:.1} | {} |",
                    c.load, s.ok, s.per_sec, s.p50_ms, s.p99_ms, s.p999_ms, s.errors
                )?;
            }
            let (k, s) = (&c.kubecache, &c.sim);
            writeln!(
                f,
                "| {} | kubecache/sim | | {} | {} | {} | {} | |",
                c.load,
                ratio(k.per_sec, s.per_sec),
                ratio(k.p50_ms, s.p50_ms),
                ratio(k.p99_ms, s.p99_ms),
                ratio(k.p999_ms, s.p999_ms)
            )?;
        }
        writeln!(
            f,
            "\nConsistent GET of a quiet object, kubecache vs the sim, same run\n"
        )?;
        writeln!(
            f,
            "| load | p50 ms kubecache | sim | x | p99 ms kubecache | sim | x | req/s kubecache | sim | x |"
        )?;
        writeln!(f, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")?;
        for c in &self.quiet {
            let (k, s) = (&c.kubecache, &c.sim);
            writeln!(
                f,
                "| {} | {:.1} | {:.1} | {} | {:.1} | {:.1} | {} | {:.0} | {:.0} | {} |",
                c.load,
                k.p50_ms,
                s.p50_ms,
                ratio(k.p50_ms, s.p50_ms),
                k.p99_ms,
                s.p99_ms,
                ratio(k.p99_ms, s.p99_ms),
                k.per_sec,
                s.per_sec,
                ratio(k.per_sec, s.per_sec)
            )?;
        }
        writeln!(f, "\nRead-your-writes (write a config map, then GET it)\n")?;
        writeln!(
            f,
            "| server | writes | write p50 ms | write p99 ms | write+read p50 ms | write+read p99 ms | read adds at p99 ms | errors |"
        )?;
        writeln!(f, "|---|---:|---:|---:|---:|---:|---:|---:|")?;
        for r in &self.read_your_writes {
            let (w, wr) = (&r.write, &r.write_then_read);
            writeln!(
                f,
                "| {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} |",
                r.target,
                w.ok,
                w.p50_ms,
                w.p99_ms,
                wr.p50_ms,
                wr.p99_ms,
                wr.p99_ms - w.p99_ms,
                w.errors + wr.errors
            )?;
        }
        writeln!(
            f,
            "\nkubecache's requests to the API server for freshness, per second\n"
        )?;
        writeln!(
            f,
            "| phase | consistent lists | of which limit=1 | consistent gets | watches | total |"
        )?;
        writeln!(f, "|---|---:|---:|---:|---:|---:|")?;
        for u in &self.upstream {
            writeln!(
                f,
                "| {} | {:.1} | {:.1} | {:.1} | {:.2} | {:.1} |",
                u.phase,
                u.consistent_lists,
                u.limit_one_lists,
                u.consistent_gets,
                u.watches,
                u.total()
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_give_nearest_rank_percentiles_and_the_rate() {
        let mut samples = Samples::default();
        for ms in 1..=1000 {
            samples.record(Duration::from_millis(ms), Ok(()));
        }
        samples.record(Duration::ZERO, Err("503".into()));
        let s = samples.summary(Duration::from_secs(4));
        assert_eq!((s.ok, s.errors, s.per_sec), (1000, 1, 250.0));
        assert_eq!((s.p50_ms, s.p99_ms, s.p999_ms), (500.0, 990.0, 999.0));
        assert_eq!(s.first_errors, ["503"]);
    }

    #[test]
    fn upstream_rates_are_the_counters_differences_over_the_phase() {
        let counts = |lists, limit_one, gets, watches| Counts {
            consistent_lists: lists,
            limit_one_lists: limit_one,
            consistent_gets: gets,
            watches,
            ..Counts::default()
        };
        let before = [counts(10, 10, 0, 2), counts(1, 0, 0, 1)];
        let after = [counts(30, 30, 4, 4), counts(1, 0, 0, 1)];
        let u = Upstream::between("idle", &before, &after, Duration::from_secs(2));
        assert_eq!(
            (
                u.consistent_lists,
                u.limit_one_lists,
                u.consistent_gets,
                u.watches
            ),
            (10.0, 10.0, 2.0, 1.0)
        );
        assert_eq!(u.total(), 13.0);
    }

    #[test]
    fn the_table_gives_each_load_for_both_servers_and_their_ratio() {
        let summary = |per_sec, p50_ms| Summary {
            ok: 4000,
            per_sec,
            p50_ms,
            p99_ms: p50_ms * 2.0,
            p999_ms: p50_ms * 3.0,
            ..Summary::default()
        };
        let report = Report {
            seconds: 10.0,
            pod_writes_per_sec: 100.0,
            reads: vec![Compared {
                load: "GET pod, 32 conn".into(),
                kubecache: summary(400.0, 40.0),
                sim: summary(1000.0, 0.0),
            }],
            quiet: vec![Compared {
                load: "GET quiet config map, 1 client".into(),
                kubecache: summary(300.0, 2.0),
                sim: summary(200.0, 4.0),
            }],
            read_your_writes: vec![],
            upstream: vec![],
        };
        let table = report.to_string();
        assert!(
            table.contains(
                "| GET pod, 32 conn | kubecache | 4000 | 400 | 40.0 | 80.0 | 120.0 | 0 |"
            ),
            "{table}"
        );
        assert!(
            table.contains("| GET pod, 32 conn | kubecache/sim | | 0.40 | - | - | - | |"),
            "{table}"
        );
        assert!(
            table.contains(
                "| GET quiet config map, 1 client | 2.0 | 4.0 | 0.50 | 4.0 | 8.0 | 0.50 | 300 | 200 | 1.50 |"
            ),
            "{table}"
        );
    }
}
