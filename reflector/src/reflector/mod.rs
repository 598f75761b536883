//! The reflector (client-go's `Reflector`, kube-runtime's `watcher` and
//! `reflector`): list and watch one resource from the API server into a
//! [`StoreWriter`], keep it current, and recover from every failure.
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
//! - [`Strategy::Sharded`]: as parallel, but after page 1 the rest is read
//!   as namespaces at page 1's exact snapshot, `listShards` at once
//!   (`sharded.rs`); parallel for cluster-scoped resources, caches of one
//!   namespace, and when the namespaces cannot be listed.
//! - [`Strategy::Streaming`]: `sendInitialEvents=true`; ready at the
//!   `k8s.io/initial-events-end` bookmark. The changes sent before it
//!   (kube-apiserver before 1.32 sends the bookmark on its next one-second
//!   tick, after the changes made meanwhile) are applied with the initial
//!   objects, in order (`replace.rs`, `Listing::change`).
//! - [`Strategy::Auto`]: streaming, falling back to parallel for good when
//!   the server answers the 422 of servers without WatchList.
//!
//! Paginated lists (list-watch, parallel, each shard of sharded) are
//! pipelined: a page's envelope is read first, and the next page is
//! requested with its continue token before the page's items are decoded,
//! so the server sends page N+1 while the reflector decodes page N
//! (`strategies.rs`).
//!
//! # Lifecycle
//! The reflector is always in one of the states of `lifecycle::State`:
//! `Listing`, `Watching { rv }`, `BackingOff` or `Failing`; the transitions
//! are written next to it, and every failure goes through one decision
//! table, [`UpstreamError::recovery`]. In short: a watch that ends (its
//! timeout) or breaks is opened again from `rv`, nothing lost, nothing
//! listed; 410 and undecodable events lead back to `Listing`; 429, 5xx and
//! broken connections back off and keep the store serving; 401, 403 and 404
//! fail the resource (not ready, with the reason) until a list succeeds.
//!
//! # Readiness
//! The store becomes ready when its first list is applied and its watch
//! works, or at once when it was restored from a state file
//! ([`Reflector::restore`]: the watch then resumes with no list), and
//! stays ready through relists and transient failures (it
//! serves its last state). It is not ready while the reflector is
//! `Failing`, and for good once the reflector is gone ([`StoreWriter`]'s
//! drop).
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

mod config;
mod lifecycle;
mod replace;
mod sharded;
mod strategies;
mod watching;

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::watch;

pub use config::{ObjectFilter, ReflectorConfig, Strategy};
pub use strategies::ListReason;

use crate::store::{SavedState, StoreNotNew, StoreWriter};
use crate::upstream::{
    Backoff, ListResponse, Phase, Query, Recovery, RequestEncoding, Upstream, UpstreamError,
    WatchEvent, WatchEvents, error_event, undecodable_event,
};
use kubecache_wire::CachedObject;
use kubecache_wire::protobuf::RawStrings;

/// What the reflector reports about itself (for status documents and logs).
#[derive(Debug, Clone, Default)]
pub struct ReflectorStatus {
    /// The lifecycle state it is in: `listing`, `watching`, `backing_off`
    /// or `failing`.
    pub phase: &'static str,
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
    /// MODIFIED and DELETED events that streaming lists sent before their
    /// initial-events-end bookmark, applied with their objects
    /// (kube-apiserver before 1.32, under writes; an ADDED of an object
    /// created meanwhile cannot be told from an initial one and is not
    /// counted; see `replace::Listing::change`).
    pub early_changes: u64,
    /// The last failure.
    pub last_error: Option<String>,
    /// Set when the store was restored from a state file.
    pub restored: Option<Restored>,
}

/// A store restored from a state file (see [`Reflector::restore`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restored {
    /// The store's resourceVersion as saved: the upstream watch resumes
    /// from it.
    pub resource_version: u64,
    /// Objects restored.
    pub objects: usize,
    /// `false` until the resumed watch proved to work (an event, a
    /// bookmark, or a while open without an error) or a list replaced the
    /// restored state (after a 410): until then the restored state may be
    /// behind the API server by as much as the restart lasted.
    pub caught_up: bool,
}

/// Lists and watches one resource into a store until dropped.
pub struct Reflector {
    upstream: Upstream,
    config: ReflectorConfig,
    writer: StoreWriter,
    /// The strategy in use: `auto` resolves on the first list.
    strategy: Strategy,
    /// The delay before retrying, growing while failures follow each other
    /// and reset by progress (a list completed, a watch that advanced).
    backoff: Backoff,
    status: watch::Sender<ReflectorStatus>,
    name: String,
    /// Where to resume the watch instead of listing first: set by
    /// [`Reflector::restore`].
    resume_at: Option<u64>,
    /// The failure last logged at `error` since the last list succeeded:
    /// its repeats, every backoff (30 s at most), are logged at `debug`.
    failure_said: Option<String>,
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
            backoff: Backoff::default(),
            status,
            name,
            resume_at: None,
            failure_said: None,
        }
    }

    /// Fills the (new) store with a state saved before a restart, marks it
    /// ready, and makes [`run`](Reflector::run) resume the upstream watch
    /// from the saved resourceVersion instead of listing: no list at all
    /// while that resourceVersion is inside the API server's watch window;
    /// a 410 leads to a relist, applied as a diff against the restored
    /// store (as any relist: unchanged objects keep their identity,
    /// watchers see only the differences).
    ///
    /// Ready at once: the restored state is a true state of the resource,
    /// as of the save, with its history, which is what a read at
    /// `resourceVersion=0` or a watch from an older resourceVersion may be
    /// answered with; a read that needs freshness waits for the store to
    /// catch up, as always. [`ReflectorStatus::restored`] says it was
    /// restored and whether it has caught up.
    ///
    /// The watch resumes at the saved store's resourceVersion (at least the
    /// saved upstream one): the store is complete through it, as
    /// [`StateFile::save`](crate::StateFile::save) saves no store in the
    /// middle of a list.
    ///
    /// # Errors
    ///
    /// [`StoreNotNew`] when the store was written before.
    pub fn restore(&mut self, saved: SavedState) -> Result<(), StoreNotNew> {
        let resume_at = saved.resource_version.max(saved.upstream_resource_version);
        let restored = Restored {
            resource_version: saved.resource_version,
            objects: saved.len(),
            caught_up: false,
        };
        self.writer.restore(saved)?;
        self.writer.advance(resume_at);
        self.writer.set_ready();
        self.resume_at = Some(resume_at);
        self.status.send_modify(|s| s.restored = Some(restored));
        Ok(())
    }

    /// The restored state has caught up (see [`Restored::caught_up`]).
    fn caught_up(&self) {
        self.status.send_if_modified(|s| match &mut s.restored {
            Some(restored) if !restored.caught_up => {
                restored.caught_up = true;
                true
            }
            _ => false,
        });
    }

    /// Follows the reflector's status.
    pub fn status(&self) -> watch::Receiver<ReflectorStatus> {
        self.status.subscribe()
    }

    /// Records a failure of `phase`; what the decision table says to do.
    fn failed(&self, error: &UpstreamError, phase: Phase) -> Recovery {
        metrics::counter!(
            "kubecache_upstream_errors_total",
            "resource" => self.name.clone(),
            "phase" => phase.as_str(),
            "reason" => error.reason()
        )
        .increment(1);
        tracing::warn!(resource = %self.name, phase = phase.as_str(), %error, "upstream failure");
        let gone = matches!(error, UpstreamError::Gone { .. });
        self.status.send_modify(|s| {
            s.failures += 1;
            s.gone += u64::from(gone);
            s.last_error = Some(error.to_string());
        });
        error.recovery(phase)
    }

    fn accepts(&self, object: &CachedObject) -> bool {
        self.config
            .filter
            .as_ref()
            .is_none_or(|filter| filter(object))
    }

    /// `raw` as the store keeps it, with the bytes of its strings that are
    /// not UTF-8 (a protobuf object's).
    fn decode(
        &self,
        raw: &[u8],
        strings: Option<RawStrings>,
    ) -> Result<Arc<CachedObject>, UpstreamError> {
        let resource = &self.upstream.spec().resource;
        resource.decode(raw, strings, &self.config.transform)
    }
}
