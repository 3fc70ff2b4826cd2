//! Aggregated discovery as kubectl uses it: with a fresh cache, one GET of
//! `/api` and one of `/apis` and no per-group-version discovery request,
//! and `kubectl api-resources` lists what the legacy documents list.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};

use bosun_test_support::binaries::kubectl_binary;
use common::ControlPlane;
use kube::Client;
use serde_json::Value;

/// What kubectl 1.32 sends for `/api` and `/apis`, JSON part.
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

/// Runs kubectl at `-v=6` with its own cache dir: stdout and the log.
fn kubectl(cp: &ControlPlane, cache: &Path, args: &[&str]) -> (String, String) {
    let out = Command::new(kubectl_binary())
        .arg("--kubeconfig")
        .arg(cp.kubeconfig_path())
        .arg("--cache-dir")
        .arg(cache)
        .arg("-v=6")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("kubectl is installed");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "kubectl {args:?}: {stderr}");
    (stdout, stderr)
}

/// The paths of the GETs in kubectl's `-v=6` log, query stripped.
fn gets(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| l.split_once("] GET ")?.1.split_whitespace().next())
        .map(|url| {
            let path = url
                .split_once("://")
                .map_or(url, |(_, rest)| rest.find('/').map_or("/", |i| &rest[i..]));
            path.split('?').next().unwrap_or(path).to_string()
        })
        .collect()
}

/// `/api/v1`, `/apis/<g>` and `/apis/<g>/<v>`: the legacy per-group
/// discovery requests.
fn is_legacy_discovery(path: &str) -> bool {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    matches!(segs.as_slice(), ["api", _] | ["apis", _] | ["apis", _, _])
}

fn assert_one_discovery_round(log: &str) {
    let gets = gets(log);
    let count = |p: &str| gets.iter().filter(|g| *g == p).count();
    assert_eq!(count("/api"), 1, "one GET /api: {gets:?}\n{log}");
    assert_eq!(count("/apis"), 1, "one GET /apis: {gets:?}\n{log}");
    let legacy: Vec<&String> = gets.iter().filter(|g| is_legacy_discovery(g)).collect();
    assert!(legacy.is_empty(), "per-group-version discovery: {legacy:?}");
}

async fn get(client: &Client, path: &str, accept: &str) -> (http::HeaderMap, Value) {
    let req = http::Request::builder()
        .uri(path)
        .header("Accept", accept)
        .body(kube::client::Body::empty())
        .unwrap();
    let res = client.send(req).await.expect("response");
    assert_eq!(res.status(), 200, "{path}");
    let head = res.headers().clone();
    let bytes = res.into_body().collect_bytes().await.expect("body");
    (head, serde_json::from_slice(&bytes).expect("JSON"))
}

/// `name` or `name.group` of every resource the legacy documents list,
/// as `kubectl api-resources -o name` prints them: each group's preferred
/// version's resources, then those only in its other versions.
async fn legacy_names(client: &Client, namespaced: Option<bool>) -> BTreeSet<String> {
    let mut lists = vec![(String::new(), "/api/v1".to_string())];
    let (head, apis) = get(client, "/apis", "application/json").await;
    assert_eq!(head["content-type"], "application/json");
    assert_eq!(apis["kind"], "APIGroupList");
    for g in apis["groups"].as_array().unwrap() {
        for v in g["versions"].as_array().unwrap() {
            let gv = v["groupVersion"].as_str().unwrap();
            lists.push((g["name"].as_str().unwrap().into(), format!("/apis/{gv}")));
        }
    }
    let mut names = BTreeSet::new();
    for (group, path) in lists {
        let (_, list) = get(client, &path, "application/json").await;
        for r in list["resources"].as_array().unwrap() {
            let name = r["name"].as_str().unwrap();
            if name.contains('/') || namespaced.is_some_and(|n| r["namespaced"] != n) {
                continue;
            }
            names.insert(if group.is_empty() {
                name.to_string()
            } else {
                format!("{name}.{group}")
            });
        }
    }
    names
}

fn lines(s: &str) -> BTreeSet<String> {
    s.lines().map(str::to_string).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_discovers_everything_in_one_request_per_root() {
    let cp = ControlPlane::start();
    let client = cp.client().await;

    // The aggregated form is what kubectl's Accept gets, typed as such.
    let (head, doc) = get(&client, "/apis", AGGREGATED).await;
    assert_eq!(
        head["content-type"],
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    assert_eq!(head["vary"], "Accept");
    assert_eq!(doc["kind"], "APIGroupDiscoveryList");

    let cache = cp.data_dir().join("kube-cache-api-resources");
    let (out, log) = kubectl(&cp, &cache, &["api-resources", "-o", "name"]);
    assert_one_discovery_round(&log);
    assert_eq!(lines(&out), legacy_names(&client, None).await);
    assert!(out.lines().any(|l| l == "deployments.apps"), "{out}");

    let cache = cp.data_dir().join("kube-cache-cluster-scoped");
    let args = ["api-resources", "--namespaced=false", "-o", "name"];
    let (out, log) = kubectl(&cp, &cache, &args);
    assert_one_discovery_round(&log);
    assert_eq!(lines(&out), legacy_names(&client, Some(false)).await);
    assert!(out.lines().any(|l| l == "namespaces"), "{out}");

    let cache = cp.data_dir().join("kube-cache-get");
    let (_, log) = kubectl(&cp, &cache, &["get", "deployments", "-A"]);
    assert_one_discovery_round(&log);
    assert!(
        gets(&log).iter().any(|g| g == "/apis/apps/v1/deployments"),
        "{log}"
    );
}

/// Every resource `kubectl api-resources -o name` lists against a
/// Kubernetes 1.32 server with its default API groups (kind's v1.32
/// node image): bosun serves each of them. bosun also serves
/// `metrics.k8s.io` (as a cluster with metrics-server does).
const KUBERNETES_1_32: &[&str] = &[
    "bindings",
    "componentstatuses",
    "configmaps",
    "endpoints",
    "events",
    "limitranges",
    "namespaces",
    "nodes",
    "persistentvolumeclaims",
    "persistentvolumes",
    "pods",
    "podtemplates",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "serviceaccounts",
    "services",
    "mutatingwebhookconfigurations.admissionregistration.k8s.io",
    "validatingadmissionpolicies.admissionregistration.k8s.io",
    "validatingadmissionpolicybindings.admissionregistration.k8s.io",
    "validatingwebhookconfigurations.admissionregistration.k8s.io",
    "customresourcedefinitions.apiextensions.k8s.io",
    "apiservices.apiregistration.k8s.io",
    "controllerrevisions.apps",
    "daemonsets.apps",
    "deployments.apps",
    "replicasets.apps",
    "statefulsets.apps",
    "selfsubjectreviews.authentication.k8s.io",
    "tokenreviews.authentication.k8s.io",
    "localsubjectaccessreviews.authorization.k8s.io",
    "selfsubjectaccessreviews.authorization.k8s.io",
    "selfsubjectrulesreviews.authorization.k8s.io",
    "subjectaccessreviews.authorization.k8s.io",
    "horizontalpodautoscalers.autoscaling",
    "cronjobs.batch",
    "jobs.batch",
    "certificatesigningrequests.certificates.k8s.io",
    "leases.coordination.k8s.io",
    "endpointslices.discovery.k8s.io",
    "events.events.k8s.io",
    "ingressclasses.networking.k8s.io",
    "ingresses.networking.k8s.io",
    "networkpolicies.networking.k8s.io",
    "runtimeclasses.node.k8s.io",
    "poddisruptionbudgets.policy",
    "clusterrolebindings.rbac.authorization.k8s.io",
    "clusterroles.rbac.authorization.k8s.io",
    "rolebindings.rbac.authorization.k8s.io",
    "roles.rbac.authorization.k8s.io",
    "priorityclasses.scheduling.k8s.io",
    "csidrivers.storage.k8s.io",
    "csinodes.storage.k8s.io",
    "csistoragecapacities.storage.k8s.io",
    "storageclasses.storage.k8s.io",
    "volumeattachments.storage.k8s.io",
];

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_api_resources_lists_every_kind_kubernetes_1_32_lists() {
    let cp = ControlPlane::start();
    let cache = cp.data_dir().join("kube-cache-parity");
    let (out, _) = kubectl(&cp, &cache, &["api-resources", "-o", "name"]);
    let served = lines(&out);
    let missing: Vec<&str> = KUBERNETES_1_32
        .iter()
        .copied()
        .filter(|r| !served.contains(*r))
        .collect();
    assert!(
        missing.is_empty(),
        "kubectl api-resources lacks {missing:?}:\n{out}"
    );
}
