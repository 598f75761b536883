//! Certificates for tests that serve HTTPS: a CA of the test's own and the
//! serving and client certificates it signs (rcgen, on ring: the workspace's
//! only crypto provider), written into a temporary directory removed when
//! the [`Pki`] is dropped; and rustls client configurations that trust them.

use std::path::PathBuf;
use std::sync::{Arc, LazyLock};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, SigningKey as _,
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

    /// A client certificate named `common_name`, signed by the CA, for a
    /// `key` whose private half nobody holds (ring makes neither kind): one
    /// a client can send, not sign a handshake with.
    pub fn client_with_key(
        &self,
        common_name: &str,
        key: UnverifiableKey,
    ) -> CertificateDer<'static> {
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let der = params.signed_by(&key, &self.ca).unwrap().der().to_vec();
        let der = match key {
            UnverifiableKey::Rsa1024 => der,
            // rcgen on ring knows no P-521: made for a "P-384" key of
            // P-521's length, its curve is made P-521, and it is signed
            // again.
            UnverifiableKey::EcdsaP521 => self.resigned(&der, |tbs| {
                const SECP384R1: &[u8] = &[6, 5, 0x2b, 0x81, 4, 0, 0x22];
                let at = tbs.windows(SECP384R1.len()).position(|w| w == SECP384R1);
                tbs[at.expect("the key's curve") + SECP384R1.len() - 1] = 0x23; // secp521r1
            }),
        };
        CertificateDer::from(der)
    }

    /// The certificate `der` with its TBSCertificate changed by `change`,
    /// signed again by the CA.
    fn resigned(&self, der: &[u8], change: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        // Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm, signature }
        let (tbs, rest) = first_element(contents(der));
        let (algorithm, _) = first_element(rest);
        let mut tbs = tbs.to_vec();
        change(&mut tbs);
        let signature = self.ca.key().sign(&tbs).unwrap();
        let bits = [&[0][..], &signature].concat();
        der_element(
            0x30,
            &[&tbs[..], algorithm, &der_element(3, &bits)].concat(),
        )
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

/// A client's public key that Go verifies signatures of and ring does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnverifiableKey {
    /// RSA of 1024 bits.
    Rsa1024,
    /// ECDSA on the curve P-521.
    EcdsaP521,
}

impl rcgen::PublicKeyData for UnverifiableKey {
    /// A made-up key of the right shape: an RSAPublicKey of a 1024-bit
    /// modulus and exponent 65537, or an uncompressed point of P-521's size.
    fn der_bytes(&self) -> &[u8] {
        static RSA_1024: LazyLock<Vec<u8>> = LazyLock::new(|| {
            let modulus: Vec<u8> = [0]
                .into_iter()
                .chain((0..128u8).map(|i| i | 0x81))
                .collect();
            let integers = [der_element(2, &modulus), der_element(2, &[1, 0, 1])].concat();
            der_element(0x30, &integers)
        });
        static P521_POINT: LazyLock<Vec<u8>> =
            LazyLock::new(|| [4].into_iter().chain((0..132u8).map(|i| i % 2)).collect());
        match self {
            UnverifiableKey::Rsa1024 => &RSA_1024,
            UnverifiableKey::EcdsaP521 => &P521_POINT,
        }
    }

    fn algorithm(&self) -> &'static rcgen::SignatureAlgorithm {
        match self {
            UnverifiableKey::Rsa1024 => &rcgen::PKCS_RSA_SHA256,
            UnverifiableKey::EcdsaP521 => &rcgen::PKCS_ECDSA_P384_SHA384,
        }
    }
}

/// The DER element of `tag` holding `content`.
fn der_element(tag: u8, content: &[u8]) -> Vec<u8> {
    let length = content.len().to_be_bytes();
    let significant = &length[length.iter().take_while(|&&b| b == 0).count()..];
    let mut element = vec![tag];
    match significant {
        [short] if *short < 0x80 => element.push(*short),
        [] => element.push(0),
        long => {
            element.push(0x80 | long.len() as u8);
            element.extend_from_slice(long);
        }
    }
    element.extend_from_slice(content);
    element
}

/// The length of the header (tag and length) of the DER element that
/// starts `der`, and of its content.
fn header_and_content(der: &[u8]) -> (usize, usize) {
    match der[1] {
        short if short < 0x80 => (2, usize::from(short)),
        long => {
            let octets = usize::from(long & 0x7f);
            let length = der[2..2 + octets]
                .iter()
                .fold(0, |length, &b| length << 8 | usize::from(b));
            (2 + octets, length)
        }
    }
}

/// The content of the DER element `der`.
fn contents(der: &[u8]) -> &[u8] {
    let (header, length) = header_and_content(der);
    &der[header..header + length]
}

/// The first DER element of `der`, and what follows it.
fn first_element(der: &[u8]) -> (&[u8], &[u8]) {
    let (header, length) = header_and_content(der);
    der.split_at(header + length)
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
