//! The fan-out of one store's events to its watchers.
//!
//! One dispatcher task per cached resource reads the store's event log
//! once (a [`Subscription`]) and routes each event to the watchers it may
//! concern: the watchers of the object's namespace, of its values of the
//! configured field indexes, of its labels (equality selectors), the
//! sharded watchers without an equality whose hash ranges contain the hash
//! of its uid or namespace (see [`ranges`]), and the unrouted ones, looked
//! up for both the object's new and previous state so that a watcher sees
//! an object leave its filter. Each candidate's full
//! filter and change predicates are then evaluated, and the event, encoded
//! once per outcome ([`Frame`]), is queued to the watcher.
//!
//! The queue of each watcher is bounded. The dispatcher never waits: a
//! watcher whose queue is full is cut (it ends with a 410 `Expired` ERROR
//! and its client resumes or relists), so a slow client never slows the
//! others or the reflector. Nothing is coalesced: every event reaches every
//! matching watcher, in the log's order.
//!
//! A watcher leaves the moment its watch ends: the [`Membership`] it holds
//! tells the dispatcher when dropped, on the channel joins come by, which
//! the dispatcher reads before events. No watcher lingers until an event
//! finds its queue closed, so an event costs nothing for watchers that are
//! gone.
//!
//! A watcher joins after replaying the log on its own subscription up to
//! where it found no more events, and hands that subscription over. Log
//! sequence numbers make the seam exact: the dispatcher delivers the events
//! between the watcher's point and its own (read through the watcher's
//! subscription), or skips for that watcher the ones it has already had.

pub(crate) mod frame;
mod ranges;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use kubecache_reflector::{
    Event, IndexLookup, IndexSpec, RecvError, StoreReader, Subscription, TryRecvError,
};
use kubecache_wire::{CachedObject, ShardField, ShardSelector};
use tokio::sync::mpsc;

use super::{Filter, Predicates};
use frame::{Frame, decide};
use ranges::RangeIndex;

/// How often the dispatcher publishes the position bookmarks may carry
/// while no event arrives.
const TICK: Duration = Duration::from_secs(1);

/// A watcher handed to the dispatcher.
pub(crate) struct Join {
    pub filter: Filter,
    pub predicates: Predicates,
    /// Where the watcher's own replay stopped.
    pub subscription: Subscription,
    pub queue: mpsc::Sender<Arc<Frame>>,
    pub signals: Arc<Signals>,
}

/// What the dispatcher tells a watcher besides its events.
#[derive(Debug, Default)]
pub(crate) struct Signals {
    /// The watcher fell behind and was dropped.
    cut: AtomicBool,
    /// The dispatcher has taken the watcher over: every event after its
    /// replay is queued, so bookmarks may be sent.
    joined: AtomicBool,
}

impl Signals {
    /// Whether the watcher was cut for falling behind.
    pub fn is_cut(&self) -> bool {
        self.cut.load(Ordering::Acquire)
    }

    /// Whether the dispatcher has taken the watcher over.
    pub fn is_joined(&self) -> bool {
        self.joined.load(Ordering::Acquire)
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::Release);
    }
}

/// What the dispatcher is told besides events.
enum Message {
    Join(u64, Join),
    Leave(u64),
}

/// The handle of one resource's dispatcher.
#[derive(Debug)]
pub(crate) struct Hub {
    messages: mpsc::UnboundedSender<Message>,
    routed: Arc<AtomicU64>,
    /// Watchers the dispatcher holds.
    joined: Arc<AtomicUsize>,
    /// The id of the next watcher to join.
    next: AtomicU64,
}

/// A watcher's place at its dispatcher: dropping it takes the watcher out.
#[derive(Debug)]
pub(crate) struct Membership {
    id: u64,
    messages: mpsc::UnboundedSender<Message>,
}

impl Drop for Membership {
    fn drop(&mut self) {
        let _ = self.messages.send(Message::Leave(self.id));
    }
}

impl Hub {
    /// Starts the dispatcher of `reader`'s events; it runs until the hub is
    /// dropped or the store is closed.
    pub fn start(reader: &StoreReader, indexes: Arc<[IndexSpec]>) -> Hub {
        let (messages, rx) = mpsc::unbounded_channel();
        let routed = Arc::new(AtomicU64::new(reader.current_resource_version()));
        let joined = Arc::new(AtomicUsize::new(0));
        let (_, subscription) = reader.snapshot_and_subscribe();
        let dispatcher = Dispatcher {
            reader: reader.clone(),
            subscription,
            messages: rx,
            routed: routed.clone(),
            joined: joined.clone(),
            routes: Routes::new(indexes),
            watchers: Vec::new(),
            free: Vec::new(),
            slots: HashMap::new(),
        };
        tokio::spawn(dispatcher.run());
        Hub {
            messages,
            routed,
            joined,
            next: AtomicU64::new(0),
        }
    }

    /// Hands a watcher to the dispatcher, which holds it until the returned
    /// membership is dropped (or it is cut). If the dispatcher is gone (the
    /// store closed), the watcher's queue closes at once.
    pub fn join(&self, join: Join) -> Membership {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let _ = self.messages.send(Message::Join(id, join));
        Membership {
            id,
            messages: self.messages.clone(),
        }
    }

    /// How many watchers the dispatcher holds.
    pub fn joined(&self) -> usize {
        self.joined.load(Ordering::Relaxed)
    }

    /// A resourceVersion through which every event has been queued to every
    /// watcher it concerns: what a bookmark may carry once a watcher's
    /// queue is empty.
    pub fn routed(&self) -> u64 {
        self.routed.load(Ordering::Acquire)
    }
}

/// A joined watcher.
struct Watcher {
    filter: Filter,
    predicates: Predicates,
    queue: mpsc::Sender<Arc<Frame>>,
    signals: Arc<Signals>,
    /// Events before this log sequence number were delivered by the
    /// watcher's own replay.
    from: u64,
    /// The sequence number of the last event offered, so that a watcher
    /// found twice (by new and previous state) is offered it once.
    offered: u64,
    route: RouteKey,
    /// Its membership's id.
    id: u64,
}

impl Watcher {
    /// Queues `frame`; `false` when the watcher must go (cut or gone).
    fn offer(&self, frame: &Arc<Frame>) -> bool {
        match self.queue.try_send(frame.clone()) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.signals.cut();
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }
}

/// Where a watcher is filed: the narrowest equality its filter has, else
/// its shard selector's hash ranges.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum RouteKey {
    All,
    Namespace(Box<str>),
    Label(Box<str>, Box<str>),
    Field(usize, Box<str>),
    Shards(ShardSelector),
}

impl RouteKey {
    /// A configured field index first (one node's pods), then a label,
    /// then the namespace, then the shard ranges.
    fn of(filter: &Filter, indexes: &[IndexSpec]) -> RouteKey {
        let lookups = filter.lookups();
        let field = lookups.iter().find_map(|l| match *l {
            IndexLookup::Field { name, value } => indexes
                .iter()
                .position(|i| i.name == name)
                .map(|at| RouteKey::Field(at, value.into())),
            _ => None,
        });
        let label = || {
            lookups.iter().find_map(|l| match *l {
                IndexLookup::Label { key, value } => {
                    Some(RouteKey::Label(key.into(), value.into()))
                }
                _ => None,
            })
        };
        let namespace = || {
            lookups.iter().find_map(|l| match *l {
                IndexLookup::Namespace(ns) => Some(RouteKey::Namespace(ns.into())),
                _ => None,
            })
        };
        let shards = || filter.shards.clone().map(RouteKey::Shards);
        field
            .or_else(label)
            .or_else(namespace)
            .or_else(shards)
            .unwrap_or(RouteKey::All)
    }
}

/// The watchers by route.
struct Routes {
    indexes: Arc<[IndexSpec]>,
    by_key: HashMap<RouteKey, Vec<usize>>,
    /// The watchers routed by shard ranges, of the uid and of the namespace.
    by_uid: RangeIndex,
    by_namespace: RangeIndex,
}

impl Routes {
    fn new(indexes: Arc<[IndexSpec]>) -> Self {
        Routes {
            indexes,
            by_key: HashMap::new(),
            by_uid: RangeIndex::default(),
            by_namespace: RangeIndex::default(),
        }
    }

    fn ranges(&mut self, field: ShardField) -> &mut RangeIndex {
        match field {
            ShardField::Uid => &mut self.by_uid,
            ShardField::Namespace => &mut self.by_namespace,
        }
    }

    fn add(&mut self, key: RouteKey, id: usize) {
        if let RouteKey::Shards(shards) = &key {
            let index = self.ranges(shards.field());
            for range in shards.ranges() {
                index.add(*range, id);
            }
            return;
        }
        self.by_key.entry(key).or_default().push(id);
    }

    fn remove(&mut self, key: &RouteKey, id: usize) {
        if let RouteKey::Shards(shards) = key {
            let index = self.ranges(shards.field());
            for range in shards.ranges() {
                index.remove(*range, id);
            }
            return;
        }
        if let Some(ids) = self.by_key.get_mut(key) {
            ids.retain(|&i| i != id);
            if ids.is_empty() {
                self.by_key.remove(key);
            }
        }
    }

    /// Appends the watchers that may be concerned by `object` to `out`.
    fn candidates(&self, object: &CachedObject, out: &mut Vec<usize>) {
        let mut add = |key: RouteKey| {
            if let Some(ids) = self.by_key.get(&key) {
                out.extend_from_slice(ids);
            }
        };
        add(RouteKey::Namespace(object.key.namespace().into()));
        for (at, value) in object.fields.iter().enumerate() {
            if let Some(value) = value {
                add(RouteKey::Field(at, value.clone()));
            }
        }
        for (key, value) in object.labels.iter() {
            add(RouteKey::Label(key.clone(), value.clone()));
        }
        if !self.by_uid.is_empty() {
            let hash = ShardField::Uid.hash(&object.uid, "");
            out.extend_from_slice(self.by_uid.find(hash));
        }
        if !self.by_namespace.is_empty() {
            let hash = ShardField::Namespace.hash("", object.key.namespace());
            out.extend_from_slice(self.by_namespace.find(hash));
        }
    }
}

struct Dispatcher {
    reader: StoreReader,
    subscription: Subscription,
    messages: mpsc::UnboundedReceiver<Message>,
    routed: Arc<AtomicU64>,
    joined: Arc<AtomicUsize>,
    routes: Routes,
    /// Watchers by slot; `None` marks a free slot (listed in `free`).
    watchers: Vec<Option<Watcher>>,
    free: Vec<usize>,
    /// The slot of each membership id.
    slots: HashMap<u64, usize>,
}

impl Dispatcher {
    async fn run(mut self) {
        let mut tick = tokio::time::interval(TICK);
        let mut candidates = Vec::new();
        loop {
            tokio::select! {
                biased;
                message = self.messages.recv() => match message {
                    Some(Message::Join(id, join)) => self.join(id, join),
                    Some(Message::Leave(id)) => {
                        if let Some(slot) = self.slots.get(&id) {
                            self.remove(*slot);
                        }
                    }
                    None => return,
                },
                event = self.subscription.recv() => match event {
                    Ok(event) => {
                        let sequence = self.subscription.sequence() - 1;
                        self.dispatch(&event, sequence, &mut candidates);
                    }
                    // Every watcher missed events: all must resume or relist.
                    Err(RecvError::Lagged { .. }) => self.cut_all(),
                    Err(RecvError::Closed) => return,
                },
                _ = tick.tick() => {}
            }
            self.publish();
        }
    }

    /// Publishes the position bookmarks may carry, when every event up to
    /// the store's resourceVersion has been routed.
    fn publish(&self) {
        let rv = self.reader.current_resource_version();
        if self.subscription.pending() == 0 {
            self.routed.fetch_max(rv, Ordering::AcqRel);
        }
    }

    fn join(&mut self, id: u64, mut join: Join) {
        let here = self.subscription.sequence();
        let mut watcher = Watcher {
            id,
            route: RouteKey::of(&join.filter, &self.routes.indexes),
            filter: join.filter,
            predicates: join.predicates,
            queue: join.queue,
            signals: join.signals,
            from: join.subscription.sequence(),
            offered: u64::MAX,
        };
        // Events appended between the watcher's replay and now.
        while join.subscription.sequence() < here {
            match join.subscription.try_recv() {
                Ok(event) => {
                    if let Some((kind, object)) =
                        decide(&watcher.filter, &watcher.predicates, &event)
                    {
                        let frame =
                            Arc::new(Frame::new(kind, object.clone(), event.resource_version));
                        if !watcher.offer(&frame) {
                            return;
                        }
                    }
                }
                Err(TryRecvError::Lagged { .. }) => {
                    watcher.signals.cut();
                    return;
                }
                Err(TryRecvError::Empty | TryRecvError::Closed) => break,
            }
        }
        watcher.from = watcher.from.max(here);
        let slot = self.free.pop().unwrap_or_else(|| {
            self.watchers.push(None);
            self.watchers.len() - 1
        });
        self.routes.add(watcher.route.clone(), slot);
        self.slots.insert(id, slot);
        watcher.signals.joined.store(true, Ordering::Release);
        self.watchers[slot] = Some(watcher);
        self.joined.store(self.slots.len(), Ordering::Relaxed);
    }

    fn dispatch(&mut self, event: &Event, sequence: u64, candidates: &mut Vec<usize>) {
        candidates.clear();
        if let Some(all) = self.routes.by_key.get(&RouteKey::All) {
            candidates.extend_from_slice(all);
        }
        self.routes.candidates(&event.object, candidates);
        if let Some(previous) = &event.previous {
            self.routes.candidates(previous, candidates);
        }
        // One encoding per outcome, shared by every watcher with it.
        let mut frames: [Option<Arc<Frame>>; 3] = [None, None, None];
        let mut leave: Option<Arc<Frame>> = None;
        for &id in candidates.iter() {
            let Some(watcher) = self.watchers[id].as_mut() else {
                continue;
            };
            if watcher.offered == sequence || sequence < watcher.from {
                continue;
            }
            watcher.offered = sequence;
            let Some((kind, object)) = decide(&watcher.filter, &watcher.predicates, event) else {
                continue;
            };
            let slot = if Arc::ptr_eq(object, &event.object) {
                &mut frames[kind as usize]
            } else {
                &mut leave
            };
            let frame = slot.get_or_insert_with(|| {
                Arc::new(Frame::new(kind, object.clone(), event.resource_version))
            });
            if !watcher.offer(frame) {
                self.remove(id);
            }
        }
    }

    fn remove(&mut self, slot: usize) {
        if let Some(watcher) = self.watchers[slot].take() {
            self.routes.remove(&watcher.route, slot);
            self.slots.remove(&watcher.id);
            self.free.push(slot);
            self.joined.store(self.slots.len(), Ordering::Relaxed);
        }
    }

    fn cut_all(&mut self) {
        for id in 0..self.watchers.len() {
            if let Some(watcher) = &self.watchers[id] {
                watcher.signals.cut();
                self.remove(id);
            }
        }
    }
}
