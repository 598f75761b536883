//! TLS serving: the certificate, its key and the optional client CA, read
//! from files and reloaded when they change; the handshake of one
//! connection, and the client certificate it brought (see `client_cert`).
//!
//! Rotation (cert-manager renews the Secret, the kubelet swaps the mounted
//! files through a symlink) is seen by polling: every
//! [`Tls::RELOAD_INTERVAL`] the three paths are read again (following
//! symlinks, so a swapped directory is seen like an edited file) and, if any
//! content changed, a new configuration is built. New connections get it;
//! open ones keep the one they shook hands with. A new file that does not
//! load (a half-written pair, a key that does not match) is logged and the
//! served configuration kept, until the files change again.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{RootCertStore, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use super::client_cert::{ClientCa, ClientCertificate};

/// Where TLS serving reads its files from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The serving certificate chain (PEM), leaf first.
    pub cert: PathBuf,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// CA certificates (PEM) that client certificates are verified against;
    /// without it no client certificate is asked for.
    pub client_ca: Option<PathBuf>,
}

/// Which of the [`TlsFiles`] an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsFile {
    /// [`TlsFiles::cert`].
    Cert,
    /// [`TlsFiles::key`].
    Key,
    /// [`TlsFiles::client_ca`].
    ClientCa,
}

/// A TLS file that cannot be read or used.
#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", path.display())]
pub struct TlsError {
    /// Which file.
    pub file: TlsFile,
    /// Its path.
    pub path: PathBuf,
    /// What is wrong.
    pub message: String,
}

/// TLS serving: the rustls configuration new connections get, replaced when
/// the files change. Cheap to clone; the clones share it.
#[derive(Clone)]
pub struct Tls {
    files: Arc<TlsFiles>,
    current: Arc<RwLock<Serving>>,
    /// What the files held at the last load attempt, good or bad: a change
    /// is tried once, and a broken file is logged once.
    seen: Arc<Mutex<Contents>>,
    reload_interval: Duration,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("files", &self.files)
            .field("reload_interval", &self.reload_interval)
            .finish_non_exhaustive()
    }
}

/// The three files' bytes, or why one could not be read.
type Contents = [Result<Vec<u8>, String>; 3];

/// What new connections get: the rustls configuration, and the client CA
/// their certificates are verified against.
#[derive(Clone)]
struct Serving {
    config: Arc<ServerConfig>,
    client_ca: Option<Arc<ClientCa>>,
}

/// A configuration built from the files, and what to say about it.
struct Loaded {
    serving: Serving,
    /// The serving certificate's notAfter, in Unix seconds.
    not_after: i64,
    subject: String,
}

impl Tls {
    /// How often the files are checked for a change: a rotation is served
    /// within this of the kubelet updating the mounted Secret.
    pub const RELOAD_INTERVAL: Duration = Duration::from_secs(5);

    /// Loads the files.
    ///
    /// # Errors
    ///
    /// A file cannot be read, holds no usable PEM, the key does not match
    /// the certificate, or the client CA holds no usable certificate.
    pub fn load(files: TlsFiles) -> Result<Tls, TlsError> {
        let contents = read(&files);
        let loaded = build(&files, &contents)?;
        register(&loaded);
        Ok(Tls {
            files: Arc::new(files),
            current: Arc::new(RwLock::new(loaded.serving)),
            seen: Arc::new(Mutex::new(contents)),
            reload_interval: Self::RELOAD_INTERVAL,
        })
    }

    /// The same, checking the files every `interval` instead of
    /// [`Tls::RELOAD_INTERVAL`].
    #[must_use]
    pub fn reload_every(mut self, interval: Duration) -> Tls {
        self.reload_interval = interval;
        self
    }

    /// The files it serves.
    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// Checks the files every reload interval, for as long as it is polled.
    pub(super) async fn reload_forever(self) {
        let mut ticks = tokio::time::interval(self.reload_interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await; // the first tick is now: the files were just loaded
        loop {
            ticks.tick().await;
            self.reload();
        }
    }

    /// Loads the files again if their content changed since the last try.
    fn reload(&self) {
        let contents = read(&self.files);
        {
            let mut seen = self.seen.lock();
            if *seen == contents {
                return;
            }
            seen.clone_from(&contents);
        }
        match build(&self.files, &contents) {
            Ok(loaded) => {
                tracing::info!(
                    cert = %self.files.cert.display(),
                    subject = %loaded.subject,
                    not_after = loaded.not_after,
                    "TLS: reloaded the certificate; new connections use it"
                );
                metrics::counter!("kubecache_tls_reloads_total", "result" => "loaded").increment(1);
                register(&loaded);
                *self.current.write() = loaded.serving;
            }
            Err(error) => {
                tracing::warn!(
                    %error,
                    "TLS: the changed files do not load; still serving the previous certificate"
                );
                metrics::counter!("kubecache_tls_reloads_total", "result" => "failed").increment(1);
            }
        }
    }

    /// The handshake of one accepted connection, with the configuration of
    /// the moment; the stream and the client certificate chain it brought,
    /// if any. A plain HTTP request gets a 400 Status saying to use HTTPS,
    /// as kube-apiserver answers one.
    pub(super) async fn accept(
        &self,
        mut stream: TcpStream,
    ) -> std::io::Result<(TlsStream<TcpStream>, Option<ClientCertificate>)> {
        let mut first = [0u8; 1];
        let read = stream.peek(&mut first).await?;
        // Every TLS connection starts with a handshake record (type 22).
        if read == 1 && first[0] != 22 {
            if first[0].is_ascii_uppercase() {
                refuse_plain_http(&mut stream).await?;
            }
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not a TLS handshake",
            ));
        }
        let Serving { config, client_ca } = self.current.read().clone();
        let stream = tokio_rustls::TlsAcceptor::from(config)
            .accept(stream)
            .await?;
        let chain = stream
            .get_ref()
            .1
            .peer_certificates()
            .filter(|chain| !chain.is_empty());
        let certificate = client_ca
            .zip(chain)
            .map(|(ca, chain)| ClientCertificate::new(ca, chain.to_vec()));
        Ok((stream, certificate))
    }
}

/// Answers a plain HTTP request with a 400 Status, then reads what the
/// client sent until it closes (closing with unread bytes would reset the
/// connection, and the client could lose the answer).
async fn refuse_plain_http(stream: &mut TcpStream) -> std::io::Result<()> {
    let body =
        kubecache_wire::Status::bad_request("Client sent an HTTP request to an HTTPS server.")
            .to_json();
    let head = format!(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(&body).await?;
    stream.shutdown().await?;
    let mut sink = [0u8; 4096];
    let mut left: usize = 64 * 1024;
    while left > 0 {
        match stream.read(&mut sink).await? {
            0 => break,
            n => left = left.saturating_sub(n),
        }
    }
    Ok(())
}

fn read(files: &TlsFiles) -> Contents {
    let read = |path: Option<&Path>| match path {
        Some(path) => std::fs::read(path).map_err(|e| e.to_string()),
        None => Ok(Vec::new()),
    };
    [
        read(Some(&files.cert)),
        read(Some(&files.key)),
        read(files.client_ca.as_deref()),
    ]
}

/// The rustls configuration of the files' contents: ring, TLS 1.2 and 1.3,
/// ALPN `h2` then `http/1.1` (HTTP/2 for a client that offers both, as
/// Go's server chooses); client certificates asked for when there is a client
/// CA, as kube-apiserver asks for them (see `client_cert`).
fn build(files: &TlsFiles, contents: &Contents) -> Result<Loaded, TlsError> {
    let [cert, key, client_ca] = contents;
    let error = |file: TlsFile, path: &Path, message: String| TlsError {
        file,
        path: path.to_path_buf(),
        message,
    };
    let cert_error = |m: String| error(TlsFile::Cert, &files.cert, m);
    let key_error = |m: String| error(TlsFile::Key, &files.key, m);
    let chain =
        certificates(cert.as_deref().map_err(|e| cert_error(e.clone()))?).map_err(cert_error)?;
    let key = key.as_deref().map_err(|e| key_error(e.clone()))?;
    let key = PrivateKeyDer::from_pem_slice(key)
        .map_err(|e| key_error(format!("no private key in PEM: {e}")))?;
    let (_, leaf) = x509_parser::parse_x509_certificate(&chain[0])
        .map_err(|e| cert_error(format!("the first certificate does not parse: {e}")))?;
    let not_after = leaf.validity().not_after.timestamp();
    let subject = leaf.subject().to_string();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(rustls::DEFAULT_VERSIONS)
        .map_err(|e| cert_error(e.to_string()))?;
    let (builder, client_ca) = match &files.client_ca {
        None => (builder.with_no_client_auth(), None),
        Some(path) => {
            let ca_error = |m: String| error(TlsFile::ClientCa, path, m);
            let pem = client_ca.as_deref().map_err(|e| ca_error(e.clone()))?;
            let mut roots = RootCertStore::empty();
            for certificate in certificates(pem).map_err(ca_error)? {
                roots
                    .add(certificate)
                    .map_err(|e| ca_error(format!("not a CA certificate: {e}")))?;
            }
            let client_ca = Arc::new(ClientCa::new(roots, &provider));
            (
                builder.with_client_cert_verifier(client_ca.clone()),
                Some(client_ca),
            )
        }
    };
    let mut config = builder.with_single_cert(chain, key).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => {
            key_error("does not match the certificate's public key".into())
        }
        other => key_error(other.to_string()),
    })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Loaded {
        serving: Serving {
            config: Arc::new(config),
            client_ca,
        },
        not_after,
        subject,
    })
}

/// The certificates of a PEM text, at least one.
fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let chain = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not PEM certificates: {e}"))?;
    if chain.is_empty() {
        return Err("no certificate in PEM".into());
    }
    Ok(chain)
}

/// The metrics of a loaded certificate; the reload counters from zero.
fn register(loaded: &Loaded) {
    metrics::describe_counter!(
        "kubecache_tls_reloads_total",
        "Reloads of the TLS files after they changed, by result (loaded, failed: the previous certificate is kept)."
    );
    metrics::describe_gauge!(
        "kubecache_tls_certificate_expiration_timestamp_seconds",
        "The notAfter of the serving certificate new connections get, in Unix seconds."
    );
    for result in ["loaded", "failed"] {
        metrics::counter!("kubecache_tls_reloads_total", "result" => result).increment(0);
    }
    metrics::gauge!("kubecache_tls_certificate_expiration_timestamp_seconds")
        .set(loaded.not_after as f64);
}
