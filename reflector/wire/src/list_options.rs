//! Query parameters of list and watch requests, validated as kube-apiserver
//! validates them (400 for values that do not parse, 422 for combinations it
//! forbids). kubecache's server reads them here; the simulated API server
//! has its own reader (the oracle does not share the server's misreadings).
//!
//! A parameter given twice counts once, with its first value, as
//! kube-apiserver's query decoding reads it (Go's `url.Values.Get`).

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};

use crate::{FieldSelector, LabelSelector, Status};

/// How a list or watch wants its `resourceVersion` matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionMatch {
    /// `resourceVersionMatch` unset: legacy semantics.
    Unset,
    /// `NotOlderThan`.
    NotOlderThan,
    /// `Exact`.
    Exact,
}

/// Parsed query parameters of a collection GET.
#[derive(Debug)]
pub struct CollectionParams {
    /// `watch=1`.
    pub watch: bool,
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `limit` (0 = none).
    pub limit: usize,
    /// `continue`, decoded.
    pub continue_token: Option<ContinueToken>,
    /// `resourceVersion`, `None` when unset or empty.
    pub resource_version: Option<u64>,
    /// `resourceVersionMatch`.
    pub version_match: VersionMatch,
    /// `allowWatchBookmarks`.
    pub allow_bookmarks: bool,
    /// `timeoutSeconds`; `None` when unset or 0 (the server's default, as
    /// kube-apiserver reads 0).
    pub timeout: Option<Duration>,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
}

impl CollectionParams {
    /// Parses and validates the query string of a list or watch. Which
    /// fields a field selector may name is the caller's to check
    /// ([`FieldSelector::check_supported`]): kubecache's server passes a
    /// selector it cannot evaluate through to the API server.
    pub fn parse(query: &str) -> Result<Self, Status> {
        Self::parse_with(query, false)
    }

    /// [`CollectionParams::parse`] for the deprecated watch paths
    /// (`/api/v1/watch/...`): a watch whatever the `watch` parameter says.
    pub fn parse_watch_path(query: &str) -> Result<Self, Status> {
        Self::parse_with(query, true)
    }

    fn parse_with(query: &str, watch_path: bool) -> Result<Self, Status> {
        let mut params = CollectionParams {
            watch: false,
            labels: LabelSelector::default(),
            fields: FieldSelector::default(),
            limit: 0,
            continue_token: None,
            resource_version: None,
            version_match: VersionMatch::Unset,
            allow_bookmarks: false,
            timeout: None,
            send_initial_events: None,
        };
        let mut raw_rv = None;
        for (key, value) in first_values(query) {
            match key.as_ref() {
                "watch" => params.watch = parse_bool(&key, &value)?,
                "allowWatchBookmarks" => params.allow_bookmarks = parse_bool(&key, &value)?,
                "sendInitialEvents" => params.send_initial_events = Some(parse_bool(&key, &value)?),
                "labelSelector" => {
                    params.labels = LabelSelector::parse(&value)
                        .map_err(|e| Status::bad_request(e.to_string()))?
                }
                "fieldSelector" => {
                    params.fields = FieldSelector::parse(&value)
                        .map_err(|e| Status::bad_request(e.to_string()))?
                }
                "limit" => {
                    let limit: i64 = value.parse().map_err(|_| {
                        Status::bad_request(format!("limit: invalid value {value:?}"))
                    })?;
                    params.limit = usize::try_from(limit.max(0)).unwrap_or(usize::MAX);
                }
                "continue" if !value.is_empty() => {
                    params.continue_token = Some(ContinueToken::decode(&value)?)
                }
                "resourceVersion" if !value.is_empty() => raw_rv = Some(value.into_owned()),
                "resourceVersionMatch" => {
                    params.version_match = match value.as_ref() {
                        "" => VersionMatch::Unset,
                        "NotOlderThan" => VersionMatch::NotOlderThan,
                        "Exact" => VersionMatch::Exact,
                        other => {
                            return Err(invalid(
                                "FieldValueNotSupported",
                                "resourceVersionMatch",
                                format!(
                                    "Unsupported value: \"{other}\": supported values: \"Exact\", \"NotOlderThan\""
                                ),
                            ));
                        }
                    }
                }
                "timeoutSeconds" => {
                    let secs: u64 = value.parse().map_err(|_| {
                        Status::bad_request(format!("timeoutSeconds: invalid value {value:?}"))
                    })?;
                    params.timeout = (secs > 0).then(|| Duration::from_secs(secs));
                }
                _ => {}
            }
        }
        params.watch |= watch_path;
        if let Some(rv) = &raw_rv {
            params.resource_version = Some(parse_resource_version(rv)?);
        }
        params.validate(raw_rv.is_some())?;
        Ok(params)
    }

    /// The checks of apimachinery's `ValidateListOptions`.
    fn validate(&self, has_rv: bool) -> Result<(), Status> {
        if let Some(send) = self.send_initial_events {
            if !self.watch {
                return Err(invalid(
                    "FieldValueForbidden",
                    "sendInitialEvents",
                    "Forbidden: sendInitialEvents is forbidden for list",
                ));
            }
            match self.version_match {
                VersionMatch::Unset if send => {
                    return Err(invalid(
                        "FieldValueForbidden",
                        "resourceVersionMatch",
                        "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                    ));
                }
                VersionMatch::Exact => {
                    return Err(invalid(
                        "FieldValueNotSupported",
                        "resourceVersionMatch",
                        "Unsupported value: \"Exact\": supported values: \"NotOlderThan\"",
                    ));
                }
                _ => {}
            }
            return Ok(());
        }
        if self.version_match != VersionMatch::Unset {
            if self.watch {
                return Err(invalid(
                    "FieldValueForbidden",
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
            if !has_rv {
                return Err(invalid(
                    "FieldValueForbidden",
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if self.continue_token.is_some() {
                return Err(invalid(
                    "FieldValueForbidden",
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            if self.version_match == VersionMatch::Exact && self.resource_version == Some(0) {
                return Err(invalid(
                    "FieldValueForbidden",
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
        }
        if self.continue_token.is_some() && has_rv && !self.watch {
            return Err(Status::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        Ok(())
    }

    /// Whether any selector filters objects.
    pub fn filters(&self) -> bool {
        !self.labels.is_empty() || !self.fields.is_empty()
    }
}

fn invalid(reason: &str, field: &str, detail: impl Into<String>) -> Status {
    Status::invalid("meta.k8s.io", "ListOptions", reason, field, detail)
}

/// The parameters of a query string, each key with its first value only
/// (later repetitions are dropped), in order.
pub fn first_values(
    query: &str,
) -> impl Iterator<Item = (std::borrow::Cow<'_, str>, std::borrow::Cow<'_, str>)> {
    let mut seen = std::collections::HashSet::new();
    form_urlencoded::parse(query.as_bytes()).filter(move |(key, _)| seen.insert(key.clone()))
}

/// The `resourceVersion` of a query string (a get, a `/v1` lookup): `None`
/// when absent or empty.
///
/// # Errors
///
/// 400 when it is not a number.
pub fn resource_version(query: &str) -> Result<Option<u64>, Status> {
    first_values(query)
        .find(|(key, _)| key == "resourceVersion")
        .filter(|(_, value)| !value.is_empty())
        .map(|(_, value)| parse_resource_version(&value))
        .transpose()
}

/// A resourceVersion as kube-apiserver's storage reads it, Go's
/// `strconv.ParseUint`: decimal digits only (no sign, no blanks), with its
/// 400 worded as kube-apiserver words it.
fn parse_resource_version(value: &str) -> Result<u64, Status> {
    let why = if !value.bytes().all(|b| b.is_ascii_digit()) {
        "invalid syntax"
    } else if let Ok(rv) = value.parse() {
        return Ok(rv);
    } else {
        "value out of range"
    };
    Err(Status::bad_request(format!(
        "invalid resource version: resourceVersion: Invalid value: {value:?}: strconv.ParseUint: parsing {value:?}: {why}"
    )))
}

/// Whether a query string asks for a watch (`watch=1`, `watch=true`, …).
pub fn is_watch(query: &str) -> bool {
    first_values(query)
        .any(|(key, value)| key == "watch" && matches!(parse_bool(&key, &value), Ok(true)))
}

/// Go's `strconv.ParseBool`, which the API server uses for query booleans.
fn parse_bool(key: &str, value: &str) -> Result<bool, Status> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "" | "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(Status::bad_request(format!(
            "{key}: invalid value {value:?}: strconv.ParseBool: parsing {value:?}: invalid syntax"
        ))),
    }
}

/// The continue token, as kube-apiserver encodes it: base64 of
/// `{"v":"meta.k8s.io/v1","rv":23723,"start":"ns/name\u0000"}`. `rv` -1 marks
/// an inconsistent continuation at the current revision. The simulator adds
/// `n`, the count of objects before `start`, for `remainingItemCount`; the
/// token is opaque to clients.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContinueToken {
    /// Always `meta.k8s.io/v1`.
    pub v: String,
    /// The snapshot revision, or -1.
    pub rv: i64,
    /// The first key of the next page, relative to the list's prefix.
    pub start: String,
    /// Objects returned before `start` (absent in inconsistent tokens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<usize>,
}

impl ContinueToken {
    /// The key the next page starts after (`start` without its NUL).
    pub fn last_key(&self) -> &str {
        self.start.strip_suffix('\0').unwrap_or(&self.start)
    }

    /// A token that continues after `last_key` at `rv`.
    pub fn after(rv: i64, last_key: &str, before: Option<usize>) -> Self {
        ContinueToken {
            v: "meta.k8s.io/v1".into(),
            rv,
            start: format!("{last_key}\0"),
            n: before,
        }
    }

    /// The token as sent to clients.
    pub fn encode(&self) -> String {
        BASE64.encode(serde_json::to_vec(self).expect("tokens serialize"))
    }

    /// Parses a token sent by a client (400 when it is not one).
    pub fn decode(token: &str) -> Result<Self, Status> {
        let bytes = BASE64
            .decode(token)
            .map_err(|e| Status::bad_request(format!("continue key is not valid: {e}")))?;
        let parsed: ContinueToken = serde_json::from_slice(&bytes)
            .map_err(|e| Status::bad_request(format!("continue key is not valid: {e}")))?;
        if parsed.v != "meta.k8s.io/v1" {
            return Err(Status::bad_request(
                "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
            ));
        }
        Ok(parsed)
    }
}

/// The 410 for a continue token whose snapshot is gone, carrying the token
/// that continues inconsistently at the newest revision (kube-apiserver's
/// exact message).
pub fn expired_continue(start: &str) -> Status {
    let mut status = Status::expired(
        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
    );
    let last_key = start.strip_suffix('\0').unwrap_or(start);
    status.metadata.continue_token = Some(ContinueToken::after(-1, last_key, None).encode());
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(query: &str) -> Result<CollectionParams, Status> {
        CollectionParams::parse(query)
    }

    #[test]
    fn continue_token_has_the_api_servers_shape() {
        let token = ContinueToken::after(23723, "bulk-0/pod-00003", None);
        let json = String::from_utf8(BASE64.decode(token.encode()).unwrap()).unwrap();
        assert_eq!(
            json,
            r#"{"v":"meta.k8s.io/v1","rv":23723,"start":"bulk-0/pod-00003\u0000"}"#
        );
        assert_eq!(ContinueToken::decode(&token.encode()).unwrap(), token);
    }

    #[test]
    fn send_initial_events_on_a_list_is_forbidden() {
        let status = parse("sendInitialEvents=true").unwrap_err();
        assert_eq!(status.code, 422);
        assert!(
            status
                .message
                .ends_with("sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list")
        );
    }

    #[test]
    fn streaming_list_requires_not_older_than() {
        let status = parse("watch=1&sendInitialEvents=true&allowWatchBookmarks=true").unwrap_err();
        assert_eq!(status.code, 422);
        assert!(status.message.ends_with(
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
        ));
        let status =
            parse("watch=1&sendInitialEvents=true&resourceVersionMatch=Exact&resourceVersion=5")
                .unwrap_err();
        assert!(status.message.ends_with(
            "resourceVersionMatch: Unsupported value: \"Exact\": supported values: \"NotOlderThan\""
        ));
        assert!(parse("watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan").is_ok());
    }

    #[test]
    fn malformed_values_are_bad_requests() {
        assert_eq!(parse("limit=ten").unwrap_err().code, 400);
        assert_eq!(parse("watch=maybe").unwrap_err().code, 400);
        assert_eq!(parse("continue=%%%").unwrap_err().code, 400);
        assert_eq!(parse("resourceVersion=abc").unwrap_err().code, 400);
        assert_eq!(
            parse("fieldSelector=spec.foo%3D%3D%3D").unwrap_err().code,
            400
        );
        assert_eq!(parse("resourceVersionMatch=Exact").unwrap_err().code, 422);
    }

    #[test]
    fn timeout_seconds_zero_means_the_default_timeout() {
        assert_eq!(parse("watch=1&timeoutSeconds=0").unwrap().timeout, None);
        assert_eq!(
            parse("watch=1&timeoutSeconds=7").unwrap().timeout,
            Some(Duration::from_secs(7))
        );
    }

    #[test]
    fn repeated_parameters_take_the_first_value() {
        let params =
            parse("limit=5&limit=9&watch=0&watch=1&labelSelector=a%3D1&labelSelector=b").unwrap();
        assert_eq!(params.limit, 5);
        assert!(!params.watch);
        assert_eq!(params.labels.to_string(), "a=1");
        assert_eq!(
            resource_version("resourceVersion=7&resourceVersion=9").unwrap(),
            Some(7)
        );
        assert_eq!(
            resource_version("resourceVersion=&resourceVersion=9").unwrap(),
            None
        );
        assert!(!is_watch("watch=false&watch=true"));
        assert!(is_watch("watch=true&watch=false"));
    }

    #[test]
    fn a_resource_version_is_decimal_digits_only() {
        for value in ["+5", "-5", " 5", "5 ", "0x5", "5.0"] {
            let query = format!(
                "resourceVersion={}",
                form_urlencoded::byte_serialize(value.as_bytes()).collect::<String>()
            );
            let status = parse(&query).unwrap_err();
            assert_eq!(status.code, 400, "{value:?}");
            assert_eq!(
                status.message,
                format!(
                    "invalid resource version: resourceVersion: Invalid value: {value:?}: strconv.ParseUint: parsing {value:?}: invalid syntax"
                )
            );
            assert_eq!(resource_version(&query).unwrap_err().code, 400);
        }
        assert!(
            parse("resourceVersion=18446744073709551616")
                .unwrap_err()
                .message
                .ends_with("value out of range")
        );
        assert_eq!(
            parse("resourceVersion=0042").unwrap().resource_version,
            Some(42)
        );
    }

    #[test]
    fn a_watch_path_is_a_watch_whatever_the_parameter_says() {
        let params = CollectionParams::parse_watch_path("watch=0").unwrap();
        assert!(params.watch);
        // Validated as a watch: resourceVersionMatch is forbidden there.
        let status = CollectionParams::parse_watch_path(
            "resourceVersion=5&resourceVersionMatch=NotOlderThan",
        )
        .unwrap_err();
        assert_eq!(status.code, 422);
    }
}
