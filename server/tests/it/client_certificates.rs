//! Client certificates read exactly as kube-apiserver v1.28 reads them: the
//! edge corpus's `client-cert` cases (its README) replayed against
//! kubecache over HTTPS, with the recording's CA as its client CA, in front
//! of the sim with the demo policy. Each recorded pod list gets the recorded
//! code (401 and 403 with the recorded body), each certificate
//! kube-apiserver could not parse fails the handshake as it did (over TLS
//! 1.2 too), and what passes through is judged the same.
//!
//! Not replayed: the SelfSubjectReviews (`POST`) that got an answer, which
//! the sim does not give yet, and `cert-ns-reader-sa-list-team-a` (not a
//! pod list of `payments-prod`: its 200 comes from the recording's
//! RoleBinding of the ServiceAccount `team-a/ns-reader`, which the demo
//! policy does not have). Every case replayed gets the recorded answer.

use crate::common;

use std::sync::Arc;

use bytes::Bytes;
use common::pki::{Pki, tls_files};
use common::{Served, Setup};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use kubecache_loadtest::sim::auth::demo::{DEVELOPER, NAMESPACE};
use kubecache_loadtest::sim::{Policy, RoleRef, SimConfig, Subject};
use kubecache_server::transport::Tls;
use kubecache_testkit::golden;
use kubecache_testkit::pki::der;
use kubecache_testkit::wait::within;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::Value;

/// The pod list every `client-cert` case but the SelfSubjectReviews sends.
const POD_LIST: &str = "/api/v1/namespaces/payments-prod/pods?limit=1";

async fn served(pki: &Pki) -> Served {
    let client_ca = String::from_utf8(golden::read("edges/certs/ca.crt")).unwrap();
    // The recording binds alice's Role to the user alice; the demo policy
    // binds it to her group payments-devs, which no certificate names.
    let policy = Policy::demo().binding(
        NAMESPACE,
        "developer-alice",
        RoleRef::Role("developer".into()),
        vec![Subject::User(DEVELOPER.into())],
    );
    common::serve(Setup {
        sim: SimConfig {
            pods: 200,
            namespaces: 6,
            policy: Some(policy),
            ..SimConfig::default()
        },
        tls: Some(Tls::load(tls_files(pki, "kubecache", Some(&client_ca))).unwrap()),
        auth: Some(common::matrix_auth()),
        ..Setup::default()
    })
    .await
}

/// What came back: an answer, or the TLS error instead of one.
enum Outcome {
    Answer(u16, Bytes),
    Refused(String),
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Answer(code, body) => {
                let head = &body[..body.len().min(200)];
                write!(f, "{code} {}", String::from_utf8_lossy(head))
            }
            Outcome::Refused(error) => write!(f, "refused: {error}"),
        }
    }
}

/// Sends the request of `case` (its headers but `Host` and `Connection`,
/// whose values are ASCII here, and its body) to `url` on a new
/// connection that presents the case's certificate chain and key, over
/// TLS 1.2 for the case recorded so, else TLS 1.3.
async fn replay(url: &str, server_ca: &str, case: &Value) -> Outcome {
    let file = |field: &str| golden::read(&format!("edges/{}", case[field].as_str().unwrap()));
    let chain = CertificateDer::pem_slice_iter(&file("client_cert"))
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(&file("client_key")).unwrap();
    let version = match case["id"].as_str().unwrap().contains("tls12") {
        true => &rustls::version::TLS12,
        false => &rustls::version::TLS13,
    };
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der(server_ca)).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[version])
    .unwrap()
    .with_root_certificates(roots)
    .with_client_auth_cert(chain, key)
    .unwrap();
    let authority = url.trim_start_matches("https://");
    let tcp = tokio::net::TcpStream::connect(authority).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let stream = match tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
    {
        Ok(stream) => stream,
        Err(error) => return Outcome::Refused(error.to_string()),
    };
    let mut request = http::Request::builder()
        .method(case["method"].as_str().unwrap())
        .uri(case["path"].as_str().unwrap())
        .header(http::header::HOST, authority);
    for header in case["request_headers"].as_array().unwrap() {
        let (name, value) = (header[0].as_str().unwrap(), header[1].as_str().unwrap());
        if !["host", "connection"].contains(&name.to_ascii_lowercase().as_str()) {
            request = request.header(name, value);
        }
    }
    let body = case["request_body_file"]
        .as_str()
        .map_or_else(Vec::new, |file| golden::read(&format!("edges/{file}")));
    let request = request.body(Full::new(Bytes::from(body))).unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    let connection = tokio::spawn(connection);
    let response = match sender.send_request(request).await {
        Ok(response) => response,
        // TLS 1.3: the client finishes its side of the handshake before
        // the server reads its certificate, and sees the alert on its
        // first read, which hyper's connection reports (or, when the
        // connection task saw the close first and ended cleanly, the
        // request's own error does).
        Err(error) => {
            let ended = connection.await.unwrap();
            return Outcome::Refused(causes(&ended.err().unwrap_or(error)));
        }
    };
    let code = response.status().as_u16();
    Outcome::Answer(
        code,
        response.into_body().collect().await.unwrap().to_bytes(),
    )
}

/// An error and its sources.
fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_recorded_client_certificate_gets_the_api_server_s_answer() {
    let pki = Pki::new("client-certificates");
    let served = served(&pki).await;
    let Value::Array(cases) = golden::json("edges/manifest.json") else {
        panic!("edges/manifest.json is not an array");
    };
    // The TLS 1.2 try of univ-o sends no request: its handshake fails.
    let replayed = cases.iter().filter(|case| {
        case["group"] == "client-cert"
            && (case["method"] == "GET" && case["path"] == POD_LIST
                || case["id"] == "cert-univ-o-tls12-ssr")
    });
    let mut differences = Vec::new();
    let mut count = 0;
    for case in replayed {
        let id = case["id"].as_str().unwrap();
        let outcome = within(id, replay(&served.url, &pki.ca_pem(), case)).await;
        let same = match (&outcome, case["status"].as_u64()) {
            // kube-apiserver's alert bad_certificate.
            (Outcome::Refused(error), None) => error.contains("BadCertificate"),
            (Outcome::Answer(code, _), Some(200)) => *code == 200,
            (Outcome::Answer(code, body), Some(recorded)) => {
                u64::from(*code) == recorded && *body == golden::edge_body(case)
            }
            _ => false,
        };
        if !same {
            differences.push(format!("{id}: {outcome}"));
        }
        count += 1;
    }
    assert_eq!(differences, Vec::<String>::new());
    assert_eq!(
        count, 27,
        "25 certificates, one with a token, univ-o over TLS 1.2"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_passes_through_is_judged_the_same() {
    let pki = Pki::new("client-certificates-passthrough");
    let served = served(&pki).await;
    // Config maps are not cached here: the API server answers, kubecache
    // impersonating a verified certificate's user.
    for (id, code) in [
        ("cert-alice-list", 200),
        ("cert-rogue-admin-plus-eve-token-list", 403),
        ("cert-expired-list", 401),
    ] {
        let mut case = golden::edge(id);
        case["path"] = "/api/v1/namespaces/payments-prod/configmaps".into();
        let Outcome::Answer(got, body) =
            within(id, replay(&served.url, &pki.ca_pem(), &case)).await
        else {
            panic!("{id}: refused at the handshake");
        };
        assert_eq!(got, code, "{id}");
        if code == 401 {
            assert_eq!(body, golden::edge_body(&case), "{id}: the API server's 401");
        }
    }
}
