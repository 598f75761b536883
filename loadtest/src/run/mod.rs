//! `kubecache-loadtest run`: many simulated operators against a running
//! kubecache, measured, and checked against the API server's own history.
//!
//! # What a run does
//!
//! 1. Lists the resource once from kubecache at resourceVersion `S` (a
//!    consistent read) to learn the objects to get, and the namespaces,
//!    nodes and labels to filter watches by.
//! 2. Opens the watchers on kubecache and one *reference* watch on the API
//!    server, all from `S`. With several kubecache replicas, the watchers
//!    are spread over them; one whose connection is lost resumes on the
//!    next replica from the last resourceVersion it received (a failover),
//!    and the check below holds across it.
//! 3. For the run's duration: request workers send gets, lists and index
//!    queries in a closed loop (each worker sends its next request when the
//!    last one is answered); a writer patches objects on the API server at
//!    a fixed rate in an open loop (up to `writesInFlight` at once, see
//!    `writes`), remembering when each write's resourceVersion was
//!    acknowledged.
//! 4. Stops writing, lets the watchers settle, and checks completeness: for
//!    each watcher, the resourceVersions it received must equal those of the
//!    reference events that match its filter (now or before the change), in
//!    the same order. Delivery lag is the time from a write's acknowledgement
//!    to a watcher's receipt of that resourceVersion.
//!
//! With `shards`, sharded watchers (KEP-5866's `shardSelector`) watch too,
//! `shardReplicas` per shard, beside an unsharded one; the check then also
//! holds the shards together to the unsharded stream (see `shards`), and
//! the report puts each shard's bytes beside the unsharded watcher's.
//!
//! Any lost, duplicated or reordered event, and any failed request, makes
//! the run fail (non-zero exit).

mod connections;
mod filter;
mod latency;
mod report;
mod requests;
mod shards;
mod targets;
mod watchers;
mod writes;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

pub use connections::Protocol;
pub use filter::ShardBy;
use filter::WatchFilter;
pub use latency::Latency;
pub(crate) use latency::percentile_ms;
pub use report::{OpReport, OpStats, Report, WatchReport};
pub use shards::{ShardRow, ShardingReport};
use targets::Targets;
use watchers::Watcher;

/// A load scenario: from flags or a YAML file (same keys, camelCase).
#[derive(Debug, Clone, clap::Args, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Scenario {
    /// kubecache's base URL (loopback only; `https` with `--ca-file`);
    /// several, comma-separated, for
    /// replicas behind one Service: watchers are spread over them, and a
    /// watcher whose connection is lost resumes on the next one from its
    /// last resourceVersion, as a client reconnecting through the Service
    /// would. The first list and the requests go to the first.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// The API server's base URL, for writes and the reference watch
    /// (loopback only).
    #[arg(long, default_value = "http://127.0.0.1:6443")]
    pub upstream: String,
    /// The CA that kubecache's serving certificate is signed by (PEM), for
    /// `https` URLs: the clients trust it alone.
    #[arg(long)]
    pub ca_file: Option<std::path::PathBuf>,
    /// Bearer token for kubecache.
    #[arg(long)]
    pub token: Option<String>,
    /// Bearer token for the API server.
    #[arg(long)]
    pub upstream_token: Option<String>,
    /// The CA that the API server's serving certificate is signed by
    /// (PEM), for an `https` upstream (trusted beside `--ca-file`).
    #[arg(long)]
    pub upstream_ca_file: Option<std::path::PathBuf>,
    /// Collection path of the resource (all namespaces).
    #[arg(long, default_value = "/api/v1/pods")]
    pub path: String,
    /// Seconds of load.
    #[arg(long, default_value_t = 20)]
    pub duration_secs: u64,
    /// At most this many requests in all (0: no bound but the duration).
    #[arg(long, default_value_t = 0)]
    pub max_requests: u64,
    /// Concurrent request workers (each one request at a time).
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    /// Weight of gets in the request mix.
    #[arg(long, default_value_t = 1.0)]
    pub gets: f64,
    /// Weight of lists in the request mix.
    #[arg(long, default_value_t = 0.0)]
    pub lists: f64,
    /// Weight of index queries in the request mix.
    #[arg(long, default_value_t = 0.0)]
    pub index_queries: f64,
    /// `resourceVersion` of gets and lists: `0` (the cache as it is, the
    /// default) or empty for consistent reads.
    #[arg(long, default_value = "0")]
    pub read_resource_version: String,
    /// `limit` of lists (0: the whole collection in one response).
    #[arg(long, default_value_t = 0)]
    pub list_limit: usize,
    /// Path of index queries; `{namespace}` and `{node}` are replaced by
    /// values of random objects.
    #[arg(long, default_value = "/v1/pods/index/namespace/{namespace}")]
    pub index_path: String,
    /// Watchers, spread evenly over the filter kinds of `watch_filters`.
    #[arg(long, default_value_t = 0)]
    pub watchers: usize,
    /// Filter kinds of watchers: `all`, `namespace`, `node`
    /// (`fieldSelector=spec.nodeName=…`, like per-node agents), `label`.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "all,namespace,node,label"
    )]
    pub watch_filters: Vec<String>,
    /// Shards of sharded watchers (`shardSelector`, equal ranges of the
    /// hash space; 0: none). With shards, one unsharded watcher watches too,
    /// to compare bytes with.
    #[arg(long, default_value_t = 0)]
    pub shards: usize,
    /// Replicas watching each shard.
    #[arg(long, default_value_t = 1)]
    pub shard_replicas: usize,
    /// What the shards hash: the object's uid or its namespace.
    #[arg(long, value_enum, default_value_t = ShardBy::Uid)]
    pub shard_by: ShardBy,
    /// Protocol of the watches: `http1`, a TCP connection per watch (an
    /// informer process each), or `http2`, multiplexed as client-go's
    /// (HTTP/2 when an `https` server offers it, else HTTP/1.1).
    #[arg(long, value_enum, default_value_t = Protocol::Http2)]
    pub protocol: Protocol,
    /// Source addresses of the watches' connections, 127.0.0.1 onward, the
    /// watches dealt to them in turn (1: the system's pick). A server's
    /// limits per client address see that many clients.
    #[arg(long, default_value_t = 1)]
    pub addresses: usize,
    /// `timeoutSeconds` of the watchers' watches (0: none, the server's
    /// own: kube-apiserver's 30–60 minutes). A watch the server ends is
    /// resumed from its last resourceVersion, as a reflector does, and
    /// counted (client-go's reflectors ask for 5–10 minutes).
    #[arg(long, default_value_t = 0)]
    pub watch_timeout_secs: u64,
    /// Unfiltered watchers that never read their stream (stalled clients):
    /// kubecache must cut them without slowing the others.
    #[arg(long, default_value_t = 0)]
    pub stalled_watchers: usize,
    /// Writes per second to the API server (merge patches of random objects).
    #[arg(long, default_value_t = 0.0)]
    pub writes_per_sec: f64,
    /// Writes in flight at most: each is sent when due (open loop), not
    /// when the last one is answered.
    #[arg(long, default_value_t = 16)]
    pub writes_in_flight: usize,
    /// Objects written: the writes patch the first N objects listed (0:
    /// any object).
    #[arg(long, default_value_t = 0)]
    pub write_objects: usize,
    /// Bytes of padding each write sets in one annotation, so events have
    /// the size under test (a sim pod is about 4 KB; 4096 makes 8 KB events).
    #[arg(long, default_value_t = 0)]
    pub write_pad_bytes: usize,
    /// Seconds to wait after the last write for watchers to catch up.
    #[arg(long, default_value_t = 3)]
    pub settle_secs: u64,
    /// Write the report as JSON here.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

impl Default for Scenario {
    fn default() -> Self {
        crate::flag_defaults()
    }
}

impl Scenario {
    /// Reads a scenario from a YAML file.
    pub fn from_file(path: &std::path::Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading scenario {}", path.display()))?;
        serde_yaml::from_str(&text).with_context(|| format!("scenario {}", path.display()))
    }

    /// kubecache's base URLs (see [`Scenario::url`]).
    pub fn servers(&self) -> Vec<&str> {
        self.url.split(',').map(str::trim).collect()
    }

    /// Checks the flags: loopback URLs, a CA for each `https` one, weights,
    /// filter kinds, source addresses.
    pub fn validate(&self) -> anyhow::Result<()> {
        let urls = self
            .servers()
            .into_iter()
            .map(|url| ("url", url, &self.ca_file));
        let upstream = ("upstream", self.upstream.as_str(), &self.upstream_ca_file);
        for (name, url, ca_file) in urls.chain([upstream]) {
            let parsed = reqwest::Url::parse(url).with_context(|| format!("{name}: {url:?}"))?;
            if self.addresses > 1 && !matches!(parsed.host(), Some(url::Host::Ipv4(_))) {
                bail!("{name}: {url:?}: with --addresses, URLs name IPv4 addresses (127.0.0.1)");
            }
            let loopback = match parsed.host() {
                Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
                Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
                Some(url::Host::Domain(domain)) => domain == "localhost",
                None => false,
            };
            if !loopback {
                bail!(
                    "{name}: {url:?} is not a loopback URL; the load generator only loads this machine"
                );
            }
            match parsed.scheme() {
                "http" => {}
                "https" if ca_file.is_some() || self.ca_file.is_some() => {}
                "https" => bail!(
                    "{name}: {url:?} is https: name the CA to trust (--ca-file, --upstream-ca-file)"
                ),
                other => bail!("{name}: {url:?}: unknown scheme {other:?}"),
            }
        }
        if self.gets < 0.0 || self.lists < 0.0 || self.index_queries < 0.0 {
            bail!("gets, lists, indexQueries: weights must not be negative");
        }
        if self.concurrency == 0 && self.gets + self.lists + self.index_queries > 0.0 {
            bail!("concurrency: must be at least 1 when requests are mixed in");
        }
        for kind in &self.watch_filters {
            WatchFilter::kind_from_name(kind)?;
        }
        if self.watchers > 0 && self.watch_filters.is_empty() {
            bail!("watchFilters: at least one kind is needed for watchers");
        }
        if !(1..=connections::MAX_ADDRESSES).contains(&self.addresses) {
            bail!(
                "addresses: 1 to {} source addresses (127.0.0.1 to 127.255.255.254)",
                connections::MAX_ADDRESSES
            );
        }
        if self.shards > 0 && self.shard_replicas == 0 {
            bail!("shardReplicas: at least one replica is needed for each shard");
        }
        Ok(())
    }
}

/// What every part of a run shares.
struct RunContext {
    scenario: Scenario,
    /// Requests, the first list, writes and the reference watch.
    client: reqwest::Client,
    /// The client of each watch on kubecache (see `connections`).
    watch_clients: Vec<reqwest::Client>,
    /// Set when the run is over: watchers stop reading.
    stop: AtomicBool,
    /// Requests sent so far (progress, and the request bound).
    requests: AtomicU64,
    /// Events received by all watchers so far (progress).
    deliveries: AtomicU64,
}

impl RunContext {
    /// The client of the `i`th watch on kubecache.
    fn watch_client(&self, i: usize) -> &reqwest::Client {
        &self.watch_clients[i]
    }
}

/// Runs `scenario`; the report says whether every event arrived.
pub async fn run(scenario: Scenario) -> anyhow::Result<Report> {
    scenario.validate()?;
    let ca_files = [&scenario.ca_file, &scenario.upstream_ca_file];
    let tls = crate::tls::ClientTls::load(ca_files.into_iter().flatten().map(|f| f.as_path()))?;
    let client = tls
        .http()
        .pool_max_idle_per_host(scenario.concurrency.max(1) * 2 + scenario.writes_in_flight)
        .build()?;
    let watches = scenario.watchers + shards::filters(&scenario).len() + scenario.stalled_watchers;
    let watch_clients =
        connections::watch_clients(&tls, scenario.protocol, scenario.addresses, watches)?;
    let ctx = Arc::new(RunContext {
        scenario,
        client,
        watch_clients,
        stop: AtomicBool::new(false),
        requests: AtomicU64::new(0),
        deliveries: AtomicU64::new(0),
    });
    let targets = Arc::new(Targets::list(&ctx).await?);
    eprintln!(
        "listed {} objects at resourceVersion {} in {:.0} ms",
        targets.objects.len(),
        targets.resource_version,
        targets.list_time.as_secs_f64() * 1e3
    );
    let reference = watchers::Reference::start(&ctx, &targets);
    let mut filters = Vec::new();
    for i in 0..ctx.scenario.watchers {
        let kind = &ctx.scenario.watch_filters[i % ctx.scenario.watch_filters.len()];
        filters.push(WatchFilter::pick(kind, &targets, i)?);
    }
    filters.extend(shards::filters(&ctx.scenario));
    let mut watchers = Vec::new();
    let watched = filters.len();
    for (i, filter) in filters.into_iter().enumerate() {
        let server = i % ctx.scenario.servers().len();
        let client = ctx.watch_client(i).clone();
        let rv = targets.resource_version;
        watchers.push(Watcher::start(&ctx, client, filter, rv, server).await?);
    }
    // Held unread until the run is over, then dropped.
    let mut stalled = Vec::new();
    for i in watched..watched + ctx.scenario.stalled_watchers {
        let path = WatchFilter::All.watch_path(&ctx.scenario.path, targets.resource_version);
        let url = format!("{}{path}", ctx.scenario.servers()[0]);
        let token = ctx.scenario.token.as_deref();
        stalled.push(watchers::open(ctx.watch_client(i), &url, token).await?);
    }
    let writes = writes::Writes::default();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(ctx.scenario.duration_secs);
    let writer = tokio::spawn(writes::run(
        ctx.clone(),
        targets.clone(),
        writes.clone(),
        (started, deadline),
    ));
    let progress = tokio::spawn(report::progress(ctx.clone(), started, deadline));
    let requests = requests::run(ctx.clone(), targets.clone(), deadline).await?;
    let written = writer.await??;
    let load_time = started.elapsed();
    // Events up to here must reach every watcher; later ones (churn of
    // others during the settle time) are not checked.
    let cutoff = reference.last();
    tokio::time::sleep(Duration::from_secs(ctx.scenario.settle_secs)).await;
    ctx.stop.store(true, Ordering::Release);
    progress.abort();
    eprintln!();
    drop(stalled);
    let (reference, reference_resumes) = reference.finish().await?;
    let mut results = Vec::new();
    for watcher in watchers {
        results.push(watcher.finish().await);
    }
    let watch = (!results.is_empty()).then(|| {
        report::watch_report(
            &ctx.scenario,
            load_time.as_secs_f64(),
            &writes,
            &reference,
            reference_resumes,
            cutoff,
            results,
        )
    });
    Ok(Report::new(
        &ctx.scenario,
        load_time,
        requests,
        written,
        watch,
    ))
}
