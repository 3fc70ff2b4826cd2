//! Benchmark (ignored by default, not a timed test): the web view's
//! overview with many pods, in headless chromium. Hollow nodes (no Docker)
//! run WEBVIEW_PODS pods (default 1000) of 10 Deployments on WEBVIEW_NODES
//! nodes (default 10); the page is loaded signed in WEBVIEW_ROUNDS times
//! (default 3) each way, alternating: chromium sending `Accept-Encoding:
//! identity` (so the API answers uncompressed) and accepting gzip (as it does by
//! default, so lists over 128 KiB come gzipped); then every Deployment is
//! rolled to a new image while the page follows (`WEBVIEW_ROLLOUT=0`: not).
//! Prints:
//!
//! ```text
//! first load with N pods, uncompressed (...): assets A KiB, pod list L KiB on the wire (D KiB decoded), node list K KiB; first render R ms
//! first load with N pods, gzip: (the same, one figure per round)
//! rollout of N pods in S s: long tasks K (total T ms, max M ms), frames over 100 ms F (max G ms); board caught up Z ms after the API
//! ```
//!
//! - first load: transfer sizes (`transferSize`, headers included) of the
//!   document, app.js and app.css (the cache off) and of the list
//!   responses as chromium's Resource Timing reports them;
//! - first render: from navigation start until the board first shows the
//!   listed pods and nodes (`data-first-render-ms`);
//! - long tasks: main-thread tasks over 50 ms (the Long Tasks API) during
//!   the rollout; frames: gaps between animation frames over 100 ms;
//! - caught up: from the API's pods being all new, Running and Ready
//!   (polled every 200 ms) until the board's cards are exactly them.
//!
//! ```text
//! cargo test --workspace --test webview_scale -j2 -- --ignored --nocapture
//! ```

mod browser;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bosun_test_support::binaries::workspace_binary;
use bosun_test_support::control::start_control;
use bosun_test_support::process::{dies_with_test, KillOnDrop};
use bosun_test_support::text::tail;
use browser::{eval, Chromium};
use chromiumoxide::cdp::browser_protocol::network::{
    Headers, SetCacheDisabledParams, SetExtraHttpHeadersParams,
};
use chromiumoxide::Page;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

const DEPLOYMENTS: usize = 10;
const PHASE: Duration = Duration::from_secs(1200);

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v:?} is not a count"))
        })
        .unwrap_or(default)
}

/// Records long tasks and animation-frame gaps from the document's start.
const PERF: &str = r#"
window.__perf = { long: [], gaps: [] };
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) window.__perf.long.push(e.duration);
}).observe({ type: 'longtask', buffered: true });
let last = 0;
const tick = (t) => { if (last && t - last > 100) window.__perf.gaps.push(t - last); last = t; requestAnimationFrame(tick); };
requestAnimationFrame(tick);
"#;

async fn wait<T, F, Fut>(what: &str, log: &Path, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            started.elapsed() < PHASE,
            "timed out waiting for {what}\n{}",
            tail(&std::fs::read_to_string(log).unwrap_or_default(), 30)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn deployment(i: usize, replicas: usize, image: &str) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": format!("scale-{i}"), "labels": {"bench": "webview"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": format!("scale-{i}")}},
            "template": {
                "metadata": {"labels": {"app": format!("scale-{i}"), "bench": "webview"}},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "app", "image": image}]
                }
            }
        }
    }))
    .unwrap()
}

/// The pods' names once there are exactly `total` of them, each with
/// `image` and Running (what the board shows; the Deployments' status
/// counts lag behind on a loaded machine). Not Ready: on a loaded machine
/// a hollow node's heartbeat can lapse, and some of its pods then stay
/// Ready=False with their containers ready (seen in this benchmark).
async fn rolled_out(pods: &Api<Pod>, total: usize, image: &str) -> Option<BTreeSet<String>> {
    let list = pods
        .list(&ListParams::default().labels("bench=webview"))
        .await
        .ok()?;
    let done = |p: &Pod| {
        let s = p.status.as_ref()?;
        let image_ok = p.spec.as_ref()?.containers.first()?.image.as_deref() == Some(image);
        (image_ok
            && s.phase.as_deref() == Some("Running")
            && p.metadata.deletion_timestamp.is_none())
        .then_some(())
    };
    (list.items.len() == total && list.items.iter().all(|p| done(p).is_some())).then(|| {
        list.items
            .iter()
            .map(|p| format!("default/{}", p.metadata.name.as_deref().unwrap_or_default()))
            .collect()
    })
}

async fn board_keys(page: &Page) -> BTreeSet<String> {
    eval(
        page,
        "[...document.querySelectorAll('li.pod')].map(p => p.dataset.key)",
    )
    .await
}

/// One first load of the overview, as chromium's Resource Timing has it.
#[derive(Debug)]
struct Load {
    gzip: bool,
    /// The document, app.js and app.css: bytes on the wire.
    assets: u64,
    /// `GET /api/v1/pods`: bytes on the wire, and its body decoded.
    pods: u64,
    pods_decoded: u64,
    nodes: u64,
    /// From navigation until the board shows the listed pods.
    first_render: String,
}

/// Reloads the overview with chromium accepting gzip (as by default) or
/// only the identity encoding, and waits for its first render of `total` pods.
async fn first_load(page: &Page, gzip: bool, total: usize, log: &Path) -> Load {
    // Chromium sends its own Accept-Encoding only where the request has
    // none (it has dropped DevTools' setAcceptedEncodings).
    let headers = if gzip {
        json!({})
    } else {
        json!({"Accept-Encoding": "identity"})
    };
    page.execute(SetExtraHttpHeadersParams::new(Headers::new(headers)))
        .await
        .expect("the request headers");
    page.reload().await.expect("reload");
    let first_render: String = wait("the first render", log, || async {
        eval::<serde_json::Value>(
            page,
            "document.getElementById('columns')?.dataset.firstRenderMs || false",
        )
        .await
        .as_str()
        .map(String::from)
    })
    .await;
    let shown = board_keys(page).await.len();
    assert_eq!(shown, total, "the first render shows every pod");
    let entries: Vec<(String, String, u64, u64)> = eval(
        page,
        "[...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')]
            .map(e => [e.name, e.initiatorType, e.transferSize, e.decodedBodySize])",
    )
    .await;
    // The list that arrived whole (one broken by a network change, when
    // other tests start containers on this host, was asked again).
    let list = |suffix: &str| {
        entries
            .iter()
            .rfind(|e| e.1 == "fetch" && e.0.ends_with(suffix) && e.3 > 0)
            .unwrap_or_else(|| panic!("no {suffix} in {entries:?}"))
    };
    let pods = list("/api/v1/pods");
    // What came is what was asked for: the whole list without gzip, a
    // fraction of it with.
    if gzip {
        assert!(pods.2 < pods.3 / 2, "gzip asked, not given: {pods:?}");
    } else {
        assert!(pods.2 >= pods.3, "identity asked, gzip given: {pods:?}");
    }
    Load {
        gzip,
        assets: entries.iter().filter(|e| e.1 != "fetch").map(|e| e.2).sum(),
        pods: list("/api/v1/pods").2,
        pods_decoded: list("/api/v1/pods").3,
        nodes: list("/api/v1/nodes").2,
        first_render,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: cargo test --test webview_scale -- --ignored --nocapture"]
async fn the_overview_with_many_pods() {
    let total = env_count("WEBVIEW_PODS", 1000);
    let nodes = env_count("WEBVIEW_NODES", 10);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("control");
    let control_log = dir.path().join("control.log");
    let log_file = std::fs::File::create(&control_log).unwrap();
    let mut cmd = dies_with_test(workspace_binary("bosun-control"));
    cmd.arg("--data-dir")
        .arg(&data)
        .args(["--port", "0", "--cluster-cidr", "10.128.0.0/12"])
        .env("BOSUN_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().unwrap())
        .stderr(log_file);
    let (control, address) = start_control(cmd, &data, Duration::from_secs(60));
    let _control = KillOnDrop(control);
    let kubeconfig = data.join("admin.kubeconfig");
    let out = Command::new(workspace_binary("bosun"))
        .args(["token", "create", "--ttl", "1h"])
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let hollow_log = dir.path().join("hollow.log");
    let log_file = std::fs::File::create(&hollow_log).unwrap();
    let max_pods = (2 * total / nodes).max(110).to_string();
    let mut cmd = dies_with_test(env!("CARGO_BIN_EXE_bosun-agent"));
    cmd.args([
        "hollow",
        "--nodes",
        &nodes.to_string(),
        "--max-pods",
        &max_pods,
    ])
    .arg("--kubeconfig")
    .arg(&kubeconfig)
    .args(["--token", &token])
    .arg("--data-dir")
    .arg(dir.path().join("hollow"))
    .env_remove("KUBECONFIG")
    .env("BOSUN_LOG", "warn")
    .stdin(Stdio::null())
    .stdout(log_file.try_clone().unwrap())
    .stderr(log_file);
    let _hollow = KillOnDrop(cmd.spawn().unwrap());

    let client = bosun_test_support::client::client(&kubeconfig).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let (v1, v2) = ("bosun.local/busybox:1.35", "bosun.local/busybox:1.36");
    // The Deployments can wait in the API for the nodes to register.
    for i in 0..DEPLOYMENTS {
        let replicas = total / DEPLOYMENTS + usize::from(i < total % DEPLOYMENTS);
        deployments
            .create(&PostParams::default(), &deployment(i, replicas, v1))
            .await
            .unwrap();
    }
    let started = Instant::now();
    wait(
        &format!("{total} hollow pods running"),
        &control_log,
        || rolled_out(&pods, total, v1),
    )
    .await;
    eprintln!(
        "{total} pods running on {nodes} hollow nodes in {:?}",
        started.elapsed()
    );

    let admin = std::fs::read_to_string(data.join("admin-token")).unwrap();
    let chrome = Chromium::launch(1280, 860).await;
    let url = format!("https://{address}/ui/");
    let page = chrome.open(&url).await;
    page.evaluate_on_new_document(PERF)
        .await
        .expect("the performance recorder");
    // Signed in as the page keeps it (sessionStorage), then loaded anew.
    eval::<bool>(
        &page,
        &format!(
            "(sessionStorage.setItem('bosun.token', {:?}), true)",
            admin.trim()
        ),
    )
    .await;
    // First loads side by side, alternating: chromium asking for the
    // identity encoding (every answer comes as it is), then for gzip as it
    // does by default; the cache off, so each is a first
    // load.
    page.execute(SetCacheDisabledParams::new(true))
        .await
        .expect("cache off");
    let mut loads = Vec::new();
    for round in 0..env_count("WEBVIEW_ROUNDS", 3) {
        for gzip in [false, true] {
            let l = first_load(&page, gzip, total, &control_log).await;
            eprintln!("round {round}: {l:?}");
            loads.push(l);
        }
    }
    page.execute(SetCacheDisabledParams::new(false))
        .await
        .expect("cache on");
    for gzip in [false, true] {
        let mine: Vec<&Load> = loads.iter().filter(|l| l.gzip == gzip).collect();
        let list =
            |f: fn(&Load) -> String| mine.iter().map(|l| f(l)).collect::<Vec<_>>().join(", ");
        println!(
            "first load with {total} pods, {}: assets {} KiB, pod list {} KiB on the wire ({} KiB decoded), node list {} KiB; first render {} ms",
            if gzip { "gzip" } else { "uncompressed (Accept-Encoding: identity)" },
            list(|l| format!("{:.1}", l.assets as f64 / 1024.0)),
            list(|l| format!("{:.1}", l.pods as f64 / 1024.0)),
            list(|l| format!("{:.1}", l.pods_decoded as f64 / 1024.0)),
            list(|l| format!("{:.1}", l.nodes as f64 / 1024.0)),
            list(|l| l.first_render.clone()),
        );
    }

    if env_count("WEBVIEW_ROLLOUT", 1) == 0 {
        return;
    }

    // The rollout, followed: long tasks and frame gaps from here on.
    eval::<bool>(
        &page,
        "(window.__perf.long = [], window.__perf.gaps = [], true)",
    )
    .await;
    let rollout = Instant::now();
    let patch =
        json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": v2}]}}}});
    for i in 0..DEPLOYMENTS {
        deployments
            .patch(
                &format!("scale-{i}"),
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
            .unwrap();
    }
    let want = wait("the rollout", &control_log, || rolled_out(&pods, total, v2)).await;
    let rolled = rollout.elapsed();
    let done = Instant::now();
    wait("the board to show the API's pods", &control_log, || async {
        (board_keys(&page).await == want).then_some(())
    })
    .await;
    let caught_up = done.elapsed();
    let (long, gaps): (Vec<f64>, Vec<f64>) =
        eval(&page, "[window.__perf.long, window.__perf.gaps]").await;
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    println!(
        "rollout of {total} pods in {:.0} s: long tasks {} (total {:.0} ms, max {:.0} ms), frames over 100 ms {} (max {:.0} ms); board caught up {} ms after the API",
        rolled.as_secs_f64(),
        long.len(),
        long.iter().sum::<f64>(),
        max(&long),
        gaps.len(),
        max(&gaps),
        caught_up.as_millis(),
    );
    drop(chrome);
}
