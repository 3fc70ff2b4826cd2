//! The web view's node and pod actions and its StatefulSet, DaemonSet and
//! Job pages, end to end in a real headless chromium on a real cluster:
//! the admin cordons the node from the Workloads page through the
//! confirmation dialog (the API has it unschedulable, the page and the
//! overview's node column say so), uncordons it again; deletes a
//! Deployment's pod from its page (its card leaves the overview and the
//! ReplicaSet's replacement appears there, as in the API); and the
//! StatefulSet's, DaemonSet's and Job's pages show their pods (the Job's
//! completed), revisions, conditions and the controllers' events.

mod browser;
mod cluster;

use std::collections::BTreeSet;
use std::time::Duration;

use browser::{click, ensure_scripted, eval, go, press_enter, sign_in, Chromium};
use chromiumoxide::Page;
use cluster::{tail, Cluster, BUSYBOX};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use serde::de::DeserializeOwned;
use serde::Deserialize;

const WEB1: &str = "bosun.local/web:1";
const LONG: Duration = Duration::from_secs(120);

fn manifests() -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: web
        image: {WEB1}
        readinessProbe:
          httpGet: {{path: /, port: 80}}
          periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata:
  name: db
spec:
  clusterIP: None
  selector: {{app: db}}
  ports:
  - port: 80
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  serviceName: db
  replicas: 2
  selector:
    matchLabels: {{app: db}}
  template:
    metadata:
      labels: {{app: db}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: db
        image: {BUSYBOX}
        command: ["sleep", "3600"]
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels: {{app: agent}}
  template:
    metadata:
      labels: {{app: agent}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: agent
        image: {BUSYBOX}
        command: ["sleep", "3600"]
---
apiVersion: batch/v1
kind: Job
metadata:
  name: once
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: once
        image: {BUSYBOX}
        command: ["sh", "-c", "echo done"]
"#
    )
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

/// Waits for the confirmation dialog, returns its title and text, and
/// confirms with the keyboard (the dialog opens with Confirm focused).
async fn confirm(c: &Cluster, page: &Page, what: &str) -> (String, String) {
    wait_js::<bool>(
        c,
        page,
        what,
        "document.getElementById('confirm').open && document.activeElement.id === 'confirm-ok'",
    )
    .await;
    let asked: (String, String) = eval(
        page,
        "[document.getElementById('confirm-title').textContent,
          document.getElementById('confirm-text').textContent]",
    )
    .await;
    press_enter(page).await;
    wait_js::<bool>(
        c,
        page,
        "the dialog closed",
        "!document.getElementById('confirm').open",
    )
    .await;
    asked
}

/// What the action `label` reported on the page once it has run (not
/// its "label…" while running).
async fn action_result(c: &Cluster, page: &Page, label: &str) -> String {
    wait_js(
        c,
        page,
        &format!("the result of {label}"),
        &format!(
            "[...document.querySelectorAll('#page .action-result')].map(p => p.textContent)
                .find(t => t && t !== {running:?})",
            running = format!("{label}…")
        ),
    )
    .await
}

/// The Workloads page's row of the node: its status and action buttons,
/// once the row's access review has answered.
const NODE_ROW: &str = r#"(() => {
    const panel = document.querySelector('#page section[aria-labelledby=p-nodes]');
    const row = panel && panel.querySelector('tbody tr');
    const bar = row && row.querySelector('.actions[data-checked]');
    return bar && [row.cells[0].textContent, row.cells[1].textContent,
        [...bar.querySelectorAll('button')].map(b => b.textContent)];
})()"#;

async fn unschedulable(client: &kube::Client, node: &str) -> bool {
    let n = Api::<Node>::all(client.clone()).get(node).await.unwrap();
    n.spec.and_then(|s| s.unschedulable).unwrap_or(false)
}

/// The overview's node column state text (`Node Ready, cordoned`).
fn column_state(node: &str) -> String {
    format!(
        "document.querySelector('#columns section[data-node={node:?}] .node-state')?.textContent"
    )
}

/// The keys (`ns/name`) of the overview's cards whose key starts with
/// `prefix`, once each is Running and Ready.
fn ready_cards(prefix: &str) -> String {
    format!(
        "(() => {{ const cards = [...document.querySelectorAll('#columns li.pod')]
            .filter(p => p.dataset.key.startsWith({prefix:?}));
          return cards.every(p => p.classList.contains('ok')) && cards.map(p => p.dataset.key); }})()"
    )
}

async fn web_pods(client: &kube::Client) -> BTreeSet<String> {
    Api::<Pod>::namespaced(client.clone(), "default")
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| format!("default/{}", p.metadata.name.unwrap()))
        .collect()
}

/// Pod cards as shown: key (`ns/name`) and class (`pod ok`).
type Cards = Vec<(String, String)>;

/// A workload page as shown: its summary, revision columns (revision,
/// title, pods with their card class), revisions table, conditions and
/// events (type, reason, message).
#[derive(Debug, Deserialize)]
struct Workload {
    summary: Vec<(String, String)>,
    columns: Vec<(String, String, Cards)>,
    revisions: Vec<Vec<String>>,
    conditions: Vec<Vec<String>>,
    events: Vec<(String, String, String)>,
}

const WORKLOAD: &str = r#"(() => {
    const page = document.getElementById('page');
    const rows = (id) => [...page.querySelectorAll('section[aria-labelledby=' + id + '] tbody tr')]
        .map(r => [...r.cells].map(td => td.textContent));
    return {
        summary: [...page.querySelectorAll('dl.facts dt')].map(dt => [dt.textContent, dt.nextElementSibling.textContent]),
        columns: [...page.querySelectorAll('.revcol')].map(s => [s.dataset.revision, s.querySelector('h4').textContent,
            [...s.querySelectorAll('li.pod')].map(p => [p.dataset.key, p.className])]),
        revisions: rows('p-revisions'),
        conditions: rows('p-conditions'),
        events: rows('p-events').map(r => [r[0], r[1], r[4]]),
    };
})()"#;

/// Polls the workload page until `check` holds of it.
async fn wait_workload(
    c: &Cluster,
    page: &Page,
    what: &str,
    check: impl Fn(&Workload) -> bool,
) -> Workload {
    let started = std::time::Instant::now();
    loop {
        let w: Workload = eval(page, WORKLOAD).await;
        if check(&w) {
            return w;
        }
        assert!(
            started.elapsed() < LONG,
            "timed out waiting for {what}\npage: {w:#?}\ncontrol log:\n{}",
            tail(&c.control_log(), 20)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn fact<'a>(w: &'a Workload, name: &str) -> &'a str {
    w.summary
        .iter()
        .find(|(t, _)| t == name)
        .map(|(_, d)| d.as_str())
        .unwrap_or_default()
}

fn has_event(w: &Workload, reason: &str, message: &str) -> bool {
    w.events
        .iter()
        .any(|(t, r, m)| t == "Normal" && r == reason && m == message)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_and_pod_actions_and_the_other_workload_pages() {
    let c = Cluster::start();
    let client = c.client().await;
    c.wait_nodes_ready(&client).await;
    let node = c.nodes()[0].clone();
    let manifest = c.dir.path().join("actions.yaml");
    std::fs::write(&manifest, manifests()).unwrap();
    cluster::ok(
        c.kubectl()
            .args(["apply", "-f", manifest.to_str().unwrap()]),
    );
    let data = c.dir.path().join("control");
    let address = std::fs::read_to_string(data.join("address")).unwrap();
    let base = format!("https://{}", address.trim());
    let admin = std::fs::read_to_string(data.join("admin-token")).unwrap();
    let chrome = Chromium::launch(1280, 900).await;
    let page = chrome.open(&format!("{base}/ui/")).await;
    ensure_scripted(&page).await;
    sign_in(&page, admin.trim()).await;
    let state = wait_js::<String>(&c, &page, "the node's column", &column_state(&node)).await;
    assert_eq!(state, "Node Ready");
    // Everything running before the node is cordoned: the web pods'
    // cards Ready on the board.
    wait_js::<Vec<String>>(
        &c,
        &page,
        "both web pods Ready on the board",
        &format!(
            "(k => k && k.length === 2 && k)({})",
            ready_cards("default/web-")
        ),
    )
    .await;

    // Cordon from the Workloads page, confirmed in the dialog.
    go(&page, "#/workloads").await;
    let row: (String, String, Vec<String>) =
        wait_js(&c, &page, "the node's row and its actions", NODE_ROW).await;
    assert_eq!(row, (node.clone(), "Ready".into(), vec!["Cordon".into()]));
    click(
        &page,
        "#page section[aria-labelledby=p-nodes] button[data-action=cordon]",
    )
    .await;
    let asked = confirm(&c, &page, "the cordon dialog").await;
    assert_eq!(asked.0, format!("Cordon {node}?"));
    c.poll("the node unschedulable in the API", LONG, || async {
        unschedulable(&client, &node).await.then_some(())
    })
    .await;
    let row: (String, String, Vec<String>) = wait_js(
        &c,
        &page,
        "the row showing the node cordoned",
        &format!("(r => r && r[1] !== 'Ready' && r)({NODE_ROW})"),
    )
    .await;
    assert_eq!(
        row,
        (
            node.clone(),
            "Ready, SchedulingDisabled".into(),
            vec!["Uncordon".into()]
        )
    );
    // The overview's column says so too.
    go(&page, "#").await;
    let state: String = wait_js(
        &c,
        &page,
        "the column showing the node cordoned",
        &format!("(s => s !== 'Node Ready' && s)({})", column_state(&node)),
    )
    .await;
    assert_eq!(state, "Node Ready, cordoned");

    // Uncordon.
    go(&page, "#/workloads").await;
    let row: (String, String, Vec<String>) = wait_js(
        &c,
        &page,
        "the node's row with Uncordon",
        &format!("(r => r && r[2][0] === 'Uncordon' && r)({NODE_ROW})"),
    )
    .await;
    assert_eq!(row.1, "Ready, SchedulingDisabled");
    click(
        &page,
        "#page section[aria-labelledby=p-nodes] button[data-action=uncordon]",
    )
    .await;
    let asked = confirm(&c, &page, "the uncordon dialog").await;
    assert_eq!(asked.0, format!("Uncordon {node}?"));
    c.poll("the node schedulable again in the API", LONG, || async {
        (!unschedulable(&client, &node).await).then_some(())
    })
    .await;
    let row: (String, String, Vec<String>) = wait_js(
        &c,
        &page,
        "the row showing the node schedulable",
        &format!("(r => r && r[1] === 'Ready' && r)({NODE_ROW})"),
    )
    .await;
    assert_eq!(row.2, ["Cordon"]);

    // Delete a web pod from its page; the board follows the ReplicaSet.
    let before = web_pods(&client).await;
    assert_eq!(before.len(), 2, "{before:?}");
    let victim = before.iter().next().unwrap().clone();
    let (_, victim_name) = victim.split_once('/').unwrap();
    go(&page, &format!("#/pod/default/{victim_name}")).await;
    wait_js::<bool>(
        &c,
        &page,
        "the pod page's Delete button",
        "!!document.querySelector('#page button[data-action=delete]')",
    )
    .await;
    click(&page, "#page button[data-action=delete]").await;
    let asked = confirm(&c, &page, "the delete dialog").await;
    assert_eq!(asked.0, format!("Delete pod {victim_name}?"));
    assert_eq!(
        action_result(&c, &page, "Delete pod").await,
        format!("Pod {victim_name} is being deleted.")
    );
    go(&page, "#").await;
    let shown: Vec<String> = wait_js(
        &c,
        &page,
        "the deleted pod's card gone and a replacement Ready",
        &format!(
            "(k => k && k.length === 2 && !k.includes({victim:?}) && k)({})",
            ready_cards("default/web-")
        ),
    )
    .await;
    let after = c
        .poll("the API's two web pods", LONG, || async {
            let now = web_pods(&client).await;
            (now.len() == 2 && !now.contains(&victim)).then_some(now)
        })
        .await;
    assert_eq!(shown.into_iter().collect::<BTreeSet<_>>(), after);
    let replacement = after.difference(&before).count();
    assert_eq!(replacement, 1, "one new pod: {before:?} -> {after:?}");

    // The StatefulSet's page: its two pods by name, one revision, the
    // controller's events.
    go(&page, "#/workload/statefulsets/default/db").await;
    let w = wait_workload(&c, &page, "the StatefulSet's two ready pods", |w| {
        w.columns.len() == 1
            && w.columns[0].2
                == [
                    ("default/db-0".to_string(), "pod ok".to_string()),
                    ("default/db-1".to_string(), "pod ok".to_string()),
                ]
            && has_event(
                w,
                "SuccessfulCreate",
                "create Pod db-1 in StatefulSet db successful",
            )
    })
    .await;
    assert_eq!(w.columns[0].1, "Revision 1");
    assert_eq!(w.revisions.len(), 1, "{w:?}");
    assert_eq!(w.revisions[0][0], "1");
    assert!(w.revisions[0][1].starts_with("db-"), "{w:?}");
    assert_eq!(w.revisions[0][2], BUSYBOX);
    assert!(
        has_event(
            &w,
            "SuccessfulCreate",
            "create Pod db-0 in StatefulSet db successful"
        ),
        "{w:?}"
    );
    assert!(
        fact(&w, "Replicas (desired / updated / ready / available)").starts_with("2 / "),
        "{w:?}"
    );

    // The DaemonSet's page: its one pod on the one node.
    go(&page, "#/workload/daemonsets/default/agent").await;
    let w = wait_workload(&c, &page, "the DaemonSet's ready pod", |w| {
        w.columns.len() == 1
            && w.columns[0].2.len() == 1
            && w.columns[0].2[0].1 == "pod ok"
            && fact(w, "Pods (desired / updated / ready)") == "1 / 1 / 1"
            && !w.events.is_empty()
    })
    .await;
    let pod = w.columns[0].2[0].0.clone();
    assert!(pod.starts_with("default/agent-"), "{w:?}");
    let (_, pod_name) = pod.split_once('/').unwrap();
    assert!(
        has_event(&w, "SuccessfulCreate", &format!("Created pod: {pod_name}")),
        "{w:?}"
    );
    assert_eq!(w.revisions.len(), 1, "{w:?}");
    assert_eq!(w.revisions[0][2], BUSYBOX);

    // The Job's page: its pod completed, the Complete condition, the
    // events of its pod's creation and its completion.
    go(&page, "#/workload/jobs/default/once").await;
    let w = wait_workload(&c, &page, "the Job complete", |w| {
        w.conditions
            .iter()
            .any(|r| r[0] == "Complete" && r[1] == "True")
            && has_event(w, "Completed", "Job completed")
    })
    .await;
    assert_eq!(
        fact(&w, "Pods (active / succeeded / failed)"),
        "0 / 1 / 0",
        "{w:?}"
    );
    assert_eq!(w.columns.len(), 1, "{w:?}");
    let pods = &w.columns[0].2;
    assert_eq!(pods.len(), 1, "{w:?}");
    assert!(pods[0].0.starts_with("default/once-"), "{w:?}");
    assert_eq!(pods[0].1, "pod done", "the pod shown completed: {w:?}");
    let (_, pod_name) = pods[0].0.split_once('/').unwrap();
    assert!(
        has_event(&w, "SuccessfulCreate", &format!("Created pod: {pod_name}")),
        "{w:?}"
    );
    let text: String = eval(
        &page,
        "document.querySelector('#page .revcol li.pod .state').textContent",
    )
    .await;
    assert_eq!(text, "Completed");
    drop(chrome);
}
