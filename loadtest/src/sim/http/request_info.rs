//! What a request is about, read from its method, path and query the way
//! kube-apiserver reads it for authorization (`RequestInfoFactory` in
//! `apiserver/pkg/endpoints/request/requestinfo.go`):
//!
//! - the path is percent-decoded first (Go's `URL.Path`), then split at `/`;
//! - `/api/{version}/...` and `/apis/{group}/{version}/...` with something
//!   after the version are resource requests; every other path is a
//!   non-resource request whose verb is the lowercased method;
//! - the verb comes from a `/watch/` or `/proxy/` segment after the version,
//!   else from the method: GET and HEAD `get` (`list`, or `watch` with a
//!   true `watch` parameter, when no name is given), POST `create`, PUT
//!   `update`, PATCH `patch`, DELETE `delete` (`deletecollection` without a
//!   name);
//! - `namespaces/{ns}/` sets the namespace (also for the namespace object
//!   itself and its `status` and `finalize`), then come resource, name and
//!   subresource;
//! - a list or watch whose field selector requires `metadata.name=x` is
//!   about the object `x`.

use axum::http::Method;

use crate::sim::auth::{Attributes, ResourceAttributes, UserInfo};
use crate::sim::selector::FieldSelector;

/// One request, as authorization sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestInfo {
    /// Whether it is about a resource (else a non-resource path).
    pub is_resource: bool,
    /// The URL path.
    pub path: String,
    /// The verb.
    pub verb: String,
    /// The API group (empty for core).
    pub api_group: String,
    /// The API version.
    pub api_version: String,
    /// The namespace, empty when none.
    pub namespace: String,
    /// The resource (plural).
    pub resource: String,
    /// The subresource.
    pub subresource: String,
    /// The object's name.
    pub name: String,
    /// The path from the resource on (`pods/p/log` as three parts).
    pub parts: Vec<String>,
    /// Whether the verb came from a `/watch/` or `/proxy/` path segment.
    pub verb_in_path: bool,
}

impl RequestInfo {
    /// Reads a request. The error (a `/watch` or `/proxy` segment with
    /// nothing after it) is what kube-apiserver answers with a 500.
    pub fn parse(method: &Method, path: &str, query: &str) -> Result<RequestInfo, String> {
        // Go's `URL.Path`: percent-decoded before anything reads it.
        let path = &*percent_encoding::percent_decode_str(path).decode_utf8_lossy();
        let mut info = RequestInfo {
            path: path.to_string(),
            verb: method.as_str().to_ascii_lowercase(),
            ..RequestInfo::default()
        };
        let trimmed = path.trim_matches('/');
        let segments: Vec<&str> = if trimmed.is_empty() {
            Vec::new()
        } else {
            trimmed.split('/').collect()
        };
        let mut rest: &[&str] = match segments.as_slice() {
            ["api", version, rest @ ..] if !rest.is_empty() => {
                info.api_version = version.to_string();
                rest
            }
            ["apis", group, version, rest @ ..] if !rest.is_empty() => {
                info.api_group = group.to_string();
                info.api_version = version.to_string();
                rest
            }
            _ => return Ok(info),
        };
        info.is_resource = true;
        if let [special @ ("watch" | "proxy"), after @ ..] = rest {
            if after.is_empty() {
                return Err(format!(
                    "unable to determine kind and namespace from url, {path}"
                ));
            }
            info.verb = special.to_string();
            info.verb_in_path = true;
            rest = after;
        } else {
            info.verb = match *method {
                Method::POST => "create",
                Method::GET | Method::HEAD => "get",
                Method::PUT => "update",
                Method::PATCH => "patch",
                Method::DELETE => "delete",
                _ => "",
            }
            .to_string();
        }
        if let ["namespaces", namespace, after @ ..] = rest {
            info.namespace = namespace.to_string();
            if !after.is_empty() && !matches!(after[0], "status" | "finalize") {
                rest = after;
            }
        }
        info.parts = rest.iter().map(|s| s.to_string()).collect();
        if info.parts.len() >= 3 && info.verb != "proxy" {
            info.subresource = info.parts[2].clone();
        }
        if info.parts.len() >= 2 {
            info.name = info.parts[1].clone();
        }
        info.resource = info.parts[0].clone();
        if info.name.is_empty() && info.verb == "get" {
            info.verb = if watch_requested(query) {
                "watch"
            } else {
                "list"
            }
            .into();
            if let Some(name) = field_selector(query)
                .and_then(|s| FieldSelector::exact(&s, "metadata.name"))
                .filter(|n| valid_path_segment(n))
            {
                info.name = name;
            }
        }
        if info.name.is_empty() && info.verb == "delete" {
            info.verb = "deletecollection".into();
        }
        Ok(info)
    }

    /// The attributes to authorize, for `user`.
    pub fn attributes(&self, user: UserInfo) -> Attributes {
        Attributes {
            user,
            verb: self.verb.clone(),
            resource: self.is_resource.then(|| ResourceAttributes {
                namespace: self.namespace.clone(),
                group: self.api_group.clone(),
                version: self.api_version.clone(),
                resource: self.resource.clone(),
                subresource: self.subresource.clone(),
                name: self.name.clone(),
            }),
            path: self.path.clone(),
        }
    }
}

/// The first `watch` parameter, true unless `0` or `false`.
fn watch_requested(query: &str) -> bool {
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "watch")
        .is_some_and(|(_, v)| v != "0" && !v.eq_ignore_ascii_case("false"))
}

fn field_selector(query: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "fieldSelector")
        .map(|(_, v)| v.into_owned())
}

/// `path.IsValidPathSegmentName`: not `.` or `..`, no `/` or `%`.
fn valid_path_segment(name: &str) -> bool {
    name != "." && name != ".." && !name.contains(['/', '%'])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(method: Method, path_and_query: &str) -> RequestInfo {
        let (path, query) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query, ""));
        RequestInfo::parse(&method, path, query).unwrap()
    }

    fn summary(i: &RequestInfo) -> (bool, &str, &str, &str, &str, &str, &str) {
        (
            i.is_resource,
            i.verb.as_str(),
            i.api_group.as_str(),
            i.namespace.as_str(),
            i.resource.as_str(),
            i.name.as_str(),
            i.subresource.as_str(),
        )
    }

    #[test]
    fn verbs_come_from_the_method_the_name_and_the_watch_parameter() {
        let cases = [
            (
                Method::GET,
                "/api/v1/pods",
                (true, "list", "", "", "pods", "", ""),
            ),
            (
                Method::GET,
                "/api/v1/pods?watch=true",
                (true, "watch", "", "", "pods", "", ""),
            ),
            (
                Method::GET,
                "/api/v1/pods?watch=0",
                (true, "list", "", "", "pods", "", ""),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dp",
                (true, "list", "", "ns", "pods", "p", ""),
            ),
            (
                Method::GET,
                "/api/v1/watch/namespaces/ns/pods/p",
                (true, "watch", "", "ns", "pods", "p", ""),
            ),
            (
                Method::POST,
                "/apis/example.com/v1/namespaces/ns/widgets",
                (true, "create", "example.com", "ns", "widgets", "", ""),
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/ns/pods/p/status",
                (true, "update", "", "ns", "pods", "p", "status"),
            ),
            (
                Method::PATCH,
                "/api/v1/namespaces/ns/configmaps/c",
                (true, "patch", "", "ns", "configmaps", "c", ""),
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/ns/pods/p",
                (true, "delete", "", "ns", "pods", "p", ""),
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/ns/pods",
                (true, "deletecollection", "", "ns", "pods", "", ""),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/ns/pods/p/log",
                (true, "get", "", "ns", "pods", "p", "log"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/ns",
                (true, "get", "", "ns", "namespaces", "ns", ""),
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/ns/status",
                (true, "update", "", "ns", "namespaces", "ns", "status"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces",
                (true, "list", "", "", "namespaces", "", ""),
            ),
            (
                Method::GET,
                "/api/v1/proxy/namespaces/ns/pods/p/x/y",
                (true, "proxy", "", "ns", "pods", "p", ""),
            ),
            (Method::GET, "/api/v1", (false, "get", "", "", "", "", "")),
            (
                Method::GET,
                "/apis/example.com/v1",
                (false, "get", "", "", "", "", ""),
            ),
            (
                Method::POST,
                "/healthz",
                (false, "post", "", "", "", "", ""),
            ),
        ];
        for (method, path, want) in cases {
            assert_eq!(summary(&info(method, path)), want, "{path}");
        }
    }

    #[test]
    fn path_segments_are_percent_decoded() {
        let i = info(Method::GET, "/api/v1/namespaces/billing%2Dprod/pods/p%31");
        assert_eq!(
            summary(&i),
            (true, "get", "", "billing-prod", "pods", "p1", "")
        );
        assert_eq!(i.path, "/api/v1/namespaces/billing-prod/pods/p1");
    }

    #[test]
    fn a_bare_watch_segment_is_an_error() {
        assert!(RequestInfo::parse(&Method::GET, "/api/v1/watch", "").is_err());
    }
}
