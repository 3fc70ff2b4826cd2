//! Upstream's rules for ephemeral containers, one case each.

use serde_json::{json, Value};

use crate::defaults::apply_defaults;
use crate::resources::by_name;
use crate::validation::{normalize, validate, validate_ephemeral_containers_update, FieldError};

fn stored(ephemeral: Value) -> Value {
    let res = by_name("pods").unwrap();
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "app", "image": "busybox:1"}],
                 "initContainers": [{"name": "setup", "image": "busybox:1"}],
                 "ephemeralContainers": ephemeral}});
    let mut pod = normalize(res, pod).unwrap();
    apply_defaults(res, &mut pod);
    pod
}

fn messages(errs: &[FieldError]) -> Vec<String> {
    errs.iter().map(FieldError::message).collect()
}

fn debugger(name: &str) -> Value {
    json!({"name": name, "image": "busybox:1", "targetContainerName": "app"})
}

#[test]
fn adding_one_is_allowed() {
    let old = stored(json!([]));
    let new = stored(json!([debugger("dbg")]));
    assert_eq!(
        messages(&validate_ephemeral_containers_update(&new, &old)),
        Vec::<String>::new()
    );
}

#[test]
fn existing_ones_may_not_be_removed_or_changed() {
    let old = stored(json!([debugger("a"), debugger("b")]));
    let mut changed = debugger("b");
    changed["image"] = json!("other:2");
    let new = stored(json!([changed]));
    let msgs = messages(&validate_ephemeral_containers_update(&new, &old));
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    assert!(msgs[0].starts_with(
        "spec.ephemeralContainers: Forbidden: existing ephemeral containers \"a\" may not be removed"
    ));
    assert!(msgs[1].starts_with(
        "spec.ephemeralContainers[b]: Forbidden: existing ephemeral containers \"b\" may not be changed"
    ));
}

#[test]
fn names_targets_and_workload_fields() {
    let old = stored(json!([]));
    let bad = json!([
        {"name": "app", "image": "busybox:1"},
        {"name": "x", "image": "busybox:1", "targetContainerName": "nope",
         "ports": [{"containerPort": 80}], "readinessProbe": {"exec": {"command": ["true"]}},
         "restartPolicy": "Always", "resources": {"limits": {"cpu": "1"}}},
    ]);
    let new = stored(bad);
    let msgs = messages(&validate_ephemeral_containers_update(&new, &old));
    for want in [
        "spec.ephemeralContainers[0].name: Duplicate value: \"app\"",
        "spec.ephemeralContainers[1].targetContainerName: Not found: \"nope\"",
        "spec.ephemeralContainers[1].ports: Forbidden: cannot be set for an Ephemeral Container",
        "spec.ephemeralContainers[1].resources: Forbidden: cannot be set for an Ephemeral Container",
        "spec.ephemeralContainers[1].readinessProbe: Forbidden: cannot be set for an Ephemeral Container",
        "spec.ephemeralContainers[1].restartPolicy: Forbidden: cannot be set for an Ephemeral Container",
    ] {
        assert!(msgs.iter().any(|m| m == want), "no {want:?} in {msgs:?}");
    }
    // An init container is a valid target; kubectl's empty `resources` is no resources.
    let new = stored(json!([{"name": "y", "image": "busybox:1",
        "targetContainerName": "setup", "resources": {}}]));
    assert_eq!(
        messages(&validate_ephemeral_containers_update(&new, &old)),
        Vec::<String>::new()
    );
}

#[test]
fn not_on_create_nor_through_a_regular_update() {
    let res = by_name("pods").unwrap();
    let pod = stored(json!([debugger("dbg")]));
    let msgs = messages(&validate(res, &pod, None));
    assert!(
        msgs.contains(&"spec.ephemeralContainers: Forbidden: cannot have ephemeral containers on Pod creation".to_string()),
        "{msgs:?}"
    );
    let old = stored(json!([]));
    let msgs = messages(&validate(res, &pod, Some(&old)));
    assert!(
        msgs.iter()
            .any(|m| m.starts_with("spec: Forbidden: pod updates may not change fields other than")),
        "{msgs:?}"
    );
}
