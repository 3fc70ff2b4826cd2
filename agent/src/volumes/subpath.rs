//! `subPath` and `subPathExpr` mounts, prepared as the kubelet's
//! `PrepareSafeSubpath` does.
//!
//! A container of the pod may have put a symlink into the volume (an
//! emptyDir it mounts writable: `ln -s / /data/escape`), so the subPath is
//! never joined onto the volume's directory and handed to Docker, which
//! would follow the link onto the host. Instead it is opened below the
//! volume ([`crate::volumes::safe_path`]: `openat2` with `RESOLVE_BENEATH`), and
//! the very file or directory that descriptor holds is bind-mounted
//! through `/proc/self/fd/N` onto
//! `<pod dir>/volume-subpaths/<volume>/<container>/<mount index>`, which
//! is what Docker mounts. A symlink swapped in after the check changes
//! nothing: the bind is of what was opened, not of a path looked up
//! again. The binds go when the pod's directory is removed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sys::stat::{fstat, SFlag};

use crate::volumes::safe_path::{is_escape, VolumeRoot};

/// The directory of a pod's subPath binds.
const DIR: &str = "volume-subpaths";

/// `ExpandContainerVolumeMounts`: `$(VAR)` in a `subPathExpr` from the
/// container's environment (`$$` is a `$`); a variable that is missing or
/// empty is an error, as in the kubelet.
pub fn expand(expr: &str, env: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::new();
    let mut missing = std::collections::BTreeSet::new();
    let mut rest = expr;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(r) = after.strip_prefix('$') {
            out.push('$');
            rest = r;
        } else if let Some((name, r)) = after.strip_prefix('(').and_then(|a| a.split_once(')')) {
            match env.get(name).filter(|v| !v.is_empty()) {
                Some(v) => out.push_str(v),
                None => {
                    missing.insert(name.to_string());
                }
            }
            rest = r;
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    if !missing.is_empty() {
        let names: Vec<String> = missing.into_iter().collect();
        return Err(format!("missing value for {}", names.join(", ")));
    }
    Ok(out)
}

/// The kubelet's checks of a subPath (given, or expanded) before it is
/// used: not absolute, no `..` element.
pub fn check(sub: &str) -> Result<(), String> {
    if sub.starts_with('/') {
        return Err(format!(
            "error SubPath `{sub}` must not be an absolute path"
        ));
    }
    if sub.split('/').any(|p| p == "..") {
        return Err(format!(
            "unable to provision SubPath `{sub}`: must not contain '..'"
        ));
    }
    Ok(())
}

/// One subPath mount of a container.
pub struct SubpathMount<'a> {
    pub pod_dir: &'a Path,
    /// The volume's directory as the agent sees it.
    pub volume_root: &'a Path,
    pub volume: &'a str,
    pub container: &'a str,
    pub index: usize,
    pub sub_path: &'a str,
}

/// Opens the subPath below its volume (making it a directory first when
/// it is missing, as the kubelet does) and binds what it opened at the
/// pod's subPath dir; returns that path for Docker. The error names the
/// mount, the container and the subPath, never a host path.
pub fn prepare(m: &SubpathMount) -> Result<PathBuf, String> {
    let failed = |why: String| {
        format!(
            "failed to prepare subPath for volumeMount {:?} of container {:?}: {why}",
            m.volume, m.container
        )
    };
    let escape = |e: std::io::Error| {
        if is_escape(&e) {
            format!("subPath {:?} leads out of the volume", m.sub_path)
        } else {
            format!("subPath {:?}: {e}", m.sub_path)
        }
    };
    check(m.sub_path).map_err(failed)?;
    let root = VolumeRoot::open(m.volume_root)
        .map_err(|e| failed(format!("volume {:?}: {e}", m.volume)))?;
    let rel = Path::new(m.sub_path);
    if !root.exists(rel).map_err(|e| failed(escape(e)))? {
        root.mkdir_all(rel, 0o755).map_err(|e| failed(escape(e)))?;
    }
    let fd = root
        .open_beneath(rel, OFlag::O_PATH, 0)
        .map_err(|e| failed(escape(e)))?;
    let st = fstat(&fd).map_err(|e| failed(format!("stat: {e}")))?;
    let is_dir = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR;
    let target = m
        .pod_dir
        .join(DIR)
        .join(m.volume)
        .join(m.container)
        .join(m.index.to_string());
    let parent = target.parent().expect("a joined path has a parent");
    std::fs::create_dir_all(parent).map_err(|e| failed(format!("bind target: {e}")))?;
    // A bind left by an earlier start of the container goes first (the
    // container that used it keeps its own copy of the mount).
    unmount(&target);
    match (std::fs::symlink_metadata(&target), is_dir) {
        (Ok(meta), true) if meta.is_dir() => {}
        (Ok(meta), false) if meta.is_file() => {}
        (Ok(meta), _) => {
            let removed = if meta.is_dir() {
                std::fs::remove_dir(&target)
            } else {
                std::fs::remove_file(&target)
            };
            removed.map_err(|e| failed(format!("bind target: {e}")))?;
        }
        (Err(_), _) => {}
    }
    if std::fs::symlink_metadata(&target).is_err() {
        let made = if is_dir {
            std::fs::create_dir(&target)
        } else {
            std::fs::File::create(&target).map(drop)
        };
        made.map_err(|e| failed(format!("bind target: {e}")))?;
    }
    if !super::mounts() {
        return Ok(target);
    }
    mount(
        Some(&VolumeRoot::proc_path(&fd)),
        &target,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(|e| failed(format!("bind mount: {e}")))?;
    Ok(target)
}

/// Unmounts whatever is mounted at `target` (binds may stack).
fn unmount(target: &Path) {
    for _ in 0..8 {
        if umount2(target, MntFlags::MNT_DETACH).is_err() {
            break;
        }
    }
}

/// Unmounts every subPath bind of the pod whose directory is `pod_dir`;
/// returns whether none is left mounted (so that removing the directory
/// cannot reach into a volume, a hostPath's included).
pub fn unmount_all(pod_dir: &Path) -> bool {
    let mut clean = true;
    let entries = |p: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(p)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    for volume in entries(&pod_dir.join(DIR)) {
        for container in entries(&volume) {
            for target in entries(&container) {
                unmount(&target);
                if is_mount_point(&target) {
                    tracing::warn!(target = %target.display(), "subPath bind still mounted");
                    clean = false;
                }
            }
        }
    }
    clean
}

fn is_mount_point(path: &Path) -> bool {
    let target = path.to_string_lossy();
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|m| {
            m.lines()
                .any(|l| l.split_whitespace().nth(4) == Some(&*target))
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_path_exprs_expand_from_the_environment() {
        let env = BTreeMap::from([
            ("POD".to_string(), "web-0".to_string()),
            ("EMPTY".to_string(), String::new()),
        ]);
        assert_eq!(expand("logs/$(POD)", &env).unwrap(), "logs/web-0");
        assert_eq!(expand("a$$(POD)", &env).unwrap(), "a$(POD)");
        assert_eq!(expand("cost$5", &env).unwrap(), "cost$5");
        assert_eq!(
            expand("$(NOPE)/$(EMPTY)", &env).unwrap_err(),
            "missing value for EMPTY, NOPE"
        );
    }

    #[test]
    fn sub_paths_are_checked_as_the_kubelet_does() {
        assert!(check("a/b").is_ok());
        assert_eq!(
            check("/etc").unwrap_err(),
            "error SubPath `/etc` must not be an absolute path"
        );
        assert_eq!(
            check("a/../..").unwrap_err(),
            "unable to provision SubPath `a/../..`: must not contain '..'"
        );
    }

    #[test]
    fn a_sub_path_through_a_planted_link_is_refused_before_anything_is_made() {
        let tmp = tempfile::tempdir().unwrap();
        let vol = tmp.path().join("vol");
        std::fs::create_dir(&vol).unwrap();
        std::os::unix::fs::symlink("/", vol.join("escape")).unwrap();
        std::os::unix::fs::symlink(tmp.path(), vol.join("abs")).unwrap();
        for sub in ["escape/etc", "abs/made-here", "escape"] {
            let err = prepare(&SubpathMount {
                pod_dir: &tmp.path().join("pod"),
                volume_root: &vol,
                volume: "data",
                container: "app",
                index: 0,
                sub_path: sub,
            })
            .unwrap_err();
            assert_eq!(
                err,
                format!("failed to prepare subPath for volumeMount \"data\" of container \"app\": subPath {sub:?} leads out of the volume")
            );
        }
        assert!(!tmp.path().join("made-here").exists());
        assert!(!tmp.path().join("pod").exists(), "no bind target made");
    }

    #[test]
    fn the_bind_is_of_what_was_opened_and_goes_with_the_pod() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: bind mounts need root");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let vol = tmp.path().join("vol");
        std::fs::create_dir_all(vol.join("inner")).unwrap();
        std::fs::write(vol.join("inner/marker"), "volume").unwrap();
        let pod_dir = tmp.path().join("pod");
        let m = |sub: &'static str, index| SubpathMount {
            pod_dir: &pod_dir,
            volume_root: &vol,
            volume: "data",
            container: "app",
            index,
            sub_path: sub,
        };
        // The binds go even if an assertion fails.
        struct Unbind<'a>(&'a Path);
        impl Drop for Unbind<'_> {
            fn drop(&mut self) {
                unmount_all(self.0);
            }
        }
        let _unbind = Unbind(&pod_dir);
        let target = prepare(&m("inner", 0)).unwrap();
        assert_eq!(target, pod_dir.join("volume-subpaths/data/app/0"));
        // The name swapped for a link out after the bind: the bind still
        // holds the directory that was checked.
        std::fs::rename(vol.join("inner"), vol.join("moved")).unwrap();
        std::os::unix::fs::symlink("/", vol.join("inner")).unwrap();
        assert_eq!(
            std::fs::read_to_string(target.join("marker")).unwrap(),
            "volume"
        );
        // A file, and a missing path made as a directory below the volume.
        std::fs::write(vol.join("moved/file"), "f").unwrap();
        let file = prepare(&m("moved/file", 1)).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "f");
        let made = prepare(&m("new/dir", 2)).unwrap();
        assert!(vol.join("new/dir").is_dir() && made.is_dir());
        // Preparing again (a restarted container) replaces the bind.
        prepare(&m("moved/file", 1)).unwrap();
        assert!(unmount_all(&pod_dir));
        assert!(!is_mount_point(&target) && !is_mount_point(&file));
        std::fs::remove_dir_all(&pod_dir).unwrap();
        assert!(vol.join("moved/marker").exists(), "the volume is untouched");
    }
}
