//! kubectl through kubecache as each user of the demo policy, over HTTPS
//! (kubectl sends a token only over TLS): reads from the caches, writes of
//! every kind passed through under the user's own name, the API server's
//! refusals in its own words, and discovery and OpenAPI (`api-resources`,
//! `explain`) from kubecache's copies. The oracle is the sim: its state
//! after the writes, its logs, its RBAC, its request counters.

use crate::common;

use std::collections::BTreeSet;

use common::pki::{Pki, tls_files};
use common::{Served, Setup};
use kubecache_loadtest::sim::auth::demo::{DEVELOPER, NAMESPACE};
use kubecache_loadtest::sim::resources::ids;
use kubecache_loadtest::sim::{Policy, SimConfig};
use kubecache_reflector::upstream::ApiResource;
use kubecache_server::auth::AuthSettings;
use kubecache_server::transport::Tls;
use kubecache_testkit::kubectl::{self, Credential, Kubectl};

async fn served(pki: &Pki) -> Served {
    let tls = Tls::load(tls_files(pki, "kubecache", Some(&pki.ca_pem()))).unwrap();
    common::serve(Setup {
        sim: SimConfig {
            pods: 120,
            configmaps: 30,
            namespaces: 4,
            policy: Some(Policy::demo()),
            ..SimConfig::default()
        },
        resources: vec![
            ApiResource::pods(),
            common::resource("", "configmaps", "ConfigMap", true),
        ],
        tls: Some(tls),
        auth: Some(AuthSettings::default()),
        ..Setup::default()
    })
    .await
}

/// `kind/name` of the sim's objects of `resource` in `namespace` (all
/// namespaces if `None`).
fn names(
    served: &Served,
    resource: usize,
    kind: &str,
    namespace: Option<&str>,
) -> BTreeSet<String> {
    served
        .sim
        .state(resource)
        .iter()
        .filter(|o| namespace.is_none_or(|ns| o.namespace == ns))
        .map(|o| format!("{kind}/{}", o.name))
        .collect()
}

fn lines(printed: &str) -> BTreeSet<String> {
    printed.lines().map(str::to_string).collect()
}

/// The sim's `data.step` of a config map in `NAMESPACE`, if it exists.
fn step(served: &Served, name: &str) -> Option<String> {
    let state = served.sim.state(ids::CONFIGMAPS);
    let object = state
        .iter()
        .find(|o| o.namespace == NAMESPACE && o.name == name)?;
    let object: serde_json::Value = serde_json::from_slice(&object.json()).unwrap();
    Some(
        object["data"]["step"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

/// alice's write in namespace `other` is refused by the API server, in its
/// words.
async fn refused_elsewhere(alice: &Kubectl, other: &str) {
    let refused = alice
        .fails(&[
            "create",
            "configmap",
            "elsewhere",
            "-n",
            other,
            "--from-literal=a=b",
        ])
        .await;
    assert!(
        refused.contains(&format!(
            r#"configmaps is forbidden: User "{DEVELOPER}" cannot create resource "configmaps" in API group "" in the namespace "{other}""#
        )),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_reads_and_writes_through_kubecache_as_each_user() {
    if !kubectl::available() {
        return;
    }
    let pki = Pki::new("kubectl");
    let served = served(&pki).await;
    let ca = pki.write("ca.crt", &pki.ca_pem());
    let kubectl = |user: &str, credential| {
        Kubectl::new(&pki.dir, user, &served.url, &ca, NAMESPACE, credential)
    };
    let alice = kubectl("alice", Credential::Token("alice-token"));

    // Reads come from the cache, as far as RBAC lets them.
    let mine = names(&served, ids::PODS, "pod", Some(NAMESPACE));
    assert_eq!(lines(&alice.ok(&["get", "pods", "-o", "name"]).await), mine);
    let refused = alice.fails(&["get", "pods", "-A"]).await;
    assert!(
        refused.contains(&format!(
            r#"pods is forbidden: User "{DEVELOPER}" cannot list resource "pods" in API group "" at the cluster scope"#
        )),
        "{refused}"
    );

    // Every kind of write passes through as alice, and her next read
    // (from the cache) sees it. (`--validate=false`: kubectl validates
    // against the OpenAPI v2 document in protobuf, which the sim does not
    // serve, unless the v3 documents' write operations take
    // `fieldValidation`, which the sim's do not document.)
    let get_step = [
        "get",
        "configmap",
        "from-kubectl",
        "-o",
        "jsonpath={.data.step}",
    ];
    let manifest = |step: &str| {
        let path = pki.write(
            "from-kubectl.yaml",
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-kubectl\ndata:\n  step: {step}\n"
            ),
        );
        path.display().to_string()
    };
    let applied = alice
        .ok(&["apply", "--validate=false", "-f", &manifest("created")])
        .await;
    assert_eq!(applied.trim(), "configmap/from-kubectl created");
    assert_eq!(alice.ok(&get_step).await, "created");
    // Client-side apply of a change: a strategic merge patch.
    let applied = alice
        .ok(&["apply", "--validate=false", "-f", &manifest("applied")])
        .await;
    assert_eq!(applied.trim(), "configmap/from-kubectl configured");
    assert_eq!(alice.ok(&get_step).await, "applied");
    // `kubectl edit`: a get, the editor, a strategic merge patch.
    let edited = alice
        .ok_with(
            &["edit", "--validate=false", "configmap", "from-kubectl"],
            &[("KUBE_EDITOR", "sed -i s/step:.applied/step:\\ edited/")],
        )
        .await;
    assert_eq!(edited.trim(), "configmap/from-kubectl edited");
    assert_eq!(alice.ok(&get_step).await, "edited");
    for (patch_type, patch, step) in [
        ("merge", r#"{"data":{"step":"merged"}}"#, "merged"),
        (
            "json",
            r#"[{"op":"replace","path":"/data/step","value":"json-patched"}]"#,
            "json-patched",
        ),
    ] {
        let patched = alice
            .ok(&[
                "patch",
                "configmap",
                "from-kubectl",
                "--type",
                patch_type,
                "-p",
                patch,
            ])
            .await;
        assert_eq!(patched.trim(), "configmap/from-kubectl patched");
        assert_eq!(alice.ok(&get_step).await, step);
    }
    let applied = alice
        .ok(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "--validate=false",
            "-f",
            &manifest("server-side"),
        ])
        .await;
    assert_eq!(applied.trim(), "configmap/from-kubectl serverside-applied");
    assert_eq!(alice.ok(&get_step).await, "server-side");
    assert_eq!(
        step(&served, "from-kubectl").as_deref(),
        Some("server-side")
    );

    // Logs pass through: the sim's own bytes.
    let pod = mine.first().unwrap().trim_start_matches("pod/").to_string();
    let object = served
        .sim
        .state(ids::PODS)
        .into_iter()
        .find(|o| o.namespace == NAMESPACE && o.name == pod)
        .unwrap();
    let object: serde_json::Value = serde_json::from_slice(&object.json()).unwrap();
    let container = object["spec"]["containers"][0]["name"].as_str().unwrap();
    let request = http::Request::get(format!(
        "/api/v1/namespaces/{NAMESPACE}/pods/{pod}/log?container={container}"
    ))
    .header("authorization", "Bearer admin-token")
    .body(http_body_util::Empty::<bytes::Bytes>::new())
    .unwrap();
    let (code, log) = common::send(served.sim.url(), request).await;
    assert_eq!(code, 200);
    let printed = alice.ok(&["logs", &pod, "-c", container]).await;
    assert_eq!(printed.as_bytes(), &log[..]);

    // `kubectl delete` waits for the object to go with a watch on its name,
    // which the cache answers.
    let deleted = alice.ok(&["delete", "configmap", "from-kubectl"]).await;
    assert_eq!(deleted.trim(), r#"configmap "from-kubectl" deleted"#);
    assert_eq!(step(&served, "from-kubectl"), None);
    let gone = alice.fails(&["get", "configmap", "from-kubectl"]).await;
    assert!(
        gone.contains(r#"configmaps "from-kubectl" not found"#),
        "{gone}"
    );

    // A write the API server refuses, in its words.
    let other = served
        .sim
        .state(ids::NAMESPACES)
        .iter()
        .map(|ns| ns.name.clone())
        .find(|ns| ns != NAMESPACE)
        .unwrap();
    refused_elsewhere(&alice, &other).await;

    // bob reads pods everywhere and writes nothing; eve reads nothing; a
    // token the API server does not know is not logged in.
    let bob = kubectl("bob", Credential::Token("bob-token"));
    assert_eq!(
        lines(&bob.ok(&["get", "pods", "-A", "-o", "name"]).await),
        names(&served, ids::PODS, "pod", None)
    );
    let refused = bob.fails(&["delete", "pod", &pod]).await;
    assert!(
        refused.contains(&format!(
            r#"pods "{pod}" is forbidden: User "bob" cannot delete resource "pods""#
        )),
        "{refused}"
    );
    let eve = kubectl("eve", Credential::Token("eve-token"));
    let refused = eve.fails(&["get", "configmaps"]).await;
    assert!(
        refused.contains(&format!(
            r#"configmaps is forbidden: User "eve" cannot list resource "configmaps" in API group "" in the namespace "{NAMESPACE}""#
        )),
        "{refused}"
    );
    let stranger = kubectl("stranger", Credential::Token("not-a-token"));
    let refused = stranger.fails(&["get", "pods"]).await;
    assert!(
        refused.contains("You must be logged in to the server"),
        "{refused}"
    );

    // alice by client certificate: the same reads, and writes made as her
    // (kubecache impersonates her), refused as her elsewhere.
    let (cert, key) = pki.client(DEVELOPER, &["payments-devs"]);
    let (cert, key) = (pki.write("alice.crt", &cert), pki.write("alice.key", &key));
    let alice = kubectl(
        "alice-certificate",
        Credential::Certificate {
            cert: &cert,
            key: &key,
        },
    );
    assert_eq!(lines(&alice.ok(&["get", "pods", "-o", "name"]).await), mine);
    let created = alice
        .ok(&[
            "create",
            "configmap",
            "by-certificate",
            "--from-literal=step=certified",
        ])
        .await;
    assert_eq!(created.trim(), "configmap/by-certificate created");
    assert_eq!(
        step(&served, "by-certificate").as_deref(),
        Some("certified")
    );
    refused_elsewhere(&alice, &other).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_as_another_user_reads_and_writes_as_that_user_only() {
    if !kubectl::available() {
        return;
    }
    let pki = Pki::new("kubectl-as");
    let served = served(&pki).await;
    let ca = pki.write("ca.crt", &pki.ca_pem());
    let kubectl = |user: &str, credential| {
        Kubectl::new(&pki.dir, user, &served.url, &ca, NAMESPACE, credential)
    };
    let admin = kubectl("admin", Credential::Token("admin-token"));
    let as_eve = ["--as=eve", "get", "pods"];
    let refused = admin.fails(&as_eve).await;
    assert!(
        refused.contains(&format!(
            r#"pods is forbidden: User "eve" cannot list resource "pods" in API group "" in the namespace "{NAMESPACE}""#
        )),
        "{refused}"
    );
    let mine = names(&served, ids::PODS, "pod", Some(NAMESPACE));
    let as_alice = [
        "--as=alice",
        "--as-group=payments-devs",
        "get",
        "pods",
        "-o",
        "name",
    ];
    assert_eq!(lines(&admin.ok(&as_alice).await), mine);

    // A certificate caller is impersonated upstream as whom it asks to
    // become, never as itself: an administrator's certificate writes as
    // eve, and is refused as eve.
    let (cert, key) = pki.client("cert-admin", &["system:masters"]);
    let (cert, key) = (pki.write("admin.crt", &cert), pki.write("admin.key", &key));
    let certified = kubectl(
        "admin-certificate",
        Credential::Certificate {
            cert: &cert,
            key: &key,
        },
    );
    let refused = certified
        .fails(&[
            "--as=eve",
            "create",
            "configmap",
            "as-eve",
            "--from-literal=a=b",
        ])
        .await;
    assert!(
        refused.contains(&format!(
            r#"configmaps is forbidden: User "eve" cannot create resource "configmaps" in API group "" in the namespace "{NAMESPACE}""#
        )),
        "{refused}"
    );
    assert_eq!(step(&served, "as-eve"), None);
    certified
        .ok(&[
            "--as=alice",
            "--as-group=payments-devs",
            "create",
            "configmap",
            "as-alice",
            "--from-literal=step=impersonated",
        ])
        .await;
    assert_eq!(step(&served, "as-alice").as_deref(), Some("impersonated"));

    // Who may not impersonate is told so, by token or by certificate (a
    // raw read: kubectl's discovery, refused the same, prints `unknown` for
    // a JSON error, against the API server too).
    let alice = kubectl("alice", Credential::Token("alice-token"));
    let (cert, key) = pki.client(DEVELOPER, &["payments-devs"]);
    let (cert, key) = (pki.write("alice.crt", &cert), pki.write("alice.key", &key));
    let alice_certified = kubectl(
        "alice-certificate",
        Credential::Certificate {
            cert: &cert,
            key: &key,
        },
    );
    let raw = format!("/api/v1/namespaces/{NAMESPACE}/pods");
    for caller in [&alice, &alice_certified] {
        let refused = caller.fails(&["--as=eve", "get", "--raw", &raw]).await;
        assert!(
            refused.contains(&format!(
                r#"users "eve" is forbidden: User "{DEVELOPER}" cannot impersonate resource "users" in API group "" at the cluster scope"#
            )),
            "{refused}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_discovery_and_openapi_come_from_kubecache_s_copies() {
    if !kubectl::available() {
        return;
    }
    let pki = Pki::new("kubectl-discovery");
    let served = served(&pki).await;
    let ca = pki.write("ca.crt", &pki.ca_pem());
    // Each invocation as alice or bob with a discovery cache of its own,
    // so that every one runs discovery (and `explain` reads OpenAPI v3).
    let commands: [&[&str]; 3] = [
        &["get", "pods", "-o", "name"],
        &["api-resources", "--no-headers"],
        &["explain", "pods.spec.containers"],
    ];
    let invocation = |i: usize| {
        let (user, token) = [("alice", "alice-token"), ("bob", "bob-token")][i % 2];
        let kubectl = Kubectl::new(
            &pki.dir,
            &format!("{user}-{i}"),
            &served.url,
            &ca,
            NAMESPACE,
            Credential::Token(token),
        );
        let args = commands[i % commands.len()];
        async move { (args, kubectl.ok(args).await) }
    };
    let check = |(args, printed): (&[&str], String)| match args[0] {
        "get" => assert!(printed.lines().all(|l| l.starts_with("pod/")), "{printed}"),
        "api-resources" => {
            let names: BTreeSet<&str> = printed
                .lines()
                .filter_map(|l| l.split_whitespace().next())
                .collect();
            for name in ["pods", "configmaps", "namespaces", "widgets"] {
                assert!(names.contains(name), "{printed}");
            }
        }
        _ => assert!(
            printed.contains("FIELD: containers <[]Container>"),
            "{printed}"
        ),
    };

    // The first of each kind of invocation has kubecache fetch each
    // document it needs once, no earlier than now.
    let first_fetch = std::time::Instant::now();
    let before = served.sim.discovery_requests();
    for i in 0..commands.len() {
        check(invocation(i).await);
    }
    let documents = served.sim.discovery_requests() - before;
    assert!(documents > 0);

    // The next 100, four at a time: none reaches the API server while
    // kubecache's copies are fresh (30 s). A copy fetched no earlier than
    // `first_fetch` is fetched again at most once per 30 s after it, so on
    // a machine that slow the bound counts whole 30 s since then, not
    // windows of this loop (which a refresh could straddle).
    let before = served.sim.discovery_requests();
    let runs: Vec<usize> = (commands.len()..commands.len() + 100).collect();
    for batch in runs.chunks(4) {
        let batch: Vec<_> = batch.iter().map(|&i| tokio::spawn(invocation(i))).collect();
        for run in batch {
            check(run.await.unwrap());
        }
    }
    let asked = served.sim.discovery_requests() - before;
    let windows = first_fetch.elapsed().as_secs() / 30;
    assert!(
        asked <= documents * windows,
        "{asked} discovery and OpenAPI requests reached the API server {:?} after the first",
        first_fetch.elapsed()
    );
}
