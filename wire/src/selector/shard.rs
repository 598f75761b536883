//! Shard selectors (KEP-5866, `ListOptions.shardSelector`): which slice of
//! a collection a list or watch asks for, by hash range.
//!
//! ```text
//! shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')
//!   || shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')
//! ```
//!
//! An object is selected when the 64-bit FNV-1a hash of the field's string
//! value ([`fnv1a_64`], Go's `hash/fnv` `New64a`) falls in one of the
//! ranges, each `[start, end)`. The field is `object.metadata.uid` or
//! `object.metadata.namespace` (the empty string for a cluster-scoped
//! object), the same in every range. Both are immutable, so an object never
//! moves between shards.
//!
//! Parsed and refused as kube-apiserver v1.36 does
//! (`k8s.io/apiserver/pkg/sharding`, `k8s.io/apimachinery/pkg/sharding`):
//! - the expression is CEL, of which only `shardRange(path, start, end)`
//!   calls joined by `||` are allowed (see [`expression`] for the part of
//!   CEL read here);
//! - a bound is a string literal: `0x` and exactly 16 lowercase hex digits,
//!   or `0x10000000000000000` (2^64) — a shorter one is refused with the
//!   16-digit spelling it meant (bounds are never padded silently), and
//!   `start` must be below `end`;
//! - whitespace around the expression is ignored; an expression of nothing
//!   but whitespace is refused (the empty parameter is no selector at all).
//!
//! Every refusal is the 400 `BadRequest` whose message is the parser's
//! error after `invalid shard selector: `, the prefix apimachinery's
//! `ListOptions` conversion adds. The messages of the structural refusals
//! (function, arity, field path, bounds, mixed fields) are kube-apiserver's
//! word for word; CEL's own syntax errors are `CEL parse error: Syntax
//! error: ...` in words of this parser, not cel-go's.
//!
//! The selector's [`Display`](std::fmt::Display) is its canonical form,
//! `shardRange(<path>, '<start>', '<end>')` joined by ` || `: what a list
//! answered under it echoes in `metadata.shardInfo.selector`.

mod expression;

use std::fmt;

use expression::{Expr, Literal};

use super::SelectorError;
use super::go_quote;

/// The field a shard selector hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShardField {
    /// `object.metadata.uid`.
    Uid,
    /// `object.metadata.namespace`.
    Namespace,
}

impl ShardField {
    /// The CEL path of the field.
    pub fn path(self) -> &'static str {
        match self {
            ShardField::Uid => "object.metadata.uid",
            ShardField::Namespace => "object.metadata.namespace",
        }
    }

    /// The hash of this field of an object with `uid` in `namespace`.
    pub fn hash(self, uid: &str, namespace: &str) -> u64 {
        fnv1a_64(match self {
            ShardField::Uid => uid.as_bytes(),
            ShardField::Namespace => namespace.as_bytes(),
        })
    }
}

/// One range of hashes, `[start, end)`; `end` may be 2^64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShardRange {
    start: u64,
    end: u128,
}

/// 2^64, the upper bound of the whole hash space.
const FULL: u128 = 1 << 64;

impl ShardRange {
    /// `[start, end)`; `None` unless `start < end <= 2^64`.
    pub fn new(start: u64, end: u128) -> Option<Self> {
        (u128::from(start) < end && end <= FULL).then_some(ShardRange { start, end })
    }

    /// The inclusive lower bound.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// The exclusive upper bound (2^64 for the top of the space).
    pub fn end(&self) -> u128 {
        self.end
    }

    /// Whether `hash` is in the range.
    pub fn contains(&self, hash: u64) -> bool {
        hash >= self.start && u128::from(hash) < self.end
    }
}

impl fmt::Display for ShardRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "'0x{:016x}', '0x{:016x}'", self.start, self.end)
    }
}

/// A parsed `shardSelector`: a field and the ranges of its hash selected.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShardSelector {
    field: ShardField,
    ranges: Box<[ShardRange]>,
}

impl ShardSelector {
    /// Parses and validates a `shardSelector` as kube-apiserver does.
    ///
    /// # Errors
    ///
    /// kube-apiserver's message for the first fault (see the module doc).
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        parse(text).map_err(|why| SelectorError::new(format!("invalid shard selector: {why}")))
    }

    /// A selector of `ranges` of `field` (at least one range).
    pub fn new(field: ShardField, ranges: Vec<ShardRange>) -> Self {
        assert!(!ranges.is_empty(), "a shard selector has a range");
        ShardSelector {
            field,
            ranges: ranges.into(),
        }
    }

    /// The selectors of `count` contiguous ranges of equal width that
    /// together cover the hash space: the shards of a controller with
    /// `count` replicas, in order.
    pub fn equal_split(field: ShardField, count: usize) -> Vec<Self> {
        assert!(count > 0, "at least one shard");
        let bound = |i: usize| FULL * i as u128 / count as u128;
        (0..count)
            .map(|i| {
                let start = u64::try_from(bound(i)).expect("below 2^64");
                let range = ShardRange::new(start, bound(i + 1)).expect("a range of the space");
                ShardSelector::new(field, vec![range])
            })
            .collect()
    }

    /// The field hashed.
    pub fn field(&self) -> ShardField {
        self.field
    }

    /// The ranges, in the order written.
    pub fn ranges(&self) -> &[ShardRange] {
        &self.ranges
    }

    /// Whether a hash of the field is selected.
    pub fn contains(&self, hash: u64) -> bool {
        self.ranges.iter().any(|range| range.contains(hash))
    }

    /// Whether the object with `uid` in `namespace` is selected.
    pub fn matches(&self, uid: &str, namespace: &str) -> bool {
        self.contains(self.field.hash(uid, namespace))
    }
}

impl fmt::Display for ShardSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, range) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(" || ")?;
            }
            write!(f, "shardRange({}, {range})", self.field.path())?;
        }
        Ok(())
    }
}

/// 64-bit FNV-1a of `bytes`, as Go's `hash/fnv` `New64a` computes it.
pub fn fnv1a_64(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes.iter().fold(OFFSET, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(PRIME)
    })
}

/// kube-apiserver's `sharding.Parse`, with its error texts.
fn parse(text: &str) -> Result<ShardSelector, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err(
            "empty shard selector is not allowed; omit the parameter for unfiltered lists".into(),
        );
    }
    let expr = expression::parse(text).map_err(|why| format!("CEL parse error: {why}"))?;
    let mut requirements = Vec::new();
    walk(&expr, &mut requirements)?;
    let (field, _) = requirements[0];
    if let Some((other, _)) = requirements.iter().find(|(f, _)| *f != field) {
        return Err(format!(
            "all shard ranges must use the same field, got {} and {}",
            go_quote(field.path()),
            go_quote(other.path())
        ));
    }
    Ok(ShardSelector::new(
        field,
        requirements.into_iter().map(|(_, range)| range).collect(),
    ))
}

/// The `shardRange` calls of `expr`, left to right: `expr` must be one, or
/// `||` of such expressions.
fn walk(expr: &Expr, out: &mut Vec<(ShardField, ShardRange)>) -> Result<(), String> {
    let Expr::Call { function, args } = expr else {
        return Err(format!(
            "unexpected expression kind {}; expected shardRange() call or || operator",
            expr.kind()
        ));
    };
    match function.as_str() {
        "_||_" => {
            walk(&args[0], out)?;
            walk(&args[1], out)
        }
        "shardRange" => {
            out.push(shard_range(args)?);
            Ok(())
        }
        other => Err(format!(
            "unsupported function {}; only shardRange() and || are allowed",
            go_quote(other)
        )),
    }
}

/// One `shardRange(path, start, end)` call's arguments.
fn shard_range(args: &[Expr]) -> Result<(ShardField, ShardRange), String> {
    let [path, start, end] = args else {
        return Err(format!(
            "shardRange() requires exactly 3 arguments, got {}",
            args.len()
        ));
    };
    let path = field_path(path).map_err(|why| format!("shardRange() first argument: {why}"))?;
    let field = match path.as_str() {
        "object.metadata.uid" => ShardField::Uid,
        "object.metadata.namespace" => ShardField::Namespace,
        _ => {
            return Err(format!(
                "unsupported field path {}; supported: object.metadata.uid, object.metadata.namespace",
                go_quote(&path)
            ));
        }
    };
    let (start_text, start) = bound(start, "hexStart")?;
    let (end_text, end) = bound(end, "hexEnd")?;
    let range = u64::try_from(start)
        .ok()
        .and_then(|start| ShardRange::new(start, end))
        .ok_or_else(|| {
            format!("shard range start {start_text} must be less than end {end_text}")
        })?;
    Ok((field, range))
}

/// The dotted path of a selection chain (`object.metadata.uid`).
fn field_path(expr: &Expr) -> Result<String, String> {
    match expr {
        Expr::Ident(name) => Ok(name.clone()),
        Expr::Select { operand, field } => Ok(format!("{}.{field}", field_path(operand)?)),
        other => Err(format!(
            "expected field path (e.g. object.metadata.uid), got expression kind {}",
            other.kind()
        )),
    }
}

/// A bound: the literal as written and its value.
fn bound<'e>(expr: &'e Expr, name: &str) -> Result<(&'e str, u128), String> {
    let Expr::Literal(literal) = expr else {
        return Err(format!(
            "{name} must be a string literal (e.g. '0xff'), got expression kind {}",
            expr.kind()
        ));
    };
    let Literal::String(text) = literal else {
        return Err(format!(
            "{name} must be a string literal, got {}",
            literal.go_type()
        ));
    };
    let Some(hex) = text.strip_prefix("0x") else {
        return Err(format!(
            "{name} must have '0x' prefix, got {}",
            go_quote(text)
        ));
    };
    if hex.is_empty() {
        return Err(format!("{name}: hex value is required after '0x'"));
    }
    if hex.len() > 17 {
        return Err(format!(
            "{name}: hex value too long ({} chars, max 17): {}",
            hex.len(),
            go_quote(hex)
        ));
    }
    if let Some(bad) = hex.chars().find(|c| !matches!(c, '0'..='9' | 'a'..='f')) {
        return Err(format!(
            "{name}: invalid hex character {} in {}",
            go_quote(&bad.to_string()),
            go_quote(text)
        ));
    }
    if hex.len() == 17 {
        if hex != "10000000000000000" {
            return Err(format!(
                "{name}: 17-digit hex value must be '0x10000000000000000' (2^64), got {}",
                go_quote(text)
            ));
        }
    } else if hex.len() != 16 {
        return Err(format!(
            "{name} must be a 0x-prefixed 16-digit hex value, got {} (did you mean {}?)",
            go_quote(text),
            go_quote(&format!("0x{hex:0>16}"))
        ));
    }
    let value = u128::from_str_radix(hex, 16).expect("checked hex digits");
    Ok((text, value))
}

#[cfg(test)]
mod tests;
