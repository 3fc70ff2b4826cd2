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
    f.write_all(contents.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
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
    }
}
