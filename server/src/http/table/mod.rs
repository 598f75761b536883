//! Server-side printing: `meta.k8s.io` `Table` answers for kubectl, byte
//! for byte as kube-apiserver v1.28 writes them.
//!
//! `kubectl get` asks for
//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io, …, application/json`
//! and prints the columns the server chooses. kubecache renders, for the
//! built-in kinds it has a printer for (see [`printers`]), the columns and
//! cells of kube-apiserver's printers (every column, the `-o wide` ones
//! with priority 1), with their definitions as kube-apiserver v1.28 serves
//! them (`columns.json`, recorded from it); for any other kind `Name` and
//! `Age`. Each row carries, as `includeObject` asks, the object's
//! `PartialObjectMetadata` (the default), the whole object, or nothing
//! (`"object":null`). Ages are relative to the moment the answer is
//! rendered, written as apimachinery's `duration.HumanDuration`.
//!
//! Watches (`kubectl get -w`) send one one-row Table per event; only the
//! first carries `columnDefinitions` (later ones `null`), and a bookmark is
//! a Table of one row printed from an empty object, as kube-apiserver
//! sends them. An event's line is rendered once per [`LineOptions`] and
//! shared by every Table watcher that receives it with those options
//! ([`watch_line`]), as JSON events are encoded once: a hundred `kubectl
//! get pods -w` cost one row per event, not a hundred.
//!
//! Tables are for people: each row parses its object once, which costs
//! about as much as the JSON path's whole answer.
//! `kubecache_table_rows_rendered_total` counts the rows.

mod json;
mod printers;

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use kubecache_reflector::upstream::ApiResource;
use kubecache_wire::{CachedObject, Status};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use json::Json;

use crate::cacher::fanout::frame::{self, Frame};

/// `includeObject`: what each row carries besides its cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IncludeObject {
    /// Nothing.
    None,
    /// `PartialObjectMetadata`: the object's metadata (the default).
    Metadata,
    /// The whole object.
    Object,
}

/// The `includeObject` query parameter (its first value).
pub(crate) fn include_object(query: &str) -> Result<IncludeObject, Status> {
    for (key, value) in kubecache_wire::list_options::first_values(query) {
        if key == "includeObject" {
            return match &*value {
                "None" => Ok(IncludeObject::None),
                "" | "Metadata" => Ok(IncludeObject::Metadata),
                "Object" => Ok(IncludeObject::Object),
                other => Err(Status::bad_request(format!(
                    "includeObject: Unsupported value: {other:?}: supported values: \"Metadata\", \"None\", \"Object\""
                ))),
            };
        }
    }
    Ok(IncludeObject::Metadata)
}

/// What a Table watch line of an event depends on besides the event: the
/// watchers that ask for the same share one rendering of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LineOptions {
    /// `meta.k8s.io/{version}`.
    pub version: &'static str,
    pub include: IncludeObject,
    /// The watch's first line, which carries the column definitions.
    pub first: bool,
}

/// `kubecache_table_rows_rendered_total`: `rows` more rendered.
fn count_rows(rows: usize) {
    metrics::counter!("kubecache_table_rows_rendered_total").increment(rows as u64);
}

/// `metadata` of a `Table` answer: a list's, or the one object's
/// resourceVersion.
#[derive(Default)]
pub(crate) struct TableMeta {
    pub resource_version: Option<u64>,
    pub continue_token: Option<String>,
    pub remaining: Option<usize>,
    /// A sharded list's `shardInfo.selector`.
    pub shard_selector: Option<String>,
}

/// A `Table` of `objects` of `resource`, ages relative to `now`, with the
/// trailing newline of Go's `json.Encoder`.
pub(crate) fn render(
    resource: &ApiResource,
    version: &str,
    include: IncludeObject,
    meta: &TableMeta,
    objects: &[Arc<CachedObject>],
    now: DateTime<Utc>,
) -> Bytes {
    let mut out = Json::default();
    out.raw(r#"{"kind":"Table","apiVersion":"meta.k8s.io/"#);
    out.raw(version);
    out.raw(r#"","metadata":{"#);
    let mut fields = Vec::new();
    if let Some(rv) = meta.resource_version {
        fields.push(("resourceVersion", Value::from(rv.to_string())));
    }
    if let Some(token) = &meta.continue_token {
        fields.push(("continue", Value::from(token.clone())));
    }
    if let Some(remaining) = meta.remaining {
        fields.push(("remainingItemCount", Value::from(remaining)));
    }
    if let Some(selector) = &meta.shard_selector {
        fields.push(("shardInfo", serde_json::json!({ "selector": selector })));
    }
    for (i, (key, value)) in fields.iter().enumerate() {
        if i > 0 {
            out.raw(",");
        }
        out.string(key);
        out.raw(":");
        out.value(value);
    }
    out.raw(r#"},"columnDefinitions":"#);
    out.raw(columns(resource));
    out.raw(r#","rows":["#);
    let (printer, _) = printers::find(resource);
    let hidden = printers::internal_annotations(resource);
    for (i, object) in objects.iter().enumerate() {
        if i > 0 {
            out.raw(",");
        }
        row(&mut out, (printer, hidden), include, &object.json, now);
    }
    count_rows(objects.len());
    out.raw("]}\n");
    out.into_bytes()
}

/// The watch line of `frame`'s event, an object of `resource`, with
/// `options`: rendered by the first watcher that asks, ages relative to
/// then, and shared by every other (see [`Frame::rendered`]).
pub(crate) fn watch_line(frame: &Frame, resource: &ApiResource, options: LineOptions) -> Bytes {
    frame.rendered(options, || {
        event_line(
            frame.kind.as_str(),
            resource,
            options.version,
            options.include,
            &frame.object.json,
            options.first,
            Utc::now(),
        )
    })
}

/// A watch line `{"type":…,"object":TABLE}` of one object (its JSON),
/// ages relative to `now`; with the column definitions only when `first`.
fn event_line(
    event_type: &str,
    resource: &ApiResource,
    version: &str,
    include: IncludeObject,
    object_json: &[u8],
    first: bool,
    now: DateTime<Utc>,
) -> Bytes {
    let resource_version = serde_json::from_slice::<Head>(object_json)
        .map(|head| head.metadata.resource_version)
        .unwrap_or_default();
    let mut out = Json::default();
    event_head(
        &mut out,
        event_type,
        resource,
        version,
        &resource_version,
        first,
    );
    let printer = printers::find(resource).0;
    let hidden = printers::internal_annotations(resource);
    row(&mut out, (printer, hidden), include, object_json, now);
    count_rows(1);
    out.raw("]}}\n");
    out.into_bytes()
}

/// A `BOOKMARK` line at `resource_version` in a Table watch: one row
/// printed from an empty object; `initial_events_end` marks the end of a
/// streaming list's initial events.
pub(crate) fn bookmark_line(
    resource: &ApiResource,
    version: &str,
    include: IncludeObject,
    resource_version: u64,
    initial_events_end: bool,
    first: bool,
) -> Bytes {
    let metadata = frame::bookmark_metadata(resource_version, true, initial_events_end);
    let object = format!(
        r#"{{"kind":"{}","apiVersion":"{}","metadata":{metadata}}}"#,
        resource.kind,
        resource.api_version()
    );
    let mut out = Json::default();
    let rv = resource_version.to_string();
    event_head(&mut out, "BOOKMARK", resource, version, &rv, first);
    let printer = (printers::find(resource).0, &[][..]);
    row(
        &mut out,
        printer,
        include,
        object.as_bytes(),
        DateTime::UNIX_EPOCH,
    );
    out.raw("]}}\n");
    out.into_bytes()
}

/// `{"type":…,"object":{"kind":"Table",…,"rows":[` of a watch line.
fn event_head(
    out: &mut Json,
    event_type: &str,
    resource: &ApiResource,
    version: &str,
    resource_version: &str,
    first: bool,
) {
    out.raw(r#"{"type":"#);
    out.string(event_type);
    out.raw(r#","object":{"kind":"Table","apiVersion":"meta.k8s.io/"#);
    out.raw(version);
    out.raw(r#"","metadata":{"resourceVersion":"#);
    out.string(resource_version);
    out.raw(r#"},"columnDefinitions":"#);
    out.raw(if first { columns(resource) } else { "null" });
    out.raw(r#","rows":["#);
}

/// What a row reads of every object besides its printer's fields.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow)]
    metadata: HeadMeta<'a>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HeadMeta<'a> {
    #[serde(default, borrow)]
    resource_version: std::borrow::Cow<'a, str>,
}

/// One row: `cells`, the printer's `conditions` if any, and the object as
/// `include` asks; its metadata without the `hidden` annotations (see
/// [`printers::internal_annotations`]).
fn row(
    out: &mut Json,
    (printer, hidden): (printers::Printer, &[&str]),
    include: IncludeObject,
    json: &[u8],
    now: DateTime<Utc>,
) {
    #[derive(Deserialize)]
    struct Metadata<'a> {
        #[serde(borrow)]
        metadata: Option<&'a RawValue>,
    }
    let object: Value = serde_json::from_slice(json).unwrap_or(Value::Null);
    let printed = printer(&object, now);
    out.raw(r#"{"cells":["#);
    for (i, cell) in printed.cells.iter().enumerate() {
        if i > 0 {
            out.raw(",");
        }
        out.value(cell);
    }
    out.raw("]");
    if let Some(conditions) = printed.conditions {
        out.raw(r#","conditions":"#);
        out.value(&conditions);
    }
    out.raw(r#","object":"#);
    match include {
        IncludeObject::None => out.raw("null"),
        IncludeObject::Object => out.raw_bytes(json),
        IncludeObject::Metadata => {
            out.raw(r#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":"#);
            let shown = |key: &String| !hidden.contains(&key.as_str());
            match object
                .pointer("/metadata/annotations")
                .and_then(Value::as_object)
            {
                Some(annotations) if !annotations.keys().all(shown) => {
                    let mut metadata = object["metadata"].clone();
                    let annotations = metadata["annotations"].as_object_mut().expect("an object");
                    annotations.retain(|key, _| shown(key));
                    if annotations.is_empty() {
                        metadata
                            .as_object_mut()
                            .expect("an object")
                            .shift_remove("annotations");
                    }
                    out.value(&metadata);
                }
                _ => {
                    let metadata = serde_json::from_slice::<Metadata>(json)
                        .ok()
                        .and_then(|m| m.metadata);
                    out.raw(metadata.map_or("{}", RawValue::get));
                }
            }
            out.raw("}");
        }
    }
    out.raw("}");
}

/// The `columnDefinitions` JSON of `resource`'s printer: kube-apiserver's,
/// or `Name` and `Age` for a kind without one.
fn columns(resource: &ApiResource) -> &'static str {
    #[derive(Deserialize)]
    struct Column {
        name: String,
        #[serde(rename = "type")]
        type_: String,
        format: String,
        description: String,
        priority: i32,
    }
    static COLUMNS: LazyLock<HashMap<String, String>> = LazyLock::new(|| {
        let all: HashMap<String, Vec<Column>> =
            serde_json::from_str(include_str!("columns.json")).expect("columns.json parses");
        let render = |columns: &[&Column]| {
            let mut out = Json::default();
            out.raw("[");
            for (i, column) in columns.iter().enumerate() {
                if i > 0 {
                    out.raw(",");
                }
                out.raw(r#"{"name":"#);
                out.string(&column.name);
                out.raw(r#","type":"#);
                out.string(&column.type_);
                out.raw(r#","format":"#);
                out.string(&column.format);
                out.raw(r#","description":"#);
                out.string(&column.description);
                out.raw(&format!(r#","priority":{}}}"#, column.priority));
            }
            out.raw("]");
            String::from_utf8(out.into_bytes().to_vec()).expect("UTF-8")
        };
        let mut rendered: HashMap<String, String> = all
            .iter()
            .map(|(kind, columns)| (kind.clone(), render(&columns.iter().collect::<Vec<_>>())))
            .collect();
        let pod = &all["Pod"];
        rendered.insert(String::new(), render(&[&pod[0], &pod[4]]));
        rendered
    });
    let key = printers::find(resource).1.unwrap_or_default();
    COLUMNS.get(key).map_or("[]", String::as_str)
}

#[cfg(test)]
mod golden;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_go_s_human_duration_writes_them() {
        for (millis, want) in [
            (-2_500, "<invalid>"),
            (-1_500, "0s"),
            (5_900, "5s"),
            (119_999, "119s"),
            (125_000, "2m5s"),
            (600_000, "10m"),
            (179 * 60_000, "179m"),
            ((3 * 3600 + 60) * 1000, "3h1m"),
            (30 * 3600 * 1000, "30h"),
            ((3 * 86400 + 3600) * 1000, "3d1h"),
            (40 * 86400 * 1000, "40d"),
            (800 * 86400 * 1000, "2y70d"),
            (3000 * 86400 * 1000, "8y"),
        ] {
            let got = printers::human_duration(chrono::TimeDelta::milliseconds(millis));
            assert_eq!(got, want, "{millis}ms");
        }
    }
}
