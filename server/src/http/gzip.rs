//! gzip for large answers, with kube-apiserver's rule
//! (`deferredResponseWriter` in apiserver's `responsewriters/writers.go`):
//! when the request's `Accept-Encoding` lists the token `gzip`, an answer
//! larger than 128 KiB is sent with `Content-Encoding: gzip` and
//! `Vary: Accept-Encoding`, compressed at level 1; smaller answers go as
//! they are. Watches are never compressed (kube-apiserver's watch handler
//! writes frames to the connection itself).
//!
//! Lists stream in chunks, so the size is not known up front: the body is
//! read up to the threshold first; if it ends there, it goes uncompressed
//! with its `Content-Length`; if not, the bytes read and the rest go
//! through one gzip stream, chunk by chunk. What is held at once is bounded
//! by the threshold plus one chunk of the body, whatever the list's size.

use std::io::Write as _;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use flate2::Compression;
use flate2::write::GzEncoder;
use futures::{Stream, StreamExt};

/// Answers larger than this are compressed (kube-apiserver's
/// `defaultGzipThresholdBytes`).
pub const THRESHOLD: usize = 128 * 1024;

/// Whether a request's `Accept-Encoding` asks for gzip, read as
/// kube-apiserver reads it: one of its comma-separated tokens, trimmed, is
/// exactly `gzip` (a token with parameters, `gzip;q=0.5`, is not).
pub fn accepted(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| kubecache_wire::ascii::split(value, b','))
        .any(|token| token.trim() == "gzip")
}

/// `response`, compressed if its body is larger than [`THRESHOLD`].
pub async fn large(response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    let mut data = body.into_data_stream();
    let mut head = BytesMut::new();
    while head.len() <= THRESHOLD {
        match data.next().await {
            Some(Ok(chunk)) => head.extend_from_slice(&chunk),
            Some(Err(error)) => {
                // Cut the body as it would have been cut.
                let failed = futures::stream::iter([Ok(head.freeze()), Err(error)]);
                return Response::from_parts(parts, Body::from_stream(failed));
            }
            None => return Response::from_parts(parts, Body::from(head.freeze())),
        }
    }
    let headers = &mut parts.headers;
    headers.remove(header::CONTENT_LENGTH);
    headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    headers.append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    Response::from_parts(parts, Body::from_stream(compressed(head.freeze(), data)))
}

/// `head`, then the rest of the body, through one gzip stream.
fn compressed<S, E>(head: Bytes, rest: S) -> impl Stream<Item = Result<Bytes, E>>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    let encoder = GzEncoder::new(Vec::new(), Compression::new(1));
    let chunks = futures::stream::iter([Ok(head)]).chain(rest);
    futures::stream::unfold(
        (Some(encoder), chunks),
        |(encoder, mut chunks)| async move {
            let mut encoder = encoder?;
            loop {
                match chunks.next().await {
                    Some(Ok(chunk)) => {
                        encoder
                            .write_all(&chunk)
                            .expect("writing to memory cannot fail");
                        let out = std::mem::take(encoder.get_mut());
                        if !out.is_empty() {
                            return Some((Ok(Bytes::from(out)), (Some(encoder), chunks)));
                        }
                    }
                    Some(Err(error)) => return Some((Err(error), (None, chunks))),
                    None => {
                        let out = encoder.finish().expect("writing to memory cannot fail");
                        return Some((Ok(Bytes::from(out)), (None, chunks)));
                    }
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    #[test]
    fn only_the_gzip_token_asks_for_gzip() {
        let headers = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT_ENCODING, value.parse().unwrap());
            headers
        };
        assert!(accepted(&headers("gzip")));
        assert!(accepted(&headers("deflate, gzip ,br")));
        assert!(!accepted(&headers("gzip;q=1")));
        assert!(!accepted(&headers("x-gzip")));
        assert!(!accepted(&HeaderMap::new()));
    }

    async fn body_of(response: Response) -> Vec<u8> {
        axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap()
            .to_vec()
    }

    fn streamed(bytes: &[u8], chunk: usize) -> Response {
        let chunks: Vec<Result<Bytes, std::convert::Infallible>> = bytes
            .chunks(chunk)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        Response::new(Body::from_stream(futures::stream::iter(chunks)))
    }

    #[tokio::test]
    async fn bodies_up_to_128_kib_go_as_they_are_with_their_length() {
        let body = vec![b'x'; THRESHOLD];
        let response = large(streamed(&body, 10_000)).await;
        assert!(response.headers().get(header::CONTENT_ENCODING).is_none());
        use axum::body::HttpBody as _;
        assert_eq!(response.body().size_hint().exact(), Some(THRESHOLD as u64));
        assert_eq!(body_of(response).await, body);
    }

    #[tokio::test]
    async fn larger_bodies_are_one_gzip_stream_of_every_chunk() {
        let body: Vec<u8> = (0..THRESHOLD * 3).map(|i| (i % 251) as u8).collect();
        let response = large(streamed(&body, 64 * 1024)).await;
        assert_eq!(response.headers()[header::CONTENT_ENCODING], "gzip");
        assert_eq!(response.headers()[header::VARY], "Accept-Encoding");
        let compressed = body_of(response).await;
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(&compressed[..])
            .read_to_end(&mut plain)
            .unwrap();
        assert_eq!(plain, body);
    }
}
