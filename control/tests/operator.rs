//! A small operator written the way kube-rs users write them, run against
//! bosun: the CRD comes from kube's `CustomResource` derive, is applied
//! with server-side apply and waited on until Established; a kube-runtime
//! `Controller` reconciles each `Greeting` into a ConfigMap it owns and
//! writes the Greeting's status back through the `status` subresource.
//! Changing the spec updates the ConfigMap; deleting the Greeting lets the
//! garbage collector take the ConfigMap (an owner reference to a custom
//! resource); deleting the CRD takes its objects.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::ControlPlane;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, CustomResource, CustomResourceExt, Resource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "demo.bosun.dev",
    version = "v1",
    kind = "Greeting",
    namespaced,
    status = "GreetingStatus",
    shortname = "gr",
    printcolumn(name = "Message", type_ = "string", json_path = ".spec.message")
)]
pub struct GreetingSpec {
    message: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GreetingStatus {
    config_map: String,
    observed_generation: i64,
}

const MANAGER: &str = "greeting-operator";

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct Error(#[from] kube::Error);

/// One pass: the Greeting's ConfigMap made to say its message, then its
/// status.
async fn reconcile(greeting: Arc<Greeting>, client: Arc<Client>) -> Result<Action, Error> {
    let ns = greeting.namespace().unwrap_or_default();
    let name = format!("{}-greeting", greeting.name_any());
    let owner = greeting.controller_owner_ref(&()).expect("a stored object");
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        data: Some([("message".to_string(), greeting.spec.message.clone())].into()),
        ..Default::default()
    };
    let params = PatchParams::apply(MANAGER).force();
    let config_maps: Api<ConfigMap> = Api::namespaced((*client).clone(), &ns);
    config_maps
        .patch(&name, &params, &Patch::Apply(&cm))
        .await?;
    let greetings: Api<Greeting> = Api::namespaced((*client).clone(), &ns);
    let status = json!({"apiVersion": "demo.bosun.dev/v1", "kind": "Greeting",
        "status": {"configMap": name,
                   "observedGeneration": greeting.metadata.generation.unwrap_or_default()}});
    greetings
        .patch_status(&greeting.name_any(), &params, &Patch::Apply(&status))
        .await?;
    Ok(Action::await_change())
}

fn error_policy(_: Arc<Greeting>, _: &Error, _: Arc<Client>) -> Action {
    Action::requeue(Duration::from_millis(500))
}

/// Polls `check` every 200 ms for up to a minute (a loaded machine).
async fn until<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_kube_rs_operator_reconciles_custom_objects_into_config_maps() {
    let cp = ControlPlane::start();
    let client = cp.client().await;

    // The derived CRD, applied as operators install theirs.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = Greeting::crd();
    crds.patch(
        "greetings.demo.bosun.dev",
        &PatchParams::apply(MANAGER),
        &Patch::Apply(&crd),
    )
    .await
    .expect("applying the CRD");
    until("the CRD to be established", async || {
        let crd = crds.get("greetings.demo.bosun.dev").await.ok()?;
        crd.status?
            .conditions?
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
            .then_some(())
    })
    .await;

    let greetings: Api<Greeting> = Api::namespaced(client.clone(), "default");
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let controller = tokio::spawn(
        Controller::new(greetings.clone(), watcher::Config::default())
            .owns(config_maps.clone(), watcher::Config::default())
            .run(reconcile, error_policy, Arc::new(client.clone()))
            .for_each(|_| async {}),
    );

    let hello = Greeting::new(
        "hello",
        GreetingSpec {
            message: "hi".into(),
        },
    );
    greetings
        .create(&PostParams::default(), &hello)
        .await
        .expect("creating a Greeting");
    let said = |want: &'static str| {
        let config_maps = config_maps.clone();
        async move || {
            let cm = config_maps.get("hello-greeting").await.ok()?;
            (cm.data?.get("message")? == want).then_some(())
        }
    };
    until("the ConfigMap to say hi", said("hi")).await;
    let status = until("the status to be written back", async || {
        greetings.get("hello").await.ok()?.status
    })
    .await;
    assert_eq!(status.config_map, "hello-greeting");
    assert_eq!(status.observed_generation, 1);

    // A new message: a new generation, reconciled again.
    greetings
        .patch(
            "hello",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"message": "hello there"}})),
        )
        .await
        .expect("patching the Greeting");
    until("the ConfigMap to say hello there", said("hello there")).await;
    until("observedGeneration 2", async || {
        let g = greetings.get("hello").await.ok()?;
        (g.status?.observed_generation == 2).then_some(())
    })
    .await;

    // The Greeting goes; the ConfigMap it owns follows (the garbage
    // collector follows owner references to custom resources).
    controller.abort();
    greetings
        .delete("hello", &DeleteParams::default())
        .await
        .expect("deleting the Greeting");
    until("the owned ConfigMap to be collected", async || {
        config_maps
            .get_opt("hello-greeting")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;

    // Deleting the CRD removes its objects and stops serving them.
    greetings
        .create(&PostParams::default(), &hello)
        .await
        .expect("creating a Greeting again");
    crds.delete("greetings.demo.bosun.dev", &DeleteParams::default())
        .await
        .expect("deleting the CRD");
    until("the CRD to be gone", async || {
        crds.get_opt("greetings.demo.bosun.dev")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    let err = greetings.list(&Default::default()).await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 404),
        "{err:?}"
    );
}
