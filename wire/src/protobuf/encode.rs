//! JSON -> protobuf, streaming, with the bytes Go's marshalling writes:
//! serde_json parses the document once and each value is written to the
//! output as it is read (no `serde_json::Value`, no per-field allocation
//! except for JSON keys that contain escapes).
//!
//! Each message's fields are written in the JSON's order, each one's span
//! noted; when the message ends it is reassembled as Go writes it: fields
//! in field-number order, map entries sorted by key, inline (embedded)
//! structs as one nested message, and Go's zero value for every non-pointer
//! field the JSON leaves out (`generateName: ""`, `generation: 0`, an empty
//! `Time`, the zero struct) that the Go struct of the [`KubeVersion`]
//! written as has. Nested messages are written with a one-byte
//! length placeholder that is patched when the message ends (moving its
//! bytes if the length needs more than one byte), so each byte is copied a
//! few times per nesting level.
//!
//! Given [`RawStrings`] (an object's strings that are not UTF-8), the
//! encoder keeps the JSON Pointer of where it is and writes a string's
//! bytes in place of the JSON's where one of them stands (see
//! [`RawStrings::value_at`]); a map whose keys it writes so is sorted by
//! those bytes, as Go sorts them. Without, the pointer is not kept: a
//! `None` check per key and per array element.

use std::borrow::Cow;
use std::fmt;

use base64::Engine as _;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::desc::{Field, Kind, Label, Message, Special};
use super::error::{ProtoError, Seg};
use super::raw_strings::{RawStrings, push_token};
use super::schema::MESSAGES;
use super::text;
use super::version::KubeVersion;
use super::wire::{
    FIXED64, Fields, VARINT, WireValue, begin_len, end_len, put_bytes_field, put_key, put_varint,
};

/// Appends the protobuf encoding of the JSON object `json` as message `msg`,
/// with the bytes of `strings` where they stand. On error, `out` is left as
/// it was.
pub(crate) fn encode(
    msg: &'static Message,
    version: KubeVersion,
    json: &[u8],
    strings: Option<&RawStrings>,
    out: &mut Vec<u8>,
) -> Result<(), ProtoError> {
    let mark = out.len();
    let mut ctx = Ctx {
        out,
        version,
        error: None,
        spans: Vec::new(),
        scratch: Vec::new(),
        strings: strings.map(|strings| Place {
            strings,
            pointer: String::new(),
        }),
    };
    let mut de = serde_json::Deserializer::from_slice(json);
    let result = MessageSeed {
        ctx: &mut ctx,
        msg,
        tag: None,
        in_list: false,
    }
    .deserialize(&mut de)
    .and_then(|()| de.end());
    match result {
        Ok(()) => Ok(()),
        Err(e) => {
            let error = ctx.error.take().unwrap_or_else(|| json_error(&e));
            out.truncate(mark);
            Err(error)
        }
    }
}

fn json_error(e: &dyn fmt::Display) -> ProtoError {
    ProtoError::Json {
        path: String::new(),
        message: e.to_string(),
    }
}

/// Output and the first error (serde errors cannot carry a [`ProtoError`]).
struct Ctx<'o> {
    out: &'o mut Vec<u8>,
    /// Whose Go types are written.
    version: KubeVersion,
    error: Option<ProtoError>,
    /// The fields written so far of the messages being written, outermost first.
    spans: Vec<Span>,
    /// Where a message is reassembled.
    scratch: Vec<u8>,
    /// The strings to write as bytes, and where the encoder is.
    strings: Option<Place<'o>>,
}

/// Strings to write as bytes, and the JSON Pointer of the value being read.
struct Place<'o> {
    strings: &'o RawStrings,
    pointer: String,
}

/// The bytes of one field (all of its values) in the output.
struct Span {
    field: &'static Field,
    start: usize,
    end: usize,
}

impl<'o> Ctx<'o> {
    /// Steps into the member `key` (when strings are kept); what to hand
    /// to [`leave`](Self::leave) after its value.
    fn enter(&mut self, key: &str) -> usize {
        match &mut self.strings {
            None => 0,
            Some(place) => {
                let at = place.pointer.len();
                push_token(&mut place.pointer, key);
                at
            }
        }
    }

    /// Steps into the element `i`, as [`enter`](Self::enter).
    fn enter_index(&mut self, i: usize) -> usize {
        match &mut self.strings {
            None => 0,
            Some(place) => {
                let at = place.pointer.len();
                place.pointer.push('/');
                place.pointer.push_str(&i.to_string());
                at
            }
        }
    }

    fn leave(&mut self, at: usize) {
        if let Some(place) = &mut self.strings {
            place.pointer.truncate(at);
        }
    }

    /// The bytes to write for the string value `json` here.
    fn string<'v>(&self, json: &'v str) -> &'v [u8]
    where
        'o: 'v,
    {
        self.strings
            .as_ref()
            .and_then(|place| place.strings.value_at(&place.pointer, json))
            .unwrap_or(json.as_bytes())
    }

    /// The bytes of the map key `json`, the entry at which is here; whether
    /// they are other than the JSON's.
    fn key<'v>(&self, json: &'v str) -> (&'v [u8], bool)
    where
        'o: 'v,
    {
        match self
            .strings
            .as_ref()
            .and_then(|place| place.strings.key_at(&place.pointer, json))
        {
            Some(bytes) => (bytes, true),
            None => (json.as_bytes(), false),
        }
    }

    /// Records `error` and returns a serde error that aborts the parse.
    fn raise<E: de::Error>(&mut self, error: ProtoError) -> E {
        let e = E::custom(&error);
        self.error = Some(error);
        e
    }

    /// Adds a path step to the recorded error as `e` unwinds through a level.
    fn within<E: de::Error>(&mut self, e: E, seg: Seg<'_>) -> E {
        let error = self.error.take().unwrap_or_else(|| json_error(&e));
        self.error = Some(error.within(seg));
        e
    }
}

/// A JSON object key, borrowed from the input unless it has escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// The field for a JSON key: a field of `msg`, or of a struct it embeds inline.
fn resolve(msg: &'static Message, key: &str) -> Option<&'static Field> {
    let own = msg
        .fields
        .iter()
        .find(|f| f.label != Label::Inline && f.json == key);
    own.or_else(|| {
        let mut inline = msg.fields.iter().filter(|f| f.label == Label::Inline);
        inline.find_map(|f| match f.kind {
            Kind::Msg(i) => resolve(&MESSAGES[usize::from(i)], key),
            _ => None,
        })
    })
}

/// Writes message `msg` as Go's struct of `version` does: the fields of
/// `spans` (byte ranges of `src`) in field-number order, inline structs as
/// nested messages, and the zero value of each non-pointer field of
/// `version` that has no span.
fn assemble(
    msg: &'static Message,
    version: KubeVersion,
    spans: &[Span],
    src: &[u8],
    dst: &mut Vec<u8>,
) {
    for pos in msg.tag_order() {
        let field = &msg.fields[pos];
        if let (Label::Inline, Kind::Msg(m)) = (field.label, field.kind) {
            let start = begin_len(dst, field.tag);
            assemble(&MESSAGES[usize::from(m)], version, spans, src, dst);
            end_len(dst, start);
            continue;
        }
        let mut present = false;
        for span in spans.iter().filter(|s| std::ptr::eq(s.field, field)) {
            dst.extend_from_slice(&src[span.start..span.end]);
            present = true;
        }
        if !present && field.in_version(version) && !field.go_in(version).nullable() {
            put_zero(field, version, dst);
        }
    }
}

/// Go's zero value of a non-pointer field, as Go's marshalling writes it.
fn put_zero(field: &'static Field, version: KubeVersion, dst: &mut Vec<u8>) {
    match field.kind {
        Kind::Bool | Kind::I32 | Kind::I64 => {
            put_key(dst, field.tag, VARINT);
            dst.push(0);
        }
        Kind::F64 => {
            put_key(dst, field.tag, FIXED64);
            dst.extend_from_slice(&[0; 8]);
        }
        Kind::Str | Kind::Bytes => put_bytes_field(dst, field.tag, &[]),
        Kind::Msg(m) => {
            let start = begin_len(dst, field.tag);
            put_zero_message(&MESSAGES[usize::from(m)], version, dst);
            end_len(dst, start);
        }
    }
}

/// The body of Go's zero value of a message.
fn put_zero_message(msg: &'static Message, version: KubeVersion, dst: &mut Vec<u8>) {
    match msg.special {
        Special::None => assemble(msg, version, &[], &[], dst),
        special => put_zero_special(special, dst),
    }
}

/// The body of Go's zero value of a message with a special JSON form.
fn put_zero_special(special: Special, dst: &mut Vec<u8>) {
    match special {
        // The zero Quantity is written as "0".
        Special::Quantity => put_bytes_field(dst, 1, b"0"),
        // type=0 (int), intVal=0, strVal="".
        Special::IntOrString => dst.extend_from_slice(&[0x08, 0x00, 0x10, 0x00, 0x1a, 0x00]),
        Special::Duration => dst.extend_from_slice(&[0x08, 0x00]),
        // The zero time, nil raw bytes, a nil slice: nothing.
        Special::Time
        | Special::MicroTime
        | Special::RawJson
        | Special::StringList
        | Special::None => {}
    }
}

/// Sorts the entries of a map field written at `out[start..]` by key, as
/// Go writes them (needed only when the JSON's keys are out of order).
fn sort_map_entries(out: &mut Vec<u8>, start: usize) {
    let mut entries: Vec<(&[u8], &[u8])> = Vec::new();
    let mut rest = &out[start..];
    for item in Fields::new(&out[start..]) {
        let Ok((_, WireValue::Len(entry))) = item else {
            return;
        };
        let end = entry.as_ptr() as usize - rest.as_ptr() as usize + entry.len();
        let key = Fields::new(entry).find_map(|f| match f {
            Ok((1, WireValue::Len(k))) => Some(k),
            _ => None,
        });
        entries.push((key.unwrap_or_default(), &rest[..end]));
        rest = &rest[end..];
    }
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let sorted: Vec<u8> = entries.iter().flat_map(|e| e.1.iter().copied()).collect();
    out.truncate(start);
    out.extend_from_slice(&sorted);
}

/// A message: a JSON object (or `null`). With a tag, it is a nested field.
struct MessageSeed<'c, 'o> {
    ctx: &'c mut Ctx<'o>,
    msg: &'static Message,
    tag: Option<u32>,
    /// `null` inside a list or map value is an empty message, not "absent".
    in_list: bool,
}

impl<'de> DeserializeSeed<'de> for MessageSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MessageSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a JSON object ({})", self.msg.name)
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        match self.tag {
            Some(tag) if self.in_list => {
                let start = begin_len(self.ctx.out, tag);
                assemble(self.msg, self.ctx.version, &[], &[], self.ctx.out);
                end_len(self.ctx.out, start);
                Ok(())
            }
            Some(_) => Ok(()),
            None => Err(E::invalid_type(de::Unexpected::Unit, &self)),
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let ctx = self.ctx;
        let msg = self.msg;
        let start = self.tag.map(|tag| begin_len(ctx.out, tag));
        let body = ctx.out.len();
        let base = ctx.spans.len();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            let Some(field) = resolve(msg, &key) else {
                if msg.type_meta && (key == "kind" || key == "apiVersion") {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
                return Err(ctx.raise(ProtoError::UnknownField {
                    path: key.into_owned(),
                    message: msg.name,
                }));
            };
            let at = ctx.out.len();
            let place = ctx.enter(&key);
            map.next_value_seed(FieldSeed {
                ctx: &mut *ctx,
                field,
            })
            .map_err(|e| ctx.within(e, Seg::Field(field.json)))?;
            ctx.leave(place);
            if ctx.out.len() > at {
                ctx.spans.push(Span {
                    field,
                    start: at - body,
                    end: ctx.out.len() - body,
                });
            }
        }
        let mut scratch = std::mem::take(&mut ctx.scratch);
        scratch.clear();
        assemble(
            msg,
            ctx.version,
            &ctx.spans[base..],
            &ctx.out[body..],
            &mut scratch,
        );
        ctx.out.truncate(body);
        ctx.out.extend_from_slice(&scratch);
        ctx.scratch = scratch;
        ctx.spans.truncate(base);
        if let Some(start) = start {
            end_len(ctx.out, start);
        }
        Ok(())
    }
}

/// The value of one field, by its label.
struct FieldSeed<'c, 'o> {
    ctx: &'c mut Ctx<'o>,
    field: &'static Field,
}

impl<'de> DeserializeSeed<'de> for FieldSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        match self.field.label {
            Label::One | Label::Inline => ValueSeed {
                ctx: self.ctx,
                tag: self.field.tag,
                kind: self.field.kind,
                in_list: false,
            }
            .deserialize(d),
            Label::Rep | Label::Map => d.deserialize_any(self),
        }
    }
}

impl<'de> Visitor<'de> for FieldSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.field.label {
            Label::Map => f.write_str("a JSON object"),
            _ => f.write_str("a JSON array"),
        }
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if self.field.label != Label::Rep {
            return Err(de::Error::invalid_type(de::Unexpected::Seq, &self));
        }
        let ctx = self.ctx;
        let mut i = 0;
        loop {
            let place = ctx.enter_index(i);
            let seed = ValueSeed {
                ctx: &mut *ctx,
                tag: self.field.tag,
                kind: self.field.kind,
                in_list: true,
            };
            match seq.next_element_seed(seed) {
                Ok(Some(())) => i += 1,
                Ok(None) => return Ok(()),
                Err(e) => return Err(ctx.within(e, Seg::Index(i))),
            }
            ctx.leave(place);
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        if self.field.label != Label::Map {
            return Err(de::Error::invalid_type(de::Unexpected::Map, &self));
        }
        let ctx = self.ctx;
        let map_start = ctx.out.len();
        let mut previous: Option<Key<'de>> = None;
        let mut sorted = true;
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            if let Some(Key(p)) = &previous {
                sorted &= **p < *key;
            }
            let place = ctx.enter(&key);
            let start = begin_len(ctx.out, self.field.tag);
            let (bytes, raw) = ctx.key(&key);
            // Go sorts entries by the key's bytes.
            sorted &= !raw;
            put_bytes_field(ctx.out, 1, bytes);
            let seed = ValueSeed {
                ctx: &mut *ctx,
                tag: 2,
                kind: self.field.kind,
                in_list: true,
            };
            map.next_value_seed(seed)
                .map_err(|e| ctx.within(e, Seg::Key(&key)))?;
            end_len(ctx.out, start);
            ctx.leave(place);
            previous = Some(Key(key));
        }
        if !sorted {
            sort_map_entries(ctx.out, map_start);
        }
        Ok(())
    }
}

/// One value (of an optional field, a list element or a map value).
struct ValueSeed<'c, 'o> {
    ctx: &'c mut Ctx<'o>,
    tag: u32,
    kind: Kind,
    /// `null` is the zero value (written) rather than "absent".
    in_list: bool,
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        let Kind::Msg(i) = self.kind else {
            return d.deserialize_any(self);
        };
        let msg = &MESSAGES[usize::from(i)];
        match msg.special {
            Special::None => MessageSeed {
                ctx: self.ctx,
                msg,
                tag: Some(self.tag),
                in_list: self.in_list,
            }
            .deserialize(d),
            Special::RawJson => {
                let raw = <&'de RawValue as de::Deserialize>::deserialize(d)?;
                let raw = raw.get();
                if raw != "null" {
                    let start = begin_len(self.ctx.out, self.tag);
                    put_bytes_field(self.ctx.out, 1, raw.as_bytes());
                    end_len(self.ctx.out, start);
                } else if self.in_list {
                    put_bytes_field(self.ctx.out, self.tag, &[]);
                }
                Ok(())
            }
            special => d.deserialize_any(SpecialVisitor {
                ctx: self.ctx,
                tag: self.tag,
                special,
                in_list: self.in_list,
            }),
        }
    }
}

impl ValueSeed<'_, '_> {
    fn mismatch<E: de::Error>(&self, unexpected: de::Unexpected<'_>) -> E {
        E::invalid_type(unexpected, self)
    }

    fn int<E: de::Error>(self, v: i128) -> Result<(), E> {
        let ok = match self.kind {
            Kind::I32 => i32::try_from(v).is_ok(),
            Kind::I64 => i64::try_from(v).is_ok(),
            Kind::F64 => {
                put_key(self.ctx.out, self.tag, FIXED64);
                self.ctx.out.extend_from_slice(&(v as f64).to_le_bytes());
                return Ok(());
            }
            _ => {
                return Err(match i64::try_from(v) {
                    Ok(v) => self.mismatch(de::Unexpected::Signed(v)),
                    Err(_) => self.mismatch(de::Unexpected::Other("a large integer")),
                });
            }
        };
        if !ok {
            return Err(self.ctx.raise(ProtoError::invalid(format!(
                "{v} does not fit in {}",
                if self.kind == Kind::I32 {
                    "int32"
                } else {
                    "int64"
                }
            ))));
        }
        put_key(self.ctx.out, self.tag, VARINT);
        // int32 and int64 are both sign-extended to 64 bits on the wire.
        put_varint(self.ctx.out, v as i64 as u64);
        Ok(())
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.kind {
            Kind::Bool => "a boolean",
            Kind::I32 => "a 32-bit integer",
            Kind::I64 => "a 64-bit integer",
            Kind::F64 => "a number",
            Kind::Str => "a string",
            Kind::Bytes => "a base64 string",
            Kind::Msg(_) => "an object",
        })
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        if !self.in_list {
            return Ok(());
        }
        let out = &mut *self.ctx.out;
        match self.kind {
            Kind::Bool | Kind::I32 | Kind::I64 => {
                put_key(out, self.tag, VARINT);
                out.push(0);
            }
            Kind::F64 => {
                put_key(out, self.tag, FIXED64);
                out.extend_from_slice(&[0; 8]);
            }
            Kind::Str | Kind::Bytes | Kind::Msg(_) => put_bytes_field(out, self.tag, &[]),
        }
        Ok(())
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        if self.kind != Kind::Bool {
            return Err(self.mismatch(de::Unexpected::Bool(v)));
        }
        put_key(self.ctx.out, self.tag, VARINT);
        self.ctx.out.push(u8::from(v));
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.int(i128::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.int(i128::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        if self.kind != Kind::F64 {
            return Err(self.mismatch(de::Unexpected::Float(v)));
        }
        put_key(self.ctx.out, self.tag, FIXED64);
        self.ctx.out.extend_from_slice(&v.to_le_bytes());
        Ok(())
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        match self.kind {
            Kind::Str => {
                let bytes = self.ctx.string(v);
                put_bytes_field(self.ctx.out, self.tag, bytes);
                Ok(())
            }
            Kind::Bytes => {
                let start = begin_len(self.ctx.out, self.tag);
                if let Err(e) =
                    base64::engine::general_purpose::STANDARD.decode_vec(v, self.ctx.out)
                {
                    return Err(self
                        .ctx
                        .raise(ProtoError::invalid(format!("bad base64: {e}"))));
                }
                end_len(self.ctx.out, start);
                Ok(())
            }
            _ => Err(self.mismatch(de::Unexpected::Str(v))),
        }
    }
}

/// Messages with a non-object JSON form.
struct SpecialVisitor<'c, 'o> {
    ctx: &'c mut Ctx<'o>,
    tag: u32,
    special: Special,
    in_list: bool,
}

impl SpecialVisitor<'_, '_> {
    fn int_or_string<E: de::Error>(self, v: i128) -> Result<(), E> {
        match self.special {
            Special::IntOrString => {
                let Ok(v) = i32::try_from(v) else {
                    return Err(self
                        .ctx
                        .raise(ProtoError::invalid(format!("{v} does not fit in int32"))));
                };
                // Go writes all three fields: type=0 (int), intVal, strVal="".
                let out = &mut *self.ctx.out;
                let start = begin_len(out, self.tag);
                out.extend_from_slice(&[0x08, 0x00, 0x10]);
                put_varint(out, v as i64 as u64);
                out.extend_from_slice(&[0x1a, 0x00]);
                end_len(out, start);
                Ok(())
            }
            // Go's Quantity.UnmarshalJSON accepts a bare number.
            Special::Quantity => self.string(&v.to_string()),
            _ => Err(E::invalid_type(de::Unexpected::Other("a number"), &self)),
        }
    }

    fn string<E: de::Error>(self, v: &str) -> Result<(), E> {
        let out = &mut *self.ctx.out;
        match self.special {
            Special::Time | Special::MicroTime => {
                let Some((secs, nanos)) = text::parse_rfc3339(v) else {
                    return Err(self.ctx.raise(ProtoError::invalid(format!(
                        "{v:?} is not an RFC 3339 time"
                    ))));
                };
                let start = begin_len(out, self.tag);
                // Go writes the zero time as an empty message, and a Time
                // without its fraction (it only has seconds precision).
                let nanos = if self.special == Special::Time {
                    0
                } else {
                    nanos
                };
                if secs != text::GO_ZERO_UNIX || nanos != 0 {
                    put_key(out, 1, VARINT);
                    put_varint(out, secs as u64);
                    put_key(out, 2, VARINT);
                    put_varint(out, u64::from(nanos));
                }
                end_len(out, start);
                Ok(())
            }
            Special::Duration => {
                let Some(ns) = text::parse_go_duration(v) else {
                    return Err(self
                        .ctx
                        .raise(ProtoError::invalid(format!("{v:?} is not a Go duration"))));
                };
                let start = begin_len(out, self.tag);
                put_key(out, 1, VARINT);
                put_varint(out, ns as u64);
                end_len(out, start);
                Ok(())
            }
            Special::Quantity => {
                let start = begin_len(out, self.tag);
                put_bytes_field(out, 1, v.trim().as_bytes());
                end_len(out, start);
                Ok(())
            }
            Special::IntOrString => {
                let bytes = self.ctx.string(v);
                let out = &mut *self.ctx.out;
                let start = begin_len(out, self.tag);
                out.extend_from_slice(&[0x08, 0x01, 0x10, 0x00]);
                put_bytes_field(out, 3, bytes);
                end_len(out, start);
                Ok(())
            }
            _ => Err(E::invalid_type(de::Unexpected::Str(v), &self)),
        }
    }
}

impl<'de> Visitor<'de> for SpecialVisitor<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.special {
            Special::Time => "an RFC 3339 time string",
            Special::MicroTime => "an RFC 3339 time string with microseconds",
            Special::Duration => "a Go duration string",
            Special::Quantity => "a quantity string",
            Special::IntOrString => "an integer or a string",
            Special::StringList => "an array of strings",
            Special::RawJson | Special::None => "a JSON value",
        })
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        // `null` is a nil pointer (nothing), or the zero value (written by
        // `assemble`); in a list or map it is the zero value.
        if self.in_list {
            let start = begin_len(self.ctx.out, self.tag);
            put_zero_special(self.special, self.ctx.out);
            end_len(self.ctx.out, start);
        }
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.int_or_string(i128::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.int_or_string(i128::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        if self.special == Special::Quantity {
            return self.string(&v.to_string());
        }
        Err(E::invalid_type(de::Unexpected::Float(v), &self))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.string(v)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if self.special != Special::StringList {
            return Err(de::Error::invalid_type(de::Unexpected::Seq, &self));
        }
        let ctx = self.ctx;
        let start = begin_len(ctx.out, self.tag);
        let mut i = 0;
        loop {
            let place = ctx.enter_index(i);
            let seed = ValueSeed {
                ctx: &mut *ctx,
                tag: 1,
                kind: Kind::Str,
                in_list: true,
            };
            match seq.next_element_seed(seed) {
                Ok(Some(())) => i += 1,
                Ok(None) => break,
                Err(e) => return Err(ctx.within(e, Seg::Index(i))),
            }
            ctx.leave(place);
        }
        end_len(ctx.out, start);
        Ok(())
    }
}
