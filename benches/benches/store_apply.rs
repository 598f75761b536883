//! The store's writer: an initial load of N realistic pods in key order (as
//! a list delivers them, then `mark_listed`), and status-only updates of a
//! loaded store of 100k pods (same labels, owners and node: the indexes do
//! not move). Indexes: the built-in ones plus a field index on
//! `spec.nodeName`. Every applied change also goes to the event log, as in
//! kubecache. Throughput is in objects.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use kubecache_benches::fixtures::{ClusterShape, cached_pods, status_update_batch, stored_pods};
use kubecache_reflector::{Change, IndexSpec, StoreConfig, StoreReader, StoreWriter, store};
use kubecache_wire::CachedObject;

fn config() -> StoreConfig {
    StoreConfig {
        field_indexes: vec![IndexSpec {
            name: "node".into(),
            path: "spec.nodeName".into(),
        }],
        ..StoreConfig::default()
    }
}

fn load(pods: &[Arc<CachedObject>]) -> (StoreWriter, StoreReader) {
    let (mut writer, reader) = store(config());
    for pod in pods {
        writer.apply(Change::Upsert(pod.clone()));
    }
    let rv = pods.iter().map(|p| p.resource_version).max().unwrap_or(0);
    writer.mark_listed(rv);
    (writer, reader)
}

fn initial_load(c: &mut Criterion) {
    let mut group = c.benchmark_group("store_initial_load");
    for n in [10_000, 100_000] {
        let pods = cached_pods(&stored_pods(ClusterShape::pods(n)));
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(format!("{n}_pods"), |b| {
            // The loaded store is dropped outside the measurement.
            b.iter_batched(|| (), |()| load(&pods), BatchSize::PerIteration)
        });
    }
    group.finish();
}

fn status_updates(c: &mut Criterion) {
    let n = 100_000;
    let pods = cached_pods(&stored_pods(ClusterShape::pods(n)));
    let (mut writer, reader) = load(&pods);
    let mut rv = reader.current_resource_version();
    let mut next = 0usize;
    let mut group = c.benchmark_group("store_status_update");
    group.throughput(Throughput::Elements(1));
    group.bench_function("one_of_100k_pods", |b| {
        b.iter_custom(|iters| {
            // New versions of the next pods in turn, made before the clock
            // starts: a status change keeps labels, owners and fields.
            let updates = status_update_batch(&pods, &mut next, &mut rv, iters);
            let started = Instant::now();
            for update in updates {
                writer.apply(Change::Upsert(update));
            }
            started.elapsed()
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(5));
    targets = initial_load, status_updates
}
criterion_main!(benches);
