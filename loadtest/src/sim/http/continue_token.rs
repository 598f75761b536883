//! The continue token of a paginated list, in kube-apiserver's format:
//! unpadded URL-safe base64 of `{"v":"meta.k8s.io/v1","rv":N,"start":"K\u0000"}`,
//! where `N` is the snapshot revision (`-1`: continue at the newest one,
//! inconsistently) and `K` the last key returned, relative to the list's
//! prefix (`ns/name` for all namespaces, `name` within one).

use base64::Engine as _;
use base64::alphabet::URL_SAFE;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use kubecache_wire::Status;
use serde::{Deserialize, Serialize};

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

/// The 410 message of a continue token whose snapshot was compacted.
const EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// A decoded continue token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContinueToken {
    #[serde(rename = "v", default)]
    version: String,
    /// The snapshot revision; `-1` continues at the newest revision.
    #[serde(default)]
    pub rv: i64,
    /// The first key to read (inclusive): the last key returned plus `\0`.
    #[serde(default)]
    pub start: String,
}

impl ContinueToken {
    /// The token of the page after `last_key` at snapshot `rv`.
    pub fn after(rv: i64, last_key: &str) -> Self {
        ContinueToken {
            version: VERSION.into(),
            rv,
            start: format!("{last_key}\0"),
        }
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
                _ => token.len(),
            };
            invalid(format!("illegal base64 data at input byte {at}"))
        })?;
        let mut decoded: ContinueToken =
            serde_json::from_slice(&bytes).map_err(|e| invalid(json_error(&bytes, &e)))?;
        if decoded.version != VERSION {
            return Err(invalid(format!(
                "server does not recognize this encoded version {:?}",
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
        // A start key must not climb out of the list's prefix.
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

/// Go's wording for JSON that does not even start like a value (`invalid
/// character '\u0081' looking for beginning of value`); serde's otherwise.
fn json_error(bytes: &[u8], error: &serde_json::Error) -> String {
    let first = bytes.iter().find(|b| !b" \t\r\n".contains(b));
    match first {
        Some(&b) if !b"{[\"tfn-0123456789".contains(&b) => {
            let shown = match b {
                b'\'' => "\\'".to_string(),
                0x20..=0x7e => char::from(b).to_string(),
                0x07 => "\\a".into(),
                0x08 => "\\b".into(),
                0x0c => "\\f".into(),
                0x0b => "\\v".into(),
                0x00..=0x1f | 0x7f => format!("\\x{b:02x}"),
                0x80..=0x9f | 0xad => format!("\\u{b:04x}"),
                _ => char::from(b).to_string(),
            };
            format!("invalid character '{shown}' looking for beginning of value")
        }
        _ => error.to_string(),
    }
}

/// The 410 for a continue token whose snapshot is compacted, carrying a
/// token that continues from the same key at the newest revision.
pub fn expired(start: &str) -> Status {
    let mut status = Status::expired(EXPIRED);
    let token = ContinueToken {
        version: VERSION.into(),
        rv: -1,
        start: start.to_string(),
    };
    status.metadata.continue_token = Some(token.encode());
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A token kube-apiserver v1.28 handed out (see `testdata/apiserver-golden`).
    const REAL: &str = "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6OTQzOTUsInN0YXJ0IjoiYmlsbGluZy1jb25zdW1lci1jZHhjOHNmc212LWZuNWh3XHUwMDAwIn0";

    #[test]
    fn tokens_are_byte_for_byte_kube_apiservers() {
        let token = ContinueToken::after(94395, "billing-consumer-cdxc8sfsmv-fn5hw");
        assert_eq!(token.encode(), REAL);
        assert_eq!(ContinueToken::decode(REAL).unwrap(), token);
    }

    #[test]
    fn bad_tokens_get_kube_apiservers_400s() {
        let message = |token: &str| ContinueToken::decode(token).unwrap_err().message;
        assert_eq!(
            message("garbage"),
            "invalid continue token: continue key is not valid: invalid character '\\u0081' looking for beginning of value"
        );
        assert_eq!(
            message("a=b"),
            "invalid continue token: continue key is not valid: illegal base64 data at input byte 1"
        );
        let climbing = RAW_URL.encode(r#"{"v":"meta.k8s.io/v1","rv":3,"start":"../x"}"#);
        assert_eq!(
            message(&climbing),
            "invalid continue token: continue key is not valid: ../x"
        );
        let no_rv = RAW_URL.encode(r#"{"v":"meta.k8s.io/v1","start":"x"}"#);
        assert!(
            message(&no_rv)
                .ends_with("incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
        );
    }
}
