//! One object as the API server has it now, for the consistent GETs that
//! do not wait for a proof (see [`super::freshness`]): a list selecting it
//! by name with `limit=1`, without resourceVersion (a quorum read, sent
//! after the reads it answers arrived), as kubecache, which needs only the
//! `list` verb it already has. Requests are pipelined per object
//! ([`super::pipeline`]): each answers every read of the object waiting
//! when it was sent.
//!
//! The `limit` matters. kube-apiserver reads a list by name as one etcd
//! key (`MatchesSingle` in `registry/generic/registry/store.go`), but
//! with the ConsistentListFromCache gate (alpha in 1.28, on by default from
//! 1.31) a consistent list *without* a limit is served by the watch cache
//! once it has caught up with etcd's current revision (`Cacher.GetList`):
//! for a quiet resource that is the next progress notification, up to a
//! second (measured on a real v1.28.4 with etcd 3.4: 1,103 such lists/s
//! with a p99 of 0.94 s against 5,065 GETs/s with 20 ms). A list with a
//! limit is sent to etcd (`shouldDelegateList`), as cheap as a GET.

use std::sync::Arc;

use futures::FutureExt;
use kubecache_reflector::upstream::Query;
use kubecache_wire::{CachedObject, ObjectKey, Status};

use super::Cache;
use super::clock::unavailable;
use super::pipeline::Request;

/// The API server's answer.
#[derive(Debug, Clone)]
pub(crate) struct Fetched {
    /// Its resourceVersion when it read the object: its current one.
    pub(crate) resource_version: u64,
    /// The object, shaped by the cache's transform; `None` when there is
    /// none (within the cache's selectors, if any).
    pub(crate) object: Option<Arc<CachedObject>>,
}

/// What a fetch comes to: the answer, or why there is none.
pub(crate) type Answer = Result<Fetched, Status>;

impl Cache {
    /// The object `name` in `namespace` as the API server has it now (see
    /// the module doc).
    ///
    /// # Errors
    ///
    /// 504 when the API server cannot be asked or its answer does not
    /// decode.
    pub(crate) async fn fetch(self: &Arc<Self>, namespace: Option<&str>, name: &str) -> Answer {
        let key = ObjectKey::new(namespace.unwrap_or_default(), name);
        let upstream = self.upstream.named(namespace, name);
        let cache = self.clone();
        let request: Request<Answer> = Arc::new(move || {
            let (upstream, cache) = (upstream.clone(), cache.clone());
            async move {
                metrics::counter!("kubecache_freshness_requests_total", "kind" => "passthrough")
                    .increment(1);
                let query = Query {
                    limit: Some(1),
                    ..Query::default()
                };
                let list = upstream.list(&query).await.map_err(failure)?;
                let page = list.page().map_err(failure)?;
                let mut object = None;
                page.for_each_object(|item, strings| {
                    object = Some(cache.resource.decode(item, strings, &cache.transform)?);
                    Ok(())
                })
                .map_err(failure)?;
                Ok(Fetched {
                    resource_version: page.resource_version,
                    object,
                })
            }
            .boxed()
        });
        self.fetches
            .ask(key, request)
            .await
            .unwrap_or_else(|_| Err(failure("the request ended")))
    }
}

/// 504 for a fetch that failed, as for the clock's request.
fn failure(error: impl std::fmt::Display) -> Status {
    unavailable(&format!("its list of the object failed: {error}"))
}
