//! What one watcher is sent for one store event, and the bytes of watch
//! events in each encoding, as kube-apiserver writes them: JSON lines
//! `{"type":…,"object":…}\n`, or protobuf frames (a 4-byte big-endian
//! length, then a `WatchEvent` whose object is `k8s\0` + `runtime.Unknown`),
//! each carrying the whole object or its `PartialObjectMetadata`; or one-row
//! Tables (see [`crate::http::table`]).

use std::any::Any;
use std::sync::{Arc, OnceLock};

use bytes::{BufMut, Bytes, BytesMut};
use kubecache_reflector::Event;
use kubecache_wire::protobuf;
use kubecache_wire::{CachedObject, ChangeType, Status};
use parking_lot::Mutex;

use crate::cacher::encoding::{Kind, Shape};
use crate::cacher::{Filter, Predicates};
use kubecache_wire::Encoding;

/// One event as a watcher receives it, shared by every watcher that
/// receives the same thing; each encoding of it is made once, by the first
/// watcher that needs it.
#[derive(Debug)]
pub(crate) struct Frame {
    /// The event's position in the event log: the resourceVersion a client
    /// that has seen it may resume from.
    pub position: u64,
    /// What the event is on the wire.
    pub kind: ChangeType,
    /// The object sent, at `position` when it is the last state of an
    /// object deleted then.
    pub object: Arc<CachedObject>,
    /// The event in each shape and wire (see [`slot`]).
    encoded: [OnceLock<Bytes>; 4],
    /// The event rendered by a layer above (a Table watch line), by the
    /// key of what each rendering depends on (see [`Frame::rendered`]).
    renderings: Mutex<Vec<(Box<dyn Any + Send + Sync>, Bytes)>>,
}

/// Where the event in `shape` and `wire` is kept.
fn slot(shape: Shape, encoding: Encoding) -> usize {
    match (shape, encoding) {
        (Shape::Object, Encoding::Json) => 0,
        (Shape::Object, Encoding::Protobuf) => 1,
        (Shape::Metadata, Encoding::Json) => 2,
        (Shape::Metadata, Encoding::Protobuf) => 3,
    }
}

impl Frame {
    /// The frame of `object` sent as `kind`, at `position`.
    pub fn new(kind: ChangeType, object: Arc<CachedObject>, position: u64) -> Frame {
        let object = if kind == ChangeType::Deleted && object.resource_version != position {
            Arc::new(object.at_resource_version(position))
        } else {
            object
        };
        Frame {
            position,
            kind,
            object,
            encoded: Default::default(),
            renderings: Mutex::default(),
        }
    }

    /// The event rendered as `key` says (a Table watch line: `key` is
    /// what the line depends on besides the event): made by `render` for
    /// the first watcher that asks, which the others asking meanwhile wait
    /// for, then kept. The key's type is the renderer's own, so this layer
    /// knows nothing of what it renders.
    pub fn rendered<K>(&self, key: K, render: impl FnOnce() -> Bytes) -> Bytes
    where
        K: PartialEq + Send + Sync + 'static,
    {
        let mut renderings = self.renderings.lock();
        let made = |(made, _): &&(Box<dyn Any + Send + Sync>, Bytes)| {
            made.downcast_ref::<K>() == Some(&key)
        };
        if let Some((_, line)) = renderings.iter().find(made) {
            return line.clone();
        }
        let line = render();
        renderings.push((Box::new(key), line.clone()));
        line
    }

    /// The event's bytes in `shape` and `wire`, for objects of `resource`.
    ///
    /// # Errors
    ///
    /// 500 for an object that does not encode as protobuf.
    pub fn encoded(
        &self,
        resource: &Kind,
        shape: Shape,
        encoding: Encoding,
    ) -> Result<Bytes, Status> {
        let cell = &self.encoded[slot(shape, encoding)];
        if let Some(bytes) = cell.get() {
            return Ok(bytes.clone());
        }
        let event_type = self.kind.as_str();
        let bytes = match encoding {
            Encoding::Json => json_event(event_type, &resource.json(&self.object, shape)),
            Encoding::Protobuf => {
                protobuf_event(event_type, &resource.body(&self.object, shape, encoding)?)
            }
        };
        Ok(cell.get_or_init(|| bytes).clone())
    }
}

/// What a watcher with `filter` and `predicates` is sent for `event`, and
/// the object it carries, as kube-apiserver's watch cache decides it:
/// an object that starts matching is `ADDED`, one that stops matching is
/// `DELETED` (its last matching state, at the event's resourceVersion), a
/// `MODIFIED` event passes only the change predicates.
pub(crate) fn decide<'e>(
    filter: &Filter,
    predicates: &Predicates,
    event: &'e Event,
) -> Option<(ChangeType, &'e Arc<CachedObject>)> {
    if event.kind == ChangeType::Deleted {
        return filter
            .matches(&event.object)
            .then_some((ChangeType::Deleted, &event.object));
    }
    let now = filter.matches(&event.object);
    let before = event.previous.as_ref().filter(|p| filter.matches(p));
    match (before, now) {
        (None, true) => Some((ChangeType::Added, &event.object)),
        (Some(previous), true) => predicates
            .passes(Some(previous), &event.object)
            .then_some((ChangeType::Modified, &event.object)),
        (Some(previous), false) => Some((ChangeType::Deleted, previous)),
        (None, false) => None,
    }
}

/// `{"type":"TYPE","object":OBJECT}\n`, the object in pieces.
fn json_event(event_type: &str, object: &[Bytes]) -> Bytes {
    let len = object.iter().map(Bytes::len).sum::<usize>();
    let mut line = BytesMut::with_capacity(len + 32);
    line.put_slice(br#"{"type":""#);
    line.put_slice(event_type.as_bytes());
    line.put_slice(br#"","object":"#);
    for piece in object {
        line.put_slice(piece);
    }
    line.put_slice(b"}\n");
    line.freeze()
}

/// A protobuf watch frame of `envelope` (`k8s\0` + `runtime.Unknown`).
fn protobuf_event(event_type: &str, envelope: &[u8]) -> Bytes {
    protobuf::encode_watch_event(event_type, envelope).into()
}

/// A `BOOKMARK` at `resource_version` in `shape` and `wire`;
/// `initial_events_end` marks the end of a streaming list's initial events
/// (`k8s.io/initial-events-end`). Its object is the API server's: a Go zero
/// object with only a resourceVersion (and a null `creationTimestamp` for
/// typed ones, `PartialObjectMetadata` included), except that the JSON of
/// a built-in kind lacks the empty `spec` and `status` Go writes for some
/// (a Pod's `"spec":{"containers":null},"status":{}`).
pub(crate) fn bookmark(
    resource: &Kind,
    shape: Shape,
    encoding: Encoding,
    resource_version: u64,
    initial_events_end: bool,
) -> Bytes {
    let typed = shape == Shape::Metadata || resource.builtin;
    let metadata = bookmark_metadata(resource_version, typed, initial_events_end);
    let (api_version, kind) = resource.type_meta(shape);
    match encoding {
        Encoding::Json => json_event(
            "BOOKMARK",
            &[Bytes::from(format!(
                r#"{{"kind":"{kind}","apiVersion":"{api_version}","metadata":{metadata}}}"#
            ))],
        ),
        Encoding::Protobuf => {
            let json = format!(r#"{{"metadata":{metadata}}}"#);
            let raw = match (shape, resource.protobuf) {
                (Shape::Object, Some(ty)) => protobuf::json_to_proto(ty, json.as_bytes()),
                _ => protobuf::json_to_proto(
                    kubecache_wire::partial_object_metadata(),
                    json.as_bytes(),
                ),
            }
            .expect("a bookmark's metadata encodes");
            protobuf_event(
                "BOOKMARK",
                &protobuf::encode_unknown(api_version, kind, &raw),
            )
        }
    }
}

/// The `metadata` of a bookmark's object at `resource_version`: with Go's
/// zero `ObjectMeta` of a `typed` object (a null creationTimestamp, an
/// empty Time message in protobuf), annotated as the end of a streaming
/// list's initial events when `initial_events_end`.
pub(crate) fn bookmark_metadata(
    resource_version: u64,
    typed: bool,
    initial_events_end: bool,
) -> String {
    let created = if typed {
        r#","creationTimestamp":null"#
    } else {
        ""
    };
    let annotations = if initial_events_end {
        r#","annotations":{"k8s.io/initial-events-end":"true"}"#
    } else {
        ""
    };
    format!(r#"{{"resourceVersion":"{resource_version}"{created}{annotations}}}"#)
}

/// An `ERROR` event carrying `status`, in `wire`.
pub(crate) fn error(encoding: Encoding, status: &Status) -> Bytes {
    match encoding {
        Encoding::Json => json_event("ERROR", &[Bytes::from(status.to_json())]),
        Encoding::Protobuf => protobuf_event("ERROR", &status.to_protobuf()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pods() -> Kind {
        Kind {
            api_version: "v1".into(),
            kind: "Pod".into(),
            builtin: true,
            protobuf: protobuf::message_type("v1", "Pod"),
        }
    }

    fn pod(json: &[u8]) -> Arc<CachedObject> {
        let transform = kubecache_wire::Transform::default();
        Arc::new(kubecache_wire::decode_object(json, "Pod", "v1", &transform).unwrap())
    }

    #[test]
    fn a_deleted_frame_carries_the_object_at_its_position_in_every_encoding() {
        let object = pod(br#"{"metadata":{"name":"a","resourceVersion":"7"},"spec":{}}"#);
        let frame = Frame::new(ChangeType::Deleted, object, 9);
        let line = frame
            .encoded(&pods(), Shape::Object, Encoding::Json)
            .unwrap();
        let line: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(line["type"], "DELETED");
        assert_eq!(line["object"]["metadata"]["resourceVersion"], "9");
        let line = frame
            .encoded(&pods(), Shape::Metadata, Encoding::Json)
            .unwrap();
        assert_eq!(
            &line[..],
            br#"{"type":"DELETED","object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"a","resourceVersion":"9"}}}
"#
        );
        for shape in [Shape::Object, Shape::Metadata] {
            let frame_bytes = frame.encoded(&pods(), shape, Encoding::Protobuf).unwrap();
            let mut decoder = protobuf::WatchFrameDecoder::new();
            decoder.push(&frame_bytes);
            let event = decoder.next_event().unwrap().unwrap();
            assert_eq!(event.event_type, "DELETED");
            let json = protobuf::decode_unknown(&event.object).unwrap();
            let ty = match shape {
                Shape::Object => protobuf::message_type("v1", "Pod").unwrap(),
                Shape::Metadata => kubecache_wire::partial_object_metadata(),
            };
            let object: serde_json::Value =
                serde_json::from_slice(&protobuf::proto_to_json(ty, json.raw).unwrap()).unwrap();
            assert_eq!(object["metadata"]["resourceVersion"], "9", "{shape:?}");
        }
    }

    #[test]
    fn each_encoding_of_a_frame_is_made_once() {
        let frame = Frame::new(
            ChangeType::Added,
            pod(br#"{"metadata":{"name":"a","resourceVersion":"7"}}"#),
            7,
        );
        for (shape, encoding) in [
            (Shape::Object, Encoding::Json),
            (Shape::Metadata, Encoding::Protobuf),
        ] {
            let first = frame.encoded(&pods(), shape, encoding).unwrap();
            let again = frame.encoded(&pods(), shape, encoding).unwrap();
            assert_eq!(first.as_ptr(), again.as_ptr());
        }
    }

    #[test]
    fn bookmarks_and_errors_are_single_events() {
        for line in [
            bookmark(&pods(), Shape::Object, Encoding::Json, 5, true),
            bookmark(&pods(), Shape::Metadata, Encoding::Json, 5, false),
            error(Encoding::Json, &Status::expired("gone")),
        ] {
            assert!(line.ends_with(b"\n"));
            let value: serde_json::Value = serde_json::from_slice(&line).unwrap();
            assert!(value["object"].is_object());
        }
        let end: serde_json::Value =
            serde_json::from_slice(&bookmark(&pods(), Shape::Object, Encoding::Json, 5, true))
                .unwrap();
        assert_eq!(
            end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
            "true"
        );
        for frame in [
            bookmark(&pods(), Shape::Object, Encoding::Protobuf, 5, true),
            bookmark(&pods(), Shape::Metadata, Encoding::Protobuf, 5, false),
            error(Encoding::Protobuf, &Status::expired("gone")),
        ] {
            let mut decoder = protobuf::WatchFrameDecoder::new();
            decoder.push(&frame);
            let event = decoder.next_event().unwrap().unwrap();
            assert!(["BOOKMARK", "ERROR"].contains(&event.event_type.as_str()));
            assert!(decoder.next_event().unwrap().is_none());
            decoder.finish().unwrap();
        }
    }

    /// A recorded watch event: its type and its object's bytes.
    fn recorded(line: &[u8]) -> (String, &serde_json::value::RawValue) {
        #[derive(serde::Deserialize)]
        struct Event<'a> {
            #[serde(rename = "type")]
            event_type: String,
            #[serde(borrow)]
            object: &'a serde_json::value::RawValue,
        }
        let event: Event<'_> = serde_json::from_slice(line).unwrap();
        (event.event_type, event.object)
    }

    fn change(event_type: &str) -> ChangeType {
        match event_type {
            "ADDED" => ChangeType::Added,
            "MODIFIED" => ChangeType::Modified,
            "DELETED" => ChangeType::Deleted,
            other => panic!("{other} is not a change"),
        }
    }

    fn lines(body: &[u8]) -> Vec<&[u8]> {
        body.split_inclusive(|b| *b == b'\n').collect()
    }

    /// The frames of a watch over the recorded window: the full objects of
    /// `watch/pods-meta.watch.json`, bookmarks at their recorded revision.
    fn recorded_frames(shape: Shape, encoding: Encoding) -> Vec<Bytes> {
        let full = crate::golden::read("watch/pods-meta.watch.json");
        lines(&full)
            .into_iter()
            .map(|line| {
                let (event_type, object) = recorded(line);
                if event_type == "BOOKMARK" {
                    let object: serde_json::Value = serde_json::from_str(object.get()).unwrap();
                    let rv = object["metadata"]["resourceVersion"].as_str().unwrap();
                    return bookmark(&pods(), shape, encoding, rv.parse().unwrap(), false);
                }
                let object = crate::golden::object(object.get().as_bytes(), "Pod", "v1");
                let position = object.resource_version;
                Frame::new(change(&event_type), Arc::new(object), position)
                    .encoded(&pods(), shape, encoding)
                    .unwrap()
            })
            .collect()
    }

    /// Five watches of one window were recorded side by side: kubecache's
    /// events of the full objects are the API server's, byte for byte, whole
    /// and metadata-only (the metadata watch reports the status-only change
    /// too: only its resourceVersion moves).
    #[test]
    fn json_watch_events_are_the_api_servers_whole_and_metadata_only() {
        let full = crate::golden::read("watch/pods-meta.watch.json");
        let metadata = crate::golden::read("watch/pods.metadata.watch.json");
        for (want, shape) in [(&full, Shape::Object), (&metadata, Shape::Metadata)] {
            let got = recorded_frames(shape, Encoding::Json);
            let want = lines(want);
            assert_eq!(got.len(), want.len(), "{shape:?}");
            for (got, want) in got.iter().zip(want) {
                if shape == Shape::Object && want.starts_with(br#"{"type":"BOOKMARK""#) {
                    // The empty spec and status of a Pod bookmark are not
                    // written (see `bookmark`).
                    continue;
                }
                assert_eq!(
                    std::str::from_utf8(got).unwrap(),
                    std::str::from_utf8(want).unwrap(),
                    "{shape:?}"
                );
            }
        }
    }

    /// The same window over protobuf: the same frames up to Go's zero
    /// values (see [`crate::golden::without_zero_values`]), whole objects
    /// (bookmarks aside: the API server's carry the empty spec and status
    /// of a Go zero Pod) and metadata-only.
    #[test]
    fn protobuf_watch_events_are_the_api_servers_whole_and_metadata_only() {
        let decode = |frames: &[u8], shape: Shape| {
            let mut decoder = protobuf::WatchFrameDecoder::new();
            decoder.push(frames);
            let mut events = Vec::new();
            while let Some(event) = decoder.next_event().unwrap() {
                let unknown = protobuf::decode_unknown(&event.object).unwrap();
                let ty = match shape {
                    Shape::Object => protobuf::message_type("v1", "Pod").unwrap(),
                    Shape::Metadata => kubecache_wire::partial_object_metadata(),
                };
                let json = protobuf::proto_to_json(ty, unknown.raw).unwrap();
                let object: serde_json::Value = serde_json::from_slice(&json).unwrap();
                let object = if event.event_type == "BOOKMARK" {
                    serde_json::json!({"metadata": object["metadata"]})
                } else {
                    object
                };
                events.push((
                    event.event_type,
                    unknown.api_version.to_string(),
                    unknown.kind.to_string(),
                    crate::golden::without_zero_values(&object),
                ));
            }
            decoder.finish().unwrap();
            events
        };
        for (file, shape) in [
            ("watch/pods-meta.watch.pb", Shape::Object),
            ("watch/pods.metadata.watch.pb", Shape::Metadata),
        ] {
            let got = recorded_frames(shape, Encoding::Protobuf).concat();
            let want = crate::golden::read(file);
            assert_eq!(decode(&got, shape), decode(&want, shape), "{file}");
        }
    }
}
