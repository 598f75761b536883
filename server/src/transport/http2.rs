//! HTTP/2, served over TLS when the client's ALPN asks for it (as Go's
//! server, and so kube-apiserver, serves it; plain HTTP stays HTTP/1.1).
//!
//! Its bounds, with the h2 crate's own defences named:
//! - streams open at once per connection: [`Limits::http2_max_streams_per_connection`],
//!   told to the client in SETTINGS; one beyond is refused (`RST_STREAM`
//!   `REFUSED_STREAM`);
//! - receive windows of 256 KiB a stream (kube-apiserver's
//!   `MaxUploadBufferPerStream`) and 3 MiB a connection (the largest request
//!   body, so that a connection makes kubecache hold no more unread body
//!   than an HTTP/1 one), and frames of at most 256 KiB (its
//!   `MaxReadFrameSize`);
//! - a header list of at most [`MAX_HEADER_BYTES`], as HTTP/1 heads; h2
//!   also ends a CONTINUATION flood (GOAWAY `ENHANCE_YOUR_CALM`);
//! - rapid reset: streams the client resets before kubecache took them
//!   (at most [`PENDING_ACCEPT_RESETS`] at once) and streams h2 itself had
//!   to reset ([`LOCAL_ERROR_RESETS`] over the connection's life) end the
//!   connection with GOAWAY `ENHANCE_YOUR_CALM`; a stream reset after it
//!   was taken cancels its request at once, so it costs no more than it
//!   cost the client;
//! - SETTINGS and PING floods: h2 acknowledges each before it reads the
//!   next frame, so a client that sends them without reading stops being
//!   read; one that reads the acknowledgements is ended past
//!   [`CONTROL_FRAMES`](super::h2_floods::CONTROL_FRAMES) of them in 10 s
//!   with GOAWAY `ENHANCE_YOUR_CALM` (see `h2_floods`); floods of empty
//!   DATA frames end the connection;
//! - dead peers: a PING every [`KEEP_ALIVE`] while nothing arrives; no ACK
//!   within [`KEEP_ALIVE_TIMEOUT`] closes the connection.
//!
//! A stream whose client reads nothing stalls only itself: its flow-control
//! window closes, hyper stops taking its body, and the other streams go on.
//! [`Streams`], the executor of the connection's streams, bounds that wait
//! as `stall` bounds a connection's writes: a stream whose answer has
//! waited for its client for the write-stall budget, or past its
//! [`AnswerDeadline`](super::AnswerDeadline) and its grace, is dropped,
//! which resets it (`RST_STREAM` `CANCEL`) and ends its answer (a watch);
//! the connection and its other streams are not touched.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::server::conn::http2;
use hyper_util::rt::TokioTimer;
use parking_lot::Mutex;
use tokio::time::{Instant, Sleep};

use super::stall::{Deadline, stalled_until};
use super::{Limits, MAX_BODY, MAX_HEADER_BYTES};

/// A stream's receive window, and the largest frame read: kube-apiserver's.
const STREAM_WINDOW: u32 = 256 * 1024;

/// A connection's receive window: the largest request body.
const CONNECTION_WINDOW: u32 = MAX_BODY as u32;

/// Streams the client reset before kubecache took them, at most at once
/// (h2's default, made explicit).
pub const PENDING_ACCEPT_RESETS: usize = 20;

/// Streams h2 reset for an error of the client's, at most over a
/// connection's life (hyper's default, made explicit).
pub const LOCAL_ERROR_RESETS: usize = 1024;

/// How long a connection may send nothing before kubecache pings it:
/// client-go's `ReadIdleTimeout`.
pub const KEEP_ALIVE: Duration = Duration::from_secs(30);

/// How long a ping may go unanswered before the connection is closed:
/// client-go's `PingTimeout`.
pub const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(15);

/// The HTTP/2 server of one connection, within `limits`, its streams'
/// writes bounded by `write_stall`.
pub(super) fn builder(limits: &Limits, write_stall: Duration) -> http2::Builder<Streams> {
    let streams = u32::try_from(limits.http2_max_streams_per_connection).unwrap_or(u32::MAX);
    let mut builder = http2::Builder::new(Streams { write_stall });
    builder
        .timer(TokioTimer::new())
        .max_concurrent_streams(streams)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_frame_size(STREAM_WINDOW)
        .max_header_list_size(u32::try_from(MAX_HEADER_BYTES).unwrap_or(u32::MAX))
        .max_pending_accept_reset_streams(PENDING_ACCEPT_RESETS)
        .max_local_error_reset_streams(LOCAL_ERROR_RESETS)
        .keep_alive_interval(KEEP_ALIVE)
        .keep_alive_timeout(KEEP_ALIVE_TIMEOUT);
    builder
}

tokio::task_local! {
    /// The stream whose task is running, for its request's answer.
    static STREAM: Stream;
}

/// What one stream's task knows of its answer: its deadline, and since when
/// it has waited for the client. Cheap to clone; the clones share it.
#[derive(Clone, Default)]
pub(super) struct Stream {
    deadline: Deadline,
    /// Since when the body has waited to be taken again after yielding a
    /// frame; `None` while hyper is taking it, or it is producing.
    waiting: Arc<Mutex<Option<Instant>>>,
}

impl Stream {
    /// The stream of the running task, under HTTP/2.
    pub(super) fn current() -> Option<Stream> {
        STREAM.try_with(Clone::clone).ok()
    }

    /// Where the stream's answer deadline is set.
    pub(super) fn deadline(&self) -> &Deadline {
        &self.deadline
    }

    /// The body is being polled: hyper had room for more.
    pub(super) fn polled(&self) {
        *self.waiting.lock() = None;
    }

    /// The body yielded a frame: until polled again, it waits for room.
    pub(super) fn yielded(&self) {
        *self.waiting.lock() = Some(Instant::now());
    }

    /// When the wait in progress, if any, has lasted too long.
    fn stalled_until(&self, budget: Duration) -> Option<Instant> {
        let since = (*self.waiting.lock())?;
        Some(stalled_until(since, budget, &self.deadline))
    }
}

/// The executor of a connection's streams: each in a task of its own,
/// dropped (so reset) once stalled as the [module docs](self) say.
#[derive(Clone)]
pub(super) struct Streams {
    write_stall: Duration,
}

impl<F> hyper::rt::Executor<F> for Streams
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, task: F) {
        tokio::spawn(Bounded {
            task: Box::pin(task),
            stream: Stream::default(),
            budget: self.write_stall,
            timer: None,
        });
    }
}

/// A stream's task, ended once its answer has stalled.
struct Bounded<F> {
    /// Boxed: moved by value through tokio's spawning, hyper's stream
    /// future (over a kilobyte) was copied four times, which costs more
    /// than the box.
    task: Pin<Box<F>>,
    stream: Stream,
    budget: Duration,
    /// Running while the answer waits for the client.
    timer: Option<Pin<Box<Sleep>>>,
}

impl<F: Future<Output = ()>> Future for Bounded<F> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let stream = this.stream.clone();
        if STREAM
            .sync_scope(stream, || this.task.as_mut().poll(cx))
            .is_ready()
        {
            return Poll::Ready(());
        }
        let Some(until) = this.stream.stalled_until(this.budget) else {
            this.timer = None;
            return Poll::Pending;
        };
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(until)));
        if timer.deadline() != until {
            timer.as_mut().reset(until);
        }
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => {
                tracing::debug!(
                    budget = ?this.budget,
                    "an HTTP/2 stream's client read nothing for the budget, or past its answer's deadline: reset"
                );
                Poll::Ready(())
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use axum::Router;
    use axum::body::Body;
    use axum::response::IntoResponse;
    use axum::routing::get;
    use bytes::Bytes;
    use futures::StreamExt;
    use http_body_util::{BodyExt, Empty};
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use tokio::sync::{mpsc, oneshot, watch};

    use super::super::limits::Gate;
    use super::super::stall::GRACE;
    use super::super::{AnswerDeadline, Protocol};
    use super::*;

    const BUDGET: Duration = Duration::from_secs(10);
    const DEADLINE: Duration = Duration::from_secs(3);

    /// An endless body, telling `dropped` when it is dropped.
    fn endless(dropped: oneshot::Sender<()>) -> Body {
        let chunk = Bytes::from(vec![b'x'; 16 * 1024]);
        Body::from_stream(futures::stream::repeat(chunk).map(move |chunk| {
            let _dropped = &dropped;
            Ok::<_, std::io::Error>(chunk)
        }))
    }

    /// `/endless` (bounded by the write stall), `/endless-until` (its
    /// answer ends 3 s from now), each dropped only once its stream is,
    /// `/ticks`, a line for each tick the test sends, and `/fast`.
    fn router(dropped: Vec<oneshot::Sender<()>>, ticks: mpsc::Receiver<Bytes>) -> Router {
        let dropped = Arc::new(Mutex::new(dropped));
        let ticks = Arc::new(Mutex::new(Some(ticks)));
        let take = move || dropped.lock().pop().unwrap();
        let until = take.clone();
        Router::new()
            .route("/fast", get(|| async { "fast" }))
            .route("/endless", get(move || async move { endless(take()) }))
            .route(
                "/endless-until",
                get(move || async move {
                    let mut response = endless(until()).into_response();
                    let at = Instant::now() + DEADLINE;
                    response.extensions_mut().insert(AnswerDeadline(at));
                    response
                }),
            )
            .route(
                "/ticks",
                get(move || async move {
                    let ticks = ticks.lock().take().unwrap();
                    Body::from_stream(
                        tokio_stream::wrappers::ReceiverStream::new(ticks)
                            .map(Ok::<_, std::io::Error>),
                    )
                }),
            )
    }

    type Sender = hyper::client::conn::http2::SendRequest<Empty<Bytes>>;

    async fn send(sender: &mut Sender, path: &str) -> hyper::body::Incoming {
        let request = http::Request::get(format!("https://kubecache{path}"))
            .body(Empty::new())
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        assert_eq!(response.status(), 200);
        response.into_body()
    }

    /// The next data frame of `body`.
    async fn next(body: &mut hyper::body::Incoming) -> Bytes {
        loop {
            let frame = body.frame().await.unwrap().unwrap();
            if let Ok(data) = frame.into_data() {
                return data;
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_that_is_not_read_is_reset_at_its_deadline_and_the_others_flow_on() {
        let (endless_dropped, endless_gone) = oneshot::channel();
        let (until_dropped, until_gone) = oneshot::channel();
        let (tick, ticks) = mpsc::channel(1);
        // Popped from the end: `/endless` first.
        let router = router(vec![until_dropped, endless_dropped], ticks);
        let limits = Limits::default();
        let connection = super::super::tests::connection(router, limits, BUDGET);
        let gate = Gate::new(limits);
        let peer: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let entering = gate.enter(gate.socket().await, peer.ip());
        let (_stop, mut stop) = watch::channel(false);
        let accepted = (connection.admission(peer, entering, &mut stop).await).expect("admitted");
        let (server_io, client_io) = tokio::io::duplex(1 << 20);
        let served = tokio::spawn(async move {
            connection
                .http(server_io, None, Protocol::Http2, &accepted, &mut stop)
                .await;
        });
        // Go's client's proportions: a stream's window a small part of
        // the connection's.
        let (mut sender, client) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .initial_stream_window_size(64 * 1024)
            .initial_connection_window_size(16 << 20)
            .handshake(TokioIo::new(client_io))
            .await
            .unwrap();
        let client = tokio::spawn(client);

        let started = Instant::now();
        let mut endless = send(&mut sender, "/endless").await;
        let mut until = send(&mut sender, "/endless-until").await;
        let mut ticking = send(&mut sender, "/ticks").await;
        // Neither endless stream is read; the ticks flow past them.
        for n in 0..5 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            tick.send(Bytes::from(format!("{n}\n"))).await.unwrap();
            assert_eq!(next(&mut ticking).await, format!("{n}\n"));
        }
        assert!(started.elapsed() < DEADLINE + GRACE);
        // The one with a deadline is reset just past it, the other not.
        let gone = |dropped| tokio::time::timeout(BUDGET * 2, dropped);
        gone(until_gone).await.expect("reset").unwrap_err();
        assert_eq!(started.elapsed(), DEADLINE + GRACE);
        tick.send(Bytes::from("after the deadline\n"))
            .await
            .unwrap();
        assert_eq!(next(&mut ticking).await, "after the deadline\n");
        // The other at the write-stall budget.
        gone(endless_gone).await.expect("reset").unwrap_err();
        assert_eq!(started.elapsed(), BUDGET);
        // Both as resets (what the client had buffered comes first) ...
        for body in [&mut until, &mut endless] {
            let error = loop {
                match body.frame().await {
                    Some(Ok(_)) => {}
                    Some(Err(error)) => break error,
                    None => panic!("ended without a reset"),
                }
            };
            let reason = std::error::Error::source(&error)
                .and_then(|source| source.downcast_ref::<h2::Error>())
                .and_then(h2::Error::reason);
            assert_eq!(reason, Some(h2::Reason::CANCEL), "{error:?}");
        }
        // ... on a connection that goes on serving.
        tick.send(Bytes::from("after the budget\n")).await.unwrap();
        assert_eq!(next(&mut ticking).await, "after the budget\n");
        let fast = send(&mut sender, "/fast").await;
        assert_eq!(fast.collect().await.unwrap().to_bytes(), "fast");
        assert!(!client.is_finished() && !served.is_finished());
    }
}
