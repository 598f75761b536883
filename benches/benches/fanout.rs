//! Watch fan-out inside kubecache: store events encoded once and delivered
//! to W watchers through the real router and watch streams (no sockets),
//! until every watcher has received every event. Realistic pods (about
//! 4 KB once managedFields are stripped), status-only updates. Throughput is
//! in deliveries (events x watchers), so the ratio between watcher counts
//! shows what one more watcher costs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use http_body_util::BodyExt;
use kubecache_benches::fixtures::{ClusterShape, cached_pods, status_update_batch, stored_pods};
use kubecache_reflector::upstream::{ApiResource, ResourceSpec, Upstream};
use kubecache_reflector::{Change, StoreConfig, store};
use kubecache_server::{Cache, Caches, PassThrough, ServeSettings};
use tokio::sync::Notify;
use tower::ServiceExt;

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
        let (mut writer, reader) = store(StoreConfig::default());
        for pod in &pods {
            writer.apply(Change::Upsert(pod.clone()));
        }
        let mut rv = reader.current_resource_version();
        writer.mark_listed(rv);
        writer.set_ready();
        // Never asked: watches from a resourceVersion the store holds need
        // no consistent read.
        let upstream_config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(upstream_config.clone()).unwrap();
        let upstream = Upstream::new(client, ResourceSpec::all(ApiResource::pods()));
        let (_status_tx, status) = tokio::sync::watch::channel(Default::default());
        let settings = ServeSettings {
            watcher_queue: 4 * BATCH as usize,
            ..ServeSettings::default()
        };
        let cache = Cache::new(upstream, reader, status, Default::default(), &settings);
        let router = kubecache_server::router(
            Arc::new(Caches::new(vec![cache], settings)),
            Arc::new(kubecache_server::auth::Auth::None),
            PassThrough::new(&upstream_config).unwrap(),
        );
        let received = Arc::new(AtomicU64::new(0));
        let progress = Arc::new(Notify::new());
        runtime.block_on(async {
            for _ in 0..watchers {
                let request =
                    axum::http::Request::get(format!("/api/v1/pods?watch=1&resourceVersion={rv}"))
                        .body(Body::empty())
                        .unwrap();
                let response = router.clone().oneshot(request).await.unwrap();
                assert!(response.status().is_success());
                let (received, progress) = (received.clone(), progress.clone());
                tokio::spawn(async move {
                    let mut body = response.into_body();
                    while let Some(Ok(frame)) = body.frame().await {
                        if let Ok(data) = frame.into_data() {
                            let lines = data.iter().filter(|&&b| b == b'\n').count();
                            received.fetch_add(lines as u64, Ordering::Relaxed);
                            progress.notify_one();
                        }
                    }
                });
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
