//! Tests of the generator: determinism, sizes, owners, names, labels, mutations
//! and managedFields.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use chrono::TimeZone;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};

use super::random::SUFFIXES;
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
        assert!(valid_name(o["metadata"]["name"].as_str().unwrap()) || o["kind"] == "Namespace");
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
