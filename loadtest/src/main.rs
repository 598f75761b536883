//! `kubecache-loadtest`: runs the simulated Kubernetes API server, reads
//! lists raw, and loads a running kubecache.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use kubecache_loadtest::sim::{HistoryWindow, Policy, ServingCost, Sim, SimConfig};

#[derive(Parser)]
#[command(
    version,
    about = "The simulated Kubernetes API server and the kubecache load generator"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the simulated API server until interrupted.
    Sim(SimArgs),
    /// Read a whole collection page by page, discarding the bytes: the
    /// floor any reflector's time to sync is measured against.
    RawList(RawListArgs),
    /// Load a running kubecache with simulated operators (watchers, gets,
    /// lists, index queries, writes to the API server) and check that every
    /// watcher got every event; exits non-zero on any loss or failure.
    /// (Boxed: its flags are many.)
    Run(Box<RunArgs>),
    /// Run the same well-behaved load (as `run`) twice: alone, then beside
    /// hostile clients and upstream faults; report both phases, /healthz
    /// and kubecache's RSS over time; exits non-zero on any loss or failure
    /// of the well-behaved clients. (Boxed: its flags are many.)
    Chaos(Box<kubecache_loadtest::chaos::Chaos>),
    /// Consistent reads (GET and list without resourceVersion, a quiet
    /// resource while pods churn, read-your-writes) through a running
    /// kubecache and against the sim it caches, same run; kubecache's
    /// requests to the sim for freshness; a markdown table with ratios.
    Fresh(kubecache_loadtest::fresh::Fresh),
    /// Run `run`'s load against several servers one after another (`--target
    /// NAME=URL`, each with its own token and CA if need be: the sim,
    /// kubecache, a real API server), the writes and the reference watch on
    /// `--upstream`; a markdown table of deliveries/s, lag, the writer's
    /// rate and events lost, with each target's ratios to the first's;
    /// exits non-zero on any loss or failure. (Boxed: its flags are many.)
    Fanout(Box<kubecache_loadtest::fanout::Fanout>),
}

#[derive(clap::Args)]
struct RunArgs {
    /// Read the whole scenario from this YAML file (the flags' names in
    /// camelCase); the other flags are then ignored.
    #[arg(long)]
    scenario: Option<PathBuf>,
    #[command(flatten)]
    flags: kubecache_loadtest::run::Scenario,
}

#[derive(clap::Args)]
struct RawListArgs {
    /// Base URL of the API server (or kubecache).
    #[arg(long)]
    server: String,
    /// Collection path.
    #[arg(long, default_value = "/api/v1/pods")]
    path: String,
    /// Objects per page (0: one unpaginated list).
    #[arg(long, default_value_t = 500)]
    limit: usize,
    /// Bearer token.
    #[arg(long)]
    token: Option<String>,
    /// `Accept` header.
    #[arg(long, default_value = "application/json")]
    accept: String,
}

#[derive(clap::Args)]
struct SimArgs {
    /// Pods created at start.
    #[arg(long, default_value_t = 10_000)]
    pods: usize,
    /// Namespaces the objects are spread over.
    #[arg(long, default_value_t = 20)]
    namespaces: usize,
    /// Nodes the pods are spread over.
    #[arg(long, default_value_t = 100)]
    nodes: usize,
    /// ConfigMaps created at start.
    #[arg(long, default_value_t = 0)]
    configmaps: usize,
    /// Widgets (widgets.example.com/v1) created at start.
    #[arg(long, default_value_t = 0)]
    widgets: usize,
    /// Pod writes per second (70 % updates, 15 % creates, 15 % deletes).
    #[arg(long, default_value_t = 0.0)]
    churn: f64,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Write a kubeconfig for this server here.
    #[arg(long)]
    kubeconfig_out: Option<PathBuf>,
    /// Delay before every list page (simulates slow etcd reads).
    #[arg(long, default_value_t = 0)]
    page_latency_ms: u64,
    /// Delay of every read without resourceVersion (a list's first page, a
    /// get): etcd's quorum read (default: a local etcd's).
    #[arg(long, default_value_t = kubecache_loadtest::sim::CONSISTENT_READ_LATENCY.as_secs_f64() * 1e3)]
    consistent_read_latency_ms: f64,
    /// Pace responses to a real kube-apiserver's measured throughput per
    /// encoding and path: 42 MB/s JSON and 37 MB/s protobuf for pages from
    /// etcd, 114 and 246 MB/s from the watch cache (rv=0 lists, watches).
    #[arg(long)]
    serving_cost: bool,
    /// Seconds of history kept before compaction.
    #[arg(long, default_value_t = 300)]
    compaction_window_secs: u64,
    /// Seconds of events the watch cache keeps (default: up to 100k events,
    /// whatever their age).
    #[arg(long)]
    watch_cache_secs: Option<u64>,
    /// Seconds between periodic watch bookmarks (kube-apiserver's cacher:
    /// bookmarkFrequency, a minute).
    #[arg(long, default_value_t = 60)]
    bookmark_interval_secs: u64,
    /// Send due bookmarks on kube-apiserver's one-second dispatch timer (up
    /// to a second early or a tick late, as a real API server does)
    /// instead of exactly when due.
    #[arg(long)]
    bookmark_dispatch: bool,
    /// Require this bearer token: one user, `admin`, who may do everything
    /// (403 without a token, 401 with another).
    #[arg(long, conflicts_with = "demo_auth")]
    token: Option<String>,
    /// Authenticate and authorize with the demo policy: users admin, the
    /// kubecache service account, alice (payments-prod), bob (pods
    /// everywhere), eve (nothing) and the deployer service account (pods
    /// in payments-prod), each with a token `<name>-token`, stored as RBAC
    /// objects and ServiceAccounts that decide as they change;
    /// `--kubeconfig-out` then has a context per user.
    #[arg(long)]
    demo_auth: bool,
    /// Refuse streaming lists, like a server without the WatchList feature gate.
    #[arg(long)]
    no_watch_list: bool,
    /// Serve consistent lists without a limit from the watch cache once it
    /// has caught up with etcd, waiting for etcd's next progress
    /// notification for a quiet resource (the ConsistentListFromCache gate,
    /// as `../shared/real-apiserver/` runs 1.28).
    #[arg(long)]
    consistent_list_from_cache: bool,
    /// The Kubernetes minor version `/version` names (`28` for 1.28), which
    /// kubecache reads and writes protobuf as; 28 to 36.
    #[arg(long, default_value_t = 36, value_parser = clap::value_parser!(u32).range(28..=36))]
    kube_minor: u32,
    /// Seed of the generated objects.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Lean: keep each object's JSON compressed (LZ4 against a dictionary
    /// of sample pods) and its protobuf and metadata-only encodings not at
    /// all, making each again when it is served (the same bytes). 1M pods
    /// take about 3 GB instead of 11-12.5 GB, for more CPU per object
    /// served (benches/README.md, "One replica at scale").
    #[arg(long)]
    lean: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    match Cli::parse().command {
        Command::Sim(args) => sim(args).await,
        Command::RawList(args) => raw_list(args).await,
        Command::Run(args) => run(*args).await,
        Command::Chaos(args) => chaos(*args).await,
        Command::Fresh(args) => fresh(args).await,
        Command::Fanout(args) => fanout(*args).await,
    }
}

async fn chaos(args: kubecache_loadtest::chaos::Chaos) -> anyhow::Result<()> {
    let json = args.load.json.clone();
    let report = kubecache_loadtest::chaos::chaos(args).await?;
    conclude(&report, json.as_deref(), report.ok(), "the chaos run")
}

async fn fanout(args: kubecache_loadtest::fanout::Fanout) -> anyhow::Result<()> {
    let json = args.load.json.clone();
    let report = kubecache_loadtest::fanout::fanout(args).await?;
    conclude(
        &report,
        json.as_deref(),
        report.ok(),
        "the fan-out comparison",
    )
}

async fn fresh(args: kubecache_loadtest::fresh::Fresh) -> anyhow::Result<()> {
    let json = args.json.clone();
    let report = kubecache_loadtest::fresh::fresh(args).await?;
    conclude(
        &report,
        json.as_deref(),
        true,
        "the consistent-read comparison",
    )
}

/// Prints `report`, writes it as pretty JSON to `json` if asked, and fails
/// unless `ok` (then `what` failed).
fn conclude(
    report: &(impl std::fmt::Display + serde::Serialize),
    json: Option<&std::path::Path>,
    ok: bool,
    what: &str,
) -> anyhow::Result<()> {
    print!("{report}");
    if let Some(path) = json {
        std::fs::write(path, serde_json::to_vec_pretty(report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    anyhow::ensure!(ok, "{what} failed: see above");
    Ok(())
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let scenario = match &args.scenario {
        Some(path) => kubecache_loadtest::run::Scenario::from_file(path)?,
        None => args.flags,
    };
    let json = scenario.json.clone();
    let report = kubecache_loadtest::run::run(scenario).await?;
    conclude(&report, json.as_deref(), report.ok(), "the run")
}

async fn sim(args: SimArgs) -> anyhow::Result<()> {
    let config = SimConfig {
        seed: args.seed,
        pods: args.pods,
        namespaces: args.namespaces,
        nodes: args.nodes,
        configmaps: args.configmaps,
        widgets: args.widgets,
        // One sim per process: nothing to share, and nothing kept.
        shared_population: false,
        lean: args.lean,
        churn_per_sec: args.churn,
        page_latency: Duration::from_millis(args.page_latency_ms),
        consistent_read_latency: Duration::try_from_secs_f64(args.consistent_read_latency_ms / 1e3)
            .context("--consistent-read-latency-ms")?,
        serving_cost: args.serving_cost.then(ServingCost::default),
        history: HistoryWindow {
            max_revisions: None,
            max_age: Some(Duration::from_secs(args.compaction_window_secs)),
        },
        watch_cache: match args.watch_cache_secs {
            Some(secs) => HistoryWindow {
                max_revisions: None,
                max_age: Some(Duration::from_secs(secs)),
            },
            None => HistoryWindow::WATCH_CACHE,
        },
        bookmark_interval: Duration::from_secs(args.bookmark_interval_secs),
        bookmark_dispatch: args
            .bookmark_dispatch
            .then_some(kubecache_loadtest::sim::BOOKMARK_DISPATCH),
        watch_list: !args.no_watch_list,
        consistent_list_from_cache: args.consistent_list_from_cache,
        kube_version: kubecache_wire::protobuf::KubeVersion::new(args.kube_minor),
        policy: match (&args.token, args.demo_auth) {
            (Some(token), _) => Some(Policy::admin_only(token)),
            (None, true) => Some(Policy::demo()),
            (None, false) => None,
        },
        listen: args.listen,
    };
    let started = std::time::Instant::now();
    let (url, sim) = Sim::start(config).await?;
    tracing::info!(pods = args.pods, elapsed = ?started.elapsed(), "simulated API server filled");
    if let Some(path) = &args.kubeconfig_out {
        std::fs::write(path, sim.kubeconfig())
            .with_context(|| format!("writing kubeconfig to {}", path.display()))?;
        tracing::info!(path = %path.display(), "kubeconfig written");
    }
    println!("{url}");
    tokio::signal::ctrl_c().await?;
    sim.shutdown().await;
    Ok(())
}

async fn raw_list(args: RawListArgs) -> anyhow::Result<()> {
    let report = kubecache_loadtest::raw::read_all(
        &args.server,
        &args.path,
        args.limit,
        &args.accept,
        args.token.as_deref(),
    )
    .await?;
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}
