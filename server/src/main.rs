//! `kubecache`: lists and watches the configured resources into indexed
//! in-memory stores and serves them over the Kubernetes API, the query API
//! and `/metrics` (see README.md).
//!
//! Start-up: the configuration is validated whole (an invalid field stops
//! the start with a message naming it), the listener is bound, then every
//! resource is found by discovery and its reflector started. The API
//! answers at once: `/readyz` and reads of a resource say 503 until it has
//! synced. Serving (HTTP or HTTPS, with TLS files reloaded as they change)
//! is `kubecache_server::serving`. SIGTERM or Ctrl-C: stop accepting, end
//! every watch cleanly (its client resumes elsewhere from its last
//! resourceVersion), let answers in flight finish for up to
//! [`SHUTDOWN_GRACE`], exit.
//!
//! Warm restart (`--state-dir`): the cluster's identity is read once at
//! start, each resource's state file is loaded before its first list (and
//! replaces it), and the files are saved periodically and once more from
//! the stop signal, while answers drain, within the same grace (see
//! `kubecache_server::warm_restart`).
//!
//! Open files: the soft limit is raised to the hard one at start-up (as
//! Go's runtime does), and the connection limits are lowered, with a
//! warning, if they would not fit in it.
//!
//! Health: a resource whose reflector fails (401, 403, 404: it retries)
//! is not ready, and `/readyz` says why; a reflector task that ends (a bug)
//! is logged, and `/livez` fails so that the kubelet restarts the process.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use kubecache_reflector::upstream::{ApiResource, ResourceSpec};
use kubecache_server::auth::Auth;
use kubecache_server::config::{Cli, Config, FileConfig};
use kubecache_server::serving::{Limits, Server};
use kubecache_server::warm_restart::{StateDir, save_periodically};
use kubecache_server::{ServedResource, ServedResources};
use tokio::task::JoinHandle;

/// How long requests in flight may take to finish after a shutdown signal.
/// Kubernetes waits `terminationGracePeriodSeconds` (30 s by default)
/// before it kills the container; this leaves it a margin.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// jemalloc returns what transients freed (see the dependency's comment in
/// `Cargo.toml`); its background threads purge freed pages after 10 s.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let file = match &cli.config {
        Some(path) => FileConfig::read(path)?,
        None => FileConfig::default(),
    };
    let config = Config::resolve(&cli, file)?;
    let limits = fit_open_files(config.connections);
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
    let client = kube::Client::try_from(upstream.clone())?;
    let pass_through = kubecache_server::PassThrough::new(&upstream)
        .context("the API server's client for pass-through")?;
    let state_dir = match &config.state {
        Some(state) => {
            let api_server = upstream.cluster_url.to_string();
            match StateDir::open(&state.dir, &client, &api_server).await {
                Ok(dir) => {
                    tracing::info!(dir = %state.dir.display(), cluster = dir.cluster(), interval = ?state.save_interval, "warm restart: state files saved and loaded here");
                    Some(dir)
                }
                Err(error) => {
                    tracing::error!(dir = %state.dir.display(), "no warm restart (every start lists): {error:#}");
                    None
                }
            }
        }
        None => None,
    };
    let mut caches = Vec::new();
    for resource in config.resources {
        let api_resource = ApiResource::discover(&client, &resource.name)
            .await
            .with_context(|| format!("resource {:?}", resource.name))?;
        let spec = ResourceSpec {
            resource: api_resource,
            namespace: resource.namespace,
            label_selector: resource.label_selector,
            field_selector: resource.field_selector,
        };
        let (cache, task) = ServedResource::start(
            client.clone(),
            spec,
            resource.store,
            resource.reflector,
            &config.serve,
            state_dir.as_ref(),
        )
        .with_context(|| format!("resource {:?}", resource.name))?;
        tokio::spawn(reflector_ended(cache.name(), task));
        caches.push(cache);
    }
    let caches = Arc::new(ServedResources::new(caches, config.serve));
    tokio::spawn(kubecache_server::progress::report(
        caches.clone(),
        std::io::stderr().is_terminal(),
    ));
    match &config.tls {
        Some(tls) => tracing::info!(
            listen = %config.listen,
            cert = %tls.files().cert.display(),
            client_ca = ?tls.files().client_ca,
            "serving HTTPS"
        ),
        None => tracing::info!(listen = %config.listen, "serving HTTP"),
    }
    let auth = if config.auth.enabled {
        Auth::kubernetes(&upstream, config.auth.settings).context("the review client")?
    } else {
        tracing::warn!(
            "--auth=none: NO AUTHORIZATION. Anyone who reaches {} reads every cached object. \
             For local runs and benchmarks only.",
            config.listen
        );
        Auth::None
    };
    let saver = match (&state_dir, &config.state) {
        (Some(_), Some(state)) => Some(tokio::spawn(save_periodically(
            caches.clone(),
            state.save_interval,
            SHUTDOWN_GRACE,
            caches.shutting_down(),
        ))),
        _ => None,
    };
    let router = kubecache_server::router(caches.clone(), auth, pass_through);
    let stopping = caches.clone();
    let server = Server::new(listener, router)
        .tls(config.tls)
        .limits(limits)
        .write_stall(config.write_stall)
        .serve(async move {
            stop_signal().await;
            tracing::info!("stopping: no new connections; ending watches");
            stopping.shut_down();
        });
    let mut shutting_down = caches.shutting_down();
    tokio::select! {
        () = server => {},
        _ = async {
            let _ = shutting_down.wait_for(|down| *down).await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } => tracing::warn!(grace = ?SHUTDOWN_GRACE, "requests still in flight: exiting anyway"),
    }
    if let Some(saver) = saver {
        // Bounded by the grace from the stop signal on, as the drain is.
        let _ = saver.await;
    }
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

/// Waits for a reflector's task to end and says why. It never ends by
/// itself (it retries every failure, and catches the panics of its steps),
/// so this is a bug: its store is then closed and not ready ("the reflector
/// stopped"), and `/livez` fails so that the kubelet restarts the process.
async fn reflector_ended(resource: String, task: JoinHandle<()>) {
    // A JoinError says whether the task panicked, and with what message.
    let why = match task.await {
        Ok(()) => "it returned".to_string(),
        Err(error) => error.to_string(),
    };
    tracing::error!(%resource, %why, "the reflector stopped: /livez fails from now on");
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
