//! The deployment under `deploy/` is what it claims to be:
//!
//! - every manifest of the kustomize base, components and overlays parses
//!   into its Kubernetes type with no field that the type does not know, and
//!   the kustomizations name only files that exist (and every file is used);
//! - `kubectl kustomize` renders the base and each overlay into the same
//!   checked manifests as this file's own small renderer (skipped without
//!   kubectl);
//! - a component that no overlay uses is rendered over the base, so that it
//!   is checked like the others;
//! - the ClusterRole grants exactly what the mounted config file's resources
//!   need: list and watch on each, create on TokenReviews and
//!   SubjectAccessReviews, impersonation of users and groups exactly where
//!   client certificates are on, nothing more;
//! - every rendering serves HTTPS from a mounted Secret, and its probes,
//!   Service, ServiceMonitor and scrape annotations all use HTTPS on the
//!   port kubecache listens on (the ServiceMonitor verifying the certificate
//!   with the Secret's CA, for the name a cert-manager Certificate covers);
//! - the Grafana dashboard names only metrics that the real binary's
//!   `/metrics` exports, and every shipped config file, with its
//!   rendering's TLS settings, is accepted by the real binary, which then
//!   serves HTTPS (and a wrong config is refused, naming the field).
//!
//! ## The offline renderer
//!
//! CI machines may have no kubectl, so the checks of rendered output run on
//! a small renderer of the kustomize subset the deploy files use
//! (`resources`, `components`, `namespace`, `configMapGenerator`, file
//! `patches` as strategic merges or `$patch: delete`). Its kustomization type
//! rejects any other field, and where kubectl exists its output is compared
//! with kubectl's, so it cannot drift from what kubectl does.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, Namespace, PodSpec, Service, ServiceAccount,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use common::process::Process;

// ---------------------------------------------------------------------------
// Files

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy")
        .canonicalize()
        .expect("deploy/ exists next to server/")
}

fn kubernetes_dir() -> PathBuf {
    deploy_dir().join("kubernetes")
}

/// A path for messages: relative to `deploy/`.
fn shown(path: &Path) -> String {
    let deploy = deploy_dir();
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    match path.strip_prefix(&deploy) {
        Ok(rest) => format!("deploy/{}", rest.display()),
        Err(_) => path.display().to_string(),
    }
}

/// The YAML documents of a text (empty documents left out).
fn yaml_documents(text: &str, source: &str) -> Result<Vec<Value>, String> {
    let mut docs = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let value = Value::deserialize(document).map_err(|e| format!("{source}: {e}"))?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", shown(path)))
}

/// Every directory under `deploy/kubernetes` holding a kustomization.yaml.
fn kustomization_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let mut todo = vec![kubernetes_dir()];
    while let Some(dir) = todo.pop() {
        if dir.join("kustomization.yaml").is_file() {
            dirs.push(dir.clone());
        }
        for entry in std::fs::read_dir(&dir).expect("readable deploy dir") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                todo.push(path);
            }
        }
    }
    dirs.sort();
    dirs
}

/// The kustomizations that render on their own (not components), and one
/// over the base for each component that none of them uses.
fn renderable_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = kustomization_dirs()
        .into_iter()
        .filter(|dir| load_kustomization(dir).kind == "Kustomization")
        .collect();
    dirs.extend(unused_component_renderings(&dirs));
    dirs
}

/// For each component that no kustomization in `dirs` uses, a
/// kustomization of the base plus that component, written under the
/// target's temporary directory (kustomize takes only relative paths).
fn unused_component_renderings(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let used: BTreeSet<PathBuf> = dirs
        .iter()
        .flat_map(|dir| {
            load_kustomization(dir)
                .components
                .iter()
                .map(|c| dir.join(c).canonicalize().expect("a component dir"))
                .collect::<Vec<_>>()
        })
        .collect();
    let root = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("deploy-components-{}", std::process::id()));
    let mut renderings = Vec::new();
    for component in kustomization_dirs() {
        if load_kustomization(&component).kind != "Component" || used.contains(&component) {
            continue;
        }
        let name = component
            .file_name()
            .expect("a named dir")
            .to_string_lossy();
        let dir = root.join(name.as_ref());
        std::fs::create_dir_all(&dir).expect("a temporary kustomization dir");
        let dir = dir.canonicalize().expect("the temporary dir");
        let text = format!(
            "# {} over the base (written by server/tests/deploy.rs)\n\
             apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
             resources:\n  - {}\ncomponents:\n  - {}\n",
            shown(&component),
            relative(&dir, &kubernetes_dir().join("base")),
            relative(&dir, &component),
        );
        // Written whole or not at all: tests render in parallel.
        let temporary = dir.join(format!(
            "kustomization.yaml.{:?}",
            std::thread::current().id()
        ));
        std::fs::write(&temporary, text).expect("writing a kustomization");
        std::fs::rename(&temporary, dir.join("kustomization.yaml")).expect("renaming it");
        renderings.push(dir);
    }
    renderings
}

/// `to` relative to the directory `from` (both absolute and canonical).
fn relative(from: &Path, to: &Path) -> String {
    let from: Vec<_> = from.components().collect();
    let to: Vec<_> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut path = PathBuf::new();
    for _ in common..from.len() {
        path.push("..");
    }
    for part in &to[common..] {
        path.push(part);
    }
    path.to_string_lossy().into_owned()
}

// ---------------------------------------------------------------------------
// Kustomizations: the subset the deploy files use, nothing else accepted.

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Kustomization {
    api_version: String,
    kind: String,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    components: Vec<String>,
    #[serde(default)]
    config_map_generator: Vec<ConfigMapGenerator>,
    #[serde(default)]
    patches: Vec<PatchFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigMapGenerator {
    name: String,
    #[serde(default)]
    behavior: Option<String>,
    files: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchFile {
    path: String,
}

fn load_kustomization(dir: &Path) -> Kustomization {
    let path = dir.join("kustomization.yaml");
    let k: Kustomization = serde_yaml::from_str(&read(&path)).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (this test's renderer knows resources, components, namespace, \
             configMapGenerator and file patches; teach it any other field first)",
            shown(&path)
        )
    });
    let expected = match k.kind.as_str() {
        "Kustomization" => "kustomize.config.k8s.io/v1beta1",
        "Component" => "kustomize.config.k8s.io/v1alpha1",
        other => panic!("{}: unknown kind {other}", shown(&path)),
    };
    assert_eq!(k.api_version, expected, "{}: apiVersion", shown(&path));
    k
}

/// A generator file entry: `file` or `key=file`; the key and the file.
fn generator_file(entry: &str) -> (String, String) {
    match entry.split_once('=') {
        Some((key, file)) => (key.to_string(), file.to_string()),
        None => {
            let key = Path::new(entry)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| entry.to_string());
            (key, entry.to_string())
        }
    }
}

// ---------------------------------------------------------------------------
// The offline renderer

/// One rendered document and where it came from.
#[derive(Clone, Debug)]
struct Doc {
    source: String,
    value: Value,
}

impl Doc {
    fn kind(&self) -> &str {
        self.value["kind"].as_str().unwrap_or("")
    }
    fn name(&self) -> &str {
        self.value["metadata"]["name"].as_str().unwrap_or("")
    }
    fn label(&self) -> String {
        format!("{} {}/{}", self.source, self.kind(), self.name())
    }
}

/// Kinds of the deploy files that have no namespace.
fn cluster_scoped(kind: &str) -> bool {
    // (cert-manager's ClusterIssuer would be too; the deploy files use none.)
    matches!(
        kind,
        "Namespace" | "ClusterRole" | "ClusterRoleBinding" | "CustomResourceDefinition"
    )
}

/// Renders a kustomization directory the way `kubectl kustomize` does, for
/// the subset of kustomize that [`Kustomization`] accepts.
fn render_offline(dir: &Path) -> Vec<Doc> {
    let k = load_kustomization(dir);
    assert_eq!(
        k.kind,
        "Kustomization",
        "{} is a component: render it from an overlay",
        shown(dir)
    );
    let mut docs = Vec::new();
    accumulate(dir, &k, &mut docs);
    docs
}

fn accumulate(dir: &Path, k: &Kustomization, docs: &mut Vec<Doc>) {
    for resource in &k.resources {
        let path = dir.join(resource);
        if path.is_dir() {
            docs.extend(render_offline(&path));
        } else {
            let source = shown(&path);
            let values = yaml_documents(&read(&path), &source).unwrap_or_else(|e| panic!("{e}"));
            docs.extend(values.into_iter().map(|value| Doc {
                source: source.clone(),
                value,
            }));
        }
    }
    for component in &k.components {
        let path = dir.join(component);
        let c = load_kustomization(&path);
        assert_eq!(c.kind, "Component", "{} is not a component", shown(&path));
        accumulate(&path, &c, docs);
    }
    for generator in &k.config_map_generator {
        let mut data = serde_json::Map::new();
        for entry in &generator.files {
            let (key, file) = generator_file(entry);
            data.insert(key, Value::String(read(&dir.join(file))));
        }
        let existing = docs
            .iter_mut()
            .find(|d| d.kind() == "ConfigMap" && d.name() == generator.name);
        match (generator.behavior.as_deref().unwrap_or("create"), existing) {
            ("create", None) => docs.push(Doc {
                source: format!("{} (configMapGenerator)", shown(dir)),
                value: serde_json::json!({
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": { "name": generator.name },
                    "data": data,
                }),
            }),
            ("replace", Some(doc)) => {
                doc.value["data"] = Value::Object(data);
                doc.source = format!("{} (configMapGenerator)", shown(dir));
            }
            ("merge", Some(doc)) => {
                let target = doc.value["data"].as_object_mut().expect("data");
                target.extend(data);
            }
            (behavior, existing) => panic!(
                "{}: configMapGenerator {} with behavior {behavior} and {} ConfigMap of that name",
                shown(dir),
                generator.name,
                if existing.is_some() { "a" } else { "no" }
            ),
        }
    }
    for patch in &k.patches {
        let path = dir.join(&patch.path);
        let source = shown(&path);
        for patch in yaml_documents(&read(&path), &source).unwrap_or_else(|e| panic!("{e}")) {
            apply_patch(docs, &patch, &source);
        }
    }
    if let Some(namespace) = &k.namespace {
        for doc in docs.iter_mut() {
            if !cluster_scoped(doc.kind()) {
                doc.value["metadata"]["namespace"] = Value::String(namespace.clone());
            }
        }
    }
}

/// Applies one strategic-merge patch document (or `$patch: delete`) to the
/// document of the same kind and name.
fn apply_patch(docs: &mut Vec<Doc>, patch: &Value, source: &str) {
    let kind = patch["kind"].as_str().unwrap_or("");
    let name = patch["metadata"]["name"].as_str().unwrap_or("");
    let namespace = patch["metadata"]["namespace"].as_str();
    let position = docs.iter().position(|d| {
        d.kind() == kind
            && d.name() == name
            && d.value["apiVersion"] == patch["apiVersion"]
            && namespace.is_none_or(|ns| d.value["metadata"]["namespace"].as_str() == Some(ns))
    });
    let Some(i) = position else {
        panic!("{source}: the patch of {kind}/{name} matches no resource")
    };
    if patch.get("$patch").and_then(Value::as_str) == Some("delete") {
        docs.remove(i);
    } else {
        strategic_merge(&mut docs[i].value, patch);
        docs[i].source = format!("{} + {source}", docs[i].source);
    }
}

/// Strategic merge as far as the deploy files need it: maps merge key by key
/// (`null` deletes), lists of objects that all have a `name` merge by name
/// (new items first), other lists are replaced.
fn strategic_merge(target: &mut Value, patch: &Value) {
    fn named(items: &[Value]) -> bool {
        items
            .iter()
            .all(|i| i.get("name").is_some_and(Value::is_string))
    }
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                if value.is_null() {
                    target.remove(key);
                } else if let Some(existing) = target.get_mut(key) {
                    strategic_merge(existing, value);
                } else {
                    target.insert(key.clone(), value.clone());
                }
            }
        }
        (Value::Array(target), Value::Array(patch)) if named(target) && named(patch) => {
            let mut added = Vec::new();
            for item in patch {
                match target.iter_mut().find(|t| t["name"] == item["name"]) {
                    Some(existing) => strategic_merge(existing, item),
                    None => added.push(item.clone()),
                }
            }
            // kustomize puts the new items first, in the patch's order.
            target.splice(0..0, added);
        }
        (target, patch) => *target = patch.clone(),
    }
}

// ---------------------------------------------------------------------------
// Typed check: deserialize, serialize back, compare.

/// prometheus-operator's ServiceMonitor, as far as kubecache uses it; any
/// other field is refused.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ServiceMonitor {
    api_version: String,
    kind: String,
    metadata: ObjectMeta,
    spec: ServiceMonitorSpec,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ServiceMonitorSpec {
    selector: MatchLabels,
    endpoints: Vec<ServiceMonitorEndpoint>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace_selector: Option<NamespaceSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    job_label: Option<String>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct MatchLabels {
    match_labels: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NamespaceSelector {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    match_names: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    any: Option<bool>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ServiceMonitorEndpoint {
    port: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    scheme: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    interval: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    scrape_timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tls_config: Option<ServiceMonitorTls>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bearer_token_file: Option<String>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ServiceMonitorTls {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    server_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    insecure_skip_verify: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ca: Option<SecretOrConfigMap>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SecretOrConfigMap {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    secret: Option<KeySelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    config_map: Option<KeySelector>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct KeySelector {
    name: String,
    key: String,
}

/// cert-manager's Issuer (`cert-manager.io/v1`), as far as kubecache uses it.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Issuer {
    api_version: String,
    kind: String,
    metadata: ObjectMeta,
    spec: IssuerSpec,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct IssuerSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    self_signed: Option<BTreeMap<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ca: Option<CaIssuer>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CaIssuer {
    secret_name: String,
}

/// cert-manager's Certificate (`cert-manager.io/v1`), as far as kubecache
/// uses it.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Certificate {
    api_version: String,
    kind: String,
    metadata: ObjectMeta,
    spec: CertificateSpec,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CertificateSpec {
    secret_name: String,
    issuer_ref: IssuerRef,
    #[serde(default, rename = "isCA", skip_serializing_if = "Option::is_none")]
    is_ca: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    common_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dns_names: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    duration: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    renew_before: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    usages: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    private_key: Option<CertificatePrivateKey>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct IssuerRef {
    name: String,
    kind: String,
    group: String,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CertificatePrivateKey {
    algorithm: String,
    size: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rotation_policy: Option<String>,
}

/// What is wrong with a manifest, checked against its type: fields the type
/// does not know (lost by a deserialize/serialize round trip), required
/// fields left out (added by the round trip), values read differently.
fn typed_problems(doc: &Value) -> Vec<String> {
    let api_version = doc["apiVersion"].as_str().unwrap_or("");
    let kind = doc["kind"].as_str().unwrap_or("");
    match (api_version, kind) {
        ("v1", "Namespace") => round_trip::<Namespace>(doc),
        ("v1", "ServiceAccount") => round_trip::<ServiceAccount>(doc),
        ("v1", "ConfigMap") => round_trip::<ConfigMap>(doc),
        ("v1", "Service") => round_trip::<Service>(doc),
        ("apps/v1", "StatefulSet") => round_trip::<StatefulSet>(doc),
        ("policy/v1", "PodDisruptionBudget") => round_trip::<PodDisruptionBudget>(doc),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => round_trip::<ClusterRole>(doc),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            round_trip::<ClusterRoleBinding>(doc)
        }
        ("monitoring.coreos.com/v1", "ServiceMonitor") => round_trip::<ServiceMonitor>(doc),
        ("cert-manager.io/v1", "Issuer") => round_trip::<Issuer>(doc),
        ("cert-manager.io/v1", "Certificate") => round_trip::<Certificate>(doc),
        _ => vec![format!(
            "no type known for apiVersion {api_version:?} kind {kind:?}"
        )],
    }
}

fn round_trip<T: DeserializeOwned + Serialize>(doc: &Value) -> Vec<String> {
    let typed: T = match serde_json::from_value(doc.clone()) {
        Ok(typed) => typed,
        Err(e) => return vec![format!("does not parse: {e}")],
    };
    let back = serde_json::to_value(&typed).expect("a typed object serializes");
    let mut problems = Vec::new();
    compare("", doc, &back, &mut problems);
    problems
}

fn compare(path: &str, original: &Value, back: &Value, problems: &mut Vec<String>) {
    match (original, back) {
        (Value::Object(original), Value::Object(back)) => {
            for (key, value) in original {
                let at = format!("{path}.{key}");
                match back.get(key) {
                    Some(back) => compare(&at, value, back, problems),
                    None => problems.push(format!("{at}: unknown field")),
                }
            }
            for key in back.keys().filter(|k| !original.contains_key(*k)) {
                problems.push(format!("{path}.{key}: required field missing"));
            }
        }
        (Value::Array(original), Value::Array(back)) if original.len() == back.len() => {
            for (i, (original, back)) in original.iter().zip(back).enumerate() {
                compare(&format!("{path}[{i}]"), original, back, problems);
            }
        }
        _ if original == back => {}
        _ => problems.push(format!("{path}: {original} reads back as {back}")),
    }
}

/// The typed problems of every document, one line each.
fn typed_report(docs: &[Doc]) -> Vec<String> {
    docs.iter()
        .flat_map(|doc| {
            typed_problems(&doc.value)
                .into_iter()
                .map(move |p| format!("{}: {p}", doc.label()))
        })
        .collect()
}

// ---------------------------------------------------------------------------
// kubectl

/// `kubectl kustomize DIR`, or why it cannot run here.
fn kubectl_kustomize(dir: &Path) -> Result<Vec<Doc>, String> {
    let output = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .map_err(|e| format!("kubectl: {e}"))?;
    assert!(
        output.status.success(),
        "kubectl kustomize {} failed: {}",
        shown(dir),
        String::from_utf8_lossy(&output.stderr)
    );
    let source = format!("kubectl kustomize {}", shown(dir));
    let text = String::from_utf8(output.stdout).expect("kubectl writes UTF-8");
    let values = yaml_documents(&text, &source).unwrap_or_else(|e| panic!("{e}"));
    Ok(values
        .into_iter()
        .map(|value| Doc {
            source: source.clone(),
            value,
        })
        .collect())
}

fn kubectl_available() -> bool {
    match Command::new("kubectl")
        .args(["version", "--client"])
        .output()
    {
        Ok(output) if output.status.success() => true,
        Ok(output) => {
            eprintln!(
                "skipped: `kubectl version --client` failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            false
        }
        Err(e) => {
            eprintln!("skipped: kubectl is not on PATH ({e})");
            false
        }
    }
}

/// A document's identity: apiVersion, kind, namespace, name (generated
/// names without their hash suffix).
fn identity(doc: &Value, generated: &BTreeSet<String>) -> String {
    let name = doc["metadata"]["name"].as_str().unwrap_or("");
    format!(
        "{} {} {}/{}",
        doc["apiVersion"].as_str().unwrap_or(""),
        doc["kind"].as_str().unwrap_or(""),
        doc["metadata"]["namespace"].as_str().unwrap_or(""),
        without_hash(name, generated)
    )
}

/// `kubecache-config-7f6b9k2m4c` -> `kubecache-config` for generated names.
fn without_hash<'a>(name: &'a str, generated: &BTreeSet<String>) -> &'a str {
    match name.rsplit_once('-') {
        Some((base, hash))
            if generated.contains(base)
                && hash.len() == 10
                && hash
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()) =>
        {
            base
        }
        _ => name,
    }
}

/// Every string that is a generated name with a hash loses the hash.
fn strip_hashes(value: &mut Value, generated: &BTreeSet<String>) {
    match value {
        Value::String(s) => {
            let stripped = without_hash(s, generated).to_string();
            *s = stripped;
        }
        Value::Array(items) => items.iter_mut().for_each(|v| strip_hashes(v, generated)),
        Value::Object(map) => map.values_mut().for_each(|v| strip_hashes(v, generated)),
        _ => {}
    }
}

/// The first path where two documents differ.
fn first_difference(path: &str, a: &Value, b: &Value) -> Option<String> {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            keys.into_iter().find_map(|k| match (a.get(k), b.get(k)) {
                (Some(x), Some(y)) => first_difference(&format!("{path}.{k}"), x, y),
                (x, y) => Some(format!("{path}.{k}: {x:?} vs {y:?}")),
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (x, y))| first_difference(&format!("{path}[{i}]"), x, y)),
        _ if a == b => None,
        _ => Some(format!("{path}: {a} vs {b}")),
    }
}

// ---------------------------------------------------------------------------
// What a rendering runs: the StatefulSet, its config file, its permissions.

/// The config file the StatefulSet's container reads: `--config PATH`, the
/// volume mounted over PATH's directory, its ConfigMap, the key.
fn mounted_config(docs: &[Doc]) -> Result<String, String> {
    let workload = single::<StatefulSet>(docs, "StatefulSet")?;
    let namespace = workload.metadata.namespace.clone().unwrap_or_default();
    let pod = workload
        .spec
        .and_then(|s| s.template.spec)
        .ok_or("the StatefulSet has no pod spec")?;
    let container = pod
        .containers
        .iter()
        .find(|c| c.name == "kubecache")
        .ok_or("the StatefulSet has no container named kubecache")?;
    let args = container.args.clone().unwrap_or_default();
    let config_path = args
        .iter()
        .position(|a| a == "--config")
        .and_then(|i| args.get(i + 1).cloned())
        .or_else(|| {
            args.iter()
                .find_map(|a| a.strip_prefix("--config=").map(str::to_string))
        })
        .ok_or("the kubecache container has no --config argument")?;
    let mount = container
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| config_path.starts_with(&format!("{}/", m.mount_path)))
        .ok_or(format!("nothing is mounted over {config_path}"))?;
    let key = &config_path[mount.mount_path.len() + 1..];
    let volume = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .ok_or(format!("no volume named {}", mount.name))?;
    let source = volume
        .config_map
        .as_ref()
        .ok_or(format!("volume {} is not a ConfigMap", volume.name))?;
    if source.items.is_some() {
        return Err(format!(
            "volume {}: items are not followed here",
            volume.name
        ));
    }
    let name = source.name.clone();
    let config_map = docs
        .iter()
        .filter(|d| d.kind() == "ConfigMap")
        .map(|d| serde_json::from_value::<ConfigMap>(d.value.clone()).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .find(|c| {
            c.metadata.name == Some(name.clone()) && c.metadata.namespace == Some(namespace.clone())
        })
        .ok_or(format!("no ConfigMap {namespace}/{name}"))?;
    config_map
        .data
        .and_then(|mut data| data.remove(key))
        .ok_or(format!("ConfigMap {name} has no key {key}"))
}

/// The StatefulSet's namespace, pod spec and kubecache container.
fn kubecache_container(docs: &[Doc]) -> Result<(String, PodSpec, Container), String> {
    let workload = single::<StatefulSet>(docs, "StatefulSet")?;
    let namespace = workload.metadata.namespace.clone().unwrap_or_default();
    let pod = workload
        .spec
        .and_then(|s| s.template.spec)
        .ok_or("the StatefulSet has no pod spec")?;
    let container = pod
        .containers
        .iter()
        .find(|c| c.name == "kubecache")
        .cloned()
        .ok_or("the StatefulSet has no container named kubecache")?;
    Ok((namespace, pod, container))
}

/// A setting of the kubecache container as the binary resolves it: its
/// flag, else its environment variable, else the config file's key; empty
/// is unset.
fn setting(docs: &[Doc], flag: &str, env: &str, key: &str) -> Result<Option<String>, String> {
    let (_, _, container) = kubecache_container(docs)?;
    let args = container.args.clone().unwrap_or_default();
    let from_args = args
        .iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1).cloned())
        .or_else(|| {
            args.iter()
                .find_map(|a| a.strip_prefix(&format!("{flag}=")).map(str::to_string))
        });
    let from_env = || {
        container
            .env
            .iter()
            .flatten()
            .find(|e| e.name == env)
            .and_then(|e| e.value.clone())
    };
    let from_file = || -> Result<Option<String>, String> {
        let config: Value = serde_yaml::from_str(&mounted_config(docs)?)
            .map_err(|e| format!("the config file: {e}"))?;
        Ok(config[key].as_str().map(str::to_string))
    };
    let value = match from_args.or_else(from_env) {
        Some(value) => Some(value),
        None => from_file()?,
    };
    Ok(value.filter(|v| !v.is_empty()))
}

/// The TLS files of a rendering: certificate, key, client CA.
struct TlsSettings {
    cert: Option<String>,
    key: Option<String>,
    client_ca: Option<String>,
}

fn tls_settings(docs: &[Doc]) -> Result<TlsSettings, String> {
    Ok(TlsSettings {
        cert: setting(
            docs,
            "--tls-cert-file",
            "KUBECACHE_TLS_CERT_FILE",
            "tlsCertFile",
        )?,
        key: setting(
            docs,
            "--tls-private-key-file",
            "KUBECACHE_TLS_PRIVATE_KEY_FILE",
            "tlsPrivateKeyFile",
        )?,
        client_ca: setting(
            docs,
            "--client-ca-file",
            "KUBECACHE_CLIENT_CA_FILE",
            "clientCAFile",
        )?,
    })
}

/// The state directory of a rendering (warm restart), if it has one.
fn state_dir(docs: &[Doc]) -> Result<Option<String>, String> {
    setting(docs, "--state-dir", "KUBECACHE_STATE_DIR", "stateDir")
}

/// What is wrong with where a rendering keeps its state, empty when right:
/// a state directory on a volume of each replica's own that outlives the
/// pod (a volumeClaimTemplate of the StatefulSet), at least two replicas,
/// and a PodDisruptionBudget of the pods that evicts one at a time.
fn state_problems(docs: &[Doc]) -> Result<Vec<String>, String> {
    let mut problems = Vec::new();
    let Some(dir) = state_dir(docs)? else {
        return Ok(vec!["no state directory: every restart lists".into()]);
    };
    let (_, pod, container) = kubecache_container(docs)?;
    let workload = single::<StatefulSet>(docs, "StatefulSet")?;
    let spec = workload.spec.ok_or("the StatefulSet has no spec")?;
    let mount = container
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| dir == m.mount_path || dir.starts_with(&format!("{}/", m.mount_path)));
    match mount {
        None => problems.push(format!("nothing is mounted over the state directory {dir}")),
        Some(mount) => {
            let claimed = spec
                .volume_claim_templates
                .iter()
                .flatten()
                .any(|t| t.metadata.name.as_deref() == Some(&mount.name));
            let shadowed = pod.volumes.iter().flatten().any(|v| v.name == mount.name);
            if !claimed || shadowed {
                problems.push(format!(
                    "the state directory {dir} is on volume {}, not a volumeClaimTemplate of \
                     the StatefulSet: it does not outlive the pod",
                    mount.name
                ));
            }
            if mount.read_only == Some(true) {
                problems.push(format!("the state directory {dir} is mounted read-only"));
            }
        }
    }
    if spec.replicas.unwrap_or(1) < 2 {
        problems.push("fewer than 2 replicas: a rollout stops serving".into());
    }
    let labels = pod_labels(docs)?;
    let budgets: Vec<PodDisruptionBudget> = typed_all(docs, "PodDisruptionBudget")?;
    let evicts_one = budgets.iter().any(|b| {
        let spec = b.spec.clone().unwrap_or_default();
        let selects = spec
            .selector
            .and_then(|s| s.match_labels)
            .is_some_and(|wanted| wanted.iter().all(|(k, v)| labels.get(k) == Some(v)));
        selects
            && spec.min_available.is_none()
            && spec.max_unavailable
                == Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1))
    });
    if !evicts_one {
        problems.push("no PodDisruptionBudget of maxUnavailable 1 selects the pods".into());
    }
    Ok(problems)
}

/// The labels of the StatefulSet's pods.
fn pod_labels(docs: &[Doc]) -> Result<BTreeMap<String, String>, String> {
    let workload = single::<StatefulSet>(docs, "StatefulSet")?;
    Ok(workload
        .spec
        .and_then(|s| s.template.metadata)
        .and_then(|m| m.labels)
        .unwrap_or_default())
}

/// Where a file the container reads comes from: the kind (`Secret` or
/// `ConfigMap`) and name of the volume's source, and the key.
fn mounted_file(docs: &[Doc], path: &str) -> Result<(&'static str, String, String), String> {
    let (_, pod, container) = kubecache_container(docs)?;
    let mount = container
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| path.starts_with(&format!("{}/", m.mount_path)))
        .ok_or(format!("nothing is mounted over {path}"))?;
    let key = path[mount.mount_path.len() + 1..].to_string();
    let volume = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .ok_or(format!("no volume named {}", mount.name))?;
    match (&volume.secret, &volume.config_map) {
        (Some(secret), None) if secret.items.is_none() => Ok((
            "Secret",
            secret.secret_name.clone().unwrap_or_default(),
            key,
        )),
        (None, Some(config_map)) if config_map.items.is_none() => {
            Ok(("ConfigMap", config_map.name.clone(), key))
        }
        _ => Err(format!(
            "volume {}: not a Secret or ConfigMap without items",
            volume.name
        )),
    }
}

/// The one document of a kind, typed.
fn single<T: DeserializeOwned>(docs: &[Doc], kind: &str) -> Result<T, String> {
    let matching: Vec<&Doc> = docs.iter().filter(|d| d.kind() == kind).collect();
    match matching.as_slice() {
        [doc] => serde_json::from_value(doc.value.clone()).map_err(|e| format!("{kind}: {e}")),
        other => Err(format!("{} {kind} documents, expected 1", other.len())),
    }
}

/// The config file's `resources`, as far as permissions go.
#[derive(Deserialize)]
struct ConfigResources {
    resources: Vec<ConfiguredResource>,
}

#[derive(Deserialize)]
struct ConfiguredResource {
    resource: String,
}

/// `pods` -> ("", "pods"); `widgets.example.com` -> ("example.com", "widgets").
fn group_resource(name: &str) -> (String, String) {
    match name.split_once('.') {
        Some((resource, group)) => (group.to_string(), resource.to_string()),
        None => (String::new(), name.to_string()),
    }
}

type Grant = (String, String, String);

/// What kubecache needs: list and watch on each configured resource, create
/// on the two reviews.
fn needed_grants(config: &str) -> Result<BTreeSet<Grant>, String> {
    let config: ConfigResources =
        serde_yaml::from_str(config).map_err(|e| format!("the config file: {e}"))?;
    let mut needed = BTreeSet::new();
    for r in &config.resources {
        let (group, resource) = group_resource(&r.resource);
        for verb in ["list", "watch"] {
            needed.insert((group.clone(), resource.clone(), verb.to_string()));
        }
    }
    needed.insert((
        "authentication.k8s.io".into(),
        "tokenreviews".into(),
        "create".into(),
    ));
    needed.insert((
        "authorization.k8s.io".into(),
        "subjectaccessreviews".into(),
        "create".into(),
    ));
    Ok(needed)
}

/// What the StatefulSet's service account is granted through the
/// ClusterRoleBindings, as (group, resource, verb), `resource/name` for a
/// rule narrowed to names; wildcards and non-resource URLs are refused.
fn granted(docs: &[Doc]) -> Result<BTreeSet<Grant>, String> {
    let workload = single::<StatefulSet>(docs, "StatefulSet")?;
    let namespace = workload.metadata.namespace.clone().unwrap_or_default();
    let account = workload
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|p| p.service_account_name)
        .ok_or("the StatefulSet names no serviceAccountName")?;
    let accounts: Vec<ServiceAccount> = typed_all(docs, "ServiceAccount")?;
    if !accounts.iter().any(|a| {
        a.metadata.name.as_deref() == Some(&account)
            && a.metadata.namespace.as_deref() == Some(&namespace)
    }) {
        return Err(format!("no ServiceAccount {namespace}/{account}"));
    }
    let roles: Vec<ClusterRole> = typed_all(docs, "ClusterRole")?;
    let bindings: Vec<ClusterRoleBinding> = typed_all(docs, "ClusterRoleBinding")?;
    let mut grants = BTreeSet::new();
    for binding in &bindings {
        let binds_account = binding.subjects.iter().flatten().any(|s| {
            s.kind == "ServiceAccount"
                && s.name == account
                && s.namespace.as_deref() == Some(&namespace)
        });
        if !binds_account {
            continue;
        }
        if binding.role_ref.kind != "ClusterRole" {
            return Err(format!("binding to a {}", binding.role_ref.kind));
        }
        let role = roles
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(&binding.role_ref.name))
            .ok_or(format!("no ClusterRole {}", binding.role_ref.name))?;
        if role.aggregation_rule.is_some() {
            return Err("an aggregated ClusterRole grants what others add".into());
        }
        for rule in role.rules.iter().flatten() {
            if rule.non_resource_urls.is_some() {
                return Err(format!("a rule with nonResourceURLs: {rule:?}"));
            }
            let groups = rule.api_groups.clone().unwrap_or_default();
            let resources = rule.resources.clone().unwrap_or_default();
            for text in groups.iter().chain(&resources).chain(&rule.verbs) {
                if text.contains('*') {
                    return Err(format!("a wildcard in {rule:?}"));
                }
            }
            // A rule narrowed to names grants `resource/name` of each.
            let resources: Vec<String> = match &rule.resource_names {
                None => resources,
                Some(names) => resources
                    .iter()
                    .flat_map(|r| names.iter().map(move |n| format!("{r}/{n}")))
                    .collect(),
            };
            for group in &groups {
                for resource in &resources {
                    for verb in &rule.verbs {
                        grants.insert((group.clone(), resource.clone(), verb.clone()));
                    }
                }
            }
        }
    }
    Ok(grants)
}

fn typed_all<T: DeserializeOwned>(docs: &[Doc], kind: &str) -> Result<Vec<T>, String> {
    docs.iter()
        .filter(|d| d.kind() == kind)
        .map(|d| serde_json::from_value(d.value.clone()).map_err(|e| format!("{kind}: {e}")))
        .collect()
}

/// Missing and extra grants of a rendering, empty when exact: what the
/// config file needs, impersonation of users and groups where client
/// certificates are on (their requests are passed through as
/// impersonation), and `get` of the kube-system namespace with a state
/// directory (warm restart identifies the cluster by its UID).
fn permission_problems(docs: &[Doc]) -> Result<Vec<String>, String> {
    let mut needed = needed_grants(&mounted_config(docs)?)?;
    if state_dir(docs)?.is_some() {
        needed.insert((String::new(), "namespaces/kube-system".into(), "get".into()));
    }
    if tls_settings(docs)?.client_ca.is_some() {
        for resource in ["users", "groups"] {
            needed.insert((String::new(), resource.into(), "impersonate".into()));
        }
    }
    let granted = granted(docs)?;
    let show = |(g, r, v): &Grant| {
        if g.is_empty() {
            format!("{v} {r}")
        } else {
            format!("{v} {r}.{g}")
        }
    };
    let mut problems: Vec<String> = needed
        .difference(&granted)
        .map(|g| format!("missing: {}", show(g)))
        .collect();
    problems.extend(
        granted
            .difference(&needed)
            .map(|g| format!("more than needed: {}", show(g))),
    );
    Ok(problems)
}

/// What is wrong with how a rendering serves HTTPS, empty when right.
fn https_problems(docs: &[Doc]) -> Result<Vec<String>, String> {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let mut problems = Vec::new();
    let tls = tls_settings(docs)?;
    let (Some(cert), Some(key)) = (&tls.cert, &tls.key) else {
        return Ok(vec!["serves plain HTTP: no certificate and key".into()]);
    };
    let (cert_kind, secret, cert_key) = mounted_file(docs, cert)?;
    let key_file = mounted_file(docs, key)?;
    if cert_kind != "Secret" || key_file != ("Secret", secret.clone(), "tls.key".into()) {
        problems.push(format!(
            "the certificate and key are not tls.crt and tls.key of one Secret: {cert_kind} \
             {secret} {cert_key}, {key_file:?}"
        ));
    }
    if cert_key != "tls.crt" {
        problems.push(format!("the certificate is {cert_key} of Secret {secret}"));
    }
    if let Some(client_ca) = &tls.client_ca {
        mounted_file(docs, client_ca)?;
    }
    let (namespace, _, container) = kubecache_container(docs)?;
    let service = single::<Service>(docs, "Service")?;
    let service_name = format!(
        "{}.{namespace}.svc",
        service.metadata.name.clone().unwrap_or_default()
    );
    // A certificate that cert-manager writes into the Secret is for the
    // Service's name.
    let certificates: Vec<Certificate> = typed_all(docs, "Certificate")?;
    if let Some(certificate) = certificates.iter().find(|c| c.spec.secret_name == secret) {
        let names = certificate.spec.dns_names.clone().unwrap_or_default();
        if !names.contains(&service_name) {
            problems.push(format!(
                "the Certificate of Secret {secret} is not for {service_name}: {names:?}"
            ));
        }
    }
    // Probes, Service and scrapes use HTTPS on the port kubecache listens on.
    let listen =
        setting(docs, "--listen", "KUBECACHE_LISTEN", "listen")?.ok_or("no listen address")?;
    let port: i32 = listen
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse().ok())
        .ok_or(format!("listen {listen:?} has no port"))?;
    let port_name = container
        .ports
        .iter()
        .flatten()
        .find(|p| p.container_port == port)
        .ok_or(format!("no containerPort {port}"))?
        .name
        .clone()
        .unwrap_or_default();
    let is_kubecache_port = |target: &IntOrString| match target {
        IntOrString::Int(number) => *number == port,
        IntOrString::String(name) => *name == port_name,
    };
    for (which, probe) in [
        ("readinessProbe", &container.readiness_probe),
        ("livenessProbe", &container.liveness_probe),
    ] {
        match probe.as_ref().and_then(|p| p.http_get.as_ref()) {
            Some(get) if get.scheme.as_deref() == Some("HTTPS") && is_kubecache_port(&get.port) => {
            }
            other => problems.push(format!(
                "{which}: not an HTTPS GET on port {port}: {other:?}"
            )),
        }
    }
    let service_port = service
        .spec
        .iter()
        .flat_map(|spec| spec.ports.iter().flatten())
        .find(|p| p.target_port.as_ref().is_some_and(is_kubecache_port))
        .ok_or(format!("the Service sends to no port {port}"))?;
    for monitor in typed_all::<ServiceMonitor>(docs, "ServiceMonitor")? {
        for endpoint in &monitor.spec.endpoints {
            let verified = endpoint.tls_config.as_ref().is_some_and(|tls| {
                tls.server_name.as_deref() == Some(service_name.as_str())
                    && tls
                        .ca
                        .as_ref()
                        .and_then(|ca| ca.secret.as_ref())
                        .is_some_and(|ca| ca.name == secret && ca.key == "ca.crt")
            });
            if Some(&endpoint.port) != service_port.name.as_ref()
                || endpoint.scheme.as_deref() != Some("https")
                || !verified
            {
                problems.push(format!(
                    "ServiceMonitor: scrape not over HTTPS on the Service's port {:?}, verified \
                     with ca.crt of Secret {secret} for {service_name}: {endpoint:?}",
                    service_port.name
                ));
            }
        }
    }
    let workload = single::<StatefulSet>(docs, "StatefulSet")?;
    let annotations = workload
        .spec
        .and_then(|s| s.template.metadata)
        .and_then(|m| m.annotations)
        .unwrap_or_default();
    if annotations.contains_key("prometheus.io/scrape") {
        let wanted = [
            ("prometheus.io/port", port.to_string()),
            ("prometheus.io/scheme", "https".to_string()),
        ];
        for (annotation, value) in wanted {
            if annotations.get(annotation) != Some(&value) {
                problems.push(format!(
                    "annotation {annotation}: {:?}, not {value:?}",
                    annotations.get(annotation)
                ));
            }
        }
    }
    Ok(problems)
}

// ---------------------------------------------------------------------------
// The real binary

/// A running `kubecache`, reached over HTTPS or plain HTTP.
struct Kubecache {
    process: Process,
    /// How to reach it over HTTPS; plain HTTP if `None`.
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl Kubecache {
    /// Starts the binary with these arguments plus `--listen` on a free port.
    fn start(args: &[&str]) -> Kubecache {
        Self::start_with(args, &[], None)
    }

    /// The same with these environment variables, reached over HTTPS with
    /// `tls` if given.
    fn start_with(
        args: &[&str],
        env: &[(&str, &Path)],
        tls: Option<Arc<rustls::ClientConfig>>,
    ) -> Kubecache {
        Kubecache {
            process: Process::start(args, env),
            tls,
        }
    }

    fn addr(&self) -> SocketAddr {
        self.process.addr
    }

    /// What it printed so far.
    fn output(&self) -> String {
        self.process.output()
    }

    /// Waits for `/readyz` to answer 200.
    fn wait_ready(&mut self, within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.process.try_wait() {
                std::thread::sleep(Duration::from_millis(200)); // let the output drain
                return Err(format!(
                    "kubecache exited ({status}) before it was ready; its output:\n{}",
                    self.output()
                ));
            }
            if let Ok((200, _)) = self.get("/readyz") {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "kubecache not ready within {within:?}; its output:\n{}",
                    self.output()
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits for the process to exit; its status, or None if it still runs.
    fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(status) = self.process.try_wait() {
                std::thread::sleep(Duration::from_millis(200)); // let the output drain
                return Some(status);
            }
            if let Ok((200, _)) = self.get("/readyz") {
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    }

    /// GET, over HTTPS if it serves it: the code and the body.
    fn get(&self, path: &str) -> std::io::Result<(u16, Vec<u8>)> {
        http_get_via(self.addr(), self.tls.as_ref(), path)
    }

    /// GET, answered 200, the body.
    fn get_ok(&self, path: &str) -> Vec<u8> {
        match self.get(path) {
            Ok((200, body)) => body,
            Ok((code, body)) => panic!(
                "GET {path}: {code} {}\nkubecache's output:\n{}",
                String::from_utf8_lossy(&body),
                self.output()
            ),
            Err(e) => panic!("GET {path}: {e}\nkubecache's output:\n{}", self.output()),
        }
    }
}

/// A plain HTTP/1.0 GET: the status code and the body (read until the
/// server closes the connection).
fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, Vec<u8>)> {
    http_get_via(addr, None, path)
}

/// The bearer token of the `--simulate` demo policy's administrator: the
/// binary authorizes every read by default.
const ADMIN_TOKEN: &str = "admin-token";

/// The same, over TLS with `tls` if given (server name 127.0.0.1), as the
/// demo administrator.
fn http_get_via(
    addr: SocketAddr,
    tls: Option<&Arc<rustls::ClientConfig>>,
    path: &str,
) -> std::io::Result<(u16, Vec<u8>)> {
    http_get_as(addr, tls, path, Some(ADMIN_TOKEN))
}

/// The same, with `token` or without credentials.
fn http_get_as(
    addr: SocketAddr,
    tls: Option<&Arc<rustls::ClientConfig>>,
    path: &str,
    token: Option<&str>,
) -> std::io::Result<(u16, Vec<u8>)> {
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    match tls {
        None => exchange(stream, addr, path, token),
        Some(config) => {
            let name = rustls::pki_types::ServerName::from(addr.ip());
            let connection = rustls::ClientConnection::new(config.clone(), name)
                .map_err(std::io::Error::other)?;
            exchange(
                rustls::StreamOwned::new(connection, stream),
                addr,
                path,
                token,
            )
        }
    }
}

fn exchange(
    mut stream: impl Read + Write,
    addr: SocketAddr,
    path: &str,
    token: Option<&str>,
) -> std::io::Result<(u16, Vec<u8>)> {
    let authorization =
        token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: application/json\r\n{authorization}\r\n"
    )?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let invalid =
        |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let end = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| invalid("no end of headers"))?;
    let head = String::from_utf8_lossy(&response[..end]).into_owned();
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| invalid("no status code"))?;
    let mut body = response[end + 4..].to_vec();
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    if chunked {
        body = dechunk(&body).ok_or_else(|| invalid("bad chunked body"))?;
    }
    Ok((code, body))
}

fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&body[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(body.get(..size)?);
        body = body.get(size + 2..)?;
    }
}

/// Certificates for a binary serving HTTPS on 127.0.0.1, in the test's
/// temporary directory: a CA, a serving certificate and key, and a client
/// certificate of the same CA.
struct TestCertificates {
    dir: PathBuf,
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    client: rustls::ClientConfig,
}

impl TestCertificates {
    fn new(name: &str) -> TestCertificates {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("deploy-tls-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary dir");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("a key"))
            .expect("a CA");
        let sign = |names: Vec<String>| {
            let key = KeyPair::generate().expect("a key");
            let mut params = CertificateParams::new(names).expect("params");
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, "kubecache-test");
            // As a client certificate: a user of the demo policy's
            // cluster-admin group, so that its reads are allowed.
            params
                .distinguished_name
                .push(rcgen::DnType::OrganizationName, "system:masters");
            let cert = params.signed_by(&key, &ca).expect("a certificate");
            (cert, key)
        };
        let (server, server_key) = sign(vec!["127.0.0.1".into()]);
        let (client, client_key) = sign(Vec::new());
        let write = |file: &str, text: &str| {
            let path = dir.join(file);
            std::fs::write(&path, text).expect("writing a certificate");
            path
        };
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.der().clone()).expect("the CA");
        let client = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_client_auth_cert(
            vec![client.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(client_key.serialize_der().into()),
        )
        .expect("a client certificate");
        TestCertificates {
            ca: write("ca.crt", &ca.pem()),
            cert: write("tls.crt", &server.pem()),
            key: write("tls.key", &server_key.serialize_pem()),
            dir,
            client,
        }
    }
}

impl Drop for TestCertificates {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A config file in the test's temporary directory.
fn temp_config(name: &str, text: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("deploy-{name}-{}.yaml", std::process::id()));
    std::fs::write(&path, text).expect("writing a temporary config file");
    path
}

// ---------------------------------------------------------------------------
// Prometheus text

/// Metric families (by `# TYPE`) and sample names of a scrape.
struct Scrape {
    types: BTreeMap<String, String>,
    samples: BTreeSet<String>,
}

fn parse_scrape(text: &str) -> Scrape {
    let mut types = BTreeMap::new();
    let mut samples = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split_whitespace();
            if let (Some(name), Some(kind)) = (parts.next(), parts.next()) {
                types.insert(name.to_string(), kind.to_string());
            }
        } else if !line.starts_with('#') && !line.trim().is_empty() {
            let name = line
                .split(|c: char| c == '{' || c.is_whitespace())
                .next()
                .unwrap_or("");
            samples.insert(name.to_string());
        }
    }
    Scrape { types, samples }
}

/// Why a name a query uses is not in the scrape, or Ok.
fn exported(name: &str, scrape: &Scrape) -> Result<(), String> {
    for (suffix, kinds) in [
        ("_bucket", &["histogram"][..]),
        ("_sum", &["histogram", "summary"][..]),
        ("_count", &["histogram", "summary"][..]),
    ] {
        let Some(family) = name.strip_suffix(suffix) else {
            continue;
        };
        if let Some(kind) = scrape.types.get(family) {
            return if !kinds.contains(&kind.as_str()) {
                Err(format!(
                    "{name}: {family} is exported as a {kind}, the query needs a {}",
                    kinds.join(" or ")
                ))
            } else if !scrape.samples.contains(name) {
                Err(format!("{name}: no such series in the {kind} {family}"))
            } else {
                Ok(())
            };
        }
    }
    if scrape.samples.contains(name) {
        Ok(())
    } else {
        Err(format!("{name}: not in /metrics"))
    }
}

/// Every `kubecache_*` and `process_*` metric name in a PromQL text.
fn metric_names(query: &str, names: &mut BTreeSet<String>) {
    let bytes = query.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b':';
    for prefix in ["kubecache_", "process_"] {
        let mut from = 0;
        while let Some(at) = query[from..].find(prefix) {
            let start = from + at;
            let mut end = start + prefix.len();
            while end < bytes.len() && (bytes[end].is_ascii_lowercase() || bytes[end] == b'_') {
                end += 1;
            }
            if (start == 0 || !ident(bytes[start - 1])) && end > start + prefix.len() {
                names.insert(query[start..end].to_string());
            }
            from = end;
        }
    }
}

/// Every query text of a dashboard: panel `expr`s and variable queries.
fn dashboard_queries(value: &Value, queries: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("expr" | "query" | "definition", Value::String(text)) => {
                        queries.push(text.clone())
                    }
                    _ => dashboard_queries(value, queries),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| dashboard_queries(v, queries)),
        _ => {}
    }
}

fn dashboard() -> Value {
    let path = deploy_dir().join("grafana/kubecache.json");
    serde_json::from_str(&read(&path)).unwrap_or_else(|e| panic!("{}: {e}", shown(&path)))
}

// ---------------------------------------------------------------------------
// Tests

#[test]
fn every_manifest_parses_into_its_kubernetes_type_with_no_unknown_field() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for dir in kustomization_dirs() {
        let k = load_kustomization(&dir);
        // Each document of each resource file, as written.
        for resource in &k.resources {
            let path = dir.join(resource);
            if path.is_file() {
                let source = shown(&path);
                match yaml_documents(&read(&path), &source) {
                    Ok(values) => {
                        for value in values {
                            checked += 1;
                            let doc = Doc {
                                source: source.clone(),
                                value,
                            };
                            problems.extend(
                                typed_problems(&doc.value)
                                    .into_iter()
                                    .map(|p| format!("{}: {p}", doc.label())),
                            );
                        }
                    }
                    Err(e) => problems.push(e),
                }
            }
        }
    }
    // Patches are partial: each is checked merged into its target, in the
    // rendering of every kustomization (components through the overlays
    // that use them, or over the base).
    for dir in renderable_dirs() {
        let docs = render_offline(&dir);
        checked += docs.len();
        problems.extend(typed_report(&docs));
    }
    assert!(
        checked > 20,
        "only {checked} documents found under deploy/kubernetes"
    );
    assert!(
        problems.is_empty(),
        "manifests that are not what their type says:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_typed_check_reports_an_unknown_field_by_its_path() {
    // The check above is only worth something if a typo fails it.
    let base = kubernetes_dir().join("base");
    let mut docs = render_offline(&base);
    let workload = docs
        .iter_mut()
        .find(|d| d.kind() == "StatefulSet")
        .expect("a StatefulSet");
    workload.value["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGett"] =
        serde_json::json!({ "path": "/readyz" });
    workload.value["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .expect("a container")
        .remove("name");
    let problems = typed_report(&docs);
    assert!(
        problems.iter().any(|p| p
            .contains(".spec.template.spec.containers[0].readinessProbe.httpGett: unknown field")),
        "{problems:#?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains(".spec.template.spec.containers[0].name: required field missing")),
        "{problems:#?}"
    );
    let monitor = serde_json::json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": { "name": "kubecache" },
        "spec": { "selector": { "matchLabels": {} }, "endpoints": [{ "port": "http", "intervall": "30s" }] },
    });
    let problems = typed_problems(&monitor);
    assert!(
        problems.iter().any(|p| p.contains("intervall")),
        "{problems:#?}"
    );
}

#[test]
fn every_kustomization_names_only_files_that_exist_and_every_file_is_used() {
    let mut problems = Vec::new();
    let mut used = BTreeSet::new();
    for dir in kustomization_dirs() {
        let k = load_kustomization(&dir);
        used.insert(dir.join("kustomization.yaml"));
        let mut named = Vec::new();
        for resource in &k.resources {
            named.push((dir.join(resource), "resource"));
        }
        for component in &k.components {
            named.push((dir.join(component), "component"));
        }
        for patch in &k.patches {
            named.push((dir.join(&patch.path), "patch"));
        }
        for generator in &k.config_map_generator {
            for entry in &generator.files {
                named.push((dir.join(generator_file(entry).1), "configMapGenerator file"));
            }
        }
        for (path, what) in named {
            let where_ = shown(&dir.join("kustomization.yaml"));
            let Ok(path) = path.canonicalize() else {
                problems.push(format!(
                    "{where_}: {what} {} does not exist",
                    path.display()
                ));
                continue;
            };
            let is_dir_kind = matches!(what, "resource" | "component") && path.is_dir();
            if is_dir_kind {
                if !path.join("kustomization.yaml").is_file() {
                    problems.push(format!(
                        "{where_}: {what} {} has no kustomization.yaml",
                        shown(&path)
                    ));
                }
            } else if path.is_file() {
                used.insert(path);
            } else {
                problems.push(format!("{where_}: {what} {} is not a file", shown(&path)));
            }
        }
    }
    // And nothing under deploy/kubernetes lies unused.
    let mut todo = vec![kubernetes_dir()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).expect("readable dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                todo.push(path);
            } else if !used.contains(&path) {
                problems.push(format!("{} is named by no kustomization", shown(&path)));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn kubectl_kustomize_renders_the_base_and_every_overlay_as_the_checked_manifests() {
    if !kubectl_available() {
        return;
    }
    let mut problems = Vec::new();
    for dir in renderable_dirs() {
        let rendered = match kubectl_kustomize(&dir) {
            Ok(docs) => docs,
            Err(e) => {
                eprintln!("skipped: {e}");
                return;
            }
        };
        problems.extend(typed_report(&rendered));
        // The same documents as the offline renderer, up to generated hashes.
        let offline = render_offline(&dir);
        let generated: BTreeSet<String> = offline
            .iter()
            .filter(|d| d.source.ends_with("(configMapGenerator)"))
            .map(|d| d.name().to_string())
            .collect();
        let by_identity = |docs: &[Doc]| -> BTreeMap<String, Value> {
            docs.iter()
                .map(|d| {
                    let mut value = d.value.clone();
                    strip_hashes(&mut value, &generated);
                    (identity(&d.value, &generated), value)
                })
                .collect()
        };
        let kubectl = by_identity(&rendered);
        let ours = by_identity(&offline);
        let shown_dir = shown(&dir);
        for id in kubectl.keys().filter(|id| !ours.contains_key(*id)) {
            problems.push(format!("{shown_dir}: only kubectl renders {id}"));
        }
        for id in ours.keys().filter(|id| !kubectl.contains_key(*id)) {
            problems.push(format!(
                "{shown_dir}: only the offline renderer renders {id}"
            ));
        }
        for (id, value) in &kubectl {
            if let Some(difference) = ours
                .get(id)
                .and_then(|ours| first_difference("", value, ours))
            {
                problems.push(format!(
                    "{shown_dir}: {id}: kubectl vs offline: {difference}"
                ));
            }
        }
        // Generated ConfigMaps carry a content hash, so config changes roll
        // the StatefulSet.
        for doc in rendered.iter().filter(|d| d.kind() == "ConfigMap") {
            if without_hash(doc.name(), &generated) == doc.name() {
                problems.push(format!("{shown_dir}: ConfigMap {} has no hash", doc.name()));
            }
        }
        match permission_problems(&rendered) {
            Ok(p) => problems.extend(p.into_iter().map(|p| format!("{shown_dir}: {p}"))),
            Err(e) => problems.push(format!("{shown_dir}: {e}")),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_cluster_role_grants_exactly_list_and_watch_on_the_configured_resources_the_reviews_and_impersonation_with_client_certificates()
 {
    assert_eq!(group_resource("pods"), (String::new(), "pods".to_string()));
    assert_eq!(
        group_resource("widgets.example.com"),
        ("example.com".to_string(), "widgets".to_string())
    );
    let mut problems = Vec::new();
    let mut configs = BTreeSet::new();
    for dir in renderable_dirs() {
        let docs = render_offline(&dir);
        match mounted_config(&docs) {
            Ok(config) => {
                configs.insert(config);
            }
            Err(e) => problems.push(format!("{}: {e}", shown(&dir))),
        }
        match permission_problems(&docs) {
            Ok(p) => problems.extend(p.into_iter().map(|p| format!("{}: {p}", shown(&dir)))),
            Err(e) => problems.push(format!("{}: {e}", shown(&dir))),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The overlays do change the config (so the check covers patched roles).
    assert!(configs.len() > 1, "every rendering mounts the same config");

    // And the check fails when the role and the config disagree.
    let mut docs = render_offline(&kubernetes_dir().join("base"));
    let role = docs
        .iter_mut()
        .find(|d| d.kind() == "ClusterRole")
        .expect("a ClusterRole");
    role.value["rules"][0]["verbs"] = serde_json::json!(["get", "list", "watch"]);
    let problems = permission_problems(&docs).expect("a complete rendering");
    assert!(
        problems.iter().any(|p| p == "more than needed: get pods"),
        "{problems:#?}"
    );
    // Impersonation where no client CA is configured is more than needed.
    let mut docs = render_offline(&kubernetes_dir().join("base"));
    let role = docs
        .iter_mut()
        .find(|d| d.kind() == "ClusterRole")
        .expect("a ClusterRole");
    role.value["rules"].as_array_mut().expect("rules").push(
        serde_json::json!({ "apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"] }),
    );
    let problems = permission_problems(&docs).expect("a complete rendering");
    assert_eq!(problems, ["more than needed: impersonate users"]);
}

#[test]
fn the_dashboard_names_only_metrics_that_the_binary_exports() {
    let dashboard = dashboard();
    let mut queries = Vec::new();
    dashboard_queries(&dashboard, &mut queries);
    let mut names = BTreeSet::new();
    for query in &queries {
        metric_names(query, &mut names);
    }
    assert!(
        names.contains("kubecache_objects") && names.contains("process_resident_memory_bytes"),
        "the dashboard's queries name {names:?}"
    );
    // Panels have unique ids and every graph has a query.
    let panels = dashboard["panels"].as_array().expect("panels");
    let ids: BTreeSet<u64> = panels.iter().filter_map(|p| p["id"].as_u64()).collect();
    assert_eq!(ids.len(), panels.len(), "panel ids are unique and present");
    for panel in panels.iter().filter(|p| p["type"] != "row") {
        let targets = panel["targets"].as_array().map(Vec::len).unwrap_or(0);
        assert!(targets > 0, "panel {} has no query", panel["title"]);
    }

    let mut kubecache = Kubecache::start(&["--simulate", "300"]);
    kubecache
        .wait_ready(Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("{e}"));
    // Authorization is on by default, under --simulate too.
    let (code, _) = http_get_as(
        kubecache.addr(),
        kubecache.tls.as_ref(),
        "/api/v1/pods",
        None,
    )
    .expect("an answer");
    assert_eq!(code, 403, "an anonymous list of every pod");
    // A list, a get of a listed pod and a watch, so that request and watch
    // metrics exist.
    let list: Value =
        serde_json::from_slice(&kubecache.get_ok("/api/v1/pods?limit=10")).expect("a list is JSON");
    let pod = &list["items"][0]["metadata"];
    let (namespace, name) = (
        pod["namespace"].as_str().expect("a listed pod's namespace"),
        pod["name"].as_str().expect("a listed pod's name"),
    );
    kubecache.get_ok(&format!("/api/v1/namespaces/{namespace}/pods/{name}"));
    kubecache.get_ok("/api/v1/pods?watch=1&timeoutSeconds=1");

    // Counters appear when they are first touched: poll (a loaded machine
    // can take seconds to get there).
    let deadline = Instant::now() + Duration::from_secs(60);
    let missing = loop {
        let text = String::from_utf8(kubecache.get_ok("/metrics")).expect("UTF-8 metrics");
        let scrape = parse_scrape(&text);
        let missing: Vec<String> = names
            .iter()
            .filter_map(|name| exported(name, &scrape).err())
            .collect();
        if missing.is_empty() || Instant::now() > deadline {
            break missing;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(
        missing.is_empty(),
        "deploy/grafana/kubecache.json queries metrics that /metrics does not export \
         (metrics must exist from the start, e.g. counters at 0 for each resource):\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_shipped_config_file_is_accepted_by_the_binary_with_its_rendering_s_tls() {
    let mut tried = BTreeSet::new();
    for dir in renderable_dirs() {
        let docs = render_offline(&dir);
        let config = mounted_config(&docs).unwrap_or_else(|e| panic!("{}: {e}", shown(&dir)));
        let tls = tls_settings(&docs).unwrap_or_else(|e| panic!("{}: {e}", shown(&dir)));
        let client_ca = tls.client_ca.is_some();
        assert!(
            tls.cert.is_some() && tls.key.is_some(),
            "{}: serves plain HTTP",
            shown(&dir)
        );
        if !tried.insert((config.clone(), client_ca)) {
            continue; // the same as an earlier rendering
        }
        let name = shown(&dir).replace('/', "-");
        let file = temp_config(&name, &config);
        // The rendering's TLS settings, with test certificates for its
        // Secret's files, through the variables the StatefulSet sets.
        let certificates = TestCertificates::new(&name);
        let mut env = vec![
            ("KUBECACHE_TLS_CERT_FILE", certificates.cert.as_path()),
            ("KUBECACHE_TLS_PRIVATE_KEY_FILE", certificates.key.as_path()),
        ];
        if client_ca {
            env.push(("KUBECACHE_CLIENT_CA_FILE", certificates.ca.as_path()));
        }
        let mut kubecache = Kubecache::start_with(
            &[
                "--config",
                file.to_str().expect("a UTF-8 temp path"),
                "--simulate",
                "300",
            ],
            &env,
            Some(Arc::new(certificates.client.clone())),
        );
        kubecache
            .wait_ready(Duration::from_secs(120))
            .unwrap_or_else(|e| panic!("{} with {}: {e}", shown(&dir), file.display()));
        // The file's resources are the ones served: not the defaults.
        let configured: ConfigResources = serde_yaml::from_str(&config).expect("config resources");
        for resource in &configured.resources {
            let (group, plural) = group_resource(&resource.resource);
            let path = if group.is_empty() {
                format!("/api/v1/{plural}?limit=1")
            } else {
                // The simulated API server serves its custom resource at v1.
                format!("/apis/{group}/v1/{plural}?limit=1")
            };
            kubecache.get_ok(&path);
        }
        // Plain HTTP to the HTTPS port: a 400 Status.
        let (code, body) = http_get(kubecache.addr(), "/readyz").expect("an answer");
        assert_eq!(code, 400, "{}", String::from_utf8_lossy(&body));
        let _ = std::fs::remove_file(&file);
    }
}

#[test]
fn every_rendering_serves_https_from_a_mounted_secret_on_the_port_its_probes_service_and_scrapes_use()
 {
    let mut problems = Vec::new();
    let mut client_ca = 0;
    for dir in renderable_dirs() {
        let docs = render_offline(&dir);
        match https_problems(&docs) {
            Ok(p) => problems.extend(p.into_iter().map(|p| format!("{}: {p}", shown(&dir)))),
            Err(e) => problems.push(format!("{}: {e}", shown(&dir))),
        }
        if tls_settings(&docs).is_ok_and(|tls| tls.client_ca.is_some()) {
            client_ca += 1;
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(client_ca > 0, "no rendering turns client certificates on");

    // And the check fails for a probe over HTTP and a scrape unverified.
    let mut docs = render_offline(&kubernetes_dir().join("base"));
    for doc in docs.iter_mut() {
        match doc.kind() {
            "StatefulSet" => {
                doc.value["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]
                    ["scheme"] = Value::from("HTTP");
            }
            "ServiceMonitor" => {
                doc.value["spec"]["endpoints"][0]["tlsConfig"] =
                    serde_json::json!({ "insecureSkipVerify": true });
            }
            _ => {}
        }
    }
    let problems = https_problems(&docs).expect("a complete rendering");
    assert!(
        problems.iter().any(|p| p.starts_with("readinessProbe:"))
            && problems.iter().any(|p| p.starts_with("ServiceMonitor:")),
        "{problems:#?}"
    );
}

#[test]
fn every_rendering_keeps_each_replica_s_state_on_a_volume_that_outlives_its_pod_and_evicts_one_replica_at_a_time()
 {
    let mut problems = Vec::new();
    for dir in renderable_dirs() {
        let docs = render_offline(&dir);
        match state_problems(&docs) {
            Ok(p) => problems.extend(p.into_iter().map(|p| format!("{}: {p}", shown(&dir)))),
            Err(e) => problems.push(format!("{}: {e}", shown(&dir))),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // And the check fails for an emptyDir, which dies with the pod, and a
    // budget that lets every replica go.
    let mut docs = render_offline(&kubernetes_dir().join("base"));
    for doc in docs.iter_mut() {
        match doc.kind() {
            "StatefulSet" => {
                let spec = doc.value["spec"].as_object_mut().expect("a spec");
                spec.remove("volumeClaimTemplates");
                let volumes = doc.value["spec"]["template"]["spec"]["volumes"]
                    .as_array_mut()
                    .expect("volumes");
                volumes.push(serde_json::json!({"name": "state", "emptyDir": {}}));
            }
            "PodDisruptionBudget" => {
                doc.value["spec"]["maxUnavailable"] = Value::from("100%");
            }
            _ => {}
        }
    }
    let problems = state_problems(&docs).expect("a complete rendering");
    assert!(
        problems
            .iter()
            .any(|p| p.contains("does not outlive the pod"))
            && problems.iter().any(|p| p.contains("maxUnavailable 1")),
        "{problems:#?}"
    );
}

#[test]
fn the_binary_refuses_a_config_with_an_unknown_field_and_names_it() {
    let base = kubernetes_dir().join("base");
    let config = mounted_config(&render_offline(&base)).expect("the base's config");
    let wrong = [
        (
            "top-level",
            format!("{config}\nunknownKnob: 1\n"),
            "unknownKnob",
        ),
        (
            "in-a-resource",
            config.replacen(
                "  - resource: pods\n",
                "  - resource: pods\n    labelSelectr: \"app=web\"\n",
                1,
            ),
            "labelSelectr",
        ),
    ];
    for (case, text, field) in wrong {
        assert!(
            text.contains(field),
            "{case}: the base config changed shape"
        );
        let file = temp_config(&format!("wrong-{case}"), &text);
        let mut kubecache = Kubecache::start(&[
            "--config",
            file.to_str().expect("a UTF-8 temp path"),
            "--simulate",
            "300",
        ]);
        let status = kubecache.wait_exit(Duration::from_secs(60));
        let output = kubecache.output();
        let _ = std::fs::remove_file(&file);
        match status {
            Some(status) => {
                assert!(!status.success(), "{case}: exited with success\n{output}");
                assert!(
                    output.contains(field),
                    "{case}: the message does not name {field}:\n{output}"
                );
            }
            None => panic!("{case}: kubecache runs with an unknown field {field}:\n{output}"),
        }
    }
}

#[test]
fn on_sigterm_the_binary_ends_its_watches_cleanly_and_exits_zero() {
    // What a rolling upgrade relies on: watchers see their stream end (and
    // resume on another replica), and the pod stops well within the grace
    // period.
    let mut kubecache = Kubecache::start(&["--simulate", "300", "--simulate-churn", "0"]);
    kubecache
        .wait_ready(Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("{e}"));
    let addr = kubecache.addr();
    let watch = std::thread::spawn(move || {
        http_get(
            addr,
            "/api/v1/pods?watch=1&resourceVersion=0&timeoutSeconds=600",
        )
    });
    std::thread::sleep(Duration::from_secs(1));
    kubecache.process.signal("-TERM");
    let started = Instant::now();
    let (code, body) = watch
        .join()
        .expect("the watch thread")
        .expect("the watch stream ends cleanly");
    assert_eq!(code, 200);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the watch ended promptly"
    );
    let lines: Vec<Value> = body
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).expect("whole JSON lines"))
        .collect();
    assert_eq!(lines.len(), 300, "every object, then the end");
    let status = kubecache
        .wait_exit(Duration::from_secs(10))
        .expect("kubecache exits after SIGTERM");
    assert!(status.success(), "{status}\n{}", kubecache.output());
}
