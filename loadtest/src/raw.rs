//! The raw paginated read: every page of a collection fetched and its bytes
//! discarded, nothing decoded but the continue token. It is the floor of
//! any reflector's time to sync against the same server.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use kubecache_wire::protobuf;
use serde::Serialize;

/// What a raw read measured.
#[derive(Debug, Clone, Serialize)]
pub struct RawReadReport {
    /// Pages fetched.
    pub pages: usize,
    /// Body bytes received.
    pub bytes: u64,
    /// Wall time of the whole read.
    pub seconds: f64,
    /// `bytes / seconds`, in MB/s (10^6).
    pub mb_per_sec: f64,
}

/// Reads `path` from `server` in pages of `limit` (0: unpaginated).
pub async fn read_all(
    server: &str,
    path: &str,
    limit: usize,
    accept: &str,
    token: Option<&str>,
) -> anyhow::Result<RawReadReport> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()?;
    let started = Instant::now();
    let (mut pages, mut bytes) = (0usize, 0u64);
    let mut next: Option<String> = None;
    loop {
        let mut url = format!("{server}{path}?limit={limit}");
        if let Some(token) = &next {
            url.push_str("&continue=");
            url.extend(form_urlencoded::byte_serialize(token.as_bytes()));
        }
        let mut request = client.get(&url).header("Accept", accept);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.with_context(|| format!("GET {url}"))?;
        if !response.status().is_success() {
            bail!("GET {url}: {}", response.status());
        }
        let body = response
            .bytes()
            .await
            .with_context(|| format!("reading {url}"))?;
        pages += 1;
        bytes += body.len() as u64;
        next = continue_token(&body);
        if next.is_none() {
            break;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(RawReadReport {
        pages,
        bytes,
        seconds,
        mb_per_sec: bytes as f64 / seconds / 1e6,
    })
}

/// The continue token of a list page, JSON or protobuf, found without
/// decoding the items.
fn continue_token(body: &[u8]) -> Option<String> {
    if body.starts_with(&protobuf::MAGIC) {
        return protobuf_continue_token(body);
    }
    json_continue_token(body)
}

/// In a protobuf page: `ListMeta.continue` (the items are skipped over by
/// their length prefixes, not decoded).
fn protobuf_continue_token(body: &[u8]) -> Option<String> {
    let unknown = protobuf::decode_unknown(body).ok()?;
    let list = protobuf::decode_list(unknown.raw).ok()?;
    list.meta.continue_token.map(str::to_owned)
}

/// In a JSON page, found without parsing the page: list metadata comes
/// before the items.
fn json_continue_token(body: &[u8]) -> Option<String> {
    let head = &body[..body.len().min(4096)];
    let at = head.windows(12).position(|w| w == br#""continue":""#)? + 12;
    let end = head[at..].iter().position(|b| *b == b'"')?;
    let token = std::str::from_utf8(&head[at..at + end]).ok()?;
    (!token.is_empty()).then(|| token.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_continue_token_is_found_in_the_list_metadata() {
        let page = br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"9","continue":"abc=","remainingItemCount":3},"items":[]}"#;
        assert_eq!(continue_token(page).as_deref(), Some("abc="));
        assert_eq!(
            continue_token(br#"{"metadata":{"resourceVersion":"9"},"items":[]}"#),
            None
        );
    }

    #[test]
    fn the_continue_token_is_found_in_a_protobuf_list_metadata() {
        let page = |token: Option<&str>| {
            let meta = protobuf::ListMeta {
                resource_version: "9",
                continue_token: token,
                remaining_item_count: token.map(|_| 3),
                shard_selector: None,
            };
            let mut body = Vec::new();
            protobuf::encode_list_unknown::<&[u8]>(
                "v1",
                "PodList",
                &meta,
                &[b"\x0a\x00"],
                &mut body,
            );
            body
        };
        assert_eq!(continue_token(&page(Some("abc="))).as_deref(), Some("abc="));
        assert_eq!(continue_token(&page(None)), None);
        assert_eq!(continue_token(b"k8s\0garbage"), None);
    }
}
