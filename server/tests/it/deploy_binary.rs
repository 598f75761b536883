//! The real binary against the deploy files under `deploy/`:
//!
//! - the Grafana dashboard names only metrics that the binary's `/metrics`
//!   exports;
//! - every shipped config file, with its rendering's TLS settings, is
//!   accepted by the binary, which then serves HTTPS (and plain HTTP to its
//!   port gets a 400), and a wrong config is refused, naming the field;
//! - on SIGTERM (a rolling upgrade) the binary ends its watches cleanly and
//!   exits 0;
//! - the demo as the README starts it serves HTTPS, and the real kubectl
//!   with the kubeconfig it writes gets, is refused, asks `auth whoami`
//!   and `auth can-i` (and `--list`), lists the API resources and
//!   explains pods as the README shows.
//!
//! The manifests themselves are checked by `deploy_manifests.rs`. No
//! wall-clock windows: every wait is for a condition (`kubecache_testkit::wait`).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::deploy::{
    ConfigResources, deploy_dir, group_resource, kubernetes_dir, mounted_config, read,
    render_offline, renderable_dirs, shown, tls_settings,
};
use common::process::{Process, kubecache};
use kubecache_testkit::pki::{self, Pki};
use kubecache_testkit::wait::{until_explained, within};
use kubecache_testkit::{raw_http, scrape};
use serde_json::Value;

// ---------------------------------------------------------------------------
// The real binary

/// The bearer token of the `--simulate` demo policy's administrator: the
/// binary authorizes every read by default.
const ADMIN_TOKEN: &str = "admin-token";

/// A running `kubecache`, reached over HTTPS or plain HTTP.
struct Kubecache {
    process: Process,
    addr: SocketAddr,
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
        let (process, addr) = kubecache(args, env);
        Kubecache { process, addr, tls }
    }

    /// Waits until `/readyz` answers 200.
    async fn ready(&self) {
        self.process
            .until("ready", async || {
                matches!(self.get("/readyz"), Ok((200, _)))
            })
            .await;
    }

    /// GET as the demo administrator, over HTTPS if it serves it: the code
    /// and the body.
    fn get(&self, path: &str) -> std::io::Result<(u16, Vec<u8>)> {
        raw_http::get(self.addr, self.tls.as_ref(), path, Some(ADMIN_TOKEN))
    }

    /// GET, answered 200, the body.
    fn get_ok(&self, path: &str) -> Vec<u8> {
        match self.get(path) {
            Ok((200, body)) => body,
            Ok((code, body)) => panic!(
                "GET {path}: {code} {}\nkubecache's output:\n{}",
                String::from_utf8_lossy(&body),
                self.process.output()
            ),
            Err(e) => panic!(
                "GET {path}: {e}\nkubecache's output:\n{}",
                self.process.output()
            ),
        }
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

#[tokio::test]
async fn the_dashboard_names_only_metrics_that_the_binary_exports() {
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

    let kubecache = Kubecache::start(&["--simulate", "300", "--simulate-scheme", "http"]);
    kubecache.ready().await;
    // Authorization is on by default, under --simulate too.
    let (code, _) = raw_http::get(kubecache.addr, None, "/api/v1/pods", None).expect("an answer");
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
    let missing = std::cell::RefCell::new(Vec::new());
    until_explained(
        "/metrics exports every metric the dashboard queries",
        async || {
            let text = String::from_utf8(kubecache.get_ok("/metrics")).expect("UTF-8 metrics");
            let scrape = parse_scrape(&text);
            *missing.borrow_mut() = names
                .iter()
                .filter_map(|name| exported(name, &scrape).err())
                .collect();
            missing.borrow().is_empty()
        },
        || {
            format!(
                "deploy/grafana/kubecache.json queries metrics that /metrics does not export \
                 (metrics must exist from the start, e.g. counters at 0 for each resource):\n{}",
                missing.borrow().join("\n")
            )
        },
    )
    .await;
}

#[tokio::test]
async fn every_shipped_config_file_is_accepted_by_the_binary_with_its_rendering_s_tls() {
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
        let pki = Pki::new(&name);
        let files = pki.serving_files("kubecache", Some(&pki.ca_pem()));
        let mut env = vec![
            ("KUBECACHE_TLS_CERT_FILE", files.cert.as_path()),
            ("KUBECACHE_TLS_PRIVATE_KEY_FILE", files.key.as_path()),
        ];
        if client_ca {
            let ca = files.client_ca.as_deref().expect("the client CA file");
            env.push(("KUBECACHE_CLIENT_CA_FILE", ca));
        }
        // The client is a user of the demo policy's cluster-admin group, so
        // that its reads are allowed.
        let client = pki.client("kubecache-test", &["system:masters"]);
        let kubecache = Kubecache::start_with(
            &[
                "--config",
                file.to_str().expect("a UTF-8 temp path"),
                "--simulate",
                "300",
            ],
            &env,
            Some(Arc::new(pki::client_config(&pki.ca_pem(), Some(&client)))),
        );
        kubecache.ready().await;
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
        let (code, body) =
            raw_http::get(kubecache.addr, None, "/readyz", Some(ADMIN_TOKEN)).expect("an answer");
        assert_eq!(code, 400, "{}", String::from_utf8_lossy(&body));
        let _ = std::fs::remove_file(&file);
    }
}

#[tokio::test]
async fn the_binary_refuses_a_config_with_an_unknown_field_and_names_it() {
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
        let kubecache = Kubecache::start(&[
            "--config",
            file.to_str().expect("a UTF-8 temp path"),
            "--simulate",
            "300",
        ]);
        let process = &kubecache.process;
        process
            .until(
                &format!("{case}: kubecache exits or is ready"),
                async || {
                    process.try_wait().is_some() || matches!(kubecache.get("/readyz"), Ok((200, _)))
                },
            )
            .await;
        let _ = std::fs::remove_file(&file);
        assert!(
            process.try_wait().is_some(),
            "{case}: kubecache runs with an unknown field {field}:\n{}",
            process.output()
        );
        let status = process.exited().await;
        let output = process.output();
        assert!(!status.success(), "{case}: exited with success\n{output}");
        assert!(
            output.contains(field),
            "{case}: the message does not name {field}:\n{output}"
        );
    }
}

#[tokio::test]
async fn on_sigterm_the_binary_ends_its_watches_cleanly_and_exits_zero() {
    // What a rolling upgrade relies on: watchers see their stream end (and
    // resume on another replica), and the pod stops well within the grace
    // period.
    let kubecache = Kubecache::start(&[
        "--simulate",
        "300",
        "--simulate-churn",
        "0",
        "--simulate-scheme",
        "http",
    ]);
    kubecache.ready().await;
    // The watch asks for 600 s: it ends within the test only because the
    // shutdown ends it.
    let addr = kubecache.addr;
    let watch = tokio::task::spawn_blocking(move || {
        let path = "/api/v1/pods?watch=1&resourceVersion=0&timeoutSeconds=600";
        raw_http::get(addr, None, path, Some(ADMIN_TOKEN))
    });
    // SIGTERM once the watch is open and has sent every object, as
    // kubecache reports it.
    kubecache
        .process
        .until("the watch has sent its 300 objects", async || {
            let text = String::from_utf8(kubecache.get_ok("/metrics")).expect("UTF-8 metrics");
            scrape::value(
                &text,
                r#"kubecache_watch_events_sent_total{resource="pods"}"#,
            )
            .is_some_and(|sent| sent >= 300.0)
        })
        .await;
    kubecache.process.signal("-TERM");
    let (code, body) = within("the watch ends after SIGTERM", watch)
        .await
        .expect("the watch thread")
        .expect("the watch stream ends cleanly");
    assert_eq!(code, 200);
    let lines: Vec<Value> = body
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).expect("whole JSON lines"))
        .collect();
    assert_eq!(lines.len(), 300, "every object, then the end");
    let status = kubecache.process.exited().await;
    assert!(status.success(), "{status}\n{}", kubecache.process.output());
}

#[tokio::test]
async fn logs_are_plain_text_off_a_terminal_or_json_lines_when_asked() {
    // stderr is a pipe here, as under a log collector.
    let demo = [
        "--simulate",
        "20",
        "--simulate-churn",
        "0",
        "--simulate-scheme",
        "http",
    ];
    let text = Kubecache::start(&demo);
    let json = Kubecache::start(&[&demo[..], &["--log-format", "json"]].concat());
    text.ready().await;
    json.ready().await;
    let output = text.process.output();
    assert!(output.contains("INFO"), "{output}");
    assert!(!output.contains('\u{1b}'), "no colour codes: {output:?}");
    let output = json.process.output();
    let lines: Vec<&str> = output.lines().filter(|l| !l.is_empty()).collect();
    assert!(!lines.is_empty());
    for line in lines {
        let event: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line:?}"));
        assert!(
            event["level"].is_string() && event["fields"].is_object(),
            "{line}"
        );
    }
    let refused = common::process::kubecache(&["--log-format", "xml"], &[]).0;
    let status = refused.exited().await;
    assert!(!status.success());
    assert!(
        refused.output().contains("--log-format \"xml\""),
        "{}",
        refused.output()
    );
}

#[tokio::test]
async fn the_demo_serves_https_and_kubectl_works_with_the_kubeconfig_it_writes() {
    use kubecache_testkit::kubectl::{self, Kubectl};
    if !kubectl::available() {
        return;
    }
    // The README's first command, with a kubeconfig of the test's own.
    let dir = std::env::temp_dir().join(format!("kubecache-demo-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("demo.kubeconfig");
    let (process, addr) = common::process::kubecache(
        &[
            "--simulate",
            "300",
            "--simulate-churn",
            "0",
            "--kubeconfig-out",
            kubeconfig.to_str().unwrap(),
        ],
        &[],
    );
    // Its CA is written before it, beside it.
    process
        .until("the demo's kubeconfig is written", async || {
            kubeconfig.exists()
        })
        .await;
    let ca = std::fs::read_to_string(dir.join("demo-pki/ca.crt")).unwrap();
    let kubecache = Kubecache {
        process,
        addr,
        tls: Some(Arc::new(pki::client_config(&ca, None))),
    };
    kubecache.ready().await;
    assert!(
        kubecache
            .process
            .output()
            .contains(&format!("kubectl --kubeconfig {}", kubeconfig.display())),
        "the log says how: {}",
        kubecache.process.output()
    );
    let kubectl = Kubectl::with(kubeconfig, dir.join("cache"));
    let all = kubectl.ok(&["get", "pods", "-A", "--no-headers"]).await;
    assert_eq!(all.lines().count(), 300, "{all}");
    let hers = kubectl
        .ok(&[
            "--context",
            "alice",
            "get",
            "pods",
            "-n",
            "payments-prod",
            "-o",
            "name",
        ])
        .await;
    assert!(
        hers.lines().count() > 0 && hers.lines().all(|l| l.starts_with("pod/")),
        "{hers}"
    );
    let refused = kubectl
        .fails(&["--context", "alice", "get", "pods", "-A"])
        .await;
    assert!(
        refused.contains(
            r#"pods is forbidden: User "alice" cannot list resource "pods" in API group "" at the cluster scope"#
        ),
        "{refused}"
    );
    // The administrator impersonating eve is eve: the API server's 403.
    let refused = kubectl
        .fails(&["--as", "eve", "get", "pods", "-n", "payments-prod"])
        .await;
    assert!(
        refused.contains(r#"pods is forbidden: User "eve" cannot list resource "pods" in API group "" in the namespace "payments-prod""#),
        "{refused}"
    );
    // The README's `kubectl auth`: who alice is, and what she may do where.
    let whoami = kubectl.ok(&["--context", "alice", "auth", "whoami"]).await;
    assert!(
        whoami
            .lines()
            .any(|l| l.split_whitespace().eq(["Username", "alice"])),
        "{whoami}"
    );
    let can_i = |scope: &'static str| {
        let kubectl = &kubectl;
        async move {
            let args = ["--context", "alice", "auth", "can-i", "list", "pods", scope];
            let output = kubectl.run(&args, &[]).await;
            String::from_utf8(output.stdout).unwrap()
        }
    };
    assert_eq!(can_i("--namespace=payments-prod").await, "yes\n");
    assert_eq!(can_i("--all-namespaces").await, "no\n");
    let rules = kubectl
        .ok(&[
            "--context",
            "alice",
            "auth",
            "can-i",
            "--list",
            "-n",
            "payments-prod",
        ])
        .await;
    assert!(
        rules
            .lines()
            .any(|l| l.starts_with("pods ") && l.contains("list")),
        "{rules}"
    );
    // The README's `api-resources` and `explain`: discovery and OpenAPI.
    let resources = kubectl.ok(&["api-resources", "--no-headers"]).await;
    let rows: BTreeSet<Vec<&str>> = resources
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    for row in [
        vec!["pods", "po", "v1", "true", "Pod"],
        vec!["configmaps", "cm", "v1", "true", "ConfigMap"],
        vec!["namespaces", "ns", "v1", "false", "Namespace"],
        vec!["widgets", "wd", "example.com/v1", "true", "Widget"],
    ] {
        assert!(rows.contains(&row), "{row:?} in {resources}");
    }
    let pods = kubectl.ok(&["explain", "pods"]).await;
    assert!(
        pods.lines()
            .any(|l| l.split_whitespace().eq(["KIND:", "Pod"])),
        "{pods}"
    );
    assert!(
        pods.contains("Pod is a collection of containers that can run on a host."),
        "{pods}"
    );
    let containers = kubectl.ok(&["explain", "pods.spec.containers"]).await;
    assert!(
        containers.contains("FIELD: containers <[]Container>")
            && containers
                .contains("A single application container that you want to run within a pod."),
        "{containers}"
    );
}

#[tokio::test]
async fn with_auth_none_anonymous_kubectl_reads_the_demo_over_plain_http() {
    use kubecache_testkit::kubectl;
    if !kubectl::available() {
        return;
    }
    // The README's quick look: no authorization, plain HTTP, no kubeconfig.
    let kubecache = Kubecache::start(&[
        "--simulate",
        "30",
        "--simulate-churn",
        "0",
        "--simulate-scheme",
        "http",
        "--auth",
        "none",
    ]);
    kubecache.ready().await;
    let cache = std::env::temp_dir().join(format!("kubecache-anonymous-{}", std::process::id()));
    let server = format!("http://{}", kubecache.addr);
    let printed = tokio::task::spawn_blocking(move || {
        kubectl::ok(&[
            "--server",
            &server,
            "--cache-dir",
            cache.to_str().unwrap(),
            "get",
            "pods",
            "-A",
            "--no-headers",
        ])
    })
    .await
    .unwrap();
    assert_eq!(printed.lines().count(), 30, "{printed}");
}
