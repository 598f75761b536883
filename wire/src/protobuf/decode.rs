//! Protobuf -> JSON, written straight into the output buffer.
//!
//! Each message is scanned once into a shared scratch list of `(field,
//! value)` entries (no per-message allocation), which is grouped by field in
//! Go's struct order (the key order of the API server's JSON), then written
//! as Go's `encoding/json` writes the struct that Go's protobuf unmarshalling
//! makes of the bytes:
//! - a field on the wire is written, except a zero value (`""`, `0`,
//!   `false`, an empty `[]byte`) of a non-pointer field tagged `omitempty`;
//!   a pointer is on the wire only when non-nil, so `replicas: 0` and
//!   `storageClassName: ""` are kept;
//! - a field not on the wire is Go's zero value: left out when `omitempty`
//!   and nil or zero, else `null` (pointer, slice, map), `""`, `0`, `false`,
//!   or the zero struct (structs are never omitted: `"lastState":{}`, a zero
//!   `metav1.Time` is `null`); a list's `items` are `[]`, as the API server
//!   always makes them;
//! - all as the Go struct of the [`KubeVersion`] written as: a field it does
//!   not have is not written, and `omitempty` is its tag's.
//!
//! Proto semantics are kept: the last value of a singular field wins,
//! repeated occurrences of a singular message merge, repeated fields may be
//! packed or not, map keys are sorted (as Go's JSON encoder does) and a
//! duplicate map key keeps its last value.
//!
//! A string (a value or a map key) that is not UTF-8 is written as Go
//! writes it (`\ufffd` for each byte that starts no UTF-8 sequence) and
//! reported with its bytes ([`RawStrings`]). Its place is not tracked on
//! the way down: the escaper finds the replacement anyway, the string is
//! noted without a path, and each level it returns through adds its step
//! (a field's JSON name, an index, a map key) to what was noted below it.
//! An object whose strings are UTF-8 costs a length comparison per field.

use base64::Engine as _;
use serde_json::value::RawValue;

use super::desc::{Field, Go, Kind, Label, Message, Special};
use super::error::{ProtoError, Seg};
use super::raw_strings::{RawString, RawStrings, push_token};
use super::schema::MESSAGES;
use super::text;
use super::version::KubeVersion;
use super::wire::{Fields, WireValue, read_varint};
use crate::go_json::{self, write_compact, write_string, write_string_replacing};

/// Nesting deeper than this is refused (Kubernetes objects nest about 10 deep).
const MAX_DEPTH: usize = 100;

/// `kind` and `apiVersion` to write first, as the API server does.
#[derive(Clone, Copy)]
pub(crate) struct TypeMetaPrefix<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
}

/// Appends the JSON form of the protobuf message `data` of type `msg`, and
/// returns the strings whose bytes it replaced (`None` when all were
/// UTF-8). On error, `out` is left as it was.
pub(crate) fn decode(
    msg: &'static Message,
    version: KubeVersion,
    data: &[u8],
    type_meta: Option<TypeMetaPrefix<'_>>,
    out: &mut Vec<u8>,
) -> Result<Option<RawStrings>, ProtoError> {
    let mark = out.len();
    let mut d = Decoder {
        out,
        scratch: Vec::new(),
        depth: 0,
        version,
        replaced: Vec::new(),
    };
    match d.message(msg, data, type_meta) {
        Ok(()) => Ok(RawStrings::new(
            d.replaced.into_iter().map(Replaced::finish).collect(),
        )),
        Err(e) => {
            out.truncate(mark);
            Err(e)
        }
    }
}

struct Decoder<'o, 'a> {
    out: &'o mut Vec<u8>,
    /// Entries of the messages being written, outermost first.
    scratch: Vec<(u16, WireValue<'a>)>,
    depth: usize,
    /// Whose Go types are written.
    version: KubeVersion,
    /// The strings written with replacements so far.
    replaced: Vec<Replaced>,
}

/// A string written with replacements, and the steps of its path known so
/// far, innermost first (each level adds its own as it returns).
struct Replaced {
    steps: Vec<Step>,
    key: bool,
    bytes: Box<[u8]>,
}

/// One step of a path in the JSON.
enum Step {
    Field(&'static str),
    Index(usize),
    /// A map key, as the JSON has it.
    Key(String),
}

impl Replaced {
    fn new(bytes: &[u8], key: bool) -> Replaced {
        Replaced {
            steps: Vec::new(),
            key,
            bytes: bytes.into(),
        }
    }

    fn finish(self) -> RawString {
        let mut pointer = String::new();
        for step in self.steps.iter().rev() {
            match step {
                Step::Field(name) => push_token(&mut pointer, name),
                Step::Index(i) => push_token(&mut pointer, &i.to_string()),
                Step::Key(key) => push_token(&mut pointer, key),
            }
        }
        if self.key {
            RawString::key(pointer, self.bytes)
        } else {
            RawString::value(pointer, self.bytes)
        }
    }
}

fn push_int(out: &mut Vec<u8>, v: i64) {
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    let mut u = v.unsigned_abs();
    loop {
        at -= 1;
        buf[at] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if v < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&buf[at..]);
}

fn utf8(bytes: &[u8]) -> Result<&str, ProtoError> {
    std::str::from_utf8(bytes)
        .map_err(|e| ProtoError::malformed(format!("string is not UTF-8: {e}")))
}

fn wire_mismatch(kind: Kind, value: &WireValue<'_>) -> ProtoError {
    ProtoError::malformed(format!(
        "wire type {} for a field of type {kind:?}",
        value.wire_type()
    ))
}

/// The wire types a field of `kind` may arrive with (packed repeated scalars as `LEN`).
fn wire_ok(field: &Field, value: &WireValue<'_>) -> bool {
    match (field.kind, value) {
        (_, WireValue::Len(_)) if field.label == Label::Map => true,
        (Kind::Bool | Kind::I32 | Kind::I64, WireValue::Varint(_)) => field.label != Label::Map,
        (Kind::F64, WireValue::Fixed64(_)) => field.label != Label::Map,
        (Kind::Bool | Kind::I32 | Kind::I64 | Kind::F64, WireValue::Len(_)) => {
            field.label == Label::Rep
        }
        (Kind::Str | Kind::Bytes | Kind::Msg(_), WireValue::Len(_)) => true,
        _ => false,
    }
}

impl<'a> Decoder<'_, 'a> {
    /// Adds `step` to the path of each string replaced since `mark` (the
    /// length of `replaced` before the level wrote its value): nothing,
    /// almost always, at the cost of a comparison.
    #[inline(always)]
    fn step(&mut self, mark: usize, step: impl Fn() -> Step) {
        if self.replaced.len() > mark {
            self.add_step(mark, step);
        }
    }

    #[cold]
    #[inline(never)]
    fn add_step(&mut self, mark: usize, step: impl Fn() -> Step) {
        for replaced in &mut self.replaced[mark..] {
            replaced.steps.push(step());
        }
    }

    fn message(
        &mut self,
        msg: &'static Message,
        data: &'a [u8],
        type_meta: Option<TypeMetaPrefix<'_>>,
    ) -> Result<(), ProtoError> {
        self.out.push(b'{');
        let mut first = true;
        if let Some(tm) = type_meta {
            self.out.extend_from_slice(b"\"kind\":");
            write_string(self.out, tm.kind.as_bytes());
            self.out.extend_from_slice(b",\"apiVersion\":");
            write_string(self.out, tm.api_version.as_bytes());
            first = false;
        }
        self.fields(msg, data, &mut first)?;
        self.out.push(b'}');
        Ok(())
    }

    /// Writes the fields of `data` into the JSON object being written.
    fn fields(
        &mut self,
        msg: &'static Message,
        data: &'a [u8],
        first: &mut bool,
    ) -> Result<(), ProtoError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ProtoError::malformed("messages nested too deeply"));
        }
        let base = self.scratch.len();
        let mut sorted = true;
        let mut last = 0u16;
        for item in Fields::new(data) {
            let (tag, value) = item.map_err(ProtoError::malformed)?;
            let Some(pos) = msg.field_pos_by_tag(tag) else {
                return Err(ProtoError::UnknownTag {
                    path: String::new(),
                    tag,
                    message: msg.name,
                });
            };
            let field = &msg.fields[pos];
            if !wire_ok(field, &value) {
                return Err(wire_mismatch(field.kind, &value).within(Seg::Field(field.json)));
            }
            let pos = pos as u16;
            sorted &= pos >= last;
            last = pos;
            self.scratch.push((pos, value));
        }
        if !sorted {
            // Stable: repeated elements keep their order.
            self.scratch[base..].sort_by_key(|e| e.0);
        }
        let end = self.scratch.len();
        let mut i = base;
        for (pos, field) in msg.fields.iter().enumerate() {
            let mut j = i;
            while j < end && usize::from(self.scratch[j].0) == pos {
                j += 1;
            }
            let mark = self.replaced.len();
            let result = if j > i {
                self.field(field, i, j, first)
            } else {
                self.absent(msg, field, first)
            };
            if let Err(e) = result {
                return Err(if field.label == Label::Inline {
                    e
                } else {
                    e.within(Seg::Field(field.json))
                });
            }
            if field.label != Label::Inline {
                self.step(mark, || Step::Field(field.json));
            }
            i = j;
        }
        self.scratch.truncate(base);
        self.depth -= 1;
        Ok(())
    }

    /// Writes Go's zero value of a field of `msg` that is not on the wire.
    fn absent(
        &mut self,
        msg: &'static Message,
        field: &'static Field,
        first: &mut bool,
    ) -> Result<(), ProtoError> {
        if field.label == Label::Inline {
            let Kind::Msg(m) = field.kind else {
                return Err(ProtoError::malformed("inline field is not a message"));
            };
            return self.fields(&MESSAGES[usize::from(m)], &[], first);
        }
        if !field.in_version(self.version) {
            return Ok(());
        }
        let go = field.go_in(self.version);
        if msg.type_meta && field.label == Label::Rep && field.json == "items" {
            // The API server's lists always have a (non-nil) slice of items.
            self.key(field, first);
            self.out.extend_from_slice(b"[]");
            return Ok(());
        }
        if go.nullable() {
            if !go.omitempty() {
                self.key(field, first);
                self.out.extend_from_slice(b"null");
            }
            return Ok(());
        }
        match field.kind {
            // A struct is never empty to encoding/json.
            Kind::Msg(_) => {
                self.key(field, first);
                self.value(field.kind, WireValue::Len(&[]))?;
            }
            _ if go.omitempty() => {}
            kind => {
                self.key(field, first);
                self.out.extend_from_slice(match kind {
                    Kind::Bool => b"false",
                    Kind::Str => b"\"\"",
                    _ => b"0",
                });
            }
        }
        Ok(())
    }

    fn key(&mut self, field: &Field, first: &mut bool) {
        if !*first {
            self.out.push(b',');
        }
        *first = false;
        self.out.push(b'"');
        // JSON names are plain ASCII identifiers: no escaping needed.
        self.out.extend_from_slice(field.json.as_bytes());
        self.out.extend_from_slice(b"\":");
    }

    /// The bytes of a singular message field that occurs in entries `i..j`:
    /// one slice, or the concatenation (protobuf merges repeated occurrences).
    fn merged(&self, i: usize, j: usize) -> Result<std::borrow::Cow<'a, [u8]>, ProtoError> {
        let bytes = |k: usize| match self.scratch[k].1 {
            WireValue::Len(b) => Ok(b),
            ref other => Err(ProtoError::malformed(format!(
                "wire type {}",
                other.wire_type()
            ))),
        };
        if j - i == 1 {
            return Ok(std::borrow::Cow::Borrowed(bytes(i)?));
        }
        let mut all = Vec::new();
        for k in i..j {
            all.extend_from_slice(bytes(k)?);
        }
        Ok(std::borrow::Cow::Owned(all))
    }

    fn field(
        &mut self,
        field: &'static Field,
        i: usize,
        j: usize,
        first: &mut bool,
    ) -> Result<(), ProtoError> {
        match field.label {
            Label::Inline => {
                let Kind::Msg(m) = field.kind else {
                    return Err(ProtoError::malformed("inline field is not a message"));
                };
                let bytes = self.merged(i, j)?;
                self.with_owned(bytes, |d, data| {
                    d.fields(&MESSAGES[usize::from(m)], data, first)
                })
            }
            Label::One => {
                let mark = self.out.len();
                let was_first = *first;
                self.key(field, first);
                let zero = if let Kind::Msg(_) = field.kind {
                    let bytes = self.merged(i, j)?;
                    self.with_owned(bytes, |d, data| d.value(field.kind, WireValue::Len(data)))?;
                    false
                } else {
                    // The last occurrence of a scalar wins.
                    let value = self.scratch[j - 1].1;
                    self.value(field.kind, value)?;
                    match value {
                        WireValue::Varint(v) => v == 0,
                        WireValue::Fixed64(v) => f64::from_bits(v) == 0.0,
                        WireValue::Len(b) => b.is_empty(),
                        _ => false,
                    }
                };
                // A zero value, or an empty (non-nil) []byte, with omitempty.
                let go = field.go_in(self.version);
                let empty = go == Go::ValueOmitEmpty
                    || (go == Go::NilOmitEmpty && field.kind == Kind::Bytes);
                if zero && empty {
                    self.out.truncate(mark);
                    *first = was_first;
                }
                Ok(())
            }
            Label::Rep => {
                self.key(field, first);
                self.out.push(b'[');
                let mut n = 0;
                for k in i..j {
                    let value = self.scratch[k].1;
                    match (field.kind, value) {
                        (Kind::Bool | Kind::I32 | Kind::I64, WireValue::Len(mut packed)) => {
                            while !packed.is_empty() {
                                let v = read_varint(&mut packed)
                                    .map_err(|e| ProtoError::malformed(e).within(Seg::Index(n)))?;
                                if n > 0 {
                                    self.out.push(b',');
                                }
                                self.value(field.kind, WireValue::Varint(v))?;
                                n += 1;
                            }
                        }
                        (Kind::F64, WireValue::Len(packed)) => {
                            if packed.len() % 8 != 0 {
                                return Err(ProtoError::malformed(
                                    "packed doubles not a multiple of 8 bytes",
                                ));
                            }
                            for chunk in packed.chunks_exact(8) {
                                let mut b = [0u8; 8];
                                b.copy_from_slice(chunk);
                                if n > 0 {
                                    self.out.push(b',');
                                }
                                self.value(field.kind, WireValue::Fixed64(u64::from_le_bytes(b)))
                                    .map_err(|e| e.within(Seg::Index(n)))?;
                                n += 1;
                            }
                        }
                        _ => {
                            if n > 0 {
                                self.out.push(b',');
                            }
                            let mark = self.replaced.len();
                            match (field.type_meta, field.kind, value) {
                                (Some((api_version, kind)), Kind::Msg(m), WireValue::Len(b)) => {
                                    let prefix = TypeMetaPrefix { api_version, kind };
                                    self.message(&MESSAGES[usize::from(m)], b, Some(prefix))
                                }
                                _ => self.value(field.kind, value),
                            }
                            .map_err(|e| e.within(Seg::Index(n)))?;
                            self.step(mark, || Step::Index(n));
                            n += 1;
                        }
                    }
                }
                self.out.push(b']');
                Ok(())
            }
            Label::Map => {
                self.key(field, first);
                self.map(field.kind, i, j)
            }
        }
    }

    /// Runs `f` on bytes that may have been merged into an owned buffer.
    /// Owned (merged) bytes do not live for `'a`, so they are decoded by a
    /// nested decoder that shares the output.
    fn with_owned<R>(
        &mut self,
        bytes: std::borrow::Cow<'a, [u8]>,
        f: impl for<'b> FnOnce(&mut Decoder<'_, 'b>, &'b [u8]) -> Result<R, ProtoError>,
    ) -> Result<R, ProtoError> {
        match bytes {
            std::borrow::Cow::Borrowed(data) => f(self, data),
            std::borrow::Cow::Owned(data) => {
                let mut nested = Decoder {
                    out: &mut *self.out,
                    scratch: Vec::new(),
                    depth: self.depth,
                    version: self.version,
                    replaced: std::mem::take(&mut self.replaced),
                };
                let result = f(&mut nested, &data);
                self.replaced = nested.replaced;
                result
            }
        }
    }

    /// One map entry: (key, value), value absent means the zero value. The
    /// key is a Go string: any bytes.
    fn entry(data: &'a [u8]) -> Result<(&'a [u8], Option<WireValue<'a>>), ProtoError> {
        let mut key: &[u8] = b"";
        let mut value = None;
        for item in Fields::new(data) {
            match item.map_err(ProtoError::malformed)? {
                (1, WireValue::Len(k)) => key = k,
                (2, v) => value = Some(v),
                (tag, v) => {
                    return Err(ProtoError::malformed(format!(
                        "map entry field {tag} with wire type {}",
                        v.wire_type()
                    )));
                }
            }
        }
        Ok((key, value))
    }

    fn map(&mut self, kind: Kind, i: usize, j: usize) -> Result<(), ProtoError> {
        let entry = |v: WireValue<'a>| match v {
            WireValue::Len(b) => Self::entry(b),
            ref other => Err(ProtoError::malformed(format!(
                "map entry with wire type {}",
                other.wire_type()
            ))),
        };
        // Go writes map entries sorted by key; anything else is sorted here.
        let mut in_order = true;
        let mut prev: Option<&[u8]> = None;
        for k in i..j {
            let (key, _) = entry(self.scratch[k].1)?;
            if prev.is_some_and(|p| p >= key) {
                in_order = false;
                break;
            }
            prev = Some(key);
        }
        let mut entries: Vec<(&'a [u8], Option<WireValue<'a>>)> = Vec::new();
        if !in_order {
            for k in i..j {
                entries.push(entry(self.scratch[k].1)?);
            }
            entries.sort_by(|a, b| a.0.cmp(b.0));
            // Keep the last value of a duplicate key.
            entries.reverse();
            entries.dedup_by(|a, b| a.0 == b.0);
            entries.reverse();
        }
        self.out.push(b'{');
        if in_order {
            for k in i..j {
                let (key, value) = entry(self.scratch[k].1)?;
                self.map_entry(kind, k > i, key, value)?;
            }
        } else {
            for (n, (key, value)) in entries.into_iter().enumerate() {
                self.map_entry(kind, n > 0, key, value)?;
            }
        }
        self.out.push(b'}');
        Ok(())
    }

    fn map_entry(
        &mut self,
        kind: Kind,
        comma: bool,
        key: &[u8],
        value: Option<WireValue<'a>>,
    ) -> Result<(), ProtoError> {
        if comma {
            self.out.push(b',');
        }
        let mark = self.replaced.len();
        if write_string_replacing(self.out, key) {
            self.replaced.push(Replaced::new(key, true));
        }
        self.out.push(b':');
        let value = match value {
            Some(v) => v,
            None => match kind {
                Kind::Bool | Kind::I32 | Kind::I64 => WireValue::Varint(0),
                Kind::F64 => WireValue::Fixed64(0),
                Kind::Str | Kind::Bytes | Kind::Msg(_) => WireValue::Len(&[]),
            },
        };
        self.value(kind, value)
            .map_err(|e| e.within(Seg::Key(&String::from_utf8_lossy(key))))?;
        if self.replaced.len() > mark {
            let key = go_json::replaced(key);
            self.add_step(mark, || Step::Key(key.clone()));
        }
        Ok(())
    }

    /// Writes one value of `kind`.
    fn value(&mut self, kind: Kind, value: WireValue<'a>) -> Result<(), ProtoError> {
        let out = &mut *self.out;
        match (kind, value) {
            (Kind::Bool, WireValue::Varint(v)) => {
                out.extend_from_slice(if v != 0 { b"true" } else { b"false" });
                Ok(())
            }
            // int32 is sign-extended on the wire; truncation is the proto rule.
            (Kind::I32, WireValue::Varint(v)) => {
                push_int(out, i64::from(v as i32));
                Ok(())
            }
            (Kind::I64, WireValue::Varint(v)) => {
                push_int(out, v as i64);
                Ok(())
            }
            (Kind::F64, WireValue::Fixed64(v)) => {
                let f = f64::from_bits(v);
                if !f.is_finite() {
                    return Err(ProtoError::invalid(format!("{f} has no JSON form")));
                }
                let _ = serde_json::to_writer(&mut *out, &f);
                Ok(())
            }
            (Kind::Str, WireValue::Len(b)) => {
                if write_string_replacing(out, b) {
                    self.replaced.push(Replaced::new(b, false));
                }
                Ok(())
            }
            (Kind::Bytes, WireValue::Len(b)) => {
                let engine = base64::engine::general_purpose::STANDARD;
                out.push(b'"');
                let at = out.len();
                out.resize(at + base64::encoded_len(b.len(), true).unwrap_or(0), 0);
                let n = engine
                    .encode_slice(b, &mut out[at..])
                    .map_err(|e| ProtoError::invalid(e.to_string()))?;
                out.truncate(at + n);
                out.push(b'"');
                Ok(())
            }
            (Kind::Msg(m), WireValue::Len(b)) => {
                let msg = &MESSAGES[usize::from(m)];
                if msg.special == Special::None {
                    self.message(msg, b, None)
                } else {
                    self.special(msg, b)
                }
            }
            (kind, value) => Err(wire_mismatch(kind, &value)),
        }
    }

    /// Messages with a non-object JSON form.
    fn special(&mut self, msg: &'static Message, data: &'a [u8]) -> Result<(), ProtoError> {
        // Fields 1..=3 of these small messages (last occurrence wins).
        let mut f: [Option<WireValue<'a>>; 4] = [None; 4];
        let mut items: Vec<&'a [u8]> = Vec::new();
        for item in Fields::new(data) {
            let (tag, value) = item.map_err(ProtoError::malformed)?;
            if !(1..=3).contains(&tag) || msg.field_pos_by_tag(tag).is_none() {
                return Err(ProtoError::UnknownTag {
                    path: String::new(),
                    tag,
                    message: msg.name,
                });
            }
            if msg.special == Special::StringList {
                match value {
                    WireValue::Len(b) => items.push(b),
                    other => return Err(wire_mismatch(Kind::Str, &other)),
                }
            }
            f[tag as usize] = Some(value);
        }
        let varint = |v: Option<WireValue<'a>>| match v {
            None => Ok(0),
            Some(WireValue::Varint(x)) => Ok(x),
            Some(other) => Err(wire_mismatch(Kind::I64, &other)),
        };
        let bytes = |v: Option<WireValue<'a>>| match v {
            None => Ok(None),
            Some(WireValue::Len(b)) => Ok(Some(b)),
            Some(other) => Err(wire_mismatch(Kind::Bytes, &other)),
        };
        let out = &mut *self.out;
        match msg.special {
            // Go's zero time: `null`, and kept as Go's JSON keeps it (a
            // non-pointer Time such as a condition's `lastProbeTime` is
            // written as `null`, and as an empty message in protobuf).
            Special::Time | Special::MicroTime => {
                if f[1].is_none() && f[2].is_none() {
                    out.extend_from_slice(b"null");
                    return Ok(());
                }
                let secs = varint(f[1])? as i64;
                let nanos = i64::from(varint(f[2])? as i32);
                let micro = msg.special == Special::MicroTime;
                // Go's Time keeps whole seconds only; MicroTime normalizes nanos.
                let (secs, nanos) = if micro {
                    (
                        secs.checked_add(nanos.div_euclid(1_000_000_000))
                            .ok_or_else(|| ProtoError::invalid("time out of range"))?,
                        nanos.rem_euclid(1_000_000_000),
                    )
                } else {
                    (secs, 0)
                };
                if secs == text::GO_ZERO_UNIX && nanos == 0 {
                    out.extend_from_slice(b"null");
                    return Ok(());
                }
                let micros = micro.then_some((nanos / 1000) as u32);
                if !text::write_rfc3339(out, secs, micros) {
                    return Err(ProtoError::invalid(format!(
                        "time {secs}s is outside years 0..=9999"
                    )));
                }
                Ok(())
            }
            Special::Duration => {
                let ns = varint(f[1])? as i64;
                write_string(out, text::format_go_duration(ns).as_bytes());
                Ok(())
            }
            Special::Quantity => {
                match bytes(f[1])? {
                    Some(b) if !b.is_empty() => write_string(out, utf8(b)?.as_bytes()),
                    // Go's zero Quantity is written as "0".
                    _ => out.extend_from_slice(b"\"0\""),
                }
                Ok(())
            }
            Special::IntOrString => {
                if varint(f[1])? == 1 {
                    let s = bytes(f[3])?.unwrap_or_default();
                    if write_string_replacing(out, s) {
                        self.replaced.push(Replaced::new(s, false));
                    }
                } else {
                    push_int(out, i64::from(varint(f[2])? as i32));
                }
                Ok(())
            }
            Special::RawJson => {
                let Some(raw) = bytes(f[1])?.filter(|b| !b.is_empty()) else {
                    out.extend_from_slice(b"null");
                    return Ok(());
                };
                match serde_json::from_slice::<&RawValue>(raw) {
                    Ok(v) => write_compact(out, v.get().as_bytes()),
                    Err(e) => {
                        return Err(ProtoError::invalid(format!(
                            "raw bytes are not JSON ({e}); protobuf-encoded raw objects are not supported"
                        )));
                    }
                }
                Ok(())
            }
            Special::StringList => {
                out.push(b'[');
                for (n, s) in items.iter().enumerate() {
                    if n > 0 {
                        out.push(b',');
                    }
                    if write_string_replacing(out, s) {
                        let mut replaced = Replaced::new(s, false);
                        replaced.steps.push(Step::Index(n));
                        self.replaced.push(replaced);
                    }
                }
                out.push(b']');
                Ok(())
            }
            Special::None => Err(ProtoError::malformed("not a special message")),
        }
    }
}
