//! Paths inside a volume, opened without leaving it.
//!
//! A volume's contents are not the agent's: a container that mounts an
//! emptyDir writable can plant `escape -> /` in it, and an object stored
//! before validation (or a bug) can name `../../x`. Joining such a path
//! onto the volume's directory and handing it to `open(2)` or to Docker
//! follows the symlink or the `..` out of the volume, onto the host.
//!
//! [`VolumeRoot`] holds the volume's directory open and resolves every
//! path from that descriptor with `openat2(2)` and `RESOLVE_BENEATH`
//! (plus `RESOLVE_NO_MAGICLINKS`): the kernel fails any resolution that
//! would leave the directory, `..` and absolute symlinks included, while a
//! relative symlink that stays inside still works (the atomic writer's
//! `key -> ..data/key`). Where the kernel has no `openat2` (before 5.6,
//! or a seccomp profile refuses it) the same resolution is done in user
//! space, one component at a time with `O_NOFOLLOW`. Files are created with `O_EXCL|O_NOFOLLOW`
//! in a directory opened that way, so nothing is written through a link.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{openat, openat2, readlinkat, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{mkdirat, Mode};

/// The kubelet's atomic writer's check of a payload path
/// (`validatePath`): relative, no `..` element, not starting with `..`
/// (the writer's own `..data` and timestamped names start so).
pub fn validate_payload_path(p: &str) -> Result<(), String> {
    if p.is_empty() {
        return Err(format!("invalid path: must not be empty: {p:?}"));
    }
    if p.starts_with('/') {
        return Err(format!("invalid path: must be relative path: {p}"));
    }
    let items: Vec<&str> = p.split('/').collect();
    if items.contains(&"..") {
        return Err(format!("invalid path: must not contain '..': {p}"));
    }
    if items[0].starts_with("..") && items[0].len() > 2 {
        return Err(format!("invalid path: must not start with '..': {p}"));
    }
    Ok(())
}

/// Whether `e` is the kernel refusing a path that leaves the root.
pub fn is_escape(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error().map(Errno::from_raw),
        Some(Errno::EXDEV) | Some(Errno::ELOOP)
    )
}

/// A volume's directory, held open; every path below is resolved from it.
#[derive(Debug)]
pub struct VolumeRoot {
    fd: OwnedFd,
    path: PathBuf,
    /// Resolve with `openat2`; false: [`walk_beneath`] (old kernels,
    /// seccomp, and the tests of that walk).
    openat2: bool,
}

fn io_err(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

/// In the walk, `O_NOFOLLOW|O_DIRECTORY` on a symlink fails with
/// `ENOTDIR`; report it as the symlink it is (`ELOOP`).
fn link_is_loop(at: BorrowedFd, name: &OsStr, e: Errno) -> io::Error {
    use nix::sys::stat::fstatat;
    if e == Errno::ENOTDIR
        && fstatat(at, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).is_ok_and(is_link)
    {
        return io_err(Errno::ELOOP);
    }
    io_err(e)
}

/// Whether `st` is a symlink's.
fn is_link(st: nix::sys::stat::FileStat) -> bool {
    use nix::sys::stat::SFlag;
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK
}

/// The walk where there is no `openat2`: the path resolved in user space
/// as `RESOLVE_BENEATH` resolves it in the kernel. A symlink met on the
/// way is read and its (relative) target walked in its place; `..` never
/// goes above the root and an absolute target is refused (`EXDEV`); at
/// most 40 links (`ELOOP`). Each directory is opened with `O_NOFOLLOW`
/// from the one before, and so is the last name, so a link swapped in
/// after it was looked at fails instead of being followed.
fn walk_beneath(
    root: BorrowedFd,
    parts: &[&OsStr],
    flags: OFlag,
    mode: Mode,
) -> io::Result<OwnedFd> {
    use nix::fcntl::AtFlags;
    use nix::sys::stat::fstatat;
    let dir_flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut todo: VecDeque<OsString> = parts.iter().map(|p| p.to_os_string()).collect();
    let mut dirs: Vec<OwnedFd> = Vec::new();
    let mut links = 0;
    loop {
        let at = dirs.last().map_or(root, |d| d.as_fd());
        let Some(name) = todo.pop_front() else {
            return openat(at, ".", flags, mode).map_err(io_err);
        };
        if name == ".." {
            if dirs.pop().is_none() {
                return Err(io_err(Errno::EXDEV));
            }
            continue;
        }
        if name == "." || name.is_empty() {
            continue;
        }
        if fstatat(at, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW).is_ok_and(is_link) {
            links += 1;
            if links > 40 {
                return Err(io_err(Errno::ELOOP));
            }
            let target = PathBuf::from(readlinkat(at, name.as_os_str()).map_err(io_err)?);
            for c in target.components().rev() {
                match c {
                    Component::Normal(n) => todo.push_front(n.to_os_string()),
                    Component::ParentDir => todo.push_front(OsString::from("..")),
                    Component::CurDir => {}
                    Component::RootDir | Component::Prefix(_) => return Err(io_err(Errno::EXDEV)),
                }
            }
            continue;
        }
        if todo.is_empty() {
            return openat(at, name.as_os_str(), flags | OFlag::O_NOFOLLOW, mode)
                .map_err(|e| link_is_loop(at, &name, e));
        }
        let next = openat(at, name.as_os_str(), dir_flags, Mode::empty())
            .map_err(|e| link_is_loop(at, &name, e))?;
        dirs.push(next);
    }
}

/// The relative path's normal components; `..`, `.`-free absolute or
/// empty paths are refused (`EXDEV`, as the kernel refuses an escape).
fn components(rel: &Path) -> io::Result<Vec<&OsStr>> {
    let mut out = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(io_err(Errno::EXDEV))
            }
        }
    }
    Ok(out)
}

impl VolumeRoot {
    /// Opens the volume's directory itself. Its path is the agent's own
    /// (or, for hostPath, the one the pod names), so it is followed as is.
    pub fn open(path: &Path) -> io::Result<VolumeRoot> {
        let fd = nix::fcntl::open(
            path,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(io_err)?;
        let mut root = VolumeRoot {
            fd,
            path: path.to_path_buf(),
            openat2: true,
        };
        // ENOSYS on kernels before 5.6, EPERM where a seccomp profile
        // (an agent run in a container) does not know the call: walk.
        if let Err(Errno::ENOSYS | Errno::EPERM) = openat2(
            &root.fd,
            ".",
            OpenHow::new()
                .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
                .resolve(ResolveFlag::RESOLVE_BENEATH),
        ) {
            root.openat2 = false;
        }
        Ok(root)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The root's own descriptor, for `*at` calls on names directly in it
    /// (which never follow a symlink in the last name).
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }

    #[cfg(test)]
    fn without_openat2(mut self) -> Self {
        self.openat2 = false;
        self
    }

    /// Opens `rel` below the root with `flags` (`O_CLOEXEC` added), never
    /// resolving outside it: `EXDEV` (or `ELOOP` for a magic link, or any
    /// symlink in the walk) when the path would leave.
    pub fn open_beneath(&self, rel: &Path, flags: OFlag, mode: u32) -> io::Result<OwnedFd> {
        let parts = components(rel)?;
        let flags = flags | OFlag::O_CLOEXEC;
        let mode = Mode::from_bits_truncate(mode);
        if self.openat2 {
            let rel: PathBuf = if parts.is_empty() {
                PathBuf::from(".")
            } else {
                parts.iter().collect()
            };
            let how = OpenHow::new()
                .flags(flags)
                .mode(mode)
                .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
            // EAGAIN: a rename raced the lookup; the kernel asks to retry.
            let mut tries = 0;
            loop {
                match openat2(&self.fd, &rel, how) {
                    Err(Errno::EAGAIN) if tries < 8 => tries += 1,
                    r => return r.map_err(io_err),
                }
            }
        }
        walk_beneath(self.fd.as_fd(), &parts, flags, mode)
    }

    /// Whether `rel` exists below the root (resolved as [`Self::open_beneath`]).
    pub fn exists(&self, rel: &Path) -> io::Result<bool> {
        match self.open_beneath(rel, OFlag::O_PATH, 0) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Makes `rel` and its missing parents below the root with `mode`
    /// (as the kubelet's `SafeMakeDir`); returns the deepest one, opened
    /// for reading. A symlink on the way is followed only while it stays
    /// below the root.
    pub fn mkdir_all(&self, rel: &Path, mode: u32) -> io::Result<File> {
        let parts = components(rel)?;
        let dir_flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY;
        let mut done = PathBuf::new();
        for p in &parts {
            let parent = self.open_beneath(&done, OFlag::O_PATH | OFlag::O_DIRECTORY, 0)?;
            done.push(p);
            match mkdirat(&parent, *p, Mode::from_bits_truncate(mode)) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(io_err(e)),
            }
        }
        Ok(File::from(self.open_beneath(&done, dir_flags, 0)?))
    }

    /// Creates the file `rel` (which must not exist) below the root with
    /// `data`, its parents as [`Self::mkdir_all`] with `dir_mode`; returns
    /// it open, for its mode and owner to be set.
    pub fn create_file(&self, rel: &Path, data: &[u8], dir_mode: u32) -> io::Result<File> {
        let parts = components(rel)?;
        let Some((name, dirs)) = parts.split_last() else {
            return Err(io_err(Errno::EISDIR));
        };
        let parent = self.mkdir_all(&dirs.iter().collect::<PathBuf>(), dir_mode)?;
        let fd = openat(
            &parent,
            *name,
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )
        .map_err(io_err)?;
        let mut f = File::from(fd);
        io::Write::write_all(&mut f, data)?;
        Ok(f)
    }

    /// The target of the symlink `name` directly in the root, if it is one.
    pub fn read_link(&self, name: &str) -> Option<PathBuf> {
        nix::fcntl::readlinkat(&self.fd, name)
            .ok()
            .map(PathBuf::from)
    }

    /// The `/proc/self/fd` path of an open descriptor: what the kernel
    /// resolves to the very file the descriptor holds (for a bind mount
    /// of exactly what was checked).
    pub fn proc_path(fd: &impl AsRawFd) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A volume dir inside a temp dir, with a marker file beside it (out
    /// of the volume) that no test may reach.
    fn setup() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let vol = tmp.path().join("vol");
        std::fs::create_dir(&vol).unwrap();
        std::fs::write(tmp.path().join("outside"), "host").unwrap();
        (tmp, vol)
    }

    fn both(vol: &Path) -> [VolumeRoot; 2] {
        [
            VolumeRoot::open(vol).unwrap(),
            VolumeRoot::open(vol).unwrap().without_openat2(),
        ]
    }

    fn read(root: &VolumeRoot, rel: &str) -> io::Result<String> {
        let fd = root.open_beneath(Path::new(rel), OFlag::O_RDONLY, 0)?;
        io::read_to_string(File::from(fd))
    }

    #[test]
    fn payload_paths_as_the_kubelet_checks_them() {
        assert!(validate_payload_path("a/b.conf").is_ok());
        assert!(validate_payload_path("a..b").is_ok());
        for (bad, why) in [
            ("", "must not be empty"),
            ("/etc/passwd", "must be relative path"),
            ("../../tmp/x", "must not contain '..'"),
            ("a/../../x", "must not contain '..'"),
            ("..data", "must not start with '..'"),
        ] {
            let err = validate_payload_path(bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn nested_paths_and_inner_symlinks_work() {
        let (_tmp, vol) = setup();
        std::fs::create_dir_all(vol.join("a/b")).unwrap();
        std::fs::write(vol.join("a/b/file"), "inside").unwrap();
        symlink("a/b", vol.join("inner")).unwrap();
        // A chain of relative links that stays inside, through `..`.
        symlink("../inner", vol.join("a/back")).unwrap();
        symlink("a/back/file", vol.join("chained")).unwrap();
        for root in both(&vol) {
            assert_eq!(read(&root, "a/b/file").unwrap(), "inside");
            assert!(root.exists(Path::new("a/b")).unwrap());
            assert!(!root.exists(Path::new("a/nope")).unwrap());
            // Relative links that stay inside are followed.
            assert_eq!(read(&root, "inner/file").unwrap(), "inside");
            assert_eq!(read(&root, "chained").unwrap(), "inside");
            assert_eq!(read(&root, "a/back/./file").unwrap(), "inside");
        }
    }

    #[test]
    fn symlinks_and_dotdot_out_of_the_volume_are_refused() {
        let (tmp, vol) = setup();
        symlink("/", vol.join("to-root")).unwrap();
        symlink("..", vol.join("to-parent")).unwrap();
        symlink(tmp.path(), vol.join("absolute")).unwrap();
        // A chain: each link relative and harmless-looking on its own.
        std::fs::create_dir(vol.join("d")).unwrap();
        symlink("../hop2", vol.join("d/hop1")).unwrap();
        symlink("to-parent/outside", vol.join("hop2")).unwrap();
        for root in both(&vol) {
            for rel in [
                "to-root/etc/passwd",
                "to-parent/outside",
                "absolute/outside",
                "d/hop1",
                "../outside",
                "d/../../outside",
                "/etc/passwd",
            ] {
                let err = read(&root, rel).expect_err(rel);
                assert!(is_escape(&err), "{rel}: {err}");
            }
            let err = root
                .create_file(Path::new("to-parent/planted"), b"x", 0o755)
                .unwrap_err();
            assert!(is_escape(&err), "{err}");
            let err = root
                .mkdir_all(Path::new("absolute/made-dir"), 0o755)
                .unwrap_err();
            assert!(is_escape(&err), "{err}");
        }
        assert!(!tmp.path().join("planted").exists());
        assert!(!tmp.path().join("made-dir").exists());
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("outside")).unwrap(),
            "host"
        );
    }

    #[test]
    fn files_are_created_below_and_never_through_a_link() {
        let (tmp, vol) = setup();
        for (i, root) in both(&vol).into_iter().enumerate() {
            let f = root
                .create_file(Path::new(&format!("n{i}/deep/f")), b"data", 0o750)
                .unwrap();
            drop(f);
            assert_eq!(
                std::fs::read_to_string(vol.join(format!("n{i}/deep/f"))).unwrap(),
                "data"
            );
            // An existing name (a link a container planted) is not written through.
            symlink(tmp.path().join("outside"), vol.join(format!("link{i}"))).unwrap();
            assert!(root
                .create_file(Path::new(&format!("link{i}")), b"pwned", 0o750)
                .is_err());
        }
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("outside")).unwrap(),
            "host"
        );
    }
}
