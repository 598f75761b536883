//! Pretty JSON and YAML, as kube-apiserver writes them: for `?pretty`
//! and curl-like User-Agents ([`pretty::asked`]) and for
//! `Accept: application/yaml`, a read's JSON answer ([`read`]) and every
//! JSON error `Status` are rewritten whole by the wire crate's [`Form`],
//! the one implementation kubecache (its `restyle`) and the sim share. A
//! watch is never rewritten (a YAML one is refused before it starts).

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use kubecache_wire::media::{Form, JSON};
use kubecache_wire::pretty;

use crate::sim::encoding::{self, ErrorForm};

/// Marks a read's answer (not a watch's): YAML when `yaml` was negotiated.
#[derive(Clone, Copy)]
struct Read {
    yaml: bool,
}

/// `response`, a get's or a list's, marked to be rewritten.
pub fn read(mut response: Response, yaml: bool) -> Response {
    response.extensions_mut().insert(Read { yaml });
    response
}

/// The middleware: rewrites marked reads and JSON errors in the form the
/// request asks for.
pub async fn layer(request: Request, next: Next) -> Response {
    let (pretty, yaml_errors) = {
        let header = |name| request.headers().get(name).and_then(|v| v.to_str().ok());
        let query = request.uri().query().unwrap_or_default();
        (
            pretty::asked(query, header(header::USER_AGENT)),
            encoding::for_status(header(header::ACCEPT)) == ErrorForm::Yaml,
        )
    };
    let response = next.run(request).await;
    let form = match response.extensions().get::<Read>() {
        Some(read) => Form::of(read.yaml, pretty),
        None if response.status().is_success() => return response,
        None => Form::of(yaml_errors, pretty),
    };
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| value == JSON);
    if form == Form::Compact || !json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let compact = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(compact) => compact,
        // A body cut short (an injected fault) fails as it would have.
        Err(error) => {
            let failed = futures::stream::iter([Err::<bytes::Bytes, _>(error)]);
            return Response::from_parts(parts, Body::from_stream(failed));
        }
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    let content_type = HeaderValue::from_static(form.content_type());
    parts.headers.insert(header::CONTENT_TYPE, content_type);
    Response::from_parts(parts, Body::from(form.write(&compact)))
}
