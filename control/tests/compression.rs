//! Response compression over real HTTPS, as kube-apiserver's
//! `APIResponseCompression`: a client that sends `Accept-Encoding: gzip`
//! gets a list or object over 128 KiB gzipped (the streamed list too),
//! decoding to exactly what a client without it gets; a small list and a
//! watch are never gzipped, even a watch whose first events pass 128 KiB.
//! kubectl (whose Go transport asks for gzip) and kube-rs (which does not)
//! read the same lists.

mod common;

use std::io::Read;
use std::process::Command;

use axum::body::Body as AxumBody;
use bosun_test_support::binaries::kubectl_binary;
use common::{raw, ControlPlane};
use futures::StreamExt;
use http::header::{ACCEPT, ACCEPT_ENCODING, CONTENT_ENCODING};
use http::HeaderMap;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use kube::Client;
use serde_json::{json, Value};

const BIG: &str = "big";
const SMALL: &str = "small";
const ONE: &str = "one";
const OBJECTS: usize = 40;

/// A GET with the given Accept and Accept-Encoding: status, headers and
/// the body's bytes as they came over the wire.
async fn get(
    client: &Client,
    path: &str,
    accept: &str,
    encoding: Option<&str>,
) -> (u16, HeaderMap, Vec<u8>) {
    let mut req = http::Request::builder()
        .method("GET")
        .uri(path)
        .header(ACCEPT, accept);
    if let Some(e) = encoding {
        req = req.header(ACCEPT_ENCODING, e);
    }
    let res = client
        .send(req.body(kube::client::Body::from(Vec::new())).unwrap())
        .await
        .expect("response");
    let (parts, body) = res.into_parts();
    let bytes = body.collect_bytes().await.expect("body");
    (parts.status.as_u16(), parts.headers, bytes.to_vec())
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .expect("a whole gzip stream");
    out
}

/// A list as JSON without its own resourceVersion, which moves with any
/// write to the store (Leases are renewed in the background).
fn list_without_revision(bytes: &[u8]) -> Value {
    let mut list: Value = serde_json::from_slice(bytes).expect("a JSON list");
    list["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    list
}

/// 8 KiB of text that differs per object.
fn payload(i: usize) -> String {
    (0..512)
        .map(|j| format!("{:015x}\n", i * 7919 + j * 31))
        .collect()
}

async fn create(client: &Client, path: &str, body: Value) {
    let (code, body) = raw(
        client,
        "POST",
        path,
        "application/json",
        body.to_string().into_bytes(),
    )
    .await;
    assert_eq!(code, 201, "{body}");
}

#[tokio::test]
async fn large_answers_are_gzipped_for_clients_that_ask() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    for ns in [BIG, SMALL, ONE] {
        create(
            &client,
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        )
        .await;
    }
    for i in 0..OBJECTS {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i:02}")}, "data": {"v": payload(i)}});
        create(&client, &format!("/api/v1/namespaces/{BIG}/configmaps"), cm).await;
    }
    for i in 0..2 {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i}")}, "data": {"v": "small"}});
        create(
            &client,
            &format!("/api/v1/namespaces/{SMALL}/configmaps"),
            cm,
        )
        .await;
    }
    let one: String = (0..20).map(payload).collect();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "one-big"}, "data": {"v": one}});
    create(&client, &format!("/api/v1/namespaces/{ONE}/configmaps"), cm).await;

    let json = "application/json";
    let big_list = format!("/api/v1/namespaces/{BIG}/configmaps");

    // The big list (streamed in chunks) without and with gzip.
    let (code, headers, plain) = get(&client, &big_list, json, None).await;
    assert_eq!(code, 200);
    assert!(headers.get(CONTENT_ENCODING).is_none(), "{headers:?}");
    assert!(plain.len() > 300 << 10, "{} bytes", plain.len());
    let (code, headers, wire) = get(&client, &big_list, json, Some("gzip, deflate, br")).await;
    assert_eq!(code, 200);
    assert_eq!(headers[CONTENT_ENCODING], "gzip", "{headers:?}");
    assert_eq!(headers[http::header::VARY], "Accept-Encoding");
    assert!(
        wire.len() < plain.len() / 2,
        "{} bytes gzipped of {}",
        wire.len(),
        plain.len()
    );
    let decoded = gunzip(&wire);
    assert_eq!(
        list_without_revision(&decoded),
        list_without_revision(&plain)
    );
    assert_eq!(
        list_without_revision(&decoded)["items"]
            .as_array()
            .unwrap()
            .len(),
        OBJECTS
    );
    // Refused with q=0: as it is.
    let (_, headers, body) = get(&client, &big_list, json, Some("gzip;q=0")).await;
    assert!(headers.get(CONTENT_ENCODING).is_none(), "{headers:?}");
    assert_eq!(list_without_revision(&body), list_without_revision(&plain));

    // In protobuf too.
    let pb = "application/vnd.kubernetes.protobuf";
    let (_, headers, plain_pb) = get(&client, &big_list, pb, None).await;
    assert!(headers.get(CONTENT_ENCODING).is_none(), "{headers:?}");
    let (_, headers, wire) = get(&client, &big_list, pb, Some("gzip")).await;
    assert_eq!(headers[CONTENT_ENCODING], "gzip", "{headers:?}");
    let decoded = gunzip(&wire);
    assert!(decoded.starts_with(bosun_control::api::protobuf::MAGIC));
    let as_json = |bytes: &[u8]| {
        let mut list = bosun_control::api::protobuf::decode_object(bytes).expect("a protobuf list");
        list["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("resourceVersion");
        list
    };
    assert_eq!(as_json(&decoded), as_json(&plain_pb));

    // One big object, answered whole.
    let one_path = format!("/api/v1/namespaces/{ONE}/configmaps/one-big");
    let (_, _, plain) = get(&client, &one_path, json, None).await;
    let (_, headers, wire) = get(&client, &one_path, json, Some("gzip")).await;
    assert_eq!(headers[CONTENT_ENCODING], "gzip", "{headers:?}");
    assert_eq!(gunzip(&wire), plain);

    // A small list is not gzipped.
    let small_list = format!("/api/v1/namespaces/{SMALL}/configmaps");
    let (code, headers, body) = get(&client, &small_list, json, Some("gzip")).await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert!(headers.get(CONTENT_ENCODING).is_none(), "{headers:?}");
    let list: Value = serde_json::from_slice(&body).expect("plain JSON");
    assert_eq!(list["items"].as_array().unwrap().len(), 2);

    // A watch is never gzipped, not even when its first events (every
    // object ADDED) pass the threshold: each event comes as plain JSON.
    let req = http::Request::builder()
        .uri(format!("{big_list}?watch=true"))
        .header(ACCEPT, json)
        .header(ACCEPT_ENCODING, "gzip")
        .body(kube::client::Body::from(Vec::new()))
        .unwrap();
    let res = client.send(req).await.expect("the watch");
    assert_eq!(res.status(), 200);
    assert!(
        res.headers().get(CONTENT_ENCODING).is_none(),
        "{:?}",
        res.headers()
    );
    let mut stream = AxumBody::new(res.into_body()).into_data_stream();
    let mut seen = Vec::new();
    let mut events = 0;
    while events < OBJECTS {
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(60), stream.next())
            .await
            .expect("the watch's events within a minute")
            .expect("the watch goes on")
            .expect("a chunk");
        seen.extend_from_slice(&chunk);
        while let Some(end) = seen.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = seen.drain(..=end).collect();
            let event: Value = serde_json::from_slice(&line).expect("a plain JSON event");
            assert_eq!(event["type"], "ADDED", "{event}");
            events += 1;
        }
    }
    drop(stream);

    // kubectl asks for gzip (Go's transport) and reads the list.
    let out = Command::new(kubectl_binary())
        .arg("--kubeconfig")
        .arg(cp.kubeconfig_path())
        .args(["get", "configmaps", "-n", BIG, "-o", "json"])
        .output()
        .expect("kubectl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: Value = serde_json::from_slice(&out.stdout).expect("kubectl's JSON");
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), OBJECTS);
    for (i, item) in items.iter().enumerate() {
        assert_eq!(item["data"]["v"], payload(i), "item {i}");
    }

    // kube-rs (no gzip) reads it as before.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), BIG);
    let listed = cms
        .list(&ListParams::default())
        .await
        .expect("kube-rs list");
    assert_eq!(listed.items.len(), OBJECTS);
    for (i, cm) in listed.items.iter().enumerate() {
        assert_eq!(cm.data.as_ref().unwrap()["v"], payload(i));
    }
}
