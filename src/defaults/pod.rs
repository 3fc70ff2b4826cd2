//! A pod spec's defaults, as upstream's `SetDefaults_PodSpec` and
//! `SetDefaults_Container` fill them in: for Pods and for every workload's
//! pod template.

use serde_json::{json, Map, Value};

use super::{array_at, object_at, set, set_nonzero, set_str};

/// Defaults the pod template at `spec.template`.
pub(super) fn default_template(spec: &mut Map<String, Value>) {
    let tpl = object_at(spec, "template");
    default_pod_spec(object_at(tpl, "spec"));
}

pub(super) fn default_pod_spec(spec: &mut Map<String, Value>) {
    set_str(spec, "restartPolicy", "Always");
    set_str(spec, "dnsPolicy", "ClusterFirst");
    set(spec, "terminationGracePeriodSeconds", json!(30));
    set_str(spec, "schedulerName", "default-scheduler");
    set(spec, "securityContext", json!({}));
    set(spec, "enableServiceLinks", json!(true));
    let host_network = spec
        .get("hostNetwork")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    // Ephemeral containers as the others (`SetDefaults_EphemeralContainer`).
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        for c in array_at(spec, list) {
            default_container(c, host_network);
        }
    }
    for vol in array_at(spec, "volumes") {
        for source in ["secret", "configMap", "downwardAPI", "projected"] {
            if let Some(src) = vol.get_mut(source).and_then(Value::as_object_mut) {
                set(src, "defaultMode", json!(420));
            }
        }
        if let Some(hp) = vol.get_mut("hostPath").and_then(Value::as_object_mut) {
            set(hp, "type", json!(""));
        }
    }
}

/// `Always` for `:latest` or untagged images, else `IfNotPresent`.
pub fn default_pull_policy(image: &str) -> &'static str {
    let (name, digest) = match image.split_once('@') {
        Some((n, _)) => (n, true),
        None => (image, false),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    let tag = last.split_once(':').map(|(_, t)| t);
    match tag {
        Some("latest") => "Always",
        Some(_) => "IfNotPresent",
        None if digest => "IfNotPresent",
        None => "Always",
    }
}

fn default_container(c: &mut Map<String, Value>, host_network: bool) {
    let image = c
        .get("image")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    set_str(c, "imagePullPolicy", default_pull_policy(&image));
    set_str(c, "terminationMessagePath", "/dev/termination-log");
    set_str(c, "terminationMessagePolicy", "File");
    set(c, "resources", json!({}));
    for port in array_at(c, "ports") {
        set_str(port, "protocol", "TCP");
        if host_network {
            if let Some(cp) = port.get("containerPort").cloned() {
                set_nonzero(port, "hostPort", cp.as_i64().unwrap_or(0));
            }
        }
    }
    for ev in array_at(c, "env") {
        if let Some(fr) = ev
            .get_mut("valueFrom")
            .and_then(|v| v.get_mut("fieldRef"))
            .and_then(Value::as_object_mut)
        {
            set_str(fr, "apiVersion", "v1");
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(probe).and_then(Value::as_object_mut) {
            set_nonzero(p, "timeoutSeconds", 1);
            set_nonzero(p, "periodSeconds", 10);
            set_nonzero(p, "successThreshold", 1);
            set_nonzero(p, "failureThreshold", 3);
            if let Some(h) = p.get_mut("httpGet").and_then(Value::as_object_mut) {
                set_str(h, "path", "/");
                set_str(h, "scheme", "HTTP");
            }
        }
    }
    if let Some(lc) = c.get_mut("lifecycle").and_then(Value::as_object_mut) {
        for hook in ["postStart", "preStop"] {
            if let Some(h) = lc
                .get_mut(hook)
                .and_then(|h| h.get_mut("httpGet"))
                .and_then(Value::as_object_mut)
            {
                set_str(h, "path", "/");
                set_str(h, "scheme", "HTTP");
            }
        }
    }
}
