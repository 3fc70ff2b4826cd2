//! What the probe modules' unit tests share: a [`Target`] on the
//! recording fake runtime.

use std::sync::Arc;

use serde_json::json;

use super::Target;
use crate::runtime::fake::FakeRuntime;

/// Container `c1` of a pod at `ip`, with a port named `http`.
pub(super) fn target(rt: Arc<FakeRuntime>, ip: &str) -> Target {
    Target {
        rt,
        container_id: "c1".into(),
        pod_ip: Some(ip.into()),
        ports: vec![serde_json::from_value(json!({"name": "http", "containerPort": 1})).unwrap()],
    }
}
