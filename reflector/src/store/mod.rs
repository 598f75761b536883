//! The store of one resource: objects by key, their indexes, the current
//! resourceVersion, readiness and the event log, written by one
//! [`StoreWriter`] and read through any number of [`StoreReader`]s.
//!
//! # Layout
//!
//! - Objects: a persistent B-tree (`imbl::OrdMap`, 64-way) from key to
//!   `Arc<CachedObject>`, in etcd key order, so that a list page is a range
//!   scan and a namespace is a contiguous key range. The key is an
//!   `Arc<str>` allocated once per object lifetime and shared with every
//!   index set that holds it.
//! - Indexes ([`index`]): per index, a persistent B-tree from an index value
//!   to a sorted key set: a slice of up to 32 keys, a B-tree beyond. Index
//!   sets hold keys, not objects, so a change that keeps an object's labels,
//!   owners and fields costs the indexes nothing; a lookup resolves each key
//!   in the object map (O(log n) per result).
//! - Publication: the state sits behind one `Arc` under a lock. A reader's
//!   snapshot clones that `Arc` under the read lock (O(1)); the writer
//!   changes the state in place under the write lock (`Arc::make_mut`),
//!   copying a tree node only while a snapshot still shares it. With no
//!   snapshot alive (the initial sync) nothing is copied at all. An atomic
//!   swap of a fully published copy (arc-swap) was the alternative: readers
//!   would never wait, but every change would copy its paths, because the
//!   published copy always shares them with the writer's (2.3x slower
//!   updates in a first measurement: 7.1 µs against 3.1 µs per change of a
//!   100k-entry map). Readers here wait at most for one change to apply.
//!
//! ## Measurements
//!
//! 100k synthetic pods (`measure.rs`: 5 labels of which 2 shared by the 3
//! pods of a ReplicaSet, 1 owner, 1 field index over 1,000 nodes, 200
//! namespaces, 2.5 KB of JSON), release build, each measurement alone in its
//! process, on this project's 2-core machine shared with other work (times
//! vary by up to 1.5x between runs; the ranges are over 2-3 runs):
//!
//! | what | result |
//! |---|---|
//! | store: object map and shared keys (RSS growth) | 115 B/object |
//! | store: indexes (5 labels, 1 owner, 1 field) | 350 B/object |
//! | event log, per event held (100k `ADDED`) | 88 B/event |
//! | `CachedObject` fields beyond the JSON (not the store's) | 1,016 B/object |
//! | all of the above together | 1.62 x the JSON bytes |
//! | initial sync, adds in key order (as a list delivers) | 108k-152k objects/s (6.6-9.3 µs) |
//! | adds in random key order | 84k-97k objects/s |
//! | status-only updates, no snapshot alive | 245k-318k/s (3.1-4.1 µs) |
//! | status-only updates, a fresh snapshot before each | 144k-148k/s (6.9 µs) |
//! | updates moving all 7 index entries, a snapshot held | 23k-25k/s (41-44 µs) |
//! | taking a snapshot | 8-9 ns |
//! | full range scan | 9-14 ns/object |
//! | index query returning 100 of 100k | 20 µs |
//!
//! Where the index bytes go: for a value held by the 1-3 pods of a
//! ReplicaSet (app, pod-template-hash, owner) a B-tree entry, the value
//! string and a small key slice, shared by those pods; for a value held by
//! many (tier, version, team, node) one 16-byte key in a large set and the
//! B-tree slack around it. Key sets as B-trees throughout would cost 1.3 KB
//! per one-key set, hence the small-set slices (224 B per one-key value,
//! value string and a HAMT entry included, in a first measurement).
//!
//! Time goes mostly into key comparisons: each compares heap strings
//! through a pointer, so lookups in large trees are cache misses. Nothing is
//! interned yet: no measurement has shown a gain worth the complexity.
//!
//! # Consistency
//!
//! The writer applies a change in this order: objects and indexes (one
//! atomic publication), then the event log, then the current
//! resourceVersion. So when [`StoreReader::wait_for`] resolves at `rv`, a
//! snapshot taken afterwards is at `rv` or newer and the event log holds
//! every event up to `rv`. A snapshot may be newer than the event log for
//! an instant; [`StoreReader::subscribe_from`] from that snapshot's
//! resourceVersion is still exact (events at or before it are never
//! delivered).
//!
//! Reads are as fresh as the upstream watch: the store knows nothing the
//! writer has not applied yet, and a reader that needs a minimum
//! resourceVersion waits for it with [`StoreReader::wait_for`].
//!
//! # Relists
//!
//! The store is never emptied and refilled: the caller diffs a new list
//! against [`StoreWriter::snapshot`] and applies the differences as
//! changes, so current subscribers see `ADDED`, `MODIFIED` and `DELETED`
//! events and the store is never visibly half-listed. Applying the diff in
//! resourceVersion order, deletions (at the list's resourceVersion) last,
//! keeps event positions equal to the objects' resourceVersions. Then
//! [`StoreWriter::mark_listed`] moves the store to the list's
//! resourceVersion and starts exact history there: a diff is not the real
//! sequence of changes, so replays from before it are refused.
//!
//! The first list goes the same way: apply its items, `mark_listed(RV0)`,
//! then the watch events buffered since RV0, then `set_ready`. The store
//! keeps no tombstones: once a key is deleted, an older upsert of it is
//! applied as a new object, so list items must never be applied after
//! watch events newer than the list.
//!
//! # Warm restart
//!
//! [`StateFile`] saves a store's objects, its event log's exact history and
//! its resourceVersions to disk (from a snapshot: the store stays
//! writable), and loads them back, refusing every kind of damage or
//! mismatch; [`StoreWriter::restore`] fills a new store with them without
//! a list: history goes on from where it started before the restart, so
//! watchers resume across it. The store stays not ready until the caller
//! says otherwise.

mod config;
mod event_log;
mod index;
mod snapshot;
mod state_file;

#[cfg(test)]
mod measure;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use tokio::sync::watch;

pub use config::{EventLogConfig, IndexSpec, StoreConfig, StoreConfigError};
pub use event_log::{Event, EventLogStatus, RecvError, Subscription, TooOld, TryRecvError};
pub use snapshot::{Change, IndexLookup, Snapshot};
pub use state_file::{
    ApplyingList, LoadError, LossyTransform, SaveStats, SavedState, StateFile, StoreNotNew,
};

use event_log::EventLog;
use kubecache_wire::{CachedObject, ObjectKey};
use snapshot::StoreState;

/// A new, empty, not-ready store: its one writer and a first reader.
///
/// The configuration is taken as given; check it at start-up with
/// [`StoreConfig::validate`].
pub fn store(config: StoreConfig) -> (StoreWriter, StoreReader) {
    let shared = Arc::new(Shared {
        state: RwLock::new(Arc::new(StoreState::new(config.field_indexes.into()))),
        log: Arc::new(EventLog::new(config.event_log)),
        progress: watch::Sender::new(Progress {
            resource_version: 0,
            readiness: Readiness::NotReady {
                reason: Arc::from("not synced yet"),
            },
            closed: false,
        }),
    });
    (
        StoreWriter {
            shared: shared.clone(),
        },
        StoreReader { shared },
    )
}

/// Whether a store may serve reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Synced with the API server.
    Ready,
    /// Not synced (yet, or any more), and why.
    NotReady {
        /// Shown on `/readyz` and the status page.
        reason: Arc<str>,
    },
}

/// [`StoreReader::wait_for`] gave up: the store did not reach the wanted
/// resourceVersion in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("timed out waiting for resource version {wanted}: the cache is at {current}")]
pub struct WaitTimeout {
    /// The resourceVersion waited for.
    pub wanted: u64,
    /// The store's resourceVersion when the wait gave up.
    pub current: u64,
}

/// The store's writer is gone: it will never change again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the store is closed")]
pub struct StoreClosed;

/// What the writer and all readers share.
#[derive(Debug)]
struct Shared {
    /// The current objects and indexes. The writer holds the write lock for
    /// the duration of one change (and mutates in place, copying only the
    /// nodes that a live snapshot still shares); readers hold the read lock
    /// just long enough to clone the `Arc`.
    state: RwLock<Arc<StoreState>>,
    /// The ring of recent events; guarded inside.
    log: Arc<EventLog>,
    /// Current resourceVersion, readiness and closing, for waiters. Written
    /// only by the writer, after `state` and `log`.
    progress: watch::Sender<Progress>,
}

#[derive(Clone, Debug)]
struct Progress {
    resource_version: u64,
    readiness: Readiness,
    closed: bool,
}

/// The one writer of a store, fed by the upstream list/watch. Not `Clone`:
/// every change goes through it, in order.
///
/// Dropping it closes the store: subscriptions drain and end with
/// [`RecvError::Closed`], [`StoreReader::ready`] stops waiting, and the
/// store is not ready any more (nothing keeps it current).
#[derive(Debug)]
pub struct StoreWriter {
    shared: Arc<Shared>,
}

impl StoreWriter {
    /// Applies a change, unless it is not newer than what the store holds
    /// for its key (its `resource_version` is lower or equal; deletes
    /// included) or deletes a key the store does not hold. An applied change
    /// updates objects, indexes and the current resourceVersion, is appended
    /// to the event log, wakes subscribers and waiters, and is returned.
    ///
    /// Cost: O(log n + indexed values that changed), plus a copy of the
    /// touched tree paths when a snapshot is alive.
    pub fn apply(&mut self, change: Change) -> Option<Arc<Event>> {
        // The event joins the log before the state is unlocked, so that a
        // snapshot and a subscription taken together agree (see
        // `StoreReader::snapshot_and_subscribe`).
        let mut state = self.shared.state.write();
        let event = Arc::new(StoreState::apply(&mut state, change)?);
        self.shared.log.append(event.clone());
        drop(state);
        self.publish_resource_version(event.resource_version);
        Some(event)
    }

    /// A bookmark: the store has seen everything up to `rv`. Moves the
    /// current resourceVersion forward (never back) without an event and
    /// wakes [`StoreReader::wait_for`].
    pub fn advance(&mut self, rv: u64) {
        if rv <= self.shared.state.read().resource_version {
            return;
        }
        Arc::make_mut(&mut *self.shared.state.write()).resource_version = rv;
        self.shared.log.advance(rv);
        self.publish_resource_version(rv);
    }

    /// A list (or a relist diff) at `rv` has been applied: advances to `rv`
    /// and starts exact history there, so that replays from an older
    /// resourceVersion get [`TooOld`] (the events before `rv` came from a
    /// list, not from the real sequence of changes). Subscriptions already
    /// reading keep their events.
    ///
    /// Ends what [`begin_list`](StoreWriter::begin_list) began, once
    /// history starts at `rv`.
    pub fn mark_listed(&mut self, rv: u64) {
        self.advance(rv);
        self.shared.log.start_history_at(rv);
        self.set_applying_list(false);
    }

    /// A list (or a relist diff) is about to be applied: until
    /// [`mark_listed`](StoreWriter::mark_listed), the store is a mix of two
    /// states (a diff applied in part, deletions last), no resourceVersion's
    /// whole state, and [`StateFile::save`] refuses to save it.
    pub fn begin_list(&mut self) {
        self.set_applying_list(true);
    }

    fn set_applying_list(&mut self, applying: bool) {
        let mut state = self.shared.state.write();
        if state.applying_list != applying {
            Arc::make_mut(&mut *state).applying_list = applying;
        }
    }

    fn publish_resource_version(&self, rv: u64) {
        self.shared.progress.send_if_modified(|p| {
            let newer = rv > p.resource_version;
            p.resource_version = p.resource_version.max(rv);
            newer
        });
    }

    /// Marks the store synced: readers may serve from it.
    pub fn set_ready(&mut self) {
        self.set_readiness(Readiness::Ready);
    }

    /// Marks the store not synced (e.g. while relisting after losing the
    /// watch), with a reason for `/readyz`.
    pub fn set_not_ready(&mut self, reason: &str) {
        self.set_readiness(Readiness::NotReady {
            reason: Arc::from(reason),
        });
    }

    fn set_readiness(&mut self, readiness: Readiness) {
        self.shared.progress.send_if_modified(|p| {
            let changed = p.readiness != readiness;
            p.readiness = readiness;
            changed
        });
    }

    /// The object the store holds under `key`.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<CachedObject>> {
        self.shared.state.read().objects.get(key.as_str()).cloned()
    }

    /// Number of objects held.
    pub fn len(&self) -> usize {
        self.shared.state.read().objects.len()
    }

    /// `true` when the store holds no object.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The keys held, in key order, as of now (later changes do not affect
    /// the iteration).
    pub fn keys(&self) -> impl Iterator<Item = ObjectKey> + use<> {
        let objects = self.shared.state.read().objects.clone();
        objects.into_iter().map(|(_, object)| object.key.clone())
    }

    /// A snapshot of the store as of now: what a relist diffs against (it
    /// holds the last state of every object, which a deletion needs).
    pub fn snapshot(&self) -> Snapshot {
        self.reader().snapshot()
    }

    /// A reader of this store.
    pub fn reader(&self) -> StoreReader {
        StoreReader {
            shared: self.shared.clone(),
        }
    }
}

impl Drop for StoreWriter {
    fn drop(&mut self) {
        self.shared.log.close();
        self.shared.progress.send_modify(|p| {
            p.closed = true;
            p.readiness = Readiness::NotReady {
                reason: Arc::from("the reflector stopped"),
            };
        });
    }
}

/// A reader of a store: snapshots, waits and event-log subscriptions.
/// Cheap to clone (one `Arc`); any number may read concurrently and none
/// waits on the writer for longer than one change takes to apply.
#[derive(Clone, Debug)]
pub struct StoreReader {
    shared: Arc<Shared>,
}

impl StoreReader {
    /// A consistent view of objects, indexes and their resourceVersion as
    /// of now, in O(1). See [`Snapshot`].
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            state: self.shared.state.read().clone(),
        }
    }

    /// The newest resourceVersion applied (by a change or a bookmark).
    pub fn current_resource_version(&self) -> u64 {
        self.shared.progress.borrow().resource_version
    }

    /// Waits until the store has reached `rv` (by a change or a bookmark)
    /// and returns the store's resourceVersion then (`>= rv`).
    ///
    /// # Errors
    ///
    /// [`WaitTimeout`] when `timeout` passes first (also when the writer is
    /// gone, since the store then never moves).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: waiting changes nothing.
    pub async fn wait_for(&self, rv: u64, timeout: Duration) -> Result<u64, WaitTimeout> {
        let mut progress = self.shared.progress.subscribe();
        let reached =
            tokio::time::timeout(timeout, progress.wait_for(|p| p.resource_version >= rv)).await;
        match reached {
            Ok(Ok(p)) => Ok(p.resource_version),
            // The sender lives in `Shared`, so `Err` cannot happen while we
            // hold `self`; treat it as a timeout all the same.
            Ok(Err(_)) | Err(_) => Err(WaitTimeout {
                wanted: rv,
                current: self.current_resource_version(),
            }),
        }
    }

    /// Whether the store is synced.
    pub fn is_ready(&self) -> bool {
        self.shared.progress.borrow().readiness == Readiness::Ready
    }

    /// Synced or not, and why not.
    pub fn readiness(&self) -> Readiness {
        self.shared.progress.borrow().readiness.clone()
    }

    /// Waits until the store is synced.
    ///
    /// # Errors
    ///
    /// [`StoreClosed`] when the writer is dropped before that.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: waiting changes nothing.
    pub async fn ready(&self) -> Result<(), StoreClosed> {
        let mut progress = self.shared.progress.subscribe();
        let p = progress
            .wait_for(|p| p.readiness == Readiness::Ready || p.closed)
            .await
            .map_err(|_| StoreClosed)?;
        if p.readiness == Readiness::Ready {
            Ok(())
        } else {
            Err(StoreClosed)
        }
    }

    /// Whether the writer is gone.
    pub fn is_closed(&self) -> bool {
        self.shared.progress.borrow().closed
    }

    /// The events positioned after `rv` (see [`Event::resource_version`]),
    /// oldest first; empty when `rv` is the current resourceVersion or
    /// newer.
    ///
    /// # Errors
    ///
    /// [`TooOld`] when the ring no longer covers `rv`: some event after
    /// `rv` has left it (or `rv` is before the start of exact history).
    pub fn events_since(&self, rv: u64) -> Result<Vec<Arc<Event>>, TooOld> {
        self.shared.log.events_since(rv)
    }

    /// Follows the event log from `rv`: first the events after `rv` still in
    /// the ring, then live events, with no gap and no duplicate between the
    /// two. From a resourceVersion newer than the log's newest, events up to
    /// it are skipped.
    ///
    /// # Errors
    ///
    /// [`TooOld`] as for [`StoreReader::events_since`].
    pub fn subscribe_from(&self, rv: u64) -> Result<Subscription, TooOld> {
        self.shared.log.subscribe_from(rv)
    }

    /// A snapshot and a subscription to the events after it, taken
    /// together: every change is either in the snapshot or delivered by the
    /// subscription, exactly once. What a watch that starts with the
    /// current state (synthetic `ADDED` events) needs; unlike
    /// [`StoreReader::subscribe_from`] with the snapshot's resourceVersion,
    /// it is exact even for changes that do not move the resourceVersion
    /// (relist diffs).
    pub fn snapshot_and_subscribe(&self) -> (Snapshot, Subscription) {
        let state = self.shared.state.read();
        let subscription = self.shared.log.subscribe_at_end();
        let snapshot = Snapshot {
            state: state.clone(),
        };
        (snapshot, subscription)
    }

    /// The range the event log covers, for status pages.
    pub fn event_log_status(&self) -> EventLogStatus {
        self.shared.log.status()
    }
}
