//! End-to-end tests of the `bosun` CLI against a real `bosun-control`
//! started in a temporary directory (killed when the test ends, also on panic).

mod common;

use common::{column_starts, control_binary, Cluster, KillOnDrop, Run};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

const NGINX: &str = include_str!("../examples/nginx-deployment.yaml");

#[test]
fn apply_get_label_annotate_patch_delete() {
    let c = Cluster::start();
    let file = c.write("nginx.yaml", NGINX);

    assert_eq!(
        c.bosun(&["apply", "-f", &file]).ok(),
        "deployment.apps/nginx-deployment created\n"
    );
    assert_eq!(
        c.bosun(&["apply", "-f", &file]).ok(),
        "deployment.apps/nginx-deployment unchanged\n"
    );
    let edited = c.write("nginx5.yaml", &NGINX.replace("replicas: 3", "replicas: 5"));
    assert_eq!(
        c.bosun(&["apply", "-f", &edited]).ok(),
        "deployment.apps/nginx-deployment configured\n"
    );

    // The table: the server's columns, aligned like kubectl.
    let table = c.bosun(&["get", "deployments"]).ok().to_string();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 2, "{table}");
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]);
    assert!(lines[1].starts_with("nginx-deployment   "), "{table}");
    assert_eq!(column_starts(lines[0]), column_starts(lines[1]), "{table}");
    assert!(lines[1].contains("/5"), "{table}");

    let wide = c.bosun(&["get", "deploy", "-o", "wide"]).ok().to_string();
    assert!(wide.lines().next().unwrap().contains("IMAGES"), "{wide}");
    assert!(wide.contains("bosun.local/web:1"), "{wide}");

    let all = c.bosun(&["get", "deploy", "-A"]).ok().to_string();
    assert!(all.starts_with("NAMESPACE   NAME "), "{all}");
    assert!(all
        .lines()
        .nth(1)
        .unwrap()
        .starts_with("default     nginx-deployment"));

    // YAML and JSON of the object, names.
    let yaml: serde_yaml::Value = serde_yaml::from_str(
        c.bosun(&["get", "deploy", "nginx-deployment", "-o", "yaml"])
            .ok(),
    )
    .unwrap();
    assert_eq!(yaml["kind"], "Deployment");
    assert_eq!(yaml["spec"]["replicas"], 5);
    let recorded = yaml["metadata"]["annotations"]
        ["kubectl.kubernetes.io/last-applied-configuration"]
        .as_str()
        .unwrap();
    assert!(recorded.starts_with(
        "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"annotations\":{},"
    ));
    let list: serde_json::Value =
        serde_json::from_str(c.bosun(&["get", "deploy", "-o", "json"]).ok()).unwrap();
    assert_eq!(list["kind"], "List");
    assert_eq!(list["items"][0]["metadata"]["name"], "nginx-deployment");
    assert_eq!(list["items"][0]["apiVersion"], "apps/v1");
    assert_eq!(
        c.bosun(&["get", "deploy", "-o", "name"]).ok(),
        "deployment.apps/nginx-deployment\n"
    );

    // Labels and annotations.
    assert_eq!(
        c.bosun(&["label", "deploy", "nginx-deployment", "tier=web"])
            .ok(),
        "deployment.apps/nginx-deployment labeled\n"
    );
    assert_eq!(
        c.bosun(&["label", "deploy", "nginx-deployment", "tier=db"])
            .fails(),
        "error: 'tier' already has a value (web), and --overwrite is false\n"
    );
    c.bosun(&[
        "label",
        "deploy",
        "nginx-deployment",
        "tier=db",
        "--overwrite",
    ])
    .ok();
    let labels = c
        .bosun(&["get", "deploy", "--show-labels"])
        .ok()
        .to_string();
    assert!(
        labels.lines().next().unwrap().ends_with("LABELS"),
        "{labels}"
    );
    assert!(labels.contains("app=nginx,tier=db"), "{labels}");
    assert_eq!(
        c.bosun(&["label", "deploy/nginx-deployment", "tier-"]).ok(),
        "deployment.apps/nginx-deployment labeled\n"
    );
    assert_eq!(
        c.bosun(&["annotate", "deploy", "nginx-deployment", "owner=team-a"])
            .ok(),
        "deployment.apps/nginx-deployment annotated\n"
    );
    let obj: serde_json::Value = serde_json::from_str(
        c.bosun(&["get", "deploy", "nginx-deployment", "-o", "json"])
            .ok(),
    )
    .unwrap();
    assert_eq!(obj["metadata"]["annotations"]["owner"], "team-a");
    assert!(obj["metadata"]["labels"].get("tier").is_none());

    // Patches of each type.
    assert_eq!(
        c.bosun(&[
            "patch",
            "deploy",
            "nginx-deployment",
            "-p",
            r#"{"spec":{"replicas":2}}"#
        ])
        .ok(),
        "deployment.apps/nginx-deployment patched\n"
    );
    c.bosun(&[
        "patch",
        "deploy",
        "nginx-deployment",
        "--type",
        "json",
        "-p",
        r#"[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.9.1"}]"#,
    ])
    .ok();
    let obj: serde_json::Value = serde_json::from_str(
        c.bosun(&["get", "deploy", "nginx-deployment", "-o", "json"])
            .ok(),
    )
    .unwrap();
    assert_eq!(obj["spec"]["replicas"], 2);
    assert_eq!(
        obj["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.9.1"
    );

    let described = c
        .bosun(&["describe", "deploy", "nginx-deployment"])
        .ok()
        .to_string();
    assert!(
        described.starts_with("Name:                   nginx-deployment\n"),
        "{described}"
    );
    assert!(
        described.contains("\nReplicas:               2 desired | "),
        "{described}"
    );
    assert!(
        described.contains("\nSelector:               app=nginx\n"),
        "{described}"
    );
    assert!(
        described.contains("    Image:      nginx:1.9.1\n"),
        "{described}"
    );

    // Errors read like kubectl's.
    assert_eq!(
        c.bosun(&["get", "pods", "nope"]).fails(),
        "Error from server (NotFound): pods \"nope\" not found\n"
    );
    assert_eq!(
        c.bosun(&["get", "widgets"]).fails(),
        "error: the server doesn't have a resource type \"widgets\"\n"
    );

    assert_eq!(
        c.bosun(&["delete", "deploy", "nginx-deployment"]).ok(),
        "deployment.apps \"nginx-deployment\" deleted\n"
    );
    assert_eq!(
        c.bosun(&["get", "deploy", "nginx-deployment"]).fails(),
        "Error from server (NotFound): deployments.apps \"nginx-deployment\" not found\n"
    );
    let empty = c.bosun(&["get", "deploy"]);
    assert_eq!(empty.ok(), "");
    assert_eq!(empty.stderr, "No resources found in default namespace.\n");
}

const PODS: &str = "\
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app: web
spec:
  containers:
  - name: nginx
    image: nginx:1.7.9
    ports:
    - containerPort: 80
---
apiVersion: v1
kind: Service
metadata:
  name: web
  labels:
    app: web
spec:
  selector:
    app: web
  ports:
  - port: 80
";

#[test]
fn create_several_types_namespaces_and_delete_by_file_and_selector() {
    let c = Cluster::start();
    let file = c.write("web.yaml", PODS);
    assert_eq!(
        c.bosun(&["create", "-f", &file]).ok(),
        "pod/web created\nservice/web created\n"
    );
    let again = c.bosun(&["create", "-f", &file]);
    let err = again.fails();
    assert!(
        err.starts_with(&format!(
            "Error from server (AlreadyExists): error when creating \"{file}\": pods \"web\" already exists\n"
        )),
        "{err}"
    );

    // Several types: a table each, blank line between, TYPE/NAME names.
    let out = c.bosun(&["get", "pods,svc"]).ok().to_string();
    let blocks: Vec<&str> = out.split("\n\n").collect();
    assert_eq!(blocks.len(), 2, "{out}");
    assert!(
        blocks[0].lines().nth(1).unwrap().starts_with("pod/web   "),
        "{out}"
    );
    // The control plane's own `kubernetes` Service sorts first, as in
    // Kubernetes.
    let services: Vec<&str> = blocks[1].lines().skip(1).collect();
    assert!(
        services[0].starts_with("service/kubernetes   ")
            && services[1].starts_with("service/web   "),
        "{out}"
    );
    assert_eq!(
        c.bosun(&["get", "po,svc", "-o", "name"]).ok(),
        "pod/web\nservice/kubernetes\nservice/web\n"
    );

    // Another namespace through -n.
    c.bosun(&[
        "create",
        "-f",
        &c.write(
            "ns.yaml",
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: prod\n",
        ),
    ])
    .ok();
    c.bosun(&["-n", "prod", "apply", "-f", &file]).ok();
    let all = c.bosun(&["get", "pods", "-A"]).ok().to_string();
    assert_eq!(all.lines().count(), 3, "{all}");
    assert!(all.contains("\nprod        web "), "{all}");
    let described = c
        .bosun(&["describe", "pod", "web", "-n", "prod"])
        .ok()
        .to_string();
    assert!(
        described.contains("\nNamespace:        prod\n"),
        "{described}"
    );
    assert!(
        described.contains("    Image:          nginx:1.7.9\n"),
        "{described}"
    );

    // Delete by label selector in one namespace, by file in the other.
    assert_eq!(
        c.bosun(&["delete", "pods,svc", "-l", "app=web", "-n", "prod"])
            .ok(),
        "pod \"web\" deleted\nservice \"web\" deleted\n"
    );
    assert_eq!(
        c.bosun(&["delete", "-f", &file, "--wait=false"]).ok(),
        "pod \"web\" deleted\nservice \"web\" deleted\n"
    );
    assert_eq!(
        c.bosun(&["delete", "pod", "web"]).fails(),
        "Error from server (NotFound): pods \"web\" not found\n"
    );
}

#[test]
fn a_bad_document_names_file_document_and_line_and_creates_nothing() {
    let c = Cluster::start();
    let bad = PODS.replace(
        "  selector:\n    app: web\n",
        "  selector:\n    app: web\n   oops: [\n",
    );
    let file = c.write("bad.yaml", &bad);
    let err = c.bosun(&["apply", "-f", &file]).fails().to_string();
    assert!(
        err.starts_with(&format!("error: parsing {file}: document 2: line 23: ")),
        "{err}"
    );
    let empty = c.bosun(&["get", "pods"]);
    empty.ok();
    assert_eq!(empty.stderr, "No resources found in default namespace.\n");
}

#[test]
fn up_and_down_with_a_private_home() {
    let home = tempfile::tempdir().unwrap();
    let data = home.path().join("data");
    // Whatever happens, do not leave a server behind.
    struct Reaper(PathBuf);
    impl Drop for Reaper {
        fn drop(&mut self) {
            common::kill_started_processes(&self.0);
        }
    }
    // On etcd with BOSUN_TEST_STORE=etcd; stopped after the reaper's kill.
    let etcd = common::test_store_etcd();
    let store = common::up_store_args(&etcd);
    let store: Vec<&str> = store.iter().map(String::as_str).collect();
    let _reaper = Reaper(data.clone());
    control_binary();
    let bosun = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_bosun"))
            .args(args)
            .env("HOME", home.path())
            .env_remove("KUBECONFIG")
            .output()
            .unwrap();
        Run::from("bosun", args, out)
    };
    let d = data.display().to_string();
    let up = bosun(
        &[
            &["up", "--data-dir", &d, "--port", "0", "--no-agent"][..],
            &store,
        ]
        .concat(),
    );
    let text = up.ok().to_string();
    assert!(text.starts_with("bosun is up.\n"), "{text}");
    assert!(text.contains("bosun get nodes"), "{text}");
    assert!(
        text.contains("export KUBECONFIG=~/.bosun/kubeconfig"),
        "{text}"
    );
    assert!(home.path().join(".bosun/kubeconfig").exists());

    // The written kubeconfig is the default one.
    let ns = bosun(&["get", "namespaces"]);
    assert!(ns.ok().contains("\ndefault "), "{}", ns.stdout);

    let again = bosun(&["up", "--data-dir", &d, "--port", "0", "--no-agent"]);
    // (A cluster made on etcd stays on it: the second `up` needs no --store.)
    assert!(again.ok().starts_with("bosun is already running.\n"));

    let pid: i32 = std::fs::read_to_string(data.join("control.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let down = bosun(&["down", "--data-dir", &d]);
    assert!(down.ok().contains("stopped"), "{}", down.stdout);
    assert!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| s.contains(") Z"))
                .unwrap_or(true),
        "bosun-control still running after down"
    );
    // (The data dir holds the CA and the admin's credentials whichever
    // store the objects are in.)
    assert!(data.join("admin.kubeconfig").exists(), "data dir kept");
    assert!(bosun(&["down", "--data-dir", &d])
        .ok()
        .starts_with("bosun is not running"));
    let gone = bosun(&["get", "ns"]);
    assert!(gone.fails().contains("was refused"), "{}", gone.stderr);
}

#[test]
fn get_watch_prints_a_row_per_event() {
    use std::io::BufRead;
    let c = Cluster::start();
    // The pod exists before the watch: its row comes from the list, and a
    // change after it from the watch, which starts at the list's revision
    // (so nothing is missed however late the watch connects).
    let file = c.write("web.yaml", PODS.split("---").next().unwrap());
    c.bosun(&["apply", "-f", &file]).ok();
    let mut watch = Command::new(env!("CARGO_BIN_EXE_bosun"))
        .arg("--kubeconfig")
        .arg(c.kubeconfig())
        .args(["get", "pods", "-w"])
        .env("HOME", c.path("home"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = watch.stdout.take().unwrap();
    let _watch = KillOnDrop(watch);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let next = || {
        rx.recv_timeout(Duration::from_secs(10))
            .expect("a watch line")
    };
    let header = next();
    assert!(header.starts_with("NAME   READY   STATUS"), "{header}");
    let listed = next();
    assert!(listed.starts_with("web    0/1     "), "{listed}");
    assert_eq!(column_starts(&header)[..3], column_starts(&listed)[..3]);
    // One row per change: a label, then the delete.
    c.bosun(&["label", "pod", "web", "x=y"]).ok();
    let labelled = next();
    assert!(labelled.starts_with("web    0/1     "), "{labelled}");
    c.bosun(&["delete", "pod", "web"]).ok();
    let deleted = next();
    assert!(deleted.starts_with("web    "), "{deleted}");
}
