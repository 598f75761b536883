//! Wire encodings: JSON for everything, Kubernetes protobuf for built-in
//! kinds, chosen from the `Accept` header as kube-apiserver chooses.

use bytes::Bytes;
use kubecache_wire::{Status, protobuf};

use super::resources::Resource;

/// `application/json`.
pub const JSON: &str = "application/json";
/// `application/vnd.kubernetes.protobuf`.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// The protobuf watch stream.
pub const PROTOBUF_WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// The encoding of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// JSON (one object per line for watches).
    Json,
    /// `k8s\0` + runtime.Unknown (length-framed WatchEvents for watches).
    Protobuf,
}

impl Wire {
    /// The `Content-Type` of a response in this encoding.
    pub fn content_type(self, watch: bool) -> &'static str {
        match (self, watch) {
            (Wire::Json, _) => JSON,
            (Wire::Protobuf, false) => PROTOBUF,
            (Wire::Protobuf, true) => PROTOBUF_WATCH,
        }
    }
}

/// Picks the encoding from `Accept`: the first media type listed that can
/// be served, in any case (q-values order nothing, as clients list in
/// preference order, but `q=0` refuses a type, a wildcard included: RFC
/// 9110, as kube-apiserver reads it).
/// Table requests (`as=Table`) are not served, so they fall through to the
/// next type, as kubectl expects. Errors carry the encoding the 406 Status
/// itself should use.
pub fn negotiate(accept: Option<&str>, resource: &Resource) -> Result<Wire, (Status, Wire)> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok(Wire::Json);
    };
    let mut wants_protobuf = false;
    let refused = |entry: &str| {
        entry.split(';').skip(1).any(|p| {
            p.trim()
                .strip_prefix("q=")
                .and_then(|q| q.trim().parse::<f32>().ok())
                .is_some_and(|q| q <= 0.0)
        })
    };
    let media_of = |entry: &str| {
        let media = entry.split(';').next().unwrap_or_default();
        media.trim().to_ascii_lowercase()
    };
    let json_refused = accept
        .split(',')
        .any(|entry| refused(entry) && media_of(entry) == JSON);
    for entry in accept.split(',').filter(|entry| !refused(entry)) {
        let media = media_of(entry);
        if entry
            .split(';')
            .skip(1)
            .any(|p| p.trim().starts_with("as="))
        {
            continue;
        }
        match media.as_str() {
            JSON => return Ok(Wire::Json),
            "application/*" | "*/*" if !json_refused => return Ok(Wire::Json),
            "application/*" | "*/*" if resource.builtin => return Ok(Wire::Protobuf),
            PROTOBUF if resource.builtin => return Ok(Wire::Protobuf),
            PROTOBUF => wants_protobuf = true,
            _ => {}
        }
    }
    let status = Status::failure(
        406,
        "NotAcceptable",
        format!(
            "the server was unable to respond with a content type that the client supports: {}",
            if wants_protobuf {
                "no protobuf encoding for custom resources"
            } else {
                accept
            }
        ),
    );
    Err((
        status,
        if wants_protobuf {
            Wire::Protobuf
        } else {
            Wire::Json
        },
    ))
}

/// The encoding of a Status answered before a resource is known
/// (authentication, authorization): protobuf when `Accept` lists it before
/// JSON, as kube-apiserver negotiates its errors; JSON otherwise.
pub fn for_status(accept: Option<&str>) -> Wire {
    for entry in accept.unwrap_or_default().split(',') {
        let media = entry.split(';').next().unwrap_or_default().trim();
        if media.eq_ignore_ascii_case(PROTOBUF) {
            return Wire::Protobuf;
        }
        if [JSON, "application/*", "*/*"]
            .iter()
            .any(|m| media.eq_ignore_ascii_case(m))
        {
            return Wire::Json;
        }
    }
    Wire::Json
}

/// The protobuf message of a stored JSON object.
pub fn object_to_proto(resource: &Resource, json: &[u8]) -> Result<Bytes, String> {
    let ty = protobuf::message_type(resource.api_version(), resource.kind)
        .ok_or_else(|| format!("no protobuf type for {}", resource.kind))?;
    protobuf::json_to_proto(ty, json)
        .map(Bytes::from)
        .map_err(|e| format!("{} does not encode as protobuf: {e}", resource.kind))
}

/// A Status body in the given encoding.
pub fn status_body(status: &Status, wire: Wire) -> Vec<u8> {
    match wire {
        // Go's json.Encoder ends every body with a newline.
        Wire::Json => {
            let mut json = status.to_json();
            json.push(b'\n');
            json
        }
        Wire::Protobuf => status.to_protobuf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::resources::{RESOURCES, ids};

    #[test]
    fn protobuf_is_chosen_for_builtin_kinds_and_json_is_the_fallback_for_custom_resources() {
        let pods = &RESOURCES[ids::PODS];
        let widgets = &RESOURCES[ids::WIDGETS];
        let both = "application/vnd.kubernetes.protobuf, application/json";
        assert_eq!(negotiate(Some(both), pods), Ok(Wire::Protobuf));
        assert_eq!(negotiate(Some(both), widgets), Ok(Wire::Json));
        let (status, wire) = negotiate(Some(PROTOBUF), widgets).unwrap_err();
        assert_eq!((status.code, wire), (406, Wire::Protobuf));
        assert_eq!(negotiate(None, widgets), Ok(Wire::Json));
    }

    #[test]
    fn errors_before_the_resource_is_known_follow_the_first_known_type() {
        assert_eq!(for_status(None), Wire::Json);
        assert_eq!(
            for_status(Some(
                "application/vnd.kubernetes.protobuf, application/json"
            )),
            Wire::Protobuf
        );
        assert_eq!(
            for_status(Some(
                "application/json, application/vnd.kubernetes.protobuf"
            )),
            Wire::Json
        );
        assert_eq!(for_status(Some("text/html")), Wire::Json);
    }

    #[test]
    fn media_types_match_in_any_case_and_q_0_refuses_one() {
        let (pods, widgets) = (&RESOURCES[ids::PODS], &RESOURCES[ids::WIDGETS]);
        assert_eq!(negotiate(Some("Application/JSON"), pods), Ok(Wire::Json));
        assert_eq!(
            negotiate(Some("APPLICATION/VND.KUBERNETES.PROTOBUF"), pods),
            Ok(Wire::Protobuf)
        );
        assert_eq!(
            negotiate(Some("application/json;q=0"), pods)
                .unwrap_err()
                .0
                .code,
            406
        );
        assert_eq!(
            negotiate(Some("application/json;q=0, */*"), pods),
            Ok(Wire::Protobuf)
        );
        assert_eq!(
            negotiate(Some("application/json;q=0, */*"), widgets)
                .unwrap_err()
                .0
                .code,
            406
        );
        assert_eq!(
            negotiate(Some("application/json;q=0.5"), pods),
            Ok(Wire::Json)
        );
    }

    #[test]
    fn table_requests_fall_through_to_plain_json() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(
            negotiate(Some(kubectl), &RESOURCES[ids::PODS]),
            Ok(Wire::Json)
        );
    }
}
