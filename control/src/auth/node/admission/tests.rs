use super::*;
use serde_json::json;

fn node_obj(labels: Value, spec: Value) -> Value {
    json!({"metadata": {"name": "a", "labels": labels}, "spec": spec})
}

fn kubelet_labels() -> Value {
    json!({"kubernetes.io/hostname": "a", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"})
}

#[test]
fn the_cleanup_finalizer_is_the_provisioners() {
    assert_eq!(
        CLEANUP_FINALIZER,
        crate::controllers::volumebinding::CLEANUP_FINALIZER
    );
}

#[test]
fn only_nodes_are_restricted() {
    let pod_cidr = node_obj(json!({}), json!({"podCIDR": "0.0.0.0/1"}));
    assert_eq!(
        admit(&Identity::Admin, "Node", &[], None, &pod_cidr),
        Ok(())
    );
    assert!(admit(&Identity::Node("a".into()), "Node", &[], None, &pod_cidr).is_err());
    // Kinds without node rules pass here (the authorizer judged them).
    assert_eq!(
        admit(&Identity::Node("a".into()), "Pod", &[], None, &pod_cidr),
        Ok(())
    );
}

#[test]
fn a_node_registers_without_a_pod_cidr_and_with_kubelet_labels_only() {
    let bare = node_obj(kubelet_labels(), json!({}));
    assert_eq!(admit_node("a", None, &bare), Ok(()));
    // Taints at registration are the kubelet's --register-with-taints.
    let tainted = node_obj(
        kubelet_labels(),
        json!({"taints": [{"key": "k", "effect": "NoSchedule"}]}),
    );
    assert_eq!(admit_node("a", None, &tainted), Ok(()));
    for spec in [
        json!({"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"]}),
        json!({"podCIDRs": ["0.0.0.0/1"]}),
    ] {
        assert_eq!(
            admit_node("a", None, &node_obj(kubelet_labels(), spec)).unwrap_err(),
            "node \"a\" is not allowed to set spec.podCIDR: the control plane's node IPAM assigns it"
        );
    }
    let roles = node_obj(
        json!({"node-role.kubernetes.io/control-plane": "", "node-restriction.kubernetes.io/x": "y",
               "team.example.com/ok": "yes", "node.kubernetes.io/exclude-from-external-load-balancers": ""}),
        json!({}),
    );
    assert_eq!(
        admit_node("a", None, &roles).unwrap_err(),
        "node \"a\" is not allowed to set the following labels: node-restriction.kubernetes.io/x, node-role.kubernetes.io/control-plane"
    );
    let config = node_obj(json!({}), json!({"configSource": {"configMap": {}}}));
    assert!(admit_node("a", None, &config)
        .unwrap_err()
        .contains("non-nil configSource"));
}

#[test]
fn a_node_cannot_change_its_pod_cidr_taints_or_restricted_labels() {
    let assigned = json!({"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"],
        "taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]});
    let old = node_obj(kubelet_labels(), assigned.clone());
    // Rewriting what is there (the agent's registration patch) is no change.
    assert_eq!(admit_node("a", Some(&old), &old.clone()), Ok(()));
    let mut labelled = old.clone();
    labelled["metadata"]["labels"]["team.example.com/x"] = json!("1");
    labelled["metadata"]["labels"]["kubelet.kubernetes.io/y"] = json!("1");
    assert_eq!(admit_node("a", Some(&old), &labelled), Ok(()));
    let pod_cidr = "node \"a\" is not allowed to modify spec.podCIDR: the control plane's node IPAM assigns it";
    for (field, value) in [
        ("podCIDR", json!("0.0.0.0/1")),
        ("podCIDRs", json!(["10.244.2.0/24"])),
        ("podCIDR", Value::Null),
    ] {
        let mut new = old.clone();
        new["spec"][field] = value;
        assert_eq!(admit_node("a", Some(&old), &new).unwrap_err(), pod_cidr);
    }
    // Setting one where there is none is the IPAM's, not the node's.
    let unassigned = node_obj(kubelet_labels(), json!({}));
    let mut claims = unassigned.clone();
    claims["spec"]["podCIDR"] = json!("10.244.9.0/24");
    assert_eq!(
        admit_node("a", Some(&unassigned), &claims).unwrap_err(),
        pod_cidr
    );
    let mut untainted = old.clone();
    untainted["spec"]["taints"] = json!([]);
    assert_eq!(
        admit_node("a", Some(&old), &untainted).unwrap_err(),
        "node \"a\" is not allowed to modify taints"
    );
    // Missing and empty taints are the same.
    let none = node_obj(kubelet_labels(), json!({"taints": []}));
    assert_eq!(
        admit_node("a", Some(&none), &node_obj(kubelet_labels(), json!({}))),
        Ok(())
    );
    let mut role = old.clone();
    role["metadata"]["labels"]["node-role.kubernetes.io/master"] = json!("");
    assert_eq!(
        admit_node("a", Some(&old), &role).unwrap_err(),
        "is not allowed to modify labels: node-role.kubernetes.io/master"
    );
    // Removing a restricted label the admin set is a change too.
    let mut admin_set = old.clone();
    admin_set["metadata"]["labels"]["node-restriction.kubernetes.io/pci"] = json!("yes");
    assert!(admit_node("a", Some(&admin_set), &old).is_err());
}

fn volume(deleting: bool, finalizers: &[&str]) -> Value {
    let mut pv = json!({
        "metadata": {"name": "pv-1", "resourceVersion": "7", "finalizers": finalizers},
        "spec": {"hostPath": {"path": "/data/local-path/pv-1"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "kubernetes.io/hostname", "operator": "In", "values": ["a"]}]}]}}},
    });
    if deleting {
        pv["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    }
    pv
}

#[test]
fn a_node_may_only_let_its_deleted_local_volume_go() {
    let deleting = volume(true, &[CLEANUP_FINALIZER, "kubernetes.io/pv-protection"]);
    let released = volume(true, &["kubernetes.io/pv-protection"]);
    assert_eq!(admit_volume("a", Some(&deleting), &released), Ok(()));
    let refused = format!(
        "node \"a\" may only remove the {CLEANUP_FINALIZER} finalizer of a persistentvolume pinned to it that is being deleted"
    );
    // Not being deleted: the directory is still in use.
    let live = volume(false, &[CLEANUP_FINALIZER]);
    assert_eq!(
        admit_volume("a", Some(&live), &volume(false, &[])).unwrap_err(),
        refused
    );
    // The path or the affinity: never.
    let mut moved = released.clone();
    moved["spec"]["hostPath"]["path"] = json!("/etc");
    assert_eq!(
        admit_volume("a", Some(&deleting), &moved).unwrap_err(),
        refused
    );
    let mut repinned = volume(false, &[CLEANUP_FINALIZER]);
    repinned["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
        ["values"] = json!(["b"]);
    assert!(admit_volume("a", Some(&live), &repinned).is_err());
    // Another finalizer is not its to remove.
    let other = volume(true, &[CLEANUP_FINALIZER]);
    assert!(admit_volume("a", Some(&deleting), &other).is_err());
    assert!(admit_volume("a", None, &live).is_err());
}

#[test]
fn a_node_gets_tokens_only_bound_to_its_own_pods() {
    let pod = |node: &str| {
        json!({"metadata": {"name": "web-1", "namespace": "default", "uid": "u-1"},
               "spec": {"nodeName": node, "serviceAccountName": "web"}})
    };
    let bound = json!({"apiVersion": "v1", "kind": "Pod", "name": "web-1", "uid": "u-1"});
    assert_eq!(admit_token("a", &bound, &pod("a")), Ok(()));
    assert_eq!(
        admit_token("a", &bound, &pod("b")).unwrap_err(),
        "node requested token bound to a pod scheduled on a different node"
    );
    for unbound in [
        Value::Null,
        json!({"apiVersion": "v1", "kind": "Secret", "name": "s", "uid": "x"}),
        json!({"kind": "Pod", "name": "web-1", "uid": "u-1"}),
        json!({"apiVersion": "v1", "kind": "Pod", "uid": "u-1"}),
    ] {
        assert_eq!(
            admit_token("a", &unbound, &pod("a")).unwrap_err(),
            "node requested token not bound to a pod"
        );
    }
    let no_uid = json!({"apiVersion": "v1", "kind": "Pod", "name": "web-1"});
    assert_eq!(
        admit_token("a", &no_uid, &pod("a")).unwrap_err(),
        "node requested token with a pod binding without a uid"
    );
    let stale = json!({"apiVersion": "v1", "kind": "Pod", "name": "web-1", "uid": "old"});
    assert!(admit_token("a", &stale, &pod("a"))
        .unwrap_err()
        .starts_with("the UID in the bound object reference (old) does not match"));
    assert_eq!(token_binding(&bound), Ok(()));
    assert!(token_binding(&no_uid).is_err());
}

fn ingress(ips: &[&str], host: &str) -> Value {
    let entries: Vec<Value> = ips.iter().map(|ip| json!({"ip": ip})).collect();
    let mut ing = json!({"metadata": {"name": "web", "namespace": "default", "resourceVersion": "3"},
        "spec": {"rules": [{"host": host}]}});
    if !ips.is_empty() {
        ing["status"] = json!({"loadBalancer": {"ingress": entries}});
    }
    ing
}

#[test]
fn a_node_may_only_publish_or_withdraw_its_own_address_in_an_ingress() {
    let mine = ["10.0.0.2".to_string()];
    let none = ingress(&[], "a.test");
    let other = ingress(&["10.0.0.3"], "a.test");
    let both = ingress(&["10.0.0.2", "10.0.0.3"], "a.test");
    assert!(needs_addresses(&Identity::Node("a".into()), "Ingress"));
    assert!(!needs_addresses(&Identity::Admin, "Ingress"));
    // Its own address comes and goes; another node's stays as it is.
    assert_eq!(admit_ingress("a", &mine, Some(&other), &both), Ok(()));
    assert_eq!(admit_ingress("a", &mine, Some(&both), &other), Ok(()));
    assert_eq!(
        admit_ingress("a", &mine, Some(&none), &ingress(&["10.0.0.2"], "a.test")),
        Ok(())
    );
    assert_eq!(
        admit_ingress("a", &mine, Some(&ingress(&["10.0.0.2"], "a.test")), &none),
        Ok(())
    );
    // Another node's address: neither added nor removed.
    let err = admit_ingress("a", &mine, Some(&none), &other).unwrap_err();
    assert!(err.contains("its own addresses"), "{err}");
    assert!(admit_ingress("a", &mine, Some(&both), &ingress(&["10.0.0.2"], "a.test")).is_err());
    // A hostname entry is no node's address.
    let mut host = none.clone();
    host["status"] = json!({"loadBalancer": {"ingress": [{"hostname": "evil.test"}]}});
    assert!(admit_ingress("a", &mine, Some(&none), &host).is_err());
    // Nothing else of the Ingress, and no create.
    assert!(admit_ingress("a", &mine, Some(&other), &ingress(&["10.0.0.3"], "b.test")).is_err());
    assert!(admit_ingress("a", &mine, None, &none).is_err());
    // Through the entry point: only nodes are held to it.
    assert_eq!(
        admit(&Identity::Admin, "Ingress", &[], Some(&none), &other),
        Ok(())
    );
    assert!(admit(
        &Identity::Node("a".into()),
        "Ingress",
        &mine,
        Some(&none),
        &other
    )
    .is_err());
}
