//! Generator of `schema.rs`, the runtime schema of the Kubernetes protobuf
//! messages (test-only code).
//!
//! Its input is Kubernetes' own data, vendored unmodified in `kubernetes/`
//! beside `Cargo.toml` (versions, provenance and how to refresh it in its
//! README), so regenerating and the freshness check need neither the network
//! nor any other crate:
//!
//! - The `generated.proto` files of k8s.io/api, apimachinery and metrics:
//!   every message, its fields with their numbers, types, `repeated` and
//!   `map<string, _>`. Leading comments carry go-to-protobuf's markers: a
//!   message with `+protobuf.nullable=true` is a slice wrapper (`Verbs`,
//!   `ExtraValue`) and one with another custom-marshalling marker must be in
//!   [`SPECIALS`].
//! - The Go structs the messages are generated from (`types.go` and a few
//!   others beside each `generated.proto`, read by [`go`]): each field's JSON
//!   name, the struct's field order (the JSON key order), `omitempty`,
//!   pointer or value, embedding with `json:",inline"` (Volume's
//!   `volumeSource`, Probe's `handler`), and whether the struct embeds
//!   `TypeMeta` (its JSON carries `kind`/`apiVersion`, which protobuf lacks).
//!   Fields are matched by their protobuf field number; a message without
//!   its struct, or a field on one side only, is an error.
//! - k8s.io/api's round-trip fixtures (`testdata/HEAD/*.json`, one per kind,
//!   every field filled): each kind's `apiVersion` and message; every key of
//!   every fixture must resolve to a field of the schema (a check of the
//!   above).
//!
//! - `history.tsv` (derived, not vendored: see the README there): the fields
//!   Kubernetes minors older than the vendored one lack, and those their Go
//!   structs held otherwise; compiled into each field's `desc::History`.
//!
//! Kinds are the fixtures' kinds, [`UNVERSIONED_KINDS`], and `FooList` beside
//! every kind `Foo` whose `items` are `Foo`s.
//!
//! Regenerate with
//! `UPDATE_PROTO_SCHEMA=1 cargo test -p kubecache-wire --lib protobuf::generate`;
//! without the variable, the test fails when the committed file is stale.

mod go;

use std::collections::{BTreeMap, HashMap};
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

/// Fields whose objects the API server gives a `TypeMeta` that protobuf
/// cannot carry: `(message, field, apiVersion, kind)`. apps' conversion sets
/// `apiVersion: v1, kind: PersistentVolumeClaim` on every volume claim
/// template (kubernetes/kubernetes#87583), so the API server's JSON has them.
const NESTED_TYPE_META: &[(&str, &str, &str, &str)] = &[
    (
        "api.apps.v1.StatefulSetSpec",
        "volumeClaimTemplates",
        "v1",
        "PersistentVolumeClaim",
    ),
    (
        "api.apps.v1beta1.StatefulSetSpec",
        "volumeClaimTemplates",
        "v1",
        "PersistentVolumeClaim",
    ),
    (
        "api.apps.v1beta2.StatefulSetSpec",
        "volumeClaimTemplates",
        "v1",
        "PersistentVolumeClaim",
    ),
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
fn parse_field(pkg: &str, line: &str) -> Option<ProtoField> {
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
                msg.fields.push(parse_field(pkg, line).ok_or_else(error)?);
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

/// A field of the generated table.
struct OutField {
    json: String,
    /// Its position in the `ProtoMessage`'s fields.
    proto: usize,
    inline: bool,
    /// A `desc::Go` variant name.
    go: &'static str,
    type_meta: Option<(&'static str, &'static str)>,
    /// `desc::History`: the first minor with the field (0: all), and the
    /// minor before which Go held it as another `desc::Go`.
    history: (u8, Option<(u8, String)>),
}

/// A message of the generated table: its fields in Go struct order.
struct OutMessage {
    special: &'static str,
    /// The Go struct embeds `TypeMeta`.
    type_meta: bool,
    fields: Vec<OutField>,
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

    /// The special form of message `i`, if any.
    fn special(&self, i: usize) -> Result<&'static str, String> {
        let msg = &self.messages[i];
        let full = self.full(i);
        Ok(if let Some(s) = self.specials.get(full.as_str()) {
            s
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
        })
    }

    /// The Go struct of message `i`, following `type X pkg.Y` definitions.
    fn go_struct<'p>(
        &self,
        i: usize,
        packages: &'p HashMap<String, go::GoPackage>,
    ) -> Result<&'p [go::GoField], String> {
        let msg = &self.messages[i];
        let mut key = (
            format!("k8s.io/{}", msg.pkg.replace('.', "/")),
            msg.name.clone(),
        );
        for _ in 0..4 {
            match packages.get(&key.0).and_then(|p| p.get(&key.1)) {
                Some(go::GoType::Struct(fields)) => return Ok(fields),
                Some(go::GoType::Defined(path, name)) => key = (path.clone(), name.clone()),
                None => break,
            }
        }
        Err(format!(
            "{}: no Go struct {}.{}",
            self.full(i),
            key.0,
            key.1
        ))
    }

    /// Message `i` as the table has it: for a plain message, its fields in
    /// Go struct order with what the Go struct says of each.
    fn out_message(
        &self,
        i: usize,
        packages: &HashMap<String, go::GoPackage>,
    ) -> Result<OutMessage, String> {
        let msg = &self.messages[i];
        let full = self.full(i);
        let special = self.special(i)?;
        if special != "None" {
            let fields = (0..msg.fields.len())
                .map(|j| OutField {
                    json: msg.fields[j].name.clone(),
                    proto: j,
                    inline: false,
                    go: "Value",
                    type_meta: None,
                    history: (0, None),
                })
                .collect();
            return Ok(OutMessage {
                special,
                type_meta: false,
                fields,
            });
        }
        let mut out = OutMessage {
            special,
            type_meta: false,
            fields: Vec::new(),
        };
        for gf in self.go_struct(i, packages)? {
            let error = |what: &str| format!("{full}: Go field {} {}: {what}", gf.json, gf.ty);
            if gf.is_type_meta() {
                out.type_meta = true;
                continue;
            }
            let Some(tag) = gf.tag else {
                if gf.json == "-" {
                    continue;
                }
                return Err(error("no protobuf tag"));
            };
            let j = msg
                .fields
                .iter()
                .position(|f| f.tag == tag)
                .ok_or_else(|| error("no such protobuf field"))?;
            let pf = &msg.fields[j];
            let target = self.target(pf);
            let inline = gf.embedded && gf.json.is_empty();
            if inline
                && (pf.label != ProtoLabel::Optional
                    || gf.pointer()
                    || !target.is_some_and(|t| self.plain(t)))
            {
                return Err(error("embedded, but not a struct value"));
            }
            // encoding/json names an untagged field by its Go name; a field
            // it skips (`json:"-"`: only `runtime.Unknown`'s `raw`, whose
            // message is never JSON) keeps its proto name.
            let json = match gf.json.as_str() {
                _ if inline => &pf.name,
                "" => &gf.name,
                "-" => &pf.name,
                json => json,
            };
            let nullable = gf.pointer()
                || gf.ty.starts_with("[]")
                || gf.ty.starts_with("map[")
                || pf.label != ProtoLabel::Optional
                || target.is_some_and(|t| self.messages[t].nullable_marker);
            let go = match (nullable, gf.omitempty) {
                (false, false) => "Value",
                (false, true) => "ValueOmitEmpty",
                (true, false) => "Nil",
                (true, true) => "NilOmitEmpty",
            };
            let type_meta = NESTED_TYPE_META
                .iter()
                .find(|(m, f, _, _)| *m == full && *f == json)
                .map(|&(_, _, v, k)| (v, k));
            out.fields.push(OutField {
                json: json.to_string(),
                proto: j,
                inline,
                go,
                type_meta,
                history: (0, None),
            });
        }
        let mut matched: Vec<usize> = out.fields.iter().map(|f| f.proto).collect();
        matched.sort_unstable();
        if matched != (0..msg.fields.len()).collect::<Vec<_>>() {
            return Err(format!(
                "{full}: the Go struct and the message have different fields"
            ));
        }
        Ok(out)
    }
}

/// The field of message `m` (or of a message it embeds inline) with JSON
/// key `key`: (message, position).
fn resolve(out: &[OutMessage], schema: &Schema<'_>, m: usize, key: &str) -> Option<(usize, usize)> {
    let msg = &out[m];
    if let Some(j) = msg.fields.iter().position(|f| !f.inline && f.json == key) {
        return Some((m, j));
    }
    msg.fields.iter().filter(|f| f.inline).find_map(|f| {
        let t = schema.target(&schema.messages[m].fields[f.proto])?;
        resolve(out, schema, t, key)
    })
}

/// Checks that every key of a fixture value of message `m` is a field.
fn walk(
    out: &[OutMessage],
    schema: &Schema<'_>,
    m: usize,
    value: &Value,
    path: &str,
) -> Result<(), String> {
    let Value::Object(object) = value else {
        return Ok(());
    };
    if out[m].special != "None" {
        return Ok(());
    }
    for (key, value) in object {
        if out[m].type_meta && (key == "kind" || key == "apiVersion") {
            continue;
        }
        let Some((owner, j)) = resolve(out, schema, m, key) else {
            return Err(format!("{path}.{key}: no field of {}", schema.full(m)));
        };
        let field = &schema.messages[owner].fields[out[owner].fields[j].proto];
        let Some(t) = schema.target(field) else {
            continue;
        };
        let path = format!("{path}.{key}");
        match (field.label, value) {
            (ProtoLabel::Repeated, Value::Array(items)) => {
                for (n, item) in items.iter().enumerate() {
                    walk(out, schema, t, item, &format!("{path}[{n}]"))?;
                }
            }
            (ProtoLabel::Map, Value::Object(entries)) => {
                for (k, v) in entries {
                    walk(out, schema, t, v, &format!("{path}[{k}]"))?;
                }
            }
            _ => walk(out, schema, t, value, &path)?,
        }
    }
    Ok(())
}

/// Every `.go` file of the directory of each `generated.proto`, by Go
/// package path (`k8s.io/api/core/v1`).
fn go_packages(data: &Path, protos: &[PathBuf]) -> Result<HashMap<String, go::GoPackage>, String> {
    let mut packages = HashMap::new();
    for proto in protos {
        let dir = proto.parent().ok_or("a file has a directory")?;
        let path = dir
            .strip_prefix(data)
            .map_err(|e| e.to_string())?
            .display()
            .to_string();
        let mut files: Vec<PathBuf> = fs::read_dir(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "go"))
            .collect();
        files.sort();
        let mut package = go::GoPackage::new();
        for file in files {
            let name = file
                .strip_prefix(data)
                .unwrap_or(&file)
                .display()
                .to_string();
            go::parse_file(&name, &read(&file)?, &mut package)?;
        }
        packages.insert(path, package);
    }
    Ok(packages)
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
    let packages = go_packages(&data, &protos)?;
    let mut out = (0..messages.len())
        .map(|i| schema.out_message(i, &packages))
        .collect::<Result<Vec<_>, _>>()?;
    apply_history(&read(&data.join("history.tsv"))?, &schema, &mut out)?;
    for (i, msg) in out.iter().enumerate() {
        for field in &msg.fields {
            let proto = &messages[i].fields[field.proto];
            if field.inline {
                report.push(format!("inline: {}.{}", schema.full(i), proto.name));
            }
            if field.json != proto.name {
                report.push(format!(
                    "JSON name: {}.{} is {}",
                    schema.full(i),
                    proto.name,
                    field.json
                ));
            }
        }
    }

    // The round-trip fixtures: the kinds, and a check of every key.
    let mut kinds = BTreeMap::new();
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
        kinds.insert((api_version, kind.to_string()), m);
        walk(&out, &schema, m, &value, "").map_err(|e| format!("{name}: {e}"))?;
    }

    // Kinds: the fixtures', the unversioned ones, and their lists.
    for kind in UNVERSIONED_KINDS {
        let i = schema.kind_message("v1", kind)?;
        kinds.insert(("v1".to_string(), kind.to_string()), i);
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
        }
    }

    // Emit.
    let mut s = String::new();
    s.push_str(
        "// @generated by wire/src/protobuf/generate.rs from the Kubernetes API data\n\
         // in wire/kubernetes (versions in its README). Do not edit. Regenerate with\n\
         // UPDATE_PROTO_SCHEMA=1 cargo test -p kubecache-wire --lib protobuf::generate\n\n\
         use super::desc::Go::*;\n\
         use super::desc::Kind::*;\n\
         use super::desc::Label::*;\n\
         use super::desc::Special as S;\n\
         use super::desc::{Message, f, fh, ft, m};\n\n",
    );
    writeln!(
        s,
        "/// Every message, sorted by package and name; `Msg(i)` is `MESSAGES[i]`.\n\
         pub(crate) static MESSAGES: [Message; {}] = [",
        out.len()
    )
    .ok();
    for (i, msg) in out.iter().enumerate() {
        let full = schema.full(i);
        let (special, tm) = (msg.special, msg.type_meta);
        let proto = &messages[i].fields;
        let mut by_tag: Vec<usize> = (0..msg.fields.len()).collect();
        by_tag.sort_by_key(|&p| proto[msg.fields[p].proto].tag);
        let by_tag = if by_tag.iter().enumerate().all(|(n, &p)| n == p) {
            String::new()
        } else {
            let positions: Vec<String> = by_tag.iter().map(|p| p.to_string()).collect();
            positions.join(", ")
        };
        if msg.fields.is_empty() {
            writeln!(
                s,
                "    m(\"k8s.io.{full}\", S::{special}, {tm}, &[], &[]), // {i}"
            )
            .ok();
            continue;
        }
        writeln!(s, "    m(\"k8s.io.{full}\", S::{special}, {tm}, &[ // {i}").ok();
        for field in &msg.fields {
            let proto = &proto[field.proto];
            let kind = match &proto.kind {
                ProtoKind::Scalar(s) => (*s).to_string(),
                ProtoKind::Message(_) => {
                    format!("Msg({})", schema.target(proto).ok_or("unresolved")?)
                }
            };
            let label = match proto.label {
                _ if field.inline => "Inline",
                ProtoLabel::Repeated => "Rep",
                ProtoLabel::Map => "Map",
                ProtoLabel::Optional => "One",
            };
            let (json, tag, go) = (&field.json, proto.tag, field.go);
            match (field.type_meta, &field.history) {
                (None, (0, None)) => {
                    writeln!(s, "        f({json:?}, {tag}, {kind}, {label}, {go}),")
                }
                (None, (since, held)) => {
                    let held = match held {
                        None => "None".to_string(),
                        Some((minor, go)) => format!("Some(({minor}, {go}))"),
                    };
                    writeln!(
                        s,
                        "        fh({json:?}, {tag}, {kind}, {label}, {go}, {since}, {held}),"
                    )
                }
                (Some((v, k)), (0, None)) => writeln!(
                    s,
                    "        ft({json:?}, {tag}, {kind}, {label}, {go}, ({v:?}, {k:?})),"
                ),
                (Some(_), _) => return Err(format!("{full}.{json}: type meta and history")),
            }
            .ok();
        }
        writeln!(s, "    ], &[{by_tag}]),").ok();
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

/// Sets each field's history from `kubernetes/history.tsv` (`message field
/// added|go minor [before]`, derived as its README says): every line must
/// name a field of the schema.
fn apply_history(tsv: &str, schema: &Schema<'_>, out: &mut [OutMessage]) -> Result<(), String> {
    for line in tsv.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let cols: Vec<&str> = line.split('\t').collect();
        let [message, json, change, minor, before] = cols[..] else {
            return Err(format!("history.tsv: not 5 columns: {line:?}"));
        };
        let minor: u8 = minor
            .parse()
            .map_err(|e| format!("history.tsv: {line:?}: {e}"))?;
        let field = message
            .strip_prefix("k8s.io.")
            .and_then(|m| schema.index.get(m))
            .and_then(|&m| out[m].fields.iter_mut().find(|f| f.json == json))
            .ok_or_else(|| format!("history.tsv: no field {message}.{json}"))?;
        match (change, before) {
            ("added", "") => field.history.0 = minor,
            ("go", "Value" | "ValueOmitEmpty" | "Nil" | "NilOmitEmpty") => {
                field.history.1 = Some((minor, before.to_string()));
            }
            _ => return Err(format!("history.tsv: unknown change {line:?}")),
        }
    }
    Ok(())
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
