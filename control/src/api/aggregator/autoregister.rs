//! bosun's own group versions as Local APIServices, as kube-apiserver's
//! autoregister controller makes them (`v1.`, `v1.apps`, ...): written at
//! every start with upstream's priorities, the label
//! `kube-aggregator.kubernetes.io/automanaged: onstart` and
//! `Available=True` (`Local`), so whatever a user changed is set back.
//! `metrics.k8s.io/v1beta1` is the one exception: bosun serves it without
//! an APIService, as a cluster without metrics-server has none, so that
//! applying metrics-server's bundle creates `v1beta1.metrics.k8s.io`
//! (with its service), which then takes the group version over; deleting
//! it gives bosun's own metrics back.

use serde_json::{json, Value};

use super::PREFIX;
use crate::store::{Store, StoreError};

/// The label upstream marks its automanaged APIServices with.
pub const AUTOMANAGED_LABEL: &str = "kube-aggregator.kubernetes.io/automanaged";

/// The group versions bosun serves until a user registers an APIService
/// for them, with no Local APIService of their own.
const REPLACEABLE: &[(&str, &str)] = &[("metrics.k8s.io", "v1beta1")];

/// Upstream's `groupPriorityMinimum` and `versionPriority` of a built-in
/// group version (kube-apiserver's `apiVersionPriorities`); others get
/// the lowest built-in group's.
fn priorities(group: &str, version: &str) -> (i64, i64) {
    match (group, version) {
        ("", _) => (18000, 1),
        ("apiregistration.k8s.io", _) => (18000, 15),
        ("apps", _) => (17800, 15),
        ("authentication.k8s.io", _) => (17700, 15),
        ("authorization.k8s.io", _) => (17600, 15),
        ("autoscaling", "v1") => (17500, 15),
        ("autoscaling", "v2") => (17500, 30),
        ("autoscaling", _) => (17500, 9),
        ("batch", _) => (17400, 15),
        ("networking.k8s.io", _) => (17200, 15),
        ("policy", _) => (17100, 15),
        ("rbac.authorization.k8s.io", _) => (17000, 15),
        ("storage.k8s.io", _) => (16800, 15),
        ("scheduling.k8s.io", _) => (16600, 15),
        ("coordination.k8s.io", _) => (16500, 15),
        ("discovery.k8s.io", _) => (16200, 15),
        // metrics-server registers 100/100.
        ("metrics.k8s.io", _) => (100, 100),
        _ => (16000, 15),
    }
}

/// Every group version bosun registers as Local: the core `v1`, then
/// each group's versions (but the replaceable ones).
pub fn local_group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out = vec![("", "v1")];
    for (group, versions) in bosun::resources::groups() {
        out.extend(versions.into_iter().map(|v| (group, v)));
    }
    out.retain(|gv| !REPLACEABLE.contains(gv));
    out
}

/// The Local APIService of `group`/`version`, as of `now`.
pub fn local_api_service(group: &str, version: &str, now: &str) -> Value {
    let (group_min, version_priority) = priorities(group, version);
    json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {
            "name": format!("{version}.{group}"),
            "labels": {AUTOMANAGED_LABEL: "onstart"},
        },
        "spec": {
            "group": group,
            "version": version,
            "groupPriorityMinimum": group_min,
            "versionPriority": version_priority,
        },
        "status": {"conditions": [{
            "type": "Available",
            "status": "True",
            "lastTransitionTime": now,
            "reason": "Local",
            "message": "Local APIServices are always available",
        }]},
    })
}

/// Writes the Local APIServices: creates the missing ones and sets the
/// others back to their Local form (keeping uid, creation time and
/// labels a user added).
pub async fn register(store: &dyn Store) -> anyhow::Result<()> {
    let now = bosun::time::now_rfc3339();
    for (group, version) in local_group_versions() {
        let want = local_api_service(group, version, &now);
        let key = format!("{PREFIX}{version}.{group}");
        loop {
            let existing = store.get(&key).await?;
            let result = match existing {
                None => {
                    let mut obj = want.clone();
                    obj["metadata"]["uid"] = json!(uuid::Uuid::new_v4().to_string());
                    obj["metadata"]["creationTimestamp"] = json!(now);
                    store.create(&key, serde_json::to_vec(&obj)?).await
                }
                Some(kv) => {
                    let current: Value = serde_json::from_slice(&kv.value[..])?;
                    let Some(next) = reset(&current, &want) else {
                        break;
                    };
                    store
                        .update(&key, kv.mod_revision, serde_json::to_vec(&next)?)
                        .await
                }
            };
            match result {
                Ok(_) => break,
                Err(StoreError::AlreadyExists(_) | StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}

/// `current` set back to `want`'s spec, label and condition, or None when
/// it already is (its condition's time kept).
fn reset(current: &Value, want: &Value) -> Option<Value> {
    let mut next = current.clone();
    next["spec"] = want["spec"].clone();
    if !next["metadata"]["labels"].is_object() {
        next["metadata"]["labels"] = json!({});
    }
    next["metadata"]["labels"][AUTOMANAGED_LABEL] = json!("onstart");
    let available = current["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Available");
    let same_condition = available.is_some_and(|c| {
        c["status"] == "True"
            && c["reason"] == "Local"
            && c["message"] == want["status"]["conditions"][0]["message"]
    });
    if !same_condition {
        next["status"] = want["status"].clone();
    }
    // A bare key: stored objects carry no resourceVersion.
    if let Some(meta) = next["metadata"].as_object_mut() {
        meta.remove("resourceVersion");
    }
    (next != *current).then_some(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_group_version_is_local_with_upstream_names() {
        let all = local_group_versions();
        assert_eq!(all[0], ("", "v1"));
        assert!(all.contains(&("apps", "v1")));
        assert!(all.contains(&("apiregistration.k8s.io", "v1")));
        assert!(!all.contains(&("metrics.k8s.io", "v1beta1")));
        let core = local_api_service("", "v1", "2026-01-01T00:00:00Z");
        assert_eq!(core["metadata"]["name"], "v1.");
        assert!(core["spec"].get("service").is_none());
        let mut errs = Vec::new();
        for (g, v) in all {
            let obj = local_api_service(g, v, "2026-01-01T00:00:00Z");
            let res = bosun::resources::by_name("apiservices").unwrap();
            errs.extend(bosun::validation::validate(res, &obj, None));
        }
        assert!(errs.is_empty(), "{errs:?}");
    }

    #[test]
    fn a_changed_local_service_is_set_back_and_an_unchanged_one_left() {
        let want = local_api_service("apps", "v1", "2026-01-01T00:00:00Z");
        let mut changed = want.clone();
        changed["spec"]["versionPriority"] = json!(1);
        changed["status"] = json!({});
        let fixed = reset(&changed, &want).unwrap();
        assert_eq!(fixed["spec"], want["spec"]);
        assert_eq!(fixed["status"]["conditions"][0]["reason"], "Local");
        let mut later = want.clone();
        later["status"]["conditions"][0]["lastTransitionTime"] = json!("2027-01-01T00:00:00Z");
        assert!(reset(&want, &later).is_none());
    }
}
