//! The serviceaccount controller against the real API handlers on an
//! in-memory store.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

use super::*;
use crate::toolkit::testing::{eventually, TestApi};

const WAIT: Duration = Duration::from_secs(10);

async fn account(api: &TestApi, ns: &str) -> Option<ServiceAccount> {
    api.api::<ServiceAccount>(Some(ns))
        .get_opt(DEFAULT)
        .await
        .unwrap()
}

#[tokio::test]
async fn every_namespace_gets_a_default_account_and_keeps_it() {
    let api = TestApi::start().await;
    let shared = api.shared();
    tokio::spawn(start(&shared));
    shared.informers.start();
    api.create::<Namespace>(json!({"metadata": {"name": "team"}}))
        .await;
    for ns in ["default", "kube-system", "team"] {
        eventually(&format!("default account in {ns}"), WAIT, || async {
            account(&api, ns).await.map(|_| ())
        })
        .await;
    }
    let first = account(&api, "team").await.unwrap().metadata.uid;
    api.api::<ServiceAccount>(Some("team"))
        .delete(DEFAULT, &DeleteParams::default())
        .await
        .unwrap();
    eventually("default account made again", WAIT, || async {
        account(&api, "team")
            .await
            .filter(|sa| sa.metadata.uid != first)
            .map(|_| ())
    })
    .await;
    // A pod naming no account runs as the default one; one naming a
    // missing account is refused, as kube-apiserver's admission does.
    let pods = api.api::<Pod>(Some("team"));
    let pod = |name: &str, sa: Option<&str>| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"serviceAccountName": sa, "containers": [{"name": "c", "image": "busybox"}]}}))
        .unwrap()
    };
    let made = pods
        .create(&PostParams::default(), &pod("a", None))
        .await
        .unwrap();
    let spec = made.spec.unwrap();
    assert_eq!(spec.service_account_name.as_deref(), Some("default"));
    let mounts = spec.containers[0].volume_mounts.clone().unwrap();
    assert_eq!(
        mounts[0].mount_path,
        "/var/run/secrets/kubernetes.io/serviceaccount"
    );
    let err = pods
        .create(&PostParams::default(), &pod("b", Some("robot")))
        .await
        .unwrap_err();
    assert!(
        crate::toolkit::api_errors::is_status(&err, 403)
            && err
                .to_string()
                .contains("serviceaccount \"robot\" not found"),
        "{err}"
    );
}
