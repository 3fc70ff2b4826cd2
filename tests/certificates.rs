//! CertificateSigningRequests end to end with the machine's kubectl: a
//! key and request made by openssl for user `jane` in group `devs` are
//! sent with `kubectl create`; the request shows Pending with its
//! requester (the server's idea of who sent it, not the client's);
//! a user allowed to update approvals but not to approve for the signer
//! is refused in upstream's words, and approves once bound to upstream's
//! approver role; the certificate appears, and a kubeconfig with it is
//! `jane` in `devs` to `kubectl auth whoami`. `kubectl certificate deny`
//! denies another; a request breaking its signer's rules fails with the
//! signer's reason; one asking for system:masters is refused. Node
//! client requests (kubelet TLS bootstrapping's) are approved by
//! csrapproving for a bootstrap token's user and for a node renewing its
//! own, and left Pending, with an event saying why, for a plain user
//! (until `kubectl certificate approve`) and for a bootstrap token asking
//! for the name of a live node.

mod common;

use std::process::Command;
use std::time::Duration;

use base64::Engine;
use common::{parse_table, wait_for, Cluster};

/// Makes `name.key` and returns the PEM request for `subject`.
fn openssl_request(c: &Cluster, name: &str, subject: &str) -> String {
    let key = c.path(&format!("{name}.key"));
    let out = Command::new("openssl")
        .args(["req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout"])
        .arg(&key)
        .args(["-subj", subject])
        .output()
        .expect("openssl is installed");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn csr_yaml(name: &str, request: &str, usages: &str) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(request);
    format!(
        "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: {name}\n\
         spec:\n  request: {b64}\n  signerName: kubernetes.io/kube-apiserver-client\n  \
         expirationSeconds: 86400\n  usages: [{usages}]\n  username: mallory\n  groups: [impostors]\n"
    )
}

fn create(c: &Cluster, name: &str, subject: &str, usages: &str) -> String {
    let request = openssl_request(c, name, subject);
    let file = c.write(&format!("{name}.yaml"), &csr_yaml(name, &request, usages));
    c.kubectl(&["create", "-f", &file]).ok().to_string()
}

/// `kubectl get csr NAME`'s row as column -> cell.
fn row(c: &Cluster, name: &str) -> std::collections::HashMap<String, String> {
    let (headers, rows) = parse_table(c.kubectl(&["get", "csr", name]).ok());
    headers.into_iter().zip(rows[0].clone()).collect()
}

fn jsonpath(c: &Cluster, name: &str, path: &str) -> String {
    c.kubectl(&["get", "csr", name, "-o", &format!("jsonpath={path}")])
        .ok()
        .to_string()
}

#[test]
fn a_user_certificate_is_requested_approved_issued_and_authenticates() {
    let c = Cluster::start();
    assert_eq!(
        create(&c, "jane", "/CN=jane/O=devs", "client auth").trim(),
        "certificatesigningrequest.certificates.k8s.io/jane created"
    );
    let r = row(&c, "jane");
    assert_eq!(r["CONDITION"], "Pending", "{r:?}");
    assert_eq!(r["SIGNERNAME"], "kubernetes.io/kube-apiserver-client");
    assert_eq!(
        r["REQUESTOR"], "bosun-admin",
        "the server's requester, not the client's"
    );
    assert_eq!(r["REQUESTEDDURATION"], "24h");
    let groups = jsonpath(&c, "jane", "{.spec.groups}");
    assert!(
        groups.contains("system:authenticated") && !groups.contains("impostors"),
        "{groups}"
    );

    // bob may update approvals, but not approve for the signer.
    let rbac = c.write(
        "bob.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: csr-updater\n\
         rules:\n- apiGroups: [certificates.k8s.io]\n  resources: [certificatesigningrequests]\n  verbs: [get, list]\n\
         - apiGroups: [certificates.k8s.io]\n  resources: [certificatesigningrequests/approval]\n  verbs: [update]\n\
         ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: bob-updates\n\
         roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: csr-updater}\n\
         subjects:\n- {apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}\n",
    );
    c.kubectl(&["apply", "-f", &rbac]).ok();
    let refused = c.kubectl(&["--as", "bob", "certificate", "approve", "jane"]);
    assert!(
        refused.fails().contains(
            "certificatesigningrequests.certificates.k8s.io \"jane\" is forbidden: user not permitted to approve requests with signerName \"kubernetes.io/kube-apiserver-client\""
        ),
        "{}",
        refused.stderr
    );
    assert_eq!(row(&c, "jane")["CONDITION"], "Pending");
    c.kubectl(&[
        "create",
        "clusterrolebinding",
        "bob-approves",
        "--clusterrole=system:certificates.k8s.io:kube-apiserver-client-approver",
        "--user=bob",
    ])
    .ok();
    let approved = c.kubectl(&["--as", "bob", "certificate", "approve", "jane"]);
    assert!(approved
        .ok()
        .contains("certificatesigningrequest.certificates.k8s.io/jane approved"));

    let issued = wait_for("jane's certificate", Duration::from_secs(60), || {
        let cert = jsonpath(&c, "jane", "{.status.certificate}");
        (!cert.is_empty()).then_some(cert)
    });
    assert_eq!(row(&c, "jane")["CONDITION"], "Approved,Issued");
    let pem = base64::engine::general_purpose::STANDARD
        .decode(issued.trim())
        .unwrap();
    let crt = c.path("jane.crt");
    std::fs::write(&crt, &pem).unwrap();

    // A kubeconfig with the admin's cluster and jane's certificate.
    let kc = c.path("jane.kubeconfig");
    let server = c
        .kubectl(&[
            "config",
            "view",
            "--raw",
            "-o",
            "jsonpath={.clusters[0].cluster.server}",
        ])
        .ok()
        .to_string();
    let ca = c
        .kubectl(&[
            "config",
            "view",
            "--raw",
            "-o",
            "jsonpath={.clusters[0].cluster.certificate-authority-data}",
        ])
        .ok()
        .to_string();
    let kc_text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    \
         certificate-authority-data: {ca}\nusers:\n- name: jane\n  user:\n    client-certificate: {}\n    \
         client-key: {}\ncontexts:\n- name: jane\n  context: {{cluster: c, user: jane}}\ncurrent-context: jane\n",
        crt.display(),
        c.path("jane.key").display()
    );
    std::fs::write(&kc, kc_text).unwrap();
    let whoami = Command::new(common::kubectl_binary())
        .arg("--kubeconfig")
        .arg(&kc)
        .args(["auth", "whoami"])
        .env("HOME", c.path("home"))
        .output()
        .unwrap();
    let who = String::from_utf8_lossy(&whoami.stdout);
    assert!(
        whoami.status.success(),
        "{}",
        String::from_utf8_lossy(&whoami.stderr)
    );
    let (_, rows) = parse_table(&who);
    let attrs: std::collections::HashMap<_, _> = rows
        .iter()
        .map(|r| (r[0].clone(), r[1..].join(" ")))
        .collect();
    assert_eq!(attrs["Username"], "jane", "{who}");
    assert!(attrs["Groups"].contains("devs"), "{who}");
}

#[test]
fn requests_are_denied_failed_or_refused_as_upstream() {
    let c = Cluster::start();
    create(&c, "other", "/CN=other", "client auth");
    assert!(c
        .kubectl(&["certificate", "deny", "other"])
        .ok()
        .contains("certificatesigningrequest.certificates.k8s.io/other denied"));
    assert_eq!(row(&c, "other")["CONDITION"], "Denied");

    create(&c, "server", "/CN=server", "server auth");
    c.kubectl(&["certificate", "approve", "server"]).ok();
    let failed = wait_for("the signer's verdict", Duration::from_secs(60), || {
        let cond = row(&c, "server")["CONDITION"].clone();
        (cond != "Approved").then_some(cond)
    });
    assert_eq!(failed, "Approved,Failed", "{}", c.log());
    assert_eq!(
        jsonpath(
            &c,
            "server",
            "{.status.conditions[?(@.type==\"Failed\")].message}"
        ),
        "invalid usage for client certificate: server auth"
    );

    let request = openssl_request(&c, "root", "/CN=root/O=system:masters");
    let file = c.write("root.yaml", &csr_yaml("root", &request, "client auth"));
    let refused = c.kubectl(&["create", "-f", &file]);
    assert!(
        refused.fails().contains(
            "use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"
        ),
        "{}",
        refused.stderr
    );
}

/// A node client request (kubelet TLS bootstrapping's) for node `node`,
/// named `name`, created by `as_user` in `groups` (impersonated by the
/// admin).
fn node_request(c: &Cluster, name: &str, node: &str, as_user: &str, groups: &[&str]) {
    let request = openssl_request(c, name, &format!("/O=system:nodes/CN=system:node:{node}"));
    let b64 = base64::engine::general_purpose::STANDARD.encode(request);
    let file = c.write(
        &format!("{name}.yaml"),
        &format!(
            "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: {name}\n\
             spec:\n  request: {b64}\n  signerName: kubernetes.io/kube-apiserver-client-kubelet\n  \
             usages: [digital signature, key encipherment, client auth]\n"
        ),
    );
    let mut args = vec!["create", "-f", &file, "--as", as_user];
    for g in groups {
        args.extend(["--as-group", g]);
    }
    c.kubectl(&args).ok();
}

/// The messages of the events of reason `reason` about request `name`.
fn events(c: &Cluster, name: &str, reason: &str) -> String {
    c.kubectl(&[
        "get",
        "events",
        "-A",
        "--field-selector",
        &format!("involvedObject.name={name},reason={reason}"),
        "-o",
        "jsonpath={.items[*].message}",
    ])
    .ok()
    .to_string()
}

fn condition(c: &Cluster, name: &str) -> String {
    row(c, name)["CONDITION"].clone()
}

#[test]
fn node_client_requests_are_approved_for_bootstrappers_and_nodes_only() {
    let c = Cluster::start();
    let issued = |name: &str| {
        wait_for(name, Duration::from_secs(60), || {
            (condition(&c, name) == "Approved,Issued").then_some(())
        })
    };
    // A bootstrap token's user (system:bootstrappers, bound to nodeclient
    // as kubeadm binds it) joining as a new node: approved and issued.
    let token = ["system:bootstrappers", "system:authenticated"];
    node_request(&c, "join", "fresh", "system:bootstrap:abcdef", &token);
    issued("join");
    let reason = "{.status.conditions[?(@.type==\"Approved\")].reason}";
    let message = "{.status.conditions[?(@.type==\"Approved\")].message}";
    assert_eq!(jsonpath(&c, "join", reason), "AutoApproved");
    assert_eq!(
        jsonpath(&c, "join", message),
        "Auto approving kubelet client certificate after SubjectAccessReview."
    );
    // The node renewing its own certificate (selfnodeclient).
    let node = ["system:nodes", "system:authenticated"];
    node_request(&c, "renew", "fresh", "system:node:fresh", &node);
    issued("renew");
    assert_eq!(
        jsonpath(&c, "renew", message),
        "Auto approving self kubelet client certificate after SubjectAccessReview."
    );

    // A plain user who may create requests but not nodeclient ones: left
    // Pending (with an event saying why) until an approver approves it.
    c.kubectl(&[
        "create",
        "clusterrolebinding",
        "jane-requests",
        "--clusterrole=system:node-bootstrapper",
        "--user=jane",
    ])
    .ok();
    node_request(&c, "plain", "spare", "jane", &[]);
    let why = wait_for("the NotAutoApproved event", Duration::from_secs(30), || {
        Some(events(&c, "plain", "NotAutoApproved")).filter(|m| !m.is_empty())
    });
    assert!(
        why.contains("\"jane\" may not create certificatesigningrequests/nodeclient"),
        "{why}"
    );
    assert_eq!(condition(&c, "plain"), "Pending");
    c.kubectl(&["certificate", "approve", "plain"]).ok();
    issued("plain");

    // A bootstrap token cannot take the name of a live node (its Lease
    // renewed just now): Pending, with a warning, nothing issued.
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let live = c.write(
        "live.yaml",
        &format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: busy}}\n---\n\
             apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {{name: busy, namespace: kube-node-lease}}\n\
             spec: {{holderIdentity: busy, renewTime: '{now}'}}\n"
        ),
    );
    c.kubectl(&["create", "-f", &live]).ok();
    node_request(&c, "takeover", "busy", "system:bootstrap:abcdef", &token);
    let why = wait_for("the NodeNameInUse event", Duration::from_secs(30), || {
        Some(events(&c, "takeover", "NodeNameInUse")).filter(|m| !m.is_empty())
    });
    assert!(
        why.contains("node \"busy\" already exists and is live (its Lease was renewed"),
        "{why}"
    );
    assert_eq!(condition(&c, "takeover"), "Pending");
    assert_eq!(jsonpath(&c, "takeover", "{.status.certificate}"), "");
}
