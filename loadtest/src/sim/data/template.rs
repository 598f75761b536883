//! Pod templates: what the pods of one workload share, built on first use from
//! the workload's own random stream, slimmed as far as `budget` asks for its
//! pods to fit the size budgets.

use chrono::TimeDelta;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};

use super::catalogue::Kind;
use super::catalogue::{COMMON_ENV, ContainerSpec, Env, Health, PortSpec, Source, VolumeSpec};
use super::images::{image_id, normalise_image};
use super::managed_fields::fields_v1;
use super::random::{pick_distinct, random_hex};
use super::{Generator, as_map_mut, ts};

/// A container as the status needs it.
#[derive(Debug, Clone)]
pub(super) struct ContainerInfo {
    pub(super) name: String,
    /// The image as the runtime reports it (`docker.io/library/...`).
    pub(super) status_image: String,
    pub(super) image_id: String,
}

#[derive(Debug, Clone)]
pub(super) struct PodTemplate {
    pub(super) generate_name: Option<String>,
    /// With placeholders for the per-pod StatefulSet labels.
    pub(super) labels: Map<String, Value>,
    pub(super) annotations: Map<String, Value>,
    pub(super) owner_references: Value,
    pub(super) finalizers: Option<Value>,
    /// Complete but for `nodeName`; per-pod fields hold placeholders.
    pub(super) spec: Value,
    /// Index in `spec.volumes` of the `kube-api-access-*` volume, the last
    /// volume mount of every container.
    pub(super) api_access_volume: usize,
    /// Index in `spec.volumes` of the StatefulSet's claim.
    pub(super) claim_volume: Option<usize>,
    /// What kube-controller-manager owns of each pod.
    pub(super) kcm_fields: Value,
    pub(super) containers: Vec<ContainerInfo>,
    pub(super) qos_class: &'static str,
    pub(super) host_network: bool,
    /// Seconds from container start to Ready.
    pub(super) ready_delay: i64,
}

/// How far [`build_template`] may slim a template.
pub(super) const MAX_SLIM: u8 = 3;

/// The template of workload `wi`. `slim` 0 makes every random choice; each
/// level above leaves out more of what is optional: 1 sidecars and
/// annotations, 2 common variables, security contexts and optional labels,
/// 3 readiness probes, optional volumes and the containers after the first.
pub(super) fn build_template(g: &Generator, wi: usize, slim: u8) -> PodTemplate {
    let w = &g.workloads[wi];
    let ns = &g.namespaces[w.namespace];
    let app = w.app;
    let mut rng = SmallRng::seed_from_u64(w.seed);
    let rng = &mut rng;
    let team = ns.team.unwrap_or("platform");
    let subst = |s: &str| {
        s.replace("$APP", &w.name)
            .replace("$NS", &ns.name)
            .replace("$ENV", ns.env)
    };

    // Labels.
    let mut labels = Map::new();
    let label = |labels: &mut Map<String, Value>, k: &str, v: &str| {
        labels.insert(k.into(), v.into());
    };
    label(&mut labels, "app.kubernetes.io/name", &w.name);
    let optional = slim < 2;
    if rng.random_bool(0.6) {
        label(&mut labels, "app", &w.name);
    }
    if rng.random_bool(0.4) && optional {
        label(
            &mut labels,
            "app.kubernetes.io/instance",
            &format!("{}-{}", w.name, ns.env),
        );
    }
    let component = match app.kind {
        Kind::StatefulSet => "database",
        Kind::DaemonSet => "agent",
        Kind::Job => "batch",
        Kind::ReplicaSet => ["server", "frontend", "backend", "controller"][rng.random_range(0..4)],
    };
    if rng.random_bool(0.6) && optional {
        label(&mut labels, "app.kubernetes.io/component", component);
    }
    if rng.random_bool(0.5) && optional {
        label(&mut labels, "app.kubernetes.io/part-of", team);
    }
    if rng.random_bool(0.6) {
        label(&mut labels, "team", team);
    }
    if rng.random_bool(0.4) && optional {
        label(
            &mut labels,
            "tier",
            ["frontend", "backend", "data", "platform"][rng.random_range(0..4)],
        );
    }
    let version = format!(
        "{}.{}.{}",
        rng.random_range(0..4),
        rng.random_range(0..40),
        rng.random_range(0..20)
    );
    if rng.random_bool(0.3) && optional {
        label(&mut labels, "app.kubernetes.io/version", &version);
    }
    match app.kind {
        Kind::ReplicaSet => label(&mut labels, "pod-template-hash", &w.revision),
        Kind::DaemonSet => {
            label(&mut labels, "controller-revision-hash", &w.revision);
            label(
                &mut labels,
                "pod-template-generation",
                &rng.random_range(1..12).to_string(),
            );
        }
        Kind::StatefulSet => {
            label(&mut labels, "controller-revision-hash", &w.revision);
            label(&mut labels, "apps.kubernetes.io/pod-index", "0");
            label(&mut labels, "statefulset.kubernetes.io/pod-name", &w.owner);
        }
        Kind::Job => {
            label(
                &mut labels,
                "batch.kubernetes.io/controller-uid",
                &w.owner_uid,
            );
            label(&mut labels, "batch.kubernetes.io/job-name", &w.owner);
            label(&mut labels, "controller-uid", &w.owner_uid);
            label(&mut labels, "job-name", &w.owner);
        }
    }

    // Annotations from the pod template.
    let mut annotations = Map::new();
    let main_ports = app.containers[0].ports;
    if let Some(metrics) = main_ports.iter().find(|p| p.name.contains("metrics"))
        && rng.random_bool(0.7)
        && slim < 1
    {
        annotations.insert("prometheus.io/scrape".into(), "true".into());
        annotations.insert("prometheus.io/port".into(), metrics.port.to_string().into());
        annotations.insert("prometheus.io/path".into(), "/metrics".into());
    }
    if rng.random_bool(0.3) {
        let at = g.base_time - TimeDelta::seconds(rng.random_range(86_400 * 30..86_400 * 60));
        annotations.insert("kubectl.kubernetes.io/restartedAt".into(), ts(at).into());
    }
    if ns.team.is_some() && rng.random_bool(0.3) && slim < 1 {
        annotations.insert("checksum/config".into(), random_hex(rng, 64).into());
    }

    // Volumes.
    let mut volume_specs: Vec<&VolumeSpec> = app.volumes.iter().collect();
    for v in app.optional_volumes {
        if rng.random_bool(0.5) && slim < 3 {
            volume_specs.push(v);
        }
    }
    // Sidecars.
    let mut container_specs: Vec<&ContainerSpec> = app.containers.iter().collect();
    if slim >= 3 {
        container_specs.truncate(1);
    }
    if !app.optional_sidecars.is_empty() {
        let n = [0, 0, 0, 0, 1, 1, 2][rng.random_range(0..7)];
        let n = if slim >= 1 { 0 } else { n };
        for s in pick_distinct(rng, app.optional_sidecars, n) {
            // A sidecar needs the volumes it mounts.
            let available = s
                .mounts
                .iter()
                .all(|m| volume_specs.iter().any(|v| v.name == *m));
            if available {
                container_specs.push(s);
            }
        }
    }

    let mut containers = Vec::new();
    let mut infos = Vec::new();
    let mut guaranteed = true;
    for (ci, c) in container_specs.iter().enumerate() {
        let main = ci == 0;
        let name = if c.name.is_empty() {
            w.name.clone()
        } else {
            c.name.to_owned()
        };
        let image = if c.image.is_empty() {
            let repo = if app.kind == Kind::Job && !app.cron && app.name == "db-migrate" {
                format!(
                    "{}/{team}/{}",
                    g.registry,
                    w.name.trim_end_matches("-db-migrate")
                )
            } else {
                format!("{}/{team}/{}", g.registry, w.name)
            };
            format!("{repo}:{version}")
        } else {
            c.image.to_owned()
        };
        let mut container = Map::new();
        container.insert("name".into(), name.clone().into());
        container.insert("image".into(), image.clone().into());
        let pull = if image.ends_with(":latest") || rng.random_bool(0.1) {
            "Always"
        } else {
            "IfNotPresent"
        };
        container.insert("imagePullPolicy".into(), pull.into());
        if !c.args.is_empty() {
            let args: Vec<Value> = c.args.iter().map(|a| subst(a).into()).collect();
            container.insert("args".into(), args.into());
        }
        if !c.ports.is_empty() {
            let ports: Vec<Value> = c
                .ports
                .iter()
                .map(|p| {
                    let mut port =
                        json!({ "containerPort": p.port, "name": p.name, "protocol": p.protocol });
                    if app.host_network {
                        port["hostPort"] = p.port.into();
                    }
                    port
                })
                .collect();
            container.insert("ports".into(), ports.into());
        }
        // Environment: the container's own, then (main containers of team apps) a pick of common ones.
        let mut env: Vec<&Env> = c.env.iter().collect();
        if main && ns.team.is_some() {
            let n = rng.random_range(1..=5);
            let n = if slim >= 2 { 0 } else { n };
            env.extend(pick_distinct(rng, COMMON_ENV, n));
        }
        if !env.is_empty() {
            let env: Vec<Value> = env.iter().map(|e| env_var(e, &name, &subst)).collect();
            container.insert("env".into(), env.into());
        }
        // Resources.
        let (resources, is_guaranteed) = resources(rng, main);
        guaranteed &= is_guaranteed;
        container.insert("resources".into(), resources);
        // Probes.
        let port = c.ports.first();
        let delay = [0, 5, 10, 15, 30][rng.random_range(0..5)];
        if let Some(live) = probe(rng, c.health, port, delay, false) {
            container.insert("livenessProbe".into(), live);
            if rng.random_bool(0.8)
                && slim < 3
                && let Some(ready) = probe(rng, c.health, port, 0, true)
            {
                container.insert("readinessProbe".into(), ready);
            }
        }
        if main && app.kind != Kind::Job && rng.random_bool(0.4) && slim < 2 {
            container.insert(
                "securityContext".into(),
                json!({
                    "allowPrivilegeEscalation": false,
                    "capabilities": { "drop": ["ALL"] },
                    "readOnlyRootFilesystem": true,
                    "runAsNonRoot": true,
                }),
            );
        } else if app.host_network && main {
            container.insert("securityContext".into(), json!({ "privileged": true }));
        }
        container.insert(
            "terminationMessagePath".into(),
            "/dev/termination-log".into(),
        );
        container.insert("terminationMessagePolicy".into(), "File".into());
        let mounts: Vec<Value> = volume_specs
            .iter()
            .filter(|v| {
                if main {
                    true
                } else {
                    c.mounts.contains(&v.name)
                }
            })
            .map(|v| {
                let mut m = json!({ "mountPath": subst(v.mount), "name": v.name });
                if v.read_only {
                    m["readOnly"] = true.into();
                }
                m
            })
            .collect();
        if !mounts.is_empty() {
            container.insert("volumeMounts".into(), mounts.into());
        }
        infos.push(ContainerInfo {
            name,
            status_image: normalise_image(&image),
            image_id: image_id(g.seed, &image),
        });
        containers.push(Value::Object(container));
    }
    let qos_class = if guaranteed {
        "Guaranteed"
    } else if containers
        .iter()
        .all(|c| c["resources"].as_object().is_some_and(Map::is_empty))
    {
        "BestEffort"
    } else {
        "Burstable"
    };

    let mut volumes: Vec<Value> = volume_specs.iter().map(|v| volume(v, &subst)).collect();
    let claim_volume = volume_specs
        .iter()
        .position(|v| matches!(v.source, Source::Claim));

    // The spec the controller writes.
    let mut spec = Map::new();
    spec.insert("containers".into(), containers.into());
    let dns = if app.host_network {
        "ClusterFirstWithHostNet"
    } else {
        "ClusterFirst"
    };
    spec.insert("dnsPolicy".into(), dns.into());
    spec.insert("enableServiceLinks".into(), true.into());
    if app.host_network {
        spec.insert("hostNetwork".into(), true.into());
    }
    if app.critical || app.kind == Kind::DaemonSet || rng.random_bool(0.3) {
        spec.insert(
            "nodeSelector".into(),
            json!({ "kubernetes.io/os": "linux" }),
        );
    }
    let restart = match app.kind {
        Kind::Job if rng.random_bool(0.5) => "OnFailure",
        Kind::Job => "Never",
        _ => "Always",
    };
    spec.insert("restartPolicy".into(), restart.into());
    spec.insert("schedulerName".into(), "default-scheduler".into());
    let security = if ns.team.is_some() && rng.random_bool(0.5) && slim < 2 {
        json!({ "fsGroup": 2000, "runAsGroup": 3000, "runAsUser": 1000, "seccompProfile": { "type": "RuntimeDefault" } })
    } else {
        json!({})
    };
    spec.insert("securityContext".into(), security);
    let service_account = if ns.team.is_some() && rng.random_bool(0.5) {
        "default".to_owned()
    } else {
        w.name.clone()
    };
    spec.insert("serviceAccount".into(), service_account.clone().into());
    spec.insert("serviceAccountName".into(), service_account.into());
    let grace = [30, 30, 30, 60, 10][rng.random_range(0..5)];
    spec.insert("terminationGracePeriodSeconds".into(), grace.into());
    let priority = if app.critical {
        let class = if app.kind == Kind::DaemonSet {
            "system-node-critical"
        } else {
            "system-cluster-critical"
        };
        spec.insert("priorityClassName".into(), class.into());
        if class == "system-node-critical" {
            2_000_001_000
        } else {
            2_000_000_000
        }
    } else {
        0
    };
    match app.kind {
        Kind::StatefulSet => {
            spec.insert("hostname".into(), w.owner.clone().into());
            spec.insert("subdomain".into(), format!("{}-headless", w.name).into());
        }
        Kind::DaemonSet => {
            spec.insert(
                "affinity".into(),
                json!({ "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{ "matchFields": [{
                        "key": "metadata.name", "operator": "In", "values": ["node"],
                    }]}],
                }}}),
            );
            spec.insert("tolerations".into(), daemonset_tolerations());
        }
        Kind::ReplicaSet | Kind::Job => {}
    }
    if !volumes.is_empty() {
        spec.insert("volumes".into(), volumes.clone().into());
    }

    let owner_references = json!([{
        "apiVersion": app.kind.api_version(),
        "blockOwnerDeletion": true,
        "controller": true,
        "kind": app.kind.name(),
        "name": w.owner,
        "uid": w.owner_uid,
    }]);
    let finalizers = (app.kind == Kind::Job).then(|| json!(["batch.kubernetes.io/job-tracking"]));
    let generate_name = (app.kind != Kind::StatefulSet).then(|| format!("{}-", w.owner));

    // What kube-controller-manager owns: everything it wrote on create.
    let mut meta = Map::new();
    if let Some(g) = &generate_name {
        meta.insert("generateName".into(), g.clone().into());
    }
    meta.insert("labels".into(), Value::Object(labels.clone()));
    if !annotations.is_empty() {
        meta.insert("annotations".into(), Value::Object(annotations.clone()));
    }
    meta.insert("ownerReferences".into(), owner_references.clone());
    if let Some(f) = &finalizers {
        meta.insert("finalizers".into(), f.clone());
    }
    let kcm_fields = json!({ "f:metadata": fields_v1(&meta), "f:spec": fields_v1(&spec) });

    // What admission and the API server add: the service account token
    // volume (mounted last in every container), default tolerations, the
    // priority.
    volumes.push(api_access_volume());
    let api_access_volume = volumes.len() - 1;
    spec.insert("volumes".into(), volumes.into());
    for c in spec["containers"].as_array_mut().expect("containers") {
        let mounts = as_map_mut(c)
            .entry("volumeMounts")
            .or_insert_with(|| json!([]));
        mounts.as_array_mut().expect("volumeMounts").push(json!({
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            "name": "kube-api-access-placeholder",
            "readOnly": true,
        }));
    }
    if app.kind != Kind::DaemonSet {
        spec.insert("tolerations".into(), default_tolerations());
    }
    spec.insert("priority".into(), priority.into());
    spec.insert("preemptionPolicy".into(), "PreemptLowerPriority".into());

    PodTemplate {
        generate_name,
        labels,
        annotations,
        owner_references,
        finalizers,
        spec: Value::Object(spec),
        api_access_volume,
        claim_volume,
        kcm_fields,
        containers: infos,
        qos_class,
        host_network: app.host_network,
        ready_delay: rng.random_range(2..25),
    }
}

fn env_var(e: &Env, container: &str, subst: &impl Fn(&str) -> String) -> Value {
    match e {
        Env::Value(n, v) => json!({ "name": n, "value": subst(v) }),
        Env::Field(n, path) => {
            json!({ "name": n, "valueFrom": { "fieldRef": { "apiVersion": "v1", "fieldPath": path } } })
        }
        Env::Secret(n, secret, key) => {
            json!({ "name": n, "valueFrom": { "secretKeyRef": { "key": key, "name": subst(secret) } } })
        }
        Env::ConfigMap(n, cm, key) => {
            json!({ "name": n, "valueFrom": { "configMapKeyRef": { "key": key, "name": subst(cm) } } })
        }
        Env::Resource(n, resource) => json!({ "name": n, "valueFrom": { "resourceFieldRef": {
            "containerName": container, "divisor": "0", "resource": resource,
        }}}),
    }
}

/// Requests and limits of a container, and whether they are Guaranteed
/// (limits equal to requests).
fn resources(rng: &mut SmallRng, main: bool) -> (Value, bool) {
    const CPU: &[&str] = &["10m", "25m", "50m", "100m", "200m", "250m", "500m", "1"];
    const MEMORY: &[&str] = &["32Mi", "64Mi", "128Mi", "256Mi", "512Mi", "1Gi", "2Gi"];
    let roll = rng.random_range(0..100);
    if roll < 5 {
        return (json!({}), false);
    }
    let (lo, hi) = if main { (2, CPU.len()) } else { (0, 4) };
    let cpu = rng.random_range(lo..hi);
    let mem = rng.random_range(lo.min(MEMORY.len() - 1)..hi.min(MEMORY.len()));
    if roll < 20 {
        let r = json!({ "cpu": CPU[cpu], "memory": MEMORY[mem] });
        return (json!({ "limits": r, "requests": r }), true);
    }
    let mem_limit = MEMORY[(mem + rng.random_range(0..3)).min(MEMORY.len() - 1)];
    let limits = if rng.random_bool(0.5) {
        json!({ "memory": mem_limit })
    } else {
        json!({ "cpu": CPU[(cpu + 2).min(CPU.len() - 1)], "memory": mem_limit })
    };
    (
        json!({ "limits": limits, "requests": { "cpu": CPU[cpu], "memory": MEMORY[mem] } }),
        false,
    )
}

/// A liveness (or readiness) probe, with the port by number or by name.
fn probe(
    rng: &mut SmallRng,
    health: Health,
    port: Option<&PortSpec>,
    delay: i64,
    readiness: bool,
) -> Option<Value> {
    let port_ref = |rng: &mut SmallRng, p: &PortSpec| -> Value {
        if rng.random_bool(0.5) {
            p.name.into()
        } else {
            p.port.into()
        }
    };
    let handler = match (health, port) {
        (Health::Http(path), Some(p)) => {
            let scheme = if p.name == "https" || p.port == 10250 {
                "HTTPS"
            } else {
                "HTTP"
            };
            let path = if readiness && path.ends_with("healthz") {
                "/readyz"
            } else {
                path
            };
            (
                "httpGet",
                json!({ "path": path, "port": port_ref(rng, p), "scheme": scheme }),
            )
        }
        (Health::Tcp, Some(p)) => ("tcpSocket", json!({ "port": port_ref(rng, p) })),
        (Health::Exec(cmd), _) => ("exec", json!({ "command": cmd })),
        _ => return None,
    };
    let period = [5, 10, 10, 15, 30][rng.random_range(0..5)];
    let failures = if readiness {
        3
    } else {
        [3, 3, 5, 6][rng.random_range(0..4)]
    };
    let timeout = [1, 1, 3, 5][rng.random_range(0..4)];
    let mut probe = json!({
        "failureThreshold": failures,
        "initialDelaySeconds": delay,
        "periodSeconds": period,
        "successThreshold": 1,
        "timeoutSeconds": timeout,
    });
    probe[handler.0] = handler.1;
    Some(probe)
}

fn volume(v: &VolumeSpec, subst: &impl Fn(&str) -> String) -> Value {
    let mut volume = json!({ "name": v.name });
    let (key, source) = match &v.source {
        Source::ConfigMap(name) => (
            "configMap",
            json!({ "defaultMode": 420, "name": subst(name) }),
        ),
        Source::Secret(name) => (
            "secret",
            json!({ "defaultMode": 420, "secretName": subst(name) }),
        ),
        Source::EmptyDir => ("emptyDir", json!({})),
        Source::HostPath(path, "") => ("hostPath", json!({ "path": path, "type": "" })),
        Source::HostPath(path, kind) => ("hostPath", json!({ "path": path, "type": kind })),
        Source::Claim => (
            "persistentVolumeClaim",
            json!({ "claimName": "data-placeholder" }),
        ),
    };
    volume[key] = source;
    volume
}

/// The projected service account token volume the ServiceAccount admission
/// plugin adds; named per pod (`kube-api-access-{5 chars}`).
fn api_access_volume() -> Value {
    json!({
        "name": "kube-api-access-placeholder",
        "projected": {
            "defaultMode": 420,
            "sources": [
                { "serviceAccountToken": { "expirationSeconds": 3607, "path": "token" } },
                { "configMap": { "items": [{ "key": "ca.crt", "path": "ca.crt" }], "name": "kube-root-ca.crt" } },
                { "downwardAPI": { "items": [{
                    "fieldRef": { "apiVersion": "v1", "fieldPath": "metadata.namespace" },
                    "path": "namespace",
                }]}},
            ],
        },
    })
}

/// What the DefaultTolerationSeconds admission plugin adds: 300 s, its
/// default `--default-not-ready-toleration-seconds` and
/// `--default-unreachable-toleration-seconds`.
fn default_tolerations() -> Value {
    json!([
        { "effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300 },
        { "effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 300 },
    ])
}

/// What the DaemonSet controller gives every daemon pod (and its template's
/// catch-all toleration).
fn daemonset_tolerations() -> Value {
    json!([
        { "operator": "Exists" },
        { "effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists" },
        { "effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists" },
        { "effect": "NoSchedule", "key": "node.kubernetes.io/disk-pressure", "operator": "Exists" },
        { "effect": "NoSchedule", "key": "node.kubernetes.io/memory-pressure", "operator": "Exists" },
        { "effect": "NoSchedule", "key": "node.kubernetes.io/pid-pressure", "operator": "Exists" },
        { "effect": "NoSchedule", "key": "node.kubernetes.io/unschedulable", "operator": "Exists" },
    ])
}
