//! `kubecache`: lists and watches the configured resources into indexed
//! in-memory stores and keeps them current.
//!
//! This build runs the upstream half of kubecache: the reflectors and their
//! stores. The Kubernetes-compatible HTTP API in front of the stores is the
//! next step (see README.md, "Status").

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use kubecache_loadtest::sim::{Sim, SimConfig};
use kubecache_reflector::upstream::{
    ApiResource, Reflector, ReflectorConfig, ReflectorStatus, ResourceSpec, Strategy, Upstream,
};
use kubecache_reflector::{StoreConfig, StoreReader, store};
use tokio::sync::watch;

#[derive(Parser)]
#[command(
    version,
    about = "A shared, indexed, in-memory cache in front of the Kubernetes API server"
)]
struct Cli {
    /// Resources to cache, by plural or plural.group (e.g. pods,configmaps,widgets.example.com).
    #[arg(
        long,
        env = "KUBECACHE_RESOURCES",
        value_delimiter = ',',
        default_value = "pods"
    )]
    resources: Vec<String>,
    /// Initial-list strategy: auto, parallel, streaming or list-watch.
    #[arg(long, env = "KUBECACHE_STRATEGY", default_value = "auto")]
    strategy: Strategy,
    /// Objects per list page.
    #[arg(long, env = "KUBECACHE_PAGE_SIZE", default_value_t = 500)]
    page_size: usize,
    /// Kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<std::path::PathBuf>,
    /// Run against an in-process simulated API server with this many realistic pods (and churn).
    #[arg(long)]
    simulate: Option<usize>,
    /// Pod writes per second of the simulated API server.
    #[arg(long, default_value_t = 50.0)]
    simulate_churn: f64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let cli = Cli::parse();
    if cli.page_size == 0 {
        anyhow::bail!("--page-size must be at least 1");
    }
    let (client, _sim) = match cli.simulate {
        Some(pods) => {
            let config = SimConfig {
                pods,
                widgets: 100,
                configmaps: 500,
                churn_per_sec: cli.simulate_churn,
                ..SimConfig::default()
            };
            let (url, sim) = Sim::start(config)
                .await
                .context("starting the simulated API server")?;
            tracing::info!(%url, pods, "simulated API server started");
            let client = kube::Client::try_from(kube::Config::new(url.parse()?))?;
            (client, Some(sim))
        }
        None => {
            let config = match &cli.kubeconfig {
                Some(path) => {
                    let kubeconfig = kube::config::Kubeconfig::read_from(path)
                        .with_context(|| format!("reading kubeconfig {}", path.display()))?;
                    kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?
                }
                None => kube::Config::infer()
                    .await
                    .context("no kubeconfig and not in a cluster")?,
            };
            (kube::Client::try_from(config)?, None)
        }
    };
    let mut caches = Vec::new();
    for name in &cli.resources {
        let resource = ApiResource::discover(&client, name)
            .await
            .with_context(|| format!("--resources: {name}"))?;
        let (writer, reader) = store(StoreConfig::default());
        let config = ReflectorConfig {
            strategy: cli.strategy,
            page_size: cli.page_size,
            ..ReflectorConfig::default()
        };
        let reflector = Reflector::new(
            Upstream::new(client.clone(), ResourceSpec::all(resource)),
            config,
            writer,
        );
        let status = reflector.status();
        tokio::spawn(reflector.run());
        caches.push((name.clone(), reader, status));
    }
    let caches = Arc::new(caches);
    tokio::spawn(report(caches.clone()));
    tokio::signal::ctrl_c().await?;
    tracing::info!("interrupted: stopping");
    Ok(())
}

/// Logs sync progress until every resource is ready, then a summary every 30 s.
async fn report(caches: Arc<Vec<(String, StoreReader, watch::Receiver<ReflectorStatus>)>>) {
    let mut announced = vec![false; caches.len()];
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut since_summary = Duration::ZERO;
    loop {
        tick.tick().await;
        since_summary += Duration::from_secs(1);
        for (i, (name, reader, status)) in caches.iter().enumerate() {
            let status = status.borrow().clone();
            if !reader.is_ready() {
                if let Some((listed, remaining)) = status.progress {
                    let total = remaining.map(|r| r as usize + listed);
                    tracing::info!(resource = %name, listed, total = ?total, strategy = status.strategy, "syncing");
                }
            } else if !announced[i] || since_summary >= Duration::from_secs(30) {
                announced[i] = true;
                let snapshot = reader.snapshot();
                let log = reader.event_log_status();
                tracing::info!(
                    resource = %name,
                    objects = snapshot.len(),
                    resource_version = snapshot.resource_version(),
                    strategy = status.strategy,
                    lists = status.lists,
                    events_in_log = log.events,
                    "ready"
                );
            }
        }
        if since_summary >= Duration::from_secs(30) {
            since_summary = Duration::ZERO;
        }
    }
}
