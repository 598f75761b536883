//! A bound on how long a client may leave kubecache's writes unread.
//!
//! A write to a socket whose client reads nothing waits once the kernel's
//! buffers are full, and with it whatever feeds that connection (a watch
//! holds its queue, its chunks and hyper's buffers). [`WriteStall`] fails
//! a write that has made no progress for its budget, and hyper then closes
//! the connection: every write is bounded in time, whatever the client
//! does. A client that reads, however slowly, never stalls a write.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// `S`, whose writes fail once one has waited `budget` without progress.
pub(crate) struct WriteStall<S> {
    inner: S,
    budget: Duration,
    /// Running while a write waits; reset by any progress.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteStall<S> {
    pub(crate) fn new(inner: S, budget: Duration) -> Self {
        WriteStall {
            inner,
            budget,
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
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(budget)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client read nothing for {budget:?}"),
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
        let mut server = WriteStall::new(server, Duration::from_secs(5));
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
        let mut writer = WriteStall::new(writer, Duration::from_secs(5));
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
}
