//! `logs`, `exec` and `attach` end to end, with both the bosun CLI and
//! kubectl: through the control plane's `pods/log`, `pods/exec` and
//! `pods/attach` to the agent's stream API and Docker.

mod cluster;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cluster::{Cluster, BUSYBOX};
use serde_json::{json, Value};

const UP: Duration = Duration::from_secs(60);

fn pod(name: &str, containers: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"restartPolicy": "Always", "terminationGracePeriodSeconds": 1, "containers": containers}})
}

fn sh(name: &str, script: &str) -> Value {
    json!({"name": name, "image": BUSYBOX, "command": ["sh", "-c", script]})
}

fn running(p: &Value) -> bool {
    p["status"]["phase"] == "Running"
        && p["status"]["containerStatuses"]
            .as_array()
            .is_some_and(|cs| cs.iter().all(|c| c["state"]["running"].is_object()))
}

/// Runs `cmd` with a deadline; returns its output.
fn run(mut cmd: Command, stdin: Option<&str>, deadline: Duration) -> Output {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let what = format!("{cmd:?}");
    let mut child = cmd.spawn().expect("spawning the command");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(input.as_bytes()).unwrap();
        // Dropping the pipe is the end of stdin.
    }
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what} did not finish in {deadline:?}\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Starts `cmd` and waits until a line of its stdout contains `needle`
/// (writing `input` first, and keeping stdin open meanwhile); then kills it.
fn expect_line(mut cmd: Command, input: Option<&str>, needle: &str, deadline: Duration) {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let what = format!("{cmd:?}");
    let mut child = cmd.spawn().expect("spawning the command");
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    // The session may take a moment to be attached: repeat the input
    // until the answer shows.
    let start = Instant::now();
    let mut seen = Vec::new();
    let mut next_write = Instant::now();
    let found = loop {
        if let Some(input) = input {
            if Instant::now() >= next_write {
                let _ = stdin.write_all(input.as_bytes());
                let _ = stdin.flush();
                next_write = Instant::now() + Duration::from_secs(2);
            }
        }
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(line) if line.contains(needle) => break true,
            Ok(line) => seen.push(line),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break false,
        }
        if start.elapsed() > deadline {
            break false;
        }
    };
    let _ = child.kill();
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    let _ = child.wait();
    assert!(
        found,
        "{what} printed no line with {needle:?} in {deadline:?}\nstdout: {seen:?}\nstderr: {stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_tail_timestamps_previous_and_follow() {
    let c = Cluster::start();
    let client = c.client().await;
    c.create_pod(
        &client,
        pod(
            "printer",
            json!([
                sh(
                    "fixed",
                    "echo line 1; echo line 2; echo line 3; exec sleep 3600"
                ),
                sh(
                    "ticker",
                    "i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.3; done"
                ),
                sh("crash", "echo run; sleep 1; exit 1"),
            ]),
        ),
    )
    .await;
    c.wait_pod(&client, "printer", "crash restarted and running", UP, |p| {
        running(p) && p["status"]["containerStatuses"][2]["restartCount"].as_i64() >= Some(1)
    })
    .await;

    let long = Duration::from_secs(20);
    let logs = |args: &[&str]| {
        let mut cmd = c.bosun();
        cmd.arg("logs").args(args);
        run(cmd, None, long)
    };
    // The whole log, and its tail.
    let out = logs(&["printer", "-c", "fixed"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "line 1\nline 2\nline 3\n");
    let out = logs(&["printer", "-c", "fixed", "--tail", "2"]);
    assert_eq!(text(&out.stdout), "line 2\nline 3\n");
    // Timestamps: RFC 3339 with nanoseconds, then the line.
    let out = logs(&["pod/printer", "-c", "fixed", "--timestamps", "--tail", "1"]);
    let line = text(&out.stdout);
    let (stamp, rest) = line
        .split_once(' ')
        .expect("a timestamp, a space, the line");
    assert_eq!(rest, "line 3\n");
    assert!(
        chrono::DateTime::parse_from_rfc3339(stamp).is_ok(),
        "{stamp:?} is RFC 3339"
    );
    // The previous instance of a restarted container; none for one that
    // never restarted.
    let out = logs(&["printer", "-c", "crash", "--previous"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "run\n");
    let out = logs(&["printer", "-c", "fixed", "--previous"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("previous terminated container"),
        "{}",
        text(&out.stderr)
    );
    // Several containers and none named: the first, with a note.
    let out = logs(&["printer", "--tail", "1"]);
    assert_eq!(text(&out.stdout), "line 3\n");
    assert!(text(&out.stderr).contains("Defaulted container \"fixed\""));
    // Follow: lines written after the request arrive on the open stream.
    let mut cmd = c.bosun();
    cmd.args(["logs", "-f", "printer", "-c", "ticker", "--tail", "0"]);
    expect_line(cmd, None, "tick", long);

    // kubectl reads the same through pods/log.
    let kubectl = |args: &[&str]| {
        let mut cmd = c.kubectl();
        cmd.arg("logs").args(args);
        run(cmd, None, long)
    };
    let out = kubectl(&["printer", "-c", "fixed", "--tail", "2"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "line 2\nline 3\n");
    let out = kubectl(&["printer", "-c", "fixed", "--timestamps", "--tail", "1"]);
    assert!(text(&out.stdout).ends_with(" line 3\n"));
    let out = kubectl(&["printer", "-c", "crash", "--previous"]);
    assert_eq!(text(&out.stdout), "run\n", "{}", text(&out.stderr));
    let mut cmd = c.kubectl();
    cmd.args(["logs", "-f", "printer", "-c", "ticker", "--tail", "0"]);
    expect_line(cmd, None, "tick", long);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_passes_output_exit_code_and_stdin() {
    let c = Cluster::start();
    let client = c.client().await;
    c.create_pod(&client, pod("box", json!([sh("app", "exec sleep 3600")])))
        .await;
    c.wait_pod(&client, "box", "running", UP, running).await;
    let long = Duration::from_secs(20);
    let script = "echo out; echo err >&2; exit 3";

    let clients = [("bosun", c.bosun()), ("kubectl", c.kubectl())];
    for (name, base) in clients {
        let fresh = || {
            let mut cmd = Command::new(base.get_program());
            cmd.args(base.get_args());
            cmd
        };
        let mut cmd = fresh();
        cmd.args(["exec", "box", "--", "sh", "-c", script]);
        let out = run(cmd, None, long);
        assert_eq!(text(&out.stdout), "out\n", "{name}: {}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("err\n"),
            "{name}: {}",
            text(&out.stderr)
        );
        assert_eq!(
            out.status.code(),
            Some(3),
            "{name} exits with the command's code"
        );

        let mut cmd = fresh();
        cmd.args(["exec", "box", "-c", "app", "--", "true"]);
        let out = run(cmd, None, long);
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));

        // Stdin reaches the command and its end ends `cat`.
        let mut cmd = fresh();
        cmd.args(["exec", "-i", "box", "--", "cat"]);
        let out = run(cmd, Some("hi\n"), long);
        assert_eq!(text(&out.stdout), "hi\n", "{name}: {}", text(&out.stderr));
        assert!(out.status.success(), "{name}");

        // A container the pod does not have is the server's error.
        let mut cmd = fresh();
        cmd.args(["exec", "box", "-c", "nope", "--", "true"]);
        let out = run(cmd, None, long);
        assert!(!out.status.success());
        assert!(
            text(&out.stderr).contains("container nope is not valid for pod box"),
            "{name}: {}",
            text(&out.stderr)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_reaches_a_shell_waiting_on_stdin() {
    let c = Cluster::start();
    let client = c.client().await;
    // The seeds' `attach -it nginx -c shell`: a busybox sh with stdin and a TTY.
    let mut shell = sh("shell", "");
    shell["command"] = json!(["sh"]);
    shell["stdin"] = json!(true);
    shell["tty"] = json!(true);
    c.create_pod(&client, pod("term", json!([shell]))).await;
    c.wait_pod(&client, "term", "running", UP, running).await;
    let long = Duration::from_secs(20);

    let mut cmd = c.bosun();
    cmd.args(["attach", "-i", "term", "-c", "shell"]);
    expect_line(cmd, Some("echo attached-$((40+2))\n"), "attached-42", long);
    let mut cmd = c.kubectl();
    cmd.args(["attach", "-i", "term", "-c", "shell"]);
    expect_line(cmd, Some("echo kubectl-$((40+2))\n"), "kubectl-42", long);
    // Detaching leaves the shell running.
    let p = c
        .wait_pod(&client, "term", "still running", UP, running)
        .await;
    assert_eq!(p["status"]["containerStatuses"][0]["restartCount"], 0);
}
