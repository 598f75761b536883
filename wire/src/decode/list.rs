//! [`parse_list`]: the envelope of a list response, items left as bytes.

use super::DecodeError;
use super::object::parse_resource_version;
use crate::Status;
use crate::scan::{Scanner, Span, unescape};

/// One page of a list response (`{"kind":"PodList","metadata":{…},"items":[…]}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListBody<'a> {
    /// `metadata.resourceVersion`: the snapshot the page was read at (the
    /// same on every page of one list).
    pub resource_version: u64,
    /// `metadata.continue`: the token for the next page; `None` on the last
    /// page (absent or empty).
    pub continue_token: Option<String>,
    /// `metadata.remainingItemCount`: how many items the next pages hold, when
    /// the server knows.
    pub remaining_item_count: Option<u64>,
    /// Each item's bytes, in list order (`namespace/name`), not decoded; hand
    /// them to [`decode_object`](super::decode_object).
    pub items: Vec<&'a [u8]>,
}

/// Reads the envelope of a list response and the extent of each item.
///
/// The whole body is validated (an item with bad JSON fails the page), but
/// items are only skipped over, not decoded. A body whose `kind` is `Status`
/// is returned as [`DecodeError::Status`]. `metadata.resourceVersion` and
/// `items` are required (`"items":null` is an empty page); `kind` and
/// `apiVersion` are not checked otherwise.
pub fn parse_list(body: &[u8]) -> Result<ListBody<'_>, DecodeError> {
    parse(body).map_err(|e| e.locate(body))
}

fn parse(body: &[u8]) -> Result<ListBody<'_>, DecodeError> {
    let mut sc = Scanner::new(body);
    sc.skip_ws();
    sc.enter_object(1)?;
    let mut resource_version = None;
    let mut continue_token = None;
    let mut remaining_item_count = None;
    let mut items = None;
    let mut first = true;
    while let Some(key) = sc.next_key(&mut first)? {
        match &*key.name(body)? {
            b"kind" => {
                let span = sc.skip_value(1)?;
                if body[span.start] == b'"' && unescape(body, span)? == "Status" {
                    let status: Status = serde_json::from_slice(body).map_err(|e| {
                        DecodeError::invalid(
                            "kind",
                            span.start,
                            format!("the body is a Status that does not decode: {e}"),
                        )
                    })?;
                    return Err(DecodeError::Status {
                        expected: "a list",
                        status: Box::new(status),
                    });
                }
            }
            b"metadata" if sc.peek()? == b'{' => {
                sc.enter_object(2)?;
                let mut first = true;
                while let Some(key) = sc.next_key(&mut first)? {
                    let span = sc.skip_value(2)?;
                    match &*key.name(body)? {
                        b"resourceVersion" => {
                            let text = string(body, span, "metadata.resourceVersion")?;
                            resource_version =
                                Some(parse_resource_version(&text).ok_or_else(|| {
                                    DecodeError::invalid(
                                        "metadata.resourceVersion",
                                        span.start,
                                        format!("expected a decimal number, got {text:?}"),
                                    )
                                })?);
                        }
                        b"continue" if body[span.start] != b'n' => {
                            let text = string(body, span, "metadata.continue")?;
                            continue_token = (!text.is_empty()).then_some(text);
                        }
                        b"remainingItemCount" if body[span.start] != b'n' => {
                            let text =
                                std::str::from_utf8(&body[span.start..span.end]).unwrap_or("");
                            remaining_item_count = Some(text.parse().map_err(|_| {
                                DecodeError::invalid(
                                    "metadata.remainingItemCount",
                                    span.start,
                                    format!("expected a count, got {text}"),
                                )
                            })?);
                        }
                        _ => {}
                    }
                }
            }
            b"items" => match sc.peek()? {
                b'[' => {
                    sc.enter_array(2)?;
                    let mut list = Vec::new();
                    let mut first = true;
                    while sc.next_element(&mut first)? {
                        if sc.peek()? != b'{' {
                            return Err(DecodeError::invalid(
                                format!("items[{}]", list.len()),
                                sc.pos(),
                                "expected an object",
                            ));
                        }
                        let span = sc.skip_value(2)?;
                        list.push(&body[span.start..span.end]);
                    }
                    items = Some(list);
                }
                b'n' => {
                    sc.skip_value(1)?;
                    items = Some(Vec::new());
                }
                _ => {
                    return Err(DecodeError::invalid("items", sc.pos(), "expected an array"));
                }
            },
            _ => {
                sc.skip_value(1)?;
            }
        }
    }
    sc.finish()?;
    Ok(ListBody {
        resource_version: resource_version.ok_or(DecodeError::Missing {
            path: "metadata.resourceVersion",
        })?,
        continue_token,
        remaining_item_count,
        items: items.ok_or(DecodeError::Missing { path: "items" })?,
    })
}

/// The text of a string value; anything else is an error naming `path`.
fn string(body: &[u8], span: Span, path: &str) -> Result<String, DecodeError> {
    if body[span.start] != b'"' {
        return Err(DecodeError::invalid(path, span.start, "expected a string"));
    }
    Ok(unescape(body, span)?.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_page_has_a_continue_token_and_a_remaining_item_count() {
        let body = br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"23723","continue":"eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MjM3MjN9","remainingItemCount":23401},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b","labels":{"x":"]}"}}}]}"#;
        let list = parse_list(body).unwrap();
        assert_eq!(list.resource_version, 23723);
        assert_eq!(
            list.continue_token.as_deref(),
            Some("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MjM3MjN9")
        );
        assert_eq!(list.remaining_item_count, Some(23401));
        assert_eq!(
            list.items,
            [
                &br#"{"metadata":{"name":"a"}}"#[..],
                br#"{"metadata":{"name":"b","labels":{"x":"]}"}}}"#
            ]
        );
    }

    #[test]
    fn the_last_page_has_neither_continue_nor_remaining_item_count() {
        let body = br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"a"}}]}"#;
        let list = parse_list(body).unwrap();
        assert_eq!(
            (
                list.resource_version,
                list.continue_token,
                list.remaining_item_count
            ),
            (7, None, None)
        );
        assert_eq!(list.items.len(), 1);
        let body = br#"{"metadata":{"resourceVersion":"7","continue":"","remainingItemCount":null},"items":[]}"#;
        let list = parse_list(body).unwrap();
        assert_eq!(
            (list.continue_token, list.remaining_item_count),
            (None, None)
        );
    }

    #[test]
    fn an_empty_list_has_no_items_whether_empty_or_null() {
        for body in [
            &br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}"#[..],
            br#" { "metadata" : { "resourceVersion" : "1" } , "items" : null } "#,
            b"{\"items\":[ ],\n\"metadata\":{\"resourceVersion\":\"1\"}}\n",
        ] {
            let list = parse_list(body).unwrap();
            assert_eq!((list.resource_version, list.items.len()), (1, 0));
        }
    }

    #[test]
    fn a_status_body_is_an_error_carrying_the_status() {
        let body = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"The resourceVersion for the provided list is too old.","reason":"Expired","code":410}"#;
        match parse_list(body) {
            Err(DecodeError::Status { status, .. }) => {
                assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn garbage_and_missing_fields_are_errors_that_say_what_is_wrong() {
        for (body, message) in [
            (
                &b""[..],
                "malformed JSON at byte 0: unexpected end of input",
            ),
            (b"<html>", "malformed JSON at byte 0: expected an object"),
            (b"[]", "malformed JSON at byte 0: expected an object"),
            (br#"{"items":[]}"#, "missing `metadata.resourceVersion`"),
            (
                br#"{"metadata":{"resourceVersion":"1"}}"#,
                "missing `items`",
            ),
            (
                br#"{"metadata":{"resourceVersion":"12a"},"items":[]}"#,
                r#"invalid `metadata.resourceVersion` at byte 31: expected a decimal number, got "12a""#,
            ),
            (
                br#"{"metadata":{"resourceVersion":12},"items":[]}"#,
                "invalid `metadata.resourceVersion` at byte 31: expected a string",
            ),
            (
                br#"{"metadata":{"resourceVersion":"1","remainingItemCount":-3},"items":[]}"#,
                "invalid `metadata.remainingItemCount` at byte 56: expected a count, got -3",
            ),
            (
                br#"{"metadata":{"resourceVersion":"1"},"items":[{},1]}"#,
                "invalid `items[1]` at byte 48: expected an object",
            ),
            (
                br#"{"metadata":{"resourceVersion":"1"},"items":{}}"#,
                "invalid `items` at byte 44: expected an array",
            ),
            (
                br#"{"metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":"a"}}"#,
                "malformed JSON at byte 70 (in `items`): unexpected end of input",
            ),
            (
                br#"{"metadata":{"resourceVersion":"1"},"items":[]} x"#,
                "malformed JSON at byte 48: trailing characters after the JSON value",
            ),
        ] {
            let err = parse_list(body).expect_err(&String::from_utf8_lossy(body));
            assert_eq!(
                err.to_string(),
                message,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
