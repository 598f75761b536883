//! Certificates for tests that serve HTTPS: a CA of the test's own and the
//! serving and client certificates it signs (rcgen), written into a
//! temporary directory removed when the [`Pki`] is dropped.

use std::path::{Path, PathBuf};

use kubecache_server::serving::TlsFiles;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};

/// A CA and the files of one test, in a directory of its own.
pub struct Pki {
    /// Where its files are written.
    pub dir: PathBuf,
    ca: CertifiedIssuer<'static, KeyPair>,
}

impl Pki {
    pub fn new(test: &str) -> Pki {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("pki-{test}-{}", std::process::id()));
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

    /// A client certificate with this common name and organizations.
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

    pub fn sign(&self, params: CertificateParams) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// The files of a serving certificate, with this client CA.
    pub fn tls_files(&self, name: &str, client_ca: Option<&str>) -> TlsFiles {
        let (cert, key) = self.server(name);
        TlsFiles {
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
