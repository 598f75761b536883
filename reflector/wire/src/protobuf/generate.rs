//! Generator of `schema.rs`, the runtime schema of the Kubernetes protobuf
//! messages (test-only code).
//!
//! Its input is Kubernetes' own data, vendored unmodified in `kubernetes/`
//! beside `Cargo.toml` (versions, provenance and how to refresh it in its
//! README), so regenerating and the freshness check need neither the network
//! nor any other crate:
//!
//! - The `generated.proto` files of k8s.io/api, apimachinery and metrics:
//!   every message, its fields in declaration order with their numbers,
//!   types, `repeated` and `map<string, _>`; a field's name is its JSON name.
//!   Leading comments carry go-to-protobuf's markers: a field without
//!   `+optional` is required ([`Label::Req`](super::desc::Label)), a message
//!   with `+protobuf.nullable=true` is a slice wrapper (`Verbs`, `ExtraValue`)
//!   and one with another custom-marshalling marker must be in [`SPECIALS`].
//! - k8s.io/api's round-trip fixtures (`testdata/HEAD/*.json`, one per kind,
//!   every field filled): each kind's `apiVersion` and message, whether its
//!   JSON carries `kind`/`apiVersion` (Go's `TypeMeta`, which protobuf lacks),
//!   and which message fields Go embeds with `json:",inline"` (Volume's
//!   `volumeSource`, Probe's `handler`, ...): a JSON key that is no field of
//!   its message but a field of the message of one of its fields. Messages no
//!   fixture reaches (metrics) embed the messages embedded elsewhere under the
//!   same field name. A fixture key that resolves to no field is an error.
//!
//! Kinds are the fixtures' kinds, [`UNVERSIONED_KINDS`], and `FooList` beside
//! every kind `Foo` whose `items` are `Foo`s.
//!
//! Regenerate with
//! `UPDATE_PROTO_SCHEMA=1 cargo test -p kubecache-wire --lib protobuf::generate`;
//! without the variable, the test fails when the committed file is stale.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// Messages with a hand-written JSON form in Go, by full name (without `k8s.io.`).
const SPECIALS: &[(&str, &str)] = &[
    ("apimachinery.pkg.apis.meta.v1.Time", "Time"),
    ("apimachinery.pkg.apis.meta.v1.MicroTime", "MicroTime"),
    ("apimachinery.pkg.apis.meta.v1.Duration", "Duration"),
    ("apimachinery.pkg.apis.meta.v1.FieldsV1", "RawJson"),
    ("apimachinery.pkg.runtime.RawExtension", "RawJson"),
    ("apimachinery.pkg.util.intstr.IntOrString", "IntOrString"),
    ("apimachinery.pkg.api.resource.Quantity", "Quantity"),
    ("apimachinery.pkg.api.resource.QuantityValue", "Quantity"),
];

/// Comment markers of go-to-protobuf that announce custom marshalling.
const CUSTOM_MARKERS: &[&str] = &[
    "+protobuf.as=",
    "+protobuf.embed=",
    "+protobuf.options.marshal=false",
];

/// Kinds that apimachinery registers in every group version (its unversioned
/// types) and that have no fixture; all are `meta.v1` messages.
const UNVERSIONED_KINDS: &[&str] = &["APIGroupList", "APIResourceList"];

#[derive(Debug)]
struct ProtoMessage {
    /// Package relative to `k8s.io.`, e.g. `api.core.v1`.
    pkg: String,
    name: String,
    fields: Vec<ProtoField>,
    nullable_marker: bool,
    custom_marker: bool,
}

#[derive(Debug)]
struct ProtoField {
    /// The proto (= JSON) name.
    name: String,
    tag: u32,
    kind: ProtoKind,
    label: ProtoLabel,
    /// Marked `+optional` (or `+k8s:optional`).
    optional: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum ProtoKind {
    /// A `desc::Kind` variant name.
    Scalar(&'static str),
    /// Full message name without `k8s.io.`.
    Message(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProtoLabel {
    Optional,
    Repeated,
    Map,
}

/// The generated file, and the report of inferences.
pub(super) struct Generated {
    pub source: String,
    pub report: Vec<String>,
}

fn read(path: &Path) -> Result<String, String> {
    fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Files named `name` under `dir`, sorted.
fn files_named(dir: &Path, name: &str, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files_named(&path, name, out)?;
        } else if path.file_name().is_some_and(|n| n == name) {
            out.push(path);
        }
    }
    Ok(())
}

fn scalar(ty: &str) -> Option<&'static str> {
    Some(match ty {
        "bool" => "Bool",
        "int32" => "I32",
        "int64" => "I64",
        "double" => "F64",
        "string" => "Str",
        "bytes" => "Bytes",
        _ => return None,
    })
}

/// A field type: a scalar, a message of `pkg`, or `.k8s.io.<full name>`.
fn proto_kind(pkg: &str, ty: &str) -> Option<ProtoKind> {
    if let Some(s) = scalar(ty) {
        Some(ProtoKind::Scalar(s))
    } else if let Some(full) = ty.strip_prefix(".k8s.io.") {
        Some(ProtoKind::Message(full.to_string()))
    } else if ty.chars().all(|c| c.is_ascii_alphanumeric()) {
        Some(ProtoKind::Message(format!("{pkg}.{ty}")))
    } else {
        None
    }
}

/// `optional T name = N;`, `repeated T name = N;` or `map<string, T> name = N;`.
fn parse_field(pkg: &str, line: &str, comments: &[&str]) -> Option<ProtoField> {
    let (decl, tag) = line.strip_suffix(';')?.split_once(" = ")?;
    let (label, ty, name) = if let Some(map) = decl.strip_prefix("map<string, ") {
        let (value, name) = map.split_once("> ")?;
        (ProtoLabel::Map, value, name)
    } else {
        let mut words = decl.split(' ');
        let label = match words.next()? {
            "optional" => ProtoLabel::Optional,
            "repeated" => ProtoLabel::Repeated,
            _ => return None,
        };
        let ty = words.next()?;
        let name = words.next()?;
        if words.next().is_some() {
            return None;
        }
        (label, ty, name)
    };
    Some(ProtoField {
        name: name.to_string(),
        tag: tag.parse().ok()?,
        kind: proto_kind(pkg, ty)?,
        label,
        optional: comments
            .iter()
            .any(|c| matches!(c.trim(), "+optional" | "+k8s:optional")),
    })
}

/// Parses one `generated.proto`. go-to-protobuf writes a fixed subset of
/// proto2, one declaration per line; anything else is an error.
fn parse_proto(file: &str, text: &str, out: &mut Vec<ProtoMessage>) -> Result<(), String> {
    let mut pkg: Option<String> = None;
    let mut comments: Vec<&str> = Vec::new();
    let mut message: Option<ProtoMessage> = None;
    let mut in_block_comment = false;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        let error = || format!("{file}:{}: unsupported: {line}", n + 1);
        if in_block_comment || line.starts_with("/*") {
            in_block_comment = !line.ends_with("*/");
            continue;
        }
        if let Some(comment) = line.strip_prefix("//") {
            comments.push(comment);
            continue;
        }
        let leading = std::mem::take(&mut comments);
        if line.is_empty() {
            continue;
        }
        if let Some(msg) = &mut message {
            if line == "}" {
                out.extend(message.take());
            } else {
                let pkg = pkg.as_deref().ok_or_else(error)?;
                msg.fields
                    .push(parse_field(pkg, line, &leading).ok_or_else(error)?);
            }
        } else if let Some(name) = line
            .strip_prefix("message ")
            .and_then(|l| l.strip_suffix(" {"))
        {
            let has = |marker: &str| leading.iter().any(|c| c.contains(marker));
            message = Some(ProtoMessage {
                pkg: pkg.clone().ok_or_else(error)?,
                name: name.to_string(),
                fields: Vec::new(),
                nullable_marker: has("+protobuf.nullable=true"),
                custom_marker: CUSTOM_MARKERS.iter().any(|m| has(m)),
            });
        } else if let Some(p) = line
            .strip_prefix("package k8s.io.")
            .and_then(|l| l.strip_suffix(';'))
        {
            pkg = Some(p.to_string());
        } else if !(line == "syntax = \"proto2\";"
            || line.starts_with("import \"")
            || line.starts_with("option go_package = "))
        {
            return Err(error());
        }
    }
    match message {
        Some(m) => Err(format!("{file}: message {} is not closed", m.name)),
        None => Ok(()),
    }
}

/// What the round-trip fixtures tell about the messages.
#[derive(Default)]
struct FixtureFacts {
    /// (apiVersion, kind) -> message.
    kinds: BTreeMap<(String, String), usize>,
    /// Messages whose JSON carries `kind` and `apiVersion` outside their fields.
    type_meta: BTreeSet<usize>,
    /// (message, field) embedded with `json:",inline"`.
    inline: BTreeSet<(usize, usize)>,
    /// Messages some fixture reaches.
    seen: BTreeSet<usize>,
    /// (message, field) -> JSON key, where it is not the proto name (Go's
    /// `protobuf:"...,name=Name"` tag disagrees with its `json:"name"` tag).
    json_names: BTreeMap<(usize, usize), String>,
}

struct Schema<'a> {
    messages: &'a [ProtoMessage],
    index: HashMap<String, usize>,
    specials: HashMap<&'static str, &'static str>,
}

impl Schema<'_> {
    fn full(&self, i: usize) -> String {
        format!("{}.{}", self.messages[i].pkg, self.messages[i].name)
    }

    fn target(&self, field: &ProtoField) -> Option<usize> {
        match &field.kind {
            ProtoKind::Message(full) => self.index.get(full).copied(),
            ProtoKind::Scalar(_) => None,
        }
    }

    /// A message whose JSON is an object of its fields (not special).
    fn plain(&self, i: usize) -> bool {
        let msg = &self.messages[i];
        !msg.nullable_marker && !self.specials.contains_key(self.full(i).as_str())
    }

    /// The message of a fixture's kind: `Kind` in the package of the group
    /// (`api.<first label of the group, or core>.<version>`), else the one
    /// package of that version with such a message (`meta.v1.Status`).
    fn kind_message(&self, api_version: &str, kind: &str) -> Result<usize, String> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let dir = group.split('.').next().filter(|g| !g.is_empty());
        let preferred = format!("api.{}.{version}.{kind}", dir.unwrap_or("core"));
        if let Some(&i) = self.index.get(&preferred) {
            return Ok(i);
        }
        let candidates: Vec<usize> = (0..self.messages.len())
            .filter(|&i| {
                let m = &self.messages[i];
                m.name == kind && m.pkg.rsplit('.').next() == Some(version)
            })
            .collect();
        match candidates[..] {
            [i] => Ok(i),
            _ => Err(format!(
                "{api_version} {kind}: {} candidate messages",
                candidates.len()
            )),
        }
    }

    /// The path of fields from message `m` to the field for JSON key `key`:
    /// the field itself, else through embedded (inline) message fields.
    fn resolve(&self, m: usize, key: &str, depth: usize) -> Option<Vec<(usize, usize)>> {
        let msg = &self.messages[m];
        let exact = msg.fields.iter().position(|f| f.name == key);
        let mut case_insensitive =
            (0..msg.fields.len()).filter(|&j| msg.fields[j].name.eq_ignore_ascii_case(key));
        if let Some(j) = exact.or_else(|| {
            let j = case_insensitive.next();
            j.filter(|_| case_insensitive.next().is_none())
        }) {
            return Some(vec![(m, j)]);
        }
        if depth == 4 {
            return None;
        }
        let mut found = msg.fields.iter().enumerate().filter_map(|(j, f)| {
            let t = self
                .target(f)
                .filter(|&t| f.label == ProtoLabel::Optional && self.plain(t))?;
            let mut path = self.resolve(t, key, depth + 1)?;
            path.insert(0, (m, j));
            Some(path)
        });
        let first = found.next();
        if found.next().is_some() { None } else { first }
    }

    /// Walks a fixture value of message `m`, recording what it shows.
    fn walk(
        &self,
        m: usize,
        value: &Value,
        path: &str,
        facts: &mut FixtureFacts,
    ) -> Result<(), String> {
        facts.seen.insert(m);
        let Value::Object(object) = value else {
            return Ok(());
        };
        if !self.plain(m) {
            return Ok(());
        }
        for (key, value) in object {
            // Go's TypeMeta, never a field of an embedded message.
            if (key == "kind" || key == "apiVersion")
                && !self.messages[m].fields.iter().any(|f| f.name == *key)
            {
                facts.type_meta.insert(m);
                continue;
            }
            let Some(resolved) = self.resolve(m, key, 0) else {
                return Err(format!(
                    "{path}.{key}: no (or no single) field of {}",
                    self.full(m)
                ));
            };
            let (&(owner, j), embedding) = resolved.split_last().ok_or("empty path")?;
            facts.inline.extend(embedding.iter().copied());
            facts.seen.extend(resolved.iter().map(|&(o, _)| o));
            let field = &self.messages[owner].fields[j];
            if field.name != *key
                && let Some(other) = facts.json_names.insert((owner, j), key.clone())
                && other != *key
            {
                return Err(format!(
                    "{}.{}: JSON keys {other} and {key}",
                    self.full(owner),
                    field.name
                ));
            }
            let Some(t) = self.target(field) else {
                continue;
            };
            let path = format!("{path}.{key}");
            match (field.label, value) {
                (ProtoLabel::Repeated, Value::Array(items)) => {
                    for (n, item) in items.iter().enumerate() {
                        self.walk(t, item, &format!("{path}[{n}]"), facts)?;
                    }
                }
                (ProtoLabel::Map, Value::Object(entries)) => {
                    for (k, v) in entries {
                        self.walk(t, v, &format!("{path}[{k}]"), facts)?;
                    }
                }
                _ => self.walk(t, value, &path, facts)?,
            }
        }
        Ok(())
    }
}

/// Generates `schema.rs` from the vendored Kubernetes data.
pub(super) fn generate() -> Result<Generated, String> {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("kubernetes");
    let mut report = Vec::new();

    let mut protos = Vec::new();
    files_named(&data.join("k8s.io"), "generated.proto", &mut protos)?;
    let mut messages = Vec::new();
    for file in &protos {
        let name = file
            .strip_prefix(&data)
            .unwrap_or(file)
            .display()
            .to_string();
        parse_proto(&name, &read(file)?, &mut messages)?;
    }
    messages.sort_by(|a, b| (&a.pkg, &a.name).cmp(&(&b.pkg, &b.name)));
    let schema = Schema {
        messages: &messages,
        index: messages
            .iter()
            .enumerate()
            .map(|(i, m)| (format!("{}.{}", m.pkg, m.name), i))
            .collect(),
        specials: SPECIALS.iter().copied().collect(),
    };
    if schema.index.len() != messages.len() {
        return Err("duplicate message names".into());
    }
    for msg in &messages {
        for field in &msg.fields {
            if let ProtoKind::Message(full) = &field.kind
                && !schema.index.contains_key(full)
            {
                return Err(format!(
                    "{}.{}.{}: unknown message {full}",
                    msg.pkg, msg.name, field.name
                ));
            }
        }
    }

    // The round-trip fixtures.
    let mut facts = FixtureFacts::default();
    let fixtures_dir = data.join("k8s.io/api/testdata/HEAD");
    let mut fixtures: Vec<PathBuf> = fs::read_dir(&fixtures_dir)
        .map_err(|e| format!("{}: {e}", fixtures_dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    fixtures.sort();
    for file in &fixtures {
        let name = file.file_name().unwrap_or_default().to_string_lossy();
        let value: Value =
            serde_json::from_str(&read(file)?).map_err(|e| format!("{name}: {e}"))?;
        // `<group>.<version>.<Kind>.json`, the core group being `core`.
        let (group_version, kind) = name
            .strip_suffix(".json")
            .and_then(|n| n.rsplit_once('.'))
            .ok_or_else(|| format!("{name}: not <group>.<version>.<Kind>.json"))?;
        let api_version = match group_version.rsplit_once('.') {
            Some(("core", version)) => version.to_string(),
            Some((group, version)) => format!("{group}/{version}"),
            None => return Err(format!("{name}: no group")),
        };
        let m = schema
            .kind_message(&api_version, kind)
            .map_err(|e| format!("{name}: {e}"))?;
        facts.kinds.insert((api_version, kind.to_string()), m);
        schema
            .walk(m, &value, "", &mut facts)
            .map_err(|e| format!("{name}: {e}"))?;
    }
    // Messages no fixture reaches embed what is embedded elsewhere under the
    // same field name.
    let embedded: BTreeSet<(&str, usize)> = facts
        .inline
        .iter()
        .filter_map(|&(i, j)| {
            let field = &messages[i].fields[j];
            schema.target(field).map(|t| (field.name.as_str(), t))
        })
        .collect();
    let mut inline = facts.inline.clone();
    for (i, msg) in messages.iter().enumerate() {
        if facts.seen.contains(&i) {
            continue;
        }
        for (j, field) in msg.fields.iter().enumerate() {
            if let Some(t) = schema.target(field)
                && field.label == ProtoLabel::Optional
                && embedded.contains(&(field.name.as_str(), t))
            {
                inline.insert((i, j));
                report.push(format!(
                    "inline (by name, no fixture): {}.{}",
                    schema.full(i),
                    field.name
                ));
            }
        }
    }
    for &(i, j) in &facts.inline {
        report.push(format!(
            "inline: {}.{}",
            schema.full(i),
            messages[i].fields[j].name
        ));
    }
    for (&(i, j), json) in &facts.json_names {
        report.push(format!(
            "JSON name: {}.{} is {json}",
            schema.full(i),
            messages[i].fields[j].name
        ));
    }
    let unseen = (0..messages.len())
        .filter(|i| !facts.seen.contains(i))
        .count();
    report.push(format!(
        "{unseen} of {} messages in no fixture",
        messages.len()
    ));

    // Kinds: the fixtures', the unversioned ones, and their lists.
    let mut kinds = facts.kinds.clone();
    let mut type_meta = facts.type_meta.clone();
    for kind in UNVERSIONED_KINDS {
        let i = schema.kind_message("v1", kind)?;
        kinds.insert(("v1".to_string(), kind.to_string()), i);
        type_meta.insert(i);
    }
    for ((api_version, kind), i) in kinds.clone() {
        let msg = &messages[i];
        let list = format!("{}.{}List", msg.pkg, msg.name);
        if let Some(&l) = schema.index.get(&list)
            && messages[l].fields.iter().any(|f| {
                f.name == "items" && f.label == ProtoLabel::Repeated && schema.target(f) == Some(i)
            })
        {
            kinds.insert((api_version, format!("{kind}List")), l);
            type_meta.insert(l);
        }
    }

    let mut out_messages = Vec::new();
    for (i, msg) in messages.iter().enumerate() {
        let full = schema.full(i);
        let special = if let Some(s) = schema.specials.get(full.as_str()) {
            *s
        } else if msg.nullable_marker
            && msg.fields.len() == 1
            && msg.fields[0].name == "items"
            && msg.fields[0].label == ProtoLabel::Repeated
            && msg.fields[0].kind == ProtoKind::Scalar("Str")
        {
            "StringList"
        } else if msg.custom_marker || msg.nullable_marker {
            return Err(format!(
                "{full} is marshalled by custom Go code; add it to SPECIALS"
            ));
        } else {
            "None"
        };
        let mut fields = Vec::new();
        for (j, field) in msg.fields.iter().enumerate() {
            let kind = match &field.kind {
                ProtoKind::Scalar(s) => (*s).to_string(),
                ProtoKind::Message(_) => {
                    format!("Msg({})", schema.target(field).ok_or("unresolved")?)
                }
            };
            let label = match field.label {
                _ if inline.contains(&(i, j)) => "Inline",
                ProtoLabel::Repeated => "Rep",
                ProtoLabel::Map => "Map",
                ProtoLabel::Optional if field.optional => "Opt",
                ProtoLabel::Optional => "Req",
            };
            let json = facts.json_names.get(&(i, j)).unwrap_or(&field.name);
            fields.push(format!("f({json:?}, {}, {kind}, {label})", field.tag));
        }
        out_messages.push((full, special, fields));
    }

    // Emit.
    let mut s = String::new();
    s.push_str(
        "// @generated by reflector/wire/src/protobuf/generate.rs from the Kubernetes API data\n\
         // in reflector/wire/kubernetes (versions in its README). Do not edit. Regenerate with\n\
         // UPDATE_PROTO_SCHEMA=1 cargo test -p kubecache-wire --lib protobuf::generate\n\n\
         use super::desc::Kind::*;\n\
         use super::desc::Label::*;\n\
         use super::desc::Special as S;\n\
         use super::desc::{Message, f, m};\n\n",
    );
    writeln!(
        s,
        "/// Every message, sorted by package and name; `Msg(i)` is `MESSAGES[i]`.\n\
         pub(crate) static MESSAGES: [Message; {}] = [",
        out_messages.len()
    )
    .ok();
    for (i, (full, special, fields)) in out_messages.iter().enumerate() {
        let tm = type_meta.contains(&i);
        if fields.is_empty() {
            writeln!(
                s,
                "    m(\"k8s.io.{full}\", S::{special}, {tm}, &[]), // {i}"
            )
            .ok();
            continue;
        }
        writeln!(s, "    m(\"k8s.io.{full}\", S::{special}, {tm}, &[ // {i}").ok();
        for field in fields {
            writeln!(s, "        {field},").ok();
        }
        s.push_str("    ]),\n");
    }
    s.push_str("];\n\n");
    writeln!(
        s,
        "/// (apiVersion, kind, message), sorted by apiVersion then kind.\n\
         pub(crate) static KINDS: [(&str, &str, u16); {}] = [",
        kinds.len()
    )
    .ok();
    for ((v, k), i) in &kinds {
        writeln!(s, "    ({v:?}, {k:?}, {i}),").ok();
    }
    s.push_str("];\n");
    Ok(Generated { source: s, report })
}

#[test]
fn generated_schema_is_fresh() {
    let generated = generate().unwrap_or_else(|e| panic!("generator failed: {e}"));
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/protobuf/schema.rs");
    if std::env::var_os("UPDATE_PROTO_SCHEMA").is_some() {
        for line in &generated.report {
            eprintln!("{line}");
        }
        fs::write(&path, &generated.source).expect("write schema.rs");
        return;
    }
    let committed = fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated.source,
        "{} is stale; regenerate with \
         UPDATE_PROTO_SCHEMA=1 cargo test -p kubecache-wire --lib protobuf::generate",
        path.display()
    );
}
