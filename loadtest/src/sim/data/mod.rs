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

use std::fmt::Write as _;

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};

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
#[derive(Debug)]
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
        let t = w
            .template
            .as_deref_mut()
            .expect("drawn pods have a template");
        let variant = usize::from(draw.succeeded);
        if t.spliced[variant].is_none() {
            let pattern = render_pod(t, w.kind, namespace, draw.succeeded, &mut |slot| {
                Value::String(slot.sentinel())
            });
            t.spliced[variant] = Some(Spliced::new(&pattern));
        }
        t.spliced[variant]
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

/// The annotation the config map mutations count up.
const CONFIG_REVISION: &str = "config.example.com/revision";

/// `apiVersion` of the Widget custom resource.
const WIDGET_API_VERSION: &str = "example.com/v1";
const WIDGET_COLORS: &[&str] = &["red", "green", "blue", "amber", "violet", "teal", "black"];
const WIDGET_SIZES: &[&str] = &["small", "medium", "large", "xlarge"];

fn widget_status(replicas: i64, ready: i64, generation: i64, at: DateTime<Utc>) -> Value {
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
fn widget_spec_fields(widget: &Value) -> Value {
    let meta = json!({
        "annotations": { "kubectl.kubernetes.io/last-applied-configuration": "" },
        "labels": widget["metadata"]["labels"],
    });
    json!({
        "f:metadata": fields_v1(as_map(&meta)),
        "f:spec": field_set("spec", &widget["spec"]),
    })
}

/// What Helm owns of a config map: its data, labels and annotations.
fn helm_fields(cm: &Value) -> Value {
    let meta = json!({
        "annotations": cm["metadata"]["annotations"],
        "labels": cm["metadata"]["labels"],
    });
    json!({
        "f:data": field_set("data", &cm["data"]),
        "f:metadata": fields_v1(as_map(&meta)),
    })
}

// ---------------------------------------------------------------------------
// Namespaces, nodes and workloads.

const REGIONS: &[&str] = &[
    "us-east-1",
    "us-west-2",
    "eu-west-1",
    "eu-central-1",
    "ap-southeast-1",
];

const TEAMS: &[&str] = &[
    "payments",
    "checkout",
    "catalog",
    "search",
    "identity",
    "billing",
    "notifications",
    "orders",
    "inventory",
    "shipping",
    "analytics",
    "recommendations",
    "fraud",
    "messaging",
    "media",
    "pricing",
    "loyalty",
    "reviews",
    "support",
    "ledger",
];
const ENVIRONMENTS: &[&str] = &["prod", "staging", "dev"];

#[derive(Debug)]
struct NamespaceInfo {
    name: String,
    /// The owning team; `None` for the system namespaces.
    team: Option<&'static str>,
    env: &'static str,
}

/// `kube-system` first, the other system namespaces at positions 2, 5 and 8,
/// team namespaces (`{team}-{env}`, then `{team}-{env}-{n}`) elsewhere.
fn plan_namespaces(count: usize) -> Vec<NamespaceInfo> {
    let system = ["kube-system", "monitoring", "logging", "ingress-nginx"];
    let mut system_used = 0;
    let mut team_seq = 0;
    (0..count)
        .map(|i| {
            if [0, 2, 5, 8].contains(&i) && system_used < system.len() {
                system_used += 1;
                return NamespaceInfo {
                    name: system[system_used - 1].into(),
                    team: None,
                    env: "prod",
                };
            }
            let combos = TEAMS.len() * ENVIRONMENTS.len();
            let (round, k) = (team_seq / combos, team_seq % combos);
            team_seq += 1;
            let team = TEAMS[k % TEAMS.len()];
            let env = ENVIRONMENTS[k / TEAMS.len()];
            let name = if round == 0 {
                format!("{team}-{env}")
            } else {
                format!("{team}-{env}-{}", round + 1)
            };
            NamespaceInfo {
                name,
                team: Some(team),
                env,
            }
        })
        .collect()
}

#[derive(Debug)]
struct Node {
    name: String,
    ip: String,
    /// First two octets of the node's pod /24 (`10.x.y.0/24`).
    pod_net: (u8, u8),
    /// Pod IPs handed out on this node so far.
    pods: u32,
}

impl Node {
    fn new(index: usize, region: &str) -> Self {
        let n = index + 10;
        let ip = format!("172.{}.{}.{}", 16 + (n >> 16) % 16, (n >> 8) & 255, n & 255);
        let domain = if region == "us-east-1" {
            "ec2.internal".to_owned()
        } else {
            format!("{region}.compute.internal")
        };
        let name = format!("ip-{}.{domain}", ip.replace('.', "-"));
        let pod_net = (128 + ((index >> 8) & 127) as u8, (index & 255) as u8);
        Node {
            name,
            ip,
            pod_net,
            pods: 0,
        }
    }

    /// The next pod IP of this node's /24, cycling through `.2`–`.254`.
    fn next_pod_ip(&mut self) -> String {
        let host = 2 + self.pods % 253;
        self.pods += 1;
        format!("10.{}.{}.{host}", self.pod_net.0, self.pod_net.1)
    }
}

/// The kind of a pod's controlling owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    ReplicaSet,
    DaemonSet,
    StatefulSet,
    Job,
}

impl Kind {
    fn api_version(self) -> &'static str {
        match self {
            Kind::Job => "batch/v1",
            _ => "apps/v1",
        }
    }
    fn name(self) -> &'static str {
        match self {
            Kind::ReplicaSet => "ReplicaSet",
            Kind::DaemonSet => "DaemonSet",
            Kind::StatefulSet => "StatefulSet",
            Kind::Job => "Job",
        }
    }
}

/// A set of pods with one owner and one template.
#[derive(Debug)]
struct Workload {
    kind: Kind,
    app: &'static AppSpec,
    namespace: usize,
    /// The app's name: the Deployment, StatefulSet, DaemonSet or CronJob.
    name: String,
    /// The owner's name: `{deployment}-{hash}` for a ReplicaSet,
    /// `{cronjob}-{scheduled minute}` for a Job, else `name`.
    owner: String,
    owner_uid: String,
    /// `pod-template-hash` or `controller-revision-hash`.
    revision: String,
    /// Pods of this workload relative to others: its replicas.
    weight: u64,
    /// Seed of the template's own random stream.
    seed: u64,
    /// Pods made so far: StatefulSet ordinals, DaemonSet node cursor.
    next_ordinal: u64,
    /// Built on first use.
    template: Option<Box<PodTemplate>>,
}

/// Team namespaces with a DaemonSet of their own, at most.
const MAX_TEAM_AGENTS: usize = 3;

/// Pods per node that are not DaemonSet pods in a typical cluster (about 30
/// pods per node of which 5–8 belong to DaemonSets).
const OTHER_PODS_PER_NODE: u64 = 24;

/// The workloads of namespace `namespace` (`agents`: team DaemonSets so far).
fn plan_workloads(
    seed: u64,
    rng: &mut SmallRng,
    namespace: usize,
    info: &NamespaceInfo,
    nodes: usize,
    agents: &mut usize,
    out: &mut Vec<Workload>,
) {
    let apps: Vec<&'static AppSpec> = match (info.team, info.name.as_str()) {
        (None, "kube-system") => KUBE_SYSTEM.iter().collect(),
        (None, "monitoring") => MONITORING.iter().collect(),
        (None, "logging") => LOGGING.iter().collect(),
        (None, _) => INGRESS.iter().collect(),
        (Some(_), _) => {
            let mut apps: Vec<&AppSpec> = Vec::new();
            let services = rng.random_range(3..=7);
            apps.extend(pick_distinct(rng, TEAM_SERVICES, services));
            let stores = rng.random_range(0..=2);
            apps.extend(pick_distinct(rng, TEAM_STORES, stores));
            let jobs = rng.random_range(1..=2);
            apps.extend(pick_distinct(rng, TEAM_JOBS, jobs));
            if rng.random_bool(0.1) && *agents < MAX_TEAM_AGENTS {
                *agents += 1;
                apps.push(&TEAM_AGENT);
            }
            apps
        }
    };
    for app in apps {
        let name = match info.team {
            Some(team) if !app.shared_name => format!("{team}-{}", app.name),
            _ => app.name.to_owned(),
        };
        let hash_seed = hash(seed, &[&info.name, &name]);
        let (owner, revision) = match app.kind {
            Kind::ReplicaSet => {
                let h = safe_encode(hash_seed, 10);
                (format!("{name}-{h}"), h)
            }
            Kind::DaemonSet => (name.clone(), safe_encode(hash_seed, 10)),
            Kind::StatefulSet => (
                name.clone(),
                format!("{name}-{}", safe_encode(hash_seed, 10)),
            ),
            Kind::Job if app.cron => {
                // CronJob jobs are named after their scheduled minute since the epoch.
                (
                    format!("{name}-{}", 28_400_000 + hash_seed % 500_000),
                    String::new(),
                )
            }
            Kind::Job => (format!("{name}-{}", 1 + hash_seed % 90), String::new()),
        };
        let owner_uid = uuid(seed, &[&info.name, app.kind.name(), &owner]);
        let weight = match app.kind {
            Kind::DaemonSet => nodes as u64,
            _ => {
                let base = u64::from(app.replicas);
                let scale = if info.env == "prod" {
                    rng.random_range(1..=4)
                } else {
                    1
                };
                base * scale
            }
        };
        out.push(Workload {
            kind: app.kind,
            app,
            namespace,
            name,
            owner,
            owner_uid,
            revision,
            weight,
            seed: hash_seed,
            next_ordinal: 0,
            template: None,
        });
    }
}

/// Scales the weights of the workloads that are not DaemonSets so that, with
/// one pod per node per DaemonSet, the mix is that of a cluster with
/// [`OTHER_PODS_PER_NODE`] other pods per node. Only scales up: many
/// namespaces on few nodes keep their replicas.
fn balance_weights(workloads: &mut [Workload], nodes: usize) {
    let others: u64 = workloads
        .iter()
        .filter(|w| w.kind != Kind::DaemonSet)
        .map(|w| w.weight)
        .sum();
    let scale = (nodes as u64 * OTHER_PODS_PER_NODE)
        .div_ceil(others.max(1))
        .max(1);
    for w in workloads.iter_mut().filter(|w| w.kind != Kind::DaemonSet) {
        w.weight *= scale;
    }
}

/// One of `options` other than `current`.
fn pick_other<'a>(rng: &mut SmallRng, options: &[&'a str], current: &Value) -> &'a str {
    let others: Vec<&str> = options.iter().copied().filter(|o| current != o).collect();
    others[rng.random_range(0..others.len())]
}

/// `n` distinct items of `items`, in their order.
fn pick_distinct<T>(rng: &mut SmallRng, items: &'static [T], n: usize) -> Vec<&'static T> {
    let mut indexes: Vec<usize> = (0..items.len()).collect();
    for i in 0..n.min(items.len()) {
        let j = rng.random_range(i..items.len());
        indexes.swap(i, j);
    }
    indexes.truncate(n.min(items.len()));
    indexes.sort_unstable();
    indexes.into_iter().map(|i| &items[i]).collect()
}

// ---------------------------------------------------------------------------
// The catalogue of apps.

/// How the kubelet checks a container.
#[derive(Clone, Copy, Debug)]
enum Health {
    /// `httpGet` on the first port, at this path.
    Http(&'static str),
    /// `tcpSocket` on the first port.
    Tcp,
    /// `exec` of this command.
    Exec(&'static [&'static str]),
    None,
}

#[derive(Debug)]
struct PortSpec {
    name: &'static str,
    port: i32,
    protocol: &'static str,
}

const fn tcp(name: &'static str, port: i32) -> PortSpec {
    PortSpec {
        name,
        port,
        protocol: "TCP",
    }
}

/// An environment variable; `$APP`, `$NS` and `$ENV` in values are replaced.
#[derive(Debug)]
enum Env {
    Value(&'static str, &'static str),
    Field(&'static str, &'static str),
    /// Name, secret name, key.
    Secret(&'static str, &'static str, &'static str),
    /// Name, config map name, key.
    ConfigMap(&'static str, &'static str, &'static str),
    /// Name, resource (`limits.cpu`).
    Resource(&'static str, &'static str),
}

#[derive(Debug)]
enum Source {
    ConfigMap(&'static str),
    Secret(&'static str),
    EmptyDir,
    HostPath(&'static str, &'static str),
    /// The StatefulSet's `data` volume claim.
    Claim,
}

/// A volume of the pod, mounted in the main container at `mount`.
#[derive(Debug)]
struct VolumeSpec {
    name: &'static str,
    source: Source,
    mount: &'static str,
    read_only: bool,
}

#[derive(Debug)]
struct ContainerSpec {
    /// `""`: the app's name.
    name: &'static str,
    /// `""`: the team's own image, `{registry}/{team}/{app}:{version}`.
    image: &'static str,
    ports: &'static [PortSpec],
    health: Health,
    args: &'static [&'static str],
    env: &'static [Env],
    /// Volumes (by name) mounted in this container; main containers mount all.
    mounts: &'static [&'static str],
}

#[derive(Debug)]
struct AppSpec {
    name: &'static str,
    kind: Kind,
    /// Replicas, scaled up in production namespaces.
    replicas: u32,
    /// The name is not prefixed with the team (databases, agents).
    shared_name: bool,
    /// A Job made by a CronJob.
    cron: bool,
    host_network: bool,
    /// Runs with `system-node-critical` or `system-cluster-critical`.
    critical: bool,
    containers: &'static [ContainerSpec],
    /// Sidecars a team may add (none, one or two of them).
    optional_sidecars: &'static [ContainerSpec],
    volumes: &'static [VolumeSpec],
    /// Volumes of which a team picks some.
    optional_volumes: &'static [VolumeSpec],
}

const APP: AppSpec = AppSpec {
    name: "",
    kind: Kind::ReplicaSet,
    replicas: 2,
    shared_name: false,
    cron: false,
    host_network: false,
    critical: false,
    containers: &[],
    optional_sidecars: &[],
    volumes: &[],
    optional_volumes: &[],
};

const CONTAINER: ContainerSpec = ContainerSpec {
    name: "",
    image: "",
    ports: &[],
    health: Health::None,
    args: &[],
    env: &[],
    mounts: &[],
};

const COMMON_ENV: &[Env] = &[
    Env::Value("ENVIRONMENT", "$ENV"),
    Env::Value("LOG_LEVEL", "info"),
    Env::Value("LOG_FORMAT", "json"),
    Env::Field("POD_NAME", "metadata.name"),
    Env::Field("POD_NAMESPACE", "metadata.namespace"),
    Env::Field("POD_IP", "status.podIP"),
    Env::Field("NODE_NAME", "spec.nodeName"),
    Env::Secret("DATABASE_URL", "$APP-db", "url"),
    Env::Secret("API_TOKEN", "$APP-credentials", "token"),
    Env::ConfigMap("FEATURE_FLAGS", "$APP-features", "flags"),
    Env::Value(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "http://otel-collector.monitoring.svc.cluster.local:4317",
    ),
    Env::Value("OTEL_SERVICE_NAME", "$APP"),
    Env::Resource("GOMAXPROCS", "limits.cpu"),
    Env::Value("REDIS_ADDR", "redis-master.$NS.svc.cluster.local:6379"),
];

const TEAM_VOLUMES: &[VolumeSpec] = &[
    VolumeSpec {
        name: "config",
        source: Source::ConfigMap("$APP-config"),
        mount: "/etc/$APP",
        read_only: true,
    },
    VolumeSpec {
        name: "tls",
        source: Source::Secret("$APP-tls"),
        mount: "/etc/tls",
        read_only: true,
    },
    VolumeSpec {
        name: "tmp",
        source: Source::EmptyDir,
        mount: "/tmp",
        read_only: false,
    },
];

const SIDECARS: &[ContainerSpec] = &[
    ContainerSpec {
        name: "log-shipper",
        image: "cr.fluentbit.io/fluent/fluent-bit:2.2.2",
        ports: &[tcp("http", 2020)],
        mounts: &["tmp"],
        ..CONTAINER
    },
    ContainerSpec {
        name: "config-reloader",
        image: "ghcr.io/jimmidyson/configmap-reload:v0.12.0",
        args: &[
            "--volume-dir=/etc/config",
            "--webhook-url=http://127.0.0.1:8080/-/reload",
        ],
        mounts: &["config"],
        ..CONTAINER
    },
    ContainerSpec {
        name: "cloud-sql-proxy",
        image: "gcr.io/cloud-sql-connectors/cloud-sql-proxy:2.8.2",
        args: &[
            "--structured-logs",
            "--port=5432",
            "prod-db:europe-west1:main",
        ],
        ..CONTAINER
    },
];

/// A team's service: one container of its own image, optional sidecars and volumes.
macro_rules! service {
    ($name:expr, $ports:expr, $health:expr, $replicas:expr) => {
        AppSpec {
            name: $name,
            replicas: $replicas,
            containers: &[ContainerSpec {
                ports: $ports,
                health: $health,
                ..CONTAINER
            }],
            optional_sidecars: SIDECARS,
            optional_volumes: TEAM_VOLUMES,
            ..APP
        }
    };
}

const HTTP_PORTS: &[PortSpec] = &[tcp("http", 8080), tcp("metrics", 9090)];

const TEAM_SERVICES: &[AppSpec] = &[
    service!("api", HTTP_PORTS, Health::Http("/healthz"), 3),
    service!("web", &[tcp("http", 8080)], Health::Http("/"), 3),
    service!("worker", &[tcp("metrics", 9090)], Health::Http("/livez"), 2),
    service!("gateway", HTTP_PORTS, Health::Http("/healthz"), 3),
    service!(
        "consumer",
        &[tcp("metrics", 9090)],
        Health::Http("/health"),
        2
    ),
    service!(
        "scheduler",
        &[tcp("http", 8080)],
        Health::Http("/healthz"),
        1
    ),
    service!(
        "admin",
        &[tcp("http", 3000)],
        Health::Http("/api/health"),
        1
    ),
    service!(
        "grpc",
        &[tcp("grpc", 9000), tcp("metrics", 9090)],
        Health::Tcp,
        3
    ),
    service!("webhook", &[tcp("https", 8443)], Health::Tcp, 2),
    service!(
        "notifier",
        &[tcp("metrics", 9090)],
        Health::Http("/healthz"),
        1
    ),
];

const DATA_VOLUME: VolumeSpec = VolumeSpec {
    name: "data",
    source: Source::Claim,
    mount: "/data",
    read_only: false,
};

const TEAM_STORES: &[AppSpec] = &[
    AppSpec {
        name: "redis",
        kind: Kind::StatefulSet,
        replicas: 3,
        shared_name: true,
        containers: &[
            ContainerSpec {
                name: "redis",
                image: "docker.io/bitnami/redis:7.2.4-debian-12-r9",
                ports: &[tcp("redis", 6379)],
                health: Health::Exec(&["sh", "-c", "redis-cli -h localhost ping"]),
                env: &[
                    Env::Secret("REDIS_PASSWORD", "redis", "redis-password"),
                    Env::Value("REDIS_REPLICATION_MODE", "master"),
                    Env::Value("ALLOW_EMPTY_PASSWORD", "no"),
                ],
                ..CONTAINER
            },
            ContainerSpec {
                name: "metrics",
                image: "docker.io/bitnami/redis-exporter:1.58.0-debian-12-r4",
                ports: &[tcp("http-metrics", 9121)],
                env: &[Env::Value("REDIS_ALIAS", "redis")],
                ..CONTAINER
            },
        ],
        volumes: &[DATA_VOLUME],
        ..APP
    },
    AppSpec {
        name: "postgres",
        kind: Kind::StatefulSet,
        replicas: 2,
        shared_name: true,
        containers: &[ContainerSpec {
            name: "postgres",
            image: "docker.io/library/postgres:16.2",
            ports: &[tcp("postgresql", 5432)],
            health: Health::Exec(&["pg_isready", "-U", "postgres"]),
            env: &[
                Env::Value("PGDATA", "/data/pgdata"),
                Env::Secret("POSTGRES_PASSWORD", "postgres", "password"),
                Env::Field("POD_IP", "status.podIP"),
            ],
            ..CONTAINER
        }],
        volumes: &[DATA_VOLUME],
        ..APP
    },
    AppSpec {
        name: "rabbitmq",
        kind: Kind::StatefulSet,
        replicas: 3,
        shared_name: true,
        containers: &[ContainerSpec {
            name: "rabbitmq",
            image: "docker.io/library/rabbitmq:3.13.1-management",
            ports: &[
                tcp("amqp", 5672),
                tcp("management", 15672),
                tcp("prometheus", 15692),
            ],
            health: Health::Tcp,
            env: &[
                Env::Field("MY_POD_NAME", "metadata.name"),
                Env::Secret("RABBITMQ_ERLANG_COOKIE", "rabbitmq", "erlang-cookie"),
            ],
            ..CONTAINER
        }],
        volumes: &[DATA_VOLUME],
        ..APP
    },
];

/// A team's Job (one-off, or made by a CronJob) of its own image.
macro_rules! job {
    ($name:expr, $cron:expr) => {
        AppSpec {
            name: $name,
            kind: Kind::Job,
            replicas: 1,
            cron: $cron,
            containers: &[CONTAINER],
            optional_volumes: TEAM_VOLUMES,
            ..APP
        }
    };
}

const TEAM_JOBS: &[AppSpec] = &[
    job!("db-migrate", false),
    job!("report", true),
    job!("cleanup", true),
    job!("backup", true),
];

const TEAM_AGENT: AppSpec = AppSpec {
    name: "agent",
    kind: Kind::DaemonSet,
    containers: &[ContainerSpec {
        ports: &[tcp("metrics", 9090)],
        health: Health::Http("/healthz"),
        ..CONTAINER
    }],
    volumes: &[VolumeSpec {
        name: "host-logs",
        source: Source::HostPath("/var/log", ""),
        mount: "/var/log",
        read_only: true,
    }],
    ..APP
};

const KUBE_SYSTEM: &[AppSpec] = &[
    AppSpec {
        name: "kube-proxy",
        kind: Kind::DaemonSet,
        shared_name: true,
        host_network: true,
        critical: true,
        containers: &[ContainerSpec {
            name: "kube-proxy",
            image: "registry.k8s.io/kube-proxy:v1.29.4",
            args: &[
                "--config=/var/lib/kube-proxy-config/config",
                "--hostname-override=$(NODE_NAME)",
            ],
            env: &[Env::Field("NODE_NAME", "spec.nodeName")],
            ..CONTAINER
        }],
        volumes: &[
            VolumeSpec {
                name: "xtables-lock",
                source: Source::HostPath("/run/xtables.lock", "FileOrCreate"),
                mount: "/run/xtables.lock",
                read_only: false,
            },
            VolumeSpec {
                name: "lib-modules",
                source: Source::HostPath("/lib/modules", ""),
                mount: "/lib/modules",
                read_only: true,
            },
            VolumeSpec {
                name: "config",
                source: Source::ConfigMap("kube-proxy-config"),
                mount: "/var/lib/kube-proxy-config/",
                read_only: false,
            },
        ],
        ..APP
    },
    AppSpec {
        name: "aws-node",
        kind: Kind::DaemonSet,
        shared_name: true,
        host_network: true,
        critical: true,
        containers: &[
            ContainerSpec {
                name: "aws-node",
                image: "602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni:v1.18.1-eksbuild.1",
                ports: &[tcp("metrics", 61678)],
                health: Health::Exec(&[
                    "/app/grpc-health-probe",
                    "-addr=:50051",
                    "-connect-timeout=5s",
                    "-rpc-timeout=5s",
                ]),
                env: &[
                    Env::Value("AWS_VPC_K8S_CNI_LOGLEVEL", "DEBUG"),
                    Env::Value("WARM_ENI_TARGET", "1"),
                    Env::Field("MY_NODE_NAME", "spec.nodeName"),
                ],
                ..CONTAINER
            },
            ContainerSpec {
                name: "aws-eks-nodeagent",
                image: "602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon/aws-network-policy-agent:v1.1.1-eksbuild.1",
                args: &[
                    "--enable-ipv6=false",
                    "--enable-network-policy=false",
                    "--metrics-bind-addr=:8162",
                ],
                env: &[Env::Field("MY_NODE_NAME", "spec.nodeName")],
                ..CONTAINER
            },
        ],
        volumes: &[
            VolumeSpec {
                name: "cni-bin-dir",
                source: Source::HostPath("/opt/cni/bin", ""),
                mount: "/host/opt/cni/bin",
                read_only: false,
            },
            VolumeSpec {
                name: "cni-net-dir",
                source: Source::HostPath("/etc/cni/net.d", ""),
                mount: "/host/etc/cni/net.d",
                read_only: false,
            },
        ],
        ..APP
    },
    AppSpec {
        name: "ebs-csi-node",
        kind: Kind::DaemonSet,
        shared_name: true,
        critical: true,
        containers: &[
            ContainerSpec {
                name: "ebs-plugin",
                image: "public.ecr.aws/ebs-csi-driver/aws-ebs-csi-driver:v1.30.0",
                ports: &[tcp("healthz", 9808)],
                health: Health::Http("/healthz"),
                args: &[
                    "node",
                    "--endpoint=$(CSI_ENDPOINT)",
                    "--logging-format=text",
                    "--v=2",
                ],
                env: &[
                    Env::Value("CSI_ENDPOINT", "unix:/csi/csi.sock"),
                    Env::Field("CSI_NODE_NAME", "spec.nodeName"),
                ],
                ..CONTAINER
            },
            ContainerSpec {
                name: "node-driver-registrar",
                image: "public.ecr.aws/eks-distro/kubernetes-csi/node-driver-registrar:v2.10.1-eks-1-30-2",
                args: &[
                    "--csi-address=$(ADDRESS)",
                    "--kubelet-registration-path=$(DRIVER_REG_SOCK_PATH)",
                    "--v=2",
                ],
                env: &[
                    Env::Value("ADDRESS", "/csi/csi.sock"),
                    Env::Value(
                        "DRIVER_REG_SOCK_PATH",
                        "/var/lib/kubelet/plugins/ebs.csi.aws.com/csi.sock",
                    ),
                ],
                mounts: &["plugin-dir", "registration-dir"],
                ..CONTAINER
            },
        ],
        volumes: &[
            VolumeSpec {
                name: "plugin-dir",
                source: Source::HostPath(
                    "/var/lib/kubelet/plugins/ebs.csi.aws.com/",
                    "DirectoryOrCreate",
                ),
                mount: "/csi",
                read_only: false,
            },
            VolumeSpec {
                name: "registration-dir",
                source: Source::HostPath("/var/lib/kubelet/plugins_registry/", "Directory"),
                mount: "/registration",
                read_only: false,
            },
        ],
        ..APP
    },
    AppSpec {
        name: "coredns",
        replicas: 2,
        shared_name: true,
        critical: true,
        containers: &[ContainerSpec {
            name: "coredns",
            image: "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/coredns:v1.11.1-eksbuild.9",
            ports: &[
                PortSpec {
                    name: "dns",
                    port: 53,
                    protocol: "UDP",
                },
                tcp("dns-tcp", 53),
                tcp("metrics", 9153),
            ],
            health: Health::Http("/health"),
            args: &["-conf", "/etc/coredns/Corefile"],
            ..CONTAINER
        }],
        volumes: &[VolumeSpec {
            name: "config-volume",
            source: Source::ConfigMap("coredns"),
            mount: "/etc/coredns",
            read_only: true,
        }],
        ..APP
    },
    AppSpec {
        name: "metrics-server",
        replicas: 1,
        shared_name: true,
        critical: true,
        containers: &[ContainerSpec {
            name: "metrics-server",
            image: "registry.k8s.io/metrics-server/metrics-server:v0.7.1",
            ports: &[tcp("https", 10250)],
            health: Health::Http("/livez"),
            args: &[
                "--cert-dir=/tmp",
                "--secure-port=10250",
                "--kubelet-preferred-address-types=InternalIP",
                "--metric-resolution=15s",
            ],
            ..CONTAINER
        }],
        volumes: &[VolumeSpec {
            name: "tmp-dir",
            source: Source::EmptyDir,
            mount: "/tmp",
            read_only: false,
        }],
        ..APP
    },
];

const MONITORING: &[AppSpec] = &[
    AppSpec {
        name: "node-exporter",
        kind: Kind::DaemonSet,
        shared_name: true,
        host_network: true,
        containers: &[ContainerSpec {
            name: "node-exporter",
            image: "quay.io/prometheus/node-exporter:v1.7.0",
            ports: &[tcp("http-metrics", 9100)],
            health: Health::Http("/"),
            args: &[
                "--path.procfs=/host/proc",
                "--path.sysfs=/host/sys",
                "--web.listen-address=[$(HOST_IP)]:9100",
            ],
            env: &[Env::Value("HOST_IP", "0.0.0.0")],
            ..CONTAINER
        }],
        volumes: &[
            VolumeSpec {
                name: "proc",
                source: Source::HostPath("/proc", ""),
                mount: "/host/proc",
                read_only: true,
            },
            VolumeSpec {
                name: "sys",
                source: Source::HostPath("/sys", ""),
                mount: "/host/sys",
                read_only: true,
            },
        ],
        ..APP
    },
    AppSpec {
        name: "prometheus",
        kind: Kind::StatefulSet,
        replicas: 2,
        shared_name: true,
        containers: &[
            ContainerSpec {
                name: "prometheus",
                image: "quay.io/prometheus/prometheus:v2.51.2",
                ports: &[tcp("http-web", 9090)],
                health: Health::Http("/-/healthy"),
                args: &[
                    "--config.file=/etc/prometheus/config_out/prometheus.env.yaml",
                    "--storage.tsdb.path=/prometheus",
                    "--storage.tsdb.retention.time=10d",
                    "--web.enable-lifecycle",
                ],
                ..CONTAINER
            },
            ContainerSpec {
                name: "config-reloader",
                image: "quay.io/prometheus-operator/prometheus-config-reloader:v0.73.2",
                ports: &[tcp("reloader-web", 8080)],
                args: &[
                    "--listen-address=:8080",
                    "--reload-url=http://127.0.0.1:9090/-/reload",
                ],
                env: &[
                    Env::Field("POD_NAME", "metadata.name"),
                    Env::Value("SHARD", "0"),
                ],
                mounts: &["config"],
                ..CONTAINER
            },
        ],
        volumes: &[
            VolumeSpec {
                name: "config",
                source: Source::Secret("prometheus-config"),
                mount: "/etc/prometheus/config",
                read_only: true,
            },
            DATA_VOLUME,
        ],
        ..APP
    },
    AppSpec {
        name: "kube-state-metrics",
        replicas: 1,
        shared_name: true,
        containers: &[ContainerSpec {
            name: "kube-state-metrics",
            image: "registry.k8s.io/kube-state-metrics/kube-state-metrics:v2.12.0",
            ports: &[tcp("http", 8080), tcp("telemetry", 8081)],
            health: Health::Http("/healthz"),
            args: &[
                "--port=8080",
                "--telemetry-port=8081",
                "--resources=pods,nodes,deployments",
            ],
            ..CONTAINER
        }],
        ..APP
    },
    AppSpec {
        name: "grafana",
        replicas: 1,
        shared_name: true,
        containers: &[ContainerSpec {
            name: "grafana",
            image: "docker.io/grafana/grafana:10.4.2",
            ports: &[tcp("grafana", 3000)],
            health: Health::Http("/api/health"),
            env: &[
                Env::Secret("GF_SECURITY_ADMIN_USER", "grafana", "admin-user"),
                Env::Secret("GF_SECURITY_ADMIN_PASSWORD", "grafana", "admin-password"),
                Env::Value("GF_PATHS_DATA", "/var/lib/grafana/"),
            ],
            ..CONTAINER
        }],
        volumes: &[VolumeSpec {
            name: "config",
            source: Source::ConfigMap("grafana"),
            mount: "/etc/grafana/grafana.ini",
            read_only: false,
        }],
        ..APP
    },
];

const LOGGING: &[AppSpec] = &[
    AppSpec {
        name: "fluent-bit",
        kind: Kind::DaemonSet,
        shared_name: true,
        containers: &[ContainerSpec {
            name: "fluent-bit",
            image: "cr.fluentbit.io/fluent/fluent-bit:2.2.2",
            ports: &[tcp("http", 2020)],
            health: Health::Http("/api/v1/health"),
            args: &[
                "--workdir=/fluent-bit/etc",
                "--config=/fluent-bit/etc/conf/fluent-bit.conf",
            ],
            ..CONTAINER
        }],
        volumes: &[
            VolumeSpec {
                name: "config",
                source: Source::ConfigMap("fluent-bit"),
                mount: "/fluent-bit/etc/conf",
                read_only: false,
            },
            VolumeSpec {
                name: "varlog",
                source: Source::HostPath("/var/log", ""),
                mount: "/var/log",
                read_only: false,
            },
        ],
        ..APP
    },
    AppSpec {
        name: "loki",
        kind: Kind::StatefulSet,
        replicas: 3,
        shared_name: true,
        containers: &[ContainerSpec {
            name: "loki",
            image: "docker.io/grafana/loki:2.9.6",
            ports: &[
                tcp("http-metrics", 3100),
                tcp("grpc", 9095),
                tcp("http-memberlist", 7946),
            ],
            health: Health::Http("/ready"),
            args: &["-config.file=/etc/loki/config/config.yaml", "-target=all"],
            ..CONTAINER
        }],
        volumes: &[
            VolumeSpec {
                name: "config",
                source: Source::ConfigMap("loki"),
                mount: "/etc/loki/config",
                read_only: false,
            },
            DATA_VOLUME,
        ],
        ..APP
    },
];

const INGRESS: &[AppSpec] = &[
    AppSpec {
        name: "ingress-nginx-controller",
        replicas: 3,
        shared_name: true,
        containers: &[ContainerSpec {
            name: "controller",
            image: "registry.k8s.io/ingress-nginx/controller:v1.10.1",
            ports: &[tcp("http", 80), tcp("https", 443), tcp("webhook", 8443)],
            health: Health::Http("/healthz"),
            args: &[
                "/nginx-ingress-controller",
                "--publish-service=$(POD_NAMESPACE)/ingress-nginx-controller",
                "--election-id=ingress-nginx-leader",
                "--controller-class=k8s.io/ingress-nginx",
            ],
            env: &[
                Env::Field("POD_NAME", "metadata.name"),
                Env::Field("POD_NAMESPACE", "metadata.namespace"),
                Env::Value("LD_PRELOAD", "/usr/local/lib/libmimalloc.so"),
            ],
            ..CONTAINER
        }],
        volumes: &[VolumeSpec {
            name: "webhook-cert",
            source: Source::Secret("ingress-nginx-admission"),
            mount: "/usr/local/certificates/",
            read_only: true,
        }],
        ..APP
    },
    AppSpec {
        name: "ingress-nginx-admission-create",
        kind: Kind::Job,
        replicas: 1,
        shared_name: true,
        containers: &[ContainerSpec {
            name: "create",
            image: "registry.k8s.io/ingress-nginx/kube-webhook-certgen:v1.4.1",
            args: &[
                "create",
                "--host=ingress-nginx-controller-admission,ingress-nginx-controller-admission.$(POD_NAMESPACE).svc",
                "--namespace=$(POD_NAMESPACE)",
                "--secret-name=ingress-nginx-admission",
            ],
            env: &[Env::Field("POD_NAMESPACE", "metadata.namespace")],
            ..CONTAINER
        }],
        ..APP
    },
];

// ---------------------------------------------------------------------------
// Pod templates: what the pods of one workload share.

/// A container as the status needs it.
#[derive(Debug)]
struct ContainerInfo {
    name: String,
    /// The image as the runtime reports it (`docker.io/library/...`).
    status_image: String,
    image_id: String,
}

#[derive(Debug)]
struct PodTemplate {
    generate_name: Option<String>,
    /// With placeholders for the per-pod StatefulSet labels.
    labels: Map<String, Value>,
    annotations: Map<String, Value>,
    owner_references: Value,
    finalizers: Option<Value>,
    /// Complete but for `nodeName`; per-pod fields hold placeholders.
    spec: Value,
    /// Index in `spec.volumes` of the `kube-api-access-*` volume, the last
    /// volume mount of every container.
    api_access_volume: usize,
    /// Index in `spec.volumes` of the StatefulSet's claim.
    claim_volume: Option<usize>,
    /// What kube-controller-manager owns of each pod.
    kcm_fields: Value,
    containers: Vec<ContainerInfo>,
    qos_class: &'static str,
    host_network: bool,
    /// Seconds from container start to Ready.
    ready_delay: i64,
    /// The template serialised for [`Generator::pod_json`], made on first
    /// use: running pods, succeeded pods.
    spliced: [Option<Spliced>; 2],
}

/// Largest pod (bytes of JSON) a template may give, with room for per-pod
/// variation (longer names and ordinals): pods stay within 4–8 KiB.
const POD_BUDGET: usize = 7_900;
/// Largest managedFields (bytes of JSON) of a template's running pods:
/// they stay within 1.5–3 KiB. Their size does not vary between the pods of
/// one template (the sample pod has the longest IPs) but for a succeeded Job
/// pod's condition reasons (42 bytes more).
const MANAGED_BUDGET: usize = 2_980;
/// Per container, room for a restart's `lastState` in the status.
const RESTART_ROOM: usize = 260;

/// The template of workload `wi`, slimmed (fewer sidecars, variables,
/// labels...) until a sample pod fits [`POD_BUDGET`] and [`MANAGED_BUDGET`].
fn template_within_budget(g: &Generator, wi: usize) -> PodTemplate {
    let w = &g.workloads[wi];
    let mut slim = 0;
    loop {
        let t = build_template(g, wi, slim);
        let draw = PodDraw::sample(&t, wi, &w.owner, g.base_time);
        let namespace = &g.namespaces[w.namespace].name;
        let sample = render_pod(&t, w.kind, namespace, false, &mut |slot| draw.value(slot));
        let pod =
            serde_json::to_vec(&sample).expect("JSON").len() + RESTART_ROOM * t.containers.len();
        let managed = serde_json::to_vec(&sample["metadata"]["managedFields"])
            .expect("JSON")
            .len();
        if (pod <= POD_BUDGET && managed <= MANAGED_BUDGET) || slim == MAX_SLIM {
            return t;
        }
        slim += 1;
    }
}

/// How far [`build_template`] may slim a template.
const MAX_SLIM: u8 = 3;

/// The template of workload `wi`. `slim` 0 makes every random choice; each
/// level above leaves out more of what is optional: 1 sidecars and
/// annotations, 2 common variables, security contexts and optional labels,
/// 3 readiness probes, optional volumes and the containers after the first.
fn build_template(g: &Generator, wi: usize, slim: u8) -> PodTemplate {
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
        spliced: [None, None],
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

/// Everything random about one pod: what [`render_pod`] fills into the
/// template's [`Slot`]s.
#[derive(Debug)]
struct PodDraw {
    workload: usize,
    name: String,
    /// The StatefulSet ordinal.
    ordinal: u64,
    node_name: String,
    host_ip: String,
    pod_ip: String,
    /// The name of the `kube-api-access-*` volume.
    access: String,
    created: DateTime<Utc>,
    scheduled: DateTime<Utc>,
    initialized: DateTime<Utc>,
    /// When Ready and ContainersReady last moved (the kubelet's last write).
    ready: DateTime<Utc>,
    /// A Job pod that has completed.
    succeeded: bool,
    containers: Vec<ContainerDraw>,
}

#[derive(Debug)]
struct ContainerDraw {
    /// 64 hex digits.
    id: String,
    started: DateTime<Utc>,
    /// When the container exited 0 (a succeeded pod).
    finished: Option<DateTime<Utc>>,
    restart: Option<Restart>,
}

#[derive(Debug)]
struct Restart {
    count: i64,
    previous_id: String,
    reason: &'static str,
    code: i32,
    /// When the current container started.
    at: DateTime<Utc>,
}

impl PodDraw {
    /// A pod of template `t` with the longest values a pod may have, to size
    /// the template.
    fn sample(t: &PodTemplate, workload: usize, owner: &str, at: DateTime<Utc>) -> Self {
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
    fn value(&self, slot: Slot) -> Value {
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

/// A per-pod value in a pod template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Name,
    /// The StatefulSet ordinal, as a label value.
    PodIndex,
    /// The StatefulSet pod's volume claim, `data-{name}`.
    ClaimName,
    NodeName,
    AccessVolume,
    /// When the pod was created (kube-controller-manager's write).
    Created,
    HostIp,
    PodIp,
    Scheduled,
    Initialized,
    Ready,
    ContainerId(usize),
    RestartCount(usize),
    State(usize),
    LastState(usize),
}

/// Slots before the per-container ones.
const POD_SLOTS: usize = 11;

impl Slot {
    fn id(self) -> usize {
        match self {
            Slot::Name => 0,
            Slot::PodIndex => 1,
            Slot::ClaimName => 2,
            Slot::NodeName => 3,
            Slot::AccessVolume => 4,
            Slot::Created => 5,
            Slot::HostIp => 6,
            Slot::PodIp => 7,
            Slot::Scheduled => 8,
            Slot::Initialized => 9,
            Slot::Ready => 10,
            Slot::ContainerId(i) => POD_SLOTS + 4 * i,
            Slot::RestartCount(i) => POD_SLOTS + 4 * i + 1,
            Slot::State(i) => POD_SLOTS + 4 * i + 2,
            Slot::LastState(i) => POD_SLOTS + 4 * i + 3,
        }
    }

    fn from_id(id: usize) -> Slot {
        const FIXED: [Slot; POD_SLOTS] = [
            Slot::Name,
            Slot::PodIndex,
            Slot::ClaimName,
            Slot::NodeName,
            Slot::AccessVolume,
            Slot::Created,
            Slot::HostIp,
            Slot::PodIp,
            Slot::Scheduled,
            Slot::Initialized,
            Slot::Ready,
        ];
        if id < POD_SLOTS {
            return FIXED[id];
        }
        let (i, k) = ((id - POD_SLOTS) / 4, (id - POD_SLOTS) % 4);
        [
            Slot::ContainerId(i),
            Slot::RestartCount(i),
            Slot::State(i),
            Slot::LastState(i),
        ][k]
    }

    /// A string that stands for the slot in a rendered template: private-use
    /// characters, which serde_json writes unescaped and real objects never
    /// hold.
    fn sentinel(self) -> String {
        format!("{SENTINEL_OPEN}{}{SENTINEL_CLOSE}", self.id())
    }
}

const SENTINEL_OPEN: char = '\u{e000}';
const SENTINEL_CLOSE: char = '\u{e001}';

/// A pod template serialised with holes for its slots: `pieces[0]`, hole 0,
/// `pieces[1]`, ..., hole n-1, `pieces[n]`.
#[derive(Debug)]
struct Spliced {
    pieces: Vec<String>,
    holes: Vec<Hole>,
    /// Bytes of the pieces.
    len: usize,
}

#[derive(Debug)]
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
    fn new(pattern: &Value) -> Self {
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
    fn fill(&self, draw: &PodDraw) -> String {
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
fn render_pod(
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

// ---------------------------------------------------------------------------
// Pod status.

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
fn pod_status(t: &PodTemplate, succeeded: bool, slot: &mut dyn FnMut(Slot) -> Value) -> Value {
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
fn set_readiness(status: &mut Value, now: DateTime<Utc>, unready: Option<usize>) {
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
fn complete_job_pod(status: &mut Value, now: DateTime<Utc>) {
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
fn kubelet_fields(status: &Value) -> Value {
    let mut fields = fields_v1(as_map(status));
    fields.remove("f:qosClass");
    if let Some(conditions) = fields.get_mut("f:conditions") {
        let conditions = as_map_mut(conditions);
        conditions.remove(".");
        conditions.remove(&keyed("type", "PodScheduled"));
    }
    json!({ "f:status": fields })
}

// ---------------------------------------------------------------------------
// managedFields.

fn managed_entry(
    manager: &str,
    api_version: &str,
    time: Value,
    subresource: Option<&str>,
    fields: Value,
) -> Value {
    let mut entry = Map::new();
    entry.insert("apiVersion".into(), api_version.into());
    entry.insert("fieldsType".into(), "FieldsV1".into());
    entry.insert("fieldsV1".into(), fields);
    entry.insert("manager".into(), manager.into());
    entry.insert("operation".into(), "Update".into());
    if let Some(s) = subresource {
        entry.insert("subresource".into(), s.into());
    }
    entry.insert("time".into(), time);
    Value::Object(entry)
}

/// The managedFields entry of `manager` (and `subresource`).
///
/// # Panics
///
/// If `object` has no such entry.
fn managed_entry_mut<'a>(
    object: &'a mut Value,
    manager: &str,
    subresource: Option<&str>,
) -> &'a mut Value {
    object["metadata"]["managedFields"]
        .as_array_mut()
        .and_then(|entries| {
            entries
                .iter_mut()
                .find(|e| e["manager"] == manager && e["subresource"].as_str() == subresource)
        })
        .unwrap_or_else(|| panic!("no managedFields entry of {manager}"))
}

/// Adds `fields` to the entry of `manager` (made if missing) and sets its time.
fn upsert_managed(
    object: &mut Value,
    manager: &str,
    api_version: &str,
    now: DateTime<Utc>,
    subresource: Option<&str>,
    fields: Value,
) {
    let entries = object["metadata"]["managedFields"]
        .as_array_mut()
        .expect("managedFields");
    match entries
        .iter_mut()
        .find(|e| e["manager"] == manager && e["subresource"].as_str() == subresource)
    {
        Some(entry) => {
            merge(&mut entry["fieldsV1"], fields);
            entry["time"] = ts(now).into();
        }
        None => entries.push(managed_entry(
            manager,
            api_version,
            ts(now).into(),
            subresource,
            fields,
        )),
    }
}

fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert_with(|| json!({})), v);
            }
        }
        (into, from) => *into = from,
    }
}

/// Removes the field at `path` (and the sets it leaves empty but for `.`).
fn remove_path(fields: &mut Value, path: &[&str]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let Some(map) = fields.as_object_mut() else {
        return;
    };
    if rest.is_empty() {
        map.remove(*first);
        return;
    }
    if let Some(child) = map.get_mut(*first) {
        remove_path(child, rest);
        if child
            .as_object()
            .is_some_and(|m| m.keys().all(|k| k == "."))
        {
            map.remove(*first);
        }
    }
}

/// How a list is merged, which decides how its items appear in FieldsV1.
enum ListType {
    /// Replaced as a whole: `"f:list": {}`.
    Atomic,
    /// Items keyed by these fields: `"k:{\"name\":\"x\"}": {...}`.
    Map(&'static [&'static str]),
    /// Items keyed by value: `"v:\"x\"": {}`.
    Set,
}

/// The list types of the Pod, ConfigMap and Widget fields (by field name,
/// which is unambiguous within these kinds).
fn list_type(field: &str) -> ListType {
    match field {
        "containers" | "initContainers" | "env" | "volumes" | "imagePullSecrets" => {
            ListType::Map(&["name"])
        }
        "ports" => ListType::Map(&["containerPort", "protocol"]),
        "volumeMounts" => ListType::Map(&["mountPath"]),
        "ownerReferences" => ListType::Map(&["uid"]),
        "conditions" => ListType::Map(&["type"]),
        "podIPs" => ListType::Map(&["ip"]),
        "finalizers" => ListType::Set,
        _ => ListType::Atomic,
    }
}

/// The FieldsV1 set of the fields of `object`: `{"f:name": ...}` for each.
/// Used for `f:metadata` and a built-in kind's `f:spec` and `f:status`,
/// which are required structs and so carry no `"."`; a custom resource's
/// `spec` and `status` and a config map's `data` are optional fields and go
/// through [`field_set`].
fn fields_v1(object: &Map<String, Value>) -> Map<String, Value> {
    object
        .iter()
        .map(|(k, v)| (format!("f:{k}"), field_set(k, v)))
        .collect()
}

/// The FieldsV1 set of one field: `{}` for a leaf, atomic list or empty
/// object; `{".": {}, ...children}` otherwise.
fn field_set(name: &str, value: &Value) -> Value {
    let mut set = Map::new();
    match value {
        Value::Object(m) if !m.is_empty() => {
            set.insert(".".into(), json!({}));
            set.extend(fields_v1(m));
        }
        Value::Array(items) => match list_type(name) {
            ListType::Atomic => {}
            ListType::Map(keys) => {
                set.insert(".".into(), json!({}));
                for item in items {
                    let mut key = String::from("k:{");
                    for (i, k) in keys.iter().enumerate() {
                        if i > 0 {
                            key.push(',');
                        }
                        let _ = write!(key, "\"{k}\":{}", item[*k]);
                    }
                    key.push('}');
                    let mut child = Map::new();
                    child.insert(".".into(), json!({}));
                    child.extend(fields_v1(as_map(item)));
                    set.insert(key, Value::Object(child));
                }
            }
            ListType::Set => {
                set.insert(".".into(), json!({}));
                for item in items {
                    set.insert(format!("v:{item}"), json!({}));
                }
            }
        },
        _ => {}
    }
    Value::Object(set)
}

/// The FieldsV1 key of a list item keyed by one string field.
fn keyed(key: &str, value: &str) -> String {
    format!("k:{{\"{key}\":{}}}", Value::from(value))
}

// ---------------------------------------------------------------------------
// Config map contents.

type Render = fn(&mut SmallRng, &str) -> String;

const CONFIG_KEYS: &[(&str, Render)] = &[
    ("LOG_LEVEL", |rng, _| {
        ["info", "debug", "warn"][rng.random_range(0..3)].into()
    }),
    ("CACHE_TTL_SECONDS", |rng, _| {
        (60 * rng.random_range(1..60)).to_string()
    }),
    ("FEATURE_NEW_CHECKOUT", |rng, _| {
        rng.random_bool(0.5).to_string()
    }),
    ("UPSTREAM_URL", |_, app| {
        format!("http://{app}.svc.cluster.local:8080")
    }),
    ("MAX_CONNECTIONS", |rng, _| {
        rng.random_range(10..500).to_string()
    }),
];

const CONFIG_FILES: &[(&str, Render)] = &[
    ("application.yaml", |rng, app| {
        format!(
            "server:\n  port: 8080\n  shutdown: graceful\nspring:\n  application:\n    name: {app}\n  datasource:\n    url: jdbc:postgresql://postgres:5432/{db}\n    hikari:\n      maximum-pool-size: {pool}\n      connection-timeout: 30000\nmanagement:\n  endpoints:\n    web:\n      exposure:\n        include: health,info,prometheus\nlogging:\n  level:\n    root: {level}\n",
            db = app.replace('-', "_"),
            pool = rng.random_range(5..50),
            level = ["INFO", "WARN", "DEBUG"][rng.random_range(0..3)],
        )
    }),
    ("nginx.conf", |rng, app| {
        format!(
            "worker_processes auto;\nevents {{\n  worker_connections {conns};\n}}\nhttp {{\n  sendfile on;\n  keepalive_timeout 65;\n  upstream backend {{\n    server {app}:8080;\n  }}\n  server {{\n    listen 8080;\n    location / {{\n      proxy_pass http://backend;\n      proxy_read_timeout {timeout}s;\n    }}\n    location /healthz {{\n      return 200 'ok';\n    }}\n  }}\n}}\n",
            conns = 256 * rng.random_range(1..16),
            timeout = rng.random_range(5..120),
        )
    }),
    ("config.json", |rng, app| {
        format!(
            "{{\n  \"service\": \"{app}\",\n  \"listen\": \":8080\",\n  \"timeouts\": {{ \"read\": \"{r}s\", \"write\": \"{w}s\" }},\n  \"rateLimit\": {{ \"rps\": {rps}, \"burst\": {burst} }},\n  \"features\": [\"tracing\", \"metrics\"]\n}}\n",
            r = rng.random_range(1..30),
            w = rng.random_range(1..30),
            rps = rng.random_range(10..1000),
            burst = rng.random_range(10..200),
        )
    }),
    ("settings.toml", |rng, app| {
        format!(
            "[service]\nname = \"{app}\"\nworkers = {workers}\n\n[database]\npool_size = {pool}\nstatement_timeout_ms = {timeout}\n\n[cache]\nenabled = true\nttl_seconds = {ttl}\n",
            workers = rng.random_range(1..16),
            pool = rng.random_range(5..50),
            timeout = 1000 * rng.random_range(1..30),
            ttl = 60 * rng.random_range(1..60),
        )
    }),
];

// ---------------------------------------------------------------------------
// Small helpers.

/// The alphabet of generated names (`k8s.io/apimachinery/pkg/util/rand`):
/// no vowels, so no words, and no look-alike digits.
const SAFE_ALPHABET: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";
/// Distinct 5-character suffixes.
const SUFFIXES: u64 = 27 * 27 * 27 * 27 * 27;

fn safe_encode(mut x: u64, len: usize) -> String {
    let mut s = String::with_capacity(len);
    for _ in 0..len {
        s.push(SAFE_ALPHABET[(x % 27) as usize] as char);
        x /= 27;
    }
    s
}

fn random_suffix(rng: &mut SmallRng, len: usize) -> String {
    safe_encode(rng.random(), len)
}

/// A random-looking name suffix that differs for every `seq` of one
/// `stream`: an affine bijection of `seq` modulo 27⁵, five characters, with
/// more characters once the 27⁵ suffixes are used up.
fn unique_suffix(seed: u64, stream: u64, seq: u64) -> String {
    let h = mix64(seed ^ mix64(stream));
    let mut a = 1 + h % (SUFFIXES - 1);
    if a.is_multiple_of(3) {
        a += 1; // coprime with 27⁵
    }
    let b = (h >> 32) % SUFFIXES;
    let mut s = safe_encode((a * (seq % SUFFIXES) + b) % SUFFIXES, 5);
    let round = seq / SUFFIXES;
    if round > 0 {
        s.push_str(&safe_encode(round, 1 + (round.ilog(27) as usize)));
    }
    s
}

fn random_hex(rng: &mut SmallRng, len: usize) -> String {
    let mut s = String::with_capacity(len + 16);
    while s.len() < len {
        let _ = write!(s, "{:016x}", rng.random::<u64>());
    }
    s.truncate(len);
    s
}

/// The splitmix64 finaliser: a good 64-bit mix.
fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A stable hash of `parts` under `seed` (FNV-1a, then mixed).
fn hash(seed: u64, parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.bytes().chain([0xff]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    mix64(h ^ seed)
}

/// A version-4-shaped UUID derived from `seed` and `parts`.
fn uuid(seed: u64, parts: &[&str]) -> String {
    let hi = hash(seed, parts);
    let lo = mix64(hi ^ 0x5555_5555_5555_5555);
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xffff,
        hi & 0xfff,
        0x8000 | ((lo >> 48) & 0x3fff),
        lo & 0xffff_ffff_ffff
    )
}

/// The image reference as containerd reports it: `nginx:1` becomes
/// `docker.io/library/nginx:1`.
fn normalise_image(image: &str) -> String {
    let first = image.split('/').next().unwrap_or_default();
    if image.contains('/') && (first.contains('.') || first.contains(':')) {
        image.to_owned()
    } else if image.contains('/') {
        format!("docker.io/{image}")
    } else {
        format!("docker.io/library/{image}")
    }
}

/// `repo@sha256:...`, stable per image.
fn image_id(seed: u64, image: &str) -> String {
    let normalised = normalise_image(image);
    let repo = match normalised.rfind(':') {
        Some(i) if i > normalised.rfind('/').unwrap_or(0) => &normalised[..i],
        _ => &normalised,
    };
    let mut digest = String::with_capacity(64);
    for i in 0..4u64 {
        let _ = write!(digest, "{:016x}", hash(seed ^ i, &[image]));
    }
    format!("{repo}@sha256:{digest}")
}

/// The image with the last number of its tag incremented
/// (`app:1.4.2` → `app:1.4.3`).
fn bump_tag(image: &str) -> String {
    let tag_start = image
        .rfind(':')
        .filter(|&i| i > image.rfind('/').unwrap_or(0))
        .map_or(image.len(), |i| i + 1);
    let tag = &image[tag_start..];
    let Some(end) = tag.rfind(|c: char| c.is_ascii_digit()).map(|i| i + 1) else {
        return format!("{image}-1");
    };
    let start = tag[..end]
        .rfind(|c: char| !c.is_ascii_digit())
        .map_or(0, |i| i + 1);
    let n: u64 = tag[start..end].parse().unwrap_or(0);
    format!(
        "{}{}{}{}",
        &image[..tag_start],
        &tag[..start],
        n + 1,
        &tag[end..]
    )
}

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
mod tests {
    use std::collections::{BTreeMap, HashSet};
    use std::time::{Duration, Instant};

    use chrono::TimeZone;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};

    use super::*;

    fn base_time() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2024, 5, 1, 12, 0, 0).unwrap()
    }

    fn generator(seed: u64) -> Generator {
        Generator::new(
            GeneratorConfig {
                seed,
                namespaces: 40,
                nodes: 150,
            },
            base_time(),
        )
    }

    fn size(v: &Value) -> usize {
        serde_json::to_vec(v).unwrap().len()
    }

    fn owner_kind(pod: &Value) -> &str {
        pod["metadata"]["ownerReferences"][0]["kind"]
            .as_str()
            .unwrap()
    }

    /// Everything a generator makes in a typical session, as JSON text, and
    /// the mutations it chose.
    fn session(seed: u64) -> (Vec<String>, Vec<Mutation>) {
        let mut g = generator(seed);
        let namespaces = g.namespace_names();
        let mut out: Vec<String> = namespaces
            .iter()
            .map(|n| g.namespace(n).to_string())
            .collect();
        let mut pods: Vec<Value> = (0..300).map(|_| g.pod()).collect();
        out.extend((0..100).map(|_| g.pod_json()));
        let mut cms: Vec<Value> = namespaces.iter().map(|n| g.configmap(n)).collect();
        let mut widgets: Vec<Value> = namespaces.iter().map(|n| g.widget(n)).collect();
        let mut mutations = Vec::new();
        for i in 0..500 {
            let n = pods.len();
            mutations.push(g.mutate_pod(&mut pods[i % n]));
            let n = cms.len();
            mutations.push(g.mutate_configmap(&mut cms[i % n]));
            let n = widgets.len();
            mutations.push(g.mutate_widget(&mut widgets[i % n]));
        }
        out.extend(
            pods.iter()
                .chain(&cms)
                .chain(&widgets)
                .map(Value::to_string),
        );
        (out, mutations)
    }

    #[test]
    fn the_same_seed_gives_byte_identical_objects() {
        assert_eq!(session(11), session(11));
    }

    #[test]
    fn different_seeds_give_different_objects() {
        let ((a, _), (b, _)) = (session(11), session(12));
        let same = a.iter().zip(&b).filter(|(x, y)| x == y).count();
        assert_eq!(same, 0, "{same} of {} equal", a.len());
    }

    #[test]
    fn pod_json_is_byte_for_byte_the_serialised_pod() {
        let (mut a, mut b) = (generator(3), generator(3));
        for _ in 0..3_000 {
            assert_eq!(a.pod_json(), b.pod().to_string());
        }
        // Both moved the generator on alike.
        assert_eq!(a.configmap("kube-system"), b.configmap("kube-system"));
    }

    #[test]
    fn pods_are_4_to_8_kib_with_1_5_to_3_kib_of_managed_fields() {
        let mut g = generator(5);
        for _ in 0..1_000 {
            let pod = g.pod();
            let (bytes, managed) = (size(&pod), size(&pod["metadata"]["managedFields"]));
            let name = &pod["metadata"]["name"];
            assert!((4_096..=8_192).contains(&bytes), "{name}: {bytes} bytes");
            assert!(
                (1_536..=3_072).contains(&managed),
                "{name}: {managed} bytes of managedFields"
            );
        }
    }

    #[test]
    fn pods_are_owned_by_every_kind_of_controller() {
        let mut g = generator(1);
        let kinds: HashSet<String> = (0..2_000)
            .map(|_| owner_kind(&g.pod()).to_owned())
            .collect();
        for kind in ["ReplicaSet", "DaemonSet", "StatefulSet", "Job"] {
            assert!(kinds.contains(kind), "no pod owned by a {kind}: {kinds:?}");
        }
    }

    #[test]
    fn pods_carry_the_labels_of_their_controller_kind() {
        let mut g = generator(1);
        for _ in 0..2_000 {
            let pod = g.pod();
            let labels = as_map(&pod["metadata"]["labels"]);
            let name = pod["metadata"]["name"].as_str().unwrap();
            let expected: &[&str] = match owner_kind(&pod) {
                "ReplicaSet" => &["pod-template-hash"],
                "DaemonSet" => &["controller-revision-hash", "pod-template-generation"],
                "StatefulSet" => &[
                    "controller-revision-hash",
                    "statefulset.kubernetes.io/pod-name",
                ],
                _ => &["job-name", "batch.kubernetes.io/controller-uid"],
            };
            for key in expected {
                assert!(labels.contains_key(*key), "{name} lacks {key}");
            }
            if owner_kind(&pod) == "StatefulSet" {
                assert_eq!(labels["statefulset.kubernetes.io/pod-name"], name);
                assert_eq!(pod["spec"]["hostname"], name);
            }
        }
    }

    #[test]
    fn owner_uids_are_stable_per_owner_and_seed() {
        let (mut a, mut b) = (generator(9), generator(9));
        let mut uids = BTreeMap::<String, String>::new();
        for _ in 0..2_000 {
            let (pa, pb) = (a.pod(), b.pod());
            let owner = &pa["metadata"]["ownerReferences"][0];
            assert_eq!(owner, &pb["metadata"]["ownerReferences"][0]);
            let key = format!("{}/{}", pa["metadata"]["namespace"], owner["name"]);
            let uid = owner["uid"].as_str().unwrap().to_owned();
            assert_eq!(uids.entry(key).or_insert_with(|| uid.clone()), &uid);
        }
        let other = generator(10).pod();
        assert!(
            !uids
                .values()
                .any(|u| *u == other["metadata"]["ownerReferences"][0]["uid"])
        );
    }

    #[test]
    fn pods_leave_uid_resource_version_creation_time_and_generation_to_the_store() {
        let mut g = generator(2);
        for _ in 0..200 {
            let pod = g.pod();
            for field in ["uid", "resourceVersion", "creationTimestamp", "generation"] {
                assert!(pod["metadata"].get(field).is_none(), "{field} set");
            }
        }
    }

    #[test]
    fn pods_run_on_the_configured_nodes_with_their_ips() {
        let mut g = Generator::new(
            GeneratorConfig {
                seed: 4,
                namespaces: 10,
                nodes: 7,
            },
            base_time(),
        );
        let nodes = g.node_names();
        assert_eq!(nodes.len(), 7);
        for _ in 0..1_000 {
            let pod = g.pod();
            let node = pod["spec"]["nodeName"].as_str().unwrap();
            assert!(nodes.iter().any(|n| n == node), "{node}");
            // EKS names nodes after their IP.
            let ip = pod["status"]["hostIP"].as_str().unwrap();
            assert!(
                node.starts_with(&format!("ip-{}.", ip.replace('.', "-"))),
                "{node} {ip}"
            );
        }
    }

    #[test]
    fn names_are_unique_across_20k_pods_and_all_config_maps_and_widgets() {
        let mut g = generator(6);
        let mut seen = HashSet::new();
        for _ in 0..20_000 {
            let pod = g.pod();
            let key = format!(
                "{}/{}",
                pod["metadata"]["namespace"], pod["metadata"]["name"]
            );
            assert!(seen.insert(key.clone()), "{key} twice");
        }
        let namespaces = g.namespace_names();
        let (mut cms, mut widgets) = (HashSet::new(), HashSet::new());
        for i in 0..5_000 {
            let ns = &namespaces[i % namespaces.len()];
            assert!(cms.insert(format!("{ns}/{}", g.configmap(ns)["metadata"]["name"])));
            assert!(widgets.insert(format!("{ns}/{}", g.widget(ns)["metadata"]["name"])));
        }
    }

    #[test]
    fn unique_suffixes_do_not_repeat_past_the_five_character_ones() {
        let mut seen = HashSet::new();
        for seq in (0..2_000).chain(SUFFIXES - 1_000..SUFFIXES + 1_000) {
            assert!(seen.insert(unique_suffix(1, 0, seq)), "{seq}");
        }
    }

    /// A label key or value as Kubernetes validates it
    /// (`IsQualifiedName`, `IsValidLabelValue`).
    fn valid_name(s: &str) -> bool {
        let alnum = |c: char| c.is_ascii_alphanumeric();
        s.len() <= 63
            && (s.is_empty()
                || (s.starts_with(alnum)
                    && s.ends_with(alnum)
                    && s.chars().all(|c| alnum(c) || "-_.".contains(c))))
    }

    fn valid_label(key: &str, value: &str) -> bool {
        let (prefix, name) = key
            .rsplit_once('/')
            .map_or((None, key), |(p, n)| (Some(p), n));
        let prefix_ok = prefix.is_none_or(|p| {
            p.len() <= 253
                && p.split('.').all(|part| {
                    !part.is_empty()
                        && part.len() <= 63
                        && part
                            .chars()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                        && !part.starts_with('-')
                        && !part.ends_with('-')
                })
        });
        prefix_ok && !name.is_empty() && valid_name(name) && valid_name(value)
    }

    #[test]
    fn labels_are_valid_kubernetes_labels() {
        let mut g = generator(8);
        let namespaces = g.namespace_names();
        let mut objects: Vec<Value> = (0..3_000).map(|_| g.pod()).collect();
        for ns in &namespaces {
            objects.push(g.namespace(ns));
            objects.push(g.configmap(ns));
            objects.push(g.widget(ns));
        }
        for o in &objects {
            for (k, v) in as_map(&o["metadata"]["labels"]) {
                assert!(valid_label(k, v.as_str().unwrap()), "{k}={v}");
            }
            assert!(
                valid_name(o["metadata"]["name"].as_str().unwrap()) || o["kind"] == "Namespace"
            );
        }
        for ns in &namespaces {
            assert!(valid_name(ns) && ns.len() <= 63, "{ns}");
        }
    }

    #[test]
    fn status_mutations_leave_spec_and_metadata_but_managed_fields_alone() {
        let mut g = generator(3);
        let mut counts = BTreeMap::<String, usize>::new();
        for _ in 0..3_000 {
            let mut pod = g.pod();
            let before = pod.clone();
            let mutation = g.mutate_pod(&mut pod);
            *counts.entry(format!("{mutation:?}")).or_default() += 1;
            assert_ne!(pod, before, "{mutation:?} changed nothing");
            let mut meta = pod["metadata"].clone();
            let mut meta_before = before["metadata"].clone();
            as_map_mut(&mut meta).remove("managedFields");
            as_map_mut(&mut meta_before).remove("managedFields");
            match mutation {
                Mutation::StatusOnly => {
                    assert_eq!(pod["spec"], before["spec"]);
                    assert_eq!(meta, meta_before);
                    assert_ne!(pod["status"], before["status"]);
                }
                Mutation::Metadata => {
                    assert_eq!(pod["spec"], before["spec"]);
                    assert_eq!(pod["status"], before["status"]);
                    assert_ne!(meta, meta_before);
                }
                Mutation::Spec => {
                    assert_ne!(pod["spec"], before["spec"]);
                    assert_eq!(pod["status"], before["status"]);
                    assert_eq!(meta, meta_before);
                }
            }
        }
        // Mostly status, sometimes metadata, rarely spec.
        let (status, meta, spec) = (counts["StatusOnly"], counts["Metadata"], counts["Spec"]);
        assert!(status > meta && meta > spec && spec > 0, "{counts:?}");
    }

    #[test]
    fn repeated_mutations_keep_pods_valid() {
        let mut g = generator(4);
        let mut pods: Vec<Value> = (0..200).map(|_| g.pod()).collect();
        for i in 0..4_000 {
            g.mutate_pod(&mut pods[i % 200]);
        }
        for pod in &pods {
            assert_round_trips::<Pod>(pod);
            assert_managed_fields_name_existing_fields(pod);
        }
    }

    #[test]
    fn widget_and_config_map_mutations_say_what_changed() {
        let mut g = generator(3);
        for i in 0..500 {
            let mut w = g.widget("payments-prod");
            w["metadata"]["generation"] = 1.into();
            let before = w.clone();
            match g.mutate_widget(&mut w) {
                Mutation::StatusOnly => {
                    assert_eq!(w["spec"], before["spec"]);
                    assert_eq!(w["metadata"]["labels"], before["metadata"]["labels"]);
                    assert_eq!(w["status"]["observedGeneration"], 1);
                }
                Mutation::Spec => assert_ne!(w["spec"], before["spec"], "{i}"),
                Mutation::Metadata => {
                    assert_eq!(w["spec"], before["spec"]);
                    assert_ne!(w["metadata"]["labels"], before["metadata"]["labels"]);
                }
            }
            let mut cm = g.configmap("payments-prod");
            let before = cm.clone();
            match g.mutate_configmap(&mut cm) {
                Mutation::Spec => assert_ne!(cm["data"], before["data"]),
                Mutation::Metadata => {
                    assert_eq!(cm["data"], before["data"]);
                    assert_ne!(
                        cm["metadata"]["annotations"],
                        before["metadata"]["annotations"]
                    );
                }
                Mutation::StatusOnly => panic!("config maps have no status"),
            }
        }
    }

    /// Drops `null`s, which the typed structs cannot keep
    /// (`lastProbeTime: null` is what the API server writes).
    fn without_nulls(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| (k.clone(), without_nulls(v)))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
            v => v.clone(),
        }
    }

    /// Decodes `v` as `T` and encodes it again: a misspelt field would be
    /// dropped on the way and show up as a difference.
    fn assert_round_trips<T: serde::de::DeserializeOwned + serde::Serialize>(v: &Value) {
        let typed: T = serde_json::from_value(v.clone()).expect("decodes");
        let back = serde_json::to_value(&typed).unwrap();
        let expected = without_nulls(v);
        assert!(
            back == expected,
            "lost in the round trip:\n{}\n{}",
            back,
            expected
        );
    }

    #[test]
    fn objects_round_trip_through_k8s_openapi_without_losing_a_field() {
        let mut g = generator(12);
        for _ in 0..2_000 {
            assert_round_trips::<Pod>(&g.pod());
        }
        for ns in g.namespace_names() {
            assert_round_trips::<Namespace>(&g.namespace(&ns));
            assert_round_trips::<ConfigMap>(&g.configmap(&ns));
        }
    }

    /// Every `f:` and `k:` key of every managedFields entry names a field
    /// the object has.
    fn assert_managed_fields_name_existing_fields(object: &Value) {
        fn check(fields: &Value, value: &Value, path: &str) {
            for (key, child) in as_map(fields) {
                if key == "." {
                    continue;
                }
                let at = format!("{path}/{key}");
                if let Some(field) = key.strip_prefix("f:") {
                    let v = value
                        .get(field)
                        .unwrap_or_else(|| panic!("{at} not in the object"));
                    check(child, v, &at);
                } else if let Some(item) = key.strip_prefix("k:") {
                    let item: Map<String, Value> = serde_json::from_str(item).unwrap();
                    let found = value
                        .as_array()
                        .and_then(|a| a.iter().find(|e| item.iter().all(|(k, v)| e[k] == *v)))
                        .unwrap_or_else(|| panic!("{at} not in the object"));
                    check(child, found, &at);
                } else if let Some(item) = key.strip_prefix("v:") {
                    let item: Value = serde_json::from_str(item).unwrap();
                    assert!(
                        value.as_array().unwrap().contains(&item),
                        "{at} not in the object"
                    );
                }
            }
        }
        for entry in object["metadata"]["managedFields"].as_array().unwrap() {
            check(&entry["fieldsV1"], object, &format!("{}", entry["manager"]));
        }
    }

    #[test]
    fn managed_fields_name_only_fields_the_object_has() {
        let mut g = generator(13);
        for _ in 0..1_000 {
            assert_managed_fields_name_existing_fields(&g.pod());
        }
        for ns in g.namespace_names() {
            assert_managed_fields_name_existing_fields(&g.namespace(&ns));
            assert_managed_fields_name_existing_fields(&g.configmap(&ns));
            assert_managed_fields_name_existing_fields(&g.widget(&ns));
        }
    }

    #[test]
    fn one_namespace_and_one_node_still_make_pods() {
        let mut g = Generator::new(
            GeneratorConfig {
                seed: 0,
                namespaces: 1,
                nodes: 1,
            },
            base_time(),
        );
        assert_eq!(g.namespace_names(), ["kube-system"]);
        for _ in 0..100 {
            assert_eq!(g.pod()["metadata"]["namespace"], "kube-system");
        }
    }

    #[test]
    fn image_tags_bump_their_last_number() {
        assert_eq!(bump_tag("nginx:1.25.3"), "nginx:1.25.4");
        assert_eq!(
            bump_tag("docker.io/bitnami/redis:7.2.4-debian-12-r9"),
            "docker.io/bitnami/redis:7.2.4-debian-12-r10"
        );
        assert_eq!(bump_tag("registry:5000/app:v9"), "registry:5000/app:v10");
        assert_eq!(bump_tag("registry:5000/app"), "registry:5000/app-1");
    }

    #[test]
    #[ignore = "prints statistics; run with --ignored --nocapture"]
    fn print_statistics() {
        let mut g = generator(7);
        let pods: Vec<Value> = (0..10_000).map(|_| g.pod()).collect();
        let sizes: Vec<usize> = pods.iter().map(size).collect();
        let managed: Vec<usize> = pods
            .iter()
            .map(|p| size(&p["metadata"]["managedFields"]))
            .collect();
        let stats = |v: &[usize]| {
            (
                v.iter().sum::<usize>() / v.len(),
                *v.iter().min().unwrap(),
                *v.iter().max().unwrap(),
            )
        };
        println!("pod bytes mean/min/max {:?}", stats(&sizes));
        println!("managedFields bytes mean/min/max {:?}", stats(&managed));
        let mut by_kind = BTreeMap::<String, Vec<usize>>::new();
        for (p, s) in pods.iter().zip(&sizes) {
            by_kind
                .entry(owner_kind(p).to_owned())
                .or_default()
                .push(*s);
        }
        for (k, v) in by_kind {
            println!("{k}: {} pods, bytes mean/min/max {:?}", v.len(), stats(&v));
        }
        let mut by_ns = BTreeMap::<String, usize>::new();
        for p in &pods {
            *by_ns
                .entry(p["metadata"]["namespace"].as_str().unwrap().to_owned())
                .or_default() += 1;
        }
        let mut by_ns: Vec<_> = by_ns.into_iter().collect();
        by_ns.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        println!("pods per namespace, most first: {by_ns:?}");
        let (i, _) = sizes.iter().enumerate().max_by_key(|(_, s)| **s).unwrap();
        println!(
            "largest:\n{}",
            serde_json::to_string_pretty(&pods[i]).unwrap()
        );
        let ns = &g.namespace_names()[1];
        for example in [g.namespace(ns), g.configmap(ns), g.widget(ns)] {
            println!("{}", serde_json::to_string_pretty(&example).unwrap());
        }
    }

    #[test]
    #[ignore = "measures speed; run with --release --ignored --nocapture"]
    fn print_generation_speed() {
        let mut g = generator(7);
        let rss = || {
            let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
            statm
                .split(' ')
                .nth(1)
                .and_then(|p| p.parse::<usize>().ok())
                .unwrap_or(0)
                * 4096
        };
        let before = rss();
        let kept: Vec<String> = (0..10_000).map(|_| g.pod_json()).collect();
        println!(
            "resident memory per pod as JSON text: {} bytes",
            (rss().saturating_sub(before)) / kept.len()
        );
        drop(kept);
        let before = rss();
        let kept: Vec<Value> = (0..10_000).map(|_| g.pod()).collect();
        println!(
            "resident memory per pod Value: {} bytes",
            (rss() - before) / kept.len()
        );
        drop(kept);
        // Batches of 10,000 kept until timed, so that memory stays bounded
        // and freeing is not counted; the two kinds interleaved.
        let (mut json, mut value) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..10 {
            let start = Instant::now();
            let batch: Vec<String> = (0..10_000).map(|_| g.pod_json()).collect();
            json += start.elapsed();
            drop(std::hint::black_box(batch));
            let start = Instant::now();
            let batch: Vec<Value> = (0..10_000).map(|_| g.pod()).collect();
            value += start.elapsed();
            drop(std::hint::black_box(batch));
        }
        println!("100k pods as JSON text in {json:?}, as Value in {value:?}");
        // The floor for a Value: copying a finished pod, in the same batches.
        let pod = g.pod();
        let mut clone = Duration::ZERO;
        for _ in 0..10 {
            let start = Instant::now();
            let batch: Vec<Value> = (0..10_000).map(|_| pod.clone()).collect();
            clone += start.elapsed();
            drop(std::hint::black_box(batch));
        }
        println!("100k clones of one pod Value in {clone:?}");
    }
}
