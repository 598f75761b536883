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

/// The objects of one list, as far as they differ from the store, and the
/// changes a streaming list sent among them.
///
/// Only changed objects are held (and on the first list, every object, as
/// the store is empty): a relist never holds a second copy of the store,
/// just the set of keys it has seen.
///
/// A streaming list from kube-apiserver before 1.32 sends the changes made
/// since its snapshot before its initial-events-end bookmark (see
/// [`Listing::change`]); they are held as changes, not states, and the
/// list's state is the snapshot's with them applied in order.
#[derive(Debug, Default)]
pub struct Listing {
    /// The list's resourceVersion (its snapshot), once known.
    pub snapshot: Option<u64>,
    /// The key of the last object read (accepted or not): where a sharded
    /// list goes on from after page 1.
    pub last: Option<ObjectKey>,
    changed: Vec<Pending>,
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
        self.changed.push(Pending::Upsert(object));
    }

    /// Takes one change read among a streaming list's objects: a MODIFIED
    /// or DELETED (an ADDED is an [`add`](Listing::add), whether the object
    /// was in the snapshot or created since: either way the list had no
    /// state for it before).
    ///
    /// kube-apiserver 1.27–1.31 sends its initial-events-end bookmark on
    /// its cacher's next bookmark tick, up to about a second after the last
    /// initial object, and the changes made meanwhile before it (6–12 at 10
    /// writes/s in `testdata/apiserver-golden/versions/`, `watchlist-churn-*`).
    /// Each is newer than every initial object (the watch cache sends
    /// nothing twice) and the bookmark's resourceVersion covers them all,
    /// so applying the listing in resourceVersion order applies each after
    /// the state it changes: the store ends at the bookmark's state, as
    /// client-go's watch-list reaches it with its temporary store.
    pub fn change(&mut self, writer: &StoreWriter, change: Pending) {
        if !writer.is_empty() {
            // Listed, so not deleted at the snapshot: the change itself
            // says what became of it.
            self.seen.insert(change.object().key.clone());
        }
        self.changed.push(change);
    }

    /// Objects listed so far.
    pub fn len(&self) -> usize {
        self.listed
    }

    /// The newest resourceVersion among the objects to apply: beyond the
    /// snapshot when part of the list was read at the current state (after
    /// a 410), 0 when there are none.
    pub fn newest(&self) -> u64 {
        self.changed
            .iter()
            .map(|p| p.object().resource_version)
            .max()
            .unwrap_or(0)
    }

    /// Applies the list and then the buffered watch events; returns the
    /// list's resourceVersion.
    ///
    /// The difference between the store and the list is applied as changes
    /// in resourceVersion order (into an empty store: every object), objects
    /// gone from the list deleted at the snapshot's revision, a streaming
    /// list's changes among them. Then the store
    /// is marked listed at the snapshot, so no watcher can replay from
    /// before it, and the buffered events follow. The store skips any change
    /// not newer than what it holds for its key.
    ///
    /// Objects newer than the snapshot (read at the current state after a
    /// 410) join the buffered events in resourceVersion order, so that the
    /// event log stays in order: the caller has buffered the watch at least
    /// up to the [`newest`](Listing::newest) of them.
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
        let (listed, newer): (Vec<_>, Vec<_>) = self
            .changed
            .into_iter()
            .partition(|p| p.object().resource_version <= snapshot);
        changes.extend(listed);
        changes.sort_by_key(|p| p.object().resource_version);
        for change in changes {
            writer.apply(change.into_change());
        }
        writer.mark_listed(snapshot);
        let mut after = buffered;
        after.extend(newer);
        // Stable: the buffered events are in order already.
        after.sort_by_key(|p| p.object().resource_version);
        for change in after {
            writer.apply(change.into_change());
        }
        snapshot
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{StoreConfig, store};

    fn pod(name: &str, rv: u64) -> Arc<CachedObject> {
        let json = format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}"}}}}"#
        );
        let transform = kubecache_wire::Transform::default();
        Arc::new(kubecache_wire::decode_object(json.as_bytes(), "Pod", "v1", &transform).unwrap())
    }

    /// The objects held, by name, with their resourceVersions.
    fn held(reader: &crate::store::StoreReader) -> Vec<(String, u64)> {
        reader
            .snapshot()
            .range(None, None)
            .map(|o| (o.key.name().to_string(), o.resource_version))
            .collect()
    }

    #[test]
    fn a_streaming_lists_changes_before_its_bookmark_apply_after_the_states_they_change() {
        let (mut writer, reader) = store(StoreConfig::default());
        // Relisting over a store that held a (5), b (6) and gone (7).
        let mut first = Listing {
            snapshot: Some(7),
            ..Listing::default()
        };
        for object in [pod("a", 5), pod("b", 6), pod("gone", 7)] {
            first.add(&writer, object);
        }
        first.finish(&mut writer, Vec::new());
        // The stream: initial a (5, unchanged), b (9), c (8), then since the
        // snapshot a modified (12), b deleted (13), d created (14) and
        // deleted (15), c modified (16), and b created again (17); the
        // bookmark at 18.
        let mut listing = Listing::default();
        for object in [pod("a", 5), pod("b", 9), pod("c", 8)] {
            listing.add(&writer, object);
        }
        listing.change(&writer, Pending::Upsert(pod("a", 12)));
        listing.change(&writer, Pending::Delete(pod("b", 13)));
        listing.add(&writer, pod("d", 14));
        listing.change(&writer, Pending::Delete(pod("d", 15)));
        listing.change(&writer, Pending::Upsert(pod("c", 16)));
        listing.add(&writer, pod("b", 17));
        listing.snapshot = Some(18);
        assert_eq!(listing.finish(&mut writer, Vec::new()), 18);
        assert_eq!(
            held(&reader),
            [("a", 12), ("b", 17), ("c", 16)].map(|(k, rv)| (k.to_string(), rv))
        );
        assert_eq!(reader.current_resource_version(), 18);
    }

    #[test]
    fn objects_newer_than_the_snapshot_apply_among_the_buffered_events_in_order() {
        let (mut writer, reader) = store(StoreConfig::default());
        let mut listing = Listing {
            snapshot: Some(10),
            ..Listing::default()
        };
        // c was read at the current state (after a 410), at 14.
        for object in [pod("a", 5), pod("b", 8), pod("c", 14)] {
            listing.add(&writer, object);
        }
        assert_eq!(listing.newest(), 14);
        let buffered = [pod("d", 12), pod("c", 13), pod("c", 14), pod("e", 15)]
            .into_iter()
            .map(Pending::Upsert)
            .collect();
        assert_eq!(listing.finish(&mut writer, buffered), 10);
        let logged: Vec<(String, u64)> = reader
            .events_since(10)
            .unwrap()
            .iter()
            .map(|e| (e.object.key.name().to_string(), e.object.resource_version))
            .collect();
        let want = [("d", 12), ("c", 13), ("c", 14), ("e", 15)];
        assert_eq!(logged, want.map(|(k, rv)| (k.to_string(), rv)));
        let held: Vec<u64> = held(&reader).into_iter().map(|(_, rv)| rv).collect();
        assert_eq!(held, [5, 8, 14, 12, 15]);
    }
}
