//! The 200 responses of reads of cached objects, and the bodies of lists
//! and gets, in each encoding a
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
//! (see [`crate::cacher::encoding`]): a body copies bytes. List bodies are
//! streamed in chunks of about [`CHUNK`] bytes.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::{BufMut, Bytes, BytesMut};
use kubecache_wire::protobuf;
use kubecache_wire::{CachedObject, Encoding, Status};

use crate::cacher::Seat;
use crate::cacher::encoding::{Kind, Shape};

/// The header that says which resourceVersion a response was served at (a
/// `HeaderName`: by its `&str`, every use parses and checks the name).
pub const RESOURCE_VERSION_HEADER: HeaderName =
    HeaderName::from_static("x-kubecache-resource-version");

/// A 200 JSON response served at `resource_version`.
pub fn json_response(body: Body, resource_version: u64) -> Response {
    response(body, resource_version, Encoding::Json, false)
}

/// A 200 response in `encoding` served at `resource_version`; `watch` for a
/// watch stream.
pub(crate) fn response(
    body: Body,
    resource_version: u64,
    encoding: Encoding,
    watch: bool,
) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(encoding.content_type(watch)),
    );
    headers.insert(RESOURCE_VERSION_HEADER, resource_version.into());
    response
}

/// Size of the chunks a list body is streamed in.
const CHUNK: usize = 256 * 1024;

/// `metadata` of a list.
#[derive(Default)]
pub(crate) struct ListMeta {
    pub resource_version: u64,
    pub continue_token: Option<String>,
    pub remaining: Option<usize>,
    /// `shardInfo.selector`: the canonical shard selector a sharded list
    /// was answered under (only `[a-z0-9.,'() |]`: nothing JSON escapes).
    pub shard_selector: Option<String>,
}

/// The body of one object: in JSON, its kept encoding and `\n`, copied
/// once into a buffer of their size (sent as one frame: as pieces, HTTP/2
/// writes the newline's frame apart).
///
/// # Errors
///
/// 500 for an object that does not encode as protobuf.
pub(crate) fn object(
    kind: &Kind,
    object: &CachedObject,
    shape: Shape,
    encoding: Encoding,
) -> Result<Bytes, Status> {
    Ok(match encoding {
        Encoding::Json => {
            let pieces = kind.json(object, shape);
            let length = pieces.iter().map(Bytes::len).sum::<usize>() + 1;
            let mut body = BytesMut::with_capacity(length);
            pieces.iter().for_each(|piece| body.put_slice(piece));
            body.put_u8(b'\n');
            body.freeze()
        }
        Encoding::Protobuf => kind.body(object, shape, encoding)?.into(),
    })
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
    encoding: Encoding,
) -> Result<Chunks, Status> {
    let (api_version, list_kind) = kind.list_type_meta(shape);
    Ok(match encoding {
        Encoding::Json => {
            // A custom resource's list is an unstructured map in the API
            // server, written with sorted keys.
            let envelope = match shape == Shape::Object && !kind.builtin {
                true => unstructured_envelope(&api_version, &list_kind, meta),
                false => typed_envelope(&api_version, &list_kind, meta),
            };
            let kind = kind.clone();
            json_list(envelope, items, move |object, chunk| {
                if shape == Shape::Object && kind.builtin {
                    chunk.put_u8(b'{');
                    chunk.put(object.without_type_meta());
                } else {
                    for piece in kind.json(object, shape) {
                        chunk.put(piece);
                    }
                }
            })
        }
        Encoding::Protobuf => {
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

/// `response`, its body sent while it holds `seat` (see
/// `cacher/seats.rs`), which is freed once the body is sent or dropped.
pub(crate) fn seated(response: Response, seat: Seat) -> Response {
    response.map(|body| Body::new(Seated { body, seat }))
}

/// A body sent while it holds its seat.
struct Seated {
    body: Body,
    seat: Seat,
}

impl hyper::body::Body for Seated {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        if let Err(status) = ready!(this.seat.poll_ready(cx)) {
            // The send waited too long for its seat again: cut.
            return Poll::Ready(Some(Err(axum::Error::new(status.message))));
        }
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        if let Poll::Ready(Some(_)) = polled {
            this.seat.progressed();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// The head and tail of a JSON list of a typed kind: `kind`, `apiVersion`,
/// `metadata` in Go's `ListMeta` order, then `items`.
fn typed_envelope(api_version: &str, kind: &str, meta: &ListMeta) -> (String, String) {
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
    if let Some(selector) = &meta.shard_selector {
        head.push_str(&format!(r#","shardInfo":{{"selector":"{selector}"}}"#));
    }
    head.push_str(r#"},"items":["#);
    (head, "]}\n".into())
}

/// The head and tail of a JSON list of a custom resource, as the API server
/// writes its unstructured list: keys sorted, so `items` before `kind` and
/// `metadata`, whose `continue` is always there (empty on the last page).
fn unstructured_envelope(api_version: &str, kind: &str, meta: &ListMeta) -> (String, String) {
    let head = format!(r#"{{"apiVersion":"{api_version}","items":["#);
    let token = meta.continue_token.as_deref().unwrap_or_default();
    let mut tail = format!(r#"],"kind":"{kind}","metadata":{{"continue":"{token}""#);
    if let Some(remaining) = meta.remaining {
        tail.push_str(&format!(r#","remainingItemCount":{remaining}"#));
    }
    tail.push_str(&format!(
        r#","resourceVersion":"{}""#,
        meta.resource_version
    ));
    if let Some(selector) = &meta.shard_selector {
        tail.push_str(&format!(r#","shardInfo":{{"selector":"{selector}"}}"#));
    }
    tail.push_str("}}\n");
    (head, tail)
}

/// The chunks of a JSON list between `envelope`'s head and tail, each item
/// written by `item`.
fn json_list(
    (head, tail): (String, String),
    items: Vec<Arc<CachedObject>>,
    item: impl Fn(&CachedObject, &mut BytesMut) + Send + 'static,
) -> Chunks {
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
            chunk.put_slice(tail.as_bytes());
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
        shard_selector: meta.shard_selector.as_deref(),
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

#[cfg(test)]
mod tests {
    //! The bodies against a real API server's (the golden corpus), given
    //! the same objects.

    use serde::Deserialize;
    use serde_json::Value;
    use serde_json::value::RawValue;

    use super::*;
    use crate::golden;

    fn kind(api_version: &str, kind: &str) -> Kind {
        let protobuf = protobuf::message_type(api_version, kind);
        Kind {
            api_version: api_version.into(),
            kind: kind.into(),
            builtin: protobuf.is_some(),
            protobuf,
        }
    }

    /// The items of a recorded list, as the store keeps them.
    fn items(list: &[u8], kind: &Kind) -> Vec<Arc<CachedObject>> {
        #[derive(Deserialize)]
        struct List<'a> {
            #[serde(borrow)]
            items: Vec<&'a RawValue>,
        }
        let list: List<'_> = serde_json::from_slice(list).unwrap();
        list.items
            .iter()
            .map(|item| {
                Arc::new(golden::object(
                    item.get().as_bytes(),
                    &kind.kind,
                    &kind.api_version,
                ))
            })
            .collect()
    }

    fn at(resource_version: u64) -> ListMeta {
        ListMeta {
            resource_version,
            ..ListMeta::default()
        }
    }

    fn body(chunks: Chunks) -> Vec<u8> {
        chunks.collect::<Vec<_>>().concat()
    }

    fn text(bytes: &[u8]) -> &str {
        std::str::from_utf8(bytes).unwrap()
    }

    /// A protobuf list or object body as `(apiVersion, kind, JSON)`, its
    /// JSON without Go's zero values (see [`golden::without_zero_values`]).
    fn decoded(body: &[u8], ty: protobuf::MessageType) -> (String, String, Value) {
        let unknown = protobuf::decode_unknown(body).unwrap();
        let json = protobuf::proto_to_json(ty, unknown.raw).unwrap();
        let value = serde_json::from_slice(&json).unwrap();
        (
            unknown.api_version.into(),
            unknown.kind.into(),
            golden::without_zero_values(&value),
        )
    }

    fn metadata_list_type() -> protobuf::MessageType {
        protobuf::MessageType::from_full_name(
            "k8s.io.apimachinery.pkg.apis.meta.v1.PartialObjectMetadataList",
        )
        .unwrap()
    }

    /// The recorded widgets did not change between the full list (95108)
    /// and the metadata-only one (95218): the metadata list of the first is
    /// the second, byte for byte in JSON.
    #[test]
    fn a_metadata_list_of_custom_resources_is_the_api_servers() {
        let widgets = kind("golden.example.com/v1", "Widget");
        let objects = items(&golden::read("lists/widgets.list.json"), &widgets);
        let got = body(
            list(
                &widgets,
                &at(95218),
                objects.clone(),
                Shape::Metadata,
                Encoding::Json,
            )
            .unwrap(),
        );
        let want = golden::read("metadata/widgets.metadata.list.json");
        assert_eq!(text(&got), text(&want));
        let got = body(
            list(
                &widgets,
                &at(95218),
                objects,
                Shape::Metadata,
                Encoding::Protobuf,
            )
            .unwrap(),
        );
        let want = golden::read("metadata/widgets.metadata.list.pb");
        assert_eq!(
            decoded(&got, metadata_list_type()),
            decoded(&want, metadata_list_type())
        );
    }

    /// The pods at 95218 are recorded by their metadata only (the full list
    /// is older): pods made of that metadata give the list back, byte for
    /// byte in JSON.
    #[test]
    fn a_metadata_list_of_pods_is_the_api_servers() {
        #[derive(Deserialize)]
        struct Item<'a> {
            #[serde(borrow)]
            metadata: &'a RawValue,
        }
        #[derive(Deserialize)]
        struct List<'a> {
            #[serde(borrow)]
            items: Vec<Item<'a>>,
        }
        let want = golden::read("metadata/pods.metadata.list.json.gz");
        let recorded: List<'_> = serde_json::from_slice(&want).unwrap();
        let pods = kind("v1", "Pod");
        let objects: Vec<_> = recorded
            .items
            .iter()
            .map(|item| {
                let json = format!(
                    r#"{{"metadata":{},"spec":{{"containers":[]}}}}"#,
                    item.metadata.get()
                );
                Arc::new(golden::object(json.as_bytes(), "Pod", "v1"))
            })
            .collect();
        let got = body(
            list(
                &pods,
                &at(95218),
                objects.clone(),
                Shape::Metadata,
                Encoding::Json,
            )
            .unwrap(),
        );
        assert_eq!(text(&got), text(&want));
        let got = body(
            list(
                &pods,
                &at(95218),
                objects,
                Shape::Metadata,
                Encoding::Protobuf,
            )
            .unwrap(),
        );
        let want = golden::read("metadata/pods.metadata.list.pb.gz");
        assert_eq!(
            decoded(&got, metadata_list_type()),
            decoded(&want, metadata_list_type())
        );
    }

    #[test]
    fn a_metadata_get_is_the_api_servers() {
        let pods = kind("v1", "Pod");
        let pod = golden::object(
            &golden::read("single/pod-analytics-backup-28681014-5p6rq.json"),
            "Pod",
            "v1",
        );
        let got = object(&pods, &pod, Shape::Metadata, Encoding::Json).unwrap();
        let want = golden::read("metadata/pod-analytics-backup-28681014-5p6rq.metadata.json");
        assert_eq!(text(&got), text(&want));
        let got = object(&pods, &pod, Shape::Metadata, Encoding::Protobuf).unwrap();
        let want = golden::read("metadata/pod-analytics-backup-28681014-5p6rq.metadata.pb");
        let ty = kubecache_wire::partial_object_metadata();
        assert_eq!(decoded(&got, ty), decoded(&want, ty));
    }

    /// Every recorded list of a kind with protobuf, encoded by kubecache
    /// from the JSON items, is the API server's protobuf list up to Go's
    /// zero values: same envelope, list metadata and items.
    #[test]
    fn protobuf_lists_are_the_api_servers_given_the_same_objects() {
        let mut checked = 0;
        for entry in std::fs::read_dir(golden::dir().join("lists")).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            let Some(stem) = name
                .strip_suffix(".list.json")
                .or(name.strip_suffix(".list.json.gz"))
            else {
                continue;
            };
            let gz = if name.ends_with(".gz") { ".gz" } else { "" };
            let json = golden::read(&format!("lists/{name}"));
            let recorded: Value = serde_json::from_slice(&json).unwrap();
            let list_kind = recorded["kind"].as_str().unwrap();
            let api_version = recorded["apiVersion"].as_str().unwrap();
            let resource = kind(api_version, list_kind.trim_end_matches("List"));
            let (Some(_), Some(list_type)) = (
                resource.protobuf,
                protobuf::message_type(api_version, list_kind),
            ) else {
                continue;
            };
            let rv = recorded["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            let objects = items(&json, &resource);
            let got = body(
                list(
                    &resource,
                    &at(rv),
                    objects,
                    Shape::Object,
                    Encoding::Protobuf,
                )
                .unwrap(),
            );
            let want = golden::read(&format!("lists/{stem}.list.pb{gz}"));
            assert_eq!(
                decoded(&got, list_type),
                decoded(&want, list_type),
                "{name}"
            );
            checked += 1;
        }
        assert!(checked >= 25, "only {checked} lists checked");
    }

    #[test]
    fn json_bodies_end_with_a_newline_as_the_api_servers() {
        let pods = kind("v1", "Pod");
        let file = "single/pod-analytics-backup-28681014-5p6rq.json";
        let want = golden::read(file);
        let pod = golden::object(&want, "Pod", "v1");
        let got = object(&pods, &pod, Shape::Object, Encoding::Json).unwrap();
        assert_eq!(text(&got), text(&want));
        let json = golden::read("lists/configmaps.list.json");
        let configmaps = kind("v1", "ConfigMap");
        let objects = items(&json, &configmaps);
        let got = body(
            list(
                &configmaps,
                &at(95108),
                objects,
                Shape::Object,
                Encoding::Json,
            )
            .unwrap(),
        );
        assert_eq!(text(&got), text(&json));
    }

    /// Go's `ListMeta` order, or the sorted keys of an unstructured list,
    /// with `shardInfo` last of both; in protobuf, `ListMeta` field 5.
    #[test]
    fn a_sharded_list_echoes_its_selector_in_every_encoding() {
        let selector =
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";
        let meta = ListMeta {
            resource_version: 7,
            continue_token: Some("t".into()),
            shard_selector: Some(selector.into()),
            ..ListMeta::default()
        };
        let pods = kind("v1", "Pod");
        let got = body(list(&pods, &meta, Vec::new(), Shape::Object, Encoding::Json).unwrap());
        assert_eq!(
            text(&got),
            format!(
                r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"7","continue":"t","shardInfo":{{"selector":"{selector}"}}}},"items":[]}}"#
            ) + "\n"
        );
        let widgets = kind("golden.example.com/v1", "Widget");
        let got = body(list(&widgets, &meta, Vec::new(), Shape::Object, Encoding::Json).unwrap());
        assert!(
            text(&got).ends_with(&format!(
                "\"metadata\":{{\"continue\":\"t\",\"resourceVersion\":\"7\",\"shardInfo\":{{\"selector\":\"{selector}\"}}}}}}\n"
            )),
            "{}",
            text(&got)
        );
        for shape in [Shape::Object, Shape::Metadata] {
            let got = body(list(&pods, &meta, Vec::new(), shape, Encoding::Protobuf).unwrap());
            let unknown = protobuf::decode_unknown(&got).unwrap();
            let parts = protobuf::decode_list(unknown.raw).unwrap();
            assert_eq!(parts.meta.shard_selector, Some(selector));
        }
    }
}
