//! Serving: kubecache's accept loop, HTTP/1 by hyper on each connection,
//! optionally over TLS ([`Tls`]), where a client that asks for HTTP/2 by
//! ALPN gets it (see `http2`: its streams, their bounds, and how a stream
//! whose client reads nothing is ended without its connection).
//!
//! The loop only accepts: each connection is served in a task of its own,
//! which does its TLS handshake (bounded by a timeout, so a client that
//! never finishes it holds only its own socket, and only for that long),
//! then serves the router, with what the connection's client certificate
//! proves on every request (in [`Connected`], judged for each request, as
//! kube-apiserver's authenticator judges it). Every accepted socket gets
//! TCP_NODELAY: each watch event is its own small write, and Nagle's
//! algorithm would hold it until the previous one is acknowledged (Go's
//! net/http, and so kube-apiserver, sets it on every connection too).
//!
//! Shutdown: when the `shutdown` future of [`Server::serve`] completes, the
//! listener is closed, handshakes in progress are dropped, idle connections
//! are closed, and requests in flight finish (a connection closes after its
//! current answer); `serve` returns when the last connection has ended.
//! Ending long answers (watches) and bounding the wait is the caller's
//! part. Dropping the `serve` future stops the same way, without waiting.
//!
//! Limits ([`Limits`]): connections in all and per client address, and
//! per address those before their first request and requests sending a
//! body (see `limits`: beyond them a connection or a body waits, unread,
//! for a place as long as a head may take, then gets a 429 `Status`, but
//! the kubelet's probes are answered); a header-read and an idle timeout per
//! connection (see `activity`: Go's, not hyper's, semantics), a body
//! waited for timed as a head (see `arriving`); request heads of at
//! most [`MAX_HEADER_BYTES`]. What hyper answers itself, with an empty
//! body (no `Status` can be put in it): 431 for a head beyond that, 414
//! for a request target beyond 65534 bytes, 400 for a request that does
//! not parse; each then closes the connection. kube-apiserver (Go's
//! net/http) answers those with a text body, not a `Status`, either.
//!
//! A connection kubecache closes after an answer lingers (see `linger`):
//! its write side shut down first, what the client still sends is read and
//! discarded for a bounded time and number of bytes, so that an answer
//! given before a request's body was read (a 413, a 429) reaches a client
//! still sending it instead of being lost to a reset. A request whose body
//! is let go unread is such an answer: its connection is closed after it
//! (by hyper), and under HTTP/1 the answer says `Connection: close`.
//!
//! Every write to a client is bounded in time: one that makes no progress
//! for the write-stall budget ([`Server::write_stall`]), or past the
//! [`AnswerDeadline`] of the response it writes, fails and closes its
//! connection (see `stall`); under HTTP/2, an answer that waits that long
//! for its client resets its stream only. The peer's address, what its
//! certificate proves and the connection's [`Recall`](crate::auth::Recall)
//! of its last authorization answers are on every request as one
//! [`Connected`].

mod activity;
mod arriving;
mod client_cert;
mod h2_floods;
mod http2;
mod limits;
mod linger;
mod stall;
mod tls;

pub use activity::BodyTimedOut;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use hyper::body::{Body as _, Incoming};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::auth::Connected;

pub use limits::{Limits, PROBES, REFUSALS, raise_descriptor_limit};
pub use stall::AnswerDeadline;
use stall::{Deadline, WriteStall};
pub use tls::{Tls, TlsError, TlsFile, TlsFiles};

use activity::{Activity, Watched};
use arriving::Arriving;
use http2::Stream;
use limits::{Entering, Gate, Refusal, Ticket};
use linger::Lingering;

use client_cert::ClientCertificate;
use h2_floods::Calmed;

/// kubecache's HTTP server: a listener, what it answers requests with,
/// and how.
pub struct Server {
    listener: TcpListener,
    answers: Answers,
    tls: Option<Tls>,
    handshake_timeout: Duration,
    limits: Limits,
    write_stall: Duration,
    linger: Duration,
}

/// What a server answers each request with, given what its connection
/// tells of it (none for a request made in-process): an axum [`Router`]
/// (which finds [`Connected`] in the request's extensions), or a function
/// of its own (kubecache's API, which calls its handler for the Kubernetes
/// API without axum's router, see [`crate::http::router`], and so needs no
/// extensions map for a request).
#[derive(Clone)]
pub struct Answers(Arc<AnswerFn>);

/// See [`Answers`].
type AnswerFn = dyn Fn(Request, Option<Connected>) -> BoxFuture<'static, Response> + Send + Sync;

impl Answers {
    /// Answers each request with `answer`.
    pub fn new(
        answer: impl Fn(Request, Option<Connected>) -> BoxFuture<'static, Response>
        + Send
        + Sync
        + 'static,
    ) -> Answers {
        Answers(Arc::new(answer))
    }

    /// The answer to `request` over `connected`.
    pub fn answer(
        &self,
        request: Request,
        connected: Option<Connected>,
    ) -> BoxFuture<'static, Response> {
        (self.0)(request, connected)
    }
}

/// Answers as a tower service, for a caller with no socket (tests,
/// benchmarks).
impl tower::Service<Request> for Answers {
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = futures::future::Map<
        BoxFuture<'static, Response>,
        fn(Response) -> Result<Response, std::convert::Infallible>,
    >;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        futures::FutureExt::map(self.answer(request, None), Ok)
    }
}

impl From<Router> for Answers {
    fn from(router: Router) -> Answers {
        Answers::new(move |mut request, connected| {
            if let Some(connected) = connected {
                request.extensions_mut().insert(connected);
            }
            let answered = tower::ServiceExt::oneshot(router.clone(), request);
            Box::pin(async move {
                match answered.await {
                    Ok(response) => response,
                    Err(never) => match never {},
                }
            })
        })
    }
}

/// The largest request head (request line and headers) served; beyond,
/// hyper answers 431. kube-apiserver allows 1 MiB; a quarter of it is many
/// times the largest token, and bounds what a slow client makes the
/// server buffer.
pub const MAX_HEADER_BYTES: usize = 256 * 1024;

/// Largest request body kubecache takes (and so forwards): kube-apiserver's
/// limit (`MaxRequestBodyBytes`, 3 MiB); HTTP/2's connection window.
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// The most headers an HTTP/1.1 request may have; beyond, hyper answers
/// 431. Go's net/http (kube-apiserver) bounds only their bytes: a recorded
/// request with 200 headers is served there (hyper's default is 100). The
/// bytes stay bounded by [`MAX_HEADER_BYTES`]. Not more: hyper fills two
/// arrays of this many entries for every request it parses (at 1,024,
/// 48 KiB: 3.5% of a GET's CPU).
pub const MAX_HEADERS: usize = 256;

/// How long a request whose body stopped arriving (see `activity`) may
/// still take to answer (a 408) before its connection is closed.
const BODY_TIMEOUT_ANSWER: Duration = Duration::from_secs(5);

impl Server {
    /// The longest a TLS handshake may take before its connection is
    /// closed: Go's `http.Transport` default (`TLSHandshakeTimeout`, which
    /// client-go uses), so a slow but honest client is never cut by it.
    pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

    /// Thirty seconds: the longest a write to a client may wait for it to
    /// read before its connection is closed. A client that reads, even
    /// slowly, never waits this long; one that stopped (hung, suspended,
    /// gone without a FIN) holds its buffers no longer than this.
    pub const WRITE_STALL: Duration = Duration::from_secs(30);

    /// Two seconds: the longest a connection closed after an answer reads
    /// what its client still sends (see `linger`). Go's server waits half
    /// a second; a client sending the rest of a 3 MiB body over a slower
    /// link than a data centre's needs more.
    pub const LINGER: Duration = Duration::from_secs(2);

    /// Serves `answers` on `listener`, in plain HTTP.
    pub fn new(listener: TcpListener, answers: impl Into<Answers>) -> Server {
        Server {
            listener,
            answers: answers.into(),
            tls: None,
            handshake_timeout: Self::HANDSHAKE_TIMEOUT,
            limits: Limits::default(),
            write_stall: Self::WRITE_STALL,
            linger: Self::LINGER,
        }
    }

    /// Serves within `limits` instead of [`Limits::default`].
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Server {
        self.limits = limits;
        self
    }

    /// Serves HTTPS with `tls` (plain HTTP with `None`).
    #[must_use]
    pub fn tls(mut self, tls: Option<Tls>) -> Server {
        self.tls = tls;
        self
    }

    /// Bounds TLS handshakes by `timeout` instead of
    /// [`Server::HANDSHAKE_TIMEOUT`].
    #[must_use]
    pub fn handshake_timeout(mut self, timeout: Duration) -> Server {
        self.handshake_timeout = timeout;
        self
    }

    /// Closes a connection whose write has made no progress for `budget`
    /// instead of [`Server::WRITE_STALL`].
    #[must_use]
    pub fn write_stall(mut self, budget: Duration) -> Server {
        self.write_stall = budget;
        self
    }

    /// Lingers at most `budget` when closing a connection after an answer
    /// instead of [`Server::LINGER`].
    #[must_use]
    pub fn linger(mut self, budget: Duration) -> Server {
        self.linger = budget;
        self
    }

    /// Accepts and serves connections until `shutdown` completes, then
    /// stops as the [module docs](self) say; returns once every connection
    /// has ended. With TLS, reloads the files while it runs.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send) {
        let Server {
            listener,
            answers,
            tls,
            handshake_timeout,
            limits,
            write_stall,
            linger,
        } = self;
        let _reloading = tls
            .clone()
            .map(|tls| AbortOnDrop(tokio::spawn(tls.reload_forever())));
        let gate = Gate::new(limits);
        let connection = Arc::new(Connection {
            answers,
            tls,
            handshake_timeout,
            limits,
            write_stall,
            linger,
        });
        // Every connection task holds a receiver: `stop` tells them to stop,
        // and its closing says that the last one has ended.
        let (stop, stopping) = watch::channel(false);
        let mut shutdown = pin!(shutdown);
        loop {
            // A socket's place first: without one, connections wait in the
            // kernel's backlog.
            let permit = tokio::select! {
                () = &mut shutdown => break,
                permit = gate.socket() => permit,
            };
            let accepted = tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => accepted,
            };
            let (stream, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(error) if is_connection_error(&error) => continue,
                Err(error) => {
                    // Out of descriptors or memory: wait for some to free
                    // up rather than spin.
                    tracing::error!(%error, "accepting a connection; retrying in 1 s");
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    }
                }
            };
            if let Err(error) = stream.set_nodelay(true) {
                tracing::debug!(%error, %peer, "TCP_NODELAY");
            }
            let entering = gate.enter(permit, peer.ip());
            tokio::spawn(
                connection
                    .clone()
                    .enter(stream, peer, entering, stopping.clone()),
            );
        }
        drop(listener);
        drop(stopping);
        stop.send_replace(true);
        stop.closed().await;
    }
}

/// What every connection task shares.
struct Connection {
    answers: Answers,
    tls: Option<Tls>,
    handshake_timeout: Duration,
    limits: Limits,
    write_stall: Duration,
    linger: Duration,
}

/// One accepted connection.
struct Accepted {
    peer: SocketAddr,
    /// Why it was refused, if it was.
    refusal: Option<Refusal>,
    /// Its place among the connections, until its task and its requests
    /// end.
    ticket: Arc<Ticket>,
    /// How long it was held before it was admitted: spent of its first
    /// head's header-read timeout.
    held: Duration,
}

impl Connection {
    /// Serves a connection once it has a place, or its refusal.
    async fn enter(
        self: Arc<Self>,
        stream: TcpStream,
        peer: SocketAddr,
        entering: Entering,
        mut stop: watch::Receiver<bool>,
    ) {
        if let Some(accepted) = self.admission(peer, entering, &mut stop).await {
            self.run(stream, accepted, stop).await;
        }
    }

    /// The connection admitted or refused, held unread until a place
    /// frees for as long as a head may take (the time held counts toward
    /// its first head's; one refused at the end of the wait has a head's
    /// time of its own to send the request its 429 answers); `None` if it
    /// is closed unanswered, or the server stops first.
    async fn admission(
        &self,
        peer: SocketAddr,
        entering: Entering,
        stop: &mut watch::Receiver<bool>,
    ) -> Option<Accepted> {
        let since = tokio::time::Instant::now();
        let entry = match entering {
            Entering::Now(entry) => entry,
            Entering::Held(waiting) => {
                let until = since + self.limits.header_read_timeout;
                tokio::select! {
                    entry = waiting.entry(until) => entry,
                    () = stopped(stop) => return None,
                }
            }
        };
        let Some((ticket, refusal)) = entry else {
            tracing::debug!(%peer, "too many connections refused at once: closed");
            return None;
        };
        Some(Accepted {
            peer,
            refusal,
            ticket: Arc::new(ticket),
            held: match refusal {
                None => since.elapsed(),
                Some(_) => Duration::ZERO,
            },
        })
    }

    /// Serves one accepted connection until it closes or, once `stop`
    /// turns true, its answer in flight is done.
    async fn run(
        self: Arc<Self>,
        stream: TcpStream,
        accepted: Accepted,
        mut stop: watch::Receiver<bool>,
    ) {
        let peer = accepted.peer;
        let Some(tls) = &self.tls else {
            return self
                .http(stream, None, Protocol::Http1, &accepted, &mut stop)
                .await;
        };
        let handshake = tokio::time::timeout(self.handshake_timeout, tls.accept(stream));
        let established = tokio::select! {
            established = handshake => established,
            () = stopped(&mut stop) => return,
        };
        match established {
            Ok(Ok((stream, certificate))) => {
                let protocol = match stream.get_ref().1.alpn_protocol() {
                    Some(b"h2") => Protocol::Http2,
                    _ => Protocol::Http1,
                };
                self.http(stream, certificate, protocol, &accepted, &mut stop)
                    .await
            }
            Ok(Err(error)) => tracing::debug!(%peer, %error, "TLS handshake failed"),
            Err(_) => {
                tracing::debug!(%peer, timeout = ?self.handshake_timeout, "TLS handshake timed out")
            }
        }
    }

    /// HTTP/1 (upgrades allowed, as `axum::serve` allows them) or HTTP/2
    /// over an established stream, what `certificate` proves on every
    /// request; a refused connection answers one request (under HTTP/2,
    /// those it sent at once), a 429 but for [`PROBES`], and so does a
    /// request with a body beyond its address's uploads, unread, closing
    /// its connection.
    async fn http<S>(
        &self,
        stream: S,
        certificate: Option<ClientCertificate>,
        protocol: Protocol,
        accepted: &Accepted,
        stop: &mut watch::Receiver<bool>,
    ) where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        let Accepted {
            peer,
            refusal,
            held,
            ..
        } = *accepted;
        let stream = Lingering::new(stream, self.linger);
        let ticket = accepted.ticket.clone();
        let limits = self.limits;
        let now = tokio::time::Instant::now();
        let activity = Activity::new(now.checked_sub(held).unwrap_or(now));
        let deadline = Deadline::default();
        let answers = self.answers.clone();
        let requests = activity.clone();
        let answer_deadline = deadline.clone();
        let recall = Arc::new(crate::auth::Recall::default());
        let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            let in_flight = requests.start();
            ticket.first_request();
            // Asked once: under HTTP/2 each asking locks the connection's
            // streams.
            let bodiless = request.body().is_end_stream();
            // Only a body still arriving can be let go, or is counted: a
            // GET's is empty.
            let let_go = (!bodiless).then(|| Arc::new(AtomicBool::new(false)));
            let (head, body) = request.into_parts();
            let mut arriving = let_go
                .clone()
                .map(|let_go| Arriving::new(body, requests.clone(), let_go));
            let connected = Connected {
                peer,
                certificate: certificate.as_ref().and_then(ClientCertificate::proves),
                recall: recall.clone(),
            };
            let answers = answers.clone();
            let answer_deadline = answer_deadline.clone();
            let ticket = ticket.clone();
            async move {
                // A body waits for its address's upload place, as long as
                // a head may take.
                let refusal = match refusal {
                    None if let Some(arriving) = arriving.as_mut() => {
                        let until = tokio::time::Instant::now() + limits.header_read_timeout;
                        match ticket.upload(until).await {
                            Some(place) => {
                                arriving.hold(place);
                                None
                            }
                            None => Some(Refusal::UploadsPerAddress),
                        }
                    }
                    refusal => refusal,
                };
                let refused =
                    refusal
                        .filter(|_| !PROBES.contains(&head.uri.path()))
                        .map(|refusal| {
                            let status = refusal.status(&limits, peer.ip());
                            let answer = crate::error::ApiError::from(status).into_response();
                            ([(hyper::header::CONNECTION, "close")], answer).into_response()
                        });
                // Polled in its stream's task under HTTP/2, whose deadline
                // it sets; in the connection's under HTTP/1.
                let stream = Stream::current();
                let mut response = match refused {
                    Some(response) => response,
                    None => {
                        let body = arriving.map_or_else(Body::empty, Body::new);
                        let request = hyper::Request::from_parts(head, body);
                        answers.answer(request, Some(connected)).await
                    }
                };
                // Its body let go unread: hyper closes the connection after
                // the answer (a lingering close), which says so, as Go's
                // server says it (HTTP/2 resets the stream alone).
                if protocol == Protocol::Http1
                    && let_go.as_ref().is_some_and(|l| l.load(Ordering::Relaxed))
                {
                    (response.headers_mut())
                        .insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
                }
                // In flight until its body is done (a watch: until it ends),
                // its writes bounded by its deadline until then.
                let deadline = stream.as_ref().map_or(&answer_deadline, Stream::deadline);
                let bound = response
                    .extensions()
                    .get::<AnswerDeadline>()
                    .map(|&AnswerDeadline(at)| deadline.set(at));
                Ok::<_, std::convert::Infallible>(
                    response.map(|body| in_flight.hold(body, bound, stream)),
                )
            }
        });
        let expired = async {
            let phase = activity
                .expired(self.limits.header_read_timeout, self.limits.idle_timeout)
                .await;
            if phase == activity::Phase::ReadingBody {
                // The request may still answer (a 408) before the close.
                activity.expire_bodies();
                tokio::time::sleep(BODY_TIMEOUT_ANSWER).await;
            }
            phase
        };
        let served = match protocol {
            Protocol::Http1 => {
                let connection = hyper::server::conn::http1::Builder::new()
                    .keep_alive(refusal.is_none())
                    // Timed by `activity` instead (see there why).
                    .header_read_timeout(None)
                    .max_header_size(MAX_HEADER_BYTES)
                    .max_headers(MAX_HEADERS)
                    .serve_connection(
                        TokioIo::new(WriteStall::new(
                            Watched::new(stream, activity.clone()),
                            self.write_stall,
                            deadline,
                        )),
                        service,
                    )
                    .with_upgrades();
                drive(connection, false, expired, stop).await
            }
            // Not `Watched`: a frame that is no request (a PING, a
            // WINDOW_UPDATE) does not start a head; the connection's first
            // request has the header-read timeout, and it is idle while it
            // has no stream open, as Go's HTTP/2 server times it.
            Protocol::Http2 => {
                let connection = http2::builder(&self.limits, self.write_stall).serve_connection(
                    TokioIo::new(WriteStall::new(
                        Calmed::new(stream),
                        self.write_stall,
                        deadline,
                    )),
                    service,
                );
                drive(connection, refusal.is_some(), expired, stop).await
            }
        };
        match served {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::debug!(%peer, %error, "connection"),
            Err(phase) => tracing::debug!(%peer, ?phase, "connection timed out: closed"),
        }
    }
}

/// What a connection speaks, by ALPN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protocol {
    Http1,
    Http2,
}

/// A connection hyper serves, of either protocol.
trait Served: Future<Output = hyper::Result<()>> {
    /// Ends it once its requests in flight are done.
    fn shut_down(self: std::pin::Pin<&mut Self>);
}

/// What hyper asks of a connection's service and its answers' bodies.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<I, S, B> Served for hyper::server::conn::http1::UpgradeableConnection<I, S>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: hyper::service::HttpService<Incoming, ResBody = B>,
    S::Error: Into<BoxError>,
    B: hyper::body::Body + 'static,
    B::Error: Into<BoxError>,
{
    fn shut_down(self: std::pin::Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

impl<I, S, B, E> Served for hyper::server::conn::http2::Connection<I, S, E>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    S: hyper::service::HttpService<Incoming, ResBody = B>,
    S::Error: Into<BoxError>,
    B: hyper::body::Body + 'static,
    B::Error: Into<BoxError>,
    E: hyper::rt::bounds::Http2ServerConnExec<S::Future, B>,
{
    fn shut_down(self: std::pin::Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

/// Serves `connection` until it ends or its phase's timeout `expired`s
/// (the phase: the connection is then dropped); once `stop` turns true,
/// or at once if `shut_down`, it is shut down gracefully.
async fn drive(
    connection: impl Served,
    shut_down: bool,
    expired: impl Future<Output = activity::Phase>,
    stop: &mut watch::Receiver<bool>,
) -> Result<hyper::Result<()>, activity::Phase> {
    let mut connection = pin!(connection);
    let mut expired = pin!(expired);
    if shut_down {
        connection.as_mut().shut_down();
    }
    tokio::select! {
        served = connection.as_mut() => return Ok(served),
        phase = expired.as_mut() => return Err(phase),
        () = stopped(stop) => connection.as_mut().shut_down(),
    }
    tokio::select! {
        served = connection => Ok(served),
        phase = expired => Err(phase),
    }
}

/// Completes once the server stops (or is dropped).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// An error of one connection, not of the listener: accept the next.
fn is_connection_error(error: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(
        error.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

/// Aborts the task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::time::Instant;

    const HEAD: Duration = Duration::from_secs(32);

    /// Plain HTTP connections serving `router` within `limits` and
    /// `write_stall`, the other settings the defaults.
    pub(super) fn connection(
        router: Router,
        limits: Limits,
        write_stall: Duration,
    ) -> Arc<Connection> {
        Arc::new(Connection {
            answers: router.into(),
            tls: None,
            handshake_timeout: Server::HANDSHAKE_TIMEOUT,
            limits,
            write_stall,
            linger: Server::LINGER,
        })
    }

    /// A connection held behind its address's one place, which sends
    /// `request` at once and whose place frees after `freed` (never:
    /// `None`): how long after its accept it was closed, and what it was
    /// answered.
    async fn held(request: &str, freed: Option<Duration>) -> (Duration, String) {
        let limits = Limits {
            header_read_timeout: HEAD,
            max_connections: 64,
            max_connections_per_address: 1,
            ..Limits::default()
        };
        let router = Router::new().route("/", axum::routing::get(|| async { "ok" }));
        let connection = connection(router, limits, Server::WRITE_STALL);
        let gate = Gate::new(limits);
        let peer = SocketAddr::from(([10, 0, 0, 1], 1));
        let Entering::Now(first) = gate.enter(gate.socket().await, peer.ip()) else {
            panic!("the first is admitted");
        };
        let entering = gate.enter(gate.socket().await, peer.ip());
        assert!(matches!(entering, Entering::Held(_)));
        let accepted = Instant::now();
        let (mut client, stream) = tokio::io::duplex(64 * 1024);
        let (_stop, mut stop) = watch::channel(false);
        tokio::spawn(async move {
            if let Some(accepted) = connection.admission(peer, entering, &mut stop).await {
                (connection.http(stream, None, Protocol::Http1, &accepted, &mut stop)).await;
            }
        });
        client.write_all(request.as_bytes()).await.unwrap();
        if let Some(freed) = freed {
            tokio::time::sleep(freed).await;
            drop(first);
        }
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).await.unwrap();
        (accepted.elapsed(), String::from_utf8(answer).unwrap())
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_connection_s_wait_counts_toward_its_first_head_s_time() {
        let request = "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        // Admitted after three quarters of a head's time: its head, sent
        // while it was held, is served ...
        let (closed, answer) = held(request, Some(HEAD * 3 / 4)).await;
        assert_eq!(closed, HEAD * 3 / 4);
        assert!(
            answer.starts_with("HTTP/1.1 200 ") && answer.ends_with("ok"),
            "{answer}"
        );
        // ... and one that sends nothing is cut a head's time after its
        // accept, not a head's time after its admission.
        let (closed, answer) = held("", Some(HEAD * 3 / 4)).await;
        assert_eq!((closed.as_secs(), answer.as_str()), (HEAD.as_secs(), ""));
        // Refused at the end of its wait: its request is still answered.
        let (closed, answer) = held(request, None).await;
        assert_eq!(closed, HEAD);
        assert!(answer.starts_with("HTTP/1.1 429 "), "{answer}");
    }
}
