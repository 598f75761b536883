//! `kubecache`: lists and watches the configured resources into indexed
//! in-memory stores and serves them over the Kubernetes API, the query API
//! and `/metrics` (see docs/api.md and docs/metrics.md).
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
//! Health: `/healthz`, `/livez` and `/readyz` are also served alone on the
//! health listener (`--health-listen`), bound here with the API's, so that
//! the kubelet's probes never wait behind the API's clients. A resource
//! whose reflector fails (401, 403, 404: it retries)
//! is not ready, and `/readyz` says why; a reflector task that ends (a bug)
//! is logged, and `/livez` fails so that the kubelet restarts the process.

use std::io::IsTerminal;

use anyhow::Context;
use clap::Parser;
use kubecache_server::App;
use kubecache_server::config::{Cli, Config, FileConfig};
use kubecache_server::transport::Limits;

/// jemalloc returns what transients freed (see the dependency's comment in
/// `Cargo.toml`); its background threads purge freed pages after 10 s.
/// With the feature `jemalloc` (the image's build); the system allocator
/// otherwise.
#[cfg(feature = "jemalloc")]
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
    let demo_ca = demo_https(&cli, &mut config)?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("listen (--listen): binding {}", config.listen))?;
    let health = match config.health_listen {
        Some(address) => Some(
            tokio::net::TcpListener::bind(address)
                .await
                .with_context(|| format!("healthListen (--health-listen): binding {address}"))?,
        ),
        None => None,
    };
    let scheme = if config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let url = format!("{scheme}://{}", demo_address(config.listen));
    let (upstream, _demo) = upstream(&cli, &url, demo_ca.as_deref()).await?;
    match &config.tls {
        Some(tls) => tracing::info!(
            listen = %config.listen,
            cert = %tls.files().cert.display(),
            client_ca = ?tls.files().client_ca,
            "serving HTTPS"
        ),
        None => tracing::info!(listen = %config.listen, "serving HTTP"),
    }
    if let Some(address) = health.as_ref().and_then(|h| h.local_addr().ok()) {
        tracing::info!(listen = %address, "serving /healthz, /livez and /readyz over HTTP");
    }
    let app = App::start(config, &upstream).await?;
    tokio::spawn(kubecache_server::progress::report(
        app.caches().clone(),
        std::io::stderr().is_terminal(),
    ));
    #[cfg(unix)]
    tokio::spawn(forget_on_hangup(app.auth().clone()));
    app.run(listener, health, stop_signal()).await;
    tracing::info!("stopped");
    Ok(())
}

/// The API server's configuration: the in-process simulated API server
/// with `--simulate` (kept alive by the returned guard; kubecache at `url`,
/// trusted through `ca`), otherwise from the kubeconfig or the service
/// account.
async fn upstream(
    cli: &Cli,
    url: &str,
    ca: Option<&std::path::Path>,
) -> anyhow::Result<(kube::Config, Option<impl Sized>)> {
    if let Some(pods) = cli.simulate {
        let (config, demo) = simulated(cli, pods, url, ca).await?;
        return Ok((config, Some(demo)));
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
/// `https://127.0.0.1` do: harmless) and the h2 crate's warning for each
/// HTTP/2 connection it ends for abuse (rapid reset, floods: one line per
/// attacking connection, hundreds a minute under attack, from any client)
/// are left out.
fn log(format: &str) -> anyhow::Result<()> {
    let filter = || {
        tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| "info,rustls::msgs::handshake=error,h2=error".into())
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
    let descriptors = match kubecache_server::transport::raise_descriptor_limit() {
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

/// The demo of `--simulate` (see [`kubecache_server::demo`]) for
/// kubecache at `url`, its CA `ca` when it serves HTTPS: kubecache's
/// configuration for the simulated API server, and the demo to keep.
#[cfg(feature = "simulate")]
async fn simulated(
    cli: &Cli,
    pods: usize,
    url: &str,
    ca: Option<&std::path::Path>,
) -> anyhow::Result<(kube::Config, kubecache_server::demo::Demo)> {
    let kubeconfig = demo_kubeconfig(cli);
    let demo =
        kubecache_server::demo::Demo::start(pods, cli.simulate_churn, url, ca, &kubeconfig).await?;
    Ok((demo.upstream.clone(), demo))
}

/// Where the demo writes its kubeconfig: `--kubeconfig-out`, or its
/// default.
#[cfg(feature = "simulate")]
fn demo_kubeconfig(cli: &Cli) -> std::path::PathBuf {
    cli.kubeconfig_out
        .clone()
        .unwrap_or_else(kubecache_server::demo::default_kubeconfig)
}

/// With `--simulate`, no TLS files and `--simulate-scheme https`: serves
/// HTTPS with a certificate made for the demo; the CA to trust.
#[cfg(feature = "simulate")]
fn demo_https(cli: &Cli, config: &mut Config) -> anyhow::Result<Option<std::path::PathBuf>> {
    match cli.simulate_scheme.as_str() {
        "https" => {}
        "http" => return Ok(None),
        other => anyhow::bail!("--simulate-scheme {other:?}: expected https or http"),
    }
    if cli.simulate.is_none() || config.tls.is_some() {
        return Ok(None);
    }
    let (files, ca) = kubecache_server::demo::make_pki(&demo_kubeconfig(cli))?;
    config.tls = Some(kubecache_server::transport::Tls::load(files)?);
    Ok(Some(ca))
}

/// This build has no demo: nothing to serve HTTPS for.
#[cfg(not(feature = "simulate"))]
fn demo_https(_: &Cli, _: &mut Config) -> anyhow::Result<Option<std::path::PathBuf>> {
    Ok(None)
}

/// This build has no simulated API server (the image leaves it out).
#[cfg(not(feature = "simulate"))]
async fn simulated(
    _: &Cli,
    _: usize,
    _: &str,
    _: Option<&std::path::Path>,
) -> anyhow::Result<(kube::Config, ())> {
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
