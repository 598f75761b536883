//! Raw list and watch requests: bodies are kept as bytes and split into
//! items and lines, never decoded into typed objects.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use kube::client::Body;

use super::error::UpstreamError;
use super::resource::ResourceSpec;

/// Largest error body read to classify a failure.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Largest watch line accepted (an object is at most ~1.5 MiB in etcd).
const MAX_LINE: usize = 16 * 1024 * 1024;

/// How a collection is read.
#[derive(Debug, Clone, Default)]
pub struct Query<'a> {
    /// `watch=1`.
    pub watch: bool,
    /// `limit`.
    pub limit: Option<usize>,
    /// `continue`.
    pub continue_token: Option<&'a str>,
    /// `resourceVersion`.
    pub resource_version: Option<u64>,
    /// `resourceVersionMatch`.
    pub version_match: Option<&'a str>,
    /// `sendInitialEvents=true` (streaming list).
    pub send_initial_events: bool,
    /// `timeoutSeconds` of a watch.
    pub timeout: Option<Duration>,
}

/// The API server, for one resource.
#[derive(Clone)]
pub struct Upstream {
    client: kube::Client,
    spec: ResourceSpec,
}

impl Upstream {
    /// Lists and watches `spec` through `client`.
    pub fn new(client: kube::Client, spec: ResourceSpec) -> Self {
        Upstream { client, spec }
    }

    /// The resource this reads.
    pub fn spec(&self) -> &ResourceSpec {
        &self.spec
    }

    fn uri(&self, query: &Query<'_>) -> String {
        let mut params = form_urlencoded::Serializer::new(String::new());
        if query.watch {
            params.append_pair("watch", "1");
            params.append_pair("allowWatchBookmarks", "true");
        }
        if let Some(limit) = query.limit {
            params.append_pair("limit", &limit.to_string());
        }
        if let Some(token) = query.continue_token {
            params.append_pair("continue", token);
        }
        if let Some(rv) = query.resource_version {
            params.append_pair("resourceVersion", &rv.to_string());
        }
        if let Some(version_match) = query.version_match {
            params.append_pair("resourceVersionMatch", version_match);
        }
        if query.send_initial_events {
            params.append_pair("sendInitialEvents", "true");
        }
        if let Some(timeout) = query.timeout {
            params.append_pair("timeoutSeconds", &timeout.as_secs().to_string());
        }
        if let Some(labels) = &self.spec.label_selector {
            params.append_pair("labelSelector", labels);
        }
        if let Some(fields) = &self.spec.field_selector {
            params.append_pair("fieldSelector", fields);
        }
        format!("{}?{}", self.spec.collection_path(), params.finish())
    }

    async fn get(&self, query: &Query<'_>) -> Result<http::Response<Body>, UpstreamError> {
        let request = Request::get(self.uri(query))
            .header(header::ACCEPT, "application/json")
            .body(Body::empty())
            .map_err(|e| UpstreamError::Connect(e.to_string()))?;
        let response = self
            .client
            .send(request)
            .await
            .map_err(|e| UpstreamError::Connect(e.to_string()))?;
        if response.status() == StatusCode::OK {
            return Ok(response);
        }
        let code = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .map(Duration::from_secs);
        let body = http_body_util::Limited::new(response.into_body(), MAX_ERROR_BODY)
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        Err(UpstreamError::from_response(code, retry_after, &body))
    }

    /// One list request; the whole body.
    pub async fn list(&self, query: &Query<'_>) -> Result<Bytes, UpstreamError> {
        let response = self.get(query).await?;
        response
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .map_err(|e| UpstreamError::Stream(format!("list body: {e}")))
    }

    /// Opens a watch.
    pub async fn watch(&self, query: &Query<'_>) -> Result<WatchLines, UpstreamError> {
        let response = self.get(query).await?;
        Ok(WatchLines {
            body: response.into_body(),
            buf: BytesMut::new(),
            scanned: 0,
        })
    }
}

/// The lines of a JSON watch stream.
pub struct WatchLines {
    body: Body,
    buf: BytesMut,
    /// How much of `buf` is known to hold no newline.
    scanned: usize,
}

impl WatchLines {
    /// The next line (without its newline); `None` when the server ended
    /// the stream cleanly.
    ///
    /// # Cancel safety
    /// Cancel safe: a partly received line stays buffered.
    pub async fn next_line(&mut self) -> Result<Option<Bytes>, UpstreamError> {
        loop {
            if let Some(at) = self.buf[self.scanned..].iter().position(|b| *b == b'\n') {
                let line = self.buf.split_to(self.scanned + at + 1);
                self.scanned = 0;
                let len = line_len(&line);
                let line = line.freeze().slice(..len);
                if line.is_empty() {
                    continue;
                }
                return Ok(Some(line));
            }
            self.scanned = self.buf.len();
            if self.buf.len() > MAX_LINE {
                return Err(UpstreamError::Stream(format!(
                    "a watch line exceeds {MAX_LINE} bytes"
                )));
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buf.extend_from_slice(&data);
                    }
                }
                Some(Err(e)) => return Err(UpstreamError::Stream(e.to_string())),
                None if self.buf.iter().all(u8::is_ascii_whitespace) => return Ok(None),
                None => {
                    return Err(UpstreamError::Stream(format!(
                        "the watch ended inside an event ({} bytes without a newline)",
                        self.buf.len()
                    )));
                }
            }
        }
    }
}

fn line_len(line: &[u8]) -> usize {
    let mut len = line.len();
    while len > 0 && matches!(line[len - 1], b'\n' | b'\r') {
        len -= 1;
    }
    len
}
