//! TLS of the load generator's clients of kubecache: rustls on ring (the
//! workspace's one TLS stack), trusting the CA kubecache's serving
//! certificate is signed by and nothing else, one configuration for
//! reqwest's clients and the chaos run's raw sockets.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// ALPN protocol names.
pub const H2: &[u8] = b"h2";
/// HTTP/1.1's.
pub const HTTP1: &[u8] = b"http/1.1";

/// Client-go's HTTP/2 windows (Go's transport): 4 MiB a stream, 1 GiB the
/// connection, so that a stream its reader lets fill does not stall the
/// others on the connection.
const STREAM_WINDOW: u32 = 4 << 20;
const CONNECTION_WINDOW: u32 = 1 << 30;

/// The roots the clients trust.
#[derive(Clone)]
pub struct ClientTls {
    roots: Arc<rustls::RootCertStore>,
}

impl ClientTls {
    /// Trusting the certificates of `ca_files` (PEM); none without one, so
    /// that only plain-HTTP URLs can be reached.
    pub fn load<'a>(ca_files: impl IntoIterator<Item = &'a Path>) -> anyhow::Result<Self> {
        let mut roots = rustls::RootCertStore::empty();
        for path in ca_files {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(Iterator::collect::<Result<Vec<_>, _>>)
                .with_context(|| format!("caFile: {}", path.display()))?;
            anyhow::ensure!(
                !certs.is_empty(),
                "caFile: {} holds no certificate",
                path.display()
            );
            for cert in certs {
                roots
                    .add(cert)
                    .with_context(|| format!("caFile: {}", path.display()))?;
            }
        }
        Ok(ClientTls {
            roots: Arc::new(roots),
        })
    }

    /// A rustls configuration offering `alpn`.
    pub fn config(&self, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .with_root_certificates(self.roots.clone())
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    }

    /// An HTTP client builder as client-go's: HTTP/2 when the server offers
    /// it (its streams multiplexed on one connection), with Go's windows.
    pub fn http(&self) -> reqwest::ClientBuilder {
        reqwest::Client::builder()
            .use_preconfigured_tls((*self.config(&[H2, HTTP1])).clone())
            .http2_initial_stream_window_size(STREAM_WINDOW)
            .http2_initial_connection_window_size(CONNECTION_WINDOW)
    }

    /// An HTTP/1.1 client builder as an informer process of its own: HTTP/1.1
    /// only, and no connection kept once its request is answered, so that
    /// each of its requests in flight is a TCP connection of its own.
    pub fn http1(&self) -> reqwest::ClientBuilder {
        reqwest::Client::builder()
            .use_preconfigured_tls((*self.config(&[HTTP1])).clone())
            .http1_only()
            .pool_max_idle_per_host(0)
    }

    /// A connector offering `alpn`, for raw connections.
    pub fn connector(&self, alpn: &[&[u8]]) -> TlsConnector {
        TlsConnector::from(self.config(alpn))
    }
}

/// The TLS handshake of `connector` over `tcp` with `host` (a name or an
/// address, as the URL says it), within 10 s.
pub async fn handshake(
    connector: &TlsConnector,
    host: &str,
    tcp: TcpStream,
) -> std::io::Result<TlsStream<TcpStream>> {
    let name = ServerName::try_from(host.to_owned())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    tokio::time::timeout(Duration::from_secs(10), connector.connect(name, tcp))
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_without_certificates_is_refused() {
        let path = std::env::temp_dir().join(format!("loadtest-empty-ca-{}", std::process::id()));
        std::fs::write(&path, "not a certificate\n").unwrap();
        let refused = ClientTls::load(Some(path.as_path())).err().unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(
            format!("{refused:#}").contains("no certificate"),
            "{refused:#}"
        );
    }
}
