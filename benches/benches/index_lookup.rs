//! Index queries on a store of 100k realistic pods over 1,000 nodes: a label
//! `key=value` and a `spec.nodeName` value, each chosen to hold about 100
//! pods; each query walks its results and reads every object's JSON length
//! (what a response writer touches). Throughput is in queries.

use std::collections::HashMap;
use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kubecache_benches::fixtures::{ClusterShape, cached_pods, stored_pods};
use kubecache_reflector::{Change, IndexLookup, IndexSpec, Snapshot, StoreConfig, store};

/// The value held by the number of objects closest to `want` (ties: the
/// smallest value, so the choice is stable).
fn closest<'a>(counts: &HashMap<(&'a str, &'a str), usize>, want: usize) -> (&'a str, &'a str) {
    *counts
        .iter()
        .min_by_key(|(kv, n)| (n.abs_diff(want), **kv))
        .expect("some values")
        .0
}

fn query(snapshot: &Snapshot, lookup: IndexLookup<'_>) -> usize {
    snapshot.index(lookup).map(|o| o.json.len()).sum()
}

fn lookups(c: &mut Criterion) {
    let pods = cached_pods(&stored_pods(ClusterShape {
        pods: 100_000,
        namespaces: 20,
        nodes: 1_000,
    }));
    let (mut writer, reader) = store(StoreConfig {
        field_indexes: vec![IndexSpec {
            name: "node".into(),
            path: "spec.nodeName".into(),
        }],
        ..StoreConfig::default()
    });
    for pod in &pods {
        writer.apply(Change::Upsert(pod.clone()));
    }
    let mut labels = HashMap::new();
    let mut nodes = HashMap::new();
    for pod in &pods {
        for (k, v) in pod.labels.iter() {
            *labels.entry((&**k, &**v)).or_insert(0) += 1;
        }
        if let Some(node) = pod.fields[0].as_deref() {
            *nodes.entry(("node", node)).or_insert(0) += 1;
        }
    }
    let (key, value) = closest(&labels, 100);
    let (_, node) = closest(&nodes, 100);
    let snapshot = reader.snapshot();
    let label = IndexLookup::Label { key, value };
    let field = IndexLookup::Field {
        name: "node",
        value: node,
    };
    eprintln!(
        "label {key}={value}: {} of 100k pods; spec.nodeName={node}: {} of 100k pods",
        snapshot.index_len(label),
        snapshot.index_len(field)
    );

    let mut group = c.benchmark_group("index_lookup_100_of_100k");
    group.throughput(Throughput::Elements(1));
    group.bench_function("label", |b| {
        b.iter(|| black_box(query(&snapshot, black_box(label))))
    });
    group.bench_function("field_spec_nodeName", |b| {
        b.iter(|| black_box(query(&snapshot, black_box(field))))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = lookups
}
criterion_main!(benches);
