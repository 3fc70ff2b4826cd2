//! The workspace's binaries as the tests run them, and kubectl.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's root (the workspace's folder).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("test-support is a folder of the workspace")
        .to_path_buf()
}

/// Where the workspace's binaries are: `target/<profile>`, the folder
/// above the test binary's `deps/`.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("the test binary has a folder");
    deps.parent().unwrap_or(deps).to_path_buf()
}

/// The binary of the workspace package `name` (named as the package),
/// built into the same target directory if it is not there yet.
pub fn workspace_binary(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    if !path.exists() {
        // target/<profile>/ -> target
        let target_dir = bin_dir().parent().expect("a target dir").to_path_buf();
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["build", "-p", name, "--bin", name, "--target-dir"])
            .arg(&target_dir)
            .current_dir(repo_root())
            .status()
            .unwrap_or_else(|e| panic!("running cargo build -p {name}: {e}"));
        assert!(status.success(), "cargo build -p {name} failed");
    }
    assert!(path.exists(), "no {name} at {}", path.display());
    path
}

/// `kubectl`: `$KUBECTL` if set, else the one on PATH. The tests of
/// kubectl against bosun need it and fail without it (`scripts/test.sh`
/// installs it).
pub fn kubectl_binary() -> String {
    if let Ok(kubectl) = std::env::var("KUBECTL") {
        return kubectl;
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .chain(["/usr/bin".into(), "/usr/local/bin".into()])
        .map(|dir| dir.join("kubectl"))
        .find(|p| p.is_file())
        .map(|p| p.display().to_string())
        .expect("kubectl is not installed: these tests need it (scripts/test.sh installs it)")
}
