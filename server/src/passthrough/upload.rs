//! The body of a request passed through, streamed to the API server as the
//! client sends it, never held whole.
//!
//! kube-apiserver authenticates and authorizes a request before it reads
//! its body, and answers a refusal without reading it. Streamed, a body
//! keeps that order through kubecache: a caller the API server refuses
//! costs kubecache the bytes in flight between two sockets, not a buffer
//! of up to [`MAX_BODY`] held for as long as the caller takes to send it.
//! A body is cut at [`MAX_BODY`] (413), and when it is not whole within
//! [`BODY_DEADLINE`] or stops arriving for the header-read timeout (408,
//! see [`BodyTimedOut`]). A body answered before it was whole, by the API
//! server or by kubecache's own refusal, is read to its end and dropped,
//! within the same bounds, so that kubecache's answer is not lost to a
//! reset.
//!
//! A client that sends `Expect: 100-continue` waits for `100 Continue`
//! before its body, and hyper sends that when the body is first read. So
//! such a body is not read until the API server itself says `100
//! Continue` ([`Expecting`]): the `Expect` goes upstream with the head,
//! and Go's server sends 100 only when its handler reads the body, after
//! authentication and authorization. A request the API server refuses
//! gets its answer with no 100 before it, its body never asked for: the
//! body is dropped unread, so hyper sends no 100 and closes the connection
//! after the answer, as Go's server does (it cannot know where the unsent
//! body would end). Chosen over authorizing such a request with
//! kubecache's own reviews first: the API server is the one judge of what
//! passes through (its authentication, impersonation, authorizers and
//! admission alike), and it costs no review. The body waits for the 100
//! with no time limit of its own (Go's and curl's clients send it anyway
//! after a second): kube-apiserver always says 100 or answers, and a limit
//! would race a slow refusal, sending a 100 before it; an API server that
//! does neither is cut at [`BODY_DEADLINE`].

use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Frame, SizeHint};
use kubecache_wire::Status;
use tokio::sync::watch;
use tokio::time::Sleep;
use tower::BoxError;

use crate::transport::{BodyTimedOut, MAX_BODY};

/// Longest a request body may take to arrive whole: kube-apiserver's
/// `--request-timeout` (60 s), which bounds a write and its body alike.
pub const BODY_DEADLINE: Duration = Duration::from_secs(60);

/// Where a body expecting `100 Continue` stands with the API server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Go {
    /// Neither a 100 nor an answer yet.
    Waiting,
    /// It said `100 Continue`: send the body.
    Continue,
    /// It answered first: the body is never asked for.
    Answered,
}

/// The API server's side of a body that expects `100 Continue`: what it
/// said first, told to the [`Upload`].
#[derive(Clone)]
pub struct Expecting(Arc<watch::Sender<Go>>);

impl Expecting {
    /// Registers on `request` the API server's `100 Continue`.
    pub fn on_continue<B>(&self, request: &mut axum::http::Request<B>) {
        let said = self.0.clone();
        hyper::ext::on_informational(request, move |response| {
            if response.status() == axum::http::StatusCode::CONTINUE {
                said.send_if_modified(|go| go.say(Go::Continue));
            }
        });
    }

    /// The API server answered: a body it did not ask for is never sent.
    pub fn answered(&self) {
        self.0.send_if_modified(|go| go.say(Go::Answered));
    }
}

impl Go {
    /// `next`, if nothing was said before it.
    fn say(&mut self, next: Go) -> bool {
        let waiting = *self == Go::Waiting;
        if waiting {
            *self = next;
        }
        waiting
    }
}

/// Why an upload was cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Over [`MAX_BODY`].
    TooLarge,
    /// Not whole within [`BODY_DEADLINE`], or no byte of it for the
    /// header-read timeout.
    TooSlow,
}

impl Cut {
    /// The Status kubecache answers for it.
    pub fn status(self) -> Status {
        match self {
            Cut::TooLarge => too_large(),
            Cut::TooSlow => Status::failure(
                408,
                "Timeout",
                format!(
                    "the request body did not arrive in time: whole within {}s, and each byte within the header-read timeout of the one before",
                    BODY_DEADLINE.as_secs()
                ),
            ),
        }
    }
}

/// 413, worded as kube-apiserver words it.
pub fn too_large() -> Status {
    Status::failure(
        413,
        "RequestEntityTooLarge",
        format!("Request entity too large: limit is {MAX_BODY}"),
    )
}

/// A client's body on its way upstream, with the [`Cut`] that ended it, if
/// any, readable after the exchange.
pub struct Upload {
    body: Body,
    sent: usize,
    deadline: Pin<Box<Sleep>>,
    cut: Arc<OnceLock<Cut>>,
    hold: Hold,
}

/// Whether the client's body may be read.
enum Hold {
    /// Yes.
    No,
    /// Once this says so (it expects `100 Continue`); `false`: never.
    Until(Pin<Box<dyn Future<Output = bool> + Send>>),
    /// No: the API server answered without asking for it.
    Never,
}

impl Upload {
    /// `body`, and where to read why it was cut.
    pub fn new(body: Body) -> (Upload, Arc<OnceLock<Cut>>) {
        let cut = Arc::new(OnceLock::new());
        let upload = Upload {
            body,
            sent: 0,
            deadline: Box::pin(tokio::time::sleep(BODY_DEADLINE)),
            cut: cut.clone(),
            hold: Hold::No,
        };
        (upload, cut)
    }

    /// `body`, not read until the API server says `100 Continue` (see the
    /// module's documentation), and where to tell it what it said.
    pub fn expecting(body: Body) -> (Upload, Arc<OnceLock<Cut>>, Expecting) {
        let (said, mut heard) = watch::channel(Go::Waiting);
        let until = async move {
            let go = heard.wait_for(|go| *go != Go::Waiting).await;
            go.is_ok_and(|go| *go == Go::Continue)
        };
        let (mut upload, cut) = Upload::new(body);
        upload.hold = Hold::Until(Box::pin(until));
        (upload, cut, Expecting(Arc::new(said)))
    }

    fn cut(&mut self, why: Cut) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let _ = self.cut.set(why);
        Poll::Ready(Some(Err(why.status().message.into())))
    }
}

impl hyper::body::Body for Upload {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if this.cut.get().is_some() {
            return Poll::Ready(None);
        }
        if let Hold::Until(until) = &mut this.hold {
            match until.as_mut().poll(cx) {
                Poll::Ready(true) => this.hold = Hold::No,
                // Answered without it: the client's body is let go unread
                // (hyper then sends no 100 and closes its connection); the
                // request upstream, answered, waits for its connection to
                // close, within the deadline.
                Poll::Ready(false) => {
                    this.hold = Hold::Never;
                    drop(std::mem::take(&mut this.body));
                }
                Poll::Pending => {}
            }
        }
        if !matches!(this.hold, Hold::No) {
            ready!(this.deadline.as_mut().poll(cx));
            return this.cut(Cut::TooSlow);
        }
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Pending => {
                ready!(this.deadline.as_mut().poll(cx));
                this.cut(Cut::TooSlow)
            }
            Poll::Ready(Some(Ok(frame))) => {
                this.sent += frame.data_ref().map_or(0, Bytes::len);
                if this.sent > MAX_BODY {
                    return this.cut(Cut::TooLarge);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) if timed_out(&error) => this.cut(Cut::TooSlow),
            Poll::Ready(Some(Err(error))) => Poll::Ready(Some(Err(error.into()))),
            Poll::Ready(None) => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.hold, Hold::No) && self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Whether `error` is a body that stopped arriving.
fn timed_out(error: &axum::Error) -> bool {
    std::iter::successors(Some(error as &(dyn std::error::Error + 'static)), |e| {
        e.source()
    })
    .any(|e| e.is::<BodyTimedOut>())
}

impl Drop for Upload {
    /// The API server answered before the body was whole (a refusal), or
    /// kubecache refused it unsent: the rest is read and discarded, within
    /// the limit and the deadline, as Go's net/http lingers. Dropped unread, the bytes still arriving
    /// would turn the connection's close into a reset, which can reach the
    /// client before the answer.
    /// A body never asked for (it expects `100 Continue`, which was not
    /// sent) is not read: hyper closes the connection after the answer.
    fn drop(&mut self) {
        if self.cut.get().is_some()
            || !matches!(self.hold, Hold::No)
            || hyper::body::Body::is_end_stream(&self.body)
        {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut body = std::mem::take(&mut self.body);
        let room = MAX_BODY.saturating_sub(self.sent);
        let deadline = self.deadline.deadline();
        runtime.spawn(async move {
            let drain = async {
                let mut read = 0;
                while let Some(Ok(frame)) = body.frame().await {
                    read += frame.data_ref().map_or(0, Bytes::len);
                    if read > room {
                        break;
                    }
                }
            };
            let _ = tokio::time::timeout_at(deadline, drain).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_body_is_cut_past_the_limit() {
        let (upload, cut) = Upload::new(Body::from(vec![0u8; MAX_BODY + 1]));
        assert!(upload.collect().await.is_err());
        assert_eq!(cut.get(), Some(&Cut::TooLarge));
        let (upload, cut) = Upload::new(Body::from(vec![0u8; MAX_BODY]));
        assert_eq!(upload.collect().await.unwrap().to_bytes().len(), MAX_BODY);
        assert_eq!(cut.get(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_arriving_is_cut_as_too_slow() {
        let (mut sender, stream) = futures::channel::mpsc::channel::<Result<Bytes, BoxError>>(1);
        sender.try_send(Ok(Bytes::from_static(b"{"))).unwrap();
        sender.try_send(Err(BodyTimedOut.into())).ok();
        let (upload, cut) = Upload::new(Body::from_stream(stream));
        drop(sender);
        assert!(upload.collect().await.is_err());
        assert_eq!(cut.get(), Some(&Cut::TooSlow));
    }

    /// A body that expects `100 Continue`, and its sender.
    fn expecting() -> (
        Upload,
        Expecting,
        futures::channel::mpsc::Sender<Result<Bytes, BoxError>>,
    ) {
        let (sender, stream) = futures::channel::mpsc::channel(1);
        let (upload, _, expecting) = Upload::expecting(Body::from_stream(stream));
        (upload, expecting, sender)
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_expecting_100_continue_is_read_only_after_it() {
        let (mut upload, expecting, mut sender) = expecting();
        sender.try_send(Ok(Bytes::from_static(b"{}"))).unwrap();
        let mut frame = std::pin::pin!(upload.frame());
        assert!(futures::poll!(frame.as_mut()).is_pending(), "held");
        expecting.0.send_if_modified(|go| go.say(Go::Continue));
        let frame = frame.await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), "{}");
        expecting.answered();
        drop(sender);
        assert!(upload.frame().await.is_none(), "read to its end");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_answered_before_100_continue_is_let_go_unread() {
        let (mut upload, expecting, sender) = expecting();
        let mut frame = std::pin::pin!(upload.frame());
        assert!(futures::poll!(frame.as_mut()).is_pending());
        expecting.answered();
        assert!(futures::poll!(frame.as_mut()).is_pending());
        assert!(sender.is_closed(), "the client's body is dropped");
        let started = tokio::time::Instant::now();
        assert!(frame.await.unwrap().is_err(), "then cut at the deadline");
        assert_eq!(started.elapsed(), BODY_DEADLINE);
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_never_ends_is_cut_at_the_deadline() {
        let (_sender, stream) = futures::channel::mpsc::channel::<Result<Bytes, BoxError>>(1);
        let (upload, cut) = Upload::new(Body::from_stream(stream));
        let started = tokio::time::Instant::now();
        assert!(upload.collect().await.is_err());
        assert_eq!(cut.get(), Some(&Cut::TooSlow));
        assert_eq!(started.elapsed(), BODY_DEADLINE);
    }
}
