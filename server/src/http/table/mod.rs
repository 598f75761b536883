//! Server-side printing: `meta.k8s.io` `Table` answers for kubectl.
//!
//! `kubectl get` asks for
//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io, …, application/json`
//! and prints the columns the server chooses. kubecache renders the columns
//! kube-apiserver renders for pods (`NAME READY STATUS RESTARTS AGE`, and
//! `IP NODE NOMINATED NODE READINESS GATES` for `-o wide`), config maps
//! (`NAME DATA AGE`), and `NAME AGE` for every other kind (what the API
//! server shows for a custom resource without printer columns).
//!
//! Tables are for people: each row parses its object once, which costs
//! about as much as the JSON path's whole answer. Watches render a
//! one-row table per event for their one watcher (`kubectl get -w`).

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use chrono::{DateTime, Utc};
use kubecache_wire::{CachedObject, Status};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

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
    /// none is served (e.g. protobuf only).
    pub(crate) fn negotiate(accept: Option<&str>, query: &str) -> Result<Option<Self>, Status> {
        let Some(accept) = accept else {
            return Ok(Some(Rendering::Json));
        };
        for range in accept.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("");
            if !matches!(media, "" | "*/*" | "application/*" | "application/json") {
                continue;
            }
            let (mut as_, mut group, mut version) = (None, None, None);
            for param in parts {
                match param.split_once('=') {
                    Some(("as", v)) => as_ = Some(v),
                    Some(("g", v)) => group = Some(v),
                    Some(("v", v)) => version = Some(v),
                    _ => {}
                }
            }
            match (as_, group, version) {
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

/// The `includeObject` query parameter.
fn include_object(query: &str) -> Result<IncludeObject, Status> {
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
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

/// `metadata` of a `Table` answer (a list's, or empty).
#[derive(Default)]
pub(crate) struct TableMeta {
    pub resource_version: Option<u64>,
    pub continue_token: Option<String>,
    pub remaining: Option<usize>,
}

/// A `Table` of `objects` of `kind`.
pub(crate) fn render(
    kind: &str,
    version: &str,
    include: IncludeObject,
    meta: &TableMeta,
    objects: &[Arc<CachedObject>],
) -> Bytes {
    let mut metadata = serde_json::Map::new();
    if let Some(rv) = meta.resource_version {
        metadata.insert("resourceVersion".into(), rv.to_string().into());
    }
    if let Some(token) = &meta.continue_token {
        metadata.insert("continue".into(), token.clone().into());
    }
    if let Some(remaining) = meta.remaining {
        metadata.insert("remainingItemCount".into(), remaining.into());
    }
    let now = Utc::now();
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| row(kind, include, &object.json, now))
        .collect();
    let table = json!({
        "kind": "Table",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": metadata,
        "columnDefinitions": columns(kind),
        "rows": rows,
    });
    Bytes::from(table.to_string())
}

/// A watch line `{"type":…,"object":TABLE}` of one object.
pub(crate) fn event_line(
    event_type: &str,
    kind: &str,
    version: &str,
    include: IncludeObject,
    object_json: &[u8],
) -> Bytes {
    let table = json!({
        "kind": "Table",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": {},
        "columnDefinitions": columns(kind),
        "rows": [row(kind, include, object_json, Utc::now())],
    });
    let mut line = BytesMut::new();
    line.put_slice(format!(r#"{{"type":"{event_type}","object":"#).as_bytes());
    line.put_slice(table.to_string().as_bytes());
    line.put_slice(b"}\n");
    line.freeze()
}

/// The column definitions of `kind` (priority 1: only with `-o wide`).
fn columns(kind: &str) -> Value {
    let column = |name: &str, type_: &str, format: &str, priority: u8, description: &str| json!({"name": name, "type": type_, "format": format, "description": description, "priority": priority});
    let name = column(
        "Name",
        "string",
        "name",
        0,
        "Name must be unique within a namespace.",
    );
    let age = column(
        "Age",
        "string",
        "",
        0,
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
    );
    match kind {
        "Pod" => json!([
            name,
            column(
                "Ready",
                "string",
                "",
                0,
                "The aggregate readiness state of this pod for accepting traffic."
            ),
            column(
                "Status",
                "string",
                "",
                0,
                "The aggregate status of the containers in this pod."
            ),
            column(
                "Restarts",
                "string",
                "",
                0,
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."
            ),
            age,
            column(
                "IP",
                "string",
                "",
                1,
                "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated."
            ),
            column(
                "Node",
                "string",
                "",
                1,
                "NodeName is a request to schedule this pod onto a specific node."
            ),
            column(
                "Nominated Node",
                "string",
                "",
                1,
                "nominatedNodeName is set only when this pod preempts other pods on the node."
            ),
            column(
                "Readiness Gates",
                "string",
                "",
                1,
                "If specified, all readiness gates will be evaluated for pod readiness."
            ),
        ]),
        "ConfigMap" => json!([
            name,
            column(
                "Data",
                "integer",
                "",
                0,
                "Data contains the configuration data."
            ),
            age,
        ]),
        _ => json!([name, age]),
    }
}

/// What a row needs of any object.
#[derive(Deserialize)]
struct Object<'a> {
    #[serde(borrow)]
    metadata: &'a RawValue,
    #[serde(default)]
    spec: Option<PodSpec>,
    #[serde(default)]
    status: Option<PodStatus>,
    #[serde(default)]
    data: Option<serde_json::Map<String, Value>>,
    #[serde(default, rename = "binaryData")]
    binary_data: Option<serde_json::Map<String, Value>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Metadata {
    #[serde(default)]
    name: String,
    creation_timestamp: Option<String>,
    deletion_timestamp: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct PodSpec {
    containers: Vec<Value>,
    init_containers: Vec<Value>,
    node_name: Option<String>,
    readiness_gates: Vec<ReadinessGate>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct ReadinessGate {
    condition_type: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct PodStatus {
    phase: Option<String>,
    reason: Option<String>,
    #[serde(rename = "podIP")]
    pod_ip: Option<String>,
    nominated_node_name: Option<String>,
    conditions: Vec<Condition>,
    container_statuses: Vec<ContainerStatus>,
    init_container_statuses: Vec<ContainerStatus>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct Condition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct ContainerStatus {
    ready: bool,
    restart_count: i64,
    started: Option<bool>,
    state: ContainerState,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ContainerState {
    waiting: Option<StateReason>,
    running: Option<Value>,
    terminated: Option<StateReason>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct StateReason {
    reason: String,
    exit_code: i64,
    signal: i64,
}

/// One row: cells and, as asked, the object.
fn row(kind: &str, include: IncludeObject, json: &[u8], now: DateTime<Utc>) -> Value {
    let Ok(object) = serde_json::from_slice::<Object>(json) else {
        return json!({"cells": ["<unknown>"]});
    };
    let meta: Metadata = serde_json::from_str(object.metadata.get()).unwrap_or_default();
    let age = age(meta.creation_timestamp.as_deref(), now);
    let cells = match kind {
        "Pod" => pod_cells(&object, &meta, age),
        "ConfigMap" => {
            let data = object.data.as_ref().map_or(0, |d| d.len())
                + object.binary_data.as_ref().map_or(0, |d| d.len());
            json!([meta.name, data, age])
        }
        _ => json!([meta.name, age]),
    };
    let object = match include {
        IncludeObject::None => Value::Null,
        IncludeObject::Metadata => json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": object.metadata,
        }),
        IncludeObject::Object => serde_json::from_slice(json).unwrap_or(Value::Null),
    };
    if object.is_null() {
        json!({"cells": cells})
    } else {
        json!({"cells": cells, "object": object})
    }
}

/// The pod columns, as kube-apiserver's `printPod` computes them.
fn pod_cells(object: &Object, meta: &Metadata, age: String) -> Value {
    let spec = object.spec.as_ref();
    let default_status = PodStatus::default();
    let status = object.status.as_ref().unwrap_or(&default_status);
    let containers = spec.map_or(0, |s| s.containers.len());
    let init_containers = spec.map_or(0, |s| s.init_containers.len());
    let mut restarts = 0;
    let mut ready = 0;
    let mut reason = status
        .reason
        .clone()
        .or_else(|| status.phase.clone())
        .unwrap_or_default();
    let mut initializing = false;
    for (i, container) in status.init_container_statuses.iter().enumerate() {
        restarts += container.restart_count;
        let state = &container.state;
        match (&state.terminated, &state.waiting) {
            (Some(t), _) if t.exit_code == 0 => continue,
            _ if container.started == Some(true) && state.running.is_some() => continue,
            (Some(t), _) => {
                reason = if !t.reason.is_empty() {
                    format!("Init:{}", t.reason)
                } else if t.signal != 0 {
                    format!("Init:Signal:{}", t.signal)
                } else {
                    format!("Init:ExitCode:{}", t.exit_code)
                };
            }
            (None, Some(w)) if !w.reason.is_empty() && w.reason != "PodInitializing" => {
                reason = format!("Init:{}", w.reason);
            }
            _ => reason = format!("Init:{i}/{init_containers}"),
        }
        initializing = true;
        break;
    }
    let initialized = status
        .conditions
        .iter()
        .any(|c| c.type_ == "Initialized" && c.status == "True");
    if !initializing || initialized {
        restarts = 0;
        let mut running = false;
        for container in status.container_statuses.iter().rev() {
            restarts += container.restart_count;
            let state = &container.state;
            if let Some(w) = state.waiting.as_ref().filter(|w| !w.reason.is_empty()) {
                reason = w.reason.clone();
            } else if let Some(t) = &state.terminated {
                reason = if !t.reason.is_empty() {
                    t.reason.clone()
                } else if t.signal != 0 {
                    format!("Signal:{}", t.signal)
                } else {
                    format!("ExitCode:{}", t.exit_code)
                };
            } else if container.ready && state.running.is_some() {
                running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && running {
            let pod_ready = status
                .conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            reason = if pod_ready { "Running" } else { "NotReady" }.into();
        }
    }
    if meta.deletion_timestamp.is_some() {
        reason = if status.reason.as_deref() == Some("NodeLost") {
            "Unknown".into()
        } else {
            "Terminating".into()
        };
    }
    let none = || "<none>".to_string();
    let gates = spec.map_or(&[][..], |s| &s.readiness_gates[..]);
    let readiness_gates = if gates.is_empty() {
        none()
    } else {
        let met = gates
            .iter()
            .filter(|g| {
                status
                    .conditions
                    .iter()
                    .any(|c| c.type_ == g.condition_type && c.status == "True")
            })
            .count();
        format!("{met}/{}", gates.len())
    };
    json!([
        meta.name,
        format!("{ready}/{containers}"),
        reason,
        restarts.to_string(),
        age,
        status
            .pod_ip
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(none),
        spec.and_then(|s| s.node_name.clone())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(none),
        status
            .nominated_node_name
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(none),
        readiness_gates,
    ])
}

/// The age column: `now - created` as kubectl writes durations
/// (`duration.HumanDuration` in apimachinery), `<unknown>` without one.
fn age(created: Option<&str>, now: DateTime<Utc>) -> String {
    let Some(created) = created.and_then(|c| DateTime::parse_from_rfc3339(c).ok()) else {
        return "<unknown>".into();
    };
    human_duration((now - created.with_timezone(&Utc)).num_seconds())
}

fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return match seconds % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        return match (hours / 24) % 365 {
            0 => format!("{}y", hours / 24 / 365),
            d => format!("{}y{d}d", hours / 24 / 365),
        };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_served_media_range_wins() {
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
    fn durations_read_as_kubectl_writes_them() {
        for (seconds, want) in [
            (-5, "<invalid>"),
            (5, "5s"),
            (119, "119s"),
            (125, "2m5s"),
            (600, "10m"),
            (3 * 3600 + 60, "3h1m"),
            (30 * 3600, "30h"),
            (3 * 86400 + 3600, "3d1h"),
            (40 * 86400, "40d"),
            (800 * 86400, "2y70d"),
        ] {
            assert_eq!(human_duration(seconds), want, "{seconds}s");
        }
    }

    fn pod_row(pod: Value) -> Vec<Value> {
        let json = serde_json::to_vec(&pod).unwrap();
        let row = row("Pod", IncludeObject::Metadata, &json, Utc::now());
        assert_eq!(row["object"]["metadata"]["name"], pod["metadata"]["name"]);
        row["cells"].as_array().unwrap().clone()
    }

    #[test]
    fn pod_cells_follow_kubectls_status_rules() {
        let created = (Utc::now() - chrono::Duration::hours(74)).to_rfc3339();
        let running = pod_row(json!({
            "metadata": {"name": "a", "creationTimestamp": created},
            "spec": {"containers": [{}, {}], "nodeName": "n1"},
            "status": {"phase": "Running", "podIP": "10.0.0.1", "containerStatuses": [
                {"ready": true, "restartCount": 2, "state": {"running": {}}},
                {"ready": false, "restartCount": 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
            ]}
        }));
        assert_eq!(running[0], "a");
        assert_eq!(running[1], "1/2");
        assert_eq!(running[2], "CrashLoopBackOff");
        assert_eq!(running[3], "3");
        assert_eq!(running[4], "3d2h");
        assert_eq!(running[5], "10.0.0.1");
        assert_eq!(running[6], "n1");
        assert_eq!(running[7], "<none>");
        let init = pod_row(json!({
            "metadata": {"name": "b"},
            "spec": {"containers": [{}], "initContainers": [{}, {}]},
            "status": {"phase": "Pending", "initContainerStatuses": [
                {"state": {"terminated": {"exitCode": 0}}},
                {"state": {"waiting": {"reason": "PodInitializing"}}}
            ]}
        }));
        assert_eq!(init[2], "Init:1/2");
        assert_eq!(init[4], "<unknown>");
        let deleting = pod_row(json!({
            "metadata": {"name": "c", "deletionTimestamp": "2020-01-01T00:00:00Z"},
            "spec": {"containers": [{}]},
            "status": {"phase": "Running"}
        }));
        assert_eq!(deleting[2], "Terminating");
    }
}
