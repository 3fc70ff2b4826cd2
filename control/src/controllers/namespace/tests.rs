//! The namespace controller against the real API handlers on an in-memory
//! store.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

use super::*;
use crate::toolkit::testing::{eventually, TestApi};

const WAIT: Duration = Duration::from_secs(10);

fn condition(ns: &Namespace, type_: &str) -> Option<(String, String)> {
    ns.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.message.clone().unwrap_or_default()))
}

#[tokio::test]
async fn a_deleted_namespace_is_emptied_then_goes_and_reports_what_holds_it() {
    let api = TestApi::start().await;
    let shared = api.shared();
    tokio::spawn(start(&shared));
    shared.informers.start();
    api.create::<Namespace>(json!({"metadata": {"name": "scratch"}}))
        .await;
    for p in ["a", "b"] {
        api.create::<Pod>(json!({"metadata": {"name": p, "namespace": "scratch"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}))
            .await;
    }
    api.create::<ConfigMap>(json!({"metadata": {"name": "held", "namespace": "scratch",
        "finalizers": ["example.com/hold"]}, "data": {"k": "v"}}))
        .await;
    let nss = api.api::<Namespace>(None);
    nss.delete("scratch", &DeleteParams::default())
        .await
        .unwrap();

    // The pods go; the held ConfigMap stays, and the conditions say why.
    let pods = api.api::<Pod>(Some("scratch"));
    eventually("the pods deleted", WAIT, || async {
        pods.list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
            .then_some(())
    })
    .await;
    let ns = eventually("the conditions", WAIT, || async {
        let ns = nss.get("scratch").await.unwrap();
        condition(&ns, "NamespaceFinalizersRemaining").map(|_| ns)
    })
    .await;
    assert_eq!(
        ns.status.as_ref().unwrap().phase.as_deref(),
        Some("Terminating")
    );
    assert_eq!(
        condition(&ns, "NamespaceContentRemaining"),
        Some((
            "True".into(),
            "Some resources are remaining: configmaps. has 1 resource instances".into()
        ))
    );
    assert_eq!(
        condition(&ns, "NamespaceFinalizersRemaining"),
        Some((
            "True".into(),
            "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances".into()
        ))
    );
    assert_eq!(
        ns.spec.unwrap().finalizers.unwrap(),
        ["kubernetes"],
        "not finalized while content remains"
    );

    // Its finalizer removed, the ConfigMap goes, and then the namespace.
    api.api::<ConfigMap>(Some("scratch"))
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    eventually("the namespace gone", WAIT, || async {
        nss.get_opt("scratch")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_namespace_not_being_deleted_is_left_alone() {
    let api = TestApi::start().await;
    let ns: Namespace = api.create(json!({"metadata": {"name": "quiet"}})).await;
    api.create::<ConfigMap>(json!({"metadata": {"name": "c", "namespace": "quiet"}}))
        .await;
    let ctx = Arc::new(Context {
        client: api.client.clone(),
        clock: api.clock.clone(),
    });
    reconcile(Arc::new(ns), ctx).await.unwrap();
    assert!(api
        .api::<ConfigMap>(Some("quiet"))
        .get_opt("c")
        .await
        .unwrap()
        .is_some());
}

#[test]
fn conditions_name_every_kind_and_finalizer_left_in_order() {
    let mut left = Remaining::default();
    left.by_resource.insert("pods.".into(), 2);
    left.by_resource.insert("deployments.apps".into(), 1);
    left.by_finalizer.insert("b/x".into(), 1);
    left.by_finalizer.insert("a/y".into(), 3);
    let c = conditions(&left);
    let find = |t: &str| c.iter().find(|c| c.0 == t).unwrap();
    assert_eq!(
        find("NamespaceContentRemaining").3,
        "Some resources are remaining: deployments.apps has 1 resource instances, pods. has 2 resource instances"
    );
    assert_eq!(
        find("NamespaceFinalizersRemaining").3,
        "Some content in the namespace has finalizers remaining: a/y in 3 resource instances, b/x in 1 resource instances"
    );
    assert!(!find("NamespaceDeletionContentFailure").1);
    left.failures.push("pods.: boom".into());
    let c = conditions(&left);
    assert!(c
        .iter()
        .any(|c| c.0 == "NamespaceDeletionContentFailure" && c.1));
    assert!(Remaining::default().is_empty());
}
