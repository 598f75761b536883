//! What a run measured: a table for people, JSON for tools, and the verdict.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::latency::Latency;
use super::shards::{self, ShardingReport};
use super::watchers::{ReferenceEvent, WatchResult};
use super::writes::{Writes, Written};
use super::{RunContext, Scenario};

/// One request kind, while measuring.
#[derive(Debug, Clone)]
pub struct OpStats {
    name: &'static str,
    latencies_us: Vec<u64>,
    bytes: u64,
    errors: u64,
    first_errors: Vec<String>,
}

impl OpStats {
    /// No requests yet.
    pub fn new(name: &'static str) -> Self {
        OpStats {
            name,
            latencies_us: Vec::new(),
            bytes: 0,
            errors: 0,
            first_errors: Vec::new(),
        }
    }

    /// One request: its latency and body size, or what went wrong.
    pub fn record(&mut self, latency: Duration, outcome: Result<usize, String>) {
        match outcome {
            Ok(bytes) => {
                self.latencies_us.push(latency.as_micros() as u64);
                self.bytes += bytes as u64;
            }
            Err(e) => {
                self.errors += 1;
                if self.first_errors.len() < 5 {
                    self.first_errors.push(e);
                }
            }
        }
    }

    /// The results over `seconds` of measuring.
    pub fn report(mut self, seconds: f64) -> OpReport {
        OpReport {
            op: self.name,
            per_sec: self.latencies_us.len() as f64 / seconds,
            latency: Latency::of(&mut self.latencies_us),
            mb_per_sec: self.bytes as f64 / seconds / 1e6,
            errors: self.errors,
            first_errors: self.first_errors,
        }
    }

    /// Adds another worker's measurements.
    pub fn merge(&mut self, other: OpStats) {
        self.latencies_us.extend(other.latencies_us);
        self.bytes += other.bytes;
        self.errors += other.errors;
        self.first_errors.extend(other.first_errors);
        self.first_errors.truncate(5);
    }
}

/// One request kind's results.
#[derive(Debug, Clone, Serialize)]
pub struct OpReport {
    /// `get`, `list` or `index`.
    pub op: &'static str,
    /// Successful requests per second.
    pub per_sec: f64,
    /// Latency of successful requests.
    pub latency: Latency,
    /// Body bytes per second, MB (10^6).
    pub mb_per_sec: f64,
    /// Failed requests.
    pub errors: u64,
    /// The first few failures.
    pub first_errors: Vec<String>,
}

/// The watchers' results together.
#[derive(Debug, Clone, Serialize)]
pub struct WatchReport {
    /// Watchers.
    pub watchers: usize,
    /// Events received by all watchers.
    pub deliveries: u64,
    /// Deliveries per second of load.
    pub deliveries_per_sec: f64,
    /// Watch bytes per second, MB (10^6).
    pub mb_per_sec: f64,
    /// From a write's acknowledgement by the API server to a watcher's
    /// receipt of its event (writes made by this run only).
    pub lag: Latency,
    /// Events of the API server's history checked (up to the cut-off).
    pub reference_events: usize,
    /// Events a watcher should have received by the end of the run (its
    /// settle time included) and had not, all watchers together: dropped,
    /// or still behind (a failed watcher misses those after its failure).
    pub lost: u64,
    /// Watchers by the protocol their watch was answered in
    /// (`HTTP/1.1`, `HTTP/2.0`).
    pub protocols: BTreeMap<String, usize>,
    /// Times the reference watch was resumed after the API server cut or
    /// failed it (upstream faults).
    pub reference_resumes: u64,
    /// Times a watcher lost its server (or could not reach one) and tried
    /// the next, all watchers together (only with several servers).
    pub failovers: u64,
    /// Times a watcher's watch was ended by its server and opened again
    /// from its last resourceVersion, all watchers together.
    pub resumes: u64,
    /// Times a watcher's opening again was answered 429 and tried again
    /// after its `Retry-After`, all watchers together.
    pub throttled: u64,
    /// The sharded watchers beside the unsharded ones (with shards).
    pub sharding: Option<ShardingReport>,
    /// Whether every watcher got exactly its events, in order (and the
    /// shards together the whole history, each object in one shard).
    pub complete: bool,
    /// What went wrong, watcher by watcher (the first 20).
    pub failures: Vec<String>,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The scenario run.
    pub scenario: Scenario,
    /// Seconds of load.
    pub seconds: f64,
    /// Per request kind (kinds with no requests left out).
    pub requests: Vec<OpReport>,
    /// Writes made to the API server (acknowledged).
    pub writes: u64,
    /// Writes due in the run (its duration x `writesPerSec`).
    pub writes_offered: u64,
    /// From when each write was due to its acknowledgement.
    pub write_latency: Latency,
    /// The watchers.
    pub watch: Option<WatchReport>,
}

impl Report {
    pub(super) fn new(
        scenario: &Scenario,
        load_time: Duration,
        requests: Vec<OpStats>,
        written: Written,
        watch: Option<WatchReport>,
    ) -> Self {
        let seconds = load_time.as_secs_f64();
        let requests = requests
            .into_iter()
            .filter(|s| !s.latencies_us.is_empty() || s.errors > 0)
            .map(|s| s.report(seconds))
            .collect();
        Report {
            scenario: scenario.clone(),
            seconds,
            requests,
            writes: written.done,
            writes_offered: written.offered,
            write_latency: written.latency,
            watch,
        }
    }

    /// Whether the run passed: no failed request, every event delivered.
    pub fn ok(&self) -> bool {
        self.requests.iter().all(|r| r.errors == 0)
            && self.watch.as_ref().is_none_or(|w| w.complete)
    }
}

/// Checks every watcher against the reference history up to `cutoff`
/// and measures delivery.
pub(super) fn watch_report(
    scenario: &Scenario,
    seconds: f64,
    writes: &Writes,
    reference: &[ReferenceEvent],
    reference_resumes: u64,
    cutoff: u64,
    watchers: Vec<WatchResult>,
) -> WatchReport {
    let checked: Vec<&ReferenceEvent> = reference.iter().filter(|e| e.rv <= cutoff).collect();
    let mut failures = Vec::new();
    let mut lags = Vec::new();
    let (mut deliveries, mut bytes, mut lost) = (0u64, 0u64, 0u64);
    let (mut failovers, mut resumes, mut throttled) = (0u64, 0u64, 0u64);
    let mut protocols = BTreeMap::new();
    for (i, watcher) in watchers.iter().enumerate() {
        deliveries += watcher.events.len() as u64;
        bytes += watcher.bytes;
        failovers += watcher.failovers;
        resumes += watcher.resumes;
        throttled += watcher.throttled;
        if let Some(version) = watcher.version {
            *protocols.entry(format!("{version:?}")).or_default() += 1;
        }
        for (rv, received) in &watcher.events {
            if let Some(acked) = writes.acked(*rv) {
                lags.push(received.saturating_duration_since(acked).as_micros() as u64);
            }
        }
        let expected: Vec<u64> = checked
            .iter()
            .filter(|e| e.selected_by(&watcher.filter))
            .map(|e| e.rv)
            .collect();
        let received: Vec<u64> = watcher
            .events
            .iter()
            .map(|(rv, _)| *rv)
            .filter(|rv| *rv <= cutoff)
            .collect();
        if received != expected {
            let got: HashSet<u64> = received.iter().copied().collect();
            lost += expected.iter().filter(|rv| !got.contains(rv)).count() as u64;
        }
        if let Some(failure) = &watcher.failure {
            failures.push(format!("watcher {i} ({:?}): {failure}", watcher.filter));
        } else if received != expected {
            failures.push(format!(
                "watcher {i} ({:?}): {}",
                watcher.filter,
                difference(&expected, &received)
            ));
        }
    }
    let sharding = shards::check(
        scenario.shard_by,
        &checked,
        cutoff,
        &watchers,
        &mut failures,
    );
    let complete = failures.is_empty();
    failures.truncate(20);
    WatchReport {
        watchers: watchers.len(),
        deliveries,
        deliveries_per_sec: deliveries as f64 / seconds,
        mb_per_sec: bytes as f64 / seconds / 1e6,
        lag: Latency::of(&mut lags),
        reference_events: checked.len(),
        lost,
        protocols,
        reference_resumes,
        failovers,
        resumes,
        throttled,
        sharding,
        complete,
        failures,
    }
}

/// Says how `received` differs from `expected`: the first divergence.
fn difference(expected: &[u64], received: &[u64]) -> String {
    let at = expected
        .iter()
        .zip(received)
        .position(|(e, r)| e != r)
        .unwrap_or(expected.len().min(received.len()));
    format!(
        "expected {} events, received {}; first difference at #{at}: expected {:?}, received {:?}",
        expected.len(),
        received.len(),
        expected.get(at),
        received.get(at)
    )
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "load: {:.1} s, {} of {} writes offered done by the API server, write p50 {:.1} ms p99 {:.1} ms",
            self.seconds,
            self.writes,
            self.writes_offered,
            self.write_latency.p50_ms,
            self.write_latency.p99_ms
        )?;
        writeln!(
            f,
            "{:<8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}",
            "op", "req/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "MB/s", "errors"
        )?;
        for r in &self.requests {
            let l = &r.latency;
            writeln!(
                f,
                "{:<8} {:>10.0} {:>9.3} {:>9.3} {:>9.3} {:>9.1} {:>9.1} {:>7}",
                r.op, r.per_sec, l.p50_ms, l.p90_ms, l.p99_ms, l.max_ms, r.mb_per_sec, r.errors
            )?;
            for e in &r.first_errors {
                writeln!(f, "  error: {e}")?;
            }
        }
        if let Some(w) = &self.watch {
            writeln!(
                f,
                "watch: {} watchers, {} deliveries ({:.0}/s, {:.1} MB/s), lag p50 {:.1} ms p99 {:.1} ms max {:.1} ms",
                w.watchers,
                w.deliveries,
                w.deliveries_per_sec,
                w.mb_per_sec,
                w.lag.p50_ms,
                w.lag.p99_ms,
                w.lag.max_ms
            )?;
            writeln!(
                f,
                "completeness: {} ({} reference events checked, {} lost, {} failovers, {} resumes, \
                 {} throttled)",
                if w.complete {
                    "every watcher got every matching event, in order"
                } else {
                    "FAILED"
                },
                w.reference_events,
                w.lost,
                w.failovers,
                w.resumes,
                w.throttled
            )?;
            for failure in &w.failures {
                writeln!(f, "  {failure}")?;
            }
            if let Some(sharding) = &w.sharding {
                write!(f, "{sharding}")?;
            }
        }
        Ok(())
    }
}

/// Prints progress to stderr every second until aborted.
pub(super) async fn progress(ctx: Arc<RunContext>, started: Instant, deadline: Instant) {
    let total = deadline.saturating_duration_since(started).as_secs_f64();
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let elapsed = started.elapsed().as_secs_f64().min(total);
        let done = (elapsed / total * 30.0) as usize;
        eprint!(
            "\r[{}{}] {:>4.0}/{:.0} s  requests {:>9}  deliveries {:>10}",
            "#".repeat(done),
            " ".repeat(30 - done.min(30)),
            elapsed,
            total,
            ctx.requests.load(Ordering::Relaxed),
            ctx.deliveries.load(Ordering::Relaxed)
        );
    }
}
