//! The one error type of the HTTP API: a Kubernetes `Status`, rendered as
//! the API server renders it.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use kubecache_wire::Status;

use crate::served::encoding::Wire;

/// A failed request: its `Status` is the response body.
#[derive(Debug)]
pub struct ApiError(pub Status);

impl From<Status> for ApiError {
    fn from(status: Status) -> Self {
        ApiError(status)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        render(&self.0, Some(Wire::Json))
    }
}

/// The response of `status` encoded in `wire`, with `Retry-After` when it
/// says when to retry. `None`: as the API server writes an error it found
/// no encoding for (an `Accept` naming neither JSON nor protobuf without a
/// conversion): indented JSON without a trailing newline.
pub fn render(status: &Status, wire: Option<Wire>) -> Response {
    let code = StatusCode::from_u16(status.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let (content_type, body) = match wire {
        Some(wire) => (wire.content_type(false), wire.status(status)),
        None => (
            Wire::Json.content_type(false),
            serde_json::to_vec_pretty(status).expect("a Status serializes"),
        ),
    };
    let mut response = (code, [(header::CONTENT_TYPE, content_type)], body).into_response();
    if let Some(secs) = status.details.as_ref().and_then(|d| d.retry_after_seconds) {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, secs.into());
    }
    response
}

/// 404 for a path the server does not serve, worded as kube-apiserver words it.
pub fn no_such_path() -> ApiError {
    let mut status = Status::failure(
        404,
        "NotFound",
        "the server could not find the requested resource",
    );
    status.details = Some(Default::default());
    ApiError(status)
}

/// 405 for a method a path does not serve (a POST to `/healthz`), worded
/// as kube-apiserver words it.
pub fn method_not_allowed(method: &str) -> ApiError {
    ApiError(Status::failure(
        405,
        "MethodNotAllowed",
        format!(
            "the server does not allow this method on the requested resource: {method} is not served"
        ),
    ))
}

/// 405 for a write to the query API, which only reads.
pub fn read_only(method: &str) -> ApiError {
    ApiError(Status::failure(
        405,
        "MethodNotAllowed",
        format!(
            "the server does not allow this method on the requested resource: the query API (/v1) is read-only, {method} is not served"
        ),
    ))
}

/// 503 until the resource has synced.
pub fn not_ready(resource: &str, why: &str) -> ApiError {
    let mut status = Status::failure(
        503,
        "ServiceUnavailable",
        format!("kubecache has not synced {resource} yet: {why}"),
    );
    status.details = Some(kubecache_wire::StatusDetails {
        retry_after_seconds: Some(1),
        ..Default::default()
    });
    ApiError(status)
}
