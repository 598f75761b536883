//! The query parameters of a collection GET (a list, or a watch with
//! `watch=1`), read and checked in kube-apiserver's order and with its
//! answers (see `shared/APISERVER-PROTOCOL.md` and the golden corpus's
//! `errors/`):
//!
//! 1. decoding the parameters: a malformed number or label selector is 400;
//! 2. validating the combination (`ListOptions` validation): 422 `Invalid`
//!    listing every violated rule in `details.causes`;
//! 3. field selectors against the resource's fields: 400;
//! 4. the resourceVersion and the continue token, as storage reads them:
//!    400 from etcd's storage (a list with a limit, a continue token or
//!    `Exact`, which the watch cache hands to etcd), 500 from the watch
//!    cache's (every other list, get and watch: the corpus's
//!    `edges/` `req-rv-abc-*`).
//!
//! Boolean parameters are true unless `0` or `false` (any case); numbers
//! are read by Go's `strconv.ParseInt` (the corpus's `req-timeout-*` and
//! `req-limit-*`); the first of repeated parameters counts.

use std::collections::HashMap;
use std::time::Duration;

use kubecache_wire::{Status, StatusCause, StatusDetails};

use crate::sim::object::StoredObject;
use crate::sim::resources::Resource;
use crate::sim::selector::{FieldSelector, LabelSelector};
use crate::sim::shard::ShardSelector;
use kubecache_wire::continue_token::ContinueToken;

/// `resourceVersionMatch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionMatch {
    /// The snapshot at exactly `resourceVersion`.
    Exact,
    /// Any state at least as new as `resourceVersion`.
    NotOlderThan,
}

/// What a collection GET asks for.
#[derive(Debug, Clone, Default)]
pub struct CollectionParams {
    /// `watch`: stream changes instead of listing.
    pub watch: bool,
    /// `resourceVersion`; `None` when unset or empty.
    pub resource_version: Option<u64>,
    /// `resourceVersionMatch`.
    pub version_match: Option<VersionMatch>,
    /// `limit`; 0 when unset or not positive.
    pub limit: usize,
    /// `continue`, decoded (lists only).
    pub continue_token: Option<ContinueToken>,
    /// `allowWatchBookmarks`.
    pub allow_bookmarks: bool,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
    /// `timeoutSeconds`, when positive.
    pub timeout: Option<Duration>,
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `shardSelector`, when given and not empty.
    pub shards: Option<ShardSelector>,
}

impl CollectionParams {
    /// Reads a query string for `resource`; `watch_list` says whether the
    /// WatchList feature gate is on. The error is the Status to answer.
    pub fn parse(query: &str, resource: &Resource, watch_list: bool) -> Result<Self, Status> {
        Self::parse_with(query, resource, watch_list, None)
    }

    /// Reads the query of a deprecated watch path (`/api/v1/watch/...`):
    /// a watch whatever `watch` says, of the object `name` when the path
    /// names one (kube-apiserver's `ListResource` with `forceWatch`: a
    /// field selector, if given, must require that very name).
    pub fn parse_watch_path(
        query: &str,
        resource: &Resource,
        watch_list: bool,
        name: Option<&str>,
    ) -> Result<Self, Status> {
        Self::parse_with(query, resource, watch_list, Some(name))
    }

    fn parse_with(
        query: &str,
        resource: &Resource,
        watch_list: bool,
        watch_path: Option<Option<&str>>,
    ) -> Result<Self, Status> {
        let mut raw: HashMap<String, String> = HashMap::new();
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            raw.entry(key.into_owned()).or_insert(value.into_owned());
        }
        if let Some(name) = watch_path {
            raw.insert("watch".into(), "true".into());
            if let Some(name) = name {
                let selector = raw.entry("fieldSelector".into()).or_default();
                if selector.is_empty() {
                    *selector = format!("metadata.name={}", escape_field_value(name));
                } else if FieldSelector::exact(selector, "metadata.name").as_deref() != Some(name) {
                    return Err(Status::bad_request(
                        "fieldSelector metadata.name doesn't match requested name",
                    ));
                }
            }
        }
        let get = |key: &str| raw.get(key).map(String::as_str);
        let flag = |key: &str| get(key).map(|v| v != "0" && !v.eq_ignore_ascii_case("false"));
        let labels = LabelSelector::parse(get("labelSelector").unwrap_or_default())
            .map_err(Status::bad_request)?;
        // apimachinery's conversion parses it with the other parameters,
        // before validation: a bad one is a 400.
        let shards = match get("shardSelector").unwrap_or_default() {
            "" => None,
            value => Some(ShardSelector::parse(value).map_err(Status::bad_request)?),
        };
        let limit = integer(get("limit"))?;
        let timeout = integer(get("timeoutSeconds"))?;
        let rv = get("resourceVersion").unwrap_or_default();
        let version_match = get("resourceVersionMatch").unwrap_or_default();
        let continue_param = get("continue").unwrap_or_default();
        let watch = flag("watch").unwrap_or(false);
        let send_initial_events = flag("sendInitialEvents");
        let violations = if watch {
            watch_violations(
                version_match,
                send_initial_events,
                continue_param,
                watch_list,
            )
        } else {
            list_violations(rv, version_match, send_initial_events, continue_param)
        };
        if !violations.is_empty() {
            return Err(invalid(&violations));
        }
        let fields = FieldSelector::parse(
            get("fieldSelector").unwrap_or_default(),
            &resource.supported_fields(),
        )
        .map_err(Status::bad_request)?;
        let from_etcd =
            !watch && (limit > 0 || !continue_param.is_empty() || version_match == "Exact");
        let resource_version = resource_version(rv, from_etcd)?;
        let continue_token = match continue_param {
            "" => None,
            _ if watch => None,
            token => {
                let token = ContinueToken::decode(token)?;
                if resource_version.is_some_and(|rv| rv != 0) {
                    return Err(Status::bad_request(
                        "specifying resource version is not allowed when using continue",
                    ));
                }
                Some(token)
            }
        };
        Ok(CollectionParams {
            watch,
            resource_version,
            version_match: match version_match {
                "Exact" => Some(VersionMatch::Exact),
                "NotOlderThan" => Some(VersionMatch::NotOlderThan),
                _ => None,
            },
            limit: usize::try_from(limit).unwrap_or(0),
            continue_token,
            allow_bookmarks: flag("allowWatchBookmarks").unwrap_or(false),
            send_initial_events,
            // Go's `time.Duration(timeoutSeconds) * time.Second`: 0 is the
            // default, a negative one (overflow included) ends at once.
            timeout: match timeout.wrapping_mul(1_000_000_000) {
                0 => None,
                nanos => Some(Duration::from_nanos(u64::try_from(nanos).unwrap_or(0))),
            },
            labels,
            fields,
            shards,
        })
    }

    /// Whether a selector narrows the collection (lists then carry no
    /// `remainingItemCount`).
    pub fn filtered(&self) -> bool {
        !self.labels.is_empty() || !self.fields.is_empty() || self.shards.is_some()
    }

    /// Whether an object passes the selectors.
    pub fn matches(&self, resource: &Resource, object: &StoredObject) -> bool {
        self.shards
            .as_ref()
            .is_none_or(|shards| shards.matches(&object.uid, &object.namespace))
            && self.labels.matches(|k| object.label(k))
            && self.fields.matches(|f| object.field(resource, f))
    }
}

/// A field selector's value with `\\`, `,` and `=` escaped.
fn escape_field_value(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '=') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// A Go `int64` parameter as `strconv.ParseInt` reads it: one optional sign
/// then what [`go_uint`] reads; unset is 0.
pub(super) fn integer(value: Option<&str>) -> Result<i64, Status> {
    let Some(value) = value else {
        return Ok(0);
    };
    let signed = match go_uint(value.strip_prefix(['+', '-']).unwrap_or(value)) {
        Ok(magnitude) if value.starts_with('-') => 0i64.checked_sub_unsigned(magnitude),
        Ok(magnitude) => i64::try_from(magnitude).ok(),
        Err(why) => {
            return Err(Status::bad_request(format!(
                "strconv.ParseInt: parsing {value:?}: {why}"
            )));
        }
    };
    signed.ok_or_else(|| {
        Status::bad_request(format!(
            "strconv.ParseInt: parsing {value:?}: value out of range"
        ))
    })
}

/// Go's `strconv.ParseUint(s, 10, 64)`, or the reason it refuses `s`:
/// decimal digits only (no blank, no sign, not empty). Go reads from the
/// left and stops at the first fault, so digits too many for 64 bits are
/// out of range even when a bad character follows them.
fn go_uint(s: &str) -> Result<u64, &'static str> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    match s[..digits].parse::<u64>() {
        Ok(n) if digits == s.len() => Ok(n),
        Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => Err("value out of range"),
        _ => Err("invalid syntax"),
    }
}

/// `resourceVersion` as storage reads it: a Go `uint64`, `""` unset; a
/// malformed one is etcd storage's 400 (`from_etcd`) or the watch cache's
/// 500, which has no reason.
pub(super) fn resource_version(value: &str, from_etcd: bool) -> Result<Option<u64>, Status> {
    if value.is_empty() {
        return Ok(None);
    }
    let why = match go_uint(value) {
        Ok(rv) => return Ok(Some(rv)),
        Err(why) => why,
    };
    let invalid = format!(
        "resourceVersion: Invalid value: {value:?}: strconv.ParseUint: parsing {value:?}: {why}"
    );
    Err(if from_etcd {
        Status::bad_request(format!("invalid resource version: {invalid}"))
    } else {
        Status::failure(500, "", invalid)
    })
}

/// One broken rule of `ListOptions` validation.
struct Violation {
    field: &'static str,
    reason: &'static str,
    detail: String,
}

fn forbidden(field: &'static str, why: &str) -> Violation {
    Violation {
        field,
        reason: "FieldValueForbidden",
        detail: format!("Forbidden: {why}"),
    }
}

fn not_supported(field: &'static str, value: &str, supported: &[&str]) -> Violation {
    let supported: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    Violation {
        field,
        reason: "FieldValueNotSupported",
        detail: format!(
            "Unsupported value: {value:?}: supported values: {}",
            supported.join(", ")
        ),
    }
}

fn list_violations(
    rv: &str,
    version_match: &str,
    send_initial_events: Option<bool>,
    continue_param: &str,
) -> Vec<Violation> {
    let mut violations = Vec::new();
    if !version_match.is_empty() {
        if rv.is_empty() {
            violations.push(forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if !continue_param.is_empty() {
            violations.push(forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if !matches!(version_match, "Exact" | "NotOlderThan") {
            violations.push(not_supported(
                "resourceVersionMatch",
                version_match,
                &["Exact", "NotOlderThan", ""],
            ));
        }
        if version_match == "Exact" && rv == "0" {
            violations.push(forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    if send_initial_events.is_some() {
        violations.push(forbidden(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for list",
        ));
    }
    violations
}

fn watch_violations(
    version_match: &str,
    send_initial_events: Option<bool>,
    continue_param: &str,
    watch_list: bool,
) -> Vec<Violation> {
    let mut violations = Vec::new();
    if send_initial_events.is_some() {
        if version_match.is_empty() {
            violations.push(forbidden(
                "resourceVersionMatch",
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if !watch_list {
            violations.push(forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
            ));
        }
    }
    if !version_match.is_empty() {
        if send_initial_events.is_none() {
            violations.push(forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        if version_match != "NotOlderThan" {
            violations.push(not_supported(
                "resourceVersionMatch",
                version_match,
                &["NotOlderThan"],
            ));
        }
        if !continue_param.is_empty() {
            violations.push(forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
    }
    violations
}

/// kube-apiserver's 422 for invalid `ListOptions`: one cause per violation,
/// the message listing them (in brackets when there are several).
fn invalid(violations: &[Violation]) -> Status {
    let listed: Vec<String> = violations
        .iter()
        .map(|v| format!("{}: {}", v.field, v.detail))
        .collect();
    let listed = match listed.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    let mut status = Status::failure(
        422,
        "Invalid",
        format!("ListOptions.meta.k8s.io \"\" is invalid: {listed}"),
    );
    status.details = Some(StatusDetails {
        group: "meta.k8s.io".into(),
        kind: "ListOptions".into(),
        causes: violations
            .iter()
            .map(|v| StatusCause {
                reason: v.reason.into(),
                message: v.detail.clone(),
                field: v.field.into(),
            })
            .collect(),
        ..StatusDetails::default()
    });
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::resources::{RESOURCES, ids};

    fn parse(query: &str) -> Result<CollectionParams, Status> {
        CollectionParams::parse(query, &RESOURCES[ids::PODS], true)
    }

    #[test]
    fn parameters_are_read_as_go_reads_them() {
        let p = parse(
            "watch=true&resourceVersion=0&limit=-3&timeoutSeconds=9&allowWatchBookmarks=1&watch=0",
        )
        .unwrap();
        assert!(
            p.watch && p.allow_bookmarks,
            "first value wins, any non-false is true"
        );
        assert_eq!(p.resource_version, Some(0));
        assert_eq!((p.limit, p.timeout), (0, Some(Duration::from_secs(9))));
        let p = parse("resourceVersion=&watch=False").unwrap();
        assert_eq!((p.watch, p.resource_version), (false, None));
        assert_eq!(
            parse("limit=ten").unwrap_err().message,
            "strconv.ParseInt: parsing \"ten\": invalid syntax"
        );
    }

    #[test]
    fn bad_combinations_are_422_with_every_cause() {
        let status = parse("resourceVersionMatch=Bogus&continue=x").unwrap_err();
        assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
        let causes: Vec<&str> = status
            .details
            .as_ref()
            .unwrap()
            .causes
            .iter()
            .map(|c| c.message.as_str())
            .collect();
        assert_eq!(
            causes,
            [
                "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
                "Forbidden: resourceVersionMatch is forbidden when continue is provided",
                "Unsupported value: \"Bogus\": supported values: \"Exact\", \"NotOlderThan\", \"\"",
            ]
        );
        assert!(status.message.starts_with(
            "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden"
        ));
        let status = parse("watch=1&resourceVersionMatch=NotOlderThan").unwrap_err();
        assert_eq!(
            status.message,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"
        );
        let disabled = CollectionParams::parse(
            "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
            &RESOURCES[ids::PODS],
            false,
        )
        .unwrap_err();
        assert!(
            disabled
                .message
                .ends_with("unless the WatchList feature gate is enabled")
        );
    }

    #[test]
    fn continue_tokens_are_decoded_and_exclude_a_resource_version() {
        let token = ContinueToken::after(12, "ns/a").encode();
        let p = parse(&format!("limit=2&continue={token}&resourceVersion=0")).unwrap();
        assert_eq!(p.continue_token, Some(ContinueToken::after(12, "ns/a")));
        assert_eq!(
            parse(&format!("continue={token}&resourceVersion=5"))
                .unwrap_err()
                .message,
            "specifying resource version is not allowed when using continue"
        );
        assert_eq!(
            parse("resourceVersion=-1&limit=1").unwrap_err().message,
            "invalid resource version: resourceVersion: Invalid value: \"-1\": strconv.ParseUint: parsing \"-1\": invalid syntax"
        );
    }
}
