//! [`decode_object`]: one pass over an object's JSON that reads what the
//! store needs and writes the stored form.

use std::borrow::Cow;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::ops::ControlFlow;

use bytes::Bytes;

use super::transform::{Plan, Role, Transform};
use crate::DecodeError;
use crate::go_json::write_string;
use crate::raw::visit_metadata;
use crate::scan::{Key, Scanner, Span, unescape};
use crate::{CachedObject, ObjectKey};

/// Decodes one object (a list item or a watch event's `object`) into the form
/// the store keeps, in a single pass over `raw`.
///
/// The output JSON of a [built-in kind](crate::builtin_kind) is
/// `{"kind":"<kind>","apiVersion":"<apiVersion>",` followed by every other
/// top-level entry of `raw` in input order, minus the transform's strip
/// paths. Entries the transform does not touch are copied byte for byte
/// (whitespace inside them included); an object holding a stripped path is
/// written again entry by entry. `kind` and `apiVersion` are taken from the
/// arguments, whatever `raw` says (list items of built-in kinds have none),
/// so the same object gives the same bytes from a list and from a watch
/// event. A custom resource keeps its own `kind` and `apiVersion` where they
/// are (the API server writes them in every list item, and its keys in
/// sorted order: `apiVersion` first), so its bytes are the API server's,
/// stripped paths aside; its `type_meta_len` is 0.
///
/// Read on the way, from the object as received (before stripping):
/// - `metadata.name` (required), `namespace`, `uid` (empty when absent),
///   `resourceVersion` (required, a decimal string), `generation`;
/// - `metadata.labels`, sorted by key;
/// - `metadata.annotations`, as a hash: std's [`DefaultHasher`] (SipHash-1-3
///   with fixed keys) over the number of entries and then each key and value,
///   sorted by key. Equal annotations give equal hashes within one build of
///   kubecache; the hash is never stored or sent anywhere;
/// - `metadata.ownerReferences[].uid`;
/// - each index field: a string as its text, a number or boolean as its JSON
///   text (`3`, `true`); absent, `null`, an object or an array as `None`.
///
/// Where a key repeats, the last occurrence wins, as in serde_json (except
/// for index fields under a repeated parent, which keep the last value seen).
/// The whole input is validated as it is read (see the module doc), so the
/// output always parses.
///
/// ```
/// use kubecache_wire::{Transform, decode_object, parse_list};
///
/// let body = br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"10"},
///   "items":[{"metadata":{"name":"web-1","namespace":"shop","resourceVersion":"9",
///   "managedFields":[{"manager":"kubectl"}]},"spec":{"nodeName":"node-1"}}]}"#;
/// let transform = Transform::default().index_field("spec.nodeName")?;
/// let page = parse_list(body)?;
/// let pod = decode_object(page.items[0], "Pod", "v1", &transform)?;
/// assert_eq!(pod.key.as_str(), "shop/web-1");
/// assert_eq!((pod.resource_version, pod.fields[0].as_deref()), (9, Some("node-1")));
/// assert_eq!(
///     &pod.json[..],
///     br#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web-1","namespace":"shop","resourceVersion":"9"},"spec":{"nodeName":"node-1"}}"#
/// );
/// assert_eq!(&pod.json[..pod.type_meta_len], br#"{"kind":"Pod","apiVersion":"v1","#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn decode_object(
    raw: &[u8],
    kind: &str,
    api_version: &str,
    transform: &Transform,
) -> Result<CachedObject, DecodeError> {
    decode(raw, kind, api_version, transform).map_err(|e| e.locate(raw))
}

/// The namespace and name of `raw`, read as far as it is well-formed: for
/// logging an object that [`decode_object`] refused ("undecodable event for
/// ns/name").
pub fn peek_object_key(raw: &[u8]) -> Option<ObjectKey> {
    let (mut name, mut namespace) = (None, None);
    let _ = visit_metadata(raw, |key, span| {
        let slot = match key {
            b"name" => &mut name,
            b"namespace" => &mut namespace,
            _ => return Ok(ControlFlow::Continue(())),
        };
        if raw.get(span.start) == Some(&b'"') {
            *slot = Some(unescape(raw, span)?);
        }
        Ok(ControlFlow::Continue(()))
    });
    Some(ObjectKey::new(namespace.as_deref().unwrap_or(""), &name?))
}

/// `metadata.resourceVersion` as a number: decimal digits only.
pub fn parse_resource_version(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// What the pass reads; borrowed from the input where no escape forces a copy.
struct Reads<'a> {
    name: Option<Cow<'a, str>>,
    namespace: Option<Cow<'a, str>>,
    uid: Option<Cow<'a, str>>,
    resource_version: Option<u64>,
    generation: Option<i64>,
    labels: Vec<(Box<str>, Box<str>)>,
    annotations: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    owner_uids: Vec<Box<str>>,
    fields: Vec<Option<Box<str>>>,
}

struct Decoder<'a> {
    sc: Scanner<'a>,
    buf: &'a [u8],
    /// A custom resource's `kind` and `apiVersion` are copied, not stripped.
    type_meta_in_place: bool,
    reads: Reads<'a>,
}

fn decode(
    raw: &[u8],
    kind: &str,
    api_version: &str,
    transform: &Transform,
) -> Result<CachedObject, DecodeError> {
    let builtin = crate::builtin_kind(api_version, kind);
    let mut out = Vec::with_capacity(raw.len() + kind.len() + api_version.len() + 32);
    out.push(b'{');
    if builtin {
        out.extend_from_slice(b"\"kind\":");
        write_string(&mut out, kind.as_bytes());
        out.extend_from_slice(b",\"apiVersion\":");
        write_string(&mut out, api_version.as_bytes());
    }
    let type_meta_end = out.len();

    let mut d = Decoder {
        sc: Scanner::new(raw),
        buf: raw,
        type_meta_in_place: !builtin,
        reads: Reads {
            name: None,
            namespace: None,
            uid: None,
            resource_version: None,
            generation: None,
            labels: Vec::new(),
            annotations: Vec::new(),
            owner_uids: Vec::new(),
            fields: vec![None; transform.index_fields().len()],
        },
    };
    d.sc.skip_ws();
    d.sc.enter_object(1)?;
    let wrote = d.write_entries(transform.plan(), 1, &mut out, builtin)?;
    d.sc.finish()?;
    out.push(b'}');
    // `{` + json[type_meta_len..] is the object without kind and apiVersion:
    // skip their trailing comma, or point at the `}` when nothing follows.
    let type_meta_len = if !builtin {
        0
    } else if wrote {
        type_meta_end + 1
    } else {
        type_meta_end
    };

    let reads = d.reads;
    let name = reads.name.ok_or(DecodeError::Missing {
        path: "metadata.name",
    })?;
    let resource_version = reads.resource_version.ok_or(DecodeError::Missing {
        path: "metadata.resourceVersion",
    })?;
    let mut labels = reads.labels;
    sort_last_wins(&mut labels);
    let mut annotations = reads.annotations;
    sort_last_wins(&mut annotations);
    let mut hasher = DefaultHasher::new();
    annotations.len().hash(&mut hasher);
    for (k, v) in &annotations {
        k.hash(&mut hasher);
        v.hash(&mut hasher);
    }
    out.shrink_to_fit();
    Ok(CachedObject {
        key: ObjectKey::new(reads.namespace.as_deref().unwrap_or(""), &name),
        resource_version,
        uid: reads.uid.unwrap_or_default().into(),
        generation: reads.generation,
        labels: labels.into(),
        annotations_hash: hasher.finish(),
        owner_uids: reads.owner_uids.into(),
        fields: reads.fields.into(),
        json: Bytes::from(out),
        type_meta_len,
        encodings: Default::default(),
    })
}

impl<'a> Decoder<'a> {
    /// Writes the entries of the object just entered (cursor after its `{`)
    /// to `out`, each preceded by a comma when `comma` (always after the
    /// first), reading and stripping as `plan` says; consumes the `}`.
    /// Returns whether any entry was written.
    fn write_entries(
        &mut self,
        plan: &Plan,
        depth: usize,
        out: &mut Vec<u8>,
        mut comma: bool,
    ) -> Result<bool, DecodeError> {
        let buf = self.buf;
        let mut wrote = false;
        // Kept entries not yet copied: copied in one piece, separators included.
        let mut run: Option<(usize, usize)> = None;
        let flush = |run: &mut Option<(usize, usize)>, out: &mut Vec<u8>, comma: &mut bool| {
            let Some((start, end)) = run.take() else {
                return false;
            };
            if *comma {
                out.push(b',');
            }
            out.extend_from_slice(&buf[start..end]);
            *comma = true;
            true
        };
        let mut first = true;
        while let Some(key) = self.sc.next_key(&mut first)? {
            let child = plan.get(&key.name(buf)?);
            let span = match child {
                None => {
                    let span = self.sc.skip_value(depth)?;
                    run = Some((run.map_or(key.span.start, |r| r.0), span.end));
                    span
                }
                Some(child) if child.strip && !(child.type_meta && self.type_meta_in_place) => {
                    wrote |= flush(&mut run, out, &mut comma);
                    self.visit(child, depth)?
                }
                Some(child) if child.rewrite && self.sc.peek()? == b'{' => {
                    flush(&mut run, out, &mut comma);
                    if comma {
                        out.push(b',');
                    }
                    comma = true;
                    wrote = true;
                    out.extend_from_slice(&buf[key.span.start..key.span.end]);
                    out.extend_from_slice(b":{");
                    let start = self.sc.pos();
                    self.begin(child);
                    self.sc.enter_object(depth + 1)?;
                    self.write_entries(child, depth + 1, out, false)?;
                    out.push(b'}');
                    let span = Span {
                        start,
                        end: self.sc.pos(),
                        escaped: false,
                    };
                    self.apply(child, span)?;
                    span
                }
                Some(child) => {
                    let span = self.visit(child, depth)?;
                    run = Some((run.map_or(key.span.start, |r| r.0), span.end));
                    span
                }
            };
            self.collect(plan, &key, span)?;
        }
        wrote |= flush(&mut run, out, &mut comma);
        Ok(wrote)
    }

    /// Skips the value at the cursor (inside `depth` containers), reading
    /// what `plan` asks for; returns where it lies.
    fn visit(&mut self, plan: &Plan, depth: usize) -> Result<Span, DecodeError> {
        if !plan.read {
            return self.sc.skip_value(depth);
        }
        self.begin(plan);
        let start = self.sc.pos();
        let span = match self.sc.peek()? {
            b'{' if !plan.children.is_empty()
                || matches!(plan.role, Role::Labels | Role::Annotations) =>
            {
                self.sc.enter_object(depth + 1)?;
                let mut first = true;
                while let Some(key) = self.sc.next_key(&mut first)? {
                    let span = match plan.get(&key.name(self.buf)?) {
                        Some(child) => self.visit(child, depth + 1)?,
                        None => self.sc.skip_value(depth + 1)?,
                    };
                    self.collect(plan, &key, span)?;
                }
                Span {
                    start,
                    end: self.sc.pos(),
                    escaped: false,
                }
            }
            b'[' if plan.role == Role::OwnerReferences => self.owner_references(depth)?,
            _ => self.sc.skip_value(depth)?,
        };
        self.apply(plan, span)?;
        Ok(span)
    }

    /// Forgets earlier reads of a key that turns out to repeat.
    fn begin(&mut self, plan: &Plan) {
        let r = &mut self.reads;
        match plan.role {
            Role::Metadata => {
                r.name = None;
                r.namespace = None;
                r.uid = None;
                r.resource_version = None;
                r.generation = None;
                r.labels.clear();
                r.annotations.clear();
                r.owner_uids.clear();
            }
            Role::Labels => r.labels.clear(),
            Role::Annotations => r.annotations.clear(),
            Role::OwnerReferences => r.owner_uids.clear(),
            _ => {}
        }
    }

    /// Reads an entry of an object whose plan collects its entries.
    fn collect(&mut self, plan: &Plan, key: &Key<'a>, span: Span) -> Result<(), DecodeError> {
        let buf = self.buf;
        match plan.role {
            Role::Labels => {
                let name = unescape(buf, key.span)?;
                if buf[span.start] != b'"' {
                    return Err(DecodeError::invalid(
                        format!("metadata.labels[{name:?}]"),
                        span.start,
                        "expected a string",
                    ));
                }
                let value = unescape(buf, span)?;
                self.reads.labels.push((name.into(), value.into()));
            }
            Role::Annotations => {
                let name = unescape(buf, key.span)?;
                if buf[span.start] != b'"' {
                    return Err(DecodeError::invalid(
                        format!("metadata.annotations[{name:?}]"),
                        span.start,
                        "expected a string",
                    ));
                }
                self.reads.annotations.push((name, unescape(buf, span)?));
            }
            _ => {}
        }
        Ok(())
    }

    /// Reads a scalar field of `metadata` and the index fields at `span`.
    fn apply(&mut self, plan: &Plan, span: Span) -> Result<(), DecodeError> {
        match plan.role {
            Role::Name => self.reads.name = self.string(span, "metadata.name")?,
            Role::Namespace => self.reads.namespace = self.string(span, "metadata.namespace")?,
            Role::Uid => self.reads.uid = self.string(span, "metadata.uid")?,
            Role::ResourceVersion => {
                self.reads.resource_version = match self.string(span, "metadata.resourceVersion")? {
                    None => None,
                    Some(text) => Some(parse_resource_version(&text).ok_or_else(|| {
                        DecodeError::invalid(
                            "metadata.resourceVersion",
                            span.start,
                            format!("expected a decimal number, got {text:?}"),
                        )
                    })?),
                };
            }
            Role::Generation => {
                let text = &self.buf[span.start..span.end];
                self.reads.generation = match text.first() {
                    Some(b'n') => None,
                    _ => Some(
                        std::str::from_utf8(text)
                            .ok()
                            .and_then(|t| t.parse().ok())
                            .ok_or_else(|| {
                                DecodeError::invalid(
                                    "metadata.generation",
                                    span.start,
                                    "expected an integer",
                                )
                            })?,
                    ),
                };
            }
            _ => {}
        }
        for &slot in &plan.index_slots {
            let text = &self.buf[span.start..span.end];
            let value: Option<Box<str>> = match text.first() {
                Some(b'"') => Some(unescape(self.buf, span)?.into()),
                Some(b'-' | b'0'..=b'9' | b't' | b'f') => {
                    std::str::from_utf8(text).ok().map(Into::into)
                }
                _ => None,
            };
            if let Some(field) = self.reads.fields.get_mut(slot) {
                *field = value;
            }
        }
        Ok(())
    }

    /// A string field (`None` for `null`).
    fn string(&self, span: Span, path: &'static str) -> Result<Option<Cow<'a, str>>, DecodeError> {
        match self.buf[span.start] {
            b'"' => unescape(self.buf, span).map(Some),
            b'n' => Ok(None),
            _ => Err(DecodeError::invalid(path, span.start, "expected a string")),
        }
    }

    /// `metadata.ownerReferences` (cursor on the `[`): collects each `uid`.
    fn owner_references(&mut self, depth: usize) -> Result<Span, DecodeError> {
        let buf = self.buf;
        let start = self.sc.pos();
        self.sc.enter_array(depth + 1)?;
        let mut first = true;
        let mut index = 0;
        while self.sc.next_element(&mut first)? {
            if self.sc.peek()? == b'{' {
                self.sc.enter_object(depth + 2)?;
                let mut first = true;
                while let Some(key) = self.sc.next_key(&mut first)? {
                    let span = self.sc.skip_value(depth + 2)?;
                    if &*key.name(buf)? == b"uid" {
                        match buf[span.start] {
                            b'"' => self.reads.owner_uids.push(unescape(buf, span)?.into()),
                            b'n' => {}
                            _ => {
                                return Err(DecodeError::invalid(
                                    format!("metadata.ownerReferences[{index}].uid"),
                                    span.start,
                                    "expected a string",
                                ));
                            }
                        }
                    }
                }
            } else {
                self.sc.skip_value(depth + 1)?;
            }
            index += 1;
        }
        Ok(Span {
            start,
            end: self.sc.pos(),
            escaped: false,
        })
    }
}

/// Sorts by key; of equal keys, keeps the one that came last.
fn sort_last_wins<K: Ord, V>(entries: &mut Vec<(K, V)>) {
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries.dedup_by(|later, kept| {
        if later.0 == kept.0 {
            std::mem::swap(later, kept);
            true
        } else {
            false
        }
    });
}
