//! kube-apiserver's ServiceAccount admission for new pods: every pod runs
//! as a service account (`default` unless it names one), a named account
//! must exist, and unless the pod or its account opts out
//! (`automountServiceAccountToken: false`) the pod gets the projected
//! `kube-api-access-<random>` volume — a token for its account bound to
//! the pod, the cluster's CA (`kube-root-ca.crt`) and its namespace —
//! mounted at `/var/run/secrets/kubernetes.io/serviceaccount` in every
//! container, where in-cluster clients look for them.
//!
//! One difference from Kubernetes: a missing `default` account does not
//! refuse the pod (the serviceaccount controller makes it moments after
//! its namespace; the agent waits for the account before the token).

use serde_json::{json, Value};

use crate::api::error::{ApiError, ApiResult};
use crate::api::object;
use crate::api::request::stored_core;
use crate::api::ApiState;

/// Where in-cluster clients read the token, CA and namespace.
pub const MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The ConfigMap with the cluster's CA in every namespace.
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";
/// The lifetime the kubelet asks for (an hour plus a little, as upstream).
const TOKEN_SECONDS: i64 = 3607;

/// Applies the admission to `pod`, about to be created.
pub async fn admit(state: &ApiState, pod: &mut Value) -> ApiResult<()> {
    let ns = object::meta_str(pod, "namespace")
        .unwrap_or("default")
        .to_string();
    let pod_name = object::meta_str(pod, "name").unwrap_or("").to_string();
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    let name = match spec.get("serviceAccountName").and_then(Value::as_str) {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => match spec.get("serviceAccount").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => "default".to_string(),
        },
    };
    spec.insert("serviceAccountName".into(), json!(name));
    spec.insert("serviceAccount".into(), json!(name));
    let account = stored_core(state, "ServiceAccount", &ns, &name).await?;
    if account.is_none() && name != "default" {
        return Err(ApiError::forbidden(format!(
            "pods \"{pod_name}\" is forbidden: error looking up service account {ns}/{name}: serviceaccount \"{name}\" not found"
        )));
    }
    let automount = spec
        .get("automountServiceAccountToken")
        .and_then(Value::as_bool)
        .or_else(|| account.as_ref()?["automountServiceAccountToken"].as_bool())
        .unwrap_or(true);
    if automount {
        add_token_volume(spec);
    }
    Ok(())
}

/// Adds the projected volume and mounts it in every container that does
/// not already mount something at [`MOUNT_PATH`].
fn add_token_volume(spec: &mut serde_json::Map<String, Value>) {
    let mounts_it = |c: &Value| {
        c["volumeMounts"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["mountPath"] == MOUNT_PATH))
    };
    let lists = ["initContainers", "containers", "ephemeralContainers"];
    let needs: bool = lists.iter().any(|l| {
        spec.get(*l)
            .and_then(Value::as_array)
            .is_some_and(|cs| cs.iter().any(|c| !mounts_it(c)))
    });
    if !needs {
        return;
    }
    let taken: Vec<String> = spec
        .get("volumes")
        .and_then(Value::as_array)
        .map(|v| {
            v.iter()
                .filter_map(|v| v["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let volume_name = loop {
        let n = object::generate_name("kube-api-access-");
        if !taken.contains(&n) {
            break n;
        }
    };
    let volumes = spec.entry("volumes").or_insert_with(|| json!([]));
    if !volumes.is_array() {
        *volumes = json!([]);
    }
    volumes.as_array_mut().expect("array").push(json!({
        "name": volume_name,
        "projected": {
            "defaultMode": 0o644,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": TOKEN_SECONDS, "path": "token"}},
                {"configMap": {"name": ROOT_CA_CONFIG_MAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ],
        },
    }));
    for l in lists {
        let Some(cs) = spec.get_mut(l).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in cs.iter_mut().filter(|c| !mounts_it(c)) {
            let Some(c) = c.as_object_mut() else { continue };
            let mounts = c.entry("volumeMounts").or_insert_with(|| json!([]));
            if !mounts.is_array() {
                *mounts = json!([]);
            }
            mounts.as_array_mut().expect("array").push(json!({
                "name": volume_name,
                "mountPath": MOUNT_PATH,
                "readOnly": true,
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_container_mounts_one_projected_token_volume() {
        let mut pod = json!({"spec": {
            "initContainers": [{"name": "i", "image": "x"}],
            "containers": [
                {"name": "a", "image": "x"},
                {"name": "b", "image": "x", "volumeMounts": [{"name": "own", "mountPath": MOUNT_PATH}]},
            ],
            "volumes": [{"name": "own", "emptyDir": {}}],
        }});
        add_token_volume(pod["spec"].as_object_mut().unwrap());
        let volumes = pod["spec"]["volumes"].as_array().unwrap();
        assert_eq!(volumes.len(), 2);
        let name = volumes[1]["name"].as_str().unwrap();
        assert!(name.starts_with("kube-api-access-") && name.len() == 21);
        let sources = &volumes[1]["projected"]["sources"];
        assert_eq!(sources[0]["serviceAccountToken"]["path"], "token");
        assert_eq!(sources[1]["configMap"]["name"], ROOT_CA_CONFIG_MAP);
        assert_eq!(
            sources[2]["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"],
            "metadata.namespace"
        );
        let mount = |l: &str, i: usize| pod["spec"][l][i]["volumeMounts"].clone();
        assert_eq!(mount("initContainers", 0)[0]["name"], name);
        assert_eq!(mount("containers", 0)[0]["mountPath"], MOUNT_PATH);
        assert_eq!(mount("containers", 0)[0]["readOnly"], true);
        // The container with its own mount there keeps only that one.
        assert_eq!(mount("containers", 1).as_array().unwrap().len(), 1);
    }
}
