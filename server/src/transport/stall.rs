//! A bound on how long a client may leave kubecache's writes unread.
//!
//! A write to a socket whose client reads nothing waits once the kernel's
//! buffers are full, and with it whatever feeds that connection (a watch
//! holds its queue, its chunks and hyper's buffers). [`WriteStall`] fails
//! a write that has made no progress for its budget, and hyper then closes
//! the connection: every write is bounded in time, whatever the client
//! does. A client that reads, however slowly, never stalls a write.
//!
//! An answer that must end by a time (a watch, at its `timeoutSeconds`)
//! says so with [`AnswerDeadline`] on the response: while it is written,
//! a stalled write also fails once [`GRACE`] past that time. hyper stops
//! polling a body whose client reads nothing, so the body cannot end
//! itself; this closes the connection, which drops it.

use std::sync::Arc;

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// On a response: the time by which its answer ends.
#[derive(Clone, Copy, Debug)]
pub struct AnswerDeadline(pub Instant);

/// How long past its answer's deadline a write may still wait: the last
/// lines of a watch that timed out reach a client that reads.
pub const GRACE: Duration = Duration::from_secs(1);

/// The deadline of the answer a connection is writing, if it has one.
#[derive(Clone, Default)]
pub(super) struct Deadline(Arc<Mutex<Option<Instant>>>);

impl Deadline {
    /// Sets it to `at` until the returned guard is dropped.
    pub(super) fn set(&self, at: Instant) -> DeadlineSet {
        *self.0.lock() = Some(at);
        DeadlineSet(self.clone())
    }
}

/// Clears its connection's answer deadline when dropped.
pub(super) struct DeadlineSet(Deadline);

impl Drop for DeadlineSet {
    fn drop(&mut self) {
        *self.0.0.lock() = None;
    }
}

/// When a wait for the client that began at `since` has lasted too long:
/// after `budget`, or past the answer's deadline and [`GRACE`].
pub(super) fn stalled_until(since: Instant, budget: Duration, deadline: &Deadline) -> Instant {
    let until = since + budget;
    let deadline = *deadline.0.lock();
    deadline.map_or(until, |at| until.min(at + GRACE))
}

/// `S`, whose writes fail once one has waited `budget` without progress,
/// or past the answer's deadline and [`GRACE`].
pub(crate) struct WriteStall<S> {
    inner: S,
    budget: Duration,
    deadline: Deadline,
    /// Running while a write waits; reset by any progress.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteStall<S> {
    pub(crate) fn new(inner: S, budget: Duration, deadline: Deadline) -> Self {
        WriteStall {
            inner,
            budget,
            deadline,
            stalled: None,
        }
    }

    /// `polled`, or an error once the stall it continues has lasted the
    /// budget.
    fn bound<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.stalled = None;
            return polled;
        }
        let budget = self.budget;
        let deadline = &self.deadline;
        let stalled = self.stalled.get_or_insert_with(|| {
            Box::pin(tokio::time::sleep_until(stalled_until(
                Instant::now(),
                budget,
                deadline,
            )))
        });
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client read nothing for {budget:?}, or past its answer's deadline"),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteStall<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteStall<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.bound(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.bound(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.bound(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.bound(cx, polled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test(start_paused = true)]
    async fn a_write_fails_after_the_budget_without_progress_and_not_before() {
        let (_client, server) = tokio::io::duplex(8);
        let mut server = WriteStall::new(server, Duration::from_secs(5), Deadline::default());
        server.write_all(b"12345678").await.unwrap();
        // The pipe is full: the next write waits for the client.
        let blocked = server.write_all(b"9");
        let started = tokio::time::Instant::now();
        let error = blocked.await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_secs(5));

        // Progress resets the budget: a client reading every 4 s is slow,
        // not stalled.
        let (reader, writer) = tokio::io::duplex(1);
        let mut writer = WriteStall::new(writer, Duration::from_secs(5), Deadline::default());
        let reading = tokio::spawn(async move {
            let mut reader = reader;
            let mut byte = [0u8; 1];
            for _ in 0..4 {
                tokio::time::sleep(Duration::from_secs(4)).await;
                tokio::io::AsyncReadExt::read_exact(&mut reader, &mut byte)
                    .await
                    .unwrap();
            }
        });
        writer.write_all(b"abcd").await.unwrap();
        reading.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_stalled_past_its_answers_deadline_fails_before_the_budget() {
        let (_client, server) = tokio::io::duplex(8);
        let deadline = Deadline::default();
        let mut server = WriteStall::new(server, Duration::from_secs(3600), deadline.clone());
        let started = Instant::now();
        let set = deadline.set(started + Duration::from_secs(5));
        server.write_all(b"12345678").await.unwrap();
        let error = server.write_all(b"9").await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(5) + GRACE);

        // Once the answer is done, only the budget bounds a write.
        drop(set);
        let (_client, server) = tokio::io::duplex(8);
        let mut server = WriteStall::new(server, Duration::from_secs(3600), deadline);
        server.write_all(b"12345678").await.unwrap();
        let started = Instant::now();
        server.write_all(b"9").await.unwrap_err();
        assert_eq!(started.elapsed(), Duration::from_secs(3600));
    }
}
