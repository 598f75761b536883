//! Generator of `schema.rs`, the runtime schema of the Kubernetes protobuf
//! messages (test-only code).
//!
//! Two crates already in the dependency graph hold the facts, each half of them:
//!
//! - `k8s-pb` (prost output of the official `generated.proto` files): every
//!   message, its fields in `.proto` order, their tags, scalar/message types,
//!   `repeated` and `map<string, _>`, plus `impl Resource` blocks naming
//!   (apiVersion, kind). Its Rust field names are snake_case, so the proto
//!   (= JSON) names are lost: `volumeID` became `volume_id`.
//! - `k8s-openapi` (serde code generated from the OpenAPI spec): the JSON name
//!   of every field (`"volumeID" => Field::Key_volume_id`) and whether it is
//!   required (a non-`Option` Rust type, i.e. no `omitempty` in Go).
//!
//! The generator reads both crates' sources from the cargo registry (the
//! versions pinned in `Cargo.lock`; every `v1_*` directory of k8s-openapi, as
//! JSON names never change between versions), joins messages on (package,
//! name case-insensitively) and fields on their name with case and `_`
//! removed. Go structs embedded with `json:",inline"` are found as message
//! fields the parent's definition lacks while it has the embedded message's
//! fields; the embedded message then takes its names from the parent. For the
//! messages the OpenAPI spec does not describe (`*Options`, metrics, removed
//! versions) a field takes the spelling every definition agrees on for that
//! normalized name, else lowerCamelCase. Every guess, embedding and conflict is
//! printed when regenerating. Messages whose JSON form is custom Go code
//! (`Time`, `Quantity`, ...) are named in [`SPECIALS`]; slice wrapper messages
//! (`Verbs`, `ExtraValue`) are found by their `+protobuf.nullable=true`
//! marker. A message carrying another custom-marshalling marker that is not
//! handled is an error.
//!
//! Regenerate with
//! `UPDATE_PROTO_SCHEMA=1 cargo test -p kubecache-reflector --lib protobuf::generate`;
//! without the variable, the test fails when the committed file is stale.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

/// The k8s-pb top-level directories that are transcoded. `apiextensions_apiserver`
/// is left out: CRD schemas use `JSONSchemaPropsOr*` unions whose JSON form is
/// custom Go code this transcoder does not implement.
const PB_ROOTS: &[&str] = &["api", "apimachinery", "kube_aggregator", "metrics"];

/// Packages (relative to `k8s.io.`) that are skipped inside [`PB_ROOTS`].
const PB_SKIP: &[&str] = &["apimachinery.pkg.apis.testapigroup"];

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

/// Doc-comment markers of go-to-protobuf that announce custom marshalling.
const CUSTOM_MARKERS: &[&str] = &[
    "+protobuf.as=",
    "+protobuf.embed=",
    "+protobuf.options.marshal=false",
];

#[derive(Debug)]
struct PbMessage {
    /// Package relative to `k8s.io.`, e.g. `api.core.v1`.
    pkg: String,
    /// prost's (UpperCamelCase) name.
    name: String,
    fields: Vec<PbField>,
    nullable_marker: bool,
    custom_marker: bool,
}

#[derive(Debug)]
struct PbField {
    /// Rust field name without `r#`.
    rust: String,
    tag: u32,
    kind: PbKind,
    label: PbLabel,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum PbKind {
    Scalar(&'static str),
    /// (package, prost name).
    Message(String, String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PbLabel {
    Optional,
    Repeated,
    Map,
}

/// What k8s-openapi knows about one definition.
#[derive(Debug, Default)]
struct OaDefinition {
    /// The exact (Go) name, e.g. `AWSElasticBlockStoreVolumeSource`.
    name: String,
    /// Normalized field name -> (JSON name, required).
    fields: HashMap<String, (String, bool)>,
    /// (apiVersion, kind) when the definition implements `Resource`.
    resource: Option<(String, String)>,
}

/// The generated file, and the report of guesses and conflicts.
pub(super) struct Generated {
    pub source: String,
    pub report: Vec<String>,
}

fn normalize(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

fn lower_camel(snake: &str) -> String {
    let mut out = String::new();
    for (i, part) in snake.split('_').filter(|p| !p.is_empty()).enumerate() {
        if i == 0 {
            out.push_str(part);
        } else {
            let mut chars = part.chars();
            if let Some(c) = chars.next() {
                out.push(c.to_ascii_uppercase());
                out.extend(chars);
            }
        }
    }
    out
}

/// The version of a package pinned in the workspace `Cargo.lock`.
fn locked_version(lock: &str, package: &str) -> Result<String, String> {
    let needle = format!("name = \"{package}\"\nversion = \"");
    let start = lock
        .find(&needle)
        .ok_or_else(|| format!("{package} not in Cargo.lock"))?
        + needle.len();
    let end = lock[start..].find('"').ok_or("bad Cargo.lock")?;
    Ok(lock[start..start + end].to_string())
}

/// `$CARGO_HOME/registry/src/*/<name>-<version>`.
fn registry_dir(name: &str, version: &str) -> Result<PathBuf, String> {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .ok_or("neither CARGO_HOME nor HOME is set")?;
    let src = cargo_home.join("registry").join("src");
    let entries = fs::read_dir(&src).map_err(|e| format!("{}: {e}", src.display()))?;
    for entry in entries.flatten() {
        let dir = entry.path().join(format!("{name}-{version}"));
        if dir.is_dir() {
            return Ok(dir);
        }
    }
    Err(format!(
        "{name}-{version} not found under {}",
        src.display()
    ))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

fn read(path: &Path) -> Result<String, String> {
    fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// The string inside `const NAME: &'static str = "...";` within `block`.
fn const_str(block: &str, name: &str) -> Option<String> {
    let needle = format!("const {name}: &'static str = \"");
    let start = block.find(&needle)? + needle.len();
    let end = block[start..].find('"')?;
    Some(block[start..start + end].to_string())
}

/// Strips one generic wrapper `prefix<...>` if present.
fn strip_wrapper<'a>(ty: &'a str, prefix: &str) -> Option<&'a str> {
    ty.strip_prefix(prefix)?
        .strip_prefix('<')?
        .strip_suffix('>')
}

/// Resolves the message type path of a prost field type relative to `pkg`.
fn resolve_message_type(pkg: &str, ty: &str) -> Result<(String, String), String> {
    let ty: String = ty.split_whitespace().collect::<String>().replace(",>", ">");
    let mut inner = ty.as_str();
    for wrapper in [
        "::core::option::Option",
        "::prost::alloc::vec::Vec",
        "::prost::alloc::boxed::Box",
    ] {
        if let Some(x) = strip_wrapper(inner, wrapper) {
            inner = x.trim();
        }
    }
    if let Some(x) = strip_wrapper(inner, "::prost::alloc::collections::BTreeMap") {
        let value = x
            .strip_prefix("::prost::alloc::string::String,")
            .ok_or_else(|| format!("map with non-string keys: {ty}"))?;
        inner = value.trim();
    }
    let mut segments: Vec<&str> = pkg.split('.').collect();
    let mut path: Vec<&str> = inner.split("::").collect();
    let name = path.pop().ok_or("empty type")?.to_string();
    for seg in path {
        match seg {
            "" => return Err(format!("unresolved type {ty}")),
            "super" => {
                segments
                    .pop()
                    .ok_or_else(|| format!("too many `super` in {ty}"))?;
            }
            s => segments.push(s),
        }
    }
    Ok((segments.join("."), name))
}

fn parse_prost_attr(pkg: &str, attr: &str, ty: &str) -> Result<(PbKind, PbLabel), String> {
    if let Some(map) = attr.strip_prefix("btree_map = \"") {
        let value = map
            .strip_prefix("string, ")
            .and_then(|v| v.split('"').next())
            .ok_or_else(|| format!("unsupported map: {attr}"))?;
        let kind = match value {
            "string" => PbKind::Scalar("Str"),
            "bytes" => PbKind::Scalar("Bytes"),
            "message" => {
                let (p, n) = resolve_message_type(pkg, ty)?;
                PbKind::Message(p, n)
            }
            other => return Err(format!("unsupported map value {other}")),
        };
        return Ok((kind, PbLabel::Map));
    }
    let parts: Vec<&str> = attr.split(", ").collect();
    let first = parts[0];
    let label = if parts.contains(&"repeated") {
        PbLabel::Repeated
    } else if parts.contains(&"optional") {
        PbLabel::Optional
    } else {
        return Err(format!("neither optional nor repeated: {attr}"));
    };
    let kind = match first {
        "bool" => PbKind::Scalar("Bool"),
        "int32" => PbKind::Scalar("I32"),
        "int64" => PbKind::Scalar("I64"),
        "double" => PbKind::Scalar("F64"),
        "string" => PbKind::Scalar("Str"),
        "bytes = \"vec\"" => PbKind::Scalar("Bytes"),
        "message" => {
            let (p, n) = resolve_message_type(pkg, ty)?;
            PbKind::Message(p, n)
        }
        other => return Err(format!("unsupported prost type {other}")),
    };
    Ok((kind, label))
}

/// Parses one k8s-pb `mod.rs`: its messages and its `impl Resource` blocks.
fn parse_pb_file(
    pkg: &str,
    text: &str,
    messages: &mut Vec<PbMessage>,
    resources: &mut Vec<(String, String, String, String)>,
) -> Result<(), String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut docs: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(doc) = line.strip_prefix("///") {
            docs.push(doc);
            i += 1;
            continue;
        }
        if line.starts_with("#[") {
            i += 1;
            continue;
        }
        if let Some(rest) = line.strip_prefix("pub struct ") {
            let name = rest
                .trim_end_matches(" {}")
                .trim_end_matches(" {")
                .to_string();
            let mut msg = PbMessage {
                pkg: pkg.to_string(),
                name,
                fields: Vec::new(),
                nullable_marker: docs.iter().any(|d| d.contains("+protobuf.nullable=true")),
                custom_marker: docs
                    .iter()
                    .any(|d| CUSTOM_MARKERS.iter().any(|m| d.contains(m))),
            };
            docs.clear();
            if rest.ends_with("{}") {
                messages.push(msg);
                i += 1;
                continue;
            }
            i += 1;
            let mut attr: Option<String> = None;
            while i < lines.len() && lines[i] != "}" {
                let l = lines[i].trim();
                if let Some(a) = l.strip_prefix("#[prost(") {
                    attr = Some(a.trim_end_matches(")]").to_string());
                    i += 1;
                } else if let Some(decl) = l.strip_prefix("pub ") {
                    let mut decl = decl.to_string();
                    while !(decl.ends_with(',')
                        && decl.matches('<').count() == decl.matches('>').count())
                    {
                        i += 1;
                        decl.push_str(lines.get(i).ok_or("unterminated field")?.trim());
                    }
                    i += 1;
                    let (field, ty) = decl
                        .trim_end_matches(',')
                        .split_once(':')
                        .ok_or_else(|| format!("bad field {decl}"))?;
                    let a = attr
                        .take()
                        .ok_or_else(|| format!("field without prost attribute: {decl}"))?;
                    let tag: u32 = a
                        .split("tag = \"")
                        .nth(1)
                        .and_then(|t| t.split('"').next())
                        .and_then(|t| t.parse().ok())
                        .ok_or_else(|| format!("no tag in {a}"))?;
                    let (kind, label) = parse_prost_attr(pkg, &a, ty)
                        .map_err(|e| format!("{pkg}.{}.{field}: {e}", msg.name))?;
                    msg.fields.push(PbField {
                        rust: field.trim().trim_start_matches("r#").to_string(),
                        tag,
                        kind,
                        label,
                    });
                } else {
                    i += 1;
                }
            }
            messages.push(msg);
            i += 1;
            continue;
        }
        docs.clear();
        if let Some(rest) = line.strip_prefix("impl crate::Resource for ") {
            let name = rest.trim_end_matches(" {").to_string();
            let end = lines[i..]
                .iter()
                .position(|l| *l == "}")
                .ok_or("unterminated impl")?;
            let block = lines[i..i + end].join("\n");
            let api_version = const_str(&block, "API_VERSION").ok_or("no API_VERSION")?;
            let kind = const_str(&block, "KIND").ok_or("no KIND")?;
            resources.push((pkg.to_string(), name, api_version, kind));
            i += end;
        }
        i += 1;
    }
    Ok(())
}

/// Parses one k8s-openapi file (one definition per file).
fn parse_openapi_file(text: &str) -> Option<(String, OaDefinition)> {
    let first = text.lines().next()?;
    let full = first.strip_prefix("// Generated from definition io.k8s.")?;
    let (pkg, name) = full.rsplit_once('.')?;
    let pkg = pkg.replace('-', "_");
    let mut def = OaDefinition {
        name: name.to_string(),
        ..Default::default()
    };
    // Rust field name -> required.
    let mut rust_required: HashMap<&str, bool> = HashMap::new();
    let struct_start = text.find(&format!("pub struct {name}"))?;
    for line in text[struct_start..].lines().skip(1) {
        if line.starts_with('}') {
            break;
        }
        if let Some(decl) = line.trim().strip_prefix("pub ")
            && let Some((field, ty)) = decl.split_once(':')
        {
            rust_required.insert(field.trim(), !ty.trim().starts_with("Option<"));
        }
    }
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix('"')
            && let Some((json, key)) = rest.split_once("\" => Field::Key_")
        {
            let rust = key.trim_end_matches(',');
            let required = rust_required.get(rust).copied().unwrap_or(false);
            def.fields
                .insert(normalize(json), (json.to_string(), required));
        }
    }
    if let Some(start) = text.find(&format!("impl crate::Resource for {name} {{")) {
        let block = &text[start..];
        let block = &block[..block.find("\n}").unwrap_or(block.len())];
        if let (Some(v), Some(k)) = (const_str(block, "API_VERSION"), const_str(block, "KIND")) {
            def.resource = Some((v, k));
        }
    }
    Some((pkg, def))
}

/// Generates `schema.rs` from the registry sources of the locked crate versions.
pub(super) fn generate() -> Result<Generated, String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lock = read(&manifest.join("../../Cargo.lock"))?;
    let pb_version = locked_version(&lock, "k8s-pb")?;
    let oa_version = locked_version(&lock, "k8s-openapi")?;
    let pb_dir = registry_dir("k8s-pb", &pb_version)?.join("src");
    let oa_dir = registry_dir("k8s-openapi", &oa_version)?.join("src");
    let mut report = Vec::new();

    // k8s-pb: messages and resources.
    let mut messages = Vec::new();
    let mut resources = Vec::new();
    for root in PB_ROOTS {
        let mut files = Vec::new();
        rust_files(&pb_dir.join(root), &mut files)?;
        for file in files {
            let rel = file
                .parent()
                .and_then(|p| p.strip_prefix(&pb_dir).ok())
                .ok_or("bad path")?;
            let pkg = rel.to_string_lossy().replace(['/', '\\'], ".");
            if PB_SKIP.iter().any(|s| pkg.starts_with(s)) {
                continue;
            }
            let text = read(&file)?;
            if !text.contains("::prost::Message") {
                continue;
            }
            parse_pb_file(&pkg, &text, &mut messages, &mut resources)?;
        }
    }
    messages.sort_by(|a, b| (&a.pkg, &a.name).cmp(&(&b.pkg, &b.name)));

    // k8s-openapi: every version directory, newest first; JSON names do not
    // change between versions, so the union is taken.
    let mut version_dirs: Vec<PathBuf> = fs::read_dir(&oa_dir)
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("v1_"))
        })
        .collect();
    version_dirs.sort();
    version_dirs.reverse();
    let oa_versions: Vec<String> = version_dirs
        .iter()
        .filter_map(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    // (package, lowercase name) -> definition.
    let mut defs: HashMap<(String, String), OaDefinition> = HashMap::new();
    for dir in &version_dirs {
        let mut files = Vec::new();
        rust_files(dir, &mut files)?;
        for file in files {
            let Some((pkg, def)) = parse_openapi_file(&read(&file)?) else {
                continue;
            };
            let key = (pkg.clone(), def.name.to_ascii_lowercase());
            match defs.get_mut(&key) {
                None => {
                    defs.insert(key, def);
                }
                Some(known) => {
                    if known.name != def.name {
                        report.push(format!(
                            "conflict: openapi names {pkg}.{} and {pkg}.{}",
                            known.name, def.name
                        ));
                    }
                    for (norm, (json, required)) in def.fields {
                        match known.fields.get(&norm) {
                            Some((j, _)) if *j != json => report.push(format!(
                                "conflict: {pkg}.{}: JSON names {j} and {json}",
                                def.name
                            )),
                            Some(_) => {}
                            None => {
                                known.fields.insert(norm, (json, required));
                            }
                        }
                    }
                    if known.resource.is_none() {
                        known.resource = def.resource;
                    }
                }
            }
        }
    }

    // Join.
    let index: HashMap<(&str, &str), usize> = messages
        .iter()
        .enumerate()
        .map(|(i, m)| ((m.pkg.as_str(), m.name.as_str()), i))
        .collect();
    let specials: HashMap<&str, &str> = SPECIALS.iter().copied().collect();
    let target = |field: &PbField| match &field.kind {
        PbKind::Message(p, n) => index.get(&(p.as_str(), n.as_str())).copied(),
        PbKind::Scalar(_) => None,
    };
    // Each message's own OpenAPI definition, then the definitions that embedded
    // messages borrow: Go embeds some structs with `json:",inline"` (Volume's
    // VolumeSource, Probe's ProbeHandler, ...); the proto has a message field
    // (`volumeSource`) where the JSON has the embedded struct's fields. Such a
    // field is absent from the parent's definition while fields of its message
    // (or of messages it embeds in turn) are present; the embedded message then
    // takes its JSON names from the parent's definition.
    let own: Vec<Option<&OaDefinition>> = messages
        .iter()
        .map(|m| defs.get(&(m.pkg.clone(), m.name.to_ascii_lowercase())))
        .collect();
    fn embeds(
        messages: &[PbMessage],
        target: &dyn Fn(&PbField) -> Option<usize>,
        msg: usize,
        def: &OaDefinition,
        depth: usize,
    ) -> bool {
        depth < 4
            && messages[msg].fields.iter().any(|g| {
                def.fields.contains_key(&normalize(&g.rust))
                    || target(g).is_some_and(|t| embeds(messages, target, t, def, depth + 1))
            })
    }
    let mut names_from: Vec<Option<&OaDefinition>> = own.clone();
    let mut inline: BTreeSet<(usize, usize)> = BTreeSet::new();
    loop {
        let mut changed = false;
        for (i, msg) in messages.iter().enumerate() {
            let Some(def) = names_from[i] else { continue };
            for (j, field) in msg.fields.iter().enumerate() {
                if inline.contains(&(i, j))
                    || field.label != PbLabel::Optional
                    || def.fields.contains_key(&normalize(&field.rust))
                {
                    continue;
                }
                let Some(t) = target(field) else { continue };
                if embeds(&messages, &target, t, def, 0) {
                    inline.insert((i, j));
                    report.push(format!(
                        "inline: {}.{}.{} embeds {}.{}",
                        msg.pkg, msg.name, field.rust, messages[t].pkg, messages[t].name
                    ));
                    if names_from[t].is_none() {
                        names_from[t] = Some(def);
                    }
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    // Messages the OpenAPI spec does not describe (removed versions such as
    // extensions/v1beta1) embed the same structs under the same field names.
    let embedded: BTreeSet<(&str, &str)> = inline
        .iter()
        .filter_map(|&(i, j)| {
            let field = &messages[i].fields[j];
            target(field).map(|t| (field.rust.as_str(), messages[t].name.as_str()))
        })
        .collect();
    for (i, msg) in messages.iter().enumerate() {
        if names_from[i].is_some() {
            continue;
        }
        for (j, field) in msg.fields.iter().enumerate() {
            if let Some(t) = target(field)
                && field.label == PbLabel::Optional
                && embedded.contains(&(field.rust.as_str(), messages[t].name.as_str()))
            {
                inline.insert((i, j));
                report.push(format!(
                    "inline (by name): {}.{}.{} embeds {}.{}",
                    msg.pkg, msg.name, field.rust, messages[t].pkg, messages[t].name
                ));
            }
        }
    }
    // Every JSON spelling of each normalized field name, over all definitions.
    let mut spellings: HashMap<String, BTreeSet<String>> = HashMap::new();
    for def in defs.values() {
        for (norm, (json, _)) in &def.fields {
            spellings
                .entry(norm.clone())
                .or_default()
                .insert(json.clone());
        }
    }
    // Definition fields that no proto field (own or embedded) carries.
    fn covered(
        messages: &[PbMessage],
        target: &dyn Fn(&PbField) -> Option<usize>,
        inline: &BTreeSet<(usize, usize)>,
        i: usize,
        out: &mut BTreeSet<String>,
    ) {
        for (j, field) in messages[i].fields.iter().enumerate() {
            match target(field) {
                Some(t) if inline.contains(&(i, j)) => covered(messages, target, inline, t, out),
                _ => {
                    out.insert(normalize(&field.rust));
                }
            }
        }
    }
    for (i, msg) in messages.iter().enumerate() {
        let Some(def) = own[i] else { continue };
        let mut seen = BTreeSet::new();
        covered(&messages, &target, &inline, i, &mut seen);
        let mut missing: Vec<&str> = def
            .fields
            .iter()
            .filter(|(norm, _)| !seen.contains(*norm) && *norm != "apiversion" && *norm != "kind")
            .map(|(_, (json, _))| json.as_str())
            .collect();
        missing.sort_unstable();
        if !missing.is_empty() {
            report.push(format!(
                "not in proto: {}.{}: {}",
                msg.pkg,
                def.name,
                missing.join(", ")
            ));
        }
    }
    let mut kinds: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut out_messages = Vec::new();
    let mut guessed_messages = BTreeSet::new();
    for (i, msg) in messages.iter().enumerate() {
        let name = own[i].map_or(msg.name.as_str(), |d| d.name.as_str());
        let full = format!("{}.{name}", msg.pkg);
        let special = if let Some(s) = specials.get(full.as_str()) {
            (*s).to_string()
        } else if msg.nullable_marker
            && msg.fields.len() == 1
            && msg.fields[0].rust == "items"
            && msg.fields[0].label == PbLabel::Repeated
            && msg.fields[0].kind == PbKind::Scalar("Str")
        {
            "StringList".to_string()
        } else if msg.custom_marker || msg.nullable_marker {
            return Err(format!(
                "{full} is marshalled by custom Go code; add it to SPECIALS"
            ));
        } else {
            "None".to_string()
        };
        if let Some((v, k)) = own[i].and_then(|d| d.resource.clone()) {
            kinds.insert((v, k), i);
        }
        let mut fields = Vec::new();
        for (j, field) in msg.fields.iter().enumerate() {
            let norm = normalize(&field.rust);
            let is_inline = inline.contains(&(i, j));
            let (json, required) = match names_from[i].and_then(|d| d.fields.get(&norm)) {
                Some((json, required)) => (json.clone(), *required),
                None => {
                    // The spelling used by every other definition, else lowerCamelCase.
                    let guess = match spellings.get(&norm) {
                        Some(set) if set.len() == 1 => {
                            set.iter().next().cloned().unwrap_or_default()
                        }
                        _ => lower_camel(&field.rust),
                    };
                    if special == "None" && !is_inline {
                        if names_from[i].is_some() {
                            report.push(format!(
                                "guessed JSON name {full}.{guess} (field missing in k8s-openapi)"
                            ));
                        } else {
                            guessed_messages.insert(full.clone());
                        }
                    }
                    (guess, false)
                }
            };
            let kind = match &field.kind {
                PbKind::Scalar(s) => (*s).to_string(),
                PbKind::Message(p, n) => {
                    let t = target(field)
                        .ok_or_else(|| format!("{full}.{json}: unknown message {p}.{n}"))?;
                    format!("Msg({t})")
                }
            };
            let label = match field.label {
                _ if is_inline => "Inline",
                PbLabel::Repeated => "Rep",
                PbLabel::Map => "Map",
                PbLabel::Optional if required => "Req",
                PbLabel::Optional => "Opt",
            };
            fields.push(format!("f({json:?}, {}, {kind}, {label})", field.tag));
        }
        out_messages.push((full, special, fields));
    }
    for name in &guessed_messages {
        report.push(format!(
            "guessed all JSON names of {name} (not in k8s-openapi)"
        ));
    }
    // k8s-pb's own `impl Resource` blocks cover kinds k8s-openapi may lack.
    for (pkg, name, api_version, kind) in &resources {
        let i = *index
            .get(&(pkg.as_str(), name.as_str()))
            .ok_or_else(|| format!("resource {pkg}.{name} has no message"))?;
        match kinds.get(&(api_version.clone(), kind.clone())) {
            Some(&j) if j != i => {
                return Err(format!("{api_version} {kind} maps to two messages"));
            }
            _ => {
                kinds.insert((api_version.clone(), kind.clone()), i);
            }
        }
    }
    // List kinds: `FooList` beside `Foo`, with `items` of `Foo`.
    for ((api_version, kind), i) in kinds.clone() {
        let msg = &messages[i];
        let list_name = format!("{}List", msg.name);
        if let Some(&l) = index.get(&(msg.pkg.as_str(), list_name.as_str()))
            && messages[l].fields.iter().any(|f| {
                f.rust == "items" && f.kind == PbKind::Message(msg.pkg.clone(), msg.name.clone())
            })
        {
            kinds.insert((api_version, format!("{kind}List")), l);
        }
    }
    // JSON carries Go's TypeMeta (`kind`, `apiVersion`, embedded without a
    // protobuf tag) for kinds, their lists, and any definition that lists
    // both keys while the proto message has neither (`DeleteOptions`, ...).
    let mut type_meta: BTreeSet<usize> = kinds.values().copied().collect();
    for (i, msg) in messages.iter().enumerate() {
        let has = |name: &str| msg.fields.iter().any(|f| normalize(&f.rust) == name);
        if let Some(def) = own[i]
            && def.fields.contains_key("apiversion")
            && def.fields.contains_key("kind")
            && !has("apiversion")
            && !has("kind")
        {
            type_meta.insert(i);
        }
    }

    // Emit.
    let mut s = String::new();
    writeln!(
        s,
        "// @generated by reflector/src/protobuf/generate.rs from k8s-pb {pb_version} and \
         k8s-openapi {oa_version} ({}).",
        oa_versions.join(", ")
    )
    .ok();
    s.push_str(
        "// Do not edit. Regenerate with\n\
         // UPDATE_PROTO_SCHEMA=1 cargo test -p kubecache-reflector --lib protobuf::generate\n\n\
         use super::desc::Kind::*;\n\
         use super::desc::Label::*;\n\
         use super::desc::Special as S;\n\
         use super::desc::{Message, f, m};\n\n",
    );
    writeln!(
        s,
        "/// Every message, sorted by package and prost name; `Msg(i)` is `MESSAGES[i]`.\n\
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
         UPDATE_PROTO_SCHEMA=1 cargo test -p kubecache-reflector --lib protobuf::generate",
        path.display()
    );
}
