//! Watches through kubecache: every watcher gets exactly the events the API
//! server itself sends for the same query, in order, under churn; a stalled
//! watcher is cut without costing the others an event; replays, streaming
//! lists, bookmarks and shutdown behave as kube-apiserver's watch cache.

use crate::common;

use std::collections::HashMap;
use std::time::Duration;

use common::{Setup, WatchLines, describe, get, resource_version, serve};
use kubecache_loadtest::sim::ids;
use kubecache_reflector::{EventLogConfig, StoreConfig};
use kubecache_server::ServeSettings;
use kubecache_testkit::wait::until;
use serde_json::{Value, json};

const PODS: &str = "/api/v1/pods";
const LABEL: &str = "kubecache-test";

/// The watch lines other than bookmarks.
fn events(lines: &[Value]) -> Vec<&Value> {
    lines.iter().filter(|l| l["type"] != "BOOKMARK").collect()
}

/// `object` without `metadata.managedFields` (kubecache strips them).
fn stripped(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(meta) = object["metadata"].as_object_mut() {
        meta.remove("managedFields");
    }
    object
}

/// Labels `LABEL=on` on, then off, the first `n` pods, `rounds` times:
/// objects enter and leave label selectors.
fn toggle_labels(served: &common::Served, n: usize, rounds: usize) {
    let pods = served.sim.state(ids::PODS);
    for round in 0..rounds {
        let value = if round % 2 == 0 {
            json!("on")
        } else {
            json!(null)
        };
        for pod in pods.iter().take(n) {
            let patch = json!({"metadata": {"labels": {LABEL: value}}});
            // Churn may have deleted it.
            if let Err(status) =
                served
                    .sim
                    .store()
                    .merge_patch(ids::PODS, &pod.namespace, &pod.name, &patch)
            {
                assert_eq!(status.code, 404, "{status:?}");
            }
        }
    }
}

/// Waits until kubecache's store has reached the sim's current revision.
async fn caught_up(served: &common::Served) {
    let target = served.sim.store().revision();
    let reader = &served.caches.iter().next().unwrap().reader;
    reader
        .wait_for(target, Duration::from_secs(30))
        .await
        .expect("kubecache catches up with the API server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_watcher_gets_exactly_the_events_the_api_server_sends_for_its_query_in_order() {
    let served = serve(Setup {
        store: common::node_index(),
        ..Setup::default()
    })
    .await;
    let state = served.sim.state(ids::PODS);
    let sample: Value = serde_json::from_slice(&state[0].json()).unwrap();
    let ns = sample["metadata"]["namespace"]
        .as_str()
        .unwrap()
        .to_string();
    let node = sample["spec"]["nodeName"].as_str().unwrap().to_string();
    let rv = resource_version(&served.url, PODS).await;
    // Every watch reads up to the first marker (see `write_markers`); the
    // timeout only ends a test that went wrong.
    let tail = format!("watch=1&resourceVersion={rv}&timeoutSeconds=600");
    let queries = [
        format!("{PODS}?{tail}"),
        format!("/api/v1/namespaces/{ns}/pods?{tail}"),
        format!("{PODS}?{tail}&fieldSelector=spec.nodeName%3D{node}"),
        format!("{PODS}?{tail}&labelSelector={LABEL}%3Don"),
        format!("{PODS}?{tail}&labelSelector={LABEL}%21%3Don"),
        format!("{PODS}?{tail}&labelSelector={LABEL}%2Cmissing%21%3Dx"),
    ];
    const COPIES: usize = 6;
    let mut watchers = Vec::new();
    for query in &queries {
        let reference = WatchLines::open(served.sim.url(), query).await;
        assert_eq!(reference.code, 200, "{query}");
        let mut copies = Vec::new();
        for _ in 0..COPIES {
            let watch = WatchLines::open(&served.url, query).await;
            assert_eq!(watch.code, 200, "{query}");
            copies.push(tokio::spawn(watch.collect_until(is_marker)));
        }
        watchers.push((
            query,
            tokio::spawn(reference.collect_until(is_marker)),
            copies,
        ));
    }
    let predicated =
        WatchLines::open(&served.url, &format!("/predicates/labels{PODS}?{tail}")).await;
    let predicated = tokio::spawn(predicated.collect_until(is_marker));

    let from = served.sim.store().revision();
    served.sim.set_churn(300.0);
    toggle_labels(&served, 40, 3);
    kubecache_testkit::wait::until("600 writes of churn", || {
        served.sim.store().revision() >= from + 600
    })
    .await;
    served.sim.set_churn(0.0);
    toggle_labels(&served, 20, 2);
    write_markers(&served, &sample);
    caught_up(&served).await;

    let mut everything = Vec::new();
    for (query, reference, copies) in watchers {
        let reference = reference.await.unwrap();
        let expected: Vec<String> = events(&reference).into_iter().map(describe).collect();
        assert!(!expected.is_empty(), "{query}: the writes concern it");
        for (i, copy) in copies.into_iter().enumerate() {
            let got = copy.await.unwrap();
            let got_events = events(&got);
            let described: Vec<String> = got_events.iter().map(|l| describe(l)).collect();
            assert_eq!(described, expected, "{query}: watcher {i}");
            if i == 0 {
                for (got, want) in got_events.iter().zip(events(&reference)) {
                    assert_eq!(
                        got["object"],
                        stripped(&want["object"]),
                        "{query}: {}",
                        describe(want)
                    );
                }
            }
        }
        if everything.is_empty() {
            everything = reference;
        }
    }

    // The label predicate: additions and deletions always, changes only
    // when the labels changed.
    let initial = common::get(
        served.sim.url(),
        &format!("{PODS}?resourceVersion={rv}&resourceVersionMatch=Exact"),
    )
    .await;
    let initial: Value = serde_json::from_slice(&initial.1).unwrap();
    let mut labels: HashMap<String, Value> = initial["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            let key = describe(&json!({"object": item}));
            (key_of(&key), item["metadata"]["labels"].clone())
        })
        .collect();
    let mut expected = Vec::new();
    for line in events(&everything) {
        let key = key_of(&describe(line));
        let now = line["object"]["metadata"]["labels"].clone();
        let before = labels.insert(key, now.clone());
        if line["type"] != "MODIFIED" || before.as_ref() != Some(&now) {
            expected.push(describe(line));
        }
    }
    let got = predicated.await.unwrap();
    let got: Vec<String> = events(&got).into_iter().map(describe).collect();
    assert_eq!(got, expected, "the label predicate");
    assert!(
        got.len() < events(&everything).len(),
        "the predicate dropped status updates"
    );
}

/// The names of the two pods a test writes last, in `LABEL`'s namespace and
/// on its node, one labelled `LABEL=on` and one not: every query of
/// `every_watcher_gets_exactly...` selects at least one, so each watcher
/// (of kubecache or the sim) reads exactly up to the first it selects, however
/// long the writes took.
const MARKERS: [&str; 2] = ["zz-marker-on", "zz-marker-off"];

/// Whether a watch line is a marker's.
fn is_marker(line: &Value) -> bool {
    MARKERS.contains(
        &line["object"]["metadata"]["name"]
            .as_str()
            .unwrap_or_default(),
    )
}

/// Creates the [`MARKERS`] from `sample` (a pod of the sim).
fn write_markers(served: &common::Served, sample: &Value) {
    for (name, label) in MARKERS.into_iter().zip([json!("on"), json!(null)]) {
        let mut pod = sample.clone();
        let meta = &mut pod["metadata"];
        meta["name"] = json!(name);
        for field in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generateName",
        ] {
            meta.as_object_mut().unwrap().remove(field);
        }
        meta["labels"][LABEL] = label;
        if meta["labels"][LABEL].is_null() {
            meta["labels"].as_object_mut().unwrap().remove(LABEL);
        }
        served
            .sim
            .store()
            .create(ids::PODS, pod)
            .expect("a marker pod");
    }
}

/// `namespace/name` of a `describe` string.
fn key_of(described: &str) -> String {
    let object = described.split(' ').nth(1).unwrap();
    object.split('@').next().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_watcher_is_cut_with_410_while_the_others_get_every_event() {
    let served = serve(Setup {
        settings: ServeSettings {
            watcher_queue: 64,
            ..ServeSettings::default()
        },
        ..Setup::default()
    })
    .await;
    let rv = resource_version(&served.url, PODS).await;
    let query = format!("{PODS}?watch=1&resourceVersion={rv}&timeoutSeconds=120");
    let pods = served.sim.state(ids::PODS);
    let writes = 5 * pods.len();
    // Never read until the writes are done: kernel buffers fill, then its
    // queue, and the dispatcher cuts it.
    let mut stalled = WatchLines::open(
        &served.url,
        &format!("{PODS}?watch=1&resourceVersion={rv}&timeoutSeconds=600"),
    )
    .await;
    let (readers, counts): (Vec<_>, Vec<_>) = (0..3)
        .map(|_| {
            let (url, query) = (served.url.clone(), query.clone());
            let (counted, count) = tokio::sync::watch::channel(0);
            let reader = tokio::spawn(async move {
                let lines = WatchLines::open(&url, &query).await;
                lines.events_counted(writes, &counted).await
            });
            (reader, count)
        })
        .unzip();
    let reference = tokio::spawn(
        WatchLines::open(served.sim.url(), &query)
            .await
            .events(writes),
    );
    // Every watch through kubecache, the stalled one and the readers', is
    // past its (empty) replay and routed live events before the writes.
    let cache = served.caches.by_name("pods").unwrap();
    until("the stalled watcher and the readers have joined", || {
        cache.dispatched_watchers() == 1 + counts.len()
    })
    .await;

    // About 30 MB of events, far more than sockets buffer, in bursts the
    // readers keep up with (each burst is well within their queues, however
    // busy the machine).
    for round in 0..5 {
        for (i, pod) in pods.iter().enumerate() {
            let patch = json!({"metadata": {"annotations": {"round": format!("{round}")}}});
            served
                .sim
                .store()
                .merge_patch(ids::PODS, &pod.namespace, &pod.name, &patch)
                .unwrap();
            let written = round * pods.len() + i + 1;
            if written % 32 == 0 {
                for count in &counts {
                    let mut count = count.clone();
                    tokio::time::timeout(
                        Duration::from_secs(60),
                        count.wait_for(|&n| n >= written),
                    )
                    .await
                    .expect("a reading watcher keeps up")
                    .expect("the reader runs");
                }
            }
        }
    }
    caught_up(&served).await;

    let expected: Vec<String> = reference.await.unwrap().iter().map(describe).collect();
    assert_eq!(expected.len(), writes);
    for reader in readers {
        let got: Vec<String> = reader.await.unwrap().iter().map(describe).collect();
        assert_eq!(got, expected, "a reading watcher got every event in order");
    }
    let mut got = Vec::new();
    while let Some(line) = stalled.next().await {
        got.push(line);
    }
    let last = got
        .last()
        .expect("the stalled watcher was told why it ended");
    assert_eq!(last["type"], "ERROR", "{last}");
    assert_eq!(last["object"]["code"], 410);
    assert_eq!(last["object"]["reason"], "Expired");
    let before: Vec<String> = got[..got.len() - 1].iter().map(describe).collect();
    assert!(before.len() < expected.len(), "it was cut before the end");
    assert_eq!(
        before,
        expected[..before.len()],
        "what it got is a gap-free prefix"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_replays_from_its_resource_version_and_one_too_old_gets_410() {
    let served = serve(Setup {
        store: StoreConfig {
            event_log: EventLogConfig {
                max_events: 100,
                ..EventLogConfig::default()
            },
            ..StoreConfig::default()
        },
        ..Setup::default()
    })
    .await;
    let first = resource_version(&served.url, PODS).await;
    toggle_labels(&served, 30, 2);
    caught_up(&served).await;
    let reference = WatchLines::open(
        served.sim.url(),
        &format!("{PODS}?watch=1&resourceVersion={first}&timeoutSeconds=2"),
    )
    .await
    .collect()
    .await;
    let replay = WatchLines::open(
        &served.url,
        &format!("{PODS}?watch=1&resourceVersion={first}&timeoutSeconds=2"),
    )
    .await
    .collect()
    .await;
    let want: Vec<String> = events(&reference).into_iter().map(describe).collect();
    let got: Vec<String> = events(&replay).into_iter().map(describe).collect();
    assert_eq!(want.len(), 60);
    assert_eq!(got, want);

    toggle_labels(&served, 60, 2);
    caught_up(&served).await;
    let too_old = WatchLines::open(
        &served.url,
        &format!("{PODS}?watch=1&resourceVersion={first}"),
    )
    .await;
    assert_eq!(too_old.code, 200, "as kube-apiserver: 200, then the error");
    let lines = too_old.collect().await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["type"], "ERROR");
    assert_eq!(lines[0]["object"]["code"], 410);
    let message = lines[0]["object"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("too old resource version: {first} (")),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_list_sends_every_object_then_the_initial_events_end_bookmark_then_changes() {
    let served = serve(Setup::default()).await;
    let mut watch = WatchLines::open(
        &served.url,
        &format!(
            "{PODS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=5"
        ),
    )
    .await;
    assert_eq!(watch.code, 200);
    let mut added = Vec::new();
    let bookmark = loop {
        let line = watch.next().await.expect("the end bookmark comes");
        match line["type"].as_str().unwrap() {
            "ADDED" => added.push(key_of(&describe(&line))),
            "BOOKMARK" => break line,
            other => panic!("unexpected {other} before the end bookmark"),
        }
    };
    let mut want: Vec<String> = served
        .sim
        .state(ids::PODS)
        .iter()
        .map(|p| p.key.clone())
        .collect();
    want.sort();
    added.sort();
    assert_eq!(added, want);
    assert_eq!(
        bookmark["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    toggle_labels(&served, 1, 1);
    let change = watch.next().await.expect("the change follows");
    assert_eq!(change["type"], "MODIFIED");
    assert_eq!(change["object"]["metadata"]["labels"][LABEL], "on");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_watchers_get_a_bookmark_every_interval_and_watches_end_cleanly_at_shutdown() {
    let served = serve(Setup {
        settings: ServeSettings {
            bookmark_interval: Duration::from_millis(500),
            ..ServeSettings::default()
        },
        ..Setup::default()
    })
    .await;
    let rv = resource_version(&served.url, PODS).await;
    let mut watch = WatchLines::open(
        &served.url,
        &format!("{PODS}?watch=1&resourceVersion={rv}&allowWatchBookmarks=true"),
    )
    .await;
    let bookmark = watch.next().await.unwrap();
    assert_eq!(bookmark["type"], "BOOKMARK");
    let at: u64 = bookmark["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(at >= rv);
    // The bookmark timer is re-armed after it fires.
    let again = watch.next().await.unwrap();
    assert_eq!(again["type"], "BOOKMARK");
    served.caches.shut_down();
    let rest = tokio::time::timeout(Duration::from_secs(5), watch.collect())
        .await
        .expect("the watch ends at shutdown");
    assert!(rest.iter().all(|l| l["type"] == "BOOKMARK"), "{rest:?}");
    let (code, _) = get(&served.url, "/healthz").await;
    assert_eq!(code, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generation_predicate_watch_gets_spec_changes_and_deletes_but_not_status_updates() {
    let served = serve(Setup::default()).await;
    let rv = resource_version(&served.url, PODS).await;
    let watch = WatchLines::open(
        &served.url,
        &format!("{PODS}?watch=1&resourceVersion={rv}&predicates=generation&timeoutSeconds=600"),
    )
    .await;
    let pods = served.sim.state(ids::PODS);
    let store = served.sim.store();
    let mut want = Vec::new();
    for (i, pod) in pods.iter().take(30).enumerate() {
        let (ns, name) = (&pod.namespace, &pod.name);
        // Status and metadata-only changes keep the generation.
        let status = json!({"status": {"message": format!("tick {i}")}});
        store.merge_patch(ids::PODS, ns, name, &status).unwrap();
        let labels = json!({"metadata": {"labels": {LABEL: format!("v{i}")}}});
        store.merge_patch(ids::PODS, ns, name, &labels).unwrap();
        if i % 3 == 0 {
            let spec = json!({"spec": {"activeDeadlineSeconds": 100 + i}});
            let changed = store.merge_patch(ids::PODS, ns, name, &spec).unwrap();
            want.push(format!("MODIFIED {}@{}", pod.key, changed.revision));
        }
        if i % 10 == 9 {
            let deleted = store.delete(ids::PODS, ns, name).unwrap();
            want.push(format!("DELETED {}@{}", pod.key, deleted.revision));
        }
    }
    caught_up(&served).await;
    let got: Vec<String> = watch
        .events(want.len())
        .await
        .iter()
        .map(describe)
        .collect();
    assert_eq!(got, want);
}
