//! JSON from the API server, decoded no further than kubecache needs.
//!
//! Typed decoding is where the peers spend most of their time to sync, and
//! their typed stores hold 3.5–10× the JSON bytes. kubecache instead scans
//! bytes: a list page is cut into item slices ([`parse_list`]), a watch line
//! into its type and object slice ([`parse_watch_line`]), and each object is
//! turned into its stored form ([`decode_object`]) in one pass that reads a
//! handful of fields and copies everything else byte for byte.
//!
//! # What is accepted
//!
//! Exactly what serde_json accepts (RFC 8259): strings must be valid UTF-8
//! without raw control characters, with well-formed escapes and paired
//! surrogates; numbers follow the JSON grammar; containers nest at most 127
//! deep (serde_json's limit). Every byte is validated even where nothing is read from it, because
//! it may be copied to clients. Malformed or truncated input is a
//! [`DecodeError`] naming the byte offset and, for syntax errors, the JSON
//! path of the innermost entry (found by a second, tracking walk on the
//! error path only). Nothing panics, and every loop advances or stops.
//!
//! # Cost
//!
//! Strings are scanned eight bytes at a time; only strings with a backslash
//! are unescaped (by serde_json), only the fields that are read are
//! allocated, and the output is written with one copy per run of untouched
//! entries. See the `throughput` test (ignored; run it in release) for MB/s
//! against `serde_json::Value` on the same bytes.

mod list;
mod object;
mod path;
#[cfg(test)]
mod tests;
mod transform;
mod watch;

pub use crate::decode_error::DecodeError;
pub use list::{ListBody, parse_list};

pub use object::{decode_object, parse_resource_version, peek_object_key};
pub use path::{FieldPath, FieldPathError};
pub use transform::Transform;
pub use watch::{Bookmark, ChangeType, WatchEventType, WatchLine, parse_watch_line};
