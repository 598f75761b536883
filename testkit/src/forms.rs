//! Pretty JSON and YAML answers (issue 41 section 4) against the recorded
//! `versions/` cases: each case is replayed and must get the recorded
//! status, `Content-Type` and body. Bodies are compared line by line
//! without the lines of values a sim cannot reproduce (resourceVersions,
//! continue tokens, uids, times, and the `generation` the sim adds); a
//! compact body is compared indented (by the `indent` given: this crate
//! depends on no crate of the workspace), and must stay compact.

use std::net::SocketAddr;

use serde_json::Value;

use crate::golden;
use crate::replay::{exchange, request_bytes};

/// The `versions/` cases whose id `pick` takes.
pub fn cases(pick: impl Fn(&str) -> bool) -> Vec<Value> {
    golden::json("versions/manifest.json")
        .as_array()
        .expect("cases")
        .iter()
        .filter(|case| pick(case["id"].as_str().expect("an id")))
        .cloned()
        .collect()
}

/// Each of `cases` sent to `addr` that is not answered as recorded, with
/// the first line that differs.
pub async fn differing(
    addr: SocketAddr,
    cases: &[Value],
    indent: fn(&[u8]) -> Vec<u8>,
) -> Vec<String> {
    let mut differing = Vec::new();
    for case in cases {
        let id = case["id"].as_str().expect("an id");
        let answer = exchange(addr, request_bytes("versions", case, addr)).await;
        let recorded_type = case["response_headers"]
            .as_array()
            .expect("headers")
            .iter()
            .find(|h| h[0] == "Content-Type")
            .and_then(|h| h[1].as_str());
        let body_file = case["body_file"].as_str().expect("a body");
        let body = golden::read(&format!("versions/{body_file}"));
        let (got, want) = (normalized(&answer.body, indent), normalized(&body, indent));
        let first = got.lines().zip(want.lines()).find(|(g, w)| g != w);
        if u64::from(answer.status) != case["status"].as_u64().expect("a status")
            || answer.values("content-type").first().copied() != recorded_type
            || got != want
        {
            differing.push(format!(
                "{id}: {} {:?}, first line that differs (got, recorded): {first:?}",
                answer.status,
                answer.values("content-type"),
            ));
        }
    }
    differing
}

/// `body` without the values a sim cannot reproduce; a compact JSON body
/// indented first, and marked so.
fn normalized(body: &[u8], indent: fn(&[u8]) -> Vec<u8>) -> String {
    let compact = body.ends_with(b"\n") && body.iter().filter(|&&b| b == b'\n').count() == 1;
    let text = match compact && body.starts_with(b"{") {
        true => indent(body),
        false => body.to_vec(),
    };
    // The sim also sets `generation`, which a real API server leaves out of pods.
    let volatile = [
        "resourceVersion",
        "continue",
        "uid",
        "creationTimestamp",
        "time",
        "generation",
    ];
    let lines = String::from_utf8_lossy(&text)
        .split('\n')
        .filter(|line| {
            let key = line.trim_start().trim_start_matches("- ").trim_matches('"');
            !volatile
                .iter()
                .any(|v| key.starts_with(&format!("{v}\"")) || key.starts_with(&format!("{v}:")))
        })
        .map(str::to_string)
        .collect::<Vec<_>>();
    format!(
        "{}{}",
        lines.join("\n"),
        if compact { " (compact)" } else { "" }
    )
}
