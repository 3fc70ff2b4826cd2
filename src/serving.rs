//! What bosun's two servers (the control plane's API and the agent's
//! stream API) share: their log setup, the query string as Kubernetes
//! clients send it, and the `Status` object every error answers with.

use serde_json::{json, Value};

/// Logs to stderr, filtered by `BOSUN_LOG` (default `info`).
pub fn init_logging() {
    use tracing_subscriber::EnvFilter;
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("BOSUN_LOG").unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
}

/// The query's key/value pairs, decoded, in order, repeated keys kept
/// (exec's `command=sh&command=-c`).
pub fn query_pairs(uri: &http::Uri) -> Vec<(String, String)> {
    uri.query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default()
}

/// A `metav1.Status` of a failed request.
pub fn failure_status(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_keep_repeated_keys_in_order_and_decode() {
        let uri: http::Uri = "/exec?command=sh&command=-c&command=echo%20hi&tty=true"
            .parse()
            .unwrap();
        assert_eq!(
            query_pairs(&uri),
            [
                ("command".to_string(), "sh".to_string()),
                ("command".into(), "-c".into()),
                ("command".into(), "echo hi".into()),
                ("tty".into(), "true".into()),
            ]
        );
        assert!(query_pairs(&"/healthz".parse().unwrap()).is_empty());
    }

    #[test]
    fn failures_are_status_objects() {
        let s = failure_status(404, "NotFound", "pods \"x\" not found");
        assert_eq!(
            (s["kind"].as_str(), s["status"].as_str(), s["code"].as_u64()),
            (Some("Status"), Some("Failure"), Some(404))
        );
    }
}
