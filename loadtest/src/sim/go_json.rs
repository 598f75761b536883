//! JSON as kube-apiserver's Go `encoding/json` writes a value: compact, keys
//! in the order given, and strings as `encodeState.string` writes them with
//! `escapeHTML` (Go 1.20 and 1.21, which build Kubernetes 1.28): `"` and `\`
//! after a backslash, `\n` `\r` `\t`, every other control character and `<`
//! `>` `&` as `\u00xx`, U+2028 and U+2029 as `\u2028` `\u2029`.
//!
//! Written apart from kubecache's own escaper (`kubecache_wire::go_json`):
//! the sim is the oracle kubecache's bytes are compared with, so the two
//! must not share a misreading.

use std::fmt::Write as _;

use serde_json::Value;

/// `value` as Go writes it.
pub fn to_vec(value: &Value) -> Vec<u8> {
    let mut out = String::new();
    write_value(&mut out, value);
    out.into_bytes()
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        // serde_json prints integers and floats' shortest forms as Go does.
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(entries) => {
            out.push('{');
            for (i, (key, item)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_str(out, key);
                out.push(':');
                write_value(out, item);
            }
            out.push('}');
        }
    }
}

fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        let short = match c {
            '"' => "\\\"",
            '\\' => "\\\\",
            '\n' => "\\n",
            '\r' => "\\r",
            '\t' => "\\t",
            '\0'..='\x1f' | '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
                continue;
            }
            _ => {
                out.push(c);
                continue;
            }
        };
        out.push_str(short);
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_keys_are_escaped_as_gos_encoder_escapes_them() {
        let value = serde_json::json!({
            "a": "<&>",
            "b\u{2028}": ["\u{8}\u{c}\u{1}\u{1f}\u{7f} \"\\\n\r\t é日本🙂 \u{2029}/", 1, 2.5, true, null],
        });
        assert_eq!(
            String::from_utf8(to_vec(&value)).unwrap(),
            "{\"a\":\"\\u003c\\u0026\\u003e\",\"b\\u2028\":[\"\\u0008\\u000c\\u0001\\u001f\u{7f} \\\"\\\\\\n\\r\\t é日本🙂 \\u2029/\",1,2.5,true,null]}"
        );
    }
}
