//! A headless Debian `chromium` for web view tests, driven over the
//! DevTools protocol by chromiumoxide. Each browser has its own temp
//! user-data dir and its own process group; dropping it (also on panic)
//! kills that group by its id and removes the dir.

#![allow(dead_code)]

pub mod netlog;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use chromiumoxide::browser::Browser;
use chromiumoxide::cdp::browser_protocol::input::InsertTextParams;
use chromiumoxide::handler::viewport::Viewport;
use chromiumoxide::handler::HandlerConfig;
use chromiumoxide::Page;
use futures::StreamExt;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde::de::DeserializeOwned;

/// Debian's chromium (scripts/test.sh installs it).
pub fn chromium_binary() -> PathBuf {
    for p in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if Path::new(p).exists() {
            return PathBuf::from(p);
        }
    }
    panic!("chromium is not installed: scripts/test.sh installs it (apt-get install chromium)");
}

const NET_LOG: &str = "net-log.json";

pub struct Chromium {
    pub browser: Browser,
    child: Child,
    dir: tempfile::TempDir,
    handler: tokio::task::JoinHandle<()>,
}

impl Chromium {
    /// Starts chromium headless at `width`x`height` and connects to it.
    pub async fn launch(width: u32, height: u32) -> Chromium {
        let dir = tempfile::tempdir().expect("temp dir");
        let profile = dir.path().join("profile");
        let log = std::fs::File::create(dir.path().join("chromium.log")).unwrap();
        let mut cmd = Command::new(chromium_binary());
        cmd.args([
            "--headless",
            // The tests run as root, where chromium's sandbox cannot start.
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-sync",
            "--mute-audio",
            // The control plane's serving certificate is signed by the
            // cluster's own CA.
            "--ignore-certificate-errors",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
        ])
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--user-data-dir={}", profile.display()))
        // Its network log, to tell why a connection or a stream ended.
        .arg(format!(
            "--log-net-log={}",
            dir.path().join(NET_LOG).display()
        ))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log);
        // Its own process group, so its helpers (zygote, renderers) go
        // with it.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let child = cmd.spawn().expect("starting chromium");
        let mut me = PartialChromium {
            child: Some(child),
            dir: Some(dir),
        };
        // Chromium writes the port it chose and the browser's path here.
        let port_file = profile.join("DevToolsActivePort");
        let started = Instant::now();
        let ws = loop {
            if let Ok(s) = std::fs::read_to_string(&port_file) {
                let mut lines = s.lines();
                if let (Some(port), Some(path)) = (lines.next(), lines.next()) {
                    break format!("ws://127.0.0.1:{port}{path}");
                }
            }
            if started.elapsed() > Duration::from_secs(60) {
                panic!(
                    "chromium wrote no DevToolsActivePort in 60 s:\n{}",
                    me.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let config = HandlerConfig {
            viewport: Some(Viewport {
                width,
                height,
                ..Default::default()
            }),
            request_timeout: Duration::from_secs(60),
            ..Default::default()
        };
        let (browser, mut handler) = Browser::connect_with_config(ws, config)
            .await
            .unwrap_or_else(|e| panic!("connecting to chromium: {e}\n{}", me.log()));
        // The handler drives the DevTools connection; events of newer
        // protocol versions it does not know are skipped, not fatal.
        let handler = tokio::spawn(async move { while handler.next().await.is_some() {} });
        let (child, dir) = me.take();
        Chromium {
            browser,
            child,
            dir,
            handler,
        }
    }

    /// Chromium's own output so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("chromium.log")).unwrap_or_default()
    }

    /// Every URL request chromium made so far, from its network log.
    pub fn url_requests(&self) -> Vec<netlog::Request> {
        netlog::url_requests(&self.dir.path().join(NET_LOG))
    }

    /// A new tab at `url`, once its document has loaded (the
    /// navigation's own event can come before the document is there).
    pub async fn open(&self, url: &str) -> Page {
        let page = self
            .browser
            .new_page(url)
            .await
            .unwrap_or_else(|e| panic!("opening {url}: {e}"));
        let started = Instant::now();
        loop {
            let loaded: Option<bool> = page
                .evaluate(format!(
                    "document.readyState === 'complete' && location.href === {url:?}"
                ))
                .await
                .ok()
                .and_then(|v| v.into_value().ok());
            if loaded == Some(true) {
                return page;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{url} did not load in 60 s\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Chromium {
    fn drop(&mut self) {
        self.handler.abort();
        kill_group(&mut self.child);
    }
}

/// What [`Chromium::launch`] holds until it has connected: killed and
/// removed if the launch panics.
struct PartialChromium {
    child: Option<Child>,
    dir: Option<tempfile::TempDir>,
}

impl PartialChromium {
    fn log(&self) -> String {
        self.dir
            .as_ref()
            .and_then(|d| std::fs::read_to_string(d.path().join("chromium.log")).ok())
            .unwrap_or_default()
    }

    fn take(&mut self) -> (Child, tempfile::TempDir) {
        (self.child.take().unwrap(), self.dir.take().unwrap())
    }
}

impl Drop for PartialChromium {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            kill_group(&mut child);
        }
    }
}

/// SIGKILLs the process group chromium leads (its pid is the group's id)
/// and reaps chromium.
fn kill_group(child: &mut Child) {
    let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
    let _ = child.kill();
    let _ = child.wait();
}

/// Evaluates `js` (an expression; a promise is awaited) in `page`.
pub async fn eval<T: DeserializeOwned>(page: &Page, js: &str) -> T {
    page.evaluate(js)
        .await
        .unwrap_or_else(|e| panic!("evaluating {js}: {e}"))
        .into_value()
        .unwrap_or_else(|e| panic!("the value of {js}: {e}"))
}

/// Polls `js` in `page` until it gives a value that is not falsy; fails
/// after `deadline` with the page's text and `context()` (the cluster's
/// logs).
pub async fn wait_js<T: DeserializeOwned>(
    page: &Page,
    what: &str,
    deadline: Duration,
    js: &str,
    context: impl Fn() -> String,
) -> T {
    let started = Instant::now();
    loop {
        // (chromiumoxide reads a null as no value at all.)
        let v: serde_json::Value = eval(page, &format!("(({js}) || false)")).await;
        if v != serde_json::Value::Bool(false) {
            return serde_json::from_value(v).expect("the expected shape");
        }
        if started.elapsed() > deadline {
            let body: String = eval(page, "document.body.innerText").await;
            panic!(
                "timed out after {deadline:?} waiting for {what}\npage text:\n{body}\n{}",
                context()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Pastes `token` into the web view's sign-in form and submits it.
pub async fn sign_in(page: &Page, token: &str) {
    let field = page.find_element("#token").await.expect("the token field");
    eval::<bool>(page, "(document.getElementById('token').value = '', true)").await;
    field.click().await.expect("focus the token field");
    page.execute(InsertTextParams::new(token))
        .await
        .expect("paste the token");
    page.find_element("#signin-form button[type=submit]")
        .await
        .expect("the sign-in button")
        .click()
        .await
        .expect("click sign in");
}

/// Waits until the web view's script has run in `page` (it sets
/// `window.bosunStats` first thing), reloading it if it has not within
/// 15 s: chromium on Linux fails the loads in flight when this host's
/// addresses change, and every pod started or removed on this host
/// changes them, so a page loaded during a rollout can come without its
/// script (a user would press reload).
pub async fn ensure_scripted(page: &Page) {
    for _ in 0..3 {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(15) {
            if eval::<bool>(page, "!!window.bosunStats").await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        eprintln!(
            "the web view's script did not run (a load broken by a network change?): reloading"
        );
        page.reload().await.expect("reload");
    }
    panic!("the web view's script did not run after three loads");
}

/// Clicks the element `selector` finds in `page`, finding it again when
/// a live page re-rendered it between the finding and the click (DevTools
/// then no longer knows the node; nothing was clicked yet).
pub async fn click(page: &Page, selector: &str) {
    let mut tries = 0;
    loop {
        let clicked = match page.find_element(selector).await {
            Ok(element) => element.click().await.map(|_| ()),
            Err(e) => Err(e),
        };
        match clicked {
            Ok(()) => return,
            Err(e) if tries < 10 => {
                tries += 1;
                eprintln!("clicking {selector} again: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("clicking {selector}: {e}"),
        }
    }
}

/// Shows the web view's page at `hash` (`#/workloads`, `#` the overview).
pub async fn go(page: &Page, hash: &str) {
    eval::<bool>(page, &format!("(location.hash = {hash:?}, true)")).await;
}

/// Presses Enter on whatever has the focus in `page`.
pub async fn press_enter(page: &Page) {
    use chromiumoxide::cdp::browser_protocol::input::{
        DispatchKeyEventParams, DispatchKeyEventType,
    };
    for kind in [DispatchKeyEventType::KeyDown, DispatchKeyEventType::KeyUp] {
        let mut key = DispatchKeyEventParams::builder()
            .r#type(kind.clone())
            .key("Enter")
            .code("Enter")
            .windows_virtual_key_code(13);
        if kind == DispatchKeyEventType::KeyDown {
            key = key.text("\r");
        }
        page.execute(key.build().unwrap())
            .await
            .expect("press Enter");
    }
}
