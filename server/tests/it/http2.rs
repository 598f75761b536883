//! HTTP/2 over TLS: many watches multiplexed on a few connections, each
//! complete; the bound on streams per connection, told in SETTINGS and
//! enforced; rapid reset ended by GOAWAY without touching other clients.
//! (A stream that never reads is reset alone: `transport::http2`'s unit
//! test, on paused time.)

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use common::pki::{Pki, tls_files};
use common::{Setup, WatchLines, describe, serve};
use kubecache_loadtest::raw_h2::{
    CANCEL, ENHANCE_YOUR_CALM, GOAWAY, Get, PING, REFUSED_STREAM, RST_STREAM, RawH2, SETTINGS,
    SETTINGS_MAX_CONCURRENT_STREAMS, frame,
};
use kubecache_loadtest::sim::ids;
use kubecache_server::transport::{Limits, Server, Tls};
use kubecache_testkit::pki;
use kubecache_testkit::wait::{PATIENCE, within};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

const PODS: &str = "/api/v1/pods";

/// A TLS connection to `addr` that asked for HTTP/2 and got it.
async fn h2_tls(addr: SocketAddr, ca_pem: &str) -> TlsStream<TcpStream> {
    let mut config = pki::client_config(ca_pem, None);
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let stream = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    stream
}

/// An HTTP/2 client connection (the h2 crate, as hyper's client uses it)
/// with Go's client's windows: 4 MiB a stream, 1 GiB the connection.
async fn h2_client(addr: SocketAddr, ca_pem: &str) -> h2::client::SendRequest<Bytes> {
    h2_client_windowed(addr, ca_pem, 4 << 20).await
}

/// The same with a stream window of `window` bytes.
async fn h2_client_windowed(
    addr: SocketAddr,
    ca_pem: &str,
    window: u32,
) -> h2::client::SendRequest<Bytes> {
    let (sender, connection) = h2::client::Builder::new()
        .initial_window_size(window)
        .initial_connection_window_size(1 << 30)
        .handshake(h2_tls(addr, ca_pem).await)
        .await
        .unwrap();
    tokio::spawn(connection);
    sender
}

/// GET `path` on an HTTP/2 connection: the response, its body unread.
async fn h2_get(
    sender: &mut h2::client::SendRequest<Bytes>,
    path: &str,
) -> http::Response<h2::RecvStream> {
    let request = http::Request::get(format!("https://127.0.0.1{path}"))
        .body(())
        .unwrap();
    let (response, _) = sender
        .clone()
        .ready()
        .await
        .unwrap()
        .send_request(request, true)
        .unwrap();
    response.await.unwrap()
}

/// The first `n` events (bookmarks skipped) of a watch's body.
async fn h2_events(mut body: h2::RecvStream, n: usize) -> Vec<Value> {
    let mut buffer = Vec::new();
    let mut events = Vec::new();
    while events.len() < n {
        let Some(data) = body.data().await else {
            break;
        };
        let data = data.unwrap();
        body.flow_control().release_capacity(data.len()).unwrap();
        buffer.extend_from_slice(&data);
        while let Some(end) = buffer.iter().position(|&b| b == b'\n') {
            let line: Value = serde_json::from_slice(&buffer[..end]).unwrap();
            buffer.drain(..=end);
            if line["type"] != "BOOKMARK" {
                events.push(line);
            }
        }
    }
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_watches_from_one_client_share_a_handful_of_connections_and_each_is_complete() {
    const WATCHES: usize = 1000;
    const WRITES: usize = 20;
    let pki = Pki::new("http2-watches");
    let served = serve(Setup {
        sim: kubecache_loadtest::sim::SimConfig {
            pods: 200,
            ..Default::default()
        },
        tls: Some(Tls::load(tls_files(&pki, "kubecache", None)).unwrap()),
        ..Setup::default()
    })
    .await;
    let addr: SocketAddr = served.url.trim_start_matches("https://").parse().unwrap();
    // kubecache has caught up with the API server: watch from there.
    let rv = served.sim.store().revision();
    let reader = &served.caches.iter().next().unwrap().reader;
    within("kubecache caught up", reader.wait_for(rv, PATIENCE))
        .await
        .unwrap();
    let query = format!("{PODS}?watch=1&resourceVersion={rv}");
    let reference = WatchLines::open(served.sim.url(), &query).await;

    // As client-go's transport does: streams on a connection until the
    // server's SETTINGS say it is full, then a new connection.
    let mut connections = vec![h2_client(addr, &pki.ca_pem()).await];
    let mut on_last = 0;
    let mut watches = Vec::new();
    for _ in 0..WATCHES {
        let limit = connections.last().unwrap().current_max_send_streams();
        if on_last == limit {
            connections.push(h2_client(addr, &pki.ca_pem()).await);
            on_last = 0;
        }
        let response = h2_get(connections.last_mut().unwrap(), &query).await;
        assert_eq!(response.status(), 200);
        on_last += 1;
        watches.push(tokio::spawn(h2_events(response.into_body(), WRITES)));
    }
    assert_eq!(
        connections.len(),
        WATCHES / Limits::default().http2_max_streams_per_connection
    );
    // The per-client watch quota counts streams, not connections.
    let extra = h2_get(&mut h2_client(addr, &pki.ca_pem()).await, &query).await;
    assert_eq!(extra.status(), 429);

    let pods = served.sim.state(ids::PODS);
    for pod in pods.iter().take(WRITES) {
        let patch = json!({"metadata": {"labels": {"kubecache-http2": "on"}}});
        served
            .sim
            .store()
            .merge_patch(ids::PODS, &pod.namespace, &pod.name, &patch)
            .unwrap();
    }
    let expected: Vec<String> = within("the API server's events", reference.events(WRITES))
        .await
        .iter()
        .map(describe)
        .collect();
    assert_eq!(expected.len(), WRITES);
    for (i, watch) in watches.into_iter().enumerate() {
        let events = within("every event of every watch", watch).await.unwrap();
        let described: Vec<String> = events.iter().map(describe).collect();
        assert_eq!(described, expected, "watch {i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_left_unread_is_reset_alone_and_its_neighbour_on_the_connection_gets_every_event() {
    const WRITES: usize = 5;
    let pki = Pki::new("http2-unread");
    let served = serve(Setup {
        sim: kubecache_loadtest::sim::SimConfig {
            pods: 300,
            ..Default::default()
        },
        tls: Some(Tls::load(tls_files(&pki, "kubecache", None)).unwrap()),
        write_stall: std::time::Duration::from_secs(2),
        ..Setup::default()
    })
    .await;
    let addr: SocketAddr = served.url.trim_start_matches("https://").parse().unwrap();
    // A small stream window, so that the first pods fill it.
    let mut connection = h2_client_windowed(addr, &pki.ca_pem(), 64 * 1024).await;
    let everything = format!("{PODS}?watch=1&resourceVersion=0");
    let unread = h2_get(&mut connection, &everything).await;
    assert_eq!(unread.status(), 200);
    let mut unread = unread.into_body();
    let read = h2_get(&mut connection, &everything).await;
    assert_eq!(read.status(), 200);
    let pods = served.sim.state(ids::PODS);
    let watching = tokio::spawn(h2_events(read.into_body(), pods.len() + WRITES));

    // What the client took in before its window closed, then the reset:
    // its window is never opened again (no capacity released).
    let reason = within("the unread watch's reset", async {
        loop {
            match unread.data().await {
                Some(Ok(_)) => {}
                Some(Err(error)) => break error.reason(),
                None => break None,
            }
        }
    })
    .await;
    assert_eq!(reason, Some(h2::Reason::CANCEL));

    for pod in pods.iter().take(WRITES) {
        let patch = json!({"metadata": {"labels": {"kubecache-http2": "on"}}});
        served
            .sim
            .store()
            .merge_patch(ids::PODS, &pod.namespace, &pod.name, &patch)
            .unwrap();
    }
    let events = within("every event of the read watch", watching)
        .await
        .unwrap();
    let modified: Vec<&str> = events[pods.len()..]
        .iter()
        .map(|event| event["object"]["metadata"]["name"].as_str().unwrap())
        .collect();
    let written: Vec<&str> = pods[..WRITES].iter().map(|pod| pod.name.as_str()).collect();
    assert_eq!(modified, written);
    // The connection itself goes on.
    let again = h2_get(&mut connection, &format!("{PODS}?limit=1")).await;
    assert_eq!(again.status(), 200);
}

// ---------------------------------------------------------------------------
// Frames by hand (`kubecache_loadtest::raw_h2`), for clients no HTTP/2
// library lets one be.

/// A raw HTTP/2 connection to `addr` over TLS.
async fn raw_connection(addr: SocketAddr, ca_pem: &str) -> RawH2<TlsStream<TcpStream>> {
    RawH2::open(h2_tls(addr, ca_pem).await).await.unwrap()
}

/// A router whose `/hold` never answers and `/fast` answers at once.
fn holding() -> axum::Router {
    axum::Router::new()
        .route("/hold", axum::routing::get(std::future::pending::<&str>))
        .route("/fast", axum::routing::get(|| async { "fast" }))
}

/// A server task, stopped when dropped.
struct Running(tokio::task::JoinHandle<()>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// [`holding`] served over TLS within `limits`, until dropped.
async fn start(pki: &Pki, limits: Limits) -> (SocketAddr, Running) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let tls = Tls::load(tls_files(pki, "kubecache", None)).unwrap();
    let server = Server::new(listener, holding())
        .tls(Some(tls))
        .limits(limits);
    (
        addr,
        Running(tokio::spawn(server.serve(std::future::pending()))),
    )
}

/// GET `/fast` on an HTTP/2 connection: its body.
async fn fast(sender: &mut h2::client::SendRequest<Bytes>) -> Bytes {
    let response = h2_get(sender, "/fast").await;
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let mut all = BytesMut::new();
    while let Some(data) = body.data().await {
        all.extend_from_slice(&data.unwrap());
    }
    all.freeze()
}

#[tokio::test]
async fn the_streams_of_a_connection_are_bounded_as_its_settings_say() {
    const STREAMS: u32 = 7;
    let pki = Pki::new("http2-streams");
    let limits = Limits {
        http2_max_streams_per_connection: STREAMS as usize,
        ..Limits::default()
    };
    let (addr, _server) = start(&pki, limits).await;

    let mut raw = raw_connection(addr, &pki.ca_pem()).await;
    let settings = within("the server's SETTINGS", raw.until(SETTINGS, 0))
        .await
        .unwrap();
    let told = settings.setting(SETTINGS_MAX_CONCURRENT_STREAMS);
    assert_eq!(told, Some(STREAMS));
    // A client that ignores them: one stream more than it was told.
    let mut requests = BytesMut::new();
    for n in 0..=STREAMS {
        Get::new("/hold").frame(&mut requests, 2 * n + 1);
    }
    raw.send(&requests).await.unwrap();
    let beyond = 2 * STREAMS + 1;
    let refused = within("the refusal", raw.until(RST_STREAM, beyond))
        .await
        .expect("refused, not the connection closed");
    assert_eq!(refused.error_code(), Some(REFUSED_STREAM));

    // A client that keeps to them is served on its connection.
    let mut polite = h2_client(addr, &pki.ca_pem()).await;
    assert_eq!(fast(&mut polite).await, "fast");
    assert_eq!(polite.current_max_send_streams(), STREAMS as usize);
}

#[tokio::test]
async fn a_client_resetting_streams_in_a_loop_gets_goaway_and_others_are_served() {
    let pki = Pki::new("http2-rapid-reset");
    let (addr, _server) = start(&pki, Limits::default()).await;
    let mut other = h2_client(addr, &pki.ca_pem()).await;
    assert_eq!(fast(&mut other).await, "fast");

    let mut attacker = raw_connection(addr, &pki.ca_pem()).await;
    within("the server's SETTINGS", attacker.until(SETTINGS, 0))
        .await
        .unwrap();
    let mut stream = 1u32;
    let mut sent = 0;
    // Each round a batch of requests, each reset as soon as sent (what
    // CVE-2023-44487's clients do), until the server sends GOAWAY.
    let goaway = within("GOAWAY", async {
        loop {
            let mut batch = BytesMut::new();
            for _ in 0..50 {
                Get::new("/fast").frame(&mut batch, stream);
                frame(&mut batch, RST_STREAM, 0, stream, &CANCEL.to_be_bytes());
                stream += 2;
                sent += 1;
            }
            if attacker.send(&batch).await.is_err() {
                break attacker.until(GOAWAY, 0).await;
            }
            // What the server has answered so far, without waiting.
            let (arrived, _) = attacker.arrived();
            if let Some(goaway) = arrived.into_iter().find(|f| f.kind == GOAWAY) {
                return Some(goaway);
            }
            assert!(sent < 100_000, "no GOAWAY after {sent} resets");
        }
    })
    .await
    .expect("GOAWAY before the connection closed");
    assert_eq!(goaway.error_code(), Some(ENHANCE_YOUR_CALM), "{goaway:?}");

    // The other client's connection, and new ones, are served.
    assert_eq!(fast(&mut other).await, "fast");
    let mut new = h2_client(addr, &pki.ca_pem()).await;
    assert_eq!(fast(&mut new).await, "fast");
}

#[tokio::test]
async fn a_client_flooding_settings_or_pings_and_reading_the_acks_gets_goaway_enhance_your_calm() {
    let pki = Pki::new("http2-control-floods");
    let (addr, _server) = start(&pki, Limits::default()).await;
    let mut other = h2_client(addr, &pki.ca_pem()).await;
    for kind in [SETTINGS, PING] {
        let mut flooder = raw_connection(addr, &pki.ca_pem()).await;
        within("the server's SETTINGS", flooder.until(SETTINGS, 0))
            .await
            .unwrap();
        let mut sent = 0u64;
        // Batches of frames, the acknowledgements read between them.
        let goaway = within("GOAWAY", async {
            loop {
                let mut batch = BytesMut::new();
                for _ in 0..100 {
                    let payload = if kind == PING {
                        &sent.to_be_bytes()[..]
                    } else {
                        &[]
                    };
                    frame(&mut batch, kind, 0, 0, payload);
                    sent += 1;
                }
                if flooder.send(&batch).await.is_err() {
                    break flooder.until(GOAWAY, 0).await;
                }
                let (arrived, ended) = flooder.arrived();
                if let Some(goaway) = arrived.into_iter().find(|f| f.kind == GOAWAY) {
                    return Some(goaway);
                }
                assert!(!ended, "closed without GOAWAY after {sent}");
                assert!(sent < 1_000_000, "no GOAWAY after {sent} frames of {kind}");
            }
        })
        .await
        .expect("GOAWAY before the connection closed");
        assert_eq!(goaway.error_code(), Some(ENHANCE_YOUR_CALM), "{goaway:?}");
        // 1,000 in 10 s, and what was on its way meanwhile.
        assert!(sent < 50_000, "{sent} frames of {kind} before GOAWAY");
    }
    // A client pinging now and then, and everyone else, is served.
    assert_eq!(fast(&mut other).await, "fast");
    let mut new = h2_client(addr, &pki.ca_pem()).await;
    assert_eq!(fast(&mut new).await, "fast");
}

#[tokio::test]
async fn a_connection_waits_its_first_request_the_header_read_timeout_and_no_stream_the_idle_one() {
    const SHORT: std::time::Duration = std::time::Duration::from_millis(200);
    const LONG: std::time::Duration = std::time::Duration::from_secs(3600);
    let pki = Pki::new("http2-timeouts");
    let hasty_heads = Limits {
        header_read_timeout: SHORT,
        idle_timeout: LONG,
        ..Limits::default()
    };
    let (addr, _server) = start(&pki, hasty_heads).await;
    // A connection that never sends a request is closed, ...
    let mut silent = raw_connection(addr, &pki.ca_pem()).await;
    within("the silent connection is closed", async {
        while silent.next().await.is_some() {}
    })
    .await;
    // ... one with a request in flight is not.
    let mut holding = h2_client(addr, &pki.ca_pem()).await;
    let held = tokio::spawn(async move { h2_get(&mut holding, "/hold").await });
    let mut other = h2_client(addr, &pki.ca_pem()).await;
    assert_eq!(fast(&mut other).await, "fast");
    assert!(!held.is_finished());

    let hasty_idle = Limits {
        header_read_timeout: LONG,
        idle_timeout: SHORT,
        ..Limits::default()
    };
    let (addr, _server) = start(&pki, hasty_idle).await;
    let (mut sender, mut connection) = h2::client::handshake(h2_tls(addr, &pki.ca_pem()).await)
        .await
        .unwrap();
    let mut pings = connection.ping_pong().unwrap();
    let connection = tokio::spawn(connection);
    assert_eq!(fast(&mut sender).await, "fast");
    // Pinging is not a request: with no stream open, the connection is
    // closed at the idle timeout all the same.
    within("the idle connection is closed", async {
        while pings.ping(h2::Ping::opaque()).await.is_ok() {
            // Pacing, not a wait: a ping every quarter of the idle timeout keeps
            // the connection busy through it; the condition is the failed ping.
            tokio::time::sleep(SHORT / 4).await;
        }
    })
    .await;
    within("the connection ends", connection)
        .await
        .unwrap()
        .ok();
}
