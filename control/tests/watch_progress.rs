//! Bookmarks that carry the watch's progress, as kube-apiserver's cacher
//! sends them: a client watching a resource nothing writes gets bookmarks
//! whose resourceVersion moves on as other resources are written, so that
//! after the history is compacted it resumes from its last bookmark
//! instead of getting 410 Gone and listing again, while a watch from a
//! revision of before the writes gets 410. On the embedded store (whose
//! history `--watch-history` bounds) and on etcd (its own watch, and the
//! watch cache, whose window begins when the server starts).

mod common;

use std::time::Duration;

use common::{dynamic_api, raw, ControlPlane};
use futures::StreamExt;
use kube::api::{DynamicObject, PostParams, WatchEvent, WatchParams};
use kube::{Api, Client};
use serde_json::json;

/// The kind nothing in the control plane writes: the watched one.
const QUIET: &str = "podtemplates";

type Events = futures::stream::BoxStream<'static, kube::Result<WatchEvent<DynamicObject>>>;

async fn next_event(stream: &mut Events) -> WatchEvent<DynamicObject> {
    tokio::time::timeout(Duration::from_secs(20), stream.next())
        .await
        .expect("an event within 20 s")
        .expect("the stream goes on")
        .expect("the event decodes")
}

/// The quiet kind's list revision (the store's current one).
async fn list_revision(client: &Client) -> u64 {
    let path = format!("/api/v1/namespaces/default/{QUIET}");
    let (code, list) = raw(client, "GET", &path, "application/json", vec![]).await;
    assert_eq!(code, 200, "{list}");
    list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

fn quiet(client: &Client) -> Api<DynamicObject> {
    dynamic_api(client, QUIET, Some("default"))
}

async fn watch_from(client: &Client, rv: u64) -> Events {
    quiet(client)
        .watch(&WatchParams::default(), &rv.to_string())
        .await
        .unwrap()
        .boxed()
}

/// `n` ConfigMaps (writes elsewhere); the revision of the last.
async fn write_elsewhere(client: &Client, prefix: &str, n: usize) -> u64 {
    let cms = dynamic_api(client, "configmaps", Some("default"));
    let mut last = 0;
    for i in 0..n {
        let cm: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("{prefix}-{i}")}, "data": {"i": i.to_string()},
        }))
        .unwrap();
        let made = cms.create(&PostParams::default(), &cm).await.unwrap();
        last = made.metadata.resource_version.unwrap().parse().unwrap();
    }
    last
}

/// Reads `stream` (nothing but bookmarks, the kind being quiet) until a
/// bookmark at `at_least` or later, within a minute; returns its
/// resourceVersion. The bookmarks never go back.
async fn bookmark_reaching(stream: &mut Events, at_least: u64) -> u64 {
    tokio::time::timeout(Duration::from_secs(60), bookmarks_until(stream, at_least))
        .await
        .unwrap_or_else(|_| panic!("no bookmark at {at_least} or later within 60 s"))
}

async fn bookmarks_until(stream: &mut Events, at_least: u64) -> u64 {
    let mut last = 0;
    loop {
        match next_event(stream).await {
            WatchEvent::Bookmark(b) => {
                assert_eq!(b.types.kind, "PodTemplate");
                let rv: u64 = b.metadata.resource_version.parse().unwrap();
                assert!(rv >= last, "a bookmark went back from {last} to {rv}");
                last = rv;
                if rv >= at_least {
                    return rv;
                }
            }
            other => panic!("a watch of a quiet kind got {other:?}, not a BOOKMARK"),
        }
    }
}

/// A PodTemplate (a write to the quiet kind); its revision.
async fn create_template(client: &Client, name: &str) -> u64 {
    let pt: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name},
        "template": {"spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}},
    }))
    .unwrap();
    let made = quiet(client)
        .create(&PostParams::default(), &pt)
        .await
        .unwrap();
    made.metadata.resource_version.unwrap().parse().unwrap()
}

/// The stream's first event other than a bookmark is the ADDED of `name`.
async fn expect_added(stream: &mut Events, name: &str, what: &str) {
    loop {
        match next_event(stream).await {
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Added(o) => {
                assert_eq!(o.metadata.name.as_deref(), Some(name), "{what}");
                return;
            }
            other => panic!("{what}: got {other:?}, not the ADDED of {name}"),
        }
    }
}

fn expect_gone(event: WatchEvent<DynamicObject>, rv: u64, what: &str) {
    match event {
        WatchEvent::Error(status) => {
            assert_eq!(
                (status.code, status.reason.as_str()),
                (410, "Expired"),
                "{what}"
            );
            assert!(
                status
                    .message
                    .starts_with(&format!("too old resource version: {rv} ")),
                "{what}: {}",
                status.message
            );
        }
        other => panic!("{what}: got {other:?}, not a 410 ERROR"),
    }
}

/// The whole story on the tests' store (embedded, or etcd with
/// `BOSUN_TEST_STORE=etcd`, where the watch is etcd's own: without the
/// watch cache, etcd's history is what a watch resumes from).
#[tokio::test]
async fn an_idle_watch_resumes_from_its_last_bookmark_after_compaction() {
    let mut flags = vec!["--bookmark-interval", "1", "--watch-history", "20"];
    if bosun_test_support::etcd::store_is_etcd() {
        flags.extend(["--watch-cache", "false"]);
    }
    let cp = ControlPlane::start_with(&flags);
    let client = cp.client().await;
    let before = list_revision(&client).await;
    let mut watch = watch_from(&client, before).await;
    let written = write_elsewhere(&client, "elsewhere", 30).await;
    assert!(written > before + 20);
    let bookmark = bookmark_reaching(&mut watch, written).await;
    // The history before the writes goes: the embedded store keeps the
    // last 20 changes; etcd is compacted as its compactor would.
    if let Some(etcd) = &cp.etcd {
        etcd.compact(bookmark);
    }
    let mut resumed = watch_from(&client, bookmark).await;
    let mut stale = watch_from(&client, before).await;
    expect_gone(
        next_event(&mut stale).await,
        before,
        "a watch from before the writes",
    );
    create_template(&client, "after").await;
    expect_added(&mut resumed, "after", "the watch from the last bookmark").await;
    expect_added(&mut watch, "after", "the watch that got the bookmarks").await;
}

/// On etcd with the watch cache (the default): the cache's bookmarks move
/// on with etcd's progress notifications, a watch from the last one is
/// served after compaction, and after a restart, whose caches start with
/// the server, a watch from before their window is 410 at once, as from
/// kube-apiserver's cacher, though etcd has not compacted that revision.
#[tokio::test]
async fn the_watch_cache_bookmarks_etcds_progress_and_starts_with_the_server() {
    let Some(mut cp) = ControlPlane::start_on_etcd(&["--bookmark-interval", "1"]) else {
        return;
    };
    let client = cp.client().await;
    let before = list_revision(&client).await;
    let mut watch = watch_from(&client, before).await;
    let written = write_elsewhere(&client, "elsewhere", 10).await;
    let bookmark = bookmark_reaching(&mut watch, written).await;
    cp.etcd.as_ref().unwrap().compact(bookmark);
    let mut resumed = watch_from(&client, bookmark).await;
    let created = create_template(&client, "after").await;
    expect_added(&mut resumed, "after", "the watch from the last bookmark").await;
    expect_added(&mut watch, "after", "the watch that got the bookmarks").await;
    // A write elsewhere after the template's: the caches of the restarted
    // server begin after it.
    write_elsewhere(&client, "later", 1).await;
    drop((watch, resumed));

    cp.restart();
    let client = cp.client().await;
    let mut stale = watch_from(&client, created).await;
    expect_gone(
        next_event(&mut stale).await,
        created,
        "a watch from before the restarted server's cache",
    );
    // From the restarted server's own revisions it watches on.
    let now = list_revision(&client).await;
    let mut fresh = watch_from(&client, now).await;
    let written = write_elsewhere(&client, "restarted", 3).await;
    bookmark_reaching(&mut fresh, written).await;
    create_template(&client, "restarted").await;
    expect_added(&mut fresh, "restarted", "a watch after the restart").await;
}
