//! [`Transform`]: what [`decode_object`](super::decode_object) strips from an
//! object and which field values it reads for the indexes, compiled into one
//! tree of the keys that matter ([`Plan`]).

use super::path::{FieldPath, FieldPathError};

/// What to remove from each object before it is stored, and which fields to
/// read for the configured field indexes.
///
/// [`Transform::default()`] strips `metadata.managedFields` (1.5–4 KB of a
/// typical 4–8 KB Pod, which no reader of a cache needs) and reads no index
/// field. Build others from it:
///
/// ```
/// # use kubecache_wire::Transform;
/// let transform = Transform::default()
///     .strip("metadata.annotations[\"kubectl.kubernetes.io/last-applied-configuration\"]")?
///     .index_field("spec.nodeName")?
///     .index_field("status.phase")?;
/// # Ok::<(), kubecache_wire::FieldPathError>(())
/// ```
///
/// Everything the decoder reads (name, labels, annotations hash, owners, index
/// fields) comes from the object as received, before stripping: stripping
/// `status` does not empty an index on `status.phase`.
///
/// What kubecache needs to serve an object back cannot be stripped: `kind`,
/// `apiVersion`, `metadata` and `metadata.name`, `.namespace`, `.uid` and
/// `.resourceVersion` are refused.
#[derive(Debug, Clone)]
pub struct Transform {
    strip: Vec<FieldPath>,
    index_fields: Vec<FieldPath>,
    plan: Plan,
}

impl Default for Transform {
    fn default() -> Self {
        let strip = vec![FieldPath::from_keys(&["metadata", "managedFields"])];
        let plan = Plan::build(&strip, &[]);
        Transform {
            strip,
            index_fields: Vec::new(),
            plan,
        }
    }
}

/// Paths that [`Transform::strip`] refuses.
const PROTECTED: &[&[&str]] = &[
    &["kind"],
    &["apiVersion"],
    &["metadata"],
    &["metadata", "name"],
    &["metadata", "namespace"],
    &["metadata", "uid"],
    &["metadata", "resourceVersion"],
];

impl Transform {
    /// Strips nothing (managedFields included) and reads no index field.
    pub fn keep_everything() -> Self {
        Transform {
            strip: Vec::new(),
            index_fields: Vec::new(),
            plan: Plan::build(&[], &[]),
        }
    }

    /// Also removes the field at `path` (a no-op where an object lacks it).
    pub fn strip(mut self, path: &str) -> Result<Self, FieldPathError> {
        let parsed = FieldPath::parse(path)?;
        if PROTECTED
            .iter()
            .any(|p| parsed.segments().eq(p.iter().copied()))
        {
            return Err(FieldPathError {
                path: path.to_owned(),
                reason: "kubecache needs this field to serve the object, it cannot be stripped"
                    .to_owned(),
            });
        }
        if !self.strip.contains(&parsed) {
            self.strip.push(parsed);
        }
        self.plan = Plan::build(&self.strip, &self.index_fields);
        Ok(self)
    }

    /// Also reads the field at `path` into the next slot of
    /// [`CachedObject::fields`](crate::CachedObject::fields).
    pub fn index_field(mut self, path: &str) -> Result<Self, FieldPathError> {
        self.index_fields.push(FieldPath::parse(path)?);
        self.plan = Plan::build(&self.strip, &self.index_fields);
        Ok(self)
    }

    /// The stripped paths, in the order they were added.
    pub fn strip_paths(&self) -> &[FieldPath] {
        &self.strip
    }

    /// The index fields, in the order of [`CachedObject::fields`](crate::CachedObject::fields).
    pub fn index_fields(&self) -> &[FieldPath] {
        &self.index_fields
    }

    pub(crate) fn plan(&self) -> &Plan {
        &self.plan
    }
}

/// What the decoder reads from the fixed fields of `metadata`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    None,
    /// The top-level `metadata` (its reads restart if the key repeats).
    Metadata,
    Name,
    Namespace,
    Uid,
    ResourceVersion,
    Generation,
    Labels,
    Annotations,
    OwnerReferences,
}

/// One key of the tree of keys that matter, and what happens to its value.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) children: Vec<(Box<[u8]>, Plan)>,
    /// Remove this entry from the output.
    pub(crate) strip: bool,
    /// The top-level `kind` or `apiVersion` (stripped unless a custom
    /// resource's, which keep their place).
    pub(crate) type_meta: bool,
    /// Some descendant is stripped: an object value is written entry by entry.
    pub(crate) rewrite: bool,
    /// This value or a descendant is read (role or index field).
    pub(crate) read: bool,
    pub(crate) role: Role,
    /// Slots of `CachedObject::fields` that take this value.
    pub(crate) index_slots: Vec<usize>,
}

impl Plan {
    fn empty() -> Self {
        Plan {
            children: Vec::new(),
            strip: false,
            type_meta: false,
            rewrite: false,
            read: false,
            role: Role::None,
            index_slots: Vec::new(),
        }
    }

    /// The tree for the top-level object: its own kind and apiVersion are
    /// dropped (the decoder writes them first) unless kept in place,
    /// `metadata` is read.
    fn build(strip: &[FieldPath], index_fields: &[FieldPath]) -> Self {
        let mut root = Plan::empty();
        for key in ["kind", "apiVersion"] {
            let child = root.child(&[key]);
            child.strip = true;
            child.type_meta = true;
        }
        for (path, role) in [
            (&["metadata"][..], Role::Metadata),
            (&["metadata", "name"], Role::Name),
            (&["metadata", "namespace"], Role::Namespace),
            (&["metadata", "uid"], Role::Uid),
            (&["metadata", "resourceVersion"], Role::ResourceVersion),
            (&["metadata", "generation"], Role::Generation),
            (&["metadata", "labels"], Role::Labels),
            (&["metadata", "annotations"], Role::Annotations),
            (&["metadata", "ownerReferences"], Role::OwnerReferences),
        ] {
            root.child(path).role = role;
        }
        for path in strip {
            root.child(&path.segments().collect::<Vec<_>>()).strip = true;
        }
        for (slot, path) in index_fields.iter().enumerate() {
            root.child(&path.segments().collect::<Vec<_>>())
                .index_slots
                .push(slot);
        }
        root.settle();
        root.rewrite = true;
        root
    }

    fn child(&mut self, path: &[&str]) -> &mut Plan {
        let Some((first, rest)) = path.split_first() else {
            return self;
        };
        let i = match self
            .children
            .iter()
            .position(|(k, _)| **k == *first.as_bytes())
        {
            Some(i) => i,
            None => {
                self.children.push((first.as_bytes().into(), Plan::empty()));
                self.children.len() - 1
            }
        };
        self.children[i].1.child(rest)
    }

    /// Computes `rewrite` and `read` bottom-up.
    fn settle(&mut self) {
        self.read = self.role != Role::None || !self.index_slots.is_empty();
        self.rewrite = false;
        for (_, child) in &mut self.children {
            child.settle();
            self.read |= child.read;
            self.rewrite |= child.strip || child.rewrite;
        }
    }

    /// The plan for an entry whose key is `name`.
    #[inline]
    pub(crate) fn get(&self, name: &[u8]) -> Option<&Plan> {
        self.children
            .iter()
            .find(|(k, _)| **k == *name)
            .map(|(_, p)| p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_strips_managed_fields_only() {
        let t = Transform::default();
        assert_eq!(
            t.strip_paths(),
            [FieldPath::parse("metadata.managedFields").unwrap()]
        );
        assert!(t.index_fields().is_empty());
        let meta = t.plan().get(b"metadata").unwrap();
        assert!(meta.rewrite && meta.read && !meta.strip);
        assert!(meta.get(b"managedFields").unwrap().strip);
        assert!(!t.plan().get(b"spec").is_some_and(|p| p.read || p.rewrite));
    }

    #[test]
    fn fields_kubecache_serves_by_cannot_be_stripped() {
        for path in [
            "metadata",
            "metadata.name",
            "kind",
            "metadata.resourceVersion",
        ] {
            let err = Transform::default().strip(path).unwrap_err();
            assert!(err.to_string().contains("cannot be stripped"), "{err}");
        }
        assert!(Transform::default().strip("metadata.labels").is_ok());
        assert!(Transform::default().strip("spec..x").is_err());
        assert!(Transform::default().index_field("").is_err());
    }

    #[test]
    fn index_fields_take_slots_in_the_order_added() {
        let t = Transform::default()
            .index_field("spec.nodeName")
            .and_then(|t| t.index_field("status.phase"))
            .and_then(|t| t.index_field("spec.nodeName"))
            .unwrap();
        let spec = t.plan().get(b"spec").unwrap();
        assert!(spec.read && !spec.rewrite);
        assert_eq!(spec.get(b"nodeName").unwrap().index_slots, [0, 2]);
        assert_eq!(
            t.plan()
                .get(b"status")
                .unwrap()
                .get(b"phase")
                .unwrap()
                .index_slots,
            [1]
        );
    }
}
