//! The bodies of lists and gets of cached objects, in each encoding a
//! client can ask for (see [`negotiate`](super::negotiate)), written as the
//! API server writes them:
//! - JSON: a list `{"kind":"PodList",…,"items":[…]}` whose items of built-in
//!   kinds leave out `kind` and `apiVersion`; one object with them; both
//!   followed by `\n` (Go's `json.Encoder`);
//! - protobuf: `k8s\0` + `runtime.Unknown` around the object's message or
//!   the list's (`PodList`, …);
//! - metadata only: `PartialObjectMetadata` (and `…List`) of
//!   `meta.k8s.io/v1`, in JSON (every item with its `kind` and
//!   `apiVersion`) or protobuf, for every kind, custom resources included.
//!
//! Every encoding of an object is made once per object version and shared
//! (see [`crate::served::encoding`]): a body copies bytes. List bodies are
//! streamed in chunks of about [`CHUNK`] bytes.

use std::sync::Arc;

use axum::body::Body;
use bytes::{BufMut, Bytes, BytesMut};
use kubecache_wire::protobuf;
use kubecache_wire::{CachedObject, Status};

use crate::served::encoding::{self, Kind, Shape, Wire};

/// Size of the chunks a list body is streamed in.
const CHUNK: usize = 256 * 1024;

/// `metadata` of a list.
pub(crate) struct ListMeta {
    pub resource_version: u64,
    pub continue_token: Option<String>,
    pub remaining: Option<usize>,
}

/// The body of one object.
///
/// # Errors
///
/// 500 for an object that does not encode as protobuf.
pub(crate) fn object(
    kind: &Kind,
    object: &CachedObject,
    shape: Shape,
    wire: Wire,
) -> Result<Bytes, Status> {
    let mut body = kind.body(object, shape, wire)?;
    if wire == Wire::Json {
        body.push(b'\n');
    }
    Ok(body.into())
}

/// The chunks of a body, as they are sent.
pub(crate) type Chunks = Box<dyn Iterator<Item = Bytes> + Send>;

/// The body of a list of `items` with `meta`, in chunks.
///
/// # Errors
///
/// 500 when an item does not encode as protobuf (found before anything is
/// sent).
pub(crate) fn list(
    kind: &Kind,
    meta: &ListMeta,
    items: Vec<Arc<CachedObject>>,
    shape: Shape,
    wire: Wire,
) -> Result<Chunks, Status> {
    let (api_version, list_kind) = kind.list_type_meta(shape);
    Ok(match wire {
        Wire::Json => {
            let without_type_meta = shape == Shape::Object && kind.builtin;
            json_list(
                &api_version,
                &list_kind,
                meta,
                items,
                move |object, chunk| {
                    if without_type_meta {
                        chunk.put_u8(b'{');
                        chunk.put(object.without_type_meta());
                    } else {
                        for piece in encoding::json(object, shape) {
                            chunk.put(piece);
                        }
                    }
                },
            )
        }
        Wire::Protobuf => {
            let messages = items
                .iter()
                .map(|object| kind.message(object, shape))
                .collect::<Result<Vec<_>, _>>()?;
            protobuf_list(&api_version, &list_kind, meta, messages)
        }
    })
}

/// A streamed body of `chunks`.
pub(crate) fn stream(chunks: Chunks) -> Body {
    Body::from_stream(futures::stream::iter(
        chunks.map(Ok::<_, std::convert::Infallible>),
    ))
}

/// The chunks of a JSON list, each item written by `item`.
fn json_list(
    api_version: &str,
    kind: &str,
    meta: &ListMeta,
    items: Vec<Arc<CachedObject>>,
    item: impl Fn(&CachedObject, &mut BytesMut) + Send + 'static,
) -> Chunks {
    let mut head = format!(
        r#"{{"kind":"{kind}","apiVersion":"{api_version}","metadata":{{"resourceVersion":"{}""#,
        meta.resource_version
    );
    if let Some(token) = &meta.continue_token {
        head.push_str(&format!(r#","continue":"{token}""#));
    }
    if let Some(remaining) = meta.remaining {
        head.push_str(&format!(r#","remainingItemCount":{remaining}"#));
    }
    head.push_str(r#"},"items":["#);
    let mut next = 0;
    let mut head = Some(Bytes::from(head));
    Box::new(std::iter::from_fn(move || {
        if next > items.len() {
            return None;
        }
        let mut chunk = BytesMut::with_capacity(CHUNK + 16 * 1024);
        if let Some(head) = head.take() {
            chunk.put(head);
        }
        while next < items.len() && chunk.len() < CHUNK {
            if next > 0 {
                chunk.put_u8(b',');
            }
            item(&items[next], &mut chunk);
            next += 1;
        }
        if next == items.len() {
            chunk.put_slice(b"]}\n");
            next += 1;
        }
        Some(chunk.freeze())
    }))
}

/// The chunks of a protobuf list of encoded `messages`.
fn protobuf_list(api_version: &str, kind: &str, meta: &ListMeta, messages: Vec<Bytes>) -> Chunks {
    let resource_version = meta.resource_version.to_string();
    let list_meta = protobuf::ListMeta {
        resource_version: &resource_version,
        continue_token: meta.continue_token.as_deref(),
        remaining_item_count: meta.remaining.map(|n| n as i64),
    };
    let mut head = Vec::new();
    protobuf::encode_list_unknown_head(api_version, kind, &list_meta, &messages, &mut head);
    let mut head = Some(head);
    let mut next = 0;
    Box::new(std::iter::from_fn(move || {
        if next > messages.len() {
            return None;
        }
        let mut chunk = head.take().unwrap_or_default();
        chunk.reserve(CHUNK + 16 * 1024);
        while next < messages.len() && chunk.len() < CHUNK {
            protobuf::encode_list_item(&messages[next], &mut chunk);
            next += 1;
        }
        if next == messages.len() {
            protobuf::encode_unknown_tail(&mut chunk);
            next += 1;
        }
        Some(Bytes::from(chunk))
    }))
}
