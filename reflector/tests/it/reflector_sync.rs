//! The reflector against the simulated API server on 127.0.0.1: it converges
//! to the server's exact state with every strategy, survives lists longer
//! than the watch cache, and recovers from every upstream fault without a
//! gap or a reordering in its event log. Every scenario runs over JSON and
//! over protobuf (`<scenario>::over_json`, `<scenario>::over_protobuf`).

use crate::common;
use common::{Running, start};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kubecache_loadtest::sim::{Fault, FaultSpec, FaultTarget, HistoryWindow, Sim, SimConfig, ids};
use kubecache_reflector::upstream::{ApiResource, RequestEncoding, ResourceSpec, Upstream};
use kubecache_reflector::{Reflector, ReflectorConfig, ReflectorStatus, Strategy};
use kubecache_reflector::{StoreConfig, StoreReader, Subscription, store};
use kubecache_testkit::real_apiserver::{self, RealApiServer};
use kubecache_testkit::wait::PATIENCE;
use kubecache_wire::ChangeType;
use kubecache_wire::protobuf::KubeVersion;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;

/// Defines a scenario (an async fn of the wire format) run once per wire
/// format, as the tests `<scenario>::over_json` and `<scenario>::over_protobuf`.
///
/// Scenarios run in real time and wait for conditions, never for a fixed
/// time. Not in paused time: the reflector and the sim talk over real
/// loopback sockets, and a paused clock auto-advances whenever the runtime
/// looks idle, which it does while a socket's bytes are still in the kernel
/// on a loaded machine; a pending timeout then fires early. (Seen: the cache
/// "missed" a revision it was a few milliseconds from reaching.)
macro_rules! over_each_wire {
    ($(#[$doc:meta])* async fn $name:ident($wire:ident) $body:block) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn over_json() {
                scenario(RequestEncoding::Json).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn over_protobuf() {
                scenario(RequestEncoding::Protobuf).await;
            }

            $(#[$doc])*
            async fn scenario($wire: RequestEncoding) $body
        }
    };
}

/// The sim's pods as the cache should hold them: managedFields stripped.
fn expected(sim: &Sim) -> BTreeMap<String, (u64, Value)> {
    sim.state(ids::PODS)
        .iter()
        .map(|o| {
            let mut json: Value = serde_json::from_slice(&o.json()).unwrap();
            json["metadata"]
                .as_object_mut()
                .unwrap()
                .shift_remove("managedFields");
            (o.key.clone(), (o.revision, json))
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

/// Stops the churn, waits for the cache to reach the sim's revision and
/// checks it holds exactly the sim's objects (key, resourceVersion, JSON).
async fn assert_converged(sim: &Sim, running: &Running) {
    sim.set_churn(0.0);
    let revision = sim.store().revision();
    running
        .reader
        .wait_for(revision, Duration::from_secs(60))
        .await
        .unwrap_or_else(|_| panic!("the cache reaches revision {revision}"));
    let (want, got) = (expected(sim), cached(&running.reader));
    assert_eq!(got.len(), want.len(), "object count");
    for (key, (rv, json)) in &want {
        let (got_rv, got_json) = got.get(key).unwrap_or_else(|| panic!("{key} is cached"));
        assert_eq!(got_rv, rv, "{key}: resourceVersion");
        assert!(
            got_json == json,
            "{key}: the cached JSON is the server's minus managedFields"
        );
    }
}

async fn ready(running: &Running, within: Duration) {
    tokio::time::timeout(within, running.reader.ready())
        .await
        .expect("ready in time")
        .expect("store open");
}

async fn converges_under_churn(strategy: Strategy, wire: RequestEncoding) {
    let (url, sim) = Sim::start(SimConfig {
        pods: 20_000,
        churn_per_sec: 300.0,
        // Six tests start this sim.
        shared_population: true,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let running = start(&url, strategy, wire, 500);
    ready(&running, Duration::from_secs(120)).await;
    let from = sim.store().revision();
    kubecache_testkit::wait::until("150 writes of churn while watching", || {
        sim.store().revision() >= from + 150
    })
    .await;
    assert_converged(&sim, &running).await;
}

over_each_wire! {
async fn list_watch_converges_on_twenty_thousand_pods_under_churn(wire) {
    converges_under_churn(Strategy::ListWatch, wire).await;
}
}

over_each_wire! {
async fn parallel_converges_on_twenty_thousand_pods_under_churn(wire) {
    converges_under_churn(Strategy::Parallel, wire).await;
}
}

over_each_wire! {
async fn streaming_converges_on_twenty_thousand_pods_under_churn(wire) {
    converges_under_churn(Strategy::Streaming, wire).await;
}
}

over_each_wire! {
async fn auto_falls_back_to_parallel_without_watch_list_and_converges(wire) {
    let (url, sim) = Sim::start(SimConfig {
        pods: 3_000,
        churn_per_sec: 200.0,
        watch_list: false,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let running = start(&url, Strategy::Auto, wire, 500);
    ready(&running, Duration::from_secs(60)).await;
    assert_eq!(running.status.borrow().strategy, "parallel");
    assert_converged(&sim, &running).await;
}
}

over_each_wire! {
async fn parallel_gets_ready_when_the_list_outlives_the_watch_cache_and_list_watch_never_does(wire) {
    // 40 pages of 100 at 50 ms each: a 2 s list against a 1 s watch cache.
    let watch_cache = HistoryWindow {
        max_revisions: None,
        max_age: Some(Duration::from_secs(1)),
    };
    let config = SimConfig {
        pods: 4_000,
        churn_per_sec: 100.0,
        page_latency: Duration::from_millis(50),
        watch_cache,
        ..SimConfig::default()
    };
    let (url, sim) = Sim::start(config).await.unwrap();
    let classic = start(&url, Strategy::ListWatch, wire, 100);
    let parallel = start(&url, Strategy::Parallel, wire, 100);
    ready(&parallel, Duration::from_secs(60)).await;
    // The classic reflector lists for 2 s, then its watch from the list's
    // snapshot meets a 410, and it starts over: wait for two such rounds.
    let mut classic_status = classic.status.clone();
    tokio::time::timeout(
        Duration::from_secs(120),
        classic_status.wait_for(|s| s.gone >= 2),
    )
    .await
    .unwrap_or_else(|_| panic!("list-watch loops on 410: {:?}", classic.status.borrow()))
    .expect("the reflector runs");
    assert!(!classic.reader.is_ready(), "list-watch never gets ready");
    let parallel_status = parallel.status.borrow().clone();
    assert_eq!(
        parallel_status.gone, 0,
        "parallel saw no 410: {parallel_status:?}"
    );
    assert_eq!(parallel_status.lists, 1);
    assert_converged(&sim, &parallel).await;
}
}

over_each_wire! {
/// A 1.28 server sends a streaming list's initial-events-end bookmark on its
/// next one-second tick, after the changes made meanwhile: `auto` applies
/// them with the initial objects, so each of its lists succeeds at once,
/// it converges to the server's state, and its event log replays onto its
/// first snapshot. Runs against the real kube-apiserver when
/// `REAL_APISERVER_ENV` names one (see [`Cluster`]), else against the sim
/// claiming 1.28, where a 410 on the watch makes a second streaming list
/// under the same churn.
async fn auto_on_a_1_28_server_applies_the_changes_sent_before_each_bookmark(wire) {
    let cluster = Cluster::start("streaming list under churn").await;
    cluster.churn(true).await;
    let running = cluster.reflector_sent_early_changes(wire).await;
    let (replica, from, events) = follow(&running);
    let lists = if let Cluster::Sim(sim, _) = &cluster {
        sim.inject(FaultSpec {
            target: FaultTarget::Watch,
            fault: Fault::WatchGone,
            times: 1,
        });
        sim.cut_watches();
        kubecache_testkit::wait::until("the relist after the 410", || {
            running.status.borrow().lists == 2
        })
        .await;
        2
    } else {
        1
    };
    cluster.churn(false).await;
    let (revision, want) = cluster.pods().await;
    running
        .reader
        .wait_for(revision, Duration::from_secs(60))
        .await
        .unwrap_or_else(|_| panic!("the cache reaches revision {revision}"));
    let (held, _, _) = follow(&running);
    assert!(held == want, "the cache holds the server's objects at their resourceVersions");
    assert_log_replays(want, replica, from, events);
    let status = running.status.borrow().clone();
    assert_eq!(
        (status.list_attempts, status.lists, status.strategy),
        (lists, lists, "streaming"),
        "no failed list: {:?}",
        status.last_error
    );
    assert!(status.early_changes > 0, "changes came before a bookmark");
    if let Cluster::Sim(sim, _) = &cluster {
        assert_eq!(
            sim.counters()["pods"].streaming_lists_changed_before_end,
            2,
            "both streaming lists sent changes before their bookmark"
        );
    }
}
}

/// The API server a test runs against: the real kube-apiserver of
/// `../shared/real-apiserver/` when `REAL_APISERVER_ENV` names its
/// `env.sh`, with the pods of the tests' own namespace and a writer of its
/// own (`kubecache_testkit::real_apiserver`); else the sim claiming 1.28,
/// with 2,000 pods and its churn.
enum Cluster {
    Sim(Sim, String),
    Real(RealApiServer, Mutex<Option<tokio::task::JoinHandle<()>>>),
}

/// Streaming lists tried on the real server for one that got changes
/// before its bookmark (each fails to with a chance of about 1/3).
const REAL_ATTEMPTS: u32 = 20;

/// Writes per second of the churn on either server.
const CHURN_PER_SEC: u64 = 200;

impl Cluster {
    async fn start(test: &str) -> Cluster {
        let real = real_apiserver::from_env();
        real_apiserver::say_against(test, real.as_ref());
        let Some(real) = real else {
            let (url, sim) = Sim::start(SimConfig {
                pods: 2_000,
                kube_version: KubeVersion::new(28),
                ..SimConfig::default()
            })
            .await
            .unwrap();
            return Cluster::Sim(sim, url);
        };
        real.ensure_pods().await;
        Cluster::Real(real, Mutex::new(None))
    }

    /// A reflector of the cluster's pods (the real server's: of the test
    /// namespace, as kubecache's own user).
    async fn reflector(&self, strategy: Strategy, wire: RequestEncoding) -> Running {
        let config = ReflectorConfig {
            strategy,
            wire,
            ..ReflectorConfig::default()
        };
        match self {
            Cluster::Sim(_, url) => common::start_with(url, config),
            Cluster::Real(real, _) => {
                let spec = ResourceSpec {
                    namespace: Some(real_apiserver::NAMESPACE.into()),
                    ..ResourceSpec::all(ApiResource::pods())
                };
                common::start_client(real.kubecache().await, spec, config)
            }
        }
    }

    /// A ready `auto` reflector whose streaming list got changes before its
    /// bookmark. The sim sends them on every streaming list under churn. The
    /// real server sends them only when its next bookmark tick comes after a
    /// write that is not in the initial objects: it waits for its cache to
    /// be fresh before it takes them, and the tick can follow at once (seen:
    /// 2 of 6 lists of 248 pods under ~100 writes/s got none). So against it,
    /// reflectors are started until one got some, at most [`REAL_ATTEMPTS`].
    async fn reflector_sent_early_changes(&self, wire: RequestEncoding) -> Running {
        for attempt in 1..=REAL_ATTEMPTS {
            let running = self.reflector(Strategy::Auto, wire).await;
            ready(&running, Duration::from_secs(60)).await;
            if let Cluster::Sim(..) = self {
                return running;
            }
            if running.status.borrow().early_changes > 0 {
                let _ = writeln!(
                    std::io::stderr(),
                    "changes before the bookmark at attempt {attempt}"
                );
                return running;
            }
        }
        panic!(
            "none of {REAL_ATTEMPTS} streaming lists under churn got a change before its bookmark"
        );
    }

    /// Starts or stops the churn; stopped, no write is in flight.
    async fn churn(&self, on: bool) {
        match self {
            Cluster::Sim(sim, _) => sim.set_churn(if on { CHURN_PER_SEC as f64 } else { 0.0 }),
            Cluster::Real(real, writer) => {
                let stopped = writer.lock().unwrap().take();
                if let Some(task) = stopped {
                    task.abort();
                    let _ = task.await;
                }
                if on {
                    *writer.lock().unwrap() = Some(real.churn(CHURN_PER_SEC).await);
                }
            }
        }
    }

    /// The server's current revision and its pods' `key -> resourceVersion`.
    async fn pods(&self) -> (u64, BTreeMap<String, u64>) {
        match self {
            Cluster::Sim(sim, _) => (sim.store().revision(), versions(&sim.state(ids::PODS))),
            Cluster::Real(real, _) => real.pods().await,
        }
    }
}

/// Follows the store's event log from the moment the store is ready and
/// checks that replaying it onto the first snapshot gives the final state:
/// no gap, no reordering, relists included.
async fn survives(fault: FaultSpec, strategy: Strategy, wire: RequestEncoding) {
    let (url, sim) = Sim::start(SimConfig {
        pods: 2_000,
        churn_per_sec: 200.0,
        // Eight runs start this sim.
        shared_population: true,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    sim.inject(fault);
    let running = start(&url, strategy, wire, 200);
    ready(&running, Duration::from_secs(60)).await;
    let (replica, from, events) = follow(&running);
    // Faults again while watching: the open watch is cut so the next ones meet them.
    sim.inject(fault);
    sim.inject(FaultSpec {
        target: FaultTarget::Watch,
        fault: Fault::DropWatch { after_events: 50 },
        times: 2,
    });
    sim.cut_watches();
    let cut_at = sim.store().revision();
    kubecache_testkit::wait::until("600 writes of churn through the faults", || {
        sim.store().revision() >= cut_at + 600
    })
    .await;
    assert_converged(&sim, &running).await;
    assert_log_replays(versions(&sim.state(ids::PODS)), replica, from, events);
}

/// The store now as `key -> resourceVersion`, its resourceVersion, and its
/// event log from there.
fn follow(running: &Running) -> (BTreeMap<String, u64>, u64, Subscription) {
    let snapshot = running.reader.snapshot();
    let held = snapshot
        .range(None, None)
        .map(|o| (o.key.to_string(), o.resource_version))
        .collect();
    let events = running
        .reader
        .subscribe_from(snapshot.resource_version())
        .expect("the log covers the snapshot");
    (held, snapshot.resource_version(), events)
}

/// Checks that the events read from `events` (the store's log from `from`,
/// once converged) are in order and replay `replica` (`key ->
/// resourceVersion` at `from`) onto the server's state, `want`.
fn assert_log_replays(
    want: BTreeMap<String, u64>,
    mut replica: BTreeMap<String, u64>,
    from: u64,
    mut events: Subscription,
) {
    let mut last = from;
    while let Ok(event) = events.try_recv() {
        assert!(
            event.object.resource_version >= last,
            "{:?} after {last}: in order",
            event.object
        );
        last = event.object.resource_version;
        let key = event.object.key.to_string();
        match event.kind {
            ChangeType::Deleted => assert!(replica.remove(&key).is_some(), "{key} deleted once"),
            ChangeType::Added | ChangeType::Modified => {
                replica.insert(key, event.object.resource_version);
            }
        }
    }
    let differ: Vec<_> = want
        .iter()
        .filter(|(k, rv)| replica.get(*k) != Some(rv))
        .map(|(k, rv)| (k, Some(rv), replica.get(k)))
        .chain(
            replica
                .iter()
                .filter(|(k, _)| !want.contains_key(*k))
                .map(|(k, rv)| (k, None, Some(rv))),
        )
        .take(5)
        .collect();
    assert!(
        differ.is_empty(),
        "the event log replays onto the first snapshot to the final state: (key, want, got) {differ:?}"
    );
}

over_each_wire! {
async fn dropped_watches_are_resumed_without_a_relist(wire) {
    survives(
        FaultSpec {
            target: FaultTarget::Watch,
            fault: Fault::DropWatch { after_events: 20 },
            times: 3,
        },
        Strategy::Parallel,
        wire,
    )
    .await;
}
}

over_each_wire! {
async fn a_410_on_the_watch_relists_and_emits_the_difference(wire) {
    survives(
        FaultSpec {
            target: FaultTarget::Watch,
            fault: Fault::WatchGone,
            times: 2,
        },
        Strategy::Parallel,
        wire,
    )
    .await;
}
}

over_each_wire! {
async fn an_expired_continue_token_is_continued_at_the_current_revision(wire) {
    survives(
        FaultSpec {
            target: FaultTarget::Continue,
            fault: Fault::ExpireContinue,
            times: 2,
        },
        Strategy::Parallel,
        wire,
    )
    .await;
}
}

over_each_wire! {
async fn throttling_and_server_errors_are_retried_with_backoff(wire) {
    survives(
        FaultSpec {
            target: FaultTarget::Any,
            fault: Fault::TooManyRequests {
                retry_after_secs: 1,
            },
            times: 2,
        },
        Strategy::Parallel,
        wire,
    )
    .await;
    survives(
        FaultSpec {
            target: FaultTarget::Any,
            fault: Fault::InternalError,
            times: 3,
        },
        Strategy::Streaming,
        wire,
    )
    .await;
}
}

over_each_wire! {
async fn truncated_bodies_and_stalls_are_survived(wire) {
    survives(
        FaultSpec {
            target: FaultTarget::Any,
            fault: Fault::TruncateBody,
            times: 3,
        },
        Strategy::Parallel,
        wire,
    )
    .await;
    survives(
        FaultSpec {
            target: FaultTarget::Any,
            fault: Fault::Stall { secs: 2 },
            times: 2,
        },
        Strategy::ListWatch,
        wire,
    )
    .await;
}
}

/// A relist (after a 410 on the watch) emits the difference to the store.
async fn relist_after_compaction(strategy: Strategy, wire: RequestEncoding) {
    let (url, sim) = Sim::start(SimConfig {
        pods: 500,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let running = start(&url, strategy, wire, 100);
    ready(&running, Duration::from_secs(30)).await;
    let before = running.reader.snapshot();
    let mut events = running
        .reader
        .subscribe_from(before.resource_version())
        .unwrap();
    // Cut the watch and, while the next one stalls, change things and
    // compact them away: the resumed watch gets 410 and the reflector relists.
    sim.inject(FaultSpec {
        target: FaultTarget::Watch,
        fault: Fault::Stall { secs: 2 },
        times: 1,
    });
    sim.cut_watches();
    sim.create_pods(1).unwrap();
    let victims: Vec<_> = sim.state(ids::PODS).into_iter().take(3).collect();
    for v in &victims {
        sim.store()
            .delete(ids::PODS, &v.namespace, &v.name)
            .unwrap();
    }
    sim.create_pods(4).unwrap();
    sim.store().compact_at(sim.store().revision());
    assert_converged(&sim, &running).await;
    let mut deleted = Vec::new();
    let mut added = 0;
    while let Ok(event) = events.try_recv() {
        match event.kind {
            ChangeType::Deleted => deleted.push(event.object.key.name().to_string()),
            ChangeType::Added => added += 1,
            ChangeType::Modified => {}
        }
    }
    deleted.sort();
    let mut want: Vec<String> = victims.iter().map(|v| v.name.clone()).collect();
    want.sort();
    assert_eq!(deleted, want);
    assert_eq!(added, 5);
    assert!(running.status.borrow().lists >= 2, "it relisted");
}

over_each_wire! {
async fn a_relist_after_compaction_deletes_what_vanished_and_adds_what_appeared(wire) {
    relist_after_compaction(Strategy::Parallel, wire).await;
}
}

over_each_wire! {
async fn a_sharded_relist_deletes_what_vanished_and_adds_what_appeared(wire) {
    relist_after_compaction(Strategy::Sharded, wire).await;
}
}

over_each_wire! {
async fn a_filter_keeps_only_the_objects_it_accepts_and_drops_those_that_leave_it(wire) {
    let (url, sim) = Sim::start(SimConfig::default()).await.unwrap();
    let pod = |name: &str, keep: &str| serde_json::json!({"metadata": {"name": name, "namespace": "default", "labels": {"keep": keep}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    for (name, keep) in [("a", "yes"), ("b", "no"), ("c", "yes")] {
        sim.store().create(ids::PODS, pod(name, keep)).unwrap();
    }
    let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
    let (writer, reader) = store(StoreConfig::default());
    let config = ReflectorConfig {
        strategy: Strategy::Parallel,
        wire,
        filter: Some(std::sync::Arc::new(
            |o: &kubecache_wire::CachedObject| o.label("keep") == Some("yes"),
        )),
        ..ReflectorConfig::default()
    };
    let reflector = Reflector::new(
        Upstream::new(client, ResourceSpec::all(ApiResource::pods())),
        config,
        writer,
    );
    let task = tokio::spawn(reflector.run());
    tokio::time::timeout(Duration::from_secs(30), reader.ready())
        .await
        .unwrap()
        .unwrap();
    let names = |reader: &StoreReader| {
        reader
            .snapshot()
            .range(None, None)
            .map(|o| o.key.name().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&reader), ["a", "c"]);
    let label = |keep: &str| serde_json::json!({"metadata": {"labels": {"keep": keep}}});
    sim.store()
        .merge_patch(ids::PODS, "default", "a", &label("no"))
        .unwrap();
    let rv = sim
        .store()
        .merge_patch(ids::PODS, "default", "b", &label("yes"))
        .unwrap()
        .revision;
    reader.wait_for(rv, Duration::from_secs(10)).await.unwrap();
    assert_eq!(names(&reader), ["b", "c"]);
    task.abort();
}
}

over_each_wire! {
async fn a_watch_broken_during_a_parallel_list_is_resumed_without_restarting_the_list(wire) {
    let config = SimConfig {
        pods: 3_000,
        churn_per_sec: 300.0,
        page_latency: Duration::from_millis(30),
        ..SimConfig::default()
    };
    let (url, sim) = Sim::start(config).await.unwrap();
    // 30 pages of 100 take about a second; the watch opened after page 1 breaks twice meanwhile.
    sim.inject(FaultSpec {
        target: FaultTarget::Watch,
        fault: Fault::DropWatch { after_events: 30 },
        times: 2,
    });
    let running = start(&url, Strategy::Parallel, wire, 100);
    ready(&running, Duration::from_secs(60)).await;
    let status = running.status.borrow().clone();
    assert!(status.failures >= 1, "the watch did break: {status:?}");
    assert_eq!(status.list_attempts, 1, "the list went on: {status:?}");
    assert_converged(&sim, &running).await;
}
}

/// Lists 5 pods of one namespace in pages of 2 with `strategy`: while each
/// item of a page with a next page is decoded (the filter sees it), the sim
/// must already have been asked for the next page. The filter waits for
/// that request (a condition wait, bounded so that a reflector that fetches
/// only after decoding fails the test instead of hanging it). It must block
/// (the filter is a synchronous callback, and the request is under way on
/// a task of its own, so nothing can be awaited), so its bound is
/// [`PATIENCE`], not a span a slow machine could overrun; once one wait has
/// failed, the rest do not wait again. (One
/// namespace, sorting last: a sharded list reads it all as the rest of page
/// 1's, and has no other namespace to read.)
async fn pages_are_requested_before_the_page_before_is_decoded(
    strategy: Strategy,
    wire: RequestEncoding,
) {
    const PAGE: usize = 2;
    const PODS: usize = 5;
    let (url, sim) = Sim::start(SimConfig::default()).await.unwrap();
    let pods = (0..PODS).map(|i| {
        serde_json::json!({
            "metadata": {"name": format!("pod-{i}"), "namespace": "zzz-last"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        })
    });
    sim.seed(ids::PODS, pods).unwrap();
    let sim = Arc::new(sim);
    let requested = {
        let sim = sim.clone();
        move || -> u64 { lists(&sim, "pods") }
    };
    let seen = Arc::new(Mutex::new(Vec::new()));
    let filter = {
        let seen = seen.clone();
        move |_: &kubecache_wire::CachedObject| {
            let mut seen = seen.lock().unwrap();
            let page = seen.len() / PAGE;
            let has_next = (page + 1) * PAGE < PODS;
            let failed = seen.contains(&false);
            let deadline = std::time::Instant::now() + PATIENCE;
            let mut next_requested = !has_next;
            while !next_requested && !failed && std::time::Instant::now() < deadline {
                next_requested = requested() >= page as u64 + 2;
                if !next_requested {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            seen.push(next_requested);
            true
        }
    };
    let running = common::start_with(
        &url,
        ReflectorConfig {
            strategy,
            wire,
            page_size: PAGE,
            filter: Some(Arc::new(filter)),
            ..ReflectorConfig::default()
        },
    );
    ready(&running, Duration::from_secs(60)).await;
    assert_eq!(running.status.borrow().list_attempts, 1);
    assert_eq!(*seen.lock().unwrap(), [true; PODS]);
    assert_eq!(running.reader.snapshot().range(None, None).count(), PODS);
}

over_each_wire! {
async fn list_watch_requests_the_next_page_before_decoding_this_one(wire) {
    pages_are_requested_before_the_page_before_is_decoded(Strategy::ListWatch, wire).await;
}
}

over_each_wire! {
async fn parallel_requests_the_next_page_before_decoding_this_one(wire) {
    pages_are_requested_before_the_page_before_is_decoded(Strategy::Parallel, wire).await;
}
}

over_each_wire! {
async fn sharded_requests_the_next_page_before_decoding_this_one(wire) {
    pages_are_requested_before_the_page_before_is_decoded(Strategy::Sharded, wire).await;
}
}

/// The seeds of the randomized sharded lists; `KUBECACHE_SEED` replaces
/// them with one.
const SEEDS: [u64; 3] = [1, 17, 2026];

fn seeds() -> Vec<u64> {
    match std::env::var("KUBECACHE_SEED") {
        Ok(seed) => vec![seed.parse().expect("KUBECACHE_SEED is a number")],
        Err(_) => SEEDS.to_vec(),
    }
}

/// Random pod writes made from inside a list: the reflector's filter calls
/// [`Churn::saw`] as it decodes each object, so the writes land between
/// page requests while shards are under way (no timing involved). Also
/// records what the reflector decoded, and can compact the sim's history
/// once the shards have started.
struct Churn {
    sim: Arc<Sim>,
    /// The revision before the list: page 1's snapshot.
    rv0: u64,
    /// Objects of page 1 (the reflector's page size).
    page: usize,
    /// Compact the history once the shards are read.
    compact: bool,
    seed: u64,
    state: Mutex<ChurnState>,
}

struct ChurnState {
    rng: SmallRng,
    writes_left: usize,
    writes: usize,
    /// `(key, resourceVersion)` of each object decoded, list and events.
    seen: Vec<(String, u64)>,
    /// Objects decoded at or before `rv0`: the list's.
    listed: usize,
    /// The newest event decoded (events are newer than `rv0`).
    newest_event: u64,
    compacted: bool,
}

impl Churn {
    fn new(sim: Arc<Sim>, seed: u64, page: usize, compact: bool) -> Arc<Churn> {
        Arc::new(Churn {
            rv0: sim.store().revision(),
            sim,
            page,
            compact,
            seed,
            state: Mutex::new(ChurnState {
                rng: SmallRng::seed_from_u64(seed),
                writes_left: 400,
                writes: 0,
                seen: Vec::new(),
                listed: 0,
                newest_event: 0,
                compacted: false,
            }),
        })
    }

    /// Checks the list once ready: writes landed during it, and (a) it
    /// listed exactly `at_rv0`, each object once (objects decoded at or
    /// before rv0 are the list's: events are newer), or with `compact` a
    /// shard met 410.
    fn check_list(&self, status: &ReflectorStatus, compact: bool, at_rv0: BTreeMap<String, u64>) {
        let seed = self.seed;
        let state = self.state.lock().unwrap();
        assert!(
            state.writes >= 200,
            "seed {seed}: writes landed during the list: {}",
            state.writes
        );
        if compact {
            assert!(state.compacted, "seed {seed}: the history was compacted");
            assert!(status.gone >= 1, "seed {seed}: a shard met 410: {status:?}");
        } else {
            let mut listed: Vec<(String, u64)> = state
                .seen
                .iter()
                .filter(|(_, rv)| *rv <= self.rv0)
                .cloned()
                .collect();
            listed.sort();
            let want: Vec<(String, u64)> = at_rv0.into_iter().collect();
            assert!(
                listed == want,
                "seed {seed}: the list is the snapshot at rv0, each object once ({} listed, {} at rv0)",
                listed.len(),
                want.len()
            );
        }
    }

    /// No more writes.
    fn stop(&self) {
        self.state.lock().unwrap().writes_left = 0;
    }

    fn saw(&self, object: &kubecache_wire::CachedObject) {
        let mut state = self.state.lock().unwrap();
        let rv = object.resource_version;
        state.seen.push((object.key.to_string(), rv));
        if rv <= self.rv0 {
            state.listed += 1;
        } else {
            state.newest_event = state.newest_event.max(rv);
        }
        // Past page 1 the namespaces are listed and the shards under way;
        // compact up to an event the watch already delivered, so that the
        // shards still to start at rv0 get 410 and the watch does not.
        if self.compact
            && !state.compacted
            && state.listed > self.page
            && state.newest_event > self.rv0
        {
            self.sim.store().compact_at(state.newest_event);
            state.compacted = true;
        }
        if state.writes_left > 0 && (state.listed == 1 || state.rng.random_bool(0.15)) {
            state.writes_left -= 1;
            state.writes += 1;
            self.write(&mut state.rng);
        }
    }

    /// One random write: an update, a delete, a create in a namespace that
    /// exists, or a create in a new namespace (sorting anywhere).
    fn write(&self, rng: &mut SmallRng) {
        let store = self.sim.store();
        let pods = self.sim.state(ids::PODS);
        let pod = &pods[rng.random_range(0..pods.len())];
        let created = |namespace: &str, rng: &mut SmallRng| {
            serde_json::json!({
                "metadata": {"name": format!("churn-{}", rng.random::<u32>()), "namespace": namespace},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            })
        };
        match rng.random_range(0..10) {
            0..4 => {
                let label = serde_json::json!({"metadata": {"labels": {"churn": rng.random::<u32>().to_string()}}});
                store
                    .merge_patch(ids::PODS, &pod.namespace, &pod.name, &label)
                    .unwrap();
            }
            4..6 => {
                store.delete(ids::PODS, &pod.namespace, &pod.name).unwrap();
            }
            6..9 => {
                store
                    .create(ids::PODS, created(&pod.namespace, rng))
                    .unwrap();
            }
            _ => {
                let prefix = ["aaa", "mmm", "zzz"][rng.random_range(0..3)];
                let namespace = format!("{prefix}-{}", rng.random::<u16>());
                let pod = created(&namespace, rng);
                self.sim.seed(ids::PODS, [pod]).unwrap();
            }
        }
    }
}

/// `key -> resourceVersion` of pods.
fn versions(objects: &[Arc<kubecache_loadtest::sim::StoredObject>]) -> BTreeMap<String, u64> {
    objects
        .iter()
        .map(|o| (o.key.clone(), o.revision))
        .collect()
}

/// A sharded list of 3,000 pods in 40 namespaces while 400 random writes
/// (new namespaces among them) land between its pages: (a) the objects it
/// listed are exactly those of page 1's snapshot rv0, each once (objects
/// decoded at or before rv0 are the list's: events are newer); (b) the
/// store it gets ready with is exactly the sim's state at the store's
/// resourceVersion; then it converges and its event log replays in order.
/// With `compact`, the history is compacted once the shards are under way:
/// the shards after that get 410 and are read at the current state, so
/// (a) and (b) do not hold, the convergence and the log do.
async fn sharded_list_equals_a_sequential_one(wire: RequestEncoding, seed: u64, compact: bool) {
    const PAGE: usize = 100;
    // With `compact`, the history is compacted once the watch has delivered
    // an event, and only the namespaces read after that meet 410: a delay
    // per page keeps namespaces to read (about ten rounds of the shards)
    // while the watch's first event comes, however late the machine runs
    // it (CI once saw every namespace read before it).
    let page_latency = if compact {
        Duration::from_millis(50)
    } else {
        Duration::ZERO
    };
    let (url, sim) = Sim::start(SimConfig {
        seed,
        pods: 3_000,
        namespaces: 40,
        page_latency,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let sim = Arc::new(sim);
    let churn = Churn::new(sim.clone(), seed, PAGE, compact);
    let at_rv0 = versions(&sim.state(ids::PODS));
    let filter = {
        let churn = churn.clone();
        move |object: &kubecache_wire::CachedObject| {
            churn.saw(object);
            true
        }
    };
    let running = common::start_with(
        &url,
        ReflectorConfig {
            strategy: Strategy::Sharded,
            wire,
            page_size: PAGE,
            list_shards: 4,
            filter: Some(Arc::new(filter)),
            ..ReflectorConfig::default()
        },
    );
    ready(&running, Duration::from_secs(120)).await;
    churn.stop();
    let snapshot = running.reader.snapshot();
    let status = running.status.borrow().clone();
    assert_eq!(status.list_attempts, 1, "seed {seed}: one list: {status:?}");
    churn.check_list(&status, compact, at_rv0);
    let ready_rv = snapshot.resource_version();
    let got: BTreeMap<String, u64> = snapshot
        .range(None, None)
        .map(|o| (o.key.to_string(), o.resource_version))
        .collect();
    // (A shard read at the current state after its 410 may hold objects
    // newer than the store's resourceVersion, until the watch reaches them.)
    let want = versions(&sim.state_at(ids::PODS, ready_rv));
    let differ: Vec<_> = want
        .iter()
        .filter(|(k, rv)| got.get(*k) != Some(rv))
        .map(|(k, rv)| (k, rv, got.get(k)))
        .chain(
            got.iter()
                .filter(|(k, _)| !want.contains_key(*k))
                .map(|(k, rv)| (k, rv, Some(rv))),
        )
        .take(5)
        .collect();
    assert!(
        compact || differ.is_empty(),
        "seed {seed}: the store is the sim's state at its resourceVersion {ready_rv}: {differ:?}"
    );
    let events = running.reader.subscribe_from(ready_rv).unwrap();
    sim.create_pods(20).unwrap();
    assert_converged(&sim, &running).await;
    assert_log_replays(versions(&sim.state(ids::PODS)), got, ready_rv, events);
}

over_each_wire! {
async fn a_sharded_list_under_random_writes_equals_a_sequential_list_at_its_snapshot(wire) {
    for seed in seeds() {
        sharded_list_equals_a_sequential_one(wire, seed, false).await;
    }
}
}

over_each_wire! {
async fn sharded_shards_that_meet_410_are_read_at_the_current_state_and_converge(wire) {
    for seed in seeds() {
        sharded_list_equals_a_sequential_one(wire, seed, true).await;
    }
}
}

over_each_wire! {
async fn a_sharded_list_reads_list_shards_namespaces_at_once_and_never_more(wire) {
    // 30 namespaces of 20 pods, pages of 10 answered in 50 ms each.
    let (url, sim) = Sim::start(SimConfig {
        pods: 600,
        namespaces: 30,
        page_latency: Duration::from_millis(50),
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let running = common::start_with(
        &url,
        ReflectorConfig {
            strategy: Strategy::Sharded,
            wire,
            page_size: 10,
            list_shards: 3,
            ..ReflectorConfig::default()
        },
    );
    ready(&running, Duration::from_secs(60)).await;
    assert_eq!(sim.peak_lists_in_flight(ids::PODS), 3);
    assert_converged(&sim, &running).await;
}
}

/// Lists of `resource` the sim was asked (pages included).
fn lists(sim: &Sim, resource: &str) -> u64 {
    sim.counters()[resource].lists
}

over_each_wire! {
async fn sharded_lists_a_cluster_scoped_resource_as_parallel_does(wire) {
    let (url, sim) = Sim::start(SimConfig::default()).await.unwrap();
    let namespaces = sim.state(ids::NAMESPACES).len();
    let running = common::start_of(
        &url,
        ResourceSpec::all(ApiResource::namespaces()),
        ReflectorConfig {
            strategy: Strategy::Sharded,
            wire,
            page_size: 3,
            ..ReflectorConfig::default()
        },
    );
    ready(&running, Duration::from_secs(30)).await;
    assert_eq!(running.reader.snapshot().range(None, None).count(), namespaces);
    assert_eq!(
        lists(&sim, "namespaces"),
        namespaces.div_ceil(3) as u64,
        "its pages, one after another, and no list of namespaces to shard by"
    );
}
}

over_each_wire! {
async fn sharded_lists_a_cache_of_one_namespace_as_parallel_does(wire) {
    let (url, sim) = Sim::start(SimConfig {
        pods: 300,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let namespace = sim.state(ids::PODS)[0].namespace.clone();
    let want = sim
        .state(ids::PODS)
        .iter()
        .filter(|p| p.namespace == namespace)
        .count();
    let running = common::start_of(
        &url,
        ResourceSpec {
            namespace: Some(namespace),
            ..ResourceSpec::all(ApiResource::pods())
        },
        ReflectorConfig {
            strategy: Strategy::Sharded,
            wire,
            page_size: 5,
            ..ReflectorConfig::default()
        },
    );
    ready(&running, Duration::from_secs(30)).await;
    assert_eq!(running.reader.snapshot().range(None, None).count(), want);
    assert_eq!(lists(&sim, "namespaces"), 0, "no list of namespaces");
    assert_eq!(lists(&sim, "pods"), want.div_ceil(5) as u64);
}
}

over_each_wire! {
async fn sharded_lists_as_parallel_does_when_namespaces_are_forbidden(wire) {
    let (url, sim) = Sim::start(SimConfig {
        pods: 300,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let sim = Arc::new(sim);
    // Armed while page 1 is decoded: the next first page asked is the
    // namespaces' (page 2 is a continue, the watch is no list).
    let filter = {
        let sim = sim.clone();
        let armed = std::sync::Once::new();
        move |_: &kubecache_wire::CachedObject| {
            armed.call_once(|| {
                sim.inject(FaultSpec {
                    target: FaultTarget::List,
                    fault: Fault::Forbidden,
                    times: 1,
                })
            });
            true
        }
    };
    let running = common::start_with(
        &url,
        ReflectorConfig {
            strategy: Strategy::Sharded,
            wire,
            page_size: 10,
            filter: Some(Arc::new(filter)),
            ..ReflectorConfig::default()
        },
    );
    ready(&running, Duration::from_secs(30)).await;
    assert_eq!(running.status.borrow().list_attempts, 1);
    assert_eq!(lists(&sim, "namespaces"), 1, "the forbidden one");
    assert_eq!(lists(&sim, "pods"), 30, "300 pods in pages of 10, one after another");
    assert_converged(&sim, &running).await;
}
}
