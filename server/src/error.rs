//! The one error type of kubecache's answers: a Kubernetes `Status`,
//! rendered as the API server renders it, by the HTTP API and by serving
//! (a refused connection's 429) alike.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use kubecache_wire::media::Form;
use kubecache_wire::{Encoding, Status};

/// A failed request.
#[derive(Debug)]
pub enum ApiError {
    /// A Kubernetes `Status`, the body of nearly every error. Boxed: a
    /// `Status` is 256 bytes, and every future that may fail holds room
    /// for its error.
    Status(Box<Status>),
    /// A plain-text 500, as Go's `http.Error` writes the errors that
    /// kube-apiserver's filters find before any handler (impersonating
    /// groups without a user): the message, without its final newline.
    InternalText(String),
}

impl From<Status> for ApiError {
    fn from(status: Status) -> Self {
        ApiError::Status(Box::new(status))
    }
}

impl From<Box<Status>> for ApiError {
    fn from(status: Box<Status>) -> Self {
        ApiError::Status(status)
    }
}

impl ApiError {
    /// The response: a `Status` encoded in `encoding` (see [`render`]), or
    /// the text.
    pub fn respond(&self, encoding: Option<(Encoding, Form)>) -> Response {
        match self {
            ApiError::Status(status) => render(status, encoding),
            ApiError::InternalText(message) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                [
                    (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
                    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
                ],
                format!("{message}\n"),
            )
                .into_response(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.respond(Some((Encoding::Json, Form::Compact)))
    }
}

/// The response of `status` encoded in `encoding` (JSON in its form), with
/// `Retry-After` when it says when to retry. `None`: as the API server
/// writes an error it found no encoding for (an `Accept` naming none it
/// serves without a conversion): pretty JSON.
pub fn render(status: &Status, encoding: Option<(Encoding, Form)>) -> Response {
    let code = StatusCode::from_u16(status.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let (encoding, form) = encoding.unwrap_or((Encoding::Json, Form::Pretty));
    let content_type = match encoding {
        Encoding::Json => form.content_type(),
        Encoding::Protobuf => encoding.content_type(false),
    };
    let body = encoding.status(status, form);
    let mut response = (code, [(header::CONTENT_TYPE, content_type)], body).into_response();
    if let Some(secs) = status.details.as_ref().and_then(|d| d.retry_after_seconds) {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, secs.into());
    }
    response
}
