//! Watchers on kubecache and the reference watch on the API server.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use kubecache_wire::{WatchEventType, parse_watch_line};
use tokio::task::JoinHandle;

use super::RunContext;
use super::filter::WatchFilter;
use super::targets::{ObjectFacts, Targets};

/// What one watcher received.
pub struct WatchResult {
    /// Its filter.
    pub filter: WatchFilter,
    /// resourceVersion and arrival time of every event, in arrival order.
    pub events: Vec<(u64, Instant)>,
    /// Bytes received.
    pub bytes: u64,
    /// The protocol its watch was first answered in.
    pub version: Option<http::Version>,
    /// Times it lost its connection (or could not open it) and tried the
    /// next server.
    pub failovers: u64,
    /// Times the server ended its watch (its `timeoutSeconds`, or the
    /// server's own 30–60 minutes) and it watched again from there.
    pub resumes: u64,
    /// Times opening its watch again was answered 429 and tried again
    /// after the `Retry-After`, as client-go does.
    pub throttled: u64,
    /// Why it failed, if it did (an ERROR event, a closed stream, garbage).
    pub failure: Option<String>,
}

impl WatchResult {
    /// A watcher's result before its first event.
    pub fn new(filter: WatchFilter, version: Option<http::Version>) -> Self {
        WatchResult {
            filter,
            events: Vec::new(),
            bytes: 0,
            version,
            failovers: 0,
            resumes: 0,
            throttled: 0,
            failure: None,
        }
    }
}

/// A running watcher on kubecache.
pub struct Watcher {
    task: JoinHandle<WatchResult>,
}

impl Watcher {
    /// Failed attempts in a row (no event between them: failovers, 429s,
    /// watches ended within a second) before a watcher gives up.
    pub const MAX_FAILURES: u32 = 20;

    /// Opens a watch with `filter` from `rv` on the `server`th of the
    /// scenario's servers; returns once the response head arrived.
    ///
    /// A watch the server ends (a clean end of the stream: its timeout)
    /// is opened again on the same server from the last resourceVersion
    /// received (an event's or a bookmark's), as a reflector does; one
    /// whose opening again is answered 429 is tried again after its
    /// `Retry-After`. With several servers, a
    /// lost connection (the stream breaks, or the server cannot be reached
    /// or refuses the watch) moves the watch to the next server, from the
    /// last resourceVersion received, as a client behind a Service
    /// reconnects; with one, it is a failure. An `ERROR` event is a failure
    /// either way (a client would relist).
    pub async fn start(
        ctx: &Arc<RunContext>,
        client: reqwest::Client,
        filter: WatchFilter,
        rv: u64,
        server: usize,
    ) -> anyhow::Result<Self> {
        let servers: Vec<String> = ctx.scenario.servers().into_iter().map(Into::into).collect();
        let fails_over = servers.len() > 1;
        let (path, selects) = (ctx.scenario.path.clone(), filter.clone());
        let timeout = match ctx.scenario.watch_timeout_secs {
            0 => String::new(),
            secs => format!("&timeoutSeconds={secs}"),
        };
        let url = move |server: usize, rv| {
            let base = &servers[server % servers.len()];
            format!("{base}{}{timeout}", selects.watch_path(&path, rv))
        };
        let response = open(&client, &url(server, rv), ctx.scenario.token.as_deref()).await?;
        let version = Some(response.version());
        let ctx = ctx.clone();
        let task = tokio::spawn(async move {
            let mut result = WatchResult::new(filter, version);
            let (mut response, mut server, mut failures) = (Some(response), server, 0u32);
            // The last resourceVersion received: an event's or a bookmark's.
            let mut last = rv;
            loop {
                let since = Instant::now();
                let opened = match response.take() {
                    Some(response) => Ok(response),
                    None => {
                        let token = ctx.scenario.token.as_deref();
                        let opened = open(&client, &url(server, last), token).await;
                        opened.map_err(|e| if e.is::<Throttled>() { e } else { lost(e) })
                    }
                };
                let outcome = match opened {
                    Ok(response) => {
                        read_lines(&ctx, response, |line| {
                            result.bytes += line.len() as u64 + 1;
                            let (kind, rv) = line_facts(line)?;
                            last = rv;
                            if kind == "BOOKMARK" {
                                return Ok(());
                            }
                            if kind == "ERROR" {
                                bail!("ERROR event: {}", String::from_utf8_lossy(line));
                            }
                            ctx.deliveries.fetch_add(1, Ordering::Relaxed);
                            result.events.push((rv, Instant::now()));
                            failures = 0;
                            Ok(())
                        })
                        .await
                    }
                    Err(e) => Err(e),
                };
                match outcome {
                    Ok(()) => break,
                    // A watch that ends at once, again and again, fails.
                    Err(e) if e.is::<Ended>() && failures + 1 < Self::MAX_FAILURES => {
                        if since.elapsed() < Duration::from_secs(1) {
                            failures += 1;
                        }
                        result.resumes += 1;
                    }
                    Err(e) if e.is::<Throttled>() && failures + 1 < Self::MAX_FAILURES => {
                        failures += 1;
                        result.throttled += 1;
                        if let Some(Throttled(wait)) = e.downcast_ref::<Throttled>() {
                            tokio::time::sleep(*wait).await;
                        }
                    }
                    Err(e) if fails_over && e.is::<Lost>() && failures + 1 < Self::MAX_FAILURES => {
                        failures += 1;
                        result.failovers += 1;
                        server += 1;
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Err(e) => {
                        result.failure = Some(format!("{e:#}"));
                        break;
                    }
                }
            }
            result
        });
        Ok(Watcher { task })
    }

    /// Waits for the watcher to stop (after the run's stop flag).
    pub async fn finish(self) -> WatchResult {
        match self.task.await {
            Ok(result) => result,
            Err(e) => WatchResult {
                failure: Some(format!("watcher task failed: {e}")),
                ..WatchResult::new(WatchFilter::All, None)
            },
        }
    }
}

/// A watch answered 429 Too Many Requests: try again after this long
/// (its `Retry-After`, 1 s without one).
#[derive(Debug, thiserror::Error)]
#[error("429 Too Many Requests: retry after {0:?}")]
struct Throttled(Duration);

/// The server ended a watch stream cleanly before the run was over (its
/// timeout): a client watches again from where it was.
#[derive(Debug, thiserror::Error)]
#[error("the watch stream ended before the run did")]
struct Ended;

/// A watch connection lost (not an event): the stream broke, or the
/// server could not be reached or refused the watch.
#[derive(Debug, thiserror::Error)]
#[error("connection lost: {0:#}")]
struct Lost(anyhow::Error);

fn lost(e: anyhow::Error) -> anyhow::Error {
    Lost(e).into()
}

/// One event of the API server's own history, with the object's state
/// before and after.
pub struct ReferenceEvent {
    /// Its resourceVersion.
    pub rv: u64,
    /// The object before (`None`: it did not exist).
    pub before: Option<Arc<ObjectFacts>>,
    /// The object after (for a delete: its last state).
    pub after: Arc<ObjectFacts>,
}

impl ReferenceEvent {
    /// Whether a watcher with `filter` must receive this event: the object
    /// matches after the change, or did before it.
    pub fn selected_by(&self, filter: &WatchFilter) -> bool {
        filter.matches(&self.after) || self.before.as_deref().is_some_and(|b| filter.matches(b))
    }
}

/// The reference watch: every event of the resource, straight from the API
/// server. When the API server cuts it or fails it (an upstream fault), it
/// resumes from the last event it got, as a reflector would; it fails only
/// after [`Reference::MAX_FAILURES`] attempts in a row without an event.
pub struct Reference {
    task: JoinHandle<anyhow::Result<(Vec<ReferenceEvent>, u64)>>,
    last: Arc<std::sync::atomic::AtomicU64>,
}

impl Reference {
    /// Failed attempts in a row (no event between them) before the
    /// reference gives up.
    pub const MAX_FAILURES: u32 = 20;

    /// Watches the API server from the targets' resourceVersion. Its first
    /// opening is tried as its resumptions are: a fault armed on the API
    /// server answers whichever watch comes first.
    pub fn start(ctx: &Arc<RunContext>, targets: &Targets) -> Self {
        let (upstream, path) = (ctx.scenario.upstream.clone(), ctx.scenario.path.clone());
        let url = move |rv| format!("{upstream}{}", WatchFilter::All.watch_path(&path, rv));
        let mut state: std::collections::HashMap<String, Arc<ObjectFacts>> = targets
            .objects
            .iter()
            .map(|o| (format!("{}/{}", o.namespace, o.name), Arc::new(o.clone())))
            .collect();
        let last = Arc::new(std::sync::atomic::AtomicU64::new(targets.resource_version));
        let ctx = ctx.clone();
        let seen = last.clone();
        let task = tokio::spawn(async move {
            let mut events = Vec::new();
            let (mut resumes, mut failures) = (0u64, 0u32);
            loop {
                let rv = seen.load(Ordering::Acquire);
                let token = ctx.scenario.upstream_token.as_deref();
                let opened = open(&ctx.client, &url(rv), token).await;
                let outcome = match opened {
                    Ok(response) => {
                        read_lines(&ctx, response, |line| {
                            let event = parse_watch_line(line).context("reference watch")?;
                            match event.event_type {
                                WatchEventType::Bookmark => return Ok(()),
                                WatchEventType::Error => {
                                    bail!(
                                        "reference watch ERROR: {}",
                                        String::from_utf8_lossy(line)
                                    )
                                }
                                _ => {}
                            }
                            let rv = event.resource_version()?;
                            let after = Arc::new(ObjectFacts::parse(event.object)?);
                            let key = format!("{}/{}", after.namespace, after.name);
                            let before = if event.event_type == WatchEventType::Deleted {
                                state.remove(&key)
                            } else {
                                state.insert(key, after.clone())
                            };
                            events.push(ReferenceEvent { rv, before, after });
                            seen.store(rv, Ordering::Release);
                            failures = 0;
                            Ok(())
                        })
                        .await
                    }
                    Err(e) => Err(e),
                };
                match outcome {
                    Ok(()) => return Ok((events, resumes)),
                    Err(e) if failures + 1 >= Self::MAX_FAILURES => {
                        return Err(
                            e.context(format!("reference watch: {failures} resumes failed"))
                        );
                    }
                    Err(_) => {
                        failures += 1;
                        resumes += 1;
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
        Reference { task, last }
    }

    /// The resourceVersion of the last event received so far.
    pub fn last(&self) -> u64 {
        self.last.load(Ordering::Acquire)
    }

    /// Waits for the reference to stop (after the run's stop flag): its
    /// events, and how many times it resumed.
    pub async fn finish(self) -> anyhow::Result<(Vec<ReferenceEvent>, u64)> {
        self.task.await.context("reference watch task")?
    }
}

/// Sends a watch request; fails unless it is answered 200 (a 429 with a
/// [`Throttled`] cause).
pub(super) async fn open(
    client: &reqwest::Client,
    url: &str,
    token: Option<&str>,
) -> anyhow::Result<reqwest::Response> {
    let mut request = client.get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.with_context(|| format!("GET {url}"))?;
    if response.status() == reqwest::StatusCode::TOO_MANY_REQUESTS {
        let retry_after = (response.headers().get(reqwest::header::RETRY_AFTER))
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .unwrap_or(1);
        let body = response.text().await.unwrap_or_default();
        let throttled = Throttled(Duration::from_secs(retry_after));
        return Err(anyhow::Error::new(throttled).context(format!("GET {url}: {body}")));
    }
    if !response.status().is_success() {
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        bail!("GET {url}: {status}: {body}");
    }
    Ok(response)
}

/// Feeds every line of a watch stream to `each` until the run stops;
/// a stream that ends before is an [`Ended`] error, one that breaks a
/// [`Lost`] one.
async fn read_lines(
    ctx: &RunContext,
    response: reqwest::Response,
    mut each: impl FnMut(&[u8]) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut stream = response.bytes_stream();
    let mut buf: Vec<u8> = Vec::new();
    loop {
        if ctx.stop.load(Ordering::Acquire) {
            return Ok(());
        }
        let chunk = match tokio::time::timeout(Duration::from_millis(100), stream.next()).await {
            Err(_) => continue,
            Ok(None) => return Err(Ended.into()),
            Ok(Some(chunk)) => chunk.context("reading the watch stream").map_err(lost)?,
        };
        buf.extend_from_slice(&chunk);
        let mut start = 0;
        while let Some(at) = buf[start..].iter().position(|b| *b == b'\n') {
            each(&buf[start..start + at])?;
            start += at + 1;
        }
        buf.drain(..start);
    }
}

/// The type and resourceVersion of a watch line, found without parsing
/// it: `{"type":"…","object":{…"metadata":{…"resourceVersion":"N"`. The
/// first `"resourceVersion":"` is the object's own (metadata comes before
/// spec and status; JSON inside strings has its quotes escaped).
fn line_facts(line: &[u8]) -> anyhow::Result<(&str, u64)> {
    const TYPE: &[u8] = br#"{"type":""#;
    const RV: &[u8] = br#""resourceVersion":""#;
    let rest = line
        .strip_prefix(TYPE)
        .with_context(|| format!("not a watch line: {}", String::from_utf8_lossy(line)))?;
    let end = rest
        .iter()
        .position(|b| *b == b'"')
        .context("unterminated type")?;
    let kind = std::str::from_utf8(&rest[..end])?;
    let at = find(rest, RV).context("an event without resourceVersion")? + RV.len();
    let len = rest[at..]
        .iter()
        .position(|b| *b == b'"')
        .context("unterminated resourceVersion")?;
    let rv = std::str::from_utf8(&rest[at..at + len])?.parse()?;
    Ok((kind, rv))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_lines_type_and_resource_version_are_read_without_parsing() {
        let line = br#"{"type":"MODIFIED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"42","annotations":{"x":"{\"resourceVersion\":\"1\"}"}}}}"#;
        assert_eq!(line_facts(line).unwrap(), ("MODIFIED", 42));
        assert!(line_facts(b"garbage").is_err());
    }

    #[test]
    fn namespace_watchers_use_the_namespaced_path() {
        let filter = WatchFilter::Namespace("team-a".into());
        assert_eq!(
            filter.watch_path("/api/v1/pods", 7),
            "/api/v1/namespaces/team-a/pods?watch=1&resourceVersion=7&allowWatchBookmarks=true"
        );
        let node = WatchFilter::Node("node-1".into()).watch_path("/api/v1/pods", 7);
        assert!(
            node.ends_with("&fieldSelector=spec.nodeName%3Dnode-1"),
            "{node}"
        );
    }
}
