//! Writes: create (POST), replace (PUT), patch (PATCH, in the four patch
//! types), delete and deletecollection (DELETE), and the same replace and
//! patch on the `status` subresource, which change nothing but `.status`.
//!
//! Every write takes a revision and makes its watch event; its answer
//! carries the new resourceVersion (a delete's, the deletion's). The name
//! and namespace in the path win over the body's only when the body leaves
//! them out, as in kube-apiserver. Deletion is immediate (no graceful
//! deletion, finalizers or preconditions; `DeleteOptions` are ignored).
//! Unlike kube-apiserver, writes to the object itself may change its
//! status too (the sim's own churn and tests rely on it).

use std::sync::Arc;

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;
use bytes::Bytes;
use kubecache_wire::protobuf::RawStrings;
use kubecache_wire::{Status, protobuf};
use serde_json::{Value, json};

use super::list::{Page, encode_list, object_body};
use super::params::CollectionParams;
use super::{Call, body, body_response, status_response};
use crate::sim::auth::{Attributes, ResourceAttributes};
use crate::sim::encoding::Form;
use crate::sim::object::StoredObject;
use crate::sim::patch::{self, PatchType, Schema};
use crate::sim::store::{ListRead, Strings, now_rfc3339};
use kubecache_wire::Encoding;

/// What of an object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Everything (the object's own path).
    Whole,
    /// `.status` only (the `status` subresource).
    Status,
}

impl Part {
    /// The object after a write of `written` over `current`: for
    /// [`Part::Status`], `current` with `written`'s status (and its
    /// resourceVersion, the write's precondition).
    fn merge(self, current: Value, written: Value) -> Value {
        if self == Part::Whole {
            return written;
        }
        let mut result = current;
        match written.get("status") {
            Some(status) => result["status"] = status.clone(),
            None => {
                if let Some(object) = result.as_object_mut() {
                    object.shift_remove("status");
                }
            }
        }
        if let Some(rv) = written.pointer("/metadata/resourceVersion") {
            result["metadata"]["resourceVersion"] = rv.clone();
        }
        result
    }
}

impl Call<'_> {
    /// `POST` to a collection. A protobuf body's strings that are not
    /// UTF-8 are kept as their bytes, as Go keeps them.
    pub fn create(&self, request: &Bytes) -> Response {
        let result = body::object_with_strings(self.headers, request, self.resource().builtin)
            .and_then(|(object, strings)| {
                let object = self.with_path_identity(object)?;
                self.ctx.store.create_with_strings(
                    self.target.resource,
                    generate_name(object),
                    strings.map(Arc::new),
                )
            });
        self.respond(result, StatusCode::CREATED)
    }

    /// `PUT` of an object, or of its status. A protobuf body's strings that
    /// are not UTF-8 are kept as their bytes; a status keeps the rest of
    /// the object's.
    pub fn replace(&self, request: &Bytes, part: Part) -> Response {
        let result = body::object_with_strings(self.headers, request, self.resource().builtin)
            .and_then(|(object, strings)| {
                let object = self.with_path_identity(object)?;
                match part {
                    Part::Whole => self.ctx.store.update_with_strings(
                        self.target.resource,
                        object,
                        strings.map(Arc::new),
                    ),
                    Part::Status => {
                        let written = strings.and_then(|s| {
                            RawStrings::new(
                                s.iter()
                                    .filter(|s| s.pointer().starts_with("/status/"))
                                    .cloned()
                                    .collect(),
                            )
                        });
                        let strings =
                            written.map_or(Strings::Current, |s| Strings::Over(Arc::new(s)));
                        self.modify(strings, |current| Ok(part.merge(current, object.clone())))
                    }
                }
            });
        self.respond(result, StatusCode::OK)
    }

    /// `PATCH` of an object, or of its status, in any of the patch types;
    /// an apply creates the object when it does not exist.
    pub fn patch(&self, request: &Bytes, part: Part) -> Response {
        match self.patched(request, part) {
            Ok((object, created)) => {
                let code = if created {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                };
                self.respond(Ok(object), code)
            }
            Err(status) => status_response(&status, self.wire),
        }
    }

    fn patched(&self, request: &Bytes, part: Part) -> Result<(Arc<StoredObject>, bool), Status> {
        let resource = self.resource();
        let patch_type = PatchType::of(body::content_type(self.headers), resource.builtin)?;
        let manager = self.param("fieldManager").unwrap_or_default();
        if patch_type == PatchType::Apply && manager.is_empty() {
            return Err(Status::invalid(
                "meta.k8s.io",
                "PatchOptions",
                "FieldValueRequired",
                "fieldManager",
                "Required value: is required for apply patch",
            ));
        }
        if patch_type != PatchType::Apply && self.param("force").is_some() {
            return Err(Status::invalid(
                "meta.k8s.io",
                "PatchOptions",
                "FieldValueForbidden",
                "force",
                "Forbidden: may not be specified for non-apply patch",
            ));
        }
        let schema = Schema::of(resource);
        let parsed: Value = match patch_type {
            PatchType::Json => Value::Null,
            PatchType::Apply => body::yaml(request)?,
            PatchType::Merge | PatchType::Strategic => serde_json::from_slice(request)
                .map_err(|e| Status::bad_request(format!("error decoding patch: {e}")))?,
        };
        let now = now_rfc3339();
        let apply_to = |current: Option<Value>| {
            patch::apply(
                current,
                &parsed,
                &manager,
                &schema,
                resource.api_version(),
                &now,
            )
        };
        // Go patches JSON as JSON, and the others on the object's strings.
        let strings = match patch_type {
            PatchType::Json | PatchType::Merge => Strings::Dropped,
            PatchType::Strategic | PatchType::Apply => Strings::Current,
        };
        let updated = self.modify(strings, |current| {
            let mut patched = current.clone();
            match patch_type {
                PatchType::Json => patch::json_patch(&mut patched, request)?,
                PatchType::Merge if !parsed.is_object() => {
                    return Err(Status::bad_request(
                        "error decoding patch: not a JSON object",
                    ));
                }
                PatchType::Merge => patch::merge(&mut patched, &parsed),
                PatchType::Strategic => patch::strategic_merge(&mut patched, &parsed, &schema)?,
                PatchType::Apply => patched = apply_to(Some(current.clone()))?,
            }
            Ok(part.merge(current, patched))
        });
        match updated {
            Err(status)
                if status.code == 404 && patch_type == PatchType::Apply && part == Part::Whole =>
            {
                self.ctx.authorize(self.caller, self.attributes("create"))?;
                let object = self.with_path_identity(apply_to(None)?)?;
                let created = self.ctx.store.create(self.target.resource, object)?;
                Ok((created, true))
            }
            result => result.map(|object| (object, false)),
        }
    }

    /// `DELETE` of an object: gone at once. Pods and namespaces answer
    /// with their last state, at the deletion's revision; the others with
    /// a Success Status naming what was deleted.
    pub fn delete(&self) -> Response {
        let resource = self.resource();
        match self
            .ctx
            .store
            .delete(self.target.resource, self.namespace(), self.name())
        {
            Ok(deleted) if !resource.returns_deleted_object => {
                let status = json!({
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "details": details(resource.group, resource.plural, &deleted),
                });
                match encode_status(&status, self.wire) {
                    Ok(body) => body_response(StatusCode::OK, self.wire, false, Body::from(body)),
                    Err(status) => status_response(&status, self.wire),
                }
            }
            result => self.respond(result, StatusCode::OK),
        }
    }

    /// `DELETE` of a collection: deletes what a list with the same
    /// selectors returns now, and answers with that list (its items as
    /// they were before, at the list's revision), as kube-apiserver does.
    pub fn delete_collection(&self) -> Response {
        let resource = self.resource();
        let params = match CollectionParams::parse(self.query, resource, false) {
            Ok(params) => params,
            Err(status) => return status_response(&status, self.wire),
        };
        let store = &self.ctx.store;
        let read = ListRead {
            revision: store.revision(),
            namespace: self.target.namespace.as_deref(),
            start: None,
            limit: 0,
            before: Some(0),
        };
        let Ok(listed) = store.list(self.target.resource, read, |o| params.matches(resource, o))
        else {
            return status_response(
                &Status::internal("the newest revision is unreadable"),
                self.wire,
            );
        };
        for object in &listed.items {
            // An object deleted meanwhile is no error (NotFound is ignored).
            let _ = store.delete(self.target.resource, &object.namespace, &object.name);
        }
        let page = Page {
            revision: read.revision,
            items: listed.items,
            continue_token: None,
            remaining: None,
            shard_info: None,
        };
        let chunks: Vec<Bytes> = encode_list(resource, self.wire, Form::Whole, page).collect();
        body_response(
            StatusCode::OK,
            self.wire,
            false,
            Body::from(chunks.concat()),
        )
    }

    /// [`crate::sim::store::Store::modify`] of the target object.
    fn modify(
        &self,
        strings: Strings,
        change: impl FnMut(Value) -> Result<Value, Status>,
    ) -> Result<Arc<StoredObject>, Status> {
        self.ctx.store.modify(
            self.target.resource,
            self.namespace(),
            self.name(),
            strings,
            change,
        )
    }

    /// The attributes of `verb` on the target, to authorize a further
    /// step of a request (the user is the caller's).
    fn attributes(&self, verb: &str) -> Attributes {
        let resource = self.resource();
        Attributes {
            user: Default::default(),
            verb: verb.into(),
            resource: Some(ResourceAttributes {
                namespace: self.namespace().into(),
                group: resource.group.into(),
                version: resource.version.into(),
                resource: resource.plural.into(),
                subresource: String::new(),
                name: self.name().into(),
            }),
            path: String::new(),
        }
    }

    /// The answer with the written object.
    fn respond(&self, result: Result<Arc<StoredObject>, Status>, code: StatusCode) -> Response {
        match result
            .and_then(|object| object_body(self.resource(), &object, self.wire, Form::Whole))
        {
            Ok(body) => body_response(code, self.wire, false, Body::from(body)),
            Err(status) => status_response(&status, self.wire),
        }
    }

    /// Fills name and namespace from the path; refuses a body that
    /// disagrees with it or names another kind.
    fn with_path_identity(&self, mut object: Value) -> Result<Value, Status> {
        let resource = self.resource();
        if let Some(kind) = object.get("kind").and_then(Value::as_str)
            && kind != resource.kind
        {
            return Err(Status::bad_request(format!(
                "the kind in the body ({kind}) does not match the resource ({})",
                resource.kind
            )));
        }
        let Some(map) = object.as_object_mut() else {
            return Err(Status::bad_request(
                "the body of the request must be a JSON object",
            ));
        };
        let meta = map
            .entry("metadata")
            .or_insert_with(|| Value::Object(Default::default()));
        let Some(meta) = meta.as_object_mut() else {
            return Err(Status::bad_request("metadata must be an object"));
        };
        if let Some(ns) = &self.target.namespace {
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
        if let Some(name) = &self.target.name {
            match meta.get("name").and_then(Value::as_str) {
                Some(body_name) if body_name != name => {
                    return Err(Status::bad_request(format!(
                        "the name of the object ({body_name}) does not match the name on the URL ({name})"
                    )));
                }
                _ => {
                    meta.insert("name".into(), name.clone().into());
                }
            }
        }
        Ok(object)
    }
}

/// `details` of a delete's Success Status: what was deleted (`kind` is
/// the resource, as kube-apiserver fills it).
fn details(group: &str, plural: &str, deleted: &StoredObject) -> Value {
    let uid = deleted
        .to_value()
        .pointer("/metadata/uid")
        .cloned()
        .unwrap_or_default();
    let mut details = json!({"name": deleted.name});
    if !group.is_empty() {
        details["group"] = json!(group);
    }
    details["kind"] = json!(plural);
    details["uid"] = uid;
    details
}

/// A Status given as JSON (one with fields `kubecache_wire::Status` does
/// not have, such as `details.uid`), in an encoding.
fn encode_status(status: &Value, wire: Encoding) -> Result<Vec<u8>, Status> {
    let json = crate::sim::go_json::to_vec(status);
    match wire {
        Encoding::Json => Ok(json),
        Encoding::Protobuf => {
            let ty = protobuf::message_type("v1", "Status")
                .ok_or_else(|| Status::internal("no protobuf type for Status"))?;
            let raw =
                protobuf::json_to_proto(ty, &json).map_err(|e| Status::internal(e.to_string()))?;
            Ok(protobuf::encode_unknown("v1", "Status", &raw))
        }
    }
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
