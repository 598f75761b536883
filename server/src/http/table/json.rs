//! JSON written as Go's `encoding/json` writes it, which is what
//! kube-apiserver's answers are made of: strings escaped by
//! [`go_json`], object keys in the order given (the callers follow the Go
//! structs' field order).

use bytes::Bytes;
use kubecache_wire::go_json;
use serde_json::Value;

/// A JSON text being written.
#[derive(Default)]
pub(super) struct Json(Vec<u8>);

impl Json {
    /// Text already in JSON.
    pub fn raw(&mut self, text: &str) {
        self.0.extend_from_slice(text.as_bytes());
    }

    /// Bytes already in JSON.
    pub fn raw_bytes(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    /// A string, quoted and escaped.
    pub fn string(&mut self, text: &str) {
        go_json::write_string(&mut self.0, text.as_bytes());
    }

    /// Any value; object keys in their order in `value`. Numbers print as
    /// Go prints them for the cells' types (int64, and float64's shortest
    /// form, which serde_json shares).
    pub fn value(&mut self, value: &Value) {
        go_json::write(&mut self.0, value).expect("a JSON value serializes");
    }

    /// The text written.
    pub fn into_bytes(self) -> Bytes {
        Bytes::from(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped_as_go_escapes_them() {
        let mut out = Json::default();
        out.string("<none> & \"x\"\\\n\t\u{1}\u{2028}é");
        assert_eq!(
            std::str::from_utf8(&out.into_bytes()).unwrap(),
            r#""\u003cnone\u003e \u0026 \"x\"\\\n\t\u0001\u2028é""#
        );
    }
}
