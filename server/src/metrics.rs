//! Prometheus metrics: the recorder behind `/metrics`, the per-resource
//! gauges read at scrape time, and the HTTP request metrics layer.
//!
//! Counters are recorded where things happen (the reflector's upstream
//! metrics, the watch streams); gauges that describe a store's state are set
//! from the stores when `/metrics` is scraped, so they are never stale and
//! cost nothing between scrapes. Every metric is described in docs/metrics.md.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::auth::Auth;
use crate::cacher::Caches;

/// Which handler answered a request: the `route` label of the HTTP
/// metrics. The Kubernetes API's handler returns it; those of axum's
/// routes put it in the response's extensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Endpoint(pub &'static str);

impl Endpoint {
    /// What no handler names.
    pub(crate) const OTHER: Endpoint = Endpoint("other");

    /// The endpoint `response` names in its extensions.
    pub(crate) fn of(response: &Response) -> Endpoint {
        response
            .extensions()
            .get::<Endpoint>()
            .copied()
            .unwrap_or(Endpoint::OTHER)
    }
}

/// Seconds buckets of request latencies and list durations: from 100 µs
/// (a GET served from memory) to 5 minutes (a large first list).
const SECONDS_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// How often histograms' samples are folded into their buckets.
const UPKEEP: Duration = Duration::from_secs(5);

/// The process's recorder, installed as the global one on first use. If
/// another recorder is already installed (kubecache embedded in a program
/// with its own), `/metrics` renders an empty registry and says so in a log.
///
/// A histogram keeps each observation until upkeep folds it into the
/// buckets; only a scrape did that before, so an unscraped kubecache grew
/// by every request's latency sample (58 MB in 7 minutes of a chaos run).
/// A thread of its own runs the upkeep every [`UPKEEP`], whatever the
/// runtime is doing.
pub(crate) fn handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
            .expect("the buckets are not empty")
            .build_recorder();
        let handle = recorder.handle();
        let upkept = handle.clone();
        std::thread::Builder::new()
            .name("metrics-upkeep".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(UPKEEP);
                    upkept.run_upkeep();
                }
            })
            .expect("a thread can be started at start-up");
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("a metrics recorder is already installed: /metrics stays empty");
        }
        describe();
        handle
    })
}

/// Creates the series of `resource` at zero, so that a scrape right after
/// start-up lists every metric, and `increase()` sees the first failure.
pub(crate) fn register(resource: &str) {
    handle();
    let r = || resource.to_string();
    for reason in ["gone", "decode"] {
        metrics::counter!("kubecache_relists_total", "resource" => r(), "reason" => reason)
            .absolute(0);
    }
    for phase in ["list", "watch"] {
        metrics::counter!("kubecache_upstream_errors_total", "resource" => r(), "phase" => phase, "reason" => "gone")
            .absolute(0);
    }
    for reason in ["timeout", "stream_broken"] {
        metrics::counter!("kubecache_watch_restarts_total", "resource" => r(), "reason" => reason)
            .absolute(0);
    }
    for reason in ["slow", "timeout", "client"] {
        metrics::counter!("kubecache_watchers_closed_total", "resource" => r(), "reason" => reason)
            .absolute(0);
    }
    for counter in [
        "kubecache_events_applied_total",
        "kubecache_watch_events_sent_total",
        "kubecache_watch_bytes_sent_total",
    ] {
        metrics::counter!(counter, "resource" => r()).absolute(0);
    }
    metrics::gauge!("kubecache_buffered_events", "resource" => r()).set(0.0);
}

/// `GET /metrics`: the store gauges, then everything recorded.
pub(crate) fn render(caches: &Caches, auth: &Auth) -> String {
    let (tokens, access) = auth.cached();
    metrics::gauge!("kubecache_auth_cache_entries", "review" => "token").set(tokens as f64);
    metrics::gauge!("kubecache_auth_cache_entries", "review" => "access").set(access as f64);
    let encoded = kubecache_wire::encoded_bytes();
    metrics::gauge!("kubecache_encoded_bytes", "encoding" => "protobuf")
        .set(encoded.protobuf as f64);
    metrics::gauge!("kubecache_encoded_bytes", "encoding" => "metadata")
        .set(encoded.metadata as f64);
    for cache in caches.iter() {
        let resource = cache.name();
        let snapshot = cache.reader.snapshot();
        let gauge = |name: &'static str, value: f64| {
            metrics::gauge!(name, "resource" => resource.clone()).set(value);
        };
        gauge("kubecache_objects", snapshot.len() as f64);
        gauge("kubecache_store_bytes", snapshot.bytes() as f64);
        gauge(
            "kubecache_ready",
            f64::from(u8::from(cache.reader.is_ready())),
        );
        gauge(
            "kubecache_resource_version",
            snapshot.resource_version() as f64,
        );
        gauge(
            "kubecache_resource_version_lag",
            cache.freshness.lag() as f64,
        );
        gauge("kubecache_watchers", cache.watchers() as f64);
        gauge("kubecache_held_snapshots", cache.pages.len() as f64);
        gauge(
            "kubecache_watchers_dispatched",
            cache.dispatched_watchers() as f64,
        );
        let log = cache.reader.event_log_status();
        gauge("kubecache_event_log_events", log.events as f64);
        gauge("kubecache_event_log_bytes", log.bytes as f64);
    }
    if let Some(rss) = resident_memory_bytes() {
        metrics::gauge!("process_resident_memory_bytes").set(rss as f64);
    }
    handle().render()
}

/// The layer that counts and times every request by route, verb and code,
/// and counts the bytes of every response body as it is sent. A watch's
/// latency is its time to the first byte (the response head).
pub(crate) async fn track(request: Request, next: Next) -> Response {
    let tracked = Tracked::start(&request);
    let response = next.run(request).await;
    tracked.finish(Endpoint::of(&response), response)
}

/// A request being counted and timed (see [`track`]), for a layer that
/// does more around it.
pub(crate) struct Tracked {
    started: Instant,
    verb: &'static str,
}

impl Tracked {
    /// Starts timing `request`.
    pub(crate) fn start<B>(request: &axum::http::Request<B>) -> Tracked {
        Tracked {
            started: Instant::now(),
            verb: verb(request.method(), request.uri()),
        }
    }

    /// Counts and times `response`, the request's answer, under
    /// `endpoint`, and counts its body's bytes: a body of known length
    /// (every GET's) at once, whole, as hyper writes it whole or breaks the
    /// connection; any other (and a HEAD's: none) as it is sent.
    pub(crate) fn finish(self, Endpoint(route): Endpoint, response: Response) -> Response {
        let elapsed = self.started.elapsed().as_secs_f64();
        // A HEAD's body is not sent.
        let length = axum::body::HttpBody::size_hint(response.body())
            .exact()
            .filter(|_| self.verb != "HEAD");
        let bytes = Series::with(route, self.verb, response.status().as_u16(), |series| {
            series.requests.increment(1);
            series.duration.record(elapsed);
            match length {
                Some(length) => {
                    series.bytes.increment(length);
                    None
                }
                None => Some(series.bytes.clone()),
            }
        });
        match bytes {
            Some(bytes) => response.map(|body| axum::body::Body::new(Counted { body, bytes })),
            None => response,
        }
    }
}

/// The handles of one (route, verb, code)'s request metrics. Looked up
/// once per thread: `counter!` with labels builds its key and looks it up
/// in the registry on every call, a cost each request paid three times.
struct Series {
    requests: metrics::Counter,
    duration: metrics::Histogram,
    bytes: metrics::Counter,
}

impl Series {
    /// `f` of the series of `(route, verb, code)`. A thread's series are
    /// few (the routes, verbs and codes it answered), in a list with the
    /// last one used first: a request is mostly answered as the one before
    /// it, found without hashing.
    fn with<T>(
        route: &'static str,
        verb: &'static str,
        code: u16,
        f: impl FnOnce(&Series) -> T,
    ) -> T {
        type Key = (&'static str, &'static str, u16);
        thread_local! {
            static SERIES: std::cell::RefCell<Vec<(Key, Series)>> = const {
                std::cell::RefCell::new(Vec::new())
            };
        }
        let key = (route, verb, code);
        SERIES.with_borrow_mut(|series| {
            match series.iter().position(|(held, _)| *held == key) {
                Some(0) => {}
                Some(at) => series[..=at].rotate_right(1),
                None => {
                    handle();
                    let code = code.to_string();
                    let made = Series {
                        requests: metrics::counter!("kubecache_http_requests_total", "route" => route, "verb" => verb, "code" => code),
                        duration: metrics::histogram!("kubecache_http_request_duration_seconds", "route" => route, "verb" => verb),
                        bytes: metrics::counter!("kubecache_http_response_bytes_total", "route" => route),
                    };
                    series.insert(0, (key, made));
                }
            }
            f(&series[0].1)
        })
    }
}

/// A response body that counts its bytes as they are sent. Unlike a mapped
/// body, it keeps the body's size hint: a body of known length goes out
/// with its `Content-Length`, not chunked.
struct Counted {
    body: axum::body::Body,
    bytes: metrics::Counter,
}

impl axum::body::HttpBody for Counted {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let polled = std::pin::Pin::new(&mut self.body).poll_frame(cx);
        if let std::task::Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            self.bytes.increment(data.len() as u64);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// The verb of a request with `method` to `uri`, as the API server's
/// metrics name it: `WATCH` for `watch=true` and the deprecated `/watch/`
/// paths.
pub(crate) fn verb(method: &axum::http::Method, uri: &axum::http::Uri) -> &'static str {
    // Every request is asked: split no further than the segment after
    // the version.
    // `trim_start_matches` sets up a pattern searcher: 100 instructions.
    let slashes = uri.path().bytes().take_while(|b| *b == b'/').count();
    let path = &uri.path()[slashes..];
    let version_segments = if path.starts_with("api/") {
        2
    } else if path.starts_with("apis/") {
        3
    } else {
        0
    };
    let watch_path = version_segments > 0
        && kubecache_wire::ascii::split(path, b'/').nth(version_segments) == Some("watch");
    let watch = watch_path || kubecache_wire::list_options::is_watch(uri.query().unwrap_or(""));
    match *method {
        _ if watch => "WATCH",
        axum::http::Method::GET => "GET",
        axum::http::Method::HEAD => "HEAD",
        axum::http::Method::POST => "POST",
        axum::http::Method::PUT => "PUT",
        axum::http::Method::PATCH => "PATCH",
        axum::http::Method::DELETE => "DELETE",
        _ => "OTHER",
    }
}

/// The resident set size, from `/proc/self/statm` (Linux only).
fn resident_memory_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// The `# HELP` lines.
fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_gauge!("kubecache_objects", "Objects in the store.");
    describe_gauge!(
        "kubecache_ready",
        "1 while the resource is synced and served; 0 before, while its reflector fails (401, 403, 404, a panic), and once it stopped."
    );
    describe_gauge!(
        "kubecache_reflector_phase",
        "1 for the lifecycle state the resource's reflector is in (listing, watching, backing_off, failing), 0 for the others."
    );
    describe_gauge!(
        "kubecache_resource_version",
        "The store's resourceVersion: the newest event or bookmark applied."
    );
    describe_gauge!(
        "kubecache_resource_version_lag",
        "The API server's resourceVersion last learnt by a consistent read, minus the newest one the store is known complete through (0 when caught up)."
    );
    describe_gauge!(
        "kubecache_event_log_events",
        "Events held in the replay log that watches resume from."
    );
    describe_gauge!(
        "kubecache_store_bytes",
        Unit::Bytes,
        "About the bytes the store's objects hold (JSON and parsed fields)."
    );
    describe_gauge!(
        "kubecache_encoded_bytes",
        Unit::Bytes,
        "Bytes of the encodings made on demand and kept beside the objects alive, all resources: protobuf messages, and metadata-only ones (PartialObjectMetadata)."
    );
    describe_gauge!(
        "kubecache_event_log_bytes",
        Unit::Bytes,
        "About the bytes of the object versions the replay log keeps alive beyond the store (superseded versions, deleted objects)."
    );
    describe_counter!(
        "kubecache_events_applied_total",
        "Watch events applied to the store."
    );
    describe_histogram!(
        "kubecache_upstream_list_duration_seconds",
        Unit::Seconds,
        "Duration of complete upstream lists, first page to ready."
    );
    describe_counter!(
        "kubecache_upstream_list_shards_total",
        "Shards (namespaces) read by sharded lists, by result (read; gone: a 410 made it read again at the current state)."
    );
    describe_counter!(
        "kubecache_relists_total",
        "Relists after the first list, by the reason the watch ended (gone: a 410; decode: an undecodable event)."
    );
    describe_counter!(
        "kubecache_upstream_errors_total",
        "Failed upstream requests by phase (list, watch) and reason (gone is a 410)."
    );
    describe_counter!(
        "kubecache_watch_restarts_total",
        "Upstream watches resumed from their last resourceVersion, by reason."
    );
    describe_gauge!(
        "kubecache_buffered_events",
        "Watch events buffered while a parallel list reads its remaining pages."
    );
    describe_gauge!("kubecache_watchers", "Open client watches.");
    describe_gauge!(
        "kubecache_held_snapshots",
        "Store snapshots held for the next pages of paginated lists."
    );
    describe_gauge!(
        "kubecache_watchers_dispatched",
        "Client watches the resource's dispatcher routes events to: the open watches past their replay."
    );
    describe_counter!(
        "kubecache_watchers_closed_total",
        "Client watches ended, by reason (timeout, client, shutdown, slow: cut for falling behind, stalled: its initial events waited 15 s for a seat again after its client stopped reading, expired: too old a resourceVersion, closed)."
    );
    describe_counter!(
        "kubecache_watch_events_sent_total",
        "Events written to client watches."
    );
    describe_gauge!(
        "kubecache_watch_unsent_bytes",
        Unit::Bytes,
        "Bytes of watch events made for watchers that their connections have not taken yet: at most a chunk of 64 KiB per watch."
    );
    describe_counter!(
        "kubecache_watch_bytes_sent_total",
        Unit::Bytes,
        "Bytes written to client watches."
    );
    describe_counter!(
        "kubecache_http_requests_total",
        "HTTP requests by route (list, get, watch, passthrough, query, health, metrics, other), verb and code."
    );
    describe_histogram!(
        "kubecache_http_request_duration_seconds",
        Unit::Seconds,
        "HTTP request latency to the response head, by route and verb."
    );
    describe_counter!(
        "kubecache_http_response_bytes_total",
        Unit::Bytes,
        "Bytes of HTTP response bodies sent, by route (a body of known length counted when answered)."
    );
    describe_counter!(
        "kubecache_offloaded_requests_total",
        "Lists, and watches' initial events, built on a blocking thread because they examine or render many objects."
    );
    describe_counter!(
        "kubecache_table_rows_rendered_total",
        "Table rows rendered: a list's or a get's rows, and each watch event's row once for every Table watcher receiving it."
    );
    describe_gauge!(
        "kubecache_initial_send_seats_in_use",
        "Large initial sends (a watch's initial events, a list, of more than 500 objects) being written."
    );
    describe_gauge!(
        "kubecache_initial_send_queue",
        "Large initial sends waiting for a seat (again, after theirs was taken back)."
    );
    describe_counter!(
        "kubecache_initial_send_seats_taken_back_total",
        "Seats taken back from large initial sends whose clients stopped reading for a second, for sends that waited."
    );
    describe_counter!(
        "kubecache_initial_send_seats_preempted_total",
        "Seats taken from large initial sends for a waiting send of a smaller size class."
    );
    describe_counter!(
        "kubecache_initial_send_rejected_total",
        "Large initial sends answered 429 instead of a seat, by reason (queue_full: 50 of its client's were waiting; queue_wait: it waited 15 s)."
    );
    describe_histogram!(
        "kubecache_initial_send_wait_seconds",
        Unit::Seconds,
        "How long each large initial send waited for its seat, each time it waited."
    );
    describe_counter!(
        "kubecache_auth_decisions_total",
        "Authentication (review=token) and authorization (review=access) decisions by result (allowed, denied, error, refused) and cache (hit, miss: asked of the API server, stale: an expired allowed answer served while the API server could not answer it again)."
    );
    describe_counter!(
        "kubecache_auth_reviews_refused_total",
        "Reviews not asked of the API server because their budget was used up (the requests got 429), by budget: address (unknown tokens and anonymous requests of one client address), user (requests of one signed-in user)."
    );
    describe_counter!(
        "kubecache_auth_revocations_total",
        "Watched changes of what kept review answers depend on, each revoking what it affects, by resource (roles, rolebindings, clusterroles, clusterrolebindings, serviceaccounts)."
    );
    describe_histogram!(
        "kubecache_auth_review_duration_seconds",
        Unit::Seconds,
        "Latency of TokenReviews and SubjectAccessReviews asked of the API server, by review."
    );
    describe_gauge!(
        "kubecache_auth_cache_entries",
        "Review answers kept, by review (token, access)."
    );
    describe_counter!(
        "kubecache_passthrough_requests_total",
        "Requests passed through to the API server, by verb and code (the API server's, or kubecache's own 413, 501, 503 or 504)."
    );
    describe_gauge!(
        "kubecache_passthrough_connections",
        "Pass-through's connections to the API server open (in use or pooled), at most connections.maxPassThrough."
    );
    describe_histogram!(
        "kubecache_passthrough_duration_seconds",
        Unit::Seconds,
        "Pass-through latency to the API server's response head, by verb."
    );
    describe_counter!(
        "kubecache_freshness_requests_total",
        "Requests sent to the API server for consistent reads, by kind: current (a limit=1 list learning its resourceVersion), probe (a watch proving a resource complete through a bookmark), passthrough (a consistent GET of one object passed through instead of waiting for a cold probe)."
    );
    describe_counter!(
        "kubecache_state_loads_total",
        "State files loaded at start (--state-dir), by result: restored, none (no file), failed, or why it was refused (truncated, checksum, bad_magic, foreign_version, foreign_cluster, other_resource, config_changed, undecodable, io)."
    );
    describe_counter!(
        "kubecache_state_saves_total",
        "State file saves (--state-dir), by result (saved, failed)."
    );
    describe_histogram!(
        "kubecache_state_save_duration_seconds",
        Unit::Seconds,
        "How long a state file save took: snapshot, write, fsync, rename."
    );
    describe_gauge!(
        "kubecache_state_file_bytes",
        Unit::Bytes,
        "Size of the last state file saved."
    );
    describe_gauge!(
        "kubecache_state_last_save_timestamp_seconds",
        Unit::Seconds,
        "When the last state file was saved (Unix time)."
    );
    describe_gauge!(
        "kubecache_read_your_writes_waiting",
        "Reads waiting until the cache holds their client's own write."
    );
    describe_histogram!(
        "kubecache_read_your_writes_wait_seconds",
        Unit::Seconds,
        "How long reads waited for their client's own write, by outcome (caught_up, timeout)."
    );
    describe_gauge!(
        "kubecache_connections",
        "Open client connections, by state (admitted: served; held: beyond a limit, unread, waiting for a place; refused: answering their one request with a 429, or a probe)."
    );
    describe_counter!(
        "kubecache_connections_refused_total",
        "Connections beyond a limit, by reason (max_connections, max_connections_per_address)."
    );
    describe_gauge!(
        "process_resident_memory_bytes",
        Unit::Bytes,
        "Resident memory of the kubecache process."
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Method;

    #[test]
    fn a_response_body_is_counted_whole_whether_its_length_is_known_or_not() {
        let recorder = PrometheusBuilder::new().build_recorder();
        let rendered = recorder.handle();
        let request = axum::http::Request::get("/api/v1/pods").body(()).unwrap();
        let streamed = futures::stream::iter(["ab", "cde"].map(|chunk| {
            Ok::<_, std::convert::Infallible>(axum::body::Bytes::from_static(chunk.as_bytes()))
        }));
        let responses = metrics::with_local_recorder(&recorder, || {
            [
                Response::new(axum::body::Body::from("0123456789")),
                Response::new(axum::body::Body::from_stream(streamed)),
            ]
            .map(|response| Tracked::start(&request).finish(Endpoint("list"), response))
        });
        let bytes = || {
            let text = rendered.render();
            text.lines()
                .find_map(|line| {
                    line.strip_prefix("kubecache_http_response_bytes_total{route=\"list\"} ")
                })
                .map(|value| value.parse::<u64>().unwrap())
        };
        assert_eq!(bytes(), Some(10), "the known length at once");
        let [_, streamed] = responses;
        let sent = futures::executor::block_on(axum::body::to_bytes(streamed.into_body(), 64));
        assert_eq!(sent.unwrap().len(), 5);
        assert_eq!(bytes(), Some(15), "the rest as it was sent");
    }

    #[test]
    fn watches_are_counted_as_watch_whether_asked_by_parameter_or_by_path() {
        let verb_of = |method: Method, uri: &str| verb(&method, &uri.parse().unwrap());
        assert_eq!(verb_of(Method::GET, "/api/v1/pods?watch=1"), "WATCH");
        assert_eq!(verb_of(Method::GET, "/api/v1/watch/pods"), "WATCH");
        assert_eq!(
            verb_of(
                Method::GET,
                "/apis/apps/v1/watch/namespaces/a/deployments/d"
            ),
            "WATCH"
        );
        assert_eq!(
            verb_of(Method::GET, "/api/v1/namespaces/a/pods/watch"),
            "GET"
        );
        assert_eq!(
            verb_of(Method::GET, "/api/v1/pods?watch=false&watch=1"),
            "GET"
        );
        assert_eq!(
            verb_of(Method::DELETE, "/api/v1/namespaces/a/pods/p"),
            "DELETE"
        );
    }
}
