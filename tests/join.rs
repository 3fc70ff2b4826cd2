//! Joining a host with a bootstrap token, on real processes and Docker:
//! `bosun up` (control plane only) prints the join command; `bosun join`
//! refuses a CA that does not match the hash, a revoked and an expired
//! token, and with a good token starts an agent whose Node becomes Ready
//! with a client certificate of its own (no admin token on the joined
//! side), got through a CertificateSigningRequest that `kubectl get csr`
//! shows `Approved,Issued`; another token's request for that live node's
//! name stays Pending. That credential reads the Secret its pod uses (the pod runs),
//! is refused one no pod of its node uses, and cannot write the status of
//! another node's pod. `bosun logs`, `bosun exec` and `kubectl exec`
//! reach the joined node's pod (the control plane presents a client
//! certificate of the cluster CA to the agent); the agent refuses a caller
//! with a certificate of another CA, with none, and with a node's.
//! `bosun leave` with a pod still running deletes the Node (with the
//! node's own credential) and leaves the host as it was before the join:
//! no container, network, route, iptables rule or nftables table of the
//! node, no credential.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use std::io::{Read, Write};
use std::sync::Arc;

use base64::Engine;
use common::{
    agent_binary, control_binary, docker_ids, ensure_images, kubectl_binary, wait_for, HostReaper,
    Run,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// The test images (busybox, pause), built if this machine lacks them.
struct Host {
    home: PathBuf,
}

impl Host {
    fn bosun(&self, args: &[&str]) -> Run {
        let out = Command::new(env!("CARGO_BIN_EXE_bosun"))
            .args(args)
            .env("HOME", &self.home)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        Run::from("bosun", args, out)
    }

    fn kubectl(&self, kubeconfig: &Path, args: &[&str]) -> Run {
        let out = Command::new(kubectl_binary())
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("kubectl is installed");
        Run::from("kubectl", args, out)
    }
}

/// The `--flag VALUE` of a printed command line.
fn flag<'a>(command: &'a str, name: &str) -> &'a str {
    let words: Vec<&str> = command.split_whitespace().collect();
    let at = words.iter().position(|w| *w == name).unwrap();
    words[at + 1]
}

/// Presents one certificate and key as the client's.
#[derive(Debug)]
struct Present(Arc<rustls::sign::CertifiedKey>);

impl rustls::client::ResolvesClientCert for Present {
    fn resolve(
        &self,
        _: &[&[u8]],
        _: &[rustls::SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(self.0.clone())
    }
    fn has_certs(&self) -> bool {
        true
    }
}

/// A GET of `path` from the agent of `node` at the address and port its
/// Node publishes, trusting the certificate it publishes, presenting
/// `client` (PEM certificate and key) if given: the HTTP status, or why
/// there was none.
fn agent_get(
    node: &serde_json::Value,
    client: Option<(&str, &str)>,
    path: &str,
) -> Result<u16, String> {
    let status = &node["status"];
    let ip = status["addresses"][0]["address"].as_str().unwrap();
    let port = status["daemonEndpoints"]["kubeletEndpoint"]["Port"]
        .as_u64()
        .unwrap() as u16;
    let pem = node["metadata"]["annotations"]["bosun.io/serving-certificate"]
        .as_str()
        .unwrap();
    let der = CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
    let mut config = bosun::serving::pinned_client_config(der.as_ref(), "not the agent").unwrap();
    if let Some((cert, key)) = client {
        let certs = CertificateDer::pem_slice_iter(cert.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
        let provider = rustls::crypto::ring::default_provider();
        let certified = rustls::sign::CertifiedKey::from_der(certs, key, &provider).unwrap();
        config.client_auth_cert_resolver = Arc::new(Present(Arc::new(certified)));
    }
    let name = ServerName::try_from(ip.to_string()).unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let tcp = std::net::TcpStream::connect((ip, port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let request = format!("GET {path} HTTP/1.1\r\nHost: {ip}\r\nConnection: close\r\n\r\n");
    tls.write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut response = Vec::new();
    match tls.read_to_end(&mut response) {
        Ok(_) => {}
        // The agent closes without TLS's close_notify after some answers.
        Err(e) if !response.is_empty() && e.kind() == std::io::ErrorKind::UnexpectedEof => {}
        Err(e) => return Err(e.to_string()),
    }
    let head = String::from_utf8_lossy(&response);
    head.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no HTTP answer: {head:?}"))
}

/// Output lines of a command that mention one of `needles`, sorted.
fn lines_with(program: &str, args: &[&str], needles: &[&str]) -> Vec<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} is installed: {e}"));
    assert!(out.status.success(), "{program} {args:?} failed");
    let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| needles.iter().any(|n| l.contains(n)))
        .map(String::from)
        .collect();
    lines.sort();
    lines
}

/// What bosun makes on the host for `node` with pods in `cidr_prefix`
/// (e.g. "10.252."): its containers, Docker networks, routes, iptables
/// rules (filter and nat) and nftables tables.
fn host_state(node: &str, cidr_prefix: &str) -> Vec<String> {
    let label = format!("label=io.bosun.node={node}");
    let mut state = Vec::new();
    for c in lines_with(
        "docker",
        &[
            "ps",
            "-a",
            "--filter",
            &label,
            "--format",
            "container {{.Names}}",
        ],
        &["container"],
    ) {
        state.push(c);
    }
    for n in lines_with(
        "docker",
        &["network", "ls", "--format", "network {{.Name}}"],
        &[node],
    ) {
        state.push(n);
    }
    for r in lines_with("ip", &["route"], &[cidr_prefix]) {
        state.push(format!("route {r}"));
    }
    for table in ["filter", "nat"] {
        for r in lines_with("iptables", &["-w", "-t", table, "-S"], &[cidr_prefix]) {
            state.push(format!("iptables -t {table} {r}"));
        }
    }
    for t in lines_with("nft", &["list", "tables"], &[node]) {
        state.push(format!("nft {t}"));
    }
    state
}

/// A CA of nobody's and a client certificate it signed that says it is
/// the control plane's (CN kube-apiserver-kubelet-client, O
/// system:masters): PEM certificate and key.
fn impostor_certificate() -> (String, String) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name.push(DnType::CommonName, "bosun-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(DnType::OrganizationName, "system:masters");
    params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver-kubelet-client");
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.signed_by(&key, &issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// The client certificate and key (PEM) of a kubeconfig's first user.
fn kubeconfig_credential(path: &Path) -> (String, String) {
    let kc: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let user = &kc["users"][0]["user"];
    let field = |name: &str| {
        let b64 = user[name].as_str().unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        String::from_utf8(bytes).unwrap()
    };
    (field("client-certificate-data"), field("client-key-data"))
}

/// The join command `bosun up` printed: server, token and CA hash.
struct JoinCommand {
    server: String,
    token: String,
    hash: String,
}

impl JoinCommand {
    fn from_up(up_stdout: &str) -> JoinCommand {
        let line = up_stdout
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with("bosun join https://"))
            .unwrap_or_else(|| panic!("bosun up printed no join command:\n{up_stdout}"));
        JoinCommand {
            server: line.split_whitespace().nth(2).unwrap().to_string(),
            token: flag(line, "--token").to_string(),
            hash: flag(line, "--ca-cert-hash").to_string(),
        }
    }
}

/// What both tests set up: a home for `bosun` in `tmp`, the control
/// plane's and the joined host's data dirs, a node name and cluster CIDR
/// of the test's own (the node's pod CIDR is the control plane's to
/// assign from it), and the reaper that cleans up after them.
struct Setup {
    host: Host,
    control: PathBuf,
    joined: PathBuf,
    node: String,
    cidr: String,
    admin: PathBuf,
    /// Dropped last with the setup: cleans up after the test.
    _reaper: HostReaper,
    /// The control plane's etcd with BOSUN_TEST_STORE=etcd, stopped after
    /// the reaper has stopped the control plane.
    etcd: Option<bosun_test_support::etcd::Etcd>,
}

impl Setup {
    /// `cidr`: a /16 of the test's own, the cluster's pod network, so the
    /// agent's pod-traffic rule is this test's alone.
    fn new(tmp: &Path, node: &str, cidr: &str) -> Setup {
        control_binary();
        agent_binary();
        ensure_images();
        let control = tmp.join("control");
        let joined = tmp.join("join");
        let node = format!("{node}-{}", std::process::id());
        Setup {
            host: Host {
                home: tmp.to_path_buf(),
            },
            _reaper: HostReaper {
                dirs: vec![control.clone(), joined.clone()],
                node: node.clone(),
                cidr: cidr.into(),
            },
            control,
            joined,
            node,
            cidr: cidr.into(),
            admin: tmp.join(".bosun/kubeconfig"),
            etcd: common::test_store_etcd(),
        }
    }

    /// `bosun up` arguments for the store the tests run on.
    fn store_args(&self) -> Vec<String> {
        common::up_store_args(&self.etcd)
    }

    /// Whether the joined node is Ready, as the admin sees it.
    fn node_ready(&self) -> bool {
        self.host
            .kubectl(
                &self.admin,
                &[
                    "get",
                    "node",
                    &self.node,
                    "-o",
                    "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
                ],
            )
            .stdout
            == "True"
    }

    /// `bosun join`'s arguments for this host.
    fn join_args<'a>(
        &'a self,
        j: &'a str,
        server: &'a str,
        token: &'a str,
        hash: &'a str,
    ) -> [&'a str; 14] {
        [
            "join",
            server,
            "--token",
            token,
            "--ca-cert-hash",
            hash,
            "--data-dir",
            j,
            "--node-name",
            &self.node,
            "--node-ip",
            "127.0.0.1",
            "--port",
            "0",
        ]
    }
}

#[test]
fn a_host_joins_with_a_token_and_its_credential_is_restricted_to_its_node() {
    let tmp = tempfile::tempdir().unwrap();
    let setup = Setup::new(tmp.path(), "joined", "10.252.0.0/16");
    let Setup {
        host,
        control,
        joined,
        node,
        admin,
        ..
    } = &setup;
    let (c, j) = (control.display().to_string(), joined.display().to_string());

    let store = setup.store_args();
    let up = host.bosun(
        &[
            "up",
            "--no-agent",
            "--port",
            "0",
            "--data-dir",
            &c,
            "--cluster-cidr",
            &setup.cidr,
        ]
        .into_iter()
        .chain(store.iter().map(String::as_str))
        .collect::<Vec<&str>>(),
    );
    let JoinCommand {
        server,
        token,
        hash,
    } = JoinCommand::from_up(up.ok());
    let join = |token: &str, hash: &str| host.bosun(&setup.join_args(&j, &server, token, hash));
    let credential = joined.join("node.kubeconfig");
    let before = host_state(node, "10.252.");

    // A CA that is not the one the hash names is refused, naming both.
    let wrong = format!("sha256:{}", "0".repeat(64));
    let err = join(&token, &wrong).fails().to_string();
    assert!(
        err.contains("does not match --ca-cert-hash")
            && err.contains(&hash)
            && err.contains(&wrong),
        "{err}"
    );
    assert!(!credential.exists(), "nothing written for an untrusted CA");

    // A revoked token is refused.
    let revoked = host.bosun(&["token", "create"]).ok().trim().to_string();
    let id = revoked.split('.').next().unwrap().to_string();
    assert!(host.bosun(&["token", "list"]).ok().contains(&revoked));
    host.bosun(&["token", "delete", &id]).ok();
    assert!(!host.bosun(&["token", "list"]).ok().contains(&revoked));
    let err = join(&revoked, &hash).fails().to_string();
    assert!(err.contains("refused bootstrap token"), "{err}");
    assert!(!credential.exists());

    // An expired token is refused, and its Secret is gone.
    let expired = host
        .bosun(&["token", "create", "--ttl", "1s", "--description", "short"])
        .ok()
        .trim()
        .to_string();
    let expired_id = expired.split('.').next().unwrap().to_string();
    wait_for("the 1s token to expire", Duration::from_secs(10), || {
        !host.bosun(&["token", "list"]).ok().contains(&expired)
    });
    let err = join(&expired, &hash).fails().to_string();
    assert!(err.contains("refused bootstrap token"), "{err}");
    let gone = host.kubectl(
        admin,
        &[
            "get",
            "secret",
            "-n",
            "kube-system",
            &format!("bootstrap-token-{expired_id}"),
        ],
    );
    assert!(gone.fails().contains("NotFound"), "{}", gone.stderr);

    // The good token: the agent runs with a certificate of its own.
    let joined_out = join(&token, &hash).ok().to_string();
    assert!(
        joined_out.contains(&format!("as node {node}")),
        "{joined_out}"
    );
    let mode = std::fs::metadata(&credential).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the credential is private");
    let text = std::fs::read_to_string(&credential).unwrap();
    assert!(text.contains("client-certificate-data") && text.contains("client-key-data"));
    let admin_token = std::fs::read_to_string(control.join("admin-token")).unwrap();
    for file in std::fs::read_dir(joined).unwrap().flatten() {
        if file.path().is_file() {
            let body = std::fs::read_to_string(file.path()).unwrap_or_default();
            assert!(
                !body.contains(admin_token.trim()),
                "the admin token reached {}",
                file.path().display()
            );
        }
    }
    wait_for(
        "the joined node to be Ready",
        Duration::from_secs(60),
        || setup.node_ready(),
    );
    // The certificate came through the CSR flow: the token's request,
    // approved by csrapproving and issued.
    let token_id = token.split('.').next().unwrap();
    let csrs = host.kubectl(admin, &["get", "csr", "--no-headers"]);
    assert!(
        csrs.ok().lines().any(|l| l.starts_with("node-csr-")
            && l.contains("kubernetes.io/kube-apiserver-client-kubelet")
            && l.contains(&format!("system:bootstrap:{token_id}"))
            && l.ends_with("Approved,Issued")),
        "{}",
        csrs.stdout
    );

    // A pod scheduled to the joined node, using one Secret; another
    // Secret no pod of the node uses; a pod bound to another node.
    let manifest = tmp.path().join("objects.yaml");
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: used}}\nstringData: {{password: s3cret}}\n---\n\
apiVersion: v1\nkind: Secret\nmetadata: {{name: unused}}\nstringData: {{password: other}}\n---\n\
apiVersion: v1\nkind: Pod\nmetadata: {{name: app}}\nspec:\n  nodeSelector: {{kubernetes.io/hostname: {node}}}\n  containers:\n  - name: app\n    image: bosun.local/busybox:1.35\n    imagePullPolicy: Never\n    command: [sh, -c, 'echo \"$PASSWORD\" > /tmp/p; echo app started; sleep 3600']\n    env:\n    - name: PASSWORD\n      valueFrom: {{secretKeyRef: {{name: used, key: password}}}}\n---\n\
apiVersion: v1\nkind: Pod\nmetadata: {{name: elsewhere}}\nspec:\n  nodeName: some-other-node\n  containers:\n  - name: app\n    image: bosun.local/busybox:1.35\n"
        ),
    )
    .unwrap();
    host.kubectl(admin, &["apply", "-f", &manifest.display().to_string()])
        .ok();
    wait_for(
        "the pod on the joined node to run",
        Duration::from_secs(90),
        || {
            host.kubectl(
                admin,
                &["get", "pod", "app", "-o", "jsonpath={.status.phase}"],
            )
            .stdout
                == "Running"
        },
    );
    let placed = host.kubectl(
        admin,
        &["get", "pod", "app", "-o", "jsonpath={.spec.nodeName}"],
    );
    assert_eq!(placed.ok(), node);

    // The node's credential reads the Secret its pod uses ...
    let used = host.kubectl(
        &credential,
        &["get", "secret", "used", "-o", "jsonpath={.data.password}"],
    );
    assert_eq!(used.ok(), "czNjcmV0");
    // ... and not one no pod of its node uses.
    let unused = host.kubectl(&credential, &["get", "secret", "unused"]);
    let err = unused.fails();
    assert!(
        err.contains(&format!(
            "secrets \"unused\" is forbidden: User \"system:node:{node}\" cannot get resource \"secrets\" in API group \"\" in the namespace \"default\": no relationship found between node '{node}' and this object"
        )),
        "{err}"
    );
    // It cannot write another node's pod status, nor list Secrets.
    let patch = host.kubectl(
        &credential,
        &[
            "patch",
            "pod",
            "elsewhere",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Failed"}}"#,
        ],
    );
    let err = patch.fails();
    assert!(
        err.contains(&format!(
            "node \"{node}\" can only update pod status for pods with spec.nodeName set to itself"
        )),
        "{err}"
    );
    assert!(host
        .kubectl(&credential, &["get", "secrets"])
        .fails()
        .contains("Forbidden"));
    // The admin still does everything.
    host.kubectl(admin, &["get", "secret", "unused"]).ok();
    node_restriction(host, admin, &credential, node, tmp.path());
    bootstrap_cannot_take_a_live_node(host, admin, &server, &hash, node, tmp.path());

    // Logs and exec reach the joined node's pod: the control plane
    // presents its client certificate of the cluster CA to the agent.
    wait_for("the pod's log", Duration::from_secs(30), || {
        host.bosun(&["logs", "app"]).ok().contains("app started")
    });
    let exec = host.bosun(&["exec", "app", "--", "cat", "/tmp/p"]);
    assert_eq!(exec.ok().trim(), "s3cret");
    let exec = host.kubectl(admin, &["exec", "app", "--", "cat", "/tmp/p"]);
    assert_eq!(exec.ok().trim(), "s3cret");
    let logs = host.kubectl(admin, &["logs", "app"]);
    assert!(logs.ok().contains("app started"), "{}", logs.stdout);

    // The agent itself refuses a certificate of another CA, even one
    // named as the cluster's (the handshake fails), a caller with none (401), and a node's certificate of the
    // cluster CA (403: one node may not exec into another's pods).
    let node_json: serde_json::Value = serde_json::from_str(
        host.kubectl(admin, &["get", "node", node, "-o", "json"])
            .ok(),
    )
    .unwrap();
    let exec_path = "/exec/default/app/app?command=cat&command=/tmp/p&stdout=true";
    let (cert, key) = impostor_certificate();
    let refused = agent_get(&node_json, Some((&cert, &key)), exec_path);
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.contains("received fatal alert")),
        "{refused:?}"
    );
    assert_eq!(agent_get(&node_json, None, exec_path), Ok(401));
    assert_eq!(
        agent_get(&node_json, None, "/containerLogs/default/app/app"),
        Ok(401)
    );
    let (cert, key) = kubeconfig_credential(&credential);
    assert_eq!(
        agent_get(
            &node_json,
            Some((&cert, &key)),
            "/containerLogs/default/app/app"
        ),
        Ok(403)
    );

    // Teardown through bosun itself: the agent removes the pod, its
    // containers and volumes (the other pod has no agent to do it).
    host.kubectl(admin, &["delete", "pod", "app", "--grace-period=1"])
        .ok();
    host.kubectl(
        admin,
        &["delete", "pod", "elsewhere", "--force", "--grace-period=0"],
    )
    .ok();
    let pods_dir = joined.join("agent/pods");
    let pod_dirs_left = || std::fs::read_dir(&pods_dir).map(|d| d.count()).unwrap_or(0);
    let start = Instant::now();
    while !docker_ids(node).is_empty() || pod_dirs_left() > 0 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the agent left the pod's containers or volumes; its log:\n{}",
            std::fs::read_to_string(joined.join("agent.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(250));
    }

    // `bosun leave` with a pod running: the Node goes (the node's own
    // credential deletes it), and so does everything on the host.
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: stay}}\nspec:\n  nodeName: {node}\n  containers:\n  - name: app\n    image: bosun.local/busybox:1.35\n    imagePullPolicy: Never\n    command: [sleep, '3600']\n"
        ),
    )
    .unwrap();
    host.kubectl(admin, &["apply", "-f", &manifest.display().to_string()])
        .ok();
    wait_for("the pod to stay to run", Duration::from_secs(60), || {
        host.kubectl(
            admin,
            &["get", "pod", "stay", "-o", "jsonpath={.status.phase}"],
        )
        .stdout
            == "Running"
    });
    let during = host_state(node, "10.252.");
    for what in ["container ", "network ", "route ", "iptables "] {
        assert!(
            during.iter().any(|l| l.starts_with(what)),
            "no {what}of the node to compare: {during:#?}"
        );
    }
    // Without a terminal it asks for --yes and changes nothing.
    let refused = host.bosun(&["leave", "--data-dir", &j]);
    assert!(refused.fails().contains("pass --yes"), "{}", refused.stderr);
    assert_eq!(host_state(node, "10.252."), during);
    let left = host.bosun(&["leave", "--yes", "--data-dir", &j]);
    let out = left.ok();
    assert!(out.contains(&format!("node/{node} deleted")), "{out}");
    assert!(!joined.exists(), "the credential and data are gone");
    assert_eq!(host_state(node, "10.252."), before, "{out}");
    let gone = host.kubectl(admin, &["get", "node", node]);
    assert!(gone.fails().contains("NotFound"), "{}", gone.stderr);
    wait_for(
        "the pod of the deleted node to be removed",
        Duration::from_secs(30),
        || {
            host.kubectl(admin, &["get", "pod", "stay"])
                .stderr
                .contains("NotFound")
        },
    );
    host.bosun(&["down", "--purge", "--yes", "--data-dir", &c])
        .ok();
}

/// The claims of a JWT (its middle part, unverified).
fn jwt_claims(token: &str) -> serde_json::Value {
    let payload = token.trim().split('.').nth(1).expect("a JWT");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// What the joined node's `credential` may not do (NodeRestriction), and
/// TokenRequest through kubectl (protobuf) with its lifetime bounded.
fn node_restriction(host: &Host, admin: &Path, credential: &Path, node: &str, tmp: &Path) {
    token_lifetime_is_bounded(host, admin);
    node_tokens_only_for_its_pods(host, admin, credential);
    pod_cidr_and_labels_are_not_the_nodes(host, admin, credential, node, tmp);
    volumes_are_not_the_nodes(host, admin, credential, node, tmp);
    ingress_status_is_not_the_nodes(host, admin, credential, node, tmp);
}

/// `kubectl create token`: a JWT, its lifetime shortened to the server's
/// maximum (24h by default) with upstream's warning; less than 10 minutes
/// is refused.
fn token_lifetime_is_bounded(host: &Host, admin: &Path) {
    let long = host.kubectl(admin, &["create", "token", "default", "--duration", "48h"]);
    let claims = jwt_claims(long.ok());
    let lifetime = claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap();
    assert_eq!(lifetime, 86400, "{claims}");
    assert!(
        long.stderr
            .contains("requested expiration of 172800 seconds shortened to 86400 seconds"),
        "{}",
        long.stderr
    );
    let short = host.kubectl(admin, &["create", "token", "default", "--duration", "5m"]);
    let err = short.fails();
    assert!(
        err.contains("spec.expirationSeconds: Invalid value: 300: may not specify a duration less than 10 minutes"),
        "{err}"
    );
}

/// A node's tokens: only bound to a pod of its own.
fn node_tokens_only_for_its_pods(host: &Host, admin: &Path, credential: &Path) {
    let uid = |pod: &str| {
        host.kubectl(
            admin,
            &["get", "pod", pod, "-o", "jsonpath={.metadata.uid}"],
        )
        .ok()
        .to_string()
    };
    let bound_to = |pod: &str, uid: &str| {
        host.kubectl(
            credential,
            &[
                "create",
                "token",
                "default",
                "--bound-object-kind",
                "Pod",
                "--bound-object-name",
                pod,
                "--bound-object-uid",
                uid,
            ],
        )
    };
    let own = jwt_claims(bound_to("app", &uid("app")).ok());
    assert_eq!(own["kubernetes.io"]["pod"]["name"], "app", "{own}");
    let err = bound_to("elsewhere", &uid("elsewhere")).fails().to_string();
    assert!(
        err.contains("serviceaccounts \"default\" is forbidden: node requested token bound to a pod scheduled on a different node"),
        "{err}"
    );
    let err = host
        .kubectl(credential, &["create", "token", "default"])
        .fails()
        .to_string();
    assert!(
        err.contains("node requested token not bound to a pod"),
        "{err}"
    );
}

/// The pod CIDR: the control plane's, inside --cluster-cidr, and then
/// fixed; a node credential cannot move it (nor can the admin).
fn pod_cidr_and_labels_are_not_the_nodes(
    host: &Host,
    admin: &Path,
    credential: &Path,
    node: &str,
    tmp: &Path,
) {
    let assigned = host
        .kubectl(
            admin,
            &["get", "node", node, "-o", "jsonpath={.spec.podCIDR}"],
        )
        .ok()
        .to_string();
    assert!(assigned.starts_with("10.252."), "{assigned}");
    let hijack = r#"{"spec":{"podCIDR":"0.0.0.0/1","podCIDRs":["0.0.0.0/1"]}}"#;
    for who in [credential, admin] {
        let patch = host.kubectl(who, &["patch", "node", node, "--type=merge", "-p", hijack]);
        let err = patch.fails();
        assert!(
            err.contains("spec.podCIDRs: Forbidden: node updates may not change podCIDR except from \"\" to valid"),
            "{err}"
        );
    }
    let ghost = tmp.join("ghost.yaml");
    std::fs::write(
        &ghost,
        "apiVersion: v1\nkind: Node\nmetadata: {name: ghost}\nspec: {podCIDR: 0.0.0.0/1, podCIDRs: [0.0.0.0/1]}\n",
    )
    .unwrap();
    let err = host
        .kubectl(admin, &["create", "-f", &ghost.display().to_string()])
        .fails()
        .to_string();
    assert!(
        err.contains("spec.podCIDRs[0]: Invalid value: \"0.0.0.0/1\": must be a subnet of the cluster's pod network 10.252.0.0/16 (--cluster-cidr)"),
        "{err}"
    );
    // Nor its taints or a role label (upstream's NodeRestriction).
    let err = host
        .kubectl(
            credential,
            &[
                "label",
                "node",
                node,
                "node-role.kubernetes.io/control-plane=",
            ],
        )
        .fails()
        .to_string();
    assert!(
        err.contains("is not allowed to modify labels: node-role.kubernetes.io/control-plane"),
        "{err}"
    );
}

/// A volume pinned to the node: not the node's to rewrite.
fn volumes_are_not_the_nodes(host: &Host, admin: &Path, credential: &Path, node: &str, tmp: &Path) {
    let pv = tmp.join("pv.yaml");
    std::fs::write(
        &pv,
        format!(
            "apiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: pinned}}\nspec:\n  capacity: {{storage: 1Gi}}\n  accessModes: [ReadWriteOnce]\n  hostPath: {{path: /nonexistent/bosun-pinned}}\n  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n      - matchExpressions:\n        - {{key: kubernetes.io/hostname, operator: In, values: [{node}]}}\n"
        ),
    )
    .unwrap();
    host.kubectl(admin, &["create", "-f", &pv.display().to_string()])
        .ok();
    for change in [
        r#"{"spec":{"hostPath":{"path":"/etc"}}}"#,
        r#"{"metadata":{"labels":{"x":"y"}}}"#,
    ] {
        let patch = host.kubectl(
            credential,
            &["patch", "pv", "pinned", "--type=merge", "-p", change],
        );
        let err = patch.fails();
        assert!(
            err.contains(&format!("persistentvolumes \"pinned\" is forbidden: node \"{node}\" may only remove the bosun.io/local-path-cleanup finalizer")),
            "{err}"
        );
    }
    let path = host
        .kubectl(
            admin,
            &[
                "get",
                "pv",
                "pinned",
                "-o",
                "jsonpath={.spec.hostPath.path}",
            ],
        )
        .ok()
        .to_string();
    assert_eq!(path, "/nonexistent/bosun-pinned");
    // Not waiting for its finalizers: that is the volume controllers'.
    host.kubectl(admin, &["delete", "pv", "pinned", "--wait=false"])
        .ok();
}

/// An Ingress's status: a node may publish or withdraw its own address
/// (its ingress controller does), never point the Ingress elsewhere.
fn ingress_status_is_not_the_nodes(
    host: &Host,
    admin: &Path,
    credential: &Path,
    node: &str,
    tmp: &Path,
) {
    let ing = tmp.join("ingress.yaml");
    std::fs::write(
        &ing,
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: hijack}\nspec:\n  defaultBackend:\n    service: {name: web, port: {number: 80}}\n",
    )
    .unwrap();
    host.kubectl(admin, &["create", "-f", &ing.display().to_string()])
        .ok();
    // A PUT of the status (kubectl patch would GET ingresses/status
    // first, which an ingress controller's role does not grant).
    for entry in ["{ip: 203.0.113.9}", "{hostname: evil.test}"] {
        let status = tmp.join("ingress-status.yaml");
        std::fs::write(
            &status,
            format!(
                "{}status:\n  loadBalancer:\n    ingress: [{entry}]\n",
                std::fs::read_to_string(&ing).unwrap()
            ),
        )
        .unwrap();
        let run = host.kubectl(
            credential,
            &[
                "replace",
                "--subresource=status",
                "-f",
                &status.display().to_string(),
            ],
        );
        let err = run.fails();
        assert!(
            err.contains(&format!("ingresses \"hijack\" is forbidden: node \"{node}\" may only add or remove its own addresses in status.loadBalancer.ingress")),
            "{err}"
        );
    }
    let published = host
        .kubectl(
            admin,
            &[
                "get",
                "ingress",
                "hijack",
                "-o",
                "jsonpath={.status.loadBalancer.ingress[*]}",
            ],
        )
        .ok()
        .to_string();
    assert!(
        !published.contains("203.0.113.9") && !published.contains("evil.test"),
        "{published}"
    );
    host.kubectl(admin, &["delete", "ingress", "hijack"]).ok();
}

/// A fresh bootstrap token cannot get a certificate for the name of the
/// joined node while it is live: its request stays Pending, with an
/// event saying why, and the node stays Ready.
fn bootstrap_cannot_take_a_live_node(
    host: &Host,
    admin: &Path,
    server: &str,
    hash: &str,
    node: &str,
    tmp: &Path,
) {
    let token = host.bosun(&["token", "create"]).ok().trim().to_string();
    let thief = tmp.join("thief");
    let t = thief.display().to_string();
    let err = host
        .bosun(&[
            "join",
            server,
            "--token",
            &token,
            "--ca-cert-hash",
            hash,
            "--data-dir",
            &t,
            "--node-name",
            node,
            "--node-ip",
            "127.0.0.1",
            "--port",
            "0",
            "--timeout",
            "15s",
        ])
        .fails()
        .to_string();
    assert!(err.contains("was not issued within 15s"), "{err}");
    let csr = err
        .split_whitespace()
        .find(|w| w.starts_with("node-csr-"))
        .unwrap_or_else(|| panic!("no request named: {err}"));
    let events = || {
        host.kubectl(
            admin,
            &[
                "get",
                "events",
                "-A",
                "--field-selector",
                &format!("involvedObject.name={csr},reason=NodeNameInUse"),
                "-o",
                "jsonpath={.items[*].message}",
            ],
        )
        .stdout
    };
    wait_for("the NodeNameInUse event", Duration::from_secs(30), || {
        events().contains(&format!(
            "node \"{node}\" already exists and is live (its Lease was renewed"
        ))
    });
    let state = host.kubectl(
        admin,
        &[
            "get",
            "csr",
            csr,
            "-o",
            "jsonpath={.status.conditions}|{.status.certificate}",
        ],
    );
    assert_eq!(state.ok(), "|", "neither approved nor issued");
    assert!(!thief.join("node.kubeconfig").exists());
    host.kubectl(admin, &["delete", "csr", csr]).ok();
}

/// The `notAfter` of a PEM certificate.
fn not_after(pem: &str) -> std::time::SystemTime {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
    let cert = pem.parse_x509().unwrap();
    let secs = cert.validity().not_after.timestamp();
    std::time::UNIX_EPOCH + Duration::from_secs(secs as u64)
}

#[test]
fn a_joined_node_keeps_working_past_its_first_certificates_expiry() {
    let tmp = tempfile::tempdir().unwrap();
    // A /16 apart from the other test's.
    let setup = Setup::new(tmp.path(), "rotated", "10.251.0.0/16");
    let Setup {
        host,
        control,
        joined,
        node,
        admin,
        ..
    } = &setup;
    let (c, j) = (control.display().to_string(), joined.display().to_string());
    // A fixed port, so that the control plane restarts where the node's
    // kubeconfig points.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    // Certificates of 30 s (the control plane's --cluster-signing-duration,
    // which bosun-control takes from the environment `bosun up` starts it
    // in): the agent renews after about 24 s.
    let store = setup.store_args();
    let up = || {
        let args = [
            "up",
            "--no-agent",
            "--port",
            &port,
            "--data-dir",
            &c,
            "--cluster-cidr",
            &setup.cidr,
        ];
        let out = Command::new(env!("CARGO_BIN_EXE_bosun"))
            .args(args)
            .args(&store)
            .env("HOME", &host.home)
            .env("BOSUN_CLUSTER_SIGNING_DURATION", "30s")
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        Run::from("bosun", &args, out)
    };
    let JoinCommand {
        server,
        token,
        hash,
    } = JoinCommand::from_up(up().ok());
    host.bosun(&setup.join_args(&j, &server, &token, &hash))
        .ok();
    let credential = joined.join("node.kubeconfig");
    let first_kubeconfig = std::fs::read_to_string(&credential).unwrap();
    let (first, _) = kubeconfig_credential(&credential);
    let first_expiry = not_after(&first);
    wait_for(
        "the joined node to be Ready",
        Duration::from_secs(60),
        || setup.node_ready(),
    );

    // Renewed before it expires, written over the kubeconfig.
    wait_for(
        "the agent to renew its certificate",
        Duration::from_secs(40),
        || kubeconfig_credential(&credential).0 != first,
    );
    let (renewed, _) = kubeconfig_credential(&credential);
    assert!(not_after(&renewed) > first_expiry);
    // Through a request of the node's own, approved as selfnodeclient.
    let csrs = host.kubectl(
        admin,
        &["get", "csr", "-o", "jsonpath={range .items[*]}{.spec.username} {.status.conditions[0].message}{\"\\n\"}{end}"],
    );
    assert!(
        csrs.ok().lines().any(|l| l
            == format!("system:node:{node} Auto approving self kubelet client certificate after SubjectAccessReview.")),
        "{}",
        csrs.stdout
    );
    assert!(
        std::time::SystemTime::now() < first_expiry,
        "renewed only after the first certificate expired"
    );
    // The agent logs the renewal after writing the kubeconfig, and its
    // supervisor copies the line into agent.log a moment later.
    let log = || std::fs::read_to_string(joined.join("agent.log")).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !log().contains("renewed the node's client certificate") {
        assert!(
            Instant::now() < deadline,
            "the renewal was not logged:\n{}",
            log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // Every connection of the agent is cut (the control plane stops) and
    // is made anew once the first certificate has expired (TLS checks a
    // certificate at the handshake only). The agent reconnects with the
    // certificate it renewed, without a restart of its own.
    host.bosun(&["down", "--data-dir", &c]).ok();
    wait_for(
        "the first certificate to expire",
        Duration::from_secs(40),
        || std::time::SystemTime::now() > first_expiry + Duration::from_secs(1),
    );
    up().ok();
    let old = tmp.path().join("first.kubeconfig");
    std::fs::write(&old, first_kubeconfig).unwrap();
    let refused = host.kubectl(&old, &["get", "node", node]);
    refused.fails();
    let manifest = tmp.path().join("pod.yaml");
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: later}}\nspec:\n  nodeName: {node}\n  containers:\n  - name: app\n    image: bosun.local/busybox:1.35\n    imagePullPolicy: Never\n    command: [sleep, '3600']\n"
        ),
    )
    .unwrap();
    host.kubectl(admin, &["apply", "-f", &manifest.display().to_string()])
        .ok();
    wait_for(
        "a pod made after the first certificate expired to run",
        Duration::from_secs(60),
        || {
            host.kubectl(
                admin,
                &["get", "pod", "later", "-o", "jsonpath={.status.phase}"],
            )
            .stdout
                == "Running"
        },
    );
    assert!(setup.node_ready(), "the node is Ready");
    let log = std::fs::read_to_string(joined.join("agent.log")).unwrap();
    assert!(!log.contains("certificate expired"), "{log}");

    host.bosun(&["leave", "--yes", "--data-dir", &j]).ok();
    host.bosun(&["down", "--purge", "--yes", "--data-dir", &c])
        .ok();
}
