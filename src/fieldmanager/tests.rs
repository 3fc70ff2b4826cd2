use serde_json::{json, Value};

use super::fieldset::{display, FieldSet};
use super::managed::{self, Actor, Entry, Scope, APPLY, UPDATE};
use super::walk;
use super::{
    manager_of_user_agent, user_agent, KUBELET, KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER,
    MAX_MANAGER_LEN,
};

const MAIN: Scope = Scope::Main { has_status: true };

fn actor(manager: &str, operation: &'static str) -> Actor {
    Actor {
        manager: manager.into(),
        operation,
        api_version: "apps/v1".into(),
        subresource: String::new(),
    }
}

fn deployment(replicas: i64, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                {"name": "web", "image": image, "ports": [{"containerPort": 80}],
                 "args": ["-v"]}
            ]}}
        }
    })
}

fn paths(set: &FieldSet) -> Vec<String> {
    set.paths().iter().map(|p| display(p)).collect()
}

#[test]
fn fields_v1_round_trips_and_marks_members_with_children() {
    let v = json!({
        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
        "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}}}},
        "f:finalizers": {"v:\"a\"": {}},
        "f:args": {"i:0": {}}
    });
    let set = FieldSet::from_fields_v1(&v).unwrap();
    assert_eq!(set.to_fields_v1(), v);
    assert!(set.has(&["f:metadata".into(), "f:labels".into()]));
    assert!(!set.has(&["f:metadata".into()]));
    assert_eq!(
        paths(&set),
        [
            ".args[0]".to_string(),
            ".finalizers[=\"a\"]".into(),
            ".metadata.labels".into(),
            ".metadata.labels.app".into(),
            ".spec.containers[name=\"web\"]".into(),
            ".spec.containers[name=\"web\"].image".into(),
        ]
    );
    let err = FieldSet::from_fields_v1(&json!({"x:bad": {}})).unwrap_err();
    assert!(err.contains("x:bad"), "{err}");
}

#[test]
fn set_operations() {
    let a = FieldSet::from_fields_v1(&json!({"f:a": {}, "f:b": {".": {}, "f:c": {}}})).unwrap();
    let b = FieldSet::from_fields_v1(&json!({"f:b": {"f:c": {}, "f:d": {}}})).unwrap();
    assert_eq!(paths(&a.clone().union(&b)), [".a", ".b", ".b.c", ".b.d"]);
    assert_eq!(paths(&a.difference(&b)), [".a", ".b"]);
    assert_eq!(paths(&a.intersection(&b)), [".b.c"]);
    assert_eq!(paths(&a.not_mentioned_in(&b)), [".a"]);
    assert!(a.difference(&a).is_empty());
}

#[test]
fn applied_fields_follow_list_map_keys_and_atomic_types() {
    let set = managed::strip(walk::fields_of(&deployment(2, "web:1")), MAIN);
    let got = paths(&set);
    assert!(got.contains(&".spec.replicas".to_string()), "{got:?}");
    // Label selectors are atomic: owned as a whole, nothing below.
    assert!(got.contains(&".spec.selector".to_string()), "{got:?}");
    assert!(!got.iter().any(|p| p.starts_with(".spec.selector.")));
    let c = ".spec.template.spec.containers[name=\"web\"]";
    // Container ports are keyed by port and protocol, protocol defaulted.
    assert!(
        got.contains(&format!("{c}.ports[containerPort=80,protocol=\"TCP\"]")),
        "{got:?}"
    );
    // args is atomic.
    assert!(got.contains(&format!("{c}.args")), "{got:?}");
    assert!(!got.iter().any(|p| p.starts_with(&format!("{c}.args["))));
    // Server metadata belongs to nobody; plain objects are not members.
    assert!(!got
        .iter()
        .any(|p| p.starts_with(".metadata.name") || p == ".apiVersion"));
    assert!(!got.contains(&".spec".to_string()));
    let fv1 = set.to_fields_v1();
    assert_eq!(
        fv1["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"web\"}"]["."],
        json!({})
    );
}

#[test]
fn merge_keeps_live_fields_and_merges_list_maps_by_key() {
    let mut live = deployment(3, "web:1");
    live["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "side", "image": "side:1"}));
    live["spec"]["paused"] = json!(true);
    let config = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "web", "image": "web:2"}]}}}});
    let out = walk::merge(&live, &config);
    let cs = &out["spec"]["template"]["spec"]["containers"];
    assert_eq!(cs[0]["image"], "web:2");
    assert_eq!(cs[0]["args"], json!(["-v"]), "fields not applied stay");
    assert_eq!(cs[1]["name"], "side");
    assert_eq!(out["spec"]["paused"], true);
    assert_eq!(out["spec"]["replicas"], 3);
}

#[test]
fn compare_reports_added_modified_removed() {
    let old = deployment(1, "web:1");
    let mut new = deployment(2, "web:1");
    new["metadata"]["labels"]["tier"] = json!("front");
    new["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("args");
    let c = walk::compare(&old, &new);
    assert_eq!(paths(&c.modified), [".spec.replicas"]);
    assert_eq!(paths(&c.added), [".metadata.labels.tier"]);
    assert_eq!(
        paths(&c.removed),
        [".spec.template.spec.containers[name=\"web\"].args"]
    );
    assert!(walk::compare(&old, &old).is_same());
}

fn apply_as(
    live: &Value,
    entries: &[Entry],
    config: &Value,
    who: &str,
    force: bool,
) -> Result<managed::Applied, Vec<managed::Conflict>> {
    managed::apply(
        live,
        entries,
        config,
        &actor(who, APPLY),
        MAIN,
        force,
        "2026-01-01T00:00:00Z",
    )
}

#[test]
fn apply_conflicts_with_other_managers_unless_forced() {
    let first = apply_as(&json!({}), &[], &deployment(1, "web:1"), "alice", false).unwrap();
    assert_eq!(first.entries.len(), 1);
    // The same configuration again changes nothing.
    let again = apply_as(
        &first.object,
        &first.entries,
        &deployment(1, "web:1"),
        "alice",
        false,
    )
    .unwrap();
    assert_eq!(again.object, first.object);
    assert_eq!(again.entries, first.entries);
    // Bob applying the same value shares it; a different value conflicts.
    let bob_same = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"}, "spec": {"replicas": 1}});
    let shared = apply_as(&first.object, &first.entries, &bob_same, "bob", false).unwrap();
    assert_eq!(shared.entries.len(), 2);
    let bob = json!({"metadata": {"name": "web"}, "spec": {"replicas": 5}});
    let conflicts = apply_as(&first.object, &first.entries, &bob, "bob", false).unwrap_err();
    assert_eq!(conflicts.len(), 1);
    assert_eq!(conflicts[0].manager, "alice");
    assert_eq!(conflicts[0].paths, [".spec.replicas"]);
    assert_eq!(
        managed::conflicts_message(&conflicts),
        "Apply failed with 1 conflict: conflict with \"alice\" using apps/v1: .spec.replicas"
    );
    // Forcing takes the field over.
    let forced = apply_as(&first.object, &first.entries, &bob, "bob", true).unwrap();
    assert_eq!(forced.object["spec"]["replicas"], 5);
    let alice = forced
        .entries
        .iter()
        .find(|e| e.manager == "alice")
        .unwrap();
    assert!(!alice.fields.has(&["f:spec".into(), "f:replicas".into()]));
    let bob = forced.entries.iter().find(|e| e.manager == "bob").unwrap();
    assert!(bob.fields.has(&["f:spec".into(), "f:replicas".into()]));
}

#[test]
fn apply_removes_fields_the_manager_stopped_applying_unless_others_hold_them() {
    let mut cfg = deployment(1, "web:1");
    cfg["metadata"]["labels"]["tier"] = json!("front");
    cfg["metadata"]["annotations"] = json!({"note": "x"});
    let first = apply_as(&json!({}), &[], &cfg, "alice", false).unwrap();
    // Bob shares the annotation.
    let bob = json!({"metadata": {"name": "web", "annotations": {"note": "x"}}});
    let shared = apply_as(&first.object, &first.entries, &bob, "bob", false).unwrap();
    let next = apply_as(
        &shared.object,
        &shared.entries,
        &deployment(1, "web:1"),
        "alice",
        false,
    )
    .unwrap();
    assert!(next.object["metadata"]["labels"].get("tier").is_none());
    assert_eq!(next.object["metadata"]["labels"]["app"], "web");
    assert_eq!(
        next.object["metadata"]["annotations"]["note"], "x",
        "bob holds it"
    );
}

#[test]
fn updates_take_changed_fields_from_other_managers() {
    let first = apply_as(&json!({}), &[], &deployment(1, "web:1"), "alice", false).unwrap();
    let mut entries = first.entries.clone();
    let mut scaled = first.object.clone();
    scaled["spec"]["replicas"] = json!(4);
    managed::record_update(
        &mut entries,
        &actor("kubectl-scale", UPDATE),
        &first.object,
        &scaled,
        MAIN,
        "2026-01-01T00:00:01Z",
    );
    let scaler = entries
        .iter()
        .find(|e| e.manager == "kubectl-scale")
        .unwrap();
    assert_eq!(paths(&scaler.fields), [".spec.replicas"]);
    assert_eq!(scaler.operation, "Update");
    let alice = entries.iter().find(|e| e.manager == "alice").unwrap();
    assert!(!alice.fields.has(&["f:spec".into(), "f:replicas".into()]));
    // A write that changes nothing records nothing.
    let before = entries.clone();
    managed::record_update(
        &mut entries,
        &actor("other", UPDATE),
        &scaled,
        &scaled,
        MAIN,
        "2026-01-01T00:00:02Z",
    );
    assert_eq!(entries, before);
    // The list survives its JSON form.
    let decoded = managed::decode(Some(&managed::encode(&entries))).unwrap();
    assert_eq!(decoded.len(), entries.len());
    let bad = managed::decode(Some(&json!([{"manager": "m", "operation": "Mangle",
        "fieldsType": "FieldsV1", "fieldsV1": {}}])))
    .unwrap_err();
    assert!(bad.contains("managedFields[0].operation"), "{bad}");
}

#[test]
fn status_scope_owns_only_status() {
    let obj = json!({"spec": {"replicas": 1}, "status": {"replicas": 1}});
    let set = managed::strip(walk::fields_of(&obj), Scope::Status);
    assert_eq!(paths(&set), [".status.replicas"]);
    let set = managed::strip(walk::fields_of(&obj), MAIN);
    assert_eq!(paths(&set), [".spec.replicas"]);
}

#[test]
fn user_agents_name_their_component_as_the_manager() {
    for component in [KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER, KUBELET] {
        let agent = user_agent(component);
        assert!(agent.contains(" bosun/"), "{agent}");
        assert_eq!(manager_of_user_agent(&agent).as_deref(), Some(component));
    }
    assert_eq!(
        manager_of_user_agent("kubectl/v1.32.4 (linux/amd64) kubernetes/abc").as_deref(),
        Some("kubectl")
    );
    assert_eq!(manager_of_user_agent(""), None);
    assert_eq!(
        manager_of_user_agent(&"x".repeat(300)).unwrap().len(),
        MAX_MANAGER_LEN
    );
}
