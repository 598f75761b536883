//! YAML as kube-apiserver writes it (`Accept: application/yaml`): the JSON
//! form through sigs.k8s.io/yaml's `JSONToYAML`, which reads the JSON with
//! go-yaml v2 and writes it back with go-yaml v2's `Marshal` (a port of
//! libyaml's emitter). [`from_json`] writes the same bytes:
//! - mappings in block style with keys in go-yaml's order ([`key_order`]),
//!   2-space indent, sequences in a mapping not indented under their key,
//!   `{}` and `[]` when empty; a key longer than 128 bytes as `? key`;
//! - a string plain when go-yaml would read it back as a string (else
//!   double-quoted: `"0"`, `"true"`, timestamps, `""`), single-quoted when
//!   plain cannot hold it, double-quoted with escapes when nothing else can,
//!   as a literal block (`|-`) when it has a newline; plain and quoted
//!   strings folded at a space past column 80;
//! - numbers as Go formats the int or float go-yaml reads (`%g`), and a
//!   final newline.
//!
//! serde_yaml (libyaml too) is not used: it quotes with single quotes where
//! go-yaml uses double, resolves YAML 1.2 instead of go-yaml's YAML 1.1
//! subset and chooses styles differently. Shared by kubecache and the
//! simulated API server.

use std::cmp::Ordering;

use serde_json::{Map, Number, Value};

/// Lines are folded once they are longer than this (libyaml's `best_width`).
const WIDTH: usize = 80;

/// A key longer than this is not a simple key (libyaml's check).
const SIMPLE_KEY: usize = 128;

/// The YAML of the JSON document `json`.
///
/// # Errors
///
/// JSON that does not parse.
pub fn from_json(json: &[u8]) -> serde_json::Result<Vec<u8>> {
    let value: Value = serde_json::from_slice(json)?;
    let mut emitter = Emitter::default();
    emitter.inline(&value, 0);
    if emitter.column > 0 {
        emitter.newline();
    }
    if emitter.open_ended {
        emitter.out.extend_from_slice(b"...\n");
    }
    Ok(emitter.out)
}

#[derive(Default)]
struct Emitter {
    out: Vec<u8>,
    /// Characters on the current line.
    column: usize,
    /// A `|+` block was written: the document then ends with `...`.
    open_ended: bool,
}

/// How a scalar is written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Style {
    Plain,
    Single,
    Double,
    Literal,
}

impl Emitter {
    fn put(&mut self, s: &str) {
        self.out.extend_from_slice(s.as_bytes());
        self.column += s.chars().count();
    }

    fn put_char(&mut self, c: char) {
        let mut buf = [0; 4];
        self.put(c.encode_utf8(&mut buf));
    }

    fn newline(&mut self) {
        self.out.push(b'\n');
        self.column = 0;
    }

    /// libyaml's `write_indent` inside a scalar: a new line unless one was
    /// just begun, then spaces up to `indent`.
    fn indent(&mut self, indent: usize) {
        if self.column > 0 {
            self.newline();
        }
        while self.column < indent {
            self.put(" ");
        }
    }

    /// `value` where the cursor is, at column `indent`: after `- `, `: `
    /// of a long key, or at the start of the document.
    fn inline(&mut self, value: &Value, indent: usize) {
        match value {
            Value::Object(map) if !map.is_empty() => self.mapping(map, indent, true),
            Value::Array(items) if !items.is_empty() => self.sequence(items, indent, true),
            // A scalar's continuation lines are indented past its
            // collection's; at the root, by 2 too.
            scalar => self.scalar(scalar, indent.max(2)),
        }
    }

    /// `value` after the `key:` of a mapping at column `indent`.
    fn after_key(&mut self, value: &Value, indent: usize) {
        match value {
            Value::Object(map) if !map.is_empty() => self.mapping(map, indent + 2, false),
            Value::Array(items) if !items.is_empty() => self.sequence(items, indent, false),
            scalar => {
                self.put(" ");
                self.scalar(scalar, indent + 2);
            }
        }
    }

    fn mapping(&mut self, map: &Map<String, Value>, indent: usize, inline: bool) {
        let mut entries: Vec<_> = map.iter().collect();
        entries.sort_by(|(a, _), (b, _)| key_order(a, b));
        for (i, (key, value)) in entries.into_iter().enumerate() {
            if i > 0 || !inline {
                self.newline();
                self.indent(indent);
            }
            let multiline = key.chars().any(is_break);
            if key.len() <= SIMPLE_KEY && !multiline {
                self.string(key, style(key, true), indent + 2, false);
                self.put(":");
                self.after_key(value, indent);
            } else {
                self.put("? ");
                self.string(key, style(key, false), indent + 2, true);
                self.newline();
                self.indent(indent);
                self.put(": ");
                self.inline(value, indent + 2);
            }
        }
    }

    fn sequence(&mut self, items: &[Value], indent: usize, inline: bool) {
        for (i, item) in items.iter().enumerate() {
            if i > 0 || !inline {
                self.newline();
                self.indent(indent);
            }
            self.put("- ");
            self.inline(item, indent + 2);
        }
    }

    /// A scalar (or an empty collection) whose continuation lines are at
    /// `indent`.
    fn scalar(&mut self, value: &Value, indent: usize) {
        match value {
            Value::Null => self.put("null"),
            Value::Bool(b) => self.put(if *b { "true" } else { "false" }),
            Value::Number(n) => self.put(&number(n)),
            Value::String(s) => self.string(s, style(s, false), indent, true),
            Value::Array(_) => self.put("[]"),
            Value::Object(_) => self.put("{}"),
        }
    }

    fn string(&mut self, s: &str, style: Style, indent: usize, breaks: bool) {
        match style {
            Style::Plain => self.folded(s, indent, breaks, None),
            Style::Single => self.folded(s, indent, breaks, Some('\'')),
            Style::Double => self.double(s, indent, breaks),
            Style::Literal => self.literal(s, indent),
        }
    }

    /// A plain or (with `quote`) single-quoted scalar: libyaml's
    /// `write_plain_scalar` and `write_single_quoted_scalar`.
    fn folded(&mut self, s: &str, indent: usize, breaks: bool, quote: Option<char>) {
        if let Some(quote) = quote {
            self.put_char(quote);
        }
        let (mut spaces, mut broke) = (false, false);
        let last = s.len().saturating_sub(1);
        for (i, c) in s.char_indices() {
            if c == ' ' {
                let next_space = s.as_bytes().get(i + 1) == Some(&b' ');
                let inside = quote.is_none() || (i > 0 && i < last);
                if breaks && !spaces && self.column > WIDTH && inside && !next_space {
                    self.indent(indent);
                } else {
                    self.put(" ");
                }
                spaces = true;
            } else if is_break(c) {
                if !broke && c == '\n' {
                    self.newline();
                }
                self.line_break(c);
                broke = true;
            } else {
                if broke {
                    self.indent(indent);
                }
                if c == '\'' && quote.is_some() {
                    self.put("'");
                }
                self.put_char(c);
                spaces = false;
                broke = false;
            }
        }
        if let Some(quote) = quote {
            self.put_char(quote);
        }
    }

    /// libyaml's `write_break`: a newline, or another break character as it
    /// is, then a new line is counted.
    fn line_break(&mut self, c: char) {
        if c == '\n' {
            self.newline();
        } else {
            self.put_char(c);
            self.column = 0;
        }
    }

    /// libyaml's `write_double_quoted_scalar`.
    fn double(&mut self, s: &str, indent: usize, breaks: bool) {
        self.put("\"");
        let mut spaces = false;
        let last = s.len().saturating_sub(1);
        for (i, c) in s.char_indices() {
            if !is_printable(c) || c == '\u{feff}' || is_break(c) || c == '"' || c == '\\' {
                let escape = match c {
                    '\0' => "0",
                    '\u{7}' => "a",
                    '\u{8}' => "b",
                    '\t' => "t",
                    '\n' => "n",
                    '\u{b}' => "v",
                    '\u{c}' => "f",
                    '\r' => "r",
                    '\u{1b}' => "e",
                    '"' => "\"",
                    '\\' => "\\",
                    '\u{85}' => "N",
                    '\u{a0}' => "_",
                    '\u{2028}' => "L",
                    '\u{2029}' => "P",
                    _ => "",
                };
                let code = u32::from(c);
                let escaped = match (escape, code) {
                    ("", ..=0xff) => format!("\\x{code:02X}"),
                    ("", ..=0xffff) => format!("\\u{code:04X}"),
                    ("", _) => format!("\\U{code:08X}"),
                    (escape, _) => format!("\\{escape}"),
                };
                self.put(&escaped);
                spaces = false;
            } else if c == ' ' {
                if breaks && !spaces && self.column > WIDTH && i > 0 && i < last {
                    self.indent(indent);
                    if s.as_bytes().get(i + 1) == Some(&b' ') {
                        self.put("\\");
                    }
                } else {
                    self.put(" ");
                }
                spaces = true;
            } else {
                self.put_char(c);
                spaces = false;
            }
        }
        self.put("\"");
    }

    /// libyaml's `write_literal_scalar` with its block scalar hints.
    fn literal(&mut self, s: &str, indent: usize) {
        self.put("|");
        if s.starts_with([' ']) || s.starts_with(is_break) {
            self.put("2");
        }
        let mut tail = s.chars().rev();
        self.open_ended = false;
        match (tail.next(), tail.next()) {
            (Some(last), _) if !is_break(last) => self.put("-"),
            (Some(_), None) => self.put_plus(),
            (Some(_), Some(before)) if is_break(before) => self.put_plus(),
            _ => {}
        }
        self.newline();
        let mut broke = true;
        for c in s.chars() {
            if is_break(c) {
                self.line_break(c);
                broke = true;
            } else {
                if broke {
                    self.indent(indent);
                }
                self.put_char(c);
                broke = false;
            }
        }
    }

    fn put_plus(&mut self) {
        self.put("+");
        self.open_ended = true;
    }
}

/// The style go-yaml v2 writes `s` in (its encoder's `stringv`, then
/// libyaml's `select_scalar_style` after `analyze_scalar`), as a simple
/// mapping key with `key`.
fn style(s: &str, key: bool) -> Style {
    let analysis = Analysis::of(s);
    let mut style = if s.contains('\n') {
        Style::Literal
    } else if resolves_to_string(s) {
        Style::Plain
    } else {
        Style::Double
    };
    if key && analysis.multiline {
        style = Style::Double;
    }
    if style == Style::Plain && (!analysis.plain || (s.is_empty() && key)) {
        style = Style::Single;
    }
    if style == Style::Single && !analysis.single_quoted {
        style = Style::Double;
    }
    if style == Style::Literal && (!analysis.block || key) {
        style = Style::Double;
    }
    style
}

/// What libyaml's `analyze_scalar` allows a scalar in block context.
struct Analysis {
    multiline: bool,
    plain: bool,
    single_quoted: bool,
    block: bool,
}

impl Analysis {
    fn of(s: &str) -> Self {
        if s.is_empty() {
            return Analysis {
                multiline: false,
                plain: true,
                single_quoted: true,
                block: false,
            };
        }
        let mut indicators = s.starts_with("---") || s.starts_with("...");
        let (mut breaks, mut special) = (false, false);
        let (mut leading, mut trailing) = (false, false);
        let (mut break_space, mut space_break, mut trailing_space) = (false, false, false);
        let (mut previous_space, mut previous_break) = (false, false);
        let mut preceded_by_blank = true;
        let chars: Vec<char> = s.chars().collect();
        for (i, &c) in chars.iter().enumerate() {
            let followed_by_blank = chars.get(i + 1).is_none_or(|&n| is_blank_or_break(n));
            if i == 0 {
                indicators |= matches!(
                    c,
                    '#' | ','
                        | '['
                        | ']'
                        | '{'
                        | '}'
                        | '&'
                        | '*'
                        | '!'
                        | '|'
                        | '>'
                        | '\''
                        | '"'
                        | '%'
                        | '@'
                        | '`'
                ) || (matches!(c, '?' | ':' | '-') && followed_by_blank);
            } else {
                indicators |= (c == ':' && followed_by_blank) || (c == '#' && preceded_by_blank);
            }
            special |= !is_printable(c);
            let last = i + 1 == chars.len();
            if c == ' ' {
                leading |= i == 0;
                trailing |= last;
                trailing_space |= last;
                break_space |= previous_break;
                (previous_space, previous_break) = (true, false);
            } else if is_break(c) {
                breaks = true;
                leading |= i == 0;
                trailing |= last;
                space_break |= previous_space;
                (previous_space, previous_break) = (false, true);
            } else {
                (previous_space, previous_break) = (false, false);
            }
            preceded_by_blank = is_blank_or_break(c);
        }
        let unsafe_ = space_break || special;
        Analysis {
            multiline: breaks,
            plain: !(leading || trailing || break_space || unsafe_ || breaks || indicators),
            single_quoted: !(break_space || unsafe_),
            block: !(trailing_space || unsafe_),
        }
    }
}

/// libyaml's `is_printable` (go-yaml v2's: characters beyond U+FFFF are
/// not, and are escaped).
fn is_printable(c: char) -> bool {
    matches!(c, '\n' | ' '..='~' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}')
        && c != '\u{feff}'
}

fn is_break(c: char) -> bool {
    matches!(c, '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

fn is_blank_or_break(c: char) -> bool {
    c == ' ' || c == '\t' || is_break(c)
}

/// go-yaml v2's order of string keys (its `keyList.Less`): rune by rune,
/// letters before other characters, runs of digits compared as numbers.
pub fn key_order(a: &str, b: &str) -> Ordering {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    for i in 0..a.len().min(b.len()) {
        if a[i] == b[i] {
            continue;
        }
        let (al, bl) = (a[i].is_alphabetic(), b[i].is_alphabetic());
        if al && bl {
            return a[i].cmp(&b[i]);
        }
        if al || bl {
            return if bl {
                Ordering::Less
            } else {
                Ordering::Greater
            };
        }
        let digit = |c: &char| c.is_ascii_digit();
        // A number after non-zero digits is not read from a leading zero.
        let (mut an, mut bn) = (0i64, 0i64);
        if (a[i] == '0' || b[i] == '0')
            && a[..i]
                .iter()
                .rev()
                .take_while(|c| digit(c))
                .any(|&c| c != '0')
        {
            (an, bn) = (1, 1);
        }
        let run = |s: &[char], n: &mut i64| {
            let len = s[i..].iter().take_while(|c| digit(c)).count();
            for c in &s[i..i + len] {
                *n = n.wrapping_mul(10).wrapping_add(i64::from(*c as u8 - b'0'));
            }
            i + len
        };
        let (ai, bi) = (run(&a, &mut an), run(&b, &mut bn));
        if an != bn {
            return an.cmp(&bn);
        }
        if ai != bi {
            return ai.cmp(&bi);
        }
        return a[i].cmp(&b[i]);
    }
    a.len().cmp(&b.len())
}

/// A number as go-yaml v2 writes what it read from JSON: an int (`int64`,
/// else `uint64`) as it is, else a float as Go's `%g` with the shortest
/// digits (`1e+06`, `123456`, `0.0001`).
fn number(n: &Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    let f = n.as_f64().unwrap_or_default();
    // Shortest digits and exponent, as `d.ddde±x`.
    let scientific = format!("{f:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or_default();
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if !(-4..6).contains(&exponent) {
        let (first, rest) = digits.split_at(1);
        let dot = if rest.is_empty() { "" } else { "." };
        let esign = if exponent < 0 { '-' } else { '+' };
        return format!("{sign}{first}{dot}{rest}e{esign}{:02}", exponent.abs());
    }
    let point = exponent + 1;
    if point <= 0 {
        let zeros = "0".repeat(point.unsigned_abs() as usize);
        return format!("{sign}0.{zeros}{digits}");
    }
    let point = point as usize;
    if digits.len() <= point {
        format!("{sign}{digits}{}", "0".repeat(point - digits.len()))
    } else {
        format!("{sign}{}.{}", &digits[..point], &digits[point..])
    }
}

/// Whether go-yaml v2 reads `s`, written plain, back as a string (its
/// `resolve`) that is not a base-60 float either (which it quotes too).
fn resolves_to_string(s: &str) -> bool {
    const WORDS: [&str; 40] = [
        "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON", "n", "N", "no",
        "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF", "", "~", "null", "Null",
        "NULL", ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf",
        "-.Inf", "-.INF", "<<",
    ];
    let Some(first) = s.bytes().next() else {
        return false;
    };
    let hinted =
        matches!(first, b'+' | b'-' | b'0'..=b'9' | b'.' | b'~') || b"yYnNtTfFoO".contains(&first);
    if !hinted {
        return true;
    }
    if WORDS.contains(&s) {
        return false;
    }
    match first {
        b'.' => !s.parse::<f64>().is_ok_and(f64::is_finite),
        b'+' | b'-' | b'0'..=b'9' => {
            let plain = s.replace('_', "");
            !(timestamp(s) || int(&plain) || float(&plain) || base60(s))
        }
        _ => true,
    }
}

/// Go's `strconv.ParseInt(s, 0, 64)` or `ParseUint(s, 0, 64)` succeeds.
fn int(s: &str) -> bool {
    let (negative, signed, rest) = match s.as_bytes().first() {
        Some(b'-') => (true, true, &s[1..]),
        Some(b'+') => (false, true, &s[1..]),
        _ => (false, false, s),
    };
    let lower = rest.to_ascii_lowercase();
    let (radix, digits) = if let Some(hex) = lower.strip_prefix("0x") {
        (16, hex)
    } else if let Some(bin) = lower.strip_prefix("0b") {
        (2, bin)
    } else if let Some(oct) = lower.strip_prefix("0o") {
        (8, oct)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    if digits.is_empty() || digits.starts_with(['+', '-']) {
        return false;
    }
    match u64::from_str_radix(digits, radix) {
        Ok(v) if negative => v <= 1 << 63,
        Ok(v) if signed => v <= i64::MAX as u64,
        Ok(_) => true,
        Err(_) => false,
    }
}

/// go-yaml's float pattern `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`,
/// finite.
fn float(s: &str) -> bool {
    let b = s.trim_start_matches(['+', '-']).as_bytes();
    if s.len() - b.len() > 1 {
        return false;
    }
    let digits = |b: &[u8]| b.iter().take_while(|c| c.is_ascii_digit()).count();
    let int = digits(b);
    let mut i = int;
    if b.get(i) == Some(&b'.') {
        let fraction = digits(&b[i + 1..]);
        if int == 0 && fraction == 0 {
            return false;
        }
        i += 1 + fraction;
    } else if int == 0 {
        return false;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exponent = digits(&b[i..]);
        if exponent == 0 {
            return false;
        }
        i += exponent;
    }
    i == b.len() && s.parse::<f64>().is_ok_and(f64::is_finite)
}

/// go-yaml's base-60 float pattern
/// `^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`.
fn base60(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (whole, fraction) = s.split_once('.').unwrap_or((s, ""));
    if !fraction.bytes().all(|c| c.is_ascii_digit() || c == b'_') {
        return false;
    }
    let mut parts = whole.split(':');
    let head = parts.next().unwrap_or_default().as_bytes();
    if !head.first().is_some_and(u8::is_ascii_digit)
        || !head.iter().all(|c| c.is_ascii_digit() || *c == b'_')
    {
        return false;
    }
    let mut sixties = 0;
    for part in parts {
        let ok = match part.as_bytes() {
            [d] => d.is_ascii_digit(),
            [t, d] => (b'0'..=b'5').contains(t) && d.is_ascii_digit(),
            _ => false,
        };
        if !ok {
            return false;
        }
        sixties += 1;
    }
    sixties > 0
}

/// Whether Go's `time.Parse` reads `s` in one of go-yaml v2's timestamp
/// layouts: `2006-1-2`, then `T15:4:5.999999999Z07:00` (`t` too) or
/// ` 15:4:5.999999999`.
fn timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    // Up to 2 digits (Go's `getnum` of a non-fixed field) within `max`.
    let num = |i: &mut usize, min: u32, max: u32| -> Option<u32> {
        let len = b[*i..]
            .iter()
            .take(2)
            .take_while(|c| c.is_ascii_digit())
            .count();
        let n: u32 = s.get(*i..*i + len)?.parse().ok()?;
        *i += len;
        (min..=max).contains(&n).then_some(n)
    };
    let literal = |i: &mut usize, c: u8| -> Option<()> { (b.get(*i) == Some(&c)).then(|| *i += 1) };
    let parse = || -> Option<()> {
        let year: u32 = s.get(..4)?.parse().ok()?;
        let mut i = 4;
        literal(&mut i, b'-')?;
        let month = num(&mut i, 1, 12)?;
        literal(&mut i, b'-')?;
        let leap =
            year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
        let days = match month {
            2 if leap => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        };
        num(&mut i, 1, days)?;
        let Some(&separator) = b.get(i) else {
            return Some(());
        };
        if !matches!(separator, b'T' | b't' | b' ') {
            return None;
        }
        i += 1;
        num(&mut i, 0, 23)?;
        literal(&mut i, b':')?;
        num(&mut i, 0, 59)?;
        literal(&mut i, b':')?;
        num(&mut i, 0, 59)?;
        if b.get(i) == Some(&b'.') && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
            i += 1 + b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        }
        if separator == b' ' {
            return (i == b.len()).then_some(());
        }
        match &b[i..] {
            [b'Z'] => Some(()),
            [b'+' | b'-', h1, h2, b':', m1, m2] => [h1, h2, m1, m2]
                .iter()
                .all(|c| c.is_ascii_digit())
                .then_some(()),
            _ => None,
        }
    };
    b.len() > 4 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-' && parse().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(file: &str) -> Vec<u8> {
        kubecache_testkit::golden::read(&format!("versions/bodies/{file}"))
    }

    fn yaml(json: &str) -> String {
        String::from_utf8(from_json(json.as_bytes()).unwrap()).unwrap()
    }

    #[test]
    fn recorded_json_answers_become_the_recorded_yaml_ones() {
        for (json, yaml) in [
            ("pretty-pod-e-ua-kubectl.json", "yaml-pod-get.yaml"),
            ("pretty-404-e-ua-kubectl.json", "yaml-404.yaml"),
            (
                "utf8-create-bad-utf8-fffe.json",
                "utf8-get-bad-utf8-fffe-yaml.yaml",
            ),
        ] {
            let written = from_json(&body(json)).unwrap();
            assert!(
                written == body(yaml),
                "{json} -> {yaml}:\n{}",
                String::from_utf8_lossy(&written)
            );
        }
    }

    #[test]
    fn every_recorded_yaml_answer_is_written_back_byte_for_byte() {
        for file in [
            "yaml-pod-get.yaml",
            "yaml-pod-list-limit2.yaml",
            "yaml-404.yaml",
            "yaml-403-eve.yaml",
            "yaml-watch.yaml",
            "yaml-table-list.yaml",
            "yaml-table-get.yaml",
            "yaml-version.yaml",
            "utf8-get-bad-utf8-fffe-yaml.yaml",
        ] {
            let recorded = body(file);
            let value: Value = serde_yaml::from_slice(&recorded).unwrap();
            let written = from_json(&serde_json::to_vec(&value).unwrap()).unwrap();
            assert!(
                written == recorded,
                "{file}:\n{}",
                String::from_utf8_lossy(&written)
            );
        }
    }

    #[test]
    fn strings_go_yaml_would_read_as_something_else_are_double_quoted() {
        for s in [
            "",
            "0",
            "-1",
            "0x1F",
            "1_000",
            "1.5",
            ".5",
            "1e3",
            "true",
            "yes",
            "Off",
            "~",
            "null",
            ".inf",
            "-.Inf",
            "1:20",
            "2026-12-06T03:56:51Z",
            "2024-02-29",
            "2024-1-2 3:4:5.6",
            "99999999999999999999",
        ] {
            assert_eq!(
                yaml(&format!(r#"{{"k":"{s}"}}"#)),
                format!("k: \"{s}\"\n"),
                "{s}"
            );
        }
        for s in [
            "payments",
            "v1",
            "1.2.3",
            "2023-02-30",
            "0xZ",
            "1e",
            "a:b",
            "yess",
            "<<",
            "12:60",
            "2026-12-06T03:56:51",
        ] {
            assert_eq!(
                yaml(&format!(r#"{{"k":"{s}"}}"#)),
                format!("k: {s}\n"),
                "{s}"
            );
        }
    }

    #[test]
    fn strings_plain_cannot_hold_are_single_quoted_then_double_quoted() {
        assert_eq!(yaml(r#"{"k":"a: b"}"#), "k: 'a: b'\n");
        assert_eq!(yaml(r#"{"k":"- x"}"#), "k: '- x'\n");
        assert_eq!(yaml(r#"{"k":"*x"}"#), "k: '*x'\n");
        assert_eq!(yaml(r#"{"k":" x"}"#), "k: ' x'\n");
        assert_eq!(yaml(r#"{"k":"it's #1 a #b"}"#), "k: 'it''s #1 a #b'\n");
        assert_eq!(yaml(r#"{"k":"a\tb"}"#), "k: \"a\\tb\"\n");
        assert_eq!(yaml(r#"{"k":"🙂"}"#), "k: \"\\U0001F642\"\n");
        assert_eq!(yaml(r#"{"k":"x \ny"}"#), "k: \"x \\ny\"\n");
        assert_eq!(yaml(r#"{"":1,"a b":2}"#), "\"\": 1\na b: 2\n");
    }

    #[test]
    fn multiline_strings_are_literal_blocks_with_their_chomping() {
        assert_eq!(yaml(r#"{"k":"a\n\nb"}"#), "k: |-\n  a\n\n  b\n");
        assert_eq!(yaml(r#"{"k":"a\n"}"#), "k: |\n  a\n");
        assert_eq!(yaml(r#"{"k":" a\n"}"#), "k: |2\n   a\n");
        assert_eq!(yaml(r#"{"k":"a\n\n"}"#), "k: |+\n  a\n\n...\n");
        assert_eq!(yaml(r#"{"k":["a\nb"]}"#), "k:\n- |-\n  a\n  b\n");
    }

    #[test]
    fn collections_nest_as_go_yaml_writes_them() {
        assert_eq!(
            yaml(r#"{"b":[{"x":1,"y":[[1,2]]},[],{}],"a":{"c":null,"d":true}}"#),
            "a:\n  c: null\n  d: true\nb:\n- x: 1\n  \"y\":\n  - - 1\n    - 2\n- []\n- {}\n"
        );
        assert_eq!(yaml("{}"), "{}\n");
        let long = "k".repeat(129);
        assert_eq!(
            yaml(&format!(r#"{{"{long}":{{"a":1}}}}"#)),
            format!("? {long}\n: a: 1\n")
        );
    }

    #[test]
    fn numbers_are_written_as_go_formats_them() {
        assert_eq!(
            yaml(r#"[1,-2,18446744073709551615,1.0,0.5,1e6,123456.0,1e21,0.0001,0.00001,-1.5e-7]"#),
            "- 1\n- -2\n- 18446744073709551615\n- 1\n- 0.5\n- 1e+06\n- 123456\n- 1e+21\n- 0.0001\n- 1e-05\n- -1.5e-07\n"
        );
    }

    #[test]
    fn keys_sort_as_go_yaml_sorts_them() {
        let mut keys = vec!["b", "a10", "a2", "A", "_x", "a", "f:spec", ".", "a02", "a1"];
        keys.sort_by(|a, b| key_order(a, b));
        assert_eq!(
            keys,
            [".", "_x", "A", "a", "a1", "a2", "a02", "a10", "b", "f:spec"]
        );
    }
}
