//! Edits and lookups on an object's raw JSON that keep every other byte:
//! the resourceVersion re-stamped, the `metadata` object found. Built on
//! the [`Scanner`]; below both the decoder and the objects.

use std::ops::ControlFlow;

use crate::DecodeError;
use crate::scan::{Scanner, Span};

/// `raw` with its `metadata.resourceVersion` replaced by `rv`, every other
/// byte kept: how a DELETED event carries the object's last state at the
/// deletion's revision. The entry is found by scanning, wherever `metadata`
/// and the key stand. `None` when `raw` has no string
/// `metadata.resourceVersion` (or is malformed before it).
pub fn with_resource_version(raw: &[u8], rv: u64) -> Option<Vec<u8>> {
    let mut found = None;
    visit_metadata(raw, |key, span| {
        if key == b"resourceVersion" && raw.get(span.start) == Some(&b'"') {
            found = Some(span);
            return Ok(ControlFlow::Break(()));
        }
        Ok(ControlFlow::Continue(()))
    })
    .ok()?;
    let span = found?;
    let mut out = Vec::with_capacity(raw.len() + 8);
    out.extend_from_slice(&raw[..span.start]);
    out.extend_from_slice(format!("\"{rv}\"").as_bytes());
    out.extend_from_slice(&raw[span.end..]);
    Some(out)
}

/// Where the top-level `metadata` object of `raw` lies (its braces
/// included), found by scanning up to it; `None` when `raw` has no
/// `metadata` object (or is malformed before it).
pub(crate) fn metadata_span(raw: &[u8]) -> Option<std::ops::Range<usize>> {
    let mut sc = Scanner::new(raw);
    sc.skip_ws();
    sc.enter_object(1).ok()?;
    let mut first = true;
    while let Some(key) = sc.next_key(&mut first).ok()? {
        let is_metadata = &*key.name(raw).ok()? == b"metadata";
        let span = sc.skip_value(1).ok()?;
        if is_metadata && raw.get(span.start) == Some(&b'{') {
            return Some(span.start..span.end);
        }
    }
    None
}

/// Calls `visit` with the name and value span of each entry of the
/// top-level `metadata` object of `raw`, until it breaks; the rest of the
/// document is not read.
pub(crate) fn visit_metadata(
    raw: &[u8],
    mut visit: impl FnMut(&[u8], Span) -> Result<ControlFlow<()>, DecodeError>,
) -> Result<(), DecodeError> {
    let mut sc = Scanner::new(raw);
    sc.skip_ws();
    sc.enter_object(1)?;
    let mut first = true;
    while let Some(key) = sc.next_key(&mut first)? {
        if &*key.name(raw)? == b"metadata" && sc.peek()? == b'{' {
            sc.enter_object(2)?;
            let mut first = true;
            while let Some(key) = sc.next_key(&mut first)? {
                let span = sc.skip_value(2)?;
                if visit(&key.name(raw)?, span)?.is_break() {
                    break;
                }
            }
            return Ok(());
        }
        sc.skip_value(1)?;
    }
    Ok(())
}
