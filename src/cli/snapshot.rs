//! `bosun snapshot save FILE` and `bosun snapshot restore FILE --data-dir
//! DIR`, as `etcdctl snapshot save|restore` and k3s' `etcd-snapshot`: the
//! running control plane copies its store at one revision and sends it
//! with its keys ([`bosun::snapshot`] is the file); restore checks the file
//! whole before anything is laid into the data dir a `bosun-control
//! --data-dir DIR` (or `bosun up --data-dir DIR`) then serves.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Context as _, Result};
use bosun::snapshot::{self as format, Header, STORE_FILE};
use clap::{Args, Subcommand};
use futures::AsyncReadExt;

use super::client::{ConnectOptions, Ctx};

#[derive(Debug, Args)]
pub struct SnapshotArgs {
    #[command(subcommand)]
    command: SnapshotCommand,
}

#[derive(Debug, Subcommand)]
enum SnapshotCommand {
    /// Save a consistent copy of the running control plane's store and keys to FILE.
    Save {
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// Lay a snapshot into a new data dir for `bosun-control --data-dir DIR`.
    Restore {
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// The control plane's data dir to make; it must not hold a store.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
    },
    /// Check a snapshot file and print what it holds.
    Status {
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
}

pub async fn snapshot(args: &SnapshotArgs, opts: &ConnectOptions) -> Result<bool> {
    match &args.command {
        SnapshotCommand::Save { file } => {
            let ctx = Ctx::connect(opts).await?;
            let started = Instant::now();
            let (header, bytes) = save(&ctx, file).await?;
            println!(
                "Snapshot saved to {}: revision {}, {} objects, {} bytes in {:.2}s",
                file.display(),
                header.revision,
                header.objects,
                bytes,
                started.elapsed().as_secs_f64()
            );
        }
        SnapshotCommand::Restore { file, data_dir } => {
            let header = restore(file, data_dir)?;
            println!(
                "Restored revision {} ({} objects, taken {}) into {}.\n\
                 Start it with: bosun-control --data-dir {}  (or: bosun up --data-dir {})",
                header.revision,
                header.objects,
                header.created_at,
                data_dir.display(),
                data_dir.display(),
                data_dir.display()
            );
        }
        SnapshotCommand::Status { file } => {
            let header =
                format::verify(open(file)?).map_err(|e| anyhow!("{}: {e}", file.display()))?;
            println!(
                "{}: revision {}, {} objects, taken {}",
                file.display(),
                header.revision,
                header.objects,
                header.created_at
            );
            for f in &header.files {
                println!("  {:<12} {:>10} bytes  {:o}", f.name, f.size, f.mode);
            }
        }
    }
    Ok(true)
}

fn open(file: &Path) -> Result<io::BufReader<File>> {
    let f = File::open(file).with_context(|| format!("opening {}", file.display()))?;
    Ok(io::BufReader::new(f))
}

/// A path beside `path` for a file or dir being made, unique to this run.
fn temp_beside(path: &Path, what: &str) -> Result<PathBuf> {
    let name = path
        .file_name()
        .ok_or_else(|| anyhow!("{} names no file", path.display()))?
        .to_string_lossy();
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok(parent.join(format!(
        ".{name}.{what}-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    )))
}

/// Removes what it names when dropped, unless disarmed.
struct Cleanup(Option<PathBuf>);

impl Cleanup {
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            if p.is_dir() {
                let _ = std::fs::remove_dir_all(&p);
            } else {
                let _ = std::fs::remove_file(&p);
            }
        }
    }
}

/// Streams the server's snapshot into a temporary file beside `file`,
/// checks it whole, then renames it to `file`.
async fn save(ctx: &Ctx, file: &Path) -> Result<(Header, u64)> {
    if file.is_dir() {
        bail!(
            "{} is a directory: name the snapshot file to write",
            file.display()
        );
    }
    let tmp = temp_beside(file, "partial")?;
    let mut guard = Cleanup(Some(tmp.clone()));
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("creating {}", tmp.display()))?;
    let req = http::Request::builder()
        .method(http::Method::GET)
        .uri(format::PATH)
        .header(http::header::ACCEPT, "application/octet-stream")
        .header(http::header::ACCEPT_ENCODING, "identity")
        .body(Vec::new())?;
    let mut body = ctx
        .client
        .request_stream(req)
        .await
        .context("asking the control plane for a snapshot")?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut bytes = 0u64;
    loop {
        let n = body
            .read(&mut buf)
            .await
            .context("receiving the snapshot")?;
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n])
            .with_context(|| format!("writing {}", tmp.display()))?;
        bytes += n as u64;
    }
    out.sync_all()
        .with_context(|| format!("syncing {}", tmp.display()))?;
    drop(out);
    let header = format::verify(open(&tmp)?)
        .map_err(|e| anyhow!("the snapshot received is not whole ({bytes} bytes): {e}"))?;
    std::fs::rename(&tmp, file)
        .with_context(|| format!("renaming {} to {}", tmp.display(), file.display()))?;
    guard.disarm();
    Ok((header, bytes))
}

/// Checks `file` whole, then writes its files into a temporary dir beside
/// `data_dir` and renames that to `data_dir` (or, if `data_dir` exists
/// and holds none of them, moves them in, the store last). Nothing is
/// left behind on any error.
pub fn restore(file: &Path, data_dir: &Path) -> Result<Header> {
    let header = format::verify(open(file)?).map_err(|e| anyhow!("{}: {e}", file.display()))?;
    let exists = data_dir.exists();
    if exists {
        if !data_dir.is_dir() {
            bail!("--data-dir {} is not a directory", data_dir.display());
        }
        if data_dir.join(STORE_FILE).exists() {
            bail!(
                "--data-dir {} already holds a store ({}); restore into a new or empty directory \
                 (a running or stopped control plane's data is never overwritten)",
                data_dir.display(),
                data_dir.join(STORE_FILE).display()
            );
        }
        let clashes: Vec<String> = header
            .files
            .iter()
            .filter(|f| data_dir.join(&f.name).exists())
            .map(|f| f.name.clone())
            .collect();
        if !clashes.is_empty() {
            bail!(
                "--data-dir {} already holds {}; restore into a new or empty directory",
                data_dir.display(),
                clashes.join(", ")
            );
        }
    }
    if let Some(parent) = data_dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let staging = temp_beside(data_dir, "restore")?;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&staging)
        .with_context(|| format!("creating {}", staging.display()))?;
    let mut guard = Cleanup(Some(staging.clone()));
    // Read again, now keeping the files; the checksum is checked again at
    // the end, and only then is anything renamed into place.
    format::read(open(file)?, |entry, r| {
        let path = staging.join(&entry.name);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        io::copy(r, &mut f)?;
        f.set_permissions(std::fs::Permissions::from_mode(entry.mode))?;
        f.sync_all()
    })
    .map_err(|e| anyhow!("{}: {e}", file.display()))?;
    // The first control plane on it moves the revisions on (see the marker).
    std::fs::write(
        staging.join(bosun::snapshot::RESTORED_MARKER),
        format!("{}\n", header.revision),
    )
    .context("marking the store as restored")?;
    if exists {
        // Into the existing (empty or unrelated) dir: the store last, so
        // that the dir is never a store without its keys.
        let mut names: Vec<&str> = header.files.iter().map(|f| f.name.as_str()).collect();
        names.push(bosun::snapshot::RESTORED_MARKER);
        names.sort_by_key(|n| *n == STORE_FILE);
        for name in names {
            std::fs::rename(staging.join(name), data_dir.join(name))
                .with_context(|| format!("moving {name} into {}", data_dir.display()))?;
        }
    } else {
        std::fs::rename(&staging, data_dir)
            .with_context(|| format!("renaming {} to {}", staging.display(), data_dir.display()))?;
        guard.disarm();
    }
    if let Some(parent) = data_dir.parent() {
        if let Ok(d) = File::open(if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        }) {
            let _ = d.sync_all();
        }
    }
    Ok(header)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bosun::snapshot::FileEntry;

    fn snapshot_file(dir: &Path) -> PathBuf {
        let files = [
            (STORE_FILE, b"store bytes".to_vec(), 0o600),
            ("ca.crt", b"CA".to_vec(), 0o644),
        ];
        let header = Header {
            revision: 7,
            objects: 3,
            created_at: "2026-12-06T05:00:00Z".into(),
            files: files
                .iter()
                .map(|(n, b, m)| FileEntry {
                    name: n.to_string(),
                    size: b.len() as u64,
                    mode: *m,
                })
                .collect(),
        };
        let path = dir.join("s.bosun");
        let out = File::create(&path).unwrap();
        format::write(out, &header, |e| {
            let data = files.iter().find(|f| f.0 == e.name).unwrap().1.clone();
            Ok(Box::new(io::Cursor::new(data)))
        })
        .unwrap();
        path
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn restores_into_a_new_dir_with_modes() {
        let tmp = tempfile::tempdir().unwrap();
        let file = snapshot_file(tmp.path());
        let target = tmp.path().join("a/b/data");
        let header = restore(&file, &target).unwrap();
        assert_eq!(header.revision, 7);
        assert_eq!(
            entries(&target),
            ["ca.crt", bosun::snapshot::RESTORED_MARKER, STORE_FILE]
        );
        let mode = |n: &str| {
            std::fs::metadata(target.join(n))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!((mode(STORE_FILE), mode("ca.crt")), (0o600, 0o644));
        assert_eq!(entries(&tmp.path().join("a/b")), ["data"]);
        // Never over a store.
        let err = restore(&file, &target).unwrap_err().to_string();
        assert!(err.contains("already holds a store"), "{err}");
        // Into an empty existing dir, and beside an unrelated file.
        let empty = tmp.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        std::fs::write(empty.join("control.log"), b"").unwrap();
        restore(&file, &empty).unwrap();
        assert_eq!(
            entries(&empty),
            [
                "ca.crt",
                "control.log",
                bosun::snapshot::RESTORED_MARKER,
                STORE_FILE
            ]
        );
    }

    #[test]
    fn a_truncated_file_writes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let file = snapshot_file(tmp.path());
        let bytes = std::fs::read(&file).unwrap();
        std::fs::write(&file, &bytes[..bytes.len() - 5]).unwrap();
        let target = tmp.path().join("data");
        let err = restore(&file, &target).unwrap_err().to_string();
        assert!(err.contains("truncated"), "{err}");
        assert_eq!(entries(tmp.path()), ["s.bosun"]);
    }
}
