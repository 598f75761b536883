//! A watch's response body, run by the connection's own task: polling the
//! body polls the watch itself (its frame queue, its timers), so an event
//! crosses one task hop per watcher, the dispatcher's wake of the
//! connection, with no watcher task and no channel of chunks between them.
//!
//! The watch is written as the async code it is ([`super::stream`]); the
//! lines it hands over wait in an [`Outbox`] until the body has given them
//! to hyper, one frame each (no copy: hyper writes the frames it holds
//! together), which polls the body only when it can take more (its own
//! backpressure). A client that reads nothing stops the polling
//! altogether: its connection's write-stall bound, shortened to the
//! watch's deadline (see [`crate::transport::AnswerDeadline`]), closes it,
//! and dropping the body ends the watch.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::Frame;
use parking_lot::Mutex;

/// Where the watch puts its next lines for the body to take. The bytes
/// it holds are counted in `kubecache_watch_unsent_bytes`: at most one
/// chunk of lines per watch (the watch makes its next lines only once
/// the body has taken these, see [`Outbox::send`]).
#[derive(Clone, Default)]
pub(super) struct Outbox(Arc<Mutex<Lines>>);

/// The lines in an outbox, and their bytes.
#[derive(Default)]
struct Lines {
    queue: VecDeque<Bytes>,
    bytes: usize,
}

/// `kubecache_watch_unsent_bytes`: `bytes` more (or fewer).
fn unsent(bytes: usize, more: bool) {
    let gauge = metrics::gauge!("kubecache_watch_unsent_bytes");
    if more {
        gauge.increment(bytes as f64);
    } else {
        gauge.decrement(bytes as f64);
    }
}

impl Outbox {
    /// Hands `lines` to the body; completes once the body has taken them.
    pub(super) async fn send(&self, lines: impl IntoIterator<Item = Bytes>) {
        {
            let mut held = self.0.lock();
            let before = held.bytes;
            for line in lines {
                held.bytes += line.len();
                held.queue.push_back(line);
            }
            unsent(held.bytes - before, true);
        }
        // Pending until the body, which polls this right after, has taken
        // the lines and been polled again by hyper.
        std::future::poll_fn(|_| {
            if self.0.lock().queue.is_empty() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }

    fn take(&self) -> Option<Bytes> {
        let mut held = self.0.lock();
        let line = held.queue.pop_front()?;
        held.bytes -= line.len();
        unsent(line.len(), false);
        Some(line)
    }
}

impl Drop for Lines {
    /// Lines never taken (the client left) are no longer held.
    fn drop(&mut self) {
        unsent(self.bytes, false);
    }
}

/// The body of a watch: the lines its future hands over, until it ends.
pub(super) struct WatchBody {
    outbox: Outbox,
    /// `None` once the watch has ended.
    watch: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl WatchBody {
    /// The body of `watch`, which writes its lines to `outbox`.
    pub(super) fn new(outbox: Outbox, watch: impl Future<Output = ()> + Send + 'static) -> Self {
        WatchBody {
            outbox,
            watch: Some(Box::pin(watch)),
        }
    }
}

impl hyper::body::Body for WatchBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let Some(watch) = self.watch.as_mut() else {
            return Poll::Ready(None);
        };
        if watch.as_mut().poll(cx).is_ready() {
            self.watch = None;
        }
        match self.outbox.take() {
            Some(chunk) => Poll::Ready(Some(Ok(Frame::data(chunk)))),
            None if self.watch.is_none() => Poll::Ready(None),
            None => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.watch.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use hyper::body::Body;

    #[tokio::test]
    async fn the_body_yields_each_line_the_watch_sends_then_ends() {
        let outbox = Outbox::default();
        let sender = outbox.clone();
        let mut body = WatchBody::new(outbox, async move {
            sender.send(vec![Bytes::from("a\n")]).await;
            sender
                .send(vec![Bytes::from("bb\n"), Bytes::from("ccc\n")])
                .await;
        });
        let mut chunks = Vec::new();
        while let Some(frame) = body.frame().await {
            chunks.push(frame.unwrap().into_data().unwrap());
        }
        assert_eq!(chunks, ["a\n", "bb\n", "ccc\n"]);
        assert!(body.is_end_stream());
    }
}
