//! Raw list and watch requests: bodies are kept as bytes and split into
//! items and events (see [`wire`](super::wire)), never decoded into typed
//! objects.

use std::time::Duration;

use http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use kube::client::Body;

use super::error::UpstreamError;
use super::resource::{ApiResource, ResourceSpec};
use super::wire::{ListResponse, RequestEncoding, WatchEvent, WatchSplitter, error_body_json};
use kubecache_wire::Encoding;
use kubecache_wire::protobuf::KubeVersion;

/// Largest error body read to classify a failure.
const MAX_ERROR_BODY: usize = 64 * 1024;

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
    /// Whether requests ask for protobuf first.
    protobuf: bool,
    /// The API server's Kubernetes version: protobuf is read as its Go
    /// types wrote it.
    version: KubeVersion,
}

impl Upstream {
    /// Lists and watches `spec` through `client`, asking for JSON.
    pub fn new(client: kube::Client, spec: ResourceSpec) -> Self {
        Upstream {
            client,
            spec,
            protobuf: false,
            version: KubeVersion::NEWEST,
        }
    }

    /// The same, of an API server of Kubernetes `version` (see
    /// [`server_version`]); the schema's own version unless told.
    pub fn with_version(mut self, version: KubeVersion) -> Self {
        self.version = version;
        self
    }

    /// The API server's Kubernetes version, as told.
    pub fn version(&self) -> KubeVersion {
        self.version
    }

    /// The same, asking for the encoding `wire` picks for the resource
    /// (responses are read in whatever encoding they declare).
    pub fn with_wire(mut self, wire: RequestEncoding) -> Self {
        self.protobuf = wire.asks_protobuf(&self.spec.resource);
        self
    }

    /// Whether requests ask for protobuf first.
    pub fn asks_protobuf(&self) -> bool {
        self.protobuf
    }

    /// The same collection in one namespace (a shard of a sharded list).
    pub fn in_namespace(&self, namespace: &str) -> Upstream {
        let mut shard = self.clone();
        shard.spec.namespace = Some(namespace.to_owned());
        shard
    }

    /// The one object `name` (in `namespace`) of the collection, as a list
    /// selecting it by `metadata.name` (within the collection's own
    /// selectors): kube-apiserver reads such a list as one key
    /// (`MatchesSingle` in `registry/generic/registry/store.go`), as cheap
    /// as a GET, and needs only the `list` verb; a list without
    /// resourceVersion also says the API server's current resourceVersion.
    pub fn named(&self, namespace: Option<&str>, name: &str) -> Upstream {
        let mut one = self.clone();
        one.spec.namespace = namespace.map(str::to_owned);
        let by_name = format!("metadata.name={name}");
        one.spec.field_selector = Some(match &self.spec.field_selector {
            Some(fields) => format!("{by_name},{fields}"),
            None => by_name,
        });
        one
    }

    /// The cluster's namespaces, asked in the same encoding.
    pub fn namespaces(&self) -> Upstream {
        Upstream {
            client: self.client.clone(),
            spec: ResourceSpec::all(ApiResource::namespaces()),
            protobuf: self.protobuf,
            version: self.version,
        }
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
            .header(
                header::ACCEPT,
                RequestEncoding::accept(self.protobuf, query.watch),
            )
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
        Err(UpstreamError::from_response(
            code,
            retry_after,
            &error_body_json(&body),
        ))
    }

    /// One list request; the whole body, in the encoding the server chose.
    pub async fn list(&self, query: &Query<'_>) -> Result<ListResponse, UpstreamError> {
        let response = self.get(query).await?;
        let encoding = Encoding::of_content_type(
            response
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok()),
        );
        response
            .into_body()
            .collect()
            .await
            .map(|b| ListResponse::new(b.to_bytes(), encoding, self.version))
            .map_err(|e| UpstreamError::Stream(format!("list body: {e}")))
    }

    /// Opens a watch.
    pub async fn watch(&self, query: &Query<'_>) -> Result<WatchEvents, UpstreamError> {
        let response = self.get(query).await?;
        let encoding = Encoding::of_content_type(
            response
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok()),
        );
        Ok(WatchEvents {
            body: response.into_body(),
            splitter: WatchSplitter::new(encoding, self.version),
        })
    }
}

/// The events of a watch stream (JSON lines or protobuf frames).
pub struct WatchEvents {
    body: Body,
    splitter: WatchSplitter,
}

impl WatchEvents {
    /// The next event; `None` when the server ended the stream cleanly.
    ///
    /// # Cancel safety
    /// Cancel safe: a partly received event stays buffered.
    pub async fn next_event(&mut self) -> Result<Option<WatchEvent>, UpstreamError> {
        loop {
            if let Some(event) = self.splitter.next_event()? {
                return Ok(Some(event));
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.splitter.push(&data);
                    }
                }
                Some(Err(e)) => return Err(UpstreamError::Stream(e.to_string())),
                None => return self.splitter.finish().map(|()| None),
            }
        }
    }
}

/// The Kubernetes version the API server of `client` names at `/version`:
/// what its protobuf is read and written as (see [`KubeVersion`]).
///
/// # Errors
///
/// A request that fails, or a body that names no Kubernetes 1.x version.
pub async fn server_version(client: &kube::Client) -> Result<KubeVersion, UpstreamError> {
    let request = Request::get("/version")
        .body(Vec::new())
        .map_err(|e| UpstreamError::Connect(e.to_string()))?;
    let body = client
        .request_text(request)
        .await
        .map_err(|e| UpstreamError::Connect(e.to_string()))?;
    KubeVersion::from_version_json(body.as_bytes()).ok_or_else(|| UpstreamError::Decode {
        what: "/version".into(),
        error: format!("names no Kubernetes 1.x version: {body:.200}"),
    })
}
