//! What one connection is doing, for its two timeouts, as Go's
//! `http.Server` (and so kube-apiserver) times them: a request's head must
//! arrive within the header-read timeout of its first byte (of the
//! accept, for a connection's first request), and a keep-alive connection
//! may wait for its next request's first byte for the idle timeout. While a
//! request is in flight (a watch for as long as it streams) neither runs,
//! unless every request in flight waits for its body's next bytes (an
//! `Expect: 100-continue` that never sends one): that wait is timed as a
//! head is, from the last byte, so a request is not held in flight by a
//! client that sends nothing. When that runs out, the bodies waited for end
//! in [`BodyTimedOut`], so that the request can still be answered (a 408)
//! before the connection is closed.
//!
//! hyper's own `header_read_timeout` cannot be used: it starts when hyper
//! waits for a next request, so it would also cut every idle keep-alive
//! connection at the header-read timeout. Here the stream ([`Watched`])
//! says when bytes arrive, each request holds an [`InFlight`] until
//! its response body is done or dropped, and a request body waiting for
//! the client holds an [`Awaiting`].

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;
use tokio::time::Instant;

use super::http2::Stream;
use super::stall::DeadlineSet;

/// A connection's activity, shared by its stream, its requests and its
/// task.
pub(super) struct Activity(watch::Sender<State>);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct State {
    phase: Phase,
    in_flight: usize,
    /// Request bodies waiting for the client's next bytes.
    awaiting: usize,
    /// The wait for a body ran out: bodies waited for end in error.
    bodies_expired: bool,
    /// When `phase` began (for `ReadingBody`: or the last byte arrived).
    since: Instant,
}

/// Which timeout runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// Waiting for a next request, nothing of it read: the idle timeout.
    Idle,
    /// A request's head is being read: the header-read timeout.
    ReadingHead,
    /// Every request in flight waits for its body's next bytes: the
    /// header-read timeout, from the last byte.
    ReadingBody,
    /// Requests in flight: none.
    Serving,
}

impl Activity {
    /// A new connection: its first request's head is awaited, timed
    /// `since` then.
    pub(super) fn new(since: Instant) -> Arc<Activity> {
        Arc::new(Activity(watch::Sender::new(State {
            phase: Phase::ReadingHead,
            in_flight: 0,
            awaiting: 0,
            bodies_expired: false,
            since,
        })))
    }

    /// Changes the state without waking [`Activity::expired`] (see there
    /// why it need not be woken).
    fn change(&self, change: impl FnOnce(&mut State)) {
        self.0.send_if_modified(|state| {
            change(state);
            false
        });
    }

    /// Bytes arrived: an idle connection starts reading a head, a body
    /// waited for has made progress.
    fn read(&self) {
        // Most reads change nothing: look before taking the write lock.
        if matches!(self.0.borrow().phase, Phase::ReadingHead | Phase::Serving) {
            return;
        }
        self.change(|state| match state.phase {
            Phase::Idle => {
                state.phase = Phase::ReadingHead;
                state.since = Instant::now();
            }
            Phase::ReadingBody => state.since = Instant::now(),
            Phase::ReadingHead | Phase::Serving => {}
        });
    }

    /// A request body waits for the client's next bytes until the
    /// returned guard drops.
    pub(super) fn awaiting(self: &Arc<Self>) -> Awaiting {
        self.change(|state| {
            state.awaiting += 1;
            if state.in_flight > 0 && state.awaiting >= state.in_flight {
                state.phase = Phase::ReadingBody;
                state.since = Instant::now();
            }
        });
        Awaiting(self.clone())
    }

    /// The wait for a body ran out: every body waited for ends in
    /// [`BodyTimedOut`].
    pub(super) fn expire_bodies(&self) {
        self.0.send_modify(|state| state.bodies_expired = true);
    }

    /// Completes once the wait for a body has run out.
    pub(super) fn bodies_expired(&self) -> impl Future<Output = ()> + Send + Sync + 'static {
        let mut changes = self.0.subscribe();
        async move {
            let _ = changes.wait_for(|state| state.bodies_expired).await;
        }
    }

    /// A request starts; it is in flight until the returned guard drops.
    pub(super) fn start(self: &Arc<Self>) -> InFlight {
        self.change(|state| {
            state.in_flight += 1;
            state.phase = Phase::Serving;
        });
        InFlight(self.clone())
    }

    /// Completes when the timeout of the phase the connection is in has
    /// passed in that phase, with the phase.
    ///
    /// No change of phase wakes it (three a request, each a poll of the
    /// connection's task and a timer moved): every change sets a due time
    /// at least the shorter timeout away, so looking again at least that
    /// often finds each one in time, and looking when one is due finds it
    /// exactly.
    pub(super) async fn expired(&self, header_read: Duration, idle: Duration) -> Phase {
        let often = header_read.min(idle);
        loop {
            let state = *self.0.borrow();
            let now = Instant::now();
            let due = match state.phase {
                Phase::Idle => Some(state.since + idle),
                Phase::ReadingHead | Phase::ReadingBody => Some(state.since + header_read),
                Phase::Serving => None,
            };
            if due.is_some_and(|due| due <= now) {
                return state.phase;
            }
            let look = due.map_or(now + often, |due| due.min(now + often));
            tokio::time::sleep_until(look).await;
        }
    }
}

/// How a request body ends when the client sent none of its next bytes
/// within the header-read timeout (see the module doc).
#[derive(Debug, thiserror::Error)]
#[error("the request body stopped arriving: no byte within the header-read timeout")]
pub struct BodyTimedOut;

/// A request in flight; dropping it ends the request.
pub(super) struct InFlight(Arc<Activity>);

impl InFlight {
    /// `body`, holding the request in flight, and its answer deadline set,
    /// until it is done or dropped; telling its HTTP/2 `stream`, if any,
    /// when it waits for the client.
    pub(super) fn hold<B>(
        self,
        body: B,
        deadline: Option<DeadlineSet>,
        stream: Option<Stream>,
    ) -> Held<B> {
        Held {
            body,
            stream,
            _in_flight: self,
            _deadline: deadline,
        }
    }
}

/// A response body that holds its request in flight.
pub(super) struct Held<B> {
    body: B,
    stream: Option<Stream>,
    _in_flight: InFlight,
    _deadline: Option<DeadlineSet>,
}

impl<B: Body + Unpin> Body for Held<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Some(stream) = &self.stream {
            match polled {
                Poll::Ready(Some(Ok(_))) => stream.yielded(),
                _ => stream.polled(),
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.change(|state| {
            state.in_flight -= 1;
            if state.in_flight == 0 {
                state.phase = Phase::Idle;
                state.since = Instant::now();
            } else if state.awaiting >= state.in_flight {
                state.phase = Phase::ReadingBody;
                state.since = Instant::now();
            }
        });
    }
}

/// A request body waiting for the client; dropping it ends the wait.
pub(super) struct Awaiting(Arc<Activity>);

impl Drop for Awaiting {
    fn drop(&mut self) {
        self.0.change(|state| {
            state.awaiting -= 1;
            if state.phase == Phase::ReadingBody {
                state.phase = Phase::Serving;
            }
        });
    }
}

/// A stream that tells its connection's [`Activity`] when bytes arrive.
pub(super) struct Watched<S> {
    stream: S,
    activity: Arc<Activity>,
}

impl<S> Watched<S> {
    pub(super) fn new(stream: S, activity: Arc<Activity>) -> Self {
        Watched { stream, activity }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.read();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: Duration = Duration::from_secs(32);
    const IDLE: Duration = Duration::from_secs(90);

    /// Whether `expired` has completed once the paused clock is at `at`
    /// from now (nothing else changing).
    async fn expires_within(activity: &Activity, at: Duration) -> Option<Phase> {
        // Just after `at`: a timeout due at `at` has fired by then.
        let deadline = Instant::now() + at + Duration::from_millis(1);
        tokio::select! {
            phase = activity.expired(HEADER, IDLE) => Some(phase),
            () = tokio::time::sleep_until(deadline) => None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_head_is_timed_from_its_first_byte_an_idle_wait_by_the_idle_timeout_and_requests_not_at_all()
     {
        // A new connection awaits its first head.
        let activity = Activity::new(Instant::now());
        assert_eq!(
            expires_within(&activity, HEADER).await,
            Some(Phase::ReadingHead)
        );
        // In flight (a watch): never, however long.
        let activity = Activity::new(Instant::now());
        let request = activity.start();
        assert_eq!(expires_within(&activity, IDLE * 100).await, None);
        // Done: idle, for the idle timeout, not the header-read one.
        drop(request);
        assert_eq!(expires_within(&activity, HEADER * 2).await, None);
        let activity = Activity::new(Instant::now());
        drop(activity.start());
        assert_eq!(expires_within(&activity, IDLE).await, Some(Phase::Idle));
        // A byte of a next request: its head has the header-read timeout
        // from then.
        let activity = Activity::new(Instant::now());
        drop(activity.start());
        tokio::time::advance(IDLE / 2).await;
        activity.read();
        assert_eq!(expires_within(&activity, HEADER / 2).await, None);
        assert_eq!(
            expires_within(&activity, HEADER).await,
            Some(Phase::ReadingHead)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_during_a_wait_is_timed_exactly_though_it_wakes_nothing() {
        // Idle for half the idle timeout, then a head begins: it is cut
        // the header-read timeout after its first byte, not at the end
        // of the idle wait the watcher slept towards.
        let activity = Activity::new(Instant::now());
        drop(activity.start());
        let start = Instant::now();
        let expired = activity.expired(HEADER, IDLE);
        tokio::pin!(expired);
        tokio::select! {
            phase = &mut expired => panic!("expired idle at once: {phase:?}"),
            () = tokio::time::sleep(IDLE / 2) => {}
        }
        activity.read();
        assert_eq!(expired.await, Phase::ReadingHead);
        let took = start.elapsed();
        let exact = IDLE / 2 + HEADER;
        assert!(
            took >= exact && took <= exact + Duration::from_millis(1),
            "{took:?}"
        );
        // A watch that streams for hours, then ends: idle from its end.
        let activity = Activity::new(Instant::now());
        let watch = activity.start();
        let expired = activity.expired(HEADER, IDLE);
        tokio::pin!(expired);
        tokio::select! {
            phase = &mut expired => panic!("expired while serving: {phase:?}"),
            () = tokio::time::sleep(IDLE * 100 + HEADER / 3) => {}
        }
        let ended = Instant::now();
        drop(watch);
        assert_eq!(expired.await, Phase::Idle);
        let took = ended.elapsed();
        assert!(
            took >= IDLE && took <= IDLE + Duration::from_millis(1),
            "{took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_waiting_for_its_body_is_timed_as_a_head_from_its_last_byte() {
        let activity = Activity::new(Instant::now());
        let request = activity.start();
        let waiting = activity.awaiting();
        tokio::time::advance(HEADER / 2).await;
        activity.read();
        assert_eq!(expires_within(&activity, HEADER / 2).await, None);
        assert_eq!(
            expires_within(&activity, HEADER).await,
            Some(Phase::ReadingBody)
        );
        // Its body arrived: in flight again, never timed.
        drop(waiting);
        assert_eq!(expires_within(&activity, IDLE * 100).await, None);
        drop(request);
        assert_eq!(expires_within(&activity, IDLE).await, Some(Phase::Idle));
    }
}
