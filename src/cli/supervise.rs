//! `bosun supervise --component NAME --data-dir DIR -- PROGRAM ARGS...`:
//! keeps one process of `bosun up`/`bosun join` running where no service
//! manager does (containers, CI; the process is a child of nothing that
//! would restart it).
//!
//! - It runs PROGRAM with its output piped into `DIR/NAME.log`, which it
//!   rotates by size (`NAME.log.1` is the newest rotated file, at most
//!   `--log-max-files` files in all), so the log cannot fill the disk.
//! - When PROGRAM exits without being asked to, it is started again after
//!   a back-off (1 s, doubling to 30 s; back to 1 s once a run lasted a
//!   minute), and `DIR/NAME.restarts` counts the restarts and says why.
//! - SIGTERM or SIGINT to the supervisor is passed on to PROGRAM; once it
//!   has exited the supervisor removes its pid files and exits too.
//!
//! `bosun up` starts it; users do not need to.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _, Result};
use clap::Args;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::signal::unix::{signal, SignalKind};

use super::component::{Component, LogLimits};

#[derive(Debug, Args)]
pub struct SuperviseArgs {
    /// The component's name (control, agent): its files in the data dir.
    #[arg(long)]
    component: String,
    #[arg(long, value_name = "DIR")]
    data_dir: PathBuf,
    /// Size at which the log is rotated.
    #[arg(long, default_value_t = LogLimits::default().max_bytes)]
    log_max_bytes: u64,
    /// How many log files are kept, the live one included.
    #[arg(long, default_value_t = LogLimits::default().files)]
    log_max_files: usize,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "PROGRAM")]
    command: Vec<String>,
}

/// A log file that is rotated once it would grow past `max_bytes`.
pub struct RotatingLog {
    path: PathBuf,
    limits: LogLimits,
    file: File,
    size: u64,
}

impl RotatingLog {
    pub fn open(path: &Path, limits: LogLimits) -> std::io::Result<RotatingLog> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let size = file.metadata()?.len();
        Ok(RotatingLog {
            path: path.to_path_buf(),
            limits: LogLimits {
                max_bytes: limits.max_bytes.max(1),
                files: limits.files.max(1),
            },
            file,
            size,
        })
    }

    fn rotated(&self, n: usize) -> PathBuf {
        let mut p = self.path.clone().into_os_string();
        p.push(format!(".{n}"));
        PathBuf::from(p)
    }

    /// Writes `line` (whole lines stay in one file).
    pub fn write(&mut self, line: &[u8]) -> std::io::Result<()> {
        if self.size > 0 && self.size + line.len() as u64 > self.limits.max_bytes {
            self.rotate()?;
        }
        // A single line longer than the cap is cut to it.
        let line = &line[..line.len().min(self.limits.max_bytes as usize)];
        self.file.write_all(line)?;
        self.size += line.len() as u64;
        Ok(())
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        let keep = self.limits.files - 1;
        if keep == 0 {
            self.file.set_len(0)?;
            self.size = 0;
            return Ok(());
        }
        let _ = std::fs::remove_file(self.rotated(keep));
        for n in (1..keep).rev() {
            let from = self.rotated(n);
            if from.exists() {
                std::fs::rename(&from, self.rotated(n + 1))?;
            }
        }
        std::fs::rename(&self.path, self.rotated(1))?;
        self.file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        self.size = 0;
        Ok(())
    }
}

type SharedLog = Arc<Mutex<RotatingLog>>;

fn say(log: &SharedLog, text: &str) {
    let line = format!(
        "{} bosun supervise: {text}\n",
        chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
    );
    if let Ok(mut l) = log.lock() {
        let _ = l.write(line.as_bytes());
    }
}

/// Copies `from` into the log line by line.
fn copy_lines(
    from: impl AsyncRead + Unpin + Send + 'static,
    log: SharedLog,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut reader = BufReader::new(from);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    if let Ok(mut l) = log.lock() {
                        let _ = l.write(&line);
                    }
                }
            }
        }
    })
}

const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A run this long resets the back-off.
const STEADY: Duration = Duration::from_secs(60);

pub async fn supervise(args: &SuperviseArgs) -> Result<bool> {
    let component = Component::named(&args.component)
        .ok_or_else(|| anyhow!("--component {:?}: not control or agent", args.component))?;
    let dir = &args.data_dir;
    let log_path = component.log_file(dir);
    let log: SharedLog = Arc::new(Mutex::new(
        RotatingLog::open(
            &log_path,
            LogLimits {
                max_bytes: args.log_max_bytes,
                files: args.log_max_files,
            },
        )
        .with_context(|| format!("opening {}", log_path.display()))?,
    ));
    // Its own pid file is written by whoever started it (`Component::start`).
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let (program, program_args) = args.command.split_first().expect("required");
    let mut backoff = FIRST_BACKOFF;
    let mut restarts = 0u32;
    loop {
        let started = Instant::now();
        let spawned = tokio::process::Command::new(program)
            .args(program_args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let why = match spawned {
            Err(e) => format!("could not start {program}: {e}"),
            Ok(mut child) => {
                let pid = child.id().unwrap_or_default();
                bosun::files::write_atomically(
                    &component.pid_file(dir),
                    &format!("{pid}\n"),
                    0o644,
                )?;
                let copies = [
                    copy_lines(child.stdout.take().expect("piped"), log.clone()),
                    copy_lines(child.stderr.take().expect("piped"), log.clone()),
                ];
                let stopping = tokio::select! {
                    status = child.wait() => Err(status),
                    _ = term.recv() => Ok(()),
                    _ = int.recv() => Ok(()),
                };
                let status = match stopping {
                    Ok(()) => {
                        let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
                        let status = child.wait().await;
                        finish(copies).await;
                        say(
                            &log,
                            &format!("{} stopped ({})", component.binary, describe(&status)),
                        );
                        break;
                    }
                    Err(status) => status,
                };
                finish(copies).await;
                format!("{} exited ({})", component.binary, describe(&status))
            }
        };
        if started.elapsed() >= STEADY {
            backoff = FIRST_BACKOFF;
        }
        restarts += 1;
        let _ = bosun::files::write_atomically(
            &component.restarts_file(dir),
            &format!("{restarts}\n{why}\n"),
            0o644,
        );
        say(&log, &format!("{why}; starting it again in {backoff:?}"));
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
    let _ = std::fs::remove_file(component.pid_file(dir));
    let _ = std::fs::remove_file(component.supervisor_pid_file(dir));
    Ok(true)
}

fn describe(status: &std::io::Result<std::process::ExitStatus>) -> String {
    match status {
        Ok(s) => s.to_string(),
        Err(e) => format!("waiting for it failed: {e}"),
    }
}

/// Waits for the output copies to drain; a grandchild that kept the pipes
/// open is not waited for long.
async fn finish(copies: [tokio::task::JoinHandle<()>; 2]) {
    let all = futures::future::join_all(copies);
    let _ = tokio::time::timeout(Duration::from_secs(2), all).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_is_rotated_by_size_and_keeps_its_file_count() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.log");
        let limits = LogLimits {
            max_bytes: 100,
            files: 3,
        };
        let mut log = RotatingLog::open(&path, limits).unwrap();
        for i in 0..100 {
            log.write(format!("line {i:03} of the log\n").as_bytes())
                .unwrap();
        }
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["agent.log", "agent.log.1", "agent.log.2"]);
        for n in &names {
            let len = std::fs::metadata(dir.path().join(n)).unwrap().len();
            assert!(len <= 100, "{n} is {len} bytes");
        }
        // The newest lines are in the live file, the ones before in .1.
        let live = std::fs::read_to_string(&path).unwrap();
        assert!(live.ends_with("line 099 of the log\n"), "{live}");
        let older = std::fs::read_to_string(dir.path().join("agent.log.1")).unwrap();
        let first_live: u32 = live[5..8].parse().unwrap();
        assert!(older.ends_with(&format!("line {:03} of the log\n", first_live - 1)));
        // Reopened, it goes on from the size it has.
        drop(log);
        let mut log = RotatingLog::open(&path, limits).unwrap();
        log.write(&[b'x'; 99]).unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() <= 100);
    }

    #[test]
    fn one_file_means_the_log_starts_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.log");
        let mut log = RotatingLog::open(
            &path,
            LogLimits {
                max_bytes: 10,
                files: 1,
            },
        )
        .unwrap();
        for _ in 0..5 {
            log.write(b"12345678\n").unwrap();
        }
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "12345678\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
