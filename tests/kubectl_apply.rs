//! The real `kubectl apply --server-side` against a running `bosun-control`:
//! applying twice changes nothing, another field manager changing a field
//! gets kubectl's conflict message naming the field and its manager,
//! `--force-conflicts` takes it, and an object made by client-side
//! `kubectl apply` migrates to server-side apply as kubectl migrates it.

mod common;

use common::Cluster;
use serde_json::Value;

fn get_json(c: &Cluster, args: &[&str]) -> Value {
    let mut argv = vec!["get"];
    argv.extend_from_slice(args);
    argv.extend_from_slice(&["-o", "json", "--show-managed-fields"]);
    serde_json::from_str(c.kubectl(&argv).ok()).expect("kubectl -o json prints JSON")
}

fn deployment(replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
      - name: web
        image: bosun.local/web:1
        ports:
        - containerPort: 8080
"
    )
}

fn managers(obj: &Value) -> Vec<(String, String)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e["manager"].as_str().unwrap_or("").to_string(),
                e["operation"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn owns(obj: &Value, manager: &str, path: &[&str]) -> bool {
    obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["manager"] == manager)
        .any(|e| {
            path.iter()
                .try_fold(&e["fieldsV1"], |v, k| v.get(*k))
                .is_some()
        })
}

#[test]
fn kubectl_server_side_apply_twice_conflicts_and_force() {
    // No deployment controller: nothing but kubectl writes the object.
    let c = Cluster::start_with(&["--controllers=*,-deployment"]);
    let two = c.write("web-2.yaml", &deployment(2));
    let out = c.kubectl(&["apply", "--server-side", "-f", &two]);
    assert!(
        out.ok().contains("deployment.apps/web serverside-applied"),
        "{}",
        out.stdout
    );
    let first = get_json(&c, &["deployment", "web"]);
    assert_eq!(first["spec"]["replicas"], 2);
    assert_eq!(managers(&first), [("kubectl".into(), "Apply".into())]);
    assert!(owns(&first, "kubectl", &["f:spec", "f:replicas"]));

    // Twice: a no-op, the same resourceVersion and ownership.
    c.kubectl(&["apply", "--server-side", "-f", &two]).ok();
    let again = get_json(&c, &["deployment", "web"]);
    assert_eq!(
        again["metadata"]["resourceVersion"],
        first["metadata"]["resourceVersion"]
    );
    assert_eq!(
        again["metadata"]["managedFields"],
        first["metadata"]["managedFields"]
    );

    // Another manager changing replicas gets a conflict naming it.
    let three = c.write("web-3.yaml", &deployment(3));
    let err = c
        .kubectl(&[
            "apply",
            "--server-side",
            "--field-manager=autoscaler",
            "-f",
            &three,
        ])
        .fails()
        .to_string();
    assert!(
        err.contains(
            "Apply failed with 1 conflict: conflict with \"kubectl\" using apps/v1: .spec.replicas"
        ),
        "{err}"
    );
    assert!(err.contains("--force-conflicts"), "kubectl explains: {err}");
    assert_eq!(get_json(&c, &["deployment", "web"])["spec"]["replicas"], 2);

    // --force-conflicts takes it.
    c.kubectl(&[
        "apply",
        "--server-side",
        "--field-manager=autoscaler",
        "--force-conflicts",
        "-f",
        &three,
    ])
    .ok();
    let forced = get_json(&c, &["deployment", "web"]);
    assert_eq!(forced["spec"]["replicas"], 3);
    assert!(owns(&forced, "autoscaler", &["f:spec", "f:replicas"]));
    assert!(!owns(&forced, "kubectl", &["f:spec", "f:replicas"]));
    assert!(owns(&forced, "kubectl", &["f:spec", "f:template"]));
}

#[test]
fn client_side_apply_keeps_working_and_migrates_to_server_side() {
    let c = Cluster::start();
    let cm = |data: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n{data}")
    };
    let both = c.write("both.yaml", &cm("  a: \"1\"\n  b: \"2\"\n"));
    c.kubectl(&["apply", "-f", &both]).ok();
    let csa = get_json(&c, &["configmap", "cfg"]);
    assert_eq!(
        managers(&csa),
        [("kubectl-client-side-apply".into(), "Update".into())]
    );
    assert!(csa["metadata"]["annotations"]
        .get("kubectl.kubernetes.io/last-applied-configuration")
        .is_some());
    // Client-side apply still merges as before.
    let only_a = c.write("a.yaml", &cm("  a: \"1\"\n"));
    c.kubectl(&["apply", "-f", &both]).ok();

    // Server-side apply of the same file takes the client-side manager's
    // fields over (kubectl rewrites managedFields after the apply).
    c.kubectl(&["apply", "--server-side", "-f", &both]).ok();
    let ssa = get_json(&c, &["configmap", "cfg"]);
    assert!(owns(&ssa, "kubectl", &["f:data", "f:b"]), "{ssa:#}");
    assert!(
        !managers(&ssa)
            .iter()
            .any(|(m, _)| m == "kubectl-client-side-apply"),
        "{:?}",
        managers(&ssa)
    );
    // So a key dropped from the file is removed by the next apply.
    c.kubectl(&["apply", "--server-side", "-f", &only_a]).ok();
    let out = get_json(&c, &["configmap", "cfg"]);
    assert_eq!(out["data"], serde_json::json!({"a": "1"}));
}
