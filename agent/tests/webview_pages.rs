//! The web view's pages after the overview, end to end in a real headless
//! chromium on a real cluster: a pod card's owner leads to its
//! Deployment's page, which shows the old and the new ReplicaSet's pods
//! side by side while `kubectl set image` rolls it (written to
//! docs/ui-workload.png), then the revisions with their images; the admin
//! scales it through the page's confirmation dialog and the API has the
//! new count, then undoes the rollout (revision 1's template) and restarts
//! it (the restartedAt annotation); a pod's page follows its container's
//! log live; the HPA page draws its chart; a view-only ServiceAccount sees
//! no action buttons, and a forged scale with its token gets 403.

mod browser;
mod cluster;

use std::time::{Duration, Instant};

use browser::{click, ensure_scripted, eval, go, sign_in, Chromium};
use chromiumoxide::cdp::browser_protocol::input::InsertTextParams;
use chromiumoxide::cdp::browser_protocol::page::CaptureScreenshotFormat;
use chromiumoxide::page::ScreenshotParams;
use chromiumoxide::Page;
use cluster::{repo_root, tail, Cluster};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use serde::de::DeserializeOwned;
use serde::Deserialize;

const V1: &str = "bosun.local/web:1";
const V2: &str = "bosun.local/web:2";
const LONG: Duration = Duration::from_secs(120);
const WORKLOAD: &str = "#/workload/deployments/default/web";

/// Rolls one pod at a time, each counted available only after 2 s, so the
/// old and the new ReplicaSet both have pods for several seconds.
fn manifests() -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
  minReadySeconds: 2
  selector:
    matchLabels: {{app: web}}
  strategy:
    type: RollingUpdate
    rollingUpdate: {{maxSurge: 1, maxUnavailable: 0}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: web
        image: {V1}
        readinessProbe:
          httpGet: {{path: /, port: 80}}
          periodSeconds: 1
---
apiVersion: v1
kind: Pod
metadata:
  name: logger
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: bosun.local/busybox:1.35
    command: ["sh", "-c", "echo waiting for the go file; while [ ! -f /tmp/go ]; do sleep 0.2; done; echo the go file is here; exec sleep 3600"]
"#
    )
}

fn kubectl(c: &Cluster, args: &[&str]) -> String {
    cluster::ok(c.kubectl().args(args))
}

/// Polls `js` in `page` until it gives a value that is not falsy; fails
/// after a long while with the page's text and the cluster's logs.
async fn wait_js<T: DeserializeOwned>(c: &Cluster, page: &Page, what: &str, js: &str) -> T {
    browser::wait_js(page, what, LONG, js, || {
        format!(
            "control log:\n{}\nagent log:\n{}",
            tail(&c.control_log(), 20),
            tail(&c.agent_log(), 20)
        )
    })
    .await
}

/// The workload page's columns of pods, one per revision, as shown.
#[derive(Debug, Deserialize)]
struct RevColumn {
    revision: String,
    title: String,
    sub: String,
    pods: Vec<(String, String)>,
}

const COLUMNS: &str = r#"[...document.querySelectorAll('#page .revcol')].map(s => ({
    revision: s.dataset.revision, title: s.querySelector('h4').textContent,
    sub: s.querySelector('.sub').textContent,
    pods: [...s.querySelectorAll('li.pod')].map(p => [p.dataset.key, p.className])}))"#;

async fn columns(page: &Page) -> Vec<RevColumn> {
    eval(page, COLUMNS).await
}

async fn wait_columns<T>(
    c: &Cluster,
    page: &Page,
    what: &str,
    mut check: impl FnMut(&[RevColumn]) -> Option<T>,
) -> T {
    let started = Instant::now();
    loop {
        let cols = columns(page).await;
        if let Some(v) = check(&cols) {
            return v;
        }
        assert!(
            started.elapsed() < LONG,
            "timed out waiting for {what}\ncolumns: {cols:#?}\ncontrol log:\n{}",
            tail(&c.control_log(), 20)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One column of revision `rev` with three ready pods, and no other.
fn settled(cols: &[RevColumn], rev: &str, image: &str) -> bool {
    cols.len() == 1
        && cols[0].revision == rev
        && cols[0].title == format!("Revision {rev}")
        && cols[0].sub.ends_with(image)
        && cols[0].pods.len() == 3
        && cols[0].pods.iter().all(|p| p.1 == "pod ok")
}

/// The action buttons shown, once every access review has answered.
async fn action_buttons(c: &Cluster, page: &Page) -> Vec<String> {
    wait_js::<String>(
        c,
        page,
        "the actions' access reviews",
        "document.querySelector('#page .actions[data-checked]') && 'checked'",
    )
    .await;
    eval(
        page,
        "[...document.querySelectorAll('#page .actions button')].map(b => b.textContent)",
    )
    .await
}

async fn replicas(client: &kube::Client) -> i32 {
    Api::<Deployment>::namespaced(client.clone(), "default")
        .get("web")
        .await
        .unwrap()
        .spec
        .replicas
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_pod_and_hpa_pages_follow_the_cluster_and_act_under_rbac() {
    let c = Cluster::start();
    let client = c.client().await;
    c.wait_nodes_ready(&client).await;
    let manifest = c.dir.path().join("pages.yaml");
    std::fs::write(&manifest, manifests()).unwrap();
    kubectl(&c, &["apply", "-f", manifest.to_str().unwrap()]);
    let data = c.dir.path().join("control");
    let address = std::fs::read_to_string(data.join("address")).unwrap();
    let base = format!("https://{}", address.trim());
    let admin = std::fs::read_to_string(data.join("admin-token")).unwrap();
    let chrome = Chromium::launch(1280, 900).await;
    let page = chrome.open(&format!("{base}/ui/")).await;
    ensure_scripted(&page).await;
    sign_in(&page, admin.trim()).await;

    // From the overview: a web pod's card, its owner (a ReplicaSet) leads
    // to the Deployment's page.
    let card = "li.pod[data-key^='default/web-'] dd:last-of-type";
    wait_js::<bool>(
        &c,
        &page,
        "a web pod's card",
        &format!("!!document.querySelector(\"{card}\")"),
    )
    .await;
    click(&page, card).await;
    let hash: String = wait_js(
        &c,
        &page,
        "the workload page",
        "location.hash.startsWith('#/workload/') && location.hash",
    )
    .await;
    assert_eq!(hash, WORKLOAD);
    eval::<bool>(&page, "(window.sameDocument = true)").await;
    wait_columns(&c, &page, "revision 1's three ready pods", |cols| {
        settled(cols, "1", V1).then_some(())
    })
    .await;
    let buttons = action_buttons(&c, &page).await;
    assert_eq!(
        buttons,
        ["Scale", "Restart", "Undo rollout"],
        "the admin's actions"
    );

    // The rollout: old and new ReplicaSets' pods side by side, live.
    kubectl(
        &c,
        &["set", "image", "deployment/web", &format!("web={V2}")],
    );
    let mid = wait_columns(&c, &page, "revisions 1 and 2 side by side", |cols| {
        let both = cols.len() == 2
            && cols[0].revision == "1"
            && cols[1].revision == "2"
            && cols[0].sub.ends_with(V1)
            && cols[1].sub.ends_with(V2)
            && cols.iter().all(|col| !col.pods.is_empty());
        both.then(|| format!("{cols:?}"))
    })
    .await;
    eprintln!("mid-rollout: {mid}");
    // The screenshot once a new pod is ready beside the old ones.
    wait_columns(
        &c,
        &page,
        "a ready revision 2 pod beside revision 1's",
        |cols| {
            let shown = cols.len() == 2
                && !cols[0].pods.is_empty()
                && cols[1].pods.iter().any(|p| p.1 == "pod ok");
            shown.then_some(())
        },
    )
    .await;
    let path = repo_root().join("docs").join("ui-workload.png");
    page.save_screenshot(
        ScreenshotParams::builder()
            .format(CaptureScreenshotFormat::Png)
            .full_page(true)
            .build(),
        &path,
    )
    .await
    .unwrap_or_else(|e| panic!("screenshot {}: {e}", path.display()));
    wait_columns(&c, &page, "revision 2's three ready pods alone", |cols| {
        settled(cols, "2", V2).then_some(())
    })
    .await;
    let revisions: Vec<Vec<String>> = wait_js(
        &c,
        &page,
        "both revisions listed",
        "(() => { const rows = [...document.querySelectorAll('#page section[aria-labelledby=p-revisions] tbody tr')]
            .map(r => [...r.cells].slice(0, 3).map(td => td.textContent));
            return rows.length === 2 && rows; })()",
    )
    .await;
    assert_eq!(revisions[0][0], "2");
    assert_eq!(revisions[0][2], V2);
    assert_eq!(revisions[1][0], "1");
    assert_eq!(revisions[1][2], V1);
    let same: bool = eval(&page, "window.sameDocument === true").await;
    assert!(same, "followed without a reload");

    // Scale through the page, after confirming.
    click(&page, "#page button[data-action=scale]").await;
    wait_js::<bool>(
        &c,
        &page,
        "the scale dialog",
        "document.getElementById('confirm').open",
    )
    .await;
    let asked: String = eval(
        &page,
        "document.getElementById('confirm-title').textContent",
    )
    .await;
    assert_eq!(asked, "Scale Deployment web");
    eval::<bool>(
        &page,
        "(document.getElementById('confirm-input').select(), true)",
    )
    .await;
    page.execute(InsertTextParams::new("4"))
        .await
        .expect("type 4");
    click(&page, "#confirm-ok").await;
    c.poll("the Deployment scaled to 4", LONG, || async {
        (replicas(&client).await == 4).then_some(())
    })
    .await;
    let said: String = wait_js(
        &c,
        &page,
        "the scale's result",
        "document.querySelector('#page .action-result').textContent.startsWith('Scaled') &&
         document.querySelector('#page .action-result').textContent",
    )
    .await;
    assert_eq!(said, "Scaled to 4 replicas.");
    wait_columns(&c, &page, "four pods of revision 2", |cols| {
        (cols.len() == 1 && cols[0].pods.len() == 4).then_some(())
    })
    .await;

    // Undo, as kubectl rollout undo: the template of revision 1 again.
    click(&page, "#page button[data-action=undo]").await;
    wait_js::<bool>(
        &c,
        &page,
        "the undo dialog",
        "document.getElementById('confirm').open",
    )
    .await;
    let text: String = eval(&page, "document.getElementById('confirm-text').textContent").await;
    assert_eq!(text, format!("Roll back to revision 1 ({V1})."));
    click(&page, "#confirm-ok").await;
    c.poll("the Deployment back on v1", LONG, || async {
        let d = Api::<Deployment>::namespaced(client.clone(), "default")
            .get("web")
            .await
            .ok()?;
        let d = serde_json::to_value(d).unwrap();
        (d.pointer("/spec/template/spec/containers/0/image")? == V1).then_some(())
    })
    .await;
    // Restart: the template's restartedAt annotation, as kubectl sets it.
    click(&page, "#page button[data-action=restart]").await;
    wait_js::<bool>(
        &c,
        &page,
        "the restart dialog",
        "document.getElementById('confirm').open",
    )
    .await;
    click(&page, "#confirm-ok").await;
    let at = c
        .poll("the restartedAt annotation", LONG, || async {
            let d = Api::<Deployment>::namespaced(client.clone(), "default")
                .get("web")
                .await
                .ok()?;
            let d = serde_json::to_value(d).unwrap();
            let at = d.pointer(
                "/spec/template/metadata/annotations/kubectl.kubernetes.io~1restartedAt",
            )?;
            Some(at.as_str()?.to_string())
        })
        .await;
    assert!(
        chrono::DateTime::parse_from_rfc3339(&at).is_ok(),
        "{at:?} is RFC 3339"
    );
    assert_eq!(replicas(&client).await, 4);

    // A pod's page: the container, and its log followed live.
    go(&page, "#/pod/default/logger").await;
    wait_js::<bool>(
        &c,
        &page,
        "the logger's first line, followed",
        "document.querySelector('#page pre.log') &&
         document.querySelector('#page pre.log').dataset.following === 'main' &&
         document.querySelector('#page pre.log').textContent.includes('waiting for the go file')",
    )
    .await;
    let row: Vec<String> = eval(
        &page,
        "[...document.querySelector('#page section[aria-labelledby=p-containers] tbody tr').cells]
            .map(td => td.textContent)",
    )
    .await;
    assert_eq!(row[0], "main");
    assert_eq!(row[1], "bosun.local/busybox:1.35");
    assert!(row[2].starts_with("Running since"), "{row:?}");
    assert_eq!(row[5], "0", "restarts: {row:?}");
    let text: String = eval(&page, "document.querySelector('#page pre.log').textContent").await;
    assert!(!text.contains("the go file is here"), "{text}");
    kubectl(&c, &["exec", "logger", "--", "touch", "/tmp/go"]);
    wait_js::<bool>(
        &c,
        &page,
        "the log line written after the page opened",
        "document.querySelector('#page pre.log').textContent.includes('the go file is here')",
    )
    .await;
    assert_eq!(action_buttons(&c, &page).await, ["Delete pod"]);

    // The HPA's page: its chart from a watch.
    kubectl(
        &c,
        &[
            "autoscale",
            "deployment",
            "web",
            "--min=1",
            "--max=5",
            "--cpu-percent=50",
        ],
    );
    go(&page, "#/hpa/default/web").await;
    let series: u32 = wait_js(
        &c,
        &page,
        "the HPA's charts",
        "document.querySelectorAll('#page svg.chart').length === 2 &&
         document.querySelectorAll('#page svg.chart path.series').length",
    )
    .await;
    assert!(series >= 2, "current and desired replicas drawn: {series}");
    let label: String = eval(
        &page,
        "document.querySelector('#page svg.chart title').textContent",
    )
    .await;
    assert!(label.starts_with("Replicas: Current replicas "), "{label}");

    // A view-only ServiceAccount: the pages, and no action buttons.
    kubectl(&c, &["create", "serviceaccount", "viewer"]);
    kubectl(
        &c,
        &[
            "create",
            "clusterrolebinding",
            "pages-viewer",
            "--clusterrole=view",
            "--serviceaccount=default:viewer",
        ],
    );
    let viewer = kubectl(&c, &["create", "token", "viewer"]);
    let tab = chrome.open(&format!("{base}/ui/{WORKLOAD}")).await;
    ensure_scripted(&tab).await;
    sign_in(&tab, viewer.trim()).await;
    wait_columns(&c, &tab, "the viewer's four pods", |cols| {
        (cols.len() == 1 && cols[0].pods.len() == 4).then_some(())
    })
    .await;
    assert!(
        action_buttons(&c, &tab).await.is_empty(),
        "no buttons for a viewer"
    );
    go(&tab, "#/pod/default/logger").await;
    wait_js::<bool>(
        &c,
        &tab,
        "the viewer's log",
        "document.querySelector('#page pre.log') &&
         document.querySelector('#page pre.log').textContent.includes('the go file is here')",
    )
    .await;
    assert!(
        action_buttons(&c, &tab).await.is_empty(),
        "no buttons for a viewer"
    );
    let forged: u16 = eval(
        &tab,
        "fetch('/apis/apps/v1/namespaces/default/deployments/web/scale', {method: 'PATCH',
            headers: {Authorization: 'Bearer ' + sessionStorage.getItem('bosun.token'),
                      'Content-Type': 'application/merge-patch+json'},
            body: JSON.stringify({spec: {replicas: 1}})}).then(r => r.status)",
    )
    .await;
    assert_eq!(forged, 403, "a view-only token scaling the Deployment");
    assert_eq!(replicas(&client).await, 4);
    drop(chrome);
}
