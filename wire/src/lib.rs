//! The Kubernetes API on the wire, as kubecache reads and writes it.
//!
//! What the reflector, the server and the simulated API server share, and
//! nothing else: objects as bytes ([`CachedObject`], decoded from JSON by a
//! scanner that copies what it does not read), list bodies and watch events,
//! [`Status`], label, field and shard selectors, the request options of list and
//! watch with continue tokens, and the protobuf transcoder with its envelope.
//! No I/O: no HTTP client, no server, no store.

pub mod ascii;
pub mod continue_token;
mod decode;
mod decode_error;
pub mod go_json;
pub mod list_options;
pub mod media;
mod object;
pub mod pretty;
pub mod protobuf;
mod raw;
mod scan;
mod selector;
mod status;
pub mod yaml;

pub use decode::{
    Bookmark, ChangeType, DecodeError, FieldPath, FieldPathError, ListBody, Transform,
    WatchEventType, WatchLine, decode_object, parse_list, parse_resource_version, parse_watch_line,
    peek_object_key,
};
pub use media::Encoding;
pub use object::{
    CachedObject, EncodedBytes, Encodings, METADATA_API_VERSION, METADATA_JSON_PREFIX, ObjectKey,
    builtin_kind, encoded_bytes, partial_object_metadata,
};
pub use raw::with_resource_version;
pub use selector::{
    FieldOperator, FieldRequirement, FieldSelector, LabelOperator, LabelRequirement, LabelSelector,
    SelectorError, ShardField, ShardRange, ShardSelector, fnv1a_64, go_quote,
};
pub use status::{Status, StatusCause, StatusDetails, StatusMetadata};
