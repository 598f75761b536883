//! Replaying the edge-case corpus (`edges/manifest.json`, see its README)
//! against a server: each case's request as the recorder wrote it, on a
//! connection of its own, and how the answer differs from the recorded one
//! (the status; for an error or a SelfSubjectReview the body, byte for
//! byte but the review's creation time; for an error the `Warning`).

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde_json::Value;

use crate::golden;
use crate::replay::{Answer, exchange, request_bytes};

/// Where `kubectl auth whoami` posts its SelfSubjectReview.
pub const SELF_SUBJECT_REVIEWS: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";

/// How the answer differs from the recorded one, if it does.
pub fn difference(case: &Value, answer: &Answer) -> Option<String> {
    let status = case["status"].as_u64().expect("a recorded status");
    if u64::from(answer.status) != status {
        return Some(format!(
            "status {}, recorded {status}: {}",
            answer.status,
            String::from_utf8_lossy(&answer.body)
        ));
    }
    let mut recorded = golden::edge_body(case);
    if case["path"] == SELF_SUBJECT_REVIEWS && status == 201 {
        // The review is stamped with the time it was asked.
        let stamp = |body: &[u8]| {
            let review: Value = serde_json::from_slice(body).unwrap_or_default();
            review["metadata"]["creationTimestamp"]
                .as_str()
                .map(str::to_string)
        };
        if let (Some(then), Some(now)) = (stamp(&recorded), stamp(&answer.body)) {
            recorded = String::from_utf8(recorded)
                .expect("a UTF-8 review")
                .replace(&then, &now)
                .into_bytes();
        }
    } else if status < 400 {
        return None;
    }
    if answer.body != recorded {
        return Some(format!(
            "body {:?}, recorded {:?}",
            String::from_utf8_lossy(&answer.body),
            String::from_utf8_lossy(&recorded)
        ));
    }
    let warnings = warnings(case);
    (answer.values("warning") != warnings).then(|| {
        format!(
            "Warning {:?}, recorded {warnings:?}",
            answer.values("warning")
        )
    })
}

/// The `Warning` headers the API server answered `case` with, in order.
pub fn warnings(case: &Value) -> Vec<&str> {
    case["response_headers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h[0] == "Warning")
        .map(|h| h[1].as_str().unwrap())
        .collect()
}

/// The recorded cases of `groups` made without a client certificate.
pub fn cases(groups: &[&str]) -> Vec<Value> {
    let Value::Array(cases) = golden::json("edges/manifest.json") else {
        panic!("edges/manifest.json is not a list");
    };
    cases
        .into_iter()
        .filter(|case| {
            groups.contains(&case["group"].as_str().unwrap_or_default())
                && !case["caller"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("cert:")
        })
        .collect()
}

/// Replays `cases` against the server at `addr`: how each that differs
/// does, by id.
pub async fn replay(addr: SocketAddr, cases: &[Value]) -> BTreeMap<String, String> {
    let mut differing = BTreeMap::new();
    for case in cases {
        let answer = exchange(addr, request_bytes("edges", case, addr)).await;
        if let Some(difference) = difference(case, &answer) {
            differing.insert(case["id"].as_str().unwrap().to_string(), difference);
        }
    }
    differing
}
