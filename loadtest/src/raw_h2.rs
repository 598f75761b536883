//! HTTP/2 frame by frame (RFC 9113), for clients no HTTP/2 library lets one
//! be: the chaos run's HTTP/2 attacks and kubecache's tests of its defences
//! against them. Requests are encoded with HPACK's static table and plain
//! literals (RFC 7541), never indexed, so that no state is shared with the
//! server's decoder beyond what each frame says.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures::FutureExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The client's connection preface.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Frame types.
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const CONTINUATION: u8 = 0x9;

/// Frame flags.
pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;

/// Settings.
pub const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;

/// Error codes (of RST_STREAM and GOAWAY).
pub const REFUSED_STREAM: u32 = 0x7;
pub const CANCEL: u32 = 0x8;
pub const ENHANCE_YOUR_CALM: u32 = 0xb;

/// Every error code's name, by its number.
const ERROR_CODES: [&str; 14] = [
    "NO_ERROR",
    "PROTOCOL_ERROR",
    "INTERNAL_ERROR",
    "FLOW_CONTROL_ERROR",
    "SETTINGS_TIMEOUT",
    "STREAM_CLOSED",
    "FRAME_SIZE_ERROR",
    "REFUSED_STREAM",
    "CANCEL",
    "COMPRESSION_ERROR",
    "CONNECT_ERROR",
    "ENHANCE_YOUR_CALM",
    "INADEQUATE_SECURITY",
    "HTTP_1_1_REQUIRED",
];

/// An error code's name, or its number if it has none.
pub fn error_name(code: u32) -> String {
    ERROR_CODES
        .get(code as usize)
        .map_or_else(|| format!("error {code:#x}"), |name| (*name).to_string())
}

/// One frame as read.
#[derive(Debug)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Bytes,
}

impl Frame {
    /// The error code of a RST_STREAM or GOAWAY frame.
    pub fn error_code(&self) -> Option<u32> {
        let at = match self.kind {
            RST_STREAM => 0,
            GOAWAY => 4,
            _ => return None,
        };
        let code = self.payload.get(at..at + 4)?;
        Some(u32::from_be_bytes(code.try_into().ok()?))
    }

    /// The value of setting `id` in a SETTINGS frame, if it says it.
    pub fn setting(&self, id: u16) -> Option<u32> {
        if self.kind != SETTINGS {
            return None;
        }
        self.payload.chunks_exact(6).find_map(|setting| {
            (u16::from_be_bytes([setting[0], setting[1]]) == id)
                .then(|| u32::from_be_bytes([setting[2], setting[3], setting[4], setting[5]]))
        })
    }
}

/// An HTTP/2 connection spoken frame by frame over `S` (TLS with ALPN
/// `h2`, as kubecache serves HTTP/2). Reading never writes, so that it
/// may be given up at any await: the acknowledgements of the server's
/// SETTINGS and PINGs it calls for go out with the next [`RawH2::send`].
/// Its SETTINGS give the server no HPACK dynamic table, so that the
/// server's header blocks can be read each on its own ([`status`]).
pub struct RawH2<S> {
    stream: S,
    read: BytesMut,
    acks: BytesMut,
}

impl<S: AsyncRead + AsyncWrite + Unpin> RawH2<S> {
    /// The preface and SETTINGS (no dynamic table) sent on `stream`.
    pub async fn open(stream: S) -> std::io::Result<Self> {
        let mut raw = RawH2 {
            stream,
            read: BytesMut::new(),
            acks: BytesMut::new(),
        };
        let mut preface = BytesMut::from(PREFACE);
        let mut no_table = SETTINGS_HEADER_TABLE_SIZE.to_be_bytes().to_vec();
        no_table.extend(0u32.to_be_bytes());
        frame(&mut preface, SETTINGS, 0, 0, &no_table);
        raw.send(&preface).await?;
        Ok(raw)
    }

    /// Sends `frames` (after the acknowledgements owed), flushed.
    pub async fn send(&mut self, frames: &[u8]) -> std::io::Result<()> {
        if !self.acks.is_empty() {
            let acks = self.acks.split();
            self.stream.write_all(&acks).await?;
        }
        self.stream.write_all(frames).await?;
        self.stream.flush().await
    }

    /// The next frame; `None` once the connection has ended.
    pub async fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(frame) = self.parse() {
                return Some(frame);
            }
            match self.stream.read_buf(&mut self.read).await {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }

    /// The frames already arrived, without waiting for more; and whether
    /// the connection has ended.
    pub fn arrived(&mut self) -> (Vec<Frame>, bool) {
        let mut ended = false;
        while let Some(read) = self.stream.read_buf(&mut self.read).now_or_never() {
            if !matches!(read, Ok(n) if n > 0) {
                ended = true;
                break;
            }
        }
        (std::iter::from_fn(|| self.parse()).collect(), ended)
    }

    /// Frames until one of `kind` on `stream`; `None` if the connection
    /// ends first.
    pub async fn until(&mut self, kind: u8, stream: u32) -> Option<Frame> {
        loop {
            let frame = self.next().await?;
            if frame.kind == kind && frame.stream == stream {
                return Some(frame);
            }
        }
    }

    /// The first whole frame of what was read, its acknowledgement owed.
    fn parse(&mut self) -> Option<Frame> {
        let head: [u8; 9] = self.read.get(..9)?.try_into().ok()?;
        let length = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        if self.read.len() < 9 + length {
            return None;
        }
        self.read.advance(9);
        let frame = Frame {
            kind: head[3],
            flags: head[4],
            stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff,
            payload: self.read.split_to(length).freeze(),
        };
        if frame.flags & ACK == 0 && matches!(frame.kind, SETTINGS | PING) {
            let payload = if frame.kind == PING {
                &frame.payload[..]
            } else {
                &[]
            };
            self::frame(&mut self.acks, frame.kind, ACK, 0, payload);
        }
        Some(frame)
    }
}

/// Appends a frame.
pub fn frame(out: &mut BytesMut, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    out.put_uint(payload.len() as u64, 3);
    out.put_u8(kind);
    out.put_u8(flags);
    out.put_u32(stream);
    out.put_slice(payload);
}

/// A GET request, as a header block.
#[derive(Debug, Clone, Copy)]
pub struct Get<'a> {
    /// Its `:path` (with the query).
    pub path: &'a str,
    /// Its `:authority`.
    pub authority: &'a str,
    /// A bearer token, if any.
    pub token: Option<&'a str>,
}

impl<'a> Get<'a> {
    /// A GET of `path` from 127.0.0.1, without credentials.
    pub fn new(path: &'a str) -> Self {
        Get {
            path,
            authority: "127.0.0.1",
            token: None,
        }
    }

    /// Its header block: `:method GET` and `:scheme https` indexed, the
    /// rest literals without indexing (names from the static table).
    pub fn block(&self) -> Vec<u8> {
        const AUTHORITY: usize = 1;
        const PATH: usize = 4;
        const AUTHORIZATION: usize = 23;
        let mut block = vec![0x82, 0x87];
        let bearer = self.token.map(|token| format!("Bearer {token}"));
        let literals = [
            (PATH, Some(self.path)),
            (AUTHORITY, Some(self.authority)),
            (AUTHORIZATION, bearer.as_deref()),
        ];
        for (name, value) in literals {
            if let Some(value) = value {
                integer(&mut block, 0x00, 4, name);
                string(&mut block, value);
            }
        }
        block
    }

    /// Appends the request on `stream`, whole: one HEADERS frame with
    /// END_STREAM and END_HEADERS.
    pub fn frame(&self, out: &mut BytesMut, stream: u32) {
        frame(
            out,
            HEADERS,
            END_STREAM | END_HEADERS,
            stream,
            &self.block(),
        );
    }
}

/// Appends a header field as a literal without indexing, its name too.
pub fn literal(block: &mut Vec<u8>, name: &str, value: &str) {
    block.push(0x00);
    string(block, name);
    string(block, value);
}

/// Appends an HPACK string literal, not Huffman-coded.
fn string(block: &mut Vec<u8>, value: &str) {
    integer(block, 0x00, 7, value.len());
    block.extend_from_slice(value.as_bytes());
}

/// Appends an HPACK integer of `prefix` bits after the bits of `first`.
fn integer(out: &mut Vec<u8>, first: u8, prefix: u32, value: usize) {
    let max = (1usize << prefix) - 1;
    if value < max {
        out.push(first | value as u8);
        return;
    }
    out.push(first | max as u8);
    let mut rest = value - max;
    while rest >= 0x80 {
        out.push((rest % 0x80) as u8 | 0x80);
        rest /= 0x80;
    }
    out.push(rest as u8);
}

/// The `:status` of a response's header block when its first field says it
/// without the dynamic table (after the updates of the table's size to
/// none that [`RawH2`]'s SETTINGS call for): indexed from the static
/// table, or a literal with the static name (its three digits plain or
/// Huffman-coded). `None` otherwise.
pub fn status(block: &[u8]) -> Option<u16> {
    const INDEXED: [u16; 7] = [200, 204, 206, 304, 400, 404, 500];
    const NO_TABLE: u8 = 0x20;
    let at = block.iter().position(|b| *b != NO_TABLE)?;
    let block = &block[at..];
    let first = *block.first()?;
    if first & 0x80 != 0 {
        return INDEXED
            .get(usize::from(first & 0x7f).checked_sub(8)?)
            .copied();
    }
    // With incremental indexing (6-bit name index), without indexing or
    // never indexed (4-bit): `:status` is the static name 8.
    let named_status = first == 0x48 || first & 0xef == 0x08;
    let length = *block.get(1)?;
    if !named_status || length == 0x7f || length == 0xff {
        return None;
    }
    let value = block.get(2..2 + usize::from(length & 0x7f))?;
    let digits = match length & 0x80 {
        0 => std::str::from_utf8(value).ok()?.to_string(),
        _ => huffman_digits(value)?,
    };
    digits.parse().ok()
}

/// Three Huffman-coded digits (RFC 7541, Appendix B: `0`-`2` are the 5-bit
/// codes 0-2, `3`-`9` the 6-bit codes 0x19-0x1f), the rest padding.
fn huffman_digits(value: &[u8]) -> Option<String> {
    let bits = u32::from_be_bytes([
        value.first().copied().unwrap_or(0xff),
        value.get(1).copied().unwrap_or(0xff),
        value.get(2).copied().unwrap_or(0xff),
        0xff,
    ]);
    let mut at = 0;
    let mut digits = String::new();
    for _ in 0..3 {
        let five = (bits << at) >> 27;
        let six = (bits << at) >> 26;
        let (digit, width) = match (five, six) {
            (0..=2, _) => (five, 5),
            (_, 0x19..=0x1f) => (six - 0x19 + 3, 6),
            _ => return None,
        };
        digits.push(char::from_digit(digit, 10)?);
        at += width;
    }
    Some(digits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hpack_integers_are_encoded_as_rfc_7541_shows() {
        // C.1.1, C.1.2 and C.1.3.
        let mut out = Vec::new();
        integer(&mut out, 0, 5, 10);
        assert_eq!(out, [0x0a]);
        out.clear();
        integer(&mut out, 0, 5, 1337);
        assert_eq!(out, [0x1f, 0x9a, 0x0a]);
        out.clear();
        integer(&mut out, 0, 8, 42);
        assert_eq!(out, [0x2a]);
    }

    #[test]
    fn a_get_is_one_headers_frame_with_its_literals() {
        let long = format!("/api/v1/pods?{}", "x".repeat(200));
        let get = Get {
            path: &long,
            authority: "127.0.0.1:8443",
            token: Some("t"),
        };
        let mut out = BytesMut::new();
        get.frame(&mut out, 3);
        let block = get.block();
        assert_eq!(&out[..3], &(block.len() as u32).to_be_bytes()[1..]);
        assert_eq!(&out[3..9], &[HEADERS, END_STREAM | END_HEADERS, 0, 0, 0, 3]);
        assert_eq!(&out[9..], &block[..]);
        // :path's value is longer than a 7-bit prefix holds: 127 + 86.
        assert_eq!(&block[..5], &[0x82, 0x87, 0x04, 0x7f, 86]);
        // authorization is name 23: 15 + 8 after a 4-bit prefix.
        assert!(block.ends_with(b"\x0f\x08\x08Bearer t"));
    }

    #[test]
    fn a_status_is_read_plain_or_huffman_coded_but_not_from_the_dynamic_table() {
        assert_eq!(status(&[0x88]), Some(200));
        assert_eq!(status(&[0x8d]), Some(404));
        assert_eq!(status(b"\x08\x03429"), Some(429));
        assert_eq!(status(b"\x48\x03403"), Some(403));
        // "401" Huffman-coded: 011010 00000 00001, after the table's size
        // update to none.
        assert_eq!(status(&[0x20, 0x08, 0x82, 0x68, 0x01]), Some(401));
        // "200": 00010 00000 00000, and a bit of padding.
        assert_eq!(status(&[0x48, 0x82, 0x10, 0x01]), Some(200));
        assert_eq!(status(&[0x08, 0x82, 0xff, 0xff]), None);
        assert_eq!(status(&[0xbe]), None);
    }
}
