//! A list under way: what it found that differs from the store, and how it
//! is applied so that the store's event log stays one ordered history.

use std::collections::HashSet;
use std::sync::Arc;

use crate::store::{Change, StoreWriter};
use kubecache_wire::{CachedObject, ObjectKey};

/// A change read from a watch, not applied yet.
#[derive(Debug)]
pub enum Pending {
    /// ADDED or MODIFIED.
    Upsert(Arc<CachedObject>),
    /// DELETED, with the object's last state at the deletion's revision.
    Delete(Arc<CachedObject>),
}

impl Pending {
    /// The object concerned.
    pub fn object(&self) -> &Arc<CachedObject> {
        match self {
            Pending::Upsert(o) | Pending::Delete(o) => o,
        }
    }

    /// The store change.
    pub fn into_change(self) -> Change {
        match self {
            Pending::Upsert(object) => Change::Upsert(object),
            Pending::Delete(object) => Change::Delete { object },
        }
    }
}

/// The objects of one list, as far as they differ from the store.
///
/// Only changed objects are held (and on the first list, every object, as
/// the store is empty): a relist never holds a second copy of the store,
/// just the set of keys it has seen.
#[derive(Debug, Default)]
pub struct Listing {
    /// The list's resourceVersion (its snapshot), once known.
    pub snapshot: Option<u64>,
    /// The key of the last object read (accepted or not): where a sharded
    /// list goes on from after page 1.
    pub last: Option<ObjectKey>,
    changed: Vec<Arc<CachedObject>>,
    seen: HashSet<ObjectKey>,
    listed: usize,
}

impl Listing {
    /// Takes one listed object.
    pub fn add(&mut self, writer: &StoreWriter, object: Arc<CachedObject>) {
        self.listed += 1;
        if !writer.is_empty() {
            let unchanged = writer
                .get(&object.key)
                .is_some_and(|held| held.resource_version == object.resource_version);
            self.seen.insert(object.key.clone());
            if unchanged {
                return;
            }
        }
        self.changed.push(object);
    }

    /// Objects listed so far.
    pub fn len(&self) -> usize {
        self.listed
    }

    /// Applies the list and then the buffered watch events; returns the
    /// list's resourceVersion.
    ///
    /// The difference between the store and the list is applied as changes
    /// in resourceVersion order (into an empty store: every object), objects
    /// gone from the list deleted at the snapshot's revision. Then the store
    /// is marked listed at the snapshot, so no watcher can replay from
    /// before it, and the buffered events follow. The store skips any change
    /// not newer than what it holds for its key.
    pub fn finish(self, writer: &mut StoreWriter, buffered: Vec<Pending>) -> u64 {
        let snapshot = self.snapshot.expect("a finished list has a snapshot");
        writer.begin_list();
        let mut changes: Vec<Pending> = Vec::with_capacity(self.changed.len());
        if !writer.is_empty() {
            let gone: Vec<ObjectKey> = writer.keys().filter(|k| !self.seen.contains(k)).collect();
            changes.extend(
                gone.iter()
                    .filter_map(|key| writer.get(key))
                    .map(|last| Pending::Delete(Arc::new(last.at_resource_version(snapshot)))),
            );
        }
        changes.extend(self.changed.into_iter().map(Pending::Upsert));
        changes.sort_by_key(|p| p.object().resource_version);
        for change in changes {
            writer.apply(change.into_change());
        }
        writer.mark_listed(snapshot);
        for event in buffered {
            writer.apply(event.into_change());
        }
        snapshot
    }
}
