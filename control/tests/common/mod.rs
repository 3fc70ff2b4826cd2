//! Shared by the control plane's integration tests: a real `bosun-control`
//! process on a free port in a temp dir, and clients for it. The process
//! is killed and the dir removed when the handle drops, also on panic.
//! What the three packages' tests share is in `bosun-test-support`.

#![allow(dead_code, unused_imports)]

pub mod apf;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub use bosun_test_support::wait_for;
use bosun_test_support::{
    client,
    control::{start_control, STARTUP_TIMEOUT},
};
use kube::api::{ApiResource, DynamicObject};
use kube::{Api, Client, Config};

pub struct ControlPlane {
    pub dir: tempfile::TempDir,
    child: Option<Child>,
    extra_args: Vec<String>,
    pub addr: String,
    /// The etcd the control plane keeps its objects in, if any
    /// (`BOSUN_TEST_STORE=etcd`, or [`ControlPlane::start_on_etcd`]);
    /// stopped after the control plane.
    pub etcd: Option<bosun_test_support::etcd::Etcd>,
}

/// Controllers that write objects of their own (pods, replica sets, revisions,
/// bindings, each namespace's `default` ServiceAccount and `kube-root-ca.crt`,
/// nodes' pod CIDRs)
/// and so would change what the API tests read back; the API tests run
/// without them unless a test asks for them by its flags.
pub const OFF_IN_API_TESTS: &[&str] = &[
    "scheduler",
    "replicaset",
    "deployment",
    "statefulset",
    "daemonset",
    "job",
    "cronjob",
    "endpoints",
    "endpointslice",
    "nodelifecycle",
    "tainteviction",
    "podgc",
    "horizontalpodautoscaling",
    "serviceaccount",
    "root-ca-cert-publisher",
    "nodeipam",
    "clusterrole-aggregation",
];

pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_bosun-control"))
}

impl ControlPlane {
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts `bosun-control` with extra flags and waits until it serves.
    pub fn start_with(extra: &[&str]) -> Self {
        Self::start_in(tempfile::tempdir().expect("temp dir"), extra)
    }

    /// The same on a data dir the test made (a restored snapshot's).
    /// With `BOSUN_TEST_STORE=etcd` (and no `--store` of the test's own),
    /// on a throwaway etcd.
    pub fn start_in(dir: tempfile::TempDir, extra: &[&str]) -> Self {
        let own_store = extra.iter().any(|a| a.starts_with("--store"));
        let etcd = if own_store {
            None
        } else {
            bosun_test_support::etcd::for_test_store()
        };
        Self::start_on(dir, extra, etcd)
    }

    /// On a throwaway etcd whatever `BOSUN_TEST_STORE` says; None (the
    /// reason printed) when etcd is not installed.
    pub fn start_on_etcd(extra: &[&str]) -> Option<Self> {
        let etcd = bosun_test_support::etcd::Etcd::start()?;
        let dir = tempfile::tempdir().expect("temp dir");
        Some(Self::start_on(dir, extra, Some(etcd)))
    }

    fn start_on(
        dir: tempfile::TempDir,
        extra: &[&str],
        etcd: Option<bosun_test_support::etcd::Etcd>,
    ) -> Self {
        let mut extra_args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        if let Some(etcd) = &etcd {
            extra_args.extend(["--store".to_string(), etcd.store_url()]);
        }
        let mut cp = ControlPlane {
            dir,
            child: None,
            extra_args,
            addr: String::new(),
            etcd,
        };
        cp.spawn();
        cp
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("control.log"))
            .expect("log file");
        let mut cmd = Command::new(binary());
        cmd.arg("--data-dir")
            .arg(self.dir.path())
            .args(["--port", "0"])
            .args(self.controllers_flag())
            .args(&self.extra_args)
            .stdout(Stdio::null())
            .stderr(log);
        let (child, addr) = start_control(cmd, self.dir.path(), STARTUP_TIMEOUT);
        self.child = Some(child);
        self.addr = addr;
    }

    /// `--controllers=*,-x,...` for [`OFF_IN_API_TESTS`], unless the test
    /// passed its own `--controllers`.
    fn controllers_flag(&self) -> Option<String> {
        if OFF_IN_API_TESTS.is_empty()
            || self
                .extra_args
                .iter()
                .any(|a| a.starts_with("--controllers"))
        {
            return None;
        }
        let off: Vec<String> = OFF_IN_API_TESTS.iter().map(|c| format!("-{c}")).collect();
        Some(format!("--controllers=*,{}", off.join(",")))
    }

    /// The running process's id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn kubeconfig_path(&self) -> PathBuf {
        self.dir.path().join("admin.kubeconfig")
    }

    pub fn token(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("admin-token"))
            .expect("token")
            .trim()
            .to_string()
    }

    pub async fn config(&self) -> Config {
        client::config(&self.kubeconfig_path()).await
    }

    pub async fn client(&self) -> Client {
        client::client(&self.kubeconfig_path()).await
    }

    /// A client that returns 429, 503 and 504 as they come instead of
    /// retrying them for minutes.
    pub async fn client_no_retry(&self) -> Client {
        client::client_no_retry(&self.kubeconfig_path()).await
    }

    /// Stops the process with SIGKILL: nothing gets to flush or clean up.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the process with SIGTERM and waits for it to exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .expect("SIGTERM");
        wait_for("bosun-control to exit", Duration::from_secs(20), || {
            child.try_wait().expect("wait")
        })
    }

    /// Starts the process again on the same data dir (a new port).
    pub fn restart(&mut self) {
        if self.child.is_some() {
            self.terminate();
        }
        self.spawn();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("control.log")).unwrap_or_default()
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// An `ApiResource` for one of bosun's served resources.
pub fn api_resource(name: &str) -> ApiResource {
    api_resource_of(bosun::resources::by_name(name).unwrap_or_else(|| panic!("no resource {name}")))
}

pub fn api_resource_of(r: &bosun::resources::ResourceInfo) -> ApiResource {
    ApiResource {
        group: r.group.to_string(),
        version: r.version.to_string(),
        api_version: r.api_version(),
        kind: r.kind.to_string(),
        plural: r.plural.to_string(),
    }
}

pub fn dynamic_api(client: &Client, name: &str, namespace: Option<&str>) -> Api<DynamicObject> {
    let ar = api_resource(name);
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

/// A raw request through the client (auth and TLS included): status code
/// and the body as JSON (or as a JSON string when it is not JSON).
pub async fn raw(
    client: &Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, serde_json::Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(kube::client::Body::from(body))
        .unwrap();
    let res = client.send(req).await.expect("response");
    let code = res.status().as_u16();
    let bytes = res.into_body().collect_bytes().await.expect("body");
    let value = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::String(
        String::from_utf8_lossy(&bytes).into_owned(),
    ));
    (code, value)
}

/// The path of the repository's `examples/` folder.
pub fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// How many writes reached the store after `since` (a resourceVersion)
/// besides the Leases' (leader election and each API server's identity
/// Lease are renewed in the background, so the store's revision moves on
/// its own), and the revision to count from next. Every write is one
/// revision on both stores: the writes are the revisions between `since`
/// and a marker Lease written now, less the Lease changes a watch from
/// `since` sees up to the marker.
pub async fn writes_besides_leases(client: &Client, since: &str) -> (u64, String) {
    use futures::StreamExt;
    use k8s_openapi::api::coordination::v1::Lease;
    use kube::api::{PostParams, WatchEvent, WatchParams};
    static MARKERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let all: Api<Lease> = Api::all(client.clone());
    let mut changes = all
        .watch(&WatchParams::default().disable_bookmarks(), since)
        .await
        .expect("watch leases")
        .boxed();
    let n = MARKERS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let marker: Lease = serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("writes-marker-{n}")}
    }))
    .unwrap();
    let marker = Api::<Lease>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &marker)
        .await
        .expect("marker lease");
    let upto: u64 = marker.metadata.resource_version.unwrap().parse().unwrap();
    let mut leases = 0;
    loop {
        let event = tokio::time::timeout(Duration::from_secs(30), changes.next())
            .await
            .expect("the marker lease's event within 30 s")
            .expect("lease watch open")
            .expect("lease event");
        let lease = match event {
            WatchEvent::Added(l) | WatchEvent::Modified(l) | WatchEvent::Deleted(l) => l,
            other => panic!("lease watch: {other:?}"),
        };
        let rv: u64 = lease.metadata.resource_version.unwrap().parse().unwrap();
        if rv > upto {
            break;
        }
        leases += 1;
        if rv == upto {
            break;
        }
    }
    let since: u64 = since.parse().unwrap();
    (upto - since - leases, upto.to_string())
}

/// Makes node `name` as an agent would have registered it: Ready, with
/// room for 2 CPUs, 2Gi and 110 pods (no agent runs it).
pub async fn ready_node(client: &Client, name: &str) {
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{Patch, PatchParams, PostParams};
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node =
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": {
                "allocatable": {"cpu": "2", "memory": "2Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}]}})),
        )
        .await
        .unwrap();
}
