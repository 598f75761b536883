//! The `--simulate` demo (the README's first command): the simulated API
//! server with the demo RBAC policy, which kubecache reads as its own
//! service account; HTTPS with a CA and a serving certificate made at
//! start; and a kubeconfig with a context per demo user, so that
//! `kubectl --kubeconfig <it> get pods -A` works as written.

use std::path::{Path, PathBuf};

use anyhow::Context;
use kubecache_loadtest::sim::auth::demo;
use kubecache_loadtest::sim::{HistoryWindow, Policy, Sim, SimConfig};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};

use crate::transport::TlsFiles;

/// Where the demo's kubeconfig goes unless `--kubeconfig-out` says.
pub fn default_kubeconfig() -> PathBuf {
    std::env::temp_dir().join("kubecache-demo.kubeconfig")
}

/// The directory of the demo's CA and serving certificate: beside the
/// kubeconfig, named after it (`<name>-pki`), so that two demos with their
/// own kubeconfigs never share one.
fn pki_dir(kubeconfig: &Path) -> PathBuf {
    let stem = kubeconfig
        .file_stem()
        .map_or_else(|| "kubecache-demo".into(), |s| s.to_string_lossy());
    kubeconfig.with_file_name(format!("{stem}-pki"))
}

/// A new CA, and a serving certificate it signs for 127.0.0.1 and
/// localhost, written beside `kubeconfig` (`ca.crt`, `tls.crt`,
/// `tls.key`): the files to serve HTTPS with, and the CA's.
///
/// # Errors
///
/// A file cannot be written.
pub fn make_pki(kubeconfig: &Path) -> anyhow::Result<(TlsFiles, PathBuf)> {
    let dir = pki_dir(kubeconfig);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name
        .push(DnType::CommonName, "kubecache demo CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;
    let mut serving = CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])?;
    serving
        .distinguished_name
        .push(DnType::CommonName, "kubecache");
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate()?;
    let cert = serving.signed_by(&key, &ca)?;
    let write = |name: &str, pem: String| -> anyhow::Result<PathBuf> {
        let path = dir.join(name);
        std::fs::write(&path, pem).with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    };
    let ca = write("ca.crt", ca.pem())?;
    let files = TlsFiles {
        cert: write("tls.crt", cert.pem())?,
        key: write("tls.key", key.serialize_pem())?,
        client_ca: None,
    };
    Ok((files, ca))
}

/// The running demo: the simulated API server (stopped when dropped) and
/// kubecache's configuration for it.
pub struct Demo {
    /// How kubecache reaches the simulated API server, as its own service
    /// account.
    pub upstream: kube::Config,
    /// The simulated API server.
    pub sim: Sim,
}

impl Demo {
    /// Starts the simulated API server with `pods` pods, 500 config maps
    /// and 100 widgets, `churn` pod writes per second, and the demo RBAC
    /// policy; writes to `kubeconfig` a context per demo user for
    /// kubecache at `url` (trusting `ca`, when it serves HTTPS), and says
    /// so in one log line.
    ///
    /// # Errors
    ///
    /// The simulated API server does not start, or the kubeconfig cannot
    /// be written.
    pub async fn start(
        pods: usize,
        churn: f64,
        url: &str,
        ca: Option<&Path>,
        kubeconfig: &Path,
    ) -> anyhow::Result<Demo> {
        let config = SimConfig {
            pods,
            widgets: 100,
            configmaps: 500,
            churn_per_sec: churn,
            policy: Some(Policy::demo()),
            // Five minutes of watch history, not the 100k events of
            // kube-apiserver's watch cache (33 minutes at 50 writes/s): in
            // one process with kubecache, the sim's memory would keep
            // rising long after kubecache's levelled off.
            watch_cache: HistoryWindow::ETCD,
            ..SimConfig::default()
        };
        let (sim_url, sim) = Sim::start(config)
            .await
            .context("starting the simulated API server")?;
        tracing::info!(url = %sim_url, pods, "simulated API server started");
        let own = sim
            .kubeconfig_for(demo::KUBECACHE)
            .context("the demo policy has kubecache's service account")?;
        let own = kube::config::Kubeconfig::from_yaml(&own)?;
        let upstream = kube::Config::from_custom_kubeconfig(own, &Default::default()).await?;
        let trust = ca.map_or_else(String::new, |ca| {
            format!("    certificate-authority: {}\n", ca.display())
        });
        let users = sim.kubeconfig().replace(
            &format!("    server: {sim_url}\n"),
            &format!("    server: {url}\n{trust}"),
        );
        std::fs::write(kubeconfig, users)
            .with_context(|| format!("writing {}", kubeconfig.display()))?;
        tracing::info!(
            kubeconfig = %kubeconfig.display(),
            "demo users (contexts): {} (everything), {} (pods, configmaps, widgets in {}), \
             {} (pods everywhere), {} (nothing); try: kubectl --kubeconfig {} get pods -A; \
             kubectl --kubeconfig {} --context {} get pods -n {}",
            demo::ADMIN,
            demo::DEVELOPER,
            demo::NAMESPACE,
            demo::POD_READER,
            demo::NOBODY,
            kubeconfig.display(),
            kubeconfig.display(),
            demo::DEVELOPER,
            demo::NAMESPACE,
        );
        Ok(Demo { upstream, sim })
    }
}
