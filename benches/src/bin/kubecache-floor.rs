//! The floor of serving one GET (issue 40), and the load that measures it
//! beside kubecache (`benches/run-floor`).
//!
//! `serve`: a bare hyper 1 + tokio-rustls server, rustls on ring with ALPN
//! `h2` then `http/1.1` as kubecache's `transport/tls.rs` configures it,
//! answering every request with the same status, headers and body: those
//! kubecache answered for `--from`, fetched once at start. Nothing else per
//! request: no routing, authorization, negotiation, logging or metrics.
//!
//! `load`: `--connections` TLS connections to one URL, each sending GETs
//! one after the other (HTTP/1.1) or `--streams` at once (HTTP/2), for
//! `--secs`; prints one JSON line: requests per second, p50 and p99 in
//! microseconds, and errors (non-200 answers or failed requests).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use clap::{Parser, Subcommand};
use http_body_util::{BodyExt, Empty, Full};
use hyper::header::HeaderValue;
use hyper::{HeaderMap, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::{TcpListener, TcpStream};

#[derive(Parser)]
#[command(about = "The floor of serving one GET, and the load that measures it")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Answers every request with what `--from` answered once.
    Serve {
        #[arg(long)]
        listen: SocketAddr,
        #[arg(long)]
        cert: PathBuf,
        #[arg(long)]
        key: PathBuf,
        /// The URL whose answer is served (fetched once, over HTTP/1.1).
        #[arg(long)]
        from: String,
        #[command(flatten)]
        client: Client,
    },
    /// Drives GETs of `--url` and prints one JSON line of results.
    Load {
        #[arg(long)]
        url: String,
        #[arg(long, default_value_t = 32)]
        connections: usize,
        /// HTTP/2 with this many streams at once per connection; HTTP/1.1
        /// without.
        #[arg(long)]
        streams: Option<usize>,
        #[arg(long, default_value_t = 10)]
        secs: u64,
        #[command(flatten)]
        client: Client,
    },
}

/// How the client connects: the CA that signed the server and the bearer
/// token it sends.
#[derive(clap::Args, Clone)]
struct Client {
    #[arg(long)]
    ca_file: PathBuf,
    #[arg(long)]
    token: String,
}

fn main() -> anyhow::Result<()> {
    // Without a subscriber, every span of h2's (several per stream) would
    // be offered to the `log` crate, which some dependency enables: 9,000
    // instructions per HTTP/2 GET that a bare server does not spend, and
    // that kubecache, whose subscriber filters them, does not either.
    tracing::subscriber::set_global_default(tracing::subscriber::NoSubscriber::default())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match Cli::parse().command {
        Command::Serve {
            listen,
            cert,
            key,
            from,
            client,
        } => runtime.block_on(serve(listen, &cert, &key, &from, &client)),
        Command::Load {
            url,
            connections,
            streams,
            secs,
            client,
        } => runtime.block_on(load(
            &url,
            connections,
            streams,
            Duration::from_secs(secs),
            &client,
        )),
    }
}

/// The fixed answer: status, headers (without `date` and `content-length`,
/// which hyper writes) and body.
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

async fn serve(
    listen: SocketAddr,
    cert: &Path,
    key: &Path,
    from: &str,
    client: &Client,
) -> anyhow::Result<()> {
    let target = Target::new(from, client)?;
    let response = target.connect(false).await?.get().await?;
    let (parts, body) = response.into_parts();
    let mut headers = parts.headers;
    headers.remove(hyper::header::DATE);
    headers.remove(hyper::header::CONTENT_LENGTH);
    let answer = Arc::new(Answer {
        status: parts.status,
        headers,
        body: body.collect().await?.to_bytes(),
    });
    eprintln!(
        "floor: serving {} ({} bytes) from {from}",
        answer.status,
        answer.body.len()
    );
    let acceptor = tokio_rustls::TlsAcceptor::from(server_config(cert, key)?);
    let listener = TcpListener::bind(listen).await?;
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let (acceptor, answer) = (acceptor.clone(), answer.clone());
        tokio::spawn(async move {
            let Ok(stream) = acceptor.accept(stream).await else {
                return;
            };
            let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
            let service = hyper::service::service_fn(move |_: Request<hyper::body::Incoming>| {
                let mut response = Response::new(Full::new(answer.body.clone()));
                *response.status_mut() = answer.status;
                response.headers_mut().clone_from(&answer.headers);
                std::future::ready(Ok::<_, std::convert::Infallible>(response))
            });
            let io = TokioIo::new(stream);
            let _ = if h2 {
                hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(io, service)
                    .await
            } else {
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await
            };
        });
    }
}

/// kubecache's serving configuration (`transport/tls.rs`): ring, the
/// default versions, no client certificates, ALPN `h2` then `http/1.1`.
fn server_config(cert: &Path, key: &Path) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let chain = CertificateDer::pem_file_iter(cert)?.collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(rustls::DEFAULT_VERSIONS)?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Where GETs go: the address, the request's URI and authorization, and
/// the TLS client.
#[derive(Clone)]
struct Target {
    address: String,
    host: String,
    uri: hyper::Uri,
    authorization: HeaderValue,
    /// The TLS client offering `http/1.1`, and the one offering `h2`.
    tls: [tokio_rustls::TlsConnector; 2],
}

impl Target {
    fn new(url: &str, client: &Client) -> anyhow::Result<Target> {
        let uri: hyper::Uri = url.parse()?;
        if uri.scheme_str() != Some("https") {
            bail!("{url}: only https");
        }
        let authority = uri.authority().context("no host")?;
        let host = authority.host().to_string();
        let address = format!("{}:{}", host, authority.port_u16().unwrap_or(443));
        let mut roots = rustls::RootCertStore::empty();
        for certificate in CertificateDer::pem_file_iter(&client.ca_file)? {
            roots.add(certificate?)?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(rustls::DEFAULT_VERSIONS)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let offering = |alpn: &[u8]| {
            let mut config = config.clone();
            config.alpn_protocols = vec![alpn.to_vec()];
            tokio_rustls::TlsConnector::from(Arc::new(config))
        };
        Ok(Target {
            address,
            host,
            uri,
            authorization: HeaderValue::from_str(&format!("Bearer {}", client.token))?,
            tls: [offering(b"http/1.1"), offering(b"h2")],
        })
    }

    /// A connection speaking HTTP/2 if `h2`, else HTTP/1.1 (by ALPN).
    async fn connect(&self, h2: bool) -> anyhow::Result<Connection> {
        let stream = TcpStream::connect(&self.address).await?;
        stream.set_nodelay(true)?;
        let name = ServerName::try_from(self.host.clone())?;
        let io = TokioIo::new(self.tls[usize::from(h2)].connect(name, stream).await?);
        let sender = if h2 {
            let (sender, connection) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await?;
            tokio::spawn(connection);
            Sender::Http2(sender)
        } else {
            let (sender, connection) = hyper::client::conn::http1::handshake(io).await?;
            tokio::spawn(connection);
            Sender::Http1(sender)
        };
        Ok(Connection {
            target: self.clone(),
            sender,
        })
    }
}

enum Sender {
    Http1(hyper::client::conn::http1::SendRequest<Empty<Bytes>>),
    Http2(hyper::client::conn::http2::SendRequest<Empty<Bytes>>),
}

/// One connection to the target.
struct Connection {
    target: Target,
    sender: Sender,
}

impl Connection {
    /// One GET of the target's URI.
    async fn get(&mut self) -> anyhow::Result<Response<hyper::body::Incoming>> {
        let target = &self.target;
        let request = |uri: hyper::Uri| {
            Request::get(uri)
                .header(hyper::header::AUTHORIZATION, &target.authorization)
                .header(hyper::header::ACCEPT, "application/json")
        };
        Ok(match &mut self.sender {
            Sender::Http1(sender) => {
                let path = target.uri.path_and_query().context("no path")?.as_str();
                let request = request(path.parse()?)
                    .header(hyper::header::HOST, &target.host)
                    .body(Empty::new())?;
                sender.ready().await?;
                sender.send_request(request).await?
            }
            Sender::Http2(sender) => {
                let request = request(target.uri.clone()).body(Empty::new())?;
                sender.ready().await?;
                sender.send_request(request).await?
            }
        })
    }

    /// Another handle on the same HTTP/2 connection.
    fn stream(&self) -> Option<Connection> {
        match &self.sender {
            Sender::Http2(sender) => Some(Connection {
                target: self.target.clone(),
                sender: Sender::Http2(sender.clone()),
            }),
            Sender::Http1(_) => None,
        }
    }
}

/// What one sender measured: each request's latency in microseconds, and
/// its errors.
#[derive(Default)]
struct Measured {
    latencies: Vec<u32>,
    errors: u64,
}

async fn load(
    url: &str,
    connections: usize,
    streams: Option<usize>,
    secs: Duration,
    client: &Client,
) -> anyhow::Result<()> {
    let target = Target::new(url, client)?;
    let mut senders = Vec::new();
    for _ in 0..connections {
        let connection = target.connect(streams.is_some()).await?;
        for _ in 1..streams.unwrap_or(1) {
            senders.push(connection.stream().context("HTTP/2")?);
        }
        senders.push(connection);
    }
    let start = Instant::now();
    let until = start + secs;
    let tasks: Vec<_> = senders
        .into_iter()
        .map(|connection| tokio::spawn(send(connection, until)))
        .collect();
    let mut latencies = Vec::new();
    let mut errors = 0;
    for task in tasks {
        let measured = task.await?;
        latencies.extend(measured.latencies);
        errors += measured.errors;
    }
    let elapsed = start.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let quantile = |q: f64| {
        let index = ((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1));
        latencies.get(index).copied().unwrap_or(0)
    };
    println!(
        "{}",
        serde_json::json!({
            "requests": latencies.len(),
            "per_sec": latencies.len() as f64 / elapsed,
            "p50_us": quantile(0.5),
            "p99_us": quantile(0.99),
            "errors": errors,
        })
    );
    Ok(())
}

/// GETs one after the other until `until`, each read to its end.
async fn send(mut connection: Connection, until: Instant) -> Measured {
    let mut measured = Measured::default();
    loop {
        let start = Instant::now();
        if start >= until {
            return measured;
        }
        let answer = match connection.get().await {
            Ok(response) => {
                let ok = response.status() == StatusCode::OK;
                response.into_body().collect().await.is_ok() && ok
            }
            Err(_) => false,
        };
        if answer {
            let micros = start.elapsed().as_micros();
            measured
                .latencies
                .push(u32::try_from(micros).unwrap_or(u32::MAX));
        } else {
            measured.errors += 1;
            if measured.errors > 1000 {
                return measured;
            }
        }
    }
}
