//! Test certificates ([`kubecache_testkit::pki`]) as kubecache's serving
//! takes them.

use kubecache_server::transport::TlsFiles;
pub use kubecache_testkit::pki::Pki;

/// The files of a serving certificate of `pki` named `name`, with this
/// client CA.
pub fn tls_files(pki: &Pki, name: &str, client_ca: Option<&str>) -> TlsFiles {
    let files = pki.serving_files(name, client_ca);
    TlsFiles {
        cert: files.cert,
        key: files.key,
        client_ca: files.client_ca,
    }
}
