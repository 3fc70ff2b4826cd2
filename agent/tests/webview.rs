//! The web view (`/ui/`) end to end in a real headless chromium: anonymous
//! users get the sign-in page and 401 from the API; the admin token signs
//! in and sees the node's column with the Deployment's pods as cards; a
//! rollout to a new image replaces the cards live (no reload); a view-only
//! ServiceAccount signs in, sees the pods and is refused a write. The test
//! writes docs/ui-overview.png and docs/ui-rollout.png and prints the
//! first load's bytes and time to first render.

mod browser;
mod cluster;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use browser::netlog::End;
use browser::{ensure_scripted, eval, sign_in, Chromium};
use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;
use chromiumoxide::cdp::browser_protocol::input::{DispatchKeyEventParams, DispatchKeyEventType};
use chromiumoxide::cdp::browser_protocol::page::CaptureScreenshotFormat;
use chromiumoxide::page::ScreenshotParams;
use chromiumoxide::Page;
use cluster::{repo_root, tail, Cluster};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde::de::DeserializeOwned;
use serde::Deserialize;

const V1: &str = "bosun.local/web:1";
const V2: &str = "bosun.local/web:2";
const LONG: Duration = Duration::from_secs(120);

fn deployment() -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
  selector:
    matchLabels: {{app: web}}
  strategy:
    type: RollingUpdate
    rollingUpdate: {{maxSurge: 1, maxUnavailable: 1}}
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
"#
    )
}

fn kubectl(c: &Cluster, args: &[&str]) -> String {
    cluster::ok(c.kubectl().args(args))
}

/// One node column of the board as the DOM shows it.
#[derive(Debug, Deserialize)]
struct Column {
    node: String,
    title: String,
    state: String,
    pods: Vec<Card>,
}

#[derive(Debug, Deserialize, Clone)]
struct Card {
    key: String,
    cls: String,
    state: String,
    restarts: String,
    ip: String,
    owner: String,
}

const BOARD: &str = r#"[...document.querySelectorAll('#columns > section')].map(s => ({
    node: s.dataset.node,
    title: s.querySelector('h3 .title').textContent,
    state: s.querySelector('.node-state').textContent,
    pods: [...s.querySelectorAll('li.pod')].map(p => {
        const dd = p.querySelectorAll('dd');
        return {key: p.dataset.key, cls: p.className, state: p.querySelector('.state').textContent,
            restarts: dd[0].textContent, ip: dd[1].textContent, owner: dd[2].textContent};
    })}))"#;

async fn board(page: &Page) -> Vec<Column> {
    eval(page, BOARD).await
}

/// Polls `js` in `page` until it gives a value that is not falsy,
/// failing after `deadline` with the page's text and the cluster's logs.
async fn wait_js<T: DeserializeOwned>(
    c: &Cluster,
    page: &Page,
    what: &str,
    deadline: Duration,
    js: &str,
) -> T {
    browser::wait_js(page, what, deadline, js, || {
        format!(
            "control log:\n{}\nagent log:\n{}",
            tail(&c.control_log(), 20),
            tail(&c.agent_log(), 20)
        )
    })
    .await
}

/// Polls the board until `check` holds of it.
async fn wait_board<T>(
    c: &Cluster,
    page: &Page,
    what: &str,
    mut check: impl FnMut(&[Column]) -> Option<T>,
) -> T {
    let started = Instant::now();
    loop {
        let b = board(page).await;
        if let Some(v) = check(&b) {
            return v;
        }
        if started.elapsed() > LONG {
            let text: String = eval(page, "document.body.innerText").await;
            let stats: String = eval(page, "JSON.stringify(window.bosunStats || null)").await;
            panic!(
                "timed out waiting for {what}\nboard: {b:#?}\npage text:\n{text}\npage stats: {stats}\ncontrol log:\n{}\nagent log:\n{}",
                tail(&c.control_log(), 20),
                tail(&c.agent_log(), 20)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn web_cards<'a>(b: &'a [Column], node: &str) -> Vec<&'a Card> {
    b.iter()
        .filter(|col| col.node == node)
        .flat_map(|col| col.pods.iter())
        .filter(|p| p.key.starts_with("default/web-"))
        .collect()
}

fn all_cards(b: &[Column]) -> Vec<&Card> {
    b.iter().flat_map(|col| col.pods.iter()).collect()
}

/// The 3 cards of the Deployment's ready pods in `node`'s column, once
/// all of them are owned by `owner` (a ReplicaSet name) and nothing else
/// is on the board.
fn ready_web_cards(b: &[Column], node: &str, owner: &str) -> Option<Vec<Card>> {
    let cards = web_cards(b, node);
    let ok = cards.len() == 3
        && all_cards(b).len() == 3
        && cards.iter().all(|p| {
            p.cls == "pod ok"
                && p.state == "Running · Ready 1/1"
                && p.owner == format!("ReplicaSet/{owner}")
                && p.ip.starts_with("10.244.")
        });
    ok.then(|| cards.into_iter().cloned().collect())
}

async fn replica_set_of(client: &kube::Client, image: &str) -> String {
    let sets = Api::<ReplicaSet>::namespaced(client.clone(), "default")
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    sets.items
        .into_iter()
        .find(|rs| {
            rs.spec
                .template
                .as_ref()
                .and_then(|t| t.spec.as_ref())
                .is_some_and(|s| s.containers[0].image.as_deref() == Some(image))
        })
        .and_then(|rs| rs.metadata.name)
        .unwrap_or_else(|| panic!("no ReplicaSet of {image}"))
}

async fn api_pods(client: &kube::Client) -> BTreeSet<(String, String)> {
    Api::<Pod>::namespaced(client.clone(), "default")
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| {
            (
                format!("default/{}", p.metadata.name.unwrap()),
                p.status.and_then(|s| s.pod_ip).unwrap_or_default(),
            )
        })
        .collect()
}

/// How the watch requests in chromium's net log ended (counted by end),
/// once the log shows at least `reopened` of them broken by a network
/// change (it is written behind the page); fails on any watch that the
/// server ended or broke.
async fn watch_ends(c: &Cluster, chrome: &Chromium, reopened: u64) -> BTreeMap<String, usize> {
    let started = Instant::now();
    loop {
        let mut ends = BTreeMap::new();
        let mut bad = Vec::new();
        for r in chrome.url_requests() {
            if !r.url.contains("watch=true") {
                continue;
            }
            match &r.end {
                End::Open | End::Cancelled => {}
                End::Failed(e) if e == "ERR_NETWORK_CHANGED" => {}
                other => bad.push(format!("{}: {other:?}", r.url)),
            }
            *ends.entry(format!("{:?}", r.end)).or_insert(0) += 1;
        }
        assert!(
            bad.is_empty(),
            "watches ended by the server or the connection, not by a network change:\n{}\ncontrol log:\n{}",
            bad.join("\n"),
            tail(&c.control_log(), 20)
        );
        let changed = ends
            .get(&format!("{:?}", End::Failed("ERR_NETWORK_CHANGED".into())))
            .copied()
            .unwrap_or(0);
        if changed as u64 >= reopened {
            return ends;
        }
        assert!(
            started.elapsed() < LONG,
            "the page resumed {reopened} watches, chromium's net log shows {ends:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Tab from the top of the page: the skip link first, then on to a pod's
/// card, which shows a focus ring.
async fn keyboard_reaches_a_card(c: &Cluster, page: &Page) {
    eval::<bool>(
        page,
        "(document.activeElement.blur(), window.scrollTo(0, 0), true)",
    )
    .await;
    let mut path = Vec::new();
    for _ in 0..30 {
        for kind in [
            DispatchKeyEventType::RawKeyDown,
            DispatchKeyEventType::KeyUp,
        ] {
            let key = DispatchKeyEventParams::builder()
                .r#type(kind)
                .key("Tab")
                .code("Tab")
                .windows_virtual_key_code(9)
                .build()
                .unwrap();
            page.execute(key).await.expect("press Tab");
        }
        let at: String = eval(
            page,
            "(document.activeElement.className || document.activeElement.tagName) + ''",
        )
        .await;
        path.push(at.clone());
        if at.starts_with("pod ") {
            break;
        }
    }
    assert_eq!(path[0], "skip", "the skip link comes first: {path:?}");
    assert!(
        path.last().unwrap().starts_with("pod "),
        "Tab reaches a pod's card: {path:?}"
    );
    let ring: (String, String) = wait_js(
        c,
        page,
        "the focused card's outline",
        LONG,
        "(() => { const s = getComputedStyle(document.activeElement);
            return [s.outlineStyle, s.outlineWidth]; })()",
    )
    .await;
    assert_eq!(ring, ("solid".to_string(), "3px".to_string()));
}

/// At a phone's 390x844 the columns stack, full width, and nothing
/// scrolls sideways; docs/ui-phone.png shows it.
async fn on_a_phone(c: &Cluster, page: &Page) {
    let phone = |w: i64, h: i64, mobile: bool| {
        SetDeviceMetricsOverrideParams::builder()
            .width(w)
            .height(h)
            .device_scale_factor(1.0)
            .mobile(mobile)
            .build()
            .unwrap()
    };
    page.execute(phone(390, 844, true))
        .await
        .expect("emulate a phone");
    let layout: serde_json::Value = wait_js(
        c,
        page,
        "the phone layout",
        LONG,
        "window.innerWidth === 390 && (() => {
            const cols = [...document.querySelectorAll('#columns > section')]
                .map(s => s.getBoundingClientRect());
            return { scroll: document.documentElement.scrollWidth,
                     widths: cols.map(r => Math.round(r.width)),
                     lefts: cols.map(r => Math.round(r.left)),
                     tops: cols.map(r => Math.round(r.top)) };
        })()",
    )
    .await;
    let nums = |k: &str| -> Vec<i64> {
        layout[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect()
    };
    assert!(
        layout["scroll"].as_i64().unwrap() <= 390,
        "nothing wider than the screen: {layout}"
    );
    let (widths, lefts, tops) = (nums("widths"), nums("lefts"), nums("tops"));
    assert!(widths.len() >= 2, "{layout}");
    assert!(
        widths.iter().all(|w| *w >= 360) && lefts.windows(2).all(|l| l[0] == l[1]),
        "columns full width, one under another: {layout}"
    );
    assert!(tops.windows(2).all(|t| t[0] < t[1]), "{layout}");
    screenshot(page, "ui-phone.png").await;
    page.execute(phone(1280, 860, false))
        .await
        .expect("back to the desktop size");
}

async fn screenshot(page: &Page, name: &str) {
    let path = repo_root().join("docs").join(name);
    page.save_screenshot(
        ScreenshotParams::builder()
            .format(CaptureScreenshotFormat::Png)
            .full_page(true)
            .build(),
        &path,
    )
    .await
    .unwrap_or_else(|e| panic!("screenshot {}: {e}", path.display()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_view_follows_a_rollout_live_under_rbac() {
    let c = Cluster::start();
    let client = c.client().await;
    c.wait_nodes_ready(&client).await;
    let manifest = c.dir.path().join("web.yaml");
    std::fs::write(&manifest, deployment()).unwrap();
    kubectl(&c, &["apply", "-f", manifest.to_str().unwrap()]);
    let data = c.dir.path().join("control");
    let address = std::fs::read_to_string(data.join("address")).unwrap();
    let base = format!("https://{}", address.trim());
    let admin = std::fs::read_to_string(data.join("admin-token")).unwrap();
    let chrome = Chromium::launch(1280, 860).await;

    // Anonymous: the sign-in page, and the API answers 401.
    let page = chrome.open(&format!("{base}/ui/")).await;
    ensure_scripted(&page).await;
    let signin: bool = eval(
        &page,
        "!document.getElementById('signin').hidden && document.getElementById('overview').hidden",
    )
    .await;
    assert!(signin, "an anonymous visitor sees the sign-in page");
    let status: u16 = eval(&page, "fetch('/api/v1/pods').then(r => r.status)").await;
    assert_eq!(status, 401, "an anonymous read of the pods");
    // The first load: every file the page fetched, as the browser saw it.
    let bytes: Vec<(String, u64, u64)> = eval(
        &page,
        "[...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')]
            .map(e => [e.name, e.encodedBodySize, e.transferSize])",
    )
    .await;
    let body_bytes: u64 = bytes.iter().map(|b| b.1).sum();
    assert_eq!(bytes.len(), 3, "index.html, app.js and app.css: {bytes:?}");
    assert!(body_bytes < 200 * 1024, "{bytes:?}");

    // A wrong token is refused on the form.
    sign_in(&page, "not-a-token").await;
    let refused: String = wait_js(
        &c,
        &page,
        "the sign-in error",
        LONG,
        "document.getElementById('signin-error').textContent || null",
    )
    .await;
    assert!(refused.contains("401"), "{refused}");

    // The admin token: the node's column with the three ready pods.
    let rs1 = {
        let rs = replica_set_of(&client, V1).await;
        sign_in(&page, admin.trim()).await;
        rs
    };
    let cards = wait_board(
        &c,
        &page,
        "the three ready v1 pods in the node's column",
        |b| ready_web_cards(b, &c.node, &rs1),
    )
    .await;
    let who: String = eval(&page, "document.getElementById('who').textContent").await;
    assert!(who.starts_with("Signed in as "), "{who}");
    let b = board(&page).await;
    let col = b.iter().find(|col| col.node == c.node).unwrap();
    assert_eq!(col.title, c.node);
    assert_eq!(col.state, "Node Ready");
    assert_eq!(b[0].title, "Pending (unscheduled)", "{b:?}");
    // Each card is the API's pod: its name and IP.
    let shown: BTreeSet<(String, String)> = cards
        .iter()
        .map(|p| (p.key.clone(), p.ip.clone()))
        .collect();
    assert_eq!(shown, api_pods(&client).await);
    assert!(cards.iter().all(|p| p.restarts == "0"), "{cards:?}");

    // Reloaded, the tab signs itself in from sessionStorage: the time to
    // the first render of the board.
    page.reload().await.expect("reload");
    ensure_scripted(&page).await;
    wait_board(&c, &page, "the board after a reload", |b| {
        ready_web_cards(b, &c.node, &rs1)
    })
    .await;
    let first_render: String = wait_js(
        &c,
        &page,
        "the first render's time",
        LONG,
        "document.getElementById('columns').dataset.firstRenderMs || null",
    )
    .await;
    eprintln!(
        "web view: first load {body_bytes} bytes of bodies ({bytes:?}); first render {first_render} ms after navigation with {} pods",
        cards.len()
    );

    // The rollout, followed live: the same document throughout.
    eval::<bool>(&page, "(window.sameDocument = true)").await;
    let old: BTreeSet<String> = cards.iter().map(|p| p.key.clone()).collect();
    kubectl(
        &c,
        &["set", "image", "deployment/web", &format!("web={V2}")],
    );
    let rs2 = c
        .poll("the v2 ReplicaSet", LONG, || async {
            let sets = Api::<ReplicaSet>::namespaced(client.clone(), "default")
                .list(&ListParams::default().labels("app=web"))
                .await
                .ok()?;
            sets.items.into_iter().find_map(|rs| {
                let image = rs.spec.template.as_ref()?.spec.as_ref()?.containers[0]
                    .image
                    .clone();
                (image.as_deref() == Some(V2)).then_some(rs.metadata.name?)
            })
        })
        .await;
    // New cards appear while old ones are still there (maxSurge 1); the
    // first such board is the rollout's screenshot.
    let mut mixed = false;
    let started = Instant::now();
    let last = loop {
        let b = board(&page).await;
        let keys: BTreeSet<String> = all_cards(&b).iter().map(|p| p.key.clone()).collect();
        if !mixed && !keys.is_disjoint(&old) && keys.iter().any(|k| !old.contains(k)) {
            mixed = true;
            screenshot(&page, "ui-rollout.png").await;
        }
        if let Some(cards) = ready_web_cards(&b, &c.node, &rs2) {
            break cards;
        }
        assert!(
            started.elapsed() < LONG,
            "timed out waiting for the three ready v2 pods, the v1 ones gone\nboard: {b:#?}\ncontrol log:\n{}",
            tail(&c.control_log(), 20)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        mixed,
        "new pods' cards appeared while old ones were still shown"
    );
    // Followed by watch events from the one list after the reload (a
    // broken stream resumes from its resourceVersion): no relisting, no
    // polling.
    let stats: serde_json::Value = eval(&page, "window.bosunStats").await;
    eprintln!("web view after the rollout: {stats}");
    assert_eq!(stats["lists"]["/api/v1/pods"], 1, "{stats}");
    assert!(stats["events"].as_u64().unwrap() >= 6, "{stats}");
    // Chromium breaks the watches itself whenever this host's addresses
    // change (each pod's sandbox adds an interface): every watch that
    // ended did so for that, none was ended by the server, and the page
    // resumed each at once without saying "Reconnecting…".
    let reopened: u64 = stats["watches"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap() - 1)
        .sum();
    let watches = watch_ends(&c, &chrome, reopened).await;
    eprintln!("web view: {reopened} watches resumed; chromium's net log: {watches:?}");
    assert_eq!(stats["shownDown"], 0, "{stats}");
    let same: bool = eval(&page, "window.sameDocument === true").await;
    assert!(same, "the page was not reloaded");
    assert!(last.iter().all(|p| !old.contains(&p.key)), "{last:?}");
    let shown: BTreeSet<(String, String)> =
        last.iter().map(|p| (p.key.clone(), p.ip.clone())).collect();
    assert_eq!(shown, api_pods(&client).await);
    screenshot(&page, "ui-overview.png").await;

    // The namespace filter: a namespace without pods empties the board,
    // `default` brings the cards back.
    for (ns, want) in [("kube-public", 0), ("default", 3)] {
        eval::<bool>(
            &page,
            &format!(
                "(() => {{ const i = document.getElementById('ns'); i.value = '{ns}';
                i.dispatchEvent(new Event('change')); return true; }})()"
            ),
        )
        .await;
        wait_js::<bool>(
            &c,
            &page,
            &format!("{want} cards in namespace {ns}"),
            LONG,
            &format!(
                "document.getElementById('status').textContent.includes('{want} pods in {ns}')
                 && document.querySelectorAll('li.pod').length === {want}"
            ),
        )
        .await;
    }

    keyboard_reaches_a_card(&c, &page).await;
    on_a_phone(&c, &page).await;

    // A view-only ServiceAccount: a new tab starts signed out, and the
    // token shows the pods (in a column named by their nodeName: `view`
    // does not list nodes) but may not delete one.
    kubectl(&c, &["create", "serviceaccount", "viewer"]);
    kubectl(
        &c,
        &[
            "create",
            "clusterrolebinding",
            "webview-viewer",
            "--clusterrole=view",
            "--serviceaccount=default:viewer",
        ],
    );
    let viewer = kubectl(&c, &["create", "token", "viewer"]);
    let tab = chrome.open(&format!("{base}/ui/")).await;
    ensure_scripted(&tab).await;
    let signin: bool = eval(&tab, "!document.getElementById('signin').hidden").await;
    assert!(signin, "a new tab starts signed out");
    sign_in(&tab, viewer.trim()).await;
    let cards = wait_board(&c, &tab, "the viewer's three pods", |b| {
        ready_web_cards(b, &c.node, &rs2)
    })
    .await;
    let who: String = eval(&tab, "document.getElementById('who').textContent").await;
    assert_eq!(who, "Signed in as system:serviceaccount:default:viewer");
    let b = board(&tab).await;
    let col = b.iter().find(|col| col.node == c.node).unwrap();
    assert_eq!(col.state, "Node: not listed", "{b:?}");
    let forged: u16 = eval(
        &tab,
        &format!(
            "fetch('/api/v1/namespaces/default/pods/{}', {{method: 'DELETE',
                headers: {{Authorization: 'Bearer ' + sessionStorage.getItem('bosun.token')}}}})
             .then(r => r.status)",
            cards[0].key.trim_start_matches("default/")
        ),
    )
    .await;
    assert_eq!(forged, 403, "a view-only token deleting a pod");
    drop(chrome);
}
