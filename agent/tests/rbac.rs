//! RBAC on real Docker, as an attacker and a user would try it: a pod's
//! own token (read from inside the pod) may do nothing but learn about
//! itself until a binding grants more; `kubectl create token`, `kubectl
//! auth can-i [--list]` and `kubectl auth whoami` work; a user bound to
//! `edit` cannot bind `cluster-admin` to themselves (escalation), nor
//! create a role with rules they do not hold.

mod cluster;

use std::process::Output;
use std::time::Duration;

use cluster::{Cluster, BUSYBOX};
use serde_json::json;

const UP: Duration = Duration::from_secs(60);
const TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

fn text(out: &Output) -> (bool, String) {
    let mut all = String::from_utf8_lossy(&out.stdout).into_owned();
    all.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), all)
}

/// kubectl against the cluster's API as the holder of `token` alone (the
/// admin kubeconfig's server and CA, none of its credentials).
fn kubectl_token(c: &Cluster, token: &str, args: &[&str]) -> (bool, String) {
    let out = c
        .kubectl()
        .args(["--token", token])
        .args(args)
        .output()
        .expect("kubectl");
    text(&out)
}

fn kubectl(c: &Cluster, args: &[&str]) -> (bool, String) {
    text(&c.kubectl().args(args).output().expect("kubectl"))
}

fn ok(c: &Cluster, args: &[&str]) -> String {
    let (ok, out) = kubectl(c, args);
    assert!(ok, "kubectl {args:?}: {out}");
    out
}

#[tokio::test]
async fn a_pods_own_token_gets_only_what_bindings_grant() {
    let c = Cluster::start();
    let client = c.client().await;
    c.create_pod(
        &client,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain"},
        "spec": {"containers": [{"name": "app", "image": BUSYBOX,
            "command": ["sleep", "3600"]}], "terminationGracePeriodSeconds": 1}}),
    )
    .await;
    c.wait_pod(&client, "plain", "Running", UP, |p| {
        p["status"]["containerStatuses"][0]["state"]["running"].is_object()
    })
    .await;
    let token = c.exec("plain", "app", &["cat", TOKEN]);
    let token = token.trim();
    assert_eq!(token.split('.').count(), 3, "a JWT: {token:?}");

    // Alone, the token reads no Secret (the bootstrap token that lets a
    // host join is one) and creates no pod anywhere.
    let (listed, out) = kubectl_token(&c, token, &["get", "secrets", "-A"]);
    assert!(!listed, "{out}");
    assert!(
        out.contains("User \"system:serviceaccount:default:default\" cannot list resource \"secrets\" in API group \"\" at the cluster scope"),
        "{out}"
    );
    let (created, out) = kubectl_token(
        &c,
        token,
        &[
            "run",
            "evil",
            "-n",
            "kube-system",
            "--image",
            BUSYBOX,
            "--restart=Never",
        ],
    );
    assert!(!created, "{out}");
    assert!(
        out.contains(
            "cannot create resource \"pods\" in API group \"\" in the namespace \"kube-system\""
        ),
        "{out}"
    );
    // Nor may it act as someone else.
    let (got, out) = kubectl_token(&c, token, &["get", "pods", "--as=alice"]);
    assert!(!got, "{out}");
    assert!(
        out.contains("users \"alice\" is forbidden: User \"system:serviceaccount:default:default\" cannot impersonate resource \"users\""),
        "{out}"
    );
    // It may learn who it is and what it may do.
    let (_, whoami) = kubectl_token(&c, token, &["auth", "whoami"]);
    assert!(
        whoami.contains("system:serviceaccount:default:default"),
        "{whoami}"
    );
    assert!(
        whoami.contains("system:serviceaccounts:default"),
        "{whoami}"
    );
    let (_, rules) = kubectl_token(&c, token, &["auth", "can-i", "--list"]);
    assert!(
        rules.contains("selfsubjectaccessreviews.authorization.k8s.io"),
        "{rules}"
    );
    assert!(!rules.lines().any(|l| l.starts_with("secrets ")), "{rules}");

    // A Role and a RoleBinding grant reading Secrets in default, and
    // nothing more.
    ok(
        &c,
        &[
            "create",
            "role",
            "secret-reader",
            "--verb=get,list",
            "--resource=secrets",
        ],
    );
    ok(
        &c,
        &[
            "create",
            "rolebinding",
            "read-secrets",
            "--role=secret-reader",
            "--serviceaccount=default:default",
        ],
    );
    let (listed, out) = kubectl_token(&c, token, &["get", "secrets", "-n", "default"]);
    assert!(listed, "after the binding: {out}");
    let (listed, out) = kubectl_token(&c, token, &["get", "secrets", "-n", "kube-system"]);
    assert!(!listed, "{out}");
    let (_, rules) = kubectl_token(&c, token, &["auth", "can-i", "--list"]);
    let secrets = rules
        .lines()
        .find(|l| l.starts_with("secrets "))
        .unwrap_or("");
    assert!(secrets.contains("[get list]"), "{rules}");
    let (_, answer) = kubectl(
        &c,
        &[
            "auth",
            "can-i",
            "list",
            "secrets",
            "--as=system:serviceaccount:default:default",
        ],
    );
    assert_eq!(answer.trim(), "yes");
    let (_, answer) = kubectl(
        &c,
        &[
            "auth",
            "can-i",
            "delete",
            "secrets",
            "--as=system:serviceaccount:default:default",
        ],
    );
    assert_eq!(answer.trim(), "no");

    // kubectl create token: a token for the account that the API accepts
    // as that account.
    let minted = ok(&c, &["create", "token", "default", "--duration=15m"]);
    let (listed, out) = kubectl_token(&c, minted.trim(), &["get", "secrets"]);
    assert!(listed, "{out}");
}

#[tokio::test]
async fn an_editor_cannot_grant_what_they_do_not_hold() {
    let c = Cluster::start();
    ok(
        &c,
        &[
            "create",
            "rolebinding",
            "alice-edit",
            "--clusterrole=edit",
            "--user=alice",
        ],
    );
    // edit lets alice work with pods and deployments in default...
    let (_, answer) = kubectl(
        &c,
        &["auth", "can-i", "create", "deployments", "--as=alice"],
    );
    assert_eq!(answer.trim(), "yes");
    let (_, answer) = kubectl(
        &c,
        &["auth", "can-i", "create", "rolebindings", "--as=alice"],
    );
    assert_eq!(answer.trim(), "no");
    // ...but binding cluster-admin to herself is refused for the
    // permissions she does not hold, in upstream's words.
    ok(
        &c,
        &[
            "create",
            "rolebinding",
            "alice-admin",
            "--clusterrole=admin",
            "--user=alice",
        ],
    );
    let (bound, out) = kubectl(
        &c,
        &[
            "create",
            "rolebinding",
            "escalate",
            "--clusterrole=cluster-admin",
            "--user=alice",
            "--as=alice",
        ],
    );
    assert!(!bound, "{out}");
    assert!(
        out.contains("is attempting to grant RBAC permissions not currently held"),
        "{out}"
    );
    assert!(
        out.contains(r#"{APIGroups:["*"], Resources:["*"], Verbs:["*"]}"#),
        "{out}"
    );
    let (created, out) = kubectl(
        &c,
        &[
            "create",
            "role",
            "nodes",
            "--verb=get",
            "--resource=nodes",
            "--as=alice",
        ],
    );
    assert!(!created, "{out}");
    assert!(
        out.contains(r#"{APIGroups:[""], Resources:["nodes"], Verbs:["get"]}"#),
        "{out}"
    );
    // What she holds she may grant (admin lets her manage bindings).
    ok(
        &c,
        &[
            "create",
            "rolebinding",
            "bob-view",
            "--clusterrole=view",
            "--user=bob",
            "--as=alice",
        ],
    );
    let (_, answer) = kubectl(&c, &["auth", "can-i", "list", "pods", "--as=bob"]);
    assert_eq!(answer.trim(), "yes");
}
