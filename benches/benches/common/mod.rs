//! What the watch fan-out benches share: realistic pods in a ready store
//! served by kubecache's real router (no sockets), and watches read
//! through it.

use std::sync::Arc;

use axum::body::Body;
use bytes::Bytes;
use http_body_util::BodyExt;
use kubecache_reflector::ReflectorStatus;
use kubecache_reflector::upstream::{ApiResource, ResourceSpec, Upstream};
use kubecache_reflector::{Change, StoreConfig, StoreWriter, store};
use kubecache_server::{Cache, Caches, PassThrough, ServeSettings};
use kubecache_wire::CachedObject;
use tower::ServiceExt;

/// A store of pods behind kubecache's router.
pub struct Served {
    /// Applies the changes the watchers get.
    pub writer: StoreWriter,
    /// kubecache's router, with no authorization.
    pub router: kubecache_server::transport::Answers,
    /// The store's resourceVersion once the pods are in.
    pub resource_version: u64,
    /// The reflector's status the cache reads, held open.
    _status: tokio::sync::watch::Sender<ReflectorStatus>,
}

/// `pods` in a ready store, served with watcher queues of `queue` events.
/// Call inside the runtime.
pub fn serve(pods: &[Arc<CachedObject>], queue: usize) -> Served {
    let (mut writer, reader) = store(StoreConfig::default());
    for pod in pods {
        writer.apply(Change::Upsert(pod.clone()));
    }
    let resource_version = reader.current_resource_version();
    writer.mark_listed(resource_version);
    writer.set_ready();
    // Never asked: watches from a resourceVersion the store holds need no
    // consistent read.
    let upstream_config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    let client = kube::Client::try_from(upstream_config.clone()).unwrap();
    let upstream = Upstream::new(client, ResourceSpec::all(ApiResource::pods()));
    let (status_tx, status) = tokio::sync::watch::channel(Default::default());
    let settings = ServeSettings {
        watcher_queue: queue,
        ..ServeSettings::default()
    };
    let cache = Cache::new(upstream, reader, status, Default::default(), &settings);
    let router = kubecache_server::router(
        Arc::new(Caches::new(vec![cache], settings)),
        Arc::new(kubecache_server::auth::Auth::None),
        PassThrough::new(
            &upstream_config,
            kubecache_server::transport::Limits::default().max_passthrough_connections,
        )
        .unwrap(),
    );
    Served {
        writer,
        router,
        resource_version,
        _status: status_tx,
    }
}

/// Opens the watch `path` (path and query) and reads it on a task of its
/// own, handing every frame of its body (one watch line each) to `each`.
pub async fn watch(
    router: &kubecache_server::transport::Answers,
    path: &str,
    mut each: impl FnMut(Bytes) + Send + 'static,
) {
    let request = axum::http::Request::get(path).body(Body::empty()).unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    assert!(
        response.status().is_success(),
        "{path}: {}",
        response.status()
    );
    tokio::spawn(async move {
        let mut body = response.into_body();
        while let Some(Ok(frame)) = body.frame().await {
            if let Ok(data) = frame.into_data() {
                each(data);
            }
        }
    });
}
