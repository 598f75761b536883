//! Encoding encodings: JSON for everything, Kubernetes protobuf for built-in
//! kinds, chosen from the `Accept` header as kube-apiserver chooses.

use bytes::Bytes;
use kubecache_wire::media::{JSON, PROTOBUF, YAML};
use kubecache_wire::{Encoding, Status, protobuf};

use super::resources::Resource;

/// What a read carries of each object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// The objects themselves.
    Whole,
    /// `meta.k8s.io/v1` `PartialObjectMetadata`; `as_list` when asked as
    /// `PartialObjectMetadataList`.
    Metadata {
        /// `as=PartialObjectMetadataList` rather than `as=PartialObjectMetadata`.
        as_list: bool,
    },
}

/// Picks the encoding from `Accept` for a `builtin` kind or a custom
/// resource, and whether the JSON is written as YAML: the first media type
/// listed that can be served, in any case (q-values order nothing, as clients list in
/// preference order, but `q=0` refuses a type, a wildcard included: RFC
/// 9110, as kube-apiserver reads it).
/// Table requests (`as=Table`, in JSON or YAML) are not served, so they
/// fall through to the next type, as kubectl expects; metadata-only ones
/// (`as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1`) are served in JSON
/// and in protobuf for every resource, custom ones included (the API server
/// converts to a built-in type). Errors carry the encoding the 406 Status
/// itself should use. A metadata-only request's other errors are encoded
/// like its body (the API server encodes them in the first type without
/// `as=`, JSON for client-go's metadata client; clients read either).
pub fn negotiate(
    accept: Option<&str>,
    builtin: bool,
) -> Result<(Encoding, Form, bool), (Status, Encoding)> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok((Encoding::Json, Form::Whole, false));
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
        let params: Vec<(&str, &str)> = entry
            .split(';')
            .skip(1)
            .filter_map(|p| p.trim().split_once('='))
            .collect();
        let param = |key: &str| params.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
        let form = match (param("as"), param("g"), param("v")) {
            (None, _, _) => Form::Whole,
            (Some("PartialObjectMetadata"), Some("meta.k8s.io"), Some("v1")) => {
                Form::Metadata { as_list: false }
            }
            (Some("PartialObjectMetadataList"), Some("meta.k8s.io"), Some("v1")) => {
                Form::Metadata { as_list: true }
            }
            _ => continue,
        };
        // Metadata is a built-in type: protobuf whatever the resource.
        let protobuf = builtin || form != Form::Whole;
        match media.as_str() {
            JSON => return Ok((Encoding::Json, form, false)),
            YAML => return Ok((Encoding::Json, form, true)),
            "application/*" | "*/*" if !json_refused => return Ok((Encoding::Json, form, false)),
            "application/*" | "*/*" if protobuf => return Ok((Encoding::Protobuf, form, false)),
            PROTOBUF if protobuf => return Ok((Encoding::Protobuf, form, false)),
            PROTOBUF => wants_protobuf = true,
            _ => {}
        }
    }
    // The API server's negotiation error, whatever the resource.
    let status = Status::failure(
        406,
        "NotAcceptable",
        "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf",
    );
    Err((
        status,
        if wants_protobuf {
            Encoding::Protobuf
        } else {
            Encoding::Json
        },
    ))
}

/// The 406 of a watch asked for in a media type that has no stream (YAML).
pub fn watch_not_acceptable() -> Status {
    Status::failure(
        406,
        "NotAcceptable",
        "only the following media types are accepted: application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch",
    )
}

/// The 406 the API server answers when metadata was asked of the wrong
/// shape (`asPartialObjectMetadata[List]` in its handlers): a list as
/// `PartialObjectMetadata`, one object as `PartialObjectMetadataList`. The
/// message names the Go type the handler had.
pub fn wrong_metadata_shape(resource: &Resource, list: bool) -> Status {
    let go_type = match (resource.builtin, list) {
        (true, true) => format!("*{}.{}", resource.version, resource.list_kind),
        (true, false) => format!("*{}.{}", resource.version, resource.kind),
        (false, true) => "*unstructured.UnstructuredList".into(),
        (false, false) => "*unstructured.Unstructured".into(),
    };
    let message = if list {
        format!(
            "you requested PartialObjectMetadata, but the requested object is a list ({go_type})"
        )
    } else {
        format!(
            "you requested PartialObjectMetadataList, but the requested object is not a list ({go_type})"
        )
    };
    Status::failure(406, "NotAcceptable", message)
}

/// How kube-apiserver writes an error Status for an `Accept`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorForm {
    /// In an encoding `Accept` asks for: JSON or protobuf.
    Encoded(Encoding),
    /// In YAML (written from the JSON, see [`super::http::restyle`]).
    Yaml,
    /// In no encoding `Accept` asks for (`text/html`, a Table): Go's
    /// indented JSON without a final newline (`WriteRawJSON`).
    Indented,
}

/// How an error is written for `Accept`, as kube-apiserver's
/// `ErrorNegotiated` negotiates it (`NegotiateOutputMediaType` with the
/// default endpoint restrictions): the first media type listed (q=0
/// refuses one) of JSON, YAML, protobuf or a wildcard whose parameters
/// ask for no conversion (`as`, `g`, `v`) and no stream but `watch`.
pub fn for_status(accept: Option<&str>) -> ErrorForm {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return ErrorForm::Encoded(Encoding::Json);
    };
    for entry in accept.split(',') {
        let mut parts = entry.split(';');
        let media = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
        let params: Vec<(String, &str)> = parts
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim()))
            .collect();
        let allowed = params.iter().all(|(k, v)| match k.as_str() {
            "as" | "g" | "v" => false,
            "stream" => v.is_empty() || (*v == "watch" && media != YAML),
            "q" => v.parse::<f32>().map_or(true, |q| q > 0.0),
            _ => true,
        });
        match media.as_str() {
            _ if !allowed => {}
            PROTOBUF => return ErrorForm::Encoded(Encoding::Protobuf),
            YAML => return ErrorForm::Yaml,
            JSON | "application/*" | "*/*" => return ErrorForm::Encoded(Encoding::Json),
            _ => {}
        }
    }
    ErrorForm::Indented
}

/// The protobuf message of a stored JSON object, with the bytes of its
/// strings that are not UTF-8.
pub fn object_to_proto(
    resource: &Resource,
    json: &[u8],
    raw_strings: Option<&protobuf::RawStrings>,
) -> Result<Bytes, String> {
    let ty = protobuf::message_type(resource.api_version(), resource.kind)
        .ok_or_else(|| format!("no protobuf type for {}", resource.kind))?;
    let mut proto = Vec::with_capacity(json.len() / 2);
    protobuf::json_to_proto_with_strings(ty, json, raw_strings, &mut proto)
        .map(|()| {
            // Kept for the object's life: no spare capacity.
            proto.shrink_to_fit();
            Bytes::from(proto)
        })
        .map_err(|e| format!("{} does not encode as protobuf: {e}", resource.kind))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::resources::{RESOURCES, ids};

    /// What [`super::negotiate`] picks, asserted not to be YAML.
    fn negotiate(
        accept: Option<&str>,
        builtin: bool,
    ) -> Result<(Encoding, Form), (Status, Encoding)> {
        super::negotiate(accept, builtin).map(|(wire, form, yaml)| {
            assert!(!yaml, "{accept:?}");
            (wire, form)
        })
    }

    #[test]
    fn yaml_is_json_written_as_yaml_but_a_table_in_yaml_falls_through() {
        let pods = RESOURCES[ids::PODS].builtin;
        let yaml = |accept| super::negotiate(Some(accept), pods);
        assert_eq!(yaml(YAML), Ok((Encoding::Json, Form::Whole, true)));
        assert_eq!(
            yaml("application/yaml;as=Table;v=v1;g=meta.k8s.io,application/json"),
            Ok((Encoding::Json, Form::Whole, false))
        );
        assert_eq!(
            yaml("application/json;as=Table;v=v1;g=meta.k8s.io,application/yaml"),
            Ok((Encoding::Json, Form::Whole, true))
        );
        assert_eq!(for_status(Some(YAML)), ErrorForm::Yaml);
        assert_eq!(
            for_status(Some(
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/yaml"
            )),
            ErrorForm::Yaml
        );
    }

    #[test]
    fn protobuf_is_chosen_for_builtin_kinds_and_json_is_the_fallback_for_custom_resources() {
        let pods = RESOURCES[ids::PODS].builtin;
        let widgets = RESOURCES[ids::WIDGETS].builtin;
        let both = "application/vnd.kubernetes.protobuf, application/json";
        assert_eq!(
            negotiate(Some(both), pods),
            Ok((Encoding::Protobuf, Form::Whole))
        );
        assert_eq!(
            negotiate(Some(both), widgets),
            Ok((Encoding::Json, Form::Whole))
        );
        let (status, wire) = negotiate(Some(PROTOBUF), widgets).unwrap_err();
        assert_eq!((status.code, wire), (406, Encoding::Protobuf));
        assert_eq!(negotiate(None, widgets), Ok((Encoding::Json, Form::Whole)));
    }

    #[test]
    fn errors_follow_the_first_type_that_can_carry_a_status() {
        let encoded = |wire| ErrorForm::Encoded(wire);
        assert_eq!(for_status(None), encoded(Encoding::Json));
        assert_eq!(
            for_status(Some(
                "application/vnd.kubernetes.protobuf, application/json"
            )),
            encoded(Encoding::Protobuf)
        );
        assert_eq!(
            for_status(Some(
                "application/json, application/vnd.kubernetes.protobuf"
            )),
            encoded(Encoding::Json)
        );
        assert_eq!(
            for_status(Some(
                "application/json;as=Table;v=v1;g=meta.k8s.io, application/vnd.kubernetes.protobuf;stream=watch"
            )),
            encoded(Encoding::Protobuf)
        );
        assert_eq!(
            for_status(Some("application/json;q=0, */*")),
            encoded(Encoding::Json)
        );
        for accept in [
            "text/html",
            "application/json;as=Table;v=v1;g=meta.k8s.io",
            "application/yaml;stream=watch",
            "application/json;q=0",
        ] {
            assert_eq!(for_status(Some(accept)), ErrorForm::Indented, "{accept}");
        }
    }

    #[test]
    fn media_types_match_in_any_case_and_q_0_refuses_one() {
        let (pods, widgets) = (
            RESOURCES[ids::PODS].builtin,
            RESOURCES[ids::WIDGETS].builtin,
        );
        assert_eq!(
            negotiate(Some("Application/JSON"), pods),
            Ok((Encoding::Json, Form::Whole))
        );
        assert_eq!(
            negotiate(Some("APPLICATION/VND.KUBERNETES.PROTOBUF"), pods),
            Ok((Encoding::Protobuf, Form::Whole))
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
            Ok((Encoding::Protobuf, Form::Whole))
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
            Ok((Encoding::Json, Form::Whole))
        );
    }

    #[test]
    fn table_requests_fall_through_to_plain_json() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(
            negotiate(Some(kubectl), RESOURCES[ids::PODS].builtin),
            Ok((Encoding::Json, Form::Whole))
        );
    }

    #[test]
    fn metadata_only_is_served_in_protobuf_even_for_custom_resources() {
        let client_go = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json";
        assert_eq!(
            negotiate(Some(client_go), RESOURCES[ids::WIDGETS].builtin),
            Ok((Encoding::Protobuf, Form::Metadata { as_list: true }))
        );
        let kube_rs = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
        assert_eq!(
            negotiate(Some(kube_rs), RESOURCES[ids::PODS].builtin),
            Ok((Encoding::Json, Form::Metadata { as_list: false }))
        );
        assert_eq!(
            wrong_metadata_shape(&RESOURCES[ids::PODS], true).message,
            "you requested PartialObjectMetadata, but the requested object is a list (*v1.PodList)"
        );
    }
}
