//! `kubecache-loadtest fresh`: consistent reads (no resourceVersion)
//! through kubecache and against the API server it caches (the sim), same
//! run, side by side (issue 17):
//!
//! - GET of one pod, `--connections` closed-loop clients;
//! - list of all pods, `--list-connections` clients;
//! - the quiet resource: GET of one config map one at a time
//!   (`--paced-reads` of them, `--paced-gap-ms` apart, as a client reading
//!   now and then does), by one closed-loop client, then in bursts of
//!   `--burst` at once, while a writer patches pods on the sim at
//!   `--pod-writes-per-sec` (the global resourceVersion moves, config maps
//!   do not); latency from the read's arrival to its whole answer;
//! - read-your-writes: one client (a bearer token, which kubecache tells
//!   clients apart by) patches a config map, then GETs it; the read must
//!   carry the write's resourceVersion or a newer one (else it counts as
//!   an error);
//! - upstream cost: from the sim's counters (`/sim/counters`), the
//!   requests kubecache sent the sim for freshness during each of its
//!   phases and during `--idle-seconds` without reads.
//!
//! Every phase runs first through kubecache, then against the sim. No
//! pass/fail: the report is the table (the goals are issue 17's).

mod report;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use serde_json::{Value, json};
use tokio::time::Instant;

pub use report::{Compared, ReadYourWrites, Report, Samples, Summary, Upstream};

use crate::sim::Counts;

/// What to measure, and against whom.
#[derive(clap::Args, Debug, Clone)]
pub struct Fresh {
    /// kubecache's base URL (caching pods and configmaps of the sim).
    #[arg(long)]
    pub cache: String,
    /// The sim's base URL: the API server kubecache caches.
    #[arg(long)]
    pub sim: String,
    /// Seconds of each measured phase (each runs twice: kubecache, sim).
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Seconds without reads, to measure kubecache's idle upstream cost.
    #[arg(long, default_value_t = 10)]
    pub idle_seconds: u64,
    /// Clients of the GET load.
    #[arg(long, default_value_t = 32)]
    pub connections: usize,
    /// Clients of the list load.
    #[arg(long, default_value_t = 4)]
    pub list_connections: usize,
    /// Reads of the quiet resource sent one at a time, `--paced-gap-ms`
    /// apart.
    #[arg(long, default_value_t = 100)]
    pub paced_reads: usize,
    /// Milliseconds between one paced read's answer and the next read.
    #[arg(long, default_value_t = 300)]
    pub paced_gap_ms: u64,
    /// Reads of the quiet resource sent at once.
    #[arg(long, default_value_t = 50)]
    pub burst: usize,
    /// Pod writes per second on the sim during the quiet-resource and
    /// read-your-writes loads.
    #[arg(long, default_value_t = 100.0)]
    pub pod_writes_per_sec: f64,
    /// Bearer token of the read-your-writes client.
    #[arg(long, default_value = "fresh-benchmark")]
    pub token: String,
    /// Also write the report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Runs every phase; the report of all.
pub async fn fresh(args: Fresh) -> anyhow::Result<Report> {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.connections.max(args.burst) * 2)
        .timeout(Duration::from_secs(60))
        .build()?;
    let bench = Bench { args, client };
    let pods = bench.names("pods").await?;
    let configmap = bench
        .names("configmaps")
        .await?
        .into_iter()
        .next()
        .context("the sim has no config map: start it with --configmaps")?;
    let pod = pods.first().context("the sim has no pod")?.clone();
    let (secs, conns, lists, burst) = (
        bench.args.seconds,
        bench.args.connections,
        bench.args.list_connections,
        bench.args.burst,
    );
    let mut upstream = Vec::new();

    eprintln!("== idle for {} s", bench.args.idle_seconds);
    let before = bench.counters().await?;
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(bench.args.idle_seconds)).await;
    let after = bench.counters().await?;
    upstream.push(Upstream::between(
        "idle (no reads)",
        &before,
        &after,
        started.elapsed(),
    ));

    let mut reads = Vec::new();
    let get_pod = Load::Clients(pod.clone(), conns);
    reads.push(
        bench
            .compare(&format!("GET pod, {conns} conn"), &get_pod, &mut upstream)
            .await?,
    );
    let list = Load::Clients("/api/v1/pods".into(), lists);
    reads.push(
        bench
            .compare(&format!("list pods, {lists} conn"), &list, &mut upstream)
            .await?,
    );

    let writer = Writer::start(&bench, pods);
    let (n, gap) = (bench.args.paced_reads, bench.args.paced_gap_ms);
    let paced = Load::Paced(configmap.clone(), n, Duration::from_millis(gap));
    let name = format!("GET quiet config map, {n} one at a time {gap} ms apart");
    let mut quiet = vec![bench.compare(&name, &paced, &mut upstream).await?];
    let one = Load::Clients(configmap.clone(), 1);
    quiet.push(
        bench
            .compare("GET quiet config map, 1 client", &one, &mut upstream)
            .await?,
    );
    let many = Load::Bursts(configmap.clone(), burst);
    let name = format!("GET quiet config map, {burst} at once");
    quiet.push(bench.compare(&name, &many, &mut upstream).await?);

    let mut read_your_writes = Vec::new();
    for (target, url) in [("kubecache", &bench.args.cache), ("sim", &bench.args.sim)] {
        eprintln!("== read-your-writes, {target}");
        let before = bench.counters().await?;
        let started = Instant::now();
        let measured = bench.read_your_writes(url, &configmap, target).await;
        if target == "kubecache" {
            let after = bench.counters().await?;
            let phase = "read-your-writes";
            upstream.push(Upstream::between(phase, &before, &after, started.elapsed()));
        }
        read_your_writes.push(measured);
    }
    let pod_writes_per_sec = writer.stop().await;
    Ok(Report {
        seconds: secs as f64,
        pod_writes_per_sec,
        reads,
        quiet,
        read_your_writes,
        upstream,
    })
}

/// A read load.
enum Load {
    /// `GET path` by this many clients, each sending its next read when
    /// the last is answered.
    Clients(String, usize),
    /// `GET path` this many at once, again once all are answered.
    Bursts(String, usize),
    /// `GET path` this many times by one client, waiting this long after
    /// each answer (not bounded by the phase's length).
    Paced(String, usize, Duration),
}

struct Bench {
    args: Fresh,
    client: reqwest::Client,
}

impl Bench {
    /// Paths of up to 500 objects of a core resource, from the sim.
    async fn names(&self, plural: &str) -> anyhow::Result<Vec<String>> {
        let url = format!("{}/api/v1/{plural}?limit=500", self.args.sim);
        let list: Value = self.client.get(&url).send().await?.json().await?;
        let items = list["items"].as_array().context("a list")?;
        Ok(items
            .iter()
            .map(|item| {
                let meta = &item["metadata"];
                let (ns, name) = (&meta["namespace"], &meta["name"]);
                let (ns, name) = (ns.as_str().unwrap_or(""), name.as_str().unwrap_or(""));
                format!("/api/v1/namespaces/{ns}/{plural}/{name}")
            })
            .collect())
    }

    /// The sim's counters, one entry per resource.
    async fn counters(&self) -> anyhow::Result<Vec<Counts>> {
        let url = format!("{}/sim/counters", self.args.sim);
        let counters: BTreeMap<String, Counts> = self.client.get(&url).send().await?.json().await?;
        Ok(counters.into_values().collect())
    }

    /// `load` through kubecache (with its upstream cost), then against
    /// the sim.
    async fn compare(
        &self,
        name: &str,
        load: &Load,
        upstream: &mut Vec<Upstream>,
    ) -> anyhow::Result<Compared> {
        eprintln!("== {name}");
        let before = self.counters().await?;
        let started = Instant::now();
        let kubecache = self.measure(&self.args.cache, load).await;
        let after = self.counters().await?;
        upstream.push(Upstream::between(name, &before, &after, started.elapsed()));
        let sim = self.measure(&self.args.sim, load).await;
        Ok(Compared {
            load: name.to_string(),
            kubecache,
            sim,
        })
    }

    /// Runs `load` against `url` for the phase's length.
    async fn measure(&self, url: &str, load: &Load) -> Summary {
        let started = Instant::now();
        let deadline = started + Duration::from_secs(self.args.seconds);
        let mut samples = Samples::default();
        match load {
            Load::Clients(path, clients) => {
                let workers: Vec<_> = (0..*clients)
                    .map(|_| {
                        let (client, url) = (self.client.clone(), format!("{url}{path}"));
                        tokio::spawn(async move {
                            let mut samples = Samples::default();
                            while Instant::now() < deadline {
                                let (took, outcome) = timed_get(&client, &url).await;
                                samples.record(took, outcome);
                            }
                            samples
                        })
                    })
                    .collect();
                for worker in workers {
                    samples.merge(worker.await.unwrap_or_default());
                }
            }
            Load::Bursts(path, n) => {
                let url = format!("{url}{path}");
                while Instant::now() < deadline {
                    let burst = (0..*n).map(|_| timed_get(&self.client, &url));
                    for (took, outcome) in futures::future::join_all(burst).await {
                        samples.record(took, outcome);
                    }
                }
            }
            Load::Paced(path, n, gap) => {
                let url = format!("{url}{path}");
                for _ in 0..*n {
                    let (took, outcome) = timed_get(&self.client, &url).await;
                    samples.record(took, outcome);
                    tokio::time::sleep(*gap).await;
                }
            }
        }
        samples.summary(started.elapsed())
    }

    /// One client writes `configmap` through `url` and then reads it, for
    /// the phase's length.
    async fn read_your_writes(&self, url: &str, configmap: &str, target: &str) -> ReadYourWrites {
        let object = format!("{url}{configmap}");
        let deadline = Instant::now() + Duration::from_secs(self.args.seconds);
        let (mut write, mut write_then_read) = (Samples::default(), Samples::default());
        let mut n = 0u64;
        while Instant::now() < deadline {
            n += 1;
            let started = Instant::now();
            let patch = json!({"data": {"fresh-benchmark": n.to_string()}});
            let written = self
                .client
                .patch(&object)
                .bearer_auth(&self.args.token)
                .header("content-type", "application/merge-patch+json")
                .body(patch.to_string())
                .send()
                .await;
            let written = match answered_rv(written).await {
                Ok(rv) => rv,
                Err(e) => {
                    write.record(started.elapsed(), Err(e));
                    continue;
                }
            };
            write.record(started.elapsed(), Ok(()));
            let read = self
                .client
                .get(&object)
                .bearer_auth(&self.args.token)
                .send()
                .await;
            let outcome = answered_rv(read).await.and_then(|rv| {
                (rv >= written)
                    .then_some(())
                    .ok_or(format!("read {rv} after writing {written}"))
            });
            write_then_read.record(started.elapsed(), outcome);
        }
        let elapsed = Duration::from_secs(self.args.seconds);
        ReadYourWrites {
            target: target.to_string(),
            write: write.summary(elapsed),
            write_then_read: write_then_read.summary(elapsed),
        }
    }
}

/// A GET (no resourceVersion: a consistent read) and its whole body.
async fn timed_get(client: &reqwest::Client, url: &str) -> (Duration, Result<(), String>) {
    let started = Instant::now();
    let outcome = async {
        let response = client
            .get(url)
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        response.bytes().await.map_err(|e| e.to_string())?;
        status
            .is_success()
            .then_some(())
            .ok_or_else(|| format!("{status}"))
    }
    .await;
    (started.elapsed(), outcome)
}

/// The resourceVersion of the object in a 2xx answer.
async fn answered_rv(response: reqwest::Result<reqwest::Response>) -> Result<u64, String> {
    let response = response.map_err(|e| e.to_string())?;
    let status = response.status();
    let body = response.bytes().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("{status}: {}", String::from_utf8_lossy(&body)));
    }
    let object: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .ok_or_else(|| "an answer without resourceVersion".to_string())
}

/// Patches pods on the sim at a steady rate, so the global resourceVersion
/// moves without touching config maps.
struct Writer {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
    written: Arc<AtomicU64>,
    started: Instant,
}

impl Writer {
    /// Writes at most this many at once (a write the sim answers slowly
    /// does not hold the next back).
    const IN_FLIGHT: usize = 16;

    fn start(bench: &Bench, pods: Vec<String>) -> Self {
        let (stop, written) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU64::new(0)),
        );
        let (client, sim) = (bench.client.clone(), bench.args.sim.clone());
        let per_sec = bench.args.pod_writes_per_sec;
        let task = tokio::spawn({
            let (stop, written) = (stop.clone(), written.clone());
            async move {
                const TICK: Duration = Duration::from_millis(10);
                let slots = Arc::new(tokio::sync::Semaphore::new(Self::IN_FLIGHT));
                let mut tick = tokio::time::interval(TICK);
                let (mut owed, mut n) = (0.0, 0usize);
                while !stop.load(Ordering::Relaxed) && !pods.is_empty() {
                    tick.tick().await;
                    owed += per_sec * TICK.as_secs_f64();
                    while owed >= 1.0 {
                        owed -= 1.0;
                        n += 1;
                        let Ok(slot) = slots.clone().acquire_owned().await else {
                            return;
                        };
                        let url = format!("{sim}{}", pods[n % pods.len()]);
                        let patch = json!({"metadata": {"annotations": {"fresh-benchmark": n.to_string()}}});
                        let (client, written) = (client.clone(), written.clone());
                        tokio::spawn(async move {
                            let sent = client
                                .patch(&url)
                                .header("content-type", "application/merge-patch+json")
                                .body(patch.to_string())
                                .send()
                                .await;
                            if sent.is_ok_and(|r| r.status().is_success()) {
                                written.fetch_add(1, Ordering::Relaxed);
                            }
                            drop(slot);
                        });
                    }
                }
            }
        });
        Writer {
            stop,
            task,
            written,
            started: Instant::now(),
        }
    }

    /// Stops writing; the writes per second made.
    async fn stop(self) -> f64 {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        self.written.load(Ordering::Relaxed) as f64 / self.started.elapsed().as_secs_f64()
    }
}
