//! The deploy files under `deploy/` as the deploy tests read them: the
//! kustomizations, an offline renderer of the kustomize subset they use
//! (`resources`, `components`, `namespace`, `configMapGenerator`, file
//! `patches` as strategic merges or `$patch: delete`; any other field is
//! refused, and `deploy_manifests.rs` compares its output with `kubectl
//! kustomize`), and what a rendering runs: the kubecache container, its
//! config file and settings.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Container, PodSpec};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// `deploy/`, next to `server/`.
pub fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy")
        .canonicalize()
        .expect("deploy/ exists next to server/")
}

/// `deploy/kubernetes`: the kustomize base, components and overlays.
pub fn kubernetes_dir() -> PathBuf {
    deploy_dir().join("kubernetes")
}

/// A path for messages: relative to `deploy/`.
pub fn shown(path: &Path) -> String {
    let deploy = deploy_dir();
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    match path.strip_prefix(&deploy) {
        Ok(rest) => format!("deploy/{}", rest.display()),
        Err(_) => path.display().to_string(),
    }
}

/// The YAML documents of a text (empty documents left out).
pub fn yaml_documents(text: &str, source: &str) -> Result<Vec<Value>, String> {
    let mut docs = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let value = Value::deserialize(document).map_err(|e| format!("{source}: {e}"))?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

/// A deploy file's text.
pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", shown(path)))
}

/// Every directory under `deploy/kubernetes` holding a kustomization.yaml.
pub fn kustomization_dirs() -> Vec<PathBuf> {
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
pub fn renderable_dirs() -> Vec<PathBuf> {
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
            "# {} over the base (written by server/tests/common/deploy.rs)\n\
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

/// A kustomization.yaml, of the subset the deploy files use.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Kustomization {
    api_version: String,
    /// `Kustomization` or `Component`.
    pub kind: String,
    #[serde(default)]
    namespace: Option<String>,
    /// Files and directories.
    #[serde(default)]
    pub resources: Vec<String>,
    /// Component directories.
    #[serde(default)]
    pub components: Vec<String>,
    /// Generated ConfigMaps.
    #[serde(default)]
    pub config_map_generator: Vec<ConfigMapGenerator>,
    /// Patch files.
    #[serde(default)]
    pub patches: Vec<PatchFile>,
}

/// A `configMapGenerator` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigMapGenerator {
    name: String,
    #[serde(default)]
    behavior: Option<String>,
    /// `file` or `key=file` entries.
    pub files: Vec<String>,
}

/// A `patches` entry: a file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchFile {
    /// The patch file.
    pub path: String,
}

/// The kustomization.yaml of `dir`, checked.
pub fn load_kustomization(dir: &Path) -> Kustomization {
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
pub fn generator_file(entry: &str) -> (String, String) {
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
pub struct Doc {
    /// The file (or command) it came from.
    pub source: String,
    /// The document.
    pub value: Value,
}

impl Doc {
    /// Its `kind`.
    pub fn kind(&self) -> &str {
        self.value["kind"].as_str().unwrap_or("")
    }
    /// Its `metadata.name`.
    pub fn name(&self) -> &str {
        self.value["metadata"]["name"].as_str().unwrap_or("")
    }
    /// `source kind/name`, for messages.
    pub fn label(&self) -> String {
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
pub fn render_offline(dir: &Path) -> Vec<Doc> {
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
// What a rendering runs: the StatefulSet's container, its config file.

/// The config file the StatefulSet's container reads: `--config PATH`, the
/// ConfigMap mounted over PATH's directory, the key.
pub fn mounted_config(docs: &[Doc]) -> Result<String, String> {
    let (namespace, _, container) = kubecache_container(docs)?;
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
    let ("ConfigMap", name, key) = mounted_file(docs, &config_path)? else {
        return Err(format!("{config_path} is not mounted from a ConfigMap"));
    };
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
        .and_then(|mut data| data.remove(&key))
        .ok_or(format!("ConfigMap {name} has no key {key}"))
}

/// Where a file the container reads comes from: the kind (`Secret` or
/// `ConfigMap`) and name of the volume's source, and the key.
pub fn mounted_file(docs: &[Doc], path: &str) -> Result<(&'static str, String, String), String> {
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

/// The StatefulSet's namespace, pod spec and kubecache container.
pub fn kubecache_container(docs: &[Doc]) -> Result<(String, PodSpec, Container), String> {
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
pub fn setting(docs: &[Doc], flag: &str, env: &str, key: &str) -> Result<Option<String>, String> {
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
pub struct TlsSettings {
    /// The serving certificate.
    pub cert: Option<String>,
    /// Its key.
    pub key: Option<String>,
    /// The CA of client certificates.
    pub client_ca: Option<String>,
}

/// The TLS settings of a rendering's kubecache container.
pub fn tls_settings(docs: &[Doc]) -> Result<TlsSettings, String> {
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

/// The one document of a kind, typed.
pub fn single<T: DeserializeOwned>(docs: &[Doc], kind: &str) -> Result<T, String> {
    let matching: Vec<&Doc> = docs.iter().filter(|d| d.kind() == kind).collect();
    match matching.as_slice() {
        [doc] => serde_json::from_value(doc.value.clone()).map_err(|e| format!("{kind}: {e}")),
        other => Err(format!("{} {kind} documents, expected 1", other.len())),
    }
}

/// The config file's `resources`, as far as permissions go.
#[derive(Deserialize)]
pub struct ConfigResources {
    /// The configured resources.
    pub resources: Vec<ConfiguredResource>,
}

/// A configured resource, by name.
#[derive(Deserialize)]
pub struct ConfiguredResource {
    /// `plural` or `plural.group`.
    pub resource: String,
}

/// `pods` -> ("", "pods"); `widgets.example.com` -> ("example.com", "widgets").
pub fn group_resource(name: &str) -> (String, String) {
    match name.split_once('.') {
        Some((resource, group)) => (group.to_string(), resource.to_string()),
        None => (String::new(), name.to_string()),
    }
}
