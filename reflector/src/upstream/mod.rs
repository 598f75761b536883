//! The upstream side: list and watch one resource from the API server into
//! a [`StoreWriter`], keep it current, and recover from every failure.
//!
//! # Strategies
//! - [`Strategy::ListWatch`]: list every page, then watch from the list's
//!   resourceVersion. The baseline: when the list outlives the API server's
//!   watch cache, the watch gets 410 and the reflector lists again, forever.
//! - [`Strategy::Parallel`]: list page 1, open the watch at its
//!   resourceVersion at once, read the remaining pages while the watch
//!   events are buffered in order, then apply the buffer (skipping what the
//!   list already had). The watch starts seconds after the snapshot, so no
//!   list is ever too long for it.
//! - [`Strategy::Streaming`]: `sendInitialEvents=true`; ready at the
//!   `k8s.io/initial-events-end` bookmark.
//! - [`Strategy::Auto`]: streaming, falling back to parallel for good when
//!   the server answers the 422 of servers without WatchList.
//!
//! # Phases
//! The reflector is always in one of two phases:
//! - `Listing`: building a consistent state (initially, or after a 410).
//!   Failures retry the listing after a backoff.
//! - `Watching { rv }`: the store holds every change up to `rv`. A watch
//!   that ends (its timeout) or breaks is opened again from `rv`: nothing is
//!   lost, nothing is listed. 410 (the server no longer has `rv`) and
//!   undecodable events lead back to `Listing`.
//!
//! # The event contract
//! What the store's event log receives, and so what every downstream
//! watcher sees:
//! - after the initial list, one event per change, in resourceVersion order;
//! - after a relist, the difference between the store and the new list as
//!   one ADDED/MODIFIED/DELETED event per object that differs, ordered by
//!   resourceVersion (deletions at the new list's resourceVersion), then the
//!   live events: a consistent, if compressed, history;
//! - never an event that is not newer than what the store held for its key.

mod backoff;
mod client;
mod error;
mod listing;
mod resource;
mod wire;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

pub use backoff::Backoff;
pub use client::{Query, Upstream, WatchEvents};
pub use error::{Recovery, UpstreamError};
pub use resource::{ApiResource, ResourceSpec};
pub use wire::{Encoding, ListResponse, Page, WatchEvent, Wire};

use crate::store::StoreWriter;
use kubecache_wire::CachedObject;
use kubecache_wire::{Transform, WatchEventType};
use listing::{Listing, Pending};

/// How long a watch opened after a classic list must stay open without an
/// error before the store counts as synced. kube-apiserver answers a watch
/// from a revision it no longer holds with 200 and, at once, an ERROR 410
/// event; an event or a bookmark confirms the watch sooner.
const WATCH_CONFIRMATION: Duration = Duration::from_secs(1);

/// How the initial state is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// List all pages, then watch.
    ListWatch,
    /// List page 1, watch at once, buffer events while the rest is listed.
    Parallel,
    /// Streaming list (`sendInitialEvents`).
    Streaming,
    /// Streaming, or parallel where the server lacks streaming lists.
    #[default]
    Auto,
}

impl std::str::FromStr for Strategy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "list-watch" => Ok(Strategy::ListWatch),
            "parallel" => Ok(Strategy::Parallel),
            "streaming" => Ok(Strategy::Streaming),
            "auto" => Ok(Strategy::Auto),
            other => Err(format!(
                "unknown strategy {other:?}: expected list-watch, parallel, streaming or auto"
            )),
        }
    }
}

impl Strategy {
    /// The name used in config, logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::ListWatch => "list-watch",
            Strategy::Parallel => "parallel",
            Strategy::Streaming => "streaming",
            Strategy::Auto => "auto",
        }
    }
}

/// A predicate on whole objects: those it rejects are not cached.
pub type ObjectFilter = Arc<dyn Fn(&CachedObject) -> bool + Send + Sync>;

/// How a reflector lists and watches.
#[derive(Clone)]
pub struct ReflectorConfig {
    /// The initial-list strategy.
    pub strategy: Strategy,
    /// Objects per list page (client-go and kube-runtime use 500).
    pub page_size: usize,
    /// The encoding asked of the API server (protobuf for built-in kinds
    /// by default; the store keeps JSON either way).
    pub wire: Wire,
    /// Watch events buffered during a parallel list before it is abandoned
    /// for a relist (an overflow loses events, so it is never silent).
    pub buffer_limit: usize,
    /// `timeoutSeconds` of each watch. 290 s as kube-runtime (client-go
    /// picks 5–10 min): short enough to notice a dead connection, long
    /// enough that renewals are rare.
    pub watch_timeout: Duration,
    /// What is removed and indexed before objects are stored.
    pub transform: Transform,
    /// Keeps only the objects it accepts, for what selectors cannot say
    /// (e.g. "pods owned by a DaemonSet"). An object that stops being
    /// accepted is deleted from the cache, as a watch with a selector sees
    /// an object that leaves it.
    pub filter: Option<ObjectFilter>,
}

impl std::fmt::Debug for ReflectorConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReflectorConfig")
            .field("strategy", &self.strategy)
            .field("page_size", &self.page_size)
            .field("wire", &self.wire)
            .field("buffer_limit", &self.buffer_limit)
            .field("watch_timeout", &self.watch_timeout)
            .field("transform", &self.transform)
            .field("filter", &self.filter.is_some())
            .finish()
    }
}

impl Default for ReflectorConfig {
    fn default() -> Self {
        ReflectorConfig {
            strategy: Strategy::Auto,
            page_size: 500,
            wire: Wire::Auto,
            buffer_limit: 200_000,
            watch_timeout: Duration::from_secs(290),
            transform: Transform::default(),
            filter: None,
        }
    }
}

/// Why the reflector is listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListReason {
    /// The first list.
    Initial,
    /// The last relist failed: retrying.
    Retry(String),
    /// The history is lost (410, an undecodable event, a full buffer).
    Relist(String),
}

/// What the reflector reports about itself (for status documents and logs).
#[derive(Debug, Clone, Default)]
pub struct ReflectorStatus {
    /// The strategy in use (`auto` resolves to `streaming` or `parallel`).
    pub strategy: &'static str,
    /// Lists started (a failed one is retried from its first page).
    pub list_attempts: u64,
    /// Completed lists (the first one included).
    pub lists: u64,
    /// When the last list completed and why it ran.
    pub last_list: Option<(Instant, String)>,
    /// Objects listed so far in the list under way, and how many the
    /// server said remain (`remainingItemCount`).
    pub progress: Option<(usize, Option<u64>)>,
    /// Failures so far.
    pub failures: u64,
    /// 410 Gone answers so far (lists, continues and watches).
    pub gone: u64,
    /// The last failure.
    pub last_error: Option<String>,
}

/// Lists and watches one resource into a store until dropped.
pub struct Reflector {
    upstream: Upstream,
    config: ReflectorConfig,
    writer: StoreWriter,
    strategy: Strategy,
    status: watch::Sender<ReflectorStatus>,
    name: String,
}

impl Reflector {
    /// A reflector of `upstream` into `writer`.
    pub fn new(upstream: Upstream, config: ReflectorConfig, writer: StoreWriter) -> Self {
        let name = match &upstream.spec().resource.group {
            g if g.is_empty() => upstream.spec().resource.plural.clone(),
            g => format!("{}.{g}", upstream.spec().resource.plural),
        };
        let strategy = config.strategy;
        let upstream = upstream.with_wire(config.wire);
        let status = watch::Sender::new(ReflectorStatus {
            strategy: strategy.as_str(),
            ..ReflectorStatus::default()
        });
        Reflector {
            upstream,
            config,
            writer,
            strategy,
            status,
            name,
        }
    }

    /// Follows the reflector's status.
    pub fn status(&self) -> watch::Receiver<ReflectorStatus> {
        self.status.subscribe()
    }

    /// Runs until the future is dropped.
    pub async fn run(mut self) {
        let mut backoff = Backoff::default();
        let mut reason = ListReason::Initial;
        loop {
            let started = Instant::now();
            let (rv, events) = match self.list(&reason).await {
                Ok(listed) => listed,
                Err(error) => {
                    let delay = backoff.next(self.failed(&error, "list"));
                    reason = ListReason::Retry(error.to_string());
                    tokio::time::sleep(delay).await;
                    continue;
                }
            };
            self.listed(&reason, started);
            backoff.reset();
            // Parallel and streaming lists already hold a working watch; a
            // classic list's watch is only known to work once it delivers.
            let confirmed = events.is_some();
            if confirmed {
                self.writer.set_ready();
            }
            let ended = self.watch(rv, events, !confirmed, &mut backoff).await;
            metrics::counter!("kubecache_relists_total", "resource" => self.name.clone(), "reason" => ended.reason()).increment(1);
            reason = match ended {
                UpstreamError::Gone { message, .. } => {
                    ListReason::Relist(format!("410 Gone: {message}"))
                }
                other => ListReason::Relist(other.to_string()),
            };
        }
    }

    /// Records a failure; the minimum delay the server asked for, if any.
    fn failed(&self, error: &UpstreamError, phase: &'static str) -> Option<Duration> {
        metrics::counter!(
            "kubecache_upstream_errors_total",
            "resource" => self.name.clone(),
            "phase" => phase,
            "reason" => error.reason()
        )
        .increment(1);
        tracing::warn!(resource = %self.name, phase, %error, "upstream failure");
        let gone = matches!(error, UpstreamError::Gone { .. });
        self.status.send_modify(|s| {
            s.failures += 1;
            s.gone += u64::from(gone);
            s.last_error = Some(error.to_string());
        });
        match error.recovery() {
            Recovery::Backoff(at_least) => at_least,
            Recovery::Relist | Recovery::Resume => None,
        }
    }

    fn listed(&mut self, reason: &ListReason, started: Instant) {
        let why = match reason {
            ListReason::Initial => "initial".to_string(),
            ListReason::Retry(e) => format!("retry after: {e}"),
            ListReason::Relist(e) => e.clone(),
        };
        metrics::histogram!("kubecache_upstream_list_duration_seconds", "resource" => self.name.clone(), "strategy" => self.strategy.as_str())
            .record(started.elapsed().as_secs_f64());
        tracing::info!(resource = %self.name, strategy = self.strategy.as_str(), objects = self.writer.len(), elapsed = ?started.elapsed(), reason = %why, "listed");
        let strategy = self.strategy.as_str();
        self.status.send_modify(|s| {
            s.strategy = strategy;
            s.lists += 1;
            s.last_list = Some((Instant::now(), why));
            s.progress = None;
        });
    }

    /// One list with the configured strategy. Returns the resourceVersion
    /// the store is complete up to, and the watch to go on with, if the
    /// strategy already has one open.
    async fn list(
        &mut self,
        reason: &ListReason,
    ) -> Result<(u64, Option<WatchEvents>), UpstreamError> {
        self.status.send_modify(|s| s.list_attempts += 1);
        tracing::debug!(resource = %self.name, ?reason, strategy = self.strategy.as_str(), "listing");
        match self.strategy {
            Strategy::ListWatch => self.list_then_watch().await,
            Strategy::Parallel => self.list_parallel().await,
            Strategy::Streaming => self.list_streaming().await,
            Strategy::Auto => match self.list_streaming().await {
                Err(UpstreamError::StreamingUnsupported(message)) => {
                    tracing::info!(resource = %self.name, %message, "the server has no streaming lists: using parallel list-watch");
                    self.strategy = Strategy::Parallel;
                    self.list_parallel().await
                }
                other => {
                    if other.is_ok() {
                        self.strategy = Strategy::Streaming;
                    }
                    other
                }
            },
        }
    }

    fn page_query<'a>(&self, continue_token: Option<&'a str>) -> Query<'a> {
        Query {
            limit: Some(self.config.page_size),
            continue_token,
            ..Query::default()
        }
    }

    fn watch_query(&self, rv: u64) -> Query<'static> {
        Query {
            watch: true,
            resource_version: Some(rv),
            timeout: Some(self.config.watch_timeout),
            ..Query::default()
        }
    }

    /// Reads one page into the listing; the next continue token.
    async fn page(
        &self,
        listing: &mut Listing,
        token: Option<String>,
    ) -> Result<Option<String>, UpstreamError> {
        let body = self
            .upstream
            .list(&self.page_query(token.as_deref()))
            .await?;
        let page = body.page()?;
        listing.snapshot.get_or_insert(page.resource_version);
        page.for_each_json(|item| {
            let object = self.decode(item)?;
            if self.accepts(&object) {
                listing.add(&self.writer, object);
            }
            Ok(())
        })?;
        let listed = listing.len();
        self.status
            .send_modify(|s| s.progress = Some((listed, page.remaining_item_count)));
        Ok(page.continue_token.filter(|t| !t.is_empty()))
    }

    fn accepts(&self, object: &CachedObject) -> bool {
        self.config
            .filter
            .as_ref()
            .is_none_or(|filter| filter(object))
    }

    fn decode(
        &self,
        raw: &[u8],
    ) -> Result<std::sync::Arc<kubecache_wire::CachedObject>, UpstreamError> {
        let r = &self.upstream.spec().resource;
        kubecache_wire::decode_object(raw, &r.kind, &r.api_version(), &self.config.transform)
            .map(std::sync::Arc::new)
            .map_err(|e| UpstreamError::Decode {
                what: format!("{} object", r.kind),
                error: e.to_string(),
            })
    }

    async fn list_then_watch(&mut self) -> Result<(u64, Option<WatchEvents>), UpstreamError> {
        let mut listing = Listing::default();
        let mut token = self.page(&mut listing, None).await?;
        while token.is_some() {
            token = self.page(&mut listing, token).await?;
        }
        let rv = listing.finish(&mut self.writer, Vec::new());
        Ok((rv, None))
    }

    /// Page 1, then the watch from its resourceVersion, then the rest of
    /// the pages while the watch is read into the buffer.
    ///
    /// An expired continue token (the list outlived etcd's compaction) is
    /// answered with a token that continues at the current revision; it is
    /// used, because the watch opened at page 1's resourceVersion covers
    /// every change since: the buffer replays them over whatever newer state
    /// the later pages show, and the skip rule drops what they already had.
    async fn list_parallel(&mut self) -> Result<(u64, Option<WatchEvents>), UpstreamError> {
        let mut listing = Listing::default();
        let mut token = self.page(&mut listing, None).await?;
        let snapshot = listing.snapshot.expect("a page sets the snapshot");
        if token.is_none() {
            return Ok((listing.finish(&mut self.writer, Vec::new()), None));
        }
        let mut buffer = WatchBuffer::new(snapshot, self.config.buffer_limit);
        let mut events = self.upstream.watch(&self.watch_query(snapshot)).await?;
        // Reopening a broken watch backs off, but never for long: the page
        // request under way waits meanwhile.
        let mut rewatch = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
        while let Some(current) = token.take() {
            let page = self.page(&mut listing, Some(current.clone()));
            tokio::pin!(page);
            let next = loop {
                tokio::select! {
                    biased;
                    next = &mut page => break next,
                    event = events.next_event() => {
                        let delay = match buffer.read(self, event) {
                            Ok(true) => {
                                rewatch.reset();
                                continue;
                            }
                            // The watch ended (its timeout): open it again where it was.
                            Ok(false) => Duration::ZERO,
                            // It broke: nothing is lost, resume where it was.
                            Err(error) if error.recovery() == Recovery::Resume => {
                                self.failed(&error, "list");
                                rewatch.next(None)
                            }
                            Err(error) => return Err(error),
                        };
                        tokio::time::sleep(delay).await;
                        events = self.upstream.watch(&self.watch_query(buffer.rv)).await?;
                    }
                }
            };
            token = match next {
                Err(UpstreamError::Gone {
                    continue_token: Some(inconsistent),
                    message,
                }) => {
                    tracing::info!(resource = %self.name, %message, "continue token expired: continuing at the current revision, the watch covers the difference");
                    Some(inconsistent)
                }
                other => other?,
            };
            metrics::gauge!("kubecache_buffered_events", "resource" => self.name.clone())
                .set(buffer.events.len() as f64);
        }
        metrics::gauge!("kubecache_buffered_events", "resource" => self.name.clone()).set(0.0);
        let rv = buffer.rv;
        listing.finish(&mut self.writer, buffer.events);
        Ok((rv, Some(events)))
    }

    async fn list_streaming(&mut self) -> Result<(u64, Option<WatchEvents>), UpstreamError> {
        let query = Query {
            watch: true,
            send_initial_events: true,
            version_match: Some("NotOlderThan"),
            timeout: Some(self.config.watch_timeout),
            ..Query::default()
        };
        let mut events = self.upstream.watch(&query).await?;
        let mut listing = Listing::default();
        loop {
            let Some(raw) = events.next_event().await? else {
                return Err(UpstreamError::Stream(
                    "the streaming list ended before its last object".into(),
                ));
            };
            let event = raw.line()?;
            match event.event_type {
                WatchEventType::Added => {
                    let object = self.decode(event.object)?;
                    if self.accepts(&object) {
                        listing.add(&self.writer, object);
                    }
                    if listing.len() % 1000 == 0 {
                        let listed = listing.len();
                        self.status
                            .send_modify(|s| s.progress = Some((listed, None)));
                    }
                }
                WatchEventType::Bookmark => {
                    let bookmark = event.bookmark().map_err(decode_error)?;
                    if bookmark.initial_events_end {
                        listing.snapshot = Some(bookmark.resource_version);
                        return Ok((listing.finish(&mut self.writer, Vec::new()), Some(events)));
                    }
                }
                WatchEventType::Error => return Err(watch_error(&event)?),
                WatchEventType::Modified | WatchEventType::Deleted => {
                    return Err(UpstreamError::Decode {
                        what: "streaming list".into(),
                        error: format!(
                            "{:?} before the initial-events-end bookmark",
                            event.event_type
                        ),
                    });
                }
            }
        }
    }

    /// Watches from `rv` (on `events` if a watch is already open) until the
    /// history is lost; returns why. With `confirm`, the store becomes
    /// ready once the watch proves to work.
    async fn watch(
        &mut self,
        mut rv: u64,
        mut events: Option<WatchEvents>,
        mut confirm: bool,
        backoff: &mut Backoff,
    ) -> UpstreamError {
        loop {
            let stream = match events.take() {
                Some(open) => Ok(open),
                None => self.upstream.watch(&self.watch_query(rv)).await,
            };
            let (opened, from) = (Instant::now(), rv);
            let error = match stream {
                Ok(mut open) => match self.follow(&mut open, &mut rv, &mut confirm).await {
                    Ok(()) => {
                        self.restarted("timeout");
                        // A server that ends watches at once must not make us spin.
                        if opened.elapsed() < Duration::from_secs(1) {
                            tokio::time::sleep(backoff.next(None)).await;
                        }
                        continue;
                    }
                    Err(error) => error,
                },
                Err(error) => error,
            };
            let floor = self.failed(&error, "watch");
            if rv > from {
                // The watch made progress before it failed: not a failing streak.
                backoff.reset();
            }
            match error.recovery() {
                Recovery::Relist => return error,
                Recovery::Resume | Recovery::Backoff(_) => {
                    self.restarted(error.reason());
                    tokio::time::sleep(backoff.next(floor)).await;
                }
            }
        }
    }

    fn restarted(&self, reason: &'static str) {
        metrics::counter!("kubecache_watch_restarts_total", "resource" => self.name.clone(), "reason" => reason)
            .increment(1);
    }

    /// Applies the events of one watch until it ends. With `confirm`, marks
    /// the store ready at the first event, or once the watch has stayed
    /// open for [`WATCH_CONFIRMATION`] without an error.
    async fn follow(
        &mut self,
        events: &mut WatchEvents,
        rv: &mut u64,
        confirm: &mut bool,
    ) -> Result<(), UpstreamError> {
        loop {
            let event = if *confirm {
                tokio::select! {
                    event = events.next_event() => event?,
                    _ = tokio::time::sleep(WATCH_CONFIRMATION) => {
                        self.confirm(confirm);
                        continue;
                    }
                }
            } else {
                events.next_event().await?
            };
            let Some(event) = event else {
                return Ok(());
            };
            let pending = self.event(&event, rv)?;
            self.confirm(confirm);
            match pending {
                Some(pending) => {
                    if self.writer.apply(pending.into_change()).is_some() {
                        metrics::counter!("kubecache_events_applied_total", "resource" => self.name.clone())
                            .increment(1);
                    }
                }
                None => self.writer.advance(*rv),
            }
        }
    }

    fn confirm(&mut self, confirm: &mut bool) {
        if std::mem::take(confirm) {
            self.writer.set_ready();
        }
    }

    /// Decodes one watch event, advancing `rv`; `None` for bookmarks.
    fn event(&self, raw: &WatchEvent, rv: &mut u64) -> Result<Option<Pending>, UpstreamError> {
        let event = raw.line()?;
        let pending = match event.event_type {
            WatchEventType::Error => return Err(watch_error(&event)?),
            WatchEventType::Bookmark => {
                *rv = event.resource_version().map_err(decode_error)?;
                return Ok(None);
            }
            WatchEventType::Added | WatchEventType::Modified => {
                let object = self.decode(event.object)?;
                if self.accepts(&object) {
                    Pending::Upsert(object)
                } else {
                    // Gone from the cache's point of view (a no-op if it was never in it).
                    Pending::Delete(object)
                }
            }
            WatchEventType::Deleted => Pending::Delete(self.decode(event.object)?),
        };
        *rv = pending.object().resource_version;
        Ok(Some(pending))
    }
}

/// Watch events read while a parallel list is under way.
struct WatchBuffer {
    events: Vec<Pending>,
    rv: u64,
    limit: usize,
}

impl WatchBuffer {
    fn new(rv: u64, limit: usize) -> Self {
        WatchBuffer {
            events: Vec::new(),
            rv,
            limit,
        }
    }

    /// Buffers one event; `false` when the watch ended cleanly.
    fn read(
        &mut self,
        reflector: &Reflector,
        event: Result<Option<WatchEvent>, UpstreamError>,
    ) -> Result<bool, UpstreamError> {
        let Some(event) = event? else {
            return Ok(false);
        };
        if let Some(pending) = reflector.event(&event, &mut self.rv)? {
            if self.events.len() == self.limit {
                return Err(UpstreamError::BufferOverflow { limit: self.limit });
            }
            self.events.push(pending);
        }
        Ok(true)
    }
}

fn decode_error(e: kubecache_wire::DecodeError) -> UpstreamError {
    UpstreamError::Decode {
        what: "watch event".into(),
        error: e.to_string(),
    }
}

/// The error an ERROR event carries.
fn watch_error(event: &kubecache_wire::WatchLine<'_>) -> Result<UpstreamError, UpstreamError> {
    let status = event.status().map_err(decode_error)?;
    Ok(UpstreamError::from_status(&status))
}
