//! Rendering a pod: its template with the per-pod values of a [`PodDraw`] in
//! its [`Slot`]s, as a `Value` or as JSON text spliced into the serialised template.

use std::fmt::Write as _;

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{Map, Value, json};

use super::catalogue::Kind;
use super::managed_fields::{managed_entry, remove_path};
use super::pod_status::{kubelet_fields, pod_status};
use super::slot::{SENTINEL_CLOSE, SENTINEL_OPEN, Slot};
use super::template::PodTemplate;
use super::ts;

/// Everything random about one pod: what [`render_pod`] fills into the
/// template's [`Slot`]s.
#[derive(Debug)]
pub(super) struct PodDraw {
    pub(super) workload: usize,
    pub(super) name: String,
    /// The StatefulSet ordinal.
    pub(super) ordinal: u64,
    pub(super) node_name: String,
    pub(super) host_ip: String,
    pub(super) pod_ip: String,
    /// The name of the `kube-api-access-*` volume.
    pub(super) access: String,
    pub(super) created: DateTime<Utc>,
    pub(super) scheduled: DateTime<Utc>,
    pub(super) initialized: DateTime<Utc>,
    /// When Ready and ContainersReady last moved (the kubelet's last write).
    pub(super) ready: DateTime<Utc>,
    /// A Job pod that has completed.
    pub(super) succeeded: bool,
    pub(super) containers: Vec<ContainerDraw>,
}

#[derive(Debug)]
pub(super) struct ContainerDraw {
    /// 64 hex digits.
    pub(super) id: String,
    pub(super) started: DateTime<Utc>,
    /// When the container exited 0 (a succeeded pod).
    pub(super) finished: Option<DateTime<Utc>>,
    pub(super) restart: Option<Restart>,
}

#[derive(Debug)]
pub(super) struct Restart {
    pub(super) count: i64,
    pub(super) previous_id: String,
    pub(super) reason: &'static str,
    pub(super) code: i32,
    /// When the current container started.
    pub(super) at: DateTime<Utc>,
}

impl PodDraw {
    /// A pod of template `t` with the longest values a pod may have, to size
    /// the template.
    pub(super) fn sample(t: &PodTemplate, workload: usize, owner: &str, at: DateTime<Utc>) -> Self {
        PodDraw {
            workload,
            name: format!("{owner}-xxxxx"),
            ordinal: 100,
            node_name: "ip-172-16-100-100.ap-southeast-1.compute.internal".into(),
            host_ip: "172.16.100.100".into(),
            pod_ip: "10.200.200.200".into(),
            access: "kube-api-access-xxxxx".into(),
            created: at,
            scheduled: at,
            initialized: at,
            ready: at,
            succeeded: false,
            containers: t
                .containers
                .iter()
                .map(|_| ContainerDraw {
                    id: "0".repeat(64),
                    started: at,
                    finished: None,
                    restart: None,
                })
                .collect(),
        }
    }

    /// The value of `slot` in this pod.
    pub(super) fn value(&self, slot: Slot) -> Value {
        match slot {
            Slot::Name => self.name.clone().into(),
            Slot::PodIndex => self.ordinal.to_string().into(),
            Slot::ClaimName => format!("data-{}", self.name).into(),
            Slot::NodeName => self.node_name.clone().into(),
            Slot::AccessVolume => self.access.clone().into(),
            Slot::Created => ts(self.created).into(),
            Slot::HostIp => self.host_ip.clone().into(),
            Slot::PodIp => self.pod_ip.clone().into(),
            Slot::Scheduled => ts(self.scheduled).into(),
            Slot::Initialized => ts(self.initialized).into(),
            Slot::Ready => ts(self.ready).into(),
            Slot::ContainerId(i) => format!("containerd://{}", self.containers[i].id).into(),
            Slot::RestartCount(i) => self.containers[i]
                .restart
                .as_ref()
                .map_or(0, |r| r.count)
                .into(),
            Slot::State(i) => {
                let c = &self.containers[i];
                match (c.finished, &c.restart) {
                    (Some(finished), _) => json!({ "terminated": {
                        "containerID": format!("containerd://{}", c.id),
                        "exitCode": 0,
                        "finishedAt": ts(finished),
                        "reason": "Completed",
                        "startedAt": ts(c.started),
                    }}),
                    (None, Some(r)) => json!({ "running": { "startedAt": ts(r.at) } }),
                    (None, None) => json!({ "running": { "startedAt": ts(c.started) } }),
                }
            }
            Slot::LastState(i) => {
                let c = &self.containers[i];
                match &c.restart {
                    Some(r) => json!({ "terminated": {
                        "containerID": format!("containerd://{}", r.previous_id),
                        "exitCode": r.code,
                        "finishedAt": ts(r.at - TimeDelta::seconds(1)),
                        "reason": r.reason,
                        "startedAt": ts(c.started),
                    }}),
                    None => json!({}),
                }
            }
        }
    }

    /// Appends the JSON of `slot`'s value, as `value(slot).to_string()`
    /// would, without building a `Value` for the common cases.
    fn write_json(&self, slot: Slot, out: &mut String) {
        match slot {
            Slot::State(i)
                if self.containers[i].finished.is_none()
                    && self.containers[i].restart.is_none() =>
            {
                out.push_str(r#"{"running":{"startedAt":""#);
                out.push_str(&ts(self.containers[i].started));
                out.push_str(r#""}}"#);
            }
            Slot::LastState(i) if self.containers[i].restart.is_none() => out.push_str("{}"),
            _ => match self.value(slot) {
                Value::String(s) => push_json_str(out, &s),
                v => {
                    let _ = write!(out, "{v}");
                }
            },
        }
    }
}

/// Appends `s` as a JSON string, as serde_json writes it.
fn push_json_str(out: &mut String, s: &str) {
    if s.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) {
        out.push_str(&Value::from(s).to_string());
    } else {
        out.push('"');
        out.push_str(s);
        out.push('"');
    }
}

/// A pod template serialised with holes for its slots: `pieces[0]`, hole 0,
/// `pieces[1]`, ..., hole n-1, `pieces[n]`.
#[derive(Debug, Clone)]
pub(super) struct Spliced {
    pieces: Vec<String>,
    holes: Vec<Hole>,
    /// Bytes of the pieces.
    len: usize,
}

#[derive(Debug, Clone)]
struct Hole {
    slot: Slot,
    /// The hole is a whole JSON value (a string token in the pattern); else
    /// it sits inside a string (the pod IP inside a managedFields key) and
    /// takes the slot's text.
    whole: bool,
}

impl Spliced {
    /// Cuts `pattern`, a pod rendered with [`Slot::sentinel`]s, at its
    /// sentinels.
    pub(super) fn new(pattern: &Value) -> Self {
        let text = pattern.to_string();
        let (mut pieces, mut holes) = (Vec::new(), Vec::new());
        let mut rest = text.as_str();
        while let Some(open) = rest.find(SENTINEL_OPEN) {
            let digits = open + SENTINEL_OPEN.len_utf8();
            let close = digits
                + rest[digits..]
                    .find(SENTINEL_CLOSE)
                    .expect("closed sentinel");
            let after = close + SENTINEL_CLOSE.len_utf8();
            let slot = Slot::from_id(rest[digits..close].parse().expect("slot id"));
            let before = &rest[..open];
            let whole = before.ends_with('"')
                && !before.ends_with("\\\"")
                && rest[after..].starts_with('"');
            if whole {
                pieces.push(before[..before.len() - 1].to_owned());
                rest = &rest[after + 1..];
            } else {
                pieces.push(before.to_owned());
                rest = &rest[after..];
            }
            holes.push(Hole { slot, whole });
        }
        pieces.push(rest.to_owned());
        let len = pieces.iter().map(String::len).sum();
        Spliced { pieces, holes, len }
    }

    /// The pod of `draw` as JSON text.
    pub(super) fn fill(&self, draw: &PodDraw) -> String {
        let mut out = String::with_capacity(self.len + 64 * self.holes.len());
        for (piece, hole) in self.pieces.iter().zip(&self.holes) {
            out.push_str(piece);
            if hole.whole {
                draw.write_json(hole.slot, &mut out);
            } else {
                let value = draw.value(hole.slot);
                out.push_str(value.as_str().expect("slots inside strings are strings"));
            }
        }
        out.push_str(self.pieces.last().expect("one piece more than holes"));
        // Pods are kept by the thousand: give back the guessed room (in place).
        out.shrink_to_fit();
        out
    }
}

/// A pod of template `t`, with the value of each per-pod [`Slot`] from
/// `slot` (the values of one [`PodDraw`], or sentinels for [`Spliced`]).
pub(super) fn render_pod(
    t: &PodTemplate,
    kind: Kind,
    namespace: &str,
    succeeded: bool,
    slot: &mut dyn FnMut(Slot) -> Value,
) -> Value {
    let mut labels = t.labels.clone();
    if kind == Kind::StatefulSet {
        labels.insert("apps.kubernetes.io/pod-index".into(), slot(Slot::PodIndex));
        labels.insert(
            "statefulset.kubernetes.io/pod-name".into(),
            slot(Slot::Name),
        );
    }
    let mut metadata = Map::new();
    metadata.insert("name".into(), slot(Slot::Name));
    if let Some(g) = &t.generate_name {
        metadata.insert("generateName".into(), g.clone().into());
    }
    metadata.insert("namespace".into(), namespace.into());
    metadata.insert("labels".into(), Value::Object(labels));
    if !t.annotations.is_empty() {
        metadata.insert("annotations".into(), Value::Object(t.annotations.clone()));
    }
    metadata.insert("ownerReferences".into(), t.owner_references.clone());
    let mut kcm_fields = t.kcm_fields.clone();
    match (&t.finalizers, succeeded) {
        (Some(f), false) => {
            metadata.insert("finalizers".into(), f.clone());
        }
        (Some(_), true) => {
            // The Job controller removed its finalizer once it counted the pod.
            remove_path(&mut kcm_fields, &["f:metadata", "f:finalizers"]);
        }
        (None, _) => {}
    }

    let mut spec = t.spec.clone();
    spec["nodeName"] = slot(Slot::NodeName);
    let access = slot(Slot::AccessVolume);
    spec["volumes"][t.api_access_volume]["name"] = access.clone();
    for c in spec["containers"].as_array_mut().expect("containers") {
        if let Some(last) = c["volumeMounts"].as_array_mut().and_then(|m| m.last_mut()) {
            last["name"] = access.clone();
        }
    }
    match kind {
        Kind::StatefulSet => {
            spec["hostname"] = slot(Slot::Name);
            if let Some(v) = t.claim_volume {
                spec["volumes"][v]["persistentVolumeClaim"]["claimName"] = slot(Slot::ClaimName);
            }
        }
        Kind::DaemonSet => {
            spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
                [0]["matchFields"][0]["values"][0] = slot(Slot::NodeName);
        }
        Kind::ReplicaSet | Kind::Job => {}
    }

    let status = pod_status(t, succeeded, slot);
    let kubelet = kubelet_fields(&status);
    let managed = vec![
        managed_entry(
            "kube-controller-manager",
            "v1",
            slot(Slot::Created),
            None,
            kcm_fields,
        ),
        managed_entry("kubelet", "v1", slot(Slot::Ready), Some("status"), kubelet),
    ];
    metadata.insert("managedFields".into(), Value::Array(managed));

    let mut pod = Map::new();
    pod.insert("apiVersion".into(), "v1".into());
    pod.insert("kind".into(), "Pod".into());
    pod.insert("metadata".into(), Value::Object(metadata));
    pod.insert("spec".into(), spec);
    pod.insert("status".into(), status);
    Value::Object(pod)
}
