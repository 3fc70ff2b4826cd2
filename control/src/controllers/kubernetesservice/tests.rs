//! The kubernetes Service keeper against the real API handlers on an
//! in-memory store.

use std::time::Duration;

use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

use super::*;
use crate::toolkit::testing::{eventually, TestApi};

const WAIT: Duration = Duration::from_secs(10);

fn options(ip: &str) -> KubernetesServiceOptions {
    KubernetesServiceOptions {
        service_ip: Ipv4Addr::new(10, 96, 0, 1),
        advertise: Some(ip.parse().unwrap()),
        port: 6443,
    }
}

async fn endpoint_ip(api: &TestApi) -> Option<String> {
    let e = api
        .api::<Endpoints>(Some(NAMESPACE))
        .get_opt(NAME)
        .await
        .unwrap()?;
    let subset = e.subsets?.into_iter().next()?;
    let port = subset.ports?.first()?.port;
    let ip = subset.addresses?.first()?.ip.clone();
    (port == 6443).then_some(ip)
}

async fn slice_ip(api: &TestApi) -> Option<String> {
    let s = api
        .api::<EndpointSlice>(Some(NAMESPACE))
        .get_opt(NAME)
        .await
        .unwrap()?;
    (s.metadata.labels?.get("kubernetes.io/service-name")? == NAME).then_some(())?;
    (s.ports?.first()?.port == Some(6443)).then_some(())?;
    s.endpoints?.first()?.addresses.first().cloned()
}

#[tokio::test]
async fn the_service_and_its_endpoints_are_made_and_repaired() {
    let api = TestApi::start().await;
    tokio::spawn(start(api.client.clone(), options("192.0.2.7")));
    let services = api.api::<Service>(Some(NAMESPACE));
    let svc = eventually("the kubernetes Service", WAIT, || async {
        services.get_opt(NAME).await.unwrap()
    })
    .await;
    let spec = svc.spec.unwrap();
    assert_eq!(spec.cluster_ip.as_deref(), Some("10.96.0.1"));
    assert_eq!(spec.selector, None);
    let port = &spec.ports.unwrap()[0];
    assert_eq!(
        (port.name.as_deref(), port.port, port.target_port.clone()),
        (
            Some("https"),
            443,
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(6443))
        )
    );
    eventually("its Endpoints", WAIT, || async {
        (endpoint_ip(&api).await.as_deref() == Some("192.0.2.7")).then_some(())
    })
    .await;
    eventually("its EndpointSlice", WAIT, || async {
        (slice_ip(&api).await.as_deref() == Some("192.0.2.7")).then_some(())
    })
    .await;

    // Deleted: made again, on the same address.
    services
        .delete(NAME, &DeleteParams::default())
        .await
        .unwrap();
    let again = eventually("the Service made again", WAIT, || async {
        services.get_opt(NAME).await.unwrap()
    })
    .await;
    assert_eq!(again.spec.unwrap().cluster_ip.as_deref(), Some("10.96.0.1"));

    // Ports edited: put back.
    services
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"ports": [{"name": "web", "port": 80}]}})),
        )
        .await
        .unwrap();
    eventually("the ports put back", WAIT, || async {
        let s = services.get(NAME).await.unwrap();
        (s.spec?.ports?[0].port == 443).then_some(())
    })
    .await;

    // Endpoints pointed elsewhere or deleted: repaired.
    api.api::<Endpoints>(Some(NAMESPACE))
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"subsets": [{"addresses": [{"ip": "192.0.2.99"}],
                "ports": [{"name": "https", "port": 1}]}]})),
        )
        .await
        .unwrap();
    api.api::<EndpointSlice>(Some(NAMESPACE))
        .delete(NAME, &DeleteParams::default())
        .await
        .unwrap();
    eventually("the Endpoints repaired", WAIT, || async {
        (endpoint_ip(&api).await.as_deref() == Some("192.0.2.7")).then_some(())
    })
    .await;
    eventually("the EndpointSlice made again", WAIT, || async {
        (slice_ip(&api).await.as_deref() == Some("192.0.2.7")).then_some(())
    })
    .await;
}

#[tokio::test]
async fn without_an_advertise_address_only_the_service_is_made() {
    let api = TestApi::start().await;
    let o = KubernetesServiceOptions {
        advertise: None,
        ..options("192.0.2.7")
    };
    reconcile(&api.client, &o).await.unwrap();
    assert!(api
        .api::<Service>(Some(NAMESPACE))
        .get_opt(NAME)
        .await
        .unwrap()
        .is_some());
    assert_eq!(endpoint_ip(&api).await, None);
}

#[test]
fn a_right_service_needs_no_repair() {
    let o = options("192.0.2.7");
    let mut live = desired_service(&o);
    assert_eq!(service_repair(&live, &o), None);
    live["spec"]["type"] = json!("NodePort");
    assert!(service_repair(&live, &o).is_some());
    let want = desired_slice(&o, "192.0.2.7".parse().unwrap());
    assert_eq!(slice_repair(&want, &want), Ok(None));
    let v6 = desired_slice(&o, "2001:db8::1".parse().unwrap());
    assert_eq!(slice_repair(&v6, &want), Err(()));
}

#[test]
fn the_default_advertise_address_follows_the_default_route() {
    let routes =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
        docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n\
        eth1\t00000000\t010200C0\t0002\t0\t0\t0\t00000000\t0\t0\t0\n\
        eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n";
    assert_eq!(default_route_interface(routes).as_deref(), Some("eth0"));
    assert_eq!(default_route_interface("Iface\n"), None);
    let specific: IpAddr = "192.0.2.5".parse().unwrap();
    assert_eq!(default_advertise_address(specific), Some(specific));
}

#[tokio::test]
async fn the_endpoints_list_every_live_api_server_and_a_leaving_one_goes_at_once() {
    let api = TestApi::start().await;
    let one = options("192.0.2.7");
    let two = KubernetesServiceOptions {
        port: 6444,
        ..options("192.0.2.7")
    };
    let three = options("192.0.2.8");
    for o in [&one, &two, &three] {
        reconcile(&api.client, o).await.unwrap();
    }
    // Every pass now agrees on all three (no server writes only itself).
    reconcile(&api.client, &one).await.unwrap();
    let endpoints = || async {
        let e = api
            .api::<Endpoints>(Some(NAMESPACE))
            .get(NAME)
            .await
            .unwrap();
        let mut seen: Vec<String> = e
            .subsets
            .unwrap_or_default()
            .into_iter()
            .flat_map(|s| {
                let port = s.ports.unwrap()[0].port;
                s.addresses
                    .unwrap_or_default()
                    .into_iter()
                    .map(move |a| format!("{}:{port}", a.ip))
            })
            .collect();
        seen.sort();
        seen
    };
    assert_eq!(
        endpoints().await,
        ["192.0.2.7:6443", "192.0.2.7:6444", "192.0.2.8:6443"]
    );
    let slice = api
        .api::<EndpointSlice>(Some(NAMESPACE))
        .get(NAME)
        .await
        .unwrap();
    let mut addresses: Vec<String> = slice
        .endpoints
        .unwrap_or_default()
        .into_iter()
        .flat_map(|e| e.addresses)
        .collect();
    addresses.sort();
    assert_eq!(addresses, ["192.0.2.7", "192.0.2.8"]);
    // The identity Leases, as upstream labels them.
    let leases = api
        .api::<k8s_openapi::api::coordination::v1::Lease>(Some("kube-system"))
        .list(
            &kube::api::ListParams::default()
                .labels("apiserver.kubernetes.io/identity=kube-apiserver"),
        )
        .await
        .unwrap();
    assert_eq!(leases.items.len(), 3);
    // The Service's target port is left as any live server's.
    let svc = api.api::<Service>(Some(NAMESPACE)).get(NAME).await.unwrap();
    let before = svc.spec.unwrap().ports.unwrap()[0].target_port.clone();
    reconcile(&api.client, &two).await.unwrap();
    let svc = api.api::<Service>(Some(NAMESPACE)).get(NAME).await.unwrap();
    assert_eq!(svc.spec.unwrap().ports.unwrap()[0].target_port, before);

    leave(&api.client, &three).await.unwrap();
    assert_eq!(endpoints().await, ["192.0.2.7:6443", "192.0.2.7:6444"]);
    reconcile(&api.client, &one).await.unwrap();
    assert_eq!(endpoints().await, ["192.0.2.7:6443", "192.0.2.7:6444"]);
}
