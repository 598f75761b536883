//! Watch fan-out inside kubecache: store events encoded once and delivered
//! to W watchers through the real router and watch streams (no sockets),
//! until every watcher has received every event. Realistic pods (about
//! 4 KB once managedFields are stripped), status-only updates. Throughput is
//! in deliveries (events x watchers), so the ratio between watcher counts
//! shows what one more watcher costs.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kubecache_benches::fixtures::{ClusterShape, cached_pods, status_update_batch, stored_pods};
use kubecache_reflector::Change;
use tokio::sync::Notify;

/// Events applied per measured batch.
const BATCH: u64 = 200;

fn fanout(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let pods = cached_pods(&stored_pods(ClusterShape::pods(1_000)));
    let mut group = c.benchmark_group("watch_fanout");
    for watchers in [1u64, 100, 1_000] {
        group.throughput(Throughput::Elements(BATCH * watchers));
        let _guard = runtime.enter();
        let common::Served {
            mut writer,
            router,
            resource_version: mut rv,
            ..
        } = common::serve(&pods, 4 * BATCH as usize);
        let received = Arc::new(AtomicU64::new(0));
        let progress = Arc::new(Notify::new());
        runtime.block_on(async {
            for _ in 0..watchers {
                let (received, progress) = (received.clone(), progress.clone());
                let path = format!("/api/v1/pods?watch=1&resourceVersion={rv}");
                common::watch(&router, &path, move |data| {
                    let lines = data.iter().filter(|&&b| b == b'\n').count();
                    received.fetch_add(lines as u64, Ordering::Relaxed);
                    progress.notify_one();
                })
                .await;
            }
        });
        let mut next = 0usize;
        group.bench_function(format!("{watchers}_watchers"), |b| {
            b.iter_custom(|iters| {
                let mut elapsed = Duration::ZERO;
                for _ in 0..iters {
                    let updates = status_update_batch(&pods, &mut next, &mut rv, BATCH);
                    let target = received.load(Ordering::Relaxed) + BATCH * watchers;
                    let started = Instant::now();
                    for update in updates {
                        writer.apply(Change::Upsert(update));
                    }
                    runtime.block_on(async {
                        while received.load(Ordering::Relaxed) < target {
                            let _ =
                                tokio::time::timeout(Duration::from_millis(5), progress.notified())
                                    .await;
                        }
                    });
                    elapsed += started.elapsed();
                }
                elapsed
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(5));
    targets = fanout
}
criterion_main!(benches);
