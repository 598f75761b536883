//! The simulated Kubernetes API server: a real HTTP server on 127.0.0.1 that
//! lists, watches and writes pods, configmaps, namespaces, service
//! accounts, RBAC's roles and bindings and one custom resource
//! (`widgets.example.com/v1`) the way kube-apiserver does (see
//! `shared/APISERVER-PROTOCOL.md`), filled with realistic objects, with
//! churn, slow pages, compaction and faults on demand, and, given a
//! [`Policy`], authentication and RBAC of every request by the stored
//! RBAC objects and ServiceAccounts.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use kubecache_loadtest::sim::{Sim, SimConfig};
//! let (url, sim) = Sim::start(SimConfig { pods: 1_000, ..SimConfig::default() }).await?;
//! // point a client at `url` ...
//! sim.shutdown().await;
//! # Ok(()) }
//! ```

pub mod auth;
mod cost;
pub mod counters;
pub mod data;
mod encoding;
pub mod faults;
mod go_json;
mod http;
mod object;
mod packed;
mod patch;
pub mod resources;
mod selector;
mod shard;
pub mod store;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, LazyLock, OnceLock};
use std::time::Duration;

use anyhow::Context as _;
use kubecache_wire::protobuf::KubeVersion;
use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use auth::Enforced;
pub use auth::{Policy, RoleRef, Rule, Subject, User};
pub use cost::ServingCost;
pub use counters::{Counts, Reviews};
pub use faults::{Fault, FaultSpec, Target as FaultTarget};
pub use object::StoredObject;
pub use resources::{RESOURCES, Resource, ResourceId, ids};
pub(crate) use shard::ShardSelector;
pub use store::{Event, HistoryWindow, Store};

use data::{Generator, GeneratorConfig, Mutation};
use http::{Context, ServeConfig};

/// Everything the simulator can be told at start.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Seed of the generated objects (same seed, same objects).
    pub seed: u64,
    /// Pods created before serving.
    pub pods: usize,
    /// Namespaces the objects are spread over.
    pub namespaces: usize,
    /// Nodes the pods are spread over (`spec.nodeName`).
    pub nodes: usize,
    /// ConfigMaps created before serving.
    pub configmaps: usize,
    /// Widgets (the custom resource) created before serving.
    pub widgets: usize,
    /// Start from the objects an earlier sim of the same seed and counts
    /// built in this process, building them once if none did, and keep
    /// them for the process's life: for test binaries that start many sims
    /// alike (building a pod's stored form is most of a start's CPU, 6 s
    /// for 20,000 pods in a test build). Their `creationTimestamp`s are the
    /// first sim's. A lean sim packs its copy of them.
    pub shared_population: bool,
    /// Keep each object's JSON compressed against a dictionary of sample
    /// pods, and its protobuf and metadata-only encodings not at all:
    /// each is made again whenever it is served, the same bytes. A
    /// million pods then fit in about 3 GB instead of 11-12.5 GB, for
    /// more CPU per object served (see `benches/README.md`).
    pub lean: bool,
    /// Pod writes per second while running (70 % updates, 15 % creates,
    /// 15 % deletes).
    pub churn_per_sec: f64,
    /// Delay before every list page read "from etcd" (slow etcd).
    pub page_latency: Duration,
    /// What a read without `resourceVersion` (a list's first page, a get)
    /// waits for its quorum read from etcd before it is served (see
    /// [`CONSISTENT_READ_LATENCY`]).
    pub consistent_read_latency: Duration,
    /// Pace every response to a real server's throughput for its encoding
    /// and path (see [`ServingCost`]); `None` serves as fast as it can.
    pub serving_cost: Option<ServingCost>,
    /// How much history etcd keeps (compaction): lists at a revision and
    /// continue tokens older than it get 410.
    pub history: HistoryWindow,
    /// How many events the watch cache keeps: watches from before it get
    /// 200 and an ERROR 410 event.
    pub watch_cache: HistoryWindow,
    /// Interval of watch bookmarks (kube-apiserver: about a minute).
    pub bookmark_interval: Duration,
    /// Send due bookmarks on one timer of this period, as kube-apiserver's
    /// cacher does ([`BOOKMARK_DISPATCH`]); `None` sends each exactly when
    /// due.
    pub bookmark_dispatch: Option<Duration>,
    /// Whether streaming lists are served (the WatchList feature gate).
    pub watch_list: bool,
    /// Whether consistent lists without a limit are served by the watch
    /// cache once it has caught up (the ConsistentListFromCache feature
    /// gate: alpha in 1.28, where `../shared/real-apiserver/` turns it on;
    /// on by default from 1.31): see [`PROGRESS_NOTIFY`].
    pub consistent_list_from_cache: bool,
    /// The Kubernetes version `/version` names, which kubecache reads and
    /// writes protobuf as (the sim's own objects are the schema's, 1.36).
    pub kube_version: KubeVersion,
    /// Who may do what: `None` allows every request, with or without a
    /// token; a policy authenticates and authorizes each one as
    /// kube-apiserver does (see [`auth`]), stored at start as RBAC objects
    /// and ServiceAccounts, which then decide. Changeable while running
    /// ([`Sim::set_policy`], or by writing those objects).
    pub policy: Option<Policy>,
    /// Where to listen; port 0 picks a free one.
    pub listen: SocketAddr,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 1,
            pods: 0,
            namespaces: 10,
            nodes: 50,
            configmaps: 0,
            widgets: 0,
            shared_population: false,
            lean: false,
            churn_per_sec: 0.0,
            page_latency: Duration::ZERO,
            consistent_read_latency: CONSISTENT_READ_LATENCY,
            serving_cost: None,
            history: HistoryWindow::ETCD,
            watch_cache: HistoryWindow::WATCH_CACHE,
            bookmark_interval: Duration::from_secs(60),
            bookmark_dispatch: None,
            watch_list: true,
            consistent_list_from_cache: false,
            kube_version: KubeVersion::NEWEST,
            policy: None,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        }
    }
}

/// The period of kube-apiserver's bookmark dispatch: its cacher's
/// `dispatchEvents` sends due bookmarks when a timer of about a second
/// fires (`wait.Jitter(time.Second, 0.25)` in `cacher/cacher.go`, v1.28),
/// taking every watcher whose bookmark is due within the current second
/// (`bookmarkWatchers` keeps them in one-second buckets). A bookmark then
/// comes at the first tick at or after the start of the second it is due
/// in: up to a second early, or up to a tick late.
pub const BOOKMARK_DISPATCH: Duration = Duration::from_secs(1);

/// The first tick at `at` or after it (strictly after, with `after`) of a
/// periodic timer of the API server's (`timer`: its start and period): the
/// bookmark dispatch ([`BOOKMARK_DISPATCH`]), etcd's progress
/// notifications ([`PROGRESS_NOTIFY`]).
pub(crate) fn tick((start, period): (Instant, Duration), at: Instant, after: bool) -> Instant {
    let period = period.max(Duration::from_millis(1));
    let since = at.saturating_duration_since(start).as_nanos();
    let ticks = since / period.as_nanos();
    let ticks = ticks + u128::from(after || !since.is_multiple_of(period.as_nanos()));
    start + period * u32::try_from(ticks).unwrap_or(u32::MAX)
}

/// etcd's progress notifications to the API server's watches, which bring
/// a quiet resource's watch cache to etcd's current revision: every second
/// with `--experimental-watch-progress-notify-interval=1s`, as
/// `../shared/real-apiserver/` runs etcd (kubeadm: 5 s).
///
/// With ConsistentListFromCache, kube-apiserver answers a consistent list
/// without a limit from its watch cache once the cache has reached etcd's
/// current revision (`Cacher.GetList`, `waitUntilFreshAndBlock` in v1.28):
/// at once for a resource whose own last write is the newest, else at the
/// next notification. (1.28 also asks etcd for one every 100 ms while a
/// read waits, but etcd 3.4 before 3.4.31 does not send requested ones to
/// the API server's shared watch reliably: measured on the kit's v1.28.4
/// with etcd 3.4.23, a quiet config map's list by name had a p99 of 0.94 s.)
/// A list with a limit or a continue token is read from etcd
/// (`shouldDelegateList`).
pub const PROGRESS_NOTIFY: Duration = Duration::from_secs(1);

/// What a consistent read (a list or get without `resourceVersion`) waits
/// for etcd in kube-apiserver: a quorum read (etcd's ReadIndex, then a bbolt
/// range, over gRPC), about 2 ms on a local single-member etcd.
///
/// Measured on kube-apiserver v1.28 with 43k pods (issue 17), GET of one pod
/// at 32 connections did 940-1,090 req/s with a p50 of 26-32 ms, on 2 cores
/// shared with the load generator and kubecache. By Little's law 32 requests
/// in flight at ~1,000/s stay ~32 ms each: the p50 is queueing for the
/// saturated CPU (about 1-2 ms of CPU per GET across kube-apiserver and
/// etcd), not waiting for etcd. With a single member ReadIndex needs no
/// peer round trip; what remains is etcd's apply wait, the range and the
/// gRPC hop on loopback: 0.5-2 ms unloaded. Measured on the kit's v1.28.4
/// with 20k pods (`benches/real-apiserver/run-calibrate`): one client's
/// consistent GET of a pod took 1.19-1.29 ms at the median, TLS and the
/// API server's own handling included, where the sim charging 2 ms took
/// 4.4 ms (tokio's timer rounds a sleep up to the next millisecond): the
/// sim now charges 1 ms. The sim's own serving costs far less CPU than
/// kube-apiserver's, so under load consistent reads against the sim are
/// faster than against a real server: a stricter peer to beat.
pub const CONSISTENT_READ_LATENCY: Duration = Duration::from_millis(1);

/// A running simulator. Dropping it stops the server.
#[derive(Debug)]
pub struct Sim {
    url: String,
    store: Arc<Store>,
    ctx: Arc<Context>,
    generator: Arc<Mutex<Generator>>,
    churn: watch::Sender<f64>,
    tasks: Vec<JoinHandle<()>>,
}

impl Sim {
    /// Fills the store, binds `config.listen` and serves. Returns the base
    /// URL (`http://127.0.0.1:PORT`) and the handle.
    pub async fn start(config: SimConfig) -> anyhow::Result<(String, Sim)> {
        let mut store = Store::new(config.history, config.watch_cache, config.seed);
        if config.lean {
            store = store.lean(dictionary(&config));
        }
        let store = Arc::new(store);
        let generator = if config.shared_population {
            let population = Population::shared(&config)?;
            store.recreate(&population.created);
            population.generator.clone()
        } else {
            let mut generator = generator(&config);
            populate(&store, &mut generator, &config)?;
            generator
        };
        let generator = Arc::new(Mutex::new(generator));
        let policy = Arc::new(Enforced::default());
        store.observe({
            let policy = policy.clone();
            move |resource, event| policy.observe(resource, event)
        });
        policy.set(&store, config.policy, |ns| generator.lock().namespace(ns));
        // The history starts after the population, as on a cluster that
        // has been up for a while.
        store.compact_at(store.revision());
        let (cuts, _) = watch::channel(0);
        let ctx = Arc::new(Context {
            store: store.clone(),
            faults: Arc::new(faults::Faults::default()),
            cuts,
            counters: counters::Counters::default(),
            quorum_reads: cost::QuorumReads::default(),
            serve: ServeConfig {
                page_latency: config.page_latency,
                consistent_read_latency: config.consistent_read_latency,
                serving_cost: config.serving_cost,
                bookmark_interval: config.bookmark_interval,
                bookmark_dispatch: config
                    .bookmark_dispatch
                    .map(|period| (Instant::now(), period)),
                watch_list: config.watch_list,
                consistent_list_from_cache: config
                    .consistent_list_from_cache
                    .then(|| (Instant::now(), PROGRESS_NOTIFY)),
                kube_version: config.kube_version,
            },
            policy,
        });
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("binding {}", config.listen))?;
        let url = format!("http://{}", listener.local_addr()?);
        let server = tokio::spawn(serve(listener, http::router(ctx.clone())));
        let (churn, churn_rx) = watch::channel(config.churn_per_sec);
        let tasks = vec![
            server,
            tokio::spawn(compact_forever(store.clone())),
            tokio::spawn(churn_forever(
                store.clone(),
                generator.clone(),
                churn_rx,
                config.seed,
            )),
        ];
        let sim = Sim {
            url: url.clone(),
            store,
            ctx,
            generator,
            churn,
            tasks,
        };
        Ok((url, sim))
    }

    /// Its HTTP API as a service, to call without a socket: for tests on
    /// a paused clock, which auto-advances while a socket waits for bytes.
    pub fn router(&self) -> axum::Router {
        http::router(self.ctx.clone())
    }

    /// The base URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The storage, for fast in-process reads and writes.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Arms a fault.
    pub fn inject(&self, spec: FaultSpec) {
        self.ctx.faults.inject(spec);
    }

    /// Cuts every open watch now (without a clean end of stream), as a
    /// dropped connection or an API-server restart would.
    pub fn cut_watches(&self) {
        self.ctx.cut_watches();
    }

    /// The watches asked for and not ended (a fault may still hold one
    /// back): those [`Sim::cut_watches`] would cut now.
    pub fn open_watches(&self) -> usize {
        self.ctx.cuts.receiver_count()
    }

    /// The requests of each resource so far that keep a cache's reads
    /// fresh (as `GET /sim/counters` answers).
    pub fn counters(&self) -> std::collections::BTreeMap<String, Counts> {
        self.ctx.counters.snapshot()
    }

    /// The reviews asked so far (as `GET /sim/reviews` answers).
    pub fn reviews(&self) -> Reviews {
        self.ctx.counters.reviews()
    }

    /// The discovery requests answered so far (`/version`, `/api`,
    /// `/apis`, their group and version documents, and the OpenAPI
    /// documents under `/openapi/v2` and `/openapi/v3`).
    pub fn discovery_requests(&self) -> u64 {
        self.ctx.counters.discovery_requests()
    }

    /// The most list requests of `resource` answered at once so far.
    pub fn peak_lists_in_flight(&self, resource: ResourceId) -> u64 {
        self.ctx.counters.peak_lists_in_flight(resource)
    }

    /// Disarms all faults.
    pub fn clear_faults(&self) {
        self.ctx.faults.clear();
    }

    /// Changes the churn rate (pod writes per second; 0 stops it). Returns
    /// once no churn write is in flight, so after `set_churn(0.0)` the sim
    /// writes nothing more of its own.
    pub fn set_churn(&self, per_sec: f64) {
        // The churn writes a tick's pods holding the generator, and checks
        // the rate under it first.
        let _writing = self.generator.lock();
        self.churn.send_replace(per_sec);
    }

    /// Replaces the etcd and watch-cache windows.
    pub fn set_windows(&self, history: HistoryWindow, watch_cache: HistoryWindow) {
        self.store.set_windows(history, watch_cache);
    }

    /// Creates `n` more generated pods.
    pub fn create_pods(&self, n: usize) -> anyhow::Result<()> {
        let mut generator = self.generator.lock();
        for _ in 0..n {
            self.store
                .create(ids::PODS, generator.pod())
                .map_err(status_error)?;
        }
        Ok(())
    }

    /// Stores `objects` of `resource` as given (creating the namespaces
    /// they name when missing), e.g. objects recorded from a real cluster.
    /// The store assigns what kube-apiserver assigns: uid, resourceVersion,
    /// creationTimestamp, and generation where the resource keeps one.
    pub fn seed(
        &self,
        resource: ResourceId,
        objects: impl IntoIterator<Item = Value>,
    ) -> anyhow::Result<()> {
        for object in objects {
            let namespace = object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .filter(|ns| !ns.is_empty() && RESOURCES[resource].namespaced);
            if let Some(ns) = namespace
                && self.store.get(ids::NAMESPACES, ns).is_none()
            {
                let namespace = self.generator.lock().namespace(ns);
                self.store
                    .create(ids::NAMESPACES, namespace)
                    .map_err(status_error)?;
            }
            self.store.create(resource, object).map_err(status_error)?;
        }
        Ok(())
    }

    /// The current objects of a resource, in key order.
    pub fn state(&self, resource: ResourceId) -> Vec<Arc<StoredObject>> {
        self.state_at(resource, self.store.revision())
    }

    /// The objects of a resource at `revision` (none once compacted), in
    /// key order: what an exact list at that resourceVersion answers.
    pub fn state_at(&self, resource: ResourceId, revision: u64) -> Vec<Arc<StoredObject>> {
        let read = store::ListRead {
            revision,
            namespace: None,
            start: None,
            limit: 0,
            before: Some(0),
        };
        self.store
            .list(resource, read, |_| true)
            .map(|page| page.items)
            .unwrap_or_default()
    }

    /// `key -> resourceVersion` of every object of `resource`: what a
    /// client's cache of it equals once it has caught up.
    pub fn versions(&self, resource: ResourceId) -> std::collections::BTreeMap<String, String> {
        self.state(resource)
            .iter()
            .map(|o| (o.key.clone(), o.revision.to_string()))
            .collect()
    }

    /// Polls `view` (a client cache's `key -> resourceVersion`) for up to
    /// `within` until it equals the state of `resource`: `(state, last view)`,
    /// for tests of clients that must converge to the API server's state.
    pub async fn converged(
        &self,
        resource: ResourceId,
        within: Duration,
        view: impl Fn() -> std::collections::BTreeMap<String, String>,
    ) -> (
        std::collections::BTreeMap<String, String>,
        std::collections::BTreeMap<String, String>,
    ) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let (want, got) = (self.versions(resource), view());
            if got == want || tokio::time::Instant::now() >= deadline {
                return (want, got);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Replaces the policy (`None`: allow everything), effective from the
    /// next request: how a test grants or revokes a permission. The store
    /// then holds exactly the new policy's RBAC objects and service
    /// accounts ([`Policy::objects`]; the others deleted), which decide
    /// from then on, as they change (see [`Sim::delete_object`]).
    ///
    /// # Panics
    ///
    /// If the store refuses an object of the policy (a role, binding or
    /// service account without a name).
    pub fn set_policy(&self, policy: Option<Policy>) {
        self.ctx.policy.set(&self.store, policy, |ns| {
            self.generator.lock().namespace(ns)
        });
    }

    /// Deletes an object, as `DELETE` does (its watchers see it go, and a
    /// Role, binding or ServiceAccount stops counting at once): e.g.
    /// `sim.delete_object(ids::ROLEBINDINGS, "payments-prod", "developers")`;
    /// `namespace` is empty for a cluster-scoped object.
    pub fn delete_object(
        &self,
        resource: ResourceId,
        namespace: &str,
        name: &str,
    ) -> anyhow::Result<Arc<StoredObject>> {
        self.store
            .delete(resource, namespace, name)
            .map_err(status_error)
    }

    /// A kubeconfig (YAML) that kubectl and kube-rs accept for this
    /// server: without a policy, one without credentials; with one, a
    /// context per user (named after the user, with its token), the first
    /// user's current.
    pub fn kubeconfig(&self) -> String {
        match self.ctx.policy.set_policy() {
            None => self.kubeconfig_of(&[("kubecache-sim", None)]),
            Some(policy) => {
                let users: Vec<(&str, Option<&str>)> = policy
                    .users
                    .iter()
                    .map(|u| (u.name.as_str(), Some(u.token.as_str())))
                    .collect();
                self.kubeconfig_of(&users)
            }
        }
    }

    /// A kubeconfig with one user of the policy and its token, e.g. for
    /// the demo users of [`Policy::demo`]; `None` when the policy does not
    /// know the user.
    pub fn kubeconfig_for(&self, user: &str) -> Option<String> {
        let policy = self.ctx.policy.set_policy()?;
        let token = policy.token_of(user)?;
        Some(self.kubeconfig_of(&[(user, Some(token))]))
    }

    /// A kubeconfig with a context per `(user, token)`, the first current.
    fn kubeconfig_of(&self, users: &[(&str, Option<&str>)]) -> String {
        let quote = |s: &str| serde_json::to_string(s).unwrap_or_default();
        let mut contexts = String::new();
        let mut entries = String::new();
        for (user, token) in users {
            let name = quote(user);
            contexts.push_str(&format!(
                "- name: {name}\n  context:\n    cluster: kubecache-sim\n    user: {name}\n"
            ));
            let credentials = match token {
                Some(token) => format!("    token: {}\n", quote(token)),
                None => "    {}\n".to_string(),
            };
            entries.push_str(&format!("- name: {name}\n  user:\n{credentials}"));
        }
        let current = users.first().map_or_else(String::new, |(u, _)| quote(u));
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: kubecache-sim\n  cluster:\n    server: {}\ncontexts:\n{contexts}current-context: {current}\nusers:\n{entries}",
            self.url
        )
    }

    /// Stops serving (open watches are cut).
    pub async fn shutdown(mut self) {
        for task in self.tasks.drain(..) {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// What Go's net/http takes of a request's head, as kube-apiserver keeps
/// it: `DefaultMaxHeaderBytes` (1 MiB) and the 4 KiB it allows over;
/// larger gets 431.
const MAX_HEAD: usize = (1 << 20) + 4096;

/// How many headers a request may have. Go counts none, only their bytes;
/// hyper needs a number (100 unless told), so a generous one.
const MAX_HEADERS: usize = 1024;

/// Serves `app` over HTTP/1.1 with Go's limits on a request's head.
async fn serve(listener: tokio::net::TcpListener, app: axum::Router) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.max_buf_size(MAX_HEAD)
        .max_header_size(MAX_HEAD)
        .max_headers(MAX_HEADERS);
    loop {
        let tcp = match listener.accept().await {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of file descriptors, most likely: wait for some.
                tracing::warn!("simulated API server: accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // Go's net package turns Nagle's algorithm off on every TCP
        // connection, kube-apiserver's included; without it, a paced
        // body's second small write would wait ~40 ms for a delayed ACK.
        let _ = tcp.set_nodelay(true);
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let connection = http
            .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
            .with_upgrades();
        tokio::spawn(connection);
    }
}

fn status_error(status: kubecache_wire::Status) -> anyhow::Error {
    anyhow::anyhow!("{} ({})", status.message, status.code)
}

/// The generator of `config`'s objects. Its objects' times count back from
/// one instant per process, so that every sim of a process with the same
/// seed makes the same objects (a shared population is the one a sim would
/// build), whenever it starts.
fn generator(config: &SimConfig) -> Generator {
    static ANCHOR: std::sync::LazyLock<chrono::DateTime<chrono::Utc>> =
        std::sync::LazyLock::new(chrono::Utc::now);
    Generator::new(
        GeneratorConfig {
            seed: config.seed,
            namespaces: config.namespaces,
            nodes: config.nodes,
        },
        *ANCHOR,
    )
}

/// What a lean sim packs its objects' JSON against: pods as its generator
/// makes them, of another seed, stored as the sim stores its own.
fn dictionary(config: &SimConfig) -> Arc<packed::Dictionary> {
    let mut samples = generator(&SimConfig {
        seed: !config.seed,
        ..config.clone()
    });
    packed::Dictionary::new(std::iter::from_fn(|| {
        Some(StoredObject::new(&RESOURCES[ids::PODS], samples.pod(), 1).json())
    }))
}

/// Creates the namespaces and the configured objects; returns them in the
/// order created.
fn populate(
    store: &Store,
    generator: &mut Generator,
    config: &SimConfig,
) -> anyhow::Result<Vec<(ResourceId, Arc<StoredObject>)>> {
    let mut created = Vec::new();
    let mut create = |resource: ResourceId, object: Value| -> anyhow::Result<()> {
        let stored = store.create(resource, object).map_err(status_error)?;
        created.push((resource, stored));
        Ok(())
    };
    let namespaces = generator.namespace_names();
    for name in ["default", "kube-system"]
        .into_iter()
        .map(String::from)
        .chain(namespaces.iter().cloned())
    {
        if store.get(ids::NAMESPACES, &name).is_none() {
            create(ids::NAMESPACES, generator.namespace(&name))?;
        }
    }
    for _ in 0..config.pods {
        create(ids::PODS, generator.pod())?;
    }
    for i in 0..config.configmaps {
        create(
            ids::CONFIGMAPS,
            generator.configmap(&namespaces[i % namespaces.len()]),
        )?;
    }
    for i in 0..config.widgets {
        create(
            ids::WIDGETS,
            generator.widget(&namespaces[i % namespaces.len()]),
        )?;
    }
    Ok(created)
}

/// A population ([`SimConfig::shared_population`]): the objects `populate`
/// created, in order, and the generator as it left it.
struct Population {
    created: Vec<(ResourceId, Arc<StoredObject>)>,
    generator: Generator,
}

/// What decides a population: the generator's config and the counts.
#[derive(PartialEq, Eq, Hash)]
struct Shape {
    seed: u64,
    namespaces: usize,
    nodes: usize,
    pods: usize,
    configmaps: usize,
    widgets: usize,
}

impl Population {
    /// The population of `config`'s shape, built on first use (by each of
    /// the sims of one shape that start at once; the first is kept).
    fn shared(config: &SimConfig) -> anyhow::Result<Arc<Population>> {
        type Slot = Arc<OnceLock<Arc<Population>>>;
        static BUILT: LazyLock<Mutex<HashMap<Shape, Slot>>> = LazyLock::new(Default::default);
        let shape = Shape {
            seed: config.seed,
            namespaces: config.namespaces,
            nodes: config.nodes,
            pods: config.pods,
            configmaps: config.configmaps,
            widgets: config.widgets,
        };
        let slot = BUILT.lock().entry(shape).or_default().clone();
        if let Some(population) = slot.get() {
            return Ok(population.clone());
        }
        let store = Store::new(config.history, config.watch_cache, config.seed);
        let mut generator = generator(config);
        let created = populate(&store, &mut generator, config)?;
        let built = Arc::new(Population { created, generator });
        Ok(slot.get_or_init(|| built).clone())
    }
}

/// Compacts ten times a second: cheap when there is nothing to forget, and
/// fine-grained enough for tests with windows of a second or two.
async fn compact_forever(store: Arc<Store>) {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tick.tick().await;
        store.compact();
    }
}

/// Writes pods at the configured rate. Keeps its own list of live pod keys;
/// a write that races with an HTTP client (404, 409) is skipped.
async fn churn_forever(
    store: Arc<Store>,
    generator: Arc<Mutex<Generator>>,
    mut rate: watch::Receiver<f64>,
    seed: u64,
) {
    const TICK: Duration = Duration::from_millis(10);
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xc4u64);
    let mut keys: Vec<(String, String)> = Vec::new();
    let mut keys_at = 0u64;
    let mut owed = 0.0f64;
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let per_sec = *rate.borrow_and_update();
        if per_sec <= 0.0 {
            owed = 0.0;
            if rate.changed().await.is_err() {
                return;
            }
            continue;
        }
        tick.tick().await;
        // Held while this tick writes: `Sim::set_churn` waits for it.
        let mut generator = generator.lock();
        if *rate.borrow() <= 0.0 {
            continue; // stopped during the tick
        }
        if keys_at == 0 || keys.is_empty() {
            keys = current_pods(&store);
            keys_at = store.revision();
        }
        owed += per_sec * TICK.as_secs_f64();
        while owed >= 1.0 {
            owed -= 1.0;
            churn_once(&store, &mut generator, &mut rng, &mut keys);
        }
    }
}

fn current_pods(store: &Store) -> Vec<(String, String)> {
    let read = store::ListRead {
        revision: store.revision(),
        namespace: None,
        start: None,
        limit: 0,
        before: Some(0),
    };
    store
        .list(ids::PODS, read, |_| true)
        .map(|page| {
            page.items
                .iter()
                .map(|o| (o.namespace.clone(), o.name.clone()))
                .collect()
        })
        .unwrap_or_default()
}

fn churn_once(
    store: &Store,
    generator: &mut Generator,
    rng: &mut SmallRng,
    keys: &mut Vec<(String, String)>,
) {
    let roll: f64 = rng.random();
    if keys.is_empty() || roll < 0.15 {
        if let Ok(pod) = store.create(ids::PODS, generator.pod()) {
            keys.push((pod.namespace.clone(), pod.name.clone()));
        }
        return;
    }
    let i = rng.random_range(0..keys.len());
    let (namespace, name) = keys[i].clone();
    if roll < 0.30 {
        keys.swap_remove(i);
        let _ = store.delete(ids::PODS, &namespace, &name);
        return;
    }
    let Some(current) = store.get(ids::PODS, &store::key_of(&namespace, &name)) else {
        keys.swap_remove(i);
        return;
    };
    let mut pod: Value = current.to_value();
    let _: Mutation = generator.mutate_pod(&mut pod);
    let _ = store.update(ids::PODS, pod);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a client can tell of a sim's objects: key, revision, uid, JSON
    /// but for `creationTimestamp`, for each resource.
    fn seen(sim: &Sim) -> Vec<(String, u64, String, Value)> {
        [ids::NAMESPACES, ids::PODS, ids::CONFIGMAPS, ids::WIDGETS]
            .into_iter()
            .flat_map(|resource| sim.state(resource))
            .map(|object| {
                let mut json = object.to_value();
                json["metadata"]
                    .as_object_mut()
                    .unwrap()
                    .shift_remove("creationTimestamp");
                (
                    object.key.clone(),
                    object.revision,
                    object.uid.clone(),
                    json,
                )
            })
            .collect()
    }

    #[tokio::test]
    async fn a_shared_population_is_the_one_the_sim_would_build_and_churns_alike() {
        let config = SimConfig {
            seed: 7,
            pods: 50,
            configmaps: 5,
            widgets: 5,
            ..SimConfig::default()
        };
        let shared = SimConfig {
            shared_population: true,
            ..config.clone()
        };
        let (_, own) = Sim::start(config).await.unwrap();
        let (_, first) = Sim::start(shared.clone()).await.unwrap();
        let (_, second) = Sim::start(shared).await.unwrap();
        assert_eq!(seen(&first), seen(&own));
        assert_eq!(seen(&second), seen(&own));
        // The generators go on alike: the next pods are the same.
        for sim in [&own, &first, &second] {
            sim.create_pods(3).unwrap();
        }
        assert_eq!(seen(&first), seen(&own));
        assert_eq!(seen(&second), seen(&own));
    }
}
