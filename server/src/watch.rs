//! Watch fan-out (being built; see the helper's branch).

use std::sync::Arc;

use axum::response::Response;
use kubecache_reflector::Status;
use kubecache_reflector::list_options::CollectionParams;

use crate::api::ApiError;
use crate::cache::{Cache, Caches};
use crate::{Filter, Predicates};

/// A watch of `cache`.
pub(crate) async fn serve(
    _caches: &Caches,
    _cache: &Arc<Cache>,
    _filter: Filter,
    _params: CollectionParams,
    _predicates: Predicates,
) -> Result<Response, ApiError> {
    Err(Status::failure(501, "NotImplemented", "watch is not served yet").into())
}
