//! Unit tests of the shared model, the watch-fed map and the rebuilder.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::watcher::Event;
use serde_json::json;
use tokio::sync::Notify;
use tokio::time::{sleep, Instant};

use super::model::{Proto, ServiceState, SliceInfo, SvcInfo, SvcPort};
use super::watch::{apply, rebuild_on_change};

/// The DNS's and the proxy's window.
const COALESCE: Duration = Duration::from_millis(100);

pub(crate) fn service(ns: &str, name: &str, cluster_ip: &str, ports: serde_json::Value) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": {"clusterIP": cluster_ip, "ports": ports}
    }))
    .unwrap()
}

pub(crate) fn slice(
    ns: &str,
    name: &str,
    svc: &str,
    endpoints: serde_json::Value,
) -> EndpointSlice {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns,
            "labels": {"kubernetes.io/service-name": svc}},
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": "web", "port": 80, "protocol": "TCP"}]
    }))
    .unwrap()
}

fn key(ns: &str, name: &str) -> (String, String) {
    (ns.to_string(), name.to_string())
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn the_cache_follows_watch_events_and_a_relist_drops_what_went_meanwhile() {
    let slim: fn(&Service) -> Option<SvcInfo> = |s| Some(SvcInfo::from_service(s));
    let a = service("default", "a", "10.96.0.1", json!([]));
    let b = service("default", "b", "10.96.0.2", json!([]));
    let mut map = std::collections::BTreeMap::new();
    let mut relist = None;
    // The first list.
    assert!(!apply(&mut map, &mut relist, Event::Init, slim));
    assert!(!apply(
        &mut map,
        &mut relist,
        Event::InitApply(a.clone()),
        slim
    ));
    assert!(!apply(
        &mut map,
        &mut relist,
        Event::InitApply(b.clone()),
        slim
    ));
    assert!(
        map.is_empty(),
        "nothing is swapped in before the list is done"
    );
    assert!(apply(&mut map, &mut relist, Event::InitDone, slim));
    assert_eq!(map.len(), 2);
    // An update that changes nothing DNS sees does not rebuild the zone.
    let mut a_labelled = a.clone();
    a_labelled.metadata.labels = Some([("x".to_string(), "y".to_string())].into());
    assert!(!apply(
        &mut map,
        &mut relist,
        Event::Apply(a_labelled),
        slim
    ));
    let a2 = service("default", "a", "10.96.0.9", json!([]));
    assert!(apply(&mut map, &mut relist, Event::Apply(a2.clone()), slim));
    assert_eq!(map[&key("default", "a")].cluster_ips, [ip("10.96.0.9")]);
    // The watch broke (control plane down) and b was deleted meanwhile:
    // the re-list has only a, and b goes.
    assert!(!apply(&mut map, &mut relist, Event::Init, slim));
    assert!(!apply(&mut map, &mut relist, Event::InitApply(a2), slim));
    assert_eq!(
        map.len(),
        2,
        "the old objects answer until the re-list is done"
    );
    assert!(apply(&mut map, &mut relist, Event::InitDone, slim));
    assert_eq!(
        map.keys().cloned().collect::<Vec<_>>(),
        [key("default", "a")]
    );
    assert!(apply(&mut map, &mut relist, Event::Delete(a), slim));
    assert!(map.is_empty());

    // Slices without a service-name label are not kept.
    let slim: fn(&EndpointSlice) -> Option<SliceInfo> = SliceInfo::from_slice;
    let mut unlabelled = slice("default", "s", "web", json!([]));
    unlabelled.metadata.labels = None;
    let mut slices = std::collections::BTreeMap::new();
    assert!(!apply(
        &mut slices,
        &mut None,
        Event::Apply(unlabelled),
        slim
    ));
    assert!(slices.is_empty());
}

/// When each build ran and the last change it saw.
type Builds = Arc<Mutex<Vec<(Instant, u64)>>>;

/// Starts the rebuilder with a build that records when it ran and the
/// last change it saw (`version`).
fn rebuilder(window: Duration) -> (Arc<Notify>, Arc<AtomicU64>, Builds) {
    let changed = Arc::new(Notify::new());
    let version = Arc::new(AtomicU64::new(0));
    let builds = Arc::new(Mutex::new(Vec::new()));
    let (v, b) = (version.clone(), builds.clone());
    tokio::spawn(rebuild_on_change(changed.clone(), window, move || {
        b.lock()
            .unwrap()
            .push((Instant::now(), v.load(Ordering::SeqCst)));
    }));
    (changed, version, builds)
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_changes_is_one_build_a_window_after_the_first() {
    let (changed, version, builds) = rebuilder(COALESCE);
    sleep(Duration::from_secs(1)).await;
    assert!(builds.lock().unwrap().is_empty(), "no change, no build");

    let start = Instant::now();
    for i in 1..=20 {
        version.store(i, Ordering::SeqCst);
        changed.notify_one();
        sleep(Duration::from_millis(4)).await;
    }
    sleep(COALESCE - Duration::from_millis(81)).await;
    assert!(builds.lock().unwrap().is_empty(), "built before the window");
    sleep(Duration::from_secs(5)).await;
    let builds = builds.lock().unwrap().clone();
    assert_eq!(
        builds.len(),
        1,
        "20 changes within the window, one build: {builds:?}"
    );
    assert_eq!(builds[0].0 - start, COALESCE);
    assert_eq!(builds[0].1, 20, "the build saw every change");
}

#[tokio::test(start_paused = true)]
async fn steady_changes_are_all_served_within_the_window_with_fewer_builds() {
    let (changed, version, builds) = rebuilder(COALESCE);
    let mut made = Vec::new();
    for i in 1..=40 {
        version.store(i, Ordering::SeqCst);
        changed.notify_one();
        made.push((i, Instant::now()));
        sleep(Duration::from_millis(30)).await;
    }
    sleep(Duration::from_secs(1)).await;
    let builds = builds.lock().unwrap().clone();
    for (i, at) in made {
        let (built, _) = builds
            .iter()
            .find(|(_, seen)| *seen >= i)
            .unwrap_or_else(|| panic!("change {i} never built: {builds:?}"));
        assert!(
            *built - at <= COALESCE,
            "change {i} waited {:?}",
            *built - at
        );
    }
    // 40 changes over 1.2 s: a build per window, not per change.
    assert!(
        (10..=13).contains(&builds.len()),
        "{} builds: {builds:?}",
        builds.len()
    );
}

#[test]
fn one_service_holds_what_dns_and_the_proxy_each_read() {
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"type": "NodePort", "clusterIP": "10.96.0.20", "clusterIPs": ["10.96.0.20"],
            "externalTrafficPolicy": "Local", "sessionAffinity": "ClientIP",
            "ports": [{"name": "http", "port": 80, "nodePort": 31234},
                      {"name": "dns", "port": 53, "protocol": "UDP"},
                      {"name": "sig", "port": 9, "protocol": "SCTP"}]}
    }))
    .unwrap();
    let info = SvcInfo::from_service(&svc);
    assert_eq!(info.cluster_ips, [ip("10.96.0.20")]);
    assert!(!info.headless);
    assert_eq!(info.external_name, None);
    assert!(info.external_local);
    assert_eq!(info.affinity, Some(super::model::DEFAULT_AFFINITY_TIMEOUT));
    assert_eq!(
        info.ports,
        [
            SvcPort {
                name: "http".into(),
                proto: Proto::Tcp,
                port: 80,
                node_port: Some(31234)
            },
            SvcPort {
                name: "dns".into(),
                proto: Proto::Udp,
                port: 53,
                node_port: None
            },
            SvcPort {
                name: "sig".into(),
                proto: Proto::Sctp,
                port: 9,
                node_port: None
            },
        ]
    );

    // A ClusterIP service has no node ports, whatever its ports say.
    let plain = SvcInfo::from_service(&service(
        "default",
        "p",
        "10.96.0.21",
        json!([{"port": 80, "nodePort": 31000}]),
    ));
    assert_eq!(plain.ports[0].node_port, None);
    assert_eq!(plain.ports[0].name, "");
    assert!(SvcInfo::from_service(&service("default", "h", "None", json!([]))).headless);

    let mut st = ServiceState::default();
    st.slices.insert(
        key("default", "web-a"),
        SliceInfo::from_slice(&slice(
            "default",
            "web-a",
            "web",
            json!([{"addresses": ["10.244.1.5"], "hostname": "web-0", "nodeName": "n1"}]),
        ))
        .unwrap(),
    );
    st.slices.insert(
        key("default", "other-a"),
        SliceInfo::from_slice(&slice("default", "other-a", "other", json!([]))).unwrap(),
    );
    st.slices.insert(
        key("prod", "web-a"),
        SliceInfo::from_slice(&slice("prod", "web-a", "web", json!([]))).unwrap(),
    );
    let of_web: Vec<_> = st.slices_of("default", "web").collect();
    assert_eq!(of_web.len(), 1);
    let ep = &of_web[0].endpoints[0];
    assert_eq!(ep.addresses, [ip("10.244.1.5")]);
    assert_eq!(ep.hostname.as_deref(), Some("web-0"));
    assert_eq!(ep.node.as_deref(), Some("n1"));
    assert!(ep.ready, "unknown readiness counts as ready");
    assert!(of_web[0].ipv4);
    assert_eq!(of_web[0].ports, [("web".to_string(), Proto::Tcp, 80)]);
}
