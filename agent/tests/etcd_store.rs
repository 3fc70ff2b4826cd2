//! The control plane on etcd (`bosun-control --store etcd://...`) end to
//! end: a Deployment runs to Ready on a real agent, and a restart of
//! bosun-control finds every object again, in etcd rather than a file in
//! its data dir. Skipped, with the reason printed, only when etcd is not
//! installed (scripts/test.sh installs Debian's etcd-server).

mod cluster;

use std::collections::BTreeSet;
use std::time::Duration;

use cluster::{kubectl_stdout, Cluster};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;

const READY: Duration = Duration::from_secs(120);

const DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: web
        image: bosun.local/web:1
        readinessProbe:
          httpGet: {path: /, port: 80}
          periodSeconds: 1
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data: {greeting: hello}
"#;

/// Every object of the kinds a user and the controllers made, as
/// `kind/namespace/name uid` lines.
fn objects(c: &Cluster) -> BTreeSet<String> {
    let args = [
        "get",
        "namespaces,nodes,deployments,replicasets,pods,configmaps,serviceaccounts,services,\
         clusterroles,clusterrolebindings,storageclasses,priorityclasses",
        "-A",
        "-o",
        "jsonpath={range .items[*]}{.kind}/{.metadata.namespace}/{.metadata.name} {.metadata.uid}{\"\\n\"}{end}",
    ];
    let out = kubectl_stdout(c.kubectl().args(args).output().unwrap(), &args, || {
        c.control_log()
    });
    out.lines().map(str::to_string).collect()
}

async fn wait_ready(c: &Cluster, client: &kube::Client) -> Deployment {
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    c.poll("deployment web to have 2 ready replicas", READY, || {
        let deployments = deployments.clone();
        async move {
            let d = deployments.get("web").await.ok()?;
            let status = d.status.as_ref()?;
            (status.ready_replicas == Some(2) && status.updated_replicas == Some(2)).then_some(d)
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_runs_on_etcd_and_a_restart_keeps_every_object() {
    let Some(mut c) = Cluster::start_on_etcd() else {
        return;
    };
    let client = c.client().await;
    c.wait_nodes_ready(&client).await;
    let manifest = c.dir.path().join("web.yaml");
    std::fs::write(&manifest, DEPLOYMENT).unwrap();
    let args = ["apply", "-f", manifest.to_str().unwrap()];
    kubectl_stdout(c.kubectl().args(args).output().unwrap(), &args, || {
        c.control_log()
    });
    let before_restart = wait_ready(&c, &client).await;
    assert!(
        !c.dir.path().join("control/store.redb").exists(),
        "bosun-control on etcd made an embedded store file"
    );
    assert!(
        c.control_log().contains("store: etcd"),
        "the control plane says which store it uses"
    );
    let before = objects(&c);
    for made in [
        "Deployment/default/web ",
        "ReplicaSet/default/web-",
        "Pod/default/web-",
        "ConfigMap/default/settings ",
        &format!("Node//{} ", c.node),
    ] {
        assert!(
            before.iter().any(|o| o.starts_with(made)),
            "no {made} among {before:#?}"
        );
    }

    c.stop_control()
        .expect("bosun-control stops on SIGTERM within 20 s");
    c.start_control();
    let client = c.client().await;
    let after_restart = wait_ready(&c, &client).await;
    let after = objects(&c);
    let lost: Vec<_> = before.difference(&after).collect();
    assert!(lost.is_empty(), "lost across the restart: {lost:#?}");
    assert_eq!(
        before_restart.metadata.uid, after_restart.metadata.uid,
        "the same Deployment"
    );
    // Its revisions are etcd's, and go on from where they were.
    let rv = |d: &Deployment| -> u64 {
        d.metadata
            .resource_version
            .as_deref()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(rv(&after_restart) >= rv(&before_restart));
    let cm = c
        .kubectl()
        .args([
            "get",
            "configmap",
            "settings",
            "-o",
            "jsonpath={.data.greeting}",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&cm.stdout), "hello");
}
