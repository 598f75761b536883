//! Request bodies: the object of a create or an update, in the encodings
//! kube-apiserver decodes (JSON, YAML, and protobuf for built-in kinds),
//! chosen by `Content-Type` (JSON when there is none).

use axum::http::{HeaderMap, header};
use kubecache_wire::Status;
use kubecache_wire::protobuf::{self, RawStrings};
use serde_json::Value;

use crate::sim::patch::unsupported_media_type;
use kubecache_wire::media::{JSON, PROTOBUF, YAML};

/// The media type of a request's body, without parameters.
pub fn content_type(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|c| c.split(';').next().unwrap_or_default().trim())
}

/// The object a body holds, of a `builtin` kind (protobuf too) or a custom
/// resource; 415 for a type it cannot be written in, 400 for a body that
/// does not decode to an object.
pub fn object(headers: &HeaderMap, body: &[u8], builtin: bool) -> Result<Value, Status> {
    object_with_strings(headers, body, builtin).map(|(object, _)| object)
}

/// [`object`], and the bytes of its strings that are not UTF-8: a protobuf
/// body's (Go's protobuf decoding keeps any bytes; the value holds U+FFFD
/// for each byte that starts no UTF-8 sequence).
pub fn object_with_strings(
    headers: &HeaderMap,
    body: &[u8],
    builtin: bool,
) -> Result<(Value, Option<RawStrings>), Status> {
    let mut strings = None;
    let value: Value = match content_type(headers).unwrap_or(JSON) {
        JSON => serde_json::from_slice(body).map_err(|e| {
            Status::bad_request(format!("the body of the request is not valid JSON: {e}"))
        })?,
        YAML => yaml(body)?,
        PROTOBUF if builtin => {
            let unknown = protobuf::decode_unknown(body).map_err(|e| {
                Status::bad_request(format!("the body is not a protobuf object: {e}"))
            })?;
            let (json, raw) = unknown
                .to_json_with_strings()
                .ok_or_else(|| {
                    Status::bad_request(format!("no protobuf type for {}", unknown.kind))
                })?
                .map_err(|e| {
                    Status::bad_request(format!("the body is not a protobuf object: {e}"))
                })?;
            strings = raw;
            serde_json::from_slice(&json).map_err(|e| Status::internal(e.to_string()))?
        }
        _ => {
            let accepted: &[&str] = if builtin {
                &[JSON, YAML, PROTOBUF]
            } else {
                &[JSON, YAML]
            };
            return Err(unsupported_media_type(accepted));
        }
    };
    if !value.is_object() {
        return Err(Status::bad_request(
            "the body of the request must be a JSON object",
        ));
    }
    Ok((value, strings))
}

/// A YAML (or JSON) document, as an apply or a YAML create sends it.
pub fn yaml(body: &[u8]) -> Result<Value, Status> {
    serde_yaml::from_slice(body)
        .map_err(|e| Status::bad_request(format!("error decoding YAML: {e}")))
}
