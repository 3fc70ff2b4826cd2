//! Paged lists over real HTTPS on a control plane on a real etcd: later
//! pages read at the first page's revision (objects changed meanwhile are
//! seen as they were), kubectl's `--chunk-size` pages through them, and
//! once that revision is compacted a continued page is a 410 Expired with
//! upstream's message and a token that reads the rest as it is now.
//! Skipped (the reason printed) when etcd is not installed.

mod common;

use std::process::{Command, Stdio};

use bosun_test_support::binaries::kubectl_binary;
use common::{raw, ControlPlane};
use kube::Client;
use serde_json::{json, Value};

async fn create(client: &Client, ns: &str, name: &str, data: &str) -> u64 {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name}, "data": {"v": data}});
    let (code, body) = raw(
        client,
        "POST",
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        "application/json",
        cm.to_string().into_bytes(),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    rv(&body["metadata"])
}

fn rv(meta: &Value) -> u64 {
    meta["resourceVersion"].as_str().unwrap().parse().unwrap()
}

async fn page(client: &Client, ns: &str, query: &str) -> (u16, Value) {
    let path = format!("/api/v1/namespaces/{ns}/configmaps?{query}");
    raw(client, "GET", &path, "application/json", vec![]).await
}

/// `name=data` of each item of a list.
fn items(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            format!(
                "{}={}",
                o["metadata"]["name"].as_str().unwrap(),
                o["data"]["v"]
            )
        })
        .collect()
}

#[tokio::test]
async fn continued_pages_read_at_the_first_pages_revision_until_it_is_compacted() {
    let Some(cp) = ControlPlane::start_on_etcd(&[]) else {
        return;
    };
    let client = cp.client().await;
    let ns = "paging";
    let (code, body) = raw(
        &client,
        "POST",
        "/api/v1/namespaces",
        "application/json",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            .to_string()
            .into_bytes(),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    for i in 0..6 {
        create(&client, ns, &format!("cm-{i}"), "old").await;
    }

    // kubectl pages two at a time and shows every one.
    let out = Command::new(kubectl_binary())
        .arg("--kubeconfig")
        .arg(cp.kubeconfig_path())
        .args([
            "get",
            "configmaps",
            "-n",
            ns,
            "--chunk-size=2",
            "-o",
            "name",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("kubectl is installed");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("configmap/cm-"))
        .map(String::from)
        .collect();
    let want: Vec<String> = (0..6).map(|i| format!("configmap/cm-{i}")).collect();
    assert_eq!(names, want);

    // A first page, then changes to objects of later pages.
    let (code, first) = page(&client, ns, "limit=2").await;
    assert_eq!(code, 200, "{first}");
    let at = rv(&first["metadata"]);
    let token = first["metadata"]["continue"].as_str().unwrap().to_string();
    let (code, body) = raw(
        &client,
        "PATCH",
        &format!("/api/v1/namespaces/{ns}/configmaps/cm-3"),
        "application/merge-patch+json",
        br#"{"data": {"v": "new"}}"#.to_vec(),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = raw(
        &client,
        "DELETE",
        &format!("/api/v1/namespaces/{ns}/configmaps/cm-4"),
        "application/json",
        vec![],
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let last = create(&client, ns, "cm-9", "new").await;

    // The rest as it was at the first page's revision, which every page says.
    let (code, rest) = page(&client, ns, &format!("continue={token}")).await;
    assert_eq!(code, 200, "{rest}");
    assert_eq!(
        items(&rest),
        [
            "cm-2=\"old\"",
            "cm-3=\"old\"",
            "cm-4=\"old\"",
            "cm-5=\"old\""
        ]
    );
    assert_eq!(rv(&rest["metadata"]), at);

    // Compacted past it: 410 Expired, and a token for the rest as it is now.
    cp.etcd.as_ref().unwrap().compact(last);
    let (code, status) = page(&client, ns, &format!("limit=2&continue={token}")).await;
    assert_eq!(code, 410, "{status}");
    assert_eq!(status["reason"], "Expired");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "The provided continue parameter is too old to display a consistent list result."
        ),
        "{message}"
    );
    let retry = status["metadata"]["continue"].as_str().unwrap();
    let (code, now) = page(&client, ns, &format!("continue={retry}")).await;
    assert_eq!(code, 200, "{now}");
    assert_eq!(
        items(&now),
        [
            "cm-2=\"old\"",
            "cm-3=\"new\"",
            "cm-5=\"old\"",
            "cm-9=\"new\""
        ]
    );
    assert!(rv(&now["metadata"]) >= last);
}
