//! The event log: a ring of a store's most recent events, ordered by
//! resourceVersion, that watches replay from and follow.
//!
//! The model is tokio's `broadcast` channel: one ring, written by the one
//! writer, and one cursor (a sequence number) per [`Subscription`]. An event
//! is stored once and shared by every subscriber; a subscriber costs the
//! others nothing, however slow it is.
//!
//! Every event has a *position*, [`Event::resource_version`]: the store's
//! resourceVersion just after the event was applied. Positions never
//! decrease along the ring. For events of an upstream watch stream the
//! position is the object's own resourceVersion; it can be higher only for
//! changes applied out of resourceVersion order (list pages, relist diffs).
//!
//! The ring *covers* a resourceVersion `rv` when every event positioned after
//! `rv` is still in it, i.e. when `rv` is at least the position of the last
//! event that left the ring (and not older than the start of exact history,
//! see [`StoreWriter::mark_listed`](super::StoreWriter::mark_listed)). A
//! replay from a covered `rv` is exact; from an older one it is refused
//! with [`TooOld`], which the server turns into 410 Gone.
//!
//! ## What a subscriber may assume
//!
//! - Every change the writer applied appears exactly once, in the order it
//!   was applied; skipped changes (not newer than the held version) never
//!   appear. Nothing is coalesced.
//! - Positions never decrease. Events of an upstream watch stream have
//!   strictly increasing positions equal to their objects' resourceVersions.
//! - For one object, `ADDED`, `MODIFIED`…, `DELETED` follow its history as
//!   the store saw it; each event's `previous` is the version the event
//!   before it (for that key) carried, so a filtered watch can tell when an
//!   object leaves its filter.
//! - A `DELETED` event carries the object's last state with the deletion's
//!   resourceVersion; `previous` is the version the store held.
//! - A relist shows up as ordinary events (the diff between the store and
//!   the new list); after it, replays from before the list are refused.
//!
//! ## Lagging
//!
//! The ring holds at most [`EventLogConfig::max_events`] events and none
//! older than [`EventLogConfig::max_age`] (age is enforced whenever the
//! writer appends or advances). The writer never waits for subscribers: when
//! an event leaves the ring, a subscriber that has not read it has *lagged*.
//! Its next [`Subscription::recv`] returns [`RecvError::Lagged`] with the
//! exact number of events it lost, and its cursor moves to the oldest event
//! still in the ring; reading on from there would see a stream with a hole,
//! so a watch must instead end with 410 Gone (the client relists) or
//! resubscribe with [`StoreReader::subscribe_from`](super::StoreReader::subscribe_from)
//! from the last resourceVersion it delivered, which fails with [`TooOld`]
//! when that is no longer covered. [`Subscription::pending`] lets a server
//! cut a watcher off earlier, at its own per-watcher bound.
//!
//! ## Closing
//!
//! When the [`StoreWriter`](super::StoreWriter) is dropped, the log is
//! closed. Subscribers still receive every event that is in the ring after
//! their cursor, then [`RecvError::Closed`]. Nothing is appended after
//! closing.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::RwLock;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::config::EventLogConfig;
use kubecache_wire::{CachedObject, ChangeType};

/// One change applied to a store, as watchers see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Added, modified or deleted.
    pub kind: ChangeType,
    /// The event's position in the log: the store's resourceVersion just
    /// after it was applied. Equal to `object.resource_version` for events
    /// that arrive in resourceVersion order (a watch stream); higher for a
    /// change applied after a newer one (list items, relist diffs).
    pub resource_version: u64,
    /// The object's new state; for `Deleted`, its last state with the
    /// deletion's resourceVersion.
    pub object: Arc<CachedObject>,
    /// The version the store held before (`None` for `Added`): what change
    /// predicates and filtered watches compare against.
    pub previous: Option<Arc<CachedObject>>,
}

/// The requested resourceVersion is older than the event log covers; the
/// caller must relist (the server answers 410 Gone).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("too old resource version: the event log starts after {oldest}")]
pub struct TooOld {
    /// The oldest resourceVersion a replay can start from now.
    pub oldest: u64,
}

/// Why [`Subscription::recv`] returned no event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecvError {
    /// `skipped` events left the ring before this subscription read them.
    /// The cursor now points at the oldest event still in the ring.
    #[error("watcher lagged: {skipped} events were dropped from the event log before it read them")]
    Lagged {
        /// How many events this subscription will never see.
        skipped: u64,
    },
    /// The store's writer is gone and every event has been read.
    #[error("the store is closed")]
    Closed,
}

/// Why [`Subscription::try_recv`] returned no event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TryRecvError {
    /// No event yet.
    #[error("no event yet")]
    Empty,
    /// As [`RecvError::Lagged`].
    #[error("watcher lagged: {skipped} events were dropped from the event log before it read them")]
    Lagged {
        /// How many events this subscription will never see.
        skipped: u64,
    },
    /// As [`RecvError::Closed`].
    #[error("the store is closed")]
    Closed,
}

/// What the event log covers right now, for status pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventLogStatus {
    /// The oldest resourceVersion a replay can start from.
    pub oldest: u64,
    /// The newest resourceVersion the log knows (last event or bookmark).
    pub newest: u64,
    /// Number of events in the ring.
    pub events: usize,
    /// About the bytes of the object versions its events keep alive beyond
    /// the store ([`Event::pinned`], summed).
    pub bytes: usize,
}

/// The ring and the signal that wakes its subscribers. Shared by the writer
/// (appends), readers (replays) and subscriptions (cursors).
pub(crate) struct EventLog {
    /// The ring. Write-locked by the writer to append, advance, evict and
    /// close; read-locked by readers and subscriptions. Never held across an
    /// `.await`; events leaving the ring are dropped after it is released.
    ring: RwLock<Ring>,
    /// Woken (all waiters) after every append and on close. A waiter
    /// registers (`Notified::enable`) *before* looking at `ring`, so an
    /// append between its look and its sleep still wakes it.
    appended: Notify,
    /// Bounds, fixed at creation.
    config: EventLogConfig,
}

struct Ring {
    /// The events, oldest first, positions non-decreasing.
    events: VecDeque<Entry>,
    /// Sequence number of `events[0]`; the next event appended gets
    /// `first_seq + events.len()`. Cursors are sequence numbers, so a cursor
    /// below `first_seq` has lagged by exactly the difference.
    first_seq: u64,
    /// The ring covers every `rv >= floor`: the position of the last event
    /// evicted, or the start of exact history, whichever is newer.
    floor: u64,
    /// The newest resourceVersion known: last event or bookmark.
    newest: u64,
    /// The [`Event::pinned`] bytes of the events, summed.
    bytes: usize,
    /// The writer is gone; nothing more will be appended.
    closed: bool,
}

struct Entry {
    event: Arc<Event>,
    /// When the event was appended, for the age bound.
    appended: Instant,
}

impl Event {
    /// About the bytes of the versions this event keeps alive that the
    /// store does not hold: the version it superseded, and a deleted
    /// object's last state. (An event's new version is the store's, or the
    /// version the object's next event superseded, charged to that one: so
    /// each version is counted once.)
    pub fn pinned(&self) -> usize {
        let superseded = self.previous.as_ref().map_or(0, |p| p.size());
        let deleted = match self.kind {
            ChangeType::Deleted => self.object.size(),
            _ => 0,
        };
        superseded + deleted
    }
}

/// A summary: the ring is far too large to print.
impl std::fmt::Debug for EventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLog")
            .field("status", &self.status())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl EventLog {
    pub(crate) fn new(config: EventLogConfig) -> Self {
        EventLog {
            ring: RwLock::new(Ring {
                events: VecDeque::new(),
                first_seq: 0,
                floor: 0,
                newest: 0,
                bytes: 0,
                closed: false,
            }),
            appended: Notify::new(),
            config,
        }
    }

    /// Appends an event (its position must not be below the last one's) and
    /// wakes the subscribers.
    pub(crate) fn append(&self, event: Arc<Event>) {
        let evicted = {
            let mut ring = self.ring.write();
            debug_assert!(ring.newest <= event.resource_version);
            ring.newest = ring.newest.max(event.resource_version);
            ring.bytes += event.pinned();
            ring.events.push_back(Entry {
                event,
                appended: Instant::now(),
            });
            self.evict(&mut ring)
        };
        self.appended.notify_waiters();
        drop(evicted);
    }

    /// Records a bookmark: the log knows everything up to `rv`.
    pub(crate) fn advance(&self, rv: u64) {
        let evicted = {
            let mut ring = self.ring.write();
            ring.newest = ring.newest.max(rv);
            self.evict(&mut ring)
        };
        drop(evicted);
    }

    /// Exact history starts at `rv`: replays from older resourceVersions
    /// are refused. Events already in the ring stay for the subscriptions
    /// that are reading them.
    pub(crate) fn start_history_at(&self, rv: u64) {
        let mut ring = self.ring.write();
        ring.newest = ring.newest.max(rv);
        ring.floor = ring.floor.max(rv);
    }

    /// The exact history: where it starts and the events positioned after
    /// that, oldest first (what a state file keeps; events at or before the
    /// start can never be replayed).
    pub(crate) fn history(&self) -> (u64, Vec<Arc<Event>>) {
        let ring = self.ring.read();
        let from = ring
            .events
            .partition_point(|e| e.event.resource_version <= ring.floor);
        let events = ring.events.range(from..).map(|e| e.event.clone()).collect();
        (ring.floor, events)
    }

    /// Fills an empty log with restored history: exact from `floor`, known
    /// up to `newest`, `events` positioned after `floor` in non-decreasing
    /// order. Their age counts from now (the bounds apply as to new events).
    pub(crate) fn restore(&self, floor: u64, newest: u64, events: Vec<Arc<Event>>) {
        let evicted = {
            let mut ring = self.ring.write();
            ring.floor = ring.floor.max(floor);
            ring.newest = ring.newest.max(newest);
            let appended = Instant::now();
            for event in events {
                ring.newest = ring.newest.max(event.resource_version);
                ring.bytes += event.pinned();
                ring.events.push_back(Entry { event, appended });
            }
            self.evict(&mut ring)
        };
        self.appended.notify_waiters();
        drop(evicted);
    }

    pub(crate) fn close(&self) {
        self.ring.write().closed = true;
        self.appended.notify_waiters();
    }

    /// Removes the events past the count or age bound; returns them so that
    /// the caller drops them (and maybe the last copies of old objects)
    /// after releasing the lock.
    fn evict(&self, ring: &mut Ring) -> Vec<Entry> {
        let mut evicted = Vec::new();
        let now = Instant::now();
        while let Some(oldest) = ring.events.front() {
            let too_many = ring.events.len() > self.config.max_events;
            let too_old = now.saturating_duration_since(oldest.appended) >= self.config.max_age;
            if !(too_many || too_old) {
                break;
            }
            let Some(entry) = ring.events.pop_front() else {
                break;
            };
            ring.first_seq += 1;
            ring.bytes -= entry.event.pinned();
            ring.floor = ring.floor.max(entry.event.resource_version);
            evicted.push(entry);
        }
        evicted
    }

    /// The events positioned after `rv`, oldest first.
    pub(crate) fn events_since(&self, rv: u64) -> Result<Vec<Arc<Event>>, TooOld> {
        let ring = self.ring.read();
        let from = ring.start_after(rv)?;
        Ok(ring.events.range(from..).map(|e| e.event.clone()).collect())
    }

    /// A subscription that replays the events after `rv` and then follows
    /// the live ones.
    pub(crate) fn subscribe_from(self: &Arc<Self>, rv: u64) -> Result<Subscription, TooOld> {
        let ring = self.ring.read();
        let from = ring.start_after(rv)?;
        Ok(Subscription {
            log: self.clone(),
            next: ring.first_seq + from as u64,
            after: rv,
        })
    }

    /// A subscription to the events appended from now on.
    pub(crate) fn subscribe_at_end(self: &Arc<Self>) -> Subscription {
        let ring = self.ring.read();
        Subscription {
            log: self.clone(),
            next: ring.first_seq + ring.events.len() as u64,
            after: 0,
        }
    }

    pub(crate) fn status(&self) -> EventLogStatus {
        let ring = self.ring.read();
        EventLogStatus {
            oldest: ring.floor,
            newest: ring.newest,
            events: ring.events.len(),
            bytes: ring.bytes,
        }
    }
}

impl Ring {
    /// Index of the first event positioned after `rv`, if the ring covers
    /// `rv`.
    fn start_after(&self, rv: u64) -> Result<usize, TooOld> {
        if rv < self.floor {
            return Err(TooOld { oldest: self.floor });
        }
        Ok(self
            .events
            .partition_point(|e| e.event.resource_version <= rv))
    }
}

/// A cursor in the event log: the events after the resourceVersion it was
/// made from, replayed from the ring and then live, each exactly once and in
/// order.
///
/// Replay and live events come from the same ring through one cursor (a
/// sequence number), so there is no seam between them where an event could
/// be missed or seen twice. A subscription never slows the writer or other
/// subscriptions; one that falls behind loses events and is told so (see the
/// module's *Lagging*).
#[derive(Debug)]
pub struct Subscription {
    log: Arc<EventLog>,
    /// Sequence number of the next event to read.
    next: u64,
    /// Events positioned at or before this were asked not to be delivered
    /// (subscribing from a resourceVersion newer than the log's newest
    /// event).
    after: u64,
}

impl Subscription {
    /// The next event, waiting for one if there is none yet.
    ///
    /// # Errors
    ///
    /// [`RecvError::Lagged`] when events left the ring before this
    /// subscription read them (the next call goes on from the oldest event
    /// in the ring); [`RecvError::Closed`] once the writer is gone and every
    /// remaining event was read.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the cursor moves only when an event (or a lag) is
    /// returned, so dropping the future loses nothing and a later call
    /// returns the same event.
    pub async fn recv(&mut self) -> Result<Arc<Event>, RecvError> {
        let log = &*self.log;
        loop {
            let appended = log.appended.notified();
            let mut appended = std::pin::pin!(appended);
            // Register before looking, so that an append in between wakes us.
            appended.as_mut().enable();
            match read_next(log, &mut self.next, self.after) {
                Ok(event) => return Ok(event),
                Err(TryRecvError::Lagged { skipped }) => return Err(RecvError::Lagged { skipped }),
                Err(TryRecvError::Closed) => return Err(RecvError::Closed),
                Err(TryRecvError::Empty) => appended.await,
            }
        }
    }

    /// The next event if there is one, without waiting.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] when there is no event yet, otherwise as
    /// [`Subscription::recv`].
    pub fn try_recv(&mut self) -> Result<Arc<Event>, TryRecvError> {
        read_next(&self.log, &mut self.next, self.after)
    }

    /// The sequence number of the next event this subscription reads: two
    /// subscriptions of one store with the same sequence number are at the
    /// same point of the log, whatever resourceVersion each started from.
    pub fn sequence(&self) -> u64 {
        self.next
    }

    /// How many events are in the ring after this subscription's cursor
    /// (lost ones included): a server can close a watcher whose backlog
    /// passes its own bound long before the ring evicts it.
    pub fn pending(&self) -> u64 {
        let ring = self.log.ring.read();
        (ring.first_seq + ring.events.len() as u64).saturating_sub(self.next)
    }
}

/// Reads the event at cursor `next` (skipping those at or before `after`)
/// and moves the cursor past it; on lag, moves it to the oldest event.
fn read_next(log: &EventLog, next: &mut u64, after: u64) -> Result<Arc<Event>, TryRecvError> {
    let ring = log.ring.read();
    if *next < ring.first_seq {
        let skipped = ring.first_seq - *next;
        *next = ring.first_seq;
        return Err(TryRecvError::Lagged { skipped });
    }
    loop {
        let Some(entry) = usize::try_from(*next - ring.first_seq)
            .ok()
            .and_then(|at| ring.events.get(at))
        else {
            return Err(if ring.closed {
                TryRecvError::Closed
            } else {
                TryRecvError::Empty
            });
        };
        *next += 1;
        if entry.event.resource_version > after {
            return Ok(entry.event.clone());
        }
    }
}
