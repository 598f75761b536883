//! A document the sim serves whole (an OpenAPI or aggregated discovery
//! document): its bytes and their hash, the quoted `ETag` it is served
//! with, as kube-apiserver serves them.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::Value;

/// A document's bytes and its hash: upper-case hex SHA-512, kube-openapi's
/// and aggregated discovery's `ETag` (and OpenAPI v3's `?hash=`).
pub struct Document {
    pub body: Bytes,
    pub hash: String,
}

impl Document {
    /// `document` as Go's `json.Marshal` writes it (no trailing newline).
    pub fn new(document: &Value) -> Document {
        let body = serde_json::to_vec(document).expect("a JSON value serializes");
        let digest = ring::digest::digest(&ring::digest::SHA512, &body);
        let hash = digest.as_ref().iter().map(|b| format!("{b:02X}")).collect();
        Document {
            body: body.into(),
            hash,
        }
    }

    /// The answer to a request with `request` headers: the document as
    /// `content_type`, or 304 when `If-None-Match` names its `ETag`; both
    /// `Vary: Accept`.
    pub fn response(&self, request: &HeaderMap, content_type: &'static str) -> Response {
        let etag = format!("\"{}\"", self.hash);
        let unchanged = request
            .get_all(header::IF_NONE_MATCH)
            .iter()
            .any(|asked| asked.as_bytes() == etag.as_bytes());
        let mut response = if unchanged {
            StatusCode::NOT_MODIFIED.into_response()
        } else {
            let mut response = Response::new(Body::from(self.body.clone()));
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
            response
        };
        let headers = response.headers_mut();
        headers.insert(header::VARY, HeaderValue::from_static("Accept"));
        headers.insert(
            header::ETAG,
            HeaderValue::from_str(&etag).expect("hex is a header value"),
        );
        response
    }
}
