//! The simulator's etcd: one global revision counter, multi-version state per
//! key, an event history, and compaction.
//!
//! Every write takes the next revision. Each key keeps the versions written
//! since the compaction point plus the newest one at or before it, so a list
//! can be read at any revision that is not compacted (`limit`/`continue`
//! pages all see one snapshot) and a watch can replay every event after any
//! revision that is not compacted. Compaction at revision `C` keeps `C`
//! readable and forgets what came before, as etcd does; reads from before
//! `C` get 410 Gone from the HTTP layer.
//!
//! Watches replay from a second, independent horizon: kube-apiserver serves
//! watches from its watch cache, which holds a bounded number of recent
//! events (up to ~100k, at least ~75 s), while lists and continue tokens go
//! to etcd, compacted every 5 minutes. A list that outlives the watch cache
//! but not etcd's compaction is exactly the large-cluster failure of the
//! classic list-then-watch, so the two windows are kept apart.
//!
//! One `RwLock` guards everything: readers copy out `Arc`s of the objects they
//! need and release it before they write to a socket. Observers
//! ([`Store::observe`]) hear of each change under it, before the write
//! returns: what the API server derives from objects (its authorizer's
//! view of RBAC) follows them without a gap.
//!
//! Ages are read from tokio's clock, so a test with paused time
//! (`#[tokio::test(start_paused = true)]`) decides when history ages out.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use kubecache_wire::protobuf::RawStrings;
use kubecache_wire::{ChangeType, Status};
use parking_lot::RwLock;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

use super::object::StoredObject;
use super::packed::Dictionary;
use super::resources::{RESOURCES, Resource, ResourceId, ids};

/// One change in the history.
#[derive(Debug, Clone)]
pub struct Event {
    /// What happened.
    pub kind: ChangeType,
    /// The object after the change (for deletes: the last state, with the
    /// deletion's revision).
    pub object: Arc<StoredObject>,
    /// The object before the change, for watch filtering (an object that
    /// leaves a selector is seen as deleted by that watch).
    pub previous: Option<Arc<StoredObject>>,
}

impl Event {
    /// The revision of the change.
    pub fn revision(&self) -> u64 {
        self.object.revision
    }
}

/// What a [`Store::modify`] keeps of the current object's strings that are
/// not UTF-8 ([`StoredObject::raw_strings`]): what Go keeps of a string's
/// bytes, by how the written object reaches its Go struct.
#[derive(Debug, Clone)]
pub enum Strings {
    /// None: the object passed through JSON, which Go decodes again (a
    /// JSON or merge patch: `runtime.Encode`, patch, `runtime.Decode`),
    /// so a replaced string is now U+FFFD itself.
    Dropped,
    /// The current object's (a strategic merge patch or an apply, which Go
    /// makes on the object's strings as they are,
    /// `DefaultUnstructuredConverter`), where the result still holds their
    /// replacement.
    Current,
    /// These, then the current object's at other places (a status written
    /// over the object, which keeps the rest of it).
    Over(Arc<RawStrings>),
}

/// How much history is kept before it is compacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryWindow {
    /// Keep at most this many revisions.
    pub max_revisions: Option<u64>,
    /// Keep revisions for at most this long.
    pub max_age: Option<Duration>,
}

impl HistoryWindow {
    /// etcd as kube-apiserver compacts it: every 5 minutes.
    pub const ETCD: HistoryWindow = HistoryWindow {
        max_revisions: None,
        max_age: Some(Duration::from_secs(300)),
    };

    /// kube-apiserver's watch cache: up to 100k recent events.
    pub const WATCH_CACHE: HistoryWindow = HistoryWindow {
        max_revisions: Some(100_000),
        max_age: None,
    };

    /// The newest revision this window no longer covers: everything up to
    /// it may be forgotten.
    fn horizon(&self, revision: u64, clock: &VecDeque<(u64, Instant)>, now: Instant) -> u64 {
        let mut horizon = 0;
        if let Some(max) = self.max_revisions {
            horizon = revision.saturating_sub(max);
        }
        if let Some(cut) = self.max_age.and_then(|age| now.checked_sub(age)) {
            // The newest revision written before the cut-off stays readable.
            let old = clock.partition_point(|(_, at)| *at <= cut);
            if old > 0 {
                horizon = horizon.max(clock[old - 1].0);
            }
        }
        horizon
    }
}

/// A list read: which objects, at which revision, from where, how many.
#[derive(Debug, Clone, Copy)]
pub struct ListRead<'a> {
    /// The snapshot revision.
    pub revision: u64,
    /// Only keys under `namespace/` (namespaced lists).
    pub namespace: Option<&'a str>,
    /// First key to return (inclusive), relative to the namespace prefix.
    pub start: Option<&'a str>,
    /// At most this many matching objects (0 = all).
    pub limit: usize,
    /// How many live objects precede `start` at the snapshot (carried by
    /// the continue token), for `remainingItemCount`; `None` counts them.
    pub before: Option<usize>,
}

/// One page of a list read.
#[derive(Debug)]
pub struct ListPage {
    /// The matching objects, in key order.
    pub items: Vec<Arc<StoredObject>>,
    /// The key of the last object returned, when more keys follow.
    pub more_after: Option<String>,
    /// Live objects visited by this page, matching or not.
    pub visited: usize,
    /// Live objects at the snapshot after this page (without filtering).
    pub remaining: usize,
}

/// Why a read could not be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadError {
    /// The revision is compacted; carries the compaction point.
    Compacted(u64),
    /// The revision has not happened yet; carries the current revision.
    Future(u64),
}

/// The versions of one key, oldest first: the object written at each
/// revision, `None` where it was deleted.
type Versions = Vec<(u64, Option<Arc<StoredObject>>)>;

#[derive(Debug, Default)]
struct ResourceState {
    /// Versions per key, oldest first; `None` marks a deletion.
    keys: BTreeMap<String, Versions>,
    /// Events after the compaction point, by revision.
    events: VecDeque<Event>,
    /// Live object counts after each change since the compaction point
    /// (and the one at it), for `remainingItemCount` at old snapshots.
    live: VecDeque<(u64, usize)>,
}

impl ResourceState {
    fn live_at(&self, revision: u64) -> usize {
        let i = self.live.partition_point(|(r, _)| *r <= revision);
        if i == 0 { 0 } else { self.live[i - 1].1 }
    }

    fn live_now(&self) -> usize {
        self.live.back().map_or(0, |(_, n)| *n)
    }
}

#[derive(Debug)]
struct Inner {
    revision: u64,
    compacted: u64,
    /// Watches can replay the events after this revision.
    watch_horizon: u64,
    resources: Vec<ResourceState>,
    /// Every write since the compaction point, for trimming its key.
    writes: VecDeque<(u64, ResourceId, String)>,
    /// When each revision since the older horizon was written.
    clock: VecDeque<(u64, Instant)>,
    /// Counter behind deterministic uids.
    uids: u64,
}

/// Told of every change, with its resource, under the store's write lock
/// (see [`Store::observe`]).
pub type Observer = Box<dyn Fn(ResourceId, &Event) + Send + Sync>;

/// The simulator's storage; cheap to share behind an `Arc`.
pub struct Store {
    inner: RwLock<Inner>,
    /// Read under `inner`'s write lock, by every commit.
    observers: RwLock<Vec<Observer>>,
    revision_tx: watch::Sender<u64>,
    window: RwLock<HistoryWindow>,
    watch_window: RwLock<HistoryWindow>,
    seed: u64,
    /// What a lean store packs its objects' JSON against.
    packing: Option<Arc<Dictionary>>,
}

impl Store {
    /// An empty store at revision 1 (etcd starts there), compacting by
    /// `window` and keeping `watch_window` of events for watches.
    pub fn new(window: HistoryWindow, watch_window: HistoryWindow, seed: u64) -> Self {
        let (revision_tx, _) = watch::channel(1);
        Store {
            inner: RwLock::new(Inner {
                revision: 1,
                compacted: 1,
                watch_horizon: 1,
                resources: RESOURCES.iter().map(|_| ResourceState::default()).collect(),
                writes: VecDeque::new(),
                clock: VecDeque::new(),
                uids: 0,
            }),
            observers: RwLock::default(),
            revision_tx,
            window: RwLock::new(window),
            watch_window: RwLock::new(watch_window),
            seed,
            packing: None,
        }
    }

    /// This store made lean: it keeps the JSON of the objects written to
    /// it packed against `dictionary` (see [`StoredObject::packed`]).
    pub(crate) fn lean(self, dictionary: Arc<Dictionary>) -> Self {
        Store {
            packing: Some(dictionary),
            ..self
        }
    }

    /// `object` as this store keeps it.
    fn kept(&self, object: Arc<StoredObject>) -> Arc<StoredObject> {
        match &self.packing {
            Some(dictionary) => object.packed(dictionary),
            None => object,
        }
    }

    /// Tells `observer` of every change from now on, as it is committed:
    /// it runs under the store's write lock, so it must be quick and must
    /// not use the store. A write returns once its observers have run.
    pub fn observe(&self, observer: impl Fn(ResourceId, &Event) + Send + Sync + 'static) {
        self.observers.write().push(Box::new(observer));
    }

    /// The newest revision.
    pub fn revision(&self) -> u64 {
        self.inner.read().revision
    }

    /// The revision of `resource`'s newest change (0 if none): where its
    /// watch cache is without progress notifications.
    pub fn last_change(&self, resource: ResourceId) -> u64 {
        let inner = self.inner.read();
        inner.resources[resource]
            .events
            .back()
            .map_or(0, Event::revision)
    }

    /// The compaction point: reads before it are gone.
    pub fn compacted(&self) -> u64 {
        self.inner.read().compacted
    }

    /// Notified with the newest revision after every write.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.revision_tx.subscribe()
    }

    /// The oldest revision a watch can start from.
    pub fn watch_horizon(&self) -> u64 {
        self.inner.read().watch_horizon
    }

    /// Replaces the history windows (they take effect at the next
    /// [`Store::compact`]).
    pub fn set_windows(&self, window: HistoryWindow, watch_window: HistoryWindow) {
        *self.window.write() = window;
        *self.watch_window.write() = watch_window;
    }

    /// Number of live objects of a resource.
    pub fn len(&self, resource: ResourceId) -> usize {
        self.inner.read().resources[resource].live_now()
    }

    /// Whether the resource has no live objects.
    pub fn is_empty(&self, resource: ResourceId) -> bool {
        self.len(resource) == 0
    }

    /// The newest version of one object.
    pub fn get(&self, resource: ResourceId, key: &str) -> Option<Arc<StoredObject>> {
        let inner = self.inner.read();
        inner.resources[resource]
            .keys
            .get(key)
            .and_then(|versions| versions.last())
            .and_then(|(_, object)| object.clone())
    }

    /// Reads a page of a list at a snapshot. `matches` filters objects
    /// (selectors); `limit` counts matching objects.
    pub fn list(
        &self,
        resource: ResourceId,
        read: ListRead<'_>,
        matches: impl Fn(&StoredObject) -> bool,
    ) -> Result<ListPage, ReadError> {
        let inner = self.inner.read();
        if read.revision < inner.compacted {
            return Err(ReadError::Compacted(inner.compacted));
        }
        if read.revision > inner.revision {
            return Err(ReadError::Future(inner.revision));
        }
        let state = &inner.resources[resource];
        let prefix = read
            .namespace
            .map(|ns| format!("{ns}/"))
            .unwrap_or_default();
        let from = format!("{prefix}{}", read.start.unwrap_or(""));
        let mut items = Vec::new();
        let mut visited = 0usize;
        let mut last_visited: Option<&str> = None;
        let mut more_after = None;
        let range = state
            .keys
            .range::<str, _>((Bound::Included(from.as_str()), Bound::Unbounded))
            .take_while(|(key, _)| key.starts_with(&prefix));
        for (key, versions) in range {
            let Some(object) = version_at(versions, read.revision) else {
                continue;
            };
            if read.limit > 0 && items.len() == read.limit {
                more_after = last_visited.map(|k| k[prefix.len()..].to_string());
                break;
            }
            visited += 1;
            last_visited = Some(key);
            if matches(object) {
                items.push(object.clone());
            }
        }
        let remaining = match (&more_after, read.namespace, read.before) {
            (None, _, _) => 0,
            (Some(_), None, Some(before)) => state
                .live_at(read.revision)
                .saturating_sub(before + visited),
            // Namespaced lists are small, and an inconsistent continue
            // carries no count: count what follows.
            (Some(after), _, _) => state
                .keys
                .range::<str, _>((
                    Bound::Excluded(format!("{prefix}{after}").as_str()),
                    Bound::Unbounded,
                ))
                .take_while(|(key, _)| key.starts_with(&prefix))
                .filter(|(_, v)| version_at(v, read.revision).is_some())
                .count(),
        };
        Ok(ListPage {
            items,
            more_after,
            visited,
            remaining,
        })
    }

    /// Events of a resource after `revision`, at most `max` of them, and the
    /// newest revision they were read up to (to resume from).
    pub fn events_after(
        &self,
        resource: ResourceId,
        revision: u64,
        max: usize,
    ) -> Result<(Vec<Event>, u64), ReadError> {
        let inner = self.inner.read();
        if revision < inner.watch_horizon {
            return Err(ReadError::Compacted(inner.watch_horizon));
        }
        let events = &inner.resources[resource].events;
        let start = events.partition_point(|e| e.revision() <= revision);
        let batch: Vec<Event> = events.range(start..).take(max).cloned().collect();
        let upto = if batch.len() == max {
            batch.last().map_or(inner.revision, Event::revision)
        } else {
            inner.revision.max(revision)
        };
        Ok((batch, upto))
    }

    /// Creates an object. Sets uid, creationTimestamp, resourceVersion and
    /// (for resources that keep one) generation 1.
    pub fn create(&self, resource: ResourceId, object: Value) -> Result<Arc<StoredObject>, Status> {
        self.insert(resource, object, None, None)
    }

    /// [`Store::create`], with the bytes of the object's strings that are
    /// not UTF-8 (a protobuf body's).
    pub fn create_with_strings(
        &self,
        resource: ResourceId,
        object: Value,
        strings: Option<Arc<RawStrings>>,
    ) -> Result<Arc<StoredObject>, Status> {
        self.insert(resource, object, None, strings)
    }

    /// Creates an object with this uid, as [`Store::create`] otherwise:
    /// for objects whose uid was handed out before they were stored here
    /// (a policy's service accounts, whose tokens carry their uid).
    pub fn create_with_uid(
        &self,
        resource: ResourceId,
        object: Value,
        uid: &str,
    ) -> Result<Arc<StoredObject>, Status> {
        self.insert(resource, object, Some(uid), None)
    }

    fn insert(
        &self,
        resource: ResourceId,
        mut object: Value,
        uid: Option<&str>,
        strings: Option<Arc<RawStrings>>,
    ) -> Result<Arc<StoredObject>, Status> {
        let res = &RESOURCES[resource];
        let (namespace, name) = identity(res, &object)?;
        let mut inner = self.inner.write();
        if res.namespaced {
            let ns_live = inner.resources[ids::NAMESPACES]
                .keys
                .get(&namespace)
                .is_some_and(|v| v.last().is_some_and(|(_, o)| o.is_some()));
            if !ns_live {
                return Err(Status::not_found("", "namespaces", &namespace));
            }
        }
        let key = key_of(&namespace, &name);
        if live(&inner.resources[resource], &key).is_some() {
            return Err(Status::already_exists(res.group, res.plural, &name));
        }
        let uid = match uid {
            Some(uid) => uid.to_string(),
            None => {
                inner.uids += 1;
                self::uid(self.seed, inner.uids)
            }
        };
        let revision = inner.revision + 1;
        let meta = metadata_mut(&mut object);
        meta.insert("name".into(), name.clone().into());
        if res.namespaced {
            meta.insert("namespace".into(), namespace.into());
        }
        meta.insert("uid".into(), uid.into());
        meta.insert("resourceVersion".into(), revision.to_string().into());
        if res.has_generation {
            meta.insert("generation".into(), 1.into());
        } else {
            meta.shift_remove("generation");
        }
        meta.insert("creationTimestamp".into(), now_rfc3339().into());
        let stored = self.kept(StoredObject::with_strings(res, object, revision, strings));
        self.commit_added(&mut inner, resource, key, stored.clone());
        Ok(stored)
    }

    /// Creates `objects` as [`Store::create`] made them, in order, in a
    /// store of the same seed that was where this one is now: each takes
    /// the next revision and uid, which are its own (a lean store keeps
    /// them packed).
    ///
    /// # Panics
    ///
    /// If an object's revision or uid is not the next one.
    pub fn recreate(&self, objects: &[(ResourceId, Arc<StoredObject>)]) {
        let mut inner = self.inner.write();
        for (resource, object) in objects {
            inner.uids += 1;
            assert_eq!(object.revision, inner.revision + 1, "{}", object.key);
            assert_eq!(object.uid, uid(self.seed, inner.uids), "{}", object.key);
            let object = self.kept(object.clone());
            self.commit_added(&mut inner, *resource, object.key.clone(), object);
        }
    }

    /// Commits the creation of `object` at `key`.
    fn commit_added(
        &self,
        inner: &mut Inner,
        resource: ResourceId,
        key: String,
        object: Arc<StoredObject>,
    ) {
        let event = Event {
            kind: ChangeType::Added,
            object: object.clone(),
            previous: None,
        };
        self.commit(inner, resource, key, Some(object), event);
    }

    /// Replaces an object. `metadata.resourceVersion`, when set, must be the
    /// current one (409 otherwise). uid and creationTimestamp are kept;
    /// generation is bumped when `spec` changed. A write that changes
    /// nothing takes no revision, as in Kubernetes.
    pub fn update(&self, resource: ResourceId, object: Value) -> Result<Arc<StoredObject>, Status> {
        self.update_with_strings(resource, object, None)
    }

    /// [`Store::update`], with the bytes of the object's strings that are
    /// not UTF-8 (a protobuf body's): a write that changes only those
    /// bytes changes the object.
    pub fn update_with_strings(
        &self,
        resource: ResourceId,
        mut object: Value,
        strings: Option<Arc<RawStrings>>,
    ) -> Result<Arc<StoredObject>, Status> {
        let res = &RESOURCES[resource];
        let (namespace, name) = identity(res, &object)?;
        let key = key_of(&namespace, &name);
        let mut inner = self.inner.write();
        let Some(current) = live(&inner.resources[resource], &key) else {
            return Err(Status::not_found(res.group, res.plural, &name));
        };
        let current_value = current.to_value();
        let precondition = object
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .filter(|rv| !rv.is_empty());
        if precondition.is_some_and(|rv| rv != current.revision.to_string()) {
            return Err(Status::conflict(res.group, res.plural, &name));
        }
        let revision = inner.revision + 1;
        let spec_changed = object.get("spec") != current_value.get("spec");
        let cur_meta = current_value["metadata"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let meta = metadata_mut(&mut object);
        meta.insert("name".into(), name.clone().into());
        if res.namespaced {
            meta.insert("namespace".into(), namespace.into());
        }
        for kept in ["uid", "creationTimestamp"] {
            if let Some(v) = cur_meta.get(kept) {
                meta.insert(kept.into(), v.clone());
            }
        }
        if let Some(generation) = current.generation {
            meta.insert(
                "generation".into(),
                (generation + i64::from(spec_changed)).into(),
            );
        }
        meta.insert(
            "resourceVersion".into(),
            current.revision.to_string().into(),
        );
        if object_eq_ignoring_type_meta(&object, &current_value)
            && strings.as_deref() == current.raw_strings().map(|s| &**s)
        {
            return Ok(current);
        }
        metadata_mut(&mut object).insert("resourceVersion".into(), revision.to_string().into());
        let stored = self.kept(StoredObject::with_strings(res, object, revision, strings));
        let event = Event {
            kind: ChangeType::Modified,
            object: stored.clone(),
            previous: Some(current),
        };
        self.commit(&mut inner, resource, key, Some(stored.clone()), event);
        Ok(stored)
    }

    /// Applies a JSON merge patch (RFC 7386) to the current object (see
    /// [`Store::modify`]).
    pub fn merge_patch(
        &self,
        resource: ResourceId,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Arc<StoredObject>, Status> {
        self.modify(resource, namespace, name, Strings::Dropped, |mut object| {
            super::patch::merge(&mut object, patch);
            Ok(object)
        })
    }

    /// Replaces an object by what `change` makes of its current state, as
    /// kube-apiserver's `GuaranteedUpdate` does: when another write comes
    /// in between, `change` runs again on the newer state. A
    /// `metadata.resourceVersion` that `change` sets to another revision
    /// is the client's precondition (409 when stale); one it removes
    /// means none. The result must keep the object's name and namespace;
    /// it keeps the current object's strings that are not UTF-8 as
    /// `strings` says.
    pub fn modify(
        &self,
        resource: ResourceId,
        namespace: &str,
        name: &str,
        strings: Strings,
        mut change: impl FnMut(Value) -> Result<Value, Status>,
    ) -> Result<Arc<StoredObject>, Status> {
        let res = &RESOURCES[resource];
        loop {
            let current = self
                .get(resource, &key_of(namespace, name))
                .ok_or_else(|| Status::not_found(res.group, res.plural, name))?;
            let current_rv = current.revision.to_string();
            let mut object = change(current.to_value())?;
            if !object.is_object() {
                return Err(Status::bad_request(
                    "the patched object is not a JSON object",
                ));
            }
            let meta = metadata_mut(&mut object);
            let named = |key: &str| {
                meta.get(key)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            if named("name") != name {
                return Err(Status::bad_request(format!(
                    "the name of the object ({}) does not match the name on the URL ({name})",
                    named("name")
                )));
            }
            if res.namespaced && named("namespace") != namespace {
                return Err(Status::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            let precondition = named("resourceVersion");
            let ours = precondition.is_empty() || precondition == current_rv;
            if ours {
                meta.insert("resourceVersion".into(), current_rv.into());
            }
            let current_strings = current.raw_strings();
            let kept = match &strings {
                Strings::Dropped => None,
                Strings::Current => current_strings.cloned(),
                Strings::Over(written) => Some(match current_strings {
                    Some(current) => Arc::new(written.or(current)),
                    None => written.clone(),
                }),
            };
            match self.update_with_strings(resource, object, kept) {
                Err(status) if ours && status.reason == "Conflict" => continue,
                result => return result,
            }
        }
    }

    /// Deletes an object; returns its last state at the deletion's revision.
    pub fn delete(
        &self,
        resource: ResourceId,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<StoredObject>, Status> {
        let res = &RESOURCES[resource];
        let key = key_of(namespace, name);
        let mut inner = self.inner.write();
        let Some(current) = live(&inner.resources[resource], &key) else {
            return Err(Status::not_found(res.group, res.plural, name));
        };
        let revision = inner.revision + 1;
        let mut last = current.to_value();
        metadata_mut(&mut last).insert("resourceVersion".into(), revision.to_string().into());
        let strings = current.raw_strings().cloned();
        let tombstone = self.kept(StoredObject::with_strings(res, last, revision, strings));
        let event = Event {
            kind: ChangeType::Deleted,
            object: tombstone.clone(),
            previous: Some(current),
        };
        self.commit(&mut inner, resource, key, None, event);
        Ok(tombstone)
    }

    fn commit(
        &self,
        inner: &mut Inner,
        resource: ResourceId,
        key: String,
        object: Option<Arc<StoredObject>>,
        event: Event,
    ) {
        inner.revision += 1;
        let revision = inner.revision;
        debug_assert_eq!(event.revision(), revision);
        let state = &mut inner.resources[resource];
        let live_after = match event.kind {
            ChangeType::Added => state.live_now() + 1,
            ChangeType::Modified => state.live_now(),
            ChangeType::Deleted => state.live_now() - 1,
        };
        state.live.push_back((revision, live_after));
        for observer in self.observers.read().iter() {
            observer(resource, &event);
        }
        state.events.push_back(event);
        state
            .keys
            .entry(key.clone())
            .or_default()
            .push((revision, object));
        inner.writes.push_back((revision, resource, key));
        inner.clock.push_back((revision, Instant::now()));
        self.revision_tx.send_replace(revision);
    }

    /// Compacts what the history window no longer covers, and drops the
    /// events the watch window no longer covers.
    pub fn compact(&self) {
        let (window, watch_window) = (*self.window.read(), *self.watch_window.read());
        let now = Instant::now();
        let mut inner = self.inner.write();
        let compact = window.horizon(inner.revision, &inner.clock, now);
        let watch = watch_window.horizon(inner.revision, &inner.clock, now);
        compact_to(&mut inner, compact);
        forget_events(&mut inner, watch);
    }

    /// Compacts everything up to `revision` (clamped to the newest) and
    /// drops the events up to it, as after an API-server restart.
    pub fn compact_at(&self, revision: u64) {
        let mut inner = self.inner.write();
        let target = revision.min(inner.revision);
        compact_to(&mut inner, target);
        forget_events(&mut inner, target);
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("inner", &self.inner)
            .field("observers", &self.observers.read().len())
            .field("window", &self.window)
            .field("watch_window", &self.watch_window)
            .field("seed", &self.seed)
            .field("lean", &self.packing.is_some())
            .finish_non_exhaustive()
    }
}

fn compact_to(inner: &mut Inner, target: u64) {
    if target <= inner.compacted {
        return;
    }
    inner.compacted = target;
    while inner.writes.front().is_some_and(|(rev, ..)| *rev <= target) {
        let (_, resource, key) = inner.writes.pop_front().expect("checked");
        let state = &mut inner.resources[resource];
        if let Some(versions) = state.keys.get_mut(&key) {
            // Keep the newest version at or before the target, and all after.
            let keep_from = versions
                .partition_point(|(r, _)| *r <= target)
                .saturating_sub(1);
            versions.drain(..keep_from);
            if versions.len() == 1 && versions[0].1.is_none() {
                state.keys.remove(&key);
            }
        }
    }
    for state in &mut inner.resources {
        while state.live.len() > 1 && state.live[1].0 <= target {
            state.live.pop_front();
        }
    }
    trim_clock(inner);
}

fn forget_events(inner: &mut Inner, target: u64) {
    if target <= inner.watch_horizon {
        return;
    }
    inner.watch_horizon = target;
    for state in &mut inner.resources {
        while state.events.front().is_some_and(|e| e.revision() <= target) {
            state.events.pop_front();
        }
    }
    trim_clock(inner);
}

/// The clock is needed back to the older of the two horizons.
fn trim_clock(inner: &mut Inner) {
    let oldest = inner.compacted.min(inner.watch_horizon);
    // Keep the entry at the horizon itself: it dates the horizon.
    while inner.clock.len() > 1 && inner.clock[1].0 <= oldest {
        inner.clock.pop_front();
    }
}

fn version_at(
    versions: &[(u64, Option<Arc<StoredObject>>)],
    revision: u64,
) -> Option<&Arc<StoredObject>> {
    let i = versions.partition_point(|(r, _)| *r <= revision);
    if i == 0 {
        None
    } else {
        versions[i - 1].1.as_ref()
    }
}

fn live(state: &ResourceState, key: &str) -> Option<Arc<StoredObject>> {
    state
        .keys
        .get(key)
        .and_then(|v| v.last())
        .and_then(|(_, o)| o.clone())
}

/// `namespace/name` or `name`.
pub fn key_of(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}/{name}")
    }
}

/// Namespace and name of an object to write; 422 when they are missing.
fn identity(res: &Resource, object: &Value) -> Result<(String, String), Status> {
    let meta = object.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let namespace = meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    if name.is_empty() {
        return Err(Status::invalid(
            res.group,
            res.kind,
            "FieldValueRequired",
            "metadata.name",
            "Required value: name or generateName is required",
        ));
    }
    if res.namespaced && namespace.is_empty() {
        return Err(Status::invalid(
            res.group,
            res.kind,
            "FieldValueRequired",
            "metadata.namespace",
            "Required value",
        ));
    }
    Ok((
        if res.namespaced {
            namespace.to_string()
        } else {
            String::new()
        },
        name.to_string(),
    ))
}

fn metadata_mut(object: &mut Value) -> &mut serde_json::Map<String, Value> {
    let map = object.as_object_mut().expect("objects are JSON objects");
    let meta = map.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    meta.as_object_mut().expect("just made an object")
}

fn object_eq_ignoring_type_meta(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| {
        let mut m = v.as_object().cloned().unwrap_or_default();
        m.shift_remove("kind");
        m.shift_remove("apiVersion");
        m
    };
    let (a, b) = (strip(a), strip(b));
    a.len() == b.len() && a.iter().all(|(k, v)| b.get(k) == Some(v))
}

/// A deterministic uid in UUID form from the seed and a counter (SplitMix64).
fn uid(seed: u64, n: u64) -> String {
    let mix = |mut z: u64| {
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let a = mix(seed ^ n.wrapping_mul(2));
    let b = mix(seed ^ n.wrapping_mul(2).wrapping_add(1));
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        (b >> 48) & 0x3fff | 0x8000,
        b & 0xffff_ffff_ffff
    )
}

/// Now, as Kubernetes writes timestamps (RFC 3339, seconds, `Z`).
pub fn now_rfc3339() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}
