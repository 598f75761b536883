//! [`RawStrings`]: the strings of one object that are not UTF-8, kept as
//! their bytes beside the object's JSON, which holds Go's replacement of
//! them (see the module doc of [`protobuf`](super), "Strings that are not
//! UTF-8").

use std::fmt;

use super::error::ProtoError;
use super::wire::{Fields, VARINT, WireValue, put_bytes_field, put_key};
use crate::go_json;

/// The strings of one object whose bytes are not UTF-8, each with its
/// place in the object's JSON: what the protobuf decoder replaced
/// ([`proto_to_json_with_strings`](super::proto_to_json_with_strings)),
/// and what the encoder writes back as bytes in place of the replacement
/// ([`json_to_proto_with_strings`](super::json_to_proto_with_strings)).
///
/// Never empty: an object whose strings are all UTF-8 has none (`None`).
#[derive(Clone, PartialEq, Eq)]
pub struct RawStrings {
    strings: Box<[RawString]>,
}

/// One string that is not UTF-8.
#[derive(Clone, PartialEq, Eq)]
pub struct RawString {
    /// Where it is: a JSON Pointer (RFC 6901) into the object's JSON, of the
    /// value, or for a map key, of its entry. A token is the key as the
    /// JSON has it (Go's replacement, for a key that is not UTF-8 itself).
    pointer: Box<str>,
    /// A map key rather than a value.
    key: bool,
    /// Its bytes.
    bytes: Box<[u8]>,
}

impl RawString {
    /// The string value at `pointer` (a JSON Pointer) is `bytes`.
    pub fn value(pointer: impl Into<Box<str>>, bytes: impl Into<Box<[u8]>>) -> RawString {
        RawString {
            pointer: pointer.into(),
            key: false,
            bytes: bytes.into(),
        }
    }

    /// The key of the map entry at `pointer` (a JSON Pointer whose last
    /// token is the key as the JSON has it) is `bytes`.
    pub fn key(pointer: impl Into<Box<str>>, bytes: impl Into<Box<[u8]>>) -> RawString {
        RawString {
            pointer: pointer.into(),
            key: true,
            bytes: bytes.into(),
        }
    }

    /// Where it is (see [`RawString::value`] and [`RawString::key`]).
    pub fn pointer(&self) -> &str {
        &self.pointer
    }

    /// Whether it is a map key.
    pub fn is_key(&self) -> bool {
        self.key
    }

    /// Its bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The string the JSON holds in its place: Go's replacement of
    /// [`bytes`](Self::bytes) ([`go_json::replaced`]).
    pub fn replaced(&self) -> String {
        go_json::replaced(&self.bytes)
    }

    /// Whether it stands for `json`, the string found at its place.
    fn stands_for(&self, json: &str) -> bool {
        self.replaced() == json
    }
}

impl fmt::Debug for RawString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = if self.key { "key" } else { "value" };
        write!(f, "{what} {:?} = {:02x?}", self.pointer, self.bytes)
    }
}

impl RawStrings {
    /// `strings`, or `None` when there are none.
    pub fn new(strings: Vec<RawString>) -> Option<RawStrings> {
        (!strings.is_empty()).then(|| RawStrings {
            strings: strings.into_boxed_slice(),
        })
    }

    /// The strings, in the order the decoder met them.
    pub fn iter(&self) -> impl Iterator<Item = &RawString> {
        self.strings.iter()
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.strings.len()
    }

    /// Always false (kept for the `len` convention).
    pub fn is_empty(&self) -> bool {
        self.strings.is_empty()
    }

    /// About the bytes held, the struct included.
    pub fn size(&self) -> usize {
        std::mem::size_of::<RawStrings>()
            + self
                .strings
                .iter()
                .map(|s| std::mem::size_of::<RawString>() + s.pointer.len() + s.bytes.len())
                .sum::<usize>()
    }

    /// The strings under `pointer` (a JSON Pointer, `""` for all), with
    /// their pointers made relative to it: those of a part of the object
    /// encoded alone (its `metadata`).
    pub fn within(&self, pointer: &str) -> Option<RawStrings> {
        let strings = self
            .strings
            .iter()
            .filter_map(|s| {
                let rest = s.pointer.strip_prefix(pointer)?;
                (rest.starts_with('/')).then(|| RawString {
                    pointer: rest.into(),
                    ..s.clone()
                })
            })
            .collect();
        RawStrings::new(strings)
    }

    /// These strings, then those of `other` at places these do not name:
    /// an object made of two (a status written over an object).
    pub fn or(&self, other: &RawStrings) -> RawStrings {
        let mut strings = self.strings.to_vec();
        for s in other.iter() {
            if !self
                .strings
                .iter()
                .any(|mine| mine.pointer == s.pointer && mine.key == s.key)
            {
                strings.push(s.clone());
            }
        }
        RawStrings {
            strings: strings.into_boxed_slice(),
        }
    }

    /// The bytes of the string value `json` found at `pointer`, if one of
    /// these stands for it (its replacement is `json`: a value changed
    /// since is not replaced back).
    pub(crate) fn value_at(&self, pointer: &str, json: &str) -> Option<&[u8]> {
        self.find(false, pointer, json)
    }

    /// The bytes of the key `json` of the map entry at `pointer`, likewise.
    pub(crate) fn key_at(&self, pointer: &str, json: &str) -> Option<&[u8]> {
        self.find(true, pointer, json)
    }

    fn find(&self, key: bool, pointer: &str, json: &str) -> Option<&[u8]> {
        self.strings
            .iter()
            .find(|s| s.key == key && *s.pointer == *pointer && s.stands_for(json))
            .map(|s| &*s.bytes)
    }

    /// The strings as bytes, to keep them on disk: a protobuf message of
    /// `repeated RawString strings = 1`, each `{string pointer = 1; bytes
    /// bytes = 2; bool key = 3}` (`key` written only when true).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut one = Vec::new();
        for s in self.iter() {
            one.clear();
            put_bytes_field(&mut one, 1, s.pointer.as_bytes());
            put_bytes_field(&mut one, 2, &s.bytes);
            if s.key {
                put_key(&mut one, 3, VARINT);
                one.push(1);
            }
            put_bytes_field(&mut out, 1, &one);
        }
        out
    }

    /// Strings written by [`to_bytes`](Self::to_bytes); `None` for no
    /// bytes.
    ///
    /// # Errors
    ///
    /// Bytes [`to_bytes`](Self::to_bytes) does not write.
    pub fn from_bytes(bytes: &[u8]) -> Result<Option<RawStrings>, ProtoError> {
        let malformed = |what: &str| ProtoError::malformed(format!("raw strings: {what}"));
        let mut strings = Vec::new();
        for item in Fields::new(bytes) {
            let (1, WireValue::Len(one)) = item.map_err(ProtoError::malformed)? else {
                return Err(malformed("not a list of strings"));
            };
            let mut string = RawString::value("", []);
            for field in Fields::new(one) {
                match field.map_err(ProtoError::malformed)? {
                    (1, WireValue::Len(p)) => {
                        string.pointer = std::str::from_utf8(p)
                            .map_err(|_| malformed("a pointer is not UTF-8"))?
                            .into();
                    }
                    (2, WireValue::Len(b)) => string.bytes = b.into(),
                    (3, WireValue::Varint(k)) => string.key = k != 0,
                    _ => return Err(malformed("an unknown field")),
                }
            }
            strings.push(string);
        }
        Ok(RawStrings::new(strings))
    }
}

impl fmt::Debug for RawStrings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.strings.iter()).finish()
    }
}

/// Appends `/` and `token` escaped as a JSON Pointer token (`~` as `~0`,
/// `/` as `~1`).
pub(crate) fn push_token(pointer: &mut String, token: &str) {
    pointer.push('/');
    if !token.contains(['~', '/']) {
        pointer.push_str(token);
        return;
    }
    for c in token.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_escape_tildes_and_slashes_as_rfc_6901() {
        let mut pointer = String::new();
        push_token(&mut pointer, "metadata");
        push_token(&mut pointer, "annotations");
        push_token(&mut pointer, "golden-v/raw~annotation");
        assert_eq!(pointer, "/metadata/annotations/golden-v~1raw~0annotation");
        let value =
            serde_json::json!({"metadata": {"annotations": {"golden-v/raw~annotation": "x"}}});
        assert_eq!(value.pointer(&pointer), Some(&serde_json::json!("x")));
    }

    #[test]
    fn strings_round_trip_through_bytes_and_are_found_where_they_stand() {
        let strings = RawStrings::new(vec![
            RawString::value("/data/fffe", *b"A\xff\xfeB"),
            RawString::key("/data/\u{fffd}", *b"\xe2"),
            RawString::value("/metadata/annotations/a", *b"ann\xffval"),
        ])
        .unwrap();
        let bytes = strings.to_bytes();
        assert_eq!(
            RawStrings::from_bytes(&bytes).unwrap(),
            Some(strings.clone())
        );
        assert_eq!(RawStrings::from_bytes(&[]).unwrap(), None);
        assert!(RawStrings::from_bytes(b"\x0a\x02\x20\x01").is_err());
        assert_eq!(
            strings.value_at("/data/fffe", "A\u{fffd}\u{fffd}B"),
            Some(&b"A\xff\xfeB"[..])
        );
        // A value changed since is not replaced back, and keys are keys.
        assert_eq!(strings.value_at("/data/fffe", "AB"), None);
        assert_eq!(strings.value_at("/data/\u{fffd}", "\u{fffd}"), None);
        assert_eq!(
            strings.key_at("/data/\u{fffd}", "\u{fffd}"),
            Some(&b"\xe2"[..])
        );
        let metadata = strings.within("/metadata").unwrap();
        assert_eq!(
            metadata.iter().map(RawString::pointer).collect::<Vec<_>>(),
            ["/annotations/a"]
        );
        assert_eq!(strings.within("/meta"), None);
        assert_eq!(strings.within("").as_ref(), Some(&strings));
    }

    #[test]
    fn or_keeps_the_first_at_a_place_both_name() {
        let first = RawStrings::new(vec![RawString::value("/status/a", *b"\xff")]).unwrap();
        let second = RawStrings::new(vec![
            RawString::value("/status/a", *b"\xfe"),
            RawString::value("/data/b", *b"\x80"),
        ])
        .unwrap();
        let both = first.or(&second);
        assert_eq!(
            both.iter().map(RawString::bytes).collect::<Vec<_>>(),
            [&b"\xff"[..], b"\x80"]
        );
    }
}
