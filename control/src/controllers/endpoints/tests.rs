//! The controller against the real API handlers on an in-memory store;
//! pods get their IPs and readiness by hand, as their node would give them.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::{json, Value};

use super::*;
use crate::toolkit::testing::{eventually, TestApi};

pub(crate) const WAIT: Duration = Duration::from_secs(10);

fn run(shared: &Arc<Shared>) {
    let controller = start(shared);
    shared.informers.start();
    tokio::spawn(controller);
}

/// Service `name` selecting `app=<app>` with `ports` and extra spec fields.
pub(crate) async fn service(api: &TestApi, name: &str, selector: Value, spec: Value) -> Service {
    let mut svc = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "default", "labels": {"tier": "front"}},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}
    });
    if !selector.is_null() {
        svc["spec"]["selector"] = selector;
    }
    if let Value::Object(extra) = spec {
        for (k, v) in extra {
            svc["spec"][k] = v;
        }
    }
    api.create(svc).await
}

/// Pod `name` labelled `app=<app>` on node `n1`, with `spec` merged in.
pub(crate) async fn pod(api: &TestApi, name: &str, app: &str, spec: Value) -> Pod {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "web:1",
                 "ports": [{"name": "web", "containerPort": 8080}]}]}
    });
    if let Value::Object(extra) = spec {
        for (k, v) in extra {
            pod["spec"][k] = v;
        }
    }
    api.create(pod).await
}

/// Gives a pod an IP and marks it Running, Ready or not.
pub(crate) async fn pod_status(api: &TestApi, name: &str, ip: &str, ready: bool) {
    let ready = if ready { "True" } else { "False" };
    api.api::<Pod>(Some("default"))
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running", "podIP": ip,
                "podIPs": [{"ip": ip}],
                "conditions": [{"type": "Ready", "status": ready}]}})),
        )
        .await
        .unwrap();
}

async fn endpoints(api: &TestApi, name: &str) -> Option<Endpoints> {
    api.api::<Endpoints>(Some("default"))
        .get_opt(name)
        .await
        .unwrap()
}

/// Waits until the Endpoints `name` satisfy `check`, and returns them.
async fn wait_endpoints(
    api: &TestApi,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    eventually(what, WAIT, || async {
        let ep = endpoints(api, name).await?;
        let v = serde_json::to_value(&ep).unwrap();
        check(&v).then_some(v)
    })
    .await
}

/// The IPs at `/subsets/<i>/<list>`.
fn ips(ep: &Value, subset: usize, list: &str) -> Vec<String> {
    ep["subsets"][subset][list]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| x["ip"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn ready_pods_are_addresses_and_unready_ones_not_ready_addresses() {
    let api = TestApi::start().await;
    run(&api.shared());
    service(&api, "web", json!({"app": "web"}), json!({})).await;
    for name in ["a", "b", "c"] {
        pod(&api, name, "web", json!({})).await;
    }
    pod(&api, "other", "db", json!({})).await;
    pod_status(&api, "a", "10.244.1.2", true).await;
    pod_status(&api, "b", "10.244.1.3", false).await;
    pod_status(&api, "other", "10.244.1.9", true).await;
    // c has no IP yet: left out.

    let ep = wait_endpoints(&api, "web", "a ready and b not ready", |ep| {
        ips(ep, 0, "addresses") == ["10.244.1.2"]
            && ips(ep, 0, "notReadyAddresses") == ["10.244.1.3"]
    })
    .await;
    assert_eq!(ep["subsets"].as_array().unwrap().len(), 1, "{ep:#}");
    let a = &ep["subsets"][0]["addresses"][0];
    assert_eq!(a["nodeName"], "n1");
    assert_eq!(a["targetRef"]["kind"], "Pod");
    assert_eq!(a["targetRef"]["name"], "a");
    assert_eq!(a["targetRef"]["namespace"], "default");
    let uid = api
        .api::<Pod>(Some("default"))
        .get("a")
        .await
        .unwrap()
        .uid();
    assert_eq!(a["targetRef"]["uid"].as_str(), uid.as_deref());
    assert!(a.get("hostname").is_none(), "{a}");
    assert_eq!(
        ep["subsets"][0]["ports"],
        json!([{"name": "http", "port": 8080, "protocol": "TCP"}])
    );
    assert_eq!(ep["metadata"]["labels"][MANAGED_BY_LABEL], CONTROLLER_NAME);
    assert_eq!(
        ep["metadata"]["labels"]["tier"], "front",
        "the service's labels"
    );

    // b becomes ready, c gets an IP; deleting a removes it.
    pod_status(&api, "b", "10.244.1.3", true).await;
    pod_status(&api, "c", "10.244.1.4", false).await;
    wait_endpoints(&api, "web", "b ready, c not ready", |ep| {
        ips(ep, 0, "addresses") == ["10.244.1.2", "10.244.1.3"]
            && ips(ep, 0, "notReadyAddresses") == ["10.244.1.4"]
    })
    .await;
    api.api::<Pod>(Some("default"))
        .delete("a", &DeleteParams::default())
        .await
        .unwrap();
    // a is terminating (its node has not confirmed): out at once.
    wait_endpoints(&api, "web", "a gone", |ep| {
        ips(ep, 0, "addresses") == ["10.244.1.3"]
    })
    .await;
    // A pod relabelled away leaves too.
    api.api::<Pod>(Some("default"))
        .patch(
            "b",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"app": "x"}}})),
        )
        .await
        .unwrap();
    wait_endpoints(&api, "web", "b relabelled away", |ep| {
        ips(ep, 0, "addresses").is_empty() && ips(ep, 0, "notReadyAddresses") == ["10.244.1.4"]
    })
    .await;
}

#[tokio::test]
async fn publish_not_ready_addresses_lists_unready_pods_as_ready() {
    let api = TestApi::start().await;
    run(&api.shared());
    service(
        &api,
        "web",
        json!({"app": "web"}),
        json!({"publishNotReadyAddresses": true}),
    )
    .await;
    pod(&api, "a", "web", json!({})).await;
    pod(&api, "b", "web", json!({})).await;
    pod_status(&api, "a", "10.244.1.2", true).await;
    pod_status(&api, "b", "10.244.1.3", false).await;
    let ep = wait_endpoints(&api, "web", "both pods as addresses", |ep| {
        ips(ep, 0, "addresses") == ["10.244.1.2", "10.244.1.3"]
    })
    .await;
    assert!(
        ep["subsets"][0].get("notReadyAddresses").is_none(),
        "{ep:#}"
    );
}

#[tokio::test]
async fn named_target_ports_resolve_per_pod() {
    let api = TestApi::start().await;
    run(&api.shared());
    service(
        &api,
        "web",
        json!({"app": "web"}),
        json!({"ports": [{"name": "http", "port": 80, "targetPort": "web"},
                         {"name": "admin", "port": 81, "targetPort": 9000}]}),
    )
    .await;
    let containers = |port: i32| {
        json!({"containers": [{"name": "c", "image": "web:1",
               "ports": [{"name": "web", "containerPort": port}]}]})
    };
    pod(&api, "a", "web", containers(8080)).await;
    pod(&api, "b", "web", containers(8080)).await;
    pod(&api, "c", "web", containers(9090)).await;
    pod(
        &api,
        "d",
        "web",
        json!({"containers": [{"name": "c", "image": "web:1"}]}),
    )
    .await;
    for (name, ip) in [
        ("a", "10.0.0.1"),
        ("b", "10.0.0.2"),
        ("c", "10.0.0.3"),
        ("d", "10.0.0.4"),
    ] {
        pod_status(&api, name, ip, true).await;
    }
    let ep = wait_endpoints(&api, "web", "three subsets", |ep| {
        ep["subsets"].as_array().map(Vec::len) == Some(3)
    })
    .await;
    let port_sets: Vec<(Vec<String>, Value)> = (0..3)
        .map(|i| (ips(&ep, i, "addresses"), ep["subsets"][i]["ports"].clone()))
        .collect();
    let http = |n: i32| json!({"name": "http", "port": n, "protocol": "TCP"});
    let admin = json!({"name": "admin", "port": 9000, "protocol": "TCP"});
    // d has no port named "web": only the numeric target port.
    assert!(
        port_sets.contains(&(vec!["10.0.0.4".into()], json!([admin]))),
        "{ep:#}"
    );
    assert!(
        port_sets.contains(&(
            vec!["10.0.0.1".into(), "10.0.0.2".into()],
            json!([admin, http(8080)])
        )),
        "{ep:#}"
    );
    assert!(
        port_sets.contains(&(vec!["10.0.0.3".into()], json!([admin, http(9090)]))),
        "{ep:#}"
    );
}

#[tokio::test]
async fn pods_in_the_service_subdomain_get_their_hostname() {
    let api = TestApi::start().await;
    run(&api.shared());
    service(
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
    pod(
        &api,
        "web-1",
        "web",
        json!({"hostname": "web-1", "subdomain": "other"}),
    )
    .await;
    pod_status(&api, "web-0", "10.0.0.1", true).await;
    pod_status(&api, "web-1", "10.0.0.2", true).await;
    let ep = wait_endpoints(&api, "nginx", "both pods", |ep| {
        ips(ep, 0, "addresses").len() == 2
    })
    .await;
    let addrs = &ep["subsets"][0]["addresses"];
    assert_eq!(addrs[0]["hostname"], "web-0");
    assert!(addrs[1].get("hostname").is_none(), "{ep:#}");
    assert_eq!(ep["metadata"]["labels"][HEADLESS_LABEL], "");
}

#[tokio::test]
async fn selectorless_services_keep_hand_written_endpoints() {
    let api = TestApi::start().await;
    run(&api.shared());
    service(&api, "db", Value::Null, json!({})).await;
    let written: Endpoints = api
        .create(json!({"apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": "db", "namespace": "default"},
            "subsets": [{"addresses": [{"ip": "192.168.9.9"}], "ports": [{"port": 5432}]}]}))
        .await;
    // A selector service in the same run shows the controller is at work.
    service(&api, "web", json!({"app": "web"}), json!({})).await;
    pod(&api, "a", "web", json!({})).await;
    pod_status(&api, "a", "10.0.0.1", true).await;
    wait_endpoints(&api, "web", "web's endpoints", |ep| {
        ips(ep, 0, "addresses") == ["10.0.0.1"]
    })
    .await;
    let now = endpoints(&api, "db").await.expect("kept");
    assert_eq!(
        now.resource_version(),
        written.resource_version(),
        "never written"
    );

    // Deleting the selectorless service leaves its hand-written Endpoints;
    // deleting web takes web's.
    for svc in ["db", "web"] {
        api.api::<Service>(Some("default"))
            .delete(svc, &DeleteParams::default())
            .await
            .unwrap();
    }
    eventually("web's endpoints deleted", WAIT, || async {
        endpoints(&api, "web").await.is_none().then_some(())
    })
    .await;
    assert!(
        endpoints(&api, "db").await.is_some(),
        "hand-written endpoints kept"
    );
}

#[tokio::test]
async fn edited_endpoints_are_put_back() {
    let api = TestApi::start().await;
    run(&api.shared());
    service(&api, "web", json!({"app": "web"}), json!({})).await;
    pod(&api, "a", "web", json!({})).await;
    pod_status(&api, "a", "10.0.0.1", true).await;
    wait_endpoints(&api, "web", "a listed", |ep| {
        ips(ep, 0, "addresses") == ["10.0.0.1"]
    })
    .await;
    api.api::<Endpoints>(Some("default"))
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    wait_endpoints(&api, "web", "recreated", |ep| {
        ips(ep, 0, "addresses") == ["10.0.0.1"]
    })
    .await;
}

#[tokio::test]
async fn managed_endpoints_left_without_a_service_are_swept() {
    let api = TestApi::start().await;
    // Left from a service deleted while the controller was not running;
    // a hand-written one beside it has no managed-by label and stays.
    let _: Endpoints = api
        .create(json!({"apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": "gone", "namespace": "default",
                         "labels": {MANAGED_BY_LABEL: CONTROLLER_NAME}}}))
        .await;
    let _: Endpoints = api
        .create(json!({"apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": "mine", "namespace": "default"}}))
        .await;
    run(&api.shared());
    eventually("the leftover swept", WAIT, || async {
        endpoints(&api, "gone").await.is_none().then_some(())
    })
    .await;
    assert!(endpoints(&api, "mine").await.is_some());
}

#[tokio::test]
async fn endpoints_over_capacity_keep_ready_addresses_and_say_so() {
    let api = TestApi::start().await;
    let shared = api.shared();
    let ctx = Context {
        max_capacity: 3,
        ..Context::new(&shared)
    };
    tokio::spawn(super::run(&shared, ctx));
    shared.informers.start();
    service(&api, "web", json!({"app": "web"}), json!({})).await;
    for (name, ip, ready) in [
        ("a", "10.0.0.1", false),
        ("b", "10.0.0.2", true),
        ("c", "10.0.0.3", true),
        ("d", "10.0.0.4", true),
    ] {
        pod(&api, name, "web", json!({})).await;
        pod_status(&api, name, ip, ready).await;
    }
    let ep = wait_endpoints(&api, "web", "three ready addresses, truncated", |ep| {
        ips(ep, 0, "addresses") == ["10.0.0.2", "10.0.0.3", "10.0.0.4"]
            && ep["metadata"]["annotations"][OVER_CAPACITY] == "truncated"
    })
    .await;
    assert!(
        ep["subsets"][0].get("notReadyAddresses").is_none(),
        "{ep:#}"
    );
    api.api::<Pod>(Some("default"))
        .delete("d", &DeleteParams::default())
        .await
        .unwrap();
    wait_endpoints(&api, "web", "all three, not truncated", |ep| {
        ips(ep, 0, "addresses") == ["10.0.0.2", "10.0.0.3"]
            && ips(ep, 0, "notReadyAddresses") == ["10.0.0.1"]
            && ep["metadata"]
                .get("annotations")
                .is_none_or(|a| a.get(OVER_CAPACITY).is_none())
    })
    .await;
}
