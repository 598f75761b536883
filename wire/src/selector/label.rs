//! Label selectors: the lexer, parser and matcher of apimachinery's `labels.Parse`.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use super::SelectorError;
use super::validate::{NIL_PATH, aggregate, invalid_value, label_key_errors, label_value_errors};

/// How a [`LabelRequirement`] relates its key to its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LabelOperator {
    /// `k=v` or `k==v`: the key is present with value `v`.
    Equals,
    /// `k!=v`: the key is absent, or present with another value.
    NotEquals,
    /// `k in (a,b)`: the key is present with one of the values.
    In,
    /// `k notin (a,b)`: the key is absent, or present with none of the values.
    NotIn,
    /// `k`: the key is present.
    Exists,
    /// `!k`: the key is absent.
    DoesNotExist,
    /// `k>n`: the key is present with an integer value greater than `n`.
    GreaterThan,
    /// `k<n`: the key is present with an integer value less than `n`.
    LessThan,
}

/// One comma-separated term of a [`LabelSelector`].
///
/// Invariants (kept by [`LabelSelector::parse`]): the key is a valid label key;
/// the values are valid label values, sorted and distinct; `Equals`,
/// `NotEquals`, `GreaterThan` and `LessThan` have exactly one value (an integer
/// for the last two), `In` and `NotIn` at least one, `Exists` and
/// `DoesNotExist` none.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LabelRequirement {
    key: String,
    operator: LabelOperator,
    values: Vec<String>,
}

impl LabelRequirement {
    /// The label key this requirement is about.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// How the key relates to the values.
    pub fn operator(&self) -> LabelOperator {
        self.operator
    }

    /// The values, sorted and distinct; empty for `Exists` and `DoesNotExist`.
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether an object whose label `key` is `value` (`None`: no such label)
    /// satisfies this requirement.
    pub fn matches(&self, value: Option<&str>) -> bool {
        let listed = |v: &str| self.values.binary_search_by(|x| x.as_str().cmp(v)).is_ok();
        match self.operator {
            LabelOperator::Equals | LabelOperator::In => value.is_some_and(listed),
            LabelOperator::NotEquals | LabelOperator::NotIn => value.is_none_or(|v| !listed(v)),
            LabelOperator::Exists => value.is_some(),
            LabelOperator::DoesNotExist => value.is_none(),
            LabelOperator::GreaterThan | LabelOperator::LessThan => {
                // As apimachinery: an absent or non-integer label never matches.
                let (Some(Ok(actual)), Some(Ok(bound))) = (
                    value.map(str::parse::<i64>),
                    self.values.first().map(|v| v.parse::<i64>()),
                ) else {
                    return false;
                };
                if self.operator == LabelOperator::GreaterThan {
                    actual > bound
                } else {
                    actual < bound
                }
            }
        }
    }
}

impl fmt::Display for LabelRequirement {
    /// `k=v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, `k>n`, `k<n`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = &self.key;
        let values = self.values.join(",");
        match self.operator {
            LabelOperator::Equals => write!(f, "{key}={values}"),
            LabelOperator::NotEquals => write!(f, "{key}!={values}"),
            LabelOperator::In => write!(f, "{key} in ({values})"),
            LabelOperator::NotIn => write!(f, "{key} notin ({values})"),
            LabelOperator::Exists => write!(f, "{key}"),
            LabelOperator::DoesNotExist => write!(f, "!{key}"),
            LabelOperator::GreaterThan => write!(f, "{key}>{values}"),
            LabelOperator::LessThan => write!(f, "{key}<{values}"),
        }
    }
}

/// A parsed `labelSelector`: the AND of its requirements.
///
/// Requirements are sorted by key (stably, so requirements on the same key
/// keep their order). The empty selector matches everything. `Display`
/// renders the canonical form (`==` as `=`, values sorted), which parses back
/// to an equal selector.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    requirements: Vec<LabelRequirement>,
}

impl LabelSelector {
    /// Parses the string form of a label selector, e.g. `app=web,tier notin (db)`.
    ///
    /// # Errors
    ///
    /// A [`SelectorError`] whose message is the one kube-apiserver gives for
    /// the same input.
    pub fn parse(selector: &str) -> Result<Self, SelectorError> {
        let mut requirements = Parser::new(selector).parse().map_err(SelectorError::new)?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Self { requirements })
    }

    /// Whether the selector selects everything (it has no requirement).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements, sorted by key.
    pub fn requirements(&self) -> &[LabelRequirement] {
        &self.requirements
    }

    /// Whether an object matches; `get` looks up one of its labels by key.
    pub fn matches<S: AsRef<str>>(&self, get: impl Fn(&str) -> Option<S>) -> bool {
        self.requirements.iter().all(|requirement| {
            let value = get(&requirement.key);
            requirement.matches(value.as_ref().map(AsRef::as_ref))
        })
    }

    /// The `(key, value)` pairs every matching object must carry: the `=`
    /// requirements and the `in` requirements with a single value. Any one of
    /// them can drive an index lookup; the whole selector must still be
    /// checked on the candidates.
    pub fn equalities(&self) -> impl Iterator<Item = (&str, &str)> {
        self.requirements
            .iter()
            .filter_map(|r| match (r.operator, r.values.as_slice()) {
                (LabelOperator::Equals | LabelOperator::In, [value]) => {
                    Some((r.key.as_str(), value.as_str()))
                }
                _ => None,
            })
    }
}

impl fmt::Display for LabelSelector {
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

impl FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// A lexical token of apimachinery's label selector lexer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

/// The token a literal stands for, if any (`string2token`).
fn keyword(literal: &str) -> Option<Token> {
    Some(match literal {
        ")" => Token::ClosedPar,
        "," => Token::Comma,
        "!" => Token::DoesNotExist,
        "==" => Token::DoubleEquals,
        "=" => Token::Equals,
        ">" => Token::GreaterThan,
        "in" => Token::In,
        "<" => Token::LessThan,
        "!=" => Token::NotEquals,
        "notin" => Token::NotIn,
        "(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special_symbol(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// The lexer, byte for byte as apimachinery's.
///
/// Like Go's, `read` answers 0 both at the end and for a NUL byte, so a NUL
/// where a token starts ends the input and a NUL after a token is dropped.
/// Tokens only ever end at ASCII bytes, so every literal is valid UTF-8.
struct Lexer<'s> {
    s: &'s str,
    pos: usize,
}

impl<'s> Lexer<'s> {
    fn read(&mut self) -> u8 {
        match self.s.as_bytes().get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                b
            }
            None => 0,
        }
    }

    /// Steps back over the byte just read; only ever called after a real read.
    fn unread(&mut self) {
        self.pos -= 1;
    }

    fn lex(&mut self) -> (Token, &'s str) {
        let mut ch = self.read();
        while is_whitespace(ch) {
            ch = self.read();
        }
        if ch == 0 {
            return (Token::EndOfString, "");
        }
        self.unread();
        if is_special_symbol(ch) {
            self.scan_special_symbol()
        } else {
            self.scan_identifier_or_keyword()
        }
    }

    fn scan_identifier_or_keyword(&mut self) -> (Token, &'s str) {
        let start = self.pos;
        let end = loop {
            let at = self.pos;
            match self.read() {
                0 => break at,
                ch if is_special_symbol(ch) || is_whitespace(ch) => {
                    self.unread();
                    break at;
                }
                _ => {}
            }
        };
        let literal = &self.s[start..end];
        (keyword(literal).unwrap_or(Token::Identifier), literal)
    }

    /// The longest run of special symbols that is a token: `!=` and `==` are
    /// the only two-byte ones, every single special symbol is one.
    fn scan_special_symbol(&mut self) -> (Token, &'s str) {
        let start = self.pos;
        let mut last: Option<(Token, usize)> = None;
        loop {
            match self.read() {
                0 => break,
                ch if is_special_symbol(ch) => {
                    if let Some(token) = keyword(&self.s[start..self.pos]) {
                        last = Some((token, self.pos));
                    } else if last.is_some() {
                        self.unread();
                        break;
                    }
                }
                _ => {
                    self.unread();
                    break;
                }
            }
        }
        match last {
            Some((token, end)) => (token, &self.s[start..end]),
            // Unreachable: the lexer only gets here on a special symbol, and
            // each of them is a token on its own.
            None => (Token::EndOfString, ""),
        }
    }
}

/// In `Values` context `in` and `notin` are plain identifiers (`x in (in)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

/// apimachinery's recursive-descent parser over the scanned tokens; each error
/// is the string Go's parser formats for the same input.
struct Parser<'s> {
    items: Vec<(Token, &'s str)>,
    position: usize,
}

impl<'s> Parser<'s> {
    fn new(selector: &'s str) -> Self {
        let mut lexer = Lexer {
            s: selector,
            pos: 0,
        };
        let mut items = Vec::new();
        loop {
            let item = lexer.lex();
            items.push(item);
            if item.0 == Token::EndOfString {
                break;
            }
        }
        Self { items, position: 0 }
    }

    fn lookahead(&self, context: Context) -> (Token, &'s str) {
        // Never past the end: the last item is always EndOfString.
        let (token, literal) = self.items[self.position.min(self.items.len() - 1)];
        match (context, token) {
            (Context::Values, Token::In | Token::NotIn) => (Token::Identifier, literal),
            _ => (token, literal),
        }
    }

    fn consume(&mut self, context: Context) -> (Token, &'s str) {
        let item = self.lookahead(context);
        self.position += 1;
        item
    }

    fn parse(&mut self) -> Result<Vec<LabelRequirement>, String> {
        let mut requirements = Vec::new();
        loop {
            let (token, literal) = self.lookahead(Context::Values);
            match token {
                Token::Identifier | Token::DoesNotExist => {
                    let requirement = self
                        .parse_requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(requirement);
                    let (token, literal) = self.consume(Context::Values);
                    match token {
                        Token::EndOfString => return Ok(requirements),
                        Token::Comma => {
                            let (next, literal) = self.lookahead(Context::Values);
                            if next != Token::Identifier && next != Token::DoesNotExist {
                                return Err(format!(
                                    "found '{literal}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => {
                            return Err(format!(
                                "found '{literal}', expected: ',' or 'end of string'"
                            ));
                        }
                    }
                }
                Token::EndOfString => return Ok(requirements),
                _ => {
                    return Err(format!(
                        "found '{literal}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<LabelRequirement, String> {
        let (key, operator) = self.parse_key_and_infer_operator()?;
        let (operator, values) = match operator {
            Some(operator) => (operator, BTreeSet::new()),
            None => {
                let operator = self.parse_operator()?;
                let values = match operator {
                    LabelOperator::In | LabelOperator::NotIn => self.parse_values()?,
                    _ => self.parse_exact_value()?,
                };
                (operator, values)
            }
        };
        new_requirement(key, operator, values.into_iter().collect())
    }

    /// The key, and the operator if it is unary: `!k` is `DoesNotExist` (even
    /// when more follows, which the caller then rejects), a key followed by
    /// `,` or the end is `Exists`.
    fn parse_key_and_infer_operator(&mut self) -> Result<(&'s str, Option<LabelOperator>), String> {
        let mut operator = None;
        let (mut token, mut literal) = self.consume(Context::Values);
        if token == Token::DoesNotExist {
            operator = Some(LabelOperator::DoesNotExist);
            (token, literal) = self.consume(Context::Values);
        }
        if token != Token::Identifier {
            return Err(format!("found '{literal}', expected: identifier"));
        }
        let errors = label_key_errors(literal);
        if !errors.is_empty() {
            return Err(invalid_value(NIL_PATH, literal, &errors.join("; ")));
        }
        let (next, _) = self.lookahead(Context::Values);
        if (next == Token::EndOfString || next == Token::Comma) && operator.is_none() {
            operator = Some(LabelOperator::Exists);
        }
        Ok((literal, operator))
    }

    fn parse_operator(&mut self) -> Result<LabelOperator, String> {
        let (token, literal) = self.consume(Context::KeyAndOperator);
        Ok(match token {
            Token::In => LabelOperator::In,
            Token::Equals | Token::DoubleEquals => LabelOperator::Equals,
            Token::GreaterThan => LabelOperator::GreaterThan,
            Token::LessThan => LabelOperator::LessThan,
            Token::NotIn => LabelOperator::NotIn,
            Token::NotEquals => LabelOperator::NotEquals,
            _ => {
                return Err(format!(
                    "found '{literal}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        })
    }

    /// `( values )`; `()` is the set holding the empty value.
    fn parse_values(&mut self) -> Result<BTreeSet<&'s str>, String> {
        let (token, literal) = self.consume(Context::Values);
        if token != Token::OpenPar {
            // Sic: no comma before "expected" here in apimachinery.
            return Err(format!("found '{literal}' expected: '('"));
        }
        let (token, literal) = self.lookahead(Context::Values);
        match token {
            Token::Identifier | Token::Comma => {
                let values = self.parse_identifiers_list()?;
                // parse_identifiers_list only succeeds in front of ')'.
                let (token, _) = self.consume(Context::Values);
                if token != Token::ClosedPar {
                    return Err(format!("found '{literal}', expected: ')'"));
                }
                Ok(values)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(BTreeSet::from([""]))
            }
            _ => Err(format!(
                "found '{literal}', expected: ',', ')' or identifier"
            )),
        }
    }

    /// A comma-separated list of possibly empty values, up to (not over) `)`.
    fn parse_identifiers_list(&mut self) -> Result<BTreeSet<&'s str>, String> {
        let mut values = BTreeSet::new();
        loop {
            let (token, literal) = self.consume(Context::Values);
            match token {
                Token::Identifier => {
                    values.insert(literal);
                    let (next, literal) = self.lookahead(Context::Values);
                    match next {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(values),
                        _ => return Err(format!("found '{literal}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if values.is_empty() {
                        values.insert(""); // "(,"
                    }
                    match self.lookahead(Context::Values).0 {
                        Token::ClosedPar => {
                            values.insert(""); // ",)"
                            return Ok(values);
                        }
                        Token::Comma => {
                            self.consume(Context::Values);
                            values.insert(""); // ",,"
                        }
                        _ => {}
                    }
                }
                _ => return Err(format!("found '{literal}', expected: ',', or identifier")),
            }
        }
    }

    /// The single value after `=`, `==`, `!=`, `>` or `<`; nothing means empty.
    fn parse_exact_value(&mut self) -> Result<BTreeSet<&'s str>, String> {
        let (token, _) = self.lookahead(Context::Values);
        if token == Token::EndOfString || token == Token::Comma {
            return Ok(BTreeSet::from([""]));
        }
        let (token, literal) = self.consume(Context::Values);
        if token == Token::Identifier {
            Ok(BTreeSet::from([literal]))
        } else {
            Err(format!("found '{literal}', expected: identifier"))
        }
    }
}

/// apimachinery's `NewRequirement` for what the parser can produce: the key is
/// already valid and the value count already right, so what remains is the
/// integer check of `>`/`<` and the validation of each (sorted) value, whose
/// errors are aggregated.
fn new_requirement(
    key: &str,
    operator: LabelOperator,
    values: Vec<&str>,
) -> Result<LabelRequirement, String> {
    let mut errors = Vec::new();
    if matches!(
        operator,
        LabelOperator::GreaterThan | LabelOperator::LessThan
    ) {
        for (i, value) in values.iter().enumerate() {
            if value.parse::<i64>().is_err() {
                errors.push(invalid_value(
                    &format!("values[{i}]"),
                    value,
                    "for 'Gt', 'Lt' operators, the value must be an integer",
                ));
            }
        }
    }
    for (i, value) in values.iter().enumerate() {
        let value_errors = label_value_errors(value);
        if !value_errors.is_empty() {
            errors.push(invalid_value(
                &format!("values[{i}][{key}]"),
                value,
                &value_errors.join("; "),
            ));
        }
    }
    match aggregate(errors) {
        Some(message) => Err(message),
        None => Ok(LabelRequirement {
            key: key.to_owned(),
            operator,
            values: values.into_iter().map(str::to_owned).collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::selector::test_rng::Rng;

    fn parse(s: &str) -> LabelSelector {
        LabelSelector::parse(s).unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
    }

    fn error(s: &str) -> String {
        match LabelSelector::parse(s) {
            Ok(selector) => panic!("{s:?} should not parse, got {selector}"),
            Err(e) => e.to_string(),
        }
    }

    /// Whether `selector` matches an object with the labels `k=v,...`.
    fn selects(selector: &str, labels: &[(&str, &str)]) -> bool {
        let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
        parse(selector).matches(|key| labels.get(key).copied())
    }

    fn requirement(s: &str) -> (String, LabelOperator, Vec<String>) {
        let selector = parse(s);
        assert_eq!(selector.requirements().len(), 1, "{s}");
        let r = &selector.requirements()[0];
        (r.key().to_owned(), r.operator(), r.values().to_vec())
    }

    const NAME_PART_REGEX: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    const LABEL_VALUE_REGEX: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

    #[test]
    fn an_empty_or_blank_selector_has_no_requirement_and_matches_everything() {
        for s in ["", " ", " \t\r\n "] {
            let selector = parse(s);
            assert!(selector.is_empty());
            assert!(selector.matches(|_| None::<&str>));
            assert_eq!(selector.to_string(), "");
        }
        assert_eq!(LabelSelector::default(), parse(""));
    }

    #[test]
    fn equals_and_double_equals_require_the_key_with_that_value() {
        for s in ["app=web", "app==web"] {
            assert_eq!(
                requirement(s),
                ("app".into(), LabelOperator::Equals, vec!["web".into()])
            );
            assert!(selects(s, &[("app", "web")]));
            assert!(!selects(s, &[("app", "db")]));
            assert!(!selects(s, &[("other", "web")]));
            assert!(!selects(s, &[]));
        }
    }

    #[test]
    fn an_equality_without_a_value_requires_the_key_with_the_empty_value() {
        assert_eq!(
            requirement("app="),
            ("app".into(), LabelOperator::Equals, vec!["".into()])
        );
        assert!(selects("app=,tier", &[("app", ""), ("tier", "x")]));
        assert!(!selects("app=", &[]));
        assert!(!selects("app=", &[("app", "web")]));
    }

    #[test]
    fn not_equals_matches_other_values_and_objects_without_the_key() {
        assert_eq!(
            requirement("app!=web"),
            ("app".into(), LabelOperator::NotEquals, vec!["web".into()])
        );
        assert!(selects("app!=web", &[("app", "db")]));
        assert!(selects("app!=web", &[]));
        assert!(!selects("app!=web", &[("app", "web")]));
    }

    #[test]
    fn in_requires_the_key_with_one_of_the_values() {
        let s = "env in (prod, staging)";
        assert_eq!(
            requirement(s),
            (
                "env".into(),
                LabelOperator::In,
                vec!["prod".into(), "staging".into()]
            )
        );
        assert!(selects(s, &[("env", "prod")]));
        assert!(selects(s, &[("env", "staging")]));
        assert!(!selects(s, &[("env", "dev")]));
        assert!(!selects(s, &[]));
    }

    #[test]
    fn notin_matches_other_values_and_objects_without_the_key() {
        let s = "env notin (prod,staging)";
        assert_eq!(requirement(s).1, LabelOperator::NotIn);
        assert!(selects(s, &[("env", "dev")]));
        assert!(selects(s, &[("other", "prod")]));
        assert!(selects(s, &[]));
        assert!(!selects(s, &[("env", "prod")]));
    }

    #[test]
    fn a_bare_key_requires_the_key_with_any_value() {
        assert_eq!(
            requirement("app"),
            ("app".into(), LabelOperator::Exists, vec![])
        );
        assert!(selects("app", &[("app", "")]));
        assert!(selects("app", &[("app", "x")]));
        assert!(!selects("app", &[]));
    }

    #[test]
    fn a_negated_key_requires_the_key_to_be_absent() {
        assert_eq!(
            requirement("!app"),
            ("app".into(), LabelOperator::DoesNotExist, vec![])
        );
        assert_eq!(
            requirement(" ! app "),
            ("app".into(), LabelOperator::DoesNotExist, vec![])
        );
        assert!(selects("!app", &[("other", "x")]));
        assert!(!selects("!app", &[("app", "")]));
    }

    #[test]
    fn greater_and_less_than_compare_integers_and_never_match_non_integers() {
        assert_eq!(
            requirement("gen>5"),
            ("gen".into(), LabelOperator::GreaterThan, vec!["5".into()])
        );
        assert_eq!(requirement("gen < 5").1, LabelOperator::LessThan);
        assert!(selects("gen>5", &[("gen", "6")]));
        assert!(!selects("gen>5", &[("gen", "5")]));
        assert!(selects("gen<5", &[("gen", "-7")]));
        assert!(!selects("gen<5", &[("gen", "5")]));
        assert!(!selects("gen>5", &[("gen", "six")]));
        assert!(!selects("gen<5", &[("gen", "99999999999999999999")]));
        assert!(!selects("gen<5", &[]));
    }

    #[test]
    fn all_requirements_must_match() {
        let s = "app=web,env notin (prod),!canary,tier";
        assert!(selects(s, &[("app", "web"), ("env", "dev"), ("tier", "1")]));
        assert!(selects(s, &[("app", "web"), ("tier", "1")]));
        assert!(!selects(
            s,
            &[("app", "web"), ("tier", "1"), ("canary", "")]
        ));
        assert!(!selects(
            s,
            &[("app", "web"), ("env", "prod"), ("tier", "1")]
        ));
        assert!(!selects(s, &[("app", "web")]));
    }

    #[test]
    fn whitespace_between_tokens_is_ignored() {
        let canonical = parse("a=b,c in (d,e),!f,g");
        for s in [
            " a = b , c in ( d , e ) , ! f , g ",
            "a=b,\tc\nin\r(d,e),!f,g\n",
            "a==b,c in(d,e),!f,g",
        ] {
            assert_eq!(parse(s), canonical, "{s:?}");
        }
    }

    #[test]
    fn in_and_notin_are_keys_and_values_where_an_identifier_is_expected() {
        assert_eq!(
            requirement("in in (in,notin)"),
            (
                "in".into(),
                LabelOperator::In,
                vec!["in".into(), "notin".into()]
            )
        );
        assert_eq!(
            requirement("notin=in"),
            ("notin".into(), LabelOperator::Equals, vec!["in".into()])
        );
        assert_eq!(
            requirement("!in"),
            ("in".into(), LabelOperator::DoesNotExist, vec![])
        );
        assert_eq!(
            requirement("notin"),
            ("notin".into(), LabelOperator::Exists, vec![])
        );
    }

    #[test]
    fn an_empty_value_set_holds_the_empty_value() {
        assert_eq!(
            requirement("a in ()"),
            ("a".into(), LabelOperator::In, vec!["".into()])
        );
        assert!(selects("a in ()", &[("a", "")]));
        assert!(!selects("a in ()", &[("a", "x")]));
        assert!(!selects("a in ()", &[]));
        assert!(selects("a notin ()", &[("a", "x")]));
        assert!(!selects("a notin ()", &[("a", "")]));
    }

    #[test]
    fn empty_entries_in_a_value_set_are_the_empty_value() {
        for s in [
            "a in (,b)",
            "a in (b,)",
            "a in (,,b)",
            "a in (b,,b)",
            "a in (b,,c,)",
        ] {
            assert_eq!(requirement(s).2[..2], ["", "b"], "{s}");
        }
        assert_eq!(requirement("a in (,)").2, [""]);
        assert_eq!(requirement("a in (b,c)").2, ["b", "c"]);
    }

    #[test]
    fn two_commas_before_the_closing_parenthesis_are_rejected_as_by_apimachinery() {
        // Its parseIdentifiersList consumes ",," and then wants a value.
        for s in ["a in (b,,)", "a in (,,)"] {
            assert_eq!(
                error(s),
                "unable to parse requirement: found ')', expected: ',', or identifier"
            );
        }
    }

    #[test]
    fn values_are_sorted_and_distinct() {
        assert_eq!(requirement("a in (z, b, z, a)").2, ["a", "b", "z"]);
    }

    #[test]
    fn requirements_are_sorted_by_key_keeping_the_order_of_equal_keys() {
        let selector = parse("b,a!=2,c,a=1");
        let keys: Vec<_> = selector
            .requirements()
            .iter()
            .map(|r| r.to_string())
            .collect();
        assert_eq!(keys, ["a!=2", "a=1", "b", "c"]);
    }

    #[test]
    fn prefixed_keys_and_long_names_and_values_are_accepted() {
        let name = "n".repeat(63);
        let value = "v".repeat(63);
        let s = format!("example.com/{name}={value}");
        assert_eq!(
            requirement(&s),
            (
                format!("example.com/{name}"),
                LabelOperator::Equals,
                vec![value]
            )
        );
        assert_eq!(
            requirement("app.kubernetes.io/name").0,
            "app.kubernetes.io/name"
        );
    }

    #[test]
    fn equalities_are_the_requirements_an_index_can_serve() {
        let selector = parse("a=1,b in (2),c in (3,4),d!=5,e,f>1");
        assert_eq!(
            selector.equalities().collect::<Vec<_>>(),
            [("a", "1"), ("b", "2")]
        );
    }

    #[test]
    fn matches_accepts_any_string_like_lookup() {
        let labels: BTreeMap<String, String> = [("app".to_owned(), "web".to_owned())].into();
        assert!(parse("app=web").matches(|k| labels.get(k)));
        assert!(parse("app=web").matches(|k| labels.get(k).cloned()));
    }

    // Error messages. Where the expected string is quoted from a real
    // kube-apiserver answer or from Kubernetes' own tests, the test says so;
    // the others follow from the apimachinery source (labels/selector.go).

    #[test]
    fn a_key_followed_by_a_non_operator_names_the_binary_operators() {
        assert_eq!(
            error("a b"),
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"
        );
        assert_eq!(
            error("a ("),
            "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt"
        );
    }

    #[test]
    fn an_unterminated_value_set_is_rejected() {
        assert_eq!(
            error("a in ("),
            "unable to parse requirement: found '', expected: ',', ')' or identifier"
        );
        assert_eq!(
            error("a in (b"),
            "unable to parse requirement: found '', expected: ',' or ')'"
        );
        assert_eq!(
            error("a in (b c)"),
            "unable to parse requirement: found 'c', expected: ',' or ')'"
        );
        assert_eq!(
            error("a in (b,"),
            "unable to parse requirement: found '', expected: ',', or identifier"
        );
        assert_eq!(
            error("a in (b,=)"),
            "unable to parse requirement: found '=', expected: ',', or identifier"
        );
        assert_eq!(
            error("a in (="),
            "unable to parse requirement: found '=', expected: ',', ')' or identifier"
        );
    }

    #[test]
    fn a_set_operator_needs_a_parenthesis() {
        assert_eq!(
            error("a in b"),
            "unable to parse requirement: found 'b' expected: '('"
        );
        assert_eq!(
            error("a notin"),
            "unable to parse requirement: found '' expected: '('"
        );
    }

    #[test]
    fn stray_commas_are_rejected() {
        assert_eq!(error("a,,b"), "found ',', expected: identifier after ','");
        assert_eq!(error("a,"), "found '', expected: identifier after ','");
        assert_eq!(
            error(",a"),
            "found ',', expected: !, identifier, or 'end of string'"
        );
        assert_eq!(
            error(","),
            "found ',', expected: !, identifier, or 'end of string'"
        );
    }

    #[test]
    fn anything_after_a_complete_requirement_but_a_comma_is_rejected() {
        assert_eq!(
            error("a=b c"),
            "found 'c', expected: ',' or 'end of string'"
        );
        assert_eq!(
            error("a in (b) c"),
            "found 'c', expected: ',' or 'end of string'"
        );
        assert_eq!(error("!a=b"), "found '=', expected: ',' or 'end of string'");
        assert_eq!(error("a=b)"), "found ')', expected: ',' or 'end of string'");
    }

    #[test]
    fn an_operator_where_a_key_or_value_belongs_is_rejected() {
        assert_eq!(
            error("=a"),
            "found '=', expected: !, identifier, or 'end of string'"
        );
        assert_eq!(
            error("!=a"),
            "found '!=', expected: !, identifier, or 'end of string'"
        );
        assert_eq!(
            error("!"),
            "unable to parse requirement: found '', expected: identifier"
        );
        assert_eq!(
            error("!!a"),
            "unable to parse requirement: found '!', expected: identifier"
        );
        assert_eq!(
            error("a=(b)"),
            "unable to parse requirement: found '(', expected: identifier"
        );
        assert_eq!(
            error("a==="),
            "unable to parse requirement: found '=', expected: identifier"
        );
    }

    #[test]
    fn an_invalid_key_is_reported_at_the_nil_path_as_kube_apiserver_does() {
        // Verbatim from `kubectl get pods -l "app:monolith"` against a real cluster.
        assert_eq!(
            error("app:monolith"),
            format!(
                r#"unable to parse requirement: <nil>: Invalid value: "app:monolith": {NAME_PART_REGEX}"#
            )
        );
        // Verbatim from kube-apiserver's own authorization filter tests (labelSelector=%2Abar).
        assert_eq!(
            error("*bar"),
            format!(
                r#"unable to parse requirement: <nil>: Invalid value: "*bar": {NAME_PART_REGEX}"#
            )
        );
        // Verbatim from a client-go test of a selector with two slashes.
        assert_eq!(
            error("a/b/c ?=? def"),
            r#"unable to parse requirement: <nil>: Invalid value: "a/b/c": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"#
        );
    }

    #[test]
    fn a_key_with_a_bad_prefix_or_a_too_long_name_is_rejected() {
        assert_eq!(
            error("app.kubernetes_io/name=x"),
            r#"unable to parse requirement: <nil>: Invalid value: "app.kubernetes_io/name": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"#
        );
        assert_eq!(
            error("/a"),
            r#"unable to parse requirement: <nil>: Invalid value: "/a": prefix part must be non-empty"#
        );
        let long = "k".repeat(64);
        assert_eq!(
            error(&format!("{long} in (a)")),
            format!(
                r#"unable to parse requirement: <nil>: Invalid value: "{long}": name part must be no more than 63 characters"#
            )
        );
        assert_eq!(
            error("a/"),
            format!(
                r#"unable to parse requirement: <nil>: Invalid value: "a/": name part must be non-empty; {NAME_PART_REGEX}"#
            )
        );
    }

    #[test]
    fn an_invalid_key_is_quoted_like_go() {
        assert_eq!(
            error("a\"\u{1}b"),
            format!(
                r#"unable to parse requirement: <nil>: Invalid value: "a\"\x01b": {NAME_PART_REGEX}"#
            )
        );
    }

    #[test]
    fn an_invalid_value_is_reported_at_its_sorted_index_and_key() {
        // The too-long message is verbatim from a Kubernetes test of the same requirement.
        let long = "z".repeat(64);
        assert_eq!(
            error(&format!("good-key={long}")),
            format!(
                r#"unable to parse requirement: values[0][good-key]: Invalid value: "{long}": must be no more than 63 characters"#
            )
        );
        assert_eq!(
            error("a in (b, c-)"),
            format!(
                r#"unable to parse requirement: values[1][a]: Invalid value: "c-": {LABEL_VALUE_REGEX}"#
            )
        );
        assert_eq!(
            error("a notin (z, -x, -y)"),
            format!(
                r#"unable to parse requirement: [values[0][a]: Invalid value: "-x": {LABEL_VALUE_REGEX}, values[1][a]: Invalid value: "-y": {LABEL_VALUE_REGEX}]"#
            )
        );
        assert_eq!(
            error("a=b/c"),
            format!(
                r#"unable to parse requirement: values[0][a]: Invalid value: "b/c": {LABEL_VALUE_REGEX}"#
            )
        );
    }

    #[test]
    fn a_non_integer_bound_is_rejected() {
        assert_eq!(
            error("a>b"),
            r#"unable to parse requirement: values[0]: Invalid value: "b": for 'Gt', 'Lt' operators, the value must be an integer"#
        );
        assert_eq!(
            error("a<"),
            r#"unable to parse requirement: values[0]: Invalid value: "": for 'Gt', 'Lt' operators, the value must be an integer"#
        );
        assert_eq!(
            error("a<b_"),
            format!(
                r#"unable to parse requirement: [values[0]: Invalid value: "b_": for 'Gt', 'Lt' operators, the value must be an integer, values[0][a]: Invalid value: "b_": {LABEL_VALUE_REGEX}]"#
            )
        );
        // A negative bound parses as an integer but is no label value.
        assert_eq!(
            error("a>-1"),
            format!(
                r#"unable to parse requirement: values[0][a]: Invalid value: "-1": {LABEL_VALUE_REGEX}"#
            )
        );
    }

    #[test]
    fn a_nul_byte_ends_the_input_where_a_token_starts_and_is_dropped_after_one() {
        // Go's lexer reads 0 both at the end and for NUL.
        assert_eq!(parse("a,b \0 ,c"), parse("a,b"));
        assert_eq!(parse("a=\0b"), parse("a=b"));
        assert_eq!(parse("a\0,b"), parse("a,b"));
        assert_eq!(parse("a,\0b"), parse("a,b"));
        assert_eq!(error("a, \0b"), "found '', expected: identifier after ','");
    }

    #[test]
    fn display_renders_the_canonical_form() {
        let cases = [
            ("a==b", "a=b"),
            ("a = ", "a="),
            (" b , a ", "a,b"),
            ("x in (z,y,)", "x in (,y,z)"),
            ("x notin ( )", "x notin ()"),
            ("!x,y>1,z<2", "!x,y>1,z<2"),
            ("k!=v", "k!=v"),
        ];
        for (input, canonical) in cases {
            assert_eq!(parse(input).to_string(), canonical, "{input:?}");
            assert_eq!(parse(canonical), parse(input), "{input:?}");
        }
    }

    #[test]
    fn display_of_random_valid_selectors_parses_back_to_the_same_selector() {
        let keys = ["a", "b", "in", "notin", "x.y/z", "A_1", "example.com/k-1"];
        let values = ["", "v", "in", "notin", "1", "10", "V_2.x"];
        let mut rng = Rng::new(7);
        for _ in 0..5_000 {
            let terms: Vec<String> = (0..=rng.below(4))
                .map(|_| {
                    let key = rng.pick(&keys);
                    let value = rng.pick(&values);
                    // Non-empty values, optionally after a leading comma (the empty value):
                    // apimachinery refuses some spellings of empty values, e.g. "(b,,)".
                    let set: Vec<&str> =
                        (0..=rng.below(3)).map(|_| rng.pick(&values[1..])).collect();
                    let set = format!(
                        "{}{}",
                        rng.pick(&["", ",", " , "]),
                        set.join(rng.pick(&[",", " , "]))
                    );
                    match rng.below(9) {
                        0 => key.to_owned(),
                        1 => format!("!{key}"),
                        2 => format!("{key}={value}"),
                        3 => format!("{key} == {value}"),
                        4 => format!("{key}!={value}"),
                        5 => format!("{key} in ({set})"),
                        6 => format!("{key} notin({set})"),
                        7 => format!("{key}>{}", rng.pick(&["0", "5", "12"])),
                        _ => format!("{key}<{}", rng.pick(&["0", "5", "12"])),
                    }
                })
                .collect();
            let input = terms.join(",");
            let selector = parse(&input);
            let shown = selector.to_string();
            assert_eq!(parse(&shown), selector, "{input:?} shown as {shown:?}");
            assert_eq!(parse(&shown).to_string(), shown);
        }
    }

    #[test]
    fn random_strings_never_panic_the_parser_and_what_parses_round_trips() {
        let pieces = [
            "a", "b", "in", "notin", " ", "\t", "=", "==", "!", "!=", "(", ")", ",", "<", ">", "-",
            "/", ".", "_", "\\", "\0", "é", "1", "\"", "k8s.io/", "in (", "Z",
        ];
        let mut rng = Rng::new(42);
        let mut parsed = 0;
        for _ in 0..50_000 {
            let input = rng.string_of(&pieces, 12);
            if let Ok(selector) = LabelSelector::parse(&input) {
                parsed += 1;
                let shown = selector.to_string();
                assert_eq!(parse(&shown), selector, "{input:?} shown as {shown:?}");
                let _ = selector.matches(|k| (k.len() % 2 == 0).then_some("1"));
            }
        }
        assert!(
            parsed > 1_000,
            "the generator should also produce valid selectors ({parsed})"
        );
    }
}
