//! The cells of each kind's row, as kube-apiserver v1.28's printers compute
//! them (`pkg/printers/internalversion/printers.go`), from the object's
//! JSON. Every column is printed, as the API server prints them (kubectl
//! shows the priority-1 ones with `-o wide`). A kind without a printer here
//! gets `Name` and `Age`: custom resources (their own printer columns live
//! in their CustomResourceDefinition, which kubecache does not read) and
//! the built-in kinds nobody caches (certificate signing requests,
//! persistent volumes ...).

use chrono::{DateTime, Utc};
use kubecache_reflector::upstream::ApiResource;
use serde_json::{Value, json};

/// One row's cells and, for finished pods, its conditions.
pub(super) struct Printed {
    pub cells: Vec<Value>,
    pub conditions: Option<Value>,
}

impl From<Vec<Value>> for Printed {
    fn from(cells: Vec<Value>) -> Self {
        Printed {
            cells,
            conditions: None,
        }
    }
}

/// A printer: the row of an object at `now`.
pub(super) type Printer = fn(&Value, DateTime<Utc>) -> Printed;

/// The printer of `resource`, with its key in `columns.json`; `None` for a
/// kind printed as `Name` and `Age`.
pub(super) fn find(resource: &ApiResource) -> (Printer, Option<&'static str>) {
    let found: Option<(&'static str, Printer)> =
        match (resource.group.as_str(), resource.kind.as_str()) {
            ("", "Pod") => Some(("Pod", pod)),
            ("", "ConfigMap") => Some(("ConfigMap", config_map)),
            ("", "Secret") => Some(("Secret", secret)),
            ("", "ServiceAccount") => Some(("ServiceAccount", service_account)),
            ("", "Service") => Some(("Service", service)),
            ("", "Endpoints") => Some(("Endpoints", endpoints)),
            ("", "PersistentVolumeClaim") => {
                Some(("PersistentVolumeClaim", persistent_volume_claim))
            }
            ("", "Node") => Some(("Node", node)),
            ("", "LimitRange") => Some(("LimitRange", created_at)),
            ("", "ResourceQuota") => Some(("ResourceQuota", resource_quota)),
            ("", "Event") => Some(("Event", event)),
            ("events.k8s.io", "Event") => Some(("events.k8s.io/Event", event)),
            ("autoscaling", "HorizontalPodAutoscaler") => Some((
                "autoscaling/HorizontalPodAutoscaler",
                horizontal_pod_autoscaler,
            )),
            ("apps", "Deployment") => Some(("apps/Deployment", deployment)),
            ("apps", "ReplicaSet") => Some(("apps/ReplicaSet", replica_set)),
            ("apps", "StatefulSet") => Some(("apps/StatefulSet", stateful_set)),
            ("apps", "DaemonSet") => Some(("apps/DaemonSet", daemon_set)),
            ("batch", "Job") => Some(("batch/Job", job)),
            ("batch", "CronJob") => Some(("batch/CronJob", cron_job)),
            ("rbac.authorization.k8s.io", "Role") => {
                Some(("rbac.authorization.k8s.io/Role", created_at))
            }
            ("rbac.authorization.k8s.io", "ClusterRole") => {
                Some(("rbac.authorization.k8s.io/ClusterRole", created_at))
            }
            ("rbac.authorization.k8s.io", "RoleBinding") => {
                Some(("rbac.authorization.k8s.io/RoleBinding", role_binding))
            }
            ("discovery.k8s.io", "EndpointSlice") => {
                Some(("discovery.k8s.io/EndpointSlice", endpoint_slice))
            }
            ("coordination.k8s.io", "Lease") => Some(("coordination.k8s.io/Lease", lease)),
            ("policy", "PodDisruptionBudget") => {
                Some(("policy/PodDisruptionBudget", pod_disruption_budget))
            }
            ("networking.k8s.io", "NetworkPolicy") => {
                Some(("networking.k8s.io/NetworkPolicy", network_policy))
            }
            ("networking.k8s.io", "Ingress") => Some(("networking.k8s.io/Ingress", ingress)),
            ("scheduling.k8s.io", "PriorityClass") => {
                Some(("scheduling.k8s.io/PriorityClass", priority_class))
            }
            ("storage.k8s.io", "StorageClass") => {
                Some(("storage.k8s.io/StorageClass", storage_class))
            }
            ("apiextensions.k8s.io", "CustomResourceDefinition") => {
                Some(("apiextensions.k8s.io/CustomResourceDefinition", created_at))
            }
            _ => None,
        };
    match found {
        Some((key, printer)) => (printer, Some(key)),
        None => (name_and_age, None),
    }
}

/// The string at `pointer`, `""` when absent or not a string.
fn text<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The integer at `pointer`, 0 when absent.
fn int(object: &Value, pointer: &str) -> i64 {
    object.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// The array at `pointer`, empty when absent.
fn list<'a>(object: &'a Value, pointer: &str) -> &'a [Value] {
    object
        .pointer(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The object's name.
fn name(object: &Value) -> Value {
    text(object, "/metadata/name").into()
}

/// The age of the object: `translateTimestampSince(creationTimestamp)`.
fn age(object: &Value, now: DateTime<Utc>) -> Value {
    since(object.pointer("/metadata/creationTimestamp"), now).into()
}

/// `translateTimestampSince`: how long before `now` a timestamp was,
/// `<unknown>` without one.
fn since(timestamp: Option<&Value>, now: DateTime<Utc>) -> String {
    match timestamp.and_then(Value::as_str).and_then(time) {
        Some(then) => human_duration(now - then),
        None => "<unknown>".into(),
    }
}

fn time(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// apimachinery's `duration.HumanDuration`.
pub(super) fn human_duration(duration: chrono::TimeDelta) -> String {
    // Go's `int(d.Seconds())`: truncated toward zero.
    let seconds = duration.num_seconds();
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

/// `labels.FormatLabels`: `k=v` sorted by key, `<none>` when empty.
fn format_labels(labels: Option<&Value>) -> String {
    let Some(labels) = labels.and_then(Value::as_object).filter(|l| !l.is_empty()) else {
        return "<none>".into();
    };
    let mut pairs: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    pairs.sort();
    pairs.join(",")
}

/// `metav1.LabelSelectorAsSelector(selector).String()`: requirements sorted
/// by key (`k=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`), `""` for none.
fn selector_string(selector: Option<&Value>) -> String {
    let Some(selector) = selector else {
        return String::new();
    };
    let mut requirements: Vec<(String, String)> = Vec::new();
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        for (key, value) in labels {
            requirements.push((
                key.clone(),
                format!("{key}={}", value.as_str().unwrap_or("")),
            ));
        }
    }
    for expression in list(selector, "/matchExpressions") {
        let key = text(expression, "/key");
        let mut values: Vec<&str> = list(expression, "/values")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        values.dedup();
        let requirement = match text(expression, "/operator") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            _ => return "<invalid>".into(),
        };
        requirements.push((key.to_string(), requirement));
    }
    requirements.sort_by(|a, b| a.0.cmp(&b.0));
    requirements
        .into_iter()
        .map(|(_, r)| r)
        .collect::<Vec<_>>()
        .join(",")
}

/// `metav1.FormatLabelSelector`: as [`selector_string`], `<none>` when it
/// selects everything.
fn format_selector(selector: Option<&Value>) -> String {
    match selector_string(selector) {
        s if s.is_empty() => "<none>".into(),
        s => s,
    }
}

/// `layoutContainerCells`: the containers' names and images, each joined
/// by commas.
fn containers(object: &Value, pointer: &str) -> [Value; 2] {
    let containers = list(object, pointer);
    let names: Vec<&str> = containers.iter().map(|c| text(c, "/name")).collect();
    let images: Vec<&str> = containers.iter().map(|c| text(c, "/image")).collect();
    [names.join(",").into(), images.join(",").into()]
}

/// `NAME`, `AGE`: a kind without a printer.
fn name_and_age(object: &Value, now: DateTime<Utc>) -> Printed {
    vec![name(object), age(object, now)].into()
}

/// `NAME`, `CREATED AT` (the timestamp itself): roles, cluster roles,
/// limit ranges, custom resource definitions.
fn created_at(object: &Value, _now: DateTime<Utc>) -> Printed {
    let created = object
        .pointer("/metadata/creationTimestamp")
        .cloned()
        .unwrap_or(Value::Null);
    vec![name(object), created].into()
}

fn config_map(object: &Value, now: DateTime<Utc>) -> Printed {
    let count = |field: &str| {
        object
            .get(field)
            .and_then(Value::as_object)
            .map_or(0, |m| m.len())
    };
    let data = count("data") + count("binaryData");
    vec![name(object), data.into(), age(object, now)].into()
}

fn secret(object: &Value, now: DateTime<Utc>) -> Printed {
    let data = object
        .get("data")
        .and_then(Value::as_object)
        .map_or(0, |m| m.len());
    vec![
        name(object),
        text(object, "/type").into(),
        data.into(),
        age(object, now),
    ]
    .into()
}

fn service_account(object: &Value, now: DateTime<Utc>) -> Printed {
    let secrets = list(object, "/secrets").len();
    vec![name(object), secrets.into(), age(object, now)].into()
}

fn service(object: &Value, now: DateTime<Utc>) -> Printed {
    let type_ = text(object, "/spec/type");
    let cluster_ip = list(object, "/spec/clusterIPs")
        .first()
        .and_then(Value::as_str)
        .unwrap_or("<none>");
    let external_ips: Vec<&str> = list(object, "/spec/externalIPs")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let external = match type_ {
        "ClusterIP" | "NodePort" if !external_ips.is_empty() => external_ips.join(","),
        "ClusterIP" | "NodePort" => "<none>".into(),
        "LoadBalancer" => {
            let mut all = load_balancer_ingress(object, "/status/loadBalancer/ingress");
            all.extend(external_ips.iter().map(|s| s.to_string()));
            if all.is_empty() {
                "<pending>".into()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => text(object, "/spec/externalName").into(),
        _ => "<unknown>".into(),
    };
    let ports: Vec<String> = list(object, "/spec/ports")
        .iter()
        .map(|port| {
            let (number, protocol) = (int(port, "/port"), text(port, "/protocol"));
            match int(port, "/nodePort") {
                node if node > 0 => format!("{number}:{node}/{protocol}"),
                _ => format!("{number}/{protocol}"),
            }
        })
        .collect();
    let ports = if ports.is_empty() {
        "<none>".into()
    } else {
        ports.join(",")
    };
    vec![
        name(object),
        type_.into(),
        cluster_ip.into(),
        external.into(),
        ports.into(),
        age(object, now),
        format_labels(object.pointer("/spec/selector")).into(),
    ]
    .into()
}

/// The IPs or host names of a load balancer's ingress points
/// (`loadBalancerStatusStringer`, wide).
fn load_balancer_ingress(object: &Value, pointer: &str) -> Vec<String> {
    list(object, pointer)
        .iter()
        .filter_map(
            |ingress| match (text(ingress, "/ip"), text(ingress, "/hostname")) {
                ("", "") => None,
                ("", host) => Some(host.to_string()),
                (ip, _) => Some(ip.to_string()),
            },
        )
        .collect()
}

/// Up to three items joined by commas, then ` + N more...`; `<unset>` for
/// none (`listWithMoreString`).
fn at_most_three(items: Vec<String>) -> String {
    match items.len() {
        0 => "<unset>".into(),
        n if n > 3 => format!("{} + {} more...", items[..3].join(","), n - 3),
        _ => items.join(","),
    }
}

fn endpoints(object: &Value, now: DateTime<Utc>) -> Printed {
    let subsets = list(object, "/subsets");
    let text_cell = if subsets.is_empty() {
        "<none>".to_string()
    } else {
        let mut all = Vec::new();
        for subset in subsets {
            let addresses = list(subset, "/addresses");
            let ports = list(subset, "/ports");
            if ports.is_empty() {
                all.extend(addresses.iter().map(|a| text(a, "/ip").to_string()));
            }
            for port in ports {
                for address in addresses {
                    let ip = text(address, "/ip");
                    let port = int(port, "/port");
                    all.push(if ip.contains(':') {
                        format!("[{ip}]:{port}")
                    } else {
                        format!("{ip}:{port}")
                    });
                }
            }
        }
        match all.len() {
            n if n > 3 => format!("{} + {} more...", all[..3].join(","), n - 3),
            _ => all.join(","),
        }
    };
    vec![name(object), text_cell.into(), age(object, now)].into()
}

fn endpoint_slice(object: &Value, now: DateTime<Utc>) -> Printed {
    let ports = list(object, "/ports")
        .iter()
        .map(
            |port| match (port.get("port").and_then(Value::as_i64), port.get("name")) {
                (Some(number), _) => number.to_string(),
                (None, Some(Value::String(name))) => name.clone(),
                _ => "*".into(),
            },
        )
        .collect();
    let addresses = list(object, "/endpoints")
        .iter()
        .flat_map(|endpoint| list(endpoint, "/addresses"))
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    vec![
        name(object),
        text(object, "/addressType").into(),
        at_most_three(ports).into(),
        at_most_three(addresses).into(),
        age(object, now),
    ]
    .into()
}

fn persistent_volume_claim(object: &Value, now: DateTime<Utc>) -> Printed {
    let phase = if object.pointer("/metadata/deletionTimestamp").is_some() {
        "Terminating"
    } else {
        text(object, "/status/phase")
    };
    let volume = text(object, "/spec/volumeName");
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        let modes = list(object, "/status/accessModes");
        let has = |mode: &str| modes.iter().any(|m| m == mode);
        let short: Vec<&str> = [
            ("ReadWriteOnce", "RWO"),
            ("ReadOnlyMany", "ROX"),
            ("ReadWriteMany", "RWX"),
            ("ReadWriteOncePod", "RWOP"),
        ]
        .iter()
        .filter(|(mode, _)| has(mode))
        .map(|(_, short)| *short)
        .collect();
        (
            text(object, "/status/capacity/storage").to_string(),
            short.join(","),
        )
    };
    let class = object
        .pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class")
        .and_then(Value::as_str)
        .unwrap_or_else(|| text(object, "/spec/storageClassName"));
    let mode = object
        .pointer("/spec/volumeMode")
        .and_then(Value::as_str)
        .unwrap_or("<unset>");
    vec![
        name(object),
        phase.into(),
        volume.into(),
        capacity.into(),
        modes.into(),
        class.into(),
        age(object, now),
        mode.into(),
    ]
    .into()
}

fn node(object: &Value, now: DateTime<Utc>) -> Printed {
    let ready = list(object, "/status/conditions")
        .iter()
        .rev()
        .find(|c| text(c, "/type") == "Ready");
    let mut status = vec![match ready {
        Some(c) if text(c, "/status") == "True" => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if object.pointer("/spec/unschedulable") == Some(&Value::Bool(true)) {
        status.push("SchedulingDisabled");
    }
    let mut roles: Vec<&str> = object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(
            |(key, value)| match key.strip_prefix("node-role.kubernetes.io/") {
                Some(role) if !role.is_empty() => Some(role),
                Some(_) => None,
                None if key == "kubernetes.io/role" => value.as_str().filter(|v| !v.is_empty()),
                None => None,
            },
        )
        .collect();
    roles.sort_unstable();
    roles.dedup();
    let roles = if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.join(",")
    };
    let address = |kind: &str| {
        list(object, "/status/addresses")
            .iter()
            .find(|a| text(a, "/type") == kind)
            .map_or("<none>", |a| text(a, "/address"))
    };
    let info = |field: &str| match text(object, &format!("/status/nodeInfo/{field}")) {
        "" => "<unknown>",
        value => value,
    };
    vec![
        name(object),
        status.join(",").into(),
        roles.into(),
        age(object, now),
        text(object, "/status/nodeInfo/kubeletVersion").into(),
        address("InternalIP").into(),
        address("ExternalIP").into(),
        info("osImage").into(),
        info("kernelVersion").into(),
        info("containerRuntimeVersion").into(),
    ]
    .into()
}

fn deployment(object: &Value, now: DateTime<Utc>) -> Printed {
    let [names, images] = containers(object, "/spec/template/spec/containers");
    vec![
        name(object),
        format!(
            "{}/{}",
            int(object, "/status/readyReplicas"),
            int(object, "/spec/replicas")
        )
        .into(),
        int(object, "/status/updatedReplicas").into(),
        int(object, "/status/availableReplicas").into(),
        age(object, now),
        names,
        images,
        selector_string(object.pointer("/spec/selector")).into(),
    ]
    .into()
}

fn replica_set(object: &Value, now: DateTime<Utc>) -> Printed {
    let [names, images] = containers(object, "/spec/template/spec/containers");
    vec![
        name(object),
        int(object, "/spec/replicas").into(),
        int(object, "/status/replicas").into(),
        int(object, "/status/readyReplicas").into(),
        age(object, now),
        names,
        images,
        selector_string(object.pointer("/spec/selector")).into(),
    ]
    .into()
}

fn stateful_set(object: &Value, now: DateTime<Utc>) -> Printed {
    let [names, images] = containers(object, "/spec/template/spec/containers");
    vec![
        name(object),
        format!(
            "{}/{}",
            int(object, "/status/readyReplicas"),
            int(object, "/spec/replicas")
        )
        .into(),
        age(object, now),
        names,
        images,
    ]
    .into()
}

fn daemon_set(object: &Value, now: DateTime<Utc>) -> Printed {
    let [names, images] = containers(object, "/spec/template/spec/containers");
    vec![
        name(object),
        int(object, "/status/desiredNumberScheduled").into(),
        int(object, "/status/currentNumberScheduled").into(),
        int(object, "/status/numberReady").into(),
        int(object, "/status/updatedNumberScheduled").into(),
        int(object, "/status/numberAvailable").into(),
        format_labels(object.pointer("/spec/template/spec/nodeSelector")).into(),
        age(object, now),
        names,
        images,
        selector_string(object.pointer("/spec/selector")).into(),
    ]
    .into()
}

fn job(object: &Value, now: DateTime<Utc>) -> Printed {
    let succeeded = int(object, "/status/succeeded");
    let completions = match object.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(completions) => format!("{succeeded}/{completions}"),
        None => match int(object, "/spec/parallelism") {
            parallelism if parallelism > 1 => format!("{succeeded}/1 of {parallelism}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let start = object
        .pointer("/status/startTime")
        .and_then(Value::as_str)
        .and_then(time);
    let end = object
        .pointer("/status/completionTime")
        .and_then(Value::as_str)
        .and_then(time);
    let duration = match (start, end) {
        (None, _) => String::new(),
        (Some(start), None) => human_duration(now - start),
        (Some(start), Some(end)) => human_duration(end - start),
    };
    let [names, images] = containers(object, "/spec/template/spec/containers");
    vec![
        name(object),
        completions.into(),
        duration.into(),
        age(object, now),
        names,
        images,
        format_selector(object.pointer("/spec/selector")).into(),
    ]
    .into()
}

fn cron_job(object: &Value, now: DateTime<Utc>) -> Printed {
    let suspend = match object.pointer("/spec/suspend") {
        Some(Value::Bool(true)) => "True",
        Some(Value::Bool(false)) => "False",
        _ => "<unset>",
    };
    let last = match object.pointer("/status/lastScheduleTime") {
        Some(Value::String(_)) => since(object.pointer("/status/lastScheduleTime"), now),
        _ => "<none>".into(),
    };
    let [names, images] = containers(object, "/spec/jobTemplate/spec/template/spec/containers");
    vec![
        name(object),
        text(object, "/spec/schedule").into(),
        suspend.into(),
        list(object, "/status/active").len().into(),
        last.into(),
        age(object, now),
        names,
        images,
        format_selector(object.pointer("/spec/jobTemplate/spec/selector")).into(),
    ]
    .into()
}

fn role_binding(object: &Value, now: DateTime<Utc>) -> Printed {
    let subjects = list(object, "/subjects");
    let of = |kind: &str| {
        subjects
            .iter()
            .filter(|s| text(s, "/kind") == kind)
            .map(|s| match kind {
                "ServiceAccount" => format!("{}/{}", text(s, "/namespace"), text(s, "/name")),
                _ => text(s, "/name").to_string(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    vec![
        name(object),
        format!(
            "{}/{}",
            text(object, "/roleRef/kind"),
            text(object, "/roleRef/name")
        )
        .into(),
        age(object, now),
        of("User").into(),
        of("Group").into(),
        of("ServiceAccount").into(),
    ]
    .into()
}

fn lease(object: &Value, now: DateTime<Utc>) -> Printed {
    vec![
        name(object),
        text(object, "/spec/holderIdentity").into(),
        age(object, now),
    ]
    .into()
}

/// An int-or-string as printed, `N/A` when unset.
fn int_or_string(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "N/A".into(),
    }
}

fn pod_disruption_budget(object: &Value, now: DateTime<Utc>) -> Printed {
    vec![
        name(object),
        int_or_string(object.pointer("/spec/minAvailable")).into(),
        int_or_string(object.pointer("/spec/maxUnavailable")).into(),
        int(object, "/status/disruptionsAllowed").into(),
        age(object, now),
    ]
    .into()
}

fn network_policy(object: &Value, now: DateTime<Utc>) -> Printed {
    vec![
        name(object),
        format_selector(object.pointer("/spec/podSelector")).into(),
        age(object, now),
    ]
    .into()
}

fn ingress(object: &Value, now: DateTime<Utc>) -> Printed {
    let class = object
        .pointer("/spec/ingressClassName")
        .and_then(Value::as_str)
        .unwrap_or("<none>");
    let hosts: Vec<String> = list(object, "/spec/rules")
        .iter()
        .map(|rule| match text(rule, "/host") {
            "" => "*".to_string(),
            host => host.to_string(),
        })
        .collect();
    let hosts = match hosts.len() {
        0 => "*".to_string(),
        n if n > 3 => format!("{} + {} more...", hosts[..3].join(","), n - 3),
        _ => hosts.join(","),
    };
    let address = load_balancer_ingress(object, "/status/loadBalancer/ingress").join(",");
    let ports = if list(object, "/spec/tls").is_empty() {
        "80"
    } else {
        "80, 443"
    };
    vec![
        name(object),
        class.into(),
        hosts.into(),
        address.into(),
        ports.into(),
        age(object, now),
    ]
    .into()
}

fn priority_class(object: &Value, now: DateTime<Utc>) -> Printed {
    vec![
        name(object),
        int(object, "/value").into(),
        object
            .get("globalDefault")
            .and_then(Value::as_bool)
            .unwrap_or(false)
            .into(),
        age(object, now),
    ]
    .into()
}

fn storage_class(object: &Value, now: DateTime<Utc>) -> Printed {
    let default = [
        "storageclass.kubernetes.io~1is-default-class",
        "storageclass.beta.kubernetes.io~1is-default-class",
    ]
    .iter()
    .any(|key| text(object, &format!("/metadata/annotations/{key}")) == "true");
    let mut name = text(object, "/metadata/name").to_string();
    if default {
        name.push_str(" (default)");
    }
    let or = |pointer: &str, default: &'static str| match text(object, pointer) {
        "" => default,
        value => value,
    };
    vec![
        name.into(),
        text(object, "/provisioner").into(),
        or("/reclaimPolicy", "Delete").into(),
        or("/volumeBindingMode", "Immediate").into(),
        object
            .get("allowVolumeExpansion")
            .and_then(Value::as_bool)
            .unwrap_or(false)
            .into(),
        age(object, now),
    ]
    .into()
}

/// A container's status fields the pod printer reads.
struct ContainerStatus<'a> {
    status: &'a Value,
}

impl ContainerStatus<'_> {
    fn restarts(&self) -> i64 {
        int(self.status, "/restartCount")
    }

    /// When its last run ended: `lastState.terminated.finishedAt`.
    fn last_terminated(&self) -> Option<DateTime<Utc>> {
        self.status
            .pointer("/lastState/terminated")
            .map(|t| text(t, "/finishedAt"))
            .and_then(time)
    }

    fn state(&self, state: &str) -> Option<&Value> {
        self.status.pointer(&format!("/state/{state}"))
    }

    fn ready(&self) -> bool {
        self.status.get("ready") == Some(&Value::Bool(true))
    }
}

/// The reason of a terminated state: its reason, else its signal, else its
/// exit code, after `prefix`.
fn terminated_reason(terminated: &Value, prefix: &str) -> String {
    match (text(terminated, "/reason"), int(terminated, "/signal")) {
        ("", 0) => format!("{prefix}ExitCode:{}", int(terminated, "/exitCode")),
        ("", signal) => format!("{prefix}Signal:{signal}"),
        (reason, _) => format!("{prefix}{reason}"),
    }
}

/// The latest of two instants, the first when both are absent.
fn latest(a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// `printPod`: READY, STATUS, RESTARTS with the last restart's age, AGE,
/// then IP, NODE, NOMINATED NODE, READINESS GATES; a finished pod's row has
/// the condition `Completed`.
fn pod(object: &Value, now: DateTime<Utc>) -> Printed {
    let conditions = list(object, "/status/conditions");
    let condition_true = |type_: &str| {
        conditions
            .iter()
            .any(|c| text(c, "/type") == type_ && text(c, "/status") == "True")
    };
    let phase = text(object, "/status/phase");
    let mut reason = match text(object, "/status/reason") {
        "" => phase.to_string(),
        reason => reason.to_string(),
    };
    if conditions
        .iter()
        .any(|c| text(c, "/type") == "PodScheduled" && text(c, "/reason") == "SchedulingGated")
    {
        reason = "SchedulingGated".into();
    }
    let row_conditions = match phase {
        "Succeeded" => Some(
            json!([{"type": "Completed", "status": "True", "reason": "Succeeded", "message": "The pod has completed successfully."}]),
        ),
        "Failed" => Some(
            json!([{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]),
        ),
        _ => None,
    };
    let init_specs = list(object, "/spec/initContainers");
    let restartable = |name: &str| {
        init_specs
            .iter()
            .any(|c| text(c, "/name") == name && text(c, "/restartPolicy") == "Always")
    };
    let total = list(object, "/spec/containers").len()
        + init_specs
            .iter()
            .filter(|c| text(c, "/restartPolicy") == "Always")
            .count();
    let mut ready = 0;
    let mut restarts = 0;
    let mut last_restart = None;
    let mut sidecar_restarts = 0;
    let mut sidecar_last_restart = None;
    let mut initializing = false;
    for (i, status) in list(object, "/status/initContainerStatuses")
        .iter()
        .enumerate()
    {
        let container = ContainerStatus { status };
        let sidecar = restartable(text(status, "/name"));
        restarts += container.restarts();
        last_restart = latest(last_restart, container.last_terminated());
        if sidecar {
            sidecar_restarts += container.restarts();
            sidecar_last_restart = latest(sidecar_last_restart, container.last_terminated());
        }
        let terminated = container.state("terminated");
        let waiting_reason = container
            .state("waiting")
            .map(|w| text(w, "/reason"))
            .unwrap_or("");
        if terminated.is_some_and(|t| int(t, "/exitCode") == 0) {
            continue;
        }
        if sidecar && status.get("started") == Some(&Value::Bool(true)) {
            if container.ready() {
                ready += 1;
            }
            continue;
        }
        reason = match terminated {
            Some(terminated) => terminated_reason(terminated, "Init:"),
            None if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" => {
                format!("Init:{waiting_reason}")
            }
            None => format!("Init:{i}/{}", init_specs.len()),
        };
        initializing = true;
        break;
    }
    if !initializing || condition_true("Initialized") {
        restarts = sidecar_restarts;
        last_restart = sidecar_last_restart;
        let mut running = false;
        for status in list(object, "/status/containerStatuses").iter().rev() {
            let container = ContainerStatus { status };
            restarts += container.restarts();
            last_restart = latest(last_restart, container.last_terminated());
            let waiting = container
                .state("waiting")
                .map(|w| text(w, "/reason"))
                .unwrap_or("");
            if !waiting.is_empty() {
                reason = waiting.to_string();
            } else if let Some(terminated) = container.state("terminated") {
                reason = terminated_reason(terminated, "");
            } else if container.ready() && container.state("running").is_some() {
                running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && running {
            reason = if condition_true("Ready") {
                "Running".into()
            } else {
                "NotReady".into()
            };
        }
    }
    if object.pointer("/metadata/deletionTimestamp").is_some() {
        reason = if text(object, "/status/reason") == "NodeLost" {
            "Unknown".into()
        } else {
            "Terminating".into()
        };
    }
    let restarts = match last_restart {
        Some(at) if restarts != 0 => format!("{restarts} ({} ago)", human_duration(now - at)),
        _ => restarts.to_string(),
    };
    let or_none = |value: &str| match value {
        "" => "<none>".to_string(),
        value => value.to_string(),
    };
    let ip = list(object, "/status/podIPs")
        .first()
        .map_or("", |ip| text(ip, "/ip"));
    let gates = list(object, "/spec/readinessGates");
    let readiness_gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let met = gates
            .iter()
            .filter(|gate| {
                let type_ = text(gate, "/conditionType");
                conditions
                    .iter()
                    .find(|c| text(c, "/type") == type_)
                    .is_some_and(|c| text(c, "/status") == "True")
            })
            .count();
        format!("{met}/{}", gates.len())
    };
    Printed {
        cells: vec![
            name(object),
            format!("{ready}/{total}").into(),
            reason.into(),
            restarts.into(),
            age(object, now),
            or_none(ip).into(),
            or_none(text(object, "/spec/nodeName")).into(),
            or_none(text(object, "/status/nominatedNodeName")).into(),
            readiness_gates.into(),
        ],
        conditions: row_conditions,
    }
}

/// `printResourceQuota`: `resource: used/hard` of each hard limit, sorted
/// by name, `limits.*` in the LIMIT column and the others in REQUEST.
fn resource_quota(object: &Value, now: DateTime<Utc>) -> Printed {
    let hard = object
        .pointer("/status/hard")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut names: Vec<&String> = hard.keys().collect();
    names.sort();
    let (mut requests, mut limits) = (Vec::new(), Vec::new());
    for name in names {
        let used = object
            .pointer(&format!(
                "/status/used/{}",
                name.replace('~', "~0").replace('/', "~1")
            ))
            .and_then(Value::as_str)
            .unwrap_or("0");
        let entry = format!("{name}: {used}/{}", hard[name].as_str().unwrap_or("0"));
        let column = match name.split_once('.') {
            Some(("limits", _)) => &mut limits,
            _ => &mut requests,
        };
        column.push(entry);
    }
    vec![
        name(object),
        age(object, now),
        requests.join(", ").into(),
        limits.join(", ").into(),
    ]
    .into()
}

/// `printEvent`, for core/v1 and events.k8s.io/v1 alike (the API server
/// prints both from the same internal Event): last and first seen (the
/// series' last observation, the event time when no timestamp is set),
/// type, reason, object, subobject, source, message, count, name.
fn event(object: &Value, now: DateTime<Utc>) -> Printed {
    // core/v1's field, or events.k8s.io/v1's.
    let field = |core: &str, events: &str| {
        object
            .get(core)
            .filter(|v| !v.is_null())
            .or_else(|| object.get(events).filter(|v| !v.is_null()))
    };
    let some_time =
        |value: Option<&Value>| value.and_then(Value::as_str).is_some_and(|t| !t.is_empty());
    let first_timestamp = field("firstTimestamp", "deprecatedFirstTimestamp");
    let first = if some_time(first_timestamp) {
        since(first_timestamp, now)
    } else {
        since(object.get("eventTime"), now)
    };
    let last_timestamp = field("lastTimestamp", "deprecatedLastTimestamp");
    let mut last = if some_time(last_timestamp) {
        since(last_timestamp, now)
    } else {
        first.clone()
    };
    let mut count = field("count", "deprecatedCount")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if let Some(series) = object.get("series").filter(|s| s.is_object()) {
        last = since(series.get("lastObservedTime"), now);
        count = int(series, "/count");
    } else if count == 0 {
        count = 1;
    }
    let regarding = field("involvedObject", "regarding")
        .cloned()
        .unwrap_or(Value::Null);
    let kind = text(&regarding, "/kind").to_lowercase();
    let target = match text(&regarding, "/name") {
        "" => kind,
        name => format!("{kind}/{name}"),
    };
    let source = field("source", "deprecatedSource")
        .cloned()
        .unwrap_or(Value::Null);
    let or = |a: &str, b: &str| {
        if a.is_empty() {
            b.to_string()
        } else {
            a.to_string()
        }
    };
    let component = or(
        text(&source, "/component"),
        field("reportingComponent", "reportingController")
            .and_then(Value::as_str)
            .unwrap_or(""),
    );
    let instance = or(text(&source, "/host"), text(object, "/reportingInstance"));
    let source = if instance.is_empty() {
        component
    } else {
        format!("{component}, {instance}")
    };
    let message = field("message", "note")
        .and_then(Value::as_str)
        .unwrap_or("");
    vec![
        last.into(),
        text(object, "/type").into(),
        text(object, "/reason").into(),
        target.into(),
        text(&regarding, "/fieldPath").into(),
        source.into(),
        message.trim().into(),
        first.into(),
        count.into(),
        name(object),
    ]
    .into()
}

/// `printHorizontalPodAutoscaler`: its target, metrics (`current/target`
/// of the first two, then ` + N more...`), replica bounds and count.
fn horizontal_pod_autoscaler(object: &Value, now: DateTime<Utc>) -> Printed {
    let reference = format!(
        "{}/{}",
        text(object, "/spec/scaleTargetRef/kind"),
        text(object, "/spec/scaleTargetRef/name")
    );
    let min = match object.pointer("/spec/minReplicas").and_then(Value::as_i64) {
        Some(min) => min.to_string(),
        None => "<unset>".into(),
    };
    vec![
        name(object),
        reference.into(),
        hpa_metrics(object).into(),
        min.into(),
        int(object, "/spec/maxReplicas").into(),
        int(object, "/status/currentReplicas").into(),
        age(object, now),
    ]
    .into()
}

/// `formatHPAMetrics`.
fn hpa_metrics(object: &Value) -> String {
    let specs = list(object, "/spec/metrics");
    if specs.is_empty() {
        return "<none>".into();
    }
    let statuses = list(object, "/status/currentMetrics");
    let entries: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            // The source of metric `i`, in the spec and in the status.
            let source = |key: &str| spec.get(key).cloned().unwrap_or(Value::Null);
            let current = |key: &str, field: &str| {
                statuses
                    .get(i)
                    .and_then(|status| status.get(key))
                    .and_then(|status| status.pointer(&format!("/current/{field}")))
            };
            let quantity =
                |value: Option<&Value>| value.and_then(Value::as_str).unwrap_or("0").to_string();
            let unknown = "<unknown>".to_string();
            match text(spec, "/type") {
                kind @ ("External" | "Object") => {
                    let key = if kind == "External" {
                        "external"
                    } else {
                        "object"
                    };
                    let target = source(key);
                    match target.pointer("/target/averageValue") {
                        Some(average) => format!(
                            "{}/{} (avg)",
                            current(key, "averageValue").map_or(unknown, |v| quantity(Some(v))),
                            quantity(Some(average))
                        ),
                        None => format!(
                            "{}/{}",
                            current(key, "value").map_or(unknown, |v| quantity(Some(v))),
                            quantity(target.pointer("/target/value"))
                        ),
                    }
                }
                "Pods" => format!(
                    "{}/{}",
                    current("pods", "averageValue").map_or(unknown, |v| quantity(Some(v))),
                    quantity(source("pods").pointer("/target/averageValue"))
                ),
                kind @ ("Resource" | "ContainerResource") => {
                    let key = if kind == "Resource" {
                        "resource"
                    } else {
                        "containerResource"
                    };
                    let target = source(key);
                    match target.pointer("/target/averageValue") {
                        Some(average) => format!(
                            "{}/{}",
                            current(key, "averageValue").map_or(unknown, |v| quantity(Some(v))),
                            quantity(Some(average))
                        ),
                        None => {
                            let current = current(key, "averageUtilization")
                                .and_then(Value::as_i64)
                                .map_or(unknown, |u| format!("{u}%"));
                            let target = target
                                .pointer("/target/averageUtilization")
                                .and_then(Value::as_i64)
                                .map_or("<auto>".to_string(), |u| format!("{u}%"));
                            format!("{current}/{target}")
                        }
                    }
                }
                _ => "<unknown type>".into(),
            }
        })
        .collect();
    match entries.len() {
        n if n > 2 => format!("{} + {} more...", entries[..2].join(", "), n - 2),
        _ => entries.join(", "),
    }
}

/// Annotations that live in another field of the API server's internal
/// object, so that its tables' `PartialObjectMetadata` lacks them: a
/// DaemonSet's template generation (`spec.templateGeneration` inside).
pub(super) fn internal_annotations(resource: &ApiResource) -> &'static [&'static str] {
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("apps", "DaemonSet") => &["deprecated.daemonset.template.generation"],
        _ => &[],
    }
}
