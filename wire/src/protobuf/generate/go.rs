//! A reader of the Go struct declarations of the Kubernetes API types
//! (`types.go` and friends, gofmt'd, vendored unmodified): what a `.proto`
//! file cannot say about a field and Go's `encoding/json` acts on.
//!
//! Purpose-built, not a Go parser: it reads top-level `type X struct {...}`
//! blocks, one field per line (`Name Type \`tags\``, or `Type \`tags\`` for an
//! embedded struct), `type X pkg.Y` / `type X = pkg.Y` definitions of a type
//! by another package's, and the `import` block that names those packages.
//! Comments are skipped. Anything else inside a struct is an error.

use std::collections::HashMap;

/// One field of a Go struct.
#[derive(Debug, Clone)]
pub(super) struct GoField {
    /// The Go type as written (`*PodSpec`, `[]string`, `metav1.Time`).
    pub ty: String,
    /// Embedded (no field name): flattened into the enclosing JSON object
    /// when its JSON name is empty (`json:",inline"`).
    pub embedded: bool,
    /// The Go field's name (`""` when embedded).
    pub name: String,
    /// The `json` tag's name (`""` when absent or `,inline`).
    pub json: String,
    /// The `json` tag has `omitempty`.
    pub omitempty: bool,
    /// The protobuf field number from the `protobuf` tag, if any.
    pub tag: Option<u32>,
}

impl GoField {
    /// `*T`: nil unless set.
    pub fn pointer(&self) -> bool {
        self.ty.starts_with('*')
    }

    /// Go's `metav1.TypeMeta` / `runtime.TypeMeta`, embedded without a
    /// protobuf field: the `kind` and `apiVersion` of a kind's JSON.
    pub fn is_type_meta(&self) -> bool {
        self.embedded && self.tag.is_none() && self.ty.rsplit('.').next() == Some("TypeMeta")
    }
}

/// A Go type declaration of interest.
#[derive(Debug, Clone)]
pub(super) enum GoType {
    Struct(Vec<GoField>),
    /// `type X pkg.Y` or `type X = pkg.Y`: (package path, type name).
    Defined(String, String),
}

/// The types of one Go package: name -> declaration.
pub(super) type GoPackage = HashMap<String, GoType>;

/// The value of `key:"value"` in a Go struct tag.
fn tag_value<'a>(tags: &'a str, key: &str) -> Option<&'a str> {
    let mut rest = tags;
    while let Some((k, after)) = rest.trim_start().split_once(":\"") {
        let (value, next) = after.split_once('"')?;
        if k == key {
            return Some(value);
        }
        rest = next;
    }
    None
}

fn parse_field(line: &str) -> Option<GoField> {
    let (decl, rest) = line.split_once('`')?;
    let tags = rest.strip_suffix('`')?;
    let words: Vec<&str> = decl.split_whitespace().collect();
    let (name, ty) = match words[..] {
        [ty] => ("", ty),
        [name, ty] => (name, ty),
        _ => return None,
    };
    let json = tag_value(tags, "json").unwrap_or("");
    let mut options = json.split(',');
    let json = options.next().unwrap_or("");
    let omitempty = options.any(|o| o == "omitempty");
    let tag = match tag_value(tags, "protobuf") {
        Some(p) => Some(p.split(',').nth(1)?.parse().ok()?),
        None => None,
    };
    Some(GoField {
        ty: ty.to_string(),
        embedded: name.is_empty(),
        name: name.to_string(),
        json: json.to_string(),
        omitempty,
        tag,
    })
}

/// `alias "path"` or `"path"` (named by its last segment).
fn read_import(spec: &str, imports: &mut HashMap<String, String>) {
    let (alias, path) = match spec.split_once(' ') {
        Some((alias, path)) => (Some(alias), path),
        None => (None, spec),
    };
    let path = path.trim_matches('"');
    let alias = alias.unwrap_or_else(|| path.rsplit('/').next().unwrap_or(""));
    imports.insert(alias.to_string(), path.to_string());
}

/// Reads the declarations of one gofmt'd Go file into `pkg`.
pub(super) fn parse_file(file: &str, text: &str, pkg: &mut GoPackage) -> Result<(), String> {
    let mut imports: HashMap<String, String> = HashMap::new();
    let mut in_imports = false;
    let mut in_block_comment = false;
    let mut current: Option<(String, Vec<GoField>)> = None;
    for (n, line) in text.lines().enumerate() {
        let error = || format!("{file}:{}: unsupported: {line}", n + 1);
        let trimmed = line.trim();
        if in_block_comment || trimmed.starts_with("/*") {
            in_block_comment = !trimmed.ends_with("*/");
            continue;
        }
        if trimmed.is_empty() || trimmed.starts_with("//") {
            continue;
        }
        if let Some((_, fields)) = &mut current {
            if line == "}" {
                let (name, fields) = current.take().ok_or_else(error)?;
                pkg.insert(name, GoType::Struct(fields));
            } else {
                fields.push(parse_field(trimmed).ok_or_else(error)?);
            }
            continue;
        }
        if in_imports {
            if trimmed == ")" {
                in_imports = false;
            } else {
                read_import(trimmed, &mut imports);
            }
            continue;
        }
        if trimmed == "import (" {
            in_imports = true;
            continue;
        }
        if let Some(spec) = trimmed.strip_prefix("import ") {
            read_import(spec, &mut imports);
            continue;
        }
        let Some(decl) = line.strip_prefix("type ") else {
            continue;
        };
        let Some((name, ty)) = decl.split_once(' ') else {
            continue;
        };
        let ty = ty.trim_start_matches("= ");
        if ty == "struct {" {
            current = Some((name.to_string(), Vec::new()));
        } else if ty == "struct{}" {
            pkg.insert(name.to_string(), GoType::Struct(Vec::new()));
        } else if let Some((alias, other)) = ty.split_once('.')
            && let Some(path) = imports.get(alias)
            && other.chars().all(|c| c.is_ascii_alphanumeric())
        {
            pkg.insert(
                name.to_string(),
                GoType::Defined(path.clone(), other.to_string()),
            );
        }
    }
    match current {
        Some((name, _)) => Err(format!("{file}: struct {name} is not closed")),
        None => Ok(()),
    }
}

#[test]
fn reads_fields_tags_and_definitions() {
    let src = "package v1\n\nimport (\n\tmetav1 \"k8s.io/apimachinery/pkg/apis/meta/v1\"\n)\n\n\
               type Pod struct {\n\tmetav1.TypeMeta `json:\",inline\"`\n\t// +optional\n\t\
               metav1.ObjectMeta `json:\"metadata,omitempty\" protobuf:\"bytes,1,opt,name=metadata\"`\n\t\
               /*\n\tnot a field\n\t*/\n\t\
               Replicas  *int32 `json:\"replicas\" protobuf:\"varint,2,opt,name=replicas\"`\n}\n\n\
               type List metav1.List\n";
    let mut pkg = GoPackage::new();
    parse_file("x.go", src, &mut pkg).unwrap();
    let Some(GoType::Struct(fields)) = pkg.get("Pod") else {
        panic!("{pkg:?}")
    };
    assert!(fields[0].is_type_meta());
    assert_eq!(
        (fields[1].json.as_str(), fields[1].omitempty, fields[1].tag),
        ("metadata", true, Some(1))
    );
    assert!(fields[1].embedded && !fields[1].is_type_meta());
    assert!(fields[2].pointer() && !fields[2].omitempty && !fields[2].embedded);
    assert!(matches!(
        pkg.get("List"),
        Some(GoType::Defined(p, n)) if p == "k8s.io/apimachinery/pkg/apis/meta/v1" && n == "List"
    ));
}
