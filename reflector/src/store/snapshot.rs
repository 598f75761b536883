//! The store's content at one resourceVersion, and the [`Snapshot`] readers
//! hold of it.

use std::ops::Bound;
use std::sync::Arc;

use imbl::OrdMap;

use super::config::IndexSpec;
use super::event_log::Event;
use super::index::{Indexes, KeySet, KeySetIter, SharedKey, namespace_bounds};
use kubecache_wire::ChangeType;
use kubecache_wire::{CachedObject, ObjectKey};

/// Objects by key, in etcd key order.
pub(crate) type ObjectMap = OrdMap<SharedKey, Arc<CachedObject>>;

/// A change to apply to a store: the new state of an object, or its removal.
#[derive(Clone, Debug)]
pub enum Change {
    /// The object was created or changed; this is its new state.
    Upsert(Arc<CachedObject>),
    /// The object was deleted.
    Delete {
        /// The object's last state, with `resource_version` set to the
        /// resourceVersion of the deletion (as in a `DELETED` watch event).
        object: Arc<CachedObject>,
    },
}

impl Change {
    /// The object the change carries.
    pub fn object(&self) -> &Arc<CachedObject> {
        match self {
            Change::Upsert(object) | Change::Delete { object } => object,
        }
    }
}

/// Everything a snapshot shows: objects, indexes and the resourceVersion they
/// are at. Cloning is O(1) (a handful of reference counts); the clone shares
/// every node with the original until one of them changes.
#[derive(Clone)]
pub(crate) struct StoreState {
    /// The newest resourceVersion applied (by a change or a bookmark).
    pub(crate) resource_version: u64,
    /// The [`CachedObject::size`]s of `objects`, summed.
    pub(crate) bytes: usize,
    pub(crate) objects: ObjectMap,
    pub(crate) indexes: Indexes,
    pub(crate) field_indexes: Arc<[IndexSpec]>,
    /// A list is being applied ([`StoreWriter::begin_list`] until
    /// [`StoreWriter::mark_listed`]): the state is then no resourceVersion's
    /// whole state, and is not saved.
    ///
    /// [`StoreWriter::begin_list`]: super::StoreWriter::begin_list
    /// [`StoreWriter::mark_listed`]: super::StoreWriter::mark_listed
    pub(crate) applying_list: bool,
}

impl StoreState {
    pub(crate) fn new(field_indexes: Arc<[IndexSpec]>) -> Self {
        StoreState {
            resource_version: 0,
            bytes: 0,
            objects: ObjectMap::new(),
            indexes: Indexes::new(field_indexes.len()),
            field_indexes,
            applying_list: false,
        }
    }

    /// Applies `change` unless it is not newer than what the state holds for
    /// its key (or deletes an absent key); returns the event it makes.
    ///
    /// Takes the `Arc` so that a skipped change never un-shares the state
    /// from the snapshots that hold it: the state is made unique
    /// (`Arc::make_mut`) only once the change is known to apply.
    pub(crate) fn apply(state: &mut Arc<StoreState>, change: Change) -> Option<Event> {
        let rv = change.object().resource_version;
        let stored = state
            .objects
            .get_key_value(change.object().key.as_str())
            .map(|(key, object)| (key.clone(), object.clone()));
        let (kind, object, previous) = match (change, stored) {
            // Not newer than what we hold: a replay or a stale page item.
            (_, Some((_, held))) if rv <= held.resource_version => return None,
            // Nothing to delete.
            (Change::Delete { .. }, None) => return None,
            (Change::Upsert(object), None) => {
                let state = Arc::make_mut(state);
                let key: SharedKey = Arc::from(object.key.as_str());
                state.indexes.insert(&key, &object);
                state.objects.insert(key, object.clone());
                state.bytes += object.size();
                (ChangeType::Added, object, None)
            }
            (Change::Upsert(object), Some((key, held))) => {
                let state = Arc::make_mut(state);
                state.indexes.replace(&key, &held, &object);
                if let Some(slot) = state.objects.get_mut(&*key) {
                    *slot = object.clone();
                }
                state.bytes = state.bytes + object.size() - held.size();
                (ChangeType::Modified, object, Some(held))
            }
            (Change::Delete { object }, Some((key, held))) => {
                let state = Arc::make_mut(state);
                state.indexes.remove(&key, &held);
                state.objects.remove(&*key);
                state.bytes -= held.size();
                (ChangeType::Deleted, object, Some(held))
            }
        };
        let state = Arc::make_mut(state);
        state.resource_version = state.resource_version.max(rv);
        Some(Event {
            kind,
            resource_version: state.resource_version,
            object,
            previous,
        })
    }
}

/// A summary: a store's content is far too large to print.
impl std::fmt::Debug for StoreState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreState")
            .field("resource_version", &self.resource_version)
            .field("objects", &self.objects.len())
            .field("field_indexes", &self.field_indexes)
            .finish_non_exhaustive()
    }
}

/// What an index query looks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexLookup<'a> {
    /// The objects of one namespace; `""` finds cluster-scoped objects.
    Namespace(&'a str),
    /// The objects with label `key=value`.
    Label {
        /// The label key.
        key: &'a str,
        /// The label value.
        value: &'a str,
    },
    /// The objects with an owner reference to this UID.
    Owner(&'a str),
    /// The objects whose configured field index `name` has `value`.
    Field {
        /// [`IndexSpec::name`] of the index.
        name: &'a str,
        /// The field's value.
        value: &'a str,
    },
}

/// A consistent, immutable view of one store at one resourceVersion: objects,
/// indexes and the resourceVersion agree with each other, whatever the
/// writer does after it was taken.
///
/// Taking one is O(1) and holding one costs nothing until the writer
/// changes the store: then the nodes the writer copies stay alive for as
/// long as the snapshot does (memory grows with the changes made while it is
/// held, not with the store's size). A paginated list reads all its pages
/// from one snapshot.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub(crate) state: Arc<StoreState>,
}

impl Snapshot {
    /// The resourceVersion this snapshot is at: the newest change or
    /// bookmark applied before it was taken.
    pub fn resource_version(&self) -> u64 {
        self.state.resource_version
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.state.objects.len()
    }

    /// About the bytes its objects hold ([`CachedObject::size`], summed;
    /// index entries not counted).
    pub fn bytes(&self) -> usize {
        self.state.bytes
    }

    /// `true` when the store holds no object.
    pub fn is_empty(&self) -> bool {
        self.state.objects.is_empty()
    }

    /// The object with this key.
    pub fn get(&self, key: &ObjectKey) -> Option<&Arc<CachedObject>> {
        self.state.objects.get(key.as_str())
    }

    /// The object `name` in `namespace` (empty for a cluster-scoped one),
    /// looked up without building its key.
    pub fn get_named(&self, namespace: &str, name: &str) -> Option<&Arc<CachedObject>> {
        ObjectKey::joined(namespace, name, |key| self.state.objects.get(key))
    }

    /// The configured field indexes, in the order of
    /// [`CachedObject::fields`].
    pub fn field_indexes(&self) -> &[IndexSpec] {
        &self.state.field_indexes
    }

    /// The objects in key order (the order of list responses), after the
    /// key `after` if given (the last key of the previous page), restricted
    /// to `namespace` if given (`Some("")` keeps cluster-scoped objects).
    ///
    /// Finding the start is O(log n); each further item O(1) amortized.
    pub fn range<'s>(
        &'s self,
        namespace: Option<&str>,
        after: Option<&ObjectKey>,
    ) -> impl Iterator<Item = &'s Arc<CachedObject>> + 's {
        let cluster_scoped_only = namespace == Some("");
        let (start, end) = match namespace {
            Some(ns) if !ns.is_empty() => {
                let (start, end) = namespace_bounds(ns);
                (Bound::Included(start), Bound::Excluded(end))
            }
            _ => (Bound::Unbounded, Bound::Unbounded),
        };
        let start = match (start, after) {
            (Bound::Included(start), Some(after)) if after.as_str() < start.as_str() => {
                Bound::Included(start)
            }
            (_, Some(after)) => Bound::Excluded(after.as_str().to_owned()),
            (start, None) => start,
        };
        key_range(&self.state.objects, start, end)
            .filter(move |(key, _)| !cluster_scoped_only || !key.contains('/'))
            .map(|(_, object)| object)
    }

    /// The objects `lookup` finds, in key order. Finding them does not
    /// depend on the number of objects (a descent of at most 3 levels of a
    /// 64-way B-tree over the index's distinct values, below 262k of them);
    /// iterating k of them is O(k log n): each is resolved in the object
    /// map, so that index sets hold keys only and a change that keeps an
    /// object's indexed values costs the indexes nothing.
    pub fn index<'s>(
        &'s self,
        lookup: IndexLookup<'_>,
    ) -> impl Iterator<Item = &'s Arc<CachedObject>> + 's {
        self.index_range(lookup, None)
    }

    /// Like [`Snapshot::index`], starting after the key `after`: pagination
    /// over the results of an index query.
    pub fn index_range<'s>(
        &'s self,
        lookup: IndexLookup<'_>,
        after: Option<&ObjectKey>,
    ) -> impl Iterator<Item = &'s Arc<CachedObject>> + 's {
        let found = match lookup {
            IndexLookup::Namespace(_) if self.index_len(lookup) == 0 => Found::Nothing,
            IndexLookup::Namespace(ns) => Found::Objects(Box::new(self.range(Some(ns), after))),
            _ => match self.key_set(lookup) {
                Some(keys) => Found::Keys(keys.iter_after(after.map(ObjectKey::as_str))),
                None => Found::Nothing,
            },
        };
        IndexIter {
            objects: &self.state.objects,
            found,
        }
    }

    /// How many objects `lookup` finds, without iterating them (found as in
    /// [`Snapshot::index`]).
    pub fn index_len(&self, lookup: IndexLookup<'_>) -> usize {
        match lookup {
            IndexLookup::Namespace(ns) => {
                self.state.indexes.namespaces.get(ns).copied().unwrap_or(0)
            }
            _ => self.key_set(lookup).map_or(0, KeySet::len),
        }
    }

    fn key_set(&self, lookup: IndexLookup<'_>) -> Option<&KeySet> {
        let indexes = &self.state.indexes;
        match lookup {
            IndexLookup::Namespace(_) => None,
            IndexLookup::Label { key, value } => indexes.labels.get(key)?.get(value),
            IndexLookup::Owner(uid) => indexes.owners.get(uid),
            IndexLookup::Field { name, value } => {
                let at = self
                    .state
                    .field_indexes
                    .iter()
                    .position(|s| s.name == name)?;
                indexes.fields.get(at)?.get(value)
            }
        }
    }
}

/// The entries of `objects` between two bounds; empty (rather than a panic)
/// when the bounds cross.
fn key_range(
    objects: &ObjectMap,
    start: Bound<String>,
    end: Bound<String>,
) -> impl Iterator<Item = (&SharedKey, &Arc<CachedObject>)> {
    let crossed = match (&start, &end) {
        (Bound::Included(s) | Bound::Excluded(s), Bound::Excluded(e)) => s >= e,
        _ => false,
    };
    let bounds = (
        start.as_ref().map(String::as_str),
        end.as_ref().map(String::as_str),
    );
    (!crossed)
        .then(|| objects.range::<_, str>(bounds))
        .into_iter()
        .flatten()
}

/// What an index query found.
enum Found<'a> {
    Nothing,
    Keys(KeySetIter<'a>),
    Objects(Box<dyn Iterator<Item = &'a Arc<CachedObject>> + 'a>),
}

struct IndexIter<'a> {
    objects: &'a ObjectMap,
    found: Found<'a>,
}

impl<'a> Iterator for IndexIter<'a> {
    type Item = &'a Arc<CachedObject>;

    fn next(&mut self) -> Option<Self::Item> {
        let objects = self.objects;
        match &mut self.found {
            Found::Nothing => None,
            // Every key in an index is in the object map (the invariant of
            // `Indexes`); a miss would be a bug, skipped rather than a panic
            // on a serving path.
            Found::Keys(keys) => keys.find_map(|key| objects.get(key)),
            Found::Objects(objects) => objects.next(),
        }
    }
}
