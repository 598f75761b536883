//! The subset of CEL a shard selector is written in, parsed into the shape
//! of cel-go's AST that kube-apiserver's shard parser walks.
//!
//! kube-apiserver parses the whole of CEL (no macros) and then refuses every
//! node but `shardRange(...)` calls joined by `||`. Its refusals name the
//! node: the function of a call (`_&&_`, `_>_`, `invalidFunc`) or the
//! expression kind (cel-go's `ast.ExprKind`, printed as its number). This
//! parser reads the part of CEL that those refusals can name: `||`, `&&`,
//! the relations, `!` and unary `-`, calls, field selection, parentheses,
//! and literals (strings in single or double quotes, integers, unsigned
//! integers, doubles, `true`, `false`, `null`). What it does not read
//! (arithmetic, lists, maps, ternaries, raw or byte strings, string
//! escapes) is a parse error here, as it would be a refusal there; the
//! words of CEL's own syntax errors are not reproduced.

/// One node, as cel-go's AST has it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Expr {
    /// A call: a function (`shardRange`) or an operator (`_||_`, `_&&_`).
    Call { function: String, args: Vec<Expr> },
    /// A bare name (`object`).
    Ident(String),
    /// `operand.field`.
    Select { operand: Box<Expr>, field: String },
    /// A literal.
    Literal(Literal),
}

/// A literal's value.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Literal {
    String(String),
    Int,
    Uint,
    Double,
    Bool,
    Null,
}

impl Expr {
    /// cel-go's `ast.ExprKind` of the node, as `fmt` prints it (a number).
    pub(super) fn kind(&self) -> u8 {
        match self {
            Expr::Call { .. } => 1,
            Expr::Ident(_) => 3,
            Expr::Literal(_) => 5,
            Expr::Select { .. } => 7,
        }
    }
}

impl Literal {
    /// Go's `%T` of the literal's value, as cel-go hands it out.
    pub(super) fn go_type(&self) -> &'static str {
        match self {
            Literal::String(_) => "string",
            Literal::Int => "int64",
            Literal::Uint => "uint64",
            Literal::Double => "float64",
            Literal::Bool => "bool",
            Literal::Null => "structpb.NullValue",
        }
    }
}

/// Parses `text` (already trimmed, not empty).
///
/// # Errors
///
/// A description of the first syntax error.
pub(super) fn parse(text: &str) -> Result<Expr, String> {
    let tokens = tokenize(text)?;
    let mut parser = Parser { tokens, at: 0 };
    let expr = parser.or()?;
    match parser.peek() {
        None => Ok(expr),
        Some(token) => Err(format!("Syntax error: extraneous input {token}")),
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    String(String),
    Number(Literal),
    /// Punctuation and operators: `(`, `)`, `,`, `.`, `||`, `&&`, `!`,
    /// `-`, `==`, `!=`, `<`, `<=`, `>`, `>=`.
    Symbol(&'static str),
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Token::Ident(name) => write!(f, "'{name}'"),
            Token::String(s) => write!(f, "''{s}''"),
            Token::Number(_) => f.write_str("number"),
            Token::Symbol(s) => write!(f, "'{s}'"),
        }
    }
}

const SYMBOLS: [&str; 14] = [
    "||", "&&", "==", "!=", "<=", ">=", "(", ")", ",", ".", "!", "-", "<", ">",
];

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let rest = &text[at..];
        let c = bytes[at];
        if c.is_ascii_whitespace() {
            at += 1;
        } else if c == b'\'' || c == b'"' {
            let end = rest[1..]
                .find(c as char)
                .ok_or_else(|| format!("Syntax error: token recognition error at: '{rest}'"))?;
            let value = &rest[1..1 + end];
            if value.contains(['\\', '\n']) {
                return Err(format!(
                    "Syntax error: unsupported string literal {}",
                    &rest[..end + 2]
                ));
            }
            tokens.push(Token::String(value.to_string()));
            at += end + 2;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let len = rest
                .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
                .unwrap_or(rest.len());
            tokens.push(match &rest[..len] {
                "true" | "false" => Token::Number(Literal::Bool),
                "null" => Token::Number(Literal::Null),
                name => Token::Ident(name.to_string()),
            });
            at += len;
        } else if c.is_ascii_digit() {
            let len = rest
                .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '.'))
                .unwrap_or(rest.len());
            let number = &rest[..len];
            let literal = if number.ends_with(['u', 'U']) {
                Literal::Uint
            } else if number.contains(['.', 'e', 'E']) && !number.starts_with("0x") {
                Literal::Double
            } else {
                Literal::Int
            };
            tokens.push(Token::Number(literal));
            at += len;
        } else if let Some(symbol) = SYMBOLS.iter().find(|s| rest.starts_with(**s)) {
            tokens.push(Token::Symbol(symbol));
            at += symbol.len();
        } else {
            let ch = rest.chars().next().unwrap_or_default();
            return Err(format!("Syntax error: token recognition error at: '{ch}'"));
        }
    }
    Ok(tokens)
}

/// A recursive-descent parser over CEL's precedence: `||` below `&&`
/// below the relations below the unary operators below selection and
/// calls.
struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn eat(&mut self, symbol: &str) -> bool {
        if matches!(self.peek(), Some(Token::Symbol(s)) if *s == symbol) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, symbol: &str) -> Result<(), String> {
        if self.eat(symbol) {
            return Ok(());
        }
        Err(match self.peek() {
            Some(token) => format!("Syntax error: mismatched input {token} expecting '{symbol}'"),
            None => format!("Syntax error: mismatched input '<EOF>' expecting '{symbol}'"),
        })
    }

    fn binary(
        &mut self,
        operators: &[(&'static str, &'static str)],
        next: fn(&mut Self) -> Result<Expr, String>,
    ) -> Result<Expr, String> {
        let mut left = next(self)?;
        'more: loop {
            for (symbol, function) in operators {
                if self.eat(symbol) {
                    let right = next(self)?;
                    left = Expr::Call {
                        function: (*function).to_string(),
                        args: vec![left, right],
                    };
                    continue 'more;
                }
            }
            return Ok(left);
        }
    }

    fn or(&mut self) -> Result<Expr, String> {
        self.binary(&[("||", "_||_")], Self::and)
    }

    fn and(&mut self) -> Result<Expr, String> {
        self.binary(&[("&&", "_&&_")], Self::relation)
    }

    fn relation(&mut self) -> Result<Expr, String> {
        self.binary(
            &[
                ("==", "_==_"),
                ("!=", "_!=_"),
                ("<=", "_<=_"),
                (">=", "_>=_"),
                ("<", "_<_"),
                (">", "_>_"),
            ],
            Self::unary,
        )
    }

    fn unary(&mut self) -> Result<Expr, String> {
        for (symbol, function) in [("!", "!_"), ("-", "-_")] {
            if self.eat(symbol) {
                let operand = self.unary()?;
                return Ok(Expr::Call {
                    function: function.to_string(),
                    args: vec![operand],
                });
            }
        }
        self.member()
    }

    fn member(&mut self) -> Result<Expr, String> {
        let mut expr = self.primary()?;
        while self.eat(".") {
            match self.tokens.get(self.at).cloned() {
                Some(Token::Ident(field)) => {
                    self.at += 1;
                    if self.peek() == Some(&Token::Symbol("(")) {
                        return Err(format!("Syntax error: unsupported member call .{field}()"));
                    }
                    expr = Expr::Select {
                        operand: Box::new(expr),
                        field,
                    };
                }
                Some(token) => {
                    return Err(format!(
                        "Syntax error: mismatched input {token} expecting IDENTIFIER"
                    ));
                }
                None => {
                    return Err(
                        "Syntax error: mismatched input '<EOF>' expecting IDENTIFIER".into(),
                    );
                }
            }
        }
        Ok(expr)
    }

    fn primary(&mut self) -> Result<Expr, String> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        match token {
            Some(Token::Symbol("(")) => {
                let expr = self.or()?;
                self.expect(")")?;
                Ok(expr)
            }
            Some(Token::Ident(name)) => {
                if !self.eat("(") {
                    return Ok(Expr::Ident(name));
                }
                let mut args = Vec::new();
                if !self.eat(")") {
                    loop {
                        args.push(self.or()?);
                        if self.eat(")") {
                            break;
                        }
                        self.expect(",")?;
                    }
                }
                Ok(Expr::Call {
                    function: name,
                    args,
                })
            }
            Some(Token::String(value)) => Ok(Expr::Literal(Literal::String(value))),
            Some(Token::Number(literal)) => Ok(Expr::Literal(literal)),
            Some(token) => Err(format!("Syntax error: extraneous input {token}")),
            None => Err("Syntax error: mismatched input '<EOF>'".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(function: &str, args: Vec<Expr>) -> Expr {
        Expr::Call {
            function: function.into(),
            args,
        }
    }

    #[test]
    fn operators_become_calls_of_cel_s_function_names_with_its_precedence() {
        let ident = |name: &str| Expr::Ident(name.into());
        assert_eq!(
            parse("a || b && !c").unwrap(),
            call(
                "_||_",
                vec![
                    ident("a"),
                    call("_&&_", vec![ident("b"), call("!_", vec![ident("c")])])
                ]
            )
        );
        assert_eq!(
            parse("(o.m > '0x0')").unwrap(),
            call(
                "_>_",
                vec![
                    Expr::Select {
                        operand: Box::new(ident("o")),
                        field: "m".into()
                    },
                    Expr::Literal(Literal::String("0x0".into()))
                ]
            )
        );
        assert_eq!(
            parse("f(1, 2u, 1.5, \"s\", null, true)").unwrap(),
            call(
                "f",
                vec![
                    Expr::Literal(Literal::Int),
                    Expr::Literal(Literal::Uint),
                    Expr::Literal(Literal::Double),
                    Expr::Literal(Literal::String("s".into())),
                    Expr::Literal(Literal::Null),
                    Expr::Literal(Literal::Bool),
                ]
            )
        );
    }

    #[test]
    fn what_is_not_cel_or_not_read_here_is_a_syntax_error() {
        for text in [
            "f(", "'open", "a b", "a.", "a + b", "[1]", "a.f()", "'\\x30'",
        ] {
            let error = parse(text).unwrap_err();
            assert!(error.starts_with("Syntax error: "), "{text}: {error}");
        }
    }
}
