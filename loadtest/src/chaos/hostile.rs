//! The hostile clients: each a small task that misuses kubecache the way a
//! buggy or malicious client does, tallying what happened to it. They run
//! until the attack is stopped (their connections are then dropped).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::Chaos;
use super::attack::Attack;
use super::hostile_h2::{self, H2Hostile};
use super::victim::{Tally, Victim, authorized, failed, fetch, send};
use crate::tls::ClientTls;

/// What kubectl asks for to get a Table.
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

/// How many hostile clients of each kind the hostile phase runs.
#[derive(Debug, Clone, clap::Args, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hostile {
    /// Watches of every object from resourceVersion 0 on sockets with a
    /// 4 KiB receive buffer, never read; each dropped and reopened every
    /// `--hold-secs`.
    #[arg(long, default_value_t = 20)]
    pub non_readers: usize,
    /// Watches of every object as a Table (`kubectl get -w` from
    /// resourceVersion 0) on sockets with a 4 KiB receive buffer, never
    /// read; each dropped and reopened every `--hold-secs` (issue 43,
    /// finding 1).
    #[arg(long, default_value_t = 20)]
    pub table_non_readers: usize,
    /// Connections sending a request head a byte every 2 s, never finishing
    /// it (reconnecting when cut).
    #[arg(long, default_value_t = 50)]
    pub slowloris: usize,
    /// Clients listing and watching with the costliest label selector
    /// kubecache accepts: `--selector-requirements` `notin` requirements
    /// whose value sets fill a request target of about 56 KiB (hyper
    /// refuses targets beyond 64 KiB before any selector is read).
    #[arg(long, default_value_t = 2)]
    pub giant_selectors: usize,
    /// Label requirements of a giant selector (kubecache's default limit).
    #[arg(long, default_value_t = 100)]
    pub selector_requirements: usize,
    /// Clients listing the whole collection as a Table (`kubectl get -A`).
    #[arg(long, default_value_t = 1)]
    pub table_lists: usize,
    /// Clients starting `limit=1` lists they never continue, with a fresh
    /// token every other time, and replaying old continue tokens.
    #[arg(long, default_value_t = 4)]
    pub page_churners: usize,
    /// Clients opening watches and closing them as soon as answered.
    #[arg(long, default_value_t = 4)]
    pub reconnect_storms: usize,
    /// Connections that send one request, then idle (reconnecting when cut).
    #[arg(long, default_value_t = 200)]
    pub idle_connections: usize,
    /// Requests per second of each looping hostile client (giant
    /// selectors, tables, page churn, reconnect storms).
    #[arg(long, default_value_t = 20.0)]
    pub hostile_rate: f64,
    /// Seconds a non-reader holds its watch before reopening it.
    #[arg(long, default_value_t = 20)]
    pub hold_secs: u64,
    /// Connections posting a chunked ConfigMap body they never finish (a
    /// 64 KiB chunk, then silence), anonymously. Like the other holding
    /// kinds, each reconnects a second after kubecache answers or closes.
    #[arg(long, default_value_t = 50)]
    pub body_holds: usize,
    /// Connections posting with `Expect: 100-continue` and a 1 MiB
    /// `Content-Length`, then sending nothing.
    #[arg(long, default_value_t = 50)]
    pub expect_holds: usize,
    /// Connections sending half a TLS ClientHello, then silence, on plain
    /// TCP (against a plain-HTTP kubecache: half a request it cannot
    /// parse).
    #[arg(long, default_value_t = 50)]
    pub half_open_tls: usize,
    /// Watches of the collection as a Table (`kubectl get -w`), read.
    #[arg(long, default_value_t = 20)]
    pub table_watches: usize,
    /// Streaming lists (`sendInitialEvents=true` watches) opened at once,
    /// read to their initial-events-end bookmark, then opened again.
    #[arg(long, default_value_t = 20)]
    pub storm_watches: usize,
    /// Clients sending a new random token with each request.
    #[arg(long, default_value_t = 2)]
    pub token_churners: usize,
    /// Signed-in tenants asking for what kubecache has no answer for, each
    /// request new: the even ones list pods of a made-up namespace as
    /// `alice-token`, the odd ones impersonate a made-up user with
    /// `kubecache-token` (the demo policy's users; issue 43, finding 4).
    #[arg(long, default_value_t = 2)]
    pub review_churners: usize,
    /// Requests sent at once with one new token while the simulated API
    /// server stalls its next 20 `TokenReview`s 15 s (every `--hold-secs`).
    #[arg(long, default_value_t = 50)]
    pub stalled_review_waiters: usize,
    /// Bearer token of the hostile clients (default: the well-behaved
    /// load's `--token`): another user is another tenant, whose large
    /// sends kubecache queues apart from the well-behaved clients'.
    #[arg(long)]
    pub hostile_token: Option<String>,
    /// The HTTP/2 kinds (over TLS only, as kubecache serves HTTP/2).
    #[command(flatten)]
    #[serde(flatten)]
    pub h2: H2Hostile,
}

/// Starts every hostile client of `config.hostile` against kubecache,
/// trusting `tls`.
pub fn start(config: &Chaos, tls: &ClientTls) -> anyhow::Result<Attack> {
    let hostile = &config.hostile;
    let victim = Arc::new(Victim::new(config, tls)?);
    let mut attack = Attack::default();
    let hold = Duration::from_secs(hostile.hold_secs);
    let requirements = hostile.selector_requirements;
    attack.spawn(
        "non-reader",
        hostile.non_readers,
        &victim,
        move |v, t, _| non_reader(v, t, hold),
    );
    attack.spawn(
        "table non-reader",
        hostile.table_non_readers,
        &victim,
        move |v, t, _| table_non_reader(v, t, hold),
    );
    attack.spawn("slowloris", hostile.slowloris, &victim, |v, t, _| {
        slowloris(v, t)
    });
    attack.spawn(
        "giant selector",
        hostile.giant_selectors,
        &victim,
        move |v, t, _| giant_selector(v, t, requirements),
    );
    attack.spawn("table list", hostile.table_lists, &victim, |v, t, _| {
        table_list(v, t)
    });
    attack.spawn("page churn", hostile.page_churners, &victim, page_churn);
    attack.spawn(
        "reconnect storm",
        hostile.reconnect_storms,
        &victim,
        |v, t, _| reconnect_storm(v, t),
    );
    attack.spawn(
        "idle connection",
        hostile.idle_connections,
        &victim,
        |v, t, _| idle(v, t),
    );
    attack.spawn("body hold", hostile.body_holds, &victim, move |v, t, _| {
        body_hold(v, t, hold)
    });
    attack.spawn("expect hold", hostile.expect_holds, &victim, |v, t, _| {
        expect_hold(v, t)
    });
    attack.spawn(
        "half-open TLS",
        hostile.half_open_tls,
        &victim,
        |v, t, _| half_open_tls(v, t),
    );
    attack.spawn("table watch", hostile.table_watches, &victim, |v, t, _| {
        table_watch(v, t)
    });
    attack.spawn(
        "streaming-list storm",
        hostile.storm_watches,
        &victim,
        |v, t, _| streaming_list(v, t),
    );
    attack.spawn("token churn", hostile.token_churners, &victim, token_churn);
    attack.spawn(
        "review churn",
        hostile.review_churners,
        &victim,
        review_churn,
    );
    let (waiters, upstream) = (hostile.stalled_review_waiters, config.load.upstream.clone());
    attack.spawn(
        "stalled review",
        usize::from(waiters > 0),
        &victim,
        move |v, t, seed| stalled_reviews(v, t, upstream.clone(), waiters, hold, seed),
    );
    hostile_h2::spawn(&mut attack, &hostile.h2, &victim, hold);
    Ok(attack)
}

/// Opens a watch of everything from 0 and never reads it.
async fn non_reader(victim: Arc<Victim>, tally: Arc<Tally>, hold: Duration) {
    let request = victim.request(&format!("{}?watch=1&resourceVersion=0", victim.path));
    loop {
        if let Some(_unread) = victim.open(&tally, Some(4096), &request).await {
            tally.note("watch opened, never read");
            tokio::time::sleep(hold).await;
        }
    }
}

/// Opens a Table watch of everything from 0 and never reads it.
async fn table_non_reader(victim: Arc<Victim>, tally: Arc<Tally>, hold: Duration) {
    let target = format!("{}?watch=1&resourceVersion=0", victim.path);
    let request = victim.head(&target) + &format!("Accept: {TABLE}\r\n\r\n");
    loop {
        if let Some(_unread) = victim.open(&tally, Some(4096), &request).await {
            tally.note("Table watch opened, never read");
            tokio::time::sleep(hold).await;
        }
    }
}

/// Sends a request head a byte at a time, every 2 s, forever.
async fn slowloris(victim: Arc<Victim>, tally: Arc<Tally>) {
    const HEADER: &[u8] = b"X-Slowloris: ";
    let start = victim.head(&victim.path);
    loop {
        let Some(mut stream) = victim.open(&tally, None, &start).await else {
            continue;
        };
        tally.note("opened");
        for i in 0.. {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let byte = HEADER.get(i).copied().unwrap_or(b'a');
            if send(&mut stream, &[byte]).await.is_err() {
                tally.note("closed by kubecache");
                break;
            }
        }
    }
}

/// Lists and watches with a selector of `requirements` label requirements.
async fn giant_selector(victim: Arc<Victim>, tally: Arc<Tally>, requirements: usize) {
    let selector = giant(requirements, 56 * 1024);
    let mut tick = victim.ticker();
    for round in 0u64.. {
        tick.tick().await;
        let (kind, query, limit) = match round % 2 {
            0 => ("list", "", 30),
            _ => ("watch", "&watch=1", 2),
        };
        let url = format!(
            "{}{}?labelSelector={selector}{query}",
            victim.url, victim.path
        );
        let (outcome, _) = fetch(
            authorized(&victim, victim.client.get(url)),
            Duration::from_secs(limit),
        )
        .await;
        tally.note(format!("{kind}: {outcome}"));
    }
}

/// A URL-encoded selector of `requirements` `notin` requirements (none of
/// which an object's labels can fail) whose value sets fill about `bytes`.
fn giant(requirements: usize, bytes: usize) -> String {
    let per_requirement = bytes / requirements.max(1);
    let requirements: Vec<String> = (0..requirements)
        .map(|k| {
            let mut values = vec![];
            // Each value costs about its length plus an encoded comma.
            let mut used = 0;
            while used < per_requirement.saturating_sub(32) {
                let value = format!("x{}", values.len());
                used += value.len() + 3;
                values.push(value);
            }
            format!("chaos-{k} notin ({})", values.join(","))
        })
        .collect();
    form_urlencoded::byte_serialize(requirements.join(",").as_bytes()).collect()
}

/// Lists the whole collection as a Table.
async fn table_list(victim: Arc<Victim>, tally: Arc<Tally>) {
    let mut tick = victim.ticker();
    loop {
        tick.tick().await;
        let request = victim
            .client
            .get(format!("{}{}", victim.url, victim.path))
            .header(reqwest::header::ACCEPT, TABLE);
        let (outcome, _) = fetch(authorized(&victim, request), Duration::from_secs(60)).await;
        tally.note(outcome);
    }
}

/// Starts `limit=1` lists and never continues them, every other one as a
/// new client (a fresh token); every fourth request replays an old
/// continue token instead.
async fn page_churn(victim: Arc<Victim>, tally: Arc<Tally>, seed: u64) {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut tokens: VecDeque<String> = VecDeque::new();
    let mut tick = victim.ticker();
    for n in 0u64.. {
        tick.tick().await;
        let replay = n % 4 == 3 && !tokens.is_empty();
        let mut request = if replay {
            let token = &tokens[rng.random_range(0..tokens.len())];
            let token: String = form_urlencoded::byte_serialize(token.as_bytes()).collect();
            victim.client.get(format!(
                "{}{}?limit=1&continue={token}",
                victim.url, victim.path
            ))
        } else {
            victim
                .client
                .get(format!("{}{}?limit=1", victim.url, victim.path))
        };
        request = match (n % 2, &victim.token) {
            (0, _) => request.bearer_auth(format!("chaos-churn-{seed}-{n}")),
            (_, Some(token)) => request.bearer_auth(token),
            (_, None) => request,
        };
        let kind = if replay {
            "old continue token"
        } else {
            "first page"
        };
        let (outcome, body) = fetch(request, Duration::from_secs(30)).await;
        tally.note(format!("{kind}: {outcome}"));
        let next = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|list| list["metadata"]["continue"].as_str().map(str::to_owned));
        if let Some(token) = next.filter(|t| !t.is_empty()) {
            if tokens.len() == 64 {
                tokens.pop_front();
            }
            tokens.push_back(token);
        }
    }
}

/// Opens a watch and closes it as soon as its answer starts.
async fn reconnect_storm(victim: Arc<Victim>, tally: Arc<Tally>) {
    let request = victim.request(&format!("{}?watch=1", victim.path));
    let mut tick = victim.ticker();
    loop {
        tick.tick().await;
        let Some(mut stream) = victim.open(&tally, None, &request).await else {
            continue;
        };
        let mut first = [0u8; 1];
        match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut first)).await {
            Ok(Ok(1)) => tally.note("answered, closed"),
            Ok(Ok(_)) => tally.note("closed by kubecache before an answer"),
            Ok(Err(e)) => tally.note(failed("read", &e)),
            Err(_) => tally.note("no answer within 5 s, closed"),
        }
    }
}

/// Sends one request (`/healthz`), then idles until kubecache closes the
/// connection.
async fn idle(victim: Arc<Victim>, tally: Arc<Tally>) {
    let request = victim.request("/healthz");
    let mut buf = [0u8; 4096];
    loop {
        let Some(mut stream) = victim.open(&tally, None, &request).await else {
            continue;
        };
        tally.note("opened, idle after one request");
        while let Ok(n) = stream.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
        tally.note("closed by kubecache");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Waits for kubecache's answer on `stream` until `limit`: its status
/// code (after a `100 Continue`, which is not an answer, if one came), or
/// how the connection ended without one.
async fn answer(stream: &mut (impl AsyncRead + Unpin), limit: Duration) -> String {
    let mut continued = "";
    let reading = async {
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        loop {
            match stream.read(&mut byte).await {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => return failed("read", &e),
            }
            match byte[0] {
                b'\n' if line.starts_with(b"HTTP/1.1 100") || line.is_empty() => {
                    if !line.is_empty() {
                        continued = "100 Continue, then ";
                    }
                    line.clear();
                }
                b'\n' => break,
                b'\r' => {}
                byte if line.len() < 64 => line.push(byte),
                _ => break,
            }
        }
        match std::str::from_utf8(&line) {
            Ok(text) if text.starts_with("HTTP/1.1 ") => format!("answered {}", &text[9..12]),
            _ if line.is_empty() => "closed by kubecache, no answer".into(),
            _ => "closed by kubecache, not HTTP".into(),
        }
    };
    let outcome = tokio::time::timeout(limit, reading)
        .await
        .unwrap_or_else(|_| format!("held {} s, no answer", limit.as_secs()));
    format!("{continued}{outcome}")
}

/// Posts a ConfigMap as a chunked body, sends one 64 KiB chunk and never
/// the rest; holds until kubecache answers or `hold` passes.
async fn body_hold(victim: Arc<Victim>, tally: Arc<Tally>, hold: Duration) {
    let head = format!(
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: {}\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n\
         10000\r\n{{\"data\":{{\"x\":\"{}",
        victim.host,
        "a".repeat(0x10000 - 14)
    );
    loop {
        if let Some(mut stream) = victim.open(&tally, None, &head).await {
            tally.note(answer(&mut stream, hold).await);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// Posts with `Expect: 100-continue` and never sends the body.
async fn expect_hold(victim: Arc<Victim>, tally: Arc<Tally>) {
    let head = format!(
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: {}\r\n\
         Content-Type: application/json\r\nContent-Length: 1048576\r\n\
         Expect: 100-continue\r\n\r\n",
        victim.host
    );
    loop {
        if let Some(mut stream) = victim.open(&tally, None, &head).await {
            tally.note(answer(&mut stream, Duration::from_secs(60)).await);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// Half a TLS ClientHello: a handshake record header announcing 512
/// bytes, the handshake header and a few bytes of it; then silence. On
/// plain TCP, whatever kubecache's URL says.
async fn half_open_tls(victim: Arc<Victim>, tally: Arc<Tally>) {
    const HALF_HELLO: [u8; 16] = [
        0x16, 0x03, 0x01, 0x02, 0x00, // record: handshake, TLS 1.0, 512 bytes
        0x01, 0x00, 0x01, 0xfc, // ClientHello, 508 bytes
        0x03, 0x03, 0, 0, 0, 0, 0, // TLS 1.2, the random begins
    ];
    loop {
        let Ok(mut stream) = victim.tcp(None).await else {
            tally.note("connect failed");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        if stream.write_all(&HALF_HELLO).await.is_err() {
            tally.note("send failed");
            continue;
        }
        tally.note(answer(&mut stream, Duration::from_secs(60)).await);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Reads a watch (or a streaming list) until kubecache ends it, or
/// `until` says enough: its opening (the status code) and what ended it.
async fn read_watch(
    request: reqwest::RequestBuilder,
    tally: &Tally,
    until: impl Fn(&[u8]) -> bool,
) -> String {
    use futures::StreamExt;
    let response = match request.send().await {
        Ok(response) if response.status().is_success() => response,
        Ok(response) => return response.status().as_u16().to_string(),
        Err(e) if e.is_connect() => return "connect error".into(),
        Err(_) => return "broken answer".into(),
    };
    tally.note(format!("opened: {}", response.status().as_u16()));
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(chunk) if until(&chunk) => return "read to the end of its initial events".into(),
            Ok(_) => {}
            Err(_) => return "cut mid-stream".into(),
        }
    }
    "ended by kubecache".into()
}

/// Watches the collection as a Table, reading every row.
async fn table_watch(victim: Arc<Victim>, tally: Arc<Tally>) {
    loop {
        let request = victim
            .client
            .get(format!("{}{}?watch=1", victim.url, victim.path))
            .header(reqwest::header::ACCEPT, TABLE);
        tally.note(read_watch(authorized(&victim, request), &tally, |_| false).await);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Opens a streaming list, reads it to its initial-events-end bookmark,
/// and opens it again: all the storm's members at once, again and again.
async fn streaming_list(victim: Arc<Victim>, tally: Arc<Tally>) {
    const END: &[u8] = b"k8s.io/initial-events-end";
    loop {
        let request = victim.client.get(format!(
            "{}{}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
            victim.url, victim.path
        ));
        let until = |chunk: &[u8]| chunk.windows(END.len()).any(|w| w == END);
        let read = tokio::time::timeout(
            Duration::from_secs(120),
            read_watch(authorized(&victim, request), &tally, until),
        );
        tally.note(
            read.await
                .unwrap_or_else(|_| "unfinished after 120 s".into()),
        );
    }
}

/// A random token of `rng`, as no client was ever given.
fn random_token(rng: &mut impl Rng) -> String {
    format!("chaos-{:032x}", rng.random::<u128>())
}

/// Lists a page with a new random token each time.
async fn token_churn(victim: Arc<Victim>, tally: Arc<Tally>, seed: u64) {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut tick = victim.ticker();
    loop {
        tick.tick().await;
        let request = victim
            .client
            .get(format!("{}{}?limit=1", victim.url, victim.path))
            .bearer_auth(random_token(&mut rng));
        tally.note(fetch(request, Duration::from_secs(30)).await.0);
    }
}

/// Asks for a new namespace each time as a tenant (client `seed` even), or
/// as a new impersonated user (odd): each request a review kubecache has
/// no answer for.
async fn review_churn(victim: Arc<Victim>, tally: Arc<Tally>, seed: u64) {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut tick = victim.ticker();
    loop {
        tick.tick().await;
        let made_up = format!("chaos-{:016x}", rng.random::<u64>());
        let (kind, request) = if seed.is_multiple_of(2) {
            let url = format!("{}/api/v1/namespaces/{made_up}/pods?limit=1", victim.url);
            (
                "made-up namespace",
                victim.client.get(url).bearer_auth("alice-token"),
            )
        } else {
            let url = format!("{}{}?limit=1", victim.url, victim.path);
            let request = victim.client.get(url).bearer_auth("kubecache-token");
            (
                "made-up Impersonate-User",
                request.header("impersonate-user", made_up),
            )
        };
        let (outcome, _) = fetch(request, Duration::from_secs(30)).await;
        tally.note(format!("{kind}: {outcome}"));
    }
}

/// Every `hold`, arms a 15 s stall of the next 20 `TokenReview`s on the
/// simulated API server (the token churners' take some) and sends
/// `waiters` requests at once with one new token: each outcome with how
/// long it took, in whole seconds.
async fn stalled_reviews(
    victim: Arc<Victim>,
    tally: Arc<Tally>,
    upstream: String,
    waiters: usize,
    hold: Duration,
    seed: u64,
) {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let stall = crate::sim::faults::FaultSpec {
        target: crate::sim::faults::Target::TokenReview,
        fault: crate::sim::faults::Fault::Stall { secs: 15 },
        times: 20,
    };
    loop {
        let armed = victim
            .client
            .post(format!("{upstream}/sim/faults"))
            .json(&stall)
            .send()
            .await;
        tally.note(match armed {
            Ok(r) if r.status().is_success() => "stall armed",
            _ => "could not arm the stall",
        });
        let token = random_token(&mut rng);
        let requests = (0..waiters).map(|_| {
            let request = victim
                .client
                .get(format!("{}{}?limit=1", victim.url, victim.path))
                .bearer_auth(&token);
            async {
                let started = std::time::Instant::now();
                let (outcome, _) = fetch(request, Duration::from_secs(60)).await;
                format!("{outcome} after {} s", started.elapsed().as_secs())
            }
        });
        for outcome in futures::future::join_all(requests).await {
            tally.note(outcome);
        }
        tokio::time::sleep(hold).await;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_giant_selector_is_as_large_as_a_request_target_may_be() {
        let encoded = super::giant(100, 56 * 1024);
        assert!(
            (50_000..60_000).contains(&encoded.len()),
            "{}",
            encoded.len()
        );
        let decoded: String = form_urlencoded::parse(format!("s={encoded}").as_bytes())
            .map(|(_, v)| v.into_owned())
            .collect();
        assert_eq!(decoded.matches(" notin (").count(), 100);
    }
}
