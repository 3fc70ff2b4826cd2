//! Endpoints and EndpointSlices on real Docker: a Service over pods of
//! `bosun.local/web:1` (busybox httpd on port 80, ready once `/www/ready`
//! exists) lists the pods' real IPs, keeps an unready pod in
//! `notReadyAddresses`, follows readiness both ways and drops a deleted
//! pod; `bosun` and `kubectl` print them with kubectl's columns.

mod cluster;

use std::time::Duration;

use cluster::{ok, Cluster};
use k8s_openapi::api::core::v1::Endpoints;
use kube::api::Api;
use kube::Client;
use serde_json::{json, Value};

const UP: Duration = Duration::from_secs(90);

/// A web pod, labelled `app=web`, Ready while `/www/ready` is served.
fn web_pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "terminationGracePeriodSeconds": 2,
            "containers": [{
                "name": "web",
                "image": "bosun.local/web:1",
                "ports": [{"name": "http", "containerPort": 80}],
                "readinessProbe": {
                    "httpGet": {"path": "/ready", "port": "http"},
                    "periodSeconds": 1,
                    "failureThreshold": 1
                }
            }]
        }
    })
}

/// The IPs in `list` (`addresses` or `notReadyAddresses`) of every subset.
fn ips(ep: &Endpoints, not_ready: bool) -> Vec<String> {
    let mut out: Vec<String> = ep
        .subsets
        .iter()
        .flatten()
        .flat_map(|s| {
            let list = if not_ready {
                &s.not_ready_addresses
            } else {
                &s.addresses
            };
            list.iter().flatten().map(|a| a.ip.clone())
        })
        .collect();
    out.sort();
    out
}

/// Polls the Endpoints `web` until its ready and not-ready IPs are these.
async fn wait_endpoints(
    c: &Cluster,
    client: &Client,
    ready: &[&str],
    not_ready: &[&str],
) -> Endpoints {
    let mut ready: Vec<String> = ready.iter().map(|s| s.to_string()).collect();
    let mut not_ready: Vec<String> = not_ready.iter().map(|s| s.to_string()).collect();
    ready.sort();
    not_ready.sort();
    let api: Api<Endpoints> = Api::namespaced(client.clone(), "default");
    c.poll(
        &format!("endpoints web: ready {ready:?}, not ready {not_ready:?}"),
        UP,
        || async {
            let ep = api.get_opt("web").await.ok()??;
            (ips(&ep, false) == ready && ips(&ep, true) == not_ready).then_some(ep)
        },
    )
    .await
}

fn pod_ip(pod: &Value) -> String {
    pod["status"]["podIP"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_follow_real_pods() {
    let c = Cluster::start();
    let client = c.client().await;
    let manifest = c.dir.path().join("web-svc.yaml");
    std::fs::write(
        &manifest,
        r#"apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector:
    app: web
  ports:
  - name: http
    port: 8080
    targetPort: http
"#,
    )
    .unwrap();
    ok(c.bosun().arg("apply").arg("-f").arg(&manifest));
    for name in ["web-a", "web-b", "web-c"] {
        c.create_pod(&client, web_pod(name)).await;
    }
    let mut ip = std::collections::HashMap::new();
    for name in ["web-a", "web-b", "web-c"] {
        let p = c
            .wait_pod(&client, name, "Running with an IP", UP, |p| {
                p["status"]["phase"] == "Running" && !pod_ip(p).is_empty()
            })
            .await;
        ip.insert(name, pod_ip(&p));
    }
    let (a, b, cc) = (
        ip["web-a"].as_str(),
        ip["web-b"].as_str(),
        ip["web-c"].as_str(),
    );

    // Nobody serves /ready yet: all three are not ready.
    wait_endpoints(&c, &client, &[], &[a, b, cc]).await;
    // a and b become ready; c stays not ready.
    c.exec("web-a", "web", &["touch", "/www/ready"]);
    c.exec("web-b", "web", &["touch", "/www/ready"]);
    let ep = wait_endpoints(&c, &client, &[a, b], &[cc]).await;
    let subset = &ep.subsets.as_ref().unwrap()[0];
    let port = &subset.ports.as_ref().unwrap()[0];
    assert_eq!(
        (port.name.as_deref(), port.port),
        (Some("http"), 80),
        "the named port resolved"
    );
    let first = &subset.addresses.as_ref().unwrap()[0];
    assert_eq!(first.node_name.as_deref(), Some(c.node.as_str()));
    let target = first.target_ref.as_ref().unwrap();
    assert_eq!(target.kind.as_deref(), Some("Pod"));

    // The listed addresses are the pods' real ones: c reaches a's web server.
    let body = c.exec(
        "web-c",
        "web",
        &["wget", "-qO-", &format!("http://{a}:80/")],
    );
    assert!(body.contains("web v1"), "{body}");

    // bosun and kubectl print them with kubectl's columns.
    let mut sorted = [a, b];
    sorted.sort();
    let want = format!("{}:80,{}:80", sorted[0], sorted[1]);
    let listed = ok(c.bosun().args(["get", "endpoints", "web"]));
    assert!(listed.starts_with("NAME"), "{listed}");
    assert!(listed.contains("ENDPOINTS"), "{listed}");
    assert!(listed.contains(&want), "{listed}");
    // kubectl prints the same (the harness fails without kubectl).
    let mut kubectl = c.kubectl();
    let listed = ok(kubectl.args(["get", "svc,ep", "web"]));
    eprintln!("kubectl get svc,ep web\n{listed}");
    assert!(listed.contains(&want), "{listed}");
    let mut kubectl = c.kubectl();
    let slices = ok(kubectl.args([
        "get",
        "endpointslices",
        "-l",
        "kubernetes.io/service-name=web",
    ]));
    eprintln!("kubectl get endpointslices -l kubernetes.io/service-name=web\n{slices}");
    assert!(slices.contains("ADDRESSTYPE"), "{slices}");
    assert!(
        slices.contains("IPv4") && slices.contains(" 80 "),
        "{slices}"
    );
    for ip in [a, b, cc] {
        assert!(slices.contains(ip), "{ip} missing from\n{slices}");
    }
    // describe reads the slices, which their own controller writes: wait
    // for it to show the two ready pods too (in the slice's order).
    let mut wanted: Vec<String> = want.split(',').map(String::from).collect();
    wanted.sort();
    let described = c
        .poll(
            "kubectl describe svc to list the ready endpoints",
            UP,
            || async {
                let described = ok(c.kubectl().args(["describe", "svc", "web"]));
                let mut listed: Vec<String> = described
                    .lines()
                    .find_map(|l| l.strip_prefix("Endpoints:"))?
                    .trim()
                    .split(',')
                    .map(String::from)
                    .collect();
                listed.sort();
                (listed == wanted).then_some(described)
            },
        )
        .await;
    eprintln!("kubectl describe svc web\n{described}");
    let all = ok(c.bosun().args(["get", "svc,ep,endpointslices"]));
    eprintln!("bosun get svc,ep,endpointslices\n{all}");
    assert!(all.contains("endpointslice.discovery.k8s.io/web-"), "{all}");
    let described = ok(c.bosun().args(["describe", "svc", "web"]));
    assert_eq!(described_endpoints(&described), wanted, "{described}");

    // Readiness lost moves a to notReadyAddresses.
    c.exec("web-a", "web", &["rm", "/www/ready"]);
    wait_endpoints(&c, &client, &[b], &[a, cc]).await;

    // A deleted pod leaves at once (terminating), and for good.
    ok(c.bosun().args(["delete", "pod", "web-b"]));
    wait_endpoints(&c, &client, &[], &[a, cc]).await;

    // Deleting the service deletes its Endpoints and slices.
    ok(c.bosun().args(["delete", "svc", "web"]));
    let api: Api<Endpoints> = Api::namespaced(client.clone(), "default");
    c.poll("the Endpoints deleted", UP, || async {
        api.get_opt("web").await.ok()?.is_none().then_some(())
    })
    .await;
    let slices = ok(c.bosun().args([
        "get",
        "endpointslices",
        "-l",
        "kubernetes.io/service-name=web",
    ]));
    assert!(!slices.contains("web-"), "{slices}");
}

/// The addresses on describe's `Endpoints:` line, sorted (describe lists
/// them in the slices' order).
fn described_endpoints(described: &str) -> Vec<String> {
    let mut listed: Vec<String> = described
        .lines()
        .find_map(|l| l.strip_prefix("Endpoints:"))
        .unwrap_or_default()
        .trim()
        .split(',')
        .map(String::from)
        .collect();
    listed.sort();
    listed
}
