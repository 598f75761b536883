//! A bound on the SETTINGS and PING frames an HTTP/2 client sends, which
//! the h2 crate acknowledges each, as fast as they come, without limit: a
//! client that reads the acknowledgements and sends more held a core for
//! as long as it liked (115M SETTINGS in 40 s).
//!
//! [`Calmed`] wraps a connection's stream below hyper (above TLS) and reads
//! the frames' heads as they pass: the client's preface, then each 9-byte
//! frame head. More than [`CONTROL_FRAMES`] SETTINGS and PING frames (not
//! acknowledgements) within [`CONTROL_WINDOW`] end the connection as
//! Google's front ends and gRPC end a ping flood: GOAWAY
//! `ENHANCE_YOUR_CALM`, written between two of hyper's frames (the write
//! side's frame heads are read too), then the stream is shut down (a
//! lingering close, see `linger`) and hyper gets an error. Go's server
//! bounds only the acknowledgements queued unwritten (10,000), which a
//! client that reads never reaches. An honest client is far within the
//! bound: client-go pings a connection after 30 s without a frame, gRPC's
//! keep-alive at most every few seconds, and SETTINGS come once or twice
//! per connection.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// SETTINGS and PING frames a connection may send within [`CONTROL_WINDOW`].
pub const CONTROL_FRAMES: u32 = 1000;

/// The window [`CONTROL_FRAMES`] are counted in.
pub const CONTROL_WINDOW: Duration = Duration::from_secs(10);

/// The client connection preface's length (RFC 9113, 3.4).
const PREFACE: usize = 24;

const HEADERS: u8 = 0x1;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const ACK: u8 = 0x1;
const ENHANCE_YOUR_CALM: u32 = 0xb;

/// A connection's stream whose client's SETTINGS and PINGs are counted.
pub(super) struct Calmed<S> {
    inner: S,
    read: Frames,
    written: Frames,
    counted: Counted,
    /// Over the bound: the GOAWAY's bytes not yet written, and the reader
    /// to wake once hyper's frame in writing is whole.
    calm: Option<(Vec<u8>, Option<Waker>)>,
}

impl<S> Calmed<S> {
    pub(super) fn new(inner: S) -> Self {
        Calmed {
            inner,
            read: Frames::after(PREFACE),
            written: Frames::after(0),
            counted: Counted {
                window: (Instant::now(), 0),
                last_stream: 0,
            },
            calm: None,
        }
    }

    /// `written` bytes of `bufs` went out: frames are counted through
    /// them, and a reader waiting for a frame boundary is woken at one.
    fn wrote(&mut self, bufs: &[io::IoSlice<'_>], mut written: usize) {
        for buf in bufs {
            let taken = written.min(buf.len());
            self.written.advance(&buf[..taken], |_| {});
            written -= taken;
            if written == 0 {
                break;
            }
        }
        if let Some((_, reader)) = &mut self.calm
            && self.written.at_boundary()
            && let Some(reader) = reader.take()
        {
            reader.wake();
        }
    }
}

/// What the client's frame heads told so far.
struct Counted {
    /// When the current window began, and its SETTINGS and PINGs.
    window: (Instant, u32),
    /// The highest stream the client opened, for the GOAWAY.
    last_stream: u32,
}

impl Counted {
    /// Counts the frame whose head is `head`; true beyond the bound.
    fn count(&mut self, head: &[u8; 9]) -> bool {
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        match head[3] {
            HEADERS => self.last_stream = self.last_stream.max(stream),
            SETTINGS | PING if head[4] & ACK == 0 => {
                let now = Instant::now();
                let (since, frames) = &mut self.window;
                if now.duration_since(*since) >= CONTROL_WINDOW {
                    (*since, *frames) = (now, 0);
                }
                *frames += 1;
                return *frames > CONTROL_FRAMES;
            }
            _ => {}
        }
        false
    }
}

impl<S: AsyncWrite + Unpin> Calmed<S> {
    /// Once hyper's frame in writing is whole: writes the GOAWAY, shuts the
    /// stream down, and is the error that ends hyper's connection.
    fn poll_calm(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let Some((goaway, reader)) = &mut self.calm else {
            unreachable!("only called once calm");
        };
        if !self.written.at_boundary() {
            *reader = Some(cx.waker().clone());
            return Poll::Pending;
        }
        while !goaway.is_empty() {
            match ready!(Pin::new(&mut self.inner).poll_write(cx, goaway)) {
                Ok(0) | Err(_) => break,
                Ok(n) => drop(goaway.drain(..n)),
            }
        }
        goaway.clear();
        // Errors here change nothing: the connection ends either way.
        let _ = ready!(Pin::new(&mut self.inner).poll_flush(cx));
        let _ = ready!(Pin::new(&mut self.inner).poll_shutdown(cx));
        Poll::Ready(io::Error::other(
            "HTTP/2 SETTINGS or PING flood: GOAWAY ENHANCE_YOUR_CALM",
        ))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Calmed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.calm.is_some() {
            return this.poll_calm(cx).map(Err);
        }
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        // Counted as read, without a copy: this is every read of the
        // connection.
        let (mut over, counted) = (false, &mut this.counted);
        this.read
            .advance(&buf.filled()[before..], |head| over |= counted.count(&head));
        if over {
            tracing::debug!("HTTP/2 SETTINGS or PING flood: GOAWAY ENHANCE_YOUR_CALM");
            this.calm = Some((goaway(this.counted.last_stream), None));
            // What came with the excess is not hyper's.
            buf.set_filled(before);
            return this.poll_calm(cx).map(Err);
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Calmed<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[io::IoSlice::new(buf)])
    }

    /// Vectored, as the stream below is: h2 writes a frame's head and a
    /// large payload together only to a vectored writer (one TLS record
    /// and one `writev` per answer, not two).
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.calm.is_some() && this.written.at_boundary() {
            return this.poll_calm(cx).map(Err);
        }
        let written = ready!(Pin::new(&mut this.inner).poll_write_vectored(cx, bufs))?;
        this.wrote(bufs, written);
        Poll::Ready(Ok(written))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A GOAWAY `ENHANCE_YOUR_CALM` after `last_stream`.
fn goaway(last_stream: u32) -> Vec<u8> {
    let debug = b"too many SETTINGS or PING frames";
    let length = (8 + debug.len()) as u32;
    let mut frame = length.to_be_bytes()[1..].to_vec();
    frame.extend([GOAWAY, 0, 0, 0, 0, 0]);
    frame.extend(last_stream.to_be_bytes());
    frame.extend(ENHANCE_YOUR_CALM.to_be_bytes());
    frame.extend(debug);
    frame
}

/// Where one direction of a connection is in its frames.
struct Frames {
    /// Bytes to pass before the next frame head: a preface, a payload.
    skip: usize,
    head: [u8; 9],
    /// Bytes of `head` read.
    filled: usize,
}

impl Frames {
    /// Frames that begin after `skip` bytes.
    fn after(skip: usize) -> Frames {
        Frames {
            skip,
            head: [0; 9],
            filled: 0,
        }
    }

    /// Between two frames.
    fn at_boundary(&self) -> bool {
        self.skip == 0 && self.filled == 0
    }

    /// Passes `bytes`, telling `head` each frame head completed.
    fn advance(&mut self, mut bytes: &[u8], mut head: impl FnMut([u8; 9])) {
        while !bytes.is_empty() {
            if self.skip > 0 {
                let skipped = self.skip.min(bytes.len());
                self.skip -= skipped;
                bytes = &bytes[skipped..];
                continue;
            }
            let taken = (9 - self.filled).min(bytes.len());
            self.head[self.filled..self.filled + taken].copy_from_slice(&bytes[..taken]);
            self.filled += taken;
            bytes = &bytes[taken..];
            if self.filled == 9 {
                self.filled = 0;
                self.skip =
                    u32::from_be_bytes([0, self.head[0], self.head[1], self.head[2]]) as usize;
                head(self.head);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let mut frame = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        frame.extend([kind, flags, 0, 0, 0, 0]);
        frame.extend(payload);
        frame
    }

    #[test]
    fn frame_heads_are_found_across_reads_of_any_size() {
        let mut bytes = vec![b'P'; PREFACE];
        for (kind, payload) in [(SETTINGS, &[0u8; 6][..]), (PING, &[7; 8]), (HEADERS, &[])] {
            bytes.extend(frame(kind, 0, payload));
        }
        for split in 1..bytes.len() {
            let mut frames = Frames::after(PREFACE);
            let mut kinds = Vec::new();
            for part in bytes.chunks(split) {
                frames.advance(part, |head| kinds.push(head[3]));
            }
            assert_eq!(kinds, [SETTINGS, PING, HEADERS], "in parts of {split}");
            assert!(frames.at_boundary());
        }
    }

    #[tokio::test]
    async fn vectored_writes_count_frames_across_their_slices_and_stay_vectored() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap());
        let (client, accepted) = tokio::join!(client, listener.accept());
        let mut calmed = Calmed::new(accepted.unwrap().0);
        assert!(
            calmed.is_write_vectored(),
            "h2 writes a frame and its payload together"
        );
        let bytes = [
            frame(HEADERS, 4, &[9; 40]),
            frame(0x0, 1, &[7; 3000]), /* DATA */
        ]
        .concat();
        for split in [1, 9, 49, 58, 100, bytes.len() - 1] {
            let (head, rest) = bytes.split_at(split);
            let slices = [io::IoSlice::new(head), io::IoSlice::new(rest)];
            // Whole: the socket has room.
            let written = calmed.write_vectored(&slices).await.unwrap();
            assert_eq!(written, bytes.len(), "split at {split}");
            assert!(calmed.written.at_boundary(), "split at {split}");
        }
        // Part of a frame written: not at a boundary.
        calmed.wrote(
            &[
                io::IoSlice::new(&bytes[..20]),
                io::IoSlice::new(&bytes[20..]),
            ],
            30,
        );
        assert!(!calmed.written.at_boundary());
        drop(client);
    }

    #[tokio::test(start_paused = true)]
    async fn a_flood_of_pings_ends_in_goaway_enhance_your_calm_and_a_steady_few_do_not() {
        let (server, mut client) = tokio::io::duplex(1 << 20);
        let mut calmed = Calmed::new(server);
        client.write_all(&[b'P'; PREFACE]).await.unwrap();
        let mut buf = vec![0u8; 1 << 16];
        // A ping a second, and acknowledgements, for longer than a window.
        for _ in 0..3 * CONTROL_FRAMES {
            client.write_all(&frame(PING, 0, &[1; 8])).await.unwrap();
            client.write_all(&frame(PING, ACK, &[1; 8])).await.unwrap();
            assert!(calmed.read(&mut buf).await.unwrap() > 0);
            tokio::time::advance(CONTROL_WINDOW / CONTROL_FRAMES).await;
        }
        // A frame of hyper's half written: the GOAWAY waits for its end.
        let answer = frame(PING, ACK, &[1; 8]);
        calmed.write_all(&answer[..5]).await.unwrap();
        let flood: Vec<u8> = (0..=CONTROL_FRAMES)
            .flat_map(|_| frame(SETTINGS, 0, &[]))
            .collect();
        client.write_all(&flood).await.unwrap();
        // Reading finds the flood, and waits for the frame in writing.
        while let Some(read) = calmed.read(&mut buf).now_or_never() {
            read.unwrap();
        }
        calmed.write_all(&answer[5..]).await.unwrap();
        let read = tokio::time::timeout(Duration::from_secs(1), calmed.read(&mut buf));
        let error = read.await.expect("ended").unwrap_err();
        assert!(error.to_string().contains("ENHANCE_YOUR_CALM"), "{error}");
        let mut sent = Vec::new();
        client.read_to_end(&mut sent).await.unwrap();
        assert_eq!(sent[..answer.len()], answer);
        let goaway = &sent[answer.len()..];
        assert_eq!(goaway[3], GOAWAY);
        assert_eq!(goaway[13..17], ENHANCE_YOUR_CALM.to_be_bytes());
    }
}
