//! Measurements behind the layout notes in the module doc. Not run by
//! default; run them alone and in release:
//!
//! ```text
//! cargo test --release -p kubecache-reflector --lib store::measure -- --ignored --nocapture --test-threads=1
//! ```

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::*;

const OBJECTS: usize = 100_000;
const PODS_PER_REPLICA_SET: usize = 3;
const NODES: usize = 1_000;
const NAMESPACES: usize = 200;

/// Resident memory of this process, from `/proc/self/statm`.
fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// A pod as a realistic workload has them: 5 labels (two shared by the pods
/// of one ReplicaSet), one owner, a node, ~2.4 KB of stripped JSON.
pub(super) fn realistic_pod(i: usize, rv: u64, status: &str) -> Arc<CachedObject> {
    let rs = i / PODS_PER_REPLICA_SET;
    let namespace = format!("team-{:03}", rs % NAMESPACES);
    let name = format!("web-{rs:06}-7d9f8c6b5-{:05x}", i * 7919 % 0xFFFFF);
    let owner = format!("0b4f5c3e-1d2a-4e6f-9a8b-{rs:012}");
    let node = format!("ip-10-0-{}-{}.ec2.internal", i % NODES / 250, i % NODES);
    let hash = format!("{:010x}", rs * 2_654_435_761 % 0xFF_FFFF_FFFF);
    let app = format!("web-{rs:06}");
    let tier = ["frontend", "backend", "cache"][rs % 3];
    let mut labels: Vec<(Box<str>, Box<str>)> = vec![
        ("app".into(), app.as_str().into()),
        ("pod-template-hash".into(), hash.as_str().into()),
        ("tier".into(), tier.into()),
        ("team".into(), namespace.as_str().into()),
        ("version".into(), format!("v{}", rs % 5).into()),
    ];
    labels.sort();
    // Shaped like a stripped pod (no managedFields); the padding stands for
    // container specs, env, volumes and status conditions.
    let json = format!(
        r#"{{"kind":"Pod","apiVersion":"v1","metadata":{{"name":"{name}","namespace":"{namespace}","uid":"{owner}-{i}","resourceVersion":"{rv}","labels":{{"app":"{app}","pod-template-hash":"{hash}","tier":"{tier}"}},"ownerReferences":[{{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"{app}-7d9f8c6b5","uid":"{owner}","controller":true}}]}},"spec":{{"nodeName":"{node}","containers":[{{"name":"app","image":"registry.example.com/web:1.2.3","resources":{{"requests":{{"cpu":"100m","memory":"128Mi"}}}},"env":"{pad}"}}]}},"status":{{"phase":"{status}"}}}}"#,
        pad = "x".repeat(1900),
    );
    Arc::new(CachedObject {
        key: ObjectKey::new(&namespace, &name),
        resource_version: rv,
        uid: format!("{owner}-{i}").into(),
        generation: None,
        labels: labels.into(),
        annotations_hash: i as u64,
        owner_uids: vec![owner.into_boxed_str()].into(),
        fields: vec![Some(node.into_boxed_str())].into(),
        json: Bytes::copy_from_slice(json.as_bytes()),
        type_meta_len: 31,
        encodings: Default::default(),
    })
}

fn config(max_events: usize) -> StoreConfig {
    StoreConfig {
        field_indexes: vec![IndexSpec {
            name: "node".into(),
            path: "spec.nodeName".into(),
        }],
        event_log: EventLogConfig {
            max_events,
            max_age: Duration::from_secs(3600),
        },
    }
}

fn per_object(bytes: usize) -> usize {
    bytes / OBJECTS
}

#[test]
#[ignore = "measurement: run alone, in release, with --nocapture"]
fn measure_memory_per_object_at_100k_realistic_pods() {
    // RSS only grows in this order, so each difference is one part's cost.
    let rss0 = rss_bytes();
    let pods: Vec<_> = (0..OBJECTS)
        .map(|i| realistic_pod(i, i as u64 + 1, "Running"))
        .collect();
    let json: usize = pods.iter().map(|p| p.json.len()).sum();
    let rss1 = rss_bytes();
    // The same keys with nothing to index (JSON shared, not copied).
    let unindexed: Vec<_> = pods
        .iter()
        .map(|p| {
            let mut bare = (**p).clone();
            bare.labels = Box::new([]);
            bare.owner_uids = Box::new([]);
            bare.fields = Box::new([None]);
            Arc::new(bare)
        })
        .collect();
    let rss2 = rss_bytes();

    let fill = |objects: &[Arc<CachedObject>], max_events| {
        let (mut writer, reader) = store(config(max_events));
        for object in objects {
            writer.apply(Change::Upsert(object.clone()));
        }
        assert_eq!(reader.snapshot().len(), OBJECTS);
        writer
    };
    // Object map and keys only; every event evicted at once.
    let map_only = fill(&unindexed, 1);
    let rss3 = rss_bytes();
    // Object map, keys and indexes.
    let indexed = fill(&pods, 1);
    let rss4 = rss_bytes();
    // Everything, with the default event log holding 100k ADDED events.
    let logged = fill(&pods, EventLogConfig::DEFAULT_MAX_EVENTS);
    let rss5 = rss_bytes();

    let map = rss3 - rss2;
    let store = rss4 - rss3;
    let log = (rss5 - rss4).saturating_sub(store);
    println!(
        "{OBJECTS} pods, {} B of JSON each on average",
        json / OBJECTS
    );
    println!(
        "CachedObject beyond its JSON: {} B/object",
        per_object((rss1 - rss0).saturating_sub(json))
    );
    println!(
        "store, object map and shared keys: {} B/object",
        per_object(map)
    );
    println!(
        "store, indexes (5 labels, 1 owner, 1 field): {} B/object",
        per_object(store - map)
    );
    println!("store, total: {} B/object", per_object(store));
    println!(
        "event log (one ADDED event per object): {} B/object",
        per_object(log)
    );
    let total = (rss1 - rss0) + store + log;
    println!(
        "objects + store + log: {} B/object beyond JSON, {:.3} x JSON",
        per_object(total.saturating_sub(json)),
        total as f64 / json as f64
    );
    black_box((&map_only, &indexed, &logged, &pods, &unindexed));
}

#[test]
#[ignore = "measurement: run alone, in release, with --nocapture"]
fn measure_apply_throughput_and_snapshot_cost_at_100k_realistic_pods() {
    let pods: Vec<_> = (0..OBJECTS)
        .map(|i| realistic_pod(i, i as u64 + 1, "Pending"))
        .collect();
    let mut in_key_order = pods.clone();
    in_key_order.sort_by(|a, b| a.key.cmp(&b.key));
    let (mut writer, _) = store(config(EventLogConfig::DEFAULT_MAX_EVENTS));
    let started = Instant::now();
    for pod in &in_key_order {
        writer.apply(Change::Upsert(pod.clone()));
    }
    report(
        "initial sync in key order, as a list delivers",
        started.elapsed(),
    );
    drop((writer, in_key_order));

    let (mut writer, reader) = store(config(EventLogConfig::DEFAULT_MAX_EVENTS));
    let started = Instant::now();
    for pod in &pods {
        writer.apply(Change::Upsert(pod.clone()));
    }
    report(
        "adds in random key order, no snapshot alive",
        started.elapsed(),
    );

    // Status-only updates (labels, owner and node unchanged), as most pod
    // updates are.
    let mut rv = OBJECTS as u64;
    let updates: Vec<_> = (0..OBJECTS)
        .map(|i| {
            rv += 1;
            realistic_pod(i * 7 % OBJECTS, rv, "Running")
        })
        .collect();
    let started = Instant::now();
    for pod in &updates {
        writer.apply(Change::Upsert(pod.clone()));
    }
    report("status updates, no snapshot alive", started.elapsed());

    let updates: Vec<_> = (0..OBJECTS)
        .map(|i| {
            rv += 1;
            realistic_pod(i * 13 % OBJECTS, rv, "Succeeded")
        })
        .collect();
    let started = Instant::now();
    for pod in &updates {
        // A reader takes a snapshot between every two changes: every change
        // copies its paths (the worst case).
        let snapshot = reader.snapshot();
        writer.apply(Change::Upsert(pod.clone()));
        black_box(snapshot);
    }
    report(
        "status updates, fresh snapshot before each",
        started.elapsed(),
    );

    // Updates that move every index value: new labels, owner and node.
    let updates: Vec<_> = (0..OBJECTS)
        .map(|i| {
            rv += 1;
            let moved = realistic_pod((i * 17 + 1) % OBJECTS, rv, "Running");
            let mut changed = (*realistic_pod(i * 11 % OBJECTS, rv, "Running")).clone();
            changed.labels = moved.labels.clone();
            changed.owner_uids = moved.owner_uids.clone();
            changed.fields = moved.fields.clone();
            Arc::new(changed)
        })
        .collect();
    let held = reader.snapshot();
    let started = Instant::now();
    for pod in &updates {
        writer.apply(Change::Upsert(pod.clone()));
    }
    report(
        "updates moving all 7 index entries, one snapshot held",
        started.elapsed(),
    );
    drop(held);

    let started = Instant::now();
    for _ in 0..1_000_000 {
        black_box(reader.snapshot());
    }
    println!(
        "snapshot: {:?} each (1M taken)",
        started.elapsed() / 1_000_000
    );

    let snapshot = reader.snapshot();
    let started = Instant::now();
    let listed = snapshot.range(None, None).count();
    println!(
        "full range scan: {:?} for {listed} objects",
        started.elapsed()
    );
    let node = snapshot.range(None, None).next().unwrap().fields[0]
        .clone()
        .unwrap();
    let lookup = IndexLookup::Field {
        name: "node",
        value: &node,
    };
    let started = Instant::now();
    let mut found = 0;
    for _ in 0..1000 {
        found = snapshot.index(lookup).count();
    }
    println!(
        "index query returning {found} of {OBJECTS}: {:?} each",
        started.elapsed() / 1000
    );
}

fn report(what: &str, elapsed: Duration) {
    println!(
        "{what}: {:.0} objects/s ({:?} each)",
        OBJECTS as f64 / elapsed.as_secs_f64(),
        elapsed / OBJECTS as u32
    );
}
