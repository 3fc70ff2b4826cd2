//! `exec`, `attach` and `kubectl run -i --rm` over SPDY/3.1 end to end:
//! the real kubectl, told to use SPDY (`KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false`
//! is client-go's switch off WebSocket), against a control plane that
//! translates SPDY onto the agent's WebSocket channel protocol, and a
//! busybox container on real Docker.

mod cluster;

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cluster::{Cluster, BUSYBOX};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use serde_json::json;

const UP: Duration = Duration::from_secs(60);
const LONG: Duration = Duration::from_secs(60);

/// kubectl against `c`, on SPDY only.
fn kubectl_spdy(c: &Cluster) -> Command {
    let mut cmd = c.kubectl();
    cmd.env("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", "false");
    cmd
}

/// Runs `cmd` to its end within `deadline`, with `stdin` as its whole
/// input, reading its output as it comes (a full pipe would stall it).
fn run(mut cmd: Command, stdin: &[u8], deadline: Duration) -> Output {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let what = format!("{cmd:?}");
    let mut child = cmd.spawn().expect("spawning the command");
    let pid = child.id();
    let mut pipe = child.stdin.take().unwrap();
    let input = stdin.to_vec();
    std::thread::spawn(move || {
        let _ = pipe.write_all(&input);
        // Dropping the pipe is the end of stdin.
    });
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output().unwrap());
    });
    match rx.recv_timeout(deadline) {
        Ok(out) => out,
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            let out = rx.recv().unwrap();
            panic!(
                "{what} did not finish in {deadline:?}\nstdout ({} bytes, the end): {}\nstderr: {}",
                out.stdout.len(),
                tail(&out.stdout),
                tail(&out.stderr)
            );
        }
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The last 2000 bytes of `b`, for failure messages.
fn tail(b: &[u8]) -> String {
    text(&b[b.len().saturating_sub(2000)..])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_exec_over_spdy_passes_stdin_output_and_exit_code() {
    let c = Cluster::start();
    let client = c.client().await;
    c.create_pod(
        &client,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "box"},
            "spec": {"terminationGracePeriodSeconds": 1, "containers": [
                {"name": "app", "image": BUSYBOX, "command": ["sh", "-c", "exec sleep 3600"]}]}}),
    )
    .await;
    c.wait_pod(&client, "box", "running", UP, |p| {
        p["status"]["phase"] == "Running"
    })
    .await;

    // stdout, stderr and the exit code.
    let mut cmd = kubectl_spdy(&c);
    cmd.args([
        "exec",
        "box",
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; exit 3",
    ]);
    let out = run(cmd, b"", LONG);
    assert_eq!(text(&out.stdout), "out\n", "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("err\n"), "{}", text(&out.stderr));
    assert_eq!(
        out.status.code(),
        Some(3),
        "kubectl exits with the command's code"
    );
    let mut cmd = kubectl_spdy(&c);
    cmd.args(["exec", "box", "--", "true"]);
    let out = run(cmd, b"", LONG);
    assert!(out.status.success(), "{}", text(&out.stderr));

    // Piped stdin reaches the command, and its end ends `cat`.
    let mut cmd = kubectl_spdy(&c);
    cmd.args(["exec", "-i", "box", "--", "cat"]);
    let out = run(cmd, b"abc\n", LONG);
    assert_eq!(text(&out.stdout), "abc\n", "{}", text(&out.stderr));
    assert!(out.status.success(), "{}", text(&out.stderr));

    // A few MiB each way: more than any SPDY window, all of it arrives.
    let big: Vec<u8> = (0..4 * 1024 * 1024u32)
        .map(|i| b'a' + (i % 26) as u8)
        .collect();
    let mut cmd = kubectl_spdy(&c);
    cmd.args(["exec", "-i", "box", "--", "wc", "-c"]);
    let out = run(cmd, &big, LONG);
    assert_eq!(
        text(&out.stdout).trim(),
        big.len().to_string(),
        "{}",
        text(&out.stderr)
    );
    let mut cmd = kubectl_spdy(&c);
    cmd.args(["exec", "-i", "box", "--", "cat"]);
    let out = run(cmd, &big, LONG);
    assert!(
        out.stdout == big,
        "cat gave back {} of {} bytes: {}",
        out.stdout.len(),
        big.len(),
        text(&out.stderr)
    );

    // The server's refusal reaches the user on the SPDY path too.
    let mut cmd = kubectl_spdy(&c);
    cmd.args(["exec", "box", "-c", "nope", "--", "true"]);
    let out = run(cmd, b"", LONG);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("container nope is not valid for pod box"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_run_interactive_attaches_over_spdy_and_removes_the_pod() {
    let c = Cluster::start();
    let client = c.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let gone = |name: &'static str| {
        let pods = pods.clone();
        async move {
            let start = Instant::now();
            while pods.get_opt(name).await.unwrap().is_some() {
                assert!(start.elapsed() < UP, "pod {name} is still there after --rm");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };

    // The pod waits for a line on stdin, so its answer can only come
    // through the attached session (not from its log afterwards).
    let mut cmd = kubectl_spdy(&c);
    cmd.args([
        "run",
        "-i",
        "--rm",
        "--restart=Never",
        &format!("--image={BUSYBOX}"),
        "reader",
        "--",
        "sh",
        "-c",
        "read line; echo got-$line",
    ]);
    let out = run(cmd, b"abc\n", LONG);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("got-abc\n"),
        "stdout: {}\nstderr: {}",
        text(&out.stdout),
        text(&out.stderr)
    );
    gone("reader").await;

    // The command, as plain as it is (whatever kubectl 1.32 picks).
    let mut cmd = c.kubectl();
    cmd.args([
        "run",
        "-i",
        "--rm",
        "--restart=Never",
        &format!("--image={BUSYBOX}"),
        "t",
        "--",
        "echo",
        "hello",
    ]);
    let out = run(cmd, b"", LONG);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("hello\n"),
        "stdout: {}\nstderr: {}",
        text(&out.stdout),
        text(&out.stderr)
    );
    gone("t").await;
}
