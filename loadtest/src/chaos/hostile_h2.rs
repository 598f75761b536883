//! The HTTP/2 hostile kinds: clients of kubecache's HTTP/2 (over TLS,
//! ALPN `h2`, as it serves HTTP/2) attacking it as HTTP/2's known attacks
//! do, frame by frame ([`crate::raw_h2`]), or as a client whose streams
//! never read (the h2 crate, their windows left closed). Each tallies how
//! kubecache ended what it did: GOAWAY or RST_STREAM with their error
//! codes, the connection closed, or that kubecache stopped reading it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use serde::Serialize;

use super::attack::Attack;
use super::victim::{H2Conn, Tally, Victim, failed};
use crate::raw_h2::{
    CANCEL, CONTINUATION, END_STREAM, Frame, GOAWAY, Get, HEADERS, PING, RST_STREAM, SETTINGS,
    SETTINGS_MAX_CONCURRENT_STREAMS, error_name, frame, status,
};

/// How many hostile HTTP/2 clients of each kind the hostile phase runs.
#[derive(Debug, Clone, clap::Args, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct H2Hostile {
    /// HTTP/2 connections opening streams (authorized lists) and resetting
    /// each as soon as sent, in batches (HEADERS then RST_STREAM, as
    /// CVE-2023-44487's clients do), until kubecache ends the connection;
    /// then again.
    #[arg(long, default_value_t = 2)]
    pub h2_rapid_resets: usize,
    /// HTTP/2 connections sending a request's HEADERS without END_HEADERS,
    /// then CONTINUATION frames of 1 KiB headers without end
    /// (CVE-2024-27316).
    #[arg(long, default_value_t = 2)]
    pub h2_continuation_floods: usize,
    /// HTTP/2 connections sending SETTINGS frames without reading
    /// kubecache's acknowledgements.
    #[arg(long, default_value_t = 2)]
    pub h2_settings_floods: usize,
    /// HTTP/2 connections sending PING frames without reading kubecache's
    /// acknowledgements.
    #[arg(long, default_value_t = 2)]
    pub h2_ping_floods: usize,
    /// HTTP/2 connections sending SETTINGS frames, 1,024 to a batch, and
    /// reading (and discarding) kubecache's acknowledgements between
    /// batches, until kubecache ends the connection; then again (issue 43).
    #[arg(long, default_value_t = 1)]
    pub h2_settings_drainers: usize,
    /// The same with PING frames.
    #[arg(long, default_value_t = 1)]
    pub h2_ping_drainers: usize,
    /// HTTP/2 connections each holding three watches of everything from
    /// resourceVersion 0 in a 64 KiB stream window never opened again,
    /// beside a fourth, from the current resourceVersion, that it reads:
    /// that one must keep getting events.
    #[arg(long, default_value_t = 2)]
    pub h2_unread_streams: usize,
    /// HTTP/2 connections opening watches up to kubecache's
    /// SETTINGS_MAX_CONCURRENT_STREAMS and ten beyond, held `--hold-secs`.
    #[arg(long, default_value_t = 1)]
    pub h2_many_streams: usize,
}

/// How long a write may wait before kubecache is taken to have stopped
/// reading the connection.
const STOPPED_READING: Duration = Duration::from_secs(5);

/// How long a flood lasts at most while kubecache reads it.
const FLOOD_TIME: Duration = Duration::from_secs(30);

/// How long a flood's connection is watched once kubecache stopped
/// reading it: beyond kubecache's header-read timeout (32 s, a connection
/// that never sent a request) and its keep-alive ping's (45 s).
const FLOOD_WATCH: Duration = Duration::from_secs(60);

/// Rapid reset's batches: requests, each reset at once.
const RESETS_PER_BATCH: u32 = 50;

/// Batches of rapid resets or CONTINUATIONs before giving up on kubecache
/// ending the connection.
const MAX_BATCHES: usize = 2000;

/// Watches a connection of the unread kind leaves unread.
const UNREAD_PER_CONNECTION: usize = 3;

/// The unread kind's stream window.
const UNREAD_WINDOW: u32 = 64 * 1024;

/// How long the unread kind waits for the answer to a request: a large
/// initial send waits for a seat.
const OPEN_LIMIT: Duration = Duration::from_secs(30);

/// How long the unread kind waits for kubecache to end its unread watches.
const UNREAD_LIMIT: Duration = Duration::from_secs(90);

/// Streams the many-streams kind opens beyond kubecache's SETTINGS.
const BEYOND: u32 = 10;

/// Starts the HTTP/2 kinds of `h2`; with kubecache on plain HTTP, where it
/// serves no HTTP/2, notes that they could not run.
pub(super) fn spawn(attack: &mut Attack, h2: &H2Hostile, victim: &Arc<Victim>, hold: Duration) {
    let mut start = Starter { attack, victim };
    start.kind("h2 rapid reset", h2.h2_rapid_resets, |v, t, _| {
        rapid_reset(v, t)
    });
    start.kind(
        "h2 CONTINUATION flood",
        h2.h2_continuation_floods,
        |v, t, _| continuation_flood(v, t),
    );
    start.kind("h2 SETTINGS flood", h2.h2_settings_floods, |v, t, _| {
        flood(v, t, SETTINGS)
    });
    start.kind("h2 PING flood", h2.h2_ping_floods, |v, t, _| {
        flood(v, t, PING)
    });
    start.kind("h2 SETTINGS drainer", h2.h2_settings_drainers, |v, t, _| {
        drainer(v, t, SETTINGS)
    });
    start.kind("h2 PING drainer", h2.h2_ping_drainers, |v, t, _| {
        drainer(v, t, PING)
    });
    start.kind("h2 unread streams", h2.h2_unread_streams, |v, t, _| {
        unread_streams(v, t)
    });
    start.kind("h2 many streams", h2.h2_many_streams, move |v, t, _| {
        many_streams(v, t, hold)
    });
}

/// Starts kinds, or notes why they cannot run.
struct Starter<'a> {
    attack: &'a mut Attack,
    victim: &'a Arc<Victim>,
}

impl Starter<'_> {
    fn kind<F, Fut>(&mut self, kind: &'static str, clients: usize, client: F)
    where
        F: Fn(Arc<Victim>, Arc<Tally>, u64) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        if self.victim.serves_h2() {
            self.attack.spawn(kind, clients, self.victim, client);
        } else {
            let why = "not run: kubecache serves HTTP/2 over TLS only (an https URL)";
            self.attack.not_run(kind, clients, why);
        }
    }
}

/// A request of the kind's for `path`, authorized.
fn get<'a>(victim: &'a Victim, path: &'a str) -> Get<'a> {
    Get {
        path,
        authority: &victim.host,
        token: victim.token.as_deref(),
    }
}

/// A raw HTTP/2 connection once kubecache's SETTINGS have arrived: them
/// too. `None` (noted, after a pause) when it could not be had.
async fn started(victim: &Victim, tally: &Tally) -> Option<(H2Conn, Frame)> {
    let mut raw = victim.h2(tally).await?;
    let outcome = match tokio::time::timeout(STOPPED_READING, raw.until(SETTINGS, 0)).await {
        Ok(Some(settings)) => return Some((raw, settings)),
        Ok(None) => "closed before its SETTINGS",
        Err(_) => "no SETTINGS within 5 s",
    };
    tally.note(outcome);
    tokio::time::sleep(Duration::from_secs(1)).await;
    None
}

/// How a GOAWAY frame ended the connection.
fn goaway(frame: &Frame) -> String {
    format!(
        "GOAWAY {}",
        frame.error_code().map_or("?".into(), error_name)
    )
}

/// How the connection ends, read to its end (within 5 s): by GOAWAY, or
/// closed without one.
async fn end(raw: &mut H2Conn) -> String {
    match tokio::time::timeout(STOPPED_READING, raw.until(GOAWAY, 0)).await {
        Ok(Some(frame)) => goaway(&frame),
        Ok(None) => "closed by kubecache without GOAWAY".into(),
        Err(_) => "still open, 5 s after the last write failed".into(),
    }
}

/// Sends what `batch` appends, batch after batch, taking in what kubecache
/// answers between them, until it ends the connection or stops reading
/// it: how it did.
async fn hammer(raw: &mut H2Conn, mut batch: impl FnMut(&mut BytesMut)) -> String {
    for _ in 0..MAX_BATCHES {
        let mut frames = BytesMut::new();
        batch(&mut frames);
        match tokio::time::timeout(STOPPED_READING, raw.send(&frames)).await {
            Err(_) => return "kubecache stopped reading".into(),
            Ok(Err(_)) => return end(raw).await,
            Ok(Ok(())) => {}
        }
        let (arrived, ended) = raw.arrived();
        if let Some(frame) = arrived.iter().find(|f| f.kind == GOAWAY) {
            return goaway(frame);
        }
        if ended {
            return "closed by kubecache without GOAWAY".into();
        }
    }
    format!("not stopped after {MAX_BATCHES} batches")
}

/// Opens authorized lists and resets each at once, until kubecache ends
/// the connection; then again.
async fn rapid_reset(victim: Arc<Victim>, tally: Arc<Tally>) {
    let path = format!("{}?limit=1", victim.path);
    let get = get(&victim, &path);
    loop {
        let Some((mut raw, _)) = started(&victim, &tally).await else {
            continue;
        };
        let mut stream = 1u32;
        let outcome = hammer(&mut raw, |batch| {
            for _ in 0..RESETS_PER_BATCH {
                get.frame(batch, stream);
                frame(batch, RST_STREAM, 0, stream, &CANCEL.to_be_bytes());
                stream += 2;
            }
        })
        .await;
        tally.note(outcome);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Sends an authorized request's HEADERS without END_HEADERS, then
/// CONTINUATION frames of 1 KiB headers, until kubecache ends the
/// connection; then again.
async fn continuation_flood(victim: Arc<Victim>, tally: Arc<Tally>) {
    let block = get(&victim, &victim.path).block();
    let mut header = Vec::new();
    crate::raw_h2::literal(&mut header, "x-chaos", &"a".repeat(1024));
    loop {
        let Some((mut raw, _)) = started(&victim, &tally).await else {
            continue;
        };
        let mut first = Some(&block);
        let outcome = hammer(&mut raw, |batch| {
            if let Some(block) = first.take() {
                frame(batch, HEADERS, END_STREAM, 1, block);
            }
            for _ in 0..16 {
                frame(batch, CONTINUATION, 0, 1, &header);
            }
        })
        .await;
        tally.note(outcome);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Sends frames of `kind` (SETTINGS or PING) without reading kubecache's
/// acknowledgements until it stops reading them (or [`FLOOD_TIME`]
/// passes), then watches what it does with the connection.
async fn flood(victim: Arc<Victim>, tally: Arc<Tally>, kind: u8) {
    loop {
        let Some(mut raw) = victim.h2(&tally).await else {
            continue;
        };
        tally.note("opened");
        let started = Instant::now();
        let mut sent = 0u64;
        let outcome = loop {
            let mut batch = BytesMut::new();
            for _ in 0..1024 {
                let ping = sent.to_be_bytes();
                let payload: &[u8] = if kind == PING { &ping } else { &[] };
                frame(&mut batch, kind, 0, 0, payload);
                sent += 1;
            }
            match tokio::time::timeout(STOPPED_READING, raw.send(&batch)).await {
                Err(_) => break None,
                Ok(Err(_)) => break Some(end(&mut raw).await),
                Ok(Ok(())) if started.elapsed() > FLOOD_TIME => {
                    break Some(format!("still read after {} s", FLOOD_TIME.as_secs()));
                }
                Ok(Ok(())) => {}
            }
        };
        let outcome = match outcome {
            Some(outcome) => outcome,
            None => {
                tally.note("kubecache stopped reading");
                tokio::time::sleep(FLOOD_WATCH).await;
                // Read what it sent: the acknowledgements, then the end.
                match tokio::time::timeout(STOPPED_READING, raw.until(GOAWAY, 0)).await {
                    Ok(Some(frame)) => format!("then {} within 60 s", goaway(&frame)),
                    Ok(None) => "then closed without GOAWAY within 60 s".into(),
                    Err(_) => "then still open after 60 s".into(),
                }
            }
        };
        tally.note(outcome);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Sends frames of `kind` (SETTINGS or PING) in batches, taking in
/// kubecache's acknowledgements between them, until it ends the
/// connection; then again.
async fn drainer(victim: Arc<Victim>, tally: Arc<Tally>, kind: u8) {
    loop {
        let Some((mut raw, _)) = started(&victim, &tally).await else {
            continue;
        };
        let mut sent = 0u64;
        let outcome = hammer(&mut raw, |batch| {
            for _ in 0..1024 {
                let ping = sent.to_be_bytes();
                let payload: &[u8] = if kind == PING { &ping } else { &[] };
                frame(batch, kind, 0, 0, payload);
                sent += 1;
            }
        })
        .await;
        tally.note(outcome);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// An authorized GET on an HTTP/2 connection of the h2 crate: its body, or
/// why it was not answered 200 within [`OPEN_LIMIT`].
async fn h2_get(
    sender: &h2::client::SendRequest<Bytes>,
    victim: &Victim,
    path: &str,
) -> Result<h2::RecvStream, String> {
    tokio::time::timeout(OPEN_LIMIT, send_h2_get(sender, victim, path))
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {} s", OPEN_LIMIT.as_secs())))
}

async fn send_h2_get(
    sender: &h2::client::SendRequest<Bytes>,
    victim: &Victim,
    path: &str,
) -> Result<h2::RecvStream, String> {
    let mut request = http::Request::get(format!("https://{}{path}", victim.host));
    if let Some(token) = &victim.token {
        request = request.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let request = request.body(()).map_err(|e| e.to_string())?;
    let mut sender = sender.clone().ready().await.map_err(|e| h2_error(&e))?;
    let (response, _) = sender
        .send_request(request, true)
        .map_err(|e| h2_error(&e))?;
    let response = response.await.map_err(|e| h2_error(&e))?;
    match response.status().as_u16() {
        200 => Ok(response.into_body()),
        status => Err(format!("answered {status}")),
    }
}

/// What an h2 crate error was, briefly.
fn h2_error(e: &h2::Error) -> String {
    let reason = e.reason().map_or("?".into(), |r| error_name(r.into()));
    if e.is_go_away() {
        format!("GOAWAY {reason}")
    } else if e.is_reset() {
        format!("reset {reason}")
    } else if e.is_io() {
        "connection lost".into()
    } else {
        format!("error {reason}")
    }
}

/// Holds [`UNREAD_PER_CONNECTION`] watches of everything from
/// resourceVersion 0 unread (their small windows never opened again)
/// beside one read, on one connection, until kubecache ends the unread
/// ones: how it ended them, and how the read one fared meanwhile. The read
/// one watches from the collection's resourceVersion now, so that it has
/// no initial events to wait for: it tells the connection's streams apart,
/// not kubecache's seats for large initial sends, which the unread ones
/// hold.
async fn unread_streams(victim: Arc<Victim>, tally: Arc<Tally>) {
    let everything = format!("{}?watch=1&resourceVersion=0", victim.path);
    loop {
        let Some(tls) = victim.h2_tls(&tally).await else {
            continue;
        };
        let mut builder = h2::client::Builder::new();
        builder
            .initial_window_size(UNREAD_WINDOW)
            .initial_connection_window_size(1 << 30);
        let handshake = builder.handshake::<_, Bytes>(tls);
        let (sender, connection) = match tokio::time::timeout(STOPPED_READING, handshake).await {
            Ok(Ok(handshaken)) => handshaken,
            Ok(Err(e)) => {
                tally.note(format!("handshake: {}", h2_error(&e)));
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            Err(_) => {
                tally.note("no HTTP/2 handshake within 5 s");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let watching = async {
            let mut unread = Vec::new();
            for _ in 0..UNREAD_PER_CONNECTION {
                match h2_get(&sender, &victim, &everything).await {
                    Ok(body) => {
                        tally.note("unread watch: opened, never read");
                        unread.push(body);
                    }
                    Err(e) => tally.note(format!("unread watch not opened: {e}")),
                }
            }
            if unread.is_empty() {
                return;
            }
            let mut read = match read_watch(&sender, &victim).await {
                Ok(body) => Some(Reader::new(body)),
                Err(e) => {
                    tally.note(format!("read watch not opened: {e}"));
                    None
                }
            };
            let ends = futures::future::join_all(unread.into_iter().map(unread_end));
            let ends = tokio::time::timeout(UNREAD_LIMIT, ends);
            let ended = match &mut read {
                Some(reader) => tokio::select! {
                    ends = ends => ends.ok(),
                    ended = reader.read() => return tally.note(format!(
                        "read watch beside them: {ended} while they were held"
                    )),
                },
                None => ends.await.ok(),
            };
            match ended {
                Some(ends) => ends
                    .into_iter()
                    .for_each(|end| tally.note(format!("unread watch: {end}"))),
                None => tally.note(format!(
                    "unread watches: still open after {} s",
                    UNREAD_LIMIT.as_secs()
                )),
            }
            if let Some(read) = read {
                tally.note(format!("read watch beside them: {}", read.verdict()));
            }
        };
        tokio::select! {
            () = watching => {}
            ended = connection => tally.note(match ended {
                Ok(()) => "connection ended by kubecache".to_string(),
                Err(e) => format!("connection: {}", h2_error(&e)),
            }),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// A watch of everything from the collection's resourceVersion now (a
/// one-object list's).
async fn read_watch(
    sender: &h2::client::SendRequest<Bytes>,
    victim: &Victim,
) -> Result<h2::RecvStream, String> {
    let list = format!("{}?limit=1&resourceVersion=0", victim.path);
    let mut body = h2_get(sender, victim, &list).await?;
    let mut bytes = Vec::new();
    while let Some(data) = body.data().await {
        let data = data.map_err(|e| format!("list: {}", h2_error(&e)))?;
        let _ = body.flow_control().release_capacity(data.len());
        bytes.extend_from_slice(&data);
    }
    let list: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("list: {e}"))?;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .ok_or("a list without resourceVersion")?;
    h2_get(
        sender,
        victim,
        &format!("{}?watch=1&resourceVersion={rv}", victim.path),
    )
    .await
}

/// How an unread watch ended: what is already in its window is taken,
/// none of it released.
async fn unread_end(mut body: h2::RecvStream) -> String {
    loop {
        match body.data().await {
            Some(Ok(_)) => {}
            Some(Err(e)) => return h2_error(&e),
            None => return "ended".into(),
        }
    }
}

/// The read watch beside unread ones: its events, and the longest wait
/// between two of them.
struct Reader {
    body: h2::RecvStream,
    events: u64,
    last: Option<Instant>,
    longest: Duration,
}

impl Reader {
    fn new(body: h2::RecvStream) -> Self {
        Reader {
            body,
            events: 0,
            last: None,
            longest: Duration::ZERO,
        }
    }

    /// Reads (releasing what it read) until the watch ends: how it did.
    async fn read(&mut self) -> String {
        loop {
            match self.body.data().await {
                Some(Ok(data)) => {
                    let _ = self.body.flow_control().release_capacity(data.len());
                    let lines = data.iter().filter(|b| **b == b'\n').count() as u64;
                    if lines > 0 {
                        let now = Instant::now();
                        if let Some(last) = self.last {
                            self.longest = self.longest.max(now - last);
                        }
                        self.last = Some(now);
                        self.events += lines;
                    }
                }
                Some(Err(e)) => return h2_error(&e),
                None => return "ended".into(),
            }
        }
    }

    /// Whether it kept getting events, by the longest wait for one.
    fn verdict(&self) -> String {
        let longest = match self.longest.as_secs_f64() {
            _ if self.events == 0 => return "no event".into(),
            s if s < 1.0 => "under 1 s",
            s if s < 5.0 => "1-5 s",
            _ => "over 5 s",
        };
        format!("events kept coming, the longest wait {longest}")
    }
}

/// Opens watches that nothing matches (held, silent) up to kubecache's
/// SETTINGS_MAX_CONCURRENT_STREAMS and [`BEYOND`] more at once: what each
/// got, within the bound or beyond it. Holds them `hold`; then again.
async fn many_streams(victim: Arc<Victim>, tally: Arc<Tally>, hold: Duration) {
    let path = format!(
        "{}?watch=1&labelSelector=kubecache-chaos%3Dnone",
        victim.path
    );
    let get = get(&victim, &path);
    loop {
        let Some((mut raw, settings)) = started(&victim, &tally).await else {
            continue;
        };
        // Unbounded, it is told nothing: what Go's client then assumes.
        let told = settings
            .setting(SETTINGS_MAX_CONCURRENT_STREAMS)
            .unwrap_or(100)
            .min(1000);
        let mut batch = BytesMut::new();
        let ids: Vec<u32> = (0..told + BEYOND).map(|n| 2 * n + 1).collect();
        for &id in &ids {
            get.frame(&mut batch, id);
        }
        if let Err(e) = raw.send(&batch).await {
            tally.note(failed("send", &e));
            continue;
        }
        let mut fates = BTreeMap::new();
        let mut ended = None;
        let _ = tokio::time::timeout(STOPPED_READING * 2, async {
            while fates.len() < ids.len() {
                let Some(frame) = raw.next().await else {
                    ended = Some("closed by kubecache".to_string());
                    break;
                };
                let fate = match frame.kind {
                    HEADERS => status(&frame.payload)
                        .map_or("answered".into(), |code| format!("answered {code}")),
                    RST_STREAM => format!(
                        "reset {}",
                        frame.error_code().map_or("?".into(), error_name)
                    ),
                    GOAWAY => {
                        ended = Some(goaway(&frame));
                        break;
                    }
                    _ => continue,
                };
                fates.entry(frame.stream).or_insert(fate);
            }
        })
        .await;
        for (n, id) in ids.iter().enumerate() {
            let place = if (n as u32) < told {
                "within"
            } else {
                "beyond"
            };
            let fate = fates
                .get(id)
                .map_or("no answer within 10 s", String::as_str);
            tally.note(format!("{place} the {told} streams told: {fate}"));
        }
        if let Some(ended) = ended {
            tally.note(ended);
        }
        tokio::time::sleep(hold).await;
    }
}
