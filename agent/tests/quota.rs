//! ResourceQuota and LimitRange on real Docker with the real `kubectl`:
//! a quota of 2 pods refuses the third with upstream's message and lists
//! as kubectl prints it; deleting a pod frees quota for a new one; a
//! Deployment whose pod would exceed the quota shows its ReplicaSet's
//! FailedCreate event and ReplicaFailure condition; a LimitRange's
//! defaults appear on a created pod's containers (which runs) and a pod
//! over its max is refused.

mod cluster;

use std::process::Output;
use std::time::Duration;

use cluster::Cluster;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams};

const UP: Duration = Duration::from_secs(120);

fn kubectl(c: &Cluster, args: &[&str]) -> Output {
    c.kubectl().args(args).output().expect("kubectl runs")
}

fn kubectl_ok(c: &Cluster, args: &[&str]) -> String {
    cluster::kubectl_stdout(kubectl(c, args), args, || c.control_log())
}

fn kubectl_err(c: &Cluster, args: &[&str]) -> String {
    let out = kubectl(c, args);
    assert!(!out.status.success(), "kubectl {args:?} should fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

async fn wait_running(c: &Cluster, pods: &Api<Pod>, name: &str) {
    c.poll(&format!("pod {name} Running"), UP, || async {
        let p = pods.get_opt(name).await.ok()??;
        (p.status?.phase.as_deref() == Some("Running")).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_refuses_the_third_pod_and_limit_ranges_default_and_cap() {
    let c = Cluster::start();
    let client = c.client().await;
    c.wait_nodes_ready(&client).await;

    // A quota of 2 pods; the controller fills in its status.
    kubectl_ok(&c, &["create", "namespace", "team"]);
    kubectl_ok(
        &c,
        &["create", "quota", "pods", "-n", "team", "--hard=pods=2"],
    );
    c.poll("the quota's usage computed", UP, || async {
        let out = kubectl_ok(&c, &["get", "quota", "-n", "team"]);
        let lines: Vec<&str> = out.lines().collect();
        (lines.len() == 2
            && lines[0].split_whitespace().collect::<Vec<_>>()
                == ["NAME", "AGE", "REQUEST", "LIMIT"]
            && lines[1].contains("pods: 0/2"))
        .then_some(())
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "team");
    for name in ["one", "two"] {
        kubectl_ok(
            &c,
            &["run", name, "-n", "team", "--image=bosun.local/web:1"],
        );
    }
    for name in ["one", "two"] {
        wait_running(&c, &pods, name).await;
    }
    let err = kubectl_err(
        &c,
        &["run", "three", "-n", "team", "--image=bosun.local/web:1"],
    );
    assert!(
        err.contains("Error from server (Forbidden): pods \"three\" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=2, limited: pods=2"),
        "{err}"
    );
    assert!(kubectl_ok(&c, &["get", "quota", "pods", "-n", "team"]).contains("pods: 2/2"));
    let described = kubectl_ok(&c, &["describe", "quota", "pods", "-n", "team"]);
    assert!(
        described
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["pods", "2", "2"]),
        "{described}"
    );
    let explained = kubectl_ok(&c, &["explain", "resourcequota.spec.hard"]);
    assert!(
        explained.contains("KIND:       ResourceQuota")
            || explained.contains("KIND:     ResourceQuota"),
        "{explained}"
    );

    // A Deployment's pod is refused too: its ReplicaSet says so.
    kubectl_ok(
        &c,
        &[
            "create",
            "deployment",
            "web",
            "-n",
            "team",
            "--image=bosun.local/web:1",
        ],
    );
    let events: Api<Event> = Api::namespaced(client.clone(), "team");
    let message = c
        .poll("the ReplicaSet's FailedCreate event", UP, || async {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items.into_iter().find_map(|e| {
                (e.reason.as_deref() == Some("FailedCreate")
                    && e.involved_object.kind.as_deref() == Some("ReplicaSet"))
                .then(|| e.message.unwrap_or_default())
            })
        })
        .await;
    assert!(
        message.starts_with("Error creating: pods \"web-")
            && message.ends_with(
                "is forbidden: exceeded quota: pods, requested: pods=1, used: pods=2, limited: pods=2"
            ),
        "{message}"
    );
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "team");
    let condition = c
        .poll("the ReplicaFailure condition", UP, || async {
            let list = sets.list(&ListParams::default()).await.ok()?;
            list.items.into_iter().find_map(|rs| {
                rs.status?
                    .conditions?
                    .into_iter()
                    .find(|c| c.type_.as_deref() == Some("ReplicaFailure"))
            })
        })
        .await;
    assert_eq!(condition.reason.as_deref(), Some("FailedCreate"));
    kubectl_ok(&c, &["delete", "deployment", "web", "-n", "team"]);

    // Deleting a pod frees quota: a new one gets in.
    kubectl_ok(&c, &["delete", "pod", "one", "-n", "team", "--wait=true"]);
    c.poll("a new pod admitted after the deletion", UP, || async {
        kubectl(
            &c,
            &["run", "three", "-n", "team", "--image=bosun.local/web:1"],
        )
        .status
        .success()
        .then_some(())
    })
    .await;
    wait_running(&c, &pods, "three").await;

    // A LimitRange: defaults on a pod that names nothing, max enforced.
    kubectl_ok(&c, &["create", "namespace", "capped"]);
    let range = c.dir.path().join("limits.yaml");
    std::fs::write(
        &range,
        "apiVersion: v1
kind: LimitRange
metadata:
  name: cpu-limits
  namespace: capped
spec:
  limits:
  - type: Container
    default: {cpu: 200m, memory: 64Mi}
    defaultRequest: {cpu: 100m}
    max: {cpu: 500m}
",
    )
    .unwrap();
    kubectl_ok(&c, &["apply", "-f", range.to_str().unwrap()]);
    let listed = kubectl_ok(&c, &["get", "limits", "-n", "capped"]);
    assert_eq!(
        listed
            .lines()
            .next()
            .map(|h| h.split_whitespace().collect::<Vec<_>>()),
        Some(vec!["NAME", "CREATED", "AT"]),
        "{listed}"
    );
    kubectl_ok(
        &c,
        &["run", "small", "-n", "capped", "--image=bosun.local/web:1"],
    );
    let resources = kubectl_ok(
        &c,
        &[
            "get",
            "pod",
            "small",
            "-n",
            "capped",
            "-o",
            "jsonpath={.spec.containers[0].resources}",
        ],
    );
    let resources: serde_json::Value = serde_json::from_str(&resources).unwrap();
    assert_eq!(
        resources,
        serde_json::json!({"limits": {"cpu": "200m", "memory": "64Mi"}, "requests": {"cpu": "100m", "memory": "64Mi"}})
    );
    let capped: Api<Pod> = Api::namespaced(client.clone(), "capped");
    wait_running(&c, &capped, "small").await;
    let err = kubectl_err(
        &c,
        &[
            "run",
            "big",
            "-n",
            "capped",
            "--image=bosun.local/web:1",
            "--overrides={\"spec\":{\"containers\":[{\"name\":\"big\",\"image\":\"bosun.local/web:1\",\"resources\":{\"limits\":{\"cpu\":\"1\"}}}]}}",
        ],
    );
    assert!(
        err.contains(
            "pods \"big\" is forbidden: maximum cpu usage per Container is 500m, but limit is 1"
        ),
        "{err}"
    );
}
