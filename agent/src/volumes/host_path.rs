//! `hostPath` volumes: a path on the Docker engine's host, checked
//! against the volume's `type` (and created where the type says so), as
//! Kubernetes' hostPath plugin does. The engine's filesystem is seen here
//! under the agent's `--host-root`.

use std::os::unix::fs::FileTypeExt;
use std::path::Path;

/// Checks a hostPath against its `type`, creating it where the type says
/// so; `path` is the engine's, seen here under `root`.
pub(super) fn check_host_path(root: &Path, path: &str, kind: &str) -> Result<(), String> {
    let seen = root.join(path.trim_start_matches('/'));
    let p = seen.as_path();
    let meta = std::fs::metadata(p);
    let must_be = |ok: bool, what: &str| {
        if ok {
            Ok(())
        } else {
            Err(format!("hostPath type check failed: {path} is not {what}"))
        }
    };
    let is =
        |test: fn(&std::fs::FileType) -> bool| meta.as_ref().is_ok_and(|m| test(&m.file_type()));
    match kind {
        "" => Ok(()),
        "DirectoryOrCreate" | "Directory" => {
            if kind == "DirectoryOrCreate" && !p.exists() {
                std::fs::create_dir_all(p).map_err(|e| format!("creating {path}: {e}"))?;
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755));
            }
            must_be(p.is_dir(), "a directory")
        }
        "FileOrCreate" | "File" => {
            if kind == "FileOrCreate" && !p.exists() {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|e| format!("creating {path}: {e}"))?;
            }
            must_be(p.is_file(), "a file")
        }
        "Socket" => must_be(is(FileTypeExt::is_socket), "a socket"),
        "CharDevice" => must_be(is(FileTypeExt::is_char_device), "a character device"),
        "BlockDevice" => must_be(is(FileTypeExt::is_block_device), "a block device"),
        other => Err(format!("unknown hostPath type {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_path_types() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("made");
        check_host_path(Path::new("/"), d.to_str().unwrap(), "DirectoryOrCreate").unwrap();
        assert!(d.is_dir());
        check_host_path(Path::new("/"), d.to_str().unwrap(), "Directory").unwrap();
        assert!(check_host_path(Path::new("/"), d.to_str().unwrap(), "File").is_err());
        let f = dir.path().join("f");
        check_host_path(Path::new("/"), f.to_str().unwrap(), "FileOrCreate").unwrap();
        assert!(f.is_file());
        assert!(check_host_path(
            Path::new("/"),
            dir.path().join("nope").to_str().unwrap(),
            "Directory"
        )
        .is_err());
        assert!(check_host_path(Path::new("/"), "/dev/null", "CharDevice").is_ok());
        assert!(check_host_path(Path::new("/"), "/dev/null", "Socket").is_err());
    }

    #[test]
    fn host_paths_are_the_engines_seen_under_the_host_root() {
        // An agent in a container sees the engine's / at --host-root.
        let engine = tempfile::tempdir().unwrap();
        check_host_path(engine.path(), "/srv/data", "DirectoryOrCreate").unwrap();
        assert!(engine.path().join("srv/data").is_dir());
        let err = check_host_path(engine.path(), "/srv/data", "File").unwrap_err();
        assert!(err.contains("/srv/data is not a file"), "{err}");
        assert!(!err.contains(&engine.path().display().to_string()), "{err}");
    }
}
