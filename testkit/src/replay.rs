//! Replaying a recorded corpus of `testdata/apiserver-golden` (`edges/`,
//! `versions/`: a `manifest.json` of cases, each one request on a
//! connection of its own) against a server: the request's bytes, the
//! exchange, and the check that the cases that differ are those known.
//! [`crate::edges`] and [`crate::versions`] say how an answer is compared
//! with its recording in each corpus.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::golden;
use crate::raw_http::dechunk;

/// A case's request as the recorder of `corpus` (`edges`, `versions`)
/// wrote it (Latin-1), to `addr`: the recorded headers but `Host` and
/// `Connection`, which name this server and close the connection after
/// the answer; the body from the corpus's `request_body_file`.
pub fn request_bytes(corpus: &str, case: &Value, addr: SocketAddr) -> Vec<u8> {
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
