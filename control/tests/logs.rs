//! What `bosun-control` writes to its log file: plain text without
//! terminal colour codes when stderr is not a terminal, and one JSON object
//! per line with `--log-format json`.

mod common;

use common::ControlPlane;

/// Starts a control plane with `flags`, stops it with SIGTERM and returns
/// everything it logged (its stderr, a file).
fn log_of_a_run(flags: &[&str]) -> String {
    let mut cp = ControlPlane::start_with(flags);
    let status = cp.terminate();
    assert!(status.success(), "bosun-control exited with {status}");
    cp.log()
}

#[test]
fn a_log_file_gets_plain_text_without_escape_codes() {
    let log = log_of_a_run(&[]);
    assert!(log.contains("bosun-control is serving"), "{log}");
    assert!(log.contains("shutting down"), "{log}");
    if let Some(at) = log.find('\u{1b}') {
        panic!(
            "an escape byte at offset {at}: {:?}",
            &log[at.saturating_sub(40)..(at + 40).min(log.len())]
        );
    }
}

#[test]
fn log_format_json_writes_one_object_per_line() {
    let log = log_of_a_run(&["--log-format", "json"]);
    let mut messages = Vec::new();
    for line in log.lines() {
        let event: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line:?}\nlog:\n{log}"));
        assert!(
            ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"]
                .contains(&event["level"].as_str().unwrap_or("")),
            "no level in {line}"
        );
        assert!(event["timestamp"].is_string(), "no timestamp in {line}");
        let message = event["fields"]["message"]
            .as_str()
            .unwrap_or_else(|| panic!("no fields.message in {line}"));
        messages.push(message.to_string());
    }
    assert!(
        messages.iter().any(|m| m == "bosun-control is serving"),
        "{messages:?}"
    );
    // The fields of an event stay fields, not text in the message.
    let serving = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["fields"]["message"] == "bosun-control is serving")
        .unwrap();
    assert!(serving["fields"]["addr"].is_string(), "{serving}");
    assert!(!log.contains('\u{1b}'), "an escape byte in JSON logs");
}
