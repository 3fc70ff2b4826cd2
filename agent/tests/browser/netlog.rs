//! Chromium's network log (`--log-net-log`), read while chromium still
//! writes it: the first line holds the constants (event and error names
//! by number), then one event per line.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

/// How a request chromium made has ended so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// Still open (a watch being read).
    Open,
    /// The page (or a navigation) cancelled it.
    Cancelled,
    /// The response was read to its end.
    Completed,
    /// It failed with this net error (e.g. `ERR_NETWORK_CHANGED`).
    Failed(String),
}

/// One URL request as the log tells it.
#[derive(Debug, Clone)]
pub struct Request {
    pub url: String,
    pub end: End,
}

/// Every URL request in the log at `file`, in the order they started.
pub fn url_requests(file: &Path) -> Vec<Request> {
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("chromium's net log {}: {e}", file.display()));
    let mut lines = text.lines();
    let first = lines
        .next()
        .unwrap_or_default()
        .trim()
        .trim_end_matches(',');
    let head: Value = serde_json::from_str(&format!("{first}}}"))
        .unwrap_or_else(|e| panic!("the net log's constants: {e}"));
    let constants = &head["constants"];
    let number = |table: &str, name: &str| -> i64 {
        constants[table][name]
            .as_i64()
            .unwrap_or_else(|| panic!("the net log names no {table} {name}"))
    };
    let url_request = number("logSourceType", "URL_REQUEST");
    let alive = number("logEventTypes", "REQUEST_ALIVE");
    let cancelled = number("logEventTypes", "CANCELLED");
    let (begin, end) = (
        number("logEventPhase", "PHASE_BEGIN"),
        number("logEventPhase", "PHASE_END"),
    );
    let errors: HashMap<i64, String> = constants["netError"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((v.as_i64()?, k.clone())))
                .collect()
        })
        .unwrap_or_default();
    let mut order = Vec::new();
    let mut requests: HashMap<i64, (Request, bool)> = HashMap::new();
    // The events' array: the last line may be half written, or the
    // closing bracket.
    for line in lines {
        let Ok(event) = serde_json::from_str::<Value>(line.trim().trim_end_matches(',')) else {
            continue;
        };
        if event["source"]["type"].as_i64() != Some(url_request) {
            continue;
        }
        let Some(id) = event["source"]["id"].as_i64() else {
            continue;
        };
        let kind = event["type"].as_i64();
        let phase = event["phase"].as_i64();
        if kind == Some(alive) && phase == Some(begin) {
            let url = event["params"]["url"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            order.push(id);
            requests.insert(
                id,
                (
                    Request {
                        url,
                        end: End::Open,
                    },
                    false,
                ),
            );
            continue;
        }
        let Some((request, was_cancelled)) = requests.get_mut(&id) else {
            continue;
        };
        if kind == Some(cancelled) {
            *was_cancelled = true;
        } else if kind == Some(alive) && phase == Some(end) {
            request.end = match event["params"]["net_error"].as_i64() {
                Some(code) if code != 0 => End::Failed(
                    errors
                        .get(&code)
                        .cloned()
                        .unwrap_or_else(|| code.to_string()),
                ),
                _ if *was_cancelled => End::Cancelled,
                _ => End::Completed,
            };
        }
    }
    order
        .into_iter()
        .filter_map(|id| requests.remove(&id).map(|(r, _)| r))
        .collect()
}
