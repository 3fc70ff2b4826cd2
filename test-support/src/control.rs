//! Starting `bosun-control` for a test and waiting until it serves.

use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use crate::wait::wait_for;

/// How long a test waits for `bosun-control` to serve. It starts in a
/// second or two on an idle machine, but a debug build on a loaded 2-core
/// machine (the suite's other tests, builds) has been seen to take 29-38
/// s; waiting longer costs a passing test nothing.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(90);

/// Starts `cmd` (a `bosun-control` with `--data-dir data_dir`, its output
/// already directed) and waits until it serves: its `address` file (written
/// after the admin kubeconfig) holds the address it listens on, which is
/// returned. A stale address file of an earlier run is removed first.
pub fn start_control(mut cmd: Command, data_dir: &Path, timeout: Duration) -> (Child, String) {
    let address = data_dir.join("address");
    let _ = std::fs::remove_file(&address);
    let child = cmd.spawn().expect("starting bosun-control");
    let addr = wait_for("bosun-control to listen", timeout, || {
        std::fs::read_to_string(&address)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    });
    (child, addr)
}
