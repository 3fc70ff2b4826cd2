//! CertificateSigningRequests, as upstream's csr strategies: the spec
//! is fixed at create (an update keeps the stored one; the requester's
//! identity in it is admission's, see `admission::certificates`); a new
//! request starts with no status. A `status` write keeps the stored
//! Approved/Denied conditions when it carries as many of them (more or
//! fewer is refused by admission); an `approval` write changes only the
//! conditions. Conditions get upstream's defaults: status `True`,
//! `lastUpdateTime` now, `lastTransitionTime` kept while the status
//! stays, else now.

use bosun::time::now_rfc3339;
use serde_json::Value;

use super::Strategy;

pub struct CertificateSigningRequestStrategy;

impl Strategy for CertificateSigningRequestStrategy {
    fn prepare_for_update(&self, current: &Value, next: &mut Value) {
        match current.get("spec") {
            Some(spec) => next["spec"] = spec.clone(),
            None => {
                if let Some(o) = next.as_object_mut() {
                    o.remove("spec");
                }
            }
        }
    }

    fn prepare_for_subresource_update(&self, sub: &str, current: &Value, next: &mut Value) {
        if sub == "status" {
            for t in ["Approved", "Denied"] {
                preserve_condition_instances(next, current, t);
            }
        }
        populate_condition_timestamps(next, current, &now_rfc3339());
    }
}

fn conditions(obj: &Value) -> Vec<Value> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn type_of(c: &Value) -> &str {
    c.get("type").and_then(Value::as_str).unwrap_or_default()
}

/// Upstream's preserveConditionInstances: with as many conditions of
/// type `t` as before, they are the stored ones.
fn preserve_condition_instances(next: &mut Value, current: &Value, t: &str) {
    let old: Vec<Value> = conditions(current)
        .into_iter()
        .filter(|c| type_of(c) == t)
        .collect();
    let mut new = conditions(next);
    if new.iter().filter(|c| type_of(c) == t).count() != old.len() {
        return;
    }
    new.retain(|c| type_of(c) != t);
    new.extend(old);
    if !new.is_empty() {
        next["status"]["conditions"] = Value::Array(new);
    }
}

/// Defaults a condition's status to True and fills its times.
fn populate_condition_timestamps(next: &mut Value, current: &Value, now: &str) {
    let old = conditions(current);
    let mut new = conditions(next);
    if new.is_empty() {
        return;
    }
    for c in new.iter_mut() {
        let Some(m) = c.as_object_mut() else { continue };
        let status = m
            .get("status")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or("True")
            .to_string();
        m.insert("status".into(), Value::from(status.as_str()));
        let empty = |v: Option<&Value>| v.and_then(Value::as_str).is_none_or(str::is_empty);
        if empty(m.get("lastUpdateTime")) {
            m.insert("lastUpdateTime".into(), now.into());
        }
        if empty(m.get("lastTransitionTime")) {
            let kind = m.get("type").and_then(Value::as_str).unwrap_or_default();
            let kept = old
                .iter()
                .find(|o| {
                    type_of(o) == kind && o.get("status").and_then(Value::as_str) == Some(&status)
                })
                .and_then(|o| o.get("lastTransitionTime").cloned())
                .filter(|t| !t.is_null());
            m.insert(
                "lastTransitionTime".into(),
                kept.unwrap_or_else(|| now.into()),
            );
        }
    }
    next["status"]["conditions"] = Value::Array(new);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_status_write_keeps_the_stored_approval() {
        let current = json!({"spec": {"signerName": "a.b/c"}, "status": {"conditions": [
            {"type": "Approved", "status": "True", "reason": "R", "lastUpdateTime": "t0",
             "lastTransitionTime": "t0"}]}});
        let mut next = json!({"spec": {"signerName": "x.y/z"}, "status": {"conditions": [
            {"type": "Approved", "status": "True", "reason": "Changed"},
            {"type": "Failed", "status": "True"}]}});
        let s = CertificateSigningRequestStrategy;
        s.prepare_for_subresource_update("status", &current, &mut next);
        let conds = next["status"]["conditions"].as_array().unwrap();
        assert_eq!(conds[1]["reason"], "R");
        assert_eq!(conds[1]["lastTransitionTime"], "t0");
        assert!(conds[0]["lastUpdateTime"]
            .as_str()
            .is_some_and(|t| t != "t0"));
        s.prepare_for_update(&current, &mut next);
        assert_eq!(next["spec"]["signerName"], "a.b/c");
    }

    #[test]
    fn an_approval_defaults_to_true_with_times() {
        let mut next = json!({"status": {"conditions": [{"type": "Approved", "reason": "R"}]}});
        populate_condition_timestamps(&mut next, &json!({}), "now");
        assert_eq!(
            next["status"]["conditions"][0],
            json!({"type": "Approved", "reason": "R", "status": "True",
                   "lastUpdateTime": "now", "lastTransitionTime": "now"})
        );
    }
}
