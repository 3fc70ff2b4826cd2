//! The kubelet's atomic writer: a configMap, secret, downwardAPI or
//! projected volume's files written so a running container sees an edit
//! (or a refreshed token) as one change:
//!
//! ```text
//! <dir>/..2026_12_03_19_40_00.123456789/<files>   the current payload
//! <dir>/..data -> ..2026_12_03_19_40_00.123456789  swapped by rename(2)
//! <dir>/<key> -> ..data/<key>                     what the user sees
//! ```
//!
//! Every path is checked as the kubelet's `validatePayload` does and
//! opened below the volume's directory ([`crate::volumes::safe_path`]), so neither
//! a bad item path nor a symlink put into the directory leads a write
//! outside it. The files and directories belong to the pod's user and
//! group ([`Ownership`]): directories `0700` for a known user (`02750`
//! with an fsGroup), files as `defaultMode`/`mode` say.

use std::collections::BTreeMap;
use std::fs::File as StdFile;
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;
use nix::fcntl::{renameat, OFlag};
use nix::unistd::{symlinkat, unlinkat, UnlinkatFlags};

use crate::volumes::safe_path::{validate_payload_path, VolumeRoot};

/// One file of a volume's payload: its bytes and mode.
#[derive(Debug, Clone, PartialEq)]
pub struct File {
    pub data: Vec<u8>,
    pub mode: u32,
}

/// The largest file read back when comparing (a Secret is at most 1 MiB).
const MAX_READ: u64 = 4 << 20;

/// Whom a volume's files are for: the user every container of the pod
/// runs as, if they all name the same one (the kubelet's `FsUser`), and
/// the pod's `fsGroup`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ownership {
    pub uid: Option<u32>,
    pub gid: Option<u32>,
}

impl Ownership {
    /// The kubelet's `FsUserFrom` and the pod's `fsGroup`.
    pub fn of_pod(pod: &Pod) -> Ownership {
        let Some(spec) = pod.spec.as_ref() else {
            return Ownership::default();
        };
        let psc = spec.security_context.as_ref();
        let mut uid = None;
        for c in spec
            .init_containers
            .iter()
            .flatten()
            .chain(&spec.containers)
        {
            let effective = c
                .security_context
                .as_ref()
                .and_then(|s| s.run_as_user)
                .or_else(|| psc.and_then(|s| s.run_as_user));
            match (effective, uid) {
                (None, _) => {
                    uid = None;
                    break;
                }
                (Some(u), Some(seen)) if u != seen => {
                    uid = None;
                    break;
                }
                (Some(u), _) => uid = Some(u),
            }
        }
        Ownership {
            uid: uid.and_then(|u| u32::try_from(u).ok()),
            gid: psc
                .and_then(|s| s.fs_group)
                .and_then(|g| u32::try_from(g).ok()),
        }
    }

    /// Whether the files' reader is known (the token is then `0600`, as
    /// the kubelet makes it).
    pub fn known(&self) -> bool {
        self.uid.is_some() || self.gid.is_some()
    }

    /// A directory's mode: the known user alone (`0700`), the fsGroup too
    /// (`02750`, set-group-ID as `SetVolumeOwnership` leaves it), or,
    /// when the containers run as their image's user, which the agent does
    /// not know, readable by any (`0755`; other users of the host are kept
    /// out by the pods directory's `0750`).
    pub fn dir_mode(&self) -> u32 {
        match (self.uid, self.gid) {
            (_, Some(_)) => 0o2750,
            (Some(_), None) => 0o700,
            (None, None) => 0o755,
        }
    }

    /// A file's mode: as asked, and group-readable with an fsGroup (the
    /// read-only mask of `SetVolumeOwnership`).
    pub fn file_mode(&self, mode: u32) -> u32 {
        if self.gid.is_some() {
            mode | 0o440
        } else {
            mode
        }
    }

    /// Gives the open file or directory to the user and group, then sets
    /// `mode` (after the chown, which may clear set-ID bits).
    fn apply(&self, f: &StdFile, mode: u32) -> io::Result<()> {
        if self.known() {
            std::os::unix::fs::fchown(f, self.uid, self.gid)?;
        }
        f.set_permissions(std::fs::Permissions::from_mode(mode))
    }
}

/// A name the writer made directly in the volume's directory (`..data`'s
/// target): one component, starting with `..`.
fn own_name(target: &Path) -> Option<String> {
    let name = target.to_str()?;
    (name.starts_with("..") && name.len() > 2 && name != "..data" && !name.contains('/'))
        .then(|| name.to_string())
}

/// The payload now behind `..data`, as [`write`] left it; `None` when
/// anything there is not what the writer makes.
fn current(root: &VolumeRoot) -> Option<BTreeMap<String, File>> {
    let target = own_name(&root.read_link("..data")?)?;
    let mut out = BTreeMap::new();
    fn walk(root: &VolumeRoot, rel: &Path, out: &mut BTreeMap<String, File>) -> Option<()> {
        let dir = root
            .open_beneath(rel, OFlag::O_RDONLY | OFlag::O_DIRECTORY, 0)
            .ok()?;
        for e in std::fs::read_dir(VolumeRoot::proc_path(&dir)).ok()? {
            let e = e.ok()?;
            let path = rel.join(e.file_name());
            let kind = e.file_type().ok()?;
            if kind.is_dir() {
                walk(root, &path, out)?;
                continue;
            }
            if !kind.is_file() {
                return None;
            }
            let fd = root
                .open_beneath(&path, OFlag::O_RDONLY | OFlag::O_NONBLOCK, 0)
                .ok()?;
            let f = StdFile::from(fd);
            let meta = f.metadata().ok()?;
            if !meta.is_file() || meta.len() > MAX_READ {
                return None;
            }
            let mut data = Vec::new();
            f.take(MAX_READ).read_to_end(&mut data).ok()?;
            let key = path.strip_prefix(rel_base(&path)).ok()?;
            out.insert(
                key.to_string_lossy().into_owned(),
                File {
                    data,
                    mode: meta.mode() & 0o7777,
                },
            );
        }
        Some(())
    }
    /// The payload dir a path is under (its first component).
    fn rel_base(p: &Path) -> PathBuf {
        p.components().take(1).collect()
    }
    walk(root, Path::new(&target), &mut out)?;
    Some(out)
}

fn invalid(e: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, e)
}

fn nix_err(e: nix::errno::Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

/// Writes `files` into `dir` with the atomic writer layout, owned as
/// `owner` says; nothing is touched when they are already what `..data`
/// holds. Returns whether anything changed. A path that is not relative
/// and descending, or that would lead out of `dir`, fails the write
/// before anything is written.
pub fn write(dir: &Path, files: &BTreeMap<String, File>, owner: Ownership) -> io::Result<bool> {
    for rel in files.keys() {
        validate_payload_path(rel).map_err(invalid)?;
    }
    std::fs::create_dir_all(dir)?;
    let root = VolumeRoot::open(dir)?;
    let dir_mode = owner.dir_mode();
    let top = root.open_beneath(Path::new("."), OFlag::O_RDONLY | OFlag::O_DIRECTORY, 0)?;
    owner.apply(&StdFile::from(top), dir_mode)?;
    let want: BTreeMap<String, File> = files
        .iter()
        .map(|(k, f)| {
            let mode = owner.file_mode(f.mode);
            (
                k.clone(),
                File {
                    data: f.data.clone(),
                    mode,
                },
            )
        })
        .collect();
    if current(&root).as_ref() == Some(&want) {
        return Ok(false);
    }
    let old_target = root.read_link("..data").as_deref().and_then(own_name);
    let now = chrono::Utc::now();
    let stamp = format!("..{}", now.format("%Y_%m_%d_%H_%M_%S%.9f"));
    owner.apply(&root.mkdir_all(Path::new(&stamp), dir_mode)?, dir_mode)?;
    for (rel, f) in &want {
        let path = Path::new(&stamp).join(rel);
        // Each directory on the way, as the volume's root.
        let mut parents: Vec<&Path> = path.ancestors().skip(1).collect();
        parents.reverse();
        for p in parents.iter().skip(2) {
            owner.apply(&root.mkdir_all(p, dir_mode)?, dir_mode)?;
        }
        let file = root.create_file(&path, &f.data, dir_mode)?;
        owner.apply(&file, f.mode)?;
    }
    // Swap ..data in one rename (the *at calls never follow the last name).
    let _ = unlinkat(root.fd(), "..data_tmp", UnlinkatFlags::NoRemoveDir);
    symlinkat(stamp.as_str(), root.fd(), "..data_tmp").map_err(nix_err)?;
    renameat(root.fd(), "..data_tmp", root.fd(), "..data").map_err(nix_err)?;
    // The user-visible names: one symlink per top-level entry.
    let tops: std::collections::BTreeSet<String> = want
        .keys()
        .filter_map(|k| k.split('/').next().map(str::to_string))
        .collect();
    for top in &tops {
        if root.read_link(top).is_none() && !root.exists(Path::new(top))? {
            let target = PathBuf::from("..data").join(top);
            symlinkat(&target, root.fd(), top.as_str()).map_err(nix_err)?;
        }
    }
    for e in std::fs::read_dir(dir)?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("..") && !tops.contains(&name) {
            let _ = unlinkat(root.fd(), name.as_str(), UnlinkatFlags::NoRemoveDir);
        }
    }
    if let Some(old) = old_target.filter(|o| *o != stamp) {
        // One component of `dir`: std's remove_dir_all removes a symlink
        // there itself, never what it points at.
        let _ = std::fs::remove_dir_all(dir.join(old));
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn files(pairs: &[(&str, &str, u32)]) -> BTreeMap<String, File> {
        pairs
            .iter()
            .map(|(k, v, m)| {
                (
                    k.to_string(),
                    File {
                        data: v.as_bytes().to_vec(),
                        mode: *m,
                    },
                )
            })
            .collect()
    }

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn the_atomic_writer_swaps_data_and_keeps_the_user_visible_links() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("vol");
        let first = files(&[("a", "1", 0o644), ("sub/b", "2", 0o400)]);
        let owner = Ownership::default();
        assert!(write(&dir, &first, owner).unwrap());
        assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "1");
        assert_eq!(std::fs::read_to_string(dir.join("sub/b")).unwrap(), "2");
        assert_eq!(
            std::fs::read_link(dir.join("a")).unwrap(),
            PathBuf::from("..data/a")
        );
        assert_eq!(mode(&dir.join("sub/b")), 0o400);
        let before = std::fs::read_link(dir.join("..data")).unwrap();
        assert!(
            !write(&dir, &first, owner).unwrap(),
            "unchanged: nothing written"
        );

        let second = files(&[("a", "changed", 0o644), ("c", "3", 0o644)]);
        assert!(write(&dir, &second, owner).unwrap());
        assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "changed");
        assert!(std::fs::symlink_metadata(dir.join("sub")).is_err(), "gone");
        assert!(!dir.join(&before).exists(), "the old payload is removed");
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with(".."))
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn paths_out_of_the_volume_are_refused_and_nothing_is_written() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("vol");
        for bad in [
            "../escaped",
            "../../escaped",
            "/escaped",
            "..data/x",
            "a/../../escaped",
        ] {
            let err = write(
                &dir,
                &files(&[("ok", "1", 0o644), (bad, "x", 0o644)]),
                Ownership::default(),
            )
            .unwrap_err();
            assert!(err.to_string().starts_with("invalid path"), "{bad}: {err}");
        }
        assert!(!tmp.path().join("escaped").exists());
        assert!(
            std::fs::read_link(dir.join("..data")).is_err(),
            "nothing swapped in"
        );
    }

    #[test]
    fn links_a_container_put_in_the_volume_lead_nowhere() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("vol");
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("keep"), "host").unwrap();
        write(&dir, &files(&[("a", "1", 0o644)]), Ownership::default()).unwrap();
        // ..data swapped for a link out: the old payload is not looked
        // for there, and the host dir it names is not removed.
        std::fs::remove_file(dir.join("..data")).unwrap();
        symlink(&outside, dir.join("..data")).unwrap();
        assert!(write(&dir, &files(&[("a", "2", 0o644)]), Ownership::default()).unwrap());
        assert_eq!(
            std::fs::read_to_string(outside.join("keep")).unwrap(),
            "host"
        );
        assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "2");
        // ..data pointing at `../outside` (a name of the writer's shape, but
        // not one component) is not removed either.
        let stamp = std::fs::read_link(dir.join("..data")).unwrap();
        std::fs::remove_file(dir.join("..data")).unwrap();
        symlink("../outside", dir.join("..data")).unwrap();
        assert!(write(&dir, &files(&[("a", "3", 0o644)]), Ownership::default()).unwrap());
        assert!(outside.join("keep").exists());
        assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "3");
        drop(stamp);
        // A user-visible name replaced by a link out stays a link the
        // writer never writes through.
        std::fs::remove_file(dir.join("a")).unwrap();
        symlink(outside.join("keep"), dir.join("a")).unwrap();
        write(&dir, &files(&[("a", "4", 0o644)]), Ownership::default()).unwrap();
        assert_eq!(
            std::fs::read_to_string(outside.join("keep")).unwrap(),
            "host"
        );
    }

    #[test]
    fn files_and_dirs_belong_to_the_pods_user_and_group() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("vol");
        let owner = Ownership {
            uid: Some(1234),
            gid: None,
        };
        write(
            &dir,
            &files(&[("token", "t", 0o600), ("d/x", "x", 0o644)]),
            owner,
        )
        .unwrap();
        assert_eq!(mode(&dir), 0o700);
        let meta = std::fs::metadata(dir.join("token")).unwrap();
        assert_eq!((meta.uid(), meta.mode() & 0o777), (1234, 0o600));
        assert_eq!(std::fs::metadata(dir.join("d")).unwrap().uid(), 1234);
        assert_eq!(mode(&dir.join("d")), 0o700);

        let grouped = tmp.path().join("grouped");
        let owner = Ownership {
            uid: None,
            gid: Some(2000),
        };
        write(&grouped, &files(&[("k", "v", 0o400)]), owner).unwrap();
        assert_eq!(mode(&grouped), 0o2750);
        let meta = std::fs::metadata(grouped.join("k")).unwrap();
        assert_eq!((meta.gid(), meta.mode() & 0o777), (2000, 0o440));
        assert!(!write(&grouped, &files(&[("k", "v", 0o400)]), owner).unwrap());
    }

    #[test]
    fn the_pods_user_is_the_one_all_its_containers_run_as() {
        let pod = |v: serde_json::Value| -> Pod { serde_json::from_value(v).unwrap() };
        let same = pod(serde_json::json!({"spec": {
            "securityContext": {"runAsUser": 1000, "fsGroup": 3000},
            "initContainers": [{"name": "i"}],
            "containers": [{"name": "a"}, {"name": "b", "securityContext": {"runAsUser": 1000}}]}}));
        assert_eq!(
            Ownership::of_pod(&same),
            Ownership {
                uid: Some(1000),
                gid: Some(3000)
            }
        );
        let mixed = pod(serde_json::json!({"spec": {"containers": [
            {"name": "a", "securityContext": {"runAsUser": 1000}},
            {"name": "b", "securityContext": {"runAsUser": 1001}}]}}));
        assert_eq!(Ownership::of_pod(&mixed), Ownership::default());
        let unset = pod(serde_json::json!({"spec": {"containers": [
            {"name": "a", "securityContext": {"runAsUser": 1000}}, {"name": "b"}]}}));
        assert_eq!(Ownership::of_pod(&unset).uid, None);
    }
}
