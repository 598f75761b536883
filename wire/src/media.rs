//! The encodings of the Kubernetes API on the wire and their media types:
//! the one [`Encoding`] the reflector reads responses in, the server
//! answers in and pass-through reads written objects in.
//!
//! kube-apiserver serves built-in kinds as JSON or as Kubernetes protobuf
//! (`k8s\0` + `runtime.Unknown`; watches as length-framed `WatchEvent`s),
//! custom resources as JSON only.

use crate::Status;

/// `application/json`.
pub const JSON: &str = "application/json";
/// kube-apiserver's protobuf media type (`runtime.ContentTypeProtobuf` in
/// `k8s.io/apimachinery/pkg/runtime/types.go`).
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// The protobuf watch stream: length-framed `WatchEvent`s.
pub const PROTOBUF_WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch";
/// YAML: the JSON form written as sigs.k8s.io/yaml writes it.
pub const YAML: &str = "application/yaml";

/// How a JSON body is written out: compact (with a final newline), pretty
/// ([`crate::pretty`]) or as YAML ([`crate::yaml`]). Pretty and YAML answers
/// are rare: they are rewrites of the compact form, which stays the fast
/// path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    Compact,
    Pretty,
    Yaml,
}

impl Form {
    /// The form of a JSON body: YAML when it was negotiated, else pretty
    /// when `pretty` (see [`crate::pretty::asked`]).
    pub fn of(yaml: bool, pretty: bool) -> Self {
        match (yaml, pretty) {
            (true, _) => Form::Yaml,
            (false, true) => Form::Pretty,
            (false, false) => Form::Compact,
        }
    }

    /// The `Content-Type` of a JSON body in this form.
    pub fn content_type(self) -> &'static str {
        match self {
            Form::Yaml => YAML,
            Form::Compact | Form::Pretty => JSON,
        }
    }

    /// The compact JSON body `json` in this form; as it is when it is not
    /// JSON (YAML is made from parsed JSON).
    pub fn write(self, json: &[u8]) -> Vec<u8> {
        match self {
            Form::Compact => json.to_vec(),
            Form::Pretty => crate::pretty::indent(json),
            Form::Yaml => crate::yaml::from_json(json).unwrap_or_else(|_| json.to_vec()),
        }
    }
}

/// The encoding of a body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// JSON (one object per line for watches).
    Json,
    /// Kubernetes protobuf.
    Protobuf,
}

impl Encoding {
    /// The encoding a `Content-Type` declares: protobuf for
    /// `application/vnd.kubernetes.protobuf` in any case, with any
    /// parameters (`;stream=watch`), JSON otherwise (absent included).
    pub fn of_content_type(content_type: Option<&str>) -> Self {
        let media = content_type
            .and_then(|v| v.split(';').next())
            .map(str::trim);
        match media {
            Some(m) if m.eq_ignore_ascii_case(PROTOBUF) => Encoding::Protobuf,
            _ => Encoding::Json,
        }
    }

    /// The `Content-Type` of a body in this encoding; `watch` for a watch
    /// stream (JSON watches say plain `application/json`, as the API
    /// server's do).
    pub fn content_type(self, watch: bool) -> &'static str {
        match (self, watch) {
            (Encoding::Json, _) => JSON,
            (Encoding::Protobuf, false) => PROTOBUF,
            (Encoding::Protobuf, true) => PROTOBUF_WATCH,
        }
    }

    /// `status` as a body in this encoding (JSON ends with a newline, as
    /// Go's `json.Encoder` ends it), JSON in `form`.
    pub fn status(self, status: &Status, form: Form) -> Vec<u8> {
        match self {
            Encoding::Json => {
                let mut json = status.to_json();
                json.push(b'\n');
                form.write(&json)
            }
            Encoding::Protobuf => status.to_protobuf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_content_type_is_protobuf_in_any_case_with_any_parameters() {
        for (content_type, expected) in [
            (Some(PROTOBUF), Encoding::Protobuf),
            (Some(PROTOBUF_WATCH), Encoding::Protobuf),
            (
                Some("Application/Vnd.Kubernetes.Protobuf ; stream=watch"),
                Encoding::Protobuf,
            ),
            (Some(JSON), Encoding::Json),
            (Some("application/json;stream=watch"), Encoding::Json),
            (Some("text/plain"), Encoding::Json),
            (None, Encoding::Json),
        ] {
            assert_eq!(
                Encoding::of_content_type(content_type),
                expected,
                "{content_type:?}"
            );
        }
    }

    #[test]
    fn content_types_name_the_watch_stream_only_for_protobuf() {
        assert_eq!(Encoding::Json.content_type(true), JSON);
        assert_eq!(Encoding::Protobuf.content_type(false), PROTOBUF);
        assert_eq!(Encoding::Protobuf.content_type(true), PROTOBUF_WATCH);
    }
}
