//! Discovery and OpenAPI documents answered by kubecache: `/version`,
//! `/api`, `/api/{version}`, `/apis`, `/apis/{group}`,
//! `/apis/{group}/{version}`, `/openapi/v2` and `/openapi/v3/...`.
//! kubectl and client-go read them whenever their discovery cache expires
//! (kubectl: every invocation after ten minutes, per user); passed
//! through, every one reached the API server.
//!
//! A document is fetched with kubecache's own identity the first time a
//! caller asks for it, per path (with its query) and `Accept`, so that
//! each negotiated form (legacy JSON, aggregated discovery v2 and v2beta1,
//! protobuf OpenAPI) is kept as the API server wrote it; it is served
//! byte for byte with the API server's headers (and a 304 for a matching
//! `If-None-Match`), and fetched again once older than [`FRESH_FOR`], so a
//! new CRD or API group shows within that. Only 200s are kept, at most
//! [`MAX_DOCUMENTS`] of them: any other answer is the API server's, passed
//! on as it came.
//!
//! The caller is authorized first, as kube-apiserver authorizes these
//! paths: `get` of the non-resource URL (every authenticated user through
//! the `system:discovery` binding, and `/version` anyone through
//! `system:public-info-viewer`, where the cluster grants it).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use dashmap::DashMap;
use tokio::time::Instant;

use crate::error::ApiError;
use crate::passthrough::PassThrough;

/// How long a document is served before it is fetched again.
pub const FRESH_FOR: Duration = Duration::from_secs(30);

/// Most documents kept (paths × `Accept` forms): a cluster's API groups
/// and OpenAPI paths several times over. Beyond, documents are fetched
/// and served without being kept, so that no client can grow the cache.
pub const MAX_DOCUMENTS: usize = 2048;

/// Whether a `GET` of `path` asks for a discovery or OpenAPI document.
pub fn is_document(method: &Method, path: &str) -> bool {
    if method != Method::GET {
        return false;
    }
    // Every request asks: read no further than the first segment allows
    // (only OpenAPI v3 documents are deeper than three), allocate nothing.
    let mut segments = kubecache_wire::ascii::split(path.trim_start_matches('/'), b'/');
    let first = segments.next().unwrap_or_default();
    let longest = match first {
        "version" => 1,
        "api" => 2,
        "apis" => 3,
        "openapi" => usize::MAX,
        _ => return false,
    };
    let mut rest = [""; 2];
    let mut count = 1;
    for segment in segments {
        if segment.is_empty() || count == longest {
            return false;
        }
        if let Some(slot) = rest.get_mut(count - 1) {
            *slot = segment;
        }
        count += 1;
    }
    match (first, &rest[..(count - 1).min(rest.len())]) {
        ("openapi", rest) => matches!(rest, ["v2"] | ["v3", ..]),
        _ => true,
    }
}

/// The documents kept, by path (with its query) and `Accept`.
#[derive(Default)]
pub struct Documents {
    kept: DashMap<(String, String), Arc<Document>>,
}

/// One document as the API server answered it.
struct Document {
    fetched: Instant,
    headers: HeaderMap,
    body: Bytes,
}

impl Documents {
    /// The document at `path_and_query` in the form `request_headers`
    /// accept: kept, or fetched from `upstream` with kubecache's identity.
    ///
    /// # Errors
    ///
    /// As [`PassThrough::fetch`]'s.
    pub async fn answer(
        &self,
        upstream: &PassThrough,
        path_and_query: &str,
        request_headers: &HeaderMap,
    ) -> Result<Response, ApiError> {
        let accept = request_headers.get(header::ACCEPT);
        let key = (
            path_and_query.to_string(),
            accept.map_or_else(String::new, |v| {
                String::from_utf8_lossy(v.as_bytes()).into_owned()
            }),
        );
        let kept = self.kept.get(&key).map(|kept| kept.clone());
        let document = match kept {
            Some(kept) if kept.fetched.elapsed() < FRESH_FOR => kept,
            _ => {
                let answer = upstream.fetch(path_and_query, accept).await?;
                if answer.status() != StatusCode::OK {
                    return Ok(answer);
                }
                let (parts, body) = answer.into_parts();
                let body = axum::body::to_bytes(Body::new(body), usize::MAX)
                    .await
                    .map_err(|error| {
                        kubecache_wire::Status::service_unavailable(format!(
                            "kubecache could not read {path_and_query} from the API server: {error}"
                        ))
                    })?;
                let document = Arc::new(Document {
                    fetched: Instant::now(),
                    headers: kept_headers(parts.headers),
                    body,
                });
                if self.kept.len() < MAX_DOCUMENTS || self.kept.contains_key(&key) {
                    self.kept.insert(key, document.clone());
                }
                document
            }
        };
        Ok(document.response(request_headers))
    }
}

impl Document {
    /// The answer to a request with `request_headers`: the document, or
    /// 304 when its `If-None-Match` names the document's `ETag`.
    fn response(&self, request_headers: &HeaderMap) -> Response {
        let etag = self.headers.get(header::ETAG);
        let unchanged = etag.is_some_and(|etag| {
            request_headers
                .get_all(header::IF_NONE_MATCH)
                .iter()
                .any(|asked| asked == etag)
        });
        let mut response = if unchanged {
            let mut response = Response::new(Body::empty());
            *response.status_mut() = StatusCode::NOT_MODIFIED;
            response
        } else {
            Response::new(Body::from(self.body.clone()))
        };
        response.headers_mut().extend(self.headers.clone());
        response
    }
}

/// The API server's headers worth keeping with a document: all but those
/// of its one exchange (length, date, audit ID, priority and fairness).
fn kept_headers(mut headers: HeaderMap) -> HeaderMap {
    for name in [
        header::CONTENT_LENGTH,
        header::DATE,
        header::TRANSFER_ENCODING,
    ] {
        headers.remove(name);
    }
    let exchange_only: Vec<_> = headers
        .keys()
        .filter(|name| {
            let name = name.as_str();
            name == "audit-id" || name.starts_with("x-kubernetes-pf-")
        })
        .cloned()
        .collect();
    for name in exchange_only {
        headers.remove(name);
    }
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-cache, private"));
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_and_openapi_paths_are_documents() {
        for path in [
            "/version",
            "/api",
            "/api/v1",
            "/apis",
            "/apis/apps",
            "/apis/apps/v1",
            "/openapi/v2",
            "/openapi/v3",
            "/openapi/v3/apis/apps/v1",
        ] {
            assert!(is_document(&Method::GET, path), "{path}");
        }
        for path in [
            "/api/v1/pods",
            "/api/v1/namespaces/a/pods",
            "/apis/apps/v1/deployments",
            "/apis//v1",
            "/openapi/v3/apis/apps//v1",
            "/openapi/v2/x",
            "/version/x",
            "/apis/apps/v1/x",
            "/api/v1/",
            "/apis/apps/v1/namespaces/a/deployments",
            "/api/",
            "/healthz",
            "/openapi",
        ] {
            assert!(!is_document(&Method::GET, path), "{path}");
        }
        assert!(!is_document(&Method::POST, "/api"));
    }
}
