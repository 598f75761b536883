//! A fake API server for unit tests of consistent reads under paused time:
//! lists answer its revision after a latency; watches send one bookmark at
//! the revision of 1 s in (kube-apiserver's bookmark 2 s before a 3 s
//! timeout), or with a `bookmark_tick` at the first tick after that (as
//! kube-apiserver's dispatch timer does), then end at their timeout. It
//! records every request.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::http::{Request, Response, StatusCode};
use bytes::Bytes;
use futures::StreamExt;
use http_body_util::StreamBody;
use hyper::body::Frame;
use kubecache_reflector::upstream::{ApiResource, ResourceSpec, Upstream};
use parking_lot::Mutex;

type Body = StreamBody<futures::stream::BoxStream<'static, Result<Frame<Bytes>, Infallible>>>;

/// The fake API server.
#[derive(Default)]
pub(crate) struct FakeApi {
    /// Its global revision.
    pub(crate) revision: AtomicU64,
    /// How long a list takes.
    pub(crate) latency: Duration,
    /// Bookmarks wait for the next multiple of this since the first
    /// request.
    pub(crate) bookmark_tick: Option<Duration>,
    /// When the first request came.
    pub(crate) epoch: Mutex<Option<tokio::time::Instant>>,
    /// Paths (without query) answered 403.
    pub(crate) forbidden: Vec<String>,
    /// Every request's path and query, in order of arrival.
    pub(crate) requests: Mutex<Vec<String>>,
}

impl FakeApi {
    /// An [`Upstream`] of `plural` (core group) through this server.
    pub(crate) fn upstream(self: &Arc<Self>, plural: &str) -> Upstream {
        let api = self.clone();
        let service = tower::service_fn(move |request: Request<kube::client::Body>| {
            let api = api.clone();
            async move { Ok::<_, Infallible>(api.answer(request.uri())) }
        });
        let resource = ApiResource {
            plural: plural.into(),
            ..ApiResource::pods()
        };
        Upstream::new(
            kube::Client::new(service, "default"),
            ResourceSpec::all(resource),
        )
    }

    /// Requests whose query contains `part`.
    pub(crate) fn count(&self, part: &str) -> usize {
        self.requests
            .lock()
            .iter()
            .filter(|r| r.contains(part))
            .count()
    }

    fn answer(self: Arc<Self>, uri: &axum::http::Uri) -> Response<Body> {
        self.requests.lock().push(uri.to_string());
        if self.forbidden.iter().any(|p| p == uri.path()) {
            let status = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}"#;
            let mut response = Response::new(body(
                futures::stream::once(async move { Bytes::from(status) }).boxed(),
            ));
            *response.status_mut() = StatusCode::FORBIDDEN;
            return response;
        }
        let watch = uri.query().unwrap_or_default().contains("watch=1");
        let now = tokio::time::Instant::now();
        let epoch = *self.epoch.lock().get_or_insert(now);
        let due = now + Duration::from_secs(1);
        let bookmark = match self.bookmark_tick {
            Some(tick) => {
                let ticks = due
                    .duration_since(epoch)
                    .as_nanos()
                    .div_ceil(tick.as_nanos());
                epoch + tick * u32::try_from(ticks).expect("a short test")
            }
            None => due,
        };
        let api = self.clone();
        let chunks = if watch {
            futures::stream::once(async move {
                tokio::time::sleep_until(bookmark).await;
                let rv = api.revision.load(Ordering::SeqCst);
                Bytes::from(format!(
                    r#"{{"type":"BOOKMARK","object":{{"kind":"Pod","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}"}}}}}}
"#
                ))
            })
            .chain(
                futures::stream::once(tokio::time::sleep_until(now + Duration::from_secs(3)))
                    .filter_map(|()| async { None }),
            )
            .boxed()
        } else {
            let rv = api.revision.load(Ordering::SeqCst);
            let latency = self.latency;
            futures::stream::once(async move {
                tokio::time::sleep(latency).await;
                Bytes::from(format!(
                    r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}"}},"items":[]}}"#
                ))
            })
            .boxed()
        };
        let mut response = Response::new(body(chunks));
        response.headers_mut().insert(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/json"),
        );
        response
    }
}

fn body(chunks: futures::stream::BoxStream<'static, Bytes>) -> Body {
    StreamBody::new(chunks.map(|b| Ok(Frame::data(b))).boxed())
}
