//! The encodings of an object other than its JSON: its protobuf message and
//! its `PartialObjectMetadata` (JSON and protobuf), as the API server answers
//! clients that ask for them.
//!
//! Each is made from the object's JSON on first use and kept beside it
//! ([`Encodings`], in the [`CachedObject`]), so that every list, get and
//! watch of one object version shares one encoding, as they share its JSON.
//! Objects nobody asks for in protobuf never pay for it.
//!
//! Memory: at most one protobuf message and one metadata message per object
//! version held (the store's, and the older versions that held list pages
//! and the event log keep alive), dropped with it. A protobuf message is
//! about 60% of its JSON; a metadata message is the size of the object's
//! metadata. [`encoded_bytes`] says what they hold at the moment, process
//! wide. The metadata JSON of a built-in kind is not kept: it is a slice of
//! the object's JSON between a fixed prefix and a `}`, and only the position
//! of that slice is cached. A custom resource's is kept (see
//! [`CachedObject::metadata_json`]).
//!
//! Beside them, the one thing of the object its JSON cannot hold: the
//! bytes of its strings that are not UTF-8 ([`RawStrings`], from a
//! protobuf upstream; see the module doc of [`protobuf`], "Strings that
//! are not UTF-8"), which the protobuf encodings write back. An
//! `Option<Arc<RawStrings>>`: 8 bytes in every object (a
//! [`CachedObject`] is 296 bytes, 288 without it), `None` in every object
//! whose strings are all UTF-8, which then costs nothing more; kept by a
//! clone (a restamp is one), as they are the object's, not a cache.

use std::ops::Range;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use std::sync::Arc;

use bytes::Bytes;

use crate::CachedObject;
use crate::protobuf::{self, MessageType, ProtoError, RawStrings};

/// `apiVersion` of `PartialObjectMetadata` and its list.
pub const METADATA_API_VERSION: &str = "meta.k8s.io/v1";

/// What goes before an object's `metadata` in its `PartialObjectMetadata`
/// JSON; a `}` goes after.
pub const METADATA_JSON_PREFIX: &[u8] =
    br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":"#;

/// Bytes held by the protobuf messages and the metadata encodings of every
/// object alive.
static PROTOBUF_BYTES: AtomicUsize = AtomicUsize::new(0);
static METADATA_BYTES: AtomicUsize = AtomicUsize::new(0);

/// The bytes the encodings made on demand hold now, process wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodedBytes {
    /// Objects' protobuf messages.
    pub protobuf: usize,
    /// Objects' `PartialObjectMetadata` protobuf messages, and custom
    /// resources' metadata JSON in `ObjectMeta`'s order.
    pub metadata: usize,
}

/// The bytes the encodings made on demand hold now, process wide.
pub fn encoded_bytes() -> EncodedBytes {
    EncodedBytes {
        protobuf: PROTOBUF_BYTES.load(Ordering::Relaxed),
        metadata: METADATA_BYTES.load(Ordering::Relaxed),
    }
}

/// The encodings of one object version made so far, and the bytes of its
/// strings that are not UTF-8. A clone starts without encodings (a clone
/// is a new version, or a copy that makes its own) and keeps the strings;
/// two are equal when their strings are (the encodings are a cache of the
/// rest of the object).
#[derive(Default)]
pub struct Encodings {
    protobuf: OnceLock<Bytes>,
    metadata_protobuf: OnceLock<Bytes>,
    /// Where `metadata` lies in the JSON; empty when it has none.
    metadata: OnceLock<Range<u32>>,
    /// A custom resource's metadata in `ObjectMeta`'s field order.
    ordered_metadata: OnceLock<Bytes>,
    /// The strings that are not UTF-8, shared by the object's clones.
    raw_strings: Option<Arc<RawStrings>>,
}

impl Clone for Encodings {
    fn clone(&self) -> Self {
        let mut clone = Encodings::default();
        clone.raw_strings.clone_from(&self.raw_strings);
        clone
    }
}

impl PartialEq for Encodings {
    fn eq(&self, other: &Self) -> bool {
        self.raw_strings == other.raw_strings
    }
}

impl Eq for Encodings {}

impl Drop for Encodings {
    fn drop(&mut self) {
        if let Some(b) = self.protobuf.get() {
            PROTOBUF_BYTES.fetch_sub(b.len(), Ordering::Relaxed);
        }
        for b in [self.metadata_protobuf.get(), self.ordered_metadata.get()]
            .into_iter()
            .flatten()
        {
            METADATA_BYTES.fetch_sub(b.len(), Ordering::Relaxed);
        }
    }
}

/// The value of `cell`, made by `make` if it has none yet (a failure is
/// not kept: the next call tries again), counted in `counter`.
fn get_or_make(
    cell: &OnceLock<Bytes>,
    counter: &AtomicUsize,
    make: impl FnOnce() -> Result<Vec<u8>, ProtoError>,
) -> Result<Bytes, ProtoError> {
    if let Some(bytes) = cell.get() {
        return Ok(bytes.clone());
    }
    let made = Bytes::from(make()?);
    let mut won = false;
    let bytes = cell.get_or_init(|| {
        won = true;
        made
    });
    if won {
        counter.fetch_add(bytes.len(), Ordering::Relaxed);
    }
    Ok(bytes.clone())
}

impl CachedObject {
    /// This object with `strings`, the bytes of its strings that are not
    /// UTF-8 (as [`protobuf::proto_to_json_with_strings`] reported them for
    /// its JSON), which its protobuf encodings write.
    pub fn with_raw_strings(mut self, strings: Option<RawStrings>) -> CachedObject {
        self.encodings.raw_strings = strings.map(Arc::new);
        self
    }

    /// The bytes of its strings that are not UTF-8; `None` for almost
    /// every object.
    pub fn raw_strings(&self) -> Option<&RawStrings> {
        self.encodings.raw_strings.as_deref()
    }

    /// The object's protobuf message of type `ty` (no envelope), encoded
    /// from its JSON (and its [raw strings](Self::raw_strings)) on first
    /// use.
    ///
    /// # Errors
    ///
    /// What does not encode as `ty` (a field the schema does not know).
    pub fn protobuf(&self, ty: MessageType) -> Result<Bytes, ProtoError> {
        get_or_make(&self.encodings.protobuf, &PROTOBUF_BYTES, || {
            let mut out = Vec::with_capacity(self.json.len() / 2);
            protobuf::json_to_proto_with_strings(ty, &self.json, self.raw_strings(), &mut out)?;
            Ok(out)
        })
    }

    /// The object's `metadata` JSON (`{}` when it has none), a slice of its
    /// JSON.
    pub fn metadata(&self) -> Bytes {
        let range = self.encodings.metadata.get_or_init(|| {
            crate::raw::metadata_span(&self.json)
                .and_then(|r| Some(u32::try_from(r.start).ok()?..u32::try_from(r.end).ok()?))
                .unwrap_or(0..0)
        });
        if range.is_empty() {
            return Bytes::from_static(b"{}");
        }
        self.json.slice(range.start as usize..range.end as usize)
    }

    /// The object as a `PartialObjectMetadata` in JSON: the pieces to write
    /// one after the other.
    ///
    /// The API server writes it from a Go `ObjectMeta`, its keys in the
    /// struct's field order. `typed`: the object's JSON came from a typed
    /// object (a built-in kind) and its metadata is in that order already,
    /// so it is sent as it is stored. Otherwise (a custom resource, whose
    /// JSON the API server writes with sorted keys) the metadata is written
    /// again in `ObjectMeta`'s order through its protobuf message, on first
    /// use, and kept; metadata that does not fit `ObjectMeta` is sent as
    /// stored.
    pub fn metadata_json(&self, typed: bool) -> [Bytes; 3] {
        let metadata = if typed {
            self.metadata()
        } else {
            get_or_make(&self.encodings.ordered_metadata, &METADATA_BYTES, || {
                let proto = protobuf::json_to_proto(object_meta(), &self.metadata())?;
                protobuf::proto_to_json(object_meta(), &proto)
            })
            .unwrap_or_else(|_| self.metadata())
        };
        [
            Bytes::from_static(METADATA_JSON_PREFIX),
            metadata,
            Bytes::from_static(b"}"),
        ]
    }

    /// The object as a `PartialObjectMetadata` protobuf message (no
    /// envelope), encoded on first use.
    ///
    /// # Errors
    ///
    /// Metadata the `ObjectMeta` schema does not know.
    pub fn metadata_protobuf(&self) -> Result<Bytes, ProtoError> {
        get_or_make(&self.encodings.metadata_protobuf, &METADATA_BYTES, || {
            let strings = self.raw_strings().and_then(|s| s.within("/metadata"));
            let mut meta = Vec::new();
            protobuf::json_to_proto_with_strings(
                object_meta(),
                &self.metadata(),
                strings.as_ref(),
                &mut meta,
            )?;
            Ok(protobuf::wrap_message(1, &meta))
        })
    }
}

/// The message type of `meta.k8s.io/v1` `PartialObjectMetadata`
/// (`metadata=1 ObjectMeta`, nothing else).
pub fn partial_object_metadata() -> MessageType {
    static TYPE: OnceLock<MessageType> = OnceLock::new();
    *TYPE.get_or_init(|| meta_v1("PartialObjectMetadata"))
}

fn object_meta() -> MessageType {
    static TYPE: OnceLock<MessageType> = OnceLock::new();
    *TYPE.get_or_init(|| meta_v1("ObjectMeta"))
}

fn meta_v1(name: &str) -> MessageType {
    MessageType::from_full_name(&format!("k8s.io.apimachinery.pkg.apis.meta.v1.{name}"))
        .expect("the schema has meta.k8s.io/v1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Transform, decode_object};

    fn pod(json: &str) -> CachedObject {
        decode_object(json.as_bytes(), "Pod", "v1", &Transform::default()).unwrap()
    }

    #[test]
    fn metadata_is_the_objects_own_metadata_after_a_fixed_prefix() {
        let object = pod(
            r#"{"metadata":{"name":"a","namespace":"n","resourceVersion":"7","labels":{"x":"y"}},"spec":{"metadata":{}}}"#,
        );
        assert_eq!(
            object.metadata_json(true).concat(),
            br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"a","namespace":"n","resourceVersion":"7","labels":{"x":"y"}}}"#
        );
    }

    #[test]
    fn a_custom_resources_metadata_is_written_as_go_writes_object_meta() {
        // ObjectMeta's field order; its zero creationTimestamp is null.
        let widget = decode_object(
            br#"{"metadata":{"labels":{"x":"y"},"name":"a","namespace":"n","resourceVersion":"7"}}"#,
            "Widget",
            "example.com/v1",
            &Transform::default(),
        )
        .unwrap();
        assert_eq!(
            widget.metadata_json(false).concat(),
            br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"a","namespace":"n","resourceVersion":"7","creationTimestamp":null,"labels":{"x":"y"}}}"#
        );
    }

    #[test]
    fn strings_that_are_not_utf8_are_written_back_by_every_protobuf_encoding_and_kept_by_a_restamp()
    {
        let ty = protobuf::message_type("v1", "ConfigMap").unwrap();
        let json = br#"{"metadata":{"name":"a","namespace":"n","resourceVersion":"7","annotations":{"r":"annXval"}},"data":{"fffe":"AXXB"}}"#;
        let mut proto = protobuf::json_to_proto(ty, json).unwrap();
        for (from, to) in [
            (&b"AXXB"[..], &b"A\xff\xfeB"[..]),
            (b"annXval", b"ann\xffval"),
        ] {
            let at = proto.windows(from.len()).position(|w| w == from).unwrap();
            proto[at..at + from.len()].copy_from_slice(to);
        }
        let mut decoded = Vec::new();
        let strings = protobuf::proto_to_json_with_strings(ty, &proto, None, &mut decoded).unwrap();
        let plain = decode_object(&decoded, "ConfigMap", "v1", &Transform::default()).unwrap();
        let object = plain.clone().with_raw_strings(strings);
        assert!(plain.raw_strings().is_none() && object.raw_strings().is_some());
        assert!(object != plain, "objects with other strings differ");
        assert!(object.size() > plain.size());
        assert_eq!(object.protobuf(ty).unwrap(), proto);
        assert_ne!(plain.protobuf(ty).unwrap(), proto, "U+FFFD without them");
        let meta = object.metadata_protobuf().unwrap();
        assert!(meta.windows(7).any(|w| w == b"ann\xffval"));
        // A restamp (a DELETED event's last state) keeps them.
        let restamped = object.at_resource_version(9);
        assert_eq!(restamped.raw_strings(), object.raw_strings());
        let again = restamped.protobuf(ty).unwrap();
        assert!(again.windows(4).any(|w| w == b"A\xff\xfeB"));
        // Nothing more than the `Option` in an object without them.
        assert_eq!(std::mem::size_of::<Option<Arc<RawStrings>>>(), 8);
    }

    #[test]
    fn encodings_are_made_once_counted_while_alive_and_not_cloned() {
        let ty = protobuf::message_type("v1", "Pod").unwrap();
        let object = pod(r#"{"metadata":{"name":"a","namespace":"n","resourceVersion":"7"}}"#);
        let first = object.protobuf(ty).unwrap();
        let again = object.protobuf(ty).unwrap();
        assert_eq!(first.as_ptr(), again.as_ptr(), "made once, then shared");
        let meta = object.metadata_protobuf().unwrap();
        let decoded = protobuf::proto_to_json(partial_object_metadata(), &meta).unwrap();
        assert_eq!(
            decoded,
            br#"{"metadata":{"name":"a","namespace":"n","resourceVersion":"7","creationTimestamp":null}}"#
        );
        let copy = object.clone();
        assert!(
            copy.encodings.protobuf.get().is_none(),
            "a clone starts empty"
        );
        // Other tests run beside this one: the counter holds at least ours.
        assert!(encoded_bytes().protobuf >= first.len());
        assert!(encoded_bytes().metadata >= meta.len());
    }
}
