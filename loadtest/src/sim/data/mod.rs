//! Realistic Kubernetes objects, generated deterministically from a seed.
//!
//! [`Generator`] fills the simulated API server with pods, namespaces, config
//! maps and `Widget` custom resources shaped like what a kube-apiserver 1.28+
//! returns as JSON, and produces churn for them ([`Generator::mutate_pod`] and
//! friends).
//!
//! # What the objects look like
//!
//! Pods belong to workloads (ReplicaSets of Deployments, DaemonSets,
//! StatefulSets, Jobs) planned when the generator is created: system
//! components in `kube-system`, `monitoring`, `logging` and `ingress-nginx`,
//! and each team namespace a handful of services, stateful stores and jobs.
//! Pods of one workload share their spec, as in a real cluster; they differ in
//! name, node, IPs, the `kube-api-access-*` volume, times and status. A new
//! pod serialises to 4–8 KiB of JSON, of which `metadata.managedFields` are
//! 1.5–3 KiB (the sizes in `APISERVER-PROTOCOL.md`; a template is slimmed
//! until it fits). The managed fields are derived from the fields each
//! manager wrote, so they mirror the object, also after mutations (which may
//! add managers and so grow them past 3 KiB).
//!
//! # Values or text
//!
//! [`Generator::pod`] gives a `serde_json::Value`: about 65 KB of heap (every
//! JSON object is a `BTreeMap` node of about 630 bytes) and 50–80 µs per
//! pod, most of it allocation. [`Generator::pod_json`] gives the same pod as
//! JSON text, byte for byte, in a few microseconds and 7 KB: use it to fill a
//! store with many pods, and parse only the pods to be mutated.
//!
//! # What is left to the store
//!
//! `metadata.uid`, `resourceVersion`, `creationTimestamp` and `generation` are
//! never set: the simulated store assigns them. Owner references carry UIDs
//! that are stable per owner (derived from the seed and the owner's name).
//!
//! # Determinism
//!
//! The output is a function of the seed, the base time and the sequence of
//! calls: two generators built alike and called alike produce byte-identical
//! JSON. This holds for one build: the random streams come from
//! [`SmallRng`], which rand does not promise to keep across its releases.
//!
//! # Names
//!
//! Names are unique per kind and namespace for the generator's lifetime:
//! random-looking suffixes are a bijection of a counter, and StatefulSet
//! ordinals only grow (a StatefulSet pod is never recreated under an old
//! name, unlike in a real cluster).
//!
//! # Modules
//!
//! - `catalogue`: the apps workloads are made of (system components, team
//!   services, stores, jobs and agents).
//! - `plan`: namespaces, nodes and workloads, planned by [`Generator::new`].
//! - `template`: the pod template of a workload, at a level of slimming.
//! - `budget`: the size budgets, and the slimming that fits a template to them.
//! - `render`: a pod from its template and its per-pod draw, as a `Value` or
//!   as JSON text spliced into the serialised template.
//! - `slot`: the per-pod values of a template, which a draw fills in.
//! - `pod_status`: a pod's status, new and as the kubelet changes it.
//! - `managed_fields`: `metadata.managedFields` entries and their FieldsV1 sets.
//! - `configmap`, `widget`: what config maps and widgets hold and who owns it.
//! - `random`, `images`: seeded names, ids and hashes; image references.

mod budget;
mod catalogue;
mod configmap;
mod images;
mod managed_fields;
mod plan;
mod pod_status;
mod random;
mod render;
mod slot;
mod template;
mod widget;

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};

use budget::template_within_budget;
use catalogue::Kind;
use configmap::{CONFIG_FILES, CONFIG_KEYS, CONFIG_REVISION, helm_fields};
use images::bump_tag;
pub(crate) use managed_fields::fields_v1;
use managed_fields::{
    field_set, keyed, managed_entry, managed_entry_mut, remove_path, upsert_managed,
};
use plan::{
    NamespaceInfo, Node, REGIONS, Workload, balance_weights, plan_namespaces, plan_workloads,
};
use pod_status::{complete_job_pod, kubelet_fields, set_readiness};
use random::{hash, mix64, pick_other, random_hex, random_suffix, unique_suffix};
use render::{ContainerDraw, PodDraw, Restart, Spliced, render_pod};
use widget::{WIDGET_API_VERSION, WIDGET_COLORS, WIDGET_SIZES, widget_spec_fields, widget_status};

/// What a [`Generator`] produces, fixed for its lifetime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratorConfig {
    /// Seed of every random choice.
    pub seed: u64,
    /// Number of namespaces (at least 1); see [`Generator::namespace_names`].
    pub namespaces: usize,
    /// Number of nodes pods are scheduled on (at least 1).
    pub nodes: usize,
}

/// Which part of an object a mutation changed, so that the store knows
/// whether `metadata.generation` moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// Only `status` changed (and the status writer's `managedFields` entry).
    /// Generation stays.
    StatusOnly,
    /// Labels, annotations or finalizers changed (and `managedFields`).
    /// Generation stays.
    Metadata,
    /// The desired state changed: `spec` of a pod or widget, `data` of a
    /// config map. Bumps the generation of kinds that have one (config maps
    /// have none).
    Spec,
}

/// Makes realistic Kubernetes objects as JSON values; see the module doc.
#[derive(Debug, Clone)]
pub struct Generator {
    seed: u64,
    /// The random stream of `pod`, `configmap`, `widget` and the mutations.
    /// Workload templates use their own streams, so they do not depend on
    /// the order of calls.
    rng: SmallRng,
    base_time: DateTime<Utc>,
    /// The clock of mutations: starts at `base_time` and moves forward a few
    /// seconds with each mutation.
    now: DateTime<Utc>,
    /// The image registry of the teams' own services.
    registry: String,
    namespaces: Vec<NamespaceInfo>,
    nodes: Vec<Node>,
    workloads: Vec<Workload>,
    /// `cumulative_weight[i]` is the sum of the weights of workloads `..=i`.
    cumulative_weight: Vec<u64>,
    /// Pods made so far; the source of unique pod name suffixes.
    pod_seq: u64,
    /// Config maps and widgets made so far; the source of their suffixes.
    object_seq: u64,
}

impl Generator {
    /// Plans namespaces, nodes and workloads for `config`; times inside the
    /// objects lie before `base_time` (creation) or after it (mutations).
    ///
    /// # Panics
    ///
    /// If `config.namespaces` or `config.nodes` is 0.
    pub fn new(config: GeneratorConfig, base_time: DateTime<Utc>) -> Self {
        assert!(
            config.namespaces > 0,
            "GeneratorConfig.namespaces must be at least 1"
        );
        assert!(config.nodes > 0, "GeneratorConfig.nodes must be at least 1");
        let seed = config.seed;
        let mut rng = SmallRng::seed_from_u64(mix64(seed));
        let region = REGIONS[rng.random_range(0..REGIONS.len())];
        let account = rng.random_range(100_000_000_000u64..999_999_999_999);
        let registry = format!("{account}.dkr.ecr.{region}.amazonaws.com");
        let namespaces = plan_namespaces(config.namespaces);
        let nodes = (0..config.nodes).map(|i| Node::new(i, region)).collect();
        let mut workloads = Vec::new();
        let mut agents = 0;
        for (index, namespace) in namespaces.iter().enumerate() {
            plan_workloads(
                seed,
                &mut rng,
                index,
                namespace,
                config.nodes,
                &mut agents,
                &mut workloads,
            );
        }
        balance_weights(&mut workloads, config.nodes);
        let mut total = 0;
        let cumulative_weight = workloads
            .iter()
            .map(|w| {
                total += w.weight;
                total
            })
            .collect();
        Generator {
            seed,
            rng,
            base_time,
            now: base_time,
            registry,
            namespaces,
            nodes,
            workloads,
            cumulative_weight,
            pod_seq: 0,
            object_seq: 0,
        }
    }

    /// The namespaces, `config.namespaces` of them: `kube-system` first, then
    /// team namespaces such as `payments-prod` mixed with `monitoring`,
    /// `logging` and `ingress-nginx`. The same for every seed.
    pub fn namespace_names(&self) -> Vec<String> {
        self.namespaces.iter().map(|n| n.name.clone()).collect()
    }

    /// The nodes, `config.nodes` of them, named like EKS nodes after their IP
    /// (`ip-172-16-0-10.eu-west-1.compute.internal`).
    pub fn node_names(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.name.clone()).collect()
    }

    /// The Namespace object called `name` (any name, not only one of
    /// [`Self::namespace_names`]); depends only on the seed, the base time
    /// and the name.
    pub fn namespace(&self, name: &str) -> Value {
        let h = hash(self.seed, &["namespace", name]);
        let created =
            self.base_time - TimeDelta::seconds(86_400 * 30 + (h % (86_400 * 300)) as i64);
        let mut labels = Map::new();
        labels.insert("kubernetes.io/metadata.name".into(), name.into());
        if let Some(info) = self.namespaces.iter().find(|n| n.name == name)
            && let Some(team) = info.team
        {
            labels.insert("team".into(), team.into());
            labels.insert("environment".into(), info.env.into());
            labels.insert(
                "pod-security.kubernetes.io/enforce".into(),
                "baseline".into(),
            );
        }
        let metadata = json!({ "labels": labels });
        json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": name,
                "labels": labels,
                "managedFields": [managed_entry(
                    "kubectl-create",
                    "v1",
                    ts(created).into(),
                    None,
                    json!({ "f:metadata": fields_v1(as_map(&metadata)) }),
                )],
            },
            "spec": { "finalizers": ["kubernetes"] },
            "status": { "phase": "Active" },
        })
    }

    /// The next pod: a workload picked in proportion to its replicas (so
    /// namespaces are skewed as their workloads are), a node (DaemonSet pods
    /// go round the nodes in order, other pods land anywhere), a unique name
    /// and a status of a running (or, for some Job pods, succeeded) pod.
    ///
    /// See the module doc on the cost of a `Value`; [`Self::pod_json`] gives
    /// the same pod as text, ten times faster.
    pub fn pod(&mut self) -> Value {
        let draw = self.draw_pod();
        let w = &self.workloads[draw.workload];
        let t = w.template.as_deref().expect("drawn pods have a template");
        let namespace = &self.namespaces[w.namespace].name;
        render_pod(t, w.kind, namespace, draw.succeeded, &mut |slot| {
            draw.value(slot)
        })
    }

    /// The next pod as JSON text: byte for byte what
    /// `serde_json::to_string(&g.pod())` would give on a generator in the
    /// same state, and it moves the generator on alike. Fast (a few
    /// microseconds): the per-pod values are spliced into the workload's
    /// pre-serialised template.
    pub fn pod_json(&mut self) -> String {
        let draw = self.draw_pod();
        let w = &mut self.workloads[draw.workload];
        let namespace = &self.namespaces[w.namespace].name;
        let t = w.template.as_deref().expect("drawn pods have a template");
        let variant = usize::from(draw.succeeded);
        if w.spliced[variant].is_none() {
            let pattern = render_pod(t, w.kind, namespace, draw.succeeded, &mut |slot| {
                Value::String(slot.sentinel())
            });
            w.spliced[variant] = Some(Spliced::new(&pattern));
        }
        w.spliced[variant]
            .as_ref()
            .expect("spliced above")
            .fill(&draw)
    }

    /// Everything random about the next pod.
    fn draw_pod(&mut self) -> PodDraw {
        let total = *self
            .cumulative_weight
            .last()
            .expect("at least one workload");
        let pick = self.rng.random_range(0..total);
        let wi = self.cumulative_weight.partition_point(|&c| c <= pick);
        if self.workloads[wi].template.is_none() {
            let t = template_within_budget(self, wi);
            self.workloads[wi].template = Some(Box::new(t));
        }
        let seq = self.pod_seq;
        self.pod_seq += 1;
        let w = &mut self.workloads[wi];
        let ordinal = w.next_ordinal;
        w.next_ordinal += 1;
        let w = &self.workloads[wi];
        let t = w.template.as_deref().expect("template built above");
        let rng = &mut self.rng;

        let node_index = match w.kind {
            // One pod per node in turn, from a node of the DaemonSet's own.
            Kind::DaemonSet => (w.seed.wrapping_add(ordinal) % self.nodes.len() as u64) as usize,
            _ => rng.random_range(0..self.nodes.len()),
        };
        let name = match w.kind {
            Kind::StatefulSet => format!("{}-{ordinal}", w.owner),
            Kind::ReplicaSet | Kind::DaemonSet | Kind::Job => {
                format!("{}-{}", w.owner, unique_suffix(self.seed, 0, seq))
            }
        };
        let node = &mut self.nodes[node_index];
        let pod_ip = if t.host_network {
            node.ip.clone()
        } else {
            node.next_pod_ip()
        };
        // Skewed towards young pods, as in a cluster that rolls out daily.
        let age = 120 + (rng.random::<f64>().powi(3) * 30.0 * 86_400.0) as i64;
        let created = self.base_time - TimeDelta::seconds(age);
        let succeeded = w.kind == Kind::Job && rng.random_bool(0.5);
        let access = format!("kube-api-access-{}", random_suffix(rng, 5));

        let scheduled = created + TimeDelta::seconds(rng.random_range(0..2));
        let initialized = scheduled + TimeDelta::seconds(1);
        let sandbox = initialized + TimeDelta::seconds(rng.random_range(1..4));
        let mut last = sandbox;
        let containers = t
            .containers
            .iter()
            .map(|_| {
                let started = sandbox + TimeDelta::seconds(rng.random_range(0..6));
                last = last.max(started);
                let id = random_hex(rng, 64);
                if succeeded {
                    let finished = started + TimeDelta::seconds(rng.random_range(5..600));
                    last = last.max(finished);
                    return ContainerDraw {
                        id,
                        started,
                        finished: Some(finished),
                        restart: None,
                    };
                }
                if !rng.random_bool(0.1) {
                    return ContainerDraw {
                        id,
                        started,
                        finished: None,
                        restart: None,
                    };
                }
                let span = (self.base_time - started).num_seconds().clamp(2, 86_400);
                let at = started + TimeDelta::seconds(rng.random_range(1..span));
                last = last.max(at);
                let (reason, code) = if rng.random_bool(0.5) {
                    ("OOMKilled", 137)
                } else {
                    ("Error", 1)
                };
                let restart = Restart {
                    count: rng.random_range(1..6),
                    previous_id: random_hex(rng, 64),
                    reason,
                    code,
                    at,
                };
                ContainerDraw {
                    id,
                    started,
                    finished: None,
                    restart: Some(restart),
                }
            })
            .collect();
        let ready = if succeeded {
            last
        } else {
            last + TimeDelta::seconds(t.ready_delay)
        };
        PodDraw {
            workload: wi,
            name,
            ordinal,
            node_name: node.name.clone(),
            host_ip: node.ip.clone(),
            pod_ip,
            access,
            created,
            scheduled,
            initialized,
            ready,
            succeeded,
            containers,
        }
    }

    /// A ConfigMap in `namespace` for one of its workloads: a few plain keys
    /// and a multi-line configuration file, installed by Helm; unique name.
    pub fn configmap(&mut self, namespace: &str) -> Value {
        let seq = self.object_seq;
        self.object_seq += 1;
        let app = self.app_in(namespace);
        let rng = &mut self.rng;
        let name = format!("{app}-config-{}", unique_suffix(self.seed, 1, seq));
        let mut data = Map::new();
        let keys = rng.random_range(2..=5);
        for (key, make) in CONFIG_KEYS.iter().take(keys) {
            data.insert((*key).into(), make(rng, &app).into());
        }
        let file = CONFIG_FILES[rng.random_range(0..CONFIG_FILES.len())];
        data.insert(file.0.into(), (file.1)(rng, &app).into());
        let chart = format!(
            "{app}-{}.{}.{}",
            rng.random_range(0..4),
            rng.random_range(0..30),
            rng.random_range(0..10)
        );
        let labels = json!({
            "app.kubernetes.io/instance": app,
            "app.kubernetes.io/managed-by": "Helm",
            "app.kubernetes.io/name": app,
            "helm.sh/chart": chart,
        });
        let annotations = json!({
            "meta.helm.sh/release-name": app,
            "meta.helm.sh/release-namespace": namespace,
        });
        let created = self.base_time - TimeDelta::seconds(rng.random_range(3_600..90 * 86_400));
        let mut cm = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": labels,
                "annotations": annotations,
            },
            "data": data,
        });
        cm["metadata"]["managedFields"] = json!([managed_entry(
            "helm",
            "v1",
            ts(created).into(),
            None,
            helm_fields(&cm)
        )]);
        cm
    }

    /// A Widget (`example.com/v1`, resource `widgets`) in `namespace`, applied with kubectl
    /// and reconciled by its controller (status with `observedGeneration` 1,
    /// the generation the store gives it on create); unique name.
    pub fn widget(&mut self, namespace: &str) -> Value {
        let seq = self.object_seq;
        self.object_seq += 1;
        let app = self.app_in(namespace);
        let rng = &mut self.rng;
        let name = format!("{app}-{}", unique_suffix(self.seed, 2, seq));
        let replicas = rng.random_range(1..=5);
        let spec = json!({
            "color": WIDGET_COLORS[rng.random_range(0..WIDGET_COLORS.len())],
            "replicas": replicas,
            "selector": { "matchLabels": { "app.kubernetes.io/name": app, "widgets.example.com/name": name } },
            "size": WIDGET_SIZES[rng.random_range(0..WIDGET_SIZES.len())],
        });
        let labels = json!({ "app.kubernetes.io/name": app, "app.kubernetes.io/part-of": app, "tier": "backend" });
        let created = self.base_time - TimeDelta::seconds(rng.random_range(600..60 * 86_400));
        let reconciled = created + TimeDelta::seconds(rng.random_range(1..20));
        let mut widget = json!({
            "apiVersion": WIDGET_API_VERSION,
            "kind": "Widget",
            "metadata": { "name": name, "namespace": namespace, "labels": labels },
            "spec": spec,
            "status": widget_status(replicas, replicas, 1, reconciled),
        });
        let applied = json!({
            "apiVersion": WIDGET_API_VERSION,
            "kind": "Widget",
            "metadata": { "labels": labels, "name": name, "namespace": namespace },
            "spec": widget["spec"],
        });
        widget["metadata"]["annotations"] = json!({
            "kubectl.kubernetes.io/last-applied-configuration": format!("{applied}\n"),
        });
        let fields = widget_spec_fields(&widget);
        let status_fields = json!({ "f:status": field_set("status", &widget["status"]) });
        widget["metadata"]["managedFields"] = json!([
            managed_entry(
                "kubectl-client-side-apply",
                WIDGET_API_VERSION,
                ts(created).into(),
                None,
                fields
            ),
            managed_entry(
                "widget-controller",
                WIDGET_API_VERSION,
                ts(reconciled).into(),
                Some("status"),
                status_fields
            ),
        ]);
        widget
    }

    /// Changes `pod` as a cluster would: most often its status (readiness
    /// flips, container restarts, a Job pod completing), sometimes its labels,
    /// annotations or finalizers, rarely its spec (a container image bumped,
    /// the one common in-place pod spec update). Moves the managedFields
    /// entry of the writer. Says which part changed.
    ///
    /// # Panics
    ///
    /// If `pod` does not have the shape [`Self::pod`] gives.
    pub fn mutate_pod(&mut self, pod: &mut Value) -> Mutation {
        self.tick();
        let now = self.now;
        let roll = self.rng.random_range(0..100);
        let phase = pod["status"]["phase"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let job_finalizer = pod["metadata"]["finalizers"].is_array();
        if roll < 80 && phase == "Running" {
            self.mutate_pod_status(pod, now);
            return Mutation::StatusOnly;
        }
        if roll < 97 || phase != "Running" {
            if phase == "Succeeded" && job_finalizer {
                // The Job controller has counted the pod: it drops its finalizer.
                as_map_mut(&mut pod["metadata"]).remove("finalizers");
                let kcm = managed_entry_mut(pod, "kube-controller-manager", None);
                remove_path(&mut kcm["fieldsV1"], &["f:metadata", "f:finalizers"]);
                kcm["time"] = ts(now).into();
                return Mutation::Metadata;
            }
            self.mutate_pod_metadata(pod, now);
            return Mutation::Metadata;
        }
        // `kubectl set image`: the image moves to the kubectl-set manager.
        let containers = pod["spec"]["containers"]
            .as_array_mut()
            .expect("containers");
        let i = self.rng.random_range(0..containers.len());
        let container = &mut containers[i];
        let image = bump_tag(container["image"].as_str().expect("image"));
        container["image"] = image.into();
        let cname = container["name"].as_str().expect("name").to_owned();
        let key = keyed("name", &cname);
        let kcm = managed_entry_mut(pod, "kube-controller-manager", None);
        remove_path(
            &mut kcm["fieldsV1"],
            &["f:spec", "f:containers", &key, "f:image"],
        );
        let fields = json!({ "f:spec": { "f:containers": { key: { ".": {}, "f:image": {}, "f:name": {} } } } });
        upsert_managed(pod, "kubectl-set", "v1", now, None, fields);
        Mutation::Spec
    }

    /// Changes `cm`: most often a value in `data` (re-rendered by a Helm
    /// upgrade), else an annotation. Says which part changed.
    ///
    /// # Panics
    ///
    /// If `cm` does not have the shape [`Self::configmap`] gives.
    pub fn mutate_configmap(&mut self, cm: &mut Value) -> Mutation {
        self.tick();
        let now = self.now;
        let rng = &mut self.rng;
        let app = cm["metadata"]["labels"]["app.kubernetes.io/name"]
            .as_str()
            .unwrap_or("app")
            .to_owned();
        let mutation = if rng.random_bool(0.7) {
            // A Helm upgrade re-renders a value; keys whose value comes out
            // the same are tried again, and at worst a reload stamp changes.
            let data = as_map_mut(&mut cm["data"]);
            let keys: Vec<String> = data.keys().cloned().collect();
            let changed = (0..8).any(|_| {
                let key = &keys[rng.random_range(0..keys.len())];
                let Some((_, render)) = CONFIG_KEYS
                    .iter()
                    .chain(CONFIG_FILES)
                    .find(|(k, _)| k == key)
                else {
                    return false;
                };
                let value = Value::from(render(rng, &app));
                data.insert(key.clone(), value)
                    .is_some_and(|old| old != data[key])
            });
            if !changed {
                let stamp = data
                    .get("RELOADED_AT")
                    .and_then(Value::as_str)
                    .map_or(0, |s| s.len());
                data.insert("RELOADED_AT".into(), format!("{}-{stamp}", ts(now)).into());
            }
            Mutation::Spec
        } else {
            let annotations = as_map_mut(&mut cm["metadata"]["annotations"]);
            let revision = annotations
                .get(CONFIG_REVISION)
                .and_then(Value::as_str)
                .and_then(|r| r.parse::<u64>().ok())
                .unwrap_or(1);
            annotations.insert(CONFIG_REVISION.into(), (revision + 1).to_string().into());
            Mutation::Metadata
        };
        let fields = helm_fields(cm);
        let helm = managed_entry_mut(cm, "helm", None);
        helm["fieldsV1"] = fields;
        helm["time"] = ts(now).into();
        mutation
    }

    /// Changes `widget`: its status (ready replicas move, the Ready condition
    /// flips; `observedGeneration` catches up with `metadata.generation` when
    /// the store set one), its spec (replicas, color or size, re-applied with
    /// kubectl) or a label. Says which part changed.
    ///
    /// # Panics
    ///
    /// If `widget` does not have the shape [`Self::widget`] gives.
    pub fn mutate_widget(&mut self, widget: &mut Value) -> Mutation {
        self.tick();
        let now = self.now;
        let rng = &mut self.rng;
        let roll = rng.random_range(0..100);
        if roll < 50 {
            let replicas = widget["spec"]["replicas"].as_i64().unwrap_or(1).max(1);
            let was = widget["status"]["readyReplicas"].as_i64().unwrap_or(0);
            // Another count of ready replicas (there are at least two to choose from).
            let ready = (was + rng.random_range(1..=replicas)) % (replicas + 1);
            let generation = widget["metadata"]["generation"]
                .as_i64()
                .or_else(|| widget["status"]["observedGeneration"].as_i64())
                .unwrap_or(1);
            widget["status"] = widget_status(replicas, ready, generation, now);
            let fields = json!({ "f:status": field_set("status", &widget["status"]) });
            upsert_managed(
                widget,
                "widget-controller",
                WIDGET_API_VERSION,
                now,
                Some("status"),
                fields,
            );
            return Mutation::StatusOnly;
        }
        if roll < 80 {
            let spec = &mut widget["spec"];
            match rng.random_range(0..3) {
                0 => {
                    let was = spec["replicas"].as_i64().unwrap_or(1);
                    spec["replicas"] = (1 + (was + rng.random_range(0..7)) % 8).into();
                }
                1 => spec["color"] = pick_other(rng, WIDGET_COLORS, &spec["color"]).into(),
                _ => spec["size"] = pick_other(rng, WIDGET_SIZES, &spec["size"]).into(),
            }
            let meta = &widget["metadata"];
            let applied = json!({
                "apiVersion": WIDGET_API_VERSION,
                "kind": "Widget",
                "metadata": { "labels": meta["labels"], "name": meta["name"], "namespace": meta["namespace"] },
                "spec": widget["spec"],
            });
            widget["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
                format!("{applied}\n").into();
            let fields = widget_spec_fields(widget);
            upsert_managed(
                widget,
                "kubectl-client-side-apply",
                WIDGET_API_VERSION,
                now,
                None,
                fields,
            );
            return Mutation::Spec;
        }
        let stage = ["canary", "stable", "deprecated"][rng.random_range(0..3)];
        widget["metadata"]["labels"]["widgets.example.com/stage"] = stage.into();
        let fields = json!({ "f:metadata": { "f:labels": { "f:widgets.example.com/stage": {} } } });
        upsert_managed(
            widget,
            "kubectl-label",
            WIDGET_API_VERSION,
            now,
            None,
            fields,
        );
        Mutation::Metadata
    }

    /// Advances the mutation clock by 0–3 s.
    fn tick(&mut self) {
        self.now += TimeDelta::milliseconds(self.rng.random_range(0..3_000));
    }

    /// The name of a random workload of `namespace`, or a generic one.
    fn app_in(&mut self, namespace: &str) -> String {
        let index = self.namespaces.iter().position(|n| n.name == namespace);
        let candidates: Vec<&Workload> = self
            .workloads
            .iter()
            .filter(|w| Some(w.namespace) == index)
            .collect();
        if candidates.is_empty() {
            return ["app", "service", "backend"][self.rng.random_range(0..3)].to_owned();
        }
        candidates[self.rng.random_range(0..candidates.len())]
            .name
            .clone()
    }

    /// A readiness flip, a container restart or a Job pod completing.
    fn mutate_pod_status(&mut self, pod: &mut Value, now: DateTime<Utc>) {
        let rng = &mut self.rng;
        let is_job = pod["metadata"]["labels"].get("job-name").is_some();
        let status = &mut pod["status"];
        let containers = status["containerStatuses"].as_array().map_or(0, Vec::len);
        let roll = rng.random_range(0..100);
        if is_job && roll < 30 {
            complete_job_pod(status, now);
        } else if roll < 60 {
            let i = rng.random_range(0..containers);
            let c = &mut status["containerStatuses"][i];
            let restarts = c["restartCount"].as_i64().unwrap_or(0) + 1;
            let (reason, code) = [
                ("Error", 1),
                ("OOMKilled", 137),
                ("Error", 2),
                ("Completed", 0),
            ][rng.random_range(0..4)];
            let old_id = c["containerID"].clone();
            let started = c["state"]["running"]["startedAt"].clone();
            c["lastState"] = json!({ "terminated": {
                "containerID": old_id, "exitCode": code, "finishedAt": ts(now),
                "reason": reason, "startedAt": started,
            }});
            c["restartCount"] = restarts.into();
            c["containerID"] = format!("containerd://{}", random_hex(rng, 64)).into();
            c["state"] = json!({ "running": { "startedAt": ts(now + TimeDelta::seconds(1)) } });
            c["started"] = true.into();
            set_readiness(status, now, Some(i));
        } else {
            let ready = status["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
                .is_some_and(|c| c["status"] == "True");
            let unready = ready.then(|| rng.random_range(0..containers));
            set_readiness(status, now, unready);
        }
        let fields = kubelet_fields(&pod["status"]);
        let kubelet = managed_entry_mut(pod, "kubelet", Some("status"));
        kubelet["fieldsV1"] = fields;
        kubelet["time"] = ts(now).into();
    }

    /// A label or annotation set by a tool, with its own managedFields entry.
    fn mutate_pod_metadata(&mut self, pod: &mut Value, now: DateTime<Utc>) {
        let rng = &mut self.rng;
        let meta = as_map_mut(&mut pod["metadata"]);
        let (manager, field, key) = [
            ("rollout-operator", "labels", "release.example.com/track"),
            (
                "chaos-controller",
                "annotations",
                "chaos.example.com/experiments",
            ),
            (
                "kubectl-annotate",
                "annotations",
                "cluster-autoscaler.kubernetes.io/safe-to-evict",
            ),
        ][rng.random_range(0..3)];
        let map = as_map_mut(meta.entry(field).or_insert_with(|| json!({})));
        let was = map.get(key).cloned().unwrap_or(Value::Null);
        // Always a new value.
        let value = match key {
            "release.example.com/track" => {
                pick_other(rng, &["stable", "canary", "baseline"], &was).to_owned()
            }
            "chaos.example.com/experiments" => {
                let n = was
                    .as_str()
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0);
                (n + 1).to_string()
            }
            _ => if was == "true" { "false" } else { "true" }.to_owned(),
        };
        map.insert(key.into(), value.into());
        let fields = json!({ "f:metadata": { format!("f:{field}"): { format!("f:{key}"): {} } } });
        upsert_managed(pod, manager, "v1", now, None, fields);
    }
}

// Shorthands the submodules share.

/// A Kubernetes `Time`: RFC 3339 in UTC with whole seconds.
fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn as_map(v: &Value) -> &Map<String, Value> {
    v.as_object().expect("a JSON object")
}

fn as_map_mut(v: &mut Value) -> &mut Map<String, Value> {
    v.as_object_mut().expect("a JSON object")
}

#[cfg(test)]
mod tests;
