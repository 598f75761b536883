//! The sim's `shardSelector` (KEP-5866, the `ShardedListAndWatch` gate of
//! kube-apiserver v1.36), written from the KEP and apimachinery's
//! `pkg/sharding` (`selector.go`, `hash.go`) and apiserver's
//! `pkg/sharding/parser.go`, not from kubecache's reader: the oracle and
//! the system under test do not share a misreading.
//!
//! As the API server does it:
//! - the value is trimmed; nothing left is refused;
//! - the expression is `shardRange(<path>, '<start>', '<end>')` terms
//!   joined by `||` (parentheses allowed); `<path>` is
//!   `object.metadata.uid` or `object.metadata.namespace`, the same in
//!   every term; bounds are string literals of `0x` and 16 lowercase hex
//!   digits, or `0x10000000000000000`, with `start` below `end`;
//! - an object is selected when `"0x" + %016x` of the FNV-1a 64 of the
//!   field's value is, compared as Go's `HexLess` compares (length, then
//!   bytes), in `[start, end)` of some term;
//! - the error is the conversion's `invalid shard selector: ` and the
//!   parser's message, answered as a 400.
//!
//! The sim splits the text at its top-level `||` and reads each term with
//! string operations; syntax outside that shape is refused with a
//! `CEL parse error: ...` of its own words (cel-go's are not reproduced).

/// A parsed shard selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardSelector {
    /// `object.metadata.uid` or `object.metadata.namespace`.
    path: String,
    /// `(start, end)` as written (canonical already).
    ranges: Vec<(String, String)>,
}

impl ShardSelector {
    /// Reads a `shardSelector` value.
    ///
    /// # Errors
    ///
    /// The 400 message kube-apiserver answers.
    pub fn parse(value: &str) -> Result<Self, String> {
        read(value).map_err(|why| format!("invalid shard selector: {why}"))
    }

    /// Whether the object with `uid` in `namespace` is in a range.
    pub fn matches(&self, uid: &str, namespace: &str) -> bool {
        let value = if self.path == "object.metadata.uid" {
            uid
        } else {
            namespace
        };
        let hash = format!("0x{:016x}", fnv64a(value));
        self.ranges
            .iter()
            .any(|(start, end)| !hex_less(&hash, start) && hex_less(&hash, end))
    }

    /// What a list answered under the selector echoes in
    /// `metadata.shardInfo.selector` (apimachinery's `String()`).
    pub fn echo(&self) -> String {
        self.ranges
            .iter()
            .map(|(start, end)| format!("shardRange({}, '{start}', '{end}')", self.path))
            .collect::<Vec<_>>()
            .join(" || ")
    }
}

/// Go's `hash/fnv` `New64a` over `value`.
fn fnv64a(value: &str) -> u64 {
    let mut hash: u64 = 14_695_981_039_346_656_037;
    for byte in value.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(1_099_511_628_211);
    }
    hash
}

/// apimachinery's `HexLess`: a shorter hex string is smaller, then bytes.
fn hex_less(a: &str, b: &str) -> bool {
    (a.len(), a) < (b.len(), b)
}

fn read(value: &str) -> Result<ShardSelector, String> {
    let value = value.trim();
    if value.is_empty() {
        return Err(
            "empty shard selector is not allowed; omit the parameter for unfiltered lists".into(),
        );
    }
    let mut path: Option<String> = None;
    let mut ranges = Vec::new();
    for term in split_top(value, "||")? {
        let (term_path, start, end) = term_range(term)?;
        ranges.push((start, end));
        match &path {
            None => path = Some(term_path),
            Some(first) if *first != term_path => {
                return Err(format!(
                    "all shard ranges must use the same field, got {first:?} and {term_path:?}"
                ));
            }
            Some(_) => {}
        }
    }
    Ok(ShardSelector {
        path: path.expect("split_top yields a term"),
        ranges,
    })
}

/// `text` cut at `separator` outside quotes and parentheses, each piece
/// trimmed and without parentheses around it all.
fn split_top<'t>(text: &'t str, separator: &str) -> Result<Vec<&'t str>, String> {
    let mut pieces = Vec::new();
    let (mut depth, mut quote, mut from) = (0i32, None, 0);
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == b'\'' || c == b'"' => quote = Some(c),
            None if c == b'(' => depth += 1,
            None if c == b')' => depth -= 1,
            None if depth == 0 && text[i..].starts_with(separator) => {
                pieces.push(unwrap_parens(text[from..i].trim()));
                i += separator.len();
                from = i;
                continue;
            }
            None => {}
        }
        if depth < 0 {
            return Err("CEL parse error: Syntax error: unbalanced ')'".into());
        }
        i += 1;
    }
    if quote.is_some() || depth != 0 {
        return Err("CEL parse error: Syntax error: unterminated expression".into());
    }
    pieces.push(unwrap_parens(text[from..].trim()));
    if pieces.iter().any(|p| p.is_empty()) {
        return Err("CEL parse error: Syntax error: missing operand".into());
    }
    Ok(pieces)
}

/// `(x)` as `x`, when the parentheses enclose the whole of it.
fn unwrap_parens(text: &str) -> &str {
    let Some(inner) = text.strip_prefix('(').and_then(|t| t.strip_suffix(')')) else {
        return text;
    };
    if balanced(inner) {
        unwrap_parens(inner.trim())
    } else {
        text
    }
}

/// Whether parentheses outside quotes never close below zero in `text`.
fn balanced(text: &str) -> bool {
    let (mut depth, mut quote) = (0i32, None);
    for c in text.bytes() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == b'\'' || c == b'"' => quote = Some(c),
            None if c == b'(' => depth += 1,
            None if c == b')' => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            None => {}
        }
    }
    depth == 0
}

/// One `shardRange(path, start, end)` term: its path and bounds.
fn term_range(term: &str) -> Result<(String, String, String), String> {
    for (operator, function) in [
        ("&&", "_&&_"),
        ("==", "_==_"),
        ("!=", "_!=_"),
        ("<=", "_<=_"),
        (">=", "_>=_"),
        ("<", "_<_"),
        (">", "_>_"),
    ] {
        if split_top(term, operator)?.len() > 1 {
            return Err(unsupported(function));
        }
    }
    let Some((function, rest)) = term.split_once('(') else {
        return Err(format!(
            "unexpected expression kind {}; expected shardRange() call or || operator",
            kind(term)
        ));
    };
    let function = function.trim();
    let Some(args) = rest.trim_end().strip_suffix(')') else {
        return Err("CEL parse error: Syntax error: expected ')'".into());
    };
    if function != "shardRange" {
        return Err(unsupported(function));
    }
    let args = if args.trim().is_empty() {
        Vec::new()
    } else {
        split_top(args, ",")?
    };
    let [path, start, end] = args[..] else {
        return Err(format!(
            "shardRange() requires exactly 3 arguments, got {}",
            args.len()
        ));
    };
    if kind(path) != 3 && kind(path) != 7 {
        return Err(format!(
            "shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind {}",
            kind(path)
        ));
    }
    let path: String = path.split('.').map(str::trim).collect::<Vec<_>>().join(".");
    if path != "object.metadata.uid" && path != "object.metadata.namespace" {
        return Err(format!(
            "unsupported field path {path:?}; supported: object.metadata.uid, object.metadata.namespace"
        ));
    }
    let start = hex(start, "hexStart")?;
    let end = hex(end, "hexEnd")?;
    if !hex_less(&start, &end) {
        return Err(format!(
            "shard range start {start} must be less than end {end}"
        ));
    }
    Ok((path, start, end))
}

fn unsupported(function: &str) -> String {
    format!("unsupported function {function:?}; only shardRange() and || are allowed")
}

/// cel-go's `ast.ExprKind` number of a simple expression: 1 a call, 3 a
/// name, 5 a literal, 7 a selection.
fn kind(text: &str) -> u8 {
    let text = text.trim();
    if text.contains('(') {
        1
    } else if text.starts_with(['\'', '"'])
        || text.starts_with(|c: char| c.is_ascii_digit())
        || ["true", "false", "null"].contains(&text)
    {
        5
    } else if text.contains('.') {
        7
    } else {
        3
    }
}

/// A bound: a string literal, checked as apiserver's `extractHexLiteral`.
fn hex(arg: &str, name: &str) -> Result<String, String> {
    let arg = arg.trim();
    let quoted = arg.len() >= 2
        && (arg.starts_with('\'') && arg.ends_with('\'')
            || arg.starts_with('"') && arg.ends_with('"'));
    if !quoted {
        return Err(match kind(arg) {
            5 => {
                let go_type = if arg == "true" || arg == "false" {
                    "bool"
                } else if arg == "null" {
                    "structpb.NullValue"
                } else if arg.ends_with(['u', 'U']) {
                    "uint64"
                } else if arg.contains('.') {
                    "float64"
                } else {
                    "int64"
                };
                format!("{name} must be a string literal, got {go_type}")
            }
            other => {
                format!(
                    "{name} must be a string literal (e.g. '0xff'), got expression kind {other}"
                )
            }
        });
    }
    let s = &arg[1..arg.len() - 1];
    let Some(digits) = s.strip_prefix("0x") else {
        return Err(format!("{name} must have '0x' prefix, got {s:?}"));
    };
    if digits.is_empty() {
        return Err(format!("{name}: hex value is required after '0x'"));
    }
    if digits.len() > 17 {
        return Err(format!(
            "{name}: hex value too long ({} chars, max 17): {digits:?}",
            digits.len()
        ));
    }
    if let Some(c) = digits
        .chars()
        .find(|c| !c.is_ascii_digit() && !('a'..='f').contains(c))
    {
        return Err(format!(
            "{name}: invalid hex character {:?} in {s:?}",
            c.to_string()
        ));
    }
    if digits.len() == 17 && s != "0x10000000000000000" {
        return Err(format!(
            "{name}: 17-digit hex value must be '0x10000000000000000' (2^64), got {s:?}"
        ));
    }
    if digits.len() < 16 {
        let padded = format!("0x{}{digits}", "0".repeat(16 - digits.len()));
        return Err(format!(
            "{name} must be a 0x-prefixed 16-digit hex value, got {s:?} (did you mean {padded:?}?)"
        ));
    }
    Ok(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HALF: &str =
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";

    #[test]
    fn the_go_hash_and_the_echo_are_apimachinery_s() {
        assert_eq!(fnv64a(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv64a("abc"), 0xe71f_a219_0541_574b);
        let spelled =
            " ( shardRange(object.metadata.uid,\"0x0000000000000000\",'0x8000000000000000') ) ";
        assert_eq!(ShardSelector::parse(spelled).unwrap().echo(), HALF);
        let top = "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')";
        let both = ShardSelector::parse(&format!("{HALF} || {top}")).unwrap();
        assert_eq!(both.echo(), format!("{HALF} || {top}"));
        assert!(both.matches("any", "ns"));
        let high = ShardSelector::parse(top).unwrap();
        // "abc": 0xe71f… is in the upper half.
        assert!(high.matches("abc", ""));
        assert!(!ShardSelector::parse(HALF).unwrap().matches("abc", ""));
    }

    #[test]
    fn refusals_are_the_api_server_s() {
        for (text, want) in [
            (
                " ",
                "empty shard selector is not allowed; omit the parameter for unfiltered lists",
            ),
            (
                "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
                "hexStart must be a 0x-prefixed 16-digit hex value, got \"0x0\" (did you mean \"0x0000000000000000\"?)",
            ),
            (
                "shardRange(object.metadata.name, '0x00', '0x80')",
                "unsupported field path \"object.metadata.name\"; supported: object.metadata.uid, object.metadata.namespace",
            ),
            (
                "invalidFunc(object.metadata.uid, '0x00', '0x80')",
                "unsupported function \"invalidFunc\"; only shardRange() and || are allowed",
            ),
            (
                "shardRange(object.metadata.uid, 0, 8)",
                "hexStart must be a string literal, got int64",
            ),
            (
                "shardRange(object.metadata.uid, '0x0')",
                "shardRange() requires exactly 3 arguments, got 2",
            ),
            (
                "shardRange(object.metadata.uid, '0xffffffffffffffff', '0x0000000000000000')",
                "shard range start 0xffffffffffffffff must be less than end 0x0000000000000000",
            ),
            (
                "object.metadata.uid > '0x0'",
                "unsupported function \"_>_\"; only shardRange() and || are allowed",
            ),
        ] {
            assert_eq!(
                ShardSelector::parse(text).unwrap_err(),
                format!("invalid shard selector: {want}"),
                "{text}"
            );
        }
    }
}
