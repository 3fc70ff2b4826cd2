//! `bosun up`'s and `bosun join`'s processes as systemd services, where
//! systemd is the host's service manager (the Vagrant VMs, real hosts), as
//! k3s and kubeadm hosts run theirs: a unit per process in
//! `/etc/systemd/system` (`bosun-control.service`, `bosun-agent.service`;
//! `bosun-control-NAME.service` for a cluster made with `--name NAME`),
//! enabled so it comes back after a reboot, restarted whenever it exits,
//! ordered after Docker, logging to journald. `bosun down` and `bosun
//! leave` stop, disable and remove them.
//!
//! Everything here goes through `systemctl` and `journalctl`, the
//! interface systemd keeps stable for this.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};

/// Where the units are written (the administrator's unit directory).
pub const UNIT_DIR: &str = "/etc/systemd/system";
/// The key in a unit naming the data dir it runs from (systemd ignores
/// keys starting with `X-`).
const DATA_DIR_KEY: &str = "X-BosunDataDir";

/// Whether systemd is this host's service manager (its `sd_booted()`
/// test) and this process may install system units.
pub fn available() -> bool {
    Path::new("/run/systemd/system").is_dir() && nix::unistd::geteuid().is_root()
}

/// A unit `bosun up`/`bosun join` writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    /// `bosun-control.service`, ...
    pub name: String,
    pub description: String,
    /// The data dir it belongs to (two clusters never share a unit).
    pub data_dir: PathBuf,
    /// The program and its arguments.
    pub exec: Vec<String>,
    /// Environment it runs with (systemd gives a service none of the
    /// caller's).
    pub env: Vec<(String, String)>,
    /// Units it starts after (and wants, if they exist).
    pub after: Vec<String>,
    /// How long a stop may take before the rest is killed.
    pub stop_timeout: Duration,
}

/// The unit name of `component` (control, agent) of the cluster named
/// `cluster` (None: the default cluster, or a joined host).
pub fn unit_name(component: &str, cluster: Option<&str>) -> String {
    match cluster {
        Some(c) => format!("bosun-{component}-{c}.service"),
        None => format!("bosun-{component}.service"),
    }
}

/// What of the caller's environment a service keeps: bosun's own
/// settings, Docker's, the log filter and the search path.
pub fn passed_environment() -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| {
            k.starts_with("BOSUN_") || k.starts_with("DOCKER_") || k == "RUST_LOG" || k == "PATH"
        })
        .collect();
    env.sort();
    env
}

impl Unit {
    pub fn path(&self) -> PathBuf {
        Path::new(UNIT_DIR).join(&self.name)
    }

    /// The unit file.
    pub fn render(&self) -> String {
        let mut s = String::new();
        s.push_str("# Written by bosun for the data dir below; `bosun down` removes it.\n");
        s.push_str("[Unit]\n");
        s.push_str(&format!("Description={}\n", self.description));
        s.push_str("Wants=network-online.target\n");
        let mut after = vec!["network-online.target".to_string()];
        after.extend(self.after.iter().cloned());
        s.push_str(&format!("After={}\n", after.join(" ")));
        for unit in &self.after {
            // Wants= of a unit that does not exist is harmless.
            s.push_str(&format!("Wants={unit}\n"));
        }
        // Never give up restarting (the default stops after 5 starts in 10 s).
        s.push_str("StartLimitIntervalSec=0\n");
        s.push_str(&format!(
            "{DATA_DIR_KEY}={}\n",
            escape_specifiers(&self.data_dir.display().to_string())
        ));
        s.push_str("\n[Service]\n");
        s.push_str("Type=exec\n");
        for (k, v) in &self.env {
            s.push_str(&format!("Environment={}\n", quote(&format!("{k}={v}"))));
        }
        let exec: Vec<String> = self.exec.iter().map(|a| quote(a)).collect();
        s.push_str(&format!("ExecStart={}\n", exec.join(" ")));
        s.push_str("Restart=always\n");
        s.push_str("RestartSec=2\n");
        // SIGTERM to the process, which stops its own work; anything left
        // after the timeout is killed.
        s.push_str("KillMode=mixed\n");
        s.push_str(&format!(
            "TimeoutStopSec={}\n",
            self.stop_timeout.as_secs().max(1)
        ));
        s.push_str("LimitNOFILE=1048576\n");
        s.push_str("\n[Install]\n");
        s.push_str("WantedBy=multi-user.target\n");
        s
    }

    /// Writes the unit, then enables and starts it. A unit of the same
    /// name that belongs to another data dir is refused, and left alone.
    pub fn install(&self) -> Result<()> {
        let path = self.path();
        if let Some(other) = data_dir_of(&path) {
            if other != self.data_dir {
                bail!(
                    "systemd unit {} already runs bosun for data dir {} (this one is {}); \
                     `bosun down --data-dir {}` stops it, or give this cluster a --name",
                    self.name,
                    other.display(),
                    self.data_dir.display(),
                    other.display()
                );
            }
        }
        bosun::files::write_atomically(&path, &self.render(), 0o644)
            .with_context(|| format!("writing {}", path.display()))?;
        systemctl(&["daemon-reload"])?;
        // A unit that failed before (a stopped earlier run) starts afresh.
        let _ = systemctl(&["reset-failed", &self.name]);
        systemctl(&["enable", "--now", &self.name])
    }
}

/// The data dir recorded in the unit file at `path`, if there is one.
fn data_dir_of(path: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{DATA_DIR_KEY}=")))
        .map(|d| PathBuf::from(d.replace("%%", "%")))
}

/// Stops, disables and removes the unit; returns the pid it ran as.
pub fn remove(unit: &str, timeout: Duration) -> Result<Option<i32>> {
    let pid = main_pid(unit);
    let path = Path::new(UNIT_DIR).join(unit);
    if path.exists() {
        systemctl(&["disable", "--no-block", unit])?;
    }
    systemctl(&["stop", "--no-block", unit])?;
    let deadline = Instant::now() + timeout;
    while is_active(unit) || main_pid(unit).is_some() {
        if Instant::now() >= deadline {
            bail!(
                "systemd unit {unit} did not stop within {timeout:?}; see `journalctl -u {unit}`"
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("removing {}", path.display())),
    }
    systemctl(&["daemon-reload"])?;
    let _ = systemctl(&["reset-failed", unit]);
    Ok(pid)
}

/// One property of a unit (`systemctl show -p NAME --value`).
fn show(unit: &str, property: &str) -> Option<String> {
    let out = Command::new("systemctl")
        .args(["show", "-p", property, "--value", unit])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The unit's running process.
pub fn main_pid(unit: &str) -> Option<i32> {
    show(unit, "MainPID")?.parse().ok().filter(|p| *p > 0)
}

/// Whether the unit runs or is about to run again (systemd's restart
/// wait counts: the process died and comes back).
pub fn is_active(unit: &str) -> bool {
    matches!(
        show(unit, "ActiveState").as_deref(),
        Some("active" | "activating" | "reloading")
    )
}

/// How often systemd restarted it since it was started, and why the last
/// process ended (its `Result` and exit status).
pub fn restarts(unit: &str) -> (u32, String) {
    let n = show(unit, "NRestarts")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let why = format!(
        "{} exited ({}, status {})",
        unit,
        show(unit, "Result").unwrap_or_default(),
        show(unit, "ExecMainStatus").unwrap_or_default()
    );
    (n, why)
}

/// The unit's last `lines` log lines from the journal.
pub fn journal_tail(unit: &str, lines: usize) -> String {
    Command::new("journalctl")
        .args(["-u", unit, "--no-pager", "-o", "cat", "-n"])
        .arg(lines.to_string())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim_end().to_string())
        .unwrap_or_default()
}

fn systemctl(args: &[&str]) -> Result<()> {
    let out = Command::new("systemctl")
        .args(args)
        .output()
        .context("running systemctl")?;
    if !out.status.success() {
        bail!(
            "systemctl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// `%` starts a specifier in unit files.
fn escape_specifiers(s: &str) -> String {
    s.replace('%', "%%")
}

/// One word of ExecStart= or Environment=: double-quoted, with systemd's
/// C-style escapes for `\` and `"`, `%%` for `%` and `$$` for `$` (which
/// ExecStart would expand).
fn quote(arg: &str) -> String {
    let mut s = String::with_capacity(arg.len() + 2);
    s.push('"');
    for c in arg.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '%' => s.push_str("%%"),
            '$' => s.push_str("$$"),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit() -> Unit {
        Unit {
            name: unit_name("control", Some("a")),
            description: "bosun control plane (cluster a)".into(),
            data_dir: PathBuf::from("/root/.bosun/clusters/a/control"),
            exec: vec![
                "/usr/local/bin/bosun-control".into(),
                "--data-dir".into(),
                "/srv/my dir/100%".into(),
                "--token=$HOME\"x\\".into(),
            ],
            env: vec![("BOSUN_LOG".into(), "debug".into())],
            after: vec!["docker.service".into()],
            stop_timeout: Duration::from_secs(30),
        }
    }

    #[test]
    fn names_follow_the_cluster() {
        assert_eq!(unit_name("control", None), "bosun-control.service");
        assert_eq!(unit_name("agent", Some("b")), "bosun-agent-b.service");
    }

    #[test]
    fn exec_start_quotes_what_systemd_would_split_or_expand() {
        let text = unit().render();
        let exec = text.lines().find(|l| l.starts_with("ExecStart=")).unwrap();
        assert_eq!(
            exec,
            r#"ExecStart="/usr/local/bin/bosun-control" "--data-dir" "/srv/my dir/100%%" "--token=$$HOME\"x\\""#
        );
        assert!(text.contains("Environment=\"BOSUN_LOG=debug\"\n"));
        assert!(text.contains("Restart=always\n"));
        assert!(text.contains("After=network-online.target docker.service\n"));
        assert!(text.contains("WantedBy=multi-user.target\n"));
    }

    #[test]
    fn the_data_dir_is_read_back_from_the_unit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("u.service");
        let mut u = unit();
        u.data_dir = PathBuf::from("/data/50%");
        std::fs::write(&path, u.render()).unwrap();
        assert_eq!(data_dir_of(&path), Some(PathBuf::from("/data/50%")));
        assert_eq!(data_dir_of(&dir.path().join("missing")), None);
    }
}
