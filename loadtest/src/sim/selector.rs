//! Label and field selectors as kube-apiserver reads them, written for the
//! simulator alone (independently of kubecache's own parser, so that the two
//! cannot share a misreading of the protocol).
//!
//! Label selectors (`k8s.io/apimachinery/pkg/labels`): comma-separated
//! requirements `key=v`, `key==v`, `key!=v`, `key in (a,b)`,
//! `key notin (a,b)`, `key` (exists) and `!key` (does not exist). Errors
//! carry kube-apiserver's wording, e.g. `unable to parse requirement: found
//! '', expected: ',', or identifier`.
//!
//! Field selectors (`k8s.io/apimachinery/pkg/fields`): comma-separated
//! `field=v`, `field==v`, `field!=v`, with `\,` `\=` `\\` escapes, on the
//! fields a resource supports (`field label not supported: spec.foo`
//! otherwise).

/// A parsed label selector; empty selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<Requirement>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: LabelOp,
    values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LabelOp {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// A lexical token of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Not,
    Equals,
    DoubleEquals,
    NotEquals,
    Open,
    Close,
    Comma,
    Greater,
    Less,
    End,
}

impl Token {
    /// The text kube-apiserver quotes in its errors.
    fn literal(&self) -> &str {
        match self {
            Token::Word(w) => w,
            Token::Not => "!",
            Token::Equals => "=",
            Token::DoubleEquals => "==",
            Token::NotEquals => "!=",
            Token::Open => "(",
            Token::Close => ")",
            Token::Comma => ",",
            Token::Greater => ">",
            Token::Less => "<",
            Token::End => "",
        }
    }
}

fn special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '>' | '<')
}

fn lex(input: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = input.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        if special(c) {
            chars.next();
            let double = |next: char, chars: &mut std::iter::Peekable<std::str::Chars>| {
                chars.next_if_eq(&next).is_some()
            };
            tokens.push(match c {
                '=' if double('=', &mut chars) => Token::DoubleEquals,
                '=' => Token::Equals,
                '!' if double('=', &mut chars) => Token::NotEquals,
                '!' => Token::Not,
                '(' => Token::Open,
                ')' => Token::Close,
                ',' => Token::Comma,
                '>' => Token::Greater,
                _ => Token::Less,
            });
            continue;
        }
        let mut word = String::new();
        while let Some(c) = chars.next_if(|c| !c.is_whitespace() && !special(*c)) {
            word.push(c);
        }
        tokens.push(Token::Word(word));
    }
    tokens.push(Token::End);
    tokens
}

/// A cursor over the tokens of one selector.
struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> &Token {
        &self.tokens[self.at.min(self.tokens.len() - 1)]
    }

    fn next(&mut self) -> Token {
        let token = self.peek().clone();
        self.at += 1;
        token
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        let mut negated = false;
        let mut token = self.next();
        if token == Token::Not {
            negated = true;
            token = self.next();
        }
        let Token::Word(key) = token else {
            return Err(format!("found '{}', expected: identifier", token.literal()));
        };
        validate_key(&key)?;
        // `!key` takes no operator: what follows it is the selector's to judge.
        if negated || matches!(self.peek(), Token::End | Token::Comma) {
            let op = if negated {
                LabelOp::DoesNotExist
            } else {
                LabelOp::Exists
            };
            return Ok(Requirement {
                key,
                op,
                values: Vec::new(),
            });
        }
        let (op, values) = match self.next() {
            Token::Word(w) if w == "in" => (LabelOp::In, self.value_set()?),
            Token::Word(w) if w == "notin" => (LabelOp::NotIn, self.value_set()?),
            Token::Equals | Token::DoubleEquals => (LabelOp::In, vec![self.exact_value()?]),
            Token::NotEquals => (LabelOp::NotIn, vec![self.exact_value()?]),
            Token::Greater | Token::Less => {
                return Err("the simulator does not serve the '>' and '<' operators".into());
            }
            other => {
                return Err(format!(
                    "found '{}', expected: in, notin, =, ==, !=, gt, lt",
                    other.literal()
                ));
            }
        };
        validate_values(&key, &values)?;
        Ok(Requirement { key, op, values })
    }

    fn exact_value(&mut self) -> Result<String, String> {
        match self.peek() {
            Token::End | Token::Comma => Ok(String::new()),
            Token::Word(_) => Ok(self.next().literal().to_string()),
            other => Err(format!("found '{}', expected: identifier", other.literal())),
        }
    }

    /// `(a,b,c)`; empty members stand for the empty value.
    fn value_set(&mut self) -> Result<Vec<String>, String> {
        let open = self.next();
        if open != Token::Open {
            return Err(format!("found '{}' expected: '('", open.literal()));
        }
        let mut values = Vec::new();
        let mut expect_value = true;
        loop {
            match self.next() {
                Token::Close if expect_value && values.is_empty() => {
                    return Ok(vec![String::new()]);
                }
                Token::Close if expect_value => {
                    values.push(String::new());
                    return Ok(values);
                }
                Token::Close => return Ok(values),
                Token::Comma if expect_value => values.push(String::new()),
                Token::Comma => expect_value = true,
                Token::Word(w) if expect_value => {
                    values.push(w);
                    expect_value = false;
                }
                other if expect_value => {
                    return Err(format!(
                        "found '{}', expected: ',', or identifier",
                        other.literal()
                    ));
                }
                other => {
                    return Err(format!("found '{}', expected: ',' or ')'", other.literal()));
                }
            }
        }
    }
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name of at
/// most 63 characters.
fn validate_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|part| {
                !part.is_empty()
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !part.starts_with('-')
                    && !part.ends_with('-')
            })
    });
    if prefix_ok && !name.is_empty() && is_label_value(name) {
        Ok(())
    } else {
        Err(format!(
            "invalid label key \"{key}\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        ))
    }
}

/// `NewRequirement`'s check of the values, in their set's (sorted)
/// order: a field error `values[i][key]: Invalid value: "v": ...` for each
/// invalid one, aggregated as Go aggregates (`[a, b]` for several).
fn validate_values(key: &str, values: &[String]) -> Result<(), String> {
    let mut sorted: Vec<&String> = values.iter().collect();
    sorted.sort();
    sorted.dedup();
    let errors: Vec<String> = sorted
        .iter()
        .enumerate()
        .filter_map(|(i, value)| {
            let mut why = Vec::new();
            if value.len() > 63 {
                why.push("must be no more than 63 characters");
            }
            if !label_value_shape(value) {
                why.push("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')");
            }
            (!why.is_empty()).then(|| {
                format!("values[{i}][{key}]: Invalid value: {value:?}: {}", why.join("; "))
            })
        })
        .collect();
    match errors.as_slice() {
        [] => Ok(()),
        [one] => Err(one.clone()),
        many => Err(format!("[{}]", many.join(", "))),
    }
}

/// At most 63 characters of [`label_value_shape`].
fn is_label_value(value: &str) -> bool {
    value.len() <= 63 && label_value_shape(value)
}

/// Empty, or `[A-Za-z0-9_.-]` with alphanumerics at both ends.
fn label_value_shape(value: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_alphanumeric();
    value.is_empty()
        || (value
            .bytes()
            .all(|b| alnum(b) || matches!(b, b'-' | b'_' | b'.'))
            && value.bytes().next().is_some_and(alnum)
            && value.bytes().last().is_some_and(alnum))
}

impl LabelSelector {
    /// Parses a `labelSelector` query parameter; the error is the message
    /// of kube-apiserver's 400.
    pub fn parse(input: &str) -> Result<Self, String> {
        let mut parser = Parser {
            tokens: lex(input),
            at: 0,
        };
        let mut requirements = Vec::new();
        loop {
            match parser.peek() {
                Token::End => return Ok(LabelSelector(requirements)),
                Token::Word(_) | Token::Not => {
                    let requirement = parser
                        .requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(requirement);
                    match parser.next() {
                        Token::End => return Ok(LabelSelector(requirements)),
                        Token::Comma => {
                            if !matches!(parser.peek(), Token::Word(_) | Token::Not) {
                                return Err(format!(
                                    "found '{}', expected: identifier after ','",
                                    parser.peek().literal()
                                ));
                            }
                        }
                        other => {
                            return Err(format!(
                                "found '{}', expected: ',' or 'end of string'",
                                other.literal()
                            ));
                        }
                    }
                }
                other => {
                    return Err(format!(
                        "found '{}', expected: !, identifier, or 'end of string'",
                        other.literal()
                    ));
                }
            }
        }
    }

    /// Whether this selects nothing out (no requirement).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether an object with these labels is selected.
    pub fn matches<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.0.iter().all(|r| {
            let value = label(&r.key);
            match r.op {
                LabelOp::Exists => value.is_some(),
                LabelOp::DoesNotExist => value.is_none(),
                LabelOp::In => value.is_some_and(|v| r.values.iter().any(|w| w == v)),
                LabelOp::NotIn => value.is_none_or(|v| r.values.iter().all(|w| w != v)),
            }
        })
    }
}

/// A parsed field selector; empty selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<FieldTerm>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldTerm {
    field: String,
    equal: bool,
    value: String,
}

/// Splits on the separator where it is not escaped by a backslash.
fn split_unescaped(input: &str, separator: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in input.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            c if c == separator => {
                parts.push(&input[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(&input[start..]);
    parts
}

/// The field, operator and value of one term: the first unescaped `!=`,
/// `==` or `=`.
fn split_term(term: &str) -> Option<(&str, bool, &str)> {
    let bytes = term.as_bytes();
    let mut escaped = false;
    for i in 0..bytes.len() {
        if escaped {
            escaped = false;
            continue;
        }
        match bytes[i] {
            b'\\' => escaped = true,
            b'!' if bytes.get(i + 1) == Some(&b'=') => {
                return Some((&term[..i], false, &term[i + 2..]));
            }
            b'=' if bytes.get(i + 1) == Some(&b'=') => {
                return Some((&term[..i], true, &term[i + 2..]));
            }
            b'=' => return Some((&term[..i], true, &term[i + 1..])),
            _ => {}
        }
    }
    None
}

fn unescape(value: &str) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some(e @ ('\\' | ',' | '=')) => out.push(e),
            Some(e) => {
                return Err(format!(
                    "invalid field selector: invalid escape sequence: \\{e}"
                ));
            }
            None => return Err("invalid field selector: unterminated escape sequence".into()),
        }
    }
    Ok(out)
}

impl FieldSelector {
    /// Parses a `fieldSelector` query parameter on the fields a resource
    /// supports; the error is the message of kube-apiserver's 400.
    pub fn parse(input: &str, supported: &[&str]) -> Result<Self, String> {
        let mut terms = Vec::new();
        for term in split_unescaped(input, ',') {
            if term.is_empty() {
                continue;
            }
            let Some((field, equal, value)) = split_term(term) else {
                return Err(format!(
                    "invalid selector: '{input}'; can't understand '{term}'"
                ));
            };
            let field = field.trim();
            if !supported.contains(&field) {
                return Err(format!("field label not supported: {field}"));
            }
            terms.push(FieldTerm {
                field: field.to_string(),
                equal,
                value: unescape(value)?,
            });
        }
        Ok(FieldSelector(terms))
    }

    /// The value a selector requires `field` to equal (`field=v` or
    /// `field==v` among its terms), whatever fields the resource supports:
    /// how kube-apiserver finds the object name a list or watch is about
    /// (`RequiresExactMatch`).
    pub fn exact(input: &str, field: &str) -> Option<String> {
        split_unescaped(input, ',')
            .into_iter()
            .filter_map(split_term)
            .find(|(f, equal, _)| *equal && f.trim() == field)
            .and_then(|(_, _, value)| unescape(value).ok())
    }

    /// Whether this selects nothing out (no term).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether this selects one object by name (`metadata.name=v` among
    /// its terms).
    pub fn names_one(&self) -> bool {
        self.0.iter().any(|t| t.equal && t.field == "metadata.name")
    }

    /// Whether an object with these field values is selected (a missing
    /// field reads as empty).
    pub fn matches<'a>(&self, field: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.0
            .iter()
            .all(|t| (field(&t.field).unwrap_or_default() == t.value) == t.equal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<&'a str> {
        move |k| pairs.iter().find(|(key, _)| *key == k).map(|(_, v)| *v)
    }

    #[test]
    fn every_label_operator_selects_what_kubernetes_documents() {
        let web = [("app", "web"), ("tier", "front")];
        let db = [("app", "db")];
        for (selector, selects_web, selects_db) in [
            ("", true, true),
            ("app=web", true, false),
            ("app==web", true, false),
            ("app!=web", false, true),
            ("app in (web, cache)", true, false),
            ("app notin (web)", false, true),
            ("tier", true, false),
            ("!tier", false, true),
            ("app=web,tier=front", true, false),
            ("missing!=x", true, true),
            ("app in (,db)", false, true),
        ] {
            let parsed = LabelSelector::parse(selector).unwrap();
            assert_eq!(
                (parsed.matches(labels(&web)), parsed.matches(labels(&db))),
                (selects_web, selects_db),
                "{selector}"
            );
        }
    }

    #[test]
    fn malformed_label_selectors_get_kube_apiservers_messages() {
        for (selector, message) in [
            (
                "app in (a,",
                "unable to parse requirement: found '', expected: ',', or identifier",
            ),
            (
                "==x",
                "found '==', expected: !, identifier, or 'end of string'",
            ),
            ("a=b,", "found '', expected: identifier after ','"),
            (
                "a in b",
                "unable to parse requirement: found 'b' expected: '('",
            ),
            ("a=b c", "found 'c', expected: ',' or 'end of string'"),
            (
                "a in (x-,ok,-y)",
                "unable to parse requirement: [values[0][a]: Invalid value: \"-y\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?'), values[2][a]: Invalid value: \"x-\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')]",
            ),
        ] {
            assert_eq!(
                LabelSelector::parse(selector),
                Err(message.into()),
                "{selector}"
            );
        }
        assert!(
            LabelSelector::parse("a=-x").is_err(),
            "values are validated"
        );
        assert!(LabelSelector::parse("-a=x").is_err(), "keys are validated");
    }

    #[test]
    fn field_selectors_compare_supported_fields_with_escapes() {
        let supported = ["metadata.name", "spec.nodeName"];
        let node = |f: &str| (f == "spec.nodeName").then_some("n,1");
        let parsed = FieldSelector::parse(r"spec.nodeName=n\,1", &supported).unwrap();
        assert!(parsed.matches(node));
        let parsed = FieldSelector::parse("spec.nodeName!=n,metadata.name==", &supported).unwrap();
        assert!(parsed.matches(node));
        assert_eq!(
            FieldSelector::parse("spec.foo=bar", &supported),
            Err("field label not supported: spec.foo".into())
        );
        assert_eq!(
            FieldSelector::parse("nonsense", &supported),
            Err("invalid selector: 'nonsense'; can't understand 'nonsense'".into())
        );
    }

    #[test]
    fn an_exact_field_requirement_is_found_among_the_terms() {
        let name = |input| FieldSelector::exact(input, "metadata.name");
        assert_eq!(name("spec.x=1,metadata.name==a\\,b"), Some("a,b".into()));
        assert_eq!(name("metadata.name!=a"), None);
        assert_eq!(name(""), None);
    }
}
