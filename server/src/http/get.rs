//! Gets: `GET` of one cached object.
//!
//! Its `resourceVersion`, as for a list (see [`super::list`]): unset, a
//! consistent read, except that a GET the store cannot prove fresh at once
//! is answered by the API server's copy of the object instead, read as
//! kubecache and shared by every such read of it waiting when it is asked
//! for ([`crate::cacher::fetch`]; unless `--cold-get-passthrough=false`),
//! and that the writer's next read after its write waits for that write
//! only; `0`, the store as it is; `N`, the store once it has reached `N`.
//! An object the API server answers (that copy, or the caller's own GET of
//! one a selector-restricted cache does not hold, [`from_upstream`]) is
//! shaped as the cache shapes its own.
//!
//! The answer is the object (with its own resourceVersion; a Table of it
//! too, as kube-apiserver's); the `X-Kubecache-Resource-Version` header
//! says the resourceVersion it was served at, as a list's does: the
//! proven or asked one when newer than the snapshot's (see [`super::list`]).

use std::sync::Arc;

use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use kubecache_wire::{CachedObject, Encoding, Status, decode_object, media, protobuf};

use super::bodies::{self, RESOURCE_VERSION_HEADER, response};
use super::negotiate::Rendering;
use super::table::{self, TableMeta};
use crate::auth::Credential;
use crate::cacher::fetch::Fetched;
use crate::cacher::freshness::Consistent;
use crate::cacher::{Cache, Caches};
use crate::error::ApiError;
use crate::passthrough::PassThrough;

/// What a read of a cache came to.
pub(super) enum Answer {
    /// Served from the cache.
    Served(Response),
    /// A GET the API server answers, rendered so: a consistent GET of one
    /// object the cache could not prove fresh at once (see
    /// [`crate::cacher::freshness`]; consistent by construction,
    /// and authorized all the same), or of an object a selector-restricted
    /// cache does not hold (it may exist outside the selectors).
    Upstream(Rendering),
}

/// `GET` of the object `name` in `namespace` at `resource_version`;
/// `own_write`: the client's first read after its write, which needs no
/// consistent read.
pub async fn serve(
    caches: &Caches,
    cache: &Arc<Cache>,
    namespace: Option<&str>,
    name: &str,
    resource_version: Option<u64>,
    rendering: Rendering,
    own_write: bool,
) -> Result<Answer, ApiError> {
    let wait = caches.settings.read_wait;
    // The resourceVersion waited for (0: none).
    let waited = match resource_version {
        None if own_write => 0,
        // The waits are boxed: a GET at `0`, or the writer's own, awaits
        // nothing, and its future stays small.
        None => match Box::pin(caches.consistent_get(cache, namespace, name)).await? {
            Consistent::Proven(rv) => rv,
            Consistent::Fetched(Fetched {
                object: Some(object),
                ..
            }) => {
                let rv = object.resource_version;
                let mut response = render(cache, &object, rendering, rv)?;
                // Not served at a state of the cache.
                response.headers_mut().remove(&RESOURCE_VERSION_HEADER);
                return Ok(Answer::Served(response));
            }
            Consistent::Fetched(Fetched { object: None, .. }) => {
                return missing(cache, name, rendering);
            }
        },
        Some(0) => 0,
        Some(rv) => {
            Box::pin(cache.freshness.not_older_than(rv, wait)).await?;
            rv
        }
    };
    let snapshot = cache.reader.snapshot();
    let Some(object) = snapshot.get_named(namespace.unwrap_or_default(), name) else {
        return missing(cache, name, rendering);
    };
    let served_at = snapshot.resource_version().max(waited);
    render(cache, object, rendering, served_at).map(Answer::Served)
}

/// The answer for an object `cache` does not hold: asked of the API server
/// by its caller when the cache holds only some objects (it may exist
/// outside the cache's selectors), else the API server's 404.
fn missing(cache: &Cache, name: &str, rendering: Rendering) -> Result<Answer, ApiError> {
    if cache.scope.selects() {
        return Ok(Answer::Upstream(rendering));
    }
    let resource = &cache.resource;
    Err(Status::not_found(&resource.group, &resource.plural, name).into())
}

/// The GET of `path` by `credential` that the API server answers for
/// `cache`'s client ([`Answer::Upstream`]): asked for in JSON (in protobuf
/// when it is answered in protobuf and the kind has it, so that the bytes
/// of strings that are not UTF-8 are kept), shaped by the cache's
/// transform and rendered as negotiated, so that a client sees one shape
/// of an object whether the cache or the API server answered
/// (`managedFields` are not there, then there). Its errors are the API
/// server's; an object that does not decode is a 502.
pub async fn from_upstream(
    upstream: &PassThrough,
    cache: &Cache,
    mut parts: Parts,
    credential: &Credential,
    path: &str,
    rendering: Rendering,
) -> Result<Response, ApiError> {
    let protobuf = rendering.encoding() == Encoding::Protobuf && cache.kind.protobuf.is_some();
    let accept = if protobuf {
        HeaderValue::from_static("application/vnd.kubernetes.protobuf, application/json")
    } else {
        HeaderValue::from_static(media::JSON)
    };
    parts.headers.insert(header::ACCEPT, accept);
    parts.headers.remove(header::ACCEPT_ENCODING);
    let response = upstream
        .forward(parts, Body::empty(), credential, path)
        .await?;
    let (head, body) = response.into_parts();
    let body = axum::body::to_bytes(body, MAX_OBJECT)
        .await
        .map_err(|error| unreadable(cache, error))?;
    let encoding = Encoding::of_content_type(
        head.headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
    );
    // The object (or Status) as JSON, and its strings' bytes.
    let (json, strings) = match encoding {
        Encoding::Json => (body.to_vec(), None),
        Encoding::Protobuf => match protobuf::decode_unknown(&body)
            .ok()
            .and_then(|unknown| unknown.to_json_with_strings())
        {
            Some(Ok(read)) => read,
            Some(Err(error)) if head.status.is_success() => {
                return Err(unreadable(cache, error).into());
            }
            _ => (body.to_vec(), None),
        },
    };
    if !head.status.is_success() {
        return match serde_json::from_slice::<Status>(&json) {
            Ok(status) => Err(status.into()),
            Err(_) => Ok(Response::from_parts(head, Body::from(body))),
        };
    }
    let resource = &cache.resource;
    let object = decode_object(
        &json,
        &resource.kind,
        &resource.api_version(),
        &cache.transform,
    )
    .map_err(|error| unreadable(cache, error))?
    .with_raw_strings(strings);
    let resource_version = object.resource_version;
    let mut response = render(cache, &Arc::new(object), rendering, resource_version)?;
    // Not served at a state of the cache.
    response.headers_mut().remove(&RESOURCE_VERSION_HEADER);
    Ok(response)
}

/// Largest object read from the API server: etcd stores at most about
/// 1.5 MiB (its `--max-request-bytes`).
const MAX_OBJECT: usize = 16 * 1024 * 1024;

/// 502 for an object the API server sent that kubecache cannot read.
fn unreadable(cache: &Cache, error: impl std::fmt::Display) -> Status {
    Status::failure(
        502,
        "BadGateway",
        format!(
            "kubecache cannot read the API server's {}: {error}",
            cache.name()
        ),
    )
}

/// The 200 answer of `object`, read at `resource_version`, as negotiated.
fn render(
    cache: &Cache,
    object: &Arc<CachedObject>,
    rendering: Rendering,
    resource_version: u64,
) -> Result<Response, ApiError> {
    let (body, encoding) = match rendering {
        Rendering::Encoded(shape, encoding) => (
            bodies::object(&cache.kind, object, shape, encoding)?,
            encoding,
        ),
        Rendering::Table { version, include } => (
            table::render(
                &cache.resource,
                version,
                include,
                // A table of one object is at the object's resourceVersion.
                &TableMeta {
                    resource_version: Some(object.resource_version),
                    ..TableMeta::default()
                },
                std::slice::from_ref(object),
                chrono::Utc::now(),
            ),
            Encoding::Json,
        ),
    };
    Ok(response(
        Body::from(body),
        resource_version,
        encoding,
        false,
    ))
}
