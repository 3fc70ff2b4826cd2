//! API Priority and Fairness with kubectl and kube-rs against a real
//! `bosun-control`: the bootstrap configuration in kubectl's columns, the
//! `X-Kubernetes-PF-*` headers naming the schema and level a request was
//! classified to, upstream's validation, the mandatory objects restored,
//! and a level of one seat refusing (Reject) or holding back (Queue) a
//! second request of its flow while the first holds the seat, others
//! unaffected.
//!
//! The first request holds its seat as `common::apf` does: by sending its
//! body slowly.

mod common;

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use bosun_test_support::binaries::kubectl_binary;
use common::apf::{finish, hold_seat, metric};
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
fn ok(cp: &ControlPlane, args: &[&str]) -> String {
    let out = kubectl(cp, args, None);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn apply(cp: &ControlPlane, yaml: &str) {
    let out = kubectl(cp, &["apply", "-f", "-"], Some(yaml));
    assert!(
        out.status.success(),
        "apply: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn uid(cp: &ControlPlane, kind: &str, name: &str) -> String {
    ok(cp, &["get", kind, name, "-o", "jsonpath={.metadata.uid}"])
}

/// The value kubectl -v=8 logged for a response header (any case).
fn logged_header(log: &str, name: &str) -> Option<String> {
    let name = format!("{}:", name.to_ascii_lowercase());
    log.lines().find_map(|l| {
        let lower = l.to_ascii_lowercase();
        let at = lower.find(&name)?;
        Some(
            l[at + name.len()..]
                .trim()
                .trim_end_matches('"')
                .to_string(),
        )
    })
}

/// The row of `name` in a kubectl table, split in columns.
fn row(table: &str, name: &str) -> Vec<String> {
    table
        .lines()
        .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
        .find(|cols| cols.first().map(String::as_str) == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in\n{table}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn bootstrap_configuration_headers_validation_and_upkeep() {
    let cp = ControlPlane::start();

    let fs = ok(&cp, &["get", "flowschemas"]);
    let header: Vec<&str> = fs.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "PRIORITYLEVEL",
            "MATCHINGPRECEDENCE",
            "DISTINGUISHERMETHOD",
            "AGE",
            "MISSINGPL"
        ]
    );
    for name in [
        "exempt",
        "probes",
        "system-leader-election",
        "endpoint-controller",
        "workload-leader-election",
        "system-node-high",
        "system-nodes",
        "kube-controller-manager",
        "kube-scheduler",
        "kube-system-service-accounts",
        "service-accounts",
        "global-default",
        "catch-all",
    ] {
        row(&fs, name);
    }
    let exempt = row(&fs, "exempt");
    assert_eq!(
        (&exempt[1][..], &exempt[2][..], &exempt[3][..]),
        ("exempt", "1", "<none>")
    );
    let global = row(&fs, "global-default");
    assert_eq!(
        (&global[1][..], &global[2][..], &global[3][..]),
        ("global-default", "9900", "ByUser")
    );
    // MISSINGPL: the Dangling condition the server keeps (False: found).
    wait_for("the Dangling conditions", Duration::from_secs(20), || {
        let fs = ok(&cp, &["get", "flowschemas"]);
        (row(&fs, "catch-all")[5] == "False").then_some(())
    });

    let pl = ok(&cp, &["get", "prioritylevelconfigurations"]);
    let header: Vec<&str> = pl.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "TYPE",
            "NOMINALCONCURRENCYSHARES",
            "QUEUES",
            "HANDSIZE",
            "QUEUELENGTHLIMIT",
            "AGE"
        ]
    );
    assert_eq!(
        &row(&pl, "exempt")[1..6],
        ["Exempt", "<none>", "<none>", "<none>", "<none>"]
    );
    assert_eq!(
        &row(&pl, "catch-all")[1..6],
        ["Limited", "5", "<none>", "<none>", "<none>"]
    );
    assert_eq!(
        &row(&pl, "workload-low")[1..6],
        ["Limited", "100", "128", "6", "50"]
    );

    // The admin (system:masters) is exempt: kubectl -v=8 shows the UIDs.
    let out = kubectl(&cp, &["get", "namespace", "default", "-v=8"], None);
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        logged_header(&log, "X-Kubernetes-Pf-Flowschema-Uid").as_deref(),
        Some(uid(&cp, "flowschema", "exempt").as_str()),
        "{log}"
    );
    assert_eq!(
        logged_header(&log, "X-Kubernetes-Pf-Prioritylevel-Uid").as_deref(),
        Some(uid(&cp, "prioritylevelconfiguration", "exempt").as_str())
    );

    // A service account's token: service-accounts, at workload-low.
    ok(&cp, &["create", "serviceaccount", "robot", "-n", "default"]);
    let token = ok(&cp, &["create", "token", "robot", "-n", "default"]);
    let out = kubectl(
        &cp,
        &[
            "get",
            "pods",
            "-n",
            "default",
            "-v=8",
            "--token",
            token.trim(),
        ],
        None,
    );
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        logged_header(&log, "X-Kubernetes-Pf-Flowschema-Uid").as_deref(),
        Some(uid(&cp, "flowschema", "service-accounts").as_str()),
        "{log}"
    );
    assert_eq!(
        logged_header(&log, "X-Kubernetes-Pf-Prioritylevel-Uid").as_deref(),
        Some(uid(&cp, "prioritylevelconfiguration", "workload-low").as_str())
    );

    // Upstream's validation, naming the field.
    let out = kubectl(
        &cp,
        &["apply", "-f", "-"],
        Some(
            "apiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: FlowSchema\nmetadata:\n  name: broken\nspec:\n  matchingPrecedence: 500\n",
        ),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("spec.priorityLevelConfiguration.name: Required value"),
        "{err}"
    );

    // A schema naming a missing level: MISSINGPL True.
    apply(
        &cp,
        "apiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: FlowSchema\nmetadata:\n  name: lost\nspec:\n  priorityLevelConfiguration:\n    name: nowhere\n  matchingPrecedence: 600\n  rules:\n  - subjects:\n    - kind: User\n      user:\n        name: nobody\n    nonResourceRules:\n    - verbs: [\"*\"]\n      nonResourceURLs: [\"*\"]\n",
    );
    wait_for("lost to be Dangling", Duration::from_secs(20), || {
        let fs = ok(&cp, &["get", "flowschema", "lost"]);
        (row(&fs, "lost")[5] == "True").then_some(())
    });

    // A suggested level the user took over (autoupdate off) keeps its
    // edit; a deleted mandatory level comes back.
    ok(
        &cp,
        &[
            "annotate",
            "prioritylevelconfiguration",
            "global-default",
            "apf.kubernetes.io/autoupdate-spec=false",
            "--overwrite",
        ],
    );
    ok(
        &cp,
        &[
            "patch",
            "prioritylevelconfiguration",
            "global-default",
            "--type=merge",
            "-p",
            r#"{"spec":{"limited":{"nominalConcurrencyShares":7}}}"#,
        ],
    );
    let old = uid(&cp, "prioritylevelconfiguration", "catch-all");
    ok(&cp, &["delete", "prioritylevelconfiguration", "catch-all"]);
    wait_for("catch-all to come back", Duration::from_secs(20), || {
        let out = kubectl(
            &cp,
            &[
                "get",
                "prioritylevelconfiguration",
                "catch-all",
                "-o",
                "jsonpath={.metadata.uid}",
            ],
            None,
        );
        let now = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.success() && !now.is_empty() && now != old).then_some(())
    });
    // The round that restored catch-all went past global-default too.
    let shares = ok(
        &cp,
        &[
            "get",
            "prioritylevelconfiguration",
            "global-default",
            "-o",
            "jsonpath={.spec.limited.nominalConcurrencyShares}",
        ],
    );
    assert_eq!(shares, "7");
}

const LEVELS: &str = r#"
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
kind: PriorityLevelConfiguration
metadata:
  name: one-seat-queued
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    limitResponse:
      type: Queue
      queuing:
        queues: 4
        handSize: 2
        queueLengthLimit: 5
"#;

fn schema(user: &str, level: &str) -> String {
    format!(
        r#"apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata:
  name: {user}
spec:
  priorityLevelConfiguration:
    name: {level}
  matchingPrecedence: 500
  distinguisherMethod:
    type: ByUser
  rules:
  - subjects:
    - kind: User
      user:
        name: {user}
    resourceRules:
    - verbs: ["*"]
      apiGroups: ["*"]
      resources: ["*"]
      clusterScope: true
      namespaces: ["*"]
"#
    )
}

/// A kube-rs client acting as `user` (impersonated by the admin), which
/// returns a 429 as it comes.
async fn client_as(cp: &ControlPlane, user: &str) -> kube::Client {
    let mut config = cp.config().await;
    config.auth_info.impersonate = Some(user.to_string());
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

/// GET of the default namespace's config maps: status and the schema UID header.
async fn list_config_maps(client: &kube::Client) -> (u16, Option<String>, Option<String>) {
    let req = http::Request::get("/api/v1/namespaces/default/configmaps")
        .body(kube::client::Body::empty())
        .unwrap();
    let res = client.send(req).await.expect("response");
    let header = |n: &str| {
        res.headers()
            .get(n)
            .map(|v| v.to_str().unwrap().to_string())
    };
    (
        res.status().as_u16(),
        header("X-Kubernetes-PF-FlowSchema-UID"),
        header("Retry-After"),
    )
}

/// Waits until a request of `user` is classified to its own schema.
async fn wait_classified(cp: &ControlPlane, client: &kube::Client, user: &str) {
    let want = uid(cp, "flowschema", user);
    for _ in 0..200 {
        if list_config_maps(client).await.1.as_deref() == Some(want.as_str()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{user}'s requests never went to its schema");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_one_seat_level_rejects_or_queues_a_second_request_of_its_flow() {
    // 40 seats in all: a level of 1 share in 247 gets one seat.
    let cp = ControlPlane::start_with(&[
        "--max-requests-inflight=40",
        "--max-mutating-requests-inflight=0",
    ]);
    apply(&cp, LEVELS);
    apply(&cp, &schema("alice", "one-seat"));
    apply(&cp, &schema("carol", "one-seat-queued"));
    for user in ["alice", "carol", "bob"] {
        ok(
            &cp,
            &[
                "create",
                "clusterrolebinding",
                &format!("{user}-admin"),
                "--clusterrole=cluster-admin",
                &format!("--user={user}"),
            ],
        );
    }
    let admin = cp.client().await;
    let alice = client_as(&cp, "alice").await;
    let carol = client_as(&cp, "carol").await;
    let bob = client_as(&cp, "bob").await;
    wait_classified(&cp, &alice, "alice").await;
    wait_classified(&cp, &carol, "carol").await;

    // Reject: while alice's create holds the seat, her next request is
    // refused with 429 and Retry-After; bob is served.
    let held = hold_seat(&cp, &admin, "alice", "alice", "held-a").await;
    let (code, schema_uid, retry_after) = list_config_maps(&alice).await;
    assert_eq!(code, 429);
    assert_eq!(retry_after.as_deref(), Some("1"));
    assert_eq!(schema_uid, Some(uid(&cp, "flowschema", "alice")));
    assert!(
        metric(
            &admin,
            "apiserver_flowcontrol_rejected_requests_total",
            "alice"
        )
        .await
            >= 1.0
    );
    assert_eq!(list_config_maps(&bob).await.0, 200);
    assert_eq!(finish(held).await, 201);
    assert_eq!(list_config_maps(&alice).await.0, 200);

    // Queue: carol's second request waits in a queue until her first is
    // answered, then is served.
    let held = hold_seat(&cp, &admin, "carol", "carol", "held-c").await;
    let waiting = tokio::spawn(async move { list_config_maps(&carol).await.0 });
    let gauge = "apiserver_flowcontrol_current_inqueue_requests";
    for i in 0.. {
        if metric(&admin, gauge, "carol").await >= 1.0 {
            break;
        }
        assert!(i < 300, "carol's second request never queued");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!waiting.is_finished());
    assert_eq!(list_config_maps(&bob).await.0, 200);
    assert_eq!(finish(held).await, 201);
    assert_eq!(waiting.await.unwrap(), 200);
    assert_eq!(metric(&admin, gauge, "carol").await, 0.0);
    let cms = ok(&cp, &["get", "configmaps", "-n", "default", "-o", "name"]);
    assert!(
        cms.contains("configmap/held-a") && cms.contains("configmap/held-c"),
        "{cms}"
    );
}
