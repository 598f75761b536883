//! The continue token of a paginated list, in kube-apiserver's format
//! (`storage.EncodeContinue`): unpadded URL-safe base64 of
//! `{"v":"meta.k8s.io/v1","rv":N,"start":"K\u0000"}`, where `N` is the
//! snapshot revision (`-1`: continue at the newest one, inconsistently) and
//! `K` the last key returned, relative to the list's prefix (`ns/name` for
//! all namespaces, `name` within one). Read as `storage.DecodeContinue`
//! reads it, with its errors' words, so that a token of either server is
//! good on the other.
//!
//! Shared by kubecache's server and the simulated API server: both must
//! write and read the API server's tokens, byte for byte (the recorded
//! ones: `versions/` of the golden corpus).

use base64::Engine as _;
use base64::alphabet::URL_SAFE;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use serde::{Deserialize, Serialize};

use crate::Status;

/// Go's `base64.RawURLEncoding`: no padding, and (not being strict) stray
/// bits in the last symbol are ignored.
const RAW_URL: GeneralPurpose = GeneralPurpose::new(
    &URL_SAFE,
    GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_padding_mode(DecodePaddingMode::RequireNone)
        .with_decode_allow_trailing_bits(true),
);

const VERSION: &str = "meta.k8s.io/v1";

/// The 410 message of a continue token whose snapshot is gone.
const EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// A decoded continue token. Fields the API server does not write (an
/// older kubecache's `n`) are ignored, as Go's decoder ignores them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContinueToken {
    #[serde(rename = "v", default)]
    version: String,
    /// The snapshot revision; below 0 continues at the newest revision.
    #[serde(default)]
    pub rv: i64,
    /// The first key to read (inclusive), relative to the list's prefix:
    /// the last key returned plus `\0`.
    #[serde(default)]
    pub start: String,
}

impl ContinueToken {
    /// The token of the page after `last_key` (relative to the list's
    /// prefix) at snapshot `rv`.
    pub fn after(rv: i64, last_key: &str) -> Self {
        ContinueToken {
            version: VERSION.into(),
            rv,
            start: format!("{last_key}\0"),
        }
    }

    /// The key the next page starts after: `start` without its NUL (a
    /// start without one, which no server writes, is read as the same key:
    /// object keys hold no NUL).
    pub fn last_key(&self) -> &str {
        self.start.strip_suffix('\0').unwrap_or(&self.start)
    }

    /// The opaque string sent to clients.
    pub fn encode(&self) -> String {
        RAW_URL.encode(serde_json::to_vec(self).expect("a token serializes"))
    }

    /// Reads a `continue` parameter; errors are kube-apiserver's 400.
    pub fn decode(token: &str) -> Result<Self, Status> {
        Self::read(token).map_err(|e| Status::bad_request(format!("invalid continue token: {e}")))
    }

    fn read(token: &str) -> Result<Self, String> {
        let invalid = |e: String| format!("continue key is not valid: {e}");
        let bytes = RAW_URL.decode(token).map_err(|e| {
            let at = match e {
                base64::DecodeError::InvalidByte(at, _)
                | base64::DecodeError::InvalidLastSymbol(at, _) => at,
                // Go stops at the first `=`, which an unpadded alphabet lacks.
                _ => token.find('=').unwrap_or(token.len()),
            };
            invalid(format!("illegal base64 data at input byte {at}"))
        })?;
        let mut decoded: ContinueToken =
            serde_json::from_slice(&bytes).map_err(|e| invalid(json_error(&bytes, &e)))?;
        if decoded.version != VERSION {
            return Err(invalid(format!(
                "server does not recognize this encoded version {}",
                decoded.version
            )));
        }
        if decoded.rv == 0 {
            return Err(invalid(format!(
                "incorrect encoded start resourceVersion (version {VERSION})"
            )));
        }
        if decoded.start.is_empty() {
            return Err(invalid(format!(
                "encoded start key empty (version {VERSION})"
            )));
        }
        // A start key must not climb out of the list's prefix: `path.Clean`
        // of it with a leading `/` must change nothing.
        let relative = decoded.start.strip_prefix('/').unwrap_or(&decoded.start);
        if relative
            .split('/')
            .any(|segment| matches!(segment, "" | "." | ".."))
        {
            return Err(invalid(decoded.start.clone()));
        }
        decoded.start = relative.to_string();
        Ok(decoded)
    }
}

/// Go's `encoding/json` wording for the syntax errors a mangled token
/// meets first: a first byte that starts no value, an object whose first
/// key is no string; serde's otherwise.
fn json_error(bytes: &[u8], error: &serde_json::Error) -> String {
    let mut significant = bytes.iter().filter(|b| !b" \t\r\n".contains(b));
    match (significant.next(), significant.next()) {
        (Some(&b), _) if !b"{[\"tfn-0123456789".contains(&b) => {
            format!(
                "invalid character {} looking for beginning of value",
                go_char(b)
            )
        }
        (Some(b'{'), Some(&b)) if !b"\"}".contains(&b) => format!(
            "invalid character {} looking for beginning of object key string",
            go_char(b)
        ),
        _ => error.to_string(),
    }
}

/// A byte as Go's JSON scanner quotes it in an error (`quoteChar`).
fn go_char(b: u8) -> String {
    let shown = match b {
        b'\'' => "\\'".to_string(),
        b'"' => "\"".to_string(),
        0x20..=0x7e => char::from(b).to_string(),
        0x07 => "\\a".into(),
        0x08 => "\\b".into(),
        0x0c => "\\f".into(),
        0x0b => "\\v".into(),
        0x09 => "\\t".into(),
        0x0a => "\\n".into(),
        0x0d => "\\r".into(),
        0x00..=0x1f | 0x7f => format!("\\x{b:02x}"),
        0x80..=0x9f | 0xad => format!("\\u{b:04x}"),
        _ => char::from(b).to_string(),
    };
    format!("'{shown}'")
}

/// The 410 for a continue token whose snapshot is gone, carrying a token
/// that continues from the same key at the newest revision (`rv` -1), in
/// kube-apiserver's words.
pub fn expired(token: &ContinueToken) -> Status {
    let mut status = Status::expired(EXPIRED);
    let inconsistent = ContinueToken {
        rv: -1,
        ..token.clone()
    };
    status.metadata.continue_token = Some(inconsistent.encode());
    status
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    /// `versions/streams/continue-tokens.json`: every token the recorded
    /// kube-apiserver v1.28.4 gave, with its decoded JSON.
    fn recorded_tokens() -> Vec<(String, String)> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../testdata/apiserver-golden/versions/streams/continue-tokens.json"
        );
        let file: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let mut tokens = Vec::new();
        for list in file.as_object().unwrap().values() {
            for entry in list.as_array().into_iter().flatten() {
                if let (Some(token), Some(decoded)) =
                    (entry["token"].as_str(), entry["decoded"].as_str())
                {
                    tokens.push((token.to_string(), decoded.to_string()));
                }
            }
        }
        tokens
    }

    /// The message of a recorded 400 (`versions/bodies/<case>.json`).
    fn recorded_message(case: &str) -> String {
        let path = format!(
            "{}/../testdata/apiserver-golden/versions/bodies/{case}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let body: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        body["message"].as_str().unwrap().to_string()
    }

    #[test]
    fn every_recorded_token_decodes_and_encodes_back_byte_for_byte() {
        let tokens = recorded_tokens();
        assert_eq!(tokens.len(), 8, "the recorded tokens");
        for (token, decoded) in tokens {
            let read = ContinueToken::decode(&token).unwrap();
            let json: Value = serde_json::from_str(&decoded).unwrap();
            assert_eq!(read.rv, json["rv"].as_i64().unwrap(), "{decoded}");
            assert_eq!(read.start, json["start"].as_str().unwrap(), "{decoded}");
            assert_eq!(
                ContinueToken::after(read.rv, read.last_key()).encode(),
                token
            );
        }
    }

    #[test]
    fn bad_tokens_get_the_recorded_400s() {
        let message = |token: &str| ContinueToken::decode(token).unwrap_err().message;
        let padded = "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NTI4OTcsInN0YXJ0IjoicGF5bWVudHMtYXBpLWpqemx4c3dnc2ctanRmYjVcdTAwMDAifQ==";
        for (case, token) in [
            ("continue-bad-abc", "abc"),
            ("continue-bad-garbage-json", "e3RoaXMgaXMgbm90IGpzb24"),
            (
                "continue-bad-wrong-version",
                "eyJ2IjoibWV0YS5rOHMuaW8vdjIiLCJydiI6NTI4OTcsInN0YXJ0IjoicGF5bWVudHMtYXBpLWpqemx4c3dnc2ctanRmYjVcdTAwMDAifQ",
            ),
            (
                "continue-bad-rv-zero",
                "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MCwic3RhcnQiOiJwYXltZW50cy1hcGktamp6bHhzd2dzZy1qdGZiNVx1MDAwMCJ9",
            ),
            ("continue-bad-padded-std-base64", padded),
            (
                "continue-bad-start-escapes-prefix",
                "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NTI4OTcsInN0YXJ0IjoiLi4vb3RoZXItbnMveCJ9",
            ),
        ] {
            assert_eq!(message(token), recorded_message(case), "{case}");
        }
        assert_eq!(
            message("garbage"),
            "invalid continue token: continue key is not valid: invalid character '\\u0081' looking for beginning of value"
        );
        let no_rv = RAW_URL.encode(r#"{"v":"meta.k8s.io/v1","start":"x"}"#);
        assert!(
            message(&no_rv)
                .ends_with("incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
        );
    }

    #[test]
    fn an_expired_token_is_the_recorded_410_with_its_inconsistent_follow_up() {
        let token = ContinueToken::decode("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NTI4OTcsInN0YXJ0IjoicGF5bWVudHMtYXBpLWpqemx4c3dnc2ctanRmYjVcdTAwMDAifQ").unwrap();
        let recorded = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../testdata/apiserver-golden/versions/bodies/continue-expired-410.json"
        ))
        .unwrap();
        let mut body = expired(&token).to_json();
        body.push(b'\n');
        assert_eq!(
            String::from_utf8(body).unwrap(),
            String::from_utf8(recorded).unwrap()
        );
    }

    #[test]
    fn a_token_of_an_older_kubecache_is_read_without_its_count() {
        let old = RAW_URL.encode(r#"{"v":"meta.k8s.io/v1","rv":7,"start":"ns/a\u0000","n":2}"#);
        let read = ContinueToken::decode(&old).unwrap();
        assert_eq!(read, ContinueToken::after(7, "ns/a"));
    }
}
