//! The root CA publisher against the real API handlers on an in-memory
//! store.

use std::time::Duration;

use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

use super::*;
use crate::toolkit::testing::{eventually, TestApi};

const WAIT: Duration = Duration::from_secs(10);
const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

async fn published(api: &TestApi, ns: &str) -> Option<String> {
    api.api::<ConfigMap>(Some(ns))
        .get_opt(NAME)
        .await
        .unwrap()
        .and_then(|cm| cm.data?.get(KEY).cloned())
}

#[tokio::test]
async fn every_namespace_gets_the_ca_and_edits_are_undone() {
    let api = TestApi::start().await;
    let shared = api.shared();
    tokio::spawn(start(&shared, CA.to_string()));
    shared.informers.start();
    api.create::<Namespace>(json!({"metadata": {"name": "team"}}))
        .await;
    for ns in ["default", "team"] {
        eventually(&format!("CA in {ns}"), WAIT, || async {
            (published(&api, ns).await.as_deref() == Some(CA)).then_some(())
        })
        .await;
    }
    let cms = api.api::<ConfigMap>(Some("team"));
    cms.patch(
        NAME,
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {KEY: "forged"}})),
    )
    .await
    .unwrap();
    eventually("edit undone", WAIT, || async {
        (published(&api, "team").await.as_deref() == Some(CA)).then_some(())
    })
    .await;
    cms.delete(NAME, &DeleteParams::default()).await.unwrap();
    eventually("made again", WAIT, || async {
        (published(&api, "team").await.as_deref() == Some(CA)).then_some(())
    })
    .await;
}
