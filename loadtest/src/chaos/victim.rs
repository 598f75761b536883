//! kubecache as the hostile clients see it: where it listens, how a
//! kind's connections reach it (from the kind's own address, over TLS
//! when its URL is https) and what each kind met, tallied.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use anyhow::Context;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::Chaos;
use crate::raw_h2::RawH2;
use crate::tls::{self, ClientTls};

/// Outcomes of one kind of client, counted.
#[derive(Default)]
pub(super) struct Tally(Mutex<BTreeMap<String, u64>>);

impl Tally {
    pub(super) fn note(&self, outcome: impl Into<String>) {
        *self.0.lock().entry(outcome.into()).or_default() += 1;
    }

    /// The outcomes so far, the tally emptied.
    pub(super) fn take(&self) -> BTreeMap<String, u64> {
        std::mem::take(&mut *self.0.lock())
    }
}

/// A connection of a raw kind: TCP, or TLS over it.
pub(super) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// A raw HTTP/2 connection to kubecache.
pub(super) type H2Conn = RawH2<TlsStream<TcpStream>>;

/// How raw connections reach an https kubecache.
#[derive(Clone)]
struct Tls {
    /// The name of its certificate the URL says (a host name or address).
    name: String,
    /// Offering HTTP/1.1, as the raw HTTP/1 kinds speak.
    http1: TlsConnector,
    /// Offering h2 alone.
    h2: TlsConnector,
}

/// kubecache as the hostile clients of one kind see it.
pub(super) struct Victim {
    addr: SocketAddr,
    /// The address the kind's connections come from: its own loopback
    /// address (`127.0.0.2` on) when kubecache is on loopback, so that
    /// kubecache's per-address bounds tell each kind, and the well-behaved
    /// clients on `127.0.0.1`, apart, as they would hosts.
    source: Option<IpAddr>,
    /// `host:port`, for the `Host` header and `:authority`.
    pub(super) host: String,
    pub(super) url: String,
    /// The collection path.
    pub(super) path: String,
    pub(super) token: Option<String>,
    pub(super) client: reqwest::Client,
    /// Between two requests of a looping client.
    pace: Duration,
    client_tls: ClientTls,
    /// `None`: kubecache's URL is plain HTTP.
    tls: Option<Tls>,
}

impl Victim {
    /// kubecache at `config.load.url`, as a client trusting `client_tls`.
    pub(super) fn new(config: &Chaos, client_tls: &ClientTls) -> anyhow::Result<Victim> {
        let hostile = &config.hostile;
        anyhow::ensure!(hostile.hostile_rate > 0.0, "hostileRate: must be positive");
        let url = reqwest::Url::parse(&config.load.url)
            .with_context(|| format!("url: {:?}", config.load.url))?;
        let addr = *url
            .socket_addrs(|| None)?
            .first()
            .with_context(|| format!("url: {url} has no address"))?;
        let name = match url.host() {
            Some(url::Host::Domain(domain)) => domain.to_string(),
            Some(url::Host::Ipv4(ip)) => ip.to_string(),
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            None => anyhow::bail!("url: {url} has no host"),
        };
        let tls = (url.scheme() == "https").then(|| Tls {
            name,
            http1: client_tls.connector(&[tls::HTTP1]),
            h2: client_tls.connector(&[tls::H2]),
        });
        Ok(Victim {
            addr,
            host: format!("{}:{}", url.host_str().unwrap_or_default(), addr.port()),
            url: config.load.url.clone(),
            path: config.load.path.clone(),
            source: None,
            token: hostile
                .hostile_token
                .clone()
                .or_else(|| config.load.token.clone()),
            client: client_tls.http().build()?,
            pace: Duration::from_secs_f64(1.0 / hostile.hostile_rate),
            client_tls: client_tls.clone(),
            tls,
        })
    }

    /// A request head for `target`, without the blank line that ends it.
    pub(super) fn head(&self, target: &str) -> String {
        let mut head = format!("GET {target} HTTP/1.1\r\nHost: {}\r\n", self.host);
        if let Some(token) = &self.token {
            head.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        head
    }

    /// A whole request for `target`.
    pub(super) fn request(&self, target: &str) -> String {
        self.head(target) + "\r\n"
    }

    /// A new TCP connection, with that receive buffer if given.
    pub(super) async fn tcp(&self, recv_buffer: Option<u32>) -> std::io::Result<TcpStream> {
        let socket = match self.addr {
            SocketAddr::V4(_) => TcpSocket::new_v4()?,
            SocketAddr::V6(_) => TcpSocket::new_v6()?,
        };
        if let Some(size) = recv_buffer {
            socket.set_recv_buffer_size(size)?;
        }
        if let Some(source) = self.source {
            socket.bind(SocketAddr::new(source, 0))?;
        }
        socket.connect(self.addr).await
    }

    /// A new connection for HTTP/1.1: over TLS when kubecache's URL is
    /// https, so that each raw kind attacks the same way either way.
    pub(super) async fn connect(&self, recv_buffer: Option<u32>) -> std::io::Result<Box<dyn Io>> {
        let tcp = self.tcp(recv_buffer).await?;
        Ok(match &self.tls {
            Some(tls) => Box::new(tls::handshake(&tls.http1, &tls.name, tcp).await?),
            None => Box::new(tcp),
        })
    }

    /// A new connection with `bytes` sent on it; `None` (noted, after a
    /// pause) when either fails.
    pub(super) async fn open(
        &self,
        tally: &Tally,
        recv_buffer: Option<u32>,
        bytes: &str,
    ) -> Option<Box<dyn Io>> {
        let outcome = match self.connect(recv_buffer).await {
            Ok(mut stream) => match send(&mut stream, bytes.as_bytes()).await {
                Ok(()) => return Some(stream),
                Err(e) => failed("send", &e),
            },
            Err(e) => failed("connect", &e),
        };
        tally.note(outcome);
        tokio::time::sleep(Duration::from_secs(1)).await;
        None
    }

    /// Whether kubecache can be spoken HTTP/2 to: it serves it over TLS
    /// only, by ALPN.
    pub(super) fn serves_h2(&self) -> bool {
        self.tls.is_some()
    }

    /// A new TLS connection on which kubecache chose h2; `None` (noted,
    /// after a pause) when it could not be had.
    pub(super) async fn h2_tls(&self, tally: &Tally) -> Option<TlsStream<TcpStream>> {
        let tls = self.tls.as_ref()?;
        let outcome = match self.tcp(None).await {
            Ok(tcp) => match tls::handshake(&tls.h2, &tls.name, tcp).await {
                Ok(stream) if stream.get_ref().1.alpn_protocol() == Some(tls::H2) => {
                    return Some(stream);
                }
                Ok(_) => "kubecache did not choose h2".to_string(),
                Err(e) => failed("handshake", &e),
            },
            Err(e) => failed("connect", &e),
        };
        tally.note(outcome);
        tokio::time::sleep(Duration::from_secs(1)).await;
        None
    }

    /// A new raw HTTP/2 connection, its preface sent; `None` (noted,
    /// after a pause) when it could not be had.
    pub(super) async fn h2(&self, tally: &Tally) -> Option<H2Conn> {
        let stream = self.h2_tls(tally).await?;
        match RawH2::open(stream).await {
            Ok(raw) => Some(raw),
            Err(e) => {
                tally.note(failed("preface", &e));
                tokio::time::sleep(Duration::from_secs(1)).await;
                None
            }
        }
    }

    /// kubecache as the `k`-th kind sees it: from `127.0.0.(2 + k)` when
    /// kubecache is on IPv4 loopback.
    pub(super) fn kind(&self, k: usize) -> Victim {
        let source = match self.addr.ip() {
            IpAddr::V4(ip) if ip.is_loopback() => {
                Some(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2 + k as u8)))
            }
            _ => None,
        };
        let mut client = self.client_tls.http();
        if let Some(source) = source {
            client = client.local_address(source);
        }
        Victim {
            addr: self.addr,
            source,
            host: self.host.clone(),
            url: self.url.clone(),
            path: self.path.clone(),
            token: self.token.clone(),
            client: client.build().unwrap_or_else(|_| self.client.clone()),
            pace: self.pace,
            client_tls: self.client_tls.clone(),
            tls: self.tls.clone(),
        }
    }

    /// A pacer for a looping client.
    pub(super) fn ticker(&self) -> tokio::time::Interval {
        let mut tick = tokio::time::interval(self.pace);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick
    }
}

/// Writes `bytes` and flushes them (TLS holds back what it could not
/// write at once).
pub(super) async fn send(stream: &mut Box<dyn Io>, bytes: &[u8]) -> std::io::Result<()> {
    stream.write_all(bytes).await?;
    stream.flush().await
}

/// What an I/O failure was, briefly.
pub(super) fn failed(what: &str, e: &std::io::Error) -> String {
    format!("{what}: {:?}", e.kind())
}

/// Sends `request` and reads the whole answer within `limit`: the status
/// code, or what happened instead.
pub(super) async fn fetch(
    request: reqwest::RequestBuilder,
    limit: Duration,
) -> (String, bytes::Bytes) {
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

/// `request` with the configured token.
pub(super) fn authorized(
    victim: &Victim,
    request: reqwest::RequestBuilder,
) -> reqwest::RequestBuilder {
    match &victim.token {
        Some(token) => request.bearer_auth(token),
        None => request,
    }
}
