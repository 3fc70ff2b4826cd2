//! `bosun logs`, `bosun exec` and `bosun attach`: the pod's log as a
//! stream, and interactive sessions over the `pods/exec` and `pods/attach`
//! WebSocket subresources, as kubectl has them.

use std::io::Write;

use anyhow::{anyhow, bail, Context as _, Result};
use clap::Args;
use futures::AsyncReadExt as _;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::api::{Api, AttachParams, AttachedProcess, LogParams, TerminalSize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::client::Ctx;
use super::ExitStatus;

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The pod (POD or pod/POD).
    pod: String,
    /// The container whose log to print (default: the pod's only or default one).
    #[arg(short = 'c', long)]
    container: Option<String>,
    /// Keep printing new lines as they are written.
    #[arg(short = 'f', long)]
    follow: bool,
    /// Print the log of the previous instance of the container.
    #[arg(short = 'p', long)]
    previous: bool,
    /// Lines of the recent log to print (-1: all).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    tail: i64,
    /// Prefix each line with its timestamp.
    #[arg(long)]
    timestamps: bool,
    /// Only lines newer than this many seconds.
    #[arg(long)]
    since_seconds: Option<i64>,
    /// Print at most this many bytes.
    #[arg(long)]
    limit_bytes: Option<i64>,
}

/// `-i` and `-t`, which exec and attach share.
#[derive(Debug, Args)]
pub struct TerminalArgs {
    /// Pass stdin to the container.
    #[arg(short = 'i', long)]
    stdin: bool,
    /// Stdin is a terminal.
    #[arg(short = 't', long)]
    tty: bool,
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    #[command(flatten)]
    terminal: TerminalArgs,
    /// The container to run in (default: the pod's only or default one).
    #[arg(short = 'c', long)]
    container: Option<String>,
    /// The pod (POD or pod/POD).
    pod: String,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct AttachArgs {
    #[command(flatten)]
    terminal: TerminalArgs,
    /// The container to attach to (default: the pod's only or default one).
    #[arg(short = 'c', long)]
    container: Option<String>,
    /// The pod (POD or pod/POD).
    pod: String,
}

/// `POD`, `pod/POD` or `pods/POD` → `POD`.
fn pod_name(arg: &str) -> Result<&str> {
    match arg.split_once('/') {
        None => Ok(arg),
        Some(("pod" | "pods" | "po", name)) if !name.is_empty() => Ok(name),
        Some((kind, _)) => bail!("only pods have logs and run commands, not {kind}"),
    }
}

/// The container kubectl would pick: the one asked for, else the
/// `kubectl.kubernetes.io/default-container` annotation's, else the first
/// (saying so when there were several).
async fn default_container(api: &Api<Pod>, pod: &str, asked: Option<&str>) -> Result<String> {
    if let Some(c) = asked {
        return Ok(c.to_string());
    }
    let obj = api.get(pod).await?;
    let names: Vec<String> = obj
        .spec
        .as_ref()
        .map(|s| s.containers.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default();
    let annotated = obj
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("kubectl.kubernetes.io/default-container"))
        .filter(|c| names.contains(c))
        .cloned();
    if let Some(c) = annotated {
        return Ok(c);
    }
    let first = names
        .first()
        .cloned()
        .ok_or_else(|| anyhow!("pod {pod} has no containers"))?;
    if names.len() > 1 {
        eprintln!(
            "Defaulted container \"{first}\" out of: {}",
            names.join(", ")
        );
    }
    Ok(first)
}

pub async fn logs(ctx: &Ctx, args: &LogsArgs) -> Result<bool> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let pod = pod_name(&args.pod)?;
    let container = default_container(&api, pod, args.container.as_deref()).await?;
    let params = LogParams {
        container: Some(container),
        follow: args.follow,
        previous: args.previous,
        tail_lines: (args.tail >= 0).then_some(args.tail),
        timestamps: args.timestamps,
        since_seconds: args.since_seconds,
        limit_bytes: args.limit_bytes,
        ..Default::default()
    };
    let mut stream = api.log_stream(pod, &params).await?;
    let mut buf = vec![0u8; 16 * 1024];
    let stdout = std::io::stdout();
    loop {
        let n = stream.read(&mut buf).await.context("reading the log")?;
        if n == 0 {
            break;
        }
        let mut out = stdout.lock();
        if out.write_all(&buf[..n]).and_then(|_| out.flush()).is_err() {
            // The reader went away (`| head`): stop quietly.
            break;
        }
    }
    Ok(true)
}

/// Puts the terminal on stdin in raw mode until dropped.
struct RawMode {
    saved: nix::sys::termios::Termios,
}

impl RawMode {
    fn enter() -> Result<RawMode> {
        use nix::sys::termios::{cfmakeraw, tcgetattr, tcsetattr, SetArg};
        let stdin = std::io::stdin();
        let saved = tcgetattr(&stdin).context("stdin is not a terminal")?;
        let mut raw = saved.clone();
        cfmakeraw(&mut raw);
        tcsetattr(&stdin, SetArg::TCSANOW, &raw).context("making the terminal raw")?;
        Ok(RawMode { saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        use nix::sys::termios::{tcsetattr, SetArg};
        let _ = tcsetattr(std::io::stdin(), SetArg::TCSANOW, &self.saved);
    }
}

/// The terminal's size, as `stty size` reports it.
fn terminal_size() -> Option<TerminalSize> {
    let out = std::process::Command::new("stty")
        .arg("size")
        .stdin(std::process::Stdio::inherit())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts = text.split_whitespace();
    let height = parts.next()?.parse().ok()?;
    let width = parts.next()?.parse().ok()?;
    Some(TerminalSize { width, height })
}

/// The exit code a session's final status carries: 0 on success, the
/// command's own on NonZeroExitCode; other failures are errors.
fn exit_code(status: Option<&Status>) -> Result<i32> {
    let Some(status) = status else {
        return Ok(0);
    };
    if status.status.as_deref() != Some("Failure") {
        return Ok(0);
    }
    if status.reason.as_deref() == Some("NonZeroExitCode") {
        let code = status
            .details
            .as_ref()
            .and_then(|d| d.causes.as_ref())
            .and_then(|causes| {
                causes
                    .iter()
                    .find(|c| c.reason.as_deref() == Some("ExitCode"))
                    .and_then(|c| c.message.as_deref()?.parse::<i32>().ok())
            })
            .unwrap_or(1);
        return Ok(code);
    }
    bail!(
        "{}",
        status.message.as_deref().unwrap_or("the session failed")
    )
}

/// Connects the local terminal to a session until it ends; returns the
/// exit code it ended with.
/// Ctrl-P Ctrl-Q: the key sequence that detaches from an attached
/// terminal, as with kubectl and docker.
const DETACH_KEYS: [u8; 2] = [0x10, 0x11];

/// Where the detach sequence ends in `buf`, given the byte read before it.
fn detach_at(previous: Option<u8>, buf: &[u8]) -> Option<usize> {
    if previous == Some(DETACH_KEYS[0]) && buf.first() == Some(&DETACH_KEYS[1]) {
        return Some(0);
    }
    buf.windows(2).position(|w| w == DETACH_KEYS).map(|i| i + 1)
}

/// How a session ended.
enum Ended {
    /// With this exit code.
    Exited(i32),
    /// The user pressed the detach keys.
    Detached,
}

async fn run_session(
    mut process: AttachedProcess,
    stdin: bool,
    tty: bool,
    detachable: bool,
) -> Result<Ended> {
    let raw = if tty && stdin {
        Some(RawMode::enter()?)
    } else {
        None
    };
    if tty {
        if let Some(mut sizes) = process.terminal_size() {
            if let Some(size) = terminal_size() {
                let _ = futures::SinkExt::send(&mut sizes, size).await;
            }
            tokio::spawn(async move {
                let Ok(mut winch) =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())
                else {
                    return;
                };
                while winch.recv().await.is_some() {
                    if let Some(size) = terminal_size() {
                        if futures::SinkExt::send(&mut sizes, size).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    }
    let (detach_tx, detach_rx) = tokio::sync::oneshot::channel::<()>();
    if stdin {
        if let Some(mut writer) = process.stdin() {
            tokio::spawn(async move {
                let mut input = tokio::io::stdin();
                let mut buf = vec![0u8; 8192];
                let mut previous = None;
                loop {
                    match input.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            let chunk = &buf[..n];
                            if detachable {
                                if let Some(end) = detach_at(previous, chunk) {
                                    // The keys before the sequence still count.
                                    let keep = end.saturating_sub(1);
                                    let _ = writer.write_all(&chunk[..keep]).await;
                                    let _ = detach_tx.send(());
                                    return;
                                }
                            }
                            previous = chunk.last().copied();
                            if writer.write_all(chunk).await.is_err() {
                                return;
                            }
                        }
                    }
                }
                // Dropping the writer tells the server stdin ended.
                let _ = writer.shutdown().await;
            });
        }
    }
    let stdout = process.stdout();
    let stderr = process.stderr();
    let copy_out = async {
        if let Some(mut out) = stdout {
            let _ = tokio::io::copy(&mut out, &mut tokio::io::stdout()).await;
        }
        let _ = tokio::io::stdout().flush().await;
    };
    let copy_err = async {
        if let Some(mut err) = stderr {
            let _ = tokio::io::copy(&mut err, &mut tokio::io::stderr()).await;
        }
    };
    let status = process.take_status();
    let session = async {
        tokio::join!(copy_out, copy_err, async {
            match status {
                Some(s) => s.await,
                None => None,
            }
        })
        .2
    };
    let ended = tokio::select! {
        status = session => {
            let _ = process.join().await;
            drop(raw);
            Ended::Exited(exit_code(status.as_ref())?)
        }
        Ok(()) = detach_rx => {
            process.abort();
            drop(raw);
            Ended::Detached
        }
    };
    Ok(ended)
}

/// The pods API and the session parameters exec and attach share: the
/// container (defaulted as kubectl does), stdin, and stderr merged into
/// the terminal when there is one.
async fn session(
    ctx: &Ctx,
    pod: &str,
    container: Option<&str>,
    &TerminalArgs { stdin, tty }: &TerminalArgs,
) -> Result<(Api<Pod>, AttachParams)> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let container = default_container(&api, pod, container).await?;
    let params = AttachParams {
        container: Some(container),
        stdin,
        stdout: true,
        stderr: !tty,
        tty,
        ..Default::default()
    };
    Ok((api, params))
}

pub async fn exec(ctx: &Ctx, args: &ExecArgs) -> Result<bool> {
    let pod = pod_name(&args.pod)?;
    let (api, params) = session(ctx, pod, args.container.as_deref(), &args.terminal).await?;
    let process = api.exec(pod, args.command.clone(), &params).await?;
    let Ended::Exited(code) =
        run_session(process, args.terminal.stdin, args.terminal.tty, false).await?
    else {
        return Ok(true);
    };
    if code != 0 {
        eprintln!("command terminated with exit code {code}");
        return Err(ExitStatus(code).into());
    }
    Ok(true)
}

pub async fn attach(ctx: &Ctx, args: &AttachArgs) -> Result<bool> {
    let pod = pod_name(&args.pod)?;
    let (api, params) = session(ctx, pod, args.container.as_deref(), &args.terminal).await?;
    let process = api.attach(pod, &params).await?;
    let interactive = args.terminal.tty && args.terminal.stdin;
    if interactive {
        eprintln!("If you don't see a command prompt, try pressing enter.");
    }
    match run_session(process, args.terminal.stdin, args.terminal.tty, interactive).await? {
        Ended::Exited(0) => Ok(true),
        Ended::Exited(code) => Err(ExitStatus(code).into()),
        Ended::Detached => {
            eprintln!(
                "\r\nSession ended, resume using 'bosun attach {pod} -c {} -i -t' command when the pod is running",
                params.container.as_deref().unwrap_or_default()
            );
            Ok(true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctrl_p_ctrl_q_detaches_even_across_reads() {
        assert_eq!(detach_at(None, b"ls\x10\x11"), Some(3));
        assert_eq!(detach_at(Some(0x10), b"\x11rest"), Some(0));
        assert_eq!(detach_at(Some(b'a'), b"\x11"), None);
        assert_eq!(detach_at(None, b"\x10a\x11"), None);
    }

    #[test]
    fn pods_are_named_plainly_or_by_type() {
        assert_eq!(pod_name("web").unwrap(), "web");
        assert_eq!(pod_name("pod/web").unwrap(), "web");
        assert_eq!(pod_name("pods/web").unwrap(), "web");
        assert!(pod_name("deployment/web").is_err());
    }

    #[test]
    fn the_final_status_gives_the_exit_code() {
        let status = |v: serde_json::Value| -> Status { serde_json::from_value(v).unwrap() };
        assert_eq!(exit_code(None).unwrap(), 0);
        assert_eq!(
            exit_code(Some(&status(serde_json::json!({"status": "Success"})))).unwrap(),
            0
        );
        let failed = status(serde_json::json!({
            "status": "Failure",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": "3"}]},
        }));
        assert_eq!(exit_code(Some(&failed)).unwrap(), 3);
        let internal = status(serde_json::json!({
            "status": "Failure",
            "reason": "InternalError",
            "message": "docker went away",
        }));
        let e = exit_code(Some(&internal)).unwrap_err();
        assert_eq!(e.to_string(), "docker went away");
    }
}
