//! The bytes of a state file: its records (prost messages, written by hand
//! without a build script) and the framing around them, checksummed as they
//! stream through.
//!
//! ```text
//! magic "KCSTATE\n" | version u32 LE | Header (length-delimited)
//!   | CRC-32 u32 LE of everything before it
//! ObjectRecord (length-delimited) x Header.objects
//! EventRecord (length-delimited) x Header.events
//! length of the file u64 LE | CRC-32 u32 LE of everything before the trailer
//! ```
//!
//! The header has its own checksum so that a file of another cluster,
//! resource or configuration is refused without reading its objects; the
//! trailer's length tells a truncated file from a damaged one.

use std::io::{self, Read, Write};

use bytes::Bytes;

/// The first bytes of every state file.
pub(super) const MAGIC: &[u8; 8] = b"KCSTATE\n";

/// The format this code writes and reads; any change to the records'
/// meaning bumps it (a file of another version is refused, not guessed at).
/// A field added whose absence means what a file without it meant does
/// not: the objects' `raw_strings` were added so, as an older file has no
/// object with strings that are not UTF-8 kept (and an older kubecache
/// reading a newer file serves those strings as it always did, replaced).
pub(super) const VERSION: u32 = 1;

/// Bytes of the trailer: the file's length and the checksum.
pub(super) const TRAILER_LEN: u64 = 12;

/// What the state is of, and at which resourceVersions.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Header {
    /// The cluster's identity, as the caller gave it.
    #[prost(string, tag = "1")]
    pub cluster: String,
    #[prost(string, tag = "2")]
    pub group: String,
    #[prost(string, tag = "3")]
    pub version: String,
    #[prost(string, tag = "4")]
    pub plural: String,
    #[prost(string, tag = "5")]
    pub kind: String,
    /// What shapes stored objects (see `config_fingerprint`).
    #[prost(string, tag = "6")]
    pub config: String,
    /// The store's resourceVersion.
    #[prost(uint64, tag = "7")]
    pub resource_version: u64,
    /// Where the upstream watch resumes.
    #[prost(uint64, tag = "8")]
    pub upstream_resource_version: u64,
    /// Where the event log's exact history starts.
    #[prost(uint64, tag = "9")]
    pub history_start: u64,
    /// When it was written, in milliseconds since the Unix epoch.
    #[prost(uint64, tag = "10")]
    pub written_at_ms: u64,
    /// Number of object records.
    #[prost(uint64, tag = "11")]
    pub objects: u64,
    /// Number of event records.
    #[prost(uint64, tag = "12")]
    pub events: u64,
}

/// One object of the store, in key order.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ObjectRecord {
    /// Its JSON as stored (after the transform).
    #[prost(bytes = "bytes", tag = "1")]
    pub json: Bytes,
    /// The bytes of its strings that are not UTF-8
    /// (`RawStrings::to_bytes`); empty for almost every object.
    #[prost(bytes = "bytes", tag = "2")]
    pub raw_strings: Bytes,
}

/// One event of the log's exact history, oldest first.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct EventRecord {
    /// 0 added, 1 modified, 2 deleted.
    #[prost(uint32, tag = "1")]
    pub kind: u32,
    /// Its position in the log.
    #[prost(uint64, tag = "2")]
    pub resource_version: u64,
    /// The object's JSON; empty when the object is the store's current
    /// version of `key` (most events: written once, shared again on load).
    #[prost(bytes = "bytes", tag = "3")]
    pub json: Bytes,
    /// The key, only when `json` is empty.
    #[prost(string, tag = "4")]
    pub key: String,
    /// The version the store held before, only when it is not the object of
    /// the previous event of the same key in the file (and the event is not
    /// an `ADDED`, which has none).
    #[prost(bytes = "bytes", tag = "5")]
    pub previous: Bytes,
    /// The raw strings of `json`'s object, as an [`ObjectRecord`]'s.
    #[prost(bytes = "bytes", tag = "6")]
    pub raw_strings: Bytes,
    /// The raw strings of `previous`'s object, likewise.
    #[prost(bytes = "bytes", tag = "7")]
    pub previous_raw_strings: Bytes,
}

/// A writer that checksums what goes through it and counts it.
pub(super) struct Checksummed<W> {
    inner: W,
    hasher: crc32fast::Hasher,
    written: u64,
}

impl<W: Write> Checksummed<W> {
    pub(super) fn new(inner: W) -> Self {
        Checksummed {
            inner,
            hasher: crc32fast::Hasher::new(),
            written: 0,
        }
    }

    /// Writes `message` length-delimited, through `scratch` (reused so that
    /// a million records cost no million allocations).
    pub(super) fn record(
        &mut self,
        message: &impl prost::Message,
        scratch: &mut Vec<u8>,
    ) -> io::Result<()> {
        scratch.clear();
        message
            .encode_length_delimited(scratch)
            .map_err(io::Error::other)?;
        self.write_all(scratch)
    }

    /// The checksum so far, written after everything it covers.
    pub(super) fn write_checksum(&mut self) -> io::Result<()> {
        let crc = self.hasher.clone().finalize();
        self.write_all(&crc.to_le_bytes())
    }

    /// The trailer: the file's length and the checksum of all before the
    /// trailer.
    pub(super) fn finish(mut self) -> io::Result<W> {
        let crc = self.hasher.finalize();
        let length = self.written + TRAILER_LEN;
        self.inner.write_all(&length.to_le_bytes())?;
        self.inner.write_all(&crc.to_le_bytes())?;
        Ok(self.inner)
    }
}

impl<W: Write> Write for Checksummed<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Why a record could not be read.
#[derive(Debug)]
pub(super) enum ReadError {
    /// The file ended (or the record would pass `end`).
    Truncated,
    /// Reading failed.
    Io(io::Error),
    /// The bytes are not the message.
    Malformed(String),
}

/// A reader that checksums what it reads, and never reads past `end`.
pub(super) struct Verified<R> {
    inner: R,
    hasher: crc32fast::Hasher,
    position: u64,
    end: u64,
}

impl<R: Read> Verified<R> {
    pub(super) fn new(inner: R, end: u64) -> Self {
        Verified {
            inner,
            hasher: crc32fast::Hasher::new(),
            position: 0,
            end,
        }
    }

    pub(super) fn position(&self) -> u64 {
        self.position
    }

    /// Exactly `buf.len()` bytes.
    pub(super) fn fill(&mut self, buf: &mut [u8]) -> Result<(), ReadError> {
        if self.position + buf.len() as u64 > self.end {
            return Err(ReadError::Truncated);
        }
        self.inner.read_exact(buf).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => ReadError::Truncated,
            _ => ReadError::Io(e),
        })?;
        self.hasher.update(buf);
        self.position += buf.len() as u64;
        Ok(())
    }

    pub(super) fn u32(&mut self) -> Result<u32, ReadError> {
        let mut bytes = [0; 4];
        self.fill(&mut bytes)?;
        Ok(u32::from_le_bytes(bytes))
    }

    /// One length-delimited message. The length is checked against what is
    /// left before anything is allocated for it.
    pub(super) fn record<M: prost::Message + Default>(&mut self) -> Result<M, ReadError> {
        let mut length: u64 = 0;
        for shift in (0..64).step_by(7) {
            let mut byte = [0];
            self.fill(&mut byte)?;
            length |= u64::from(byte[0] & 0x7f) << shift;
            if byte[0] & 0x80 == 0 {
                break;
            }
            if shift == 63 {
                return Err(ReadError::Malformed("record length overflows".into()));
            }
        }
        if length > self.end - self.position {
            return Err(ReadError::Truncated);
        }
        let mut bytes = vec![0; usize::try_from(length).map_err(|_| ReadError::Truncated)?];
        self.fill(&mut bytes)?;
        M::decode(Bytes::from(bytes)).map_err(|e| ReadError::Malformed(e.to_string()))
    }

    /// The checksum of what was read so far.
    pub(super) fn checksum(&self) -> u32 {
        self.hasher.clone().finalize()
    }

    /// Reads (and checksums) the rest, up to `end`.
    pub(super) fn drain(&mut self) -> Result<(), ReadError> {
        let mut buf = vec![0; 64 * 1024];
        while self.position < self.end {
            let n = (self.end - self.position).min(buf.len() as u64) as usize;
            self.fill(&mut buf[..n])?;
        }
        Ok(())
    }
}
