//! Writes: create (POST), replace (PUT), merge-patch (PATCH), delete.
//! Bodies are JSON; the name and namespace in the path win over the body's
//! only when the body leaves them out, as in kube-apiserver.

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use kubecache_wire::Status;
use serde_json::Value;

use super::list::object_body;
use super::{Context, Target, body_response, header_str, status_response};
use crate::sim::encoding::Wire;
use crate::sim::object::StoredObject;
use crate::sim::resources::RESOURCES;
use std::sync::Arc;

/// `POST` to a collection.
pub fn create(
    ctx: &Context,
    target: &Target,
    headers: &HeaderMap,
    body: &Bytes,
    wire: Wire,
) -> Response {
    let result = json_body(headers, body, &["application/json"])
        .and_then(|object| with_path_identity(target, object, None))
        .and_then(|object| ctx.store.create(target.resource, generate_name(object)));
    respond(target, result, StatusCode::CREATED, wire)
}

/// `PUT` of one object.
pub fn replace(
    ctx: &Context,
    target: &Target,
    headers: &HeaderMap,
    body: &Bytes,
    wire: Wire,
) -> Response {
    let result = json_body(headers, body, &["application/json"])
        .and_then(|object| with_path_identity(target, object, target.name.as_deref()))
        .and_then(|object| ctx.store.update(target.resource, object));
    respond(target, result, StatusCode::OK, wire)
}

/// `PATCH` of one object with `application/merge-patch+json`.
pub fn patch(
    ctx: &Context,
    target: &Target,
    headers: &HeaderMap,
    body: &Bytes,
    wire: Wire,
) -> Response {
    let name = target.name.as_deref().unwrap_or_default();
    let namespace = target.namespace.as_deref().unwrap_or_default();
    let result = json_body(headers, body, &["application/merge-patch+json"]).and_then(|patch| {
        ctx.store
            .merge_patch(target.resource, namespace, name, &patch)
    });
    respond(target, result, StatusCode::OK, wire)
}

/// `DELETE` of one object: gone at once (no graceful deletion); the answer
/// is the object's last state.
pub fn delete(ctx: &Context, target: &Target, wire: Wire) -> Response {
    let name = target.name.as_deref().unwrap_or_default();
    let namespace = target.namespace.as_deref().unwrap_or_default();
    let result = ctx.store.delete(target.resource, namespace, name);
    respond(target, result, StatusCode::OK, wire)
}

fn respond(
    target: &Target,
    result: Result<Arc<StoredObject>, Status>,
    code: StatusCode,
    wire: Wire,
) -> Response {
    let resource = &RESOURCES[target.resource];
    match result.and_then(|object| object_body(resource, &object, wire)) {
        Ok(body) => body_response(code, wire, false, Body::from(body)),
        Err(status) => status_response(&status, wire),
    }
}

fn json_body(headers: &HeaderMap, body: &Bytes, accepted: &[&str]) -> Result<Value, Status> {
    let content_type = header_str(headers, header::CONTENT_TYPE)
        .and_then(|c| c.split(';').next())
        .unwrap_or("application/json")
        .trim();
    if !accepted.contains(&content_type) {
        return Err(Status::failure(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
        ));
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        Status::bad_request(format!("the body of the request is not valid JSON: {e}"))
    })?;
    if !value.is_object() {
        return Err(Status::bad_request(
            "the body of the request must be a JSON object",
        ));
    }
    Ok(value)
}

/// Fills name and namespace from the path; refuses a body that disagrees.
fn with_path_identity(
    target: &Target,
    mut object: Value,
    name: Option<&str>,
) -> Result<Value, Status> {
    let resource = &RESOURCES[target.resource];
    if let Some(kind) = object.get("kind").and_then(Value::as_str)
        && kind != resource.kind
    {
        return Err(Status::bad_request(format!(
            "the kind in the body ({kind}) does not match the resource ({})",
            resource.kind
        )));
    }
    let meta = object
        .as_object_mut()
        .expect("checked to be an object")
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()));
    let Some(meta) = meta.as_object_mut() else {
        return Err(Status::bad_request("metadata must be an object"));
    };
    if let Some(ns) = &target.namespace {
        match meta.get("namespace").and_then(Value::as_str) {
            Some(body_ns) if !body_ns.is_empty() && body_ns != ns => {
                return Err(Status::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                meta.insert("namespace".into(), ns.clone().into());
            }
        }
    }
    if let Some(name) = name {
        match meta.get("name").and_then(Value::as_str) {
            Some(body_name) if body_name != name => {
                return Err(Status::bad_request(format!(
                    "the name of the object ({body_name}) does not match the name on the URL ({name})"
                )));
            }
            _ => {
                meta.insert("name".into(), name.into());
            }
        }
    }
    Ok(object)
}

/// Resolves `metadata.generateName` into a name with a random suffix.
fn generate_name(mut object: Value) -> Value {
    let meta = &mut object["metadata"];
    let has_name = meta
        .get("name")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    if let (false, Some(prefix)) = (has_name, meta.get("generateName").and_then(Value::as_str)) {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let suffix: String = (0..5)
            .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
            .collect();
        meta["name"] = Value::from(format!("{prefix}{suffix}"));
    }
    object
}
