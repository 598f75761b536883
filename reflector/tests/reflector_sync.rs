//! The reflector against the simulated API server on 127.0.0.1: it converges
//! to the server's exact state with every strategy, survives lists longer
//! than the watch cache, and recovers from every upstream fault without a
//! gap or a reordering in its event log. Every scenario runs over JSON and
//! over protobuf (`<scenario>::over_json`, `<scenario>::over_protobuf`).

mod common;
use common::{Running, start};
use std::collections::BTreeMap;
use std::time::Duration;

use kubecache_loadtest::sim::{Fault, FaultSpec, FaultTarget, HistoryWindow, Sim, SimConfig, ids};
use kubecache_reflector::upstream::{
    ApiResource, Reflector, ReflectorConfig, ResourceSpec, Strategy, Upstream, Wire,
};
use kubecache_reflector::{StoreConfig, StoreReader, store};
use kubecache_wire::ChangeType;
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
                scenario(Wire::Json).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn over_protobuf() {
                scenario(Wire::Protobuf).await;
            }

            $(#[$doc])*
            async fn scenario($wire: Wire) $body
        }
    };
}

/// Waits until the sim stops writing (a churn tick in flight finishes).
async fn settle(sim: &Sim) -> u64 {
    loop {
        let revision = sim.store().revision();
        tokio::time::sleep(Duration::from_millis(200)).await;
        if sim.store().revision() == revision {
            return revision;
        }
    }
}

/// The sim's pods as the cache should hold them: managedFields stripped.
fn expected(sim: &Sim) -> BTreeMap<String, (u64, Value)> {
    sim.state(ids::PODS)
        .iter()
        .map(|o| {
            let mut json: Value = serde_json::from_slice(&o.json).unwrap();
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
    let revision = settle(sim).await;
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

async fn converges_under_churn(strategy: Strategy, wire: Wire) {
    let (url, sim) = Sim::start(SimConfig {
        pods: 20_000,
        churn_per_sec: 300.0,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let running = start(&url, strategy, wire, 500);
    ready(&running, Duration::from_secs(120)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
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

/// Follows the store's event log from the moment the store is ready and
/// checks that replaying it onto the first snapshot gives the final state:
/// no gap, no reordering, relists included.
async fn survives(fault: FaultSpec, strategy: Strategy, wire: Wire) {
    let (url, sim) = Sim::start(SimConfig {
        pods: 2_000,
        churn_per_sec: 200.0,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    sim.inject(fault);
    let running = start(&url, strategy, wire, 200);
    ready(&running, Duration::from_secs(60)).await;
    let snapshot = running.reader.snapshot();
    let mut replica: BTreeMap<String, u64> = snapshot
        .range(None, None)
        .map(|o| (o.key.to_string(), o.resource_version))
        .collect();
    let mut events = running
        .reader
        .subscribe_from(snapshot.resource_version())
        .expect("the log covers the snapshot");
    // Faults again while watching: the open watch is cut so the next ones meet them.
    sim.inject(fault);
    sim.inject(FaultSpec {
        target: FaultTarget::Watch,
        fault: Fault::DropWatch { after_events: 50 },
        times: 2,
    });
    sim.cut_watches();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_converged(&sim, &running).await;
    let mut last = snapshot.resource_version();
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
    let want: BTreeMap<String, u64> = expected(&sim)
        .into_iter()
        .map(|(k, (rv, _))| (k, rv))
        .collect();
    assert!(
        replica == want,
        "the event log replays onto the first snapshot to the final state"
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

over_each_wire! {
async fn a_relist_after_compaction_deletes_what_vanished_and_adds_what_appeared(wire) {
    let (url, sim) = Sim::start(SimConfig {
        pods: 500,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let running = start(&url, Strategy::Parallel, wire, 100);
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

/// Lists 5 pods in pages of 2 with `strategy`: while each item of a page
/// with a next page is decoded (the filter sees it), the sim must already
/// have been asked for the next page. The filter waits for that request (a
/// condition wait, bounded so that a reflector that fetches only after
/// decoding fails the test instead of hanging it).
async fn pages_are_requested_before_the_page_before_is_decoded(strategy: Strategy, wire: Wire) {
    use std::sync::{Arc, Mutex};
    const PAGE: usize = 2;
    const PODS: usize = 5;
    let (url, sim) = Sim::start(SimConfig::default()).await.unwrap();
    sim.create_pods(PODS).unwrap();
    let sim = Arc::new(sim);
    let requested = {
        let sim = sim.clone();
        move || -> u64 { sim.counters().values().map(|c| c.lists).sum() }
    };
    let seen = Arc::new(Mutex::new(Vec::new()));
    let filter = {
        let seen = seen.clone();
        move |_: &kubecache_wire::CachedObject| {
            let mut seen = seen.lock().unwrap();
            let page = seen.len() / PAGE;
            let has_next = (page + 1) * PAGE < PODS;
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            let mut next_requested = !has_next;
            while !next_requested && std::time::Instant::now() < deadline {
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
