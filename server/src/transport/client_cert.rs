//! Client certificates as kube-apiserver v1.28 reads them.
//!
//! kube-apiserver asks for a client certificate without requiring or
//! verifying it at the handshake (Go's `RequestClientCert`): the handshake
//! checks only that the client holds the certificate's key, and fails
//! (alert `bad_certificate`) only for a certificate Go cannot parse. Its
//! x509 authenticator then verifies the chain the client sent against the
//! client CA on every request: a certificate that does not verify is a 401
//! unless a bearer token authenticates the request; one that verifies names
//! its user by its subject, and one without a common name is ignored.
//!
//! One thing kubecache refuses at the handshake where Go takes it: a client
//! key whose signatures ring cannot verify (ECDSA P-521, RSA under 2048 or
//! over 8192 bits), so that the handshake's proof that the client holds it
//! cannot be checked. Such a certificate fails the handshake with a log
//! line that says why, never quietly becoming anonymous (see
//! [`unverifiable_key`]).
//!
//! [`ClientCa`] is both: the handshake's [`ClientCertVerifier`] and the
//! authenticator. [`ClientCertificate`] is the chain of one connection,
//! judged again only when the validity of one of its certificates began or
//! ended since it was last judged (nothing else the verdict depends on
//! changes during a connection).

use std::sync::Arc;

use parking_lot::Mutex;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, SignatureVerificationAlgorithm, TrustAnchor, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, RootCertStore};
use x509_parser::asn1_rs::{Any, BitString, FromDer, Tag};
use x509_parser::oid_registry::{
    OID_EC_P256, OID_NIST_EC_P384, OID_NIST_EC_P521, OID_X509_COMMON_NAME,
    OID_X509_ORGANIZATION_NAME,
};
use x509_parser::public_key::PublicKey;

use crate::auth::{PeerCertificate, User, UserInfo};

/// The client CA: asks for client certificates at the handshake, and
/// verifies them after it.
#[derive(Debug)]
pub(super) struct ClientCa {
    roots: Vec<TrustAnchor<'static>>,
    /// The roots' subjects, sent to clients to help them pick a certificate.
    subjects: Vec<DistinguishedName>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCa {
    /// Client certificates verified against `roots`, with the signature
    /// algorithms of `provider`.
    pub(super) fn new(roots: RootCertStore, provider: &CryptoProvider) -> ClientCa {
        ClientCa {
            subjects: roots.subjects(),
            roots: roots.roots,
            algorithms: provider.signature_verification_algorithms,
        }
    }

    /// What `chain` (the leaf, then the intermediates the client sent)
    /// proves at `now`, as kube-apiserver's x509 authenticator reads it:
    /// nothing when it verifies and names no user.
    fn authenticate(&self, chain: &[CertificateDer<'_>], now: UnixTime) -> Option<PeerCertificate> {
        if let Err(error) = self.verify(chain, now) {
            return Some(PeerCertificate::Failed(error.to_string().into()));
        }
        certificate_user(&chain[0]).map(|user| PeerCertificate::Verified(User::new(user)))
    }

    /// Go's `x509.Certificate.Verify` as kube-apiserver calls it: a path to
    /// a client CA through the intermediates sent, every certificate valid
    /// at `now`, signed with an algorithm webpki accepts (not SHA-1), and an
    /// extended key usage, if any, that allows client authentication.
    fn verify(&self, chain: &[CertificateDer<'_>], now: UnixTime) -> Result<(), webpki::Error> {
        let (leaf, intermediates) = chain.split_first().ok_or(webpki::Error::BadDer)?;
        let end_entity = webpki::EndEntityCert::try_from(leaf)?;
        let verified = end_entity.verify_for_usage(
            self.algorithms.all,
            &self.roots,
            intermediates,
            now,
            webpki::KeyUsage::client_auth(),
            None,
            None,
        );
        match verified {
            // webpki refuses a leaf with CA:TRUE (once its validity is
            // checked); Go takes it.
            Err(webpki::Error::CaUsedAsEndEntity) => self.verify_ca_leaf(&end_entity, leaf),
            verified => verified.map(drop),
        }
    }

    /// A valid leaf with CA:TRUE, verified as Go verifies it when a client
    /// CA signed it: its extended key usage, if any, allows client
    /// authentication, and the signature is one webpki accepts. One that
    /// an intermediate signed stays refused: webpki builds no such path.
    fn verify_ca_leaf(
        &self,
        end_entity: &webpki::EndEntityCert<'_>,
        leaf: &CertificateDer<'_>,
    ) -> Result<(), webpki::Error> {
        let (_, certificate) =
            x509_parser::parse_x509_certificate(leaf).map_err(|_| webpki::Error::BadDer)?;
        let client_auth = match certificate.extended_key_usage() {
            Ok(None) => true,
            Ok(Some(usage)) => usage.value.client_auth,
            Err(_) => false,
        };
        if !client_auth {
            return Err(webpki::Error::RequiredEkuNotFoundContext(
                webpki::RequiredEkuNotFoundContext {
                    required: webpki::KeyUsage::client_auth(),
                    present: Vec::new(),
                },
            ));
        }
        let signed_by_root = self.roots.iter().any(|root| {
            root.subject.as_ref() == end_entity.issuer()
                && signed_by(leaf, &root.subject_public_key_info, self.algorithms.all)
        });
        signed_by_root
            .then_some(())
            .ok_or(webpki::Error::UnknownIssuer)
    }
}

impl ClientCertVerifier for ClientCa {
    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.subjects
    }

    /// Takes any certificate Go parses, with a key ring can verify the
    /// handshake's signature of: it is verified after the handshake.
    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        if !std::iter::once(end_entity)
            .chain(intermediates)
            .all(go_parses)
        {
            return Err(CertificateError::BadEncoding.into());
        }
        let Some(key) = unverifiable_key(end_entity) else {
            return Ok(ClientCertVerified::assertion());
        };
        let refused = UnverifiableKey(key);
        let subject = x509_parser::parse_x509_certificate(end_entity)
            .map(|(_, certificate)| certificate.subject().to_string())
            .unwrap_or_default();
        let chain: Vec<_> = std::iter::once(end_entity)
            .chain(intermediates)
            .cloned()
            .collect();
        // Loud for a certificate of the client CA, which a client of
        // kubecache's own sent; anyone can send a self-signed one.
        if self.verify(&chain, now).is_ok() {
            tracing::warn!(%subject, reason = %refused, "TLS: refused a client certificate of the client CA at the handshake");
        } else {
            tracing::debug!(%subject, reason = %refused, "TLS: refused a client certificate at the handshake");
        }
        Err(CertificateError::Other(rustls::OtherError(Arc::new(refused))).into())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    /// ring's schemes, and ECDSA P-521's last: a Go client whose key is
    /// P-521 finds no scheme of its own among ring's and sends no
    /// certificate at all (the request would run as `system:anonymous`);
    /// asked for this one, it sends its certificate, which is refused.
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        let mut schemes = self.algorithms.supported_schemes();
        schemes.push(rustls::SignatureScheme::ECDSA_NISTP521_SHA512);
        schemes
    }
}

/// A client key ring cannot verify the handshake's signature of.
#[derive(Debug, thiserror::Error)]
#[error(
    "its key is {0}, whose signatures kubecache (rustls with ring) cannot verify; use an ECDSA P-256 or P-384, Ed25519, or RSA 2048 to 8192-bit key"
)]
struct UnverifiableKey(String);

/// What the key of the certificate `der` is, when ring cannot verify its
/// signatures and Go can: ECDSA on a curve other than P-256 and P-384
/// (P-521), RSA of fewer than 2048 bits or more than 8192. `None` for
/// every other key (one Go cannot use either fails the handshake as it
/// did).
fn unverifiable_key(der: &CertificateDer<'_>) -> Option<String> {
    let (_, certificate) = x509_parser::parse_x509_certificate(der).ok()?;
    let key = certificate.public_key();
    match key.parsed().ok()? {
        PublicKey::RSA(rsa) => {
            let modulus = rsa.modulus;
            let significant = &modulus[modulus.iter().take_while(|&&b| b == 0).count()..];
            let bits = significant.len() * 8
                - significant
                    .first()
                    .map_or(0, |b| b.leading_zeros() as usize);
            (!(2048..=8192).contains(&bits)).then(|| format!("RSA of {bits} bits"))
        }
        PublicKey::EC(_) => {
            let curve = key.algorithm.parameters.as_ref()?.as_oid().ok()?;
            if curve == OID_EC_P256 || curve == OID_NIST_EC_P384 {
                None
            } else if curve == OID_NIST_EC_P521 {
                Some("ECDSA P-521".into())
            } else {
                Some(format!("ECDSA on the curve {curve}"))
            }
        }
        _ => None,
    }
}

/// The client certificate chain of one connection, and what it proves.
pub(super) struct ClientCertificate {
    chain: Vec<CertificateDer<'static>>,
    ca: Arc<ClientCa>,
    judged: Mutex<Judged>,
}

/// What a chain proved when last judged, and until when that holds.
struct Judged {
    proves: Option<PeerCertificate>,
    /// The next notBefore or notAfter of a certificate of the chain, in
    /// Unix seconds.
    until: u64,
}

impl ClientCertificate {
    /// The chain a client sent on a connection (the leaf first), judged now.
    pub(super) fn new(ca: Arc<ClientCa>, chain: Vec<CertificateDer<'static>>) -> ClientCertificate {
        let judged = judge(&ca, &chain, UnixTime::now());
        ClientCertificate {
            chain,
            ca,
            judged: Mutex::new(judged),
        }
    }

    /// What the chain proves now, for one request.
    pub(super) fn proves(&self) -> Option<PeerCertificate> {
        let now = UnixTime::now();
        let mut judged = self.judged.lock();
        if now.as_secs() >= judged.until {
            *judged = judge(&self.ca, &self.chain, now);
        }
        judged.proves.clone()
    }
}

fn judge(ca: &ClientCa, chain: &[CertificateDer<'_>], now: UnixTime) -> Judged {
    let validity = chain
        .iter()
        .filter_map(|der| x509_parser::parse_x509_certificate(der).ok())
        .flat_map(|(_, certificate)| {
            let validity = certificate.validity();
            // webpki's bounds: valid from notBefore through notAfter.
            [
                validity.not_before.timestamp(),
                validity.not_after.timestamp() + 1,
            ]
        });
    let until = validity
        .filter_map(|at| u64::try_from(at).ok())
        .filter(|&at| at > now.as_secs())
        .min()
        .unwrap_or(u64::MAX);
    Judged {
        proves: ca.authenticate(chain, now),
        until,
    }
}

/// Whether the key of `spki` (a SubjectPublicKeyInfo's contents, as a trust
/// anchor holds it) signed the certificate `der` with one of `algorithms`.
fn signed_by(der: &[u8], spki: &[u8], algorithms: &[&dyn SignatureVerificationAlgorithm]) -> bool {
    let parts = || {
        // Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm, signature }
        let (_, certificate) = Any::from_der(der).ok()?;
        let (after_tbs, _) = Any::from_der(certificate.data).ok()?;
        let signed = &certificate.data[..certificate.data.len() - after_tbs.len()];
        let (rest, algorithm) = Any::from_der(after_tbs).ok()?;
        let (_, signature) = BitString::from_der(rest).ok()?;
        // SubjectPublicKeyInfo ::= SEQUENCE { algorithm, subjectPublicKey }
        let (rest, key_algorithm) = Any::from_der(spki).ok()?;
        let (_, key) = BitString::from_der(rest).ok()?;
        Some((signed, algorithm.data, signature, key_algorithm.data, key))
    };
    let Some((signed, algorithm, signature, key_algorithm, key)) = parts() else {
        return false;
    };
    algorithms.iter().any(|candidate| {
        candidate.signature_alg_id().as_ref() == algorithm
            && candidate.public_key_alg_id().as_ref() == key_algorithm
            && candidate
                .verify_signature(&key.data, signed, &signature.data)
                .is_ok()
    })
}

/// Whether Go's `x509.ParseCertificate` takes `der`, as far as it differs
/// from x509-parser: every attribute of the subject and the issuer must be
/// a string type Go reads (a UniversalString is not).
fn go_parses(der: &CertificateDer<'_>) -> bool {
    let Ok((_, certificate)) = x509_parser::parse_x509_certificate(der) else {
        return false;
    };
    [certificate.subject(), certificate.issuer()]
        .into_iter()
        .flat_map(|name| name.iter_attributes())
        .all(|attribute| go_string(attribute.attr_value()).is_some())
}

/// The user of a certificate, as kube-apiserver's x509 authenticator
/// (`CommonNameUserConversion`) reads it: the subject's last common name,
/// of any string type, its organizations as groups, and then
/// `system:authenticated`, added as kube-apiserver adds it (not to
/// `system:anonymous`, nor to a user already in it or in
/// `system:unauthenticated`). No common name, or an empty one: no user.
fn certificate_user(der: &CertificateDer<'_>) -> Option<UserInfo> {
    let (_, certificate) = x509_parser::parse_x509_certificate(der).ok()?;
    let mut username = None;
    let mut groups = Vec::new();
    for attribute in certificate.subject().iter_attributes() {
        let value = go_string(attribute.attr_value());
        if attribute.attr_type() == &OID_X509_COMMON_NAME {
            username = value;
        } else if attribute.attr_type() == &OID_X509_ORGANIZATION_NAME {
            groups.extend(value);
        }
    }
    let username = username.filter(|name| !name.is_empty())?;
    let added = ["system:authenticated", "system:unauthenticated"];
    if username != "system:anonymous" && !groups.iter().any(|g| added.contains(&g.as_str())) {
        groups.push("system:authenticated".to_string());
    }
    Some(UserInfo {
        username,
        groups,
        ..UserInfo::default()
    })
}

/// An attribute value as Go's x509 parser (`parseASN1String`, Go 1.21)
/// reads it; `None` for what it refuses.
fn go_string(value: &Any<'_>) -> Option<String> {
    let bytes = value.data;
    let text = || String::from_utf8(bytes.to_vec()).ok();
    match value.tag() {
        // Go keeps the bytes as they are; they reach JSON as UTF-8, an
        // invalid byte replaced.
        Tag::T61String => Some(String::from_utf8_lossy(bytes).into_owned()),
        Tag::PrintableString if bytes.iter().all(|&b| go_printable(b)) => text(),
        Tag::Utf8String => text(),
        Tag::BmpString if bytes.len().is_multiple_of(2) => {
            let bytes = bytes.strip_suffix(&[0, 0]).unwrap_or(bytes);
            let units = bytes
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]));
            Some(
                char::decode_utf16(units)
                    .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
                    .collect(),
            )
        }
        Tag::Ia5String if bytes.is_ascii() => text(),
        Tag::NumericString if bytes.iter().all(|&b| b.is_ascii_digit() || b == b' ') => text(),
        _ => None,
    }
}

/// Go's PrintableString bytes, with the `*` and `&` it lets through.
fn go_printable(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b" '()+,-./:=?*&".contains(&b)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kubecache_testkit::golden;
    use kubecache_testkit::pki::{Pki, UnverifiableKey};
    use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa};
    use rustls::pki_types::pem::PemObject;
    use serde_json::Value;

    use super::*;

    fn certificates(pem: &[u8]) -> Vec<CertificateDer<'static>> {
        CertificateDer::pem_slice_iter(pem)
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// The certificates of the edge corpus's file `path` (`certs/…`).
    fn corpus(path: &str) -> Vec<CertificateDer<'static>> {
        certificates(&golden::read(&format!("edges/{path}")))
    }

    fn client_ca(pem: &[u8]) -> ClientCa {
        let mut roots = RootCertStore::empty();
        roots.add_parsable_certificates(certificates(pem));
        ClientCa::new(roots, &rustls::crypto::ring::default_provider())
    }

    fn at(seconds: i64) -> UnixTime {
        UnixTime::since_unix_epoch(Duration::from_secs(seconds.try_into().unwrap()))
    }

    /// When a recorded case was sent.
    fn recorded_at(case: &Value) -> UnixTime {
        let time = case["time_utc"].as_str().unwrap();
        at(chrono::DateTime::parse_from_rfc3339(time)
            .unwrap()
            .timestamp())
    }

    fn verified(proves: &Option<PeerCertificate>) -> Option<(&str, &[String])> {
        match proves {
            Some(PeerCertificate::Verified(user)) => {
                let info = user.info();
                assert!(info.uid.is_empty() && info.extra.is_empty());
                Some((&info.username, &info.groups))
            }
            _ => None,
        }
    }

    #[test]
    fn every_recorded_certificate_proves_what_it_proved_to_kube_apiserver() {
        let ca = client_ca(&golden::read("edges/certs/ca.crt"));
        let Value::Array(cases) = golden::json("edges/manifest.json") else {
            panic!("edges/manifest.json is not an array");
        };
        // Each certificate's SelfSubjectReview, sent with no token: whom
        // kube-apiserver took it for.
        let reviews = cases.iter().filter(|case| {
            case["group"] == "client-cert"
                && case["method"] == "POST"
                && !case["caller"].as_str().unwrap().contains('+')
        });
        let mut checked = 0;
        for case in reviews {
            let id = case["id"].as_str().unwrap();
            let chain = corpus(case["client_cert"].as_str().unwrap());
            let handshake = ca.verify_client_cert(&chain[0], &chain[1..], UnixTime::now());
            let proves = ca.authenticate(&chain, recorded_at(case));
            match case["status"].as_u64() {
                // No answer: the TLS alert bad_certificate.
                None => assert_eq!(
                    handshake.as_ref().unwrap_err(),
                    &CertificateError::BadEncoding.into(),
                    "{id}"
                ),
                Some(401) => assert!(
                    matches!(proves, Some(PeerCertificate::Failed(_))),
                    "{id}: {proves:?}"
                ),
                Some(201) => {
                    let user = &golden::json(&format!(
                        "edges/{}",
                        case["body_file"].as_str().unwrap()
                    ))["status"]["userInfo"];
                    let groups: Vec<String> =
                        serde_json::from_value(user["groups"].clone()).unwrap();
                    let want = (user["username"].as_str().unwrap(), groups.as_slice());
                    assert_eq!(verified(&proves), Some(want), "{id}");
                }
                // Anonymous: a certificate without a common name is
                // ignored; one naming system:anonymous gets no group.
                Some(403) => {
                    let anonymous: Option<(&str, &[String])> = Some(("system:anonymous", &[]));
                    assert!(
                        proves.is_none() || verified(&proves) == anonymous,
                        "{id}: {proves:?}"
                    );
                }
                Some(other) => panic!("{id}: unexpected {other}"),
            }
            if case["status"].is_u64() {
                assert!(handshake.is_ok(), "{id}: the handshake takes it");
            }
            checked += 1;
        }
        assert_eq!(checked, 26, "25 certificates, univ-o also over TLS 1.2");
    }

    #[test]
    fn keys_ring_cannot_verify_fail_the_handshake_saying_why() {
        let pki = Pki::new("unverifiable-keys");
        let ca = client_ca(pki.ca_pem().as_bytes());
        // Asked for, a Go client with a P-521 key sends its certificate.
        let p521 = rustls::SignatureScheme::ECDSA_NISTP521_SHA512;
        assert!(ca.supported_verify_schemes().contains(&p521));
        for (key, named) in [
            (UnverifiableKey::Rsa1024, "RSA of 1024 bits"),
            (UnverifiableKey::EcdsaP521, "ECDSA P-521"),
        ] {
            let leaf = pki.client_with_key("alice", key);
            // Of the client CA: kube-apiserver would take alice.
            let proves = ca.authenticate(std::slice::from_ref(&leaf), UnixTime::now());
            assert_eq!(verified(&proves).unwrap().0, "alice");
            let refused = ca.verify_client_cert(&leaf, &[], UnixTime::now());
            let Err(rustls::Error::InvalidCertificate(CertificateError::Other(why))) = refused
            else {
                panic!("{key:?}: {refused:?}");
            };
            let why = why.0.to_string();
            assert!(why.starts_with(&format!("its key is {named}, ")), "{why}");
        }
    }

    #[test]
    fn a_chain_is_judged_again_when_a_validity_begins_or_ends() {
        let ca = client_ca(&golden::read("edges/certs/ca.crt"));
        let chain = corpus("certs/expired.crt"); // 2020-01-01 .. 2021-01-01
        let (not_before, not_after) = (1_577_836_800, 1_609_459_200);
        let early = judge(&ca, &chain, at(not_before - 1));
        assert!(matches!(early.proves, Some(PeerCertificate::Failed(_))));
        assert_eq!(early.until, not_before as u64);
        let valid = judge(&ca, &chain, at(not_after));
        assert_eq!(verified(&valid.proves).unwrap().0, "alice");
        assert_eq!(valid.until, not_after as u64 + 1);
        let late = judge(&ca, &chain, at(not_after + 1));
        assert!(matches!(late.proves, Some(PeerCertificate::Failed(_))));
        assert_eq!(late.until, u64::MAX);
    }

    #[test]
    fn a_ca_leaf_verifies_only_signed_by_a_client_ca_for_client_auth() {
        let pki = Pki::new("ca-leaf");
        let other = Pki::new("ca-leaf-other");
        let ca = client_ca(pki.ca_pem().as_bytes());
        let leaf = |pki: &Pki, usage: ExtendedKeyUsagePurpose| {
            let mut params = CertificateParams::default();
            params.distinguished_name.push(DnType::CommonName, "alice");
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.extended_key_usages = vec![usage];
            certificates(pki.sign(params).0.as_bytes())
        };
        let now = UnixTime::now();
        let proves = ca.authenticate(&leaf(&pki, ExtendedKeyUsagePurpose::ClientAuth), now);
        assert_eq!(verified(&proves).unwrap().0, "alice");
        for refused in [
            leaf(&pki, ExtendedKeyUsagePurpose::ServerAuth),
            leaf(&other, ExtendedKeyUsagePurpose::ClientAuth),
        ] {
            let proves = ca.authenticate(&refused, now);
            assert!(
                matches!(proves, Some(PeerCertificate::Failed(_))),
                "{proves:?}"
            );
        }
    }

    #[test]
    fn attribute_values_are_read_as_go_reads_them() {
        let read = |tag: Tag, bytes: &[u8]| go_string(&Any::from_tag_and_data(tag, bytes));
        assert_eq!(read(Tag::PrintableString, b"a*b&c"), Some("a*b&c".into()));
        assert_eq!(read(Tag::PrintableString, b"a_b"), None);
        assert_eq!(
            read(Tag::Utf8String, "ålice".as_bytes()),
            Some("ålice".into())
        );
        assert_eq!(read(Tag::Utf8String, b"\xff"), None);
        assert_eq!(read(Tag::BmpString, b"\0e\0v\0e\0\0"), Some("eve".into()));
        assert_eq!(read(Tag::BmpString, b"\0e\0"), None);
        assert_eq!(read(Tag::BmpString, b"\xd8\0"), Some("\u{fffd}".into()));
        assert_eq!(read(Tag::Ia5String, b"eve"), Some("eve".into()));
        assert_eq!(read(Tag::Ia5String, b"\xe5"), None);
        assert_eq!(read(Tag::NumericString, b"12 3"), Some("12 3".into()));
        assert_eq!(read(Tag::NumericString, b"12a"), None);
        assert_eq!(read(Tag::T61String, b"eve"), Some("eve".into()));
        assert_eq!(read(Tag::UniversalString, b"\0\0\0e"), None);
    }
}
