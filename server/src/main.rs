//! `kubecache`: lists and watches the configured resources into indexed
//! in-memory stores and serves them over the Kubernetes API, the query API
//! and `/metrics` (see README.md).
//!
//! Start-up: the configuration is validated whole (an invalid field stops
//! the start with a message naming it), the listener is bound, then
//! kubecache is started by its composition root ([`App`]): every resource
//! found by discovery, its reflector started (from its state file with
//! `--state-dir`). The API answers at once: `/readyz` and reads of a
//! resource say 503 until it has synced. SIGTERM or Ctrl-C: [`App::run`]
//! stops within its grace.
//!
//! Open files: the soft limit is raised to the hard one at start-up (as
//! Go's runtime does), and the connection limits are lowered, with a
//! warning, if they would not fit in it.
//!
//! Health: a resource whose reflector fails (401, 403, 404: it retries)
//! is not ready, and `/readyz` says why; a reflector task that ends (a bug)
//! is logged, and `/livez` fails so that the kubelet restarts the process.

use std::io::IsTerminal;

use anyhow::Context;
use clap::Parser;
use kubecache_server::App;
use kubecache_server::config::{Cli, Config, FileConfig};
use kubecache_server::serving::Limits;

/// jemalloc returns what transients freed (see the dependency's comment in
/// `Cargo.toml`); its background threads purge freed pages after 10 s.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    log(&cli.log_format)?;
    let file = match &cli.config {
        Some(path) => FileConfig::read(path)?,
        None => FileConfig::default(),
    };
    let mut config = Config::resolve(&cli, file)?;
    config.connections = fit_open_files(config.connections);
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("listen (--listen): binding {}", config.listen))?;
    let scheme = if config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let url = format!("{scheme}://{}", demo_address(config.listen));
    let (upstream, _sim) = upstream(&cli, &url).await?;
    match &config.tls {
        Some(tls) => tracing::info!(
            listen = %config.listen,
            cert = %tls.files().cert.display(),
            client_ca = ?tls.files().client_ca,
            "serving HTTPS"
        ),
        None => tracing::info!(listen = %config.listen, "serving HTTP"),
    }
    let app = App::start(config, &upstream).await?;
    tokio::spawn(kubecache_server::progress::report(
        app.caches().clone(),
        std::io::stderr().is_terminal(),
    ));
    #[cfg(unix)]
    tokio::spawn(forget_on_hangup(app.auth().clone()));
    app.run(listener, stop_signal()).await;
    tracing::info!("stopped");
    Ok(())
}

/// The API server's configuration: the in-process simulated API server
/// with `--simulate` (kept alive by the returned guard; kubecache at `url`),
/// otherwise from the kubeconfig or the service account.
async fn upstream(cli: &Cli, url: &str) -> anyhow::Result<(kube::Config, Option<impl Sized>)> {
    if let Some(pods) = cli.simulate {
        let (config, sim) = simulated(pods, cli.simulate_churn, url).await?;
        return Ok((config, Some(sim)));
    }
    let config = match &cli.kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?
        }
        None => kube::Config::infer()
            .await
            .context("no kubeconfig and not in a cluster: pass --kubeconfig, or --simulate N")?,
    };
    Ok((config, None))
}

/// Logs to stderr at `RUST_LOG`'s levels in `format`: `text`, coloured
/// only on a terminal, or `json`. Without `RUST_LOG`: `info`, but rustls's
/// warnings about a client's server name (one per connection from a client
/// that sends an IP address as its name, as curl and wrk to
/// `https://127.0.0.1` do: harmless) are left out.
fn log(format: &str) -> anyhow::Result<()> {
    let filter = || {
        tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| "info,rustls::msgs::handshake=error".into())
    };
    let builder = tracing_subscriber::fmt().with_writer(std::io::stderr);
    match format {
        "text" => builder
            .with_env_filter(filter())
            .with_ansi(std::io::stderr().is_terminal())
            .init(),
        "json" => builder.json().with_env_filter(filter()).init(),
        other => anyhow::bail!("--log-format {other:?}: expected text or json"),
    }
    Ok(())
}

/// Raises the open-file limit and lowers `limits` to fit in it.
fn fit_open_files(limits: Limits) -> Limits {
    let descriptors = match kubecache_server::serving::raise_descriptor_limit() {
        Ok(descriptors) => descriptors,
        Err(error) => {
            tracing::warn!(%error, "the open-file limit cannot be read: connections not bounded by it");
            return limits;
        }
    };
    let fitted = limits.within_descriptors(descriptors);
    if fitted != limits {
        tracing::warn!(
            open_files = descriptors,
            max_connections = fitted.max_connections,
            max_connections_per_address = fitted.max_connections_per_address,
            "connection limits lowered to fit the open-file limit (ulimit -n)"
        );
    }
    fitted
}

/// Where a local client reaches an address kubecache listens on.
fn demo_address(listen: std::net::SocketAddr) -> std::net::SocketAddr {
    match listen.ip() {
        ip if ip.is_unspecified() => ([127, 0, 0, 1], listen.port()).into(),
        _ => listen,
    }
}

/// Starts the simulated API server with `pods` pods, 500 config maps and
/// 100 widgets, `churn` pod writes per second, and the demo RBAC policy;
/// kubecache reads it as its own service account. Writes a kubeconfig with
/// a context per demo user for kubecache at `url`, and says where.
#[cfg(feature = "simulate")]
async fn simulated(
    pods: usize,
    churn: f64,
    url: &str,
) -> anyhow::Result<(kube::Config, kubecache_loadtest::sim::Sim)> {
    use kubecache_loadtest::sim::auth::demo;
    use kubecache_loadtest::sim::{HistoryWindow, Policy, Sim, SimConfig};
    let config = SimConfig {
        pods,
        widgets: 100,
        configmaps: 500,
        churn_per_sec: churn,
        policy: Some(Policy::demo()),
        // Five minutes of watch history, not the 100k events of
        // kube-apiserver's watch cache (33 minutes at 50 writes/s): in one
        // process with kubecache, the sim's memory would keep rising long
        // after kubecache's levelled off.
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
    let config = kube::Config::from_custom_kubeconfig(own, &Default::default()).await?;
    let users = sim.kubeconfig().replace(&sim_url, url);
    let path = std::env::temp_dir().join("kubecache-demo.kubeconfig");
    std::fs::write(&path, users).with_context(|| format!("writing {}", path.display()))?;
    tracing::info!(
        kubeconfig = %path.display(),
        "demo users (contexts): {} (everything), {} (pods, configmaps, widgets in {}), \
         {} (pods everywhere), {} (nothing); e.g. curl -H 'Authorization: Bearer alice-token' \
         {url}/api/v1/namespaces/{}/pods",
        demo::ADMIN,
        demo::DEVELOPER,
        demo::NAMESPACE,
        demo::POD_READER,
        demo::NOBODY,
        demo::NAMESPACE,
    );
    Ok((config, sim))
}

/// This build has no simulated API server (the image leaves it out).
#[cfg(not(feature = "simulate"))]
async fn simulated(_pods: usize, _churn: f64, _url: &str) -> anyhow::Result<(kube::Config, ())> {
    anyhow::bail!(
        "--simulate: this kubecache was built without the simulated API server; \
         build it with `cargo build -p kubecache-server --features simulate`"
    )
}

/// On every SIGHUP, forgets the kept review answers: an operator who
/// revoked a token or a permission makes it take effect at once.
#[cfg(unix)]
async fn forget_on_hangup(auth: std::sync::Arc<kubecache_server::auth::Auth>) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hangups) = signal(SignalKind::hangup()) else {
        tracing::warn!("cannot listen for SIGHUP: kept review answers expire by their TTLs only");
        return;
    };
    while hangups.recv().await.is_some() {
        auth.forget();
    }
}

/// SIGTERM (Kubernetes stopping the pod) or Ctrl-C.
async fn stop_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}
