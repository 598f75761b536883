//! Replaying the version-specific corpus (`versions/manifest.json`, see its
//! README) against a server that holds its data set (namespace `golden-v`,
//! [`objects`]): each case's request as the recorder wrote it, on a
//! connection of its own ([`crate::replay`]), in recording order, and how
//! the answer differs from the recorded one.
//!
//! Compared exactly: the status, the `Content-Type`, and the body, byte for
//! byte (its layout too: pretty or compact, the final newline), but for the
//! values a simulated server cannot reproduce, which the README names:
//! - `uid`, `creationTimestamp` and `resourceVersion` values (JSON strings,
//!   YAML scalars) read as `*`;
//! - `managedFields` are dropped whole (their times and managers are the
//!   recording's writes), and so is `generation` (the sim writes a pod's,
//!   as Kubernetes 1.33 and later do; a 1.28 pod has none);
//! - a continue token reads as its `start` key, its `rv` as `*` (but `-1`,
//!   which is no resourceVersion);
//! - protobuf bodies of successes are not compared (their resourceVersions
//!   cannot be told apart from the rest without decoding), but for
//!   reviews, and but when the replay is given a way to read them
//!   ([`replay_reading_protobuf`]: as JSON, loosened as above, and the
//!   bytes of the strings that are not UTF-8, which JSON cannot carry);
//!   protobuf errors and reviews are, byte for byte but the times the
//!   server stamps ([`with_recorded_times`]).
//!
//! A page's request carries the continue token the recorded server gave
//! an earlier case; the replay sends the token the server under test gave
//! that case instead, unless the case is named `verbatim` (a token whose
//! snapshot is meant to be gone).

use std::collections::BTreeMap;
use std::net::SocketAddr;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;

use crate::golden;
use crate::replay::{Answer, exchange, request_bytes};

/// The recorded cases of `group`, in recording order.
pub fn cases(group: &str) -> Vec<Value> {
    let Value::Array(cases) = golden::json("versions/manifest.json") else {
        panic!("versions/manifest.json is not a list");
    };
    cases
        .into_iter()
        .filter(|case| case["group"] == group)
        .collect()
}

/// The data set's pods and configmaps as the recorded server held them
/// after set-up (`bodies/data-*-after-setup.json`).
pub fn objects() -> (Vec<Value>, Vec<Value>) {
    let items = |what: &str| match &golden::json(&format!(
        "versions/bodies/data-{what}-list-after-setup.json"
    ))["items"]
    {
        Value::Array(items) => items.clone(),
        other => panic!("data-{what}-list-after-setup.json is not a list: {other}"),
    };
    (items("pods"), items("configmaps"))
}

/// A protobuf body (`k8s\0` + `runtime.Unknown`) as it is compared.
pub struct ReadProtobuf {
    /// Its object's JSON.
    pub json: Vec<u8>,
    /// The bytes of each of its strings that are not UTF-8 (which the JSON
    /// holds a replacement of), named by where they are.
    pub strings: Vec<(String, Vec<u8>)>,
}

/// How a protobuf body is read to be compared; `None` for a body it
/// cannot read. The caller's: this crate depends on no crate of the
/// workspace, the transcoder included.
pub type ProtobufReader = fn(&[u8]) -> Option<ReadProtobuf>;

/// Replays `cases` in order against the server at `addr`: how each that
/// differs does, by id. The cases of `verbatim` send their recorded
/// continue token as it is.
pub async fn replay(
    addr: SocketAddr,
    cases: &[Value],
    verbatim: &[&str],
) -> BTreeMap<String, String> {
    replay_with(addr, cases, verbatim, None).await
}

/// [`replay`], comparing the protobuf bodies of successes too, as `read`
/// reads them (see the module doc).
pub async fn replay_reading_protobuf(
    addr: SocketAddr,
    cases: &[Value],
    verbatim: &[&str],
    read: ProtobufReader,
) -> BTreeMap<String, String> {
    replay_with(addr, cases, verbatim, Some(read)).await
}

async fn replay_with(
    addr: SocketAddr,
    cases: &[Value],
    verbatim: &[&str],
    read: Option<ProtobufReader>,
) -> BTreeMap<String, String> {
    // Recorded token -> the token the server under test gave for it.
    let mut tokens: BTreeMap<String, String> = BTreeMap::new();
    let mut differing = BTreeMap::new();
    for case in cases {
        let id = case["id"].as_str().expect("an id");
        let mut case = case.clone();
        if !verbatim.contains(&id) {
            substitute_token(&mut case, &tokens);
        }
        let answer = exchange(addr, request_bytes("versions", &case, addr)).await;
        if let (200, Some(recorded), Some(given)) = (
            answer.status,
            recorded_token(&golden::read(&body_file(&case))),
            recorded_token(&answer.body),
        ) {
            tokens.insert(recorded, given);
        }
        if let Some(difference) = difference_reading(&case, &answer, read) {
            differing.insert(id.to_string(), difference);
        }
    }
    differing
}

fn body_file(case: &Value) -> String {
    let file = case["body_file"].as_str().expect("a recorded body");
    format!("versions/{file}")
}

/// The `metadata.continue` of a JSON list or Status.
fn recorded_token(body: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    value["metadata"]["continue"].as_str().map(str::to_string)
}

/// `case`'s path with its recorded continue token replaced by the one
/// given in this replay, if one was.
fn substitute_token(case: &mut Value, tokens: &BTreeMap<String, String>) {
    let path = case["path"].as_str().expect("a path").to_string();
    for (recorded, given) in tokens {
        let param = format!("continue={recorded}");
        if let Some(at) = path.find(&param)
            && path[at + param.len()..]
                .chars()
                .next()
                .is_none_or(|c| c == '&')
        {
            case["path"] = path.replace(&param, &format!("continue={given}")).into();
            return;
        }
    }
}

/// How the answer differs from the recorded one, if it does.
pub fn difference(case: &Value, answer: &Answer) -> Option<String> {
    difference_reading(case, answer, None)
}

/// [`difference`], reading protobuf bodies of successes with `read` when
/// given.
fn difference_reading(
    case: &Value,
    answer: &Answer,
    read: Option<ProtobufReader>,
) -> Option<String> {
    let status = case["status"].as_u64().expect("a recorded status");
    let recorded = golden::read(&body_file(case));
    let shown = |body: &[u8]| {
        let text = String::from_utf8_lossy(body);
        text.chars().take(600).collect::<String>()
    };
    if u64::from(answer.status) != status {
        return Some(format!(
            "status {}, recorded {status}: {}",
            answer.status,
            shown(&answer.body)
        ));
    }
    let content_type = case["response_headers"]
        .as_array()
        .expect("recorded headers")
        .iter()
        .find(|h| h[0] == "Content-Type")
        .and_then(|h| h[1].as_str());
    let answered = answer.values("content-type").first().copied();
    if answered != content_type {
        return Some(format!(
            "Content-Type {answered:?}, recorded {content_type:?}"
        ));
    }
    let (recorded, answered) = match content_type.unwrap_or_default() {
        // A review carries no resourceVersion: it is compared, but for the
        // times the server stamps, as errors are.
        "application/vnd.kubernetes.protobuf" if status < 400 && !is_review(case) => {
            let read = read?;
            let view = |body: &[u8]| match read(body) {
                Some(body) => loosen_json(&protobuf_view(&body.json, body.strings)),
                None => format!("unreadable protobuf: {}", shown(body)).into_bytes(),
            };
            (view(&recorded), view(&answer.body))
        }
        "application/vnd.kubernetes.protobuf" => {
            let answered = with_recorded_times(&answer.body, &recorded);
            (recorded, answered)
        }
        "application/yaml" => (loosen_yaml(&recorded), loosen_yaml(&answer.body)),
        "application/json" => (loosen_json(&recorded), loosen_json(&answer.body)),
        _ => (recorded, answer.body.clone()),
    };
    (answered != recorded).then(|| {
        let at = answered
            .iter()
            .zip(&recorded)
            .position(|(a, r)| a != r)
            .unwrap_or(answered.len().min(recorded.len()));
        let from = at.saturating_sub(100);
        format!(
            "body differs at byte {at} (loosened): {:?}, recorded {:?}",
            shown(&answered[from..]),
            shown(&recorded[from.min(recorded.len())..])
        )
    })
}

/// A protobuf body read as JSON text: `{"object":<its JSON>,"notUtf8":{
/// <where>:"<its bytes in hex>",...}}`, the strings sorted by where.
fn protobuf_view(json: &[u8], mut strings: Vec<(String, Vec<u8>)>) -> Vec<u8> {
    strings.sort();
    let strings: serde_json::Map<String, Value> = strings
        .into_iter()
        .map(|(at, bytes)| {
            let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
            (at, Value::from(hex.join(" ")))
        })
        .collect();
    let mut out = br#"{"object":"#.to_vec();
    out.extend_from_slice(json);
    out.extend_from_slice(br#","notUtf8":"#);
    out.extend_from_slice(&serde_json::to_vec(&strings).expect("a map of strings"));
    out.push(b'}');
    out
}

/// Whether `case` posts a review (`kubectl auth`'s SelfSubjectReview,
/// SelfSubjectAccessReview or SelfSubjectRulesReview).
fn is_review(case: &Value) -> bool {
    case["path"]
        .as_str()
        .is_some_and(|p| p.ends_with("reviews"))
}

/// `answer` with the recorded value of each time it stamps where `recorded`
/// has one at the same offset: a JSON time (`"2026-12-06T03:56:55Z"`) or a
/// protobuf `Time` (field 1, its seconds a 5-byte varint, then `nanos` 0:
/// `08 xx xx xx xx xx 10 00`). Anything else that differs stays.
fn with_recorded_times(answer: &[u8], recorded: &[u8]) -> Vec<u8> {
    let mut out = answer.to_vec();
    if answer.len() != recorded.len() {
        return out;
    }
    let json_time = |w: &[u8]| {
        w.len() == 22
            && w[0] == b'"'
            && w[21] == b'"'
            && w[1..21]
                .iter()
                .zip(b"dddd-dd-ddTdd:dd:ddZ")
                .all(|(b, p)| match p {
                    b'd' => b.is_ascii_digit(),
                    _ => b == p,
                })
    };
    let proto_time = |w: &[u8]| {
        w.len() == 8
            && w[0] == 0x08
            && w[1..5].iter().all(|b| *b >= 0x80)
            && w[5] < 0x80
            && w[6..] == [0x10, 0x00]
    };
    let mut at = 0;
    while at < out.len() {
        if out[at] == recorded[at] {
            at += 1;
            continue;
        }
        let window = [22, 8].into_iter().find_map(|len: usize| {
            (at.saturating_sub(len - 1)..=at)
                .find(|&start| {
                    let (a, r) = (
                        out.get(start..start + len),
                        recorded.get(start..start + len),
                    );
                    a.zip(r).is_some_and(|(a, r)| {
                        (json_time(a) && json_time(r)) || (proto_time(a) && proto_time(r))
                    })
                })
                .map(|start| start..start + len)
        });
        match window {
            Some(window) => {
                at = window.end;
                out[window.clone()].copy_from_slice(&recorded[window]);
            }
            None => at += 1,
        }
    }
    out
}

/// Keys whose string values a simulated server cannot reproduce.
const LOOSE: [&str; 3] = ["uid", "creationTimestamp", "resourceVersion"];

/// Members dropped whole.
const DROPPED: [&str; 2] = ["managedFields", "generation"];

/// JSON text (compact or indented) with the loose values replaced, the
/// [`DROPPED`] members dropped and continue tokens read as their
/// start keys; the layout is kept.
fn loosen_json(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len());
    // Where the output stood before the last comma outside strings.
    let mut before_comma = 0;
    let mut i = 0;
    while i < body.len() {
        match body[i] {
            b',' => {
                before_comma = out.len();
                out.push(b',');
                i += 1;
            }
            b'"' => {
                let end = string_end(body, i);
                let mut colon = end;
                while colon < body.len() && body[colon].is_ascii_whitespace() {
                    colon += 1;
                }
                if body.get(colon) != Some(&b':') {
                    // A value, or a key of no interest.
                    out.extend_from_slice(&body[i..end]);
                    i = end;
                    continue;
                }
                let key = String::from_utf8_lossy(&body[i + 1..end - 1]).into_owned();
                let mut value = colon + 1;
                while value < body.len() && body[value].is_ascii_whitespace() {
                    value += 1;
                }
                if DROPPED.contains(&key.as_str()) {
                    out.truncate(before_comma);
                    i = value_end(body, value);
                    continue;
                }
                out.extend_from_slice(&body[i..value]);
                i = value;
                if body.get(value) == Some(&b'"') {
                    let end = string_end(body, value);
                    if LOOSE.contains(&key.as_str()) {
                        out.extend_from_slice(b"\"*\"");
                    } else if key == "continue" {
                        let token = String::from_utf8_lossy(&body[value + 1..end - 1]);
                        out.extend_from_slice(format!("\"{}\"", token_start(&token)).as_bytes());
                    } else {
                        out.extend_from_slice(&body[value..end]);
                    }
                    i = end;
                }
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// The index after the JSON string that starts at `at` (its `"`).
fn string_end(body: &[u8], at: usize) -> usize {
    let mut i = at + 1;
    while i < body.len() {
        match body[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    body.len()
}

/// The index after the JSON value that starts at `at`.
fn value_end(body: &[u8], at: usize) -> usize {
    let mut depth = 0usize;
    let mut i = at;
    while i < body.len() {
        match body[i] {
            b'"' => {
                i = string_end(body, i);
                if depth == 0 {
                    return i;
                }
                continue;
            }
            b'[' | b'{' => depth += 1,
            b']' | b'}' if depth == 0 => return i,
            b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            b',' if depth == 0 => return i,
            _ => {}
        }
        i += 1;
    }
    body.len()
}

/// A continue token as its start key and whether it is inconsistent
/// (`rv` -1); the token itself when it is not one.
fn token_start(token: &str) -> String {
    let decoded = URL_SAFE_NO_PAD
        .decode(token)
        .ok()
        .and_then(|json| serde_json::from_slice::<Value>(&json).ok());
    match decoded {
        Some(t) => {
            let rv = if t["rv"] == -1 { "-1" } else { "*" };
            let start = t["start"].as_str().unwrap_or_default();
            format!("start={} rv={rv}", start.trim_end_matches('\0'))
        }
        None => token.to_string(),
    }
}

/// YAML text with the loose values replaced and the [`DROPPED`] members
/// dropped (the key and its lines: deeper ones, and its `- ` items at its
/// depth).
fn loosen_yaml(body: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(body);
    let mut out = String::with_capacity(text.len());
    let mut skipping: Option<usize> = None;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if let Some(depth) = skipping {
            if indent > depth || (indent == depth && trimmed.starts_with("- ")) {
                continue;
            }
            skipping = None;
        }
        let key = trimmed.trim_start_matches("- ");
        if DROPPED.iter().any(|k| key.starts_with(&format!("{k}:"))) {
            skipping = Some(indent);
            continue;
        }
        match LOOSE.iter().find(|k| key.starts_with(&format!("{k}: "))) {
            Some(k) => {
                out.push_str(&line[..line.len() - key.len()]);
                out.push_str(&format!("{k}: *\n"));
            }
            None => out.push_str(line),
        }
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loose_values_and_managed_fields_are_ignored_and_the_layout_kept() {
        let token = URL_SAFE_NO_PAD.encode(r#"{"v":"meta.k8s.io/v1","rv":5,"start":"a\u0000"}"#);
        let compact = format!(
            r#"{{"metadata":{{"resourceVersion":"7","continue":"{token}"}},"items":[{{"metadata":{{"name":"a","uid":"u1","generation":1,"managedFields":[{{"time":"t","f":{{"x":[1,"]"]}}}}],"labels":{{}}}}}}]}}"#
        );
        assert_eq!(
            String::from_utf8(loosen_json(compact.as_bytes())).unwrap(),
            r#"{"metadata":{"resourceVersion":"*","continue":"start=a rv=*"},"items":[{"metadata":{"name":"a","uid":"*","labels":{}}}]}"#
        );
        let pretty = "{\n  \"name\": \"a\",\n  \"uid\": \"u2\",\n  \"managedFields\": [\n    {}\n  ],\n  \"x\": \"uid\"\n}";
        assert_eq!(
            String::from_utf8(loosen_json(pretty.as_bytes())).unwrap(),
            "{\n  \"name\": \"a\",\n  \"uid\": \"*\",\n  \"x\": \"uid\"\n}"
        );
        let yaml = "metadata:\n  managedFields:\n  - manager: x\n    time: t\n  name: a\n  resourceVersion: \"52803\"\n";
        assert_eq!(
            String::from_utf8(loosen_yaml(yaml.as_bytes())).unwrap(),
            "metadata:\n  name: a\n  resourceVersion: *\n"
        );
    }

    #[test]
    fn only_stamped_times_take_the_recorded_value() {
        let recorded = br#"{"t":"2026-12-06T03:56:55Z","n":"a"}"#;
        let answer = br#"{"t":"2025-01-02T10:11:12Z","n":"b"}"#;
        assert_eq!(
            with_recorded_times(answer, recorded),
            br#"{"t":"2026-12-06T03:56:55Z","n":"b"}"#
        );
        let recorded = [
            0x42, 0x08, 0x08, 0x87, 0xba, 0xd3, 0xd8, 0x06, 0x10, 0x00, 0x01,
        ];
        let answer = [
            0x42, 0x08, 0x08, 0x80, 0xb0, 0xc1, 0xd0, 0x06, 0x10, 0x00, 0x02,
        ];
        let mut expected = recorded;
        expected[10] = 0x02;
        assert_eq!(with_recorded_times(&answer, &recorded), expected);
    }
}
