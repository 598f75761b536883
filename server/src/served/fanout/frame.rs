//! What one watcher is sent for one store event, and the bytes of watch
//! lines: `{"type":…,"object":…}\n`, one JSON object per line, as
//! kube-apiserver writes them.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use kubecache_reflector::Event;
use kubecache_wire::{CachedObject, ChangeType, Status, with_resource_version};

use crate::served::{Filter, Predicates};

/// One event as a watcher receives it, encoded once and shared by every
/// watcher that receives the same thing.
#[derive(Debug)]
pub(crate) struct Frame {
    /// The event's position in the event log: the resourceVersion a client
    /// that has seen it may resume from.
    pub position: u64,
    /// What the event is on the wire.
    pub kind: ChangeType,
    /// The JSON line.
    pub line: Bytes,
    /// The object sent: a slice of `line`, for other renderings (tables).
    pub object: Bytes,
}

impl Frame {
    /// The frame of `object` sent as `kind`, at `position`.
    pub fn new(kind: ChangeType, object: Arc<CachedObject>, position: u64) -> Frame {
        let restamped = (kind == ChangeType::Deleted && object.resource_version != position)
            .then(|| with_resource_version(&object.json, position))
            .flatten();
        let line = event_line(kind, restamped.as_deref().unwrap_or(&object.json));
        let start = br#"{"type":"","object":"#.len() + kind.as_str().len();
        let object = line.slice(start..line.len() - 2);
        Frame {
            position,
            kind,
            line,
            object,
        }
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

/// `{"type":"KIND","object":OBJECT}\n`.
fn event_line(kind: ChangeType, object: &[u8]) -> Bytes {
    let mut line = BytesMut::with_capacity(object.len() + 32);
    line.put_slice(br#"{"type":""#);
    line.put_slice(kind.as_str().as_bytes());
    line.put_slice(br#"","object":"#);
    line.put_slice(object);
    line.put_slice(b"}\n");
    line.freeze()
}

/// A `BOOKMARK` line at `resource_version`; `initial_events_end` marks the
/// end of a streaming list's initial events (`k8s.io/initial-events-end`).
pub(crate) fn bookmark_line(
    kind: &str,
    api_version: &str,
    resource_version: u64,
    initial_events_end: bool,
) -> Bytes {
    let annotations = if initial_events_end {
        r#","annotations":{"k8s.io/initial-events-end":"true"}"#
    } else {
        ""
    };
    Bytes::from(
        format!(
            r#"{{"type":"BOOKMARK","object":{{"kind":"{kind}","apiVersion":"{api_version}","metadata":{{"resourceVersion":"{resource_version}"{annotations}}}}}}}"#
        ) + "\n",
    )
}

/// An `ERROR` line carrying `status`.
pub(crate) fn error_line(status: &Status) -> Bytes {
    let mut line = BytesMut::new();
    line.put_slice(br#"{"type":"ERROR","object":"#);
    line.put_slice(&status.to_json());
    line.put_slice(b"}\n");
    line.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frames_object_is_the_object_of_its_line() {
        let object =
            br#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"7"}}"#;
        let decoded = kubecache_wire::decode_object(
            object,
            "Pod",
            "v1",
            &kubecache_wire::Transform::default(),
        )
        .unwrap();
        let frame = Frame::new(ChangeType::Deleted, Arc::new(decoded), 9);
        let line: serde_json::Value = serde_json::from_slice(&frame.line).unwrap();
        let sliced: serde_json::Value = serde_json::from_slice(&frame.object).unwrap();
        assert_eq!(line["object"], sliced);
        assert_eq!(sliced["metadata"]["resourceVersion"], "9");
    }

    #[test]
    fn lines_are_single_json_objects() {
        for line in [
            bookmark_line("Pod", "v1", 5, true),
            error_line(&Status::expired("gone")),
        ] {
            assert!(line.ends_with(b"\n"));
            let value: serde_json::Value = serde_json::from_slice(&line).unwrap();
            assert!(value["object"].is_object());
        }
        let bookmark: serde_json::Value =
            serde_json::from_slice(&bookmark_line("Pod", "v1", 5, true)).unwrap();
        assert_eq!(
            bookmark["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
            "true"
        );
    }
}
