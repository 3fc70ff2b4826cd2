//! Unit tests of JSON merge, strategic merge and three-way patches.

use super::*;
use serde_json::json;

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default",
                      "labels": {"app": "nginx", "tier": "frontend"}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {
                "metadata": {"labels": {"app": "nginx"}},
                "spec": {
                    "containers": [
                        {"name": "nginx", "image": "nginx:1.7.9",
                         "ports": [{"containerPort": 80, "protocol": "TCP"}],
                         "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                        {"name": "sidecar", "image": "busybox", "args": ["sleep", "3600"]}
                    ]
                }
            }
        }
    })
}

fn containers(v: &Value) -> &Vec<Value> {
    v["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
}

#[test]
fn strategic_image_change_keeps_other_containers_and_fields() {
    let patch = json!({"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.9.1"}]}}}});
    let out = apply_strategic_merge_patch(&deployment(), &patch).unwrap();
    let cs = containers(&out);
    assert_eq!(cs.len(), 2);
    assert_eq!(cs[0]["name"], "nginx");
    assert_eq!(cs[0]["image"], "nginx:1.9.1");
    assert_eq!(cs[0]["ports"][0]["containerPort"], 80);
    assert_eq!(cs[0]["env"].as_array().unwrap().len(), 2);
    assert_eq!(cs[1]["name"], "sidecar");
    assert_eq!(out["spec"]["replicas"], 3);
}

#[test]
fn strategic_env_add_keeps_others_and_updates_by_name() {
    let patch = json!({"spec":{"template":{"spec":{"containers":[{"name":"nginx",
        "env":[{"name":"C","value":"3"},{"name":"A","value":"changed"}]}]}}}});
    let out = apply_strategic_merge_patch(&deployment(), &patch).unwrap();
    let env = containers(&out)[0]["env"].as_array().unwrap().clone();
    assert_eq!(
        env,
        vec![
            json!({"name":"A","value":"changed"}),
            json!({"name":"B","value":"2"}),
            json!({"name":"C","value":"3"}),
        ]
    );
}

#[test]
fn strategic_delete_directive_removes_one_container() {
    let patch =
        json!({"spec":{"template":{"spec":{"containers":[{"name":"sidecar","$patch":"delete"}]}}}});
    let out = apply_strategic_merge_patch(&deployment(), &patch).unwrap();
    let cs = containers(&out);
    assert_eq!(cs.len(), 1);
    assert_eq!(cs[0]["name"], "nginx");
    assert!(!out.to_string().contains("$patch"));
}

#[test]
fn strategic_set_element_order_reorders() {
    let patch = json!({"spec":{"template":{"spec":{
        "$setElementOrder/containers":[{"name":"sidecar"},{"name":"nginx"}],
        "containers":[{"name":"nginx","image":"nginx:2"}]}}}});
    let out = apply_strategic_merge_patch(&deployment(), &patch).unwrap();
    let names: Vec<&str> = containers(&out)
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["sidecar", "nginx"]);
    assert_eq!(containers(&out)[1]["image"], "nginx:2");
    assert!(!out.to_string().contains("$setElementOrder"));
}

#[test]
fn strategic_null_deletes_a_label() {
    let patch = json!({"metadata":{"labels":{"tier":null,"new":"x"}}});
    let out = apply_strategic_merge_patch(&deployment(), &patch).unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"app":"nginx","new":"x"}));
}

#[test]
fn strategic_replaces_primitive_lists_and_merges_finalizers() {
    let target = json!({"metadata":{"finalizers":["a","b"]},
        "spec":{"containers":[{"name":"c","args":["x","y"]}]}});
    let patch = json!({"metadata":{"finalizers":["c","a"]},
        "spec":{"containers":[{"name":"c","args":["z"]}]}});
    let out = apply_strategic_merge_patch(&target, &patch).unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["a", "b", "c"]));
    assert_eq!(out["spec"]["containers"][0]["args"], json!(["z"]));

    let patch = json!({"metadata":{"$deleteFromPrimitiveList/finalizers":["a"]}});
    let out = apply_strategic_merge_patch(&target, &patch).unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["b"]));
}

#[test]
fn strategic_ports_merge_by_container_port_or_service_port() {
    let svc =
        json!({"kind":"Service","spec":{"ports":[{"port":80,"targetPort":8080},{"port":443}]}});
    let patch = json!({"spec":{"ports":[{"port":80,"targetPort":9090}]}});
    let out = apply_strategic_merge_patch(&svc, &patch).unwrap();
    assert_eq!(
        out["spec"]["ports"],
        json!([{"port":80,"targetPort":9090},{"port":443}])
    );

    let patch = json!({"spec":{"template":{"spec":{"containers":[{"name":"nginx",
        "ports":[{"containerPort":443}]}]}}}});
    let out = apply_strategic_merge_patch(&deployment(), &patch).unwrap();
    assert_eq!(
        containers(&out)[0]["ports"],
        json!([{"containerPort":80,"protocol":"TCP"},{"containerPort":443}])
    );
}

#[test]
fn strategic_replace_and_retain_keys_directives() {
    let patch = json!({"spec":{"template":{"spec":{"containers":[
        {"$patch":"replace"},{"name":"only","image":"alpine"}]}}}});
    let out = apply_strategic_merge_patch(&deployment(), &patch).unwrap();
    assert_eq!(
        containers(&out),
        &vec![json!({"name":"only","image":"alpine"})]
    );

    let patch = json!({"metadata":{"labels":{"$patch":"replace","x":"y"}}});
    let out = apply_strategic_merge_patch(&deployment(), &patch).unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"x":"y"}));

    let target =
        json!({"spec":{"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":1}}}});
    let patch = json!({"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate"}}});
    let out = apply_strategic_merge_patch(&target, &patch).unwrap();
    assert_eq!(out["spec"]["strategy"], json!({"type":"Recreate"}));
}

#[test]
fn strategic_errors_name_the_path() {
    let err = apply_strategic_merge_patch(&deployment(), &json!([1])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the patch must be a JSON object, not a list"
    );

    let patch = json!({"spec":{"template":{"spec":{"containers":[{"image":"x"}]}}}});
    let err = apply_strategic_merge_patch(&deployment(), &patch).unwrap_err();
    assert_eq!(
        err.to_string(),
        "spec.template.spec.containers[0]: list element has no \"name\", the key this list merges on"
    );

    let patch = json!({"metadata":{"$patch":"explode"}});
    let err = apply_strategic_merge_patch(&deployment(), &patch).unwrap_err();
    assert!(err
        .to_string()
        .starts_with("metadata: unknown $patch directive"));
}

#[test]
fn merge_patch_replaces_the_containers_list() {
    let patch = json!({"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.9.1"}]}}},
                       "metadata":{"labels":{"tier":null}}});
    let out = apply_merge_patch(&deployment(), &patch).unwrap();
    assert_eq!(
        containers(&out),
        &vec![json!({"name":"nginx","image":"nginx:1.9.1"})]
    );
    assert_eq!(out["metadata"]["labels"], json!({"app":"nginx"}));
    assert!(apply_merge_patch(&deployment(), &json!("x")).is_err());
}

#[test]
fn json_patch_operations() {
    let patch = json!([
        {"op":"test","path":"/spec/replicas","value":3},
        {"op":"replace","path":"/spec/replicas","value":5},
        {"op":"add","path":"/metadata/labels/env","value":"prod"},
        {"op":"remove","path":"/spec/template/spec/containers/1"}
    ]);
    let out = apply_json_patch(&deployment(), &patch).unwrap();
    assert_eq!(out["spec"]["replicas"], 5);
    assert_eq!(out["metadata"]["labels"]["env"], "prod");
    assert_eq!(containers(&out).len(), 1);

    let failing = json!([
        {"op":"replace","path":"/spec/replicas","value":5},
        {"op":"test","path":"/spec/replicas","value":3}
    ]);
    let err = apply_json_patch(&deployment(), &failing).unwrap_err();
    assert_eq!(
        err.to_string(),
        "JSON patch operation 1 (test /spec/replicas) failed: the value there is not the one the test expects"
    );

    let missing = json!([{"op":"remove","path":"/spec/nothing"}]);
    let err = apply_json_patch(&deployment(), &missing).unwrap_err();
    assert!(err.to_string().contains("/spec/nothing"), "{err}");

    let err = apply_json_patch(&deployment(), &json!({"op":"add"})).unwrap_err();
    assert!(matches!(err, PatchError::InvalidJsonPatch(_)));
}

/// Applies `three_way` the way the server would and returns the result.
fn apply_three_way(original: Option<&Value>, modified: &Value, current: &Value) -> Value {
    let patch = three_way_strategic_patch(original, modified, current);
    apply_strategic_merge_patch(current, &patch).unwrap()
}

#[test]
fn three_way_removed_label_is_deleted_but_foreign_label_kept() {
    let original = deployment();
    let mut current = deployment();
    current["metadata"]["labels"]["added-by-server"] = json!("yes");
    current["metadata"]["uid"] = json!("1234");
    current["status"] = json!({"replicas": 3});
    let mut modified = deployment();
    modified["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("tier");

    let patch = three_way_strategic_patch(Some(&original), &modified, &current);
    assert_eq!(patch, json!({"metadata":{"labels":{"tier":null}}}));
    let out = apply_strategic_merge_patch(&current, &patch).unwrap();
    assert_eq!(
        out["metadata"]["labels"],
        json!({"app":"nginx","added-by-server":"yes"})
    );
    assert_eq!(out["status"]["replicas"], 3);
    assert_eq!(out["metadata"]["uid"], "1234");
}

#[test]
fn three_way_changes_replicas() {
    let original = deployment();
    let current = deployment();
    let mut modified = deployment();
    modified["spec"]["replicas"] = json!(5);
    let patch = three_way_strategic_patch(Some(&original), &modified, &current);
    assert_eq!(patch, json!({"spec":{"replicas":5}}));
}

#[test]
fn three_way_unchanged_manifest_is_empty_patch() {
    let original = deployment();
    let mut current = deployment();
    // Server-side defaults and status do not count as changes.
    current["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = json!("IfNotPresent");
    current["spec"]["revisionHistoryLimit"] = json!(10);
    current["status"] = json!({"replicas": 3});
    let patch = three_way_strategic_patch(Some(&original), &deployment(), &current);
    assert_eq!(patch, json!({}));
    let patch = three_way_strategic_patch(None, &deployment(), &current);
    assert_eq!(patch, json!({}));
}

#[test]
fn three_way_container_edits() {
    let original = deployment();
    let mut current = deployment();
    current["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = json!("IfNotPresent");
    let mut modified = deployment();
    {
        let cs = modified["spec"]["template"]["spec"]["containers"]
            .as_array_mut()
            .unwrap();
        cs.remove(1); // drop the sidecar
        cs[0]["image"] = json!("nginx:1.9.1");
        cs[0]["env"].as_array_mut().unwrap().remove(0); // drop env A
    }
    let out = apply_three_way(Some(&original), &modified, &current);
    let cs = containers(&out);
    assert_eq!(cs.len(), 1);
    assert_eq!(cs[0]["image"], "nginx:1.9.1");
    assert_eq!(cs[0]["imagePullPolicy"], "IfNotPresent");
    assert_eq!(cs[0]["env"], json!([{"name":"B","value":"2"}]));

    let patch = three_way_strategic_patch(Some(&original), &modified, &current);
    assert_eq!(
        patch["spec"]["template"]["spec"]["$setElementOrder/containers"],
        json!([{"name":"nginx"}])
    );
}

#[test]
fn three_way_switching_union_members_drops_the_old_one() {
    let mut original = deployment();
    original["spec"]["template"]["spec"]["volumes"] =
        json!([{"name":"data","hostPath":{"path":"/srv"}}]);
    let mut current = original.clone();
    current["spec"]["strategy"] =
        json!({"type":"RollingUpdate","rollingUpdate":{"maxSurge":"25%","maxUnavailable":"25%"}});
    current["spec"]["template"]["spec"]["volumes"][0]["hostPath"]["type"] = json!("");
    let mut modified = original.clone();
    modified["spec"]["strategy"] = json!({"type":"Recreate"});
    modified["spec"]["template"]["spec"]["volumes"] = json!([{"name":"data","emptyDir":{}}]);

    let out = apply_three_way(Some(&original), &modified, &current);
    assert_eq!(out["spec"]["strategy"], json!({"type":"Recreate"}));
    assert_eq!(
        out["spec"]["template"]["spec"]["volumes"],
        json!([{"name":"data","emptyDir":{}}])
    );
    assert!(!out.to_string().contains('$'));
}

#[test]
fn three_way_first_apply_adds_without_deleting() {
    let mut current = deployment();
    current["metadata"]["annotations"] = json!({"other": "client"});
    let mut modified = deployment();
    modified["metadata"]["labels"]["new"] = json!("x");
    let out = apply_three_way(None, &modified, &current);
    assert_eq!(out["metadata"]["labels"]["new"], "x");
    assert_eq!(out["metadata"]["labels"]["tier"], "frontend");
    assert_eq!(out["metadata"]["annotations"]["other"], "client");
}

#[test]
fn webhook_configurations_merge_webhooks_by_name() {
    let target = json!({"webhooks": [
        {"name": "a.example.com", "sideEffects": "None", "failurePolicy": "Fail"},
        {"name": "b.example.com", "sideEffects": "None"}]});
    let patch = json!({"webhooks": [{"name": "a.example.com", "failurePolicy": "Ignore"}]});
    let out = super::strategic::apply_strategic_merge_patch(&target, &patch).unwrap();
    assert_eq!(
        out["webhooks"],
        json!([{"name": "a.example.com", "sideEffects": "None", "failurePolicy": "Ignore"},
               {"name": "b.example.com", "sideEffects": "None"}])
    );
}
