//! Query parameters of list and watch requests, validated as kube-apiserver
//! validates them (400 for values that do not parse, 422 for combinations it
//! forbids). kubecache's server reads them here; the simulated API server
//! has its own reader (the oracle does not share the server's misreadings),
//! but for the continue token, which both must read as kube-apiserver does
//! ([`crate::continue_token`]).
//!
//! A parameter given twice counts once, with its first value, as
//! kube-apiserver's query decoding reads it (Go's `url.Values.Get`).
//! Numbers are read by Go's `strconv`, as apimachinery's query conversions
//! read them: one that does not parse is refused with Go's own error text
//! (`strconv.ParseInt: parsing "abc": invalid syntax`), a malformed
//! `resourceVersion` as the storage that reads it refuses it (see
//! [`CollectionParams::parse`]).

use std::time::Duration;

use crate::continue_token::ContinueToken;
use crate::selector::go_quote;
use crate::{FieldSelector, LabelSelector, ShardSelector, Status};

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
    /// `shardSelector` (KEP-5866); `None` when unset or empty, as
    /// apimachinery's conversion leaves an empty one unparsed.
    pub shards: Option<ShardSelector>,
    /// `limit` (0 = none).
    pub limit: usize,
    /// `continue`, decoded ([`ContinueToken`]).
    pub continue_token: Option<ContinueToken>,
    /// `resourceVersion`, `None` when unset or empty.
    pub resource_version: Option<u64>,
    /// `resourceVersionMatch`.
    pub version_match: VersionMatch,
    /// `allowWatchBookmarks`.
    pub allow_bookmarks: bool,
    /// `timeoutSeconds`; `None` when unset or 0 (the server's default, as
    /// kube-apiserver reads 0), zero when negative (a watch that ends at
    /// once, as kube-apiserver's expired timer ends it).
    pub timeout: Option<Duration>,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
}

impl CollectionParams {
    /// Parses and validates the query string of a list or watch. Which
    /// fields a field selector may name is the caller's to check
    /// ([`FieldSelector::check_supported`]) between [`Decoded::new`] and
    /// [`Decoded::read_resource_version`], as kube-apiserver checks them:
    /// kubecache's server passes a selector it cannot evaluate through to
    /// the API server.
    ///
    /// In kube-apiserver's order: a parameter that does not decode is 400,
    /// a forbidden combination 422, then a `resourceVersion` that is not a
    /// number is refused by the storage that reads it: etcd's 400 for a
    /// list the watch cache hands to etcd (a limit, a continue token or
    /// `Exact`), the watch cache's 500 otherwise (see
    /// [`malformed_resource_version`]).
    pub fn parse(query: &str) -> Result<Self, Status> {
        Decoded::new(query, false)?.read_resource_version()
    }

    /// The checks of apimachinery's `ValidateListOptions`; `rv` as given.
    fn validate(&self, rv: Option<&str>) -> Result<(), Status> {
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
            if rv.is_none() {
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
            if self.version_match == VersionMatch::Exact && rv == Some("0") {
                return Err(invalid(
                    "FieldValueForbidden",
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
        }
        Ok(())
    }

    /// Whether any selector filters objects.
    pub fn filters(&self) -> bool {
        !self.labels.is_empty() || !self.fields.is_empty() || self.shards.is_some()
    }
}

/// A collection query decoded and validated, whose `resourceVersion` the
/// storage has yet to read: kube-apiserver converts the field selector's
/// labels between the two (a 400 for one it does not know), so a caller
/// decides there whether it can answer at all.
#[derive(Debug)]
pub struct Decoded {
    params: CollectionParams,
    raw_rv: Option<String>,
}

impl Decoded {
    /// Decodes and validates `query` (a watch whatever it says for
    /// `watch_path`), leaving its `resourceVersion` unread.
    pub fn new(query: &str, watch_path: bool) -> Result<Self, Status> {
        let mut params = CollectionParams {
            watch: false,
            labels: LabelSelector::default(),
            fields: FieldSelector::default(),
            shards: None,
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
                "watch" => params.watch = flag(&value),
                "allowWatchBookmarks" => params.allow_bookmarks = flag(&value),
                "sendInitialEvents" => params.send_initial_events = Some(flag(&value)),
                "labelSelector" => {
                    params.labels = LabelSelector::parse(&value)
                        .map_err(|e| Status::bad_request(e.to_string()))?
                }
                "fieldSelector" => {
                    params.fields = FieldSelector::parse(&value)
                        .map_err(|e| Status::bad_request(e.to_string()))?
                }
                "shardSelector" if !value.is_empty() => {
                    params.shards = Some(ShardSelector::parse(&value).map_err(Status::from)?)
                }
                "limit" => {
                    params.limit = usize::try_from(parse_int(&value)?.max(0)).unwrap_or(usize::MAX)
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
                    // `time.Duration(s) * time.Second`, wrapping as Go's
                    // multiplication does.
                    params.timeout = match parse_int(&value)?.wrapping_mul(1_000_000_000) {
                        0 => None,
                        nanos => Some(Duration::from_nanos(nanos.max(0) as u64)),
                    };
                }
                _ => {}
            }
        }
        params.watch |= watch_path;
        params.validate(raw_rv.as_deref())?;
        Ok(Decoded { params, raw_rv })
    }

    /// The parameters decoded so far (`resource_version` unset).
    pub fn params(&self) -> &CollectionParams {
        &self.params
    }

    /// The parameters with their `resourceVersion` read, or refused as the
    /// storage that reads it refuses it.
    pub fn read_resource_version(self) -> Result<CollectionParams, Status> {
        let Decoded { mut params, raw_rv } = self;
        if let Some(rv) = raw_rv {
            let from_etcd = !params.watch
                && (params.limit > 0
                    || params.continue_token.is_some()
                    || params.version_match == VersionMatch::Exact);
            let rv =
                parse_uint(&rv).map_err(|why| malformed_resource_version(&rv, why, from_etcd))?;
            params.resource_version = Some(rv);
            if params.continue_token.is_some() && !params.watch {
                return Err(Status::bad_request(
                    "specifying resource version is not allowed when using continue",
                ));
            }
        }
        Ok(params)
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

/// The first value of `key`, a key that is not empty, in `query`, as
/// [`first_values`] would give it, without remembering the other keys.
pub fn first<'q>(query: &'q str, key: &str) -> Option<std::borrow::Cow<'q, str>> {
    let [value] = firsts(query, [key]);
    value
}

/// The first value of each of `keys` (keys that are not empty), as
/// [`first`] reads one. Every request reads a few, so in one pass over the
/// query's bytes: each pair is compared as it stands while none up to the
/// last match has anything to decode (a `%` or a `+`: then the decoder
/// reads the query).
pub fn firsts<'q, const N: usize>(
    query: &'q str,
    keys: [&str; N],
) -> [Option<std::borrow::Cow<'q, str>>; N] {
    let mut found: [Option<std::borrow::Cow<'q, str>>; N] = std::array::from_fn(|_| None);
    let mut missing = N;
    let bytes = query.as_bytes();
    let mut start = 0;
    while start <= bytes.len() && missing > 0 {
        let end = match memchr::memchr3(b'&', b'%', b'+', &bytes[start..]) {
            Some(at) if bytes[start + at] != b'&' => return decoded_firsts(query, keys),
            Some(at) => start + at,
            None => bytes.len(),
        };
        // `&` is ASCII: both ends are character boundaries.
        let pair = &query[start..end];
        for (key, value) in keys.iter().zip(found.iter_mut()) {
            if value.is_some() {
                continue;
            }
            let matched = match pair.strip_prefix(key).map(|rest| rest.split_at_checked(1)) {
                Some(None) => Some(""),
                Some(Some(("=", rest))) => Some(rest),
                _ => None,
            };
            if let Some(matched) = matched {
                *value = Some(std::borrow::Cow::Borrowed(matched));
                missing -= 1;
                break;
            }
        }
        start = end + 1;
    }
    found
}

/// [`firsts`] of a query with something to decode.
fn decoded_firsts<'q, const N: usize>(
    query: &'q str,
    keys: [&str; N],
) -> [Option<std::borrow::Cow<'q, str>>; N] {
    let mut found: [Option<std::borrow::Cow<'q, str>>; N] = std::array::from_fn(|_| None);
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        if let Some(at) = keys.iter().position(|key| name == *key)
            && found[at].is_none()
        {
            found[at] = Some(value);
        }
    }
    found
}

/// The `resourceVersion` of a query string (a get, a `/v1` lookup): `None`
/// when absent or empty.
///
/// # Errors
///
/// The watch cache's 500 when it is not a number.
pub fn resource_version(query: &str) -> Result<Option<u64>, Status> {
    resource_version_of(first(query, "resourceVersion").as_deref())
}

/// [`resource_version`] of the query's first `resourceVersion`, read.
///
/// # Errors
///
/// As [`resource_version`].
pub fn resource_version_of(value: Option<&str>) -> Result<Option<u64>, Status> {
    value
        .filter(|value| !value.is_empty())
        .map(|value| parse_uint(value).map_err(|why| malformed_resource_version(value, why, false)))
        .transpose()
}

/// How kube-apiserver refuses a `resourceVersion` that Go's
/// `strconv.ParseUint` refuses for `why`: its storage's `InvalidError`,
/// which the watch cache returns as is (a 500 without a reason) and etcd's
/// storage as a 400 (`from_etcd`: a list the watch cache hands to etcd).
fn malformed_resource_version(value: &str, why: &str, from_etcd: bool) -> Status {
    let quoted = go_quote(value);
    let invalid = format!(
        "resourceVersion: Invalid value: {quoted}: strconv.ParseUint: parsing {quoted}: {why}"
    );
    if from_etcd {
        Status::bad_request(format!("invalid resource version: {invalid}"))
    } else {
        Status::failure(500, "", invalid)
    }
}

/// Go's `strconv.ParseUint(s, 10, 64)`, or the reason it gives: decimal
/// digits only, and the first fault from the left decides.
fn parse_uint(s: &str) -> Result<u64, &'static str> {
    if s.is_empty() {
        return Err("invalid syntax");
    }
    s.bytes().try_fold(0u64, |n, b| {
        if !b.is_ascii_digit() {
            return Err("invalid syntax");
        }
        n.checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(b - b'0')))
            .ok_or("value out of range")
    })
}

/// Go's `strconv.ParseInt(s, 10, 64)`: [`parse_uint`] after one optional
/// sign; refused with Go's error text as kube-apiserver's 400.
fn parse_int(s: &str) -> Result<i64, Status> {
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    parse_uint(digits)
        .and_then(|magnitude| {
            let value = if negative {
                0i64.checked_sub_unsigned(magnitude)
            } else {
                i64::try_from(magnitude).ok()
            };
            value.ok_or("value out of range")
        })
        .map_err(|why| {
            Status::bad_request(format!("strconv.ParseInt: parsing {}: {why}", go_quote(s)))
        })
}

/// Whether a query string asks for a watch (`watch=1`, `watch=true`, …).
pub fn is_watch(query: &str) -> bool {
    first(query, "watch").is_some_and(|value| flag(&value))
}

/// A query boolean as kube-apiserver converts it
/// (`runtime.Convert_Slice_string_To_bool`): false only for `0` and `false`
/// in any case; any other value, the empty one and a bare `watch`
/// included, is true. Nothing is refused.
fn flag(value: &str) -> bool {
    value != "0" && !value.eq_ignore_ascii_case("false")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(query: &str) -> Result<CollectionParams, Status> {
        CollectionParams::parse(query)
    }

    #[test]
    fn a_first_value_is_read_as_form_decoding_reads_it() {
        for query in [
            "",
            "watch",
            "&&watch=1&watch=0",
            "resourceVersion=0",
            "limit=5&resourceVersion=&resourceVersion=7",
            "a=b=c&watch=",
            "w%61tch=1&resourceVersion=3",
            "resourceVersion=1+2&watch=%66alse",
            "labelSelector=a%3Db&x",
            "resourceVersionMatch=NotOlderThan&resourceVersion=5",
            "watcher=1&watch=0&a",
            "watch=1&w%61tch=0&a+b=c",
            "a+b=1&a=2&watch",
            "x=%&watch=true",
        ] {
            let keys = ["watch", "resourceVersion", "a", "x", "labelSelector"];
            let decoded = keys.map(|key| {
                first_values(query)
                    .find(|(name, _)| name == key)
                    .map(|(_, value)| value)
            });
            for (key, decoded) in keys.iter().zip(&decoded) {
                assert_eq!(&first(query, key), decoded, "{key} of {query:?}");
            }
            assert_eq!(firsts(query, keys), decoded, "{query:?}");
            let [watch, a] = firsts(query, ["watch", "a"]);
            assert_eq!([watch, a], [decoded[0].clone(), decoded[2].clone()]);
        }
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
        assert_eq!(parse("continue=%%%").unwrap_err().code, 400);
        assert_eq!(
            parse("fieldSelector=spec.foo%3D%3D%3D").unwrap_err().code,
            400
        );
        assert_eq!(parse("resourceVersionMatch=Exact").unwrap_err().code, 422);
    }

    #[test]
    fn a_boolean_is_false_only_for_0_and_false_as_kube_apiserver_converts_it() {
        // The recorded request-edges cases `req-watch-*`.
        for (query, watch) in [
            ("watch=", true),
            ("watch", true),
            ("watch=maybe", true),
            ("watch=1", true),
            ("watch=0", false),
            ("watch=false", false),
            ("watch=FALSE", false),
            ("watch=1&watch=0", true),
            ("w%61tch=1", true),
            ("resourceVersion=0", false),
            ("", false),
        ] {
            assert_eq!(parse(query).unwrap().watch, watch, "{query}");
            assert_eq!(is_watch(query), watch, "{query}");
        }
        assert!(
            parse("watch=1&allowWatchBookmarks=yes")
                .unwrap()
                .allow_bookmarks
        );
    }

    #[test]
    fn timeout_seconds_zero_means_the_default_timeout_and_below_zero_none() {
        let timeout = |query: &str| parse(query).unwrap().timeout;
        assert_eq!(timeout("watch=1&timeoutSeconds=0"), None);
        assert_eq!(timeout("watch=1&timeoutSeconds=-0"), None);
        assert_eq!(
            timeout("watch=1&timeoutSeconds=%2B7"),
            Some(Duration::from_secs(7))
        );
        assert_eq!(timeout("watch=1&timeoutSeconds=-1"), Some(Duration::ZERO));
        // Go's `time.Duration` overflows to a negative one.
        assert_eq!(
            timeout("watch=1&timeoutSeconds=9223372036854775807"),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn numbers_are_refused_with_go_strconv_s_words() {
        for (query, value, why) in [
            (
                "timeoutSeconds=18446744073709551615",
                "18446744073709551615",
                "value out of range",
            ),
            ("timeoutSeconds=abc", "abc", "invalid syntax"),
            ("limit=abc", "abc", "invalid syntax"),
            ("limit=", "", "invalid syntax"),
            ("limit=-", "-", "invalid syntax"),
            ("limit=%2B-1", "+-1", "invalid syntax"),
            ("limit=%201", " 1", "invalid syntax"),
            (
                "limit=9223372036854775808",
                "9223372036854775808",
                "value out of range",
            ),
            // The first fault from the left decides.
            (
                "limit=99999999999999999999x",
                "99999999999999999999x",
                "value out of range",
            ),
            (
                "limit=9999999999999999999x",
                "9999999999999999999x",
                "invalid syntax",
            ),
            ("limit=%01", r"\x01", "invalid syntax"),
        ] {
            let status = parse(query).unwrap_err();
            assert_eq!((status.code, status.reason.as_str()), (400, "BadRequest"));
            assert_eq!(
                status.message,
                format!("strconv.ParseInt: parsing \"{value}\": {why}"),
                "{query}"
            );
        }
        assert_eq!(parse("limit=-9223372036854775808").unwrap().limit, 0);
        assert_eq!(parse("limit=-1").unwrap().limit, 0, "no limit");
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
    fn a_malformed_resource_version_is_the_storage_s_500_or_etcd_s_400() {
        for value in ["abc", "+5", "-5", " 5", "5 ", "0x5", "5.0"] {
            let rv = form_urlencoded::byte_serialize(value.as_bytes()).collect::<String>();
            let invalid = format!(
                "resourceVersion: Invalid value: {value:?}: strconv.ParseUint: parsing {value:?}: invalid syntax"
            );
            for query in [
                format!("resourceVersion={rv}"),
                format!("resourceVersion={rv}&watch=1&limit=5"),
            ] {
                let status = parse(&query).unwrap_err();
                assert_eq!((status.code, status.reason.as_str()), (500, ""), "{query}");
                assert_eq!(status.message, invalid);
            }
            let got = resource_version(&format!("resourceVersion={rv}")).unwrap_err();
            assert_eq!((got.code, got.message), (500, invalid.clone()));
            for query in [
                format!("resourceVersion={rv}&limit=5"),
                format!("resourceVersion={rv}&resourceVersionMatch=Exact"),
            ] {
                let status = parse(&query).unwrap_err();
                assert_eq!((status.code, status.reason.as_str()), (400, "BadRequest"));
                assert_eq!(
                    status.message,
                    format!("invalid resource version: {invalid}")
                );
            }
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
        // Validation comes first, the resourceVersion's parsing after.
        let status = parse("resourceVersion=abc&resourceVersionMatch=Bogus").unwrap_err();
        assert_eq!(status.code, 422);
    }

    #[test]
    fn a_shard_selector_is_parsed_and_an_empty_one_ignored() {
        let half = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";
        let query = format!(
            "watch=1&shardSelector={}",
            form_urlencoded::byte_serialize(half.as_bytes()).collect::<String>()
        );
        let params = parse(&query).unwrap();
        assert_eq!(params.shards.unwrap().to_string(), half);
        assert!(parse("shardSelector=").unwrap().shards.is_none());
        let status = parse("shardSelector=%20").unwrap_err();
        assert_eq!((status.code, status.reason.as_str()), (400, "BadRequest"));
        assert!(
            status
                .message
                .starts_with("invalid shard selector: empty shard selector")
        );
    }

    #[test]
    fn a_watch_path_is_a_watch_whatever_the_parameter_says() {
        let watch_path = |query| Decoded::new(query, true)?.read_resource_version();
        let params = watch_path("watch=0").unwrap();
        assert!(params.watch);
        // Validated as a watch: resourceVersionMatch is forbidden there.
        let status = watch_path("resourceVersion=5&resourceVersionMatch=NotOlderThan").unwrap_err();
        assert_eq!(status.code, 422);
    }
}
