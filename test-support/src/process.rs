//! Child processes of a test: stopped when the test ends, also on panic
//! or when the test binary itself is killed.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// A child process killed (and reaped) when this is dropped, also on panic.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A command for `program` that dies with the test binary, also when the
/// binary is killed (by a timeout) before a guard's drop can stop it: an
/// agent left running would keep recreating its containers against
/// `scripts/test.sh`'s sweep of stale test resources. `setpriv
/// --pdeathsig` (util-linux) sets that up and execs `program` in the same
/// process.
pub fn dies_with_test(program: impl AsRef<OsStr>) -> Command {
    if Path::new("/usr/bin/setpriv").exists() {
        let mut cmd = Command::new("/usr/bin/setpriv");
        cmd.args(["--pdeathsig", "KILL", "--"]).arg(program);
        cmd
    } else {
        Command::new(program)
    }
}

/// Sends `sig` and waits for the process to exit: how long that took, or
/// None if it was still running after `timeout` (then it is killed).
pub fn signal_and_wait(child: &mut Child, sig: Signal, timeout: Duration) -> Option<Duration> {
    let sent = Instant::now();
    let _ = kill(Pid::from_raw(child.id() as i32), sig);
    while sent.elapsed() < timeout {
        if child.try_wait().ok().flatten().is_some() {
            return Some(sent.elapsed());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// SIGKILLs the process whose pid is in `pid_file`, if there is one.
pub fn kill_pid_file(pid_file: &Path) {
    if let Ok(pid) = std::fs::read_to_string(pid_file) {
        if let Ok(pid) = pid.trim().parse::<i32>() {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}
