//! Unit tests of the printers: every kind's columns and cells against what kubectl prints,
//! pod statuses and ages.

use super::*;
use crate::resources::{by_name, RESOURCES};
use crate::selector::label_selector_string_json;
use chrono::Duration;
use core_group::access_modes;

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2024-05-01T12:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

/// An RFC 3339 timestamp `secs` seconds before `now()`.
fn ago(secs: i64) -> String {
    (now() - Duration::seconds(secs)).to_rfc3339()
}

fn cells(kind: &str, obj: &Value) -> Vec<Value> {
    let res = by_name(kind).unwrap();
    let cells = row_cells(res, obj, now());
    assert_eq!(
        cells.len(),
        columns(res).len(),
        "{kind}: one cell per column"
    );
    cells
}

fn headers(kind: &str, wide: bool) -> Vec<String> {
    columns(by_name(kind).unwrap())
        .iter()
        .filter(|c| wide || c.priority == 0)
        .map(header)
        .collect()
}

#[test]
fn seed_deployment_prints_like_kubectl() {
    let deploy = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx-dev", "labels": {"app": "nginx-dev"},
                     "creationTimestamp": ago(4 * 60 + 15)},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "nginx-dev"}},
                 "template": {"metadata": {"labels": {"app": "nginx-dev"}},
                              "spec": {"containers": [{"image": "nginx:1.19", "name": "nginx"}]}}},
        "status": {"replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3}
    });
    assert_eq!(
        headers("deploy", false),
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    );
    assert_eq!(
        headers("deploy", true)[5..],
        ["CONTAINERS", "IMAGES", "SELECTOR"]
    );
    assert_eq!(
        cells("deploy", &deploy),
        vec![
            json!("nginx-dev"),
            json!("3/3"),
            json!(3),
            json!(3),
            json!("4m15s"),
            json!("nginx"),
            json!("nginx:1.19"),
            json!("app=nginx-dev"),
        ]
    );
    // A freshly created deployment without status.
    let mut fresh = deploy.clone();
    fresh.as_object_mut().unwrap().remove("status");
    assert_eq!(
        cells("deploy", &fresh)[1..4],
        [json!("0/3"), json!(0), json!(0)]
    );
}

#[test]
fn every_kind_prints_an_empty_object_without_panicking() {
    for res in RESOURCES {
        let cols = columns(res);
        assert_eq!(
            cols[0].format == "name",
            res.kind != "Event",
            "{}",
            res.kind
        );
        let cells = row_cells(res, &json!({}), now());
        assert_eq!(cells.len(), cols.len(), "{}", res.kind);
        let cells = row_cells(res, &json!({"status": null, "spec": 3}), now());
        assert_eq!(cells.len(), cols.len(), "{}", res.kind);
    }
    let t = table(
        by_name("po").unwrap(),
        &[json!({"metadata":{"name":"a","namespace":"ns"}})],
        "7",
        IncludeObject::parse(None),
        now(),
    );
    assert_eq!(t["kind"], "Table");
    assert_eq!(t["columnDefinitions"][0]["name"], "Name");
    assert_eq!(t["rows"][0]["cells"][0], "a");
    assert_eq!(t["rows"][0]["object"]["metadata"]["namespace"], "ns");
    assert_eq!(t["metadata"]["resourceVersion"], "7");
}

#[test]
fn human_age_boundaries() {
    let age = |secs: i64| human_age(now() - Duration::seconds(secs), now());
    assert_eq!(age(0), "0s");
    assert_eq!(age(-1), "0s");
    assert_eq!(age(-5), "<invalid>");
    assert_eq!(age(5), "5s");
    assert_eq!(age(119), "119s");
    assert_eq!(age(120), "2m");
    assert_eq!(age(4 * 60 + 15), "4m15s");
    assert_eq!(age(10 * 60 + 15), "10m");
    assert_eq!(age(179 * 60), "179m");
    assert_eq!(age(3 * 3600), "3h");
    assert_eq!(age(3 * 3600 + 20 * 60), "3h20m");
    assert_eq!(age(8 * 3600 + 59 * 60), "8h");
    assert_eq!(age(47 * 3600), "47h");
    assert_eq!(age(48 * 3600), "2d");
    assert_eq!(age(51 * 3600), "2d3h");
    assert_eq!(age(8 * 86400 + 3600), "8d");
    assert_eq!(age(45 * 86400), "45d");
    assert_eq!(age(2 * 365 * 86400), "2y");
    assert_eq!(age(2 * 365 * 86400 + 10 * 86400), "2y10d");
    assert_eq!(age(9 * 365 * 86400), "9y");
}

/// Kubernetes' own cases for duration.HumanDuration (apimachinery's duration_test.go),
/// and the ones `describe` relied on.
#[test]
fn human_duration_like_kubernetes() {
    let ms = Duration::milliseconds;
    let (second, minute, hour, day) = (1000, 60_000, 3_600_000, 86_400_000);
    let year = 365 * day;
    let cases: &[(i64, &str)] = &[
        (second, "1s"),
        (70 * second, "70s"),
        (190 * second, "3m10s"),
        (70 * minute, "70m"),
        (47 * hour, "47h"),
        (49 * hour, "2d1h"),
        ((8 * 24 + 2) * hour, "8d"),
        (367 * day, "367d"),
        (2 * year + 25 * hour, "2y1d"),
        (8 * year + 2 * hour, "8y"),
        // Boundaries.
        (-2 * second, "<invalid>"),
        (-2 * second + 1, "0s"),
        (0, "0s"),
        (second - 1, "0s"),
        (2 * minute - 1, "119s"),
        (2 * minute, "2m"),
        (2 * minute + second, "2m1s"),
        (10 * minute - 1, "9m59s"),
        (10 * minute, "10m"),
        (10 * minute + second, "10m"),
        (3 * hour - 1, "179m"),
        (3 * hour, "3h"),
        (3 * hour + minute, "3h1m"),
        (8 * hour - 1, "7h59m"),
        (8 * hour, "8h"),
        (8 * hour + 59 * minute, "8h"),
        (2 * day - 1, "47h"),
        (2 * day, "2d"),
        (2 * day + hour, "2d1h"),
        (8 * day - 1, "7d23h"),
        (8 * day, "8d"),
        (8 * day + 23 * hour, "8d"),
        (2 * year - 1, "729d"),
        (2 * year, "2y"),
        (2 * year + 23 * hour, "2y"),
        (2 * year + 23 * hour + 59 * minute, "2y"),
        (2 * year + day - 1, "2y"),
        (2 * year + day, "2y1d"),
        (3 * year, "3y"),
        (4 * year, "4y"),
        (5 * year, "5y"),
        (6 * year, "6y"),
        (7 * year, "7y"),
        (8 * year - 1, "7y364d"),
        (8 * year, "8y"),
        (8 * year + 364 * day, "8y"),
        (9 * year, "9y"),
        // What describe's events showed before sharing this function.
        (45 * second, "45s"),
        (150 * second, "2m30s"),
        (180 * second, "3m"),
        (25 * minute, "25m"),
        (5 * hour + 10 * minute, "5h10m"),
        (3 * day, "3d"),
    ];
    for &(millis, want) in cases {
        assert_eq!(human_duration(ms(millis)), want, "{millis}ms");
    }
}

fn pod(phase: &str, containers: Value, statuses: Value) -> Value {
    json!({
        "metadata": {"name": "web-0", "creationTimestamp": ago(30)},
        "spec": {"containers": containers, "nodeName": "node-1"},
        "status": {"phase": phase, "containerStatuses": statuses, "podIP": "10.1.0.5",
                   "podIPs": [{"ip": "10.1.0.5"}]}
    })
}

fn one(name: &str) -> Value {
    json!([{"name": name, "image": "nginx"}])
}

fn waiting(reason: &str) -> Value {
    json!([{"name": "c", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": reason}}}])
}

#[test]
fn pod_status_for_running_completed_and_failing_containers() {
    let running = pod(
        "Running",
        one("c"),
        json!([{"name":"c","ready":true,"restartCount":0,"started":true,
                "state":{"running":{"startedAt":ago(20)}}}]),
    );
    assert_eq!(pod_status(&running), "Running");
    assert_eq!(
        cells("po", &running),
        vec![
            json!("web-0"),
            json!("1/1"),
            json!("Running"),
            json!("0"),
            json!("30s"),
            json!("10.1.0.5"),
            json!("node-1"),
            json!("<none>"),
            json!("<none>"),
        ]
    );

    let completed = pod(
        "Succeeded",
        one("c"),
        json!([{"name":"c","ready":false,"restartCount":0,
                "state":{"terminated":{"exitCode":0,"reason":"Completed"}}}]),
    );
    assert_eq!(pod_status(&completed), "Completed");
    assert_eq!(cells("po", &completed)[1], "0/1");

    let error = pod(
        "Failed",
        one("c"),
        json!([{"name":"c","ready":false,"restartCount":0,
                "state":{"terminated":{"exitCode":1,"reason":"Error"}}}]),
    );
    assert_eq!(pod_status(&error), "Error");

    let no_reason = pod(
        "Failed",
        one("c"),
        json!([{"name":"c","state":{"terminated":{"exitCode":137}}}]),
    );
    assert_eq!(pod_status(&no_reason), "ExitCode:137");

    let crash = pod(
        "Running",
        one("c"),
        json!([{"name":"c","ready":false,"restartCount":2,
                "state":{"waiting":{"reason":"CrashLoopBackOff","message":"back-off 20s"}},
                "lastState":{"terminated":{"exitCode":1,"reason":"Error","finishedAt":ago(300)}}}]),
    );
    assert_eq!(pod_status(&crash), "CrashLoopBackOff");
    assert_eq!(cells("po", &crash)[3], "2 (5m ago)");

    assert_eq!(
        pod_status(&pod("Pending", one("c"), waiting("ImagePullBackOff"))),
        "ImagePullBackOff"
    );
    assert_eq!(
        pod_status(&pod("Pending", one("c"), waiting("ContainerCreating"))),
        "ContainerCreating"
    );
    let pending = json!({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}]},
                         "status":{"phase":"Pending"}});
    assert_eq!(pod_status(&pending), "Pending");
    assert_eq!(
        cells("po", &pending)[1..4],
        [json!("0/1"), json!("Pending"), json!("0")]
    );
    assert_eq!(
        cells("po", &pending)[5..7],
        [json!("<none>"), json!("<none>")]
    );
}

#[test]
fn pod_status_with_one_of_two_containers_finished() {
    // One container completed, the other still running and the pod Ready: Running.
    let mut p = pod(
        "Running",
        json!([{"name":"a"},{"name":"b"}]),
        json!([
            {"name":"a","ready":false,"state":{"terminated":{"exitCode":0,"reason":"Completed"}}},
            {"name":"b","ready":true,"state":{"running":{}}}
        ]),
    );
    p["status"]["conditions"] = json!([{"type":"Ready","status":"True"}]);
    assert_eq!(pod_status(&p), "Running");
    assert_eq!(cells("po", &p)[1], "1/2");
    p["status"]["conditions"] = json!([{"type":"Ready","status":"False"}]);
    assert_eq!(pod_status(&p), "NotReady");
}

fn init_pod(init_statuses: Value) -> Value {
    json!({
        "metadata": {"name": "p"},
        "spec": {"initContainers": [{"name":"i1"},{"name":"i2"}], "containers": [{"name":"c"}]},
        "status": {"phase": "Pending",
                   "initContainerStatuses": init_statuses,
                   "containerStatuses": [{"name":"c","ready":false,
                                          "state":{"waiting":{"reason":"PodInitializing"}}}]}
    })
}

#[test]
fn pod_status_while_initializing() {
    let first_running = init_pod(json!([
        {"name":"i1","ready":false,"state":{"running":{}}},
        {"name":"i2","ready":false,"state":{"waiting":{"reason":"PodInitializing"}}}
    ]));
    assert_eq!(pod_status(&first_running), "Init:0/2");

    let second_running = init_pod(json!([
        {"name":"i1","state":{"terminated":{"exitCode":0,"reason":"Completed"}}},
        {"name":"i2","state":{"running":{}}}
    ]));
    assert_eq!(pod_status(&second_running), "Init:1/2");

    let failed = init_pod(json!([
        {"name":"i1","state":{"terminated":{"exitCode":1,"reason":"Error"}}},
        {"name":"i2","state":{"waiting":{"reason":"PodInitializing"}}}
    ]));
    assert_eq!(pod_status(&failed), "Init:Error");

    let crashing = init_pod(json!([
        {"name":"i1","restartCount":3,"state":{"waiting":{"reason":"CrashLoopBackOff"}},
         "lastState":{"terminated":{"exitCode":1,"finishedAt":ago(60)}}},
        {"name":"i2","state":{"waiting":{"reason":"PodInitializing"}}}
    ]));
    assert_eq!(pod_status(&crashing), "Init:CrashLoopBackOff");
    assert_eq!(cells("po", &crashing)[3], "3 (60s ago)");

    let done = init_pod(json!([
        {"name":"i1","state":{"terminated":{"exitCode":0,"reason":"Completed"}}},
        {"name":"i2","state":{"terminated":{"exitCode":0,"reason":"Completed"}}}
    ]));
    assert_eq!(pod_status(&done), "PodInitializing");
}

#[test]
fn pod_status_reasons_and_deletion() {
    let mut evicted = pod("Failed", one("c"), json!([]));
    evicted["status"]["reason"] = json!("Evicted");
    assert_eq!(pod_status(&evicted), "Evicted");

    let mut lost = pod(
        "Running",
        one("c"),
        json!([{"name":"c","ready":true,"state":{"running":{}}}]),
    );
    lost["status"]["reason"] = json!("NodeLost");
    // The pod's reason wins over running containers, as in kubectl.
    assert_eq!(pod_status(&lost), "NodeLost");
    assert_eq!(cells("po", &lost)[1], "1/1");
    lost["metadata"]["deletionTimestamp"] = json!(ago(5));
    assert_eq!(pod_status(&lost), "Unknown");

    let mut terminating = pod(
        "Running",
        one("c"),
        json!([{"name":"c","ready":true,"state":{"running":{}}}]),
    );
    terminating["metadata"]["deletionTimestamp"] = json!(ago(5));
    assert_eq!(pod_status(&terminating), "Terminating");
    // A finished pod being deleted keeps its final status.
    let mut finished = pod(
        "Succeeded",
        one("c"),
        json!([{"name":"c","state":{"terminated":{"exitCode":0,"reason":"Completed"}}}]),
    );
    finished["metadata"]["deletionTimestamp"] = json!(ago(5));
    assert_eq!(pod_status(&finished), "Completed");
}

#[test]
fn storage_class_columns_mark_the_default() {
    assert_eq!(
        headers("sc", false),
        [
            "NAME",
            "PROVISIONER",
            "RECLAIMPOLICY",
            "VOLUMEBINDINGMODE",
            "ALLOWVOLUMEEXPANSION",
            "AGE"
        ]
    );
    let mut sc = json!({"metadata":{"name":"local-path","creationTimestamp":ago(29),
        "annotations":{"storageclass.kubernetes.io/is-default-class":"true"}},
        "provisioner":"bosun.io/local-path","reclaimPolicy":"Delete",
        "volumeBindingMode":"WaitForFirstConsumer"});
    assert_eq!(
        cells("sc", &sc),
        vec![
            json!("local-path (default)"),
            json!("bosun.io/local-path"),
            json!("Delete"),
            json!("WaitForFirstConsumer"),
            json!("false"),
            json!("29s")
        ]
    );
    sc["metadata"]["annotations"] = json!({});
    sc["allowVolumeExpansion"] = json!(true);
    let row = cells("sc", &sc);
    assert_eq!((&row[0], &row[4]), (&json!("local-path"), &json!("true")));
}

#[test]
fn pv_and_pvc_columns() {
    assert_eq!(
        headers("pv", false),
        [
            "NAME",
            "CAPACITY",
            "ACCESS MODES",
            "RECLAIM POLICY",
            "STATUS",
            "CLAIM",
            "STORAGECLASS",
            "VOLUMEATTRIBUTESCLASS",
            "REASON",
            "AGE"
        ]
    );
    let pv = json!({"metadata":{"name":"pv1","creationTimestamp":ago(29)},
        "spec":{"capacity":{"storage":"1Gi"},"accessModes":["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy":"Retain","hostPath":{"path":"/data"}},
        "status":{"phase":"Available"}});
    assert_eq!(
        cells("pv", &pv),
        vec![
            json!("pv1"),
            json!("1Gi"),
            json!("RWO"),
            json!("Retain"),
            json!("Available"),
            json!(""),
            json!(""),
            json!("<unset>"),
            json!(""),
            json!("29s"),
            json!("<unset>")
        ]
    );
    let modes = json!([
        "ReadWriteOncePod",
        "ReadWriteMany",
        "ReadOnlyMany",
        "ReadWriteOnce"
    ]);
    assert_eq!(access_modes(modes.as_array().unwrap()), "RWO,ROX,RWX,RWOP");

    let mut bound = pv.clone();
    bound["spec"]["claimRef"] = json!({"namespace":"default","name":"www-web-0"});
    bound["spec"]["storageClassName"] = json!("local");
    bound["status"]["phase"] = json!("Bound");
    assert_eq!(
        cells("pv", &bound)[4..7],
        [json!("Bound"), json!("default/www-web-0"), json!("local")]
    );

    let pvc = json!({"metadata":{"name":"www-web-0","creationTimestamp":ago(90)},
        "spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}},
                "volumeName":"pv1","storageClassName":"local"},
        "status":{"phase":"Bound","accessModes":["ReadWriteOnce"],"capacity":{"storage":"1Gi"}}});
    assert_eq!(
        cells("pvc", &pvc)[..8],
        [
            json!("www-web-0"),
            json!("Bound"),
            json!("pv1"),
            json!("1Gi"),
            json!("RWO"),
            json!("local"),
            json!("<unset>"),
            json!("90s")
        ]
    );
    let pending = json!({"metadata":{"name":"c"},"spec":{"resources":{"requests":{"storage":"1Gi"}}},
                         "status":{"phase":"Pending"}});
    assert_eq!(
        cells("pvc", &pending)[1..5],
        [json!("Pending"), json!(""), json!(""), json!("")]
    );
}

#[test]
fn service_ports_and_ips() {
    let svc = json!({"metadata":{"name":"nginx","creationTimestamp":ago(60)},
        "spec":{"type":"NodePort","clusterIP":"10.96.0.10","clusterIPs":["10.96.0.10"],
                "selector":{"app":"nginx","tier":"web"},
                "ports":[{"port":80,"nodePort":30080,"protocol":"TCP"},{"port":53,"protocol":"UDP"}]}});
    assert_eq!(
        cells("svc", &svc),
        vec![
            json!("nginx"),
            json!("NodePort"),
            json!("10.96.0.10"),
            json!("<none>"),
            json!("80:30080/TCP,53/UDP"),
            json!("60s"),
            json!("app=nginx,tier=web")
        ]
    );
    let headless = json!({"metadata":{"name":"web"},
        "spec":{"type":"ClusterIP","clusterIP":"None","ports":[{"port":80}]}});
    assert_eq!(
        cells("svc", &headless)[2..5],
        [json!("None"), json!("<none>"), json!("80/TCP")]
    );
    let lb = json!({"metadata":{"name":"lb"},"spec":{"type":"LoadBalancer","clusterIPs":["10.96.0.11"]}});
    assert_eq!(
        cells("svc", &lb)[3..5],
        [json!("<pending>"), json!("<none>")]
    );
    let mut lb_ready = lb.clone();
    lb_ready["status"] = json!({"loadBalancer":{"ingress":[{"ip":"1.2.3.4"}]}});
    assert_eq!(cells("svc", &lb_ready)[3], "1.2.3.4");
    let ext = json!({"metadata":{"name":"x"},"spec":{"type":"ExternalName","externalName":"example.com"}});
    assert_eq!(
        cells("svc", &ext)[2..4],
        [json!("<none>"), json!("example.com")]
    );
    assert_eq!(cells("svc", &ext)[6], "<none>");
}

#[test]
fn endpoints_truncate_after_three() {
    let addrs = |ips: &[&str]| -> Value { ips.iter().map(|ip| json!({"ip": ip})).collect() };
    let ep = json!({"metadata":{"name":"web"},"subsets":[
        {"addresses": addrs(&["10.0.0.1","10.0.0.2"]), "ports":[{"port":80}]}]});
    assert_eq!(cells("ep", &ep)[1], "10.0.0.1:80,10.0.0.2:80");
    let ep = json!({"metadata":{"name":"web"},"subsets":[
        {"addresses": addrs(&["10.0.0.1","10.0.0.2","10.0.0.3","10.0.0.4"]), "ports":[{"port":80}]}]});
    assert_eq!(
        cells("ep", &ep)[1],
        "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 1 more..."
    );
    let ep = json!({"metadata":{"name":"web"},"subsets":[
        {"addresses": addrs(&["10.0.0.1","10.0.0.2"]), "ports":[{"port":80},{"port":443}]}]});
    assert_eq!(
        cells("ep", &ep)[1],
        "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 1 more..."
    );
    assert_eq!(
        cells("ep", &json!({"metadata":{"name":"web"}}))[1],
        "<none>"
    );
    assert_eq!(
        cells("ep", &json!({"subsets":[{"addresses":[]}]}))[1],
        "<none>"
    );
    let headless = json!({"subsets":[{"addresses": addrs(&["10.0.0.1"])}]});
    assert_eq!(cells("ep", &headless)[1], "10.0.0.1");
}

#[test]
fn node_status_roles_and_wide_columns() {
    let node = json!({"metadata":{"name":"node-1","creationTimestamp":ago(3 * 86400),
            "labels":{"node-role.kubernetes.io/control-plane":"","kubernetes.io/hostname":"node-1"}},
        "spec":{},
        "status":{"conditions":[{"type":"MemoryPressure","status":"False"},{"type":"Ready","status":"True"}],
            "addresses":[{"type":"InternalIP","address":"172.17.0.2"},{"type":"Hostname","address":"node-1"}],
            "nodeInfo":{"kubeletVersion":"v1.31.0-bosun","osImage":"Ubuntu 24.04","kernelVersion":"6.8.0",
                        "containerRuntimeVersion":"docker://27.0.3"}}});
    assert_eq!(
        cells("no", &node),
        vec![
            json!("node-1"),
            json!("Ready"),
            json!("control-plane"),
            json!("3d"),
            json!("v1.31.0-bosun"),
            json!("172.17.0.2"),
            json!("<none>"),
            json!("Ubuntu 24.04"),
            json!("6.8.0"),
            json!("docker://27.0.3")
        ]
    );
    let mut cordoned = node.clone();
    cordoned["spec"]["unschedulable"] = json!(true);
    assert_eq!(cells("no", &cordoned)[1], "Ready,SchedulingDisabled");
    let mut down = node.clone();
    down["status"]["conditions"][1]["status"] = json!("Unknown");
    assert_eq!(cells("no", &down)[1], "NotReady");
    assert_eq!(
        cells("no", &json!({"metadata":{"name":"n"}}))[1..3],
        [json!("Unknown"), json!("<none>")]
    );
}

#[test]
fn workload_columns() {
    let rs = json!({"metadata":{"name":"nginx-dev-58c688cc59","creationTimestamp":ago(86 * 60)},
        "spec":{"replicas":4},"status":{"replicas":4,"readyReplicas":4}});
    assert_eq!(
        cells("rs", &rs)[..5],
        [
            json!("nginx-dev-58c688cc59"),
            json!(4),
            json!(4),
            json!(4),
            json!("86m")
        ]
    );

    let sts = json!({"metadata":{"name":"web"},"spec":{"replicas":2},"status":{"readyReplicas":1}});
    assert_eq!(cells("sts", &sts)[1], "1/2");

    let ds = json!({"metadata":{"name":"fluentd"},
        "spec":{"selector":{"matchLabels":{"name":"fluentd"}},
                "template":{"spec":{"nodeSelector":{"disk":"ssd"},
                    "containers":[{"name":"fluentd","image":"fluentd:v2"},{"name":"x","image":"busybox"}]}}},
        "status":{"desiredNumberScheduled":2,"currentNumberScheduled":2,"numberReady":1,
                  "updatedNumberScheduled":2,"numberAvailable":1}});
    assert_eq!(
        cells("ds", &ds),
        vec![
            json!("fluentd"),
            json!(2),
            json!(2),
            json!(1),
            json!(2),
            json!(1),
            json!("disk=ssd"),
            json!("<unknown>"),
            json!("fluentd,x"),
            json!("fluentd:v2,busybox"),
            json!("name=fluentd")
        ]
    );

    let rev = json!({"metadata":{"name":"fluentd-elasticsearch-64dc6799c9",
            "ownerReferences":[{"apiVersion":"apps/v1","kind":"DaemonSet","name":"fluentd-elasticsearch",
                                "uid":"u","controller":true}]},
        "revision":2});
    assert_eq!(
        cells("controllerrevisions", &rev)[1..3],
        [json!("daemonset.apps/fluentd-elasticsearch"), json!(2)]
    );

    let sel = json!({"matchLabels":{"app":"web"},"matchExpressions":[
        {"key":"tier","operator":"In","values":["b","a"]},{"key":"legacy","operator":"DoesNotExist"}]});
    assert_eq!(
        label_selector_string_json(Some(&sel)),
        "app=web,!legacy,tier in (a,b)"
    );
}

#[test]
fn job_and_cronjob_columns() {
    let job = json!({"metadata":{"name":"pi","creationTimestamp":ago(120)},
        "spec":{"completions":3,"parallelism":1,"selector":{"matchLabels":{"batch.kubernetes.io/controller-uid":"u1"}},
                "template":{"spec":{"containers":[{"name":"pi","image":"perl"}]}}},
        "status":{"succeeded":3,"startTime":ago(120),"completionTime":ago(60),
                  "conditions":[{"type":"Complete","status":"True"}]}});
    assert_eq!(
        cells("job", &job),
        vec![
            json!("pi"),
            json!("Complete"),
            json!("3/3"),
            json!("60s"),
            json!("2m"),
            json!("pi"),
            json!("perl"),
            json!("batch.kubernetes.io/controller-uid=u1")
        ]
    );
    let running = json!({"metadata":{"name":"w"},"spec":{"parallelism":2},
                         "status":{"startTime":ago(10),"active":2}});
    assert_eq!(
        cells("job", &running)[1..4],
        [json!("Running"), json!("0/1 of 2"), json!("10s")]
    );
    let failed = json!({"spec":{},"status":{"conditions":[{"type":"Failed","status":"True"}]}});
    assert_eq!(
        cells("job", &failed)[1..4],
        [json!("Failed"), json!("0/1"), json!("")]
    );

    let cj = json!({"metadata":{"name":"hello","creationTimestamp":ago(300)},
        "spec":{"schedule":"*/1 * * * *","suspend":false,
                "jobTemplate":{"spec":{"template":{"spec":{"containers":[{"name":"hello","image":"busybox"}]}}}}},
        "status":{"active":[{"name":"hello-1"}],"lastScheduleTime":ago(40)}});
    assert_eq!(
        cells("cj", &cj),
        vec![
            json!("hello"),
            json!("*/1 * * * *"),
            json!("<none>"),
            json!("False"),
            json!(1),
            json!("40s"),
            json!("5m"),
            json!("hello"),
            json!("busybox"),
            json!("<none>")
        ]
    );
}

#[test]
fn hpa_targets_like_kubectl() {
    let v2 = json!({"metadata":{"name":"hpa-demo"},
        "spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"hpa-demo"},
                "minReplicas":1,"maxReplicas":10,
                "metrics":[{"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":5}}}]},
        "status":{"currentReplicas":1}});
    assert_eq!(
        cells("hpa", &v2)[..6],
        [
            json!("hpa-demo"),
            json!("Deployment/hpa-demo"),
            json!("cpu: <unknown>/5%"),
            json!("1"),
            json!(10),
            json!(1)
        ]
    );
    let mut measured = v2.clone();
    measured["status"]["currentMetrics"] = json!([{"type":"Resource",
        "resource":{"name":"cpu","current":{"averageUtilization":3,"averageValue":"15m"}}}]);
    assert_eq!(cells("hpa", &measured)[2], "cpu: 3%/5%");

    let mut many = v2.clone();
    many["spec"]["metrics"] = json!([
        {"type":"Resource","resource":{"name":"memory","target":{"type":"Utilization","averageUtilization":10}}},
        {"type":"Resource","resource":{"name":"cpu","target":{"type":"AverageValue","averageValue":"500m"}}},
        {"type":"Pods","pods":{"metric":{"name":"qps"},"target":{"type":"AverageValue","averageValue":"1k"}}}
    ]);
    assert_eq!(
        cells("hpa", &many)[2],
        "memory: <unknown>/10%, cpu: <unknown>/500m + 1 more..."
    );

    let v1 = json!({"metadata":{"name":"hpa-demo"},
        "spec":{"scaleTargetRef":{"kind":"Deployment","name":"hpa-demo"},"maxReplicas":10,
                "targetCPUUtilizationPercentage":5},
        "status":{"currentReplicas":1,"currentCPUUtilizationPercentage":3}});
    let res = crate::resources::by_path("autoscaling", "v1", "horizontalpodautoscalers").unwrap();
    let row = row_cells(res, &v1, now());
    assert_eq!(row[2..4], [json!("cpu: 3%/5%"), json!("<unset>")]);
    assert_eq!(cells("hpa", &json!({}))[2], "<none>");
}

#[test]
fn event_and_namespace_columns() {
    assert_eq!(
        headers("ev", false),
        ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    );
    let ev = json!({"metadata":{"name":"web-0.17c","namespace":"default"},
        "involvedObject":{"kind":"Pod","name":"web-0","fieldPath":"spec.containers{nginx}"},
        "reason":"Pulled","message":"Container image \"nginx\" already present on machine\n",
        "type":"Normal","source":{"component":"kubelet","host":"node-1"},
        "firstTimestamp":ago(600),"lastTimestamp":ago(30),"count":4});
    assert_eq!(
        cells("ev", &ev),
        vec![
            json!("30s"),
            json!("Normal"),
            json!("Pulled"),
            json!("pod/web-0"),
            json!("spec.containers{nginx}"),
            json!("kubelet, node-1"),
            json!("Container image \"nginx\" already present on machine"),
            json!("10m"),
            json!(4),
            json!("web-0.17c")
        ]
    );
    let ns = json!({"metadata":{"name":"default","creationTimestamp":ago(45 * 86400)},
                    "status":{"phase":"Active"}});
    assert_eq!(
        cells("ns", &ns),
        vec![json!("default"), json!("Active"), json!("45d")]
    );
}

#[test]
fn config_maps_and_secrets_count_their_keys() {
    assert_eq!(headers("cm", true), ["NAME", "DATA", "AGE"]);
    assert_eq!(headers("secret", true), ["NAME", "TYPE", "DATA", "AGE"]);
    let cm = json!({
        "metadata": {"name": "app", "creationTimestamp": ago(90)},
        "data": {"a": "1", "b": "2"},
        "binaryData": {"c": "AA=="},
    });
    assert_eq!(cells("cm", &cm), vec![json!("app"), json!(3), json!("90s")]);
    let secret = json!({
        "metadata": {"name": "tls", "creationTimestamp": ago(90)},
        "type": "kubernetes.io/tls",
        "data": {"tls.crt": "", "tls.key": ""},
    });
    assert_eq!(
        cells("secret", &secret),
        vec![
            json!("tls"),
            json!("kubernetes.io/tls"),
            json!(2),
            json!("90s")
        ]
    );
}
