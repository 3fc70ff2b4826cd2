//! The processes `bosun up` and `bosun join` run in the background, each
//! under its own supervisor (`bosun supervise`, see [`super::supervise`])
//! that restarts it when it dies and keeps its log within a size.
//!
//! Files in the data dir, per component:
//! - `<name>.pid`: the process itself (rewritten on every restart);
//! - `<name>.supervisor.pid`: its supervisor, which `bosun down` signals;
//! - `<name>.restarts`: how often the supervisor restarted it, and why
//!   the last time;
//! - `<name>.log` and `<name>.log.1`...: its output, rotated by size.
//!
//! Where systemd is the host's service manager a component is a systemd
//! unit instead ([`super::systemd`]): `<name>.unit` in the data dir names
//! it, systemd restarts it and journald keeps its log.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Who keeps `bosun up`'s and `bosun join`'s processes running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ServiceManager {
    /// systemd where it is the host's service manager and bosun runs as
    /// root, else bosun's own supervisor.
    Auto,
    /// systemd units in /etc/systemd/system.
    Systemd,
    /// `bosun supervise`, a small supervisor of bosun's own.
    Bosun,
}

impl ServiceManager {
    /// Whether to use systemd; an explicit `systemd` where it cannot be
    /// used is an error.
    pub fn systemd(self) -> Result<bool> {
        match self {
            ServiceManager::Auto => Ok(super::systemd::available()),
            ServiceManager::Bosun => Ok(false),
            ServiceManager::Systemd if super::systemd::available() => Ok(true),
            ServiceManager::Systemd => bail!(
                "--service-manager systemd: systemd is not this host's service manager \
                 (no /run/systemd/system) or bosun does not run as root"
            ),
        }
    }
}

/// How `bosun up`/`bosun join` run one component.
pub struct Launch<'a> {
    pub args: &'a [String],
    pub log: LogLimits,
    /// The systemd unit to run it as, or None for bosun's supervisor.
    pub unit: Option<String>,
    /// Described in the unit.
    pub description: String,
    /// Units it starts after (the agent: Docker, a local control plane).
    pub after: Vec<String>,
}

/// A component just started: its supervisor, or its systemd unit.
pub enum Started {
    Supervisor(std::process::Child),
    Systemd,
}

/// A process `bosun up` or `bosun join` runs in the background.
pub struct Component {
    /// Shown to the user.
    pub title: &'static str,
    /// The executable, looked up next to `bosun` and then on PATH.
    pub binary: &'static str,
    /// `DIR/<name>.pid`, `DIR/<name>.log`, ...
    pub name: &'static str,
}

pub const CONTROL: Component = Component {
    title: "control plane",
    binary: "bosun-control",
    name: "control",
};

/// The local node's agent: started once CONTROL is ready, stopped before it.
pub const AGENT: Component = Component {
    title: "agent",
    binary: "bosun-agent",
    name: "agent",
};

/// An etcd member of `bosun up --ha` (`super::up::ha`).
pub const ETCD: Component = Component {
    title: "etcd member",
    binary: "etcd",
    name: "etcd",
};

/// How big a component's log may grow: the live file plus `files - 1`
/// rotated ones of at most `max_bytes` each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLimits {
    pub max_bytes: u64,
    pub files: usize,
}

impl Default for LogLimits {
    fn default() -> Self {
        LogLimits {
            max_bytes: 10 * 1024 * 1024,
            files: 5,
        }
    }
}

/// `10Mi`, `512Ki`, `1G`, `65536`: a size in bytes, as the log flags take it.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a size like 10Mi, 512Ki or 65536"))?;
    let factor: u64 = match unit {
        "" => 1,
        "K" | "k" => 1000,
        "Ki" => 1 << 10,
        "M" => 1_000_000,
        "Mi" => 1 << 20,
        "G" => 1_000_000_000,
        "Gi" => 1 << 30,
        _ => return Err(format!("{s:?} is not a size like 10Mi, 512Ki or 65536")),
    };
    match n.checked_mul(factor) {
        Some(0) | None => Err(format!("{s:?}: a size above zero is needed")),
        Some(b) => Ok(b),
    }
}

impl Component {
    pub fn named(name: &str) -> Option<&'static Component> {
        [&CONTROL, &AGENT, &ETCD]
            .into_iter()
            .find(|c| c.name == name)
    }

    pub fn pid_file(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{}.pid", self.name))
    }
    pub fn supervisor_pid_file(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{}.supervisor.pid", self.name))
    }
    pub fn restarts_file(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{}.restarts", self.name))
    }
    pub fn log_file(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{}.log", self.name))
    }
    fn unit_file(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{}.unit", self.name))
    }

    /// The systemd unit it runs as, if it was started as one.
    pub fn unit(&self, dir: &Path) -> Option<String> {
        std::fs::read_to_string(self.unit_file(dir))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    }

    /// Where its log is: the file, or the journal.
    pub fn log_location(&self, dir: &Path) -> String {
        match self.unit(dir) {
            Some(unit) => format!("journalctl -u {unit}"),
            None => self.log_file(dir).display().to_string(),
        }
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, dir: &Path, lines: usize) -> String {
        match self.unit(dir) {
            Some(unit) => super::systemd::journal_tail(&unit, lines),
            None => tail(&self.log_file(dir), lines),
        }
    }

    /// The running process, if this component's binary runs.
    pub fn running_pid(&self, dir: &Path) -> Option<i32> {
        let pid = match self.unit(dir) {
            Some(unit) => super::systemd::main_pid(&unit)?,
            None => read_pid(&self.pid_file(dir))?,
        };
        (is_alive(pid) && runs_binary(pid, self.binary)).then_some(pid)
    }

    /// The supervisor's pid, if it still runs (`bosun supervise` of this
    /// component).
    pub fn supervisor_pid(&self, dir: &Path) -> Option<i32> {
        let pid = read_pid(&self.supervisor_pid_file(dir))?;
        (is_alive(pid) && supervises(pid, self.name)).then_some(pid)
    }

    /// Whether the component runs (or its supervisor is about to run it
    /// again).
    pub fn is_running(&self, dir: &Path) -> bool {
        if let Some(unit) = self.unit(dir) {
            return super::systemd::is_active(&unit);
        }
        self.supervisor_pid(dir).is_some() || self.running_pid(dir).is_some()
    }

    /// How often the supervisor (or systemd) restarted the process, and
    /// why the last time.
    pub fn restarts(&self, dir: &Path) -> (u32, String) {
        if let Some(unit) = self.unit(dir) {
            return super::systemd::restarts(&unit);
        }
        let text = std::fs::read_to_string(self.restarts_file(dir)).unwrap_or_default();
        let mut lines = text.lines();
        let n = lines
            .next()
            .and_then(|l| l.trim().parse().ok())
            .unwrap_or(0);
        (n, lines.next().unwrap_or_default().to_string())
    }

    pub fn find_binary(&self) -> Result<PathBuf> {
        find_executable(self.binary)
    }

    /// Starts the component as `launch` says: a systemd unit, or under
    /// bosun's supervisor.
    pub fn start(&self, dir: &Path, launch: &Launch) -> Result<Started> {
        let Some(unit) = &launch.unit else {
            return self
                .supervise(dir, launch.args, launch.log)
                .map(Started::Supervisor);
        };
        let binary = self.find_binary()?;
        let binary = binary.canonicalize().unwrap_or(binary);
        let mut exec = vec![binary.display().to_string()];
        exec.extend(launch.args.iter().cloned());
        let unit = super::systemd::Unit {
            name: unit.clone(),
            description: launch.description.clone(),
            data_dir: dir.to_path_buf(),
            exec,
            env: super::systemd::passed_environment(),
            after: launch.after.clone(),
            stop_timeout: Duration::from_secs(60),
        };
        // Recorded first: a failed start is still stopped and removed by
        // `bosun down`.
        bosun::files::write_atomically(&self.unit_file(dir), &format!("{}\n", unit.name), 0o644)?;
        unit.install()?;
        Ok(Started::Systemd)
    }

    /// Why a component just started is not coming up, if it is not: its
    /// supervisor is gone, or the process exited and is being restarted.
    pub fn failure(&self, dir: &Path, started: &mut Started) -> Result<Option<String>> {
        if let Started::Supervisor(supervisor) = started {
            if let Some(status) = supervisor.try_wait()? {
                return Ok(Some(format!(
                    "the supervisor of {} exited ({status})",
                    self.binary
                )));
            }
        }
        let (restarts, why) = self.restarts(dir);
        Ok((restarts > 0).then_some(why))
    }

    /// Starts the component under its supervisor, detached from this
    /// process (its own process group, stdin from /dev/null); the
    /// supervisor writes the log. Returns the supervisor.
    fn supervise(
        &self,
        dir: &Path,
        args: &[String],
        log: LogLimits,
    ) -> Result<std::process::Child> {
        let binary = self.find_binary()?;
        let bosun = std::env::current_exe().context("finding the bosun executable")?;
        let _ = std::fs::remove_file(self.restarts_file(dir));
        let _ = std::fs::remove_file(self.pid_file(dir));
        // Not a unit (any more): an earlier run's record must not send
        // `down` and the checks to systemd.
        let _ = std::fs::remove_file(self.unit_file(dir));
        // The supervisor's own complaints (before it has the log open)
        // land in the log too.
        let log_path = self.log_file(dir);
        let errors = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .with_context(|| format!("opening {}", log_path.display()))?;
        let child = Command::new(&bosun)
            .arg("supervise")
            .args(["--component", self.name])
            .arg("--data-dir")
            .arg(dir)
            .args(["--log-max-bytes", &log.max_bytes.to_string()])
            .args(["--log-max-files", &log.files.to_string()])
            .arg("--")
            .arg(&binary)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(errors)
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting the supervisor of {}", binary.display()))?;
        bosun::files::write_atomically(
            &self.supervisor_pid_file(dir),
            &format!("{}\n", child.id()),
            0o644,
        )?;
        Ok(child)
    }

    /// Stops the component with SIGTERM (through its supervisor, which
    /// then does not restart it) and waits for it; the stopped pid, or
    /// None if nothing ran.
    pub fn stop(&self, dir: &Path, timeout: Duration) -> Result<Option<i32>> {
        if let Some(unit) = self.unit(dir) {
            let pid = super::systemd::remove(&unit, timeout)?;
            let _ = std::fs::remove_file(self.unit_file(dir));
            return Ok(pid);
        }
        let process = self.running_pid(dir);
        let target = match (self.supervisor_pid(dir), process) {
            (Some(s), _) => s,
            (None, Some(p)) => p,
            (None, None) => {
                self.remove_pid_files(dir);
                return Ok(None);
            }
        };
        kill(Pid::from_raw(target), Signal::SIGTERM)
            .with_context(|| format!("signalling {} (pid {target})", self.binary))?;
        let deadline = std::time::Instant::now() + timeout;
        while is_alive(target) || process.is_some_and(is_alive) {
            if std::time::Instant::now() >= deadline {
                bail!(
                    "{} (pid {}) did not exit within {timeout:?} of SIGTERM; see {}",
                    self.binary,
                    process.unwrap_or(target),
                    self.log_location(dir)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.remove_pid_files(dir);
        Ok(Some(process.unwrap_or(target)))
    }

    fn remove_pid_files(&self, dir: &Path) {
        let _ = std::fs::remove_file(self.pid_file(dir));
        let _ = std::fs::remove_file(self.supervisor_pid_file(dir));
    }
}

fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// `name` next to the running `bosun`, else on PATH.
pub fn find_executable(name: &str) -> Result<PathBuf> {
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        let candidate = dir.join(name);
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    bail!(
        "cannot find {name} next to {} or on PATH (build it with `cargo build --workspace`)",
        std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "bosun".into())
    )
}

/// Whether the process exists and is not a zombie.
pub fn is_alive(pid: i32) -> bool {
    if kill(Pid::from_raw(pid), None).is_err() {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
            .unwrap_or(true),
        Err(_) => true,
    }
}

fn cmdline(pid: i32) -> Option<Vec<String>> {
    std::fs::read(format!("/proc/{pid}/cmdline")).ok().map(|c| {
        c.split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect()
    })
}

/// Guards against signalling a recycled pid.
fn runs_binary(pid: i32, binary: &str) -> bool {
    match cmdline(pid) {
        Some(args) => args.first().is_some_and(|argv0| argv0.ends_with(binary)),
        None => true,
    }
}

/// Whether `pid` is `bosun supervise --component <name>`.
fn supervises(pid: i32, name: &str) -> bool {
    match cmdline(pid) {
        Some(args) => {
            args.get(1).map(String::as_str) == Some("supervise")
                && args
                    .windows(2)
                    .any(|w| w[0] == "--component" && w[1] == name)
        }
        None => true,
    }
}

/// The last `lines` lines of a file.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_decimal_and_binary_units() {
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size("10Mi"), Ok(10 << 20));
        assert_eq!(parse_size("512Ki"), Ok(512 << 10));
        assert_eq!(parse_size("1G"), Ok(1_000_000_000));
        for bad in ["", "0", "10MB", "Mi", "-1"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
