//! The snapshot file: what `bosun snapshot save` and the control plane's
//! periodic snapshots write, and `bosun snapshot restore` reads. One file
//! holds a copy of the store taken at one revision and the data dir's key
//! files (CA, service-account key, admin token, serving certificate), so
//! that a control plane started on the restored dir is the same cluster.
//!
//! Layout (integers big-endian):
//!
//! ```text
//! "BOSUNSNP"               8 bytes, the magic
//! version: u32             FORMAT_VERSION
//! header length: u32       at most MAX_HEADER
//! header: JSON             Header: revision, objects, createdAt, files
//! file bytes               each file of the header, in its order, whole
//! SHA-256: 32 bytes        of every byte before it
//! ```
//!
//! The sizes are known before the first byte is written, so a server can
//! stream the file as it reads it; a reader learns of a truncated or
//! corrupted file at the latest at the checksum, and nothing after it is
//! accepted.

use std::io::{self, Read, Write};

use ring::digest;
use serde::{Deserialize, Serialize};

/// Where the control plane serves a snapshot: admin only, `GET`.
pub const PATH: &str = "/bosun/v1/snapshot";
/// The magic at the start of every snapshot.
pub const MAGIC: &[u8; 8] = b"BOSUNSNP";
/// The layout version this code writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// Largest header a reader accepts.
pub const MAX_HEADER: u32 = 1024 * 1024;
/// The store's file in the data dir and in a snapshot.
pub const STORE_FILE: &str = "store.redb";
/// The extension of the files `bosun-control`'s periodic snapshots write.
pub const EXTENSION: &str = "bosun";
/// Left in a data dir by `bosun snapshot restore`: the control plane that
/// opens it first moves the store's revision on by
/// [`RESTORE_REVISION_BUMP`] and marks everything before compacted (etcd's
/// `--bump-revision --mark-compacted`), then removes it.
pub const RESTORED_MARKER: &str = "restored-from-snapshot";
/// How far a restored store's revision moves on: more than any server
/// writes between a snapshot and its restore, as etcd's docs advise.
pub const RESTORE_REVISION_BUMP: u64 = 1_000_000_000;
const CHECKSUM_LEN: usize = 32;

/// What a snapshot holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    /// The store's revision the copy was taken at.
    pub revision: u64,
    /// How many objects the store held then.
    pub objects: u64,
    /// When the copy was taken (RFC 3339, UTC).
    pub created_at: String,
    pub files: Vec<FileEntry>,
}

/// One file of the data dir in a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// A plain file name (no directory), as in the data dir.
    pub name: String,
    pub size: u64,
    /// Unix permission bits it is restored with.
    pub mode: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error(
        "not a bosun snapshot (it does not start with {:?})",
        String::from_utf8_lossy(MAGIC)
    )]
    NotASnapshot,
    #[error(
        "snapshot format version {0} is not supported (this bosun reads version {FORMAT_VERSION})"
    )]
    UnsupportedVersion(u32),
    #[error("the snapshot is truncated (it ends inside {0})")]
    Truncated(String),
    #[error("the snapshot's header is invalid: {0}")]
    BadHeader(String),
    #[error("the snapshot's checksum does not match its contents: it is corrupt")]
    ChecksumMismatch,
    #[error("the snapshot has data after its checksum: it is corrupt")]
    TrailingData,
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// Whether `name` may be a file of a snapshot: a plain name, no path.
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

impl Header {
    /// The problems of a header read from a file, if any: file names must
    /// be plain and unique, and the store must be there.
    pub fn check(&self) -> Result<(), String> {
        let mut seen = std::collections::HashSet::new();
        for f in &self.files {
            if !is_plain_name(&f.name) {
                return Err(format!("files: {:?} is not a plain file name", f.name));
            }
            if !seen.insert(f.name.as_str()) {
                return Err(format!("files: {:?} appears twice", f.name));
            }
            if f.mode & !0o777 != 0 {
                return Err(format!("files: {:?} has mode {:o}", f.name, f.mode));
            }
        }
        if !seen.contains(STORE_FILE) {
            return Err(format!("files: no {STORE_FILE}"));
        }
        Ok(())
    }

    /// The whole length of a snapshot with this header.
    pub fn encoded_len(&self) -> u64 {
        let json = serde_json::to_vec(self).expect("headers serialize");
        (MAGIC.len() + 8 + json.len() + CHECKSUM_LEN) as u64
            + self.files.iter().map(|f| f.size).sum::<u64>()
    }
}

/// Writes a snapshot to `out`: the header, then each file's bytes from
/// `open(entry)` (exactly `entry.size` of them), then the checksum.
pub fn write<W: Write>(
    out: W,
    header: &Header,
    mut open: impl FnMut(&FileEntry) -> io::Result<Box<dyn Read>>,
) -> io::Result<W> {
    let mut out = Hashing::new(out);
    let json = serde_json::to_vec(header).map_err(io::Error::other)?;
    out.write_all(MAGIC)?;
    out.write_all(&FORMAT_VERSION.to_be_bytes())?;
    out.write_all(&(json.len() as u32).to_be_bytes())?;
    out.write_all(&json)?;
    for entry in &header.files {
        let copied = io::copy(&mut open(entry)?.take(entry.size), &mut out)?;
        if copied != entry.size {
            return Err(io::Error::other(format!(
                "{} shrank while it was copied ({copied} of {} bytes)",
                entry.name, entry.size
            )));
        }
    }
    let (mut inner, sum) = out.finish();
    inner.write_all(sum.as_ref())?;
    inner.flush()?;
    Ok(inner)
}

/// Reads the snapshot in `input`: hands each file's bytes to `sink`
/// (which must read all of them) and returns the header once the checksum
/// has matched and nothing follows it. Whatever `sink` did with a file is
/// unconfirmed until then: a caller writes into a place it can throw away.
pub fn read<R: Read>(
    input: R,
    mut sink: impl FnMut(&FileEntry, &mut dyn Read) -> io::Result<()>,
) -> Result<Header, SnapshotError> {
    let mut input = Hashing::new(input);
    let mut magic = [0u8; 8];
    read_exact(&mut input, &mut magic, "the magic")?;
    if &magic != MAGIC {
        return Err(SnapshotError::NotASnapshot);
    }
    let mut word = [0u8; 4];
    read_exact(&mut input, &mut word, "the version")?;
    let version = u32::from_be_bytes(word);
    if version != FORMAT_VERSION {
        return Err(SnapshotError::UnsupportedVersion(version));
    }
    read_exact(&mut input, &mut word, "the header length")?;
    let len = u32::from_be_bytes(word);
    if len > MAX_HEADER {
        return Err(SnapshotError::BadHeader(format!(
            "its length {len} is over {MAX_HEADER}"
        )));
    }
    let mut json = vec![0u8; len as usize];
    read_exact(&mut input, &mut json, "the header")?;
    let header: Header =
        serde_json::from_slice(&json).map_err(|e| SnapshotError::BadHeader(e.to_string()))?;
    header.check().map_err(SnapshotError::BadHeader)?;
    for entry in &header.files {
        let mut part = (&mut input).take(entry.size);
        sink(entry, &mut part).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => SnapshotError::Truncated(entry.name.clone()),
            _ => SnapshotError::Io(e),
        })?;
        // Whatever the sink left unread, then: did the input end inside
        // the file?
        io::copy(&mut part, &mut io::sink())?;
        if part.limit() != 0 {
            return Err(SnapshotError::Truncated(entry.name.clone()));
        }
    }
    let (mut raw, sum) = input.finish();
    let mut stored = [0u8; CHECKSUM_LEN];
    read_exact(&mut raw, &mut stored, "the checksum")?;
    if stored != sum.as_ref() {
        return Err(SnapshotError::ChecksumMismatch);
    }
    let mut extra = [0u8; 1];
    if raw.read(&mut extra)? != 0 {
        return Err(SnapshotError::TrailingData);
    }
    Ok(header)
}

/// Reads a whole snapshot and checks it, keeping nothing.
pub fn verify<R: Read>(input: R) -> Result<Header, SnapshotError> {
    read(input, |_, r| io::copy(r, &mut io::sink()).map(drop))
}

fn read_exact(r: &mut impl Read, buf: &mut [u8], what: &str) -> Result<(), SnapshotError> {
    r.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => SnapshotError::Truncated(what.to_string()),
        _ => SnapshotError::Io(e),
    })
}

/// A reader or writer that hashes every byte that passes through it.
struct Hashing<T> {
    inner: T,
    hash: digest::Context,
}

impl<T> Hashing<T> {
    fn new(inner: T) -> Self {
        Hashing {
            inner,
            hash: digest::Context::new(&digest::SHA256),
        }
    }

    fn finish(self) -> (T, digest::Digest) {
        (self.inner, self.hash.finish())
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each file's name and bytes.
    type Files = Vec<(String, Vec<u8>)>;

    fn sample() -> (Header, Files) {
        let files = vec![
            (STORE_FILE.to_string(), vec![7u8; 5000]),
            ("ca.key".to_string(), b"-----BEGIN KEY-----".to_vec()),
            ("admin-token".to_string(), Vec::new()),
        ];
        let header = Header {
            revision: 42,
            objects: 9,
            created_at: "2026-12-06T05:00:00Z".into(),
            files: files
                .iter()
                .map(|(name, data)| FileEntry {
                    name: name.clone(),
                    size: data.len() as u64,
                    mode: 0o600,
                })
                .collect(),
        };
        (header, files)
    }

    fn encode() -> (Header, Files, Vec<u8>) {
        let (header, files) = sample();
        let bytes = write(Vec::new(), &header, |e| {
            let data = files.iter().find(|(n, _)| *n == e.name).unwrap().1.clone();
            Ok(Box::new(io::Cursor::new(data)))
        })
        .unwrap();
        (header, files, bytes)
    }

    #[test]
    fn round_trips_every_file_and_the_header() {
        let (header, files, bytes) = encode();
        assert_eq!(bytes.len() as u64, header.encoded_len());
        let mut got = Vec::new();
        let read_header = read(bytes.as_slice(), |e, r| {
            let mut data = Vec::new();
            r.read_to_end(&mut data)?;
            got.push((e.name.clone(), data));
            Ok(())
        })
        .unwrap();
        assert_eq!(read_header, header);
        assert_eq!(got, files);
    }

    #[test]
    fn every_flipped_byte_is_caught() {
        let (_, _, bytes) = encode();
        // Every byte of the header, a sample of the store's, every byte
        // of the small files and of the checksum.
        let positions: Vec<usize> = (0..bytes.len())
            .filter(|i| *i < 200 || *i % 97 == 0 || *i + 100 > bytes.len())
            .collect();
        for i in positions {
            let mut bad = bytes.clone();
            bad[i] ^= 0x01;
            assert!(
                verify(bad.as_slice()).is_err(),
                "flipping byte {i} went unnoticed"
            );
        }
        let mut bad = bytes.clone();
        bad[MAGIC.len() + 8 + 300] ^= 0x80;
        assert!(matches!(
            verify(bad.as_slice()),
            Err(SnapshotError::ChecksumMismatch)
        ));
    }

    #[test]
    fn truncated_or_extended_files_are_refused() {
        let (_, _, bytes) = encode();
        for len in [
            0,
            5,
            12,
            40,
            bytes.len() / 2,
            bytes.len() - 33,
            bytes.len() - 1,
        ] {
            match verify(&bytes[..len]) {
                Err(SnapshotError::Truncated(_)) => {}
                other => panic!("{len} of {} bytes: {other:?}", bytes.len()),
            }
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(
            verify(longer.as_slice()),
            Err(SnapshotError::TrailingData)
        ));
        assert!(matches!(
            verify(&b"not a snapshot at all"[..]),
            Err(SnapshotError::NotASnapshot)
        ));
    }

    #[test]
    fn headers_naming_paths_or_lacking_the_store_are_refused() {
        let (mut header, _) = sample();
        header.files[1].name = "../ca.key".into();
        assert!(header.check().unwrap_err().contains("../ca.key"));
        let (mut header, _) = sample();
        header.files.remove(0);
        assert!(header.check().unwrap_err().contains(STORE_FILE));
        let (mut header, _) = sample();
        header.files[2].name = STORE_FILE.into();
        assert!(header.check().unwrap_err().contains("twice"));
    }
}
