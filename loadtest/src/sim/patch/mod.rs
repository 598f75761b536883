//! The four ways kube-apiserver patches an object, on JSON values: JSON
//! merge patch (RFC 7386), JSON patch (RFC 6902), strategic merge patch
//! (built-in kinds only) and server-side apply. Each maps its failures to
//! the Status kube-apiserver answers.

mod apply;
mod json_patch;
mod schema;
mod strategic;

use kubecache_wire::{Status, StatusCause, StatusDetails};
use serde_json::{Value, json};

pub use apply::apply;
pub use json_patch::json_patch;
pub use schema::Schema;
pub use strategic::strategic_merge;

/// A patch's `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`.
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml`.
    Apply,
}

impl PatchType {
    /// The patch types of a resource, in the order kube-apiserver lists
    /// them in its 415: custom resources have no strategic merge patch.
    pub fn accepted(builtin: bool) -> &'static [PatchType] {
        if builtin {
            &[
                PatchType::Json,
                PatchType::Merge,
                PatchType::Strategic,
                PatchType::Apply,
            ]
        } else {
            &[PatchType::Json, PatchType::Merge, PatchType::Apply]
        }
    }

    /// The media type.
    pub fn media_type(self) -> &'static str {
        match self {
            PatchType::Json => "application/json-patch+json",
            PatchType::Merge => "application/merge-patch+json",
            PatchType::Strategic => "application/strategic-merge-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }

    /// The patch type of a `Content-Type` (parameters ignored) among the
    /// accepted ones; else kube-apiserver's 415.
    pub fn of(content_type: Option<&str>, builtin: bool) -> Result<PatchType, Status> {
        let media = content_type
            .unwrap_or_default()
            .split(';')
            .next()
            .unwrap_or_default()
            .trim();
        let accepted = PatchType::accepted(builtin);
        accepted
            .iter()
            .copied()
            .find(|t| t.media_type() == media)
            .ok_or_else(|| {
                let listed: Vec<&str> = accepted.iter().map(|t| t.media_type()).collect();
                unsupported_media_type(&listed)
            })
    }
}

/// 415 for a body in a type the endpoint does not take.
pub fn unsupported_media_type(accepted: &[&str]) -> Status {
    Status::failure(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: {}",
            accepted.join(", ")
        ),
    )
}

/// RFC 7386 JSON merge patch: objects merge, `null` removes, anything else
/// replaces.
pub fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let Value::Object(map) = target else {
        return;
    };
    for (key, value) in patch {
        if value.is_null() {
            map.shift_remove(key);
        } else {
            merge(map.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// The 422 kube-apiserver answers when a patch does not apply
/// (`NewGenericServerResponse(422, ...)` with the patch library's error as
/// the cause).
fn unprocessable(cause: String) -> Status {
    let mut status = Status::failure(
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
    );
    status.details = Some(StatusDetails {
        causes: vec![StatusCause {
            reason: "UnexpectedServerResponse".into(),
            message: cause,
            field: String::new(),
        }],
        ..StatusDetails::default()
    });
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_patches_merge_objects_and_remove_nulls() {
        let mut doc = json!({"a": {"b": 1, "c": 2}, "l": [1, 2]});
        merge(&mut doc, &json!({"a": {"b": null, "d": 3}, "l": [3]}));
        assert_eq!(doc, json!({"a": {"c": 2, "d": 3}, "l": [3]}));
    }

    #[test]
    fn custom_resources_refuse_strategic_merge_patches_with_a_415() {
        assert_eq!(
            PatchType::of(Some("application/merge-patch+json; charset=utf-8"), false),
            Ok(PatchType::Merge)
        );
        let status =
            PatchType::of(Some("application/strategic-merge-patch+json"), false).unwrap_err();
        assert_eq!(status.code, 415);
        assert_eq!(
            status.message,
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
        );
        assert_eq!(
            PatchType::of(None, true).unwrap_err().code,
            415,
            "a patch needs a content type"
        );
    }
}
