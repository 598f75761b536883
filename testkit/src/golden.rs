//! The golden corpus: a real kube-apiserver v1.28's recorded answers in
//! `testdata/apiserver-golden` (see `testdata/README.md`).
//! Files are named by their path in the corpus (`lists/pods.list.json.gz`);
//! a missing corpus fails the test, naming the path it was looked for at.

use std::io::Read as _;
use std::path::PathBuf;

use serde_json::Value;

/// The corpus directory.
pub fn dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/apiserver-golden"
    ))
}

/// A corpus file's bytes as the server sent them (`.gz` files, compressed
/// after recording, gunzipped).
pub fn read(file: &str) -> Vec<u8> {
    let path = dir().join(file);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "the golden corpus file {}: {e} (see testdata/README.md)",
            path.display()
        )
    });
    if file.ends_with(".gz") {
        gunzip(&bytes)
    } else {
        bytes
    }
}

/// A corpus file as JSON.
pub fn json(file: &str) -> Value {
    serde_json::from_slice(&read(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// The names of the files in a group of the corpus (`lists`, `single`),
/// sorted.
pub fn files(group: &str) -> Vec<String> {
    let path = dir().join(group);
    let entries = std::fs::read_dir(&path)
        .unwrap_or_else(|e| panic!("the golden corpus group {}: {e}", path.display()));
    let mut names: Vec<String> = entries
        .map(|entry| {
            let name = entry.expect("a readable directory entry").file_name();
            name.into_string().expect("a UTF-8 file name")
        })
        .collect();
    names.sort();
    names
}

/// Every request of the corpus as `manifest.json` records it (file, method,
/// path with query, accept, request_headers, status, time_utc, ...).
pub fn manifest() -> Vec<Value> {
    match json("manifest.json") {
        Value::Array(entries) => entries,
        other => panic!("manifest.json is not an array: {other}"),
    }
}

/// The manifest's entry of `file`: how it was requested.
pub fn recorded(file: &str) -> Value {
    manifest()
        .into_iter()
        .find(|entry| entry["file"] == file)
        .unwrap_or_else(|| panic!("{file} is not in the golden corpus's manifest"))
}

/// The case `id` of the edge-case corpus (`edges/`, its own README) as its
/// `manifest.json` records it: path with query, status, body file, ...
pub fn edge(id: &str) -> Value {
    let Value::Array(cases) = json("edges/manifest.json") else {
        panic!("edges/manifest.json is not an array");
    };
    cases
        .into_iter()
        .find(|case| case["id"] == id)
        .unwrap_or_else(|| panic!("{id} is not in edges/manifest.json"))
}

/// The recorded body of an [`edge`] case; empty when it had none.
pub fn edge_body(case: &Value) -> Vec<u8> {
    case["body_file"]
        .as_str()
        .map_or_else(Vec::new, |file| read(&format!("edges/{file}")))
}

/// The objects the edge-case corpus's requests name, as it recorded them:
/// pod X (`payments-admin-df4vlxxh7l-2hlk4`) in `payments-prod`, the three
/// pods of `team-a`, then (second) the 28 configmaps of `payments-prod`.
/// What a server must hold to answer the cases as the real one did.
pub fn edge_objects() -> (Vec<Value>, Vec<Value>) {
    let items = |file: &str| match &json(&format!("edges/bodies/{file}"))["items"] {
        Value::Array(items) => items.clone(),
        other => panic!("edges/bodies/{file} is not a list: {other}"),
    };
    let mut pods = vec![json("edges/bodies/imp-admin-as-alice-get.json")];
    pods.extend(items("imp-admin-as-alice-masters-list-team-a.json"));
    (pods, items("req-watch-0-alice.json"))
}

/// `bytes` gunzipped.
pub fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .unwrap_or_else(|e| panic!("not gzip: {e}"));
    out
}
