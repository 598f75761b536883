//! What a list or watch selects: a namespace, a label selector, a field
//! selector and a shard selector, and how to find the matching objects
//! through the indexes.

use std::sync::Arc;

use kubecache_reflector::{IndexLookup, IndexSpec, Snapshot};
use kubecache_wire::{CachedObject, FieldSelector, LabelSelector, ObjectKey, ShardSelector};

/// The objects a request selects.
///
/// Field selectors may name `metadata.name`, `metadata.namespace` and the
/// paths of the configured field indexes (see [`Filter::supported_fields`]);
/// the values of indexed fields come precomputed in
/// [`CachedObject::fields`], so matching never parses JSON.
#[derive(Clone, Debug)]
pub struct Filter {
    /// The namespace of a namespaced path (`None`: all namespaces).
    pub namespace: Option<String>,
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `shardSelector`: the hash ranges of the objects' uid or namespace.
    pub shards: Option<ShardSelector>,
    /// The configured field indexes, in the order of `CachedObject::fields`.
    indexes: Arc<[IndexSpec]>,
}

/// Where the candidates of a filter come from: the whole store or one index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Candidates<'a> {
    /// Every object (no usable equality).
    All,
    /// One index entry; every matching object is in it.
    Index(IndexLookup<'a>),
}

impl Filter {
    /// A filter over a store with these field indexes.
    pub fn new(
        namespace: Option<String>,
        labels: LabelSelector,
        fields: FieldSelector,
        indexes: Arc<[IndexSpec]>,
    ) -> Self {
        Filter {
            namespace,
            labels,
            fields,
            shards: None,
            indexes,
        }
    }

    /// This filter, selecting only the objects in `shards` too.
    pub fn with_shards(self, shards: Option<ShardSelector>) -> Self {
        Filter { shards, ..self }
    }

    /// The field paths a field selector may name for a store with these
    /// indexes.
    pub fn supported_fields(indexes: &[IndexSpec]) -> Vec<&str> {
        let mut fields = vec!["metadata.name", "metadata.namespace"];
        fields.extend(indexes.iter().map(|i| i.path.as_str()));
        fields
    }

    /// Whether label, field or shard requirements filter objects (beyond
    /// the namespace of the path).
    pub fn requires(&self) -> bool {
        !self.labels.is_empty() || !self.fields.is_empty() || self.shards.is_some()
    }

    /// Whether `object` is selected.
    pub fn matches(&self, object: &CachedObject) -> bool {
        if let Some(ns) = &self.namespace
            && object.key.namespace() != ns
        {
            return false;
        }
        self.shards
            .as_ref()
            .is_none_or(|shards| shards.matches(&object.uid, object.key.namespace()))
            && self.labels.matches(|key| object.label(key))
            && self.fields.matches(|path| self.field(object, path))
    }

    /// The value of field `path` of `object` (`metadata.name`,
    /// `metadata.namespace` or an indexed path).
    fn field<'o>(&self, object: &'o CachedObject, path: &str) -> Option<&'o str> {
        match path {
            "metadata.name" => Some(object.key.name()),
            "metadata.namespace" => Some(object.key.namespace()),
            _ => {
                let at = self.indexes.iter().position(|i| i.path == path)?;
                object.fields.get(at)?.as_deref()
            }
        }
    }

    /// The index lookups every selected object must be found by: the
    /// namespace, indexed field equalities and label equalities.
    pub fn lookups(&self) -> Vec<IndexLookup<'_>> {
        let mut lookups = Vec::new();
        let namespace = self
            .fields
            .equalities()
            .find(|(path, _)| *path == "metadata.namespace")
            .map(|(_, ns)| ns)
            .or(self.namespace.as_deref());
        if let Some(ns) = namespace {
            lookups.push(IndexLookup::Namespace(ns));
        }
        for (path, value) in self.fields.equalities() {
            if let Some(spec) = self.indexes.iter().find(|i| i.path == path) {
                lookups.push(IndexLookup::Field {
                    name: &spec.name,
                    value,
                });
            }
        }
        for (key, value) in self.labels.equalities() {
            lookups.push(IndexLookup::Label { key, value });
        }
        lookups
    }

    /// The narrowest source of candidates in `snapshot`: the lookup that
    /// finds the fewest objects, or the whole store.
    pub fn candidates<'f>(&'f self, snapshot: &Snapshot) -> Candidates<'f> {
        self.lookups()
            .into_iter()
            .min_by_key(|lookup| snapshot.index_len(*lookup))
            .map_or(Candidates::All, Candidates::Index)
    }

    /// How many objects of `snapshot` [`Filter::select`] examines: its
    /// candidates.
    pub fn candidate_count(&self, snapshot: &Snapshot) -> usize {
        match self.candidates(snapshot) {
            Candidates::All => snapshot.len(),
            Candidates::Index(lookup) => snapshot.index_len(lookup),
        }
    }

    /// The selected objects of `snapshot` in key order, after key `after`.
    pub fn select<'s>(
        &'s self,
        snapshot: &'s Snapshot,
        after: Option<&'s ObjectKey>,
    ) -> Box<dyn Iterator<Item = &'s Arc<CachedObject>> + 's> {
        let candidates: Box<dyn Iterator<Item = &'s Arc<CachedObject>> + 's> =
            match self.candidates(snapshot) {
                Candidates::All => Box::new(snapshot.range(None, after)),
                Candidates::Index(lookup) => Box::new(snapshot.index_range(lookup, after)),
            };
        Box::new(candidates.filter(|object| self.matches(object)))
    }
}
