//! The Kubernetes version whose Go types the transcoder writes as.
//!
//! The schema is the newest vendored Kubernetes' (see `kubernetes/README.md`);
//! an API server of an older minor has fewer fields, and Go held a few of
//! them otherwise (without `omitempty`, as a value rather than a pointer).
//! Its bytes are those of its own types, so the transcoder writes as that
//! minor when told which ([`MessageType::as_of`](super::MessageType::as_of)):
//! a field the minor does not have is not written (Go's protobuf writes
//! every non-pointer field, so a 1.36 Pod carries `status.observedGeneration`
//! a 1.28 server has no field 17 for), and a field is left out of JSON or
//! written `null` as that minor's struct tags say. The per-field facts come
//! from `kubernetes/history.tsv` (how it is derived: the README there),
//! compiled into the schema.

use std::fmt;

/// A Kubernetes minor version, `1.minor`, within what the field history covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KubeVersion {
    minor: u8,
}

impl KubeVersion {
    /// The schema's own: the vendored Kubernetes 1.36.
    pub const NEWEST: KubeVersion = KubeVersion { minor: 36 };
    /// The oldest the field history covers: an older server is written for
    /// as this one (fields added before 1.28 are not tracked).
    pub const OLDEST: KubeVersion = KubeVersion { minor: 28 };

    /// Kubernetes `1.minor`, taken as [`OLDEST`](Self::OLDEST) or
    /// [`NEWEST`](Self::NEWEST) outside them (a newer server's new fields
    /// are unknown to the schema whatever this says).
    pub fn new(minor: u32) -> KubeVersion {
        let clamped = minor.clamp(u32::from(Self::OLDEST.minor), u32::from(Self::NEWEST.minor));
        KubeVersion {
            minor: clamped as u8,
        }
    }

    /// The minor version.
    pub fn minor(self) -> u8 {
        self.minor
    }

    /// The version an API server's `/version` body names
    /// (`{"major":"1","minor":"28",...}`; managed distributions write
    /// `"28+"`). `None` when it is not Kubernetes 1.x.
    pub fn from_version_json(body: &[u8]) -> Option<KubeVersion> {
        #[derive(serde::Deserialize)]
        struct Info<'a> {
            major: &'a str,
            minor: &'a str,
        }
        let info: Info<'_> = serde_json::from_slice(body).ok()?;
        let digits = info.minor.trim_end_matches(|c: char| !c.is_ascii_digit());
        match (info.major, digits.parse()) {
            ("1", Ok(minor)) => Some(KubeVersion::new(minor)),
            _ => None,
        }
    }
}

impl Default for KubeVersion {
    fn default() -> Self {
        KubeVersion::NEWEST
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "1.{}", self.minor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_read_from_version_bodies_and_kept_within_the_history() {
        let golden = kubecache_testkit::golden::read("version.json");
        assert_eq!(
            KubeVersion::from_version_json(&golden),
            Some(KubeVersion::new(28))
        );
        let gke = br#"{"major":"1","minor":"30+","gitVersion":"v1.30.5-gke.1014001"}"#;
        assert_eq!(
            KubeVersion::from_version_json(gke).map(KubeVersion::minor),
            Some(30)
        );
        assert_eq!(KubeVersion::new(22), KubeVersion::OLDEST);
        assert_eq!(KubeVersion::new(40), KubeVersion::NEWEST);
        assert_eq!(KubeVersion::new(31).to_string(), "1.31");
        for body in [
            &br#"{"major":"2","minor":"1"}"#[..],
            b"{}",
            b"<html>",
            br#"{"major":"1","minor":"x"}"#,
        ] {
            assert_eq!(KubeVersion::from_version_json(body), None);
        }
    }
}
