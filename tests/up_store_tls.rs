//! `bosun up --store etcd://... --etcd-cafile --etcd-certfile
//! --etcd-keyfile`: a cluster on an etcd the user runs with TLS and
//! required client certificates (as kubeadm's external etcd). The flags are
//! checked before anything is written, the files are kept in the cluster's
//! data dir (so a later plain `bosun up` brings it back), and a control
//! plane that joins is handed them.
//!
//! Needs Debian's etcd-server (scripts/test.sh installs it); skipped
//! without it.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use bosun_test_support::etcd::{Etcd, MemberTls};
use common::{kubectl_context, Run};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};

/// Kills what `up` and the join started (by their recorded pids), also
/// when the test fails half-way.
struct Reaper {
    dirs: Vec<PathBuf>,
}

impl Drop for Reaper {
    fn drop(&mut self) {
        for dir in &self.dirs {
            common::kill_started_processes(dir);
        }
    }
}

fn read_file(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// An etcd PKI of the user's, as one would make with cfssl or openssl: a
/// CA, the member's serving certificate for 127.0.0.1 (with the CA, in
/// `dir/member`: etcd reads them again at each handshake) and a client
/// certificate (with the CA, in `dir/client`: what bosun is given).
struct UserPki {
    member_ca: PathBuf,
    server: (PathBuf, PathBuf),
    ca: PathBuf,
    client: (PathBuf, PathBuf),
}

fn user_pki(dir: &Path) -> UserPki {
    let (member_dir, client_dir) = (dir.join("member"), dir.join("client"));
    std::fs::create_dir_all(&member_dir).unwrap();
    std::fs::create_dir_all(&client_dir).unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "users-etcd-ca");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(params, ca_key);
    let leaf = |dir: &Path, name: &str, sans: Vec<String>, usage: ExtendedKeyUsagePurpose| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(sans).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &issuer).unwrap();
        let (crt, pem) = (
            dir.join(format!("{name}.crt")),
            dir.join(format!("{name}.key")),
        );
        std::fs::write(&crt, cert.pem()).unwrap();
        std::fs::write(&pem, key.serialize_pem()).unwrap();
        std::fs::set_permissions(&pem, std::fs::Permissions::from_mode(0o600)).unwrap();
        (crt, pem)
    };
    let server = leaf(
        &member_dir,
        "member",
        vec!["127.0.0.1".into()],
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let client = leaf(
        &client_dir,
        "apiserver",
        vec![],
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    let [member_ca, client_ca] = [&member_dir, &client_dir].map(|d| d.join("ca.crt"));
    std::fs::write(&member_ca, ca.pem()).unwrap();
    std::fs::write(&client_ca, ca.pem()).unwrap();
    UserPki {
        member_ca,
        server,
        ca: client_ca,
        client,
    }
}

#[test]
fn up_on_a_users_etcd_with_client_certificates() {
    if !bosun_test_support::etcd::installed() {
        eprintln!("skipping: etcd is not installed (apt-get install -y etcd-server)");
        return;
    }
    common::control_binary();
    let tmp = tempfile::tempdir().unwrap();
    let pki_dir = tmp.path().join("users-pki");
    let pki = user_pki(&pki_dir);
    let etcd = Etcd::start_tls(&MemberTls {
        ca: pki.member_ca.clone(),
        cert: pki.server.0.clone(),
        key: pki.server.1.clone(),
    })
    .unwrap();
    let store = etcd.store_url();

    let home = tmp.path().join("home");
    let name = format!("stls{}", std::process::id());
    let cluster_dir = home.join(".bosun/clusters").join(&name);
    let dir = cluster_dir.join("control");
    let joined = home.join("joined");
    let _reaper = Reaper {
        dirs: vec![dir.clone(), joined.clone()],
    };
    let bosun = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_bosun"))
            .args(args)
            .env("HOME", &home)
            // The cluster's record stays in the test's own registry: no
            // agent runs, so its ranges take nothing from the host.
            .env("BOSUN_CLUSTERS_DIR", home.join("clusters.d"))
            .env("BOSUN_SERVICE_MANAGER", "bosun")
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        Run::from("bosun", args, out)
    };
    let (ca, cert, key) = (
        pki.ca.to_str().unwrap(),
        pki.client.0.to_str().unwrap(),
        pki.client.1.to_str().unwrap(),
    );
    let up = |extra: &[&str]| {
        let mut args = vec!["up", "--name", &name, "--no-agent", "--timeout", "120s"];
        args.extend(extra);
        bosun(&args)
    };

    // Bad input is refused naming the flag, before anything is made.
    for (extra, says) in [
        (
            vec![
                "--store",
                &store,
                "--etcd-cafile",
                ca,
                "--etcd-certfile",
                cert,
            ],
            "--etcd-certfile needs --etcd-keyfile",
        ),
        (
            vec![
                "--store",
                &store,
                "--etcd-certfile",
                cert,
                "--etcd-keyfile",
                key,
            ],
            "need --etcd-cafile",
        ),
        (
            vec!["--store", &store, "--etcd-cafile", key],
            "--etcd-cafile",
        ),
        (
            vec![
                "--store",
                &store,
                "--etcd-cafile",
                ca,
                "--etcd-certfile",
                cert,
                "--etcd-keyfile",
                cert,
            ],
            "--etcd-keyfile",
        ),
    ] {
        let run = up(&extra);
        let refused = run.fails();
        assert!(
            refused.contains(says),
            "up {extra:?}: expected an error with {says:?}, got: {refused}"
        );
        assert!(
            !cluster_dir.exists(),
            "up {extra:?} was refused but left {}",
            cluster_dir.display()
        );
    }

    // Up on the user's etcd, through its client certificate.
    let first = up(&[
        "--store",
        &store,
        "--etcd-cafile",
        ca,
        "--etcd-certfile",
        cert,
        "--etcd-keyfile",
        key,
    ]);
    assert!(first.ok().contains("bosun is up."), "{}", first.stdout);
    let kept = dir.join("etcd-pki");
    assert_eq!(mode(&kept), 0o700);
    assert_eq!(mode(&kept.join("apiserver-etcd-client.key")), 0o600);
    assert_eq!(read_file(&kept.join("ca.crt")), read_file(&pki.ca));
    let kubeconfig = home.join(".bosun/kubeconfig");
    let ctx = format!("bosun-{name}");
    let kubectl = |args: &[&str]| kubectl_context(&kubeconfig, &ctx, args);
    kubectl(&["create", "configmap", "kept", "--from-literal=on=etcd"]).ok();

    // The user's files may go: the cluster comes back from its own copies,
    // with the object it had (read from etcd).
    std::fs::remove_dir_all(pki_dir.join("client")).unwrap();
    bosun(&["down", "--name", &name]).ok();
    let again = up(&[]);
    assert!(again.ok().contains("bosun is up."), "{}", again.stdout);
    let value = kubectl(&["get", "configmap", "kept", "-o", "jsonpath={.data.on}"]);
    assert_eq!(value.ok().trim(), "etcd");

    // A control plane joined with the printed command is handed the etcd
    // CA and the client certificate, and serves from the same etcd.
    // The later up uploaded the certificates again: its command first.
    let stdout = format!("{}{}", again.stdout, first.stdout);
    let join_args = common::control_plane_join_args(&stdout, &joined);
    let join_args: Vec<&str> = join_args.iter().map(String::as_str).collect();
    let joined_str = joined.to_str().unwrap().to_string();
    let joined_up = bosun(&join_args);
    assert!(
        joined_up.ok().contains("is a control plane of the cluster"),
        "{}",
        joined_up.stdout
    );
    assert_eq!(
        read_file(&joined.join("etcd-ca.crt")),
        read_file(&kept.join("ca.crt"))
    );
    assert_eq!(mode(&joined.join("apiserver-etcd-client.key")), 0o600);
    let via_joined = common::loopback_server(&joined);
    let value = kubectl(&[
        "--server",
        &via_joined,
        "get",
        "configmap",
        "kept",
        "-o",
        "jsonpath={.data.on}",
    ]);
    assert_eq!(value.ok().trim(), "etcd");
    bosun(&["down", "--data-dir", &joined_str, "--purge", "--yes"]).ok();
    assert!(!joined.exists());

    // down --purge removes the copies with the rest; the user's etcd runs on.
    bosun(&["down", "--name", &name, "--purge", "--yes"]).ok();
    assert!(!cluster_dir.exists());
    assert!(etcd_alive(&etcd), "the user's etcd was stopped");
}

fn etcd_alive(etcd: &Etcd) -> bool {
    std::fs::read_to_string(format!("/proc/{}/stat", etcd.pid())).is_ok_and(|s| !s.contains(") Z"))
}
