//! The encodings the API server answers in, and the one place where a
//! response body becomes what the reflector reads: a list page of JSON
//! objects, or watch events whose objects are JSON.
//!
//! kube-apiserver serves built-in kinds as JSON or as Kubernetes protobuf
//! (`k8s\0` + `runtime.Unknown`; watches as length-framed `WatchEvent`s), and
//! custom resources as JSON only. The reflector asks for protobuf where
//! [`RequestEncoding`] says so, always with JSON as the fallback, and decodes each
//! response by its `Content-Type`: a server may answer JSON anyway.
//!
//! The store keeps JSON whatever the wire (it is what kubecache serves), so
//! protobuf objects are transcoded to JSON once, here, and then take the same
//! path as JSON objects, but for the bytes of their strings that are not
//! UTF-8, which JSON cannot carry: the transcoder reports them
//! ([`RawStrings`]) and they are handed on with the JSON, to be kept beside
//! it (see [`kubecache_wire::Encodings`]).
//!
//! # Failures
//! Classified as for JSON (see [`UpstreamError::recovery`]):
//! - a body or event that does not decode (bad protobuf, a kind the schema
//!   does not know, an object that does not transcode) is
//!   [`UpstreamError::Decode`]: an event may be lost, so the reflector relists;
//! - a watch stream that ends inside a frame, or announces a frame larger
//!   than any object, is broken: [`UpstreamError::Stream`], resumed from the
//!   last resourceVersion.

use std::fmt;
use std::str::FromStr;

use bytes::{Bytes, BytesMut};

use super::error::UpstreamError;
use super::resource::ApiResource;
use kubecache_wire::media::JSON;
use kubecache_wire::protobuf::{
    self, KubeVersion, MessageType, ProtoError, RawStrings, TypeMeta, WatchFrameDecoder,
};
use kubecache_wire::{Encoding, WatchEventType, WatchLine};

/// Accept for lists: protobuf, or JSON where the server has no protobuf
/// (custom resources get 406 without the fallback).
const ACCEPT_PROTOBUF: &str = "application/vnd.kubernetes.protobuf, application/json";
/// Accept for watches: the protobuf stream (`stream=watch`, as kube-apiserver
/// names its length-framed watch encoding), or JSON lines.
const ACCEPT_PROTOBUF_WATCH: &str =
    "application/vnd.kubernetes.protobuf;stream=watch, application/json";

/// Largest watch line or frame accepted: an object is at most ~1.5 MiB in
/// etcd (its default `--max-request-bytes`), so a longer one is a broken
/// stream, not an event.
const MAX_EVENT: usize = 16 * 1024 * 1024;

/// Which encoding the reflector asks the API server for.
///
/// Whatever is asked, JSON is always acceptable too, and each response is
/// read in the encoding it declares. Parsed from `json`, `protobuf` or
/// `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RequestEncoding {
    /// JSON only.
    Json,
    /// Protobuf first, for every resource (the server falls back to JSON
    /// for custom resources). A server answering protobuf for a kind the
    /// transcoder does not know gets decode errors: prefer `Auto`.
    Protobuf,
    /// Protobuf for the kinds the transcoder knows (every built-in kind,
    /// see [`protobuf::message_type`]), JSON for the others.
    #[default]
    Auto,
}

impl RequestEncoding {
    /// The name used in config and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestEncoding::Json => "json",
            RequestEncoding::Protobuf => "protobuf",
            RequestEncoding::Auto => "auto",
        }
    }

    /// Whether requests for `resource` ask for protobuf first.
    pub fn asks_protobuf(self, resource: &ApiResource) -> bool {
        match self {
            RequestEncoding::Json => false,
            RequestEncoding::Protobuf => true,
            RequestEncoding::Auto => {
                protobuf::message_type(&resource.api_version(), &resource.kind).is_some()
            }
        }
    }

    /// The `Accept` header of a list (`watch: false`) or watch request.
    pub(crate) fn accept(protobuf: bool, watch: bool) -> &'static str {
        match (protobuf, watch) {
            (false, _) => JSON,
            (true, false) => ACCEPT_PROTOBUF,
            (true, true) => ACCEPT_PROTOBUF_WATCH,
        }
    }
}

impl FromStr for RequestEncoding {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "json" => Ok(RequestEncoding::Json),
            "protobuf" => Ok(RequestEncoding::Protobuf),
            "auto" => Ok(RequestEncoding::Auto),
            other => Err(format!(
                "unknown wire format {other:?}: expected json, protobuf or auto"
            )),
        }
    }
}

impl fmt::Display for RequestEncoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

fn decode_error(what: impl Into<String>, error: impl fmt::Display) -> UpstreamError {
    UpstreamError::Decode {
        what: what.into(),
        error: error.to_string(),
    }
}

/// A watch event that does not decode.
pub(crate) fn undecodable_event(error: impl fmt::Display) -> UpstreamError {
    decode_error("watch event", error)
}

/// The failure an ERROR event carries.
pub(crate) fn error_event(event: &WatchLine<'_>) -> Result<UpstreamError, UpstreamError> {
    let status = event.status().map_err(undecodable_event)?;
    Ok(UpstreamError::from_status(&status))
}

/// A list response: the whole body, in the encoding it declared.
#[derive(Debug, Clone)]
pub struct ListResponse {
    body: Bytes,
    encoding: Encoding,
    /// The server's version: protobuf is read as its Go types wrote it.
    version: KubeVersion,
}

/// One page of a list, items not decoded yet.
#[derive(Debug)]
pub struct Page<'a> {
    /// `metadata.resourceVersion`: the list's snapshot.
    pub resource_version: u64,
    /// The token of the next page; `None` on the last page.
    pub continue_token: Option<String>,
    /// `metadata.remainingItemCount`, when the server knows.
    pub remaining_item_count: Option<u64>,
    items: Items<'a>,
}

#[derive(Debug)]
enum Items<'a> {
    /// Each item's JSON.
    Json(Vec<&'a [u8]>),
    /// Each item's protobuf message, of type `ty`.
    Protobuf {
        ty: MessageType,
        items: Vec<&'a [u8]>,
    },
}

impl ListResponse {
    /// A body received with `Content-Type` `encoding` from an API server of
    /// Kubernetes `version`.
    pub fn new(body: Bytes, encoding: Encoding, version: KubeVersion) -> Self {
        ListResponse {
            body,
            encoding,
            version,
        }
    }

    /// The body's size on the wire.
    pub fn len(&self) -> usize {
        self.body.len()
    }

    /// Whether the body is empty.
    pub fn is_empty(&self) -> bool {
        self.body.is_empty()
    }

    /// The encoding the server answered in.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Reads the list's metadata and the extent of each item.
    pub fn page(&self) -> Result<Page<'_>, UpstreamError> {
        match self.encoding {
            Encoding::Json => {
                let list = kubecache_wire::parse_list(&self.body)
                    .map_err(|e| decode_error("list page", e))?;
                Ok(Page {
                    resource_version: list.resource_version,
                    continue_token: list.continue_token,
                    remaining_item_count: list.remaining_item_count,
                    items: Items::Json(list.items),
                })
            }
            Encoding::Protobuf => self
                .protobuf_page()
                .map_err(|e| decode_error("list page", e)),
        }
    }

    fn protobuf_page(&self) -> Result<Page<'_>, String> {
        let unknown = protobuf::decode_unknown(&self.body).map_err(|e| e.to_string())?;
        if unknown.kind == "Status" {
            let status = status_of(&unknown)?;
            return Err(format!(
                "expected a list but got a Status: {} {}: {}",
                status.code, status.reason, status.message
            ));
        }
        let item_kind = unknown
            .kind
            .strip_suffix("List")
            .ok_or_else(|| format!("{} is not a list kind", unknown.kind))?;
        let ty = protobuf::message_type(unknown.api_version, item_kind)
            .ok_or_else(|| format!("no protobuf schema for {}/{item_kind}", unknown.api_version))?
            .as_of(self.version);
        let list = protobuf::decode_list(unknown.raw).map_err(|e| e.to_string())?;
        let rv = list.meta.resource_version;
        Ok(Page {
            resource_version: kubecache_wire::parse_resource_version(rv).ok_or_else(|| {
                format!("metadata.resourceVersion: expected a decimal number, got {rv:?}")
            })?,
            continue_token: list.meta.continue_token.map(str::to_owned),
            remaining_item_count: list
                .meta
                .remaining_item_count
                .and_then(|n| u64::try_from(n).ok()),
            items: Items::Protobuf {
                ty,
                items: list.items,
            },
        })
    }
}

impl Page<'_> {
    /// Items on this page.
    pub fn len(&self) -> usize {
        match &self.items {
            Items::Json(items) | Items::Protobuf { items, .. } => items.len(),
        }
    }

    /// Whether the page has no items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hands the last item's JSON to `last` (`None` on an empty page): where
    /// the page ends, known before the page is decoded.
    pub fn last_json<T>(
        &self,
        last: impl FnOnce(&[u8]) -> Result<T, UpstreamError>,
    ) -> Result<Option<T>, UpstreamError> {
        match &self.items {
            Items::Json(items) => items.last().map(|item| last(item)).transpose(),
            Items::Protobuf { ty, items } => items
                .last()
                .map(|item| {
                    let mut json = Vec::new();
                    protobuf::proto_to_json_into(*ty, item, None, &mut json)
                        .map_err(|e| decode_error(format!("{ty:?} list item"), e))?;
                    last(&json)
                })
                .transpose(),
        }
    }

    /// Hands each item's JSON to `each`, in list order (protobuf items are
    /// transcoded one at a time into a reused buffer, without `kind` and
    /// `apiVersion`: list items of built-in kinds have none in JSON either).
    /// Stops at the first error. What is kept of an item is
    /// [`for_each_object`](Self::for_each_object)'s.
    pub fn for_each_json(
        &self,
        mut each: impl FnMut(&[u8]) -> Result<(), UpstreamError>,
    ) -> Result<(), UpstreamError> {
        self.for_each_object(|json, _| each(json))
    }

    /// [`for_each_json`](Self::for_each_json), with the bytes of the item's
    /// strings that are not UTF-8 (a protobuf item's; `None` for almost
    /// every item, and for JSON, which cannot carry them).
    pub fn for_each_object(
        &self,
        mut each: impl FnMut(&[u8], Option<RawStrings>) -> Result<(), UpstreamError>,
    ) -> Result<(), UpstreamError> {
        match &self.items {
            Items::Json(items) => items.iter().try_for_each(|item| each(item, None)),
            Items::Protobuf { ty, items } => {
                let mut json = Vec::new();
                for item in items {
                    json.clear();
                    let strings = protobuf::proto_to_json_with_strings(*ty, item, None, &mut json)
                        .map_err(|e| decode_error(format!("{ty:?} list item"), e))?;
                    each(&json, strings)?;
                }
                Ok(())
            }
        }
    }
}

/// A Status carried by a protobuf envelope.
fn status_of(unknown: &protobuf::Unknown<'_>) -> Result<kubecache_wire::Status, String> {
    let json = unknown
        .to_json()
        .ok_or("no protobuf schema for Status")?
        .map_err(|e| e.to_string())?;
    serde_json::from_slice(&json).map_err(|e| format!("not a Status: {e}"))
}

/// The JSON form of an error body: protobuf Statuses (the body starts with
/// `k8s\0`) are transcoded, anything else is returned as it is.
pub(crate) fn error_body_json(body: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    protobuf::decode_unknown(body)
        .ok()
        .and_then(|unknown| unknown.to_json())
        .and_then(Result::ok)
        .map_or(std::borrow::Cow::Borrowed(body), std::borrow::Cow::Owned)
}

/// One event of a watch stream, whatever its encoding.
#[derive(Debug, Clone)]
pub struct WatchEvent(Event);

#[derive(Debug, Clone)]
enum Event {
    /// One JSON line, decoded on demand.
    Line(Bytes),
    /// A protobuf event, its object transcoded to JSON (with `kind` and
    /// `apiVersion` first, as in JSON events), and the bytes of the
    /// object's strings that are not UTF-8.
    Transcoded {
        event_type: WatchEventType,
        object: Vec<u8>,
        strings: Option<Box<RawStrings>>,
    },
}

impl WatchEvent {
    /// The event's type and its object's JSON.
    pub fn line(&self) -> Result<WatchLine<'_>, UpstreamError> {
        match &self.0 {
            Event::Line(line) => {
                kubecache_wire::parse_watch_line(line).map_err(|e| decode_error("watch event", e))
            }
            Event::Transcoded {
                event_type, object, ..
            } => Ok(WatchLine {
                event_type: *event_type,
                object,
            }),
        }
    }

    /// The bytes of the object's strings that are not UTF-8 (a protobuf
    /// event's; `None` for almost every event, and for JSON).
    pub fn raw_strings(&self) -> Option<&RawStrings> {
        match &self.0 {
            Event::Line(_) => None,
            Event::Transcoded { strings, .. } => strings.as_deref(),
        }
    }

    fn transcode(
        event: protobuf::WatchEvent,
        version: KubeVersion,
    ) -> Result<WatchEvent, UpstreamError> {
        let what = || format!("{} watch event", event.event_type);
        let event_type = WatchEventType::from_wire(&event.event_type).ok_or_else(|| {
            decode_error(
                "watch event",
                format!("unknown type {:?}", event.event_type),
            )
        })?;
        let unknown =
            protobuf::decode_unknown(&event.object).map_err(|e| decode_error(what(), e))?;
        let ty = protobuf::message_type(unknown.api_version, unknown.kind).ok_or_else(|| {
            decode_error(
                what(),
                format!(
                    "no protobuf schema for {}/{}",
                    unknown.api_version, unknown.kind
                ),
            )
        })?;
        let type_meta = TypeMeta {
            api_version: unknown.api_version,
            kind: unknown.kind,
        };
        let mut object = Vec::with_capacity(unknown.raw.len() * 2);
        let strings = protobuf::proto_to_json_with_strings(
            ty.as_of(version),
            unknown.raw,
            Some(type_meta),
            &mut object,
        )
        .map_err(|e| decode_error(what(), e))?;
        Ok(WatchEvent(Event::Transcoded {
            event_type,
            object,
            strings: strings.map(Box::new),
        }))
    }
}

/// Splits a watch body into events: JSON lines or protobuf frames.
#[derive(Debug)]
pub(crate) enum WatchSplitter {
    Lines {
        buf: BytesMut,
        /// How much of `buf` is known to hold no newline.
        scanned: usize,
    },
    /// Protobuf frames, read as the Go types of the server's version wrote them.
    Frames(WatchFrameDecoder, KubeVersion),
}

impl WatchSplitter {
    pub(crate) fn new(encoding: Encoding, version: KubeVersion) -> Self {
        match encoding {
            Encoding::Json => WatchSplitter::Lines {
                buf: BytesMut::new(),
                scanned: 0,
            },
            Encoding::Protobuf => {
                WatchSplitter::Frames(WatchFrameDecoder::with_max_frame_len(MAX_EVENT), version)
            }
        }
    }

    /// Appends bytes received from the stream.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        match self {
            WatchSplitter::Lines { buf, .. } => buf.extend_from_slice(chunk),
            WatchSplitter::Frames(frames, _) => frames.push(chunk),
        }
    }

    /// The next complete event, `None` when more bytes are needed.
    pub(crate) fn next_event(&mut self) -> Result<Option<WatchEvent>, UpstreamError> {
        match self {
            WatchSplitter::Lines { buf, scanned } => loop {
                let Some(at) = buf[*scanned..].iter().position(|b| *b == b'\n') else {
                    *scanned = buf.len();
                    if buf.len() > MAX_EVENT {
                        return Err(UpstreamError::Stream(format!(
                            "a watch line exceeds {MAX_EVENT} bytes"
                        )));
                    }
                    return Ok(None);
                };
                let mut line = buf.split_to(*scanned + at + 1);
                *scanned = 0;
                while line.last().is_some_and(|b| matches!(b, b'\n' | b'\r')) {
                    line.truncate(line.len() - 1);
                }
                if !line.is_empty() {
                    return Ok(Some(WatchEvent(Event::Line(line.freeze()))));
                }
            },
            WatchSplitter::Frames(frames, version) => match frames.next_event() {
                Ok(Some(event)) => WatchEvent::transcode(event, *version).map(Some),
                Ok(None) => Ok(None),
                Err(e) => Err(frame_error(e)),
            },
        }
    }

    /// The server ended the stream: an error if it ended inside an event.
    pub(crate) fn finish(&self) -> Result<(), UpstreamError> {
        match self {
            WatchSplitter::Lines { buf, .. } if buf.iter().all(u8::is_ascii_whitespace) => Ok(()),
            WatchSplitter::Lines { buf, .. } => Err(UpstreamError::Stream(format!(
                "the watch ended inside an event ({} bytes without a newline)",
                buf.len()
            ))),
            WatchSplitter::Frames(frames, _) => frames.finish().map_err(frame_error),
        }
    }
}

/// A framing failure breaks the stream (resume); a frame that is not a
/// `WatchEvent` may have lost an event (relist).
fn frame_error(e: ProtoError) -> UpstreamError {
    match e {
        ProtoError::FrameTooLarge { .. } | ProtoError::TruncatedFrame { .. } => {
            UpstreamError::Stream(e.to_string())
        }
        other => decode_error("watch frame", other),
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::upstream::{Phase, Recovery};
    use kubecache_wire::{Status, Transform, decode_object};

    /// The wire crate's realistic Pod fixture.
    const POD: &str = include_str!("../../../wire/fixtures/pod.json");

    fn pod_type() -> MessageType {
        protobuf::message_type("v1", "Pod").unwrap()
    }

    /// A page of three pods, as kube-apiserver sends it.
    fn list_body() -> Vec<u8> {
        let pod = protobuf::json_to_proto(pod_type(), POD.as_bytes()).unwrap();
        let meta = protobuf::ListMeta {
            resource_version: "184470",
            continue_token: Some("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTg0NDcwfQ"),
            remaining_item_count: Some(7),
            shard_selector: None,
        };
        let mut body = Vec::new();
        protobuf::encode_list_unknown("v1", "PodList", &meta, &[&pod, &pod, &pod], &mut body);
        body
    }

    /// ADDED, BOOKMARK, then the ERROR 410 that ends a watch.
    fn watch_stream() -> Vec<u8> {
        let pod = protobuf::json_to_proto(pod_type(), POD.as_bytes()).unwrap();
        let bookmark = br#"{"metadata":{"resourceVersion":"184480","creationTimestamp":null},"spec":{},"status":{}}"#;
        let bookmark = protobuf::json_to_proto(pod_type(), bookmark).unwrap();
        let status = Status::expired("too old resource version: 1 (184400)").to_json();
        let status_type = protobuf::message_type("v1", "Status").unwrap();
        let status = protobuf::json_to_proto(status_type, &status).unwrap();
        let mut stream = Vec::new();
        for (event_type, kind, raw) in [
            ("ADDED", "Pod", &pod),
            ("BOOKMARK", "Pod", &bookmark),
            ("ERROR", "Status", &status),
        ] {
            let envelope = protobuf::encode_unknown("v1", kind, raw);
            protobuf::encode_watch_event_into(event_type, &envelope, &mut stream);
        }
        stream
    }

    /// Every event of `stream`, fed in chunks of `chunk` bytes, and the end.
    fn read_stream(stream: &[u8], chunk: usize) -> Result<Vec<WatchEvent>, UpstreamError> {
        let mut splitter = WatchSplitter::new(Encoding::Protobuf, KubeVersion::NEWEST);
        let mut events = Vec::new();
        for part in stream.chunks(chunk.max(1)) {
            splitter.push(part);
            while let Some(event) = splitter.next_event()? {
                events.push(event);
            }
        }
        splitter.finish()?;
        Ok(events)
    }

    #[test]
    fn request_encodings_parse_their_names_and_auto_asks_protobuf_for_built_in_kinds_only() {
        for wire in [
            RequestEncoding::Json,
            RequestEncoding::Protobuf,
            RequestEncoding::Auto,
        ] {
            assert_eq!(wire.as_str().parse::<RequestEncoding>(), Ok(wire));
            assert_eq!(wire.to_string(), wire.as_str());
        }
        assert!("proto".parse::<RequestEncoding>().is_err());
        assert_eq!(RequestEncoding::default(), RequestEncoding::Auto);
        let widgets = ApiResource {
            group: "example.com".into(),
            version: "v1".into(),
            plural: "widgets".into(),
            kind: "Widget".into(),
            namespaced: true,
        };
        let pods = ApiResource::pods();
        assert!(RequestEncoding::Auto.asks_protobuf(&pods));
        assert!(!RequestEncoding::Auto.asks_protobuf(&widgets));
        assert!(RequestEncoding::Protobuf.asks_protobuf(&widgets));
        assert!(!RequestEncoding::Json.asks_protobuf(&pods));
        // Whatever is asked, JSON stays acceptable.
        assert_eq!(
            RequestEncoding::accept(true, true),
            "application/vnd.kubernetes.protobuf;stream=watch, application/json"
        );
        assert_eq!(RequestEncoding::accept(false, true), "application/json");
    }

    #[test]
    fn a_protobuf_page_gives_its_metadata_and_each_item_as_json() {
        let response =
            ListResponse::new(list_body().into(), Encoding::Protobuf, KubeVersion::NEWEST);
        let page = response.page().unwrap();
        assert_eq!(page.resource_version, 184_470);
        assert_eq!(
            page.continue_token.as_deref(),
            Some("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTg0NDcwfQ")
        );
        assert_eq!((page.remaining_item_count, page.len()), (Some(7), 3));
        let transform = Transform::default();
        let want = decode_object(POD.as_bytes(), "Pod", "v1", &transform).unwrap();
        let mut seen = 0;
        page.for_each_json(|item| {
            let got = decode_object(item, "Pod", "v1", &transform).unwrap();
            assert!(
                got.json
                    .starts_with(br#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web-"#)
            );
            let without_json = |o: &kubecache_wire::CachedObject| kubecache_wire::CachedObject {
                json: Bytes::new(),
                type_meta_len: 0,
                ..o.clone()
            };
            assert!(without_json(&got) == without_json(&want), "{got:?}");
            seen += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, 3);
    }

    #[test]
    fn strings_that_are_not_utf8_come_with_list_items_and_watch_events_of_protobuf() {
        let cm = protobuf::message_type("v1", "ConfigMap").unwrap();
        let json = br#"{"metadata":{"name":"bad","namespace":"n","resourceVersion":"5"},"data":{"fffe":"AXXB"}}"#;
        let mut raw = protobuf::json_to_proto(cm, json).unwrap();
        let at = raw.windows(4).position(|w| w == b"AXXB").unwrap();
        raw[at..at + 4].copy_from_slice(b"A\xff\xfeB");
        let expected = r#"Some([value "/data/fffe" = [41, ff, fe, 42]])"#;
        let meta = protobuf::ListMeta {
            resource_version: "5",
            continue_token: None,
            remaining_item_count: None,
            shard_selector: None,
        };
        let mut body = Vec::new();
        protobuf::encode_list_unknown("v1", "ConfigMapList", &meta, &[&raw], &mut body);
        let response = ListResponse::new(body.into(), Encoding::Protobuf, KubeVersion::NEWEST);
        let page = response.page().unwrap();
        let mut seen = Vec::new();
        page.for_each_object(|item, strings| {
            assert!(item.windows(14).any(|w| w == br"A\ufffd\ufffdB"));
            seen.push(format!("{strings:?}"));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, [expected]);
        let mut stream = Vec::new();
        let envelope = protobuf::encode_unknown("v1", "ConfigMap", &raw);
        protobuf::encode_watch_event_into("MODIFIED", &envelope, &mut stream);
        let mut splitter = WatchSplitter::new(Encoding::Protobuf, KubeVersion::NEWEST);
        splitter.push(&stream);
        let event = splitter.next_event().unwrap().expect("an event");
        assert_eq!(format!("{:?}", event.raw_strings()), expected);
        // A JSON line has none: JSON cannot carry them.
        let mut lines = WatchSplitter::new(Encoding::Json, KubeVersion::NEWEST);
        lines.push(b"{\"type\":\"ADDED\",\"object\":{}}\n");
        assert!(lines.next_event().unwrap().unwrap().raw_strings().is_none());
    }

    #[test]
    fn protobuf_watch_events_read_like_json_lines_whatever_the_chunking() {
        let stream = watch_stream();
        for chunk in [1, 7, 4096, stream.len()] {
            let events = read_stream(&stream, chunk).unwrap();
            let lines: Vec<WatchLine<'_>> = events.iter().map(|e| e.line().unwrap()).collect();
            let types: Vec<WatchEventType> = lines.iter().map(|l| l.event_type).collect();
            assert_eq!(
                types,
                [
                    WatchEventType::Added,
                    WatchEventType::Bookmark,
                    WatchEventType::Error
                ]
            );
            assert!(
                lines[0]
                    .object
                    .starts_with(br#"{"kind":"Pod","apiVersion":"v1","metadata":{"#)
            );
            assert_eq!(lines[0].resource_version().unwrap(), 23_736);
            assert_eq!(lines[1].bookmark().unwrap().resource_version, 184_480);
            let status = lines[2].status().unwrap();
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
            assert_eq!(
                UpstreamError::from_status(&status).recovery(Phase::Watch),
                Recovery::Relist
            );
        }
    }

    #[test]
    fn a_protobuf_watch_cut_anywhere_is_a_broken_stream_to_resume() {
        let stream = watch_stream();
        for end in 1..stream.len() {
            let at_boundary = read_stream(&stream[..end], 64).is_ok();
            if at_boundary {
                continue;
            }
            let error = read_stream(&stream[..end], 64).unwrap_err();
            assert!(
                matches!(error, UpstreamError::Stream(_)),
                "cut at {end}: {error}"
            );
            assert_eq!(error.recovery(Phase::Watch), Recovery::Resume);
        }
    }

    #[test]
    fn a_protobuf_error_body_is_classified_like_its_json_twin() {
        let status = Status::expired("The resourceVersion for the provided list is too old.");
        let status_type = protobuf::message_type("v1", "Status").unwrap();
        let raw = protobuf::json_to_proto(status_type, &status.to_json()).unwrap();
        let body = protobuf::encode_unknown("v1", "Status", &raw);
        match UpstreamError::from_response(410, None, &error_body_json(&body)) {
            UpstreamError::Gone { message, .. } => assert_eq!(message, status.message),
            other => panic!("expected 410 Gone, got {other:?}"),
        }
        assert_eq!(&*error_body_json(b"oops"), b"oops");
        // A Status where a list was expected is undecodable, not a panic.
        let response = ListResponse::new(body.into(), Encoding::Protobuf, KubeVersion::NEWEST);
        assert!(matches!(response.page(), Err(UpstreamError::Decode { .. })));
    }

    /// Everything the reflector does with a protobuf body: every failure is
    /// a classified error, and what decodes is a valid stored object.
    fn ingest(list: &[u8], stream: &[u8]) {
        let transform = Transform::default();
        let store = |json: &[u8]| {
            if let Ok(object) = decode_object(json, "Pod", "v1", &transform) {
                serde_json::from_slice::<serde_json::Value>(&object.json)
                    .expect("a decoded object is valid JSON");
            }
        };
        let classified = |e: &UpstreamError| {
            assert!(
                matches!(e, UpstreamError::Decode { .. } | UpstreamError::Stream(_)),
                "{e}"
            );
        };
        let response = ListResponse::new(
            Bytes::copy_from_slice(list),
            Encoding::Protobuf,
            KubeVersion::NEWEST,
        );
        match response.page() {
            Ok(page) => {
                if let Err(e) = page.for_each_json(|json| {
                    store(json);
                    Ok(())
                }) {
                    classified(&e);
                }
            }
            Err(e) => classified(&e),
        }
        match read_stream(stream, 512) {
            Ok(events) => {
                for event in &events {
                    match event.line() {
                        Ok(line) => {
                            store(line.object);
                            let _ = (line.bookmark(), line.status());
                        }
                        Err(e) => classified(&e),
                    }
                }
            }
            Err(e) => classified(&e),
        }
    }

    #[test]
    fn mutated_and_truncated_protobuf_bodies_are_classified_errors_never_panics() {
        let (list, stream) = (list_body(), watch_stream());
        for end in (0..list.len()).step_by(7) {
            ingest(&list[..end], &stream[..end.min(stream.len())]);
        }
        let mut rng = SmallRng::seed_from_u64(0x6b38_7300);
        for _ in 0..5_000 {
            let (mut list, mut stream) = (list.clone(), stream.clone());
            for bytes in [&mut list, &mut stream] {
                for _ in 0..rng.random_range(1..=6) {
                    let at = rng.random_range(0..bytes.len());
                    match rng.random_range(0..3) {
                        0 => bytes[at] = rng.random(),
                        1 => bytes[at] ^= 1 << rng.random_range(0..8),
                        _ => bytes.truncate(at.max(1)),
                    }
                }
            }
            ingest(&list, &stream);
            let garbage: Vec<u8> = (0..rng.random_range(0..600))
                .map(|_| rng.random())
                .collect();
            let mut framed = MAGIC_FRAME.to_vec();
            framed.extend_from_slice(&garbage);
            ingest(&garbage, &framed);
        }
    }

    /// A frame prefix announcing 300 bytes, for garbage that looks framed.
    const MAGIC_FRAME: [u8; 4] = [0, 0, 1, 44];
}
