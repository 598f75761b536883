//! The secondary indexes of a store: namespace, label `key=value`, owner UID
//! and the configured field indexes, each a persistent map from an index
//! value to the sorted set of keys of the objects that have it.
//!
//! Finding a value's set is a descent of a 64-way persistent B-tree
//! (`imbl::OrdMap`) over that index's distinct values: at most 3 levels below
//! 262k distinct values, whatever the number of objects; reading the set is
//! O(k) in key order. An update costs O(index values of the object), and a
//! modification that changes no indexed value costs nothing here.
//!
//! Why a B-tree and not a HAMT (`imbl::HashMap`) for the values: with fat
//! entries (a shared key string and a key set, 40 bytes) the HAMT's 32-slot
//! nodes are mostly empty for values held by one to three objects (app,
//! pod-template-hash, owner UID); at 100k pods the indexes cost 538 B/object
//! with HAMTs against 350 B/object with B-trees, for adds about 30 % faster
//! with HAMTs (both well above 100k objects/s). Label *keys* (few) stay in a
//! HAMT.
//!
//! The namespace index keeps only counts: the objects of a namespace are a
//! contiguous range of the key-ordered object map (`ns/` .. `ns0`), which
//! costs no memory per object.

use std::ops::Bound;
use std::sync::Arc;

use imbl::{HashMap, OrdMap, OrdSet};

use kubecache_wire::CachedObject;

/// An object key shared by the object map and every index set that holds it:
/// allocated once when the key first appears, then cloned by reference count
/// (a clone happens every time a persistent node on its path is copied).
pub(crate) type SharedKey = Arc<str>;

/// Key sets of at most this many keys are a sorted slice, replaced whole on
/// change; larger ones are a B-tree. A one-key B-tree costs a full 64-slot
/// node (~1.3 KB per key in a measurement of one-key sets), a one-key slice
/// 32 bytes, and copying 32 keys is cheaper than copying a tree path.
const SMALL_MAX: usize = 32;

/// A B-tree set shrinking to this size becomes a slice again (hysteresis, so
/// a set oscillating around [`SMALL_MAX`] does not convert on every change).
const SMALL_AGAIN: usize = SMALL_MAX / 2;

/// A persistent, sorted set of object keys. Never empty inside an index: an
/// index value whose last key leaves is removed.
#[derive(Clone, Debug)]
pub(crate) enum KeySet {
    /// At most [`SMALL_MAX`] keys, sorted, immutable (copied on change).
    Small(Arc<[SharedKey]>),
    /// More keys; structurally shared with every snapshot that holds it.
    Large(OrdSet<SharedKey>),
}

impl KeySet {
    fn single(key: SharedKey) -> Self {
        KeySet::Small(Arc::from([key]))
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            KeySet::Small(keys) => keys.len(),
            KeySet::Large(keys) => keys.len(),
        }
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn insert(&mut self, key: SharedKey) {
        match self {
            KeySet::Small(keys) => {
                let Err(at) = keys.binary_search_by(|k| (**k).cmp(&*key)) else {
                    return;
                };
                if keys.len() < SMALL_MAX {
                    let mut grown = Vec::with_capacity(keys.len() + 1);
                    grown.extend_from_slice(&keys[..at]);
                    grown.push(key);
                    grown.extend_from_slice(&keys[at..]);
                    *keys = Arc::from(grown);
                } else {
                    let mut large: OrdSet<SharedKey> = keys.iter().cloned().collect();
                    large.insert(key);
                    *self = KeySet::Large(large);
                }
            }
            KeySet::Large(keys) => {
                keys.insert(key);
            }
        }
    }

    fn remove(&mut self, key: &str) {
        match self {
            KeySet::Small(keys) => {
                if let Ok(at) = keys.binary_search_by(|k| (**k).cmp(key)) {
                    let mut shrunk = Vec::with_capacity(keys.len() - 1);
                    shrunk.extend_from_slice(&keys[..at]);
                    shrunk.extend_from_slice(&keys[at + 1..]);
                    *keys = Arc::from(shrunk);
                }
            }
            KeySet::Large(keys) => {
                keys.remove(key);
                if keys.len() <= SMALL_AGAIN {
                    *self = KeySet::Small(keys.iter().cloned().collect());
                }
            }
        }
    }

    /// The keys after `after` (all keys for `None`), in key order.
    pub(crate) fn iter_after(&self, after: Option<&str>) -> KeySetIter<'_> {
        match (self, after) {
            (KeySet::Small(keys), None) => KeySetIter::Small(keys.iter()),
            (KeySet::Small(keys), Some(after)) => {
                let from = keys.partition_point(|k| &**k <= after);
                KeySetIter::Small(keys[from..].iter())
            }
            (KeySet::Large(keys), after) => {
                let start = after.map_or(Bound::Unbounded, Bound::Excluded);
                KeySetIter::Large(keys.range::<_, str>((start, Bound::Unbounded)))
            }
        }
    }
}

/// The keys of a [`KeySet`], in key order.
pub(crate) enum KeySetIter<'a> {
    Small(std::slice::Iter<'a, SharedKey>),
    Large(imbl::ordset::RangedIter<'a, SharedKey, imbl::shared_ptr::DefaultSharedPtr>),
}

impl<'a> Iterator for KeySetIter<'a> {
    type Item = &'a SharedKey;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            KeySetIter::Small(keys) => keys.next(),
            KeySetIter::Large(keys) => keys.next(),
        }
    }
}

/// Index value -> keys of the objects that have it.
pub(crate) type ValueIndex = OrdMap<Arc<str>, KeySet>;

/// All indexes of one store, as of one point in time. Cloning is O(1) and
/// the clone shares every node until either side changes.
///
/// Invariant (checked against a brute-force recomputation in the tests):
/// every index holds exactly the keys of the objects in the object map that
/// have the indexed value, and no empty set.
#[derive(Clone, Debug, Default)]
pub(crate) struct Indexes {
    /// Namespace -> number of objects in it (the objects themselves are a
    /// key range of the object map).
    pub(crate) namespaces: HashMap<Arc<str>, usize>,
    /// Label key -> label value -> keys.
    pub(crate) labels: HashMap<Arc<str>, ValueIndex>,
    /// Owner UID -> keys of the objects it owns.
    pub(crate) owners: ValueIndex,
    /// One per configured field index, in configured order.
    pub(crate) fields: Vec<ValueIndex>,
}

impl Indexes {
    pub(crate) fn new(field_indexes: usize) -> Self {
        Indexes {
            fields: vec![ValueIndex::default(); field_indexes],
            ..Indexes::default()
        }
    }

    /// Adds an object that the store did not hold.
    pub(crate) fn insert(&mut self, key: &SharedKey, object: &CachedObject) {
        let namespace = object.key.namespace();
        if let Some(count) = self.namespaces.get_mut(namespace) {
            *count += 1;
        } else {
            self.namespaces.insert(Arc::from(namespace), 1);
        }
        for (label, value) in object.labels.iter() {
            add_label(&mut self.labels, label, value, key);
        }
        for owner in object.owner_uids.iter() {
            add(&mut self.owners, owner, key);
        }
        for (index, value) in self.fields.iter_mut().zip(object.fields.iter()) {
            if let Some(value) = value {
                add(index, value, key);
            }
        }
    }

    /// Removes an object that the store held.
    pub(crate) fn remove(&mut self, key: &SharedKey, object: &CachedObject) {
        let namespace = object.key.namespace();
        if let Some(count) = self.namespaces.get_mut(namespace) {
            *count -= 1;
            if *count == 0 {
                self.namespaces.remove(namespace);
            }
        }
        for (label, value) in object.labels.iter() {
            remove_label(&mut self.labels, label, value, key);
        }
        for owner in object.owner_uids.iter() {
            remove(&mut self.owners, owner, key);
        }
        for (index, value) in self.fields.iter_mut().zip(object.fields.iter()) {
            if let Some(value) = value {
                remove(index, value, key);
            }
        }
    }

    /// Moves an object from its `old` to its `new` index values, touching
    /// only the values that differ.
    pub(crate) fn replace(&mut self, key: &SharedKey, old: &CachedObject, new: &CachedObject) {
        if old.labels != new.labels {
            // Both are sorted by key: walk them together.
            let (mut o, mut n) = (old.labels.iter().peekable(), new.labels.iter().peekable());
            loop {
                match (o.peek(), n.peek()) {
                    (None, None) => break,
                    (Some((ok, ov)), Some((nk, nv))) if ok == nk => {
                        if ov != nv {
                            remove_label(&mut self.labels, ok, ov, key);
                            add_label(&mut self.labels, nk, nv, key);
                        }
                        o.next();
                        n.next();
                    }
                    (Some((ok, ov)), Some((nk, _))) if ok < nk => {
                        remove_label(&mut self.labels, ok, ov, key);
                        o.next();
                    }
                    (Some((ok, ov)), None) => {
                        remove_label(&mut self.labels, ok, ov, key);
                        o.next();
                    }
                    (_, Some((nk, nv))) => {
                        add_label(&mut self.labels, nk, nv, key);
                        n.next();
                    }
                }
            }
        }
        if old.owner_uids != new.owner_uids {
            for owner in old.owner_uids.iter() {
                if !new.owner_uids.contains(owner) {
                    remove(&mut self.owners, owner, key);
                }
            }
            for owner in new.owner_uids.iter() {
                if !old.owner_uids.contains(owner) {
                    add(&mut self.owners, owner, key);
                }
            }
        }
        for (i, index) in self.fields.iter_mut().enumerate() {
            let old = old.fields.get(i).and_then(Option::as_deref);
            let new = new.fields.get(i).and_then(Option::as_deref);
            if old != new {
                if let Some(old) = old {
                    remove(index, old, key);
                }
                if let Some(new) = new {
                    add(index, new, key);
                }
            }
        }
    }
}

fn add(index: &mut ValueIndex, value: &str, key: &SharedKey) {
    if let Some(keys) = index.get_mut(value) {
        keys.insert(key.clone());
    } else {
        index.insert(Arc::from(value), KeySet::single(key.clone()));
    }
}

fn remove(index: &mut ValueIndex, value: &str, key: &str) {
    if let Some(keys) = index.get_mut(value) {
        keys.remove(key);
        if keys.is_empty() {
            index.remove(value);
        }
    }
}

fn add_label(
    labels: &mut HashMap<Arc<str>, ValueIndex>,
    label: &str,
    value: &str,
    key: &SharedKey,
) {
    if let Some(values) = labels.get_mut(label) {
        add(values, value, key);
    } else {
        let mut values = ValueIndex::default();
        add(&mut values, value, key);
        labels.insert(Arc::from(label), values);
    }
}

fn remove_label(labels: &mut HashMap<Arc<str>, ValueIndex>, label: &str, value: &str, key: &str) {
    if let Some(values) = labels.get_mut(label) {
        remove(values, value, key);
        if values.is_empty() {
            labels.remove(label);
        }
    }
}

/// The half-open range of keys of the namespace `namespace`: `ns/` .. `ns0`
/// (`'0'` is the character after `'/'`), as bounds over `str`.
pub(crate) fn namespace_bounds(namespace: &str) -> (String, String) {
    (format!("{namespace}/"), format!("{namespace}0"))
}
