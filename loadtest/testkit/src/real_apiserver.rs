//! The real kube-apiserver of `../shared/real-apiserver/` (v1.28.4 with
//! etcd, built and started by its `setup`), for the tests that run against
//! it when `REAL_APISERVER_ENV` names the kit's `env.sh`, and against the
//! sim otherwise. CI sets no such variable: it runs them on the sim.

use std::io::Write as _;
use std::path::PathBuf;

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
