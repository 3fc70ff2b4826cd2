//! The controller against the real API handlers on an in-memory store.

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{DeleteParams, ListParams};
use kube::ResourceExt;
use serde_json::{json, Value};

use super::*;
use crate::controllers::endpoints::tests::{pod, pod_status, service, WAIT};
use crate::toolkit::testing::{eventually, TestApi};

fn run(shared: &Arc<Shared>) {
    let controller = start(shared);
    shared.informers.start();
    tokio::spawn(controller);
}

/// The slices labelled for `svc`, as JSON, by name.
async fn slices(api: &TestApi, svc: &str) -> Vec<Value> {
    let mut items: Vec<Value> = api
        .api::<EndpointSlice>(Some("default"))
        .list(&ListParams::default().labels(&format!("{SERVICE_NAME_LABEL}={svc}")))
        .await
        .unwrap()
        .items
        .iter()
        .map(|s| serde_json::to_value(s).unwrap())
        .collect();
    items.sort_by_key(|s| s["metadata"]["name"].as_str().unwrap().to_string());
    items
}

async fn wait_slices(
    api: &TestApi,
    svc: &str,
    what: &str,
    check: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    eventually(what, WAIT, || async {
        let s = slices(api, svc).await;
        check(&s).then_some(s)
    })
    .await
}

/// Every endpoint of every slice, by its address.
fn endpoints_of(slices: &[Value]) -> Vec<Value> {
    let mut eps: Vec<Value> = slices
        .iter()
        .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
        .collect();
    eps.sort_by_key(|e| e["addresses"][0].as_str().unwrap().to_string());
    eps
}

#[tokio::test]
async fn slices_carry_conditions_hostnames_labels_and_an_owner() {
    let api = TestApi::start().await;
    run(&api.shared());
    let svc = service(
        &api,
        "nginx",
        json!({"app": "web"}),
        json!({"clusterIP": "None"}),
    )
    .await;
    pod(
        &api,
        "web-0",
        "web",
        json!({"hostname": "web-0", "subdomain": "nginx"}),
    )
    .await;
    pod(&api, "web-1", "web", json!({})).await;
    pod(&api, "web-2", "web", json!({})).await;
    pod(&api, "web-3", "web", json!({})).await;
    pod_status(&api, "web-0", "10.0.0.1", true).await;
    pod_status(&api, "web-1", "10.0.0.2", false).await;
    pod_status(&api, "web-2", "10.0.0.3", true).await;
    // web-3 has no IP: left out. web-2 starts terminating.
    api.api::<Pod>(Some("default"))
        .delete("web-2", &DeleteParams::default())
        .await
        .unwrap();

    let got = wait_slices(&api, "nginx", "three endpoints, web-2 terminating", |s| {
        let eps = endpoints_of(s);
        eps.len() == 3 && eps[2]["conditions"]["terminating"] == true
    })
    .await;
    assert_eq!(got.len(), 1, "{got:#?}");
    let slice = &got[0];
    assert!(slice["metadata"]["name"]
        .as_str()
        .unwrap()
        .starts_with("nginx-"));
    assert_eq!(slice["metadata"]["generateName"], "nginx-");
    assert_eq!(slice["addressType"], "IPv4");
    let labels = &slice["metadata"]["labels"];
    assert_eq!(labels[SERVICE_NAME_LABEL], "nginx");
    assert_eq!(labels[MANAGED_BY_LABEL], CONTROLLER_NAME);
    assert_eq!(labels["service.kubernetes.io/headless"], "");
    assert_eq!(labels["tier"], "front");
    let owner = &slice["metadata"]["ownerReferences"][0];
    assert_eq!(
        (
            owner["kind"].as_str(),
            owner["name"].as_str(),
            owner["controller"].as_bool()
        ),
        (Some("Service"), Some("nginx"), Some(true))
    );
    assert_eq!(owner["uid"].as_str(), svc.uid().as_deref());
    assert_eq!(
        slice["ports"],
        json!([{"name": "http", "port": 8080, "protocol": "TCP"}])
    );
    let eps = endpoints_of(&got);
    let web0 = &eps[0];
    assert_eq!(web0["addresses"], json!(["10.0.0.1"]));
    assert_eq!(web0["hostname"], "web-0");
    assert_eq!(web0["nodeName"], "n1");
    assert_eq!(web0["targetRef"]["kind"], "Pod");
    assert_eq!(web0["targetRef"]["name"], "web-0");
    let conditions = |i: usize| eps[i]["conditions"].clone();
    assert_eq!(
        conditions(0),
        json!({"ready": true, "serving": true, "terminating": false})
    );
    assert_eq!(
        conditions(1),
        json!({"ready": false, "serving": false, "terminating": false})
    );
    assert_eq!(
        conditions(2),
        json!({"ready": false, "serving": true, "terminating": true})
    );
    assert!(eps[1].get("hostname").is_none());
}

#[tokio::test]
async fn slices_hold_at_most_100_endpoints() {
    let api = TestApi::start().await;
    run(&api.shared());
    service(&api, "web", json!({"app": "web"}), json!({})).await;
    for i in 0..201 {
        let name = format!("p{i}");
        pod(&api, &name, "web", json!({})).await;
        pod_status(
            &api,
            &name,
            &format!("10.0.{}.{}", i / 200, i % 200 + 1),
            true,
        )
        .await;
    }
    let got = wait_slices(&api, "web", "201 endpoints", |s| {
        endpoints_of(s).len() == 201
    })
    .await;
    let mut sizes: Vec<usize> = got
        .iter()
        .map(|s| s["endpoints"].as_array().unwrap().len())
        .collect();
    sizes.sort();
    assert_eq!(sizes, [1, 100, 100], "{sizes:?}");
    for s in &got {
        assert_eq!(s["metadata"]["labels"][SERVICE_NAME_LABEL], "web");
        assert_eq!(s["metadata"]["labels"][MANAGED_BY_LABEL], CONTROLLER_NAME);
    }
    // No address twice.
    let mut addresses: Vec<Value> = endpoints_of(&got)
        .iter()
        .map(|e| e["addresses"][0].clone())
        .collect();
    addresses.dedup();
    assert_eq!(addresses.len(), 201);
}

#[tokio::test]
async fn a_service_without_pods_has_one_empty_slice_and_a_deleted_one_none() {
    let api = TestApi::start().await;
    run(&api.shared());
    service(&api, "web", json!({"app": "web"}), json!({})).await;
    let got = wait_slices(&api, "web", "a placeholder", |s| s.len() == 1).await;
    assert!(got[0]
        .get("endpoints")
        .is_none_or(|e| e.as_array().is_some_and(Vec::is_empty)));
    pod(&api, "a", "web", json!({})).await;
    pod_status(&api, "a", "10.0.0.1", true).await;
    let got = wait_slices(&api, "web", "a's endpoint", |s| endpoints_of(s).len() == 1).await;
    assert_eq!(got.len(), 1, "the placeholder gave way: {got:#?}");

    api.api::<Service>(Some("default"))
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    wait_slices(&api, "web", "no slices", <[Value]>::is_empty).await;
}

#[tokio::test]
async fn selectorless_services_get_no_slices() {
    let api = TestApi::start().await;
    run(&api.shared());
    service(&api, "db", Value::Null, json!({})).await;
    service(&api, "web", json!({"app": "web"}), json!({})).await;
    wait_slices(&api, "web", "web's placeholder", |s| s.len() == 1).await;
    assert!(slices(&api, "db").await.is_empty());
}
