//! The in-process controllers wait out API Priority and Fairness as
//! client-go's do: while a level of one seat, without queues, refuses the
//! ReplicaSet controller's requests (429, `Retry-After: 1`) because
//! another request holds that seat, a Deployment's scale to zero waits,
//! and completes once the seat frees, with no failed sync: each refused
//! DELETE is sent again after the second the server asked for.
//!
//! The seat is held as in `flowcontrol.rs` (`common::apf`): a create whose
//! body is sent slowly, by a user of its own flow schema on the same level,
//! so the held request and the controller's compete for the one seat.

mod common;

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use bosun_test_support::binaries::kubectl_binary;
use common::apf::{finish, hold_seat, metric, metric_with, DISPATCHED, REJECTED};
use common::{wait_for, ControlPlane};

fn kubectl(cp: &ControlPlane, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(kubectl_binary())
        .arg("--kubeconfig")
        .arg(cp.kubeconfig_path())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl is installed");
    let mut input = child.stdin.take().unwrap();
    std::io::Write::write_all(&mut input, stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

/// kubectl's stdout, asserting it succeeded.
fn ok(cp: &ControlPlane, args: &[&str], stdin: Option<&str>) -> String {
    let out = kubectl(cp, args, stdin);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One seat, refusing what does not fit; the ReplicaSet controller's
/// service account and the user `holder` both go to it.
const ONE_SEAT: &str = r#"
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata:
  name: one-seat
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    limitResponse:
      type: Reject
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata:
  name: replicaset-controller
spec:
  priorityLevelConfiguration:
    name: one-seat
  matchingPrecedence: 300
  rules:
  - subjects:
    - kind: ServiceAccount
      serviceAccount:
        namespace: kube-system
        name: replicaset-controller
    resourceRules:
    - verbs: ["*"]
      apiGroups: ["*"]
      resources: ["*"]
      clusterScope: true
      namespaces: ["*"]
"#;

const HOLDER: &str = r#"
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata:
  name: holder
spec:
  priorityLevelConfiguration:
    name: one-seat
  matchingPrecedence: 300
  rules:
  - subjects:
    - kind: User
      user:
        name: holder
    resourceRules:
    - verbs: ["*"]
      apiGroups: ["*"]
      resources: ["*"]
      clusterScope: true
      namespaces: ["*"]
"#;

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx
"#;

/// The names of the Deployment's pods.
fn pods(cp: &ControlPlane) -> Vec<String> {
    let out = ok(
        cp,
        &[
            "get", "pods", "-n", "default", "-l", "app=web", "-o", "name",
        ],
        None,
    );
    out.lines().map(String::from).collect()
}

/// The scheduler's requests go to the level `one-seat` too.
const SCHEDULER_ON_ONE_SEAT: &str = r#"
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata:
  name: scheduler-one-seat
spec:
  priorityLevelConfiguration:
    name: one-seat
  matchingPrecedence: 300
  rules:
  - subjects:
    - kind: User
      user:
        name: system:kube-scheduler
    resourceRules:
    - verbs: ["*"]
      apiGroups: ["*"]
      resources: ["*"]
      clusterScope: true
      namespaces: ["*"]
"#;

/// `kubectl scale deployment web --replicas=N`.
fn scale_web(cp: &ControlPlane, replicas: u32) {
    let replicas = format!("--replicas={replicas}");
    let args = ["scale", "deployment", "web", "-n", "default", &replicas];
    ok(cp, &args, None);
}

/// The ReplicaSet controller's failed syncs so far.
async fn failed_syncs(admin: &kube::Client) -> f64 {
    let name = "controller_runtime_reconcile_errors_total";
    metric_with(admin, name, "controller", "replicaset").await
}

/// Makes the user `holder` (cluster-admin) and its schema on the level
/// `one-seat`, and waits until the holder's requests go to that schema:
/// the configuration holding the schemas applied before it is then in
/// force too (they are stored in order).
async fn holder_schema_in_force(cp: &ControlPlane) {
    ok(cp, &["apply", "-f", "-"], Some(HOLDER));
    ok(
        cp,
        &[
            "create",
            "clusterrolebinding",
            "holder-admin",
            "--clusterrole=cluster-admin",
            "--user=holder",
        ],
        None,
    );
    let holder_uid = ok(
        cp,
        &[
            "get",
            "flowschema",
            "holder",
            "-o",
            "jsonpath={.metadata.uid}",
        ],
        None,
    );
    let mut config = cp.config().await;
    config.auth_info.impersonate = Some("holder".to_string());
    config.default_retry = false;
    let holder = kube::Client::try_from(config).unwrap();
    for i in 0.. {
        let req = http::Request::get("/api/v1/namespaces/default/configmaps")
            .body(kube::client::Body::empty())
            .unwrap();
        let res = holder.send(req).await.expect("response");
        let schema = res.headers().get("X-Kubernetes-PF-FlowSchema-UID");
        if schema.and_then(|v| v.to_str().ok()) == Some(holder_uid.as_str()) {
            break;
        }
        assert!(i < 200, "holder's requests never went to its schema");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scale_refused_by_flow_control_completes_once_the_seat_frees() {
    // 40 seats in all: a level of 1 share in ~250 gets one seat.
    let cp = ControlPlane::start_with(&[
        "--max-requests-inflight=40",
        "--max-mutating-requests-inflight=0",
        "--controllers=replicaset,deployment",
    ]);
    ok(&cp, &["apply", "-f", "-"], Some(ONE_SEAT));
    holder_schema_in_force(&cp).await;
    let admin = cp.client().await;

    // Three pods, made through the one seat while nothing else wants it.
    ok(&cp, &["apply", "-f", "-"], Some(DEPLOYMENT));
    wait_for("three pods", Duration::from_secs(60), || {
        (pods(&cp).len() == 3).then_some(())
    });
    let failed_before = failed_syncs(&admin).await;

    // The holder takes the seat; the scale to zero's DELETEs are refused.
    let held = hold_seat(&cp, &admin, "holder", "holder", "held").await;
    let refused_before = metric(&admin, REJECTED, "replicaset-controller").await;
    scale_web(&cp, 0);
    let mut refused = refused_before;
    for i in 0.. {
        refused = metric(&admin, REJECTED, "replicaset-controller").await;
        if refused > refused_before {
            break;
        }
        assert!(i < 600, "the ReplicaSet controller was never refused");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(pods(&cp).len(), 3, "a pod went while the seat was held");

    // The seat frees: the refused requests go through on their retry.
    assert_eq!(finish(held).await, 201);
    wait_for("the scale to zero", Duration::from_secs(30), || {
        let replicas = ok(
            &cp,
            &[
                "get",
                "deployment",
                "web",
                "-n",
                "default",
                "-o",
                "jsonpath={.status.replicas}",
            ],
            None,
        );
        let scaled = matches!(replicas.as_str(), "0" | "");
        (scaled && pods(&cp).is_empty()).then_some(())
    });
    assert!(refused >= refused_before + 1.0);
    assert_eq!(
        failed_syncs(&admin).await,
        failed_before,
        "a ReplicaSet sync failed on a refusal instead of waiting it out:\n{}",
        ok(
            &cp,
            &[
                "get",
                "events",
                "-n",
                "default",
                "--field-selector=reason=FailedDelete"
            ],
            None
        )
    );

    // A refusal that outlasts the retries (ten, a second apart) fails the
    // sync; the pods it did not delete are not awaited as deleted, so
    // the ReplicaSet deletes them again after its short back-off once the
    // seat frees, not after the 5-minute expectations timeout.
    scale_web(&cp, 2);
    wait_for("two pods again", Duration::from_secs(60), || {
        (pods(&cp).len() == 2).then_some(())
    });
    let failed_before = failed_syncs(&admin).await;
    let held = hold_seat(&cp, &admin, "holder", "holder", "held-long").await;
    scale_web(&cp, 0);
    for i in 0.. {
        if failed_syncs(&admin).await > failed_before {
            break;
        }
        assert!(
            i < 1200,
            "no ReplicaSet sync failed while the seat was held for 60 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(pods(&cp).len(), 2, "a pod went while the seat was held");
    assert_eq!(finish(held).await, 201);
    wait_for(
        "the scale to zero after a failed sync",
        Duration::from_secs(60),
        || pods(&cp).is_empty().then_some(()),
    );
}

/// The node a pod is bound to ("" if none).
fn node_of(cp: &ControlPlane, pod: &str) -> String {
    ok(
        cp,
        &[
            "get",
            "pod",
            pod,
            "-n",
            "default",
            "-o",
            "jsonpath={.spec.nodeName}",
        ],
        None,
    )
}

/// The scheduler binds in tasks of its own after assuming the pod on its
/// node; a binding refused past its retries forgets the assumption and
/// the pod is scheduled again, so once the seat frees it is bound (an
/// assumption kept after a failed binding would leave it Pending for
/// good, the scheduler taking it for bound).
#[tokio::test(flavor = "multi_thread")]
async fn a_binding_refused_past_its_retries_is_made_again_once_the_seat_frees() {
    let cp = ControlPlane::start_with(&[
        "--max-requests-inflight=40",
        "--max-mutating-requests-inflight=0",
        "--controllers=scheduler",
    ]);
    ok(&cp, &["apply", "-f", "-"], Some(ONE_SEAT));
    ok(&cp, &["apply", "-f", "-"], Some(SCHEDULER_ON_ONE_SEAT));
    holder_schema_in_force(&cp).await;
    let admin = cp.client().await;
    common::ready_node(&admin, "n1").await;
    let pod = |name: &str| {
        format!("{{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{{\"name\":\"{name}\",\"namespace\":\"default\"}},\"spec\":{{\"containers\":[{{\"name\":\"c\",\"image\":\"busybox:1.36\"}}]}}}}")
    };

    // A first pod is bound through the one seat, by the scheduler's schema.
    let through_before = metric(&admin, DISPATCHED, "scheduler-one-seat").await;
    ok(&cp, &["create", "-f", "-"], Some(&pod("first")));
    wait_for("the first pod bound", Duration::from_secs(30), || {
        (node_of(&cp, "first") == "n1").then_some(())
    });
    assert!(metric(&admin, DISPATCHED, "scheduler-one-seat").await > through_before);

    // The holder takes the seat: the second pod's binding is refused ten
    // times a second apart, then fails.
    let held = hold_seat(&cp, &admin, "holder", "holder", "held").await;
    ok(&cp, &["create", "-f", "-"], Some(&pod("second")));
    wait_for("the binding rejected", Duration::from_secs(90), || {
        let events = ok(
            &cp,
            &[
                "get",
                "events",
                "-n",
                "default",
                "--field-selector=reason=FailedScheduling,involvedObject.name=second",
                "-o",
                "jsonpath={.items[*].message}",
            ],
            None,
        );
        events.contains("Binding rejected").then_some(())
    });
    assert_eq!(node_of(&cp, "second"), "", "bound while the seat was held");

    // The seat frees: the pod is scheduled again and bound.
    assert_eq!(finish(held).await, 201);
    wait_for("the second pod bound", Duration::from_secs(60), || {
        (node_of(&cp, "second") == "n1").then_some(())
    });
}
