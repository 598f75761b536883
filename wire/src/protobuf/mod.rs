//! Kubernetes protobuf: a schema-driven transcoder between the API server's
//! JSON and its protobuf encoding, the `k8s\0` + `runtime.Unknown` envelope,
//! list bodies and watch framing.
//!
//! Used by the simulated API server to answer
//! `Accept: application/vnd.kubernetes.protobuf` from its stored JSON, and by
//! the reflector to turn a real server's protobuf back into JSON.
//!
//! # Schema
//!
//! The message table (`schema.rs`) is generated from Kubernetes' own data,
//! vendored unmodified in `wire/kubernetes` (Kubernetes 1.36; see
//! its README): the official `generated.proto` files give every message
//! (field numbers, types, `repeated`, `map`), the Go structs they are
//! generated from (`types.go`) give what Go's `encoding/json` acts on: JSON
//! names, the struct's field order (the API server's key order),
//! `omitempty`, pointer or value, `json:",inline"` embedding and `TypeMeta`;
//! k8s.io/api's round-trip fixtures give each kind's `apiVersion`. See
//! `generate.rs` for how; regenerate with
//! `UPDATE_PROTO_SCHEMA=1 cargo test -p kubecache-wire --lib protobuf::generate`.
//! Without the variable that test fails when the committed table is stale; it
//! reads only committed files, so it runs offline and with vendored
//! dependencies. Covered: all of `k8s.io/api` (every group and version),
//! `apimachinery` (`meta/v1`, `runtime`, `intstr`, `resource`) and `metrics`.
//! Not covered: `apiextensions-apiserver` (CRD objects), whose
//! `JSONSchemaPropsOr*` unions have a custom JSON form; `kube-aggregator`
//! (`APIService`), whose `.proto` no reachable package publishes; custom
//! resources have no protobuf at all.
//!
//! An API server of an older Kubernetes minor writes the bytes of its own Go
//! types: a [`MessageType`] made [`as_of`](MessageType::as_of) its
//! [`KubeVersion`] writes (in both directions) only the fields that version
//! has, with its `omitempty`s, from the field history compiled into the
//! schema (`kubernetes/history.tsv`, back to 1.28).
//!
//! # JSON <-> protobuf rules
//!
//! Both directions give the bytes the API server gives: protobuf -> JSON is
//! what Go's `encoding/json` writes for the struct Go's protobuf decoding
//! makes, JSON -> protobuf what Go's protobuf marshalling writes for the
//! struct Go's JSON decoding makes (the golden tests check both against a
//! real API server's recorded bytes). So:
//! - Keys in Go struct order; a zero value (`""`, `0`, `false`, nil, empty
//!   slice or map) of an `omitempty` field is left out, other fields are
//!   always written (`null` for a nil pointer, slice or map; a struct is
//!   never empty: `"lastState":{}`); a pointer present on the wire is
//!   written even when zero (`storageClassName: ""`, `replicas: 0`). A
//!   list's missing `items` are `[]`, as the API server writes them.
//! - On the protobuf side, every non-pointer field is written, zero or not
//!   (`generateName: ""`, `generation: 0`, the zero struct), pointers,
//!   slices and maps only when set; fields in field-number order, map
//!   entries sorted by key.
//! - `meta.v1.Time` is an RFC 3339 string with whole seconds, `MicroTime` one
//!   with 6 fractional digits, both UTC on output; Go's zero time is an empty
//!   message and `null`.
//! - `resource.Quantity` is a JSON string (kept as written, not canonicalized);
//!   `intstr.IntOrString` a number or a string; `meta.v1.Duration` a Go
//!   duration string (`1h2m3s`).
//! - `runtime.RawExtension` and `meta.v1.FieldsV1` carry their JSON value as
//!   raw bytes (decoding fails if the raw bytes are not JSON, e.g. a nested
//!   protobuf object), written to JSON as Go writes a `json.Marshaler`'s
//!   output: compacted, `<>&` and U+2028/9 escaped
//!   ([`go_json::write_compact`](crate::go_json::write_compact)).
//! - Go structs embedded with `json:",inline"` (Volume's `VolumeSource`,
//!   Probe's `ProbeHandler`, ...) are nested messages in protobuf and flat keys
//!   in JSON.
//! - `bytes` are base64 strings; `map<string, _>` are JSON objects (keys
//!   sorted on output, as Go writes them); repeated fields are arrays.
//! - `kind` and `apiVersion` of a kind's JSON are Go's `TypeMeta`, not part of
//!   the protobuf message: they are skipped on input, and written first on
//!   output when a [`TypeMeta`] is given (and on a StatefulSet's
//!   `volumeClaimTemplates`, which the API server always gives theirs).
//!
//! What JSON -> protobuf -> JSON does not keep is what Go does not keep
//! either: omitempty zero values, empty arrays and objects (nil), `Time`
//! fractions, map key order.
//!
//! # Strings that are not UTF-8 (issue 41, section 3)
//!
//! A Go string holds any bytes, and the API server keeps them: a ConfigMap
//! created over protobuf with `41 FF FE 42` in its data comes back in
//! protobuf with those bytes, in JSON as `"A\ufffd\ufffdB"` (one `\ufffd`
//! per byte that starts no UTF-8 sequence, as Go's `utf8.DecodeRune` reads
//! them: `E2 82` is two) and in YAML as U+FFFD itself (`versions/` group
//! `invalid-utf8`; `wire/tests/golden_transcode.rs` holds both directions
//! to its recorded bytes). kubecache keeps Go's semantics so:
//! - Protobuf -> JSON writes Go's replacement and reports each string it
//!   replaced bytes in, with its bytes and its place: [`RawStrings`], a
//!   JSON Pointer (RFC 6901) into the JSON per string (`/data/fffe`,
//!   `/metadata/annotations/golden-v~1raw-annotation`; a map key's names
//!   its entry); [`proto_to_json_with_strings`]. The escaper finds a
//!   replacement anyway; the place is not tracked on the way down but
//!   built as the decoder returns through the levels above a replaced
//!   string (`decode.rs`): an object whose strings are all UTF-8 costs a
//!   length comparison per field and allocates nothing more.
//! - The JSON stays the bytes served, as before: every JSON path (gets,
//!   lists, watch lines, Tables, metadata-only, pretty JSON and YAML,
//!   which is written from it, state files, the scanner and selectors)
//!   reads and writes it with no scan or rewrite.
//! - Only an object that has such strings keeps them, beside its JSON:
//!   an `Option<Arc<RawStrings>>` in [`Encodings`](crate::Encodings), 8
//!   bytes in every object and `None` in every object whose strings are
//!   UTF-8, which then costs nothing more (an `Arc` rather than the `Box`
//!   first planned, as big and shared by a restamp's clone, a DELETED
//!   event's last state, instead of copied). State files keep them too.
//! - JSON -> protobuf takes them ([`json_to_proto_with_strings`]): the
//!   encoder keeps the JSON Pointer of where it is only when given some
//!   (otherwise a `None` check per key and array element), and writes a
//!   string's bytes where one of them stands for the JSON's string: at
//!   its place, and only while the JSON there still holds its replacement
//!   (a place a transform removed is not met, a value changed since is
//!   not replaced back). A map whose keys it writes so is sorted by their
//!   bytes, as Go sorts it.
//!
//! Who keeps them: the reflector, from protobuf list items and watch
//! events (`reflector/src/upstream/wire.rs`; JSON cannot carry the bytes,
//! so with `wire: json` protobuf answers carry `EF BF BD` for each), and
//! the cache's own requests (a cold GET's fetch, the GET of an object
//! outside a restricted cache, asked in protobuf when answered in it);
//! the server's protobuf answers (gets, lists, watch frames, metadata
//! only) are encoded with them (`CachedObject::protobuf`,
//! `metadata_protobuf`). The sim keeps a protobuf create's or update's
//! beside its stored JSON through this crate (`loadtest/src/sim/object.rs`:
//! its JSON is written through protobuf, so it holds Go's `\ufffd`), and
//! through a write as Go keeps them (a strategic merge patch, an apply, a
//! status write keep them; a JSON or merge patch, which Go makes on the
//! object's JSON, loses them).
//!
//! Not kept: two keys of one map that differ only in bytes that are not
//! UTF-8 are one key in JSON (Go writes both with the same replacement),
//! so one place: both are written back with the first's bytes. Rejected:
//! raw bytes (or `\udcXX` escapes) inside the kept JSON, which every JSON
//! path would have to scan and rewrite on every answer; and keeping every
//! object's upstream protobuf, about 60% more memory for all objects.
//!
//! Unknown JSON keys and unknown protobuf field numbers are errors naming the
//! field path (`spec.containers[0].foo`): the caller decides (e.g. falls back
//! to JSON for a server newer than the schema). Decoding never panics on
//! malformed input.
//!
//! # Performance
//!
//! JSON -> protobuf is a single streaming serde_json pass writing into the
//! output (no `serde_json::Value`); each message is reassembled in field
//! order once it ends, and nested lengths are patched in place. Protobuf ->
//! JSON writes straight into the output buffer. Neither allocates per field,
//! except JSON keys with escapes and out-of-order map entries.

mod decode;
mod desc;
mod encode;
mod envelope;
mod error;
#[cfg(test)]
mod generate;
mod raw_strings;
#[rustfmt::skip]
mod schema;
#[cfg(test)]
mod tests;
mod text;
mod version;
mod wire;

use std::fmt;

pub use envelope::{
    ListMeta, ListParts, MAGIC, Unknown, WatchEvent, WatchFrameDecoder, decode_list,
    decode_unknown, encode_list, encode_list_item, encode_list_unknown, encode_list_unknown_head,
    encode_unknown, encode_unknown_into, encode_unknown_tail, encode_watch_event,
    encode_watch_event_into,
};
pub use error::ProtoError;
pub use raw_strings::{RawString, RawStrings};
pub use version::KubeVersion;

use desc::Message;
use schema::{KINDS, MESSAGES};

/// A message type of the Kubernetes schema, as the Go types of one
/// Kubernetes version have it (the schema's own unless [`as_of`](Self::as_of)
/// says otherwise): a cheap handle into the table.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct MessageType {
    index: u16,
    version: KubeVersion,
}

impl MessageType {
    fn new(index: u16) -> MessageType {
        MessageType {
            index,
            version: KubeVersion::NEWEST,
        }
    }

    /// The same message as the Go types of `version` have it: what an API
    /// server of that version writes and reads (see [`KubeVersion`]).
    pub fn as_of(self, version: KubeVersion) -> MessageType {
        MessageType { version, ..self }
    }

    /// The Kubernetes version it is written as.
    pub fn version(self) -> KubeVersion {
        self.version
    }

    /// The full protobuf name, e.g. `k8s.io.api.core.v1.Pod`.
    pub fn full_name(self) -> &'static str {
        self.message().name
    }

    /// The message type with this full protobuf name.
    pub fn from_full_name(name: &str) -> Option<MessageType> {
        MESSAGES
            .iter()
            .position(|m| m.name == name)
            .and_then(|i| u16::try_from(i).ok())
            .map(MessageType::new)
    }

    fn message(self) -> &'static Message {
        &MESSAGES[usize::from(self.index)]
    }
}

impl fmt::Debug for MessageType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MessageType({} as of {})",
            self.full_name(),
            self.version
        )
    }
}

/// The message type of a kind, e.g. `("v1", "Pod")`, `("v1", "PodList")`,
/// `("apps/v1", "Deployment")`, `("v1", "Status")`. `None` for kinds without
/// protobuf (custom resources, CRDs themselves).
pub fn message_type(api_version: &str, kind: &str) -> Option<MessageType> {
    KINDS
        .binary_search_by(|(v, k, _)| (*v, *k).cmp(&(api_version, kind)))
        .ok()
        .map(|i| MessageType::new(KINDS[i].2))
}

/// `kind` and `apiVersion` to write at the start of a JSON object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypeMeta<'a> {
    /// e.g. `v1`, `apps/v1`.
    pub api_version: &'a str,
    /// e.g. `Pod`.
    pub kind: &'a str,
}

/// Encodes a JSON object as the protobuf message `ty` (raw message bytes, no
/// envelope). Top-level `kind` and `apiVersion` are skipped.
pub fn json_to_proto(ty: MessageType, json: &[u8]) -> Result<Vec<u8>, ProtoError> {
    let mut out = Vec::with_capacity(json.len() / 2);
    encode::encode(ty.message(), ty.version, json, None, &mut out)?;
    Ok(out)
}

/// [`json_to_proto`], appending to `out` (left unchanged on error).
pub fn json_to_proto_into(
    ty: MessageType,
    json: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), ProtoError> {
    encode::encode(ty.message(), ty.version, json, None, out)
}

/// [`json_to_proto_into`], writing the bytes of `strings` (the object's
/// strings that are not UTF-8, as [`proto_to_json_with_strings`] reported
/// them) in place of the replacements the JSON holds: the message the
/// JSON was decoded from. A string of `strings` whose place the JSON no
/// longer has, or has with another value, is not written.
pub fn json_to_proto_with_strings(
    ty: MessageType,
    json: &[u8],
    strings: Option<&RawStrings>,
    out: &mut Vec<u8>,
) -> Result<(), ProtoError> {
    encode::encode(ty.message(), ty.version, json, strings, out)
}

/// Decodes protobuf message bytes of type `ty` to a JSON object (without
/// `kind`/`apiVersion`; see [`proto_to_json_into`]).
pub fn proto_to_json(ty: MessageType, proto: &[u8]) -> Result<Vec<u8>, ProtoError> {
    let mut out = Vec::with_capacity(proto.len() * 2);
    decode::decode(ty.message(), ty.version, proto, None, &mut out)?;
    Ok(out)
}

/// Appends the JSON form of protobuf message bytes of type `ty` to `out`
/// (left unchanged on error), starting the object with `"kind"` and
/// `"apiVersion"` when `type_meta` is given, as the API server does.
/// Strings that are not UTF-8 are written as Go writes them, their bytes
/// lost: see [`proto_to_json_with_strings`] to keep them.
pub fn proto_to_json_into(
    ty: MessageType,
    proto: &[u8],
    type_meta: Option<TypeMeta<'_>>,
    out: &mut Vec<u8>,
) -> Result<(), ProtoError> {
    proto_to_json_with_strings(ty, proto, type_meta, out).map(drop)
}

/// [`proto_to_json_into`], and the strings that are not UTF-8, with their
/// bytes and their places in the JSON (`None` when all are UTF-8, the
/// common case, which allocates nothing more): what
/// [`json_to_proto_with_strings`] needs to write the message back.
pub fn proto_to_json_with_strings(
    ty: MessageType,
    proto: &[u8],
    type_meta: Option<TypeMeta<'_>>,
    out: &mut Vec<u8>,
) -> Result<Option<RawStrings>, ProtoError> {
    let prefix = type_meta.map(|t| decode::TypeMetaPrefix {
        api_version: t.api_version,
        kind: t.kind,
    });
    decode::decode(ty.message(), ty.version, proto, prefix, out)
}

/// A message whose only field is `tag`, holding the message `inner`: e.g.
/// `PartialObjectMetadata{metadata: ObjectMeta}` from the encoded
/// `ObjectMeta`.
pub fn wrap_message(tag: u32, inner: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(wire::bytes_field_len(tag, inner.len()));
    wire::put_bytes_field(&mut out, tag, inner);
    out
}

/// An object's JSON, and the bytes of its strings that are not UTF-8
/// (see [`proto_to_json_with_strings`]).
pub type JsonWithStrings = (Vec<u8>, Option<RawStrings>);

impl Unknown<'_> {
    /// The JSON form of the enveloped object, with its `kind` and `apiVersion`
    /// first. `None` if the schema has no message for the kind.
    pub fn to_json(&self) -> Option<Result<Vec<u8>, ProtoError>> {
        self.to_json_with_strings()
            .map(|result| result.map(|(json, _)| json))
    }

    /// [`to_json`](Self::to_json), and its strings that are not UTF-8 (see
    /// [`proto_to_json_with_strings`]).
    pub fn to_json_with_strings(&self) -> Option<Result<JsonWithStrings, ProtoError>> {
        let ty = message_type(self.api_version, self.kind)?;
        let mut out = Vec::with_capacity(self.raw.len() * 2);
        let type_meta = TypeMeta {
            api_version: self.api_version,
            kind: self.kind,
        };
        Some(
            proto_to_json_with_strings(ty, self.raw, Some(type_meta), &mut out)
                .map(|strings| (out, strings)),
        )
    }
}
