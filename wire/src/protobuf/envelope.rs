//! The envelope around protobuf bodies (`k8s\0` + `runtime.Unknown`), list
//! bodies assembled from already-encoded items, and watch stream framing.

use bytes::{Buf, Bytes, BytesMut};

use super::error::ProtoError;
use super::wire::{
    Fields, LEN, VARINT, WireValue, bytes_field_len, put_bytes_field, put_key, put_varint,
    varint_len,
};

/// The 4 bytes that start every protobuf body of the API server.
pub const MAGIC: [u8; 4] = *b"k8s\0";

/// A decoded `runtime.Unknown` envelope, borrowing from the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unknown<'a> {
    /// `typeMeta.apiVersion`, e.g. `v1`.
    pub api_version: &'a str,
    /// `typeMeta.kind`, e.g. `Pod` or `PodList`.
    pub kind: &'a str,
    /// The encoded object (a message of the type named by `kind`).
    pub raw: &'a [u8],
    /// `contentEncoding`; empty from real servers.
    pub content_encoding: &'a str,
    /// `contentType`; empty from real servers (meaning protobuf).
    pub content_type: &'a str,
}

fn type_meta_len(api_version: &str, kind: &str) -> usize {
    bytes_field_len(1, api_version.len()) + bytes_field_len(2, kind.len())
}

/// Writes `k8s\0` + `Unknown{typeMeta, raw: <raw_len bytes follow>}` up to the
/// start of `raw`; [`finish_unknown`] writes the rest after `raw`.
fn start_unknown(api_version: &str, kind: &str, raw_len: usize, out: &mut Vec<u8>) {
    out.extend_from_slice(&MAGIC);
    put_key(out, 1, LEN);
    put_varint(out, type_meta_len(api_version, kind) as u64);
    put_bytes_field(out, 1, api_version.as_bytes());
    put_bytes_field(out, 2, kind.as_bytes());
    put_key(out, 2, LEN);
    put_varint(out, raw_len as u64);
}

/// `contentEncoding` and `contentType`, both empty, as Go writes them.
fn finish_unknown(out: &mut Vec<u8>) {
    out.extend_from_slice(&[0x1a, 0x00, 0x22, 0x00]);
}

fn unknown_len(api_version: &str, kind: &str, raw_len: usize) -> usize {
    MAGIC.len()
        + bytes_field_len(1, type_meta_len(api_version, kind))
        + bytes_field_len(2, raw_len)
        + 4
}

/// The protobuf body for one object: `k8s\0` + `runtime.Unknown{typeMeta:
/// {apiVersion, kind}, raw, contentEncoding: "", contentType: ""}`.
pub fn encode_unknown(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(unknown_len(api_version, kind, raw.len()));
    encode_unknown_into(api_version, kind, raw, &mut out);
    out
}

/// [`encode_unknown`], appending to `out`.
pub fn encode_unknown_into(api_version: &str, kind: &str, raw: &[u8], out: &mut Vec<u8>) {
    out.reserve(unknown_len(api_version, kind, raw.len()));
    start_unknown(api_version, kind, raw.len(), out);
    out.extend_from_slice(raw);
    finish_unknown(out);
}

fn str_field<'a>(value: WireValue<'a>, what: &str) -> Result<&'a str, ProtoError> {
    match value {
        WireValue::Len(b) => std::str::from_utf8(b)
            .map_err(|_| ProtoError::malformed(format!("{what} is not UTF-8"))),
        other => Err(ProtoError::malformed(format!(
            "{what} has wire type {}",
            other.wire_type()
        ))),
    }
}

fn malformed_at(path: &str, e: impl std::fmt::Display) -> ProtoError {
    ProtoError::Malformed {
        path: path.to_string(),
        reason: e.to_string(),
    }
}

/// The error for a field of `message` that its decoder did not take:
/// fields 1 and 2 (known in both envelopes) with the wrong wire type, or an
/// unknown tag.
fn unexpected_field(tag: u32, value: &WireValue<'_>, message: &'static str) -> ProtoError {
    if matches!(tag, 1 | 2) {
        malformed_at(
            "",
            format!("field {tag} has wire type {}", value.wire_type()),
        )
    } else {
        ProtoError::UnknownTag {
            path: String::new(),
            tag,
            message,
        }
    }
}

/// Reads a protobuf body: checks the `k8s\0` magic and decodes the
/// `runtime.Unknown` that follows.
pub fn decode_unknown(bytes: &[u8]) -> Result<Unknown<'_>, ProtoError> {
    let body = bytes.strip_prefix(&MAGIC).ok_or(ProtoError::MissingMagic)?;
    let mut unknown = Unknown {
        api_version: "",
        kind: "",
        raw: &[],
        content_encoding: "",
        content_type: "",
    };
    for item in Fields::new(body) {
        let (tag, value) = item.map_err(|e| malformed_at("", e))?;
        match (tag, value) {
            (1, WireValue::Len(type_meta)) => {
                for item in Fields::new(type_meta) {
                    let (tag, value) = item.map_err(|e| malformed_at("typeMeta", e))?;
                    match tag {
                        1 => unknown.api_version = str_field(value, "typeMeta.apiVersion")?,
                        2 => unknown.kind = str_field(value, "typeMeta.kind")?,
                        tag => {
                            return Err(ProtoError::UnknownTag {
                                path: "typeMeta".into(),
                                tag,
                                message: "k8s.io.apimachinery.pkg.runtime.TypeMeta",
                            });
                        }
                    }
                }
            }
            (2, WireValue::Len(raw)) => unknown.raw = raw,
            (3, value) => unknown.content_encoding = str_field(value, "contentEncoding")?,
            (4, value) => unknown.content_type = str_field(value, "contentType")?,
            (tag, other) => {
                return Err(unexpected_field(
                    tag,
                    &other,
                    "k8s.io.apimachinery.pkg.runtime.Unknown",
                ));
            }
        }
    }
    Ok(unknown)
}

/// `metadata` of a list (`meta.v1.ListMeta`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListMeta<'a> {
    /// The snapshot's resourceVersion (always written).
    pub resource_version: &'a str,
    /// The continue token, when more pages follow.
    pub continue_token: Option<&'a str>,
    /// Objects after this page, when more pages follow.
    pub remaining_item_count: Option<i64>,
    /// `shardInfo.selector`: the shard selector a filtered list was
    /// answered under (KEP-5866), echoed.
    pub shard_selector: Option<&'a str>,
}

impl ListMeta<'_> {
    fn encoded_len(&self) -> usize {
        bytes_field_len(1, 0)
            + bytes_field_len(2, self.resource_version.len())
            + bytes_field_len(3, self.continue_token.map_or(0, str::len))
            + self
                .remaining_item_count
                .map_or(0, |n| 1 + varint_len(n as u64))
            + self
                .shard_selector
                .map_or(0, |s| bytes_field_len(5, bytes_field_len(1, s.len())))
    }

    /// As Go writes it: `selfLink` and `continue` even when empty, the
    /// pointers `remainingItemCount` and `shardInfo` only when set (and
    /// `shardInfo`'s `selector=1` always).
    fn write(&self, out: &mut Vec<u8>) {
        put_bytes_field(out, 1, b"");
        put_bytes_field(out, 2, self.resource_version.as_bytes());
        put_bytes_field(out, 3, self.continue_token.unwrap_or("").as_bytes());
        if let Some(n) = self.remaining_item_count {
            put_key(out, 4, VARINT);
            put_varint(out, n as u64);
        }
        if let Some(selector) = self.shard_selector {
            put_key(out, 5, LEN);
            put_varint(out, bytes_field_len(1, selector.len()) as u64);
            put_bytes_field(out, 1, selector.as_bytes());
        }
    }
}

/// A list message read back: its `metadata` and each item's encoded message,
/// not decoded (transcode them one by one with
/// [`proto_to_json_into`](super::proto_to_json_into)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListParts<'a> {
    /// The list's `metadata`. An empty `continue` (Go writes the field even
    /// when it is empty) reads as `None`.
    pub meta: ListMeta<'a>,
    /// Each item's message bytes, in list order.
    pub items: Vec<&'a [u8]>,
}

/// Splits a list message (`PodList`, `ConfigMapList`, ...: every Kubernetes
/// list is `metadata=1 ListMeta, items=2 repeated`; `raw` is the `raw` of its
/// `runtime.Unknown`) into its `ListMeta` and the bytes of its items.
///
/// `ListMeta` fields, from `k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto`:
/// `selfLink=1` (ignored), `resourceVersion=2`, `continue=3`,
/// `remainingItemCount=4`, `shardInfo=5` (`ShardInfo`: `selector=1`).
pub fn decode_list(raw: &[u8]) -> Result<ListParts<'_>, ProtoError> {
    let mut parts = ListParts {
        meta: ListMeta::default(),
        items: Vec::new(),
    };
    for item in Fields::new(raw) {
        match item.map_err(|e| malformed_at("", e))? {
            (1, WireValue::Len(meta)) => {
                for item in Fields::new(meta) {
                    match item.map_err(|e| malformed_at("metadata", e))? {
                        (1, value) => {
                            str_field(value, "metadata.selfLink")?;
                        }
                        (2, value) => {
                            parts.meta.resource_version =
                                str_field(value, "metadata.resourceVersion")?;
                        }
                        (3, value) => {
                            let token = str_field(value, "metadata.continue")?;
                            parts.meta.continue_token = (!token.is_empty()).then_some(token);
                        }
                        (4, WireValue::Varint(n)) => {
                            parts.meta.remaining_item_count = Some(n as i64);
                        }
                        (5, WireValue::Len(info)) => {
                            for item in Fields::new(info) {
                                if let (1, value) =
                                    item.map_err(|e| malformed_at("metadata.shardInfo", e))?
                                {
                                    parts.meta.shard_selector =
                                        Some(str_field(value, "metadata.shardInfo.selector")?);
                                }
                            }
                        }
                        (tag, _) => {
                            return Err(ProtoError::UnknownTag {
                                path: "metadata".into(),
                                tag,
                                message: "k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta",
                            });
                        }
                    }
                }
            }
            (2, WireValue::Len(object)) => parts.items.push(object),
            (tag, other) => {
                return Err(unexpected_field(
                    tag,
                    &other,
                    "a Kubernetes list (metadata=1, items=2)",
                ));
            }
        }
    }
    Ok(parts)
}

fn list_len<B: AsRef<[u8]>>(meta: &ListMeta<'_>, items: &[B]) -> usize {
    bytes_field_len(1, meta.encoded_len())
        + items
            .iter()
            .map(|i| bytes_field_len(2, i.as_ref().len()))
            .sum::<usize>()
}

fn write_list<B: AsRef<[u8]>>(meta: &ListMeta<'_>, items: &[B], out: &mut Vec<u8>) {
    put_key(out, 1, LEN);
    put_varint(out, meta.encoded_len() as u64);
    meta.write(out);
    for item in items {
        put_bytes_field(out, 2, item.as_ref());
    }
}

/// Appends a list message (`PodList`, `ConfigMapList`, ...: every Kubernetes
/// list is `metadata=1 ListMeta, items=2 repeated`) built from items that are
/// already encoded messages (not envelopes); the items are copied, not
/// re-encoded.
pub fn encode_list<B: AsRef<[u8]>>(meta: &ListMeta<'_>, items: &[B], out: &mut Vec<u8>) {
    out.reserve(list_len(meta, items));
    write_list(meta, items, out);
}

/// Appends a whole list body, `k8s\0` + `Unknown` around the list message,
/// in one pass (the list's length is computed first, so nothing is moved).
pub fn encode_list_unknown<B: AsRef<[u8]>>(
    api_version: &str,
    list_kind: &str,
    meta: &ListMeta<'_>,
    items: &[B],
    out: &mut Vec<u8>,
) {
    out.reserve(unknown_len(api_version, list_kind, list_len(meta, items)));
    encode_list_unknown_head(api_version, list_kind, meta, items, out);
    for item in items {
        encode_list_item(item.as_ref(), out);
    }
    encode_unknown_tail(out);
}

/// Appends the start of the list body [`encode_list_unknown`] writes, up to
/// its first item: with [`encode_list_item`] for each of `items` and then
/// [`encode_unknown_tail`], the same body, written as it is sent.
pub fn encode_list_unknown_head<B: AsRef<[u8]>>(
    api_version: &str,
    list_kind: &str,
    meta: &ListMeta<'_>,
    items: &[B],
    out: &mut Vec<u8>,
) {
    start_unknown(api_version, list_kind, list_len(meta, items), out);
    put_key(out, 1, LEN);
    put_varint(out, meta.encoded_len() as u64);
    meta.write(out);
}

/// Appends one item of a list message (an encoded message, not an envelope).
pub fn encode_list_item(item: &[u8], out: &mut Vec<u8>) {
    put_bytes_field(out, 2, item);
}

/// Appends what ends a body after its `raw` (see [`encode_list_unknown_head`]).
pub fn encode_unknown_tail(out: &mut Vec<u8>) {
    finish_unknown(out);
}

/// One watch frame: a 4-byte big-endian length, then `meta.v1.WatchEvent{type,
/// object: RawExtension{raw: object_envelope}}`. `object_envelope` is the
/// object's `k8s\0` + `Unknown` body (see [`encode_unknown`]).
///
/// # Panics
///
/// If the event is 4 GiB or larger (its length does not fit the prefix).
pub fn encode_watch_event(event_type: &str, object_envelope: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_watch_event_into(event_type, object_envelope, &mut out);
    out
}

/// [`encode_watch_event`], appending to `out`.
///
/// # Panics
///
/// If the event is 4 GiB or larger.
pub fn encode_watch_event_into(event_type: &str, object_envelope: &[u8], out: &mut Vec<u8>) {
    let raw_ext_len = bytes_field_len(1, object_envelope.len());
    let len = bytes_field_len(1, event_type.len()) + bytes_field_len(2, raw_ext_len);
    let prefix = u32::try_from(len).expect("watch event of 4 GiB or more");
    out.reserve(4 + len);
    out.extend_from_slice(&prefix.to_be_bytes());
    put_bytes_field(out, 1, event_type.as_bytes());
    put_key(out, 2, LEN);
    put_varint(out, raw_ext_len as u64);
    put_bytes_field(out, 1, object_envelope);
}

/// One event read from a protobuf watch stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchEvent {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    pub event_type: String,
    /// The object's envelope (`k8s\0` + `Unknown`), sharing the frame's buffer;
    /// read it with [`decode_unknown`].
    pub object: Bytes,
}

/// Reads watch frames from a byte stream delivered in arbitrary chunks.
///
/// Push each chunk with [`push`](Self::push), then call
/// [`next_event`](Self::next_event) until it returns `Ok(None)`. At the end of
/// the stream call [`finish`](Self::finish): bytes of an incomplete frame are
/// an error there. Errors are sticky: once a frame is bad, every later call
/// returns the same error (the stream cannot be resynchronized).
#[derive(Debug)]
pub struct WatchFrameDecoder {
    buf: BytesMut,
    max_frame_len: usize,
    failed: Option<ProtoError>,
}

impl Default for WatchFrameDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl WatchFrameDecoder {
    /// The default frame limit. A stored object is bounded by etcd's request
    /// limit (1.5 MiB by default) and the API server's request body limit
    /// (3 MiB by default), so a frame of more than 64 MiB is not an object but
    /// a broken stream; the margin leaves room for clusters with raised limits.
    pub const DEFAULT_MAX_FRAME_LEN: usize = 64 << 20;

    /// A decoder with [`DEFAULT_MAX_FRAME_LEN`](Self::DEFAULT_MAX_FRAME_LEN).
    pub fn new() -> Self {
        Self::with_max_frame_len(Self::DEFAULT_MAX_FRAME_LEN)
    }

    /// A decoder refusing frames longer than `max_frame_len` bytes (without the prefix).
    pub fn with_max_frame_len(max_frame_len: usize) -> Self {
        WatchFrameDecoder {
            buf: BytesMut::new(),
            max_frame_len,
            failed: None,
        }
    }

    /// Appends bytes received from the stream.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// Bytes received and not yet returned as events.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    fn fail(&mut self, e: ProtoError) -> ProtoError {
        self.failed = Some(e.clone());
        e
    }

    /// The next complete event, `Ok(None)` when more bytes are needed.
    pub fn next_event(&mut self) -> Result<Option<WatchEvent>, ProtoError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let Some(prefix) = self.buf.first_chunk::<4>() else {
            return Ok(None);
        };
        let len = u32::from_be_bytes(*prefix) as usize;
        if len > self.max_frame_len {
            let limit = self.max_frame_len;
            return Err(self.fail(ProtoError::FrameTooLarge { len, limit }));
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        self.buf.advance(4);
        let frame = self.buf.split_to(len).freeze();
        match parse_watch_event(&frame) {
            Ok((event_type, object)) => Ok(Some(WatchEvent {
                event_type: event_type.to_owned(),
                object: frame.slice_ref(object),
            })),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Declares the end of the stream: an error if part of a frame is buffered.
    pub fn finish(&self) -> Result<(), ProtoError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.buf.is_empty() {
            return Ok(());
        }
        let needed = match self.buf.first_chunk::<4>() {
            Some(prefix) => 4 + u32::from_be_bytes(*prefix) as usize,
            None => 4,
        };
        Err(ProtoError::TruncatedFrame {
            buffered: self.buf.len(),
            needed,
        })
    }
}

/// Splits a `WatchEvent` message into its type and its object's raw bytes.
fn parse_watch_event(frame: &[u8]) -> Result<(&str, &[u8]), ProtoError> {
    let mut event_type = None;
    let mut object = None;
    for item in Fields::new(frame) {
        let (tag, value) = item.map_err(|e| malformed_at("", e))?;
        match (tag, value) {
            (1, value) => event_type = Some(str_field(value, "type")?),
            (2, WireValue::Len(raw_ext)) => {
                for item in Fields::new(raw_ext) {
                    match item.map_err(|e| malformed_at("object", e))? {
                        (1, WireValue::Len(raw)) => object = Some(raw),
                        (tag, _) => {
                            return Err(ProtoError::UnknownTag {
                                path: "object".into(),
                                tag,
                                message: "k8s.io.apimachinery.pkg.runtime.RawExtension",
                            });
                        }
                    }
                }
            }
            (tag, _) => {
                return Err(ProtoError::UnknownTag {
                    path: String::new(),
                    tag,
                    message: "k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent",
                });
            }
        }
    }
    match (event_type, object) {
        (Some(t), Some(o)) => Ok((t, o)),
        (None, _) => Err(malformed_at("type", "watch event without a type")),
        (_, None) => Err(malformed_at("object", "watch event without an object")),
    }
}
