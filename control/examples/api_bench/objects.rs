//! The pods the benchmark writes.

use super::*;

/// A small, realistic pod: one container with a port, requests, labels.
pub(crate) fn pod(ns: &str, name: &str, group: usize, rev: usize) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {"app": "bench", "tier": "web", "group": format!("g{}", group % 10),
                       "rev": rev.to_string()},
        },
        "spec": {
            "containers": [{
                "name": "web",
                "image": "nginx:1.27",
                "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
            }],
            "restartPolicy": "Always",
        },
    })
}

pub(crate) fn pod_name(w: usize, k: usize) -> String {
    format!("bench-{w}-{k}")
}

pub(crate) fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}
