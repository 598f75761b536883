//! [`FieldPath`]: a dotted path to a field of an object (`spec.nodeName`),
//! parsed once from configuration.

use std::fmt;
use std::str::FromStr;

/// A path to a field through nested objects: `status.phase`,
/// `metadata.managedFields`, or with a bracketed JSON string for a key that
/// holds dots or slashes: `metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]`.
///
/// Paths select object fields only: a path whose parent turns out to be an
/// array (or a string, number, ...) selects nothing. Array indexes
/// (`spec.containers[0]`) are rejected, as is an empty segment
/// (`spec..nodeName`, `.spec`).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct FieldPath {
    segments: Box<[Box<str>]>,
}

/// Why a configured field path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid field path `{path}`: {reason}")]
pub struct FieldPathError {
    /// The path as configured.
    pub path: String,
    /// What is wrong with it.
    pub reason: String,
}

impl FieldPath {
    /// Parses `a.b.c` (with `["…"]` segments for keys that contain `.`, `[`, `]` or `"`).
    pub fn parse(text: &str) -> Result<Self, FieldPathError> {
        let fail = |reason: &str| FieldPathError {
            path: text.to_owned(),
            reason: reason.to_owned(),
        };
        if text.is_empty() {
            return Err(fail("the path is empty"));
        }
        let mut segments = Vec::new();
        let mut rest = text;
        loop {
            if let Some(bracketed) = rest.strip_prefix('[') {
                if !bracketed.starts_with('"') {
                    return Err(fail(
                        "array indexes are not supported (a path selects object fields only); quote a key as [\"key\"]",
                    ));
                }
                let mut stream =
                    serde_json::Deserializer::from_str(bracketed).into_iter::<String>();
                let key = match stream.next() {
                    Some(Ok(key)) => key,
                    _ => return Err(fail("a bracketed key must be a JSON string: [\"key\"]")),
                };
                rest = bracketed[stream.byte_offset()..]
                    .strip_prefix(']')
                    .ok_or_else(|| fail("expected `]` after a bracketed key"))?;
                if key.is_empty() {
                    return Err(fail("a key is empty"));
                }
                segments.push(key.into_boxed_str());
            } else {
                let end = rest.find(['.', '[', ']', '"']).unwrap_or(rest.len());
                let name = &rest[..end];
                if name.is_empty() {
                    return Err(fail(if segments.is_empty() {
                        "the path starts with a separator (write `spec.nodeName`, not `.spec.nodeName`)"
                    } else {
                        "a segment is empty"
                    }));
                }
                if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
                    return Err(fail(
                        "a segment contains whitespace (quote such a key as [\"key\"])",
                    ));
                }
                segments.push(name.into());
                rest = &rest[end..];
            }
            if rest.is_empty() {
                break;
            }
            if let Some(after_dot) = rest.strip_prefix('.') {
                if after_dot.is_empty() {
                    return Err(fail("the path ends with `.`"));
                }
                if after_dot.starts_with('[') {
                    return Err(fail("write `a[\"b\"]`, not `a.[\"b\"]`"));
                }
                rest = after_dot;
            } else if !rest.starts_with('[') {
                return Err(fail(
                    "unexpected `]` or `\"` (quote such a key as [\"key\"])",
                ));
            }
        }
        Ok(FieldPath {
            segments: segments.into(),
        })
    }

    /// The path through these keys (each non-empty).
    pub(crate) fn from_keys(keys: &[&str]) -> Self {
        FieldPath {
            segments: keys.iter().map(|&k| k.into()).collect(),
        }
    }

    /// The keys from the top-level object down.
    pub fn segments(&self) -> impl ExactSizeIterator<Item = &str> {
        self.segments.iter().map(|s| &**s)
    }
}

impl FromStr for FieldPath {
    type Err = FieldPathError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FieldPath::parse(s)
    }
}

impl fmt::Display for FieldPath {
    /// The canonical text, which parses back to the same path.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.segments.iter().enumerate() {
            if seg.contains(['.', '[', ']', '"'])
                || seg.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                let quoted = serde_json::to_string(&**seg).map_err(|_| fmt::Error)?;
                write!(f, "[{quoted}]")?;
            } else {
                if i > 0 {
                    f.write_str(".")?;
                }
                f.write_str(seg)?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FieldPath({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segs(text: &str) -> Vec<String> {
        FieldPath::parse(text)
            .unwrap_or_else(|e| panic!("{e}"))
            .segments()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn dotted_paths_split_into_keys_and_print_back_the_same() {
        assert_eq!(segs("status.phase"), ["status", "phase"]);
        assert_eq!(
            segs("metadata.managedFields"),
            ["metadata", "managedFields"]
        );
        assert_eq!(
            segs(r#"metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]"#),
            [
                "metadata",
                "annotations",
                "kubectl.kubernetes.io/last-applied-configuration"
            ]
        );
        assert_eq!(segs(r#"["a.b"].c"#), ["a.b", "c"]);
        assert_eq!(segs(r#"x["a\"b"]["c"]"#), ["x", "a\"b", "c"]);
        for text in [
            "spec.nodeName",
            r#"metadata.labels["app.kubernetes.io/name"]"#,
            r#"["a.b"].c"#,
            "spec.template.spec.containers",
        ] {
            assert_eq!(FieldPath::parse(text).unwrap().to_string(), text);
        }
        assert_eq!(
            FieldPath::parse(r#"x["plain"]"#).unwrap().to_string(),
            "x.plain"
        );
    }

    #[test]
    fn malformed_paths_are_refused_with_a_reason() {
        for (text, reason) in [
            ("", "empty"),
            (".spec.nodeName", "starts with a separator"),
            ("spec..nodeName", "segment is empty"),
            ("spec.", "ends with `.`"),
            (
                "spec.containers[0].image",
                "array indexes are not supported",
            ),
            ("spec[\"a\"", "expected `]`"),
            ("spec[\"a]", "must be a JSON string"),
            ("spec.[\"a\"]", "not `a.["),
            ("spec]x", "unexpected `]`"),
            ("spec.node name", "whitespace"),
            ("a[\"\"]", "a key is empty"),
        ] {
            let err = FieldPath::parse(text).expect_err(text);
            assert!(
                err.to_string().contains(reason),
                "{text:?}: {err} (expected {reason:?})"
            );
            assert_eq!(err.path, text);
        }
    }
}
