//! Backups: `bosun snapshot save` against a control plane taking writes,
//! `bosun snapshot restore` into a new data dir, and a second control
//! plane on it serving exactly the snapshot's revision; the endpoint is the
//! admin's only; a damaged file restores nothing; periodic snapshots keep
//! the newest N.
//!
//! `bosun snapshot` backs up the embedded store (on etcd, `etcdctl
//! snapshot save` does): these tests stay on the embedded store whatever
//! `BOSUN_TEST_STORE` says.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use kube::api::{ListParams, PostParams};
use kube::Client;
use serde_json::json;

/// The store these tests back up (see the top of the file).
const EMBEDDED: &[&str] = &["--store", "embedded"];

/// The `bosun` CLI, built into the same target dir if it is not there yet.
fn bosun_cli() -> PathBuf {
    let path = binary().with_file_name("bosun");
    if !path.exists() {
        let target_dir = binary().parent().unwrap().parent().unwrap().to_path_buf();
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["build", "-p", "bosun", "--target-dir"])
            .arg(&target_dir)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("running cargo build -p bosun");
        assert!(status.success(), "cargo build -p bosun failed");
    }
    path
}

fn bosun(args: &[&str]) -> Output {
    Command::new(bosun_cli())
        .args(args)
        .output()
        .expect("running bosun")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The number after `word` in `line` ("revision 123," -> 123).
fn number_after(line: &str, word: &str) -> u64 {
    let rest = &line[line
        .find(word)
        .unwrap_or_else(|| panic!("no {word:?} in {line:?}"))
        + word.len()..];
    rest.trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect::<String>()
        .parse()
        .unwrap_or_else(|_| panic!("no number after {word:?} in {line:?}"))
}

/// A client of the restored server made from the OLD kubeconfig: its CA
/// and token, only the address changed.
async fn old_credentials_client(old: &ControlPlane, new_addr: &str) -> Client {
    let mut config = old.config().await;
    let port = new_addr.rsplit(':').next().unwrap();
    config.cluster_url = format!("https://127.0.0.1:{port}").parse().unwrap();
    Client::try_from(config).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_snapshot_taken_during_writes_restores_exactly_its_revision() {
    let cp = ControlPlane::start_with(EMBEDDED);
    let client = cp.client().await;
    let stop = Arc::new(AtomicBool::new(false));
    // Every acknowledged write: name -> (resourceVersion, data).
    let acked = Arc::new(Mutex::new(BTreeMap::<String, (u64, String)>::new()));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (client, stop, acked) = (client.clone(), stop.clone(), acked.clone());
            tokio::spawn(async move {
                let cms = dynamic_api(&client, "configmaps", Some("default"));
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) {
                    let name = format!("w{w}-{i}");
                    let data = format!("payload {w} {i} {}", "x".repeat(200));
                    let obj = serde_json::from_value(json!({
                        "apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": name},
                        "data": {"v": data},
                    }))
                    .unwrap();
                    let made = cms
                        .create(&PostParams::default(), &obj)
                        .await
                        .expect("create");
                    let rv: u64 = made.metadata.resource_version.unwrap().parse().unwrap();
                    acked.lock().unwrap().insert(name, (rv, data));
                    i += 1;
                }
            })
        })
        .collect();
    wait_for("writers to get going", Duration::from_secs(30), || {
        (acked.lock().unwrap().len() >= 200).then_some(())
    });

    let out_dir = tempfile::tempdir().unwrap();
    let file = out_dir.path().join("cluster.bosun");
    let kubeconfig = cp.kubeconfig_path();
    let save = {
        let (kubeconfig, file) = (kubeconfig.clone(), file.clone());
        tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let out = bosun(&[
                "--kubeconfig",
                kubeconfig.to_str().unwrap(),
                "snapshot",
                "save",
                file.to_str().unwrap(),
            ]);
            (out, started.elapsed())
        })
        .await
        .unwrap()
    };
    // Writes go on after the snapshot, then stop.
    let after_save = acked.lock().unwrap().len();
    wait_for("writes after the snapshot", Duration::from_secs(30), || {
        (acked.lock().unwrap().len() >= after_save + 100).then_some(())
    });
    stop.store(true, Ordering::SeqCst);
    for w in writers {
        w.await.unwrap();
    }
    let (out, took) = save;
    assert!(
        out.status.success(),
        "bosun snapshot save failed: {}",
        text(&out)
    );
    let line = text(&out);
    let revision = number_after(&line, "revision");
    let objects = number_after(&line, &format!("revision {revision},"));
    let size = std::fs::metadata(&file).unwrap().len();
    eprintln!("snapshot: {line:?} ({size} bytes, {took:?} with the CLI's start)");
    let acked = acked.lock().unwrap().clone();
    let before: Vec<_> = acked
        .iter()
        .filter(|(_, (rv, _))| *rv <= revision)
        .collect();
    let after: Vec<_> = acked.iter().filter(|(_, (rv, _))| *rv > revision).collect();
    assert!(
        before.len() >= 200 && !after.is_empty(),
        "writes on both sides of the snapshot's revision {revision}: {} before, {} after",
        before.len(),
        after.len()
    );
    assert!(
        objects as usize >= before.len(),
        "{objects} objects in {line:?}"
    );

    // Restore into a new data dir and serve it.
    let restored_dir = tempfile::tempdir().unwrap();
    let target = restored_dir.path().join("data");
    let out = bosun(&[
        "snapshot",
        "restore",
        file.to_str().unwrap(),
        "--data-dir",
        target.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "restore failed: {}", text(&out));
    assert!(
        text(&out).contains(&format!("revision {revision}")),
        "{}",
        text(&out)
    );
    // Restoring again over it is refused, naming the dir and its store.
    let again = bosun(&[
        "snapshot",
        "restore",
        file.to_str().unwrap(),
        "--data-dir",
        target.to_str().unwrap(),
    ]);
    assert!(!again.status.success());
    assert!(
        text(&again).contains(target.join("store.redb").to_str().unwrap()),
        "{}",
        text(&again)
    );
    let data_dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&target).unwrap() {
        let entry = entry.unwrap();
        std::fs::rename(entry.path(), data_dir.path().join(entry.file_name())).unwrap();
    }
    let second = ControlPlane::start_in(data_dir, EMBEDDED);
    assert_eq!(second.token(), cp.token(), "the admin token is the same");

    // The old kubeconfig's CA verifies the restored server, and its token
    // is the admin's there.
    let old = old_credentials_client(&cp, &second.addr).await;
    let cms = dynamic_api(&old, "configmaps", Some("default"));
    let listed = cms
        .list(&ListParams::default())
        .await
        .expect("list with the old kubeconfig");
    let served: BTreeMap<String, (u64, String)> = listed
        .items
        .iter()
        .map(|o| {
            (
                o.metadata.name.clone().unwrap(),
                (
                    o.metadata
                        .resource_version
                        .as_ref()
                        .unwrap()
                        .parse()
                        .unwrap(),
                    o.data["data"]["v"].as_str().unwrap_or_default().to_string(),
                ),
            )
        })
        .collect();
    for (name, want) in &before {
        assert_eq!(
            served.get(*name),
            Some(*want),
            "{name}, acknowledged at {} <= the snapshot's revision {revision}, is not served as written",
            want.0
        );
    }
    for (name, (rv, _)) in &after {
        assert!(
            !served.contains_key(*name),
            "{name}, written at {rv} after the snapshot's revision {revision}, is in the restored store"
        );
    }
    assert!(
        listed
            .metadata
            .resource_version
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= revision,
        "the restored store starts at the snapshot's revision"
    );
    // Revisions moved on past every one the old server handed out (also
    // those after the snapshot), and a watch from one of them gets 410 Gone
    // so that its client lists again, as after etcd's --bump-revision
    // --mark-compacted.
    let newest_old = acked.values().map(|(rv, _)| *rv).max().unwrap();
    let watch = old
        .request_text(
            http::Request::get(format!(
                "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={newest_old}&timeoutSeconds=5"
            ))
            .body(Vec::new())
            .unwrap(),
        )
        .await;
    let answer = format!("{watch:?}");
    assert!(
        answer.contains("410") || answer.contains("Expired") || answer.contains("Gone"),
        "a watch from the old server's revision {newest_old}: {answer}"
    );
    // New writes continue the revisions after it.
    let made = cms
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "after-restore"}}))
            .unwrap(),
        )
        .await
        .unwrap();
    assert!(
        made.metadata
            .resource_version
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > newest_old
    );
}

#[tokio::test]
async fn only_the_admin_gets_a_snapshot() {
    let cp = ControlPlane::start_with(EMBEDDED);
    let client = cp.client().await;
    let sas = dynamic_api(&client, "serviceaccounts", Some("default"));
    sas.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "robot"}}))
        .unwrap(),
    )
    .await
    .unwrap();
    let (code, body) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/serviceaccounts/robot/token",
        "application/json",
        serde_json::to_vec(&json!({"apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest", "spec": {}}))
        .unwrap(),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let token = body["status"]["token"].as_str().unwrap().to_string();
    let mut config = cp.config().await;
    config.auth_info.token = Some(token.into());
    let robot = Client::try_from(config).unwrap();
    // The token is good for the API (bound to cluster-admin, it reads
    // everything)...
    let (code, body) = raw(
        &client,
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        "application/json",
        serde_json::to_vec(&json!({"apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding", "metadata": {"name": "robot-admin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "default"}]}))
        .unwrap(),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let (code, _) = raw(
        &robot,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        "",
        vec![],
    )
    .await;
    assert_eq!(code, 200);
    // ...but not for the store's snapshot, which only system:masters
    // members get.
    // (A body that is not a Status is the snapshot itself, keys and all:
    // never print it.)
    let (code, body) = raw(&robot, "GET", bosun::snapshot::PATH, "", vec![]).await;
    assert_eq!(code, 403, "a service account got the snapshot");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("only the cluster admin"),
        "{body}"
    );
    let mut config = cp.config().await;
    config.auth_info.token = None;
    let anonymous = Client::try_from(config).unwrap();
    let (code, _) = raw(&anonymous, "GET", bosun::snapshot::PATH, "", vec![]).await;
    assert_eq!(code, 401);
    // The admin's gets one; a write verb does not.
    let (code, _) = raw(&client, "POST", bosun::snapshot::PATH, "", vec![]).await;
    assert_eq!(code, 405);
    let (code, body) = raw(&client, "GET", bosun::snapshot::PATH, "", vec![]).await;
    assert_eq!(code, 200);
    assert!(body.as_str().unwrap().starts_with("BOSUNSNP"));
}

/// Every file and dir under `dir`, as paths relative to it.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        out.push(entry.file_name().to_string_lossy().into_owned());
    }
    out.sort();
    out
}

#[tokio::test]
async fn a_truncated_or_corrupt_snapshot_restores_nothing() {
    let cp = ControlPlane::start_with(EMBEDDED);
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("good.bosun");
    let out = bosun(&[
        "--kubeconfig",
        cp.kubeconfig_path().to_str().unwrap(),
        "snapshot",
        "save",
        file.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let bytes = std::fs::read(&file).unwrap();
    let truncated = work.path().join("truncated.bosun");
    std::fs::write(&truncated, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let mut flipped = bytes.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x40;
    let corrupt = work.path().join("corrupt.bosun");
    std::fs::write(&corrupt, &flipped).unwrap();
    let before = tree(work.path());
    for (bad, says) in [(&truncated, "truncated"), (&corrupt, "checksum")] {
        let target = work.path().join("restored");
        let out = bosun(&[
            "snapshot",
            "restore",
            bad.to_str().unwrap(),
            "--data-dir",
            target.to_str().unwrap(),
        ]);
        assert!(!out.status.success(), "{} was restored", bad.display());
        assert!(
            text(&out).contains(says) && text(&out).contains(bad.to_str().unwrap()),
            "{}",
            text(&out)
        );
        assert!(!target.exists(), "{} was made", target.display());
        assert_eq!(tree(work.path()), before, "something was left behind");
    }
}

#[tokio::test]
async fn periodic_snapshots_keep_the_newest() {
    let snapshots = tempfile::tempdir().unwrap();
    std::fs::write(snapshots.path().join("mine.bosun"), b"not bosun-control's").unwrap();
    let cp = ControlPlane::start_with(&[
        "--store",
        "embedded",
        "--snapshot-interval",
        "1s",
        "--snapshot-retention",
        "2",
        "--snapshot-dir",
        snapshots.path().to_str().unwrap(),
    ]);
    let client = cp.client().await;
    let cms = dynamic_api(&client, "configmaps", Some("default"));
    let own = |dir: &Path| -> Vec<String> {
        tree(dir)
            .into_iter()
            .filter(|n| n.starts_with("snapshot-") && n.ends_with(".bosun"))
            .collect()
    };
    // Revisions move on between snapshots, so names differ.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < 4 {
        assert!(Instant::now() < deadline, "only {seen:?} after 30s");
        cms.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"generateName": "tick-"}}))
            .unwrap(),
        )
        .await
        .unwrap();
        let now = own(snapshots.path());
        assert!(now.len() <= 2 + 1, "retention 2 but {now:?}");
        seen.extend(now);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_for("retention to apply", Duration::from_secs(5), || {
        (own(snapshots.path()).len() == 2).then_some(())
    });
    assert!(
        snapshots.path().join("mine.bosun").exists(),
        "a file it did not make was removed"
    );
    // The newest restore.
    let newest = own(snapshots.path()).pop().unwrap();
    let out = bosun(&[
        "snapshot",
        "status",
        snapshots.path().join(&newest).to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let rev = number_after(&newest, "Z-");
    assert!(
        text(&out).contains(&format!("revision {rev}")),
        "{}",
        text(&out)
    );
    // Bad flags are named.
    let out = Command::new(binary())
        .args(["--snapshot-retention", "0", "--snapshot-interval", "1h"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out).contains("--snapshot-retention"),
        "{}",
        text(&out)
    );
}
