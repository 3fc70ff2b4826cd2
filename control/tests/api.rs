//! The API server over real HTTPS, driven by kube-rs as any client would.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use base64::Engine;
use common::{dynamic_api, raw, ControlPlane};
use futures::{StreamExt, TryStreamExt};
use kube::api::{
    DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::client::Body;
use kube::Client;
use serde_json::{json, Value};

/// The name of the suite's object of `res`: kinds whose names are
/// constrained get one that fits.
fn sample_name(res: &bosun::resources::ResourceInfo, prefix: &str) -> String {
    match res.kind {
        "CustomResourceDefinition" => format!("{prefix}things.crud.example.com"),
        // VERSION.GROUP.
        "APIService" => format!("v1.{prefix}-{}-{}.test", res.version, res.singular),
        // One storage with core Events: a name of its own.
        "Event" if res.group == "events.k8s.io" => format!("{prefix}-events-{}", res.singular),
        _ => format!("{prefix}-{}-{}", res.version, res.singular),
    }
}

/// A small valid object of every served kind.
fn sample(kind: &str, name: &str) -> Value {
    let pod_spec = json!({"containers": [{"name": "app", "image": "busybox:1.36",
        "command": ["sleep", "3600"], "ports": [{"containerPort": 80}]}]});
    let template = json!({"metadata": {"labels": {"app": name}}, "spec": pod_spec});
    let selector = json!({"matchLabels": {"app": name}});
    let (api_version, spec) = match kind {
        "Namespace" | "Event" | "Endpoints" | "ConfigMap" | "Secret" | "ServiceAccount" => {
            ("v1", Value::Null)
        }
        "Node" => ("v1", json!({"podCIDR": "10.244.1.0/24"})),
        "Pod" => ("v1", pod_spec.clone()),
        "Service" => (
            "v1",
            json!({"selector": {"app": name}, "ports": [{"port": 80}]}),
        ),
        "PersistentVolume" => (
            "v1",
            json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                   "hostPath": {"path": "/tmp/pv1"}}),
        ),
        "PersistentVolumeClaim" => (
            "v1",
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}),
        ),
        "Deployment" | "ReplicaSet" => (
            "apps/v1",
            json!({"replicas": 2, "selector": selector, "template": template}),
        ),
        "StatefulSet" => (
            "apps/v1",
            json!({"serviceName": name, "replicas": 2, "selector": selector, "template": template}),
        ),
        "DaemonSet" => (
            "apps/v1",
            json!({"selector": selector, "template": template}),
        ),
        "ControllerRevision" => ("apps/v1", Value::Null),
        "PodTemplate" => ("v1", Value::Null),
        "ReplicationController" => (
            "v1",
            json!({"replicas": 2, "selector": {"app": name}, "template": template}),
        ),
        "StorageClass" => ("storage.k8s.io/v1", Value::Null),
        "EndpointSlice" => ("discovery.k8s.io/v1", Value::Null),
        "Job" => {
            let mut t = template.clone();
            t["spec"]["restartPolicy"] = json!("Never");
            ("batch/v1", json!({"template": t, "backoffLimit": 4}))
        }
        "CronJob" => {
            let mut t = template.clone();
            t["spec"]["restartPolicy"] = json!("OnFailure");
            (
                "batch/v1",
                json!({"schedule": "*/1 * * * *", "jobTemplate": {"spec": {"template": t}}}),
            )
        }
        "HorizontalPodAutoscaler" => (
            "autoscaling/v2",
            json!({"minReplicas": 1, "maxReplicas": 10,
                   "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                   "metrics": [{"type": "Resource", "resource": {"name": "memory",
                       "target": {"type": "Utilization", "averageUtilization": 10}}}]}),
        ),
        "Lease" => (
            "coordination.k8s.io/v1",
            json!({"holderIdentity": name, "leaseDurationSeconds": 40}),
        ),
        "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding" => {
            ("rbac.authorization.k8s.io/v1", Value::Null)
        }
        // Counts a kind nothing here creates: no create of the suite is
        // charged to it (nor refused while its status is unknown).
        "ResourceQuota" => ("v1", json!({"hard": {"count/widgets.example.com": "5"}})),
        // Limits claims only by what they request: no pod is defaulted.
        "LimitRange" => (
            "v1",
            json!({"limits": [{"type": "PersistentVolumeClaim", "max": {"storage": "100Gi"}}]}),
        ),
        "PodDisruptionBudget" => (
            "policy/v1",
            json!({"minAvailable": 1, "selector": selector}),
        ),
        "PriorityClass" => ("scheduling.k8s.io/v1", Value::Null),
        "CertificateSigningRequest" => {
            let key = rcgen::KeyPair::generate().unwrap();
            let params = rcgen::CertificateParams::new(vec![name.to_string()]).unwrap();
            let pem = params.serialize_request(&key).unwrap().pem().unwrap();
            let request = base64::engine::general_purpose::STANDARD.encode(pem);
            // A signer bosun does not issue for: nothing writes its status.
            (
                "certificates.k8s.io/v1",
                json!({"request": request, "signerName": "example.com/widgets",
                       "usages": ["client auth"]}),
            )
        }
        "NetworkPolicy" => (
            "networking.k8s.io/v1",
            json!({"podSelector": selector, "policyTypes": ["Ingress"]}),
        ),
        "Ingress" => (
            "networking.k8s.io/v1",
            json!({"rules": [{"host": "a.test", "http": {"paths": [{"path": "/",
                "pathType": "Prefix",
                "backend": {"service": {"name": name, "port": {"number": 80}}}}]}}]}),
        ),
        "IngressClass" => (
            "networking.k8s.io/v1",
            json!({"controller": "example.com/ingress"}),
        ),
        "APIService" => {
            let (version, group) = name.split_once('.').expect("named VERSION.GROUP");
            (
                "apiregistration.k8s.io/v1",
                json!({"group": group, "version": version, "groupPriorityMinimum": 100,
                       "versionPriority": 10, "insecureSkipTLSVerify": true,
                       "service": {"namespace": "default", "name": "nothing-here"}}),
            )
        }
        // Its name must be `<plural>.<group>`: see `sample_name`.
        "CustomResourceDefinition" => (
            "apiextensions.k8s.io/v1",
            json!({"group": "crud.example.com", "scope": "Namespaced",
                "names": {"plural": name.split('.').next(), "kind": "Thing"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object"}}}]}),
        ),
        // Matches only a kind nothing serves: no write of the suite calls it.
        "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => {
            ("admissionregistration.k8s.io/v1", Value::Null)
        }
        // Matches only a kind nothing serves: no write of the suite is
        // validated by it.
        "ValidatingAdmissionPolicy" => (
            "admissionregistration.k8s.io/v1",
            json!({"matchConstraints": {"resourceRules": [{"apiGroups": ["none.example.com"],
                "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["things"]}]},
                "validations": [{"expression": "object.metadata.name != 'x'"}]}),
        ),
        "ValidatingAdmissionPolicyBinding" => (
            "admissionregistration.k8s.io/v1",
            json!({"policyName": "crud-policy", "validationActions": ["Deny"]}),
        ),
        "RuntimeClass" => ("node.k8s.io/v1", Value::Null),
        "CSIDriver" => ("storage.k8s.io/v1", json!({"attachRequired": false})),
        "CSINode" => (
            "storage.k8s.io/v1",
            json!({"drivers": [{"name": "csi.example.com", "nodeID": "node-1",
                "topologyKeys": ["topology.kubernetes.io/zone"]}]}),
        ),
        "CSIStorageCapacity" => ("storage.k8s.io/v1", Value::Null),
        "VolumeAttachment" => (
            "storage.k8s.io/v1",
            json!({"attacher": "csi.example.com", "nodeName": "node-1",
                "source": {"persistentVolumeName": "pv-1"}}),
        ),
        // Sends nobody's requests anywhere: its one user never calls.
        "FlowSchema" => (
            "flowcontrol.apiserver.k8s.io/v1",
            json!({"priorityLevelConfiguration": {"name": "global-default"},
                "matchingPrecedence": 9000,
                "rules": [{"subjects": [{"kind": "User", "user": {"name": "crud-nobody"}}],
                    "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/crud"]}]}]}),
        ),
        "PriorityLevelConfiguration" => (
            "flowcontrol.apiserver.k8s.io/v1",
            json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 1,
                "limitResponse": {"type": "Reject"}}}),
        ),
        other => panic!("no sample for {other}"),
    };
    let mut obj = json!({"apiVersion": api_version, "kind": kind,
        "metadata": {"name": name, "labels": {"suite": "crud"}}});
    if !spec.is_null() {
        obj["spec"] = spec;
    }
    match kind {
        "Event" => {
            obj["involvedObject"] = json!({"kind": "Pod", "name": "web", "namespace": "default"});
            obj["reason"] = json!("Started");
            obj["message"] = json!("Started container app");
            obj["type"] = json!("Normal");
        }
        "Endpoints" => {
            obj["subsets"] =
                json!([{"addresses": [{"ip": "10.244.1.5"}], "ports": [{"port": 80}]}]);
        }
        "PodTemplate" => obj["template"] = template.clone(),
        "StorageClass" => obj["provisioner"] = json!("example.com/nfs"),
        "PriorityClass" => obj["value"] = json!(1000),
        "CSIStorageCapacity" => {
            obj["storageClassName"] = json!("fast");
            obj["capacity"] = json!("10Gi");
        }
        "RuntimeClass" => {
            obj["handler"] = json!("runc");
            obj["overhead"] = json!({"podFixed": {"cpu": "250m", "memory": "64Mi"}});
            obj["scheduling"] = json!({"nodeSelector": {"sandbox": "true"}});
        }
        "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => {
            obj["webhooks"] = json!([{"name": "widgets.example.com",
                "admissionReviewVersions": ["v1"], "sideEffects": "None",
                "failurePolicy": "Ignore",
                "clientConfig": {"url": "https://127.0.0.1:9/widgets"},
                "rules": [{"operations": ["CREATE"], "apiGroups": ["example.com"],
                    "apiVersions": ["v1"], "resources": ["widgets"]}]}]);
        }
        "ConfigMap" => obj["data"] = json!({"k": "v"}),
        "Secret" => obj["data"] = json!({"k": "dg=="}),
        "EndpointSlice" => {
            obj["addressType"] = json!("IPv4");
            obj["endpoints"] = json!([{"addresses": ["10.244.1.5"]}]);
            obj["ports"] = json!([{"port": 80, "protocol": "TCP"}]);
        }
        "ControllerRevision" => {
            obj["revision"] = json!(1);
            obj["data"] = json!({"spec": {"template": template}});
        }
        "Role" | "ClusterRole" => {
            obj["rules"] = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]);
        }
        "RoleBinding" | "ClusterRoleBinding" => {
            obj["roleRef"] = json!({"apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole", "name": "view"});
            obj["subjects"] = json!([{"kind": "User", "name": "alice",
                "apiGroup": "rbac.authorization.k8s.io"}]);
        }
        _ => {}
    }
    obj
}

/// An events.k8s.io/v1 Event as a controller reports one.
fn events_v1_sample(name: &str) -> Value {
    json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": name, "labels": {"suite": "crud"}},
        "regarding": {"kind": "Pod", "name": "web", "namespace": "default"},
        "reason": "Started", "note": "Started container app", "type": "Normal",
        "action": "Start", "eventTime": "2026-01-02T03:04:05.123456Z",
        "reportingController": "example.com/suite", "reportingInstance": "suite-1"})
}

/// The name a sample of `kind` gets from the suite's `name`: an APIService
/// must be named `VERSION.GROUP`.
fn dynamic(v: Value) -> DynamicObject {
    serde_json::from_value(v).expect("a DynamicObject")
}

fn api_error(e: kube::Error) -> (u16, String, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason.clone(), s.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// The store's current revision, as every list reports it.
async fn store_revision(client: &Client) -> u64 {
    let (code, list) = raw(
        client,
        "GET",
        "/api/v1/namespaces",
        "application/json",
        vec![],
    )
    .await;
    assert_eq!(code, 200);
    list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn crud_for_every_resource() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    for res in bosun::resources::RESOURCES {
        let name = sample_name(res, "t");
        let ns = res.namespaced.then_some("default");
        let ar = common::api_resource_of(res);
        let api: kube::Api<DynamicObject> = match ns {
            Some(ns) => kube::Api::namespaced_with(client.clone(), ns, &ar),
            None => kube::Api::all_with(client.clone(), &ar),
        };
        let mut obj = match res.group {
            "events.k8s.io" => events_v1_sample(&name),
            _ => sample(res.kind, &name),
        };
        obj["apiVersion"] = json!(res.api_version());
        if res.kind == "HorizontalPodAutoscaler" && res.version == "v1" {
            obj["spec"] = json!({"minReplicas": 1, "maxReplicas": 5,
                "targetCPUUtilizationPercentage": 50,
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}});
        }
        let what = format!("{}/{}", res.api_version(), res.plural);

        let created = api
            .create(&PostParams::default(), &dynamic(obj))
            .await
            .unwrap_or_else(|e| panic!("create {what}: {e}"));
        let uid = created.metadata.uid.clone().expect("uid");
        let rv1: u64 = created
            .metadata
            .resource_version
            .clone()
            .unwrap()
            .parse()
            .unwrap();
        assert!(created.metadata.creation_timestamp.is_some(), "{what}");

        let got = api
            .get(&name)
            .await
            .unwrap_or_else(|e| panic!("get {what}: {e}"));
        assert_eq!(got.metadata.uid.as_deref(), Some(uid.as_str()), "{what}");

        let listed = api
            .list(&ListParams::default().labels("suite=crud"))
            .await
            .unwrap_or_else(|e| panic!("list {what}: {e}"));
        assert!(
            listed
                .items
                .iter()
                .any(|o| o.metadata.name.as_deref() == Some(name.as_str())),
            "{what} is listed"
        );
        let none = api
            .list(&ListParams::default().labels("suite=other"))
            .await
            .unwrap();
        assert!(none.items.is_empty(), "{what}: the selector filters");

        // A controller may write the object's status meanwhile (the
        // quota's and the budget's do at once): read again on a conflict,
        // as clients do.
        let mut current = got.clone();
        let mut conflicts = 0;
        let updated = loop {
            let mut changed = current.clone();
            changed
                .metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert("step".into(), "updated".into());
            match api.replace(&name, &PostParams::default(), &changed).await {
                Ok(updated) => break updated,
                Err(kube::Error::Api(s)) if s.code == 409 && conflicts < 20 => {
                    conflicts += 1;
                    current = api.get(&name).await.unwrap();
                }
                Err(e) => panic!("update {what}: {e}"),
            }
        };
        let rv2: u64 = updated
            .metadata
            .resource_version
            .clone()
            .unwrap()
            .parse()
            .unwrap();
        assert!(rv2 > rv1, "{what}: an update bumps the revision");
        assert_eq!(updated.metadata.uid.as_deref(), Some(uid.as_str()));

        let patched = api
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {"note": "patched"}}})),
            )
            .await
            .unwrap_or_else(|e| panic!("patch {what}: {e}"));
        assert_eq!(
            patched
                .metadata
                .annotations
                .unwrap()
                .get("note")
                .map(String::as_str),
            Some("patched")
        );
        assert_eq!(
            patched
                .metadata
                .labels
                .unwrap()
                .get("step")
                .map(String::as_str),
            Some("updated"),
            "{what}: a merge patch keeps other fields"
        );

        api.delete(&name, &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("delete {what}: {e}"));
        // Claims and volumes carry the protection finalizers Kubernetes
        // adds; the volume binder removes them from unused ones at once.
        let start = std::time::Instant::now();
        let gone = loop {
            match api.get(&name).await {
                Err(e) => break e,
                Ok(o) if start.elapsed() > Duration::from_secs(10) => {
                    panic!("{what} still there after delete: {o:?}")
                }
                Ok(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        };
        let (code, reason, message) = api_error(gone);
        assert_eq!((code, reason.as_str()), (404, "NotFound"), "{what}");
        assert_eq!(
            message,
            format!("{} \"{name}\" not found", res.plural_group())
        );
    }
}

#[tokio::test]
async fn concurrent_updates_from_one_revision_one_wins() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let api = dynamic_api(&client, "deployments", Some("default"));
    let created = api
        .create(
            &PostParams::default(),
            &dynamic(sample("Deployment", "race")),
        )
        .await
        .unwrap();
    let mut rv_before: u64 = created
        .metadata
        .resource_version
        .as_ref()
        .unwrap()
        .parse()
        .unwrap();
    for round in 0..5 {
        let base = api.get("race").await.unwrap();
        let attempts = (0..2).map(|i| {
            let api = api.clone();
            let mut obj = base.clone();
            obj.data["spec"]["replicas"] = json!(10 + round * 2 + i);
            async move { api.replace("race", &PostParams::default(), &obj).await }
        });
        let results = futures::future::join_all(attempts).await;
        let winners: Vec<&DynamicObject> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "exactly one update wins");
        let winner = winners[0].clone();
        let conflicts: Vec<_> = results
            .into_iter()
            .filter_map(|r| r.err())
            .map(api_error)
            .collect();
        assert_eq!(conflicts.len(), 1);
        assert_eq!(conflicts[0].0, 409);
        assert_eq!(conflicts[0].1, "Conflict");
        assert!(conflicts[0].2.contains("the object has been modified"));
        // What is stored is the winner's update, exactly one write after
        // the revision both started from: the loser wrote nothing.
        let stored = api.get("race").await.unwrap();
        assert_eq!(
            stored.data["spec"]["replicas"], winner.data["spec"]["replicas"],
            "round {round}: the stored replicas are the winner's"
        );
        assert_eq!(
            stored.metadata.resource_version, winner.metadata.resource_version,
            "round {round}: nothing was written after the winner"
        );
        let rv: u64 = stored
            .metadata
            .resource_version
            .as_ref()
            .unwrap()
            .parse()
            .unwrap();
        // The object's own history from the revision both started from:
        // its first change is the winner's. (The store's revision itself
        // may move between them: Leases are renewed beside the test.)
        let mut history = api
            .watch(
                &WatchParams::default()
                    .fields("metadata.name=race")
                    .disable_bookmarks(),
                &rv_before.to_string(),
            )
            .await
            .unwrap()
            .boxed();
        let (kind, _, first) = describe(&next_event(&mut history).await);
        assert_eq!(
            (kind.as_str(), first),
            ("MODIFIED", rv),
            "round {round}: one write, not two, since revision {rv_before}"
        );
        rv_before = rv;
    }
}

async fn next_event(
    stream: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<DynamicObject>>> + Unpin),
) -> WatchEvent<DynamicObject> {
    tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("an event within 10s")
        .expect("stream open")
        .expect("event decodes")
}

fn describe(e: &WatchEvent<DynamicObject>) -> (String, String, u64) {
    let (kind, obj) = match e {
        WatchEvent::Added(o) => ("ADDED", o),
        WatchEvent::Modified(o) => ("MODIFIED", o),
        WatchEvent::Deleted(o) => ("DELETED", o),
        other => panic!("unexpected event {other:?}"),
    };
    (
        kind.to_string(),
        obj.metadata.name.clone().unwrap(),
        obj.metadata
            .resource_version
            .clone()
            .unwrap()
            .parse()
            .unwrap(),
    )
}

#[tokio::test]
async fn watch_from_a_revision_replays_in_order_across_restart() {
    let mut cp = ControlPlane::start();
    let client = cp.client().await;
    let pods = dynamic_api(&client, "pods", Some("default"));
    let first = pods
        .create(&PostParams::default(), &dynamic(sample("Pod", "w0")))
        .await
        .unwrap();
    let start: u64 = first.metadata.resource_version.unwrap().parse().unwrap();
    pods.create(&PostParams::default(), &dynamic(sample("Pod", "w1")))
        .await
        .unwrap();
    pods.patch(
        "w0",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"x": "1"}}})),
    )
    .await
    .unwrap();
    // A write elsewhere must not show up in a pod watch.
    dynamic_api(&client, "svc", Some("default"))
        .create(&PostParams::default(), &dynamic(sample("Service", "noise")))
        .await
        .unwrap();
    pods.delete("w1", &DeleteParams::default()).await.unwrap();

    cp.restart();
    let client = cp.client().await;
    let pods = dynamic_api(&client, "pods", Some("default"));
    let mut stream = pods
        .watch(&WatchParams::default(), &start.to_string())
        .await
        .unwrap()
        .boxed();
    if cp.etcd.is_some() {
        // On etcd the restarted server's watch caches begin at its start,
        // as kube-apiserver's cachers do: a watch from before is 410 Gone
        // (though etcd still has that history), and the client lists
        // again and watches from the list.
        match next_event(&mut stream).await {
            WatchEvent::Error(status) => assert_eq!(
                (status.code, status.reason.as_str()),
                (410, "Expired"),
                "{status:?}"
            ),
            other => panic!("a watch from before the restart got {other:?}, not 410"),
        }
        let listed = pods.list(&ListParams::default()).await.unwrap();
        let names: Vec<_> = listed
            .items
            .iter()
            .map(|p| p.metadata.name.clone())
            .collect();
        assert_eq!(names, [Some("w0".to_string())]);
        let labels = listed.items[0].metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("x").map(String::as_str), Some("1"));
        let mut stream = pods
            .watch(
                &WatchParams::default(),
                listed.metadata.resource_version.as_deref().unwrap(),
            )
            .await
            .unwrap()
            .boxed();
        pods.create(&PostParams::default(), &dynamic(sample("Pod", "w2")))
            .await
            .unwrap();
        let (kind, name, _) = loop {
            match next_event(&mut stream).await {
                WatchEvent::Bookmark(_) => continue,
                e => break describe(&e),
            }
        };
        assert_eq!((kind.as_str(), name.as_str()), ("ADDED", "w2"));
        return;
    }
    // The embedded store keeps its history in its file: a watch from
    // before the restart replays it.
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(describe(&next_event(&mut stream).await));
    }
    // And a write after the restart arrives on the same stream.
    pods.create(&PostParams::default(), &dynamic(sample("Pod", "w2")))
        .await
        .unwrap();
    seen.push(describe(&next_event(&mut stream).await));
    let kinds: Vec<(&str, &str)> = seen
        .iter()
        .map(|(k, n, _)| (k.as_str(), n.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("ADDED", "w1"),
            ("MODIFIED", "w0"),
            ("DELETED", "w1"),
            ("ADDED", "w2")
        ]
    );
    let revs: Vec<u64> = seen.iter().map(|(_, _, r)| *r).collect();
    assert!(
        revs.windows(2).all(|w| w[0] < w[1]),
        "in revision order: {revs:?}"
    );
    assert!(revs[0] > start);
}

#[tokio::test]
async fn compacted_revision_gets_410_gone() {
    // On etcd, without the watch cache: its window (started with the
    // server, so holding every pod written here) serves a watch from any
    // revision since, compacted or not, as kube-apiserver's cacher does;
    // etcd's own watch is what compaction cuts short.
    let mut flags = vec!["--watch-history", "10"];
    if bosun_test_support::etcd::store_is_etcd() {
        flags.extend(["--watch-cache", "false"]);
    }
    let cp = ControlPlane::start_with(&flags);
    let client = cp.client().await;
    let pods = dynamic_api(&client, "pods", Some("default"));
    for i in 0..30 {
        pods.create(
            &PostParams::default(),
            &dynamic(sample("Pod", &format!("c{i}"))),
        )
        .await
        .unwrap();
    }
    // On etcd (BOSUN_TEST_STORE=etcd) the history is etcd's, which
    // `--watch-history` does not bound: compacted here as its periodic
    // compaction would.
    if let Some(etcd) = &cp.etcd {
        etcd.compact(store_revision(&client).await - 5);
    }
    let mut stream = pods
        .watch(&WatchParams::default(), "2")
        .await
        .unwrap()
        .boxed();
    match next_event(&mut stream).await {
        WatchEvent::Error(status) => {
            assert_eq!(status.code, 410);
            assert_eq!(status.reason, "Expired");
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    // A recent revision still works.
    let current = store_revision(&client).await;
    let mut stream = pods
        .watch(&WatchParams::default(), &(current - 3).to_string())
        .await
        .unwrap()
        .boxed();
    assert!(matches!(
        next_event(&mut stream).await,
        WatchEvent::Added(_)
    ));
}

/// One acknowledged change of the kill -9 test: the pod, the change, and
/// the resourceVersion the API answered with.
#[derive(Debug, Clone, PartialEq)]
struct Acked {
    name: String,
    kind: &'static str,
    rv: u64,
}

/// Kill -9 in the middle of creates, updates and deletes from 8 clients:
/// after a restart, every acknowledged change is there and the watch
/// history replays each one at the revision it was acknowledged at.
///
/// A process kill leaves the kernel's page cache in place, so this cannot
/// show that acknowledged writes were fsynced: a store that never syncs
/// passes it too. `store::power_loss_tests` (a store on a simulated disk
/// that loses its unsynced writes) tests that.
#[tokio::test]
async fn kill_9_loses_no_acknowledged_change() {
    let mut cp = ControlPlane::start();
    let client = cp.client().await;
    let start = store_revision(&client).await;
    let (ack_tx, mut ack_rx) = tokio::sync::mpsc::unbounded_channel::<Acked>();
    // The change each writer has in flight: (pod, whether it exists after).
    let in_flight = std::sync::Arc::new(std::sync::Mutex::new(std::collections::BTreeMap::<
        usize,
        (String, bool),
    >::new()));
    let mut writers = Vec::new();
    for w in 0..8 {
        let pods = dynamic_api(&client, "pods", Some("default"));
        let ack_tx = ack_tx.clone();
        let in_flight = in_flight.clone();
        writers.push(tokio::spawn(async move {
            let rv_of = |o: &DynamicObject| -> u64 {
                o.metadata
                    .resource_version
                    .as_ref()
                    .unwrap()
                    .parse()
                    .unwrap()
            };
            let ack = |name: &str, kind, rv| {
                ack_tx
                    .send(Acked {
                        name: name.to_string(),
                        kind,
                        rv,
                    })
                    .is_ok()
            };
            let flying = |name: &str, exists: bool| {
                in_flight
                    .lock()
                    .unwrap()
                    .insert(w, (name.to_string(), exists));
            };
            for i in 0.. {
                // Create, update, and delete every other pod.
                let name = format!("k{w}-{i}");
                flying(&name, true);
                let Ok(created) = pods
                    .create(&PostParams::default(), &dynamic(sample("Pod", &name)))
                    .await
                else {
                    return;
                };
                if !ack(&name, "ADDED", rv_of(&created)) {
                    return;
                }
                let Ok(updated) = pods
                    .patch(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"metadata": {"labels": {"updated": "yes"}}})),
                    )
                    .await
                else {
                    return;
                };
                if !ack(&name, "MODIFIED", rv_of(&updated)) {
                    return;
                }
                if i % 2 == 1 {
                    continue;
                }
                flying(&name, false);
                let Ok(deleted) = pods.delete(&name, &DeleteParams::default()).await else {
                    return;
                };
                let rv = deleted
                    .left()
                    .map(|o| rv_of(&o))
                    .expect("an unbound pod goes at once, and its delete answers with it");
                if !ack(&name, "DELETED", rv) {
                    return;
                }
            }
        }));
    }
    drop(ack_tx);
    let mut acked = Vec::new();
    while acked.len() < 600 {
        acked.push(ack_rx.recv().await.expect("writers keep going"));
    }
    cp.kill9();
    for w in writers {
        let _ = w.await;
    }
    while let Ok(a) = ack_rx.try_recv() {
        acked.push(a);
    }
    let in_flight: BTreeSet<(String, bool)> = in_flight.lock().unwrap().values().cloned().collect();
    for kind in ["ADDED", "MODIFIED", "DELETED"] {
        assert!(
            acked.iter().filter(|a| a.kind == kind).count() > 50,
            "the writers made many {kind} changes before the kill"
        );
    }

    cp.restart();
    let client = cp.client().await;
    let pods = dynamic_api(&client, "pods", Some("default"));
    // Objects: each pod is in the state of its last acknowledged change
    // (or of the change in flight at the kill, which may have landed).
    let mut last: std::collections::BTreeMap<&str, &Acked> = Default::default();
    for a in &acked {
        last.insert(&a.name, a);
    }
    let stored: std::collections::BTreeMap<String, DynamicObject> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| (p.metadata.name.clone().unwrap(), p))
        .collect();
    for (name, a) in &last {
        let got = stored.get(*name);
        if in_flight.contains(&(name.to_string(), got.is_some())) {
            continue;
        }
        match a.kind {
            "DELETED" => assert!(
                got.is_none(),
                "{name} came back after kill -9: its delete was acknowledged at {}",
                a.rv
            ),
            _ => {
                let got = got.unwrap_or_else(|| {
                    panic!(
                        "{name} is lost after kill -9: {} was acknowledged at {}",
                        a.kind, a.rv
                    )
                });
                assert_eq!(
                    got.metadata.resource_version.as_deref(),
                    Some(a.rv.to_string().as_str()),
                    "{name}: not the last acknowledged change ({} at {})",
                    a.kind,
                    a.rv
                );
            }
        }
    }
    // History: a watch from before the writes replays every acknowledged
    // change, at its revision. (On etcd the restarted server's watch
    // caches begin at its start, as kube-apiserver's cachers: such a watch
    // is 410 Gone there, and etcd's own history is etcd's to keep.)
    let newest = acked.iter().map(|a| a.rv).max().unwrap();
    let mut stream = pods
        .watch(
            &WatchParams::default().disable_bookmarks(),
            &start.to_string(),
        )
        .await
        .unwrap()
        .boxed();
    if cp.etcd.is_some() {
        match next_event(&mut stream).await {
            WatchEvent::Error(status) => assert_eq!(status.code, 410, "{status:?}"),
            other => panic!("a watch from before the restart got {other:?}, not 410"),
        }
        return;
    }
    let mut replayed = std::collections::BTreeMap::new();
    loop {
        let (kind, name, rv) = describe(&next_event(&mut stream).await);
        replayed.insert(rv, (kind, name));
        if rv >= newest {
            break;
        }
    }
    for a in &acked {
        assert_eq!(
            replayed.get(&a.rv),
            Some(&(a.kind.to_string(), a.name.clone())),
            "the watch history after kill -9 does not replay {a:?}"
        );
    }
}

#[tokio::test]
async fn requests_without_the_token_get_401() {
    let cp = ControlPlane::start();
    for token in [Some("wrong-token".to_string()), None] {
        let mut config = cp.config().await;
        config.auth_info.token = token.map(Into::into);
        let client = Client::try_from(config).unwrap();
        let pods = dynamic_api(&client, "pods", Some("default"));
        let (code, reason, _) = api_error(pods.list(&ListParams::default()).await.unwrap_err());
        assert_eq!((code, reason.as_str()), (401, "Unauthorized"));
        let (code, _) = raw(
            &client,
            "POST",
            "/api/v1/namespaces/default/pods",
            "application/json",
            serde_json::to_vec(&sample("Pod", "sneaky")).unwrap(),
        )
        .await;
        assert_eq!(code, 401);
    }
    let client = cp.client().await;
    let pods = dynamic_api(&client, "pods", Some("default"));
    assert!(
        pods.get_opt("sneaky").await.unwrap().is_none(),
        "a refused write wrote nothing"
    );
}

#[tokio::test]
async fn patches_status_and_scale() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let deploys = dynamic_api(&client, "deploy", Some("default"));
    let mut d = sample("Deployment", "web");
    d["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "sidecar", "image": "busybox:1.36"}));
    let created = deploys
        .create(&PostParams::default(), &dynamic(d))
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));

    // Strategic merge: the container list merges by name.
    let patched = deploys
        .patch("web", &PatchParams::default(), &Patch::Strategic(json!(
            {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "busybox:1.37"}]}}}})))
        .await
        .unwrap();
    let containers = patched.data["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    assert_eq!(containers.len(), 2, "the sidecar stays");
    assert_eq!(containers[0]["image"], "busybox:1.37");
    assert_eq!(
        containers[0]["ports"][0]["containerPort"], 80,
        "other fields stay"
    );
    assert_eq!(
        patched.metadata.generation,
        Some(2),
        "a spec change bumps generation"
    );

    // JSON patch, with a failing test leaving the object alone.
    let bad = deploys
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::<()>::Json(
                serde_json::from_value(json!(
            [{"op": "test", "path": "/spec/replicas", "value": 99},
             {"op": "replace", "path": "/spec/replicas", "value": 7}]))
                .unwrap(),
            ),
        )
        .await
        .unwrap_err();
    assert_eq!(api_error(bad).0, 422);
    let json_patched = deploys
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::<()>::Json(
                serde_json::from_value(json!(
            [{"op": "replace", "path": "/spec/replicas", "value": 3}]))
                .unwrap(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(json_patched.data["spec"]["replicas"], 3);

    // Labels alone do not bump generation; status writes do not touch spec.
    let relabeled = deploys
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"tier": "fe"}}})),
        )
        .await
        .unwrap();
    assert_eq!(relabeled.metadata.generation, Some(3));
    let status = deploys
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!(
            {"spec": {"replicas": 50}, "status": {"replicas": 3, "readyReplicas": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(status.data["status"]["readyReplicas"], 2);
    assert_eq!(
        status.data["spec"]["replicas"], 3,
        "status writes leave spec alone"
    );
    let ignored = deploys
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"readyReplicas": 9}})),
        )
        .await
        .unwrap();
    assert_eq!(
        ignored.data["status"]["readyReplicas"], 2,
        "main writes leave status alone"
    );

    // Scale subresource, as `kubectl scale` uses it.
    let scale = deploys.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(3));
    assert_eq!(scale.status.unwrap().selector.as_deref(), Some("app=web"));
    deploys
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    assert_eq!(
        deploys.get("web").await.unwrap().data["spec"]["replicas"],
        5
    );

    // A stale resourceVersion in a patch is a precondition that fails.
    let (code, body) = raw(
        &client,
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/web",
        "application/merge-patch+json",
        serde_json::to_vec(&json!({"metadata": {"resourceVersion": "1"}, "spec": {"replicas": 1}}))
            .unwrap(),
    )
    .await;
    assert_eq!(code, 409, "{body}");
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let svcs = dynamic_api(&client, "svc", Some("default"));
    let mut s = sample("Service", "held");
    s["metadata"]["finalizers"] = json!(["example.com/hold"]);
    svcs.create(&PostParams::default(), &dynamic(s))
        .await
        .unwrap();
    svcs.delete("held", &DeleteParams::default()).await.unwrap();
    let held = svcs.get("held").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    svcs.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(
        svcs.get_opt("held").await.unwrap().is_none(),
        "gone once the last finalizer is"
    );

    // Foreground deletion marks the owner with foregroundDeletion and
    // holds it while a dependent that blocks it is there (without one, the
    // garbage collector may finish the delete before the test can look).
    let deploys = dynamic_api(&client, "deploy", Some("default"));
    let fg = deploys
        .create(&PostParams::default(), &dynamic(sample("Deployment", "fg")))
        .await
        .unwrap();
    let pods = dynamic_api(&client, "pods", Some("default"));
    let mut dependent = sample("Pod", "fg-dependent");
    dependent["metadata"]["finalizers"] = json!(["example.com/hold"]);
    dependent["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1",
        "kind": "Deployment", "name": "fg", "uid": fg.metadata.uid.clone().unwrap(),
        "controller": true, "blockOwnerDeletion": true}]);
    pods.create(&PostParams::default(), &dynamic(dependent))
        .await
        .unwrap();
    deploys
        .delete("fg", &DeleteParams::foreground())
        .await
        .unwrap();
    let fg = deploys.get("fg").await.unwrap();
    assert_eq!(
        fg.metadata.finalizers,
        Some(vec!["foregroundDeletion".to_string()])
    );
    assert!(fg.metadata.deletion_timestamp.is_some());
    // Once the dependent can go, both go.
    pods.patch(
        "fg-dependent",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    for _ in 0..200 {
        if deploys.get_opt("fg").await.unwrap().is_none() {
            assert!(pods.get_opt("fg-dependent").await.unwrap().is_none());
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the foreground deletion of fg did not finish within 10s");
}

#[tokio::test]
async fn generate_name_and_namespaces() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let pods = dynamic_api(&client, "pods", Some("default"));
    let mut p = sample("Pod", "");
    p["metadata"] = json!({"generateName": "web-"});
    let created = pods
        .create(&PostParams::default(), &dynamic(p))
        .await
        .unwrap();
    let name = created.metadata.name.unwrap();
    assert!(name.starts_with("web-") && name.len() == 9, "{name}");
    assert_eq!(created.data["status"]["phase"], "Pending");

    let missing = dynamic_api(&client, "pods", Some("nowhere"));
    let (code, _, message) = api_error(
        missing
            .create(&PostParams::default(), &dynamic(sample("Pod", "x")))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (code, message.as_str()),
        (404, "namespaces \"nowhere\" not found")
    );

    let nss = dynamic_api(&client, "ns", None);
    let names: Vec<String> = nss
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(names.contains(&"default".to_string()) && names.contains(&"kube-system".to_string()));
    let (code, _, _) = api_error(
        nss.delete("default", &DeleteParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 403);

    // Deleting a namespace deletes what is in it.
    nss.create(
        &PostParams::default(),
        &dynamic(sample("Namespace", "scratch")),
    )
    .await
    .unwrap();
    let scratch = dynamic_api(&client, "pods", Some("scratch"));
    scratch
        .create(&PostParams::default(), &dynamic(sample("Pod", "p")))
        .await
        .unwrap();
    // It is Terminating at once (new content refused), and goes once the
    // namespace controller has emptied it.
    let deleting = nss
        .delete("scratch", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("a namespace is kept while it is emptied");
    assert_eq!(deleting.data["status"]["phase"], "Terminating");
    assert!(deleting.metadata.deletion_timestamp.is_some());
    assert_eq!(deleting.data["spec"]["finalizers"], json!(["kubernetes"]));
    let (code, _, message) = api_error(
        scratch
            .create(&PostParams::default(), &dynamic(sample("Pod", "late")))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 403);
    assert!(
        message.contains("because it is being terminated"),
        "{message}"
    );
    let all_pods = dynamic_api(&client, "pods", None);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let ns_gone = nss.get_opt("scratch").await.unwrap().is_none();
        let pods_left = all_pods
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .any(|p| p.metadata.namespace.as_deref() == Some("scratch"));
        if ns_gone && !pods_left {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "namespace scratch still there (gone: {ns_gone}, pods left: {pods_left})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn field_selectors_and_tables() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let pods = dynamic_api(&client, "pods", Some("default"));
    for (name, node) in [("a", "n1"), ("b", "n2"), ("c", "")] {
        let mut p = sample("Pod", name);
        if !node.is_empty() {
            p["spec"]["nodeName"] = json!(node);
        }
        pods.create(&PostParams::default(), &dynamic(p))
            .await
            .unwrap();
    }
    let on_n1 = pods
        .list(&ListParams::default().fields("spec.nodeName=n1"))
        .await
        .unwrap();
    let names = |l: &kube::core::ObjectList<DynamicObject>| -> Vec<String> {
        l.items
            .iter()
            .map(|o| o.metadata.name.clone().unwrap())
            .collect()
    };
    assert_eq!(names(&on_n1), ["a"]);
    let unbound = pods
        .list(&ListParams::default().fields("spec.nodeName="))
        .await
        .unwrap();
    assert_eq!(names(&unbound), ["c"]);
    let not_n1 = pods
        .list(&ListParams::default().fields("spec.nodeName!=n1"))
        .await
        .unwrap();
    assert_eq!(names(&not_n1), ["b", "c"]);
    let (code, reason, message) = api_error(
        pods.list(&ListParams::default().fields("spec.bogus=1"))
            .await
            .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (400, "BadRequest"));
    assert!(message.contains("spec.bogus"));

    let req = http::Request::builder()
        .uri("/api/v1/namespaces/default/pods")
        .header(
            "Accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(Body::empty())
        .unwrap();
    let table: Value = serde_json::from_slice(
        &client
            .send(req)
            .await
            .unwrap()
            .into_body()
            .collect_bytes()
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(table["kind"], "Table");
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["priority"] == 0)
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["Name", "Ready", "Status", "Restarts", "Age"]);
    let rows = table["rows"].as_array().expect("rows");
    let row_names: Vec<&str> = rows
        .iter()
        .map(|r| r["cells"][0].as_str().unwrap())
        .collect();
    assert_eq!(row_names, ["a", "b", "c"], "one row per pod");
    let first = &rows[0];
    assert_eq!(first["cells"][0], "a");
    assert_eq!(first["cells"][1], "0/1");
    assert_eq!(first["cells"][2], "Pending");
    assert_eq!(first["object"]["kind"], "PartialObjectMetadata");
}

/// Paging as kube-apiserver's: a limit cuts the list with an opaque
/// continue token and the count of what is left (only without selectors);
/// pages follow each other in key order without gaps or repeats, across
/// namespaces, with selectors too; a bad token is a 400.
#[tokio::test]
async fn lists_page_with_limit_and_continue() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    for ns in ["p1", "p2"] {
        let namespaces = dynamic_api(&client, "namespaces", None);
        namespaces
            .create(&PostParams::default(), &dynamic(sample("Namespace", ns)))
            .await
            .unwrap();
        let pods = dynamic_api(&client, "pods", Some(ns));
        for i in 0..5 {
            let mut p = sample("Pod", &format!("web-{i}"));
            p["metadata"]["labels"] = json!({"parity": if i % 2 == 0 { "even" } else { "odd" }});
            pods.create(&PostParams::default(), &dynamic(p))
                .await
                .unwrap();
        }
    }
    let all = dynamic_api(&client, "pods", None);
    let pages = |selector: Option<&'static str>, limit: u32| {
        let all = all.clone();
        async move {
            let mut seen = Vec::new();
            let mut remaining = Vec::new();
            let mut token: Option<String> = None;
            loop {
                let mut lp = ListParams::default().limit(limit);
                if let Some(s) = selector {
                    lp = lp.labels(s);
                }
                if let Some(t) = &token {
                    lp = lp.continue_token(t);
                }
                let page = all.list(&lp).await.unwrap();
                assert!(page.items.len() <= limit as usize);
                seen.extend(page.items.iter().map(|o| {
                    format!(
                        "{}/{}",
                        o.metadata.namespace.clone().unwrap(),
                        o.metadata.name.clone().unwrap()
                    )
                }));
                remaining.push(page.metadata.remaining_item_count);
                match page.metadata.continue_.filter(|t| !t.is_empty()) {
                    Some(t) => token = Some(t),
                    None => break,
                }
            }
            (seen, remaining)
        }
    };
    let (seen, remaining) = pages(None, 3).await;
    let want: Vec<String> = ["p1", "p2"]
        .iter()
        .flat_map(|ns| (0..5).map(move |i| format!("{ns}/web-{i}")))
        .collect();
    assert_eq!(seen, want);
    assert_eq!(remaining, [Some(7), Some(4), Some(1), None]);

    let (odd, remaining) = pages(Some("parity=odd"), 1).await;
    assert_eq!(odd, ["p1/web-1", "p1/web-3", "p2/web-1", "p2/web-3"]);
    assert!(remaining.iter().all(Option::is_none), "{remaining:?}");

    let (code, _, message) = api_error(
        all.list(&ListParams::default().limit(2).continue_token("p1/web-1"))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 400);
    assert!(message.contains("continue key is not valid"), "{message}");

    // A reflector pages, then watches from the list's revision: a change
    // made to an object of the first page while it paged must reach it.
    let first = all.list(&ListParams::default().limit(3)).await.unwrap();
    let p1 = dynamic_api(&client, "pods", Some("p1"));
    p1.patch(
        "web-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"seen": "late"}}})),
    )
    .await
    .unwrap();
    let mut token = first.metadata.continue_.clone();
    let mut revision = first.metadata.resource_version.clone().unwrap();
    while let Some(t) = token.filter(|t| !t.is_empty()) {
        let page = all
            .list(&ListParams::default().limit(3).continue_token(&t))
            .await
            .unwrap();
        revision = page.metadata.resource_version.clone().unwrap();
        token = page.metadata.continue_;
    }
    let mut stream = all
        .watch(&WatchParams::default(), &revision)
        .await
        .unwrap()
        .boxed();
    loop {
        if let WatchEvent::Modified(o) = next_event(&mut stream).await {
            if o.metadata.name.as_deref() == Some("web-0")
                && o.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("seen"))
                    .is_some()
            {
                break;
            }
        }
    }
}

#[tokio::test]
async fn kube_runtime_watcher_lists_then_watches_with_bookmarks() {
    let cp = ControlPlane::start_with(&["--bookmark-interval", "1"]);
    let client = cp.client().await;
    let pods = dynamic_api(&client, "pods", Some("default"));
    pods.create(&PostParams::default(), &dynamic(sample("Pod", "before")))
        .await
        .unwrap();
    let mut events =
        kube::runtime::watcher(pods.clone(), kube::runtime::watcher::Config::default()).boxed();
    use kube::runtime::watcher::Event;
    let mut initial = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(10), events.try_next())
            .await
            .unwrap()
            .unwrap()
        {
            Some(Event::InitApply(o)) => initial.push(o.metadata.name.unwrap()),
            Some(Event::InitDone) => break,
            Some(_) => {}
            None => panic!("watcher ended"),
        }
    }
    assert_eq!(initial, ["before"]);
    // A watch that asks for bookmarks gets one on its own while idle, at
    // the store's progress (at least the revision it has seen: the Leases
    // renewed meanwhile move it on); one that does not ask gets none.
    let before_rv = store_revision(&client).await;
    let mut with = pods
        .watch(&WatchParams::default(), &before_rv.to_string())
        .await
        .unwrap()
        .boxed();
    let mut without = pods
        .watch(
            &WatchParams::default().disable_bookmarks(),
            &before_rv.to_string(),
        )
        .await
        .unwrap()
        .boxed();
    let mut bookmarks = 0;
    while bookmarks < 2 {
        match next_event(&mut with).await {
            WatchEvent::Bookmark(b) => {
                assert_eq!(b.types.kind, "Pod");
                let rv: u64 = b.metadata.resource_version.parse().unwrap();
                let now = store_revision(&client).await;
                assert!(
                    (before_rv..=now).contains(&rv),
                    "{rv} from {before_rv} to {now}"
                );
                bookmarks += 1;
            }
            other => panic!("an idle watch got {other:?}, not a BOOKMARK"),
        }
    }
    // The kube-runtime watcher asked for bookmarks too; after they passed
    // a change still arrives, on every watch.
    pods.create(&PostParams::default(), &dynamic(sample("Pod", "after")))
        .await
        .unwrap();
    loop {
        match tokio::time::timeout(Duration::from_secs(10), events.try_next())
            .await
            .unwrap()
            .unwrap()
        {
            Some(Event::Apply(o)) => {
                assert_eq!(o.metadata.name.as_deref(), Some("after"));
                break;
            }
            Some(_) => {}
            None => panic!("watcher ended"),
        }
    }
    // The watch that did not ask saw no bookmark in the same seconds: its
    // first event is the change.
    let (kind, name, _) = describe(&next_event(&mut without).await);
    assert_eq!((kind.as_str(), name.as_str()), ("ADDED", "after"));
    // The one that asked gets the change, and later bookmarks carry its
    // revision or a later one.
    let after_rv = loop {
        match next_event(&mut with).await {
            WatchEvent::Bookmark(_) => {}
            e => {
                let (kind, name, rv) = describe(&e);
                assert_eq!((kind.as_str(), name.as_str()), ("ADDED", "after"));
                break rv;
            }
        }
    };
    match next_event(&mut with).await {
        WatchEvent::Bookmark(b) => {
            let rv: u64 = b.metadata.resource_version.parse().unwrap();
            assert!(
                rv >= after_rv,
                "a bookmark at {rv} after the change at {after_rv}"
            );
        }
        other => panic!("expected a BOOKMARK, got {other:?}"),
    }
}

#[tokio::test]
async fn sigterm_ends_open_watches_and_exits_cleanly() {
    let mut cp = ControlPlane::start();
    let client = cp.client().await;
    let pods = dynamic_api(&client, "pods", Some("default"));
    let mut stream = pods
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    pods.create(&PostParams::default(), &dynamic(sample("Pod", "x")))
        .await
        .unwrap();
    let _ = next_event(&mut stream).await;
    let asked = std::time::Instant::now();
    let status = cp.terminate();
    assert!(status.success(), "exit status {status:?}");
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "the open watch held up the exit for {:?}",
        asked.elapsed()
    );
    assert!(cp.log().contains("shutting down"));
    // The server ended the watch: its response finished cleanly (a watch
    // cut off by the process going away ends in an error instead).
    match tokio::time::timeout(Duration::from_secs(10), stream.next()).await {
        Ok(None) => {}
        Ok(Some(other)) => panic!("the watch did not end cleanly: {other:?}"),
        Err(_) => panic!("the watch is still open after the server exited"),
    }
}

#[tokio::test]
async fn kube_runtime_watcher_lists_and_watches_every_resource() {
    use kube::runtime::watcher::Event;
    let cp = ControlPlane::start();
    let client = cp.client().await;
    for res in bosun::resources::RESOURCES {
        let ar = common::api_resource_of(res);
        let api: kube::Api<DynamicObject> = if res.namespaced {
            kube::Api::namespaced_with(client.clone(), "default", &ar)
        } else {
            kube::Api::all_with(client.clone(), &ar)
        };
        let what = format!("{}/{}", res.api_version(), res.plural);
        let sample_for = |name: &str| {
            let mut obj = match res.group {
                "events.k8s.io" => events_v1_sample(name),
                _ => sample(res.kind, name),
            };
            obj["apiVersion"] = json!(res.api_version());
            if res.kind == "HorizontalPodAutoscaler" && res.version == "v1" {
                obj["spec"] = json!({"maxReplicas": 5, "targetCPUUtilizationPercentage": 50,
                    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}});
            }
            dynamic(obj)
        };
        let first = sample_name(res, "w1");
        let second = sample_name(res, "w2");
        api.create(&PostParams::default(), &sample_for(&first))
            .await
            .unwrap();
        let mut events =
            kube::runtime::watcher(api.clone(), kube::runtime::watcher::Config::default()).boxed();
        let mut listed = Vec::new();
        loop {
            match tokio::time::timeout(Duration::from_secs(10), events.try_next()).await {
                Ok(Ok(Some(Event::InitApply(o)))) => listed.push(o.metadata.name.unwrap()),
                Ok(Ok(Some(Event::InitDone))) => break,
                Ok(Ok(Some(_))) => {}
                other => panic!("{what}: watcher list failed: {other:?}"),
            }
        }
        assert!(listed.contains(&first), "{what}: listed {listed:?}");
        api.create(&PostParams::default(), &sample_for(&second))
            .await
            .unwrap();
        loop {
            match tokio::time::timeout(Duration::from_secs(10), events.try_next()).await {
                Ok(Ok(Some(Event::Apply(o))))
                    if o.metadata.name.as_deref() == Some(second.as_str()) =>
                {
                    break
                }
                Ok(Ok(Some(_))) => {}
                other => panic!("{what}: watcher watch failed: {other:?}"),
            }
        }
        // Leave the next version of the same resource a clean slate.
        for name in [&first, &second] {
            api.delete(name, &DeleteParams::default()).await.unwrap();
        }
    }
}

/// `metrics.k8s.io` is served read-only (not stored, so not in the CRUD
/// sweep above): lists and gets answer, built from the agents' readings
/// (none here: no agent runs), every write is refused, as metrics-server
/// does.
#[tokio::test]
async fn metrics_are_served_read_only() {
    let cp = ControlPlane::start();
    let client = cp.client().await;
    let base = "/apis/metrics.k8s.io/v1beta1";
    let (code, list) = common::raw(&client, "GET", &format!("{base}/nodes"), "", vec![]).await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["kind"], "NodeMetricsList");
    assert_eq!(list["items"], json!([]));
    let (code, list) = common::raw(
        &client,
        "GET",
        &format!("{base}/namespaces/default/pods?labelSelector=app%3Dweb"),
        "",
        vec![],
    )
    .await;
    assert_eq!((code, list["kind"].as_str()), (200, Some("PodMetricsList")));
    let (code, err) = common::raw(
        &client,
        "GET",
        &format!("{base}/namespaces/default/pods/web"),
        "",
        vec![],
    )
    .await;
    assert_eq!(code, 404);
    assert_eq!(err["message"], "pods.metrics.k8s.io \"web\" not found");
    for (method, path) in [
        ("POST", format!("{base}/namespaces/default/pods")),
        ("DELETE", format!("{base}/nodes/n1")),
        ("PUT", format!("{base}/nodes/n1")),
        ("GET", format!("{base}/nodes?watch=true")),
    ] {
        let (code, err) =
            common::raw(&client, method, &path, "application/json", b"{}".to_vec()).await;
        assert_eq!(code, 405, "{method} {path}: {err}");
        assert_eq!(err["reason"], "MethodNotAllowed");
    }
    let (code, doc) = common::raw(&client, "GET", base, "", vec![]).await;
    assert_eq!(code, 200);
    assert_eq!(doc["resources"][1]["verbs"], json!(["get", "list"]));
}
