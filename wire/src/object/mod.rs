//! An object as kubecache keeps it: its JSON ready to write to a socket, and
//! the few fields that keys, indexes, selectors and predicates need, read
//! once when the object arrives.

use std::fmt;

use bytes::Bytes;

mod encodings;

pub use encodings::{
    EncodedBytes, Encodings, METADATA_API_VERSION, METADATA_JSON_PREFIX, encoded_bytes,
    partial_object_metadata,
};

/// Namespace and name; ordered like etcd keys (`namespace/name`), which is
/// the order of list responses.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey(Box<str>);

impl ObjectKey {
    /// The key of `namespace/name` (`name` alone for cluster-scoped objects).
    pub fn new(namespace: &str, name: &str) -> Self {
        if namespace.is_empty() {
            ObjectKey(name.into())
        } else {
            // Not `format!`: every GET and every applied event makes one.
            let mut key = String::with_capacity(namespace.len() + 1 + name.len());
            key.push_str(namespace);
            key.push('/');
            key.push_str(name);
            ObjectKey(key.into_boxed_str())
        }
    }

    /// Calls `f` with the key of `namespace/name` as [`ObjectKey::new`]
    /// spells it, joined on the stack when it fits (as every valid one
    /// does: a namespace has at most 63 bytes, a name 253), so that a
    /// lookup allocates nothing.
    pub fn joined<T>(namespace: &str, name: &str, f: impl FnOnce(&str) -> T) -> T {
        let mut buffer = [0u8; 320];
        let length = namespace.len() + 1 + name.len();
        if namespace.is_empty() {
            return f(name);
        }
        if length > buffer.len() {
            return f(ObjectKey::new(namespace, name).as_str());
        }
        buffer[..namespace.len()].copy_from_slice(namespace.as_bytes());
        buffer[namespace.len()] = b'/';
        buffer[namespace.len() + 1..length].copy_from_slice(name.as_bytes());
        // Two strings joined by an ASCII byte: always UTF-8.
        match std::str::from_utf8(&buffer[..length]) {
            Ok(key) => f(key),
            Err(_) => f(ObjectKey::new(namespace, name).as_str()),
        }
    }

    /// The namespace, empty for cluster-scoped objects.
    pub fn namespace(&self) -> &str {
        self.0.split_once('/').map_or("", |(ns, _)| ns)
    }

    /// The name.
    pub fn name(&self) -> &str {
        self.0.split_once('/').map_or(&self.0, |(_, name)| name)
    }

    /// `namespace/name`, as etcd orders it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One version of one object, immutable once built.
#[derive(Clone, PartialEq, Eq)]
pub struct CachedObject {
    /// Namespace and name.
    pub key: ObjectKey,
    /// `metadata.resourceVersion`, parsed.
    pub resource_version: u64,
    /// `metadata.uid`.
    pub uid: Box<str>,
    /// `metadata.generation`, when the kind keeps one.
    pub generation: Option<i64>,
    /// `metadata.labels`, sorted by key.
    pub labels: Box<[(Box<str>, Box<str>)]>,
    /// A hash of `metadata.annotations` (change predicates compare it).
    pub annotations_hash: u64,
    /// `metadata.ownerReferences[].uid`.
    pub owner_uids: Box<[Box<str>]>,
    /// Values of the configured field indexes, in their configured order
    /// (`None` where the object has no such field).
    pub fields: Box<[Option<Box<str>>]>,
    /// The whole object as JSON, `kind` and `apiVersion` first, after the
    /// transform (managedFields and configured paths removed).
    pub json: Bytes,
    /// Length of the `{"kind":…,"apiVersion":…,` prefix of `json`, so that
    /// list items can leave it out as the API server does for built-in
    /// kinds (`{` + `json[type_meta_len..]`).
    pub type_meta_len: usize,
    /// Its other encodings, made on first use, and the bytes of its strings
    /// that are not UTF-8 (see [`Encodings`]); the encodings are not in
    /// [`size`](Self::size) ([`encoded_bytes`](crate::encoded_bytes) counts
    /// them), the strings are.
    pub encodings: Encodings,
}

impl CachedObject {
    /// About the bytes this object holds: its JSON, its parsed fields and
    /// the struct (allocator overhead aside). What memory metrics add up.
    pub fn size(&self) -> usize {
        let boxed = |text: &str| text.len();
        std::mem::size_of::<CachedObject>()
            + self.json.len()
            + self.key.as_str().len()
            + self.uid.len()
            + self
                .labels
                .iter()
                .map(|(k, v)| std::mem::size_of::<(Box<str>, Box<str>)>() + k.len() + v.len())
                .sum::<usize>()
            + self
                .owner_uids
                .iter()
                .map(|uid| std::mem::size_of::<Box<str>>() + boxed(uid))
                .sum::<usize>()
            + self
                .fields
                .iter()
                .map(|f| std::mem::size_of::<Option<Box<str>>>() + f.as_deref().map_or(0, boxed))
                .sum::<usize>()
            + self.raw_strings().map_or(0, |s| s.size())
    }

    /// This object stamped with a later revision `rv`, as a DELETED event
    /// carries the last state of an object deleted at `rv` (see
    /// [`with_resource_version`](crate::raw::with_resource_version)).
    pub fn at_resource_version(&self, rv: u64) -> CachedObject {
        let json = crate::raw::with_resource_version(&self.json, rv)
            .map_or_else(|| self.json.clone(), Bytes::from);
        CachedObject {
            resource_version: rv,
            json,
            ..self.clone()
        }
    }

    /// The value of a label.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| &*self.labels[i].1)
    }

    /// The object without its type meta, as a list item of a built-in kind:
    /// write `b"{"` and then the returned bytes.
    pub fn without_type_meta(&self) -> Bytes {
        self.json.slice(self.type_meta_len..)
    }
}

impl fmt::Debug for CachedObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedObject")
            .field("key", &self.key)
            .field("resource_version", &self.resource_version)
            .field("bytes", &self.json.len())
            .finish_non_exhaustive()
    }
}

/// Whether `kind` of `api_version` is one of the API server's own Go types
/// (a built-in kind) rather than a custom resource: it has a protobuf
/// schema, or it is in a group the API server serves from Go types the
/// schema lacks (`apiextensions.k8s.io`: CustomResourceDefinitions,
/// `apiregistration.k8s.io`: APIServices). The API server's list items of
/// built-in kinds carry no `kind`/`apiVersion`; a custom resource's do, and
/// keep the key order they were written in.
pub fn builtin_kind(api_version: &str, kind: &str) -> bool {
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    matches!(group, "apiextensions.k8s.io" | "apiregistration.k8s.io")
        || crate::protobuf::message_type(api_version, kind).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_order_like_etcd_and_split_back_into_namespace_and_name() {
        let a = ObjectKey::new("a-b", "x");
        let b = ObjectKey::new("a", "x");
        assert!(a < b, "'-' sorts before '/' as in etcd");
        assert_eq!((b.namespace(), b.name()), ("a", "x"));
        let node = ObjectKey::new("", "node-1");
        assert_eq!(
            (node.namespace(), node.name(), node.as_str()),
            ("", "node-1", "node-1")
        );
    }

    #[test]
    fn a_joined_key_is_the_key_of_any_length() {
        let long = "n".repeat(400);
        for (namespace, name) in [
            ("a", "x"),
            ("", "node-1"),
            ("é-ns", "ünïcode"),
            (&"n".repeat(63), &"x".repeat(253)),
            ("a", &long),
        ] {
            let joined = ObjectKey::joined(namespace, name, str::to_string);
            assert_eq!(joined, ObjectKey::new(namespace, name).as_str());
        }
    }
}
