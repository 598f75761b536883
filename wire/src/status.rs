//! The Kubernetes `Status` object: the body of every API error.
//!
//! Field order and spelling follow what a real kube-apiserver writes (see
//! `shared/APISERVER-PROTOCOL.md`), e.g.
//! `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"…","reason":"Expired","code":410}`,
//! so the simulated API server and kubecache answer byte for byte like it.

use serde::{Deserialize, Serialize};

/// A `meta.k8s.io/v1` `Status` with `status: Failure` (or `Success`, for deletes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// Always `Status`.
    pub kind: String,
    /// Always `v1`.
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// List metadata; only `continue` is ever set (the inconsistent-continue 410).
    pub metadata: StatusMetadata,
    /// `Failure` or `Success`.
    pub status: String,
    /// A human-readable description of what went wrong.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The machine-readable reason (`Expired`, `NotFound`, `BadRequest`, ...).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The object the error is about and, for `Invalid`, the causes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    /// The HTTP status code.
    pub code: u16,
}

/// `metadata` of a `Status`: empty except for the continue token of an expired list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusMetadata {
    /// A token that continues the list at the current revision (inconsistently).
    #[serde(default, rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

/// `details` of a `Status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusDetails {
    /// Name of the object concerned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// API group of the object concerned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// Resource (plural) of the object concerned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Field-level causes of an `Invalid` error.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
    /// Seconds a client should wait before retrying (429, some 5xx).
    #[serde(
        default,
        rename = "retryAfterSeconds",
        skip_serializing_if = "Option::is_none"
    )]
    pub retry_after_seconds: Option<u32>,
}

/// One cause in `details.causes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCause {
    /// `FieldValueForbidden`, `FieldValueNotSupported`, `FieldValueInvalid`, ...
    pub reason: String,
    /// Human-readable message for this cause.
    pub message: String,
    /// The field concerned, e.g. `resourceVersionMatch`; left out when
    /// none is (`ResourceVersionTooLarge`), as the API server leaves it out.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field: String,
}

impl Status {
    /// A failure with the given code, reason and message.
    pub fn failure(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Status {
            kind: "Status".into(),
            api_version: "v1".into(),
            metadata: StatusMetadata::default(),
            status: "Failure".into(),
            message: message.into(),
            reason: reason.into(),
            details: None,
            code,
        }
    }

    /// 410 `Expired`: a resourceVersion or continue token older than the history.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::failure(410, "Expired", message)
    }

    /// 400 `BadRequest`: malformed input, e.g. a selector that does not parse.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::failure(400, "BadRequest", message)
    }

    /// 401 `Unauthorized`, as kube-apiserver answers a credential that
    /// does not authenticate (a token it does not know, a client
    /// certificate that does not verify).
    pub fn unauthorized() -> Self {
        Self::failure(401, "Unauthorized", "Unauthorized")
    }

    /// 405 `MethodNotAllowed` as kube-apiserver's router answers a method a
    /// resource path does not take (`HEAD`, `OPTIONS`, a `PUT` of a
    /// collection), after authorization.
    pub fn method_not_allowed() -> Self {
        let mut status = Self::failure(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        );
        status.details = Some(StatusDetails::default());
        status
    }

    /// 404 `NotFound` for one object, e.g. `pods "web-1" not found`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        let message = format!("{resource} \"{name}\" not found");
        Self::about_object(404, "NotFound", message, group, resource, name)
    }

    /// 409 `AlreadyExists` for one object.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        let message = format!("{resource} \"{name}\" already exists");
        Self::about_object(409, "AlreadyExists", message, group, resource, name)
    }

    /// 409 `Conflict`: a write whose resourceVersion precondition failed.
    pub fn conflict(group: &str, resource: &str, name: &str) -> Self {
        let qualified = if group.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}.{group}")
        };
        let message = format!(
            "Operation cannot be fulfilled on {qualified} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
        );
        Self::about_object(409, "Conflict", message, group, resource, name)
    }

    /// 504 `Timeout` for a read at a resourceVersion the server has not
    /// reached in time, as kube-apiserver's watch cache answers
    /// (`storage.NewTooLargeResourceVersionError`, whose
    /// `errors.NewTimeoutError` prefixes `Timeout: `); clients retry after a
    /// second.
    pub fn too_large_resource_version(wanted: u64, current: u64) -> Self {
        let mut status = Self::failure(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {wanted}, current: {current}"),
        );
        status.details = Some(StatusDetails {
            causes: vec![StatusCause {
                reason: "ResourceVersionTooLarge".into(),
                message: "Too large resource version".into(),
                field: String::new(),
            }],
            retry_after_seconds: Some(1),
            ..StatusDetails::default()
        });
        status
    }

    /// A failure whose details name the object it is about.
    fn about_object(
        code: u16,
        reason: &str,
        message: String,
        group: &str,
        resource: &str,
        name: &str,
    ) -> Self {
        let mut status = Self::failure(code, reason, message);
        status.details = Some(StatusDetails {
            name: name.into(),
            group: group.into(),
            kind: resource.into(),
            ..StatusDetails::default()
        });
        status
    }

    /// 422 `Invalid` with one cause, as the API server answers bad parameter
    /// combinations: `invalid("meta.k8s.io", "ListOptions", "FieldValueForbidden",
    /// "resourceVersionMatch", "Forbidden: ...")`.
    pub fn invalid(
        group: &str,
        kind: &str,
        cause_reason: &str,
        field: &str,
        detail: impl Into<String>,
    ) -> Self {
        let detail = detail.into();
        let mut status = Self::failure(
            422,
            "Invalid",
            format!("{kind}.{group} \"\" is invalid: {field}: {detail}"),
        );
        status.details = Some(StatusDetails {
            group: group.into(),
            kind: kind.into(),
            causes: vec![StatusCause {
                reason: cause_reason.into(),
                message: detail,
                field: field.into(),
            }],
            ..StatusDetails::default()
        });
        status
    }

    /// 429 `TooManyRequests` with `Retry-After` seconds in the details.
    pub fn too_many_requests(retry_after_seconds: u32) -> Self {
        Self::failure(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.",
        )
        .retry_after(retry_after_seconds)
    }

    /// 503 `ServiceUnavailable`, to be retried in a second: what kubecache
    /// answers when it cannot serve a request yet (not synced, the API
    /// server unreachable).
    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Self::failure(503, "ServiceUnavailable", message).retry_after(1)
    }

    /// This Status saying when to retry: `retryAfterSeconds` in its
    /// details, which a server also sends as `Retry-After`.
    pub fn retry_after(mut self, seconds: u32) -> Self {
        self.details
            .get_or_insert_with(StatusDetails::default)
            .retry_after_seconds = Some(seconds);
        self
    }

    /// 500 `InternalError`.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::failure(500, "InternalError", message)
    }

    /// The JSON body, as the API server writes it (its strings escaped as
    /// Go escapes them: a message may quote a request).
    pub fn to_json(&self) -> Vec<u8> {
        let mut json = Vec::new();
        crate::go_json::write(&mut json, self).expect("a Status always serializes");
        json
    }

    /// The protobuf body: `k8s\0` + `runtime.Unknown` around the `Status`
    /// message, as the API server answers a client that asked for protobuf.
    pub fn to_protobuf(&self) -> Vec<u8> {
        let ty = crate::protobuf::message_type("v1", "Status").expect("Status has a protobuf type");
        let raw = crate::protobuf::json_to_proto(ty, &self.to_json())
            .expect("a Status always encodes as protobuf");
        crate::protobuf::encode_unknown("v1", "Status", &raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expired_status_is_byte_for_byte_what_the_api_server_sends() {
        let body = Status::expired("too old resource version: 1700 (24223)").to_json();
        assert_eq!(
            String::from_utf8(body).unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1700 (24223)","reason":"Expired","code":410}"#
        );
    }

    #[test]
    fn too_large_resource_version_is_byte_for_byte_what_the_api_server_sends() {
        let recorded = kubecache_testkit::golden::read("errors/rv-too-large.json");
        let mut body = Status::too_large_resource_version(999_999_999, 95230).to_json();
        body.push(b'\n'); // what Go's JSON encoder ends a body with
        assert_eq!(
            String::from_utf8(body).unwrap(),
            String::from_utf8(recorded).unwrap()
        );
    }

    #[test]
    fn a_message_quoting_a_request_is_escaped_as_go_escapes_it() {
        let body = Status::bad_request("unable to parse requirement: \"a<b&c\"\u{8}").to_json();
        assert!(
            String::from_utf8(body)
                .unwrap()
                .contains(r#""message":"unable to parse requirement: \"a\u003cb\u0026c\"\u0008","#)
        );
    }

    #[test]
    fn invalid_status_names_the_field_and_the_cause() {
        let status = Status::invalid(
            "meta.k8s.io",
            "ListOptions",
            "FieldValueForbidden",
            "resourceVersionMatch",
            "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        );
        let json: serde_json::Value = serde_json::from_slice(&status.to_json()).unwrap();
        assert_eq!(json["code"], 422);
        assert_eq!(json["reason"], "Invalid");
        assert_eq!(
            json["details"]["causes"][0]["field"],
            "resourceVersionMatch"
        );
        assert_eq!(
            json["message"],
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
        );
    }
}
