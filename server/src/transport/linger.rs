//! A lingering close, as Go's `net/http` server closes a connection after
//! an answer (its `closeWriteAndWait`): the write side is shut down (a
//! FIN after the answer), then what the client still sends is read and
//! discarded, until it closes too, for at most [`LINGER_BYTES`] and
//! [`Server::LINGER`](super::Server::LINGER), and only then is the socket
//! closed.
//!
//! Without it, an answer given before the request's body was read (a 413
//! for a body beyond the limit, a 429 refusal) is followed by a close with
//! unread bytes, or bytes still on their way: the kernel then resets the
//! connection, and the reset can reach the client before the answer,
//! which it never reads (a client that sends its whole body before it
//! reads sees a broken pipe). hyper shuts a connection's io down when it
//! closes it after an answer, so [`Lingering`] does it there, below TLS
//! (its `close_notify` is sent first), for HTTP/1 and HTTP/2 alike.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

use super::MAX_BODY;

/// The most a closing connection reads and discards: a whole body beyond
/// the limit by a margin, sent by a client that reads nothing before it
/// has sent it all.
pub const LINGER_BYTES: usize = MAX_BODY + 1024 * 1024;

/// A connection's stream that lingers when it is shut down.
pub(super) struct Lingering<S> {
    inner: S,
    linger: Duration,
    closing: Closing,
}

enum Closing {
    Open,
    /// Its write side shut down: discarding what arrives until then, or
    /// until `left` more bytes.
    Draining {
        until: Pin<Box<Sleep>>,
        left: usize,
    },
    Closed,
}

impl<S> Lingering<S> {
    /// `inner`, lingering at most `linger` once shut down.
    pub(super) fn new(inner: S, linger: Duration) -> Self {
        Lingering {
            inner,
            linger,
            closing: Closing::Open,
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Lingering<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Lingering<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            match &mut this.closing {
                Closing::Open => {
                    ready!(Pin::new(&mut this.inner).poll_shutdown(cx))?;
                    this.closing = Closing::Draining {
                        until: Box::pin(tokio::time::sleep(this.linger)),
                        left: LINGER_BYTES,
                    };
                }
                Closing::Draining { until, left } => {
                    if until.as_mut().poll(cx).is_ready() {
                        this.closing = Closing::Closed;
                        continue;
                    }
                    let mut discarded = [0u8; 8192];
                    let mut buf = ReadBuf::new(&mut discarded[..(*left).min(8192)]);
                    match ready!(Pin::new(&mut this.inner).poll_read(cx, &mut buf)) {
                        Ok(()) if !buf.filled().is_empty() => {
                            *left -= buf.filled().len();
                            if *left == 0 {
                                this.closing = Closing::Closed;
                            }
                        }
                        // The client closed too, or is gone.
                        Ok(()) | Err(_) => this.closing = Closing::Closed,
                    }
                }
                Closing::Closed => return Poll::Ready(Ok(())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn a_shut_down_stream_reads_what_arrives_until_the_client_closes_or_a_bound() {
        // The client closes after sending: the close waits for it.
        let (server, mut client) = tokio::io::duplex(64 * 1024);
        let mut lingering = Lingering::new(server, Duration::from_secs(3600));
        client.write_all(&[1; 10_000]).await.unwrap();
        drop(client.shutdown().await);
        lingering.shutdown().await.unwrap();
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty(), "the write side was shut down first");

        // A client that sends more than the bound: closed after it.
        let (server, mut client) = tokio::io::duplex(64 * 1024);
        let sending = tokio::spawn(async move {
            let chunk = vec![1u8; 64 * 1024];
            let mut sent = 0;
            while client.write_all(&chunk).await.is_ok() {
                sent += chunk.len();
            }
            sent
        });
        Lingering::new(server, Duration::from_secs(3600))
            .shutdown()
            .await
            .unwrap();
        let sent = sending.await.unwrap();
        assert!(
            (LINGER_BYTES..LINGER_BYTES + 256 * 1024).contains(&sent),
            "{sent}"
        );

        // A client that sends nothing and does not close: the time bound.
        let (server, _silent) = tokio::io::duplex(64 * 1024);
        let started = tokio::time::Instant::now();
        Lingering::new(server, Duration::from_secs(2))
            .shutdown()
            .await
            .unwrap();
        assert_eq!(started.elapsed(), Duration::from_secs(2));
    }
}
