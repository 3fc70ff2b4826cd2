//! The images the tests run, built by `scripts/build-images.sh`.

use std::process::{Command, Stdio};
use std::sync::Mutex;

use crate::binaries::repo_root;

pub const BUSYBOX: &str = "bosun.local/busybox:1.35";
pub const PAUSE: &str = "bosun.local/pause:0.1.0";
pub const WEB1: &str = "bosun.local/web:1";
pub const WEB2: &str = "bosun.local/web:2";

static CHECKED: Mutex<bool> = Mutex::new(false);

/// Builds the test images with `scripts/build-images.sh` unless this
/// engine has them all (checked once per test binary).
pub fn ensure_images() {
    let mut checked = CHECKED.lock().unwrap_or_else(|e| e.into_inner());
    if *checked {
        return;
    }
    let have = Command::new("docker")
        .args(["image", "inspect", BUSYBOX, PAUSE, WEB1, WEB2])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("docker is installed")
        .success();
    if !have {
        let status = Command::new("bash")
            .arg(repo_root().join("scripts/build-images.sh"))
            .status()
            .expect("running scripts/build-images.sh");
        assert!(status.success(), "scripts/build-images.sh failed");
    }
    *checked = true;
}
