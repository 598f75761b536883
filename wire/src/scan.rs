//! [`Scanner`]: a validating JSON scanner over bytes that walks objects
//! entry by entry and skips values without building them.
//!
//! It accepts exactly RFC 8259 JSON, as serde_json does: strings must be
//! UTF-8 without raw control characters, escapes must be well-formed (with
//! paired surrogates), numbers must follow the JSON grammar, and containers
//! may nest at most [`MAX_DEPTH`] deep. So any value it skips can be copied
//! verbatim into an output that serde_json parses back.
//!
//! Nothing here allocates, except [`Key::name`] for a key that contains an
//! escape. Every loop advances `pos` or returns, and every read is bounds
//! checked, so hostile input ends in an error, never in a panic or a hang.

use std::borrow::Cow;

use crate::decode_error::{DecodeError, Seg, render};

/// Containers may nest this deep: serde_json's limit (it refuses the 128th
/// nested container), so that whatever is accepted here, and copied to
/// clients, serde_json-based clients (kube-rs) can read back.
pub(crate) const MAX_DEPTH: usize = 127;

/// Where a value lies in the input: `start..end`, first byte to one past the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) start: usize,
    pub(crate) end: usize,
    /// For a string: whether it contains a backslash escape.
    pub(crate) escaped: bool,
}

/// The key of an object entry, as it appears in the input.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Key<'a> {
    /// The key with its quotes.
    pub(crate) span: Span,
    /// The bytes between the quotes, escapes not resolved.
    pub(crate) raw: &'a [u8],
}

impl<'a> Key<'a> {
    /// The key's bytes with escapes resolved (borrowed unless it has one).
    pub(crate) fn name(&self, buf: &'a [u8]) -> Result<Cow<'a, [u8]>, DecodeError> {
        if self.span.escaped {
            Ok(Cow::Owned(
                unescape(buf, self.span)?.into_owned().into_bytes(),
            ))
        } else {
            Ok(Cow::Borrowed(self.raw))
        }
    }
}

/// The text of the string at `span` (quotes included), escapes resolved.
///
/// Only a string with a backslash is handed to serde_json (and allocates);
/// the others are borrowed from the input.
pub(crate) fn unescape(buf: &[u8], span: Span) -> Result<Cow<'_, str>, DecodeError> {
    let quoted = buf.get(span.start..span.end).unwrap_or_default();
    if span.escaped {
        serde_json::from_slice::<String>(quoted)
            .map(Cow::Owned)
            .map_err(|_| DecodeError::syntax(span.start, "invalid string"))
    } else {
        let inner = quoted
            .get(1..quoted.len().saturating_sub(1))
            .unwrap_or_default();
        std::str::from_utf8(inner)
            .map(Cow::Borrowed)
            .map_err(|e| DecodeError::syntax(span.start + 1 + e.valid_up_to(), "invalid UTF-8"))
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// High bit set in the bytes of `v` that are below `n` (`n <= 128`); exact
/// for the lowest such byte, which is the only one the scanner looks at.
#[inline(always)]
fn bytes_below(v: u64, n: u8) -> u64 {
    v.wrapping_sub(ONES * u64::from(n)) & !v & HIGHS
}

/// High bit set in the bytes of `v` equal to `b`; exact for the lowest one.
#[inline(always)]
fn bytes_equal(v: u64, b: u8) -> u64 {
    bytes_below(v ^ (ONES * u64::from(b)), 1)
}

/// A cursor over one JSON text.
pub(crate) struct Scanner<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Scanner<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Scanner { buf, pos: 0 }
    }

    /// The input.
    pub(crate) fn buf(&self) -> &'a [u8] {
        self.buf
    }

    /// The offset of the next byte to read.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    fn error(&self, reason: &'static str) -> DecodeError {
        DecodeError::syntax(self.pos, reason)
    }

    fn eof(&self) -> DecodeError {
        DecodeError::syntax(self.buf.len(), "unexpected end of input")
    }

    #[inline]
    pub(crate) fn skip_ws(&mut self) {
        while let Some(&b) = self.buf.get(self.pos) {
            if b > b' ' || !matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
                break;
            }
            self.pos += 1;
        }
    }

    /// The byte at the cursor (end of input is an error).
    #[inline]
    pub(crate) fn peek(&self) -> Result<u8, DecodeError> {
        self.buf.get(self.pos).copied().ok_or_else(|| self.eof())
    }

    /// Succeeds when only whitespace is left.
    pub(crate) fn finish(&mut self) -> Result<(), DecodeError> {
        self.skip_ws();
        if self.pos < self.buf.len() {
            return Err(self.error("trailing characters after the JSON value"));
        }
        Ok(())
    }

    /// Consumes the `{` of an object whose entries will be `depth` deep
    /// (the top-level object's entries are 1 deep).
    pub(crate) fn enter_object(&mut self, depth: usize) -> Result<(), DecodeError> {
        self.enter(b'{', "expected an object", depth)
    }

    /// Consumes the `[` of an array whose elements will be `depth` deep.
    pub(crate) fn enter_array(&mut self, depth: usize) -> Result<(), DecodeError> {
        self.enter(b'[', "expected an array", depth)
    }

    fn enter(&mut self, open: u8, what: &'static str, depth: usize) -> Result<(), DecodeError> {
        if self.peek()? != open {
            return Err(self.error(what));
        }
        if depth > MAX_DEPTH {
            return Err(self.error("nested deeper than 127 levels"));
        }
        self.pos += 1;
        Ok(())
    }

    /// The next key of the object entered last, with the cursor left on its
    /// value; `None` once the closing `}` is consumed. `first` must start
    /// `true` for each object.
    #[inline]
    pub(crate) fn next_key(&mut self, first: &mut bool) -> Result<Option<Key<'a>>, DecodeError> {
        self.skip_ws();
        match self.peek()? {
            b'}' => {
                self.pos += 1;
                return Ok(None);
            }
            b',' if !*first => {
                self.pos += 1;
                self.skip_ws();
            }
            _ if *first => {}
            _ => return Err(self.error("expected `,` or `}` after an object entry")),
        }
        *first = false;
        self.key_and_colon().map(Some)
    }

    /// The key at the cursor, its `:` and the whitespace before the value.
    #[inline]
    fn key_and_colon(&mut self) -> Result<Key<'a>, DecodeError> {
        if self.peek()? != b'"' {
            return Err(self.error("expected a string key"));
        }
        let span = self.string()?;
        self.skip_ws();
        if self.peek()? != b':' {
            return Err(self.error("expected `:` after an object key"));
        }
        self.pos += 1;
        self.skip_ws();
        let raw = &self.buf[span.start + 1..span.end - 1];
        Ok(Key { span, raw })
    }

    /// Moves to the next element of the array entered last (cursor on it);
    /// `false` once the closing `]` is consumed.
    #[inline]
    pub(crate) fn next_element(&mut self, first: &mut bool) -> Result<bool, DecodeError> {
        self.skip_ws();
        match self.peek()? {
            b']' => {
                self.pos += 1;
                return Ok(false);
            }
            b',' if !*first => {
                self.pos += 1;
                self.skip_ws();
            }
            _ if *first => {}
            _ => return Err(self.error("expected `,` or `]` after an array element")),
        }
        *first = false;
        Ok(true)
    }

    /// Skips (and validates) the value at the cursor, which lies inside
    /// `depth` open containers. Leading whitespace is skipped first.
    pub(crate) fn skip_value(&mut self, depth: usize) -> Result<Span, DecodeError> {
        self.skip_ws();
        let start = self.pos;
        // Open containers below `start`: bit i set = the (i+1)-th is an object.
        let mut kinds: u128 = 0;
        let mut level: usize = 0;
        let mut escaped = false;
        loop {
            // At a value, whitespace skipped.
            match self.peek()? {
                b'"' => escaped = self.string()?.escaped,
                open @ (b'{' | b'[') => {
                    if depth + level + 1 > MAX_DEPTH {
                        return Err(self.error("nested deeper than 127 levels"));
                    }
                    self.pos += 1;
                    self.skip_ws();
                    let close = if open == b'{' { b'}' } else { b']' };
                    if self.peek()? == close {
                        self.pos += 1;
                    } else {
                        if open == b'{' {
                            kinds |= 1u128 << level;
                            level += 1;
                            self.key_and_colon()?;
                        } else {
                            kinds &= !(1u128 << level);
                            level += 1;
                        }
                        continue;
                    }
                }
                b'-' | b'0'..=b'9' => self.number()?,
                b't' => self.literal(b"true")?,
                b'f' => self.literal(b"false")?,
                b'n' => self.literal(b"null")?,
                _ => return Err(self.error("expected a JSON value")),
            }
            // After a value: close what ends here, stop at the next value.
            loop {
                if level == 0 {
                    return Ok(Span {
                        start,
                        end: self.pos,
                        escaped,
                    });
                }
                self.skip_ws();
                let in_object = kinds >> (level - 1) & 1 == 1;
                match (self.peek()?, in_object) {
                    (b',', _) => {
                        self.pos += 1;
                        self.skip_ws();
                        if in_object {
                            self.key_and_colon()?;
                        }
                        break;
                    }
                    (b'}', true) | (b']', false) => {
                        self.pos += 1;
                        level -= 1;
                    }
                    (_, true) => {
                        return Err(self.error("expected `,` or `}` after an object entry"));
                    }
                    (_, false) => {
                        return Err(self.error("expected `,` or `]` after an array element"));
                    }
                }
            }
        }
    }

    /// Skips the string at the cursor (on its opening quote).
    #[inline(always)]
    pub(crate) fn string(&mut self) -> Result<Span, DecodeError> {
        let buf = self.buf;
        let start = self.pos;
        let mut i = start + 1;
        let mut escaped = false;
        // Cleared after the first non-ASCII byte: the rest is checked at the end.
        let mut non_ascii_mask = HIGHS;
        loop {
            // Eight bytes at a time up to the first quote, backslash, control
            // character or (until one was seen) non-ASCII byte.
            while let Some(chunk) = buf.get(i..i + 8) {
                let Ok(word) = <[u8; 8]>::try_from(chunk) else {
                    break;
                };
                let v = u64::from_le_bytes(word);
                let special = bytes_equal(v, b'"')
                    | bytes_equal(v, b'\\')
                    | bytes_below(v, 0x20)
                    | (v & non_ascii_mask);
                if special != 0 {
                    i += (special.trailing_zeros() / 8) as usize;
                    break;
                }
                i += 8;
            }
            let Some(&b) = buf.get(i) else {
                return Err(self.eof());
            };
            match b {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    i = self.escape(i)?;
                }
                0..=0x1f => {
                    return Err(DecodeError::syntax(i, "control character in a string"));
                }
                0x80.. => {
                    non_ascii_mask = 0;
                    i += 1;
                }
                _ => i += 1,
            }
        }
        if non_ascii_mask == 0
            && let Err(e) = std::str::from_utf8(&buf[start + 1..i])
        {
            return Err(DecodeError::syntax(
                start + 1 + e.valid_up_to(),
                "invalid UTF-8 in a string",
            ));
        }
        self.pos = i + 1;
        Ok(Span {
            start,
            end: self.pos,
            escaped,
        })
    }

    /// Validates the escape whose backslash is at `i`; returns the offset after it.
    fn escape(&self, i: usize) -> Result<usize, DecodeError> {
        match self.buf.get(i + 1) {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(i + 2),
            Some(b'u') => {
                let unit = self.hex4(i + 2)?;
                match unit {
                    0xD800..=0xDBFF => {
                        if self.buf.get(i + 6..i + 8) != Some(b"\\u") {
                            return Err(DecodeError::syntax(i, "unpaired surrogate in a string"));
                        }
                        if !(0xDC00..=0xDFFF).contains(&self.hex4(i + 8)?) {
                            return Err(DecodeError::syntax(i, "unpaired surrogate in a string"));
                        }
                        Ok(i + 12)
                    }
                    0xDC00..=0xDFFF => {
                        Err(DecodeError::syntax(i, "unpaired surrogate in a string"))
                    }
                    _ => Ok(i + 6),
                }
            }
            Some(_) => Err(DecodeError::syntax(i, "invalid escape in a string")),
            None => Err(self.eof()),
        }
    }

    fn hex4(&self, at: usize) -> Result<u16, DecodeError> {
        let Some(digits) = self.buf.get(at..at + 4) else {
            return Err(self.eof());
        };
        let mut unit = 0u16;
        for (k, &d) in digits.iter().enumerate() {
            let v = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                b'A'..=b'F' => d - b'A' + 10,
                _ => return Err(DecodeError::syntax(at + k, "invalid \\u escape")),
            };
            unit = unit << 4 | u16::from(v);
        }
        Ok(unit)
    }

    /// Skips the number at the cursor: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
    fn number(&mut self) -> Result<(), DecodeError> {
        let buf = self.buf;
        let mut i = self.pos;
        let digits = |mut i: usize| {
            while buf.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            i
        };
        if buf.get(i) == Some(&b'-') {
            i += 1;
        }
        match buf.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => i = digits(i + 1),
            Some(_) => return Err(DecodeError::syntax(i, "invalid number")),
            None => return Err(self.eof()),
        }
        if buf.get(i) == Some(&b'.') {
            i += 1;
            let end = digits(i);
            if end == i {
                return Err(self.number_error(i));
            }
            i = end;
        }
        let exponent = matches!(buf.get(i), Some(b'e' | b'E'));
        if exponent {
            i += 1;
            if matches!(buf.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            let end = digits(i);
            if end == i {
                return Err(self.number_error(i));
            }
            i = end;
        }
        // serde_json refuses numbers beyond f64's range ("number out of
        // range"), so they are refused here too. Only a number with an
        // exponent or with more than 300 digits can be; both are rare.
        if exponent || i - self.pos > 300 {
            let text = std::str::from_utf8(&buf[self.pos..i]).unwrap_or("");
            if !text.parse::<f64>().is_ok_and(f64::is_finite) {
                return Err(DecodeError::syntax(self.pos, "number out of range"));
            }
        }
        self.pos = i;
        Ok(())
    }

    fn number_error(&self, at: usize) -> DecodeError {
        if at >= self.buf.len() {
            self.eof()
        } else {
            DecodeError::syntax(at, "invalid number")
        }
    }

    fn literal(&mut self, word: &'static [u8]) -> Result<(), DecodeError> {
        let rest = &self.buf[self.pos..];
        if rest.starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else if word.starts_with(rest) {
            Err(self.eof())
        } else {
            Err(self.error("expected a JSON value"))
        }
    }
}

impl DecodeError {
    /// Fills in the path of a syntax error found in `buf`.
    ///
    /// The hot paths do not track where they are; on error (the cold path)
    /// `buf` is walked again by a scanner that does, and that stops at the
    /// same first error.
    pub(crate) fn locate(mut self, buf: &[u8]) -> Self {
        if let DecodeError::Syntax { path, .. } = &mut self
            && path.is_empty()
        {
            let mut sc = Scanner::new(buf);
            let mut segs = Vec::new();
            let _ = walk(&mut sc, &mut segs, 0);
            *path = render(&segs);
        }
        self
    }
}

/// Walks the value at the cursor, keeping `segs` at the entry being read,
/// until the first error.
fn walk(sc: &mut Scanner<'_>, segs: &mut Vec<Seg>, depth: usize) -> Result<(), DecodeError> {
    sc.skip_ws();
    match sc.peek()? {
        b'{' => {
            sc.enter_object(depth + 1)?;
            let mut first = true;
            while let Some(key) = sc.next_key(&mut first)? {
                let name = key.name(sc.buf())?;
                segs.push(Seg::Key(String::from_utf8_lossy(&name).into_owned()));
                walk(sc, segs, depth + 1)?;
                segs.pop();
            }
        }
        b'[' => {
            sc.enter_array(depth + 1)?;
            let mut first = true;
            let mut index = 0;
            while sc.next_element(&mut first)? {
                segs.push(Seg::Index(index));
                walk(sc, segs, depth + 1)?;
                segs.pop();
                index += 1;
            }
        }
        _ => {
            sc.skip_value(depth)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skip(json: &str) -> Result<Span, DecodeError> {
        let mut sc = Scanner::new(json.as_bytes());
        let span = sc.skip_value(0)?;
        sc.finish()?;
        Ok(span)
    }

    #[test]
    fn skips_every_kind_of_value_to_its_last_byte() {
        for json in [
            r#""""#,
            r#""plain""#,
            r#""with \" quote and \\ and \u00e9 and \ud83d\ude00""#,
            "\"caf\u{e9} \u{1f600} long enough to cross eight-byte words\"",
            "0",
            "-0.5e+10",
            "123456789012345678901234567890",
            "1E3",
            "1e-400",
            "true",
            "false",
            "null",
            "{}",
            "[]",
            r#"{"a":[1,{"b":null},[]],"c":{"d":{}}}"#,
            " [ 1 , \"x\" , { \"k\" : [ ] } ] ",
        ] {
            let span = skip(json).unwrap_or_else(|e| panic!("{json}: {e}"));
            assert_eq!(
                &json[span.start..span.end],
                json.trim(),
                "{json}: wrong span"
            );
            assert!(serde_json::from_str::<serde_json::Value>(json).is_ok());
        }
    }

    #[test]
    fn rejects_what_serde_json_rejects() {
        for json in [
            "",
            "\"unterminated",
            "\"bad escape \\x\"",
            "\"short \\u12\"",
            "\"lone high \\ud83d\"",
            "\"lone low \\ude00 x\"",
            "\"control \u{1} char\"",
            "01",
            "1.",
            "-",
            "1e",
            "1e400",
            "-1.5E+309",
            ".5",
            "+1",
            "tru",
            "nul",
            "[1,]",
            "[1 2]",
            "{\"a\"}",
            "{\"a\":1,}",
            "{a:1}",
            "{\"a\":1 \"b\":2}",
            "[}",
            "{]",
            "[[[",
            "1 2",
        ] {
            assert!(skip(json).is_err(), "{json:?} was accepted");
            assert!(
                serde_json::from_str::<serde_json::Value>(json).is_err(),
                "{json:?} is valid JSON after all"
            );
        }
        let invalid_utf8 = b"\"caf\xc3\x28 and more text here\"";
        let mut sc = Scanner::new(invalid_utf8);
        assert!(sc.skip_value(0).is_err());
    }

    #[test]
    fn nesting_is_limited_to_what_serde_json_reads_back() {
        let ok = format!("{}{}", "[".repeat(127), "]".repeat(127));
        assert!(skip(&ok).is_ok());
        assert!(serde_json::from_str::<serde_json::Value>(&ok).is_ok());
        let deep = format!("{}{}", "[".repeat(128), "]".repeat(128));
        assert!(skip(&deep).unwrap_err().to_string().contains("127"));
        assert!(serde_json::from_str::<serde_json::Value>(&deep).is_err());
        let deep_objects = format!("{}1{}", r#"{"a":"#.repeat(128), "}".repeat(128));
        assert!(skip(&deep_objects).is_err());
        let mut sc = Scanner::new(b"[[]]");
        assert!(sc.skip_value(126).is_err(), "the depth given counts");
    }

    #[test]
    fn walks_object_entries_and_array_elements() {
        let json = br#" { "a" : 1 , "k\u0065y" : [ true , "x" ] , "c":{} } "#;
        let mut sc = Scanner::new(json);
        sc.skip_ws();
        sc.enter_object(1).unwrap();
        let mut first = true;
        let mut seen = Vec::new();
        while let Some(key) = sc.next_key(&mut first).unwrap() {
            let name = String::from_utf8(key.name(json).unwrap().into_owned()).unwrap();
            if name == "key" {
                sc.enter_array(2).unwrap();
                let mut first = true;
                while sc.next_element(&mut first).unwrap() {
                    let span = sc.skip_value(2).unwrap();
                    seen.push(String::from_utf8_lossy(&json[span.start..span.end]).into_owned());
                }
            } else {
                let span = sc.skip_value(1).unwrap();
                seen.push(format!(
                    "{name}={}",
                    String::from_utf8_lossy(&json[span.start..span.end])
                ));
            }
        }
        sc.finish().unwrap();
        assert_eq!(seen, ["a=1", "true", "\"x\"", "c={}"]);
    }

    #[test]
    fn unescapes_only_strings_with_a_backslash() {
        let json = br#"["plain","caf\u00e9 \"q\""]"#;
        let mut sc = Scanner::new(json);
        sc.enter_array(1).unwrap();
        let mut first = true;
        let mut out = Vec::new();
        while sc.next_element(&mut first).unwrap() {
            let span = sc.string().unwrap();
            out.push(unescape(json, span).unwrap());
        }
        assert!(matches!(out[0], Cow::Borrowed("plain")));
        assert_eq!(out[1], "café \"q\"");
        assert!(matches!(out[1], Cow::Owned(_)));
    }
}
