//! A request body on its way from the client, as the connection counts it:
//! it holds its address's upload place (see `limits`) until it has all
//! arrived or is dropped, and while its reader waits for the client's next
//! bytes it tells the connection's activity, which then times the wait as
//! it times a request head (see `activity`). Dropped before its end, it
//! says so: its rest unread, the connection closes after the answer.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use hyper::body::{Body, Frame, Incoming, SizeHint};

use super::BoxError;
use super::activity::{Activity, Awaiting, BodyTimedOut};
use super::limits::UploadPlace;

/// Completes when the connection's wait for a body runs out.
type Expiry = Pin<Box<dyn Future<Output = ()> + Send + Sync>>;

/// A request's body, counted.
pub(super) struct Arriving {
    body: Incoming,
    activity: Arc<Activity>,
    /// While its reader waits for the client: the wait, and when it runs
    /// out.
    waiting: Option<(Awaiting, Expiry)>,
    /// Until its last byte (none for a request without a body).
    place: Option<UploadPlace>,
    /// Its end was read.
    ended: bool,
    /// Set if it is dropped before its end.
    let_go: Arc<AtomicBool>,
}

impl Arriving {
    /// `body`, still arriving (a body that has ended on arrival is read as
    /// empty, with none of this), which sets `let_go` if it is dropped
    /// before its end.
    pub(super) fn new(body: Incoming, activity: Arc<Activity>, let_go: Arc<AtomicBool>) -> Self {
        Arriving {
            body,
            activity,
            waiting: None,
            place: None,
            ended: false,
            let_go,
        }
    }

    /// Holds `place` until its last byte.
    pub(super) fn hold(&mut self, place: UploadPlace) {
        self.place = Some(place);
    }
}

impl Body for Arriving {
    type Data = bytes::Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        if polled.is_pending() {
            let (_, expired) = this.waiting.get_or_insert_with(|| {
                let expired = Box::pin(this.activity.bodies_expired());
                (this.activity.awaiting(), expired)
            });
            if expired.as_mut().poll(cx).is_ready() {
                this.waiting = None;
                this.place = None;
                return Poll::Ready(Some(Err(BodyTimedOut.into())));
            }
            return Poll::Pending;
        }
        this.waiting = None;
        if !matches!(polled, Poll::Ready(Some(Ok(_)))) || this.body.is_end_stream() {
            this.place = None;
            this.ended = true;
        }
        polled.map(|frame| frame.map(|frame| frame.map_err(Into::into)))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Arriving {
    fn drop(&mut self) {
        if !self.ended && !self.body.is_end_stream() {
            self.let_go.store(true, Ordering::Relaxed);
        }
    }
}
