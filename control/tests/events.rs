//! events.k8s.io/v1 Events as kube-runtime's `Recorder` writes them (a
//! create, then a merge patch of the series), read back through both APIs
//! and kubectl: one object, two shapes.

mod common;

use std::process::{Command, Stdio};

use bosun_test_support::binaries::kubectl_binary;
use common::{raw, ControlPlane};
use k8s_openapi::api::core::v1::{ConfigMap, Event as CoreEvent};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::events::{Event as Report, EventType, Recorder, Reporter};
use kube::Resource;
use serde_json::json;

const CONTROLLER: &str = "example.com/widget-operator";

fn kubectl(cp: &ControlPlane, args: &[&str]) -> String {
    let out = Command::new(kubectl_binary())
        .arg("--kubeconfig")
        .arg(cp.kubeconfig_path())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("kubectl is installed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kubectl {args:?}: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn a_recorders_events_read_as_core_and_events_k8s_io() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let cm: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "widgets", "namespace": "default"}, "data": {"k": "v"}}),
    )
    .unwrap();
    let cm = Api::<ConfigMap>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();

    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: CONTROLLER.into(),
            instance: Some("operator-0".into()),
        },
    );
    let report = Report {
        type_: EventType::Normal,
        reason: "Reconciled".into(),
        note: Some("widgets are in sync".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    // The second publish of the same event patches its series.
    let regarding = cm.object_ref(&());
    recorder.publish(&report, &regarding).await.unwrap();
    recorder.publish(&report, &regarding).await.unwrap();

    let v1 = Api::<Event>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(v1.len(), 1, "{v1:?}");
    let ev = &v1[0];
    assert_eq!(ev.reporting_controller.as_deref(), Some(CONTROLLER));
    assert_eq!(ev.reporting_instance.as_deref(), Some("operator-0"));
    assert_eq!(ev.note.as_deref(), Some("widgets are in sync"));
    assert_eq!(ev.action.as_deref(), Some("Reconcile"));
    let about = ev.regarding.as_ref().expect("regarding");
    assert_eq!(
        (about.kind.as_deref(), about.name.as_deref()),
        (Some("ConfigMap"), Some("widgets"))
    );
    assert_eq!(ev.series.as_ref().map(|s| s.count), Some(2), "{ev:?}");
    assert!(ev.event_time.is_some());

    // The same object through core v1, in core's shape.
    let core = Api::<CoreEvent>::namespaced(client.clone(), "default")
        .get(ev.metadata.name.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(core.involved_object.name.as_deref(), Some("widgets"));
    assert_eq!(core.message.as_deref(), Some("widgets are in sync"));
    assert_eq!(core.reporting_component.as_deref(), Some(CONTROLLER));
    assert_eq!(core.reason.as_deref(), Some("Reconciled"));
    assert_eq!(core.series.as_ref().and_then(|s| s.count), Some(2));
    assert_eq!(core.metadata.uid, ev.metadata.uid);

    // kubectl shows it through either API.
    let listed = kubectl(&cp, &["get", "events.events.k8s.io"]);
    let header = listed.lines().next().unwrap_or("");
    assert!(
        header
            .split_whitespace()
            .eq(["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]),
        "{listed}"
    );
    assert!(
        listed.contains("configmap/widgets") && listed.contains("widgets are in sync"),
        "{listed}"
    );
    let events = kubectl(&cp, &["events", "--for", "configmap/widgets"]);
    assert!(events.contains("Reconciled"), "{events}");
    assert!(events.contains("widgets are in sync"), "{events}");

    // A core event reads as events.k8s.io: message is the note.
    let (code, _) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/events",
        "application/json",
        serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "legacy"}, "reason": "Old", "message": "from core",
            "involvedObject": {"kind": "ConfigMap", "name": "widgets", "namespace": "default"}}))
        .unwrap(),
    )
    .await;
    assert_eq!(code, 201);
    let legacy = Api::<Event>::namespaced(client.clone(), "default")
        .get("legacy")
        .await
        .unwrap();
    assert_eq!(legacy.note.as_deref(), Some("from core"));
    assert_eq!(legacy.deprecated_count, None);

    // events.k8s.io refuses a new event without what upstream requires.
    let (code, body) = raw(
        &client,
        "POST",
        "/apis/events.k8s.io/v1/namespaces/default/events",
        "application/json",
        serde_json::to_vec(&json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "bare"}, "reason": "R", "type": "Normal",
            "eventTime": "2026-01-02T03:04:05.000000Z", "reportingInstance": "i",
            "deprecatedCount": 4,
            "regarding": {"kind": "ConfigMap", "name": "widgets", "namespace": "default"}}))
        .unwrap(),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    let message = body["message"].as_str().unwrap_or("");
    assert!(
        message.contains("reportingController: Required value"),
        "{message}"
    );
    assert!(message.contains("action: Required value"), "{message}");
    assert!(
        message.contains("deprecatedCount: Invalid value"),
        "{message}"
    );
}
