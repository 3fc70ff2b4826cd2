//! The paths a pod spec names on the node, on real Docker: every path
//! that would lead out of a volume (configMap, secret, projected and
//! downwardAPI item paths, a token's path, subPath, subPathExpr) is
//! refused by the API with the field named; a symlink a container plants
//! in an emptyDir does not lead a later container's subPath out of it
//! (the container fails to start saying why, and nothing is made on the
//! host); and a secret volume is its pod's alone: no other user of the
//! host reads it, while its containers, run as the pod's user, do.

mod cluster;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use cluster::{Cluster, BUSYBOX};
use k8s_openapi::api::core::v1::{Event, Secret};
use kube::api::{Api, ListParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

const UP: Duration = Duration::from_secs(60);

fn pod_with(name: &str, volumes: Value, mounts: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"volumes": volumes, "containers": [{"name": "app", "image": BUSYBOX,
            "command": ["sleep", "3600"], "volumeMounts": mounts}]}})
}

#[tokio::test]
async fn paths_out_of_a_volume_are_refused_by_the_api_naming_the_field() {
    let c = Cluster::start();
    let mount = json!([{"name": "v", "mountPath": "/v"}]);
    let cases = [
        (
            pod_with(
                "cm",
                json!([{"name": "v", "configMap": {"name": "c",
                    "items": [{"key": "k", "path": "../../../../../../../../tmp/x"}]}}]),
                mount.clone(),
            ),
            r#"spec.volumes[0].configMap.items[0].path: Invalid value: "../../../../../../../../tmp/x": must not contain '..'"#,
        ),
        (
            pod_with(
                "sec",
                json!([{"name": "v", "secret": {"secretName": "s",
                    "items": [{"key": "k", "path": "/etc/cron.d/x"}]}}]),
                mount.clone(),
            ),
            r#"spec.volumes[0].secret.items[0].path: Invalid value: "/etc/cron.d/x": must be a relative path"#,
        ),
        (
            pod_with(
                "proj",
                json!([{"name": "v", "projected": {"sources": [{"configMap": {"name": "c",
                    "items": [{"key": "k", "path": "a/../../x"}]}}]}}]),
                mount.clone(),
            ),
            r#"spec.volumes[0].projected.sources[0].configMap.items[0].path: Invalid value: "a/../../x": must not contain '..'"#,
        ),
        (
            pod_with(
                "token",
                json!([{"name": "v", "projected": {"sources": [{"serviceAccountToken":
                    {"path": "../../token", "expirationSeconds": 3600}}]}}]),
                mount.clone(),
            ),
            r#"spec.volumes[0].projected.path: Invalid value: "../../token": must not contain '..'"#,
        ),
        (
            pod_with(
                "down",
                json!([{"name": "v", "downwardAPI": {"items": [{"path": "../name",
                    "fieldRef": {"fieldPath": "metadata.name"}}]}}]),
                mount.clone(),
            ),
            r#"spec.volumes[0].downwardAPI.path: Invalid value: "../name": must not contain '..'"#,
        ),
        (
            pod_with(
                "reserved",
                json!([{"name": "v", "configMap": {"name": "c",
                    "items": [{"key": "k", "path": "..data"}]}}]),
                mount.clone(),
            ),
            r#"spec.volumes[0].configMap.items[0].path: Invalid value: "..data": must not start with '..'"#,
        ),
        (
            pod_with(
                "sub",
                json!([{"name": "v", "emptyDir": {}}]),
                json!([{"name": "v", "mountPath": "/v", "subPath": "../../../etc"}]),
            ),
            r#"spec.containers[0].volumeMounts.subPath: Invalid value: "../../../etc": must not contain '..'"#,
        ),
        (
            pod_with(
                "expr",
                json!([{"name": "v", "emptyDir": {}}]),
                json!([{"name": "v", "mountPath": "/v", "subPathExpr": "/$(HOME)"}]),
            ),
            r#"spec.containers[0].volumeMounts.subPathExpr: Invalid value: "/$(HOME)": must be a relative path"#,
        ),
    ];
    for (pod, want) in cases {
        let name = pod["metadata"]["name"].as_str().unwrap().to_string();
        let file = c.dir.path().join(format!("{name}.json"));
        std::fs::write(&file, pod.to_string()).unwrap();
        let out = c
            .kubectl()
            .arg("create")
            .arg("-f")
            .arg(&file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name} was accepted");
        assert!(
            stderr.contains(&format!("The Pod \"{name}\" is invalid: {want}")),
            "{name}: {stderr}"
        );
        let got = c.kubectl().args(["get", "pod", &name]).output().unwrap();
        assert!(!got.status.success(), "{name} exists");
    }
    // The same paths in a workload's template are refused as well.
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": pod_with("x",
            json!([{"name": "v", "configMap": {"name": "c",
                "items": [{"key": "k", "path": "../x"}]}}]), mount)["spec"]}}});
    let file = c.dir.path().join("deploy.json");
    std::fs::write(&file, deploy.to_string()).unwrap();
    let out = c
        .kubectl()
        .arg("create")
        .arg("-f")
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            r#"spec.template.spec.volumes[0].configMap.items[0].path: Invalid value: "../x": must not contain '..'"#
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn container_status<'a>(pod: &'a Value, name: &str) -> &'a Value {
    pod["status"]["containerStatuses"]
        .as_array()
        .and_then(|cs| cs.iter().find(|s| s["name"] == name))
        .unwrap_or(&Value::Null)
}

async fn events(client: &Client, pod: &str) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), "default")
        .list(&ListParams::default().fields(&format!("involvedObject.name={pod}")))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

#[tokio::test]
async fn a_symlink_planted_in_an_empty_dir_does_not_lead_a_sub_path_out() {
    let c = Cluster::start();
    let client = c.client().await;
    // A directory of the host's that the pod must not reach, with a marker.
    let host = c.dir.path().join("host-dir");
    std::fs::create_dir(&host).unwrap();
    std::fs::write(host.join("marker"), "host").unwrap();
    let plant = format!(
        "ln -s {} /data/escape && ln -s / /data/root && ln -s .. /data/up",
        host.display()
    );
    let sleeper = |name: &str, mount: Value, env: Value| {
        json!({"name": name, "image": BUSYBOX, "command": ["sleep", "3600"],
            "env": env, "volumeMounts": [mount]})
    };
    let created = c
        .create_pod(
            &client,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plant"},
            "spec": {
                "volumes": [{"name": "data", "emptyDir": {}}],
                "initContainers": [{"name": "plant", "image": BUSYBOX,
                    "command": ["sh", "-c", plant],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                "containers": [
                    // A regular subPathExpr below the volume works.
                    {"name": "ok", "image": BUSYBOX,
                        "command": ["sh", "-c", "echo fine > /logs/f && sleep 3600"],
                        "env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                        "volumeMounts": [{"name": "data", "mountPath": "/logs", "subPathExpr": "logs/$(POD)"}]},
                    sleeper("link", json!({"name": "data", "mountPath": "/mnt",
                        "subPath": "escape/made-by-pod"}), json!([])),
                    sleeper("root", json!({"name": "data", "mountPath": "/mnt",
                        "subPath": "root/etc"}), json!([])),
                    sleeper("expr", json!({"name": "data", "mountPath": "/mnt",
                        "subPathExpr": "$(T)"}), json!([{"name": "T", "value": "up/up"}])),
                ]}}),
        )
        .await;
    let uid = created.metadata.uid.clone().unwrap();
    let refused = [
        ("link", "escape/made-by-pod"),
        ("root", "root/etc"),
        ("expr", "up/up"),
    ];
    let pod = c
        .wait_pod(
            &client,
            "plant",
            "ok running, the others refused",
            UP,
            |p| {
                container_status(p, "ok")["state"]["running"].is_object()
                    && refused.iter().all(|(n, _)| {
                        container_status(p, n)["state"]["waiting"]["reason"]
                            == "CreateContainerConfigError"
                    })
            },
        )
        .await;
    for (name, sub) in refused {
        let want = format!(
            "failed to prepare subPath for volumeMount \"data\" of container \"{name}\": subPath \"{sub}\" leads out of the volume"
        );
        assert_eq!(
            container_status(&pod, name)["state"]["waiting"]["message"],
            want.as_str()
        );
        let event = format!("Error: {want}");
        c.poll(&format!("a Failed event for {name}"), UP, || async {
            events(&client, "plant").await.into_iter().find(|e| {
                e.reason.as_deref() == Some("Failed")
                    && e.message.as_deref() == Some(event.as_str())
            })
        })
        .await;
    }
    // Nothing was made or changed outside the volume.
    let names: Vec<String> = std::fs::read_dir(&host)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["marker"], "the host dir gained entries");
    assert_eq!(
        std::fs::read_to_string(host.join("marker")).unwrap(),
        "host"
    );
    // The regular one is the volume's own directory.
    let volume = c
        .dir
        .path()
        .join("agent/pods")
        .join(&uid)
        .join("volumes/empty-dir/data");
    assert_eq!(
        std::fs::read_to_string(volume.join("logs/plant/f")).unwrap(),
        "fine\n"
    );
    assert_eq!(c.exec("plant", "ok", &["cat", "/logs/f"]), "fine\n");
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

/// `cat path` as the host's `nobody`: its stderr, or `None` if it read it.
fn cat_as_nobody(path: &Path) -> Option<String> {
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "cat"])
        .arg(path)
        .output()
        .expect("setpriv");
    (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned())
}

#[tokio::test]
async fn a_secret_volume_is_read_by_its_pod_and_no_other_user_of_the_host() {
    let c = Cluster::start();
    let client = c.client().await;
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "db", "namespace": "default"},
        "stringData": {"password": "s3cret"}}))
    .unwrap();
    Api::<Secret>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let volumes = json!([{"name": "sec", "secret": {"secretName": "db"}}]);
    let mounts = json!([{"name": "sec", "mountPath": "/etc/sec"}]);
    let plain = c
        .create_pod(&client, pod_with("plain", volumes.clone(), mounts.clone()))
        .await;
    let mut owned = pod_with("owned", volumes, mounts);
    owned["spec"]["securityContext"] = json!({"runAsUser": 1000, "fsGroup": 2000});
    let owned = c.create_pod(&client, owned).await;
    for name in ["plain", "owned"] {
        c.wait_pod(&client, name, "Running", UP, |p| {
            container_status(p, "app")["state"]["running"].is_object()
        })
        .await;
    }
    // The test's own temp dir lets anyone through, as a data dir under
    // /var/lib would: only the agent's modes below it guard the volumes.
    std::fs::set_permissions(c.dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let pods = c.dir.path().join("agent/pods");
    assert_eq!(mode(&pods), 0o750);
    let pod_dir = |p: &k8s_openapi::api::core::v1::Pod| pods.join(p.metadata.uid.as_ref().unwrap());
    assert_eq!(mode(&pod_dir(&plain)), 0o750);

    let plain_sec = pod_dir(&plain).join("volumes/secret/sec");
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    assert!(
        mounts.lines().any(
            |l| l.split_whitespace().nth(1) == Some(plain_sec.to_str().unwrap())
                && l.contains(" tmpfs ")
        ),
        "the secret is on a tmpfs"
    );
    // Files as defaultMode says (0644), yet no other user gets to them.
    assert_eq!(mode(&plain_sec.join("password")), 0o644);
    let denied = cat_as_nobody(&plain_sec.join("password")).expect("nobody read the secret");
    assert!(denied.contains("Permission denied"), "{denied}");
    assert_eq!(
        c.exec("plain", "app", &["cat", "/etc/sec/password"]),
        "s3cret"
    );
    // Containers get API data read-only: none rewrites what the agent reads back.
    let in_pod = c.exec("plain", "app", &["cat", "/proc/mounts"]);
    let line = in_pod
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("/etc/sec"))
        .unwrap_or_else(|| panic!("{in_pod}"));
    assert!(
        line.split_whitespace().nth(3).unwrap().starts_with("ro"),
        "{line}"
    );

    // With runAsUser and fsGroup: the tmpfs is the pod user's and group's.
    let owned_dir = pod_dir(&owned);
    let sec = owned_dir.join("volumes/secret/sec");
    let meta = std::fs::metadata(&sec).unwrap();
    assert_eq!((meta.uid(), meta.gid(), mode(&sec)), (1000, 2000, 0o2750));
    let file = std::fs::metadata(sec.join("password")).unwrap();
    assert_eq!(
        (file.uid(), file.gid(), file.mode() & 0o777),
        (1000, 2000, 0o644)
    );
    // The service account token: 0600 for the pod's user, group-readable
    // for its fsGroup (the kubelet's modes).
    let projected = std::fs::read_dir(owned_dir.join("volumes/projected"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let token = std::fs::metadata(projected.join("token")).unwrap();
    assert_eq!((token.uid(), token.mode() & 0o777), (1000, 0o640));
    assert_eq!(c.exec("owned", "app", &["id", "-u"]).trim(), "1000");
    assert_eq!(
        c.exec("owned", "app", &["cat", "/etc/sec/password"]),
        "s3cret"
    );
    let read = c.exec(
        "owned",
        "app",
        &["cat", "/var/run/secrets/kubernetes.io/serviceaccount/token"],
    );
    assert!(
        read.starts_with("ey"),
        "the pod's user reads its token: {read:?}"
    );
    assert!(cat_as_nobody(&projected.join("token")).is_some());

    // The embedded store, which holds every Secret, is the control plane's
    // alone (on etcd the objects are not in a file of the data dir).
    if !bosun_test_support::etcd::store_is_etcd() {
        assert_eq!(mode(&c.dir.path().join("control/store.redb")), 0o600);
    }
}
