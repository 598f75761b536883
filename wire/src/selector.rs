//! Label, field and shard selectors: parsed, validated and matched as
//! kube-apiserver does (shard selectors: see [`ShardSelector`]).
//!
//! kubecache's own: it refuses a malformed `labelSelector=` /
//! `fieldSelector=` with the same 400 `BadRequest` Status as a real
//! kube-apiserver, evaluates selectors per object and per watch event, and
//! routes equality requirements through its indexes. The simulated API
//! server parses selectors with its own code (`loadtest/src/sim/selector.rs`):
//! the oracle and the system under test do not share a misreading.
//!
//! The grammar, the validation and every error message follow Kubernetes'
//! apimachinery: `pkg/labels/selector.go` (`labels.Parse`),
//! `pkg/fields/selector.go` (`fields.ParseSelector`) and
//! `pkg/util/validation/validation.go` (label keys and values). The list
//! handler of kube-apiserver (`ListResource` in `endpoints/handlers/get.go`)
//! answers a parse error with `errors.NewBadRequest(err.Error())`, so the
//! [`Display`](std::fmt::Display) of a [`SelectorError`] is exactly the
//! `message` of that Status; [`Status::from`] builds it.
//!
//! # Label selectors
//!
//! ```text
//! selector    ::= requirement ("," requirement)*     (or nothing: matches everything)
//! requirement ::= ["!"] KEY
//!               | KEY ("=" | "==" | "!=" | ">" | "<") [VALUE]
//!               | KEY ("in" | "notin") "(" VALUE ("," VALUE)* ")"
//! ```
//!
//! Spaces, tabs, CR and LF separate tokens anywhere. `KEY` is a qualified name
//! (an optional DNS-subdomain prefix and `/`, then a name of at most 63
//! alphanumerics, `-`, `_` or `.` that starts and ends with an alphanumeric);
//! `VALUE` is a label value (the same as a name, or empty). Semantics, exactly
//! as apimachinery: `=` / `in` / `>` / `<` require the key; `!=` and `notin`
//! also match objects WITHOUT the key; `k in ()` means `k` with the empty value.
//!
//! # Field selectors
//!
//! Comma-separated `field=value`, `field==value` or `field!=value`, split at
//! the first operator; a value escapes `\`, `,` and `=` with a backslash. A
//! missing field compares as the empty string. Which fields a resource
//! supports is a separate check ([`FieldSelector::check_supported`]), because
//! it differs per resource.

mod field;
mod label;
mod shard;
mod validate;

pub use field::{FieldOperator, FieldRequirement, FieldSelector};
pub use label::{LabelOperator, LabelRequirement, LabelSelector};
pub use shard::{ShardField, ShardRange, ShardSelector, fnv1a_64};
pub use validate::go_quote;

use crate::Status;

/// A selector that does not parse, or names a field the resource cannot select on.
///
/// Its `Display` is the message kube-apiserver puts in the 400 `BadRequest`
/// Status for the same input, e.g. `unable to parse requirement: found 'b',
/// expected: in, notin, =, ==, !=, gt, lt` or `field label not supported:
/// spec.foo`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SelectorError {
    message: String,
}

impl SelectorError {
    fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

impl From<SelectorError> for Status {
    /// The 400 `BadRequest` Status kube-apiserver answers for this selector.
    fn from(error: SelectorError) -> Self {
        Status::bad_request(error.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selector_error_becomes_a_bad_request_status_with_the_parser_message() {
        let error = LabelSelector::parse("a b").unwrap_err();
        let status = Status::from(error);
        assert_eq!(status.code, 400);
        assert_eq!(status.reason, "BadRequest");
        assert_eq!(
            status.message,
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"
        );
    }
}

/// A tiny deterministic generator for the randomized tests of both parsers.
#[cfg(test)]
pub(crate) mod test_rng {
    /// SplitMix64: deterministic, dependency-free, good enough to shuffle test input.
    pub(crate) struct Rng(u64);

    impl Rng {
        pub(crate) fn new(seed: u64) -> Self {
            Self(seed)
        }

        pub(crate) fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        /// A number in `0..n` (`n > 0`).
        pub(crate) fn below(&mut self, n: usize) -> usize {
            (self.next_u64() % n as u64) as usize
        }

        /// One of `items`, picked uniformly.
        pub(crate) fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[self.below(items.len())]
        }

        /// A string of up to `max_pieces` pieces drawn from `pieces`.
        pub(crate) fn string_of(&mut self, pieces: &[&str], max_pieces: usize) -> String {
            let n = self.below(max_pieces + 1);
            (0..n).map(|_| self.pick(pieces)).collect()
        }
    }
}
