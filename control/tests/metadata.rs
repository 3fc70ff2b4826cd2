//! Metadata-only reads (`PartialObjectMetadata`), as client-go's metadata
//! informers and kube-rs's `list_metadata` / `get_metadata` / metadata
//! watches ask for them with `Accept: ...;as=PartialObjectMetadata(List);
//! g=meta.k8s.io;v=v1`: lists, gets and watches of pods and of a custom
//! resource answer with each object's whole metadata and nothing else,
//! in JSON and in protobuf, paged and selected as full lists are; an
//! Accept asking for a conversion the server does not know is a 406, as
//! kube-apiserver's.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use bosun_control::api::protobuf::{decode_object, decode_watch_frame, MEDIA_TYPE};
use common::{raw, ControlPlane};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    Api, ApiResource, DynamicObject, ListParams, PartialObjectMeta, Patch, PatchParams,
};
use kube::runtime::watcher;
use serde_json::{json, Value};

/// What kube-rs sends.
const ONE: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
const LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
/// What client-go's metadata client sends for a list.
const PB_LIST: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
const PB_ONE: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

const NS: &str = "meta";
const DEADLINE: Duration = Duration::from_secs(20);

async fn request(
    client: &kube::Client,
    method: &str,
    path: &str,
    accept: &str,
    body: Option<Value>,
) -> (u16, String, Vec<u8>) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::ACCEPT, accept)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(match body {
            Some(b) => kube::client::Body::from(b.to_string().into_bytes()),
            None => kube::client::Body::empty(),
        })
        .unwrap();
    let res = client.send(req).await.expect("response");
    let code = res.status().as_u16();
    let ct = res
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let bytes = res.into_body().collect_bytes().await.expect("body");
    (code, ct, bytes.to_vec())
}

async fn get_json(client: &kube::Client, path: &str, accept: &str) -> (u16, Value) {
    let (code, ct, body) = request(client, "GET", path, accept, None).await;
    let v = serde_json::from_slice(&body).unwrap_or_else(|_| {
        panic!(
            "{path}: not JSON ({ct}): {}",
            String::from_utf8_lossy(&body)
        )
    });
    (code, v)
}

async fn create(client: &kube::Client, path: &str, obj: Value) -> Value {
    let (code, body) = raw(
        client,
        "POST",
        path,
        "application/json",
        obj.to_string().into_bytes(),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    body
}

fn pod(name: &str, app: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}, "annotations": {"note": name}},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}})
}

/// An item of a metadata-only answer: the PartialObjectMetadata kind and
/// nothing but metadata.
fn assert_partial(obj: &Value, version: &str) {
    let keys: BTreeSet<&str> = obj
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        BTreeSet::from(["kind", "apiVersion", "metadata"]),
        "{obj}"
    );
    assert_eq!(obj["kind"], "PartialObjectMetadata", "{obj}");
    assert_eq!(obj["apiVersion"], format!("meta.k8s.io/{version}"), "{obj}");
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn lists_and_gets_answer_with_metadata_only() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    create(
        &client,
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    )
    .await;
    let pods = format!("/api/v1/namespaces/{NS}/pods");
    for (name, app) in [("web-1", "web"), ("web-2", "web"), ("db-1", "db")] {
        create(&client, &pods, pod(name, app)).await;
    }

    // A list: PartialObjectMetadataList, each item the object's whole
    // metadata (as the full list has it) and no spec or status.
    let (code, full) = get_json(&client, &pods, "application/json").await;
    assert_eq!(code, 200);
    let (code, list) = get_json(&client, &pods, LIST).await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert_eq!(list["apiVersion"], "meta.k8s.io/v1");
    assert!(list["metadata"]["resourceVersion"]
        .as_str()
        .is_some_and(|rv| !rv.is_empty()));
    assert_eq!(names(&list), ["db-1", "web-1", "web-2"]);
    for (item, whole) in list["items"]
        .as_array()
        .unwrap()
        .iter()
        .zip(full["items"].as_array().unwrap())
    {
        assert_partial(item, "v1");
        assert_eq!(item["metadata"], whole["metadata"]);
        assert!(
            item["metadata"]["uid"].is_string() && item["metadata"]["managedFields"].is_array()
        );
    }

    // Selected and paged as full lists are.
    let (_, web) = get_json(&client, &format!("{pods}?labelSelector=app%3Dweb"), LIST).await;
    assert_eq!(names(&web), ["web-1", "web-2"]);
    let (_, stale) = get_json(&client, &format!("{pods}?resourceVersion=0"), LIST).await;
    assert_eq!(names(&stale), ["db-1", "web-1", "web-2"]);
    let (_, first) = get_json(&client, &format!("{pods}?limit=2"), LIST).await;
    assert_eq!(first["kind"], "PartialObjectMetadataList");
    assert_eq!(names(&first), ["db-1", "web-1"]);
    assert_eq!(first["metadata"]["remainingItemCount"], 1);
    let token = first["metadata"]["continue"]
        .as_str()
        .expect("a continue token");
    let (_, second) = get_json(&client, &format!("{pods}?limit=2&continue={token}"), LIST).await;
    assert_eq!(names(&second), ["web-2"]);
    assert!(second["metadata"].get("continue").is_none(), "{second}");
    assert_eq!(
        second["metadata"]["resourceVersion"],
        first["metadata"]["resourceVersion"]
    );

    // One object.
    let (code, one) = get_json(&client, &format!("{pods}/web-1"), ONE).await;
    assert_eq!(code, 200, "{one}");
    assert_partial(&one, "v1");
    assert_eq!(one["metadata"], full["items"][1]["metadata"]);
    let (_, beta) = get_json(
        &client,
        &format!("{pods}/web-1"),
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1",
    )
    .await;
    assert_partial(&beta, "v1beta1");

    // Protobuf, as client-go's metadata client asks for it.
    let (code, ct, body) = request(&client, "GET", &pods, PB_LIST, None).await;
    assert_eq!((code, ct.as_str()), (200, MEDIA_TYPE));
    let decoded = decode_object(&body).unwrap();
    assert_eq!(decoded["kind"], "PartialObjectMetadataList");
    assert_eq!(decoded["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(names(&decoded), ["db-1", "web-1", "web-2"]);
    assert_eq!(
        decoded["items"][2]["metadata"]["labels"],
        json!({"app": "web"})
    );
    assert_eq!(
        decoded["metadata"]["resourceVersion"],
        list["metadata"]["resourceVersion"]
    );
    let (code, ct, body) = request(&client, "GET", &format!("{pods}/web-2"), PB_ONE, None).await;
    assert_eq!((code, ct.as_str()), (200, MEDIA_TYPE));
    let decoded = decode_object(&body).unwrap();
    assert_eq!(decoded["kind"], "PartialObjectMetadata");
    assert_eq!(
        decoded["metadata"]["uid"],
        full["items"][2]["metadata"]["uid"]
    );
    assert!(decoded.get("spec").is_none());

    // A write answers in the form asked for too (kube-rs's patch_metadata).
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    let patched = api
        .patch_metadata(
            "db-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"tier": "data"}}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.types.unwrap().kind, "PartialObjectMetadata");
    assert_eq!(patched.metadata.labels.unwrap()["tier"], "data");
}

#[tokio::test]
async fn unknown_conversions_are_not_acceptable() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let pods = "/api/v1/namespaces/default/pods";
    create(&client, pods, pod("p", "x")).await;
    let only = "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf";
    for accept in [
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1alpha1",
        "application/json;as=PartialObjectMetadata;g=k8s.io;v=v1",
        "application/json;as=PartialObject;g=meta.k8s.io;v=v1",
        "application/json;as=Service;g=;v=v1",
        "application/json;g=meta.k8s.io;v=v1",
        "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1",
    ] {
        for path in [
            pods.to_string(),
            format!("{pods}/p"),
            format!("{pods}?watch=1"),
        ] {
            let (code, status) = get_json(&client, &path, accept).await;
            assert_eq!(code, 406, "{accept} {path}: {status}");
            assert_eq!(status["reason"], "NotAcceptable");
            assert_eq!(status["message"], only);
        }
    }
    // The metadata of one object is not a list's, nor the other way round.
    let (code, status) = get_json(&client, pods, ONE).await;
    assert_eq!(code, 406, "{status}");
    assert!(status["message"]
        .as_str()
        .unwrap()
        .starts_with("you requested PartialObjectMetadata, but the requested object is a list"));
    let (code, _) = get_json(&client, &format!("{pods}/p"), LIST).await;
    assert_eq!(code, 406);
    // Refused before anything is written.
    let (code, _, _) = request(&client, "POST", pods, LIST, Some(pod("q", "x"))).await;
    assert_eq!(code, 406);
    let (code, _) = get_json(&client, &format!("{pods}/q"), "application/json").await;
    assert_eq!(code, 404);
    // A known form after an unknown one is answered.
    let (code, obj) = get_json(
        &client,
        &format!("{pods}/p"),
        "application/json;as=Foo;g=meta.k8s.io;v=v1,application/json",
    )
    .await;
    assert_eq!((code, obj["kind"].as_str()), (200, Some("Pod")));
}

/// The next event of a metadata watch that `pick` takes, within the
/// deadline.
async fn next_event<K, T>(
    stream: &mut (impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Unpin),
    what: &str,
    mut pick: impl FnMut(&watcher::Event<K>) -> Option<T>,
) -> T {
    tokio::time::timeout(DEADLINE, async {
        loop {
            match stream.next().await {
                Some(Ok(event)) => {
                    if let Some(t) = pick(&event) {
                        return t;
                    }
                }
                Some(Err(e)) => panic!("{what}: watch error {e}"),
                None => panic!("{what}: the watch ended"),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{what}: not seen in {DEADLINE:?}"))
}

/// A metadata watcher of `api` sees an object added, changed (a label)
/// and deleted, each as metadata only.
async fn watch_sees_changes(
    meta: Api<PartialObjectMeta<DynamicObject>>,
    full: Api<DynamicObject>,
    obj: Value,
) {
    let name = obj["metadata"]["name"].as_str().unwrap().to_string();
    let stream = watcher(meta, watcher::Config::default());
    let mut stream = std::pin::pin!(stream);
    // The initial list is done before the object exists.
    next_event(&mut stream, "the initial list", |e| {
        matches!(e, watcher::Event::InitDone).then_some(())
    })
    .await;
    let named = |m: &PartialObjectMeta<DynamicObject>| m.metadata.name.as_deref() == Some(&name);
    let created: DynamicObject = serde_json::from_value(obj.clone()).unwrap();
    let created = full.create(&Default::default(), &created).await.unwrap();
    let added = next_event(&mut stream, "the add", |e| match e {
        watcher::Event::Apply(m) if named(m) => Some(m.clone()),
        _ => None,
    })
    .await;
    assert_eq!(added.types.as_ref().unwrap().kind, "PartialObjectMetadata");
    assert_eq!(added.metadata.uid, created.metadata.uid);
    full.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"seen": "yes"}}})),
    )
    .await
    .unwrap();
    next_event(&mut stream, "the label change", |e| match e {
        watcher::Event::Apply(m) if named(m) => m
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.get("seen").map(String::as_str) == Some("yes"))
            .then_some(()),
        _ => None,
    })
    .await;
    full.delete(&name, &Default::default()).await.unwrap();
    next_event(&mut stream, "the delete", |e| match e {
        watcher::Event::Delete(m) if named(m) => Some(()),
        _ => None,
    })
    .await;
}

#[tokio::test]
async fn kube_rs_metadata_clients_see_pods_and_custom_resources() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    create(
        &client,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "gadgets.meta.example.com"},
            "spec": {"group": "meta.example.com", "scope": "Namespaced",
                "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]}}),
    )
    .await;
    let gadgets = "/apis/meta.example.com/v1/namespaces/default/gadgets";
    // Served once the CRD is established.
    tokio::time::timeout(DEADLINE, async {
        while get_json(&client, gadgets, "application/json").await.0 != 200 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the CRD established");
    create(
        &client,
        gadgets,
        json!({"apiVersion": "meta.example.com/v1", "kind": "Gadget",
            "metadata": {"name": "g1", "labels": {"size": "s"}}, "spec": {"parts": 3}}),
    )
    .await;
    create(&client, "/api/v1/namespaces/default/pods", pod("p1", "web")).await;

    // list_metadata and get_metadata, of a built-in kind and a custom one.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let listed = pods.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(
        listed.items[0].metadata.labels.as_ref().unwrap()["app"],
        "web"
    );
    let one = pods.get_metadata("p1").await.unwrap();
    assert_eq!(one.types.unwrap().kind, "PartialObjectMetadata");
    assert_eq!(one.metadata.annotations.unwrap()["note"], "p1");

    let ar = ApiResource {
        group: "meta.example.com".into(),
        version: "v1".into(),
        api_version: "meta.example.com/v1".into(),
        kind: "Gadget".into(),
        plural: "gadgets".into(),
    };
    let full: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let listed = full.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].metadata.name.as_deref(), Some("g1"));
    let got = full.get_metadata("g1").await.unwrap();
    assert_eq!(got.metadata.labels.unwrap()["size"], "s");

    // Raw: the custom resource's list and object carry metadata only,
    // in JSON and in protobuf (which the resource itself has not).
    let (code, list) = get_json(&client, gadgets, LIST).await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert_partial(&list["items"][0], "v1");
    let (code, ct, body) = request(&client, "GET", &format!("{gadgets}/g1"), PB_ONE, None).await;
    assert_eq!((code, ct.as_str()), (200, MEDIA_TYPE));
    let decoded = decode_object(&body).unwrap();
    assert_eq!(decoded["kind"], "PartialObjectMetadata");
    assert_eq!(decoded["metadata"]["name"], "g1");
    let (_, ct, _) = request(
        &client,
        "GET",
        &format!("{gadgets}/g1"),
        "application/vnd.kubernetes.protobuf,application/json",
        None,
    )
    .await;
    assert_eq!(ct, "application/json");

    // A watch's events in JSON and in protobuf: PartialObjectMetadata,
    // ending with the initial-events bookmark as metadata too.
    let watch = format!(
        "{gadgets}?watch=1&timeoutSeconds=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
    );
    let (code, _, body) = request(
        &client,
        "GET",
        &watch,
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        None,
    )
    .await;
    assert_eq!(code, 200);
    let events: Vec<Value> = body
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert_eq!(events[0]["type"], "ADDED");
    assert_partial(&events[0]["object"], "v1");
    assert_eq!(events[0]["object"]["metadata"]["name"], "g1");
    let bookmark = events
        .iter()
        .find(|e| e["type"] == "BOOKMARK")
        .expect("a bookmark");
    assert_eq!(bookmark["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(
        bookmark["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    let (code, ct, body) = request(&client, "GET", &watch, PB_ONE, None).await;
    assert_eq!(
        (code, ct.as_str()),
        (200, "application/vnd.kubernetes.protobuf;stream=watch")
    );
    let (event_type, obj, _) = decode_watch_frame(&body).unwrap();
    assert_eq!(event_type, "ADDED");
    assert_eq!(obj["kind"], "PartialObjectMetadata");
    assert_eq!(obj["metadata"]["labels"], json!({"size": "s"}));

    // kube-rs's metadata watcher (watcher over PartialObjectMeta, which
    // `metadata_watcher` became) sees adds, changes and deletes.
    let meta = Api::namespaced_with(client.clone(), "default", &ar);
    watch_sees_changes(
        meta,
        full,
        json!({"apiVersion": "meta.example.com/v1", "kind": "Gadget",
            "metadata": {"name": "g2", "namespace": "default"}, "spec": {"parts": 1}}),
    )
    .await;
    let pod_ar = common::api_resource("pods");
    let meta = Api::namespaced_with(client.clone(), "default", &pod_ar);
    let full = Api::namespaced_with(client.clone(), "default", &pod_ar);
    let mut p2 = pod("p2", "web");
    p2["metadata"]["namespace"] = json!("default");
    watch_sees_changes(meta, full, p2).await;
}
