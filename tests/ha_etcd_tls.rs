//! The etcd of `bosun up --ha` (Debian's etcd) is the cluster's alone:
//! every member's client and peer port speaks TLS only and refuses a
//! client without a certificate of the cluster's etcd CA (plain HTTP, TLS
//! without a certificate, a certificate of another CA), so another user of
//! the host cannot read the Secrets or write past the API's RBAC; the
//! control planes (and one joined with `bosun join --control-plane`) reach
//! it with theirs; the keys are private files; `down --purge` removes it.

mod common;

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::{kubectl_context, Run};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

const MEMBERS: usize = 3;

/// Kills what `up --ha` and the join started (by their recorded pids),
/// also when the test fails half-way.
struct Reaper {
    dir: PathBuf,
    joined: PathBuf,
}

impl Drop for Reaper {
    fn drop(&mut self) {
        common::kill_started_processes(&self.joined);
        for i in 0..MEMBERS {
            common::kill_started_processes(&control_dir(&self.dir, i));
            for file in ["etcd.supervisor.pid", "etcd.pid"] {
                bosun_test_support::process::kill_pid_file(&etcd_dir(&self.dir, i).join(file));
            }
        }
    }
}

fn control_dir(dir: &Path, i: usize) -> PathBuf {
    match i {
        0 => dir.to_path_buf(),
        _ => dir.join(format!("control-{}", i + 1)),
    }
}

fn etcd_dir(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("etcd-{}", i + 1))
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z"))
}

/// A TLS client trusting `ca`, presenting `identity` (cert, key PEM) if given.
fn tls(ca: &Path, identity: Option<(String, String)>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    Arc::new(match identity {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => builder
            .with_client_auth_cert(
                CertificateDer::pem_slice_iter(cert.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap(),
                PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap(),
    })
}

/// `GET path` on 127.0.0.1:`port`, over TLS with `config` or in plain
/// HTTP: the response, or the error that ended the exchange.
fn get(port: u16, path: &str, config: Option<Arc<rustls::ClientConfig>>) -> Result<String, String> {
    let mut tcp = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    let mut out = Vec::new();
    let read = match config {
        None => {
            tcp.write_all(request.as_bytes())
                .map_err(|e| e.to_string())?;
            tcp.read_to_end(&mut out)
        }
        Some(config) => {
            let name = ServerName::IpAddress(std::net::Ipv4Addr::LOCALHOST.into());
            let conn = rustls::ClientConnection::new(config, name).unwrap();
            let mut stream = rustls::StreamOwned::new(conn, tcp);
            stream
                .write_all(request.as_bytes())
                .map_err(|e| e.to_string())?;
            stream.read_to_end(&mut out)
        }
    };
    let text = String::from_utf8_lossy(&out).into_owned();
    match read {
        Ok(_) => Ok(text),
        // etcd may end a TLS exchange without close_notify.
        Err(e) if !text.is_empty() => Ok(format!("{text}\n(then: {e})")),
        Err(e) => Err(e.to_string()),
    }
}

fn read_file(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn the_etcd_of_up_ha_refuses_clients_without_its_client_certificate() {
    if !bosun_test_support::etcd::installed() {
        eprintln!("skipping: etcd is not installed (apt-get install -y etcd-server)");
        return;
    }
    common::control_binary();
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().to_path_buf();
    let name = format!("etls{}", std::process::id());
    let dir = home.join(".bosun/clusters").join(&name).join("control");
    let joined = home.join("joined");
    let _reaper = Reaper {
        dir: dir.clone(),
        joined: joined.clone(),
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

    let up = bosun(&[
        "up",
        "--ha",
        "--name",
        &name,
        "--no-agent",
        "--timeout",
        "240s",
    ]);
    assert!(up.ok().contains("bosun is up."), "{}", up.stdout);

    // The PKI: a private folder, private keys.
    let pki = dir.join("etcd-pki");
    assert_eq!(mode(&pki), 0o700, "{}", pki.display());
    for key in [
        "ca.key",
        "server.key",
        "peer.key",
        "apiserver-etcd-client.key",
    ] {
        assert_eq!(mode(&pki.join(key)), 0o600, "{key}");
    }
    let ca = pki.join("ca.crt");
    let client_cert = || {
        Some((
            read_file(&pki.join("apiserver-etcd-client.crt")),
            read_file(&pki.join("apiserver-etcd-client.key")),
        ))
    };
    // A certificate for the same name from a CA of its own.
    let stranger = {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "kube-apiserver-etcd-client");
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.self_signed(&key).unwrap();
        Some((cert.pem(), key.serialize_pem()))
    };

    let layout: serde_json::Value = serde_json::from_str(&read_file(&dir.join("ha.json"))).unwrap();
    for (i, member) in layout["members"].as_array().unwrap().iter().enumerate() {
        let client = member["etcdClientPort"].as_u64().unwrap() as u16;
        let peer = member["etcdPeerPort"].as_u64().unwrap() as u16;
        let m = i + 1;
        // With the client certificate: served (the keys' range is the
        // API's objects, so this is what the control planes read).
        let health = get(client, "/health", Some(tls(&ca, client_cert())));
        assert!(
            health
                .as_ref()
                .is_ok_and(|h| h.contains("\"health\":\"true\"")),
            "member {m} with the client certificate: {health:?}"
        );
        for (port, what) in [(client, "client"), (peer, "peer")] {
            let path = if port == client {
                "/health"
            } else {
                "/members"
            };
            let plain = get(port, path, None);
            assert!(
                !plain.as_ref().is_ok_and(|t| t.contains("200 OK")),
                "member {m}'s {what} port answered plain HTTP: {plain:?}"
            );
            let anonymous = get(port, path, Some(tls(&ca, None)));
            assert!(
                anonymous.is_err(),
                "member {m}'s {what} port served TLS without a client certificate: {anonymous:?}"
            );
            let other = get(port, path, Some(tls(&ca, stranger.clone())));
            assert!(
                other.is_err(),
                "member {m}'s {what} port served a certificate of another CA: {other:?}"
            );
        }
        // A peer's certificate is taken on the peer port.
        let peer_identity = Some((
            read_file(&pki.join("peer.crt")),
            read_file(&pki.join("peer.key")),
        ));
        let members = get(peer, "/members", Some(tls(&ca, peer_identity)));
        assert!(
            members
                .as_ref()
                .is_ok_and(|t| t.contains("https://127.0.0.1:")),
            "member {m}'s peer port with the peer certificate: {members:?}"
        );
    }

    // Every control plane serves (from etcd, through its client certificate).
    let kubeconfig = home.join(".bosun/kubeconfig");
    let ctx = format!("bosun-{name}");
    let kubectl = |args: &[&str]| kubectl_context(&kubeconfig, &ctx, args);
    for i in 0..MEMBERS {
        let server = common::loopback_server(&control_dir(&dir, i));
        let ns = kubectl(&["--server", &server, "get", "ns", "default", "-o", "name"]);
        assert_eq!(ns.ok().trim(), "namespace/default");
    }

    // A control plane joined with the printed command gets the etcd CA and
    // a client certificate, not the etcd CA's key, and serves.
    let join_args = common::control_plane_join_args(&up.stdout, &joined);
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
        read_file(&ca),
        "the joined control plane's etcd CA"
    );
    assert_eq!(mode(&joined.join("apiserver-etcd-client.key")), 0o600);
    let etcd_ca_key = read_file(&pki.join("ca.key"));
    for entry in std::fs::read_dir(&joined).unwrap().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        assert!(
            !text.contains(etcd_ca_key.trim()),
            "the etcd CA's key was handed to the joined control plane ({:?})",
            entry.path()
        );
    }
    let via_joined = common::loopback_server(&joined);
    let ns = kubectl(&[
        "--server",
        &via_joined,
        "get",
        "ns",
        "default",
        "-o",
        "name",
    ]);
    assert_eq!(ns.ok().trim(), "namespace/default");
    bosun(&["down", "--data-dir", &joined_str, "--purge", "--yes"]).ok();
    assert!(!joined.exists());

    // down --purge stops the members and removes their PKI with the rest.
    let pids: Vec<i32> = (0..MEMBERS)
        .filter_map(|i| {
            read_file(&etcd_dir(&dir, i).join("etcd.pid"))
                .trim()
                .parse()
                .ok()
        })
        .collect();
    assert_eq!(pids.len(), MEMBERS);
    bosun(&["down", "--name", &name, "--purge", "--yes"]).ok();
    for pid in pids {
        assert!(!alive(pid), "etcd pid {pid} still runs after down --purge");
    }
    assert!(!home.join(".bosun/clusters").join(&name).exists());
}
