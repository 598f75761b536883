//! kubecache's accept loop (`kubecache_server::transport`) over real sockets:
//! graceful shutdown, HTTPS with certificates minted by `common::pki`,
//! client certificates, reloading rotated files,
//! handshakes that never finish, and connection hygiene (header-read and
//! idle timeouts, connection limits, the answers to what does not parse). Most tests serve a tiny router that says
//! who the request's client certificate proves; one serves kubecache's
//! own router to a kube client over HTTPS.
//!
//! No wall-clock windows: every wait is for a condition, bounded only so
//! that a bug fails the test instead of hanging it.

use crate::common;

use common::pki::{Pki, tls_files};
use kubecache_testkit::pki::{self, der};
use kubecache_testkit::scrape;
use kubecache_testkit::wait::within;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::routing::get;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use kubecache_server::auth::{Connected, PeerCertificate};
use kubecache_server::transport::{Answers, Limits, Server, Tls, TlsFiles};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

// ---------------------------------------------------------------------------
// Servers and clients

/// Answers `/whoami` with what the request's client certificate proves:
/// `alice team-a,system:authenticated`, `failed`, or `anonymous`.
fn whoami() -> Router {
    Router::new().route(
        "/whoami",
        get(|request: Request| async move {
            let connected = request.extensions().get::<Connected>();
            match connected.and_then(|c| c.certificate.as_ref()) {
                Some(PeerCertificate::Verified(user)) => {
                    format!("{} {}", user.info().username, user.info().groups.join(","))
                }
                Some(PeerCertificate::Failed(_)) => "failed".to_string(),
                None => "anonymous".to_string(),
            }
        }),
    )
}

/// kubecache's own router, caching nothing, without authorization: its
/// `/metrics`, probes and error answers.
fn kubecache_router() -> Answers {
    kubecache_server::router(
        Arc::new(kubecache_server::Caches::new(
            Vec::new(),
            Default::default(),
        )),
        Arc::new(kubecache_server::auth::Auth::None),
        // Nothing passes through here: an upstream that is never asked.
        kubecache_server::PassThrough::new(
            &kube::Config::new("http://127.0.0.1:9".parse().unwrap()),
            1,
        )
        .unwrap(),
    )
}

/// Serves `router` with `server`'s settings on 127.0.0.1 until dropped.
struct Running {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn start(router: impl Into<Answers>, configure: impl FnOnce(Server) -> Server) -> Running {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = configure(Server::new(listener, router));
    let task = tokio::spawn(server.serve(std::future::pending()));
    Running { addr, task }
}

/// A TLS client trusting `ca_pem`, with a client certificate if given,
/// offering HTTP/1.1 (the tests here speak it; `http2.rs` the other).
fn client_config(ca_pem: &str, identity: Option<&(String, String)>) -> Arc<rustls::ClientConfig> {
    let mut config = pki::client_config(ca_pem, identity);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

type ClientTls = tokio_rustls::client::TlsStream<TcpStream>;

async fn connect(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
) -> std::io::Result<ClientTls> {
    let tcp = TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
}

/// The certificate the server presented on a connection.
fn presented(stream: &ClientTls) -> CertificateDer<'static> {
    stream.get_ref().1.peer_certificates().unwrap()[0].clone()
}

/// An HTTP/1.1 connection over `stream`.
async fn http1<S>(stream: S) -> hyper::Result<hyper::client::conn::http1::SendRequest<Empty<Bytes>>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

/// `method` `path` on an open connection: the answer, its body whole.
async fn answer_on(
    sender: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    method: http::Method,
    path: &str,
) -> hyper::Result<http::Response<String>> {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::HOST, "127.0.0.1")
        .body(Empty::new())
        .unwrap();
    let (parts, body) = sender.send_request(request).await?.into_parts();
    let body = body.collect().await?.to_bytes();
    Ok(http::Response::from_parts(
        parts,
        String::from_utf8_lossy(&body).into_owned(),
    ))
}

/// GET `path` on an open connection: the code and the body.
async fn get_on(
    sender: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    path: &str,
) -> hyper::Result<(u16, String)> {
    let answer = answer_on(sender, http::Method::GET, path).await?;
    Ok((answer.status().as_u16(), answer.into_body()))
}

/// GET `path` over a new TLS connection.
async fn https_get(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    path: &str,
) -> Result<(u16, String), String> {
    let stream = connect(addr, config).await.map_err(|e| e.to_string())?;
    let mut sender = http1(stream).await.map_err(|e| e.to_string())?;
    get_on(&mut sender, path).await.map_err(|e| e.to_string())
}

// ---------------------------------------------------------------------------
// The accept loop

#[tokio::test]
async fn shutdown_stops_accepting_closes_idle_connections_and_lets_answers_in_flight_finish() {
    let (started_tx, mut started) = tokio::sync::mpsc::channel::<()>(1);
    let release = Arc::new(tokio::sync::Notify::new());
    let router = {
        let release = release.clone();
        Router::new()
            .route("/fast", get(|| async { "fast" }))
            .route(
                "/slow",
                get(move || async move {
                    started_tx.send(()).await.unwrap();
                    release.notified().await;
                    "slow"
                }),
            )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(Server::new(listener, router).serve(async {
        let _ = stopped.await;
    }));

    // An idle keep-alive connection, and one with an answer in flight.
    let (mut idle, idle_connection) = hyper::client::conn::http1::handshake(TokioIo::new(
        TcpStream::connect(addr).await.unwrap(),
    ))
    .await
    .unwrap();
    let idle_connection = tokio::spawn(idle_connection);
    assert_eq!(
        get_on(&mut idle, "/fast").await.unwrap(),
        (200, "fast".into())
    );
    let mut busy = http1(TcpStream::connect(addr).await.unwrap())
        .await
        .unwrap();
    let slow = tokio::spawn(async move { get_on(&mut busy, "/slow").await });
    within("the slow request starts", started.recv()).await;

    stop.send(()).unwrap();
    // The idle connection is closed by the server ...
    within("the idle connection closes", idle_connection)
        .await
        .unwrap()
        .unwrap();
    // ... no new connection is accepted ...
    within("the listener closes", async {
        while TcpStream::connect(addr).await.is_ok() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    // ... and the server waits for the answer in flight, which completes.
    assert!(
        !server.is_finished(),
        "serve returned with a request in flight"
    );
    release.notify_one();
    let answer = within("the slow answer", slow).await.unwrap();
    assert_eq!(answer.unwrap(), (200, "slow".into()));
    within("serve returns", server).await.unwrap();
}

// ---------------------------------------------------------------------------
// TLS

#[tokio::test]
async fn https_is_served_and_plain_http_on_the_tls_port_gets_a_400_status() {
    let pki = Pki::new("https");
    let tls = Tls::load(tls_files(&pki, "kubecache", None)).unwrap();
    let running = start(whoami(), |s| s.tls(Some(tls))).await;
    let config = client_config(&pki.ca_pem(), None);

    let mut both = pki::client_config(&pki.ca_pem(), None);
    both.alpn_protocols = vec![b"http/1.1".to_vec(), b"h2".to_vec()];
    let stream = connect(running.addr, Arc::new(both)).await.unwrap();
    assert_eq!(
        stream.get_ref().1.alpn_protocol(),
        Some(&b"h2"[..]),
        "ALPN: HTTP/2 preferred, as kube-apiserver prefers it"
    );
    let stream = connect(running.addr, config.clone()).await.unwrap();
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    let mut sender = http1(stream).await.unwrap();
    assert_eq!(
        get_on(&mut sender, "/whoami").await.unwrap(),
        (200, "anonymous".into())
    );
    // Keep-alive: a second request on the same connection.
    assert_eq!(get_on(&mut sender, "/whoami").await.unwrap().0, 200);

    // Plain HTTP to the TLS port: a 400 Status, as kube-apiserver answers.
    let mut plain = http1(TcpStream::connect(running.addr).await.unwrap())
        .await
        .unwrap();
    let (code, body) = within("the plain HTTP answer", get_on(&mut plain, "/whoami"))
        .await
        .unwrap();
    assert_eq!(code, 400, "{body}");
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "BadRequest");
    assert_eq!(
        status["message"],
        "Client sent an HTTP request to an HTTPS server."
    );
    // And the server goes on serving HTTPS.
    assert_eq!(
        https_get(running.addr, config, "/whoami").await.unwrap().0,
        200
    );
}

#[tokio::test]
async fn a_verified_client_certificate_s_user_is_on_every_request_and_clients_without_one_are_served()
 {
    let pki = Pki::new("client-certs");
    let tls = Tls::load(tls_files(&pki, "kubecache", Some(&pki.ca_pem()))).unwrap();
    let running = start(whoami(), |s| s.tls(Some(tls))).await;

    let alice = pki.client("alice", &["team-a", "system:masters"]);
    let stream = connect(running.addr, client_config(&pki.ca_pem(), Some(&alice)))
        .await
        .unwrap();
    let mut sender = http1(stream).await.unwrap();
    for _ in 0..2 {
        assert_eq!(
            get_on(&mut sender, "/whoami").await.unwrap(),
            (
                200,
                "alice team-a,system:masters,system:authenticated".into()
            )
        );
    }
    // Token clients present no certificate: served, with no user from TLS.
    assert_eq!(
        https_get(running.addr, client_config(&pki.ca_pem(), None), "/whoami")
            .await
            .unwrap(),
        (200, "anonymous".into())
    );
    // A verified certificate without a common name proves no user, as on
    // kube-apiserver.
    let nameless = pki.client("", &["team-a"]);
    assert_eq!(
        https_get(
            running.addr,
            client_config(&pki.ca_pem(), Some(&nameless)),
            "/whoami"
        )
        .await
        .unwrap(),
        (200, "anonymous".into())
    );
}

#[tokio::test]
async fn a_client_certificate_of_another_ca_is_taken_at_the_handshake_and_fails_on_each_request() {
    let pki = Pki::new("unverifiable");
    let other = Pki::new("unverifiable-other");
    let tls = Tls::load(tls_files(&pki, "kubecache", Some(&pki.ca_pem()))).unwrap();
    let running = start(whoami(), |s| s.tls(Some(tls))).await;
    let mallory = other.client("mallory", &["system:masters"]);
    // As kube-apiserver: asked for, not verified at the handshake (over
    // TLS 1.2 and 1.3); the authenticator refuses it on each request.
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der(&pki.ca_pem())).unwrap();
    let tls12 = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS12])
    .unwrap()
    .with_root_certificates(roots)
    .with_client_auth_cert(
        vec![der(&mallory.0)],
        PrivateKeyDer::from_pem_slice(mallory.1.as_bytes()).unwrap(),
    )
    .unwrap();
    for config in [
        client_config(&pki.ca_pem(), Some(&mallory)),
        Arc::new(tls12),
    ] {
        let stream = connect(running.addr, config).await.unwrap();
        let mut sender = http1(stream).await.unwrap();
        for _ in 0..2 {
            assert_eq!(
                get_on(&mut sender, "/whoami").await.unwrap(),
                (200, "failed".into())
            );
        }
    }
}

/// The kubelet's layout of a mounted Secret: `tls.crt -> ..data/tls.crt`,
/// `..data -> ..<version>`; an update writes a new version directory and
/// swaps `..data` with a rename.
struct MountedSecret {
    dir: PathBuf,
    version: usize,
}

impl MountedSecret {
    fn new(dir: &Path, cert: &str, key: &str) -> MountedSecret {
        let dir = dir.join("secret");
        std::fs::create_dir_all(&dir).unwrap();
        let mut secret = MountedSecret { dir, version: 0 };
        secret.update(cert, key);
        for name in ["tls.crt", "tls.key"] {
            std::os::unix::fs::symlink(format!("..data/{name}"), secret.dir.join(name)).unwrap();
        }
        secret
    }

    fn update(&mut self, cert: &str, key: &str) {
        self.version += 1;
        let version = format!("..v{}", self.version);
        std::fs::create_dir(self.dir.join(&version)).unwrap();
        std::fs::write(self.dir.join(&version).join("tls.crt"), cert).unwrap();
        std::fs::write(self.dir.join(&version).join("tls.key"), key).unwrap();
        let temporary = self.dir.join("..data_tmp");
        std::os::unix::fs::symlink(&version, &temporary).unwrap();
        std::fs::rename(&temporary, self.dir.join("..data")).unwrap();
    }

    fn files(&self) -> TlsFiles {
        TlsFiles {
            cert: self.dir.join("tls.crt"),
            key: self.dir.join("tls.key"),
            client_ca: None,
        }
    }
}

/// Connects until the server presents `wanted`; every connection on the
/// way must succeed (presenting `old`).
async fn wait_for_certificate(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    old: &CertificateDer<'static>,
    wanted: &CertificateDer<'static>,
) {
    within("the new certificate is served", async {
        loop {
            let stream = connect(addr, config.clone()).await.unwrap();
            let served = presented(&stream);
            if &served == wanted {
                return;
            }
            assert_eq!(&served, old, "neither the old nor the new certificate");
            tokio::task::yield_now().await;
        }
    })
    .await;
}

#[tokio::test]
async fn rotated_files_reach_new_connections_and_a_broken_replacement_keeps_the_old_certificate() {
    let pki = Pki::new("rotation");
    let (first, first_key) = pki.server("kubecache-1");
    let mut secret = MountedSecret::new(&pki.dir, &first, &first_key);
    let tls = Tls::load(secret.files())
        .unwrap()
        .reload_every(Duration::from_millis(20));
    let running = start(whoami(), |s| s.tls(Some(tls))).await;
    // kubecache's own /metrics, to see the reloads counted.
    let metrics_server = start(kubecache_router(), |s| s).await;
    let metrics = metrics_server.addr;
    let reloads = |result: &'static str| async move {
        let mut sender = http1(TcpStream::connect(metrics).await.unwrap())
            .await
            .unwrap();
        let (_, text) = get_on(&mut sender, "/metrics").await.unwrap();
        let prefix = format!("kubecache_tls_reloads_total{{result=\"{result}\"}} ");
        text.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .map_or(0, |n| n.parse::<u64>().unwrap())
    };
    let config = client_config(&pki.ca_pem(), None);
    let stream = connect(running.addr, config.clone()).await.unwrap();
    assert_eq!(presented(&stream), der(&first));
    let mut open = http1(stream).await.unwrap();

    // cert-manager renews; the kubelet swaps the files.
    let (second, second_key) = pki.server("kubecache-2");
    secret.update(&second, &second_key);
    wait_for_certificate(running.addr, config.clone(), &der(&first), &der(&second)).await;
    assert_eq!(reloads("loaded").await, 1);
    // The connection from before goes on.
    assert_eq!(get_on(&mut open, "/whoami").await.unwrap().0, 200);

    // A broken replacement: a certificate whose key does not match, then
    // one that is not PEM. Each is tried once, and the previous
    // certificate stays served.
    let (third, _) = pki.server("kubecache-3");
    secret.update(&third, &second_key);
    within("the mismatched pair is tried", async {
        while reloads("failed").await < 1 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    secret.update("not a certificate", &second_key);
    within("the broken file is tried", async {
        while reloads("failed").await < 2 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    let stream = connect(running.addr, config.clone()).await.unwrap();
    assert_eq!(presented(&stream), der(&second));
    let mut sender = http1(stream).await.unwrap();
    assert_eq!(get_on(&mut sender, "/whoami").await.unwrap().0, 200);

    // Fixed: served again.
    let (fourth, fourth_key) = pki.server("kubecache-4");
    secret.update(&fourth, &fourth_key);
    wait_for_certificate(running.addr, config, &der(&second), &der(&fourth)).await;
    assert_eq!(reloads("loaded").await, 2);
    assert_eq!(reloads("failed").await, 2);
}

/// Connections that stop early in the handshake: silent, a started
/// handshake record, a started HTTP request.
async fn stuck_clients(addr: SocketAddr) -> Vec<TcpStream> {
    let mut stuck = Vec::new();
    for opening in [&b""[..], &b""[..], &[22u8, 3, 1][..], &b"GE"[..]] {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(opening).await.unwrap();
        stuck.push(stream);
    }
    stuck
}

#[tokio::test]
async fn a_client_stuck_in_the_handshake_holds_only_its_own_socket_and_not_for_long() {
    let pki = Pki::new("stuck");
    let config = client_config(&pki.ca_pem(), None);
    // Handshakes that may take an hour: others are served meanwhile (a
    // handshake in the accept loop would hold them up for that hour).
    let files = tls_files(&pki, "kubecache", None);
    let patient = start(whoami(), |s| {
        s.tls(Some(Tls::load(files.clone()).unwrap()))
            .handshake_timeout(Duration::from_secs(3600))
    })
    .await;
    let _stuck = stuck_clients(patient.addr).await;
    for _ in 0..3 {
        assert_eq!(
            within(
                "served past stuck handshakes",
                https_get(patient.addr, config.clone(), "/whoami")
            )
            .await
            .unwrap(),
            (200, "anonymous".into())
        );
    }
    // With a short timeout, each stuck connection is closed once its time
    // is up.
    let hasty = start(whoami(), |s| {
        s.tls(Some(Tls::load(files).unwrap()))
            .handshake_timeout(Duration::from_millis(100))
    })
    .await;
    for mut stream in stuck_clients(hasty.addr).await {
        let mut rest = Vec::new();
        let _ = within(
            "the stuck connection is closed",
            stream.read_to_end(&mut rest),
        )
        .await;
    }
}

#[tokio::test]
async fn a_kube_client_reads_kubecache_over_https_with_a_client_certificate() {
    let pki = Pki::new("kube-client");
    let tls = Tls::load(tls_files(&pki, "kubecache", Some(&pki.ca_pem()))).unwrap();
    let served = common::serve(common::Setup {
        sim: kubecache_loadtest::sim::SimConfig {
            pods: 50,
            ..Default::default()
        },
        tls: Some(tls),
        ..common::Setup::default()
    })
    .await;
    assert!(served.url.starts_with("https://"), "{}", served.url);
    let (cert, key) = pki.client("alice", &["team-a"]);
    let kubeconfig = format!(
        r#"
apiVersion: v1
kind: Config
clusters:
  - name: kubecache
    cluster:
      server: {url}
      certificate-authority: {ca}
users:
  - name: alice
    user:
      client-certificate: {cert}
      client-key: {key}
contexts:
  - name: kubecache
    context: {{ cluster: kubecache, user: alice }}
current-context: kubecache
"#,
        url = served.url,
        ca = pki.write("ca.crt", &pki.ca_pem()).display(),
        cert = pki.write("alice.crt", &cert).display(),
        key = pki.write("alice.key", &key).display(),
    );
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::all(client);
    let list = pods.list(&Default::default()).await.unwrap();
    assert_eq!(list.items.len(), 50);
}

// ---------------------------------------------------------------------------
// Connection hygiene

/// Short timeouts, so that tests wait little for them; the other one long.
fn timeouts(header_read: Duration, idle: Duration) -> Limits {
    Limits {
        header_read_timeout: header_read,
        idle_timeout: idle,
        ..Limits::default()
    }
}

const SHORT: Duration = Duration::from_millis(200);
const LONG: Duration = Duration::from_secs(3600);

/// An HTTP/1.1 connection, and its task, which ends when the server
/// closes the connection.
async fn watched_http1(
    stream: TcpStream,
) -> (
    hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    JoinHandle<hyper::Result<()>>,
) {
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    (sender, tokio::spawn(connection))
}

/// Connections that send part of a request head and no more.
async fn slow_heads(addr: SocketAddr) -> Vec<TcpStream> {
    let mut slow = Vec::new();
    for opening in ["", "GET /whoami HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: "] {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(opening.as_bytes()).await.unwrap();
        slow.push(stream);
    }
    slow
}

#[tokio::test]
async fn a_slow_request_head_is_cut_at_the_header_read_timeout_and_an_idle_connection_is_not() {
    // Heads that may take an hour: others are served meanwhile.
    let patient = start(whoami(), |s| s.limits(timeouts(LONG, LONG))).await;
    let _slow = slow_heads(patient.addr).await;
    for _ in 0..3 {
        let mut sender = http1(TcpStream::connect(patient.addr).await.unwrap())
            .await
            .unwrap();
        let answer = within("served past slow heads", get_on(&mut sender, "/whoami")).await;
        assert_eq!(answer.unwrap(), (200, "anonymous".into()));
    }

    let hasty = start(whoami(), |s| s.limits(timeouts(SHORT, LONG))).await;
    // A keep-alive connection, idle after its request.
    let (mut idle, _) = watched_http1(TcpStream::connect(hasty.addr).await.unwrap()).await;
    assert_eq!(get_on(&mut idle, "/whoami").await.unwrap().0, 200);
    // Each slow head is closed, unanswered, once its time is up ...
    for mut stream in slow_heads(hasty.addr).await {
        let mut rest = Vec::new();
        within("the slow head is closed", stream.read_to_end(&mut rest))
            .await
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&rest), "", "answered");
    }
    // ... while the idle connection, idle for longer, is not: idle waits
    // are not timed as heads.
    assert_eq!(
        get_on(&mut idle, "/whoami").await.unwrap(),
        (200, "anonymous".into())
    );
}

#[tokio::test]
async fn a_body_that_stops_arriving_ends_in_error_and_the_request_is_still_answered() {
    // `/upload` reads its body and answers 408 naming what ended it.
    let router = Router::new().route(
        "/upload",
        axum::routing::post(|request: Request| async move {
            match axum::body::to_bytes(request.into_body(), usize::MAX).await {
                Ok(body) => (http::StatusCode::OK, format!("{} bytes", body.len())),
                Err(error) => {
                    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&error);
                    while let Some(inner) = cause.and_then(|e| e.source()) {
                        cause = Some(inner);
                    }
                    let timed_out =
                        cause.is_some_and(|e| e.is::<kubecache_server::transport::BodyTimedOut>());
                    (
                        http::StatusCode::REQUEST_TIMEOUT,
                        format!("timed out: {timed_out}"),
                    )
                }
            }
        }),
    );
    let running = start(router, |s| s.limits(timeouts(SHORT, LONG))).await;
    let mut stream = TcpStream::connect(running.addr).await.unwrap();
    stream
        .write_all(b"POST /upload HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")
        .await
        .unwrap();
    // Nothing more is sent: the answer comes, then the close.
    let mut answer = Vec::new();
    within("the answer and the close", stream.read_to_end(&mut answer))
        .await
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.ends_with("timed out: true"), "{answer}");
}

#[tokio::test]
async fn an_idle_connection_is_closed_at_the_idle_timeout_and_a_long_watch_is_not() {
    // `/watch` streams what the test sends until it stops sending.
    let (events, receiver) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    let receiver = Arc::new(parking_lot::Mutex::new(Some(receiver)));
    let router = Router::new()
        .route("/fast", get(|| async { "fast" }))
        .route(
            "/watch",
            get(move || async move {
                let receiver = receiver.lock().take().unwrap();
                axum::body::Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(receiver))
            }),
        );
    let running = start(router, |s| s.limits(timeouts(LONG, SHORT))).await;

    let (mut watching, watch_connection) =
        watched_http1(TcpStream::connect(running.addr).await.unwrap()).await;
    let request = http::Request::get("/watch")
        .header(http::header::HOST, "127.0.0.1")
        .body(Empty::new())
        .unwrap();
    let mut watch = watching.send_request(request).await.unwrap().into_body();
    events.send(Ok(Bytes::from("first"))).await.unwrap();
    let first = within("the first event", watch.frame()).await;
    assert_eq!(first.unwrap().unwrap().into_data().unwrap(), "first");

    // An idle keep-alive connection is closed ...
    let (mut idle, idle_connection) =
        watched_http1(TcpStream::connect(running.addr).await.unwrap()).await;
    assert_eq!(get_on(&mut idle, "/fast").await.unwrap().0, 200);
    within("the idle connection is closed", idle_connection)
        .await
        .unwrap()
        .unwrap();
    // ... and the watch, in flight for longer, goes on to its end.
    events.send(Ok(Bytes::from("second"))).await.unwrap();
    drop(events);
    let rest = within("the rest of the watch", watch.collect()).await;
    assert_eq!(rest.unwrap().to_bytes(), "second");
    drop(watching);
    within("the watch connection ends", watch_connection)
        .await
        .unwrap()
        .unwrap();
}

/// A connection from `source`, a loopback address (any of 127.0.0.0/8).
async fn connect_from(source: [u8; 4], addr: SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind((source, 0).into()).unwrap();
    socket.connect(addr).await.unwrap()
}

/// The Kubernetes `Status` of a body.
fn status(body: &str) -> serde_json::Value {
    let status: serde_json::Value =
        serde_json::from_str(body).unwrap_or_else(|e| panic!("not a Status ({e}): {body:?}"));
    assert_eq!(status["kind"], "Status", "{body}");
    status
}

#[tokio::test]
async fn connections_beyond_the_limits_get_a_429_status_and_probes_and_a_freed_place_is_served() {
    let running = start(kubecache_router(), |s| {
        s.limits(Limits {
            max_connections: 3,
            max_connections_per_address: 2,
            ..Limits::default()
        })
    })
    .await;
    let addr = running.addr;
    let (a, b) = ([127, 0, 0, 1], [127, 0, 0, 2]);
    let mut held = Vec::new();
    for _ in 0..2 {
        let (mut sender, _) = watched_http1(connect_from(a, addr).await).await;
        assert_eq!(get_on(&mut sender, "/metrics").await.unwrap().0, 200);
        held.push(sender);
    }
    // A third from the same address: a 429 Status, then closed.
    let refused = |source, path: &'static str| async move {
        let (mut sender, connection) = watched_http1(connect_from(source, addr).await).await;
        let answer = answer_on(&mut sender, http::Method::GET, path)
            .await
            .unwrap();
        within("the refused connection is closed", connection)
            .await
            .unwrap()
            .unwrap();
        answer
    };
    let answer = refused(a, "/metrics").await;
    assert_eq!(answer.status(), 429);
    assert_eq!(answer.headers()[http::header::RETRY_AFTER], "1");
    let body = status(answer.body());
    assert_eq!(body["reason"], "TooManyRequests");
    assert_eq!(body["details"]["retryAfterSeconds"], 1);
    assert!(
        body["message"].as_str().unwrap().contains("from 127.0.0.1"),
        "{body}"
    );
    // The kubelet's probe is answered all the same.
    let answer = refused(a, "/healthz").await;
    assert_eq!(
        (answer.status().as_u16(), answer.body().as_str()),
        (200, "ok")
    );
    // Another address gets the last place; beyond it, the total holds.
    let (mut other, _) = watched_http1(connect_from(b, addr).await).await;
    assert_eq!(get_on(&mut other, "/metrics").await.unwrap().0, 200);
    let answer = refused(b, "/metrics").await;
    assert_eq!(answer.status(), 429);
    assert!(
        status(answer.body())["message"]
            .as_str()
            .unwrap()
            .contains("most (3)"),
        "{}",
        answer.body()
    );
    let (_, text) = get_on(&mut other, "/metrics").await.unwrap();
    let refusals = |reason: &str| {
        let series = format!("kubecache_connections_refused_total{{reason=\"{reason}\"}}");
        scrape::value(&text, &series).unwrap_or(0.0)
    };
    assert!(refusals("max_connections_per_address") >= 2.0, "{text}");
    assert!(refusals("max_connections") >= 1.0, "{text}");

    // One closes: its place is served again.
    held.pop();
    within("a freed place is served", async {
        loop {
            let (mut sender, _) = watched_http1(connect_from(a, addr).await).await;
            if get_on(&mut sender, "/metrics").await.unwrap().0 == 200 {
                return;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
}

/// Sends `request` as is on a new connection; what comes back until the
/// server closes it: the code and the body.
async fn raw(addr: SocketAddr, request: &[u8]) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    within("the answer", stream.read_to_end(&mut answer))
        .await
        .unwrap();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let code = head.split(' ').nth(1).and_then(|c| c.parse().ok());
    (
        code.unwrap_or_else(|| panic!("no answer: {answer:?}")),
        body.into(),
    )
}

#[tokio::test]
async fn every_error_kubecache_answers_is_a_status_and_hyper_s_own_are_empty() {
    let running = start(kubecache_router(), |s| s).await;
    let addr = running.addr;
    // A method a path does not serve: 405, a Status.
    let (mut sender, _) = watched_http1(TcpStream::connect(addr).await.unwrap()).await;
    for (method, path) in [
        (http::Method::POST, "/healthz"),
        (http::Method::DELETE, "/metrics"),
        (http::Method::PUT, "/readyz"),
    ] {
        let answer = answer_on(&mut sender, method.clone(), path).await.unwrap();
        assert_eq!(answer.status(), 405, "{method} {path}: {}", answer.body());
        assert_eq!(status(answer.body())["reason"], "MethodNotAllowed");
    }
    // (413 for a body beyond the limit: `passthrough.rs`.)
    // What hyper answers before any handler, with no body (documented in
    // docs/api.md, "Errors"): a target beyond 65534 bytes, a head beyond
    // the limit, a request line that does not parse.
    let long_target = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(70_000));
    assert_eq!(
        raw(addr, long_target.as_bytes()).await,
        (414, String::new())
    );
    let big_head = format!(
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(kubecache_server::transport::MAX_HEADER_BYTES)
    );
    assert_eq!(raw(addr, big_head.as_bytes()).await, (431, String::new()));
    assert_eq!(
        raw(addr, b"\x01\x02 / HTTP/1.1\r\nHost: x\r\n\r\n").await,
        (400, String::new())
    );
    // A target of 65,534 bytes is served; one byte more is not.
    for (length, code) in [(65_534, 200), (65_535, 414)] {
        let target = format!("/healthz?x={}", "a".repeat(length - "/healthz?x=".len()));
        let request = format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        assert_eq!(raw(addr, request.as_bytes()).await.0, code, "{length}");
    }
    // Just within the limit: served.
    let within_limit = format!(
        "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: {}\r\n\r\n",
        "a".repeat(kubecache_server::transport::MAX_HEADER_BYTES - 100)
    );
    assert_eq!(raw(addr, within_limit.as_bytes()).await.0, 200);
}

// ---------------------------------------------------------------------------
// Capacity that hostile connections cannot take (issue 30)

/// Answers `/watch` with a line at once and another when `event` turns
/// true, as a watch opened and then sent an event.
fn watches(event: tokio::sync::watch::Receiver<bool>) -> Router {
    Router::new().route(
        "/watch",
        get(move || {
            let mut event = event.clone();
            async move {
                let opened = futures::stream::once(async { Ok(Bytes::from("watching\n")) });
                let sent = futures::stream::once(async move {
                    let _ = event.wait_for(|sent| *sent).await;
                    Ok::<_, std::convert::Infallible>(Bytes::from("event 1\n"))
                });
                axum::body::Body::from_stream(futures::StreamExt::chain(opened, sent))
            }
        }),
    )
}

#[tokio::test]
async fn a_burst_of_watches_from_a_few_addresses_beyond_their_allowance_opens_every_one() {
    const ADDRESSES: u8 = 10;
    const PER_ADDRESS: usize = 30;
    let (event, sent) = tokio::sync::watch::channel(false);
    // Far fewer at once before their first request than each address opens.
    let running = start(watches(sent), |s| {
        s.limits(Limits {
            max_pending_per_address: 4,
            ..Limits::default()
        })
    })
    .await;
    let addr = running.addr;
    // One connection per watch, as an HTTP/1.1 informer process opens
    // them: all connected first, then every request sent at once.
    let mut streams = Vec::new();
    for address in 1..=ADDRESSES {
        for _ in 0..PER_ADDRESS {
            streams.push(connect_from([127, 0, 0, address], addr).await);
        }
    }
    let request = b"GET /watch HTTP/1.1\r\nHost: x\r\n\r\n";
    for stream in &mut streams {
        stream.write_all(request).await.unwrap();
    }
    futures::future::join_all(streams.iter_mut().map(|s| read_until(s, "watching"))).await;
    event.send_replace(true);
    futures::future::join_all(streams.iter_mut().map(|s| read_until(s, "event 1"))).await;
}

/// kubecache's router, plus `/upload`, which reads its body whole and
/// says how long it was.
fn uploads() -> Router {
    Router::new()
        .route(
            "/upload",
            axum::routing::post(|body: Bytes| async move { body.len().to_string() }),
        )
        .fallback_service(kubecache_router())
}

/// A POST of a 10-byte body from `source` that asks for `100 Continue`
/// and then sends nothing.
async fn expect_continue(source: [u8; 4], addr: SocketAddr) -> TcpStream {
    let mut stream = connect_from(source, addr).await;
    let head = "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\
                Expect: 100-continue\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

/// Reads what comes on `stream` until `wanted` has all come.
async fn read_until(stream: &mut TcpStream, wanted: &str) {
    let mut read = Vec::new();
    within(&format!("{wanted:?} arrives"), async {
        while !String::from_utf8_lossy(&read).contains(wanted) {
            let mut buffer = [0u8; 1024];
            let n = stream.read(&mut buffer).await.unwrap();
            assert!(n > 0, "closed after {:?}", String::from_utf8_lossy(&read));
            read.extend_from_slice(&buffer[..n]);
        }
    })
    .await;
}

/// What comes on `stream` until the server closes it.
async fn rest(stream: &mut TcpStream) -> String {
    let mut rest = Vec::new();
    within("the connection is closed", stream.read_to_end(&mut rest))
        .await
        .unwrap();
    String::from_utf8_lossy(&rest).into_owned()
}

/// Answers a line and holds the request's body, unread, for as long as
/// its answer is read: its upload place is not given back.
fn holding() -> Router {
    use futures::StreamExt;
    Router::new().route(
        "/hold",
        axum::routing::post(|request: Request| async move {
            let body = request.into_body();
            let holding = futures::stream::once(async { Bytes::from("holding\n") })
                .chain(futures::stream::pending())
                .map(move |line| {
                    let _held = &body;
                    Ok::<_, std::convert::Infallible>(line)
                });
            axum::body::Body::from_stream(holding)
        }),
    )
}

#[tokio::test]
async fn an_answer_before_the_body_is_read_closes_and_reaches_a_client_still_sending_it() {
    use kubecache_server::transport::MAX_BODY;
    let (first, rest) = (vec![b' '; 8 * 1024], vec![b' '; 1024 * 1024]);
    // A body declared beyond the limit: a 413 at once, the body unread,
    // and the connection closed (heads and idle waits may take an hour),
    // lingering: the rest of the body, sent after the close, is taken.
    let running = start(uploads(), |s| s.limits(timeouts(LONG, LONG)).linger(LONG)).await;
    let head = format!(
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        MAX_BODY + 1024 * 1024
    );
    let addr = running.addr.to_string();
    let (code, head, body) = common::answered_early(&addr, &head, &first, &rest).await;
    assert_eq!(code, 413, "{body}");
    assert!(head.contains("\r\nconnection: close"), "{head}");
    assert_eq!(status(&body)["reason"], "RequestEntityTooLarge");

    // A body beyond its address's uploads, refused unread once a head's
    // time is up: the same.
    let running = start(holding(), |s| {
        s.limits(Limits {
            max_uploads_per_address: 1,
            ..timeouts(SHORT, LONG)
        })
        .linger(LONG)
    })
    .await;
    let mut holder = TcpStream::connect(running.addr).await.unwrap();
    let request = "POST /hold HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n";
    holder.write_all(request.as_bytes()).await.unwrap();
    read_until(&mut holder, "holding").await;
    let head = "POST /hold HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n";
    let addr = running.addr.to_string();
    let (code, head, body) = common::answered_early(&addr, head, &first, &rest).await;
    assert_eq!(code, 429, "{body}");
    assert!(head.contains("\r\nconnection: close"), "{head}");
    assert!(
        status(&body)["message"]
            .as_str()
            .unwrap()
            .contains("sending a body"),
        "{body}"
    );
}

#[tokio::test]
async fn requests_waiting_for_a_body_that_never_comes_take_no_one_else_s_place_and_are_cut_as_heads_are()
 {
    let limits = |header_read| Limits {
        header_read_timeout: header_read,
        max_connections: 4,
        max_connections_per_address: 4,
        max_uploads_per_address: 2,
        ..Limits::default()
    };
    let (a, b) = ([127, 0, 0, 1], [127, 0, 0, 2]);
    // Bodies that may be waited for an hour.
    let patient = start(uploads(), |s| s.limits(limits(LONG))).await;
    let addr = patient.addr;
    let mut holders = Vec::new();
    for _ in 0..2 {
        let mut holder = expect_continue(a, addr).await;
        read_until(&mut holder, "HTTP/1.1 100 Continue\r\n\r\n").await;
        holders.push(holder);
    }
    // Beyond the address's uploads: held, its body unread (past a head's
    // time, a 429: `limits`' tests) ...
    let mut waiting = expect_continue(a, addr).await;
    // ... and another address's requests and the probes are served.
    within("another address is served", async {
        loop {
            let (mut sender, _) = watched_http1(connect_from(b, addr).await).await;
            if get_on(&mut sender, "/metrics").await.unwrap().0 == 200 {
                assert_eq!(
                    get_on(&mut sender, "/healthz").await.unwrap(),
                    (200, "ok".into())
                );
                return;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    let mut nothing = [0u8; 1];
    let early = waiting.try_read(&mut nothing);
    assert!(early.is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock));
    // A body that comes is read, however long it was waited for, and its
    // place goes to the request held.
    holders[0].write_all(b"0123456789").await.unwrap();
    read_until(&mut holders[0], "\r\n\r\n10").await;
    read_until(&mut waiting, "HTTP/1.1 100 Continue\r\n\r\n").await;

    // With a short header-read timeout, a body waited for ends at it, as
    // a head would be cut; the handler's answer to that (here axum's 400
    // naming the cause; kubecache's pass-through answers 408) is sent
    // before the close. A body that comes is served.
    let hasty = start(uploads(), |s| s.limits(limits(SHORT))).await;
    let mut holder = expect_continue(a, hasty.addr).await;
    let answer = rest(&mut holder).await;
    assert!(
        answer.starts_with("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 400 ")
            && answer.ends_with("no byte within the header-read timeout"),
        "{answer}"
    );
    let mut sender = connect_from(a, hasty.addr).await;
    let request = "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\
                   Connection: close\r\n\r\n0123456789";
    sender.write_all(request.as_bytes()).await.unwrap();
    let answer = rest(&mut sender).await;
    assert!(
        answer.starts_with("HTTP/1.1 200 ") && answer.ends_with("\r\n\r\n10"),
        "{answer}"
    );
}

#[tokio::test]
async fn half_open_tls_handshakes_of_one_address_do_not_block_another_s_and_are_cut_at_the_deadline()
 {
    let pki = Pki::new("half-open");
    let config = client_config(&pki.ca_pem(), None);
    let files = tls_files(&pki, "kubecache", None);
    let server = |handshake| {
        let files = files.clone();
        move |s: Server| {
            s.tls(Some(Tls::load(files).unwrap()))
                .handshake_timeout(handshake)
                .limits(Limits {
                    max_connections: 4,
                    max_connections_per_address: 4,
                    max_pending_per_address: 2,
                    ..Limits::default()
                })
        }
    };
    // A started handshake record, then nothing: from one address, more
    // than every place (the admitted, then the refusals).
    let half_open = async |addr| {
        let mut held = Vec::new();
        for _ in 0..4 + kubecache_server::transport::REFUSALS + 4 {
            let mut stream = connect_from([127, 0, 0, 1], addr).await;
            stream.write_all(&[22, 3, 1]).await.unwrap();
            held.push(stream);
        }
        held
    };
    let from_b = async |addr| {
        let tcp = connect_from([127, 0, 0, 2], addr).await;
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let tls = tokio_rustls::TlsConnector::from(config.clone())
            .connect(name, tcp)
            .await
            .unwrap();
        get_on(&mut http1(tls).await.unwrap(), "/whoami")
            .await
            .unwrap()
    };
    // Handshakes that may take an hour: another address's is served.
    let patient = start(whoami(), server(LONG)).await;
    let _held = half_open(patient.addr).await;
    assert_eq!(
        within("another address is served", from_b(patient.addr)).await,
        (200, "anonymous".into())
    );
    // With a short deadline, every half-open handshake is cut at it,
    // unanswered (those beyond the refusals at once, with their bytes
    // unread: a reset).
    let hasty = start(whoami(), server(SHORT)).await;
    for mut stream in half_open(hasty.addr).await {
        let mut rest = Vec::new();
        let _ = within(
            "the half-open handshake is cut",
            stream.read_to_end(&mut rest),
        )
        .await;
        assert_eq!(rest, b"");
    }
    assert_eq!(
        within("another address is served", from_b(hasty.addr)).await,
        (200, "anonymous".into())
    );
}

#[tokio::test]
async fn the_health_listener_answers_while_every_connection_place_of_the_api_is_taken() {
    let kubeconfig = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("health-listener-{}.kubeconfig", std::process::id()));
    let (kubecache, api) = common::process::kubecache(
        &[
            "--simulate",
            "20",
            "--simulate-scheme",
            "http",
            "--auth",
            "none",
            "--kubeconfig-out",
            kubeconfig.to_str().unwrap(),
            "--max-connections",
            "2",
            "--max-pending-connections-per-address",
            "2",
            "--header-read-timeout-seconds",
            "3600",
        ],
        &[],
    );
    let serving = "serving /healthz, /livez and /readyz over HTTP";
    kubecache
        .logged("the health listener", |out| out.contains(serving))
        .await;
    let health: SocketAddr = kubecache
        .output()
        .lines()
        .find(|line| line.contains(serving))
        .and_then(|line| line.rsplit("listen=").next())
        .and_then(|address| address.trim().parse().ok())
        .expect("the health listener's address in the log");
    let probe = |address, path: &'static str| {
        kubecache_testkit::raw_http::get(address, None, path, None).map(|(code, _)| code)
    };
    kubecache
        .until("ready", async || matches!(probe(api, "/readyz"), Ok(200)))
        .await;
    // Silent connections take every place of the API's: the admitted,
    // then the refusals (each waits an hour for its head) ...
    let mut silent = Vec::new();
    for _ in 0..2 + kubecache_server::transport::REFUSALS {
        silent.push(TcpStream::connect(api).await.unwrap());
    }
    // ... so a probe on the API's port waits in the listen backlog ...
    let mut waiting = TcpStream::connect(api).await.unwrap();
    let request = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    waiting.write_all(request.as_bytes()).await.unwrap();
    let waiting = tokio::spawn(async move { rest(&mut waiting).await });
    // ... while the health listener answers every probe.
    for path in ["/healthz", "/livez", "/readyz"] {
        assert_eq!(probe(health, path).unwrap(), 200, "{path}");
    }
    assert!(
        !waiting.is_finished(),
        "the API's places were not all taken"
    );
    // Places freed, the API's port answers again.
    drop(silent);
    let answer = waiting.await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
}
