//! Pass-through: what kubecache does not answer from its caches (writes,
//! subresources, uncached resources, discovery) goes to the API server on
//! the caller's behalf, and the answer comes back unchanged.
//!
//! kubecache does not authorize these requests: the API server judges each
//! one from the credential forwarded for the caller.
//! - A bearer token is forwarded as it came, through a client that has no
//!   credentials of its own.
//! - A client certificate cannot be presented again, so the request goes
//!   with kubecache's own credentials and impersonates the certificate's
//!   user (`Impersonate-User`, `-Uid`, `-Group`, `-Extra-*`). Every
//!   `Impersonate-*` and `Authorization` header the caller sent is dropped:
//!   kept, they would let a certificate user act with kubecache's rights.
//!   A user the API server would take the headers for someone else
//!   (`system:anonymous` with its O groups only), and the API server's
//!   refusal of kubecache's own impersonation, get a 403 that says why
//!   ([`impersonation`]).
//! - No credential is forwarded as none (`system:anonymous`).
//!
//! Forwarded: the method, the path (without a `/predicates/` prefix) and
//! query, the headers minus hop-by-hop ones, and the body as it comes
//! ([`upload`]: streamed, so the API server authenticates and authorizes
//! before it is read; up to 3 MiB as kube-apiserver takes it, 413 beyond;
//! whole within a minute, 408 after; with `Expect: 100-continue`, not
//! asked for until the API server says `100 Continue`). Returned: the code, the headers
//! minus hop-by-hop ones, and the body as it streams, so a watch or a
//! `follow` log flows for as long as the API server sends it. The response
//! head must come within [`HEAD_TIMEOUT`] (504 otherwise); an API server
//! that cannot be reached gets 503. Connection upgrades (exec, attach,
//! port-forward) get 501: send them to the API server directly.

mod impersonation;
mod sockets;
mod upload;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::http::request::Parts;
use axum::http::{Method, Request, Uri};
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use kube::client::ConfigExt;
use kubecache_wire::{Encoding, Status};
use tokio::sync::Semaphore;
use tower::util::BoxCloneSyncService;
use tower::{BoxError, ServiceExt};
use upload::Upload;

pub use upload::BODY_DEADLINE;

use crate::transport::MAX_BODY;

use crate::auth::Credential;

/// Longest wait for the API server's response head. kube-apiserver answers
/// every request that is not a watch or a stream within its
/// `--request-timeout` (60 s) itself, and starts a watch or a stream at
/// once; ten seconds more are the network's. The body is not timed.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(70);

/// Headers of one connection, never forwarded (RFC 9110 section 7.6.1).
const HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// The API server, as pass-through reaches it.
#[derive(Clone)]
pub struct PassThrough {
    /// Sends with no credentials: the caller's own, if any, are in the
    /// request.
    bare: Client,
    /// Sends with kubecache's credentials, for impersonation.
    own: Client,
}

/// A client of the API server that streams a request's body.
type Client = BoxCloneSyncService<Request<Upload>, Response<Incoming>, BoxError>;

impl std::fmt::Debug for PassThrough {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PassThrough")
    }
}

/// The connections both clients may open: one permit each, shared; of
/// which each client keeps at most `idle` pooled (so that neither holds
/// every permit idle while the other waits), an idle one closed after 90 s.
struct Connections {
    permits: Arc<Semaphore>,
    idle: usize,
}

/// Which client sends a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sender {
    /// The one without credentials.
    Bare,
    /// The one with kubecache's.
    Own,
}

impl PassThrough {
    /// The API server of `config` (kubecache's own configuration): its URL
    /// and root certificates for both clients, its credentials for the
    /// impersonating one only. Neither retries or times out a read. At
    /// most `max_connections` of theirs are open at once (see [`sockets`]).
    ///
    /// # Errors
    ///
    /// The TLS or credential configuration does not load.
    pub fn new(config: &kube::Config, max_connections: usize) -> Result<Self, kube::Error> {
        let mut bare = config.clone();
        bare.auth_info = kube::config::AuthInfo::default();
        let connections = Connections {
            permits: Arc::new(Semaphore::new(max_connections)),
            idle: max_connections / 4,
        };
        Ok(PassThrough {
            bare: client(&bare, &connections)?,
            own: client(config, &connections)?,
        })
    }

    /// Sends the request of `parts` and `body` to `path` (its path and
    /// query on the API server) for a caller with `credential`; the API
    /// server's answer.
    ///
    /// # Errors
    ///
    /// A Status for what is not forwarded: an upgrade (501), a body over
    /// [`MAX_BODY`] (413) or not whole within [`BODY_DEADLINE`] (408), an
    /// API server that cannot be reached (503) or
    /// does not answer in time (504).
    pub(crate) async fn forward(
        &self,
        parts: Parts,
        body: Body,
        credential: &Credential,
        path: &str,
    ) -> Result<Response, Status> {
        let verb = crate::metrics::verb(&parts.method, &parts.uri);
        let started = Instant::now();
        let answer = self.send(parts, body, credential, path).await;
        let code = match &answer {
            Ok(response) => response.status().as_u16(),
            Err(status) => status.code,
        };
        metrics::counter!("kubecache_passthrough_requests_total", "verb" => verb, "code" => code.to_string())
            .increment(1);
        metrics::histogram!("kubecache_passthrough_duration_seconds", "verb" => verb)
            .record(started.elapsed().as_secs_f64());
        answer
    }

    async fn send(
        &self,
        parts: Parts,
        body: Body,
        credential: &Credential,
        path: &str,
    ) -> Result<Response, Status> {
        // A body declared beyond the limit is let go unread: its
        // connection closes after the answer, lingering (see
        // `transport`), as Go's server closes a connection whose unread
        // body is that large after kube-apiserver's 413.
        if declared_length(&parts.headers).is_some_and(|length| length > MAX_BODY as u64) {
            drop(body);
            return Err(upload::too_large());
        }
        // Then, so that a body refused below is read and dropped (see
        // `Upload`'s `Drop`); unless it waits for a `100 Continue`, which
        // is then not sent.
        let expecting =
            expects_continue(&parts.headers) && !hyper::body::Body::is_end_stream(&body);
        let (body, cut, expecting) = if expecting {
            let (body, cut, expecting) = Upload::expecting(body);
            (body, cut, Some(expecting))
        } else {
            let (body, cut) = Upload::new(body);
            (body, cut, None)
        };
        if is_upgrade(&parts.headers) {
            return Err(upgrade_refused());
        }
        let (headers, sender) = upstream_headers(&parts.headers, credential)?;
        let uri = upstream_uri(path)?;
        let method = parts.method;
        let mut request = Request::new(body);
        *request.method_mut() = method.clone();
        *request.uri_mut() = uri;
        *request.headers_mut() = headers;
        if let Some(expecting) = &expecting {
            expecting.on_continue(&mut request);
        }
        let client = match sender {
            Sender::Bare => &self.bare,
            Sender::Own => &self.own,
        };
        let answer = exchange(client, request).await;
        if let Some(expecting) = expecting {
            expecting.answered();
        }
        // A body cut short, not the API server, is why the exchange ended.
        if let Some(cut) = cut.get() {
            return Err(cut.status());
        }
        match (answer, credential) {
            (Ok(response), Credential::Certificate(user)) => {
                impersonation::explained(response, user.info(), &method, path).await
            }
            (answer, _) => answer,
        }
    }

    /// A `GET` of `path_and_query` (`Accept`: `accept`) as kubecache
    /// itself, with its own credentials, asked for uncompressed: the API
    /// server's answer. For documents that every caller shares (see
    /// [`crate::http`]'s discovery).
    ///
    /// # Errors
    ///
    /// An API server that cannot be reached (503) or does not answer in
    /// time (504).
    pub(crate) async fn fetch(
        &self,
        path_and_query: &str,
        accept: Option<&HeaderValue>,
    ) -> Result<Response, Status> {
        let mut request = Request::new(Upload::new(Body::empty()).0);
        *request.uri_mut() = upstream_uri(path_and_query)?;
        if let Some(accept) = accept {
            request.headers_mut().insert(header::ACCEPT, accept.clone());
        }
        exchange(&self.own, request).await
    }
}

/// `path` (with its query) as the URI of a request upstream.
fn upstream_uri(path: &str) -> Result<Uri, Status> {
    path.parse()
        .map_err(|e| Status::bad_request(format!("invalid request path: {e}")))
}

/// Sends `request` with `client`: the answer, its head within
/// [`HEAD_TIMEOUT`], without hop-by-hop headers.
async fn exchange(client: &Client, request: Request<Upload>) -> Result<Response, Status> {
    let response = tokio::time::timeout(HEAD_TIMEOUT, client.clone().oneshot(request))
        .await
        .map_err(|_| unanswered())?
        .map_err(|e| unreachable(&*e))?;
    let (mut parts, body) = response.into_parts();
    remove_hop_by_hop(&mut parts.headers);
    Ok(Response::from_parts(parts, Body::new(body)))
}

/// A client of the API server of `config` with its credentials, without
/// kube's retries and read timeout (the answer must come back as the API
/// server gave it, and a quiet watch may last), built from kube's layers
/// rather than as a `kube::Client`, whose requests carry whole bodies; its
/// connections within `connections`.
fn client(config: &kube::Config, connections: &Connections) -> Result<Client, kube::Error> {
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    let tcp = sockets::Bounded::new(tcp, connections.permits.clone());
    let connector = config.rustls_https_connector_with_connector(tcp)?;
    let http = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .pool_timer(hyper_util::rt::TokioTimer::new())
        .pool_max_idle_per_host(connections.idle)
        .build(connector);
    let service = tower::ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .map_err(BoxError::from)
        .service(http);
    Ok(BoxCloneSyncService::new(service))
}

/// The `Content-Length` a request declares, if any.
fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// The headers to send upstream for a request with `headers` from a caller
/// with `credential`, and the client to send it with.
fn upstream_headers(
    headers: &HeaderMap,
    credential: &Credential,
) -> Result<(HeaderMap, Sender), Status> {
    let mut headers = headers.clone();
    remove_hop_by_hop(&mut headers);
    // Set again: the host from the URL, the length by hyper from the
    // streamed body (exact when the client declared it, chunked
    // otherwise). `Expect: 100-continue` goes on: the body waits for the
    // API server's 100 (see `upload`); any other expectation hyper has
    // answered already.
    headers.remove(header::HOST);
    headers.remove(header::CONTENT_LENGTH);
    if !expects_continue(&headers) {
        headers.remove(header::EXPECT);
    }
    match credential {
        Credential::Token(_) => Ok((headers, Sender::Bare)),
        // Nothing to present: kube-apiserver would answer 401.
        Credential::FailedCertificate(_) => Err(Status::unauthorized()),
        Credential::Anonymous => {
            headers.remove(header::AUTHORIZATION);
            Ok((headers, Sender::Bare))
        }
        Credential::Certificate(user) => {
            headers.remove(header::AUTHORIZATION);
            let theirs: Vec<HeaderName> = headers
                .keys()
                .filter(|name| name.as_str().starts_with("impersonate-"))
                .cloned()
                .collect();
            for name in theirs {
                headers.remove(name);
            }
            impersonation::impersonate(&mut headers, user.info())?;
            Ok((headers, Sender::Own))
        }
    }
}

/// Removes the hop-by-hop headers, and those `Connection` names.
fn remove_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|name| HeaderName::try_from(name.trim()).ok())
        .collect();
    for name in named.iter().chain(&HOP_BY_HOP) {
        headers.remove(name);
    }
}

/// Whether the request waits for `100 Continue` before its body.
fn expects_continue(headers: &HeaderMap) -> bool {
    headers
        .get(header::EXPECT)
        .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"100-continue"))
}

/// Whether the request asks to switch protocols (SPDY or WebSocket for
/// exec, attach and port-forward).
fn is_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
        || headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .any(|token| token.trim().eq_ignore_ascii_case("upgrade"))
}

/// 501 for a connection upgrade.
fn upgrade_refused() -> Status {
    Status::failure(
        501,
        "NotImplemented",
        "kubecache does not pass connection upgrades through (exec, attach, port-forward): send them to the API server directly",
    )
}

/// 503 when the API server cannot be reached.
fn unreachable(error: &(dyn std::error::Error + Send + Sync)) -> Status {
    Status::service_unavailable(format!("kubecache could not reach the API server: {error}"))
}

/// 504 when the API server does not answer in time.
fn unanswered() -> Status {
    Status::failure(
        504,
        "Timeout",
        format!(
            "the API server did not answer kubecache within {} s",
            HEAD_TIMEOUT.as_secs()
        ),
    )
}

/// Largest answer to a write read whole for its resourceVersion; a larger
/// one (a deletecollection of many objects) is sent on as it comes and
/// records nothing.
const WRITTEN_LIMIT: usize = 16 * 1024 * 1024;

/// The resourceVersion a successful write answered: its object's, or a
/// deletecollection's list's (JSON or protobuf). Reads the answer whole
/// first, so that the caller can record it before the client has it; the
/// answer is returned unchanged.
pub(crate) async fn written(response: Response) -> (Response, Option<u64>) {
    let (parts, mut body) = response.into_parts();
    let mut read = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let rest = match frame {
            Ok(frame) => {
                if let Ok(data) = frame.into_data() {
                    read.extend_from_slice(&data);
                }
                if read.len() <= WRITTEN_LIMIT {
                    continue;
                }
                Body::new(body)
            }
            // Sent on as it broke off.
            Err(error) => {
                Body::from_stream(futures::stream::once(async { Err::<Bytes, _>(error) }))
            }
        };
        let head = futures::stream::once(async { Ok(read.freeze()) });
        let body = Body::from_stream(head.chain(rest.into_data_stream()));
        return (Response::from_parts(parts, body), None);
    }
    let read = read.freeze();
    let resource_version = resource_version(&parts.headers, &read);
    (
        Response::from_parts(parts, Body::from(read)),
        resource_version,
    )
}

/// `metadata.resourceVersion` of an object or list in `body`.
fn resource_version(headers: &HeaderMap, body: &[u8]) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Written {
        metadata: Metadata,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Metadata {
        resource_version: String,
    }
    let written: Written = serde_json::from_slice(&as_json(headers, body)?).ok()?;
    kubecache_wire::parse_resource_version(&written.metadata.resource_version)
}

/// An answer's `body` as JSON: as it is, or made from protobuf when its
/// `headers` say so; `None` for protobuf that does not decode.
fn as_json<'b>(headers: &HeaderMap, body: &'b [u8]) -> Option<Cow<'b, [u8]>> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    match Encoding::of_content_type(content_type) {
        Encoding::Json => Some(Cow::Borrowed(body)),
        Encoding::Protobuf => kubecache_wire::protobuf::decode_unknown(body)
            .ok()?
            .to_json()?
            .ok()
            .map(Cow::Owned),
    }
}

/// Whether `method` writes.
pub(crate) fn writes(method: &Method) -> bool {
    [Method::POST, Method::PUT, Method::PATCH, Method::DELETE].contains(method)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{BearerToken, User, UserInfo};

    fn caller_headers() -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("authorization", "Bearer theirs"),
            ("impersonate-user", "system:admin"),
            ("impersonate-group", "system:masters"),
            ("impersonate-extra-scopes", "all"),
            ("host", "kubecache:8080"),
            ("expect", "100-continue"),
            ("connection", "keep-alive, x-hop"),
            ("x-hop", "1"),
            ("content-type", "application/merge-patch+json"),
            ("accept", "application/json"),
        ] {
            headers.append(name, value.parse().unwrap());
        }
        headers
    }

    /// The values of header `name`, in order.
    pub(super) fn values<'h>(headers: &'h HeaderMap, name: &str) -> Vec<&'h str> {
        headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect()
    }

    #[test]
    fn a_certificate_user_is_impersonated_and_its_own_impersonation_dropped() {
        let user = UserInfo {
            username: "alice".into(),
            uid: "42".into(),
            groups: vec!["dev".into(), "ops".into(), "system:authenticated".into()],
            extra: [(
                "authentication.kubernetes.io/pod-name".to_string(),
                vec!["p1".to_string(), "p2".to_string()],
            )]
            .into(),
        };
        let (headers, sender) =
            upstream_headers(&caller_headers(), &Credential::Certificate(User::new(user))).unwrap();
        assert_eq!(sender, Sender::Own);
        assert!(headers.get("authorization").is_none());
        assert_eq!(values(&headers, "impersonate-user"), ["alice"]);
        assert_eq!(values(&headers, "impersonate-uid"), ["42"]);
        assert_eq!(
            values(&headers, "impersonate-group"),
            ["dev", "ops", "system:authenticated"]
        );
        assert!(headers.get("impersonate-extra-scopes").is_none());
        assert_eq!(
            values(
                &headers,
                "impersonate-extra-authentication.kubernetes.io%2fpod-name"
            ),
            ["p1", "p2"]
        );
        for gone in ["host", "connection", "x-hop"] {
            assert!(headers.get(gone).is_none(), "{gone}");
        }
        assert_eq!(values(&headers, "expect"), ["100-continue"]);
        assert_eq!(
            values(&headers, "content-type"),
            ["application/merge-patch+json"]
        );
    }

    #[test]
    fn a_token_is_forwarded_as_it_came_and_no_credential_as_none() {
        let (headers, sender) = upstream_headers(
            &caller_headers(),
            &Credential::Token(BearerToken::new("theirs")),
        )
        .unwrap();
        assert_eq!(sender, Sender::Bare);
        assert_eq!(values(&headers, "authorization"), ["Bearer theirs"]);
        assert_eq!(values(&headers, "impersonate-user"), ["system:admin"]);
        assert!(headers.get("x-hop").is_none());

        let mut basic = caller_headers();
        basic.insert("authorization", "Basic eDp5".parse().unwrap());
        let (headers, sender) = upstream_headers(&basic, &Credential::Anonymous).unwrap();
        assert_eq!(sender, Sender::Bare);
        assert!(headers.get("authorization").is_none());
    }

    #[test]
    fn a_client_certificate_that_does_not_verify_is_refused_not_forwarded() {
        let failed = Credential::FailedCertificate("expired".into());
        let status = upstream_headers(&caller_headers(), &failed).unwrap_err();
        assert_eq!((status.code, status.reason.as_str()), (401, "Unauthorized"));
    }

    #[test]
    fn an_unrepresentable_user_is_a_status_not_a_panic() {
        let user = UserInfo {
            username: "bad\nname".into(),
            ..UserInfo::default()
        };
        let status = upstream_headers(&HeaderMap::new(), &Credential::Certificate(User::new(user)))
            .unwrap_err();
        assert_eq!(status.code, 403);
    }

    #[test]
    fn upgrades_are_recognised_by_either_header() {
        let mut headers = HeaderMap::new();
        assert!(!is_upgrade(&headers));
        headers.insert("connection", "keep-alive, Upgrade".parse().unwrap());
        assert!(is_upgrade(&headers));
        let mut headers = HeaderMap::new();
        headers.insert("upgrade", "SPDY/3.1".parse().unwrap());
        assert!(is_upgrade(&headers));
    }
}
