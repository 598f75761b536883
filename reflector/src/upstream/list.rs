//! The strategies' lists: each reads the resource's current state into the
//! store and says where the store is complete up to.

use std::time::{Duration, Instant};

use super::listing::{Listing, Pending};
use super::{
    Backoff, ListReason, Phase, Query, Recovery, Reflector, Strategy, UpstreamError, WatchEvent,
    WatchEvents,
};
use kubecache_wire::WatchEventType;
use tokio::task::JoinHandle;

/// A page requested and not read yet.
type Fetch = JoinHandle<Result<super::ListResponse, UpstreamError>>;

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
    fn at(phase: Phase) -> impl FnOnce(UpstreamError) -> Failed {
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

    /// Requests one page on a task of its own, so that the request is under
    /// way while the page before it is decoded. A list that fails drops the
    /// handle: the one page in flight is then read and discarded, which
    /// costs less than tracking it to abort it.
    fn fetch(&self, continue_token: Option<String>) -> Fetch {
        let upstream = self.upstream.clone();
        let limit = Some(self.config.page_size);
        tokio::spawn(async move {
            let query = Query {
                limit,
                continue_token: continue_token.as_deref(),
                ..Query::default()
            };
            upstream.list(&query).await
        })
    }

    /// Reads a fetched page into the listing; the next page's fetch.
    ///
    /// Pages are pipelined: the envelope (metadata and each item's extent)
    /// is read first, and the next page is requested with its continue
    /// token before this page's items are decoded, in one pass and in list
    /// order.
    async fn page(
        &self,
        listing: &mut Listing,
        fetch: Fetch,
    ) -> Result<Option<Fetch>, UpstreamError> {
        let body = fetch
            .await
            .map_err(|e| UpstreamError::Stream(format!("page request: {e}")))??;
        let page = body.page()?;
        listing.snapshot.get_or_insert(page.resource_version);
        let next = page
            .continue_token
            .as_deref()
            .filter(|t| !t.is_empty())
            .map(|t| self.fetch(Some(t.to_owned())));
        if next.is_some() {
            // A task spawned from a worker waits in that worker's own slot,
            // where no other worker takes it: let it send its request now,
            // not after the decoding below.
            tokio::task::yield_now().await;
        }
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
        Ok(next)
    }

    async fn list_then_watch(&mut self) -> Result<Listed, Failed> {
        let mut listing = Listing::default();
        let mut next = Some(self.fetch(None));
        while let Some(fetch) = next {
            next = self
                .page(&mut listing, fetch)
                .await
                .map_err(Failed::at(Phase::List))?;
        }
        let rv = listing.finish(&mut self.writer, Vec::new());
        Ok(Listed { rv, events: None })
    }

    /// Page 1, then the watch from its resourceVersion, then the rest of
    /// the pages while the watch is read into the buffer.
    ///
    /// An expired continue token (the list outlived etcd's compaction) is
    /// answered with a token that continues at the current revision; the
    /// table resumes with it, because the watch opened at page 1's
    /// resourceVersion covers every change since: the buffer replays them
    /// over whatever newer state the later pages show, and the skip rule
    /// drops what they already had.
    async fn list_parallel(&mut self) -> Result<Listed, Failed> {
        let mut listing = Listing::default();
        let first = self.fetch(None);
        let mut next = self
            .page(&mut listing, first)
            .await
            .map_err(Failed::at(Phase::List))?;
        let snapshot = listing.snapshot.expect("a page sets the snapshot");
        if next.is_none() {
            let rv = listing.finish(&mut self.writer, Vec::new());
            return Ok(Listed { rv, events: None });
        }
        let mut buffer = WatchBuffer::new(snapshot, self.config.buffer_limit);
        let mut events = self
            .upstream
            .watch(&self.watch_query(snapshot))
            .await
            .map_err(Failed::at(Phase::Watch))?;
        // Reopening a broken watch backs off, but never for long: the page
        // request under way waits meanwhile.
        let mut rewatch = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
        while let Some(current) = next.take() {
            let page = self.page(&mut listing, current);
            tokio::pin!(page);
            let page_read = loop {
                tokio::select! {
                    biased;
                    read = &mut page => break read,
                    event = events.next_event() => {
                        let delay = match buffer.read(self, event) {
                            Ok(true) => {
                                rewatch.reset();
                                continue;
                            }
                            // The watch ended (its timeout): open it again where it was.
                            Ok(false) => Duration::ZERO,
                            Err(error) if error.recovery(Phase::Watch) == Recovery::Resume => {
                                self.failed(&error, Phase::Watch);
                                rewatch.next(None)
                            }
                            Err(error) => return Err(Failed { phase: Phase::Watch, error }),
                        };
                        tokio::time::sleep(delay).await;
                        events = self
                            .upstream
                            .watch(&self.watch_query(buffer.rv))
                            .await
                            .map_err(Failed::at(Phase::Watch))?;
                    }
                }
            };
            next = match page_read {
                Ok(next) => next,
                Err(error) => match error.recovery(Phase::Continue) {
                    Recovery::Resume => {
                        tracing::info!(resource = %self.name, %error, "continue token expired: continuing at the current revision, the watch covers the difference");
                        error.into_continue_token().map(|t| self.fetch(Some(t)))
                    }
                    _ => {
                        return Err(Failed {
                            phase: Phase::Continue,
                            error,
                        });
                    }
                },
            };
            metrics::gauge!("kubecache_buffered_events", "resource" => self.name.clone())
                .set(buffer.events.len() as f64);
        }
        metrics::gauge!("kubecache_buffered_events", "resource" => self.name.clone()).set(0.0);
        let rv = buffer.rv;
        listing.finish(&mut self.writer, buffer.events);
        Ok(Listed {
            rv,
            events: Some(events),
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
                    let bookmark = event.bookmark().map_err(super::follow::decode_error)?;
                    if bookmark.initial_events_end {
                        listing.snapshot = Some(bookmark.resource_version);
                        let rv = listing.finish(&mut self.writer, Vec::new());
                        return Ok(Listed {
                            rv,
                            events: Some(events),
                        });
                    }
                }
                WatchEventType::Error => return Err(super::follow::watch_error(&event)?),
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
