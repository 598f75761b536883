//! Sharded watch fan-out (KEP-5866's `shardSelector`, issue 33): 1,000
//! watchers in 10 shards of the uid's hash space (100 replicas per shard)
//! against 1,000 unsharded watchers that get every event and filter on
//! their side, in one process, through kubecache's real router and watch
//! streams (no sockets).
//!
//! Each side has its own store of the same 1,000 realistic pods and gets
//! the same status updates, in batches of 200, the sides taking turns so
//! that the machine's noise falls on both. Per side: the bytes kubecache
//! sends; its CPU per event (the process's CPU time while a batch is fanned
//! out, over the events: the watchers here only count frames); and one
//! replica's receive cost: its bytes, and decoding its events as kube-rs
//! does (typed `Pod`s) and keeping those of shard 0. Every watcher must get
//! exactly its shard's events. Prints a markdown table.
//!
//! `cargo bench -p kubecache-benches --bench shard_fanout`

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use k8s_openapi::api::core::v1::Pod;
use kube::core::WatchEvent;
use kubecache_benches::fixtures::{ClusterShape, cached_pods, status_update_batch, stored_pods};
use kubecache_benches::procstat::cpu_seconds;
use kubecache_reflector::Change;
use kubecache_wire::{CachedObject, ShardField, ShardSelector};
use tokio::runtime::Runtime;
use tokio::sync::Notify;

const WATCHERS: usize = 1_000;
const SHARDS: usize = 10;
const PODS: usize = 1_000;
/// Events applied per batch.
const BATCH: u64 = 200;
/// Batches per side (the CPU clock ticks every 10 ms: enough for 1%).
const ROUNDS: usize = 30;

/// What one watcher received.
#[derive(Default)]
struct Received {
    frames: AtomicU64,
    bytes: AtomicU64,
}

/// What a side's watchers received, in bytes.
struct Totals {
    all: u64,
    /// Frames, all watchers together.
    deliveries: u64,
    /// Per watcher.
    mean: u64,
    largest: u64,
    /// Watcher 0's bytes and events.
    replica: u64,
    replica_events: u64,
}

/// One side of the comparison: a store, its watchers and what they cost.
struct Side {
    name: &'static str,
    served: common::Served,
    /// The pod updated last, for the next batch.
    next: usize,
    /// Each watcher's shard selector (`None`: unsharded).
    selectors: Vec<Option<ShardSelector>>,
    received: Vec<Arc<Received>>,
    /// Frames each watcher must have received by now.
    expected: Vec<u64>,
    /// Frames all watchers received, and a wake on each.
    total: Arc<AtomicU64>,
    progress: Arc<Notify>,
    /// Every frame of watcher 0, the replica whose receive cost is measured.
    recorded: Arc<Mutex<Vec<Bytes>>>,
    events: u64,
    cpu_seconds: f64,
    fanout: Duration,
}

impl Side {
    /// A store of `pods` and one watcher from now per selector.
    fn open(
        runtime: &Runtime,
        name: &'static str,
        pods: &[Arc<CachedObject>],
        selectors: Vec<Option<ShardSelector>>,
    ) -> Self {
        let served = common::serve(pods, 4 * BATCH as usize);
        let received: Vec<Arc<Received>> = selectors.iter().map(|_| Arc::default()).collect();
        let (total, progress) = (Arc::new(AtomicU64::new(0)), Arc::new(Notify::new()));
        let recorded = Arc::new(Mutex::new(Vec::new()));
        runtime.block_on(async {
            for (i, (selector, counts)) in selectors.iter().zip(&received).enumerate() {
                let mut path = format!(
                    "/api/v1/pods?watch=1&resourceVersion={}",
                    served.resource_version
                );
                if let Some(selector) = selector {
                    let encoded: String =
                        form_urlencoded::byte_serialize(selector.to_string().as_bytes()).collect();
                    path.push_str(&format!("&shardSelector={encoded}"));
                }
                let (counts, total, progress) = (counts.clone(), total.clone(), progress.clone());
                let recorded = (i == 0).then(|| recorded.clone());
                // One frame is one watch line (see the server's `WatchBody`).
                common::watch(&served.router, &path, move |data| {
                    counts.bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
                    counts.frames.fetch_add(1, Ordering::Relaxed);
                    if let Some(recorded) = &recorded {
                        recorded.lock().unwrap().push(data);
                    }
                    total.fetch_add(1, Ordering::Relaxed);
                    progress.notify_one();
                })
                .await;
            }
        });
        Side {
            name,
            served,
            next: 0,
            expected: vec![0; selectors.len()],
            selectors,
            received,
            total,
            progress,
            recorded,
            events: 0,
            cpu_seconds: 0.0,
            fanout: Duration::ZERO,
        }
    }

    /// Applies one batch and waits until every watcher has its events:
    /// the process's CPU time and the wall time meanwhile are the fan-out's.
    fn batch(&mut self, runtime: &Runtime, pods: &[Arc<CachedObject>]) {
        let mut rv = self.served.resource_version;
        let updates = status_update_batch(pods, &mut self.next, &mut rv, BATCH);
        self.served.resource_version = rv;
        for update in &updates {
            for (selector, expected) in self.selectors.iter().zip(&mut self.expected) {
                let uid = &update.uid;
                if selector
                    .as_ref()
                    .is_none_or(|s| s.matches(uid, update.key.namespace()))
                {
                    *expected += 1;
                }
            }
        }
        let target: u64 = self.expected.iter().sum();
        let cpu = cpu_seconds().unwrap();
        let started = Instant::now();
        for update in updates {
            self.served.writer.apply(Change::Upsert(update));
        }
        runtime.block_on(async {
            while self.total.load(Ordering::Relaxed) < target {
                let _ =
                    tokio::time::timeout(Duration::from_millis(5), self.progress.notified()).await;
            }
        });
        self.fanout += started.elapsed();
        self.cpu_seconds += cpu_seconds().unwrap() - cpu;
        self.events += BATCH;
    }

    /// Checks that every watcher got exactly its events.
    fn check(&self) {
        for (i, (received, expected)) in self.received.iter().zip(&self.expected).enumerate() {
            let frames = received.frames.load(Ordering::Relaxed);
            assert_eq!(frames, *expected, "{}: watcher {i}", self.name);
        }
    }

    /// The bytes its watchers received.
    fn totals(&self) -> Totals {
        let bytes: Vec<u64> = self
            .received
            .iter()
            .map(|r| r.bytes.load(Ordering::Relaxed))
            .collect();
        let all: u64 = bytes.iter().sum();
        Totals {
            all,
            deliveries: self.expected.iter().sum(),
            mean: all / bytes.len() as u64,
            largest: bytes.iter().copied().max().unwrap_or(0),
            replica: bytes[0],
            replica_events: self.received[0].frames.load(Ordering::Relaxed),
        }
    }

    /// Watcher 0's receive: decodes every event it got as kube-rs does and
    /// keeps those in `shard`; the uids kept and the time it took.
    fn receive(&self, shard: &ShardSelector) -> (Vec<String>, Duration) {
        let frames = self.recorded.lock().unwrap();
        let started = Instant::now();
        let mut kept = Vec::new();
        for frame in frames.iter() {
            let event: WatchEvent<Pod> = serde_json::from_slice(frame).expect("a watch event");
            let WatchEvent::Modified(pod) = event else {
                panic!("{}: a status update is MODIFIED", self.name)
            };
            let meta = pod.metadata;
            let uid = meta.uid.unwrap_or_default();
            if shard.matches(&uid, meta.namespace.as_deref().unwrap_or_default()) {
                kept.push(uid);
            }
        }
        (kept, started.elapsed())
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let _guard = runtime.enter();
    let pods = cached_pods(&stored_pods(ClusterShape::pods(PODS)));
    let shards = ShardSelector::equal_split(ShardField::Uid, SHARDS);
    let sharded = (0..WATCHERS).map(|i| Some(shards[i % SHARDS].clone()));
    let mut sides = [
        Side::open(&runtime, "unsharded", &pods, vec![None; WATCHERS]),
        Side::open(&runtime, "sharded", &pods, sharded.collect()),
    ];
    for _ in 0..ROUNDS {
        for side in &mut sides {
            side.batch(&runtime, &pods);
        }
    }
    for side in &sides {
        side.check();
    }
    let [unsharded, sharded] = &sides;
    let (kept, filtered) = unsharded.receive(&shards[0]);
    let (got, decoded) = sharded.receive(&shards[0]);
    assert_eq!(
        kept, got,
        "the replica of shard 0 keeps the same pods either way"
    );
    report(unsharded, sharded, [filtered, decoded]);
}

/// The markdown table, both sides and their ratio.
fn report(unsharded: &Side, sharded: &Side, receive: [Duration; 2]) {
    let sides = [unsharded, sharded];
    let [u, s] = sides.map(Side::totals);
    let cpu = sides.map(|side| side.cpu_seconds * 1e6 / side.events as f64);
    let deliveries = [&u, &s].map(|t| t.deliveries as f64 / unsharded.events as f64);
    let wall = sides.map(|side| side.fanout.as_secs_f64() * 1e6 / side.events as f64);
    let receive = receive.map(|d| d.as_secs_f64() * 1e3);
    let mb = |bytes: u64| bytes as f64 / 1e6;
    // (what, unsharded, sharded, decimals)
    let rows = [
        ("bytes sent, all watchers (MB)", mb(u.all), mb(s.all), 0),
        ("bytes per replica, mean (MB)", mb(u.mean), mb(s.mean), 2),
        (
            "bytes per replica, largest shard (MB)",
            mb(u.largest),
            mb(s.largest),
            2,
        ),
        (
            "kubecache CPU per event (µs: process CPU / events)",
            cpu[0],
            cpu[1],
            0,
        ),
        (
            "kubecache CPU per delivery (µs)",
            cpu[0] / deliveries[0],
            cpu[1] / deliveries[1],
            2,
        ),
        ("fan-out wall time per event (µs)", wall[0], wall[1], 0),
        (
            "replica of shard 0: events received",
            u.replica_events as f64,
            s.replica_events as f64,
            0,
        ),
        (
            "replica of shard 0: bytes received (MB)",
            mb(u.replica),
            mb(s.replica),
            2,
        ),
        (
            "replica of shard 0: decode (typed Pod) and filter (ms, one thread)",
            receive[0],
            receive[1],
            1,
        ),
    ];
    println!(
        "{WATCHERS} watchers per side, {SHARDS} shards of the uid; {} events of {PODS} pods \
         per side ({ROUNDS} batches of {BATCH}, the sides in turn)\n",
        unsharded.events
    );
    println!(
        "| | unsharded, client-side filter | sharded, `shardSelector` | sharded / unsharded |"
    );
    println!("|---|--:|--:|--:|");
    for (what, a, b, decimals) in rows {
        println!(
            "| {what} | {a:.decimals$} | {b:.decimals$} | {:.3} |",
            b / a
        );
    }
    let goal = |met: bool| if met { "met" } else { "missed" };
    println!(
        "\nGoals: bytes per replica <= 1/{SHARDS} of unsharded (mean): {}; \
         kubecache CPU per event no higher than unsharded: {}",
        goal(s.mean * SHARDS as u64 <= u.mean),
        goal(cpu[1] <= cpu[0])
    );
}
