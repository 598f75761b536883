//! The strategies' lists: each reads the resource's current state into the
//! store and says where the store is complete up to.

use std::time::{Duration, Instant};

use super::replace::{Listing, Pending};
use super::{
    Backoff, Phase, Query, Recovery, Reflector, Strategy, Upstream, UpstreamError, WatchEvent,
    WatchEvents, error_event, undecodable_event,
};
use kubecache_wire::WatchEventType;
use tokio::task::JoinHandle;

/// A page requested and not read yet.
/// Why the reflector is listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListReason {
    /// The first list.
    Initial,
    /// The last list failed: retrying.
    Retry(String),
    /// The history is lost (410, an undecodable event, a full buffer).
    Relist(String),
}

pub(super) type Fetch = JoinHandle<Result<super::ListResponse, UpstreamError>>;

/// A list applied to the store.
pub(super) struct Listed {
    /// The resourceVersion the store is complete up to.
    pub rv: u64,
    /// The watch to go on with, if the strategy already has one open.
    pub events: Option<WatchEvents>,
}

/// A list that failed: the error, and the request it came from.
pub(super) struct Failed {
    pub phase: Phase,
    pub error: UpstreamError,
}

impl Failed {
    /// Tags an error with the request it came from.
    pub(super) fn at(phase: Phase) -> impl FnOnce(UpstreamError) -> Failed {
        move |error| Failed { phase, error }
    }
}

impl Reflector {
    /// One list with the strategy in use.
    pub(super) async fn list(&mut self, reason: &ListReason) -> Result<Listed, Failed> {
        self.status.send_modify(|s| s.list_attempts += 1);
        tracing::debug!(resource = %self.name, ?reason, strategy = self.strategy.as_str(), "listing");
        match self.strategy {
            Strategy::ListWatch => self.list_then_watch().await,
            Strategy::Parallel => self.list_parallel().await,
            Strategy::Sharded => self.list_sharded().await,
            Strategy::Streaming => self.list_streaming().await,
            Strategy::Auto => {
                let listed = self.list_streaming().await?;
                self.strategy = Strategy::Streaming;
                Ok(listed)
            }
        }
    }

    /// Records a completed list.
    pub(super) fn listed(&mut self, reason: &ListReason, started: Instant) {
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
        self.caught_up();
    }

    /// Requests the next page of the whole collection.
    fn fetch(&self, continue_token: Option<String>) -> Fetch {
        self.fetch_from(&self.upstream, None, continue_token)
    }

    /// Requests one page of `upstream` (at `snapshot` exactly when given:
    /// a continue token carries its own) on a task of its own, so that the
    /// request is under way while the page before it is decoded. A list
    /// that fails drops the handle: the one page in flight is then read
    /// and discarded, which costs less than tracking it to abort it.
    pub(super) fn fetch_from(
        &self,
        upstream: &Upstream,
        snapshot: Option<u64>,
        continue_token: Option<String>,
    ) -> Fetch {
        let upstream = upstream.clone();
        let limit = Some(self.config.page_size);
        tokio::spawn(async move {
            let query = Query {
                limit,
                continue_token: continue_token.as_deref(),
                resource_version: snapshot,
                version_match: snapshot.map(|_| "Exact"),
                ..Query::default()
            };
            upstream.list(&query).await
        })
    }

    /// Reads a page into the listing; the next page's fetch.
    ///
    /// Pages are pipelined: the envelope (metadata and each item's extent)
    /// is read first, and the next page is requested with its continue
    /// token before this page's items are decoded, in one pass and in list
    /// order ([`Pages::RestOf`] decodes its last item first, to know
    /// whether its namespace goes on).
    pub(super) async fn page(
        &self,
        listing: &mut Listing,
        body: super::ListResponse,
        pages: &Pages,
    ) -> Result<Option<Fetch>, UpstreamError> {
        let page = body.page()?;
        listing.snapshot.get_or_insert(page.resource_version);
        let token = page
            .continue_token
            .as_deref()
            .filter(|t| !t.is_empty())
            .map(str::to_owned);
        // The rest of page 1's namespace goes on while its pages do.
        let goes_on = match pages {
            Pages::RestOf(namespace) => page
                .last_json(|item| Ok(self.decode(item, None)?.key.namespace() == namespace))?
                .unwrap_or(false),
            Pages::All | Pages::Namespace(_) => true,
        };
        let next = token
            .filter(|_| goes_on)
            .map(|t| self.continue_pages(pages, t));
        if next.is_some() {
            // A task spawned from a worker waits in that worker's own slot,
            // where no other worker takes it: let it send its request now,
            // not after the decoding below.
            tokio::task::yield_now().await;
        }
        let mut last = None;
        page.for_each_object(|item, strings| {
            let object = self.decode(item, strings)?;
            if let Pages::RestOf(namespace) = pages
                && object.key.namespace() != namespace
            {
                // Read by the later namespaces' own shards.
                return Ok(());
            }
            last = Some(object.key.clone());
            if self.accepts(&object) {
                listing.add(&self.writer, object);
            }
            Ok(())
        })?;
        listing.last = last.or(listing.last.take());
        let listed = listing.len();
        self.status
            .send_modify(|s| s.progress = Some((listed, page.remaining_item_count)));
        Ok(next)
    }

    /// Awaits a page, then reads it as [`page`](Reflector::page) does.
    async fn fetched_page(
        &self,
        listing: &mut Listing,
        fetch: Fetch,
        pages: &Pages,
    ) -> Result<Option<Fetch>, UpstreamError> {
        let body = fetched(fetch).await?;
        self.page(listing, body, pages).await
    }

    async fn list_then_watch(&mut self) -> Result<Listed, Failed> {
        let mut listing = Listing::default();
        let mut next = Some(self.fetch(None));
        while let Some(fetch) = next {
            next = self
                .fetched_page(&mut listing, fetch, &Pages::All)
                .await
                .map_err(Failed::at(Phase::List))?;
        }
        let rv = listing.finish(&mut self.writer, Vec::new());
        Ok(Listed { rv, events: None })
    }

    /// Page 1, then the watch from its resourceVersion, then the rest of
    /// the pages while the watch is read into the buffer.
    async fn list_parallel(&mut self) -> Result<Listed, Failed> {
        let mut listing = Listing::default();
        let Some(next) = self.first_page(&mut listing).await? else {
            let rv = listing.finish(&mut self.writer, Vec::new());
            return Ok(Listed { rv, events: None });
        };
        let mut watch = self.buffer_watch(&listing).await?;
        self.rest_of_pages(&mut listing, next, &mut watch).await?;
        self.finish_buffered(listing, watch).await
    }

    /// Reads page 1; the fetch of page 2, if any.
    pub(super) async fn first_page(&self, listing: &mut Listing) -> Result<Option<Fetch>, Failed> {
        let first = self.fetch(None);
        self.fetched_page(listing, first, &Pages::All)
            .await
            .map_err(Failed::at(Phase::List))
    }

    /// Opens the watch at the listing's snapshot, to buffer its events.
    pub(super) async fn buffer_watch(&self, listing: &Listing) -> Result<Buffered, Failed> {
        let snapshot = listing.snapshot.expect("a page sets the snapshot");
        let events = self
            .upstream
            .watch(&self.watch_query(snapshot))
            .await
            .map_err(Failed::at(Phase::Watch))?;
        Ok(Buffered {
            buffer: WatchBuffer::new(snapshot, self.config.buffer_limit),
            events,
            // Reopening a broken watch backs off, but never for long: the
            // page requests under way wait meanwhile.
            rewatch: Backoff::new(Duration::from_millis(100), Duration::from_secs(5)),
        })
    }

    /// Reads the pages of the whole collection from `next` on.
    ///
    /// An expired continue token (the list outlived etcd's compaction) is
    /// answered with a token that continues at the current revision; the
    /// list resumes with it, because the watch opened at page 1's
    /// resourceVersion covers every change since: the buffer replays them
    /// over whatever newer state the later pages show, and the skip rule
    /// drops what they already had.
    pub(super) async fn rest_of_pages(
        &self,
        listing: &mut Listing,
        next: Fetch,
        watch: &mut Buffered,
    ) -> Result<(), Failed> {
        let mut next = Some(next);
        while let Some(current) = next.take() {
            let read = self
                .buffering(watch, self.fetched_page(listing, current, &Pages::All))
                .await?;
            next = match read {
                Ok(next) => next,
                Err(error) => self.continue_expired(error, &Pages::All)?,
            };
            watch.gauge(self);
        }
        Ok(())
    }

    /// The fetch that continues `pages` at the current revision after
    /// their continue token expired (none when the 410 carries no token:
    /// nothing was left), or the failure.
    pub(super) fn continue_expired(
        &self,
        error: UpstreamError,
        pages: &Pages,
    ) -> Result<Option<Fetch>, Failed> {
        if error.recovery(Phase::Continue) != Recovery::Resume {
            return Err(Failed {
                phase: Phase::Continue,
                error,
            });
        }
        self.resumed_after_gone();
        tracing::info!(resource = %self.name, %error, "continue token expired: continuing at the current revision, the watch covers the difference");
        Ok(error
            .into_continue_token()
            .map(|token| self.continue_pages(pages, token)))
    }

    /// Requests the page of `pages` that `token` continues with.
    fn continue_pages(&self, pages: &Pages, token: String) -> Fetch {
        match pages {
            Pages::Namespace(upstream) => self.fetch_from(upstream, None, Some(token)),
            Pages::All | Pages::RestOf(_) => self.fetch(Some(token)),
        }
    }

    /// Counts a 410 that a list goes on from (its status's `gone`).
    pub(super) fn resumed_after_gone(&self) {
        self.status.send_modify(|s| s.gone += 1);
    }

    /// Awaits `work` while the watch is read into the buffer; a watch that
    /// ends or breaks is opened again where it was.
    pub(super) async fn buffering<T>(
        &self,
        watch: &mut Buffered,
        work: impl Future<Output = T>,
    ) -> Result<T, Failed> {
        tokio::pin!(work);
        loop {
            tokio::select! {
                biased;
                done = &mut work => return Ok(done),
                event = watch.events.next_event() => self.buffer_event(watch, event).await?,
            }
        }
    }

    /// Reads one watch event into the buffer; a watch that ended or broke
    /// is opened again where it was.
    async fn buffer_event(
        &self,
        watch: &mut Buffered,
        event: Result<Option<WatchEvent>, UpstreamError>,
    ) -> Result<(), Failed> {
        let delay = match watch.buffer.read(self, event) {
            Ok(true) => {
                watch.rewatch.reset();
                return Ok(());
            }
            // The watch ended (its timeout): open it again where it was.
            Ok(false) => Duration::ZERO,
            Err(error) if error.recovery(Phase::Watch) == Recovery::Resume => {
                self.failed(&error, Phase::Watch);
                watch.rewatch.next(None)
            }
            Err(error) => {
                return Err(Failed {
                    phase: Phase::Watch,
                    error,
                });
            }
        };
        tokio::time::sleep(delay).await;
        watch.events = self
            .upstream
            .watch(&self.watch_query(watch.buffer.rv))
            .await
            .map_err(Failed::at(Phase::Watch))?;
        Ok(())
    }

    /// Applies the listing, then the buffered events; the watch goes on.
    ///
    /// Objects read at the current state (after a 410) may be newer than
    /// the buffer: the watch is read on until it has reached the newest of
    /// them (each is a write the watch delivers), so that they apply among
    /// the events in order and the store's resourceVersion covers them.
    pub(super) async fn finish_buffered(
        &mut self,
        listing: Listing,
        mut watch: Buffered,
    ) -> Result<Listed, Failed> {
        let newest = listing.newest();
        while watch.buffer.rv < newest {
            let event = watch.events.next_event().await;
            self.buffer_event(&mut watch, event).await?;
        }
        metrics::gauge!("kubecache_buffered_events", "resource" => self.name.clone()).set(0.0);
        let rv = watch.buffer.rv;
        listing.finish(&mut self.writer, watch.buffer.events);
        Ok(Listed {
            rv,
            events: Some(watch.events),
        })
    }

    async fn list_streaming(&mut self) -> Result<Listed, Failed> {
        let phase = Phase::StreamingList {
            fallback: self.config.strategy == Strategy::Auto,
        };
        self.read_streaming_list().await.map_err(Failed::at(phase))
    }

    async fn read_streaming_list(&mut self) -> Result<Listed, UpstreamError> {
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
                    let object = self.decode(event.object, raw.raw_strings().cloned())?;
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
                    let bookmark = event.bookmark().map_err(undecodable_event)?;
                    if bookmark.initial_events_end {
                        listing.snapshot = Some(bookmark.resource_version);
                        let rv = listing.finish(&mut self.writer, Vec::new());
                        return Ok(Listed {
                            rv,
                            events: Some(events),
                        });
                    }
                }
                WatchEventType::Error => return Err(error_event(&event)?),
                // A change since the snapshot, before the bookmark (see
                // `Listing::change`).
                WatchEventType::Modified | WatchEventType::Deleted => {
                    if let Some(change) = self.event(&raw, &mut 0)? {
                        listing.change(&self.writer, change);
                        self.status.send_modify(|s| s.early_changes += 1);
                    }
                }
            }
        }
    }
}

/// Where the pages of a list come from.
pub(super) enum Pages {
    /// The whole collection.
    All,
    /// The whole collection from page 1's continue token, only as far as
    /// the objects of this namespace go: the sharded list's first shard
    /// (the later namespaces are shards of their own).
    RestOf(String),
    /// One namespace's collection.
    Namespace(Box<Upstream>),
}

/// A fetched page's body.
pub(super) async fn fetched(fetch: Fetch) -> Result<super::ListResponse, UpstreamError> {
    fetch
        .await
        .map_err(|e| UpstreamError::Stream(format!("page request: {e}")))?
}

/// The watch opened at page 1's snapshot, read into a buffer while the rest
/// of a list is read.
pub(super) struct Buffered {
    buffer: WatchBuffer,
    events: WatchEvents,
    rewatch: Backoff,
}

impl Buffered {
    /// Publishes the number of buffered events.
    pub(super) fn gauge(&self, reflector: &Reflector) {
        metrics::gauge!("kubecache_buffered_events", "resource" => reflector.name.clone())
            .set(self.buffer.events.len() as f64);
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
