//! The cache core (kube-apiserver's cacher): each cached resource, a [`Cache`], with what
//! serving it needs (store reader, consistent reads, held list snapshots,
//! watch fan-out), and every one of them, the [`Caches`]; below the HTTP
//! layer and free of it.

mod clock;
pub(crate) mod encoding;
#[cfg(test)]
mod fake_api;
pub(crate) mod fanout;
pub(crate) mod fetch;
mod filter;
pub(crate) mod freshness;
pub(crate) mod pages;
mod pipeline;
mod predicates;
mod quota;
mod scope;
mod seats;
mod writes;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kubecache_reflector::ReflectorStatus;
use kubecache_reflector::upstream::{ApiResource, Upstream};
use kubecache_reflector::{IndexSpec, StoreReader};
use kubecache_wire::{ObjectKey, Status, Transform};
use tokio::sync::watch;

pub use filter::Filter;
pub use predicates::Predicates;
pub(crate) use quota::Owner;
pub(crate) use scope::Scope;
pub(crate) use writes::ClientKey;

use clock::Clock;
use encoding::Kind;
use fanout::Hub;
use freshness::{Consistent, Freshness};
use pages::HeldSnapshots;
use pipeline::Pipeline;
use quota::WatchQuota;
pub(crate) use seats::{Flow, Seat, Seats};
use writes::Writes;

/// The names of the built-in indexes in the query API; configured field
/// indexes take other names.
pub const BUILTIN_INDEXES: [&str; 3] = ["namespace", "label", "owner"];

/// How the server serves; the same for every resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServeSettings {
    /// Longest a read waits for the store to reach a resourceVersion (its
    /// own `NotOlderThan`, or the API server's current one for a consistent
    /// read) before answering 504.
    pub read_wait: Duration,
    /// Interval of bookmarks to watchers that allow them.
    pub bookmark_interval: Duration,
    /// Events a watcher may have queued, undelivered, before it is closed
    /// with a 410 `Expired` error.
    pub watcher_queue: usize,
    /// Open watches one client may hold, across every resource; one more
    /// gets 429 (see [`quota`]).
    pub watches_per_client: usize,
    /// How long a paginated list's snapshot is kept after its last page was
    /// served; a continue token older than that gets 410 `Expired`.
    pub continue_ttl: Duration,
    /// Most requirements a list or watch may select by, label and field
    /// selectors together: each costs every object examined (and, for a
    /// watch, every event) a lookup.
    pub max_selector_requirements: usize,
    /// Most requests for the API server's current resourceVersion in
    /// flight at once, for the consistent reads of every resource (see
    /// `cacher/clock.rs`); and most GETs of one object in flight at once
    /// for its consistent reads.
    pub freshness_requests: usize,
    /// How often a probe watch starts while consistent reads of a resource
    /// wait for a proof that it is complete (see `cacher/freshness.rs`): it
    /// bounds their wait against a server that honours each watch's own
    /// bookmark time.
    pub probe_interval: Duration,
    /// Whether a consistent GET of one object that the store cannot prove
    /// complete at once is answered by the API server's copy of the object
    /// instead of waiting for a probe (see `cacher/freshness.rs`).
    pub cold_get_passthrough: bool,
    /// Large initial sends (a watch's initial events, a list of many
    /// objects) written at once; the others queue (see `cacher/seats.rs`).
    pub initial_send_seats: usize,
}

impl ServeSettings {
    /// Three seconds: kube-apiserver's watch cache waits as long for a
    /// resourceVersion it has not reached before answering "Too large
    /// resource version" (`blockTimeout` in `cacher/watch_cache.go`).
    pub const DEFAULT_READ_WAIT: Duration = Duration::from_secs(3);

    /// One minute: kube-apiserver's bookmark frequency
    /// (`bookmarkFrequency` in `cacher/cacher.go`).
    pub const DEFAULT_BOOKMARK_INTERVAL: Duration = Duration::from_secs(60);

    /// 1,024 events: a watcher this far behind is about 10 s late on a
    /// busy resource; kube-apiserver's per-watcher buffer is 10 to 1,000
    /// events depending on the kind.
    pub const DEFAULT_WATCHER_QUEUE: usize = 1024;

    /// 1,000 watches: a controller-runtime manager or a client-go informer
    /// factory opens one per kind, or per kind and namespace when its
    /// cache is limited to namespaces, so this is 10 kinds in each of 100
    /// namespaces. A client past it is almost surely leaking watches.
    /// (kube-apiserver bounds no client's watches: its in-flight limits
    /// leave long-running requests out.)
    pub const DEFAULT_WATCHES_PER_CLIENT: usize = 1000;

    /// Five minutes: as long as kube-apiserver honours a continue token
    /// (until etcd compacts its revision, `--etcd-compaction-interval=5m`).
    pub const DEFAULT_CONTINUE_TTL: Duration = Duration::from_secs(5 * 60);

    /// One hundred: far more than any controller's selector (a set of
    /// values, `k in (a,b,…)`, is one requirement however many values it
    /// has), far less than the thousands that made one list cost seconds.
    pub const DEFAULT_MAX_SELECTOR_REQUIREMENTS: usize = 100;

    /// Two: a read then waits about one and a half round trips for a
    /// request sent after it arrived, and the API server answers at most
    /// two cheap lists for kubecache at once. Measured against the sim with
    /// a real server's costs (1,000 consistent reads/s), 32 clients' GETs:
    /// 1 in flight gave 2,613 reads/s at p50 12.0 ms for 163 lists/s; 2,
    /// 3,252/s at 9.7 ms for 316/s; 4, 4,129/s at 7.6 ms for 664/s (two
    /// thirds of the server's capacity); the server itself, 1,000/s at
    /// 32 ms (`benches/README.md`, "Fresh reads").
    pub const DEFAULT_FRESHNESS_REQUESTS: usize = 2;

    /// 100 ms: a quiet resource's read is proven within about 100 ms of
    /// the API server reaching its revision, at about ten probe watches
    /// opened per second per resource while reads wait.
    pub const DEFAULT_PROBE_INTERVAL: Duration = Duration::from_millis(100);

    /// Half the cores, at least one: each seated send keeps a core busy
    /// while its client reads as fast as loopback, so large sends may take
    /// at most half the async workers and the others are always left to
    /// GETs, watch delivery and probes. (A client that stops reading no
    /// longer holds its seat: a waiting send takes it back.) With one seat
    /// per core, a 20-member streaming-list storm on two cores took the
    /// well-behaved GETs' p99 to 3.4x their baseline; with one, 1.75x.
    pub fn default_initial_send_seats() -> usize {
        (std::thread::available_parallelism().map_or(1, std::num::NonZero::get) / 2).max(1)
    }
}

impl Default for ServeSettings {
    fn default() -> Self {
        ServeSettings {
            read_wait: Self::DEFAULT_READ_WAIT,
            bookmark_interval: Self::DEFAULT_BOOKMARK_INTERVAL,
            watcher_queue: Self::DEFAULT_WATCHER_QUEUE,
            watches_per_client: Self::DEFAULT_WATCHES_PER_CLIENT,
            continue_ttl: Self::DEFAULT_CONTINUE_TTL,
            max_selector_requirements: Self::DEFAULT_MAX_SELECTOR_REQUIREMENTS,
            freshness_requests: Self::DEFAULT_FRESHNESS_REQUESTS,
            probe_interval: Self::DEFAULT_PROBE_INTERVAL,
            cold_get_passthrough: true,
            initial_send_seats: Self::default_initial_send_seats(),
        }
    }
}

/// One cached resource: its store and what serving it needs.
pub struct Cache {
    /// The resource.
    pub resource: ApiResource,
    /// The store the reflector fills.
    pub reader: StoreReader,
    /// The reflector's status.
    pub status: watch::Receiver<ReflectorStatus>,
    /// What the cache holds of the resource.
    pub(crate) scope: Scope,
    /// The store's field indexes.
    pub(crate) indexes: Arc<[IndexSpec]>,
    /// What encoding needs of the resource (see [`encoding`]), made once.
    pub(crate) kind: Kind,
    /// Consistent reads.
    pub(crate) freshness: Freshness,
    /// Snapshots of paginated lists in progress.
    pub(crate) pages: Arc<HeldSnapshots>,
    /// The fan-out of the store's events to watchers.
    pub(crate) hub: Hub,
    /// Open watches.
    pub(crate) watchers: AtomicUsize,
    /// Clients' writes the store has not applied yet.
    writes: Writes,
    /// How the reflector shapes each object it stores (fields stripped,
    /// index values read): an object read from the API server for this
    /// cache's clients is shaped alike.
    pub(crate) transform: Transform,
    /// The API server, for this resource.
    upstream: Upstream,
    /// Fetches of one object from the API server, each answering every
    /// consistent GET of it waiting when it was sent (see [`fetch`]).
    fetches: Arc<Pipeline<ObjectKey, fetch::Answer>>,
}

impl Cache {
    /// Serves `reader`, filled by a reflector of `upstream` whose status is
    /// `status` and which shapes objects by `transform`. Spawns the tasks that serve consistent reads, so it must
    /// be called within a Tokio runtime.
    pub fn new(
        upstream: Upstream,
        reader: StoreReader,
        status: watch::Receiver<ReflectorStatus>,
        transform: Transform,
        settings: &ServeSettings,
    ) -> Self {
        let resource = upstream.spec().resource.clone();
        let api_version = resource.api_version();
        // Written as the API server's Go types write it.
        let protobuf = kubecache_wire::protobuf::message_type(&api_version, &resource.kind)
            .map(|ty| ty.as_of(upstream.version()));
        let builtin = kubecache_wire::builtin_kind(&api_version, &resource.kind);
        let indexes: Arc<[IndexSpec]> = reader.snapshot().field_indexes().into();
        Cache {
            hub: Hub::start(&reader, indexes.clone()),
            scope: Scope::of(upstream.spec()),
            indexes,
            kind: Kind {
                api_version,
                kind: resource.kind.clone(),
                builtin,
                protobuf,
            },
            resource,
            freshness: Freshness::new(upstream.clone(), reader.clone(), settings.probe_interval),
            pages: HeldSnapshots::start(settings.continue_ttl),
            reader,
            status,
            watchers: AtomicUsize::new(0),
            writes: Writes::new(settings.read_wait),
            transform,
            fetches: Pipeline::new(settings.freshness_requests),
            upstream,
        }
    }

    /// Records that `client` wrote this resource at `resource_version` (see
    /// [`writes`]).
    pub(crate) fn wrote(&self, client: ClientKey, resource_version: u64) {
        self.writes.record(client, resource_version);
    }

    /// Waits until the store holds `client`'s last write of this resource;
    /// `true` if this is the client's first read since that write, which
    /// then needs no other wait (see [`writes`]).
    ///
    /// # Errors
    ///
    /// 504 `Too large resource version` when it does not within `timeout`.
    pub(crate) async fn read_your_writes(
        &self,
        client: Option<ClientKey>,
        timeout: Duration,
    ) -> Result<bool, Status> {
        match self.own_write_in(client) {
            Ok(first) => Ok(first),
            // Boxed: most reads wait for nothing, and their futures stay small.
            Err(claim) => Box::pin(self.wait_for_write(claim, timeout)).await,
        }
    }

    /// Whether `client`'s last write is in the store: `Ok(first)` (see
    /// [`Self::read_your_writes`]) when it is or there is none, else the
    /// claim to wait for.
    fn own_write_in(&self, client: Option<ClientKey>) -> Result<bool, writes::Claim> {
        let held = self.freshness.complete_through();
        let Some(claim) = client.and_then(|c| self.writes.claim(c, held)) else {
            return Ok(false);
        };
        if held >= claim.resource_version {
            return Ok(claim.first);
        }
        Err(claim)
    }

    /// Waits until the store holds the write of `claim`, timed and counted.
    async fn wait_for_write(
        &self,
        claim: writes::Claim,
        timeout: Duration,
    ) -> Result<bool, Status> {
        let written = claim.resource_version;
        let resource = self.name();
        let started = std::time::Instant::now();
        let waiting = Waiting::new(metrics::gauge!(
            "kubecache_read_your_writes_waiting",
            "resource" => resource.clone()
        ));
        let result = self.freshness.reached(written, timeout).await;
        drop(waiting);
        let outcome = if result.is_ok() {
            "caught_up"
        } else {
            "timeout"
        };
        metrics::histogram!(
            "kubecache_read_your_writes_wait_seconds",
            "resource" => resource,
            "outcome" => outcome
        )
        .record(started.elapsed().as_secs_f64());
        result.map(|()| claim.first)
    }

    /// Open watches of this resource.
    pub fn watchers(&self) -> usize {
        self.watchers.load(Ordering::Relaxed)
    }

    /// Watches the dispatcher routes events to: the open ones past their
    /// replay. A watch leaves it the moment it ends.
    pub fn dispatched_watchers(&self) -> usize {
        self.hub.joined()
    }

    /// `plural` for the core group, `plural.group` otherwise: the name
    /// `--resources` and the query API use.
    pub fn name(&self) -> String {
        name_of(&self.resource)
    }
}

/// `plural` for the core group, `plural.group` otherwise.
fn name_of(resource: &ApiResource) -> String {
    if resource.group.is_empty() {
        resource.plural.clone()
    } else {
        format!("{}.{}", resource.plural, resource.group)
    }
}

/// One read waiting for its client's write, counted while it lives (a read
/// whose client went away included).
struct Waiting(metrics::Gauge);

impl Waiting {
    fn new(gauge: metrics::Gauge) -> Self {
        gauge.increment(1.0);
        Waiting(gauge)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

/// Every cached resource, and the settings they are served with.
pub struct Caches {
    caches: Vec<Arc<Cache>>,
    /// How to serve.
    pub settings: ServeSettings,
    /// `true` once the server is shutting down: open watches end cleanly.
    shutdown: watch::Sender<bool>,
    /// Open watches per client.
    pub(crate) watch_quota: WatchQuota,
    /// The API server's current resourceVersion, for consistent reads.
    clock: Clock,
    /// Seats of large initial sends, shared by every resource.
    pub(crate) seats: Seats,
}

impl Caches {
    /// Serves `caches` with `settings`.
    pub fn new(caches: Vec<Cache>, settings: ServeSettings) -> Self {
        let sources = caches.iter().map(|c| c.freshness.source()).collect();
        Caches {
            clock: Clock::new(sources, settings.freshness_requests),
            caches: caches.into_iter().map(Arc::new).collect(),
            watch_quota: WatchQuota::new(settings.watches_per_client),
            seats: Seats::new(settings.initial_send_seats),
            settings,
            shutdown: watch::Sender::new(false),
        }
    }

    /// Ends every open watch (each stream closes cleanly, so clients
    /// resume elsewhere from their last resourceVersion); for graceful
    /// shutdown, before the listener stops.
    pub fn shut_down(&self) {
        self.shutdown.send_replace(true);
    }

    /// Resolves (`changed()`, or already `true`) when the server shuts down.
    pub fn shutting_down(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Waits until `cache` holds every change the API server had accepted
    /// when this was called (see [`freshness`]); the resourceVersion it
    /// had then, which the store is now complete through.
    ///
    /// # Errors
    ///
    /// 504 when the API server cannot be asked, or the store does not
    /// catch up within the read wait.
    pub(crate) async fn consistent(&self, cache: &Cache) -> Result<u64, Status> {
        cache
            .freshness
            .consistent(&self.clock, self.settings.read_wait)
            .await
    }

    /// As [`Self::consistent`] for a GET of the object `name` in
    /// `namespace`, which the API server answers instead when the store
    /// cannot be proven complete at once: then [`Consistent::Fetched`] (with
    /// [`ServeSettings::cold_get_passthrough`]; see
    /// [`Freshness::consistent_or`]).
    ///
    /// # Errors
    ///
    /// As [`Self::consistent`].
    pub(crate) async fn consistent_get(
        &self,
        cache: &Arc<Cache>,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Consistent, Status> {
        if !self.settings.cold_get_passthrough {
            return self.consistent(cache).await.map(Consistent::Proven);
        }
        let fetch = cache.fetch(namespace, name);
        cache
            .freshness
            .consistent_or(&self.clock, self.settings.read_wait, fetch)
            .await
    }

    /// Every cache, in configuration order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Cache>> {
        self.caches.iter()
    }

    /// The cache of `plural` in `group`/`version`.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<&Arc<Cache>> {
        self.caches.iter().find(|c| {
            c.resource.group == group
                && c.resource.version == version
                && c.resource.plural == plural
        })
    }

    /// The cache named `plural` or `plural.group` (see [`Cache::name`]).
    pub fn by_name(&self, name: &str) -> Option<&Arc<Cache>> {
        self.caches.iter().find(|c| c.name() == name)
    }

    /// Whether every store has synced.
    pub fn ready(&self) -> bool {
        self.caches.iter().all(|c| c.reader.is_ready())
    }
}
