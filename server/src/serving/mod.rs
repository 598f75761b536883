//! Serving: kubecache's accept loop, HTTP/1 by hyper on each connection,
//! optionally over TLS ([`Tls`]).
//!
//! The loop only accepts: each connection is served in a task of its own,
//! which does its TLS handshake (bounded by a timeout, so a client that
//! never finishes it holds only its own socket, and only for that long),
//! then serves the router, with the user of a verified client certificate
//! on every request as [`PeerCertificate`]. Every accepted socket gets
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
//! Where limits go: a bound on connections is a permit taken in the loop
//! before `accept` and held by the connection's task; per-connection
//! timeouts (header read, idle) are settings of the HTTP/1 builder in
//! `Connection::http`.

mod tls;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub use tls::{Tls, TlsError, TlsFile, TlsFiles};

use crate::auth::{PeerCertificate, User};

/// kubecache's HTTP server: a listener, the router it serves, and how.
pub struct Server {
    listener: TcpListener,
    router: Router,
    tls: Option<Tls>,
    handshake_timeout: Duration,
}

impl Server {
    /// The longest a TLS handshake may take before its connection is
    /// closed: Go's `http.Transport` default (`TLSHandshakeTimeout`, which
    /// client-go uses), so a slow but honest client is never cut by it.
    pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

    /// Serves `router` on `listener`, in plain HTTP.
    pub fn new(listener: TcpListener, router: Router) -> Server {
        Server {
            listener,
            router,
            tls: None,
            handshake_timeout: Self::HANDSHAKE_TIMEOUT,
        }
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

    /// Accepts and serves connections until `shutdown` completes, then
    /// stops as the [module docs](self) say; returns once every connection
    /// has ended. With TLS, reloads the files while it runs.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send) {
        let Server {
            listener,
            router,
            tls,
            handshake_timeout,
        } = self;
        let _reloading = tls
            .clone()
            .map(|tls| AbortOnDrop(tokio::spawn(tls.reload_forever())));
        let connection = Arc::new(Connection {
            router,
            tls,
            handshake_timeout,
        });
        // Every connection task holds a receiver: `stop` tells them to stop,
        // and its closing says that the last one has ended.
        let (stop, stopping) = watch::channel(false);
        let mut shutdown = pin!(shutdown);
        loop {
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
            tokio::spawn(connection.clone().run(stream, peer, stopping.clone()));
        }
        drop(listener);
        drop(stopping);
        stop.send_replace(true);
        stop.closed().await;
    }
}

/// What every connection task shares.
struct Connection {
    router: Router,
    tls: Option<Tls>,
    handshake_timeout: Duration,
}

impl Connection {
    /// Serves one accepted connection until it closes or, once `stop`
    /// turns true, its answer in flight is done.
    async fn run(
        self: Arc<Self>,
        stream: TcpStream,
        peer: SocketAddr,
        mut stop: watch::Receiver<bool>,
    ) {
        let Some(tls) = &self.tls else {
            return self.http(stream, None, &mut stop).await;
        };
        let handshake = tokio::time::timeout(self.handshake_timeout, tls.accept(stream));
        let established = tokio::select! {
            established = handshake => established,
            () = stopped(&mut stop) => return,
        };
        match established {
            Ok(Ok((stream, user))) => self.http(stream, user, &mut stop).await,
            Ok(Err(error)) => tracing::debug!(%peer, %error, "TLS handshake failed"),
            Err(_) => {
                tracing::debug!(%peer, timeout = ?self.handshake_timeout, "TLS handshake timed out")
            }
        }
    }

    /// HTTP/1 over an established stream (upgrades allowed, as
    /// `axum::serve` allows them), `user` on every request.
    async fn http<S>(&self, stream: S, user: Option<Arc<User>>, stop: &mut watch::Receiver<bool>)
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        let router = self.router.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            if let Some(user) = &user {
                request
                    .extensions_mut()
                    .insert(PeerCertificate(user.clone()));
            }
            tower::ServiceExt::oneshot(router.clone(), request)
        });
        let connection = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(stream), service)
            .with_upgrades();
        let mut connection = pin!(connection);
        let served = tokio::select! {
            served = connection.as_mut() => served,
            () = stopped(stop) => {
                connection.as_mut().graceful_shutdown();
                connection.await
            }
        };
        if let Err(error) = served {
            tracing::debug!(%error, "connection");
        }
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
