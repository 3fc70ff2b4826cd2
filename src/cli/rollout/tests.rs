//! `rollout` for deployments: status messages, history, undo.

use super::*;
use crate::cli::replica_sets::POD_TEMPLATE_HASH;

fn deployment(generation: i64, status: Value) -> Value {
    json!({"metadata": {"name": "web", "generation": generation,
                        "annotations": {REVISION: "2", CHANGE_CAUSE: "now",
                            "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
           "spec": {"replicas": 3, "template": {"metadata": {"labels": {"app": "web"}},
               "spec": {"containers": [{"name": "web", "image": "web:2"}]}}},
           "status": status})
}

fn message(d: &Value) -> String {
    status_message(d, 0).unwrap().0
}

#[test]
fn status_lines_follow_kubectl() {
    let d = deployment(2, json!({"observedGeneration": 1}));
    assert_eq!(
        message(&d),
        "Waiting for deployment spec update to be observed..."
    );
    let d = deployment(
        2,
        json!({"observedGeneration": 2, "replicas": 4, "updatedReplicas": 3, "availableReplicas": 3}),
    );
    assert_eq!(
        message(&d),
        "Waiting for deployment \"web\" rollout to finish: 1 old replicas are pending termination..."
    );
    let d = deployment(
        2,
        json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 3}),
    );
    assert_eq!(
        status_message(&d, 0).unwrap(),
        (
            "deployment \"web\" successfully rolled out".to_string(),
            true
        )
    );
    let e = status_message(&d, 5).unwrap_err().to_string();
    assert_eq!(
        e,
        "desired revision (5) is different from the running revision (2)"
    );
    let d = deployment(
        2,
        json!({"observedGeneration": 2, "conditions": [
            {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]}),
    );
    assert_eq!(
        status_message(&d, 0).unwrap_err().to_string(),
        "deployment \"web\" exceeded its progress deadline"
    );
}

fn rs(revision: i64, image: &str, cause: Option<&str>) -> Value {
    let mut rs = json!({"metadata": {"name": format!("web-{revision}"),
            "annotations": {REVISION: revision.to_string()}},
        "spec": {"template": {"metadata": {"labels": {"app": "web", POD_TEMPLATE_HASH: "h"}},
            "spec": {"containers": [{"name": "web", "image": image}]}}}});
    if let Some(c) = cause {
        rs["metadata"]["annotations"][CHANGE_CAUSE] = json!(c);
    }
    rs
}

#[test]
fn undo_picks_the_second_newest_revision_and_restores_its_template() {
    let d = deployment(2, json!({}));
    let sets = vec![
        rs(1, "web:1", Some("first")),
        rs(3, "web:2", None),
        rs(2, "web:x", None),
    ];
    let target = rollback_target(&d, &sets, 0).unwrap();
    assert_eq!(revision_of(&target), Some(2));
    let target = rollback_target(&d, &sets, 1).unwrap();
    let patch = rollback_patch(&d, &target).unwrap();
    assert_eq!(
        patch[0]["value"]["metadata"]["labels"],
        json!({"app": "web"})
    );
    assert_eq!(patch[0]["value"]["spec"]["containers"][0]["image"], "web:1");
    // The deployment's own bookkeeping stays; the set's change-cause comes along.
    assert_eq!(
        patch[1]["value"],
        json!({REVISION: "2", CHANGE_CAUSE: "first",
               "kubectl.kubernetes.io/last-applied-configuration": "{}"})
    );
    // Revision 3 has the deployment's template: nothing to do.
    assert!(rollback_patch(&d, &rollback_target(&d, &sets, 3).unwrap()).is_none());
    assert_eq!(
        rollback_target(&d, &sets, 9).unwrap_err().to_string(),
        "unable to find specified revision 9 in history"
    );
    assert!(rollback_target(&d, &sets[..1], 0).is_err());
}

#[test]
fn history_is_sorted_with_none_for_no_cause() {
    let sets = vec![
        rs(3, "a", Some("third")),
        rs(1, "b", None),
        rs(2, "c", Some("")),
    ];
    assert_eq!(
        history_table(&sets),
        "REVISION  CHANGE-CAUSE\n1         <none>\n2         <none>\n3         third\n"
    );
}
