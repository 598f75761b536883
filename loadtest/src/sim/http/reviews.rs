//! The review APIs, JSON in and out, shaped as the real ones (201, the
//! review with its `status` filled in):
//!
//! - `POST /apis/authentication.k8s.io/v1/tokenreviews`: who a bearer token
//!   is (`status.authenticated`, `status.user`), for the API server's
//!   audience (`https://kubernetes.default.svc.cluster.local`) or the
//!   `spec.audiences` asked that include it;
//! - `POST /apis/authorization.k8s.io/v1/subjectaccessreviews`: whether a
//!   user (exactly the `spec.user`, `groups`, `uid` and `extra` given) may
//!   do what `spec.resourceAttributes` or `spec.nonResourceAttributes`
//!   describe (`status.allowed`, `status.reason`);
//! - `POST /apis/authentication.k8s.io/v1/selfsubjectreviews` (`kubectl
//!   auth whoami`): who the caller is, after impersonation.
//!
//! Without a policy no token is known, everything is allowed and the caller
//! is `system:anonymous`. Faults armed for `tokenReview` or
//! `subjectAccessReview` hit them (after the caller's own authorization,
//! which needs `create` on the review).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Extension, Request, State};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use kubecache_wire::Status;
use serde_json::{Map, Value, json};

use super::{
    Caller, Context, MAX_BODY, body, body_response, fault_for, method_not_allowed, status_response,
};
use crate::sim::auth::{Attributes, ResourceAttributes, UserInfo};
use crate::sim::faults::{self, RequestKind};
use crate::sim::go_json;
use crate::sim::patch::unsupported_media_type;
use crate::sim::store::now_rfc3339;
use kubecache_wire::Encoding;
use kubecache_wire::media::JSON;

/// The audience of the API server's own tokens.
pub const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// `POST .../tokenreviews`.
pub async fn token_review(State(ctx): State<Arc<Context>>, request: Request) -> Response {
    review(
        &ctx,
        request,
        RequestKind::TokenReview,
        "TokenReview",
        |spec| token_status(&ctx, spec),
    )
    .await
}

/// `POST .../subjectaccessreviews`.
pub async fn subject_access_review(State(ctx): State<Arc<Context>>, request: Request) -> Response {
    review(
        &ctx,
        request,
        RequestKind::SubjectAccessReview,
        "SubjectAccessReview",
        |spec| access_status(&ctx, spec),
    )
    .await
}

/// What both reviews share: POST only, the armed fault, a JSON body of
/// the review's kind, and the answer.
async fn review(
    ctx: &Context,
    request: Request,
    kind: RequestKind,
    kind_name: &str,
    decide: impl FnOnce(&Map<String, Value>) -> Result<Value, Status>,
) -> Response {
    let wire = Encoding::Json;
    if request.method() != Method::POST {
        return method_not_allowed(wire);
    }
    ctx.counters.review(kind == RequestKind::TokenReview);
    let forbidden = || faults::forbidden(kind, None, None);
    if let Err(response) = fault_for(ctx, kind, wire, forbidden).await {
        return response;
    }
    let review = match read(request, kind_name).await {
        Ok(review) => review,
        Err(status) => return status_response(&status, wire),
    };
    let group_version = match kind {
        RequestKind::TokenReview => "authentication.k8s.io/v1",
        _ => "authorization.k8s.io/v1",
    };
    let spec = review
        .get("spec")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let status = match decide(&spec) {
        Ok(status) => status,
        Err(status) => return status_response(&status, wire),
    };
    let mut metadata = review
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    metadata.entry("creationTimestamp").or_insert(Value::Null);
    let answer = json!({
        "kind": kind_name,
        "apiVersion": group_version,
        "metadata": metadata,
        "spec": spec,
        "status": status,
    });
    body_response(
        StatusCode::CREATED,
        wire,
        false,
        Body::from(answer.to_string()),
    )
}

/// `POST .../selfsubjectreviews`: the caller's user as kube-apiserver's
/// `selfsubjectreview` REST answers it (`status.userInfo`, stamped with the
/// time of asking), in Go's JSON.
pub async fn self_subject_review(
    Extension(caller): Extension<Caller>,
    request: Request,
) -> Response {
    let wire = Encoding::Json;
    if request.method() != Method::POST {
        return method_not_allowed(wire);
    }
    if let Err(status) = read(request, "SelfSubjectReview").await {
        return status_response(&status, wire);
    }
    let user = caller.0.unwrap_or_else(UserInfo::anonymous);
    let answer = json!({
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": now_rfc3339()},
        "status": {"userInfo": user_json(&user)},
    });
    let mut bytes = go_json::to_vec(&answer);
    bytes.push(b'\n');
    body_response(StatusCode::CREATED, wire, false, Body::from(bytes))
}

/// The review a request posts: a JSON body of the review's kind.
async fn read(request: Request, kind: &str) -> Result<Map<String, Value>, Status> {
    if body::content_type(request.headers()).is_some_and(|c| c != JSON) {
        return Err(unsupported_media_type(&[JSON]));
    }
    let Ok(bytes) = axum::body::to_bytes(request.into_body(), MAX_BODY).await else {
        return Err(Status::bad_request("the request body could not be read"));
    };
    let review: Map<String, Value> = serde_json::from_slice(&bytes).map_err(|e| {
        Status::bad_request(format!("the body of the request is not a {kind}: {e}"))
    })?;
    match review.get("kind").and_then(Value::as_str) {
        Some(other) if other != kind => Err(Status::bad_request(format!(
            "the kind in the body ({other}) does not match the resource ({kind})"
        ))),
        _ => Ok(review),
    }
}

fn token_status(ctx: &Context, spec: &Map<String, Value>) -> Result<Value, Status> {
    let token = spec
        .get("token")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if token.is_empty() {
        return Err(Status::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    let audiences: Vec<&str> = spec
        .get("audiences")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .filter(|a: &Vec<&str>| !a.is_empty())
        .unwrap_or_else(|| vec![API_AUDIENCE]);
    let user = ctx
        .policy()
        .and_then(|policy| policy.authenticate(token))
        .filter(|_| audiences.contains(&API_AUDIENCE));
    Ok(match user {
        Some(user) => json!({
            "authenticated": true,
            "user": user_json(&user),
            "audiences": [API_AUDIENCE],
        }),
        None => json!({"user": {}}),
    })
}

/// `UserInfo` as the API writes it (empty fields left out).
fn user_json(user: &UserInfo) -> Value {
    let mut out = json!({"username": user.username});
    if !user.uid.is_empty() {
        out["uid"] = json!(user.uid);
    }
    if !user.groups.is_empty() {
        out["groups"] = json!(user.groups);
    }
    if !user.extra.is_empty() {
        out["extra"] = json!(user.extra);
    }
    out
}

fn access_status(ctx: &Context, spec: &Map<String, Value>) -> Result<Value, Status> {
    let text = |v: Option<&Value>, key: &str| {
        v.and_then(|v| v.get(key))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let spec_text = |key: &str| {
        spec.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let resource = spec.get("resourceAttributes").filter(|v| !v.is_null());
    let non_resource = spec.get("nonResourceAttributes").filter(|v| !v.is_null());
    let user = spec_text("user");
    let groups: Vec<String> = spec
        .get("groups")
        .and_then(Value::as_array)
        .map(|g| {
            g.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    let invalid = |field: &str, value: &str, why: &str| {
        Status::invalid(
            "authorization.k8s.io",
            "SubjectAccessReview",
            "FieldValueInvalid",
            field,
            format!("Invalid value: {value}: {why}"),
        )
    };
    match (resource, non_resource) {
        (Some(_), Some(n)) => {
            return Err(invalid(
                "spec.nonResourceAttributes",
                &format!("{n}"),
                "cannot be specified in combination with resourceAttributes",
            ));
        }
        (None, None) => {
            return Err(invalid(
                "spec.resourceAttributes",
                "\"null\"",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            ));
        }
        _ => {}
    }
    if user.is_empty() && groups.is_empty() {
        return Err(invalid(
            "spec.user",
            "\"\"",
            "at least one of user or group must be specified",
        ));
    }
    let extra: BTreeMap<String, Vec<String>> = spec
        .get("extra")
        .and_then(|e| serde_json::from_value(e.clone()).ok())
        .unwrap_or_default();
    let attributes = Attributes {
        user: UserInfo {
            username: user,
            uid: spec_text("uid"),
            groups,
            extra,
        },
        verb: text(resource.or(non_resource), "verb"),
        resource: resource.map(|r| ResourceAttributes {
            namespace: text(Some(r), "namespace"),
            group: text(Some(r), "group"),
            version: text(Some(r), "version"),
            resource: text(Some(r), "resource"),
            subresource: text(Some(r), "subresource"),
            name: text(Some(r), "name"),
        }),
        path: text(non_resource, "path"),
    };
    let (allowed, reason) = match ctx.policy() {
        Some(policy) => {
            let decision = policy.authorize(&attributes);
            (decision.allowed, decision.reason)
        }
        None => (true, String::new()),
    };
    let mut status = json!({"allowed": allowed});
    if !reason.is_empty() {
        status["reason"] = json!(reason);
    }
    Ok(status)
}
