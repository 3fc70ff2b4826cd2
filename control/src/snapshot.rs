//! Snapshots of the running control plane: a consistent copy of the store
//! at one revision and the data dir's key files, in the format of
//! [`bosun::snapshot`]. Served to the admin at [`bosun::snapshot::PATH`]
//! (`bosun snapshot save`, [`crate::api`]) and written periodically into a
//! directory with a bounded number kept ([`run_periodic`], [`prune`]).

use std::fs::File;
use std::io::{self, Cursor, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bosun::snapshot::{self as format, FileEntry, Header, STORE_FILE};
use chrono::{DateTime, Utc};

use crate::store::EmbeddedStore;

/// The data dir's files a snapshot carries besides the store, with the
/// modes they are restored with: the CA (its key signs node certificates,
/// so joined nodes and kubeconfigs keep working), the service account key
/// (tokens already handed out stay valid), the admin token and the serving
/// certificate, and `bosun up`'s record. One that is missing is left out (the serving certificate
/// is made again at start if it is absent); `admin.kubeconfig` and
/// `address` are written by every start.
pub const DATA_FILES: &[(&str, u32)] = &[
    ("ca.crt", 0o644),
    ("ca.key", 0o600),
    ("sa.key", 0o600),
    ("admin-token", 0o600),
    ("server.crt", 0o644),
    ("server.key", 0o600),
    ("server.sans", 0o644),
    // What `bosun up` chose for the cluster (its ranges and port), so that
    // a restored cluster comes up with the ranges its objects hold.
    ("cluster.json", 0o644),
];

/// Takes snapshots of one control plane's store and data dir.
pub struct Snapshotter {
    data_dir: PathBuf,
    store: Arc<EmbeddedStore>,
}

/// A file removed when dropped: the store's copy while it is written out.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A snapshot taken and ready to be written out.
pub struct Taken {
    pub header: Header,
    store_copy: TempFile,
    /// The other files' bytes, read when the copy was taken.
    files: Vec<(String, Vec<u8>)>,
}

impl Taken {
    /// Writes the snapshot file to `out` (blocking).
    pub fn write_to<W: Write>(&self, out: W) -> io::Result<W> {
        format::write(out, &self.header, |entry| -> io::Result<Box<dyn Read>> {
            if entry.name == STORE_FILE {
                return Ok(Box::new(File::open(&self.store_copy.0)?));
            }
            let bytes = self
                .files
                .iter()
                .find(|(name, _)| *name == entry.name)
                .map(|(_, b)| b.clone())
                .unwrap_or_default();
            Ok(Box::new(Cursor::new(bytes)))
        })
    }
}

impl Snapshotter {
    pub fn new(data_dir: PathBuf, store: Arc<EmbeddedStore>) -> Self {
        Snapshotter { data_dir, store }
    }

    /// Copies the store at its current revision (writes go on meanwhile)
    /// into a temporary file of the data dir, and reads the key files
    /// (blocking).
    pub fn take(&self) -> anyhow::Result<Taken> {
        let copy = TempFile(
            self.data_dir
                .join(format!(".snapshot-{}.redb", uuid::Uuid::new_v4())),
        );
        let (revision, objects) = self.store.copy_to(&copy.0).context("copying the store")?;
        let store_size = std::fs::metadata(&copy.0)
            .with_context(|| format!("reading {}", copy.0.display()))?
            .len();
        let mut entries = vec![FileEntry {
            name: STORE_FILE.into(),
            size: store_size,
            mode: 0o600,
        }];
        let mut files = Vec::new();
        for (name, mode) in DATA_FILES {
            let path = self.data_dir.join(name);
            match std::fs::read(&path) {
                Ok(bytes) => {
                    entries.push(FileEntry {
                        name: name.to_string(),
                        size: bytes.len() as u64,
                        mode: *mode,
                    });
                    files.push((name.to_string(), bytes));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
            }
        }
        Ok(Taken {
            header: Header {
                revision,
                objects,
                created_at: Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                files: entries,
            },
            store_copy: copy,
            files,
        })
    }

    /// Takes a snapshot and writes it into `dir` as
    /// [`file_name`]: into a temporary file beside it, synced, then
    /// renamed, so the name only ever holds a whole snapshot (blocking).
    pub fn save_into(&self, dir: &Path) -> anyhow::Result<(PathBuf, Header)> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let taken = self.take()?;
        let path = dir.join(file_name(Utc::now(), taken.header.revision));
        let tmp = TempFile(dir.join(format!(".snapshot-{}.tmp", uuid::Uuid::new_v4())));
        // It holds the store and the keys: the owner's alone.
        let file = std::os::unix::fs::OpenOptionsExt::mode(
            std::fs::OpenOptions::new().write(true).create_new(true),
            0o600,
        )
        .open(&tmp.0)
        .with_context(|| format!("creating {}", tmp.0.display()))?;
        let file = taken
            .write_to(io::BufWriter::new(file))
            .and_then(|w| w.into_inner().map_err(|e| e.into_error()))
            .with_context(|| format!("writing {}", tmp.0.display()))?;
        file.sync_all()
            .with_context(|| format!("syncing {}", tmp.0.display()))?;
        std::fs::rename(&tmp.0, &path)
            .with_context(|| format!("renaming {} to {}", tmp.0.display(), path.display()))?;
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok((path, taken.header))
    }
}

const NAME_PREFIX: &str = "snapshot-";
const TIME_FORMAT: &str = "%Y%m%dT%H%M%SZ";

/// `snapshot-<UTC time>-<revision>.bosun`, e.g.
/// `snapshot-20261206T050000Z-1234.bosun`.
pub fn file_name(at: DateTime<Utc>, revision: u64) -> String {
    format!(
        "{NAME_PREFIX}{}-{revision}.{}",
        at.format(TIME_FORMAT),
        format::EXTENSION
    )
}

/// The time and revision of a name [`file_name`] made; None for any other.
fn parse_name(name: &str) -> Option<(chrono::NaiveDateTime, u64)> {
    let rest = name
        .strip_prefix(NAME_PREFIX)?
        .strip_suffix(&format!(".{}", format::EXTENSION))?;
    let (time, revision) = rest.split_once('-')?;
    if revision.is_empty() || !revision.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let at = chrono::NaiveDateTime::parse_from_str(time, TIME_FORMAT).ok()?;
    // Exactly the form file_name writes, nothing parse_from_str tolerates.
    if at.format(TIME_FORMAT).to_string() != time {
        return None;
    }
    Some((at, revision.parse().ok()?))
}

/// Removes the oldest of the periodic snapshots in `dir` beyond the
/// newest `keep`; only regular files named as [`file_name`] names them
/// are looked at. Returns what it removed.
pub fn prune(dir: &Path, keep: usize) -> io::Result<Vec<PathBuf>> {
    let mut own = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if !entry.file_type()?.is_file() {
            continue;
        }
        let name = entry.file_name();
        if let Some(order) = name.to_str().and_then(parse_name) {
            own.push((order, entry.path()));
        }
    }
    own.sort();
    let excess = own.len().saturating_sub(keep);
    let mut removed = Vec::new();
    for (_, path) in own.into_iter().take(excess) {
        std::fs::remove_file(&path)?;
        removed.push(path);
    }
    Ok(removed)
}

/// `--snapshot-interval`, `--snapshot-dir`, `--snapshot-retention`.
#[derive(Debug, Clone)]
pub struct PeriodicOptions {
    pub interval: Duration,
    pub dir: PathBuf,
    pub retention: usize,
}

/// Writes a snapshot into `options.dir` every `options.interval`, then
/// removes the oldest beyond `options.retention`.
pub async fn run_periodic(snapshotter: Arc<Snapshotter>, options: PeriodicOptions) {
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::now() + options.interval,
        options.interval,
    );
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let (s, o) = (snapshotter.clone(), options.clone());
        let done = tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
            let started = std::time::Instant::now();
            let (path, header) = s.save_into(&o.dir)?;
            let took = started.elapsed();
            let removed = prune(&o.dir, o.retention)
                .with_context(|| format!("removing old snapshots from {}", o.dir.display()))?;
            Ok((path, header, took, removed))
        })
        .await;
        match done {
            Ok(Ok((path, header, took, removed))) => tracing::info!(
                path = %path.display(),
                revision = header.revision,
                objects = header.objects,
                millis = took.as_millis() as u64,
                removed = removed.len(),
                "wrote a snapshot"
            ),
            Ok(Err(e)) => tracing::warn!(error = format!("{e:#}"), "periodic snapshot failed"),
            Err(e) => tracing::warn!(error = %e, "periodic snapshot failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Store, StoreOptions};
    use chrono::TimeZone;

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + secs, 0).unwrap()
    }

    #[test]
    fn names_parse_back_and_nothing_else_does() {
        let name = file_name(at(0), 1234);
        assert!(name.starts_with("snapshot-20") && name.ends_with("-1234.bosun"));
        assert_eq!(parse_name(&name).unwrap().1, 1234);
        for other in [
            "snapshot-20270115T080000Z-12.bosun.tmp",
            ".snapshot-20270115T080000Z-12.bosun",
            "snapshot-20270115T080000Z-.bosun",
            "snapshot-20270115T080000Z-1x.bosun",
            "snapshot-2027-01-15-12.bosun",
            "snapshot-20270115T80000Z-12.bosun",
            "my-snapshot-20270115T080000Z-12.bosun",
            "snapshot-20270115T080000Z-12.redb",
            "backup.bosun",
        ] {
            assert_eq!(parse_name(other), None, "{other}");
        }
    }

    #[test]
    fn retention_removes_only_its_own_files_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        // Made out of order; the 10th (rev 5) is older than the 11th
        // (rev 3) by time, which decides.
        let ours: Vec<String> = [(10, 5), (11, 3), (1, 1), (12, 9), (2, 2)]
            .iter()
            .map(|(t, r)| file_name(at(*t), *r))
            .collect();
        for name in &ours {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        let others = [
            "notes.txt",
            "snapshot-manual.bosun",
            "backup-20270115T080000Z-1.bosun",
            ".snapshot-abc.tmp",
        ];
        for name in others {
            std::fs::write(dir.path().join(name), b"keep").unwrap();
        }
        // A directory named like a snapshot is not a snapshot.
        std::fs::create_dir(dir.path().join(file_name(at(0), 0))).unwrap();

        let removed = prune(dir.path(), 2).unwrap();
        let removed: Vec<_> = removed
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
            .collect();
        assert_eq!(
            removed,
            [
                file_name(at(1), 1),
                file_name(at(2), 2),
                file_name(at(10), 5)
            ]
        );
        for kept in [file_name(at(11), 3), file_name(at(12), 9)]
            .iter()
            .map(String::as_str)
            .chain(others)
        {
            assert!(dir.path().join(kept).exists(), "{kept} was removed");
        }
        assert!(dir.path().join(file_name(at(0), 0)).is_dir());
        assert!(prune(dir.path(), 2).unwrap().is_empty());
    }

    #[tokio::test]
    async fn saved_snapshots_hold_the_store_and_keys_at_their_revision() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(
            EmbeddedStore::open(&dir.path().join(STORE_FILE), StoreOptions::default()).unwrap(),
        );
        for i in 0..10 {
            store
                .create(
                    &format!("/registry/configmaps/default/c{i}"),
                    b"{}".to_vec(),
                )
                .await
                .unwrap();
        }
        std::fs::write(dir.path().join("ca.key"), b"the CA key").unwrap();
        let s = Snapshotter::new(dir.path().to_path_buf(), store.clone());
        let out = dir.path().join("snapshots");
        let (path, header) = s.save_into(&out).unwrap();
        assert_eq!((header.revision, header.objects), (10, 10));
        let name = path.file_name().unwrap().to_str().unwrap();
        assert_eq!(parse_name(name).map(|(_, rev)| rev), Some(10), "{name}");
        // It holds the keys: the owner's alone, as the store is.
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir.path().join(STORE_FILE)), 0o600);
        // Only the snapshot is left: no temporary file, no store copy.
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1);
        assert!(!std::fs::read_dir(dir.path()).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with('.')));

        let restored = tempfile::tempdir().unwrap();
        let mut names = Vec::new();
        format::read(File::open(&path).unwrap(), |entry, r| {
            names.push(entry.name.clone());
            let mut f = File::create(restored.path().join(&entry.name))?;
            io::copy(r, &mut f).map(drop)
        })
        .unwrap();
        assert_eq!(names, [STORE_FILE, "ca.key"]);
        assert_eq!(
            std::fs::read(restored.path().join("ca.key")).unwrap(),
            b"the CA key"
        );
        let copy = EmbeddedStore::open(&restored.path().join(STORE_FILE), StoreOptions::default())
            .unwrap();
        assert_eq!(copy.current_revision(), 10);
        let (items, _) = copy.list("/registry/configmaps/").await.unwrap();
        assert_eq!(items.len(), 10);
        assert_eq!(items[3].mod_revision, 4);
    }
}
