//! Field selectors: apimachinery's `fields.ParseSelector`, with its escaping.

use std::fmt;
use std::str::FromStr;

use super::SelectorError;

/// How a [`FieldRequirement`] compares its field with its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldOperator {
    /// `f=v` or `f==v`: the field equals the value.
    Equals,
    /// `f!=v`: the field differs from the value.
    NotEquals,
}

/// One comma-separated term of a [`FieldSelector`].
///
/// The field is the text before the first operator, taken as is (no
/// unescaping, no trimming: `a = b` is about the field `a ` and the value
/// ` b`, as in Kubernetes). The value is unescaped.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldRequirement {
    field: String,
    operator: FieldOperator,
    value: String,
}

impl FieldRequirement {
    /// The field path, e.g. `spec.nodeName`.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// Equality or inequality.
    pub fn operator(&self) -> FieldOperator {
        self.operator
    }

    /// The value, unescaped.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// Whether an object whose field is `actual` (`None`: no such field, which
    /// compares as the empty string) satisfies this requirement.
    pub fn matches(&self, actual: Option<&str>) -> bool {
        let equal = actual.unwrap_or_default() == self.value;
        match self.operator {
            FieldOperator::Equals => equal,
            FieldOperator::NotEquals => !equal,
        }
    }
}

impl fmt::Display for FieldRequirement {
    /// `field=value` or `field!=value`, with `\`, `,` and `=` escaped in the value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.field)?;
        f.write_str(match self.operator {
            FieldOperator::Equals => "=",
            FieldOperator::NotEquals => "!=",
        })?;
        for c in self.value.chars() {
            if matches!(c, '\\' | ',' | '=') {
                f.write_str("\\")?;
            }
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

/// A parsed `fieldSelector`: the AND of its requirements.
///
/// Requirements are sorted by their canonical form, so requirements on
/// different fields come in the order kube-apiserver checks them (it sorts the
/// raw terms). The empty selector matches everything; a term with neither
/// field nor value (`=`) is dropped, as kube-apiserver does. `Display` renders
/// the canonical form (`==` as `=`), which parses back to an equal selector.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parses the string form of a field selector, e.g. `spec.nodeName=n1,status.phase!=Failed`.
    ///
    /// Any field name is accepted here; see [`check_supported`](Self::check_supported).
    ///
    /// # Errors
    ///
    /// A [`SelectorError`] whose message is the one kube-apiserver gives for
    /// the same input.
    pub fn parse(selector: &str) -> Result<Self, SelectorError> {
        let mut parts = split_terms(selector);
        // apimachinery sorts the raw terms and reports the first bad one in that order.
        parts.sort_unstable();
        let mut requirements = Vec::with_capacity(parts.len());
        for part in parts {
            if part.is_empty() {
                continue;
            }
            let Some((field, operator, raw_value)) = split_term(part) else {
                return Err(SelectorError::new(format!(
                    "invalid selector: '{selector}'; can't understand '{part}'"
                )));
            };
            let value = unescape_value(raw_value)?;
            if field.is_empty() && value.is_empty() {
                continue;
            }
            requirements.push(FieldRequirement {
                field: field.to_owned(),
                operator,
                value,
            });
        }
        requirements.sort_by_cached_key(ToString::to_string);
        Ok(Self { requirements })
    }

    /// `metadata.name=name`: the one object named `name` (apimachinery's
    /// `fields.OneTermEqualSelector`).
    pub fn named(name: &str) -> Self {
        Self {
            requirements: vec![FieldRequirement {
                field: "metadata.name".into(),
                operator: FieldOperator::Equals,
                value: name.into(),
            }],
        }
    }

    /// Whether the selector selects everything (it has no requirement).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements, in canonical order.
    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }

    /// Whether an object matches; `get` looks up one of its fields by path
    /// (e.g. `metadata.name`). A missing field compares as the empty string.
    pub fn matches<S: AsRef<str>>(&self, get: impl Fn(&str) -> Option<S>) -> bool {
        self.requirements.iter().all(|requirement| {
            let actual = get(&requirement.field);
            requirement.matches(actual.as_ref().map(AsRef::as_ref))
        })
    }

    /// The `(field, value)` pairs every matching object must have: the `=`
    /// requirements. Any one of them can drive an index lookup; the whole
    /// selector must still be checked on the candidates.
    pub fn equalities(&self) -> impl Iterator<Item = (&str, &str)> {
        self.requirements
            .iter()
            .filter(|r| r.operator == FieldOperator::Equals)
            .map(|r| (r.field.as_str(), r.value.as_str()))
    }

    /// Refuses a selector on a field outside `supported`, e.g. for pods
    /// `["metadata.name", "metadata.namespace", "spec.nodeName", "status.phase", ...]`.
    ///
    /// # Errors
    ///
    /// For the first unsupported field (in the order kube-apiserver checks
    /// them), the message of its field-label conversion:
    /// `field label not supported: spec.foo`. Built-in kinds with a
    /// conversion function and custom resources say so; kinds without one
    /// answer `"spec.foo" is not a known field selector: only
    /// "metadata.name", "metadata.namespace"`, which this does not produce.
    pub fn check_supported(&self, supported: &[&str]) -> Result<(), SelectorError> {
        match self
            .requirements
            .iter()
            .find(|r| !supported.contains(&r.field.as_str()))
        {
            Some(r) => Err(SelectorError::new(format!(
                "field label not supported: {}",
                r.field
            ))),
            None => Ok(()),
        }
    }
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, requirement) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

impl FromStr for FieldSelector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// The terms between unescaped commas, escapes kept (`splitTerms`).
fn split_terms(selector: &str) -> Vec<&str> {
    if selector.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in selector.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&selector[start..i]);
            start = i + 1;
        }
    }
    terms.push(&selector[start..]);
    terms
}

/// Splits a term at the first operator; at one position `!=` is tried before
/// `==` before `=` (`splitTerm`). The value is returned still escaped.
fn split_term(term: &str) -> Option<(&str, FieldOperator, &str)> {
    const OPERATORS: [(&str, FieldOperator); 3] = [
        ("!=", FieldOperator::NotEquals),
        ("==", FieldOperator::Equals),
        ("=", FieldOperator::Equals),
    ];
    term.char_indices().find_map(|(i, _)| {
        let rest = &term[i..];
        OPERATORS.iter().find_map(|&(symbol, operator)| {
            rest.strip_prefix(symbol)
                .map(|value| (&term[..i], operator, value))
        })
    })
}

/// Undoes `\\`, `\,` and `\=`; any other escape, a trailing backslash or a
/// bare `=` is an error (`UnescapeValue`). A bare `,` cannot occur: it splits terms.
fn unescape_value(raw: &str) -> Result<String, SelectorError> {
    if !raw.contains(['\\', ',', '=']) {
        return Ok(raw.to_owned());
    }
    let mut value = String::with_capacity(raw.len());
    let mut in_slash = false;
    for c in raw.chars() {
        if in_slash {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(SelectorError::new(format!(
                    "invalid field selector: invalid escape sequence: \\{c}"
                )));
            }
            value.push(c);
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' || c == '=' {
            // Go prints the rune with %v, that is as its code point: 61 for '='.
            return Err(SelectorError::new(format!(
                "invalid field selector: unescaped character in value: {}",
                u32::from(c)
            )));
        } else {
            value.push(c);
        }
    }
    if in_slash {
        return Err(SelectorError::new(
            "invalid field selector: invalid escape sequence: \\",
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::selector::test_rng::Rng;

    fn parse(s: &str) -> FieldSelector {
        FieldSelector::parse(s).unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
    }

    fn error(s: &str) -> String {
        match FieldSelector::parse(s) {
            Ok(selector) => panic!("{s:?} should not parse, got {selector}"),
            Err(e) => e.to_string(),
        }
    }

    fn terms(s: &str) -> Vec<(String, FieldOperator, String)> {
        parse(s)
            .requirements()
            .iter()
            .map(|r| (r.field().to_owned(), r.operator(), r.value().to_owned()))
            .collect()
    }

    fn term(field: &str, operator: FieldOperator, value: &str) -> (String, FieldOperator, String) {
        (field.to_owned(), operator, value.to_owned())
    }

    /// Whether `selector` matches an object with the fields `f=v,...`.
    fn selects(selector: &str, fields: &[(&str, &str)]) -> bool {
        let fields: BTreeMap<&str, &str> = fields.iter().copied().collect();
        parse(selector).matches(|path| fields.get(path).copied())
    }

    use FieldOperator::{Equals, NotEquals};

    #[test]
    fn an_empty_selector_matches_everything() {
        for s in ["", ",", ",,", "=", "==", "!=", "=,=="] {
            let selector = parse(s);
            assert!(selector.is_empty(), "{s:?}");
            assert!(selector.matches(|_| None::<&str>));
            assert_eq!(selector.to_string(), "");
        }
    }

    #[test]
    fn equals_and_double_equals_compare_the_field_with_the_value() {
        for s in ["spec.nodeName=n1", "spec.nodeName==n1"] {
            assert_eq!(terms(s), [term("spec.nodeName", Equals, "n1")]);
            assert!(selects(s, &[("spec.nodeName", "n1")]));
            assert!(!selects(s, &[("spec.nodeName", "n2")]));
            assert!(!selects(s, &[]));
        }
    }

    #[test]
    fn not_equals_matches_other_values_and_missing_fields() {
        assert_eq!(
            terms("status.phase!=Failed"),
            [term("status.phase", NotEquals, "Failed")]
        );
        assert!(selects(
            "status.phase!=Failed",
            &[("status.phase", "Running")]
        ));
        assert!(selects("status.phase!=Failed", &[]));
        assert!(!selects(
            "status.phase!=Failed",
            &[("status.phase", "Failed")]
        ));
    }

    #[test]
    fn a_missing_field_compares_as_the_empty_string() {
        assert!(selects("spec.nodeName=", &[]));
        assert!(selects("spec.nodeName=", &[("spec.nodeName", "")]));
        assert!(!selects("spec.nodeName=", &[("spec.nodeName", "n1")]));
        assert!(!selects("spec.nodeName!=", &[]));
        assert!(selects("spec.nodeName!=", &[("spec.nodeName", "n1")]));
    }

    #[test]
    fn all_requirements_must_match() {
        let s = "metadata.namespace=ns,status.phase!=Failed";
        assert!(selects(
            s,
            &[("metadata.namespace", "ns"), ("status.phase", "Running")]
        ));
        assert!(!selects(
            s,
            &[("metadata.namespace", "ns"), ("status.phase", "Failed")]
        ));
        assert!(!selects(s, &[("metadata.namespace", "other")]));
    }

    #[test]
    fn a_term_splits_at_its_first_operator() {
        assert_eq!(terms("a=!b"), [term("a", Equals, "!b")]);
        assert_eq!(terms("a!b=c"), [term("a!b", Equals, "c")]);
        assert_eq!(
            error("a!==b"),
            "invalid field selector: unescaped character in value: 61"
        );
        assert_eq!(terms(r"a!=\=b"), [term("a", NotEquals, "=b")]);
    }

    #[test]
    fn whitespace_is_part_of_fields_and_values() {
        assert_eq!(terms("a = b"), [term("a ", Equals, " b")]);
    }

    #[test]
    fn a_field_without_a_name_is_kept_when_it_has_a_value() {
        assert_eq!(terms("=a"), [term("", Equals, "a")]);
    }

    #[test]
    fn escaped_backslashes_commas_and_equals_signs_are_part_of_the_value() {
        assert_eq!(terms(r"a=x\,y"), [term("a", Equals, "x,y")]);
        assert_eq!(terms(r"a=x\=y"), [term("a", Equals, "x=y")]);
        assert_eq!(terms(r"a=x\\y"), [term("a", Equals, r"x\y")]);
        assert_eq!(
            terms(r"a=x\\,b=y"),
            [term("a", Equals, r"x\"), term("b", Equals, "y")]
        );
        assert_eq!(terms(r"a!=\,\=\\"), [term("a", NotEquals, r",=\")]);
        assert!(selects(r"a=x\,y", &[("a", "x,y")]));
    }

    #[test]
    fn display_escapes_values_and_writes_double_equals_as_equals() {
        assert_eq!(parse(r"b==x\,y,a!=\\").to_string(), r"a!=\\,b=x\,y");
        assert_eq!(parse("b=1,a==2").to_string(), "a=2,b=1");
    }

    #[test]
    fn requirements_are_in_canonical_order() {
        assert_eq!(
            terms("b=2,a!=1,a==0"),
            [
                term("a", NotEquals, "1"),
                term("a", Equals, "0"),
                term("b", Equals, "2")
            ]
        );
    }

    #[test]
    fn equalities_are_the_requirements_an_index_can_serve() {
        let selector = parse("spec.nodeName=n1,status.phase!=Failed,metadata.name==p");
        assert_eq!(
            selector.equalities().collect::<Vec<_>>(),
            [("metadata.name", "p"), ("spec.nodeName", "n1")]
        );
    }

    #[test]
    fn a_term_without_operator_is_not_understood() {
        // The wording of fields.ParseSelector; kube-apiserver answers it as is.
        assert_eq!(error("a"), "invalid selector: 'a'; can't understand 'a'");
        assert_eq!(
            error("a=b,c"),
            "invalid selector: 'a=b,c'; can't understand 'c'"
        );
        assert_eq!(
            error("x,a=b,c"),
            "invalid selector: 'x,a=b,c'; can't understand 'c'"
        );
        assert_eq!(
            error("foo in (bar,baz)"),
            "invalid selector: 'foo in (bar,baz)'; can't understand 'baz)'"
        );
    }

    #[test]
    fn bad_escapes_and_bare_equals_signs_in_values_are_rejected() {
        assert_eq!(
            error("a=b=c"),
            "invalid field selector: unescaped character in value: 61"
        );
        assert_eq!(
            error(r"a=b\x"),
            r"invalid field selector: invalid escape sequence: \x"
        );
        assert_eq!(
            error(r"a=b\é"),
            r"invalid field selector: invalid escape sequence: \é"
        );
        assert_eq!(
            error(r"a=b\"),
            r"invalid field selector: invalid escape sequence: \"
        );
    }

    #[test]
    fn an_unsupported_field_is_named_like_the_field_label_conversion() {
        const POD_FIELDS: &[&str] = &[
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "status.phase",
        ];
        assert_eq!(
            parse("spec.nodeName=n1,metadata.name=p").check_supported(POD_FIELDS),
            Ok(())
        );
        assert_eq!(parse("").check_supported(&[]), Ok(()));
        assert_eq!(
            parse("spec.nodeName=n1,spec.foo=bar")
                .check_supported(POD_FIELDS)
                .unwrap_err()
                .to_string(),
            "field label not supported: spec.foo"
        );
        // The first in kube-apiserver's (sorted) order.
        assert_eq!(
            parse("z=1,b=1,y=1")
                .check_supported(POD_FIELDS)
                .unwrap_err()
                .to_string(),
            "field label not supported: b"
        );
    }

    #[test]
    fn display_of_random_valid_selectors_parses_back_to_the_same_selector() {
        let fields = ["a", "b", "spec.nodeName", "", r"x\,y", "a!b", r"q\"];
        let values = ["", "v", r"\\", r"\,", r"\=", r"x\,\=\\y", "é", " "];
        let mut rng = Rng::new(11);
        for _ in 0..5_000 {
            let terms: Vec<String> = (0..=rng.below(4))
                .map(|_| {
                    let op = rng.pick(&["=", "==", "!="]);
                    format!("{}{op}{}", rng.pick(&fields), rng.pick(&values))
                })
                .collect();
            let input = terms.join(rng.pick(&[",", ",,"]));
            let selector = parse(&input);
            let shown = selector.to_string();
            assert_eq!(parse(&shown), selector, "{input:?} shown as {shown:?}");
            assert_eq!(parse(&shown).to_string(), shown);
        }
    }

    #[test]
    fn random_strings_never_panic_the_parser_and_what_parses_round_trips() {
        let pieces = [
            "a", "b", ".", "=", "==", "!", "!=", ",", "\\", " ", "é", "\0", "(", "x",
        ];
        let mut rng = Rng::new(99);
        let mut parsed = 0;
        for _ in 0..50_000 {
            let input = rng.string_of(&pieces, 12);
            if let Ok(selector) = FieldSelector::parse(&input) {
                parsed += 1;
                let shown = selector.to_string();
                assert_eq!(parse(&shown), selector, "{input:?} shown as {shown:?}");
                let _ = selector.matches(|f| (!f.is_empty()).then_some("x"));
            }
        }
        assert!(
            parsed > 1_000,
            "the generator should also produce valid selectors ({parsed})"
        );
    }
}
