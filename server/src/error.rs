//! The one error type of kubecache's answers: a Kubernetes `Status`,
//! rendered as the API server renders it, by the HTTP API and by serving
//! (a refused connection's 429) alike.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use kubecache_wire::{Encoding, Status};

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
        render(&self.0, Some(Encoding::Json))
    }
}

/// The response of `status` encoded in `wire`, with `Retry-After` when it
/// says when to retry. `None`: as the API server writes an error it found
/// no encoding for (an `Accept` naming neither JSON nor protobuf without a
/// conversion): indented JSON without a trailing newline.
pub fn render(status: &Status, wire: Option<Encoding>) -> Response {
    let code = StatusCode::from_u16(status.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let (content_type, body) = match wire {
        Some(wire) => (wire.content_type(false), wire.status(status)),
        None => (
            Encoding::Json.content_type(false),
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
