//! Certificates for tests that serve HTTPS: a CA of the test's own and the
//! serving and client certificates it signs (rcgen, on ring: the workspace's
//! only crypto provider), written into a temporary directory removed when
//! the [`Pki`] is dropped; and rustls client configurations that trust them.

use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A CA and the files of one test, in a directory of its own.
pub struct Pki {
    /// Where its files are written.
    pub dir: PathBuf,
    ca: CertifiedIssuer<'static, KeyPair>,
}

/// The files of a serving certificate.
pub struct ServingFiles {
    /// The certificate (PEM).
    pub cert: PathBuf,
    /// Its key (PEM).
    pub key: PathBuf,
    /// The CA that client certificates must be signed by, if any.
    pub client_ca: Option<PathBuf>,
}

impl Pki {
    /// A new CA named after `test`, with an empty directory.
    pub fn new(test: &str) -> Pki {
        let dir = std::env::temp_dir().join(format!("kubecache-pki-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, format!("{test} CA"));
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Pki { dir, ca }
    }

    /// The CA's certificate (PEM).
    pub fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    /// A serving certificate for 127.0.0.1 and localhost: its PEM and its
    /// key's.
    pub fn server(&self, name: &str) -> (String, String) {
        let mut params =
            CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(params)
    }

    /// A client certificate with this common name and organizations (at
    /// most two): its PEM and its key's.
    pub fn client(&self, common_name: &str, organizations: &[&str]) -> (String, String) {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        // rcgen keeps one value per type: a second O goes in under its OID
        // as a custom type.
        let types = [
            DnType::OrganizationName,
            DnType::CustomDnType(vec![2, 5, 4, 10]),
        ];
        assert!(
            organizations.len() <= types.len(),
            "at most two organizations"
        );
        for (kind, organization) in types.into_iter().zip(organizations) {
            params.distinguished_name.push(kind, *organization);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(params)
    }

    /// A certificate of `params` signed by the CA: its PEM and its key's.
    pub fn sign(&self, params: CertificateParams) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// Writes `text` into the directory as `name`; its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// The files of a serving certificate named `name` (`tls.crt`,
    /// `tls.key`), with this client CA (`client-ca.crt`).
    pub fn serving_files(&self, name: &str, client_ca: Option<&str>) -> ServingFiles {
        let (cert, key) = self.server(name);
        ServingFiles {
            cert: self.write("tls.crt", &cert),
            key: self.write("tls.key", &key),
            client_ca: client_ca.map(|pem| self.write("client-ca.crt", pem)),
        }
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The first certificate of a PEM text.
pub fn der(pem: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
}

/// A rustls client (ring) trusting the CA `ca_pem`, presenting `identity`
/// (a certificate and its key, PEM) if given.
pub fn client_config(ca_pem: &str, identity: Option<&(String, String)>) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der(ca_pem)).unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    match identity {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                vec![der(cert)],
                PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    }
}
