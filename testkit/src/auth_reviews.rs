//! The `kubectl auth` cases of the versions corpus (`versions/`, group
//! `version-auth`, its README's section 7): the SelfSubjectReview,
//! SelfSubjectAccessReview and SelfSubjectRulesReview requests as kubectl
//! 1.28 sends them (JSON) and their protobuf twins, replayed against a
//! server as the recorded bytes, each on a connection of its own, and how
//! the answer differs from the recorded one: status, `Content-Type` and
//! body byte for byte, but the times the server stamps (a review's
//! `creationTimestamp`, a `managedFields` entry's `time`).

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde_json::Value;

use crate::golden;
use crate::replay::{exchange, request_bytes};

/// The recorded review cases (10: `/version` left out), in recording order.
pub fn cases() -> Vec<Value> {
    let Value::Array(cases) = golden::json("versions/manifest.json") else {
        panic!("versions/manifest.json is not a list");
    };
    cases
        .into_iter()
        .filter(|case| {
            case["group"] == "version-auth"
                && case["path"]
                    .as_str()
                    .is_some_and(|p| p.ends_with("reviews"))
        })
        .collect()
}

/// Replays `cases` against the server at `addr`: how each that differs
/// does, by id.
pub async fn replay(addr: SocketAddr, cases: &[Value]) -> BTreeMap<String, String> {
    let mut differing = BTreeMap::new();
    for case in cases {
        let answer = exchange(addr, request_bytes("versions", case, addr)).await;
        let recorded = golden::read(&format!("versions/{}", case["body_file"].as_str().unwrap()));
        let content_type = case["response_headers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h[0] == "Content-Type")
            .and_then(|h| h[1].as_str())
            .unwrap_or_default();
        let body = with_recorded_times(&answer.body, &recorded);
        let difference = if u64::from(answer.status) != case["status"] {
            format!("status {}, recorded {}", answer.status, case["status"])
        } else if answer.values("content-type") != [content_type] {
            format!(
                "Content-Type {:?}, recorded {content_type}",
                answer.values("content-type")
            )
        } else if body != recorded {
            format!(
                "body {:?}, recorded {:?}",
                String::from_utf8_lossy(&answer.body),
                String::from_utf8_lossy(&recorded)
            )
        } else {
            continue;
        };
        differing.insert(case["id"].as_str().unwrap().to_string(), difference);
    }
    differing
}

/// `answer` with the recorded value of each time it stamps where `recorded`
/// has one at the same offset: a JSON time (`"2026-12-06T03:56:55Z"`) or a
/// protobuf `Time` (field 1, its seconds a 5-byte varint, then `nanos` 0:
/// `08 xx xx xx xx xx 10 00`). Anything else that differs stays.
pub fn with_recorded_times(answer: &[u8], recorded: &[u8]) -> Vec<u8> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
