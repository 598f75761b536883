//! The manifests under `deploy/kubernetes` are what they claim to be:
//!
//! - every manifest of the kustomize base, components and overlays parses
//!   into its Kubernetes type with no field that the type does not know, and
//!   the kustomizations name only files that exist (and every file is used);
//! - `kubectl kustomize` renders the base and each overlay into the same
//!   checked manifests as the offline renderer (`common/deploy.rs`), so
//!   that renderer cannot drift from kubectl (kubectl's policy:
//!   `kubecache_testkit::kubectl`);
//! - a component that no overlay uses is rendered over the base, so that it
//!   is checked like the others;
//! - the ClusterRole grants exactly what the mounted config file's resources
//!   need: list and watch on each, create on TokenReviews and
//!   SubjectAccessReviews, impersonation of users, groups,
//!   serviceaccounts, uids and userextras exactly where client certificates
//!   are on, nothing more;
//! - every rendering serves HTTPS from a mounted Secret, and its Service,
//!   ServiceMonitor and scrape annotations all use HTTPS on the port
//!   kubecache listens on (the ServiceMonitor verifying the certificate
//!   with the Secret's CA, for the name a cert-manager Certificate covers);
//!   its startup, readiness and liveness probes are plain HTTP GETs on the
//!   health listener's port, which the Service does not expose;
//! - every rendering keeps each replica's state on a volume that outlives
//!   its pod, and evicts one replica at a time.
//!
//! The real binary's side of the deploy files is `deploy_binary.rs`.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::deploy::{
    ConfigResources, Doc, generator_file, group_resource, kubecache_container, kubernetes_dir,
    kustomization_dirs, load_kustomization, mounted_config, mounted_file, read, render_offline,
    renderable_dirs, setting, shown, single, tls_settings, yaml_documents,
};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubecache_testkit::kubectl;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

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

/// `kubectl kustomize DIR`.
fn kubectl_kustomize(dir: &Path) -> Vec<Doc> {
    let text = kubectl::ok(&["kustomize", dir.to_str().expect("a UTF-8 path")]);
    let source = format!("kubectl kustomize {}", shown(dir));
    let values = yaml_documents(&text, &source).unwrap_or_else(|e| panic!("{e}"));
    values
        .into_iter()
        .map(|value| Doc {
            source: source.clone(),
            value,
        })
        .collect()
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
// What a rendering runs: its state, its permissions, its HTTPS.

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
    // The watches that revoke kept review answers (`auth::revocation`).
    let rbac = "rbac.authorization.k8s.io";
    let revoking = [
        "roles",
        "rolebindings",
        "clusterroles",
        "clusterrolebindings",
    ]
    .map(|resource| (rbac, resource))
    .into_iter()
    .chain([("", "serviceaccounts")]);
    for (group, resource) in revoking {
        for verb in ["list", "watch"] {
            needed.insert((group.into(), resource.into(), verb.into()));
        }
    }
    Ok(needed)
}

/// What the StatefulSet's service account is granted through the
/// ClusterRoleBindings, as (group, resource, verb), `resource/name` for a
/// rule narrowed to names; wildcards (but [`impersonates_every_user_extra`]) and
/// non-resource URLs are refused.
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
                if text.contains('*') && !impersonates_every_user_extra(rule) {
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

/// The one wildcard the role may hold: `impersonate` on every resource of
/// `authentication.k8s.io`, which is how RBAC grants every user extra (an
/// extra's key is the subresource of `userextras`, and RBAC has no
/// `userextras/*`).
fn impersonates_every_user_extra(rule: &k8s_openapi::api::rbac::v1::PolicyRule) -> bool {
    rule.api_groups.as_deref() == Some(&["authentication.k8s.io".to_string()][..])
        && rule.resources.as_deref() == Some(&["*".to_string()][..])
        && rule.verbs == ["impersonate"]
        && rule.resource_names.is_none()
}

/// Missing and extra grants of a rendering, empty when exact: what the
/// config file needs, impersonation of users, groups, service accounts,
/// UIDs and extras where client certificates are on (their requests are
/// passed through as impersonation of whom they act as), and `get` of the
/// kube-system namespace with a state directory (warm restart identifies
/// the cluster by its UID).
fn permission_problems(docs: &[Doc]) -> Result<Vec<String>, String> {
    let mut needed = needed_grants(&mounted_config(docs)?)?;
    if state_dir(docs)?.is_some() {
        needed.insert((String::new(), "namespaces/kube-system".into(), "get".into()));
    }
    if tls_settings(docs)?.client_ca.is_some() {
        for resource in ["users", "groups", "serviceaccounts"] {
            needed.insert((String::new(), resource.into(), "impersonate".into()));
        }
        needed.insert((
            "authentication.k8s.io".into(),
            "*".into(),
            "impersonate".into(),
        ));
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
    // Service and scrapes use HTTPS on the port kubecache listens on.
    let port_of = |address: &str| -> Result<(i32, String), String> {
        let port: i32 = address
            .rsplit_once(':')
            .and_then(|(_, port)| port.parse().ok())
            .ok_or(format!("{address:?} has no port"))?;
        let name = container
            .ports
            .iter()
            .flatten()
            .find(|p| p.container_port == port)
            .ok_or(format!("no containerPort {port}"))?
            .name
            .clone()
            .unwrap_or_default();
        Ok((port, name))
    };
    let is = |(port, name): &(i32, String), target: &IntOrString| match target {
        IntOrString::Int(number) => number == port,
        IntOrString::String(named) => named == name,
    };
    let listen =
        setting(docs, "--listen", "KUBECACHE_LISTEN", "listen")?.ok_or("no listen address")?;
    let api = port_of(&listen)?;
    let port = api.0;
    let is_kubecache_port = |target: &IntOrString| is(&api, target);
    // The probes are plain HTTP on the health listener's port, which no
    // client of the API can take.
    let health = setting(
        docs,
        "--health-listen",
        "KUBECACHE_HEALTH_LISTEN",
        "healthListen",
    )?
    .ok_or("no healthListen: the probes would share the API's connections")?;
    let health = port_of(&health)?;
    for (which, probe, paths) in [
        (
            "startupProbe",
            &container.startup_probe,
            &["/healthz", "/livez"][..],
        ),
        (
            "readinessProbe",
            &container.readiness_probe,
            &["/readyz"][..],
        ),
        (
            "livenessProbe",
            &container.liveness_probe,
            &["/healthz", "/livez"][..],
        ),
    ] {
        match probe.as_ref().and_then(|p| p.http_get.as_ref()) {
            Some(get)
                if get.scheme.as_deref().unwrap_or("HTTP") == "HTTP"
                    && is(&health, &get.port)
                    && get
                        .path
                        .as_deref()
                        .is_some_and(|path| paths.contains(&path)) => {}
            other => problems.push(format!(
                "{which}: not an HTTP GET of {paths:?} on the health port {}: {other:?}",
                health.0
            )),
        }
    }
    if let Some(exposed) = service
        .spec
        .iter()
        .flat_map(|spec| spec.ports.iter().flatten())
        .find(|p| p.target_port.as_ref().is_some_and(|t| is(&health, t)))
    {
        problems.push(format!(
            "the Service exposes the health port {}: {exposed:?}",
            health.0
        ));
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
    if !kubectl::available() {
        return;
    }
    let mut problems = Vec::new();
    for dir in renderable_dirs() {
        let rendered = kubectl_kustomize(&dir);
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
fn every_rendering_serves_https_from_a_mounted_secret_on_the_port_its_service_and_scrapes_use_and_probes_the_health_port()
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

    // And the check fails for a probe on the API's port, a Service of the
    // health port, and a scrape unverified.
    let mut docs = render_offline(&kubernetes_dir().join("base"));
    for doc in docs.iter_mut() {
        match doc.kind() {
            "StatefulSet" => {
                doc.value["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"] =
                    serde_json::json!({ "path": "/readyz", "port": "https", "scheme": "HTTPS" });
            }
            "Service" => {
                let ports = doc.value["spec"]["ports"].as_array_mut().expect("ports");
                ports.push(
                    serde_json::json!({ "name": "health", "port": 8081, "targetPort": "health" }),
                );
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
            && problems
                .iter()
                .any(|p| p.starts_with("the Service exposes"))
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
