//! JSON strings as kube-apiserver writes them: Go's `encoding/json` with
//! `escapeHTML` (a `json.Encoder`'s default), as Go 1.20 and 1.21 build
//! Kubernetes 1.28:
//! - `"` and `\` as `\"` and `\\`; `\n`, `\r` and `\t` as they are named;
//! - every other byte below 0x20, and `<`, `>`, `&`, as `\u00XX` with
//!   lowercase hex (`\u0008`, `\u000c`, `\u003c`);
//! - U+2028 and U+2029 as `\u2028` and `\u2029`;
//! - a byte that starts no valid UTF-8 sequence as `\ufffd` (Go strings may
//!   hold any bytes: protobuf strings are not checked);
//! - anything else (DEL, other non-ASCII) as it is.
//!
//! serde_json writes `<`, `>`, `&`, U+2028 and U+2029 as they are, and 0x08
//! and 0x0C as `\b` and `\f`: [`GoFormatter`] makes it write Go's bytes.
//!
//! Raw JSON that a Go type marshals itself (`runtime.RawExtension`,
//! `metav1.FieldsV1`: a `json.Marshaler` returning its stored bytes) is not
//! re-encoded but passed through Go's `compact(dst, src, escapeHTML)`:
//! [`write_compact`].

use std::io;

use serde::Serialize;
use serde_json::ser::{CharEscape, Formatter};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The bytes copied as they are: printable ASCII but `"`, `\`, `<`, `>`, `&`.
static PLAIN: [bool; 256] = {
    let mut plain = [false; 256];
    let mut b = 0x20;
    while b < 0x80 {
        plain[b] = !matches!(b as u8, b'"' | b'\\' | b'<' | b'>' | b'&');
        b += 1;
    }
    plain
};

/// Appends `s` as a quoted JSON string.
#[inline]
pub fn write_string(out: &mut Vec<u8>, s: &[u8]) {
    write_string_replacing(out, s);
}

/// Appends `s` as a quoted JSON string, as [`write_string`]; whether a
/// byte of it started no UTF-8 sequence (and was written as `\ufffd`).
/// Found on the way: plain bytes cost nothing more.
#[inline]
pub(crate) fn write_string_replacing(out: &mut Vec<u8>, s: &[u8]) -> bool {
    out.reserve(s.len() + 2);
    out.push(b'"');
    let replaced = escape_replacing(out, s);
    out.push(b'"');
    replaced
}

/// Appends the escaped contents of `s`, without quotes. Runs of plain
/// bytes are copied whole.
pub fn escape(out: &mut Vec<u8>, s: &[u8]) {
    escape_replacing(out, s);
}

/// [`escape`]; whether a byte was replaced.
fn escape_replacing(out: &mut Vec<u8>, s: &[u8]) -> bool {
    let mut replaced = false;
    let mut start = 0;
    let mut i = 0;
    while i < s.len() {
        let b = s[i];
        if PLAIN[usize::from(b)] {
            i += 1;
            continue;
        }
        let control = [
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX[usize::from(b >> 4)],
            HEX[usize::from(b & 0xf)],
        ];
        let (escaped, len): (&[u8], usize) = match b {
            b'"' => (br#"\""#, 1),
            b'\\' => (br"\\", 1),
            b'\n' => (br"\n", 1),
            b'\r' => (br"\r", 1),
            b'\t' => (br"\t", 1),
            0..0x80 => (&control, 1),
            _ => match utf8_len(&s[i..]) {
                0 => {
                    replaced = true;
                    (br"\ufffd", 1)
                }
                3 if s[i..i + 3] == *"\u{2028}".as_bytes() => (br"\u2028", 3),
                3 if s[i..i + 3] == *"\u{2029}".as_bytes() => (br"\u2029", 3),
                n => {
                    i += n;
                    continue;
                }
            },
        };
        out.extend_from_slice(&s[start..i]);
        out.extend_from_slice(escaped);
        i += len;
        start = i;
    }
    out.extend_from_slice(&s[start..]);
    replaced
}

/// The string Go's `encoding/json` writes for the bytes `s` (unescaped):
/// each byte that starts no UTF-8 sequence replaced by U+FFFD, one per
/// byte as Go's `utf8.DecodeRune` reads them (not one per maximal invalid
/// run, as [`String::from_utf8_lossy`] does: `E2 82` is two).
pub fn replaced(s: &[u8]) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    let mut i = 0;
    while i < s.len() {
        match utf8_len(&s[i..]) {
            0 => {
                out.push(char::REPLACEMENT_CHARACTER);
                i += 1;
            }
            n => {
                // `utf8_len` read a whole valid sequence of `n` bytes.
                out.push_str(std::str::from_utf8(&s[i..i + n]).unwrap_or_default());
                i += n;
            }
        }
    }
    out
}

/// The length of the UTF-8 sequence `s` starts with; 0 when it starts with
/// none (where Go's `utf8.DecodeRune` gives `RuneError` of size 1).
fn utf8_len(s: &[u8]) -> usize {
    s[..s.len().min(4)]
        .utf8_chunks()
        .next()
        .and_then(|chunk| chunk.valid().chars().next())
        .map_or(0, char::len_utf8)
}

/// Appends the valid JSON `json` as Go's `encoding/json` writes what a
/// `MarshalJSON` returned (`compact` with `escapeHTML`, Go 1.20 and 1.21):
/// whitespace between tokens dropped; `<`, `>`, `&` as `\u003c`, `\u003e`,
/// `\u0026` and U+2028, U+2029 as `\u2028`, `\u2029`; every other byte,
/// escapes and non-ASCII included, as it is (`\b` stays `\b`).
pub fn write_compact(out: &mut Vec<u8>, json: &[u8]) {
    out.reserve(json.len());
    let (mut in_string, mut escaped) = (false, false);
    let mut start = 0;
    let mut i = 0;
    while i < json.len() {
        let b = json[i];
        let (replace, len): (&[u8], usize) = match b {
            b'<' => (br"\u003c", 1),
            b'>' => (br"\u003e", 1),
            b'&' => (br"\u0026", 1),
            0xe2 if json[i..].starts_with("\u{2028}".as_bytes()) => (br"\u2028", 3),
            0xe2 if json[i..].starts_with("\u{2029}".as_bytes()) => (br"\u2029", 3),
            b' ' | b'\t' | b'\n' | b'\r' if !in_string => (b"", 1),
            _ => {
                if in_string {
                    in_string = escaped || b != b'"';
                    escaped = !escaped && b == b'\\';
                } else {
                    in_string = b == b'"';
                }
                i += 1;
                continue;
            }
        };
        // An escaped character is never one of these: `\<` is not JSON.
        escaped = false;
        out.extend_from_slice(&json[start..i]);
        out.extend_from_slice(replace);
        i += len;
        start = i;
    }
    out.extend_from_slice(&json[start..]);
}

/// serde_json's compact form with strings escaped as Go escapes them: with
/// keys in the Go struct's order, `json.Marshal`'s bytes.
pub struct GoFormatter;

impl Formatter for GoFormatter {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut out = Vec::with_capacity(fragment.len());
        escape(&mut out, fragment.as_bytes());
        writer.write_all(&out)
    }

    fn write_char_escape<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        char_escape: CharEscape,
    ) -> io::Result<()> {
        let byte = match char_escape {
            CharEscape::Quote => b'"',
            CharEscape::ReverseSolidus => b'\\',
            CharEscape::Solidus => b'/',
            CharEscape::Backspace => 0x08,
            CharEscape::FormFeed => 0x0c,
            CharEscape::LineFeed => b'\n',
            CharEscape::CarriageReturn => b'\r',
            CharEscape::Tab => b'\t',
            CharEscape::AsciiControl(byte) => byte,
        };
        let mut out = Vec::with_capacity(6);
        escape(&mut out, &[byte]);
        writer.write_all(&out)
    }
}

/// Appends `value` as compact JSON, its strings escaped as Go escapes them.
///
/// # Errors
///
/// What serde_json refuses (a map with non-string keys).
pub fn write(out: &mut Vec<u8>, value: &impl Serialize) -> serde_json::Result<()> {
    value.serialize(&mut serde_json::Serializer::with_formatter(
        out,
        GoFormatter,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn go(s: &[u8]) -> String {
        let mut out = Vec::new();
        write_string(&mut out, s);
        String::from_utf8(out).unwrap()
    }

    // Expected values are what Go 1.21's `json.Marshal` writes.

    #[test]
    fn html_characters_are_escaped_in_lowercase_hex() {
        assert_eq!(go(b"<&>"), r#""\u003c\u0026\u003e""#);
        assert_eq!(go(b"a<b>c&d"), r#""a\u003cb\u003ec\u0026d""#);
    }

    #[test]
    fn quote_backslash_newline_return_and_tab_are_short() {
        assert_eq!(go(b"\"\\\n\r\t"), r#""\"\\\n\r\t""#);
    }

    #[test]
    fn other_control_characters_are_u00xx_backspace_and_form_feed_included() {
        assert_eq!(
            go(b"\x00\x01\x08\x0b\x0c\x1f"),
            r#""\u0000\u0001\u0008\u000b\u000c\u001f""#
        );
        assert_eq!(go(b"\x7f/"), "\"\x7f/\"", "DEL and / are not escaped");
    }

    #[test]
    fn line_and_paragraph_separators_are_escaped_other_non_ascii_is_not() {
        assert_eq!(
            go("é\u{2027}\u{2028}\u{2029}\u{202a}日本🙂".as_bytes()),
            "\"é\u{2027}\\u2028\\u2029\u{202a}日本🙂\""
        );
    }

    #[test]
    fn each_byte_that_starts_no_utf8_sequence_is_a_replacement_character() {
        // A lone continuation byte, a truncated sequence (two bytes, two
        // replacements, as Go's DecodeRune reads them), an encoded
        // surrogate, an overlong form and a truncated end.
        assert_eq!(go(b"a\x80b"), r#""a\ufffdb""#);
        assert_eq!(go(b"\xe2\x80x"), r#""\ufffd\ufffdx""#);
        assert_eq!(go(b"\xed\xa0\x80"), r#""\ufffd\ufffd\ufffd""#);
        assert_eq!(go(b"\xc0\xaf"), r#""\ufffd\ufffd""#);
        assert_eq!(go(b"ok\xf0\x9f"), r#""ok\ufffd\ufffd""#);
    }

    #[test]
    fn replaced_strings_are_what_go_writes_unescaped() {
        let unescaped =
            |s: &[u8]| serde_json::from_str::<String>(&go(s)).expect("Go's JSON string parses");
        for s in [
            &b"A\xff\xfeB"[..],
            b"x\x80y",
            b"\xe2\x82z",
            b"end\xe2\x82",
            b"\xed\xa0\x80",
            "\u{20ac} ok \u{fffd}".as_bytes(),
            b"",
        ] {
            assert_eq!(replaced(s), unescaped(s), "{s:?}");
        }
        assert_eq!(replaced(b"\xe2\x82z"), "\u{fffd}\u{fffd}z");
        let mut out = Vec::new();
        assert!(write_string_replacing(&mut out, b"a\x80"));
        assert!(!write_string_replacing(
            &mut out,
            "\u{fffd}<\u{2028}".as_bytes()
        ));
    }

    #[test]
    fn plain_strings_are_copied() {
        assert_eq!(go(b""), r#""""#);
        assert_eq!(go(b"nginx:1.25 app=web"), r#""nginx:1.25 app=web""#);
    }

    fn compact(json: &str) -> String {
        let mut out = Vec::new();
        write_compact(&mut out, json.as_bytes());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn marshaler_output_is_compacted_and_html_escaped_as_go_compacts_it() {
        // What Go 1.21's `json.Marshal` writes for a `json.RawMessage`.
        assert_eq!(
            compact("{ \"a <b>\" : [1, \"x&y\\\" \\\\\" ,\n\t{}],\r\"s\":\"\u{2028}\u{2029}é\"} "),
            r#"{"a \u003cb\u003e":[1,"x\u0026y\" \\",{}],"s":"\u2028\u2029é"}"#
        );
        // Spaces in strings stay, and so do escapes Go would write otherwise.
        assert_eq!(
            compact(r#"[" a  b ","\b\f\u003c\/\u00e9"]"#),
            r#"[" a  b ","\b\f\u003c\/\u00e9"]"#
        );
        assert_eq!(compact("null"), "null");
    }

    #[test]
    fn serialized_values_escape_strings_and_keys_as_go() {
        let value = serde_json::json!({"a<": ["<&>\u{8}\u{c}\u{2028}\n", 1, null]});
        let mut out = b"x".to_vec();
        write(&mut out, &value).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"x{"a\u003c":["\u003c\u0026\u003e\u0008\u000c\u2028\n",1,null]}"#
        );
    }
}
