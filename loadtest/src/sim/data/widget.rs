//! The Widget custom resource (`example.com/v1`): its spec values, its status
//! and what kubectl owns of it.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::managed_fields::{field_set, fields_v1};
use super::{as_map, ts};

/// `apiVersion` of the Widget custom resource.
pub(super) const WIDGET_API_VERSION: &str = "example.com/v1";
pub(super) const WIDGET_COLORS: &[&str] =
    &["red", "green", "blue", "amber", "violet", "teal", "black"];
pub(super) const WIDGET_SIZES: &[&str] = &["small", "medium", "large", "xlarge"];

pub(super) fn widget_status(
    replicas: i64,
    ready: i64,
    generation: i64,
    at: DateTime<Utc>,
) -> Value {
    let (status, reason, message) = if ready == replicas {
        (
            "True",
            "AllReplicasReady",
            format!("{ready}/{replicas} replicas ready"),
        )
    } else {
        (
            "False",
            "ReplicasNotReady",
            format!("{ready}/{replicas} replicas ready, waiting for the others"),
        )
    };
    json!({
        "conditions": [{
            "lastTransitionTime": ts(at),
            "message": message,
            "observedGeneration": generation,
            "reason": reason,
            "status": status,
            "type": "Ready",
        }],
        "observedGeneration": generation,
        "readyReplicas": ready,
        "replicas": replicas,
    })
}

/// What `kubectl apply` (client side) owns of a widget.
pub(super) fn widget_spec_fields(widget: &Value) -> Value {
    let meta = json!({
        "annotations": { "kubectl.kubernetes.io/last-applied-configuration": "" },
        "labels": widget["metadata"]["labels"],
    });
    json!({
        "f:metadata": fields_v1(as_map(&meta)),
        "f:spec": field_set("spec", &widget["spec"]),
    })
}
