//! Replaying the edge-case corpus (`edges/manifest.json`, see its README)
//! against a server: each case's request as the recorder wrote it, on a
//! connection of its own, and how the answer differs from the recorded one
//! (the status; for an error or a SelfSubjectReview the body, byte for
//! byte but the review's creation time; for an error the `Warning`).

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::golden;
use crate::raw_http::dechunk;

/// Where `kubectl auth whoami` posts its SelfSubjectReview.
pub const SELF_SUBJECT_REVIEWS: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";

/// A case's request as the recorder wrote it (Latin-1), to `addr`: the
/// recorded headers but `Host` and `Connection`, which name this server
/// and close the connection after the answer.
pub fn request_bytes(case: &Value, addr: SocketAddr) -> Vec<u8> {
    request_bytes_in("edges", case, addr)
}

/// [`request_bytes`] of a case of the corpus in `corpus` (`edges`,
/// `versions`: the folder its `request_body_file` is relative to).
pub fn request_bytes_in(corpus: &str, case: &Value, addr: SocketAddr) -> Vec<u8> {
    let text = |v: &Value| v.as_str().expect("a string").to_string();
    let mut path = text(&case["path"]);
    if let Some(cut) = path.strip_suffix("...(truncated, see request_generator)") {
        // "path = '...pad=' + 'a'*102400 (request line ...)"
        let generator = text(&case["request_generator"]);
        let count: usize = generator
            .split("'a'*")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .expect("a generator of 'a's");
        path = cut.trim_end_matches('a').to_string() + &"a".repeat(count);
    }
    let mut head = format!(
        "{} {path} HTTP/1.1\r\nHost: {addr}\r\n",
        text(&case["method"])
    );
    for header in case["request_headers"].as_array().unwrap() {
        let (name, value) = (text(&header[0]), text(&header[1]));
        if !matches!(name.as_str(), "Host" | "Connection") {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    head.push_str("Connection: close\r\n\r\n");
    let mut bytes: Vec<u8> = head
        .chars()
        .map(|c| u8::try_from(c).expect("a Latin-1 request"))
        .collect();
    if let Some(file) = case["request_body_file"].as_str() {
        bytes.extend(golden::read(&format!("{corpus}/{file}")));
    }
    bytes
}

/// An HTTP answer: status, headers and (de-chunked) body.
#[derive(Debug)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The headers, in order.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Answer {
    /// The values of a header, in order.
    pub fn values(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// Sends `request` on a connection of its own and reads the answer until
/// the server closes it. The request is written while the answer is read,
/// and the connection is not half-closed, as the recorder did.
pub async fn exchange(addr: SocketAddr, request: Vec<u8>) -> Answer {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connects");
    let (mut reader, mut writer) = stream.into_split();
    let writing = tokio::spawn(async move {
        // A server that answers before reading everything may reset.
        let _ = writer.write_all(&request).await;
        writer
    });
    let mut bytes = Vec::new();
    let _ = reader.read_to_end(&mut bytes).await;
    drop(writing.await);
    let end = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no answer: {:?}", String::from_utf8_lossy(&bytes)));
    let head = String::from_utf8_lossy(&bytes[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.to_string(), v.trim().to_string()))
        .collect();
    let mut answer = Answer {
        status,
        headers,
        body: bytes[end + 4..].to_vec(),
    };
    if answer.values("transfer-encoding").contains(&"chunked") {
        answer.body = dechunk(&answer.body).expect("a whole chunked body");
    }
    answer
}

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
    let warnings: Vec<&str> = case["response_headers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h[0] == "Warning")
        .map(|h| h[1].as_str().unwrap())
        .collect();
    (answer.values("warning") != warnings).then(|| {
        format!(
            "Warning {:?}, recorded {warnings:?}",
            answer.values("warning")
        )
    })
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
        let answer = exchange(addr, request_bytes(case, addr)).await;
        if let Some(difference) = difference(case, &answer) {
            differing.insert(case["id"].as_str().unwrap().to_string(), difference);
        }
    }
    differing
}

/// Asserts that the cases that differ are exactly those of `known` (an id
/// and why each differs), so that an improvement or a regression both
/// fail.
pub fn assert_differ_exactly(differing: &BTreeMap<String, String>, known: &[(&str, &str)]) {
    let known: Vec<&str> = known.iter().map(|(id, _)| *id).collect();
    let unexpected: BTreeMap<_, _> = differing
        .iter()
        .filter(|(id, _)| !known.contains(&id.as_str()))
        .collect();
    let matching: Vec<&&str> = known
        .iter()
        .filter(|id| !differing.contains_key(**id))
        .collect();
    assert!(
        unexpected.is_empty() && matching.is_empty(),
        "differ unexpectedly: {unexpected:#?}\nlisted as different, but match: {matching:?}"
    );
}
