//! Pretty and YAML answers of cached reads ([`Form`]): the compact JSON
//! answer, read whole and rewritten by the wire crate, as kube-apiserver
//! writes them for `?pretty`, curl-like User-Agents and
//! `Accept: application/yaml`. They are rare, so the compact form stays
//! the one path that makes bodies; a pretty or YAML list is held whole.

use std::future::Ready;

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use futures::future::{BoxFuture, Either};
use kubecache_wire::media::{Form, JSON};

/// `response` in `form`, when it is a JSON answer: at once when it stays
/// as it is (nearly always), else once rewritten.
pub fn restyle(
    response: Response,
    form: Form,
) -> Either<Ready<Response>, BoxFuture<'static, Response>> {
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| value == JSON);
    if form == Form::Compact || !json || !response.status().is_success() {
        return Either::Left(std::future::ready(response));
    }
    Either::Right(Box::pin(rewrite(response, form)))
}

/// The JSON answer `response` rewritten in `form`.
async fn rewrite(response: Response, form: Form) -> Response {
    let (mut parts, body) = response.into_parts();
    match axum::body::to_bytes(body, usize::MAX).await {
        Ok(compact) => {
            let headers = &mut parts.headers;
            headers.remove(header::CONTENT_LENGTH);
            let content_type = HeaderValue::from_static(form.content_type());
            headers.insert(header::CONTENT_TYPE, content_type);
            Response::from_parts(parts, Body::from(form.write(&compact)))
        }
        // Cut as the body would have been cut.
        Err(error) => {
            let failed = futures::stream::iter([Err::<bytes::Bytes, _>(error)]);
            Response::from_parts(parts, Body::from_stream(failed))
        }
    }
}
