//! [`parse_watch_line`]: one event of a JSON watch stream, object left as bytes.

use std::fmt;

use super::DecodeError;
use super::object::parse_resource_version;
use crate::Status;
use crate::scan::{Scanner, unescape};

/// What happened to an object: the types of the watch events that carry
/// one. What a store records and a watcher is sent; [`WatchEventType`]
/// adds the two that carry none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeType {
    /// The object is new (to the store, or to a watcher's selection).
    Added,
    /// A new version of an object already there.
    Modified,
    /// The object is gone (deleted, or out of a watcher's selection).
    Deleted,
}

impl ChangeType {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        WatchEventType::from(self).as_str()
    }
}

impl From<ChangeType> for WatchEventType {
    fn from(change: ChangeType) -> Self {
        match change {
            ChangeType::Added => WatchEventType::Added,
            ChangeType::Modified => WatchEventType::Modified,
            ChangeType::Deleted => WatchEventType::Deleted,
        }
    }
}

/// The `type` of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchEventType {
    /// `ADDED`: a new object (or, in a streaming list, an existing one).
    Added,
    /// `MODIFIED`: a new version of an object.
    Modified,
    /// `DELETED`: the object's last state, at the deletion's resourceVersion.
    Deleted,
    /// `BOOKMARK`: only `metadata.resourceVersion` (and annotations) are meaningful.
    Bookmark,
    /// `ERROR`: the object is a `Status` (410 Expired: relist), and the
    /// server closes the stream.
    Error,
}

impl WatchEventType {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            WatchEventType::Added => "ADDED",
            WatchEventType::Modified => "MODIFIED",
            WatchEventType::Deleted => "DELETED",
            WatchEventType::Bookmark => "BOOKMARK",
            WatchEventType::Error => "ERROR",
        }
    }

    /// The type named `name` on the wire.
    pub fn from_wire(name: &str) -> Option<Self> {
        Some(match name {
            "ADDED" => WatchEventType::Added,
            "MODIFIED" => WatchEventType::Modified,
            "DELETED" => WatchEventType::Deleted,
            "BOOKMARK" => WatchEventType::Bookmark,
            "ERROR" => WatchEventType::Error,
            _ => return None,
        })
    }
}

impl fmt::Display for WatchEventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One line of a watch stream: `{"type":"…","object":{…}}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchLine<'a> {
    /// The event's `type`.
    pub event_type: WatchEventType,
    /// The event's `object`, not decoded: hand it to
    /// [`decode_object`](super::decode_object), or read it with the methods
    /// below.
    pub object: &'a [u8],
}

/// What a `BOOKMARK` event says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bookmark {
    /// The revision the stream has reached.
    pub resource_version: u64,
    /// `metadata.annotations["k8s.io/initial-events-end"] == "true"`: the
    /// initial events of a streaming list (`sendInitialEvents=true`) are all
    /// sent; the cache is synced.
    pub initial_events_end: bool,
}

/// The annotation that marks the end of a streaming list's initial events.
const INITIAL_EVENTS_END: &[u8] = b"k8s.io/initial-events-end";

/// Reads one line of a watch stream (surrounding whitespace, such as the
/// trailing newline, is allowed). The line is validated whole; the object is
/// only skipped over.
pub fn parse_watch_line(line: &[u8]) -> Result<WatchLine<'_>, DecodeError> {
    parse(line).map_err(|e| e.locate(line))
}

fn parse(line: &[u8]) -> Result<WatchLine<'_>, DecodeError> {
    let mut sc = Scanner::new(line);
    sc.skip_ws();
    sc.enter_object(1)?;
    let mut event_type = None;
    let mut object = None;
    let mut first = true;
    while let Some(key) = sc.next_key(&mut first)? {
        match &*key.name(line)? {
            b"type" => {
                let span = sc.skip_value(1)?;
                if line[span.start] != b'"' {
                    return Err(DecodeError::invalid(
                        "type",
                        span.start,
                        "expected a string",
                    ));
                }
                let name = unescape(line, span)?;
                event_type = Some(WatchEventType::from_wire(&name).ok_or_else(|| {
                    DecodeError::invalid(
                        "type",
                        span.start,
                        format!("unknown watch event type {name:?}"),
                    )
                })?);
            }
            b"object" => {
                if sc.peek()? != b'{' {
                    return Err(DecodeError::invalid(
                        "object",
                        sc.pos(),
                        "expected an object",
                    ));
                }
                let span = sc.skip_value(1)?;
                object = Some(&line[span.start..span.end]);
            }
            _ => {
                sc.skip_value(1)?;
            }
        }
    }
    sc.finish()?;
    Ok(WatchLine {
        event_type: event_type.ok_or(DecodeError::Missing { path: "type" })?,
        object: object.ok_or(DecodeError::Missing { path: "object" })?,
    })
}

impl WatchLine<'_> {
    /// The object's `metadata.resourceVersion`, without decoding the rest.
    pub fn resource_version(&self) -> Result<u64, DecodeError> {
        Ok(self.bookmark()?.resource_version)
    }

    /// The resourceVersion of a `BOOKMARK` and whether it ends the initial
    /// events of a streaming list.
    pub fn bookmark(&self) -> Result<Bookmark, DecodeError> {
        read_bookmark(self.object).map_err(|e| e.locate(self.object))
    }

    /// The `Status` of an `ERROR` event (e.g. 410 `Expired`: relist).
    pub fn status(&self) -> Result<Status, DecodeError> {
        serde_json::from_slice(self.object)
            .map_err(|e| DecodeError::invalid("object", 0, format!("not a Status: {e}")))
    }
}

fn read_bookmark(object: &[u8]) -> Result<Bookmark, DecodeError> {
    let mut sc = Scanner::new(object);
    sc.skip_ws();
    sc.enter_object(1)?;
    let mut resource_version = None;
    let mut initial_events_end = false;
    let mut first = true;
    while let Some(key) = sc.next_key(&mut first)? {
        if &*key.name(object)? != b"metadata" || sc.peek()? != b'{' {
            sc.skip_value(1)?;
            continue;
        }
        sc.enter_object(2)?;
        let mut first = true;
        while let Some(key) = sc.next_key(&mut first)? {
            match &*key.name(object)? {
                b"resourceVersion" => {
                    let span = sc.skip_value(2)?;
                    let text = match object[span.start] {
                        b'"' => unescape(object, span)?,
                        _ => {
                            return Err(DecodeError::invalid(
                                "metadata.resourceVersion",
                                span.start,
                                "expected a string",
                            ));
                        }
                    };
                    resource_version = Some(parse_resource_version(&text).ok_or_else(|| {
                        DecodeError::invalid(
                            "metadata.resourceVersion",
                            span.start,
                            format!("expected a decimal number, got {text:?}"),
                        )
                    })?);
                }
                b"annotations" if sc.peek()? == b'{' => {
                    sc.enter_object(3)?;
                    let mut first = true;
                    while let Some(key) = sc.next_key(&mut first)? {
                        let span = sc.skip_value(3)?;
                        if *key.name(object)? == *INITIAL_EVENTS_END {
                            initial_events_end = &object[span.start..span.end] == b"\"true\""
                                || (object[span.start] == b'"'
                                    && unescape(object, span)? == "true");
                        }
                    }
                }
                _ => {
                    sc.skip_value(2)?;
                }
            }
        }
    }
    sc.finish()?;
    Ok(Bookmark {
        resource_version: resource_version.ok_or(DecodeError::Missing {
            path: "metadata.resourceVersion",
        })?,
        initial_events_end,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_type_is_recognised_and_its_object_sliced_out() {
        for (name, expected) in [
            ("ADDED", WatchEventType::Added),
            ("MODIFIED", WatchEventType::Modified),
            ("DELETED", WatchEventType::Deleted),
            ("BOOKMARK", WatchEventType::Bookmark),
            ("ERROR", WatchEventType::Error),
        ] {
            let object = r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"42"}}"#;
            let line = format!("{{\"type\":\"{name}\",\"object\":{object}}}\n");
            let event = parse_watch_line(line.as_bytes()).unwrap();
            assert_eq!(event.event_type, expected);
            assert_eq!(event.event_type.as_str(), name);
            assert_eq!(event.object, object.as_bytes());
            assert_eq!(event.resource_version().unwrap(), 42);
        }
        let reordered = br#" {"object":{"metadata":{"resourceVersion":"1"}},"type":"ADDED"} "#;
        assert_eq!(
            parse_watch_line(reordered).unwrap().event_type,
            WatchEventType::Added
        );
    }

    #[test]
    fn an_error_event_carries_the_410_status() {
        let line = br#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1700 (24223)","reason":"Expired","code":410}}"#;
        let event = parse_watch_line(line).unwrap();
        assert_eq!(event.event_type, WatchEventType::Error);
        let status = event.status().unwrap();
        assert_eq!(status.code, 410);
        assert_eq!(status.reason, "Expired");
        assert_eq!(status.message, "too old resource version: 1700 (24223)");
        assert_eq!(
            event.resource_version().unwrap_err(),
            DecodeError::Missing {
                path: "metadata.resourceVersion"
            }
        );
    }

    #[test]
    fn a_bookmark_tells_its_revision_and_whether_initial_events_ended() {
        let plain = br#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"23736","creationTimestamp":null},"spec":{"containers":null},"status":{}}}"#;
        let bookmark = parse_watch_line(plain).unwrap().bookmark().unwrap();
        assert_eq!(
            bookmark,
            Bookmark {
                resource_version: 23736,
                initial_events_end: false
            }
        );
        let end = br#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"24000","creationTimestamp":null,"annotations":{"k8s.io/initial-events-end":"true"}},"spec":{"containers":null},"status":{}}}"#;
        let bookmark = parse_watch_line(end).unwrap().bookmark().unwrap();
        assert_eq!(
            bookmark,
            Bookmark {
                resource_version: 24000,
                initial_events_end: true
            }
        );
        let not_true = br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"5","annotations":{"k8s.io/initial-events-end":"false"}}}}"#;
        assert!(
            !parse_watch_line(not_true)
                .unwrap()
                .bookmark()
                .unwrap()
                .initial_events_end
        );
    }

    #[test]
    fn malformed_lines_are_errors_that_say_what_is_wrong() {
        for (line, message) in [
            (
                &b""[..],
                "malformed JSON at byte 0: unexpected end of input",
            ),
            (b"\n", "malformed JSON at byte 1: unexpected end of input"),
            (br#"{"type":"ADDED"}"#, "missing `object`"),
            (br#"{"object":{}}"#, "missing `type`"),
            (
                br#"{"type":"CHANGED","object":{}}"#,
                r#"invalid `type` at byte 8: unknown watch event type "CHANGED""#,
            ),
            (
                br#"{"type":1,"object":{}}"#,
                "invalid `type` at byte 8: expected a string",
            ),
            (
                br#"{"type":"ADDED","object":"x"}"#,
                "invalid `object` at byte 25: expected an object",
            ),
            (
                br#"{"type":"ADDED","object":{"metadata":{"name":"a"}}"#,
                "malformed JSON at byte 50: unexpected end of input",
            ),
            (
                br#"{"type":"ADDED","object":{"metadata":{"name":"a\x"}}}"#,
                "malformed JSON at byte 47 (in `object.metadata.name`): invalid escape in a string",
            ),
            (
                br#"{"type":"ADDED","object":{}}{"type":"ADDED","object":{}}"#,
                "malformed JSON at byte 28: trailing characters after the JSON value",
            ),
        ] {
            let err = parse_watch_line(line).expect_err(&String::from_utf8_lossy(line));
            assert_eq!(
                err.to_string(),
                message,
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        let bad_rv = br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":""}}}"#;
        assert_eq!(
            parse_watch_line(bad_rv)
                .unwrap()
                .resource_version()
                .unwrap_err()
                .to_string(),
            r#"invalid `metadata.resourceVersion` at byte 31: expected a decimal number, got """#
        );
    }
}
