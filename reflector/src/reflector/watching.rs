//! `Watching`: following a watch into the store, and where its end leads.

use std::time::Duration;

use tokio::time::Instant;

use super::lifecycle::State;
use super::replace::Pending;
use super::strategies::ListReason;
use super::{
    Phase, Query, Recovery, Reflector, UpstreamError, WatchEvent, WatchEvents, error_event,
    undecodable_event,
};
use kubecache_wire::WatchEventType;

/// How long a watch opened after a classic list must stay open without an
/// error before the store counts as synced. kube-apiserver answers a watch
/// from a revision it no longer holds with 200 and, at once, an ERROR 410
/// event; an event or a bookmark confirms the watch sooner.
const WATCH_CONFIRMATION: Duration = Duration::from_secs(1);

/// A watch that ends sooner than this after it opened, having delivered
/// nothing, is reopened after a backoff: a server that ends watches at once
/// must not make us spin.
const SHORTEST_WATCH: Duration = Duration::from_secs(1);

impl Reflector {
    pub(super) fn watch_query(&self, rv: u64) -> Query<'static> {
        Query {
            watch: true,
            resource_version: Some(rv),
            timeout: Some(self.config.watch_timeout),
            ..Query::default()
        }
    }

    /// The `Watching` step: follows `events` (or a new watch from `rv`)
    /// until it ends, and says where that leads.
    pub(super) async fn watch(
        &mut self,
        mut rv: u64,
        events: Option<WatchEvents>,
        mut confirm: bool,
    ) -> State {
        let (opened, from) = (Instant::now(), rv);
        let followed = match events {
            Some(open) => Ok(open),
            None => self.upstream.watch(&self.watch_query(rv)).await,
        };
        let ended = match followed {
            Ok(mut open) => self.follow(&mut open, &mut rv, &mut confirm).await,
            Err(error) => Err(error),
        };
        let again = State::Watching {
            rv,
            events: None,
            confirm,
        };
        // The watch made progress before it ended: not a failing streak.
        let progressed = rv > from;
        let error = match ended {
            Ok(()) => {
                self.restarted("timeout");
                return if opened.elapsed() < SHORTEST_WATCH && !progressed {
                    self.backing_off(None, again)
                } else {
                    again
                };
            }
            Err(error) => error,
        };
        if progressed {
            self.backoff.reset();
        }
        match self.failed(&error, Phase::Watch) {
            Recovery::Relist => {
                metrics::counter!("kubecache_relists_total", "resource" => self.name.clone(), "reason" => error.reason()).increment(1);
                let reason = match error {
                    UpstreamError::Gone { message, .. } => format!("410 Gone: {message}"),
                    other => other.to_string(),
                };
                State::Listing {
                    reason: ListReason::Relist(reason),
                }
            }
            // A watch that delivered, then broke (an API server closing its
            // connections, a proxy's cut), is reopened at once: consistent
            // reads wait on this store meanwhile. Reopening it again
            // without an event in between backs off.
            Recovery::Resume if progressed => {
                self.restarted(error.reason());
                again
            }
            Recovery::Resume => {
                self.restarted(error.reason());
                self.backing_off(None, again)
            }
            Recovery::Backoff(floor) => {
                self.restarted(error.reason());
                self.backing_off(floor, again)
            }
            // `FallBack` is for streaming lists: a watch never gets it.
            Recovery::Fail | Recovery::FallBack => self.failing(&error),
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
            self.caught_up();
        }
    }

    /// Decodes one watch event, advancing `rv`; `None` for bookmarks.
    pub(super) fn event(
        &self,
        raw: &WatchEvent,
        rv: &mut u64,
    ) -> Result<Option<Pending>, UpstreamError> {
        let event = raw.line()?;
        let pending = match event.event_type {
            WatchEventType::Error => return Err(error_event(&event)?),
            WatchEventType::Bookmark => {
                *rv = event.resource_version().map_err(undecodable_event)?;
                return Ok(None);
            }
            WatchEventType::Added | WatchEventType::Modified => {
                let object = self.decode(event.object, raw.raw_strings().cloned())?;
                if self.accepts(&object) {
                    Pending::Upsert(object)
                } else {
                    // Gone from the cache's point of view (a no-op if it was never in it).
                    Pending::Delete(object)
                }
            }
            WatchEventType::Deleted => {
                Pending::Delete(self.decode(event.object, raw.raw_strings().cloned())?)
            }
        };
        *rv = pending.object().resource_version;
        Ok(Some(pending))
    }
}
