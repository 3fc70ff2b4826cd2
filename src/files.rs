//! Files the processes keep in their data dirs (tokens, certificates,
//! addresses), written so that readers see all of a file or none of it.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Writes `contents` to `path` with permissions `mode`: into a temporary
/// file beside it, synced, then renamed over `path`.
pub fn write_atomically(path: &Path, contents: &str, mode: u32) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)?;
    // `mode` applies only to a new file: a temporary one left by a crash
    // keeps its own, so it is set here, before the secret is written.
    f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
    f.write_all(contents.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Creates the file `path` as `0600` if it is missing, and makes an
/// existing one `0600` (one an older release left `0644`): for files that
/// others create after (the store, which its library opens itself).
pub fn make_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn replaces_the_file_whole_with_the_mode() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("token");
        write_atomically(&p, "one\n", 0o600).unwrap();
        write_atomically(&p, "two\n", 0o600).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two\n");
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(!dir.path().join("token.tmp").exists());
        // A temporary file a crash left with a wider mode does not keep it.
        std::fs::write(dir.path().join("token.tmp"), "old").unwrap();
        std::fs::set_permissions(
            dir.path().join("token.tmp"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        write_atomically(&p, "three\n", 0o600).unwrap();
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn make_private_creates_or_narrows_and_keeps_the_contents() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("store.redb");
        make_private(&p).unwrap();
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        std::fs::write(&p, "data").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        make_private(&p).unwrap();
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "data");
    }
}
