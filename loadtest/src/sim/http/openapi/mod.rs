//! `/openapi/v2`, `/openapi/v3` and `/openapi/v3/{group-version}`, served
//! as kube-openapi serves them: JSON with a quoted SHA-512 `ETag` (and 304
//! for a matching `If-None-Match`), `Vary: Accept`; a group-version asked
//! for with its current `?hash=` is `Cache-Control: public, immutable` for
//! a year, with a stale one it is a 301 to the current URL. The sim has no
//! protobuf form of these documents: a request accepting only protobuf
//! gets kube-openapi's 406 for a form it does not serve.

mod documents;

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use chrono::Utc;

use super::document::Document;
use super::plain_text;
use documents::DOCUMENTS;

/// `GET /openapi/v2`.
pub async fn v2(headers: HeaderMap) -> Response {
    serve(&DOCUMENTS.v2, &headers)
}

/// `GET /openapi/v3`: the paths of the group-versions' documents.
pub async fn v3_index(headers: HeaderMap) -> Response {
    serve(&DOCUMENTS.v3_index, &headers)
}

/// `GET /openapi/v3/{path}`, e.g. `api/v1?hash=…`.
pub async fn v3(Path(path): Path<String>, uri: Uri, headers: HeaderMap) -> Response {
    let Some((_, document)) = DOCUMENTS.v3.iter().find(|(p, _)| *p == path) else {
        return plain_text(StatusCode::NOT_FOUND, "404 page not found");
    };
    let hash = form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
        .find(|(name, _)| name == "hash")
        .map(|(_, value)| value.into_owned());
    match hash {
        Some(hash) if hash != document.hash => {
            let url = format!("/openapi/v3/{path}?hash={}", document.hash);
            let body = format!("<a href=\"{url}\">Moved Permanently</a>.\n\n");
            let mut response = (StatusCode::MOVED_PERMANENTLY, body).into_response();
            let headers = response.headers_mut();
            headers.insert(header::LOCATION, value(&url));
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            );
            response
        }
        Some(_) => {
            let mut response = serve(document, &headers);
            let headers = response.headers_mut();
            headers.insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, immutable"),
            );
            let expires = Utc::now() + chrono::Months::new(12);
            headers.insert(
                header::EXPIRES,
                value(&expires.format("%a, %d %b %Y %H:%M:%S UTC").to_string()),
            );
            response
        }
        None => serve(document, &headers),
    }
}

/// The document, negotiated against `request`'s `Accept`.
fn serve(document: &Document, request: &HeaderMap) -> Response {
    if !accepts_json(request) {
        let mut response = StatusCode::NOT_ACCEPTABLE.into_response();
        response
            .headers_mut()
            .insert(header::VARY, HeaderValue::from_static("Accept"));
        return response;
    }
    document.response(request, "application/json")
}

/// Whether `Accept` (none: anything) admits `application/json`.
fn accepts_json(request: &HeaderMap) -> bool {
    let Some(accept) = request.get(header::ACCEPT) else {
        return true;
    };
    let accept = String::from_utf8_lossy(accept.as_bytes());
    accept.split(',').any(|clause| {
        let media = clause.split(';').next().unwrap_or_default().trim();
        matches!(media, "application/json" | "application/*" | "*/*")
    })
}

fn value(text: &str) -> HeaderValue {
    HeaderValue::from_str(text).expect("a URL or date is a header value")
}
