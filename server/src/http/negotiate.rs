//! Content negotiation: what a read of a cached resource is answered in,
//! from its `Accept` header, as kube-apiserver negotiates
//! (`apiserver/pkg/endpoints/handlers/negotiation` and `transformObject`).
//! The one reader of `Accept` for lists, gets and watches.
//!
//! `Accept` is a comma-separated list of media ranges with parameters.
//! In the negotiation, media types match case-insensitively; a range with `q=0` (or a `q` that
//! does not parse, which Go reads as 0) is refused, and JSON refused so is
//! not served for a wildcard either (RFC 9110's "not acceptable": the
//! wildcard means protobuf then); the others are tried highest `q` first,
//! in the order written among equals. The first range kubecache can serve
//! wins:
//! - `application/json` (also `*/*` and `application/*`): the objects in JSON;
//! - `application/vnd.kubernetes.protobuf`: the objects in protobuf, for kinds
//!   with a protobuf schema only (custom resources have none; kinds of
//!   built-in groups the schema does not cover, such as
//!   `CustomResourceDefinition`, neither: kubecache cannot encode them);
//! - with `as=PartialObjectMetadata` or `as=PartialObjectMetadataList`,
//!   `g=meta.k8s.io`, `v=v1`: the objects' metadata only, in JSON or in
//!   protobuf, whatever the kind (custom resources included);
//! - with `as=Table`, `g=meta.k8s.io`, `v=v1` or `v1beta1`: a Table, in JSON
//!   only;
//! - `application/yaml`: any of the above as YAML, made from the JSON
//!   ([`kubecache_wire::yaml`]); not for a watch.
//!
//! A `stream` parameter other than `stream=watch` refuses the range, as other
//! `as`/`g`/`v` values do. Nothing served: the API server's 406, which names
//! the types it serves, word for word. As on the API server, a list
//! asked for `as=PartialObjectMetadata` (or a get asked for
//! `…MetadataList`) is a 406 once negotiated; a watch takes either (its
//! events are single objects; the API server would send full objects
//! encoded as metadata, which no client can read).
//!
//! For built-in kinds, kube-apiserver's router (go-restful) picks a route
//! before any handler negotiates, and refuses with a 406 of its own an
//! `Accept` none of whose ranges is `*/*` or, exactly (in case too) and
//! without its parameters, a type the route produces ([`router_refusal`]):
//! `Application/JSON` is refused there. Custom resources are served by
//! another handler, which has no such step. kubecache tells built-in kinds
//! by their protobuf schema.
//!
//! Errors are encoded apart ([`error_encoding`]): in the first range without
//! `as` that is JSON, YAML or protobuf, as the API server negotiates its Status;
//! with none, as the API server writes what it cannot negotiate (indented
//! JSON: a Table asked for in protobuf only gets that 406).

use std::borrow::Cow;

use kubecache_wire::protobuf::MessageType;
use kubecache_wire::{Status, StatusDetails};

use super::table::{self, IncludeObject};
use crate::cacher::encoding::Shape;
use kubecache_wire::Encoding;
use kubecache_wire::media::{JSON, PROTOBUF, YAML};

/// How a list, get or watch is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rendering {
    /// The objects, or their metadata, in an encoding.
    Encoded(Shape, Encoding),
    /// A `Table` of `meta.k8s.io/{version}`, JSON, rows carrying what
    /// `includeObject` says.
    Table {
        version: &'static str,
        include: IncludeObject,
    },
}

impl Rendering {
    /// The encoding of the body.
    pub(crate) fn encoding(self) -> Encoding {
        match self {
            Rendering::Encoded(_, encoding) => encoding,
            Rendering::Table { .. } => Encoding::Json,
        }
    }
}

/// What is read: one object, a list, or a watch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Read {
    Get,
    List,
    Watch,
}

/// The resource read, as negotiation needs it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Served<'a> {
    /// Its protobuf message, `None` when it has none.
    pub protobuf: Option<MessageType>,
    /// Its kind and version, for the Go type named in 406 messages.
    pub kind: &'a str,
    pub version: &'a str,
}

/// One media range of `Accept`, borrowed from it where it is lower case
/// already (as clients send it): reading one costs no allocation.
struct Range<'a> {
    /// `type/subtype`, lower case.
    media: Cow<'a, str>,
    params: Vec<(Cow<'a, str>, &'a str)>,
    q: f32,
}

/// `text` in lower case, borrowed when it is.
fn lower(text: &str) -> Cow<'_, str> {
    if text.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(text.to_ascii_lowercase())
    } else {
        Cow::Borrowed(text)
    }
}

impl Range<'_> {
    fn param(&self, key: &str) -> Option<&str> {
        self.params.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// `as`, `g` or `v` is given: a conversion is asked for.
    fn converts(&self) -> bool {
        ["as", "g", "v"].iter().any(|k| self.param(k).is_some())
    }

    /// YAML, written from the JSON encoding.
    fn yaml(&self) -> bool {
        self.media == YAML
    }

    /// The encoding of its media type, if kubecache has it (YAML is JSON
    /// rewritten); a wildcard is JSON, or protobuf when JSON is refused.
    fn encoding(&self, json_refused: bool) -> Option<Encoding> {
        match &*self.media {
            JSON | YAML => Some(Encoding::Json),
            "application/*" | "*/*" if !json_refused => Some(Encoding::Json),
            PROTOBUF | "application/*" | "*/*" => Some(Encoding::Protobuf),
            _ => None,
        }
    }
}

/// The media ranges of an `Accept` header.
struct Ranges<'a> {
    /// Those not refused (`q` > 0), highest `q` first.
    accepted: Vec<Range<'a>>,
    /// Plain JSON is refused (`application/json;q=0`).
    json_refused: bool,
}

/// The media ranges of `accept`.
fn ranges(accept: &str) -> Ranges<'_> {
    let mut json_refused = false;
    let mut accepted: Vec<Range<'_>> = kubecache_wire::ascii::split(accept, b',')
        .filter_map(|clause| {
            let mut parts = kubecache_wire::ascii::split(clause, b';');
            let media = lower(parts.next()?.trim());
            if media.is_empty() {
                return None;
            }
            let mut range = Range {
                media,
                params: Vec::new(),
                q: 1.0,
            };
            for param in parts {
                let Some((key, value)) = param.split_once('=') else {
                    continue;
                };
                let key = lower(key.trim());
                let value = value.trim();
                if key == "q" {
                    range.q = value.parse().unwrap_or(0.0);
                } else {
                    range.params.push((key, value));
                }
            }
            if range.q > 0.0 {
                return Some(range);
            }
            json_refused |= range.media == JSON && !range.converts();
            None
        })
        .collect();
    accepted.sort_by(|a, b| b.q.total_cmp(&a.q));
    Ranges {
        accepted,
        json_refused,
    }
}

/// A request's `Accept` header, not blank, with its media ranges: read
/// once for both the answer and its errors.
pub(crate) struct Accept<'a> {
    header: &'a str,
    ranges: Ranges<'a>,
}

impl<'a> Accept<'a> {
    /// `header` read, `None` when absent or blank (JSON), or plain JSON
    /// alone, the most common, which negotiates as no header does.
    pub(crate) fn of(header: Option<&'a str>) -> Option<Accept<'a>> {
        let header = header.filter(|h| !h.trim().is_empty() && *h != "application/json")?;
        Some(Accept {
            header,
            ranges: ranges(header),
        })
    }
}

/// How to answer `read` of `served` for `accept` (`None`: no header, JSON)
/// and the `includeObject` of `query`, and whether in YAML.
///
/// # Errors
///
/// 406 when no range can be served, or a metadata list or object is asked
/// of the other; 400 for an unknown `includeObject`.
pub(crate) fn negotiate(
    accept: Option<&Accept<'_>>,
    query: &str,
    read: Read,
    served: Served<'_>,
) -> Result<(Rendering, bool), Status> {
    let Some(Accept { header, ranges }) = accept else {
        return Ok((Rendering::Encoded(Shape::Object, Encoding::Json), false));
    };
    if served.protobuf.is_some()
        && let Some(refusal) = router_refusal(header, read)
    {
        return Err(refusal);
    }
    for range in &ranges.accepted {
        let Some(encoding) = range.encoding(ranges.json_refused) else {
            continue;
        };
        if range.param("stream").is_some_and(|s| s != "watch")
            || (range.yaml() && read == Read::Watch)
        {
            continue;
        }
        let yaml = range.yaml();
        if !range.converts() {
            if encoding == Encoding::Json || served.protobuf.is_some() {
                return Ok((Rendering::Encoded(Shape::Object, encoding), yaml));
            }
            continue;
        }
        if range.param("g") != Some("meta.k8s.io") {
            continue;
        }
        match (range.param("as"), range.param("v"), encoding) {
            (Some("Table"), Some(v @ ("v1" | "v1beta1")), Encoding::Json) => {
                let table = Rendering::Table {
                    version: if v == "v1" { "v1" } else { "v1beta1" },
                    include: table::include_object(query)?,
                };
                return Ok((table, yaml));
            }
            (
                Some(as_ @ ("PartialObjectMetadata" | "PartialObjectMetadataList")),
                Some("v1"),
                _,
            ) => {
                return metadata(as_ == "PartialObjectMetadataList", read, served)
                    .map(|()| (Rendering::Encoded(Shape::Metadata, encoding), yaml));
            }
            _ => {}
        }
    }
    Err(not_acceptable(read))
}

/// Whether metadata asked `as` a list (or not) fits `read`: the API
/// server's `asPartialObjectMetadata(List)` refuses the other with a 406
/// naming the Go type it had.
fn metadata(as_list: bool, read: Read, served: Served<'_>) -> Result<(), Status> {
    let go_type = |list: &str| match served.protobuf {
        Some(_) => format!("*{}.{}{list}", served.version, served.kind),
        None => format!("*unstructured.Unstructured{list}"),
    };
    let message = match (read, as_list) {
        (Read::Watch, _) | (Read::List, true) | (Read::Get, false) => return Ok(()),
        (Read::List, false) => format!(
            "you requested PartialObjectMetadata, but the requested object is a list ({})",
            go_type("List")
        ),
        (Read::Get, true) => format!(
            "you requested PartialObjectMetadataList, but the requested object is not a list ({})",
            go_type("")
        ),
    };
    Err(Status::failure(406, "NotAcceptable", message))
}

/// go-restful's 406 for a route of `read` (see the module doc), worded as
/// it words it: `None` when a range of `accept` names `*/*` or, exactly, a
/// type the route produces.
fn router_refusal(accept: &str, read: Read) -> Option<Status> {
    const PRODUCED: [&str; 5] = [
        "application/json",
        "application/yaml",
        "application/vnd.kubernetes.protobuf",
        "application/json;stream=watch",
        "application/vnd.kubernetes.protobuf;stream=watch",
    ];
    let produces = if read == Read::Get {
        &PRODUCED[..3]
    } else {
        &PRODUCED[..]
    };
    let routed = kubecache_wire::ascii::split(accept, b',').any(|range| {
        let media = kubecache_wire::ascii::split(range, b';')
            .next()
            .unwrap_or_default()
            .trim_matches(' ');
        media == "*/*" || produces.contains(&media)
    });
    if routed {
        return None;
    }
    let message = format!(
        "406: Not Acceptable\n\nAvailable representations: {}",
        produces.join(", ")
    );
    let mut status = Status::failure(406, "NotAcceptable", message);
    status.details = Some(StatusDetails::default());
    Some(status)
}

/// 406: nothing in `Accept` is served; worded as the API server words it.
fn not_acceptable(read: Read) -> Status {
    let types = if read == Read::Watch {
        "application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"
    } else {
        "application/json, application/yaml, application/vnd.kubernetes.protobuf"
    };
    Status::failure(
        406,
        "NotAcceptable",
        format!("only the following media types are accepted: {types}"),
    )
}

/// The encoding of an error Status for `accept`, and whether in YAML: the
/// first range without a conversion that is JSON, YAML or protobuf (a
/// Status has them all); JSON without `Accept`; `None` when `Accept` names
/// none (see [`error::render`](crate::error::render)).
pub(crate) fn error_encoding(accept: Option<&Accept<'_>>) -> Option<(Encoding, bool)> {
    let Some(Accept { ranges, .. }) = accept else {
        return Some((Encoding::Json, false));
    };
    ranges
        .accepted
        .iter()
        .filter(|range| !range.converts())
        .find_map(|range| Some((range.encoding(ranges.json_refused)?, range.yaml())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn negotiate(
        accept: Option<&str>,
        query: &str,
        read: Read,
        served: Served<'_>,
    ) -> Result<(Rendering, bool), Status> {
        super::negotiate(Accept::of(accept).as_ref(), query, read, served)
    }

    fn error_encoding(accept: Option<&str>) -> Option<(Encoding, bool)> {
        super::error_encoding(Accept::of(accept).as_ref())
    }

    const POD: Served<'static> = Served {
        protobuf: None,
        kind: "Pod",
        version: "v1",
    };

    fn pods() -> Served<'static> {
        Served {
            protobuf: kubecache_wire::protobuf::message_type("v1", "Pod"),
            ..POD
        }
    }

    fn widgets() -> Served<'static> {
        Served {
            protobuf: None,
            kind: "Widget",
            version: "v1",
        }
    }

    fn list(accept: &str, served: Served<'_>) -> Result<Rendering, Status> {
        read(accept, Read::List, served)
    }

    /// The rendering negotiated, in JSON (not YAML).
    fn read(accept: &str, read: Read, served: Served<'_>) -> Result<Rendering, Status> {
        negotiate(Some(accept), "", read, served).map(|(rendering, yaml)| {
            assert!(!yaml, "{accept}");
            rendering
        })
    }

    const PB_THEN_JSON: &str = "application/vnd.kubernetes.protobuf,application/json";
    const KUBECTL: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    const CLIENT_GO_METADATA_LIST: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json";

    #[test]
    fn protobuf_is_served_for_kinds_with_a_schema_and_custom_resources_fall_back_to_json() {
        assert_eq!(
            list(PB_THEN_JSON, pods()),
            Ok(Rendering::Encoded(Shape::Object, Encoding::Protobuf))
        );
        assert_eq!(
            list(PB_THEN_JSON, widgets()),
            Ok(Rendering::Encoded(Shape::Object, Encoding::Json))
        );
        let refused = list(PROTOBUF, widgets()).unwrap_err();
        assert_eq!(
            (refused.code, refused.reason.as_str()),
            (406, "NotAcceptable")
        );
        assert_eq!(
            refused.message,
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
        );
        assert_eq!(
            negotiate(None, "", Read::Get, widgets()),
            Ok((Rendering::Encoded(Shape::Object, Encoding::Json), false))
        );
    }

    #[test]
    fn metadata_only_is_served_in_json_and_protobuf_for_every_kind() {
        assert_eq!(
            list(CLIENT_GO_METADATA_LIST, widgets()),
            Ok(Rendering::Encoded(Shape::Metadata, Encoding::Protobuf))
        );
        let kube_rs = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        assert_eq!(
            list(kube_rs, pods()),
            Ok(Rendering::Encoded(Shape::Metadata, Encoding::Json))
        );
        let watch = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
        assert_eq!(
            read(watch, Read::Watch, pods()),
            Ok(Rendering::Encoded(Shape::Metadata, Encoding::Json))
        );
        assert_eq!(
            read(watch, Read::Get, widgets()),
            Ok(Rendering::Encoded(Shape::Metadata, Encoding::Json))
        );
    }

    #[test]
    fn metadata_of_the_wrong_shape_is_refused_as_the_api_server_refuses_it() {
        let single =
            "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io,application/json";
        let refused = list(single, pods()).unwrap_err();
        assert_eq!(
            (refused.code, refused.message.as_str()),
            (
                406,
                "you requested PartialObjectMetadata, but the requested object is a list (*v1.PodList)"
            )
        );
        let refused = read(CLIENT_GO_METADATA_LIST, Read::Get, widgets()).unwrap_err();
        assert_eq!(
            refused.message,
            "you requested PartialObjectMetadataList, but the requested object is not a list (*unstructured.Unstructured)"
        );
    }

    #[test]
    fn tables_are_json_only() {
        assert_eq!(
            list(KUBECTL, pods()),
            Ok(Rendering::Table {
                version: "v1",
                include: IncludeObject::Metadata
            })
        );
        let unknown_include = negotiate(Some(KUBECTL), "includeObject=All", Read::List, pods());
        assert_eq!(unknown_include.unwrap_err().code, 400);
        let protobuf_table = "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io";
        assert_eq!(list(protobuf_table, pods()).unwrap_err().code, 406);
    }

    #[test]
    fn media_types_match_case_insensitively_and_q_0_refuses() {
        // A custom resource's handler has no router step before it.
        assert_eq!(
            list("Application/JSON", widgets()),
            Ok(Rendering::Encoded(Shape::Object, Encoding::Json))
        );
        // A built-in kind's route is picked by exact media type first.
        let refused = list("Application/Vnd.Kubernetes.Protobuf", pods()).unwrap_err();
        assert_eq!(refused.code, 406);
        assert!(
            refused.message.starts_with(
                "406: Not Acceptable\n\nAvailable representations: application/json, "
            )
        );
        assert_eq!(
            list(
                "application/vnd.kubernetes.protobuf;q=1, Application/JSON",
                pods()
            ),
            Ok(Rendering::Encoded(Shape::Object, Encoding::Protobuf))
        );
        assert_eq!(
            list(
                "application/vnd.kubernetes.protobuf;q=0, application/json",
                pods()
            ),
            Ok(Rendering::Encoded(Shape::Object, Encoding::Json))
        );
        assert_eq!(list("application/json;q=0", pods()).unwrap_err().code, 406);
        assert_eq!(
            list(
                "application/json;q=0.5, application/vnd.kubernetes.protobuf",
                pods()
            ),
            Ok(Rendering::Encoded(Shape::Object, Encoding::Protobuf)),
            "the higher q first"
        );
        assert_eq!(list("application/xml", pods()).unwrap_err().code, 406);
        assert_eq!(
            list("*/*", pods()),
            Ok(Rendering::Encoded(Shape::Object, Encoding::Json))
        );
        assert_eq!(
            list("application/json;q=0, */*", pods()),
            Ok(Rendering::Encoded(Shape::Object, Encoding::Protobuf)),
            "JSON refused is not served for a wildcard"
        );
        assert_eq!(
            list("application/json;q=0, */*", widgets())
                .unwrap_err()
                .code,
            406
        );
        let table = "application/json;q=0, application/json;as=Table;v=v1;g=meta.k8s.io";
        assert!(matches!(list(table, pods()), Ok(Rendering::Table { .. })));
        assert_eq!(
            list(
                "application/json;stream=other, application/vnd.kubernetes.protobuf",
                pods()
            ),
            Ok(Rendering::Encoded(Shape::Object, Encoding::Protobuf))
        );
    }

    #[test]
    fn yaml_is_served_for_gets_lists_and_tables_but_not_watches() {
        let yaml = |accept: &str, read: Read| negotiate(Some(accept), "", read, pods());
        let object = Rendering::Encoded(Shape::Object, Encoding::Json);
        assert_eq!(yaml(YAML, Read::Get), Ok((object, true)));
        assert_eq!(yaml(YAML, Read::List), Ok((object, true)));
        let table = "application/yaml;as=Table;v=v1;g=meta.k8s.io";
        assert!(matches!(
            yaml(table, Read::List),
            Ok((Rendering::Table { .. }, true))
        ));
        let json_table_first = "application/json;as=Table;v=v1;g=meta.k8s.io,application/yaml";
        assert!(matches!(
            yaml(json_table_first, Read::List),
            Ok((Rendering::Table { .. }, false))
        ));
        let refused = yaml(YAML, Read::Watch).unwrap_err();
        assert_eq!(
            refused.message,
            "only the following media types are accepted: application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"
        );
        assert_eq!(error_encoding(Some(YAML)), Some((Encoding::Json, true)));
    }

    #[test]
    fn errors_are_encoded_in_the_first_plain_range() {
        let error_encoding = |accept| error_encoding(accept).map(|(encoding, _)| encoding);
        assert_eq!(error_encoding(None), Some(Encoding::Json));
        assert_eq!(error_encoding(Some(PB_THEN_JSON)), Some(Encoding::Protobuf));
        assert_eq!(
            error_encoding(Some(CLIENT_GO_METADATA_LIST)),
            Some(Encoding::Json)
        );
        assert_eq!(error_encoding(Some(PROTOBUF)), Some(Encoding::Protobuf));
        assert_eq!(error_encoding(Some("text/html")), None);
        let protobuf_table = "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io";
        assert_eq!(error_encoding(Some(protobuf_table)), None);
    }
}
