//! [`DecodeError`]: why a list body, a watch line or an object could not be
//! decoded, and where.

use std::fmt;

use crate::Status;

/// Why a list body, a watch line or an object could not be decoded.
///
/// Offsets count bytes from the start of the slice that was handed to the
/// failing function (for [`decode_object`](super::decode_object) on a list
/// item: from the start of that item). Paths read like JSON paths, e.g.
/// `spec.containers[1].image` or `metadata.labels["app.kubernetes.io/name"]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input is not well-formed JSON: truncated, a bad token, an invalid
    /// string, or containers nested deeper than 127 levels.
    #[error("malformed JSON at byte {offset}{}: {reason}", InPath(.path))]
    Syntax {
        /// Where the scanner stopped (the input's length when it was truncated).
        offset: usize,
        /// The innermost entry holding `offset`; empty at the top level.
        path: String,
        /// What is wrong there.
        reason: &'static str,
    },
    /// A field the decoder needs is absent (or `null`).
    #[error("missing `{path}`")]
    Missing {
        /// The field, e.g. `metadata.resourceVersion`.
        path: &'static str,
    },
    /// A field is present, but with a value that cannot be used.
    #[error("invalid `{path}` at byte {offset}: {reason}")]
    Invalid {
        /// The field, e.g. `metadata.resourceVersion` or `type`.
        path: String,
        /// Where its value starts.
        offset: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The body is a Kubernetes `Status` (an API error) where something else
    /// was expected.
    #[error("expected {expected} but got a Status: {} {}: {}", .status.code, .status.reason, .status.message)]
    Status {
        /// What was expected, e.g. `a list`.
        expected: &'static str,
        /// The Status as sent.
        status: Box<Status>,
    },
}

impl DecodeError {
    pub(crate) fn syntax(offset: usize, reason: &'static str) -> Self {
        DecodeError::Syntax {
            offset,
            path: String::new(),
            reason,
        }
    }

    pub(crate) fn invalid(
        path: impl Into<String>,
        offset: usize,
        reason: impl Into<String>,
    ) -> Self {
        DecodeError::Invalid {
            path: path.into(),
            offset,
            reason: reason.into(),
        }
    }
}

/// One step of a JSON path.
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

/// `spec.containers[0].image`; keys other than `[A-Za-z0-9_-]+` are quoted
/// in brackets (`metadata.labels["app.kubernetes.io/name"]`).
pub(crate) fn render(segs: &[Seg]) -> String {
    let mut out = String::new();
    for seg in segs {
        match seg {
            Seg::Key(k)
                if !k.is_empty()
                    && k.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') =>
            {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Key(k) => out.push_str(&format!("[{k:?}]")),
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// ` (in `path`)`, or nothing for the top level.
struct InPath<'a>(&'a String);

impl fmt::Display for InPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            Ok(())
        } else {
            write!(f, " (in `{}`)", self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::Scanner;

    fn syntax_error(json: &str) -> DecodeError {
        let mut sc = Scanner::new(json.as_bytes());
        let e = sc.skip_value(0).and_then(|_| sc.finish()).unwrap_err();
        e.locate(json.as_bytes())
    }

    #[test]
    fn syntax_errors_name_the_innermost_entry() {
        let e = syntax_error(r#"{"spec":{"containers":[{"name":"a"},{"image":"x\q"}]}}"#);
        assert_eq!(
            e.to_string(),
            "malformed JSON at byte 47 (in `spec.containers[1].image`): invalid escape in a string"
        );
        let e = syntax_error(r#"{"metadata":{"labels":{"app.kubernetes.io/name":tru"#);
        assert_eq!(
            e.to_string(),
            format!(
                "malformed JSON at byte {} (in `metadata.labels[\"app.kubernetes.io/name\"]`): unexpected end of input",
                r#"{"metadata":{"labels":{"app.kubernetes.io/name":tru"#.len()
            )
        );
        let e = syntax_error("[1,2");
        assert_eq!(
            e.to_string(),
            "malformed JSON at byte 4: unexpected end of input"
        );
    }
}
