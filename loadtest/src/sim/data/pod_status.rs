//! Pod status: that of a new running (or succeeded Job) pod, and the kubelet's
//! changes to it.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::managed_fields::{fields_v1, keyed};
use super::slot::Slot;
use super::template::PodTemplate;
use super::{as_map, as_map_mut, ts};

fn condition(kind: &str, status: bool, at: Value, reason: Option<&str>) -> Value {
    let mut c = json!({
        "lastProbeTime": null,
        "lastTransitionTime": at,
        "status": if status { "True" } else { "False" },
        "type": kind,
    });
    if let Some(reason) = reason {
        c["reason"] = reason.into();
    }
    c
}

/// The status of a running pod (or a succeeded Job pod) of template `t`.
pub(super) fn pod_status(
    t: &PodTemplate,
    succeeded: bool,
    slot: &mut dyn FnMut(Slot) -> Value,
) -> Value {
    let statuses: Vec<Value> = t
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut status = Map::new();
            status.insert("containerID".into(), slot(Slot::ContainerId(i)));
            status.insert("image".into(), c.status_image.clone().into());
            status.insert("imageID".into(), c.image_id.clone().into());
            status.insert("lastState".into(), slot(Slot::LastState(i)));
            status.insert("name".into(), c.name.clone().into());
            status.insert("ready".into(), (!succeeded).into());
            status.insert("restartCount".into(), slot(Slot::RestartCount(i)));
            status.insert("started".into(), (!succeeded).into());
            status.insert("state".into(), slot(Slot::State(i)));
            Value::Object(status)
        })
        .collect();
    let done = succeeded.then_some("PodCompleted");
    let conditions = vec![
        condition("Initialized", true, slot(Slot::Initialized), done),
        condition("Ready", !succeeded, slot(Slot::Ready), done),
        condition("ContainersReady", !succeeded, slot(Slot::Ready), done),
        condition("PodScheduled", true, slot(Slot::Scheduled), None),
    ];
    let host_ip = slot(Slot::HostIp);
    let pod_ip = slot(Slot::PodIp);
    json!({
        "conditions": conditions,
        "containerStatuses": statuses,
        "hostIP": host_ip,
        "hostIPs": [{ "ip": host_ip }],
        "phase": if succeeded { "Succeeded" } else { "Running" },
        "podIP": pod_ip,
        "podIPs": [{ "ip": pod_ip }],
        "qosClass": t.qos_class,
        "startTime": slot(Slot::Initialized),
    })
}

/// Sets Ready and ContainersReady (True, or False because container
/// `unready` is not ready) and the containers' `ready` flags.
pub(super) fn set_readiness(status: &mut Value, now: DateTime<Utc>, unready: Option<usize>) {
    let names: Vec<String> = match unready {
        Some(i) => vec![
            status["containerStatuses"][i]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        ],
        None => Vec::new(),
    };
    if let Some(cs) = status["containerStatuses"].as_array_mut() {
        for (i, c) in cs.iter_mut().enumerate() {
            c["ready"] = (Some(i) != unready).into();
        }
    }
    let ready = unready.is_none();
    for c in status["conditions"].as_array_mut().into_iter().flatten() {
        if c["type"] != "Ready" && c["type"] != "ContainersReady" {
            continue;
        }
        let was = c["status"] == "True";
        let obj = as_map_mut(c);
        if was != ready {
            obj.insert("lastTransitionTime".into(), ts(now).into());
        }
        obj.insert("status".into(), if ready { "True" } else { "False" }.into());
        if ready {
            obj.remove("reason");
            obj.remove("message");
        } else {
            obj.insert("reason".into(), "ContainersNotReady".into());
            obj.insert(
                "message".into(),
                format!("containers with unready status: [{}]", names.join(" ")).into(),
            );
        }
    }
}

/// A Job pod's containers exit 0: the pod succeeds.
pub(super) fn complete_job_pod(status: &mut Value, now: DateTime<Utc>) {
    for c in status["containerStatuses"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        let started = c["state"]["running"]["startedAt"].clone();
        let id = c["containerID"].clone();
        c["state"] = json!({ "terminated": {
            "containerID": id, "exitCode": 0, "finishedAt": ts(now), "reason": "Completed", "startedAt": started,
        }});
        c["ready"] = false.into();
        c["started"] = false.into();
    }
    for c in status["conditions"].as_array_mut().into_iter().flatten() {
        let kind = c["type"].as_str().unwrap_or_default().to_owned();
        let obj = as_map_mut(c);
        match kind.as_str() {
            "Ready" | "ContainersReady" => {
                obj.insert("status".into(), "False".into());
                obj.insert("lastTransitionTime".into(), ts(now).into());
                obj.remove("message");
                obj.insert("reason".into(), "PodCompleted".into());
            }
            "Initialized" => {
                obj.insert("reason".into(), "PodCompleted".into());
            }
            _ => {}
        }
    }
    status["phase"] = "Succeeded".into();
}

/// What the kubelet owns of a pod's status: all of it but the QoS class (set
/// by the API server on create) and PodScheduled (set by the binding).
pub(super) fn kubelet_fields(status: &Value) -> Value {
    let mut fields = fields_v1(as_map(status));
    fields.remove("f:qosClass");
    if let Some(conditions) = fields.get_mut("f:conditions") {
        let conditions = as_map_mut(conditions);
        conditions.remove(".");
        conditions.remove(&keyed("type", "PodScheduled"));
    }
    json!({ "f:status": fields })
}
