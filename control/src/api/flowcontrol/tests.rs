//! Classification against the bootstrap configuration, seat sharing and
//! the ensurer's upkeep, on an in-memory store.

use std::sync::Arc;

use serde_json::{json, Value};

use super::matching::{resource_request, Asked, RequestDigest};
use super::*;
use crate::store::EmbeddedStore;

fn store() -> Arc<dyn Store> {
    Arc::new(EmbeddedStore::in_memory(Default::default()).unwrap())
}

fn digest(user: &str, groups: &[&str], what: Asked) -> RequestDigest {
    RequestDigest {
        user: user.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        what,
    }
}

async fn stored(
    store: &dyn Store,
    plural: &str,
    name: &str,
) -> Option<(crate::store::KeyValue, Value)> {
    let kv = store
        .get(&format!("{}{name}", ensure::prefix(plural)))
        .await
        .unwrap()?;
    let v = serde_json::from_slice(&kv.value).unwrap();
    Some((kv, v))
}

async fn uid(store: &dyn Store, plural: &str, name: &str) -> String {
    stored(store, plural, name).await.unwrap().1["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The schema a request is classified to, by name.
async fn schema_of(fc: &FlowControl, store: &dyn Store, d: &RequestDigest) -> String {
    let admitted = fc.admit(d).await.ok().flatten().expect("classified");
    let (kvs, _) = store.list(&ensure::prefix("flowschemas")).await.unwrap();
    kvs.iter()
        .map(|kv| serde_json::from_slice::<Value>(&kv.value).unwrap())
        .find(|v| v["metadata"]["uid"] == admitted.flow_schema_uid.as_str())
        .unwrap()["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn bootstrap_schemas_classify_as_upstream() {
    let store = store();
    let fc = FlowControl::new(store.clone(), 600);
    fc.start().await.unwrap();
    let s = store.as_ref();
    let pods = resource_request("GET", "/api/v1/namespaces/default/pods", false).unwrap();
    let auth = ["system:authenticated"];
    assert_eq!(
        schema_of(
            &fc,
            s,
            &digest(
                "bosun-admin",
                &["system:masters", "system:authenticated"],
                pods.clone()
            )
        )
        .await,
        "exempt"
    );
    assert_eq!(
        schema_of(
            &fc,
            s,
            &digest(
                "system:serviceaccount:default:default",
                &[
                    "system:serviceaccounts",
                    "system:serviceaccounts:default",
                    "system:authenticated"
                ],
                pods.clone()
            )
        )
        .await,
        "service-accounts"
    );
    assert_eq!(
        schema_of(
            &fc,
            s,
            &digest(
                "system:serviceaccount:kube-system:x",
                &["system:serviceaccounts", "system:authenticated"],
                pods.clone()
            )
        )
        .await,
        "kube-system-service-accounts"
    );
    assert_eq!(
        schema_of(
            &fc,
            s,
            &digest(
                "system:node:n1",
                &["system:nodes", "system:authenticated"],
                resource_request("PATCH", "/api/v1/nodes/n1/status", false).unwrap()
            )
        )
        .await,
        "system-node-high"
    );
    assert_eq!(
        schema_of(
            &fc,
            s,
            &digest(
                "system:node:n1",
                &["system:nodes", "system:authenticated"],
                pods.clone()
            )
        )
        .await,
        "system-nodes"
    );
    assert_eq!(
        schema_of(&fc, s, &digest("alice", &auth, pods.clone())).await,
        "global-default"
    );
    let healthz = Asked::NonResource {
        verb: "get".into(),
        path: "/livez".into(),
    };
    assert_eq!(
        schema_of(&fc, s, &digest("alice", &auth, healthz)).await,
        "probes"
    );
    // The level UID answered is the schema's level's.
    let admitted = fc
        .admit(&digest("alice", &auth, pods))
        .await
        .ok()
        .flatten()
        .unwrap();
    assert_eq!(
        admitted.priority_level_uid,
        uid(s, "prioritylevelconfigurations", "global-default").await
    );
    assert!(admitted.seat.is_some());
}

#[tokio::test]
async fn mandatory_objects_come_back_and_edited_suggested_ones_stay() {
    let store = store();
    let s = store.as_ref();
    ensure::ensure(s).await.unwrap();
    // The catch-all level deleted, and its spec changed behind the API.
    let (kv, _) = stored(s, "prioritylevelconfigurations", "catch-all")
        .await
        .unwrap();
    s.delete(&kv.key, kv.mod_revision).await.unwrap();
    let (kv, mut exempt) = stored(s, "flowschemas", "exempt").await.unwrap();
    exempt["spec"]["matchingPrecedence"] = json!(5);
    s.update(
        &kv.key,
        kv.mod_revision,
        serde_json::to_vec(&exempt).unwrap(),
    )
    .await
    .unwrap();
    // A suggested one edited by its user (autoupdate off), another left on.
    for (name, annotation) in [("global-default", "false"), ("workload-low", "true")] {
        let (kv, mut pl) = stored(s, "prioritylevelconfigurations", name)
            .await
            .unwrap();
        pl["spec"]["limited"]["nominalConcurrencyShares"] = json!(7);
        pl["metadata"]["annotations"]["apf.kubernetes.io/autoupdate-spec"] = json!(annotation);
        s.update(&kv.key, kv.mod_revision, serde_json::to_vec(&pl).unwrap())
            .await
            .unwrap();
    }
    ensure::ensure(s).await.unwrap();
    assert!(stored(s, "prioritylevelconfigurations", "catch-all")
        .await
        .is_some());
    let exempt = stored(s, "flowschemas", "exempt").await.unwrap().1;
    assert_eq!(exempt["spec"]["matchingPrecedence"], 1);
    assert_eq!(exempt["metadata"]["generation"], 2);
    let shares = |v: &Value| v["spec"]["limited"]["nominalConcurrencyShares"].clone();
    assert_eq!(
        shares(
            &stored(s, "prioritylevelconfigurations", "global-default")
                .await
                .unwrap()
                .1
        ),
        7
    );
    assert_eq!(
        shares(
            &stored(s, "prioritylevelconfigurations", "workload-low")
                .await
                .unwrap()
                .1
        ),
        100
    );
}

#[tokio::test]
async fn a_schema_naming_a_missing_level_is_dangling_and_skipped() {
    let store = store();
    let s = store.as_ref();
    let fs = json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": "alice", "uid": "u-alice"},
        "spec": {"priorityLevelConfiguration": {"name": "nowhere"}, "matchingPrecedence": 10,
            "rules": [{"subjects": [{"kind": "User", "user": {"name": "alice"}}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]},
    });
    s.create(
        &format!("{}alice", ensure::prefix("flowschemas")),
        serde_json::to_vec(&fs).unwrap(),
    )
    .await
    .unwrap();
    let fc = FlowControl::new(store.clone(), 600);
    fc.start().await.unwrap();
    let v = stored(s, "flowschemas", "alice").await.unwrap().1;
    let c = &v["status"]["conditions"][0];
    assert_eq!(
        (
            c["type"].as_str(),
            c["status"].as_str(),
            c["reason"].as_str()
        ),
        (Some("Dangling"), Some("True"), Some("NotFound"))
    );
    let exempt = stored(s, "flowschemas", "exempt").await.unwrap().1;
    assert_eq!(exempt["status"]["conditions"][0]["status"], "False");
    let any = Asked::NonResource {
        verb: "get".into(),
        path: "/version".into(),
    };
    assert_eq!(
        schema_of(&fc, s, &digest("alice", &["system:authenticated"], any)).await,
        "global-default"
    );
}

#[test]
fn seats_are_shared_by_shares() {
    // The bootstrap shares sum to 245: catch-all's 5 of 600 seats.
    assert_eq!(nominal_seats(600, 5, 245), 13);
    assert_eq!(nominal_seats(600, 100, 245), 245);
    assert_eq!(nominal_seats(40, 1, 246), 1);
    assert_eq!(nominal_seats(600, 0, 245), 0);
}

/// The (schema, level) a request is classified to, by name.
async fn classified(fc: &FlowControl, store: &dyn Store, d: &RequestDigest) -> (String, String) {
    let admitted = fc.admit(d).await.ok().flatten().expect("classified");
    let name_of = |plural: &'static str, uid: String| async move {
        let (kvs, _) = store.list(&ensure::prefix(plural)).await.unwrap();
        kvs.iter()
            .map(|kv| serde_json::from_slice::<Value>(&kv.value).unwrap())
            .find(|v| v["metadata"]["uid"] == uid.as_str())
            .unwrap()["metadata"]["name"]
            .as_str()
            .unwrap()
            .to_string()
    };
    (
        name_of("flowschemas", admitted.flow_schema_uid.clone()).await,
        name_of(
            "prioritylevelconfigurations",
            admitted.priority_level_uid.clone(),
        )
        .await,
    )
}

#[tokio::test]
async fn the_in_process_components_are_classified_as_upstreams_apart_from_the_nodes() {
    use crate::manager::{controller_manager_user, controller_user, scheduler_user};
    let store = store();
    let fc = FlowControl::new(store.clone(), 600);
    fc.start().await.unwrap();
    let s = store.as_ref();
    let as_user = |u: crate::auth::UserInfo, method: &str, path: &str, watch: bool| RequestDigest {
        user: u.name,
        groups: u.groups,
        what: resource_request(method, path, watch).unwrap(),
    };
    let account = |controller: &str| {
        crate::auth::rbac::policy::controller_account(controller)
            .expect("a controller's account")
            .to_string()
    };
    let lease =
        |name: &str| format!("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{name}");
    let cases = [
        // The ReplicaSet controller's pod writes.
        (
            as_user(
                controller_user(&account("replicaset")),
                "POST",
                "/api/v1/namespaces/default/pods",
                false,
            ),
            ("kube-system-service-accounts", "workload-high"),
        ),
        (
            as_user(
                controller_user(&account("replicaset")),
                "DELETE",
                "/api/v1/namespaces/default/pods/web-1",
                false,
            ),
            ("kube-system-service-accounts", "workload-high"),
        ),
        // The scheduler's bindings.
        (
            as_user(
                scheduler_user(),
                "POST",
                "/api/v1/namespaces/default/pods/web-1/binding",
                false,
            ),
            ("kube-scheduler", "workload-high"),
        ),
        // The shared informers' lists and watches.
        (
            as_user(controller_manager_user(), "GET", "/api/v1/pods", true),
            ("kube-controller-manager", "workload-high"),
        ),
        // The endpoints controller's writes (its own schema upstream).
        (
            as_user(
                controller_user(&account("endpoints")),
                "PUT",
                "/api/v1/namespaces/default/endpoints/web",
                false,
            ),
            ("endpoint-controller", "workload-high"),
        ),
        // Leader election, by either component or a kube-system service
        // account, of a Lease or an older Endpoints lock in kube-system.
        (
            as_user(
                controller_manager_user(),
                "PUT",
                &lease("kube-controller-manager"),
                false,
            ),
            ("system-leader-election", "leader-election"),
        ),
        (
            as_user(scheduler_user(), "GET", &lease("kube-scheduler"), false),
            ("system-leader-election", "leader-election"),
        ),
        (
            as_user(
                controller_user("cloud-controller-manager"),
                "PUT",
                &lease("cloud-controller-manager"),
                false,
            ),
            ("system-leader-election", "leader-election"),
        ),
        (
            as_user(
                controller_user("x"),
                "PUT",
                "/api/v1/namespaces/kube-system/endpoints/lock",
                false,
            ),
            ("system-leader-election", "leader-election"),
        ),
        (
            as_user(
                controller_user("x"),
                "PUT",
                "/api/v1/namespaces/web/configmaps/lock",
                false,
            ),
            ("workload-leader-election", "leader-election"),
        ),
    ];
    for (digest, (schema, level)) in &cases {
        let got = classified(&fc, s, digest).await;
        assert_eq!(
            (got.0.as_str(), got.1.as_str()),
            (*schema, *level),
            "{} {:?}",
            digest.user,
            digest.what
        );
    }
    // The agents' status writes go to another level: controller writes
    // never wait behind them for a seat.
    let node = RequestDigest {
        user: "system:node:n1".into(),
        groups: vec!["system:nodes".into(), "system:authenticated".into()],
        what: resource_request(
            "PATCH",
            "/api/v1/namespaces/default/pods/web-1/status",
            false,
        )
        .unwrap(),
    };
    assert_eq!(
        classified(&fc, s, &node).await,
        ("system-nodes".to_string(), "system".to_string())
    );
}
