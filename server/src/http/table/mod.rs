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
//! sends them.
//!
//! Tables are for people: each row parses its object once, which costs
//! about as much as the JSON path's whole answer.

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

/// How a list, get or watch is rendered, from the `Accept` header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rendering {
    /// The objects as JSON.
    Json,
    /// A `Table` of `meta.k8s.io/{version}` with rows' objects as asked.
    Table {
        version: &'static str,
        include: IncludeObject,
    },
}

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

impl Rendering {
    /// The first media range of `accept` that kubecache serves: a table
    /// (`as=Table;g=meta.k8s.io;v=v1` or `v1beta1`) or JSON. `None` when
    /// none is served (e.g. protobuf only). Media types match in any case;
    /// a range with `q=0` is refused, and JSON refused so is not served for
    /// a wildcard either (RFC 9110's "not acceptable", as kube-apiserver
    /// reads it).
    pub(crate) fn negotiate(accept: Option<&str>, query: &str) -> Result<Option<Self>, Status> {
        let Some(accept) = accept else {
            return Ok(Some(Rendering::Json));
        };
        let ranges: Vec<MediaRange> = accept.split(',').map(MediaRange::parse).collect();
        let json_refused = ranges
            .iter()
            .any(|r| r.refused && r.media == "application/json" && r.as_.is_none());
        for range in ranges.iter().filter(|r| !r.refused) {
            match range.media.as_str() {
                "application/json" => {}
                "" | "*/*" | "application/*" if !json_refused => {}
                _ => continue,
            }
            match (range.as_, range.group, range.version) {
                (None, _, _) => return Ok(Some(Rendering::Json)),
                (Some("Table"), Some("meta.k8s.io"), Some(v @ ("v1" | "v1beta1"))) => {
                    let version = if v == "v1" { "v1" } else { "v1beta1" };
                    return Ok(Some(Rendering::Table {
                        version,
                        include: include_object(query)?,
                    }));
                }
                _ => {}
            }
        }
        Ok(None)
    }
}

/// The 406 for a Table asked for in protobuf only (a Table has no protobuf
/// form), as kube-apiserver words and writes it: indented JSON, without a
/// trailing newline. `None` when `accept` asks for no such thing.
pub(crate) fn refused_in_protobuf(accept: Option<&str>) -> Option<axum::response::Response> {
    let asks = accept?.split(',').map(MediaRange::parse).any(|range| {
        range.media == "application/vnd.kubernetes.protobuf" && range.as_ == Some("Table")
    });
    if !asks {
        return None;
    }
    let status = Status::failure(
        406,
        "NotAcceptable",
        "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf",
    );
    let body = serde_json::to_vec_pretty(&status).expect("a Status serializes");
    let mut response = axum::response::Response::new(axum::body::Body::from(body));
    *response.status_mut() = axum::http::StatusCode::NOT_ACCEPTABLE;
    response.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    Some(response)
}

/// One media range of an `Accept` header.
struct MediaRange<'a> {
    /// The media type, lowercased.
    media: String,
    as_: Option<&'a str>,
    group: Option<&'a str>,
    version: Option<&'a str>,
    /// `q=0`: the client refuses this type.
    refused: bool,
}

impl<'a> MediaRange<'a> {
    fn parse(range: &'a str) -> Self {
        let mut parts = range.split(';').map(str::trim);
        let mut parsed = MediaRange {
            media: parts.next().unwrap_or("").to_ascii_lowercase(),
            as_: None,
            group: None,
            version: None,
            refused: false,
        };
        for param in parts {
            match param.split_once('=').map(|(k, v)| (k.trim(), v.trim())) {
                Some(("as", v)) => parsed.as_ = Some(v),
                Some(("g", v)) => parsed.group = Some(v),
                Some(("v", v)) => parsed.version = Some(v),
                Some(("q", v)) => parsed.refused = v.parse::<f32>().is_ok_and(|q| q <= 0.0),
                _ => {}
            }
        }
        parsed
    }
}

/// The `includeObject` query parameter (its first value).
fn include_object(query: &str) -> Result<IncludeObject, Status> {
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

/// `metadata` of a `Table` answer: a list's, or the one object's
/// resourceVersion.
#[derive(Default)]
pub(crate) struct TableMeta {
    pub resource_version: Option<u64>,
    pub continue_token: Option<String>,
    pub remaining: Option<usize>,
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
    out.raw("]}\n");
    out.into_bytes()
}

/// A watch line `{"type":…,"object":TABLE}` of one object (its JSON),
/// ages relative to `now`; with the column definitions only when `first`.
pub(crate) fn event_line(
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
    let annotations = if initial_events_end {
        r#","annotations":{"k8s.io/initial-events-end":"true"}"#
    } else {
        ""
    };
    let object = format!(
        r#"{{"kind":"{}","apiVersion":"{}","metadata":{{"resourceVersion":"{resource_version}","creationTimestamp":null{annotations}}}}}"#,
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
    fn the_first_served_media_range_wins_in_any_case_and_q_0_is_refused() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(
            Rendering::negotiate(Some(kubectl), "").unwrap(),
            Some(Rendering::Table {
                version: "v1",
                include: IncludeObject::Metadata
            })
        );
        assert_eq!(
            Rendering::negotiate(Some("application/json"), "includeObject=Object").unwrap(),
            Some(Rendering::Json)
        );
        assert_eq!(
            Rendering::negotiate(Some("application/vnd.kubernetes.protobuf"), "").unwrap(),
            None
        );
        assert_eq!(
            Rendering::negotiate(Some("Application/JSON"), "").unwrap(),
            Some(Rendering::Json)
        );
        assert_eq!(
            Rendering::negotiate(Some("application/json;q=0"), "").unwrap(),
            None
        );
        assert_eq!(
            Rendering::negotiate(Some("application/json;q=0, */*"), "").unwrap(),
            None
        );
        assert_eq!(
            Rendering::negotiate(
                Some("application/json;q=0, application/json;as=Table;v=v1;g=meta.k8s.io"),
                ""
            )
            .unwrap(),
            Some(Rendering::Table {
                version: "v1",
                include: IncludeObject::Metadata
            })
        );
        let metadata_only = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io";
        assert_eq!(Rendering::negotiate(Some(metadata_only), "").unwrap(), None);
        assert_eq!(
            Rendering::negotiate(Some(kubectl), "includeObject=All")
                .unwrap_err()
                .code,
            400
        );
    }

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
