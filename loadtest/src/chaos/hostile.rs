//! The hostile clients: each a small task that misuses kubecache the way a
//! buggy or malicious client does, tallying what happened to it. They run
//! until the attack is stopped (their connections are then dropped).

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinSet;

use super::Chaos;

/// How many hostile clients of each kind the hostile phase runs.
#[derive(Debug, Clone, clap::Args, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hostile {
    /// Watches of every object from resourceVersion 0 on sockets with a
    /// 4 KiB receive buffer, never read; each dropped and reopened every
    /// `--hold-secs`.
    #[arg(long, default_value_t = 20)]
    pub non_readers: usize,
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
}

/// What one kind of hostile client met.
#[derive(Debug, Clone, Serialize)]
pub struct HostileReport {
    /// The kind.
    pub kind: &'static str,
    /// Clients of that kind.
    pub clients: usize,
    /// How many times each outcome happened (status codes, cuts, errors).
    pub outcomes: BTreeMap<String, u64>,
}

/// Outcomes of one kind of client, counted.
#[derive(Default)]
struct Tally(Mutex<BTreeMap<String, u64>>);

impl Tally {
    fn note(&self, outcome: impl Into<String>) {
        *self.0.lock().entry(outcome.into()).or_default() += 1;
    }
}

/// kubecache as the hostile clients see it.
struct Victim {
    addr: SocketAddr,
    /// `host:port`, for the `Host` header.
    host: String,
    url: String,
    /// The collection path.
    path: String,
    token: Option<String>,
    client: reqwest::Client,
    /// Between two requests of a looping client.
    pace: Duration,
}

impl Victim {
    /// A request head for `target`, without the blank line that ends it.
    fn head(&self, target: &str) -> String {
        let mut head = format!("GET {target} HTTP/1.1\r\nHost: {}\r\n", self.host);
        if let Some(token) = &self.token {
            head.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        head
    }

    /// A whole request for `target`.
    fn request(&self, target: &str) -> String {
        self.head(target) + "\r\n"
    }

    /// A new TCP connection, with that receive buffer if given.
    async fn connect(&self, recv_buffer: Option<u32>) -> std::io::Result<TcpStream> {
        let socket = match self.addr {
            SocketAddr::V4(_) => TcpSocket::new_v4()?,
            SocketAddr::V6(_) => TcpSocket::new_v6()?,
        };
        if let Some(size) = recv_buffer {
            socket.set_recv_buffer_size(size)?;
        }
        socket.connect(self.addr).await
    }

    /// A new connection with `bytes` sent on it; `None` (noted, after a
    /// pause) when either fails.
    async fn open(
        &self,
        tally: &Tally,
        recv_buffer: Option<u32>,
        bytes: &str,
    ) -> Option<TcpStream> {
        let outcome = match self.connect(recv_buffer).await {
            Ok(mut stream) => match stream.write_all(bytes.as_bytes()).await {
                Ok(()) => return Some(stream),
                Err(e) => failed("send", &e),
            },
            Err(e) => failed("connect", &e),
        };
        tally.note(outcome);
        tokio::time::sleep(Duration::from_secs(1)).await;
        None
    }

    /// A pacer for a looping client.
    fn ticker(&self) -> tokio::time::Interval {
        let mut tick = tokio::time::interval(self.pace);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick
    }
}

/// The hostile clients at work.
pub struct Attack {
    tasks: JoinSet<()>,
    tallies: Vec<(&'static str, usize, Arc<Tally>)>,
}

impl Attack {
    /// Starts every hostile client of `config.hostile` against kubecache.
    pub fn start(config: &Chaos) -> anyhow::Result<Self> {
        let hostile = &config.hostile;
        anyhow::ensure!(hostile.hostile_rate > 0.0, "hostileRate: must be positive");
        let url = reqwest::Url::parse(&config.load.url)
            .with_context(|| format!("url: {:?}", config.load.url))?;
        let addr = *url
            .socket_addrs(|| None)?
            .first()
            .with_context(|| format!("url: {url} has no address"))?;
        let victim = Arc::new(Victim {
            addr,
            host: format!("{}:{}", url.host_str().unwrap_or_default(), addr.port()),
            url: config.load.url.clone(),
            path: config.load.path.clone(),
            token: config.load.token.clone(),
            client: reqwest::Client::new(),
            pace: Duration::from_secs_f64(1.0 / hostile.hostile_rate),
        });
        let mut attack = Attack {
            tasks: JoinSet::new(),
            tallies: Vec::new(),
        };
        let hold = Duration::from_secs(hostile.hold_secs);
        let requirements = hostile.selector_requirements;
        attack.spawn(
            "non-reader",
            hostile.non_readers,
            &victim,
            move |v, t, _| non_reader(v, t, hold),
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
        Ok(attack)
    }

    fn spawn<F, Fut>(&mut self, kind: &'static str, clients: usize, victim: &Arc<Victim>, client: F)
    where
        F: Fn(Arc<Victim>, Arc<Tally>, u64) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let tally = Arc::new(Tally::default());
        for i in 0..clients {
            self.tasks
                .spawn(client(victim.clone(), tally.clone(), i as u64));
        }
        self.tallies.push((kind, clients, tally));
    }

    /// Stops every hostile client: what each kind met.
    pub fn stop(mut self) -> Vec<HostileReport> {
        self.tasks.abort_all();
        self.tallies
            .into_iter()
            .filter(|(_, clients, _)| *clients > 0)
            .map(|(kind, clients, tally)| HostileReport {
                kind,
                clients,
                outcomes: std::mem::take(&mut *tally.0.lock()),
            })
            .collect()
    }
}

/// What an I/O failure was, briefly.
fn failed(what: &str, e: &std::io::Error) -> String {
    format!("{what}: {:?}", e.kind())
}

/// Sends `request` and reads the whole answer within `limit`: the status
/// code, or what happened instead.
async fn fetch(request: reqwest::RequestBuilder, limit: Duration) -> (String, bytes::Bytes) {
    let exchange = async {
        let response = request.send().await?;
        let status = response.status();
        Ok::<_, reqwest::Error>((status, response.bytes().await?))
    };
    match tokio::time::timeout(limit, exchange).await {
        Ok(Ok((status, body))) => (status.as_u16().to_string(), body),
        Ok(Err(e)) if e.is_connect() => ("connect error".into(), bytes::Bytes::new()),
        Ok(Err(_)) => ("broken answer".into(), bytes::Bytes::new()),
        Err(_) => (
            format!("unfinished after {} s", limit.as_secs()),
            bytes::Bytes::new(),
        ),
    }
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
            if stream.write_all(&[byte]).await.is_err() {
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
    const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";
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

/// `request` with the configured token.
fn authorized(victim: &Victim, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    match &victim.token {
        Some(token) => request.bearer_auth(token),
        None => request,
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
