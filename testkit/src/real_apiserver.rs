//! The real kube-apiserver of `../shared/real-apiserver/` (v1.28.4 with
//! etcd, built and started by its `setup`), for the tests that run against
//! it when `REAL_APISERVER_ENV` names the kit's `env.sh`, and against the
//! sim otherwise. CI sets no such variable: it runs them on the sim.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Api;
use kube::api::Patch;
use tokio::task::JoinHandle;

/// The variable that names the kit's `env.sh`.
pub const ENV: &str = "REAL_APISERVER_ENV";

/// Where the real API server is and how to reach it, as its `env.sh` says.
#[derive(Debug, Clone)]
pub struct RealApiServer {
    /// `https://127.0.0.1:6443`.
    pub url: String,
    /// The CA of its serving certificate and of the client certificates it
    /// accepts (PEM file).
    pub ca_file: PathBuf,
    /// A kubeconfig as kubecache's own user (the deploy role).
    pub kubeconfig: PathBuf,
    /// A kubeconfig as `admin` (`system:masters`).
    pub admin_kubeconfig: PathBuf,
}

/// The real API server when [`ENV`] names an `env.sh`; `None` otherwise.
/// A variable that names a file that cannot be read, or that lacks a
/// value, fails the test: asked for the real server, a test must not run
/// on the sim in silence.
pub fn from_env() -> Option<RealApiServer> {
    let path = std::env::var_os(ENV)?;
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{ENV}={}: {e}", path.to_string_lossy()));
    let vars: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|line| line.trim().strip_prefix("export "))
        .flat_map(str::split_whitespace)
        .filter_map(|pair| pair.split_once('='))
        .collect();
    let var = |name: &str| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
            .unwrap_or_else(|| panic!("{ENV}: {name} is not in {}", path.to_string_lossy()))
    };
    Some(RealApiServer {
        url: var("REAL_APISERVER_URL"),
        ca_file: var("REAL_APISERVER_CA").into(),
        kubeconfig: var("REAL_APISERVER_KUBECONFIG").into(),
        admin_kubeconfig: var("REAL_APISERVER_ADMIN_KUBECONFIG").into(),
    })
}

/// Says on the test's stderr, past the harness's capture, which server a
/// test runs against: `name` and the real server's URL or "the sim".
pub fn say_against(test: &str, real: Option<&RealApiServer>) {
    let against = real.map_or("the simulated API server".to_string(), |r| {
        format!("the real kube-apiserver at {}", r.url)
    });
    let _ = writeln!(std::io::stderr(), "{test}: against {against}");
}

/// The namespace of the tests' own objects on the real server.
pub const NAMESPACE: &str = "kubecache-real-test";

/// Pods in [`NAMESPACE`] (made on first use).
pub const PODS: usize = 200;

impl RealApiServer {
    /// A client as `admin`.
    pub async fn admin(&self) -> kube::Client {
        kube::Client::try_from(config_of(&self.admin_kubeconfig).await).unwrap()
    }

    /// The configuration of kubecache's own user (kubecache's upstream).
    pub async fn kubecache_config(&self) -> kube::Config {
        config_of(&self.kubeconfig).await
    }

    /// A client as kubecache's own user.
    pub async fn kubecache(&self) -> kube::Client {
        kube::Client::try_from(self.kubecache_config().await).unwrap()
    }

    /// Makes [`NAMESPACE`] and its [`PODS`] pods where missing.
    pub async fn ensure_pods(&self) {
        let admin = self.admin().await;
        let namespace = serde_json::from_value(serde_json::json!({
            "metadata": {"name": NAMESPACE}
        }))
        .unwrap();
        created(
            Api::<Namespace>::all(admin.clone())
                .create(&Default::default(), &namespace)
                .await,
        );
        let pods: Api<Pod> = Api::namespaced(admin, NAMESPACE);
        for i in 0..PODS {
            created(
                pods.create(&Default::default(), &pod(&format!("pod-{i}")))
                    .await,
            );
        }
    }

    /// Writes to [`NAMESPACE`]'s pods at `per_sec` until the handle is
    /// aborted: each second one pod of this writer's own created and the
    /// one created the second before deleted, the rest merge patches of
    /// the [`PODS`] round-robin.
    pub async fn churn(&self, per_sec: u64) -> JoinHandle<()> {
        let pods: Api<Pod> = Api::namespaced(self.admin().await, NAMESPACE);
        // The created pods' names are this writer's own: writers of tests
        // running at once, or of an earlier run that was stopped between a
        // create and its delete, never meet.
        let writer = unique();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / per_sec as f64));
            for n in 0u64.. {
                tick.tick().await;
                let (second, nth) = (n / per_sec, n % per_sec);
                let written = match nth {
                    0 => pods
                        .create(
                            &Default::default(),
                            &pod(&format!("churn-{writer}-{second}")),
                        )
                        .await
                        .map(drop),
                    1 if second > 0 => pods
                        .delete(
                            &format!("churn-{writer}-{}", second - 1),
                            &Default::default(),
                        )
                        .await
                        .map(drop),
                    _ => {
                        let patch = serde_json::json!({"metadata": {"annotations": {"kubecache-test/churn": n.to_string()}}});
                        let name = format!("pod-{}", n as usize % PODS);
                        pods.patch(&name, &Default::default(), &Patch::Merge(patch))
                            .await
                            .map(drop)
                    }
                };
                written.expect("a write to the real API server");
            }
        })
    }

    /// A resourceVersion that a watch of [`NAMESPACE`]'s pods reaches once
    /// it has every pod change made before this call, and the pods then as
    /// `namespace/name -> resourceVersion` (a consistent list). Not the
    /// list's own resourceVersion: the server's writes of other objects
    /// (its identity lease, about every 10 s) move that one, and a watch of
    /// pods reaches it only at its next bookmark, up to a minute away in
    /// 1.28. So one more pod change is written, and its resourceVersion is
    /// the one to wait for. (Tests that write [`NAMESPACE`] at once each see
    /// the other's later changes: run them one at a time.)
    pub async fn pods(&self) -> (u64, BTreeMap<String, u64>) {
        let pods: Api<Pod> = Api::namespaced(self.admin().await, NAMESPACE);
        let rv = |rv: Option<&String>| rv.unwrap().parse::<u64>().unwrap();
        // A value never written before: a patch that changes nothing is no
        // change, and gets no resourceVersion of its own.
        let marker = serde_json::json!({"metadata": {"annotations": {"kubecache-test/marker": unique().to_string()}}});
        let marked = pods
            .patch("pod-0", &Default::default(), &Patch::Merge(marker))
            .await
            .expect("a write to the real API server");
        let list = pods.list(&Default::default()).await.unwrap();
        let state = list
            .items
            .iter()
            .map(|p| {
                let key = format!("{NAMESPACE}/{}", p.metadata.name.as_ref().unwrap());
                (key, rv(p.metadata.resource_version.as_ref()))
            })
            .collect();
        (rv(marked.metadata.resource_version.as_ref()), state)
    }
}

/// The nanoseconds since the Unix epoch: a value no earlier run of the
/// tests used.
fn unique() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// The configuration a kubeconfig file gives.
async fn config_of(path: &Path) -> kube::Config {
    let kubeconfig = kube::config::Kubeconfig::read_from(path).unwrap();
    kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap()
}

/// Created, or there already (409).
fn created<T>(result: Result<T, kube::Error>) {
    match result {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(e) => panic!("creating on the real API server: {e}"),
    }
}

/// A pod of [`NAMESPACE`] (no scheduler runs: it stays Pending).
fn pod(name: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": {"app": "kubecache-real-test"}},
        "spec": {"containers": [{"name": "c", "image": "registry.invalid/pause"}]}
    }))
    .unwrap()
}
