//! The review APIs, shaped as the real ones (201, the review with its
//! `status` filled in), read in JSON or protobuf and answered in what
//! `Accept` asks for (recorded: `versions/` group `version-auth`):
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
//!   auth whoami`): who the caller is, after impersonation, stamped with the
//!   time of asking;
//! - `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`
//!   (`kubectl auth can-i VERB RESOURCE`): the same decision for the
//!   caller; the answer is the review sent, with a `managedFields` entry
//!   for its `spec` (the manager named by the User-Agent) as the API
//!   server's create handler adds it;
//! - `POST /apis/authorization.k8s.io/v1/selfsubjectrulesreviews`
//!   (`kubectl auth can-i --list`): the caller's rules in `spec.namespace`
//!   as RBAC lists them ([`Policy::rules_for`]), in a new review whose
//!   `spec` is empty.
//!
//! Without a policy no token is known, everything is allowed (the rules
//! are `*`, as kube-apiserver's `AlwaysAllow` lists them) and the caller
//! is `system:anonymous`. Faults armed for `tokenReview` or
//! `subjectAccessReview` hit them (after the caller's own authorization,
//! which needs `create` on the review).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Extension, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::Response;
use kubecache_wire::{Status, protobuf};
use serde_json::{Map, Value, json};

use super::{
    Caller, Context, MAX_BODY, body, body_response, fault_for, method_not_allowed, status_response,
};
use crate::sim::auth::{Attributes, Policy, ResourceAttributes, Rule, UserInfo};
use crate::sim::data::fields_v1;
use crate::sim::encoding;
use crate::sim::faults::{self, RequestKind};
use crate::sim::go_json;
use crate::sim::store::now_rfc3339;
use kubecache_wire::Encoding;

/// The audience of the API server's own tokens.
pub const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// A review's kind and the group version it is served in.
#[derive(Debug, Clone, Copy)]
struct Kind {
    api_version: &'static str,
    kind: &'static str,
}

const TOKEN_REVIEW: Kind = Kind {
    api_version: "authentication.k8s.io/v1",
    kind: "TokenReview",
};
const SELF_SUBJECT_REVIEW: Kind = Kind {
    api_version: "authentication.k8s.io/v1",
    kind: "SelfSubjectReview",
};
const SUBJECT_ACCESS_REVIEW: Kind = Kind {
    api_version: "authorization.k8s.io/v1",
    kind: "SubjectAccessReview",
};
const SELF_SUBJECT_ACCESS_REVIEW: Kind = Kind {
    api_version: "authorization.k8s.io/v1",
    kind: "SelfSubjectAccessReview",
};
const SELF_SUBJECT_RULES_REVIEW: Kind = Kind {
    api_version: "authorization.k8s.io/v1",
    kind: "SelfSubjectRulesReview",
};

/// `POST .../tokenreviews`.
pub async fn token_review(State(ctx): State<Arc<Context>>, request: Request) -> Response {
    kubecache_review(&ctx, request, RequestKind::TokenReview, |spec| {
        token_status(&ctx, spec)
    })
    .await
}

/// `POST .../subjectaccessreviews`.
pub async fn subject_access_review(State(ctx): State<Arc<Context>>, request: Request) -> Response {
    kubecache_review(&ctx, request, RequestKind::SubjectAccessReview, |spec| {
        let user = spec_user(spec);
        let attributes = attributes(SUBJECT_ACCESS_REVIEW, user, spec)?;
        if attributes.user.username.is_empty() && attributes.user.groups.is_empty() {
            return Err(invalid(
                SUBJECT_ACCESS_REVIEW,
                "spec.user",
                "\"\"",
                "at least one of user or group must be specified",
            ));
        }
        Ok(decide(&ctx, &attributes))
    })
    .await
}

/// What the two reviews kubecache asks share: the count, the armed fault,
/// and the review sent with its `status` decided from its `spec`.
async fn kubecache_review(
    ctx: &Context,
    request: Request,
    kind: RequestKind,
    decide: impl FnOnce(&Map<String, Value>) -> Result<Value, Status>,
) -> Response {
    let review_kind = match kind {
        RequestKind::TokenReview => TOKEN_REVIEW,
        _ => SUBJECT_ACCESS_REVIEW,
    };
    let (review, wire) = match read(request, review_kind).await {
        Ok(read) => read,
        Err(response) => return response,
    };
    ctx.counters.review(kind == RequestKind::TokenReview);
    let forbidden = || faults::forbidden(kind, None, None);
    if let Err(response) = fault_for(ctx, kind, wire, forbidden).await {
        return response;
    }
    let spec = object_at(&review, "spec");
    match decide(&spec) {
        Ok(status) => {
            let mut metadata = object_at(&review, "metadata");
            metadata.entry("creationTimestamp").or_insert(Value::Null);
            answer(review_kind, wire, metadata, Value::Object(spec), status)
        }
        Err(status) => status_response(&status, wire),
    }
}

/// `POST .../selfsubjectreviews`: the caller's user as kube-apiserver's
/// `selfsubjectreview` REST answers it (`status.userInfo`, stamped with the
/// time of asking, no `spec`).
pub async fn self_subject_review(
    Extension(caller): Extension<Caller>,
    request: Request,
) -> Response {
    let wire = match read(request, SELF_SUBJECT_REVIEW).await {
        Ok((_, wire)) => wire,
        Err(response) => return response,
    };
    let user = caller.0.unwrap_or_else(UserInfo::anonymous);
    let review = json!({
        "kind": SELF_SUBJECT_REVIEW.kind,
        "apiVersion": SELF_SUBJECT_REVIEW.api_version,
        "metadata": {"creationTimestamp": now_rfc3339()},
        "status": {"userInfo": user_json(&user)},
    });
    encoded(SELF_SUBJECT_REVIEW, wire, &review)
}

/// `POST .../selfsubjectaccessreviews`: whether the caller may, on the
/// review sent, with the `managedFields` entry the create handler adds.
pub async fn self_subject_access_review(
    State(ctx): State<Arc<Context>>,
    Extension(caller): Extension<Caller>,
    request: Request,
) -> Response {
    let manager = field_manager(&request);
    let (review, wire) = match read(request, SELF_SUBJECT_ACCESS_REVIEW).await {
        Ok(read) => read,
        Err(response) => return response,
    };
    let spec = object_at(&review, "spec");
    let user = caller.0.unwrap_or_else(UserInfo::anonymous);
    let status = match attributes(SELF_SUBJECT_ACCESS_REVIEW, user, &spec) {
        Ok(attributes) => decide(&ctx, &attributes),
        Err(status) => return status_response(&status, wire),
    };
    let mut fields = json!({"f:spec": fields_v1(&spec)});
    // structured-merge-diff writes a set's keys sorted.
    fields.sort_all_objects();
    let mut metadata = object_at(&review, "metadata");
    metadata.entry("creationTimestamp").or_insert(Value::Null);
    metadata.insert(
        "managedFields".into(),
        json!([{
            "manager": manager,
            "operation": "Update",
            "apiVersion": SELF_SUBJECT_ACCESS_REVIEW.api_version,
            "time": now_rfc3339(),
            "fieldsType": "FieldsV1",
            "fieldsV1": fields,
        }]),
    );
    answer(
        SELF_SUBJECT_ACCESS_REVIEW,
        wire,
        metadata,
        Value::Object(spec),
        status,
    )
}

/// `POST .../selfsubjectrulesreviews`: the caller's rules in
/// `spec.namespace` (400 without one), in a new review: the namespace is
/// not echoed back.
pub async fn self_subject_rules_review(
    State(ctx): State<Arc<Context>>,
    Extension(caller): Extension<Caller>,
    request: Request,
) -> Response {
    let (review, wire) = match read(request, SELF_SUBJECT_RULES_REVIEW).await {
        Ok(read) => read,
        Err(response) => return response,
    };
    let namespace = object_at(&review, "spec")
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if namespace.is_empty() {
        return status_response(&Status::bad_request("no namespace on request"), wire);
    }
    let user = caller.0.unwrap_or_else(UserInfo::anonymous);
    let status = match ctx.policy() {
        Some(policy) => rules_status(&policy, &user, &namespace),
        None => json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false,
        }),
    };
    answer(
        SELF_SUBJECT_RULES_REVIEW,
        wire,
        Map::from_iter([("creationTimestamp".to_string(), Value::Null)]),
        json!({}),
        status,
    )
}

/// The review a request posts, as JSON (sent as JSON, YAML or protobuf),
/// and the encoding its answer takes; or the error answer: 405 for a
/// method but POST, 406, 415, 400 for a body that is not a review of
/// `kind`.
async fn read(request: Request, kind: Kind) -> Result<(Map<String, Value>, Encoding), Response> {
    let accept = request
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let wire = match encoding::negotiate(accept, true) {
        Ok((wire, _, _)) => wire,
        Err((status, wire)) => return Err(status_response(&status, wire)),
    };
    if request.method() != Method::POST {
        return Err(method_not_allowed(wire));
    }
    let headers = request.headers().clone();
    let Ok(bytes) = axum::body::to_bytes(request.into_body(), MAX_BODY).await else {
        let status = Status::bad_request("the request body could not be read");
        return Err(status_response(&status, wire));
    };
    let review = match body::object(&headers, &bytes, true) {
        Ok(Value::Object(review)) => review,
        Ok(_) => {
            let status = Status::bad_request(format!("the body is not a {}", kind.kind));
            return Err(status_response(&status, wire));
        }
        Err(status) => return Err(status_response(&status, wire)),
    };
    match review.get("kind").and_then(Value::as_str) {
        Some(other) if other != kind.kind => {
            let status = Status::bad_request(format!(
                "the kind in the body ({other}) does not match the resource ({})",
                kind.kind
            ));
            Err(status_response(&status, wire))
        }
        _ => Ok((review, wire)),
    }
}

/// The field manager of a write: the User-Agent up to its first `/`
/// (kube-apiserver's `prefixFromUserAgent`).
fn field_manager(request: &Request) -> String {
    let agent = request
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    agent.split('/').next().unwrap_or_default().to_string()
}

/// The object at `key` of a review (empty when missing).
fn object_at(review: &Map<String, Value>, key: &str) -> Map<String, Value> {
    review
        .get(key)
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// The 201 of a review: its kind, `metadata`, `spec` and `status`.
fn answer(
    kind: Kind,
    wire: Encoding,
    metadata: Map<String, Value>,
    spec: Value,
    status: Value,
) -> Response {
    let review = json!({
        "kind": kind.kind,
        "apiVersion": kind.api_version,
        "metadata": metadata,
        "spec": spec,
        "status": status,
    });
    encoded(kind, wire, &review)
}

/// A 201 with `review` in Go's JSON (and a newline) or in protobuf.
fn encoded(kind: Kind, wire: Encoding, review: &Value) -> Response {
    let mut json = go_json::to_vec(review);
    let bytes = match wire {
        Encoding::Json => {
            json.push(b'\n');
            json
        }
        Encoding::Protobuf => {
            let message = protobuf::message_type(kind.api_version, kind.kind)
                .ok_or_else(|| format!("no protobuf type for {}", kind.kind))
                .and_then(|ty| protobuf::json_to_proto(ty, &json).map_err(|e| e.to_string()));
            match message {
                Ok(raw) => protobuf::encode_unknown(kind.api_version, kind.kind, &raw),
                Err(error) => return status_response(&Status::internal(error), wire),
            }
        }
    };
    body_response(StatusCode::CREATED, wire, false, Body::from(bytes))
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

/// The user a SubjectAccessReview names in its `spec`.
fn spec_user(spec: &Map<String, Value>) -> UserInfo {
    let text = |key: &str| {
        spec.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    UserInfo {
        username: text("user"),
        uid: text("uid"),
        groups: spec
            .get("groups")
            .and_then(|g| serde_json::from_value(g.clone()).ok())
            .unwrap_or_default(),
        extra: spec
            .get("extra")
            .and_then(|e| serde_json::from_value::<BTreeMap<_, _>>(e.clone()).ok())
            .unwrap_or_default(),
    }
}

/// What an access review's `spec` asks for `user`; 422 unless it has
/// exactly one of `resourceAttributes` and `nonResourceAttributes`.
fn attributes(kind: Kind, user: UserInfo, spec: &Map<String, Value>) -> Result<Attributes, Status> {
    let text = |v: Option<&Value>, key: &str| {
        v.and_then(|v| v.get(key))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let resource = spec.get("resourceAttributes").filter(|v| !v.is_null());
    let non_resource = spec.get("nonResourceAttributes").filter(|v| !v.is_null());
    match (resource, non_resource) {
        (Some(_), Some(n)) => {
            return Err(invalid(
                kind,
                "spec.nonResourceAttributes",
                &format!("{n}"),
                "cannot be specified in combination with resourceAttributes",
            ));
        }
        (None, None) => {
            return Err(invalid(
                kind,
                "spec.resourceAttributes",
                "\"null\"",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            ));
        }
        _ => {}
    }
    Ok(Attributes {
        user,
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
    })
}

/// The 422 of an access review's invalid `spec` field.
fn invalid(kind: Kind, field: &str, value: &str, why: &str) -> Status {
    Status::invalid(
        "authorization.k8s.io",
        kind.kind,
        "FieldValueInvalid",
        field,
        format!("Invalid value: {value}: {why}"),
    )
}

/// An access review's `status`: the policy's decision (`reason` only when
/// it gives one).
fn decide(ctx: &Context, attributes: &Attributes) -> Value {
    let (allowed, reason) = match ctx.policy() {
        Some(policy) => {
            let decision = policy.authorize(attributes);
            (decision.allowed, decision.reason)
        }
        None => (true, String::new()),
    };
    let mut status = json!({"allowed": allowed});
    if !reason.is_empty() {
        status["reason"] = json!(reason);
    }
    status
}

/// A rules review's `status`: the rules RBAC finds for `user` in
/// `namespace`, split as kube-apiserver's `RulesFor` splits them (a rule
/// with resources is a resource rule, one with URLs a non-resource rule),
/// empty lists left out of each, and the evaluation error if any.
fn rules_status(policy: &Policy, user: &UserInfo, namespace: &str) -> Value {
    let (rules, error) = policy.rules_for(user, namespace);
    let listed = |pairs: &[(&str, &Vec<String>)]| {
        let mut rule = Map::new();
        for (key, values) in pairs {
            if !values.is_empty() || *key == "verbs" {
                rule.insert(key.to_string(), json!(values));
            }
        }
        Value::Object(rule)
    };
    let resource: Vec<Value> = rules
        .iter()
        .filter(|r| !r.resources.is_empty())
        .map(|r: &&Rule| {
            listed(&[
                ("verbs", &r.verbs),
                ("apiGroups", &r.api_groups),
                ("resources", &r.resources),
                ("resourceNames", &r.resource_names),
            ])
        })
        .collect();
    let non_resource: Vec<Value> = rules
        .iter()
        .filter(|r| !r.non_resource_urls.is_empty())
        .map(|r| {
            listed(&[
                ("verbs", &r.verbs),
                ("nonResourceURLs", &r.non_resource_urls),
            ])
        })
        .collect();
    let mut status = json!({
        "resourceRules": resource,
        "nonResourceRules": non_resource,
        "incomplete": false,
    });
    if let Some(error) = error {
        status["evaluationError"] = json!(error);
    }
    status
}
