//! Label key and value validation with Kubernetes' own words.
//!
//! The texts, regexes and limits are those of apimachinery
//! `pkg/util/validation/validation.go` (`IsQualifiedName`, `IsValidLabelValue`,
//! `IsDNS1123Subdomain`, `RegexError`, `MaxLenError`, `EmptyError`) as shipped
//! with Kubernetes 1.28, and the rendering of a `field.Error` and of an error
//! aggregate from `pkg/util/validation/field/errors.go` and
//! `pkg/util/errors/errors.go`. The regexes appear only inside messages; the
//! checks are hand-written equivalents.

/// `qualifiedNameFmt`: the name part of a label key.
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_EXAMPLES: &[&str] = &["MyName", "my.name", "123-abc"];
/// `qualifiedNameMaxLength`: DNS label length, the limit of a label key's name part.
const QUALIFIED_NAME_MAX_LENGTH: usize = 63;

/// `labelValueFmt`.
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_EXAMPLES: &[&str] = &["MyValue", "my_value", "12345"];
/// `LabelValueMaxLength`.
const LABEL_VALUE_MAX_LENGTH: usize = 63;

/// `dns1123SubdomainFmt`: the prefix part of a label key.
const DNS1123_SUBDOMAIN_FMT: &str =
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
/// `DNS1123SubdomainMaxLength`: the longest DNS name (RFC 1123).
const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;

/// `field.Path.String()` of a nil path: `labels.Parse` validates keys against
/// the nil path it was (not) given, so the API server really says `<nil>: ...`.
pub(super) const NIL_PATH: &str = "<nil>";

/// `IsQualifiedName`: why `key` is not a valid label key (empty if it is).
pub(super) fn label_key_errors(key: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let mut parts = key.split('/');
    let first = parts.next().unwrap_or_default();
    let name = match (parts.next(), parts.next()) {
        (None, _) => first,
        (Some(name), None) => {
            let prefix = first;
            if prefix.is_empty() {
                errors.push(format!("prefix part {}", empty_error()));
            } else {
                errors.extend(
                    dns1123_subdomain_errors(prefix)
                        .into_iter()
                        .map(|message| format!("prefix part {message}")),
                );
            }
            name
        }
        (Some(_), Some(_)) => {
            errors.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_ERR_MSG,
                    QUALIFIED_NAME_FMT,
                    QUALIFIED_NAME_EXAMPLES
                )
            ));
            return errors;
        }
    };
    if name.is_empty() {
        errors.push(format!("name part {}", empty_error()));
    } else if name.len() > QUALIFIED_NAME_MAX_LENGTH {
        errors.push(format!(
            "name part {}",
            max_len_error(QUALIFIED_NAME_MAX_LENGTH)
        ));
    }
    if !is_qualified_name_part(name) {
        errors.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_ERR_MSG,
                QUALIFIED_NAME_FMT,
                QUALIFIED_NAME_EXAMPLES
            )
        ));
    }
    errors
}

/// `IsValidLabelValue`: why `value` is not a valid label value (empty if it is).
pub(super) fn label_value_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > LABEL_VALUE_MAX_LENGTH {
        errors.push(max_len_error(LABEL_VALUE_MAX_LENGTH));
    }
    if !(value.is_empty() || is_qualified_name_part(value)) {
        errors.push(regex_error(
            LABEL_VALUE_ERR_MSG,
            LABEL_VALUE_FMT,
            LABEL_VALUE_EXAMPLES,
        ));
    }
    errors
}

/// `IsDNS1123Subdomain`.
fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errors.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !value.split('.').all(is_dns1123_label) {
        errors.push(regex_error(
            DNS1123_SUBDOMAIN_ERR_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errors
}

/// Matches `^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`.
fn is_qualified_name_part(s: &str) -> bool {
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// Matches `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, one dot-separated part of a subdomain.
fn is_dns1123_label(s: &str) -> bool {
    let lower_alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            lower_alnum(first)
                && lower_alnum(last)
                && bytes.iter().all(|b| lower_alnum(b) || *b == b'-')
        }
        _ => false,
    }
}

/// `RegexError`, including its double space before each `or`.
fn regex_error(message: &str, regex: &str, examples: &[&str]) -> String {
    let mut out = String::from(message);
    out.push_str(" (e.g. ");
    for (i, example) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push('\'');
        out.push_str(example);
        out.push_str("', ");
    }
    out.push_str("regex used for validation is '");
    out.push_str(regex);
    out.push_str("')");
    out
}

/// `MaxLenError` (which counts bytes, though it says characters).
fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

/// `EmptyError`.
fn empty_error() -> &'static str {
    "must be non-empty"
}

/// `field.Invalid(path, value, detail).Error()` for a string value.
pub(super) fn invalid_value(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {}: {detail}", go_quote(value))
}

/// `field.ErrorList.ToAggregate().Error()`: duplicates dropped, one message
/// alone, several in brackets joined by `, `. `None` for no message at all.
pub(super) fn aggregate(messages: Vec<String>) -> Option<String> {
    let mut unique: Vec<String> = Vec::with_capacity(messages.len());
    for message in messages {
        if !unique.contains(&message) {
            unique.push(message);
        }
    }
    match unique.len() {
        0 => None,
        1 => unique.pop(),
        _ => Some(format!("[{}]", unique.join(", "))),
    }
}

/// Go's `strconv.Quote` (the `%q` of `field.Error`): double quotes, with `"`
/// and `\` escaped and non-printable characters written as Go escapes.
///
/// ASCII is exact. Beyond ASCII, Go's `unicode.IsPrint` is approximated: control
/// characters, non-ASCII spaces, the common format characters (`Cf`), private
/// use characters and the noncharacters are escaped; unassigned code points
/// are not (Rust's standard library has no table of them).
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x0b' => out.push_str("\\v"),
            c if c < ' ' || c == '\x7f' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if is_go_printable(c) => out.push(c),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// An approximation of Go's `unicode.IsPrint` (see [`go_quote`]).
fn is_go_printable(c: char) -> bool {
    if c.is_ascii() {
        return (' '..='~').contains(&c);
    }
    let u = c as u32;
    let format_character = matches!(
        u,
        0xAD | 0x600..=0x605
            | 0x61C
            | 0x6DD
            | 0x70F
            | 0x890..=0x891
            | 0x8E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    );
    let private_use = matches!(u, 0xE000..=0xF8FF | 0xF0000..=0xFFFFD | 0x100000..=0x10FFFD);
    let noncharacter = matches!(u, 0xFDD0..=0xFDEF) || u & 0xFFFE == 0xFFFE;
    !(c.is_control() || c.is_whitespace() || format_character || private_use || noncharacter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_or_prefixed_label_key_is_valid() {
        for key in [
            "a",
            "A-b_c.9",
            "example.com/app",
            "a.b-c/X",
            &"k".repeat(63),
        ] {
            assert!(label_key_errors(key).is_empty(), "{key}");
        }
    }

    #[test]
    fn a_label_key_with_two_slashes_gets_only_the_qualified_name_message() {
        assert_eq!(
            label_key_errors("a/b/c"),
            [
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ]
        );
    }

    #[test]
    fn an_empty_name_part_is_both_empty_and_not_matching_the_regex() {
        assert_eq!(
            label_key_errors("example.com/"),
            [
                "name part must be non-empty",
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
            ]
        );
    }

    #[test]
    fn a_name_part_longer_than_63_bytes_is_too_long_even_when_well_formed() {
        assert_eq!(
            label_key_errors(&"k".repeat(64)),
            ["name part must be no more than 63 characters"]
        );
    }

    #[test]
    fn a_prefix_must_be_a_lowercase_dns_subdomain_of_at_most_253_bytes() {
        assert_eq!(label_key_errors("/a"), ["prefix part must be non-empty"]);
        let subdomain = "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
        for prefix in ["Example.com", "a..b", "-a", "a-", "a_b", ".a"] {
            assert_eq!(
                label_key_errors(&format!("{prefix}/x")),
                [subdomain],
                "{prefix}"
            );
        }
        let long = ["a"; 128].join(".");
        assert_eq!(
            label_key_errors(&format!("{long}/x")),
            ["prefix part must be no more than 253 characters"]
        );
    }

    #[test]
    fn a_label_value_may_be_empty_but_not_start_or_end_with_punctuation() {
        assert!(label_value_errors("").is_empty());
        assert!(label_value_errors("a.b_c-D9").is_empty());
        let regex = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
        for value in ["-a", "a.", "a/b", "é"] {
            assert_eq!(label_value_errors(value), [regex], "{value}");
        }
        assert_eq!(
            label_value_errors(&format!("-{}", "a".repeat(63))),
            ["must be no more than 63 characters", regex]
        );
    }

    #[test]
    fn quoting_follows_go_strconv_quote() {
        assert_eq!(go_quote("a"), r#""a""#);
        assert_eq!(go_quote(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(go_quote("\x01\x7f\x0b\x07"), r#""\x01\x7f\v\a""#);
        assert_eq!(go_quote("é✓"), "\"é✓\"");
        assert_eq!(go_quote("\u{a0}\u{200b}\u{85}"), r#""\u00a0\u200b\u0085""#);
        assert_eq!(go_quote("\u{10ffff}"), r#""\U0010ffff""#);
    }

    #[test]
    fn an_aggregate_of_several_messages_is_bracketed_and_deduplicated() {
        assert_eq!(aggregate(vec![]), None);
        assert_eq!(aggregate(vec!["a".into()]), Some("a".into()));
        assert_eq!(
            aggregate(vec!["a".into(), "b".into(), "a".into()]),
            Some("[a, b]".into())
        );
    }
}
