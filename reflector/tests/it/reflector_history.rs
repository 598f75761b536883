//! Property: whatever the interleaving of writes and list page boundaries,
//! the history the reflector applies is the API server's history.
//!
//! Each case is drawn from a seed: a strategy (list-watch, parallel,
//! streaming), a wire format (JSON, protobuf), a small page size (so page boundaries fall between writes),
//! a page latency of a few milliseconds, a few hundred tiny pods, and a
//! writer that creates, relabels, changes the spec of, annotates, deletes and
//! recreates (same name, new uid) pods at random small intervals from the
//! moment the reflector starts until some writes after the store is ready.
//! In a quarter of the cases every open watch is also cut once, at one of
//! the first 80 writes (mostly while listing), so the history must also
//! survive a resumed watch or a retried list. Then:
//!
//! 1. once the writer stops and the cache reaches the sim's revision, the
//!    cache holds exactly the sim's pods (key, resourceVersion, JSON minus
//!    managedFields);
//! 2. the store's event log, followed from the snapshot taken at readiness,
//!    is the sim's own pod history after that snapshot: the same sequence of
//!    (type, key, resourceVersion), each with the server's JSON; this is
//!    exact because no relist happened (`lists == 1`, checked);
//! 3. the log's resourceVersions strictly increase and each event's position
//!    is its object's resourceVersion.
//!
//! The seed fixes everything but the timing (a real HTTP server on
//! 127.0.0.1, real time), so a failure names its seed and replays with
//! `REFLECTOR_HISTORY_SEED=<seed>`; `REFLECTOR_HISTORY_CASES=<n>` runs seeds
//! `0..n` instead of the default [`CASES`].

use crate::common;
use common::start;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kubecache_loadtest::sim::{Sim, SimConfig, Store, ids};
use kubecache_reflector::upstream::RequestEncoding;
use kubecache_reflector::{ReflectorStatus, Strategy};
use kubecache_reflector::{StoreReader, TryRecvError};
use kubecache_wire::ChangeType;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

/// Seeds run by default: enough interleavings of every strategy to mean
/// something, few enough that the file runs in seconds in the dev profile.
const CASES: u64 = 48;

/// Runs this one seed.
const SEED_ENV: &str = "REFLECTOR_HISTORY_SEED";

/// Runs seeds `0..n`.
const CASES_ENV: &str = "REFLECTOR_HISTORY_CASES";

/// Mixed into the seed for the writer's random stream, so that it is not the
/// stream the case was drawn from.
const WRITER_STREAM: u64 = 0x5eed_0f0b_5e5e;

/// Every case lives in this namespace, which the sim always has.
const NAMESPACE: &str = "default";

/// Bounds every wait of a case: far above what a case takes, so hitting it
/// means a hang, not a slow machine.
const PATIENCE: Duration = Duration::from_secs(30);

/// What one seed draws.
#[derive(Debug, Clone)]
struct Case {
    seed: u64,
    strategy: Strategy,
    wire: RequestEncoding,
    page_size: usize,
    page_latency: Duration,
    pods: usize,
    /// Chance that the writer writes again at once (a burst); otherwise it
    /// sleeps 1 to `max_gap_ms` milliseconds (timers tick in milliseconds).
    burst: f64,
    max_gap_ms: u64,
    /// Writes after the store is ready, before the writer stops.
    writes_after_ready: usize,
    /// Cut every open watch (`Sim::cut_watches`) right after this many
    /// writes.
    cut_after: Option<usize>,
}

impl Case {
    fn draw(seed: u64) -> Case {
        let mut rng = SmallRng::seed_from_u64(seed);
        let strategy =
            [Strategy::ListWatch, Strategy::Parallel, Strategy::Streaming][(seed % 3) as usize];
        // Every pairing of strategy and wire format, six seeds apart.
        let wire = [RequestEncoding::Json, RequestEncoding::Protobuf][(seed / 3 % 2) as usize];
        Case {
            seed,
            strategy,
            wire,
            page_size: rng.random_range(3..=40),
            page_latency: Duration::from_millis(rng.random_range(1..=5)),
            pods: rng.random_range(150..=400),
            burst: rng.random_range(0.1..0.6),
            max_gap_ms: rng.random_range(1..=4),
            writes_after_ready: rng.random_range(20..=120),
            cut_after: rng.random_bool(0.25).then(|| rng.random_range(1..=80)),
        }
    }
}

/// What a passing case saw, to check that the cases test what they claim.
#[derive(Debug)]
struct Outcome {
    /// The reflector's status at the end.
    status: ReflectorStatus,
    /// The snapshot's resourceVersion at readiness.
    ready_at: u64,
    /// Sim revision when the writer stopped.
    end: u64,
    /// Writes while the reflector listed (before the store was ready).
    writes_before_ready: usize,
    /// Events compared.
    events: usize,
    /// Deletions and recreations among the writes.
    deletes: usize,
    recreates: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_applied_history_equals_the_servers_under_random_writes_and_page_boundaries() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let seeds: Vec<u64> = match std::env::var(SEED_ENV) {
        Ok(seed) => vec![seed.parse().expect("REFLECTOR_HISTORY_SEED is a number")],
        Err(_) => {
            let n = std::env::var(CASES_ENV).map_or(CASES, |n| {
                n.parse().expect("REFLECTOR_HISTORY_CASES is a number")
            });
            (0..n).collect()
        }
    };
    let started = Instant::now();
    let mut failures = String::new();
    // Paged cases (list-watch, parallel), and those that wrote while listing.
    let (mut paged, mut written_while_listing) = (0, 0);
    let (mut written_after_ready, mut recreated) = (0, 0);
    let (mut events, mut deletes, mut recreates, mut broken) = (0, 0, 0, 0);
    for &seed in &seeds {
        let case = Case::draw(seed);
        // A task of its own, so that a panic inside a case still names its seed.
        let outcome = tokio::spawn(run(case.clone())).await;
        match outcome {
            Ok(Ok(o)) => {
                if case.strategy != Strategy::Streaming {
                    paged += 1;
                    written_while_listing += usize::from(o.writes_before_ready > 0);
                }
                written_after_ready += usize::from(o.end > o.ready_at);
                recreated += usize::from(o.recreates > 0);
                (events, deletes, recreates, broken) = (
                    events + o.events,
                    deletes + o.deletes,
                    recreates + o.recreates,
                    broken + o.status.failures,
                );
                tracing::info!(?case, ?o, "passed");
            }
            Ok(Err(why)) => writeln!(failures, "seed {seed} ({case:?}): {why}").unwrap(),
            Err(panic) => writeln!(failures, "seed {seed} ({case:?}): panicked: {panic}").unwrap(),
        }
    }
    eprintln!(
        "{} cases in {:.1?}: {written_while_listing} of {paged} paged lists with writes \
         while listing, {written_after_ready} with writes after, {recreated} with recreations; \
         {events} events compared, {deletes} deletes, {recreates} recreations, \
         {broken} broken streams survived",
        seeds.len(),
        started.elapsed()
    );
    assert!(
        failures.is_empty(),
        "failing cases (replay one with {SEED_ENV}=<seed>):\n{failures}"
    );
    if seeds.len() >= 10 {
        // The property is only worth something if the interleavings happen.
        // A streaming list is sent at once, so only paged lists count here.
        let most = |of: usize| of * 3 / 4;
        assert!(
            written_while_listing >= most(paged)
                && written_after_ready >= most(seeds.len())
                && recreated >= most(seeds.len()),
            "too few cases interleave writes with the list: {written_while_listing} of {paged} \
             paged lists wrote while listing, {written_after_ready} cases after, \
             {recreated} recreated a pod"
        );
    }
}

/// Fails the case with a message (the caller adds the seed).
macro_rules! check {
    ($cond:expr, $($why:tt)+) => {
        if !$cond {
            return Err(format!($($why)+));
        }
    };
}

async fn run(case: Case) -> Result<Outcome, String> {
    let (url, sim) = Sim::start(SimConfig {
        seed: case.seed,
        page_latency: case.page_latency,
        ..SimConfig::default()
    })
    .await
    .map_err(|e| format!("sim: {e}"))?;
    let mut rng = SmallRng::seed_from_u64(case.seed ^ WRITER_STREAM);
    let mut writer = Writer::default();
    for _ in 0..case.pods {
        writer.create(sim.store(), &mut rng, false)?;
    }

    let running = start(&url, case.strategy, case.wire, case.page_size);
    let sim = Arc::new(sim);
    let mut write = {
        let sim = sim.clone();
        let ready = running.reader.clone();
        let case = case.clone();
        tokio::spawn(async move { writer.run(&sim, &ready, &case, rng).await })
    };
    let ready = tokio::time::timeout(PATIENCE, running.reader.ready()).await;
    if !matches!(ready, Ok(Ok(()))) {
        write.abort();
        return Err(format!(
            "not ready within {PATIENCE:?}: {:?}",
            running.status.borrow()
        ));
    }
    let snapshot = running.reader.snapshot();
    let ready_at = snapshot.resource_version();
    let mut events = running
        .reader
        .subscribe_from(ready_at)
        .map_err(|e| format!("subscribe from the ready snapshot at {ready_at}: {e}"))?;

    let Ok(writes) = tokio::time::timeout(PATIENCE, &mut write).await else {
        write.abort();
        return Err("the writer did not finish".into());
    };
    let writes = writes.map_err(|e| format!("the writer panicked: {e}"))??;
    let end = sim.store().revision();
    running
        .reader
        .wait_for(end, PATIENCE)
        .await
        .map_err(|e| format!("the cache never reaches the sim: {e}"))?;

    // (1) The cache is the sim's state.
    let (want, got) = (expected(&sim), cached(&running.reader));
    check!(
        got.len() == want.len(),
        "{} pods cached, the sim has {}",
        got.len(),
        want.len()
    );
    for (key, (rv, json)) in &want {
        let Some((got_rv, got_json)) = got.get(key) else {
            return Err(format!("{key} is not cached"));
        };
        check!(
            got_rv == rv,
            "{key}: cached at resourceVersion {got_rv}, the sim has {rv}"
        );
        check!(
            got_json == json,
            "{key}: cached JSON {got_json} differs from the sim's {json}"
        );
    }

    // (2) No relist: the log after the ready snapshot is exact history.
    let status: ReflectorStatus = running.status.borrow().clone();
    check!(
        status.lists == 1,
        "the reflector listed {} times: {status:?}",
        status.lists
    );

    // (2) and (3): the log is the sim's history, in strictly increasing order.
    let mut log = Vec::new();
    loop {
        match events.try_recv() {
            Ok(event) => log.push(event),
            Err(TryRecvError::Empty) => break,
            Err(e) => return Err(format!("reading the event log: {e}")),
        }
    }
    let (history, _) = sim
        .store()
        .events_after(ids::PODS, ready_at, usize::MAX)
        .map_err(|e| format!("the sim's history after {ready_at}: {e:?}"))?;
    let mut last = ready_at;
    for (i, event) in log.iter().enumerate() {
        let rv = event.object.resource_version;
        check!(
            event.resource_version == rv,
            "event {i} ({:?} {}) is positioned at {} but its object is at {rv}",
            event.kind,
            event.object.key,
            event.resource_version
        );
        check!(
            rv > last,
            "event {i} ({:?} {}) at {rv} follows {last}: not strictly increasing",
            event.kind,
            event.object.key
        );
        last = rv;
    }
    let applied: Vec<(&str, &str, u64)> = log
        .iter()
        .map(|e| {
            let kind = match e.kind {
                ChangeType::Added => "ADDED",
                ChangeType::Modified => "MODIFIED",
                ChangeType::Deleted => "DELETED",
            };
            (kind, e.object.key.as_str(), e.object.resource_version)
        })
        .collect();
    let served: Vec<(&str, &str, u64)> = history
        .iter()
        .map(|e| (e.kind.as_str(), e.object.key.as_str(), e.revision()))
        .collect();
    if let Some(i) = (0..applied.len().max(served.len())).find(|&i| applied.get(i) != served.get(i))
    {
        let around =
            |v: &[(&str, &str, u64)]| format!("{:?}", &v[i.saturating_sub(2)..v.len().min(i + 3)]);
        return Err(format!(
            "the applied history ({} events) leaves the sim's ({} events after {ready_at}) \
             at event {i}: applied {}, sim {}",
            applied.len(),
            served.len(),
            around(&applied),
            around(&served)
        ));
    }
    for (event, original) in log.iter().zip(&history) {
        let json: Value = serde_json::from_slice(&event.object.json).expect("cached JSON parses");
        let want = without_managed_fields(&original.object.json());
        check!(
            json == want,
            "{} {} at {}: the event's JSON {json} differs from the sim's {want}",
            original.kind.as_str(),
            original.object.key,
            original.revision()
        );
    }
    drop(sim);
    Ok(Outcome {
        status,
        ready_at,
        end,
        writes_before_ready: writes.before_ready,
        events: log.len(),
        deletes: writes.deletes,
        recreates: writes.recreates,
    })
}

/// The only writer of a case's pods, so it knows which names are live.
#[derive(Debug, Default)]
struct Writer {
    live: Vec<String>,
    /// Deleted names, for recreations with the same name.
    dead: Vec<String>,
    /// Names and images are numbered from here.
    next: u64,
    deletes: usize,
    recreates: usize,
}

/// What the writer did.
#[derive(Debug)]
struct Writes {
    /// Writes made before the store was ready: while the reflector listed.
    before_ready: usize,
    deletes: usize,
    recreates: usize,
}

impl Writer {
    /// Writes until the store is ready, then `writes_after_ready` more, each
    /// after a random pause.
    async fn run(
        mut self,
        sim: &Sim,
        ready: &StoreReader,
        case: &Case,
        mut rng: SmallRng,
    ) -> Result<Writes, String> {
        let (mut before_ready, mut after_ready) = (0, 0);
        while after_ready < case.writes_after_ready {
            if ready.is_ready() {
                after_ready += 1;
            } else {
                before_ready += 1;
            }
            self.write_once(sim.store(), &mut rng)?;
            if case.cut_after == Some(before_ready + after_ready) {
                sim.cut_watches();
            }
            if rng.random_bool(case.burst) {
                tokio::task::yield_now().await;
            } else {
                let gap = rng.random_range(1..=case.max_gap_ms);
                tokio::time::sleep(Duration::from_millis(gap)).await;
            }
        }
        Ok(Writes {
            before_ready,
            deletes: self.deletes,
            recreates: self.recreates,
        })
    }

    fn write_once(&mut self, store: &Store, rng: &mut SmallRng) -> Result<(), String> {
        let roll: f64 = rng.random();
        if self.live.is_empty() || roll < 0.15 {
            return self.create(store, rng, true);
        }
        let i = rng.random_range(0..self.live.len());
        let name = self.live[i].clone();
        let failed = |what: &str, e: kubecache_wire::Status| {
            format!("{what} {name}: {} ({})", e.message, e.code)
        };
        if roll < 0.30 {
            store
                .delete(ids::PODS, NAMESPACE, &name)
                .map_err(|e| failed("delete", e))?;
            self.live.swap_remove(i);
            self.dead.push(name);
            self.deletes += 1;
        } else if roll < 0.60 {
            // A label change, or none: the same value again writes nothing.
            let patch = if rng.random_bool(0.2) {
                json!({"metadata": {"labels": {"tier": null}}})
            } else {
                json!({"metadata": {"labels": {"rev": rng.random_range(0..4).to_string()}}})
            };
            store
                .merge_patch(ids::PODS, NAMESPACE, &name, &patch)
                .map_err(|e| failed("label", e))?;
        } else if roll < 0.85 {
            // A spec change (new generation), as a full replace.
            let current = store
                .get(ids::PODS, &format!("{NAMESPACE}/{name}"))
                .ok_or_else(|| format!("{name} is live but the sim has no such pod"))?;
            let mut pod = current.to_value();
            self.next += 1;
            pod["spec"]["containers"][0]["image"] = json!(format!("img:{}", self.next));
            store
                .update(ids::PODS, pod)
                .map_err(|e| failed("update", e))?;
        } else {
            let patch = json!({"metadata": {"annotations": {"note": rng.random_range(0..1000).to_string()}}});
            store
                .merge_patch(ids::PODS, NAMESPACE, &name, &patch)
                .map_err(|e| failed("annotate", e))?;
        }
        Ok(())
    }

    /// Creates a pod: with `recreate`, half of the time under a name that
    /// was deleted (a new uid under an old key).
    fn create(&mut self, store: &Store, rng: &mut SmallRng, recreate: bool) -> Result<(), String> {
        let name = if recreate && !self.dead.is_empty() && rng.random_bool(0.5) {
            self.recreates += 1;
            let i = rng.random_range(0..self.dead.len());
            self.dead.swap_remove(i)
        } else {
            format!("pod-{:05}", self.next)
        };
        self.next += 1;
        let pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": NAMESPACE,
                "labels": {"app": "history", "tier": "web", "rev": "0"},
            },
            "spec": {"containers": [{"name": "main", "image": format!("img:{}", self.next)}]},
        });
        store
            .create(ids::PODS, pod)
            .map_err(|e| format!("create {name}: {} ({})", e.message, e.code))?;
        self.live.push(name);
        Ok(())
    }
}

fn without_managed_fields(json: &[u8]) -> Value {
    let mut json: Value = serde_json::from_slice(json).expect("sim JSON parses");
    json["metadata"]
        .as_object_mut()
        .expect("objects have metadata")
        .shift_remove("managedFields");
    json
}

/// The sim's pods as the cache should hold them: managedFields stripped.
fn expected(sim: &Sim) -> BTreeMap<String, (u64, Value)> {
    sim.state(ids::PODS)
        .iter()
        .map(|o| {
            (
                o.key.clone(),
                (o.revision, without_managed_fields(&o.json())),
            )
        })
        .collect()
}

fn cached(reader: &StoreReader) -> BTreeMap<String, (u64, Value)> {
    reader
        .snapshot()
        .range(None, None)
        .map(|o| {
            (
                o.key.to_string(),
                (o.resource_version, serde_json::from_slice(&o.json).unwrap()),
            )
        })
        .collect()
}
