use serde_json::{json, Value};

use super::*;
use crate::defaults::apply_defaults;
use crate::resources::by_name;

/// What the API server does on create: normalize, default, fill the namespace, validate.
fn create(resource: &str, obj: Value) -> Vec<FieldError> {
    let res = by_name(resource).unwrap();
    let mut obj = normalize(res, obj).unwrap_or_else(|e| panic!("normalize: {e}"));
    apply_defaults(res, &mut obj);
    if res.namespaced && obj["metadata"].get("namespace").is_none() {
        obj["metadata"]["namespace"] = json!("default");
    }
    validate(res, &obj, None)
}

/// An update of `old` (as stored) to `new`.
fn update(resource: &str, old: Value, new: Value) -> Vec<FieldError> {
    let res = by_name(resource).unwrap();
    let prep = |o: Value| {
        let mut o = normalize(res, o).unwrap();
        apply_defaults(res, &mut o);
        if res.namespaced && o["metadata"].get("namespace").is_none() {
            o["metadata"]["namespace"] = json!("default");
        }
        o
    };
    let (old, new) = (prep(old), prep(new));
    validate(res, &new, Some(&old))
}

fn find<'a>(errs: &'a [FieldError], field: &str, reason: &str) -> &'a FieldError {
    errs.iter()
        .find(|e| e.field == field && e.reason() == reason)
        .unwrap_or_else(|| {
            let all: Vec<String> = errs
                .iter()
                .map(|e| format!("{} ({})", e.message(), e.reason()))
                .collect();
            panic!("no {reason} at {field}; got:\n{}", all.join("\n"))
        })
}

fn seed() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "nginx-deployment", "labels": {"app": "nginx"}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {
                "metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{
                    "name": "nginx",
                    "image": "nginx:1.7.9",
                    "ports": [{"containerPort": 80}]
                }]}
            }
        }
    })
}

/// The seed with `f` applied to it.
fn seed_with(f: impl FnOnce(&mut Value)) -> Value {
    let mut d = seed();
    f(&mut d);
    d
}

fn container0(d: &mut Value) -> &mut Value {
    &mut d["spec"]["template"]["spec"]["containers"][0]
}

const C0: &str = "spec.template.spec.containers[0]";

fn pod(containers: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": containers}})
}

#[test]
fn valid_objects_pass() {
    assert_eq!(create("deploy", seed()), vec![]);
    let tpl = json!({"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "a", "image": "busybox"}]}});
    let ok: Vec<(&str, Value)> = vec![
        (
            "po",
            pod(
                json!([{"name": "a", "image": "busybox", "ports": [{"name": "http", "containerPort": 8080}],
            "livenessProbe": {"httpGet": {"port": "http"}}, "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"cpu": 1, "memory": "128Mi"}}}]),
            ),
        ),
        (
            "rs",
            json!({"metadata": {"name": "r"}, "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": tpl}}),
        ),
        (
            "sts",
            json!({"metadata": {"name": "web"}, "spec": {"serviceName": "nginx", "selector": {"matchLabels": {"app": "a"}}, "template": tpl,
            "volumeClaimTemplates": [{"metadata": {"name": "www"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}}),
        ),
        (
            "ds",
            json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": tpl}}),
        ),
        (
            "job",
            json!({"metadata": {"name": "pi"}, "spec": {"template": {"spec": {"containers": [{"name": "pi", "image": "perl"}], "restartPolicy": "Never"}}}}),
        ),
        (
            "cj",
            json!({"metadata": {"name": "hello"}, "spec": {"schedule": "*/1 * * * *", "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "h", "image": "busybox"}], "restartPolicy": "OnFailure"}}}}}}),
        ),
        (
            "svc",
            json!({"metadata": {"name": "web"}, "spec": {"selector": {"app": "a"}, "ports": [{"port": 80}]}}),
        ),
        (
            "svc",
            json!({"metadata": {"name": "headless"}, "spec": {"clusterIP": "None", "selector": {"app": "a"}}}),
        ),
        (
            "hpa",
            json!({"metadata": {"name": "h"}, "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 5}}),
        ),
        (
            "pv",
            json!({"metadata": {"name": "pv0001"}, "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/data"}}}),
        ),
        (
            "pvc",
            json!({"metadata": {"name": "claim"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
        ),
        ("ns", json!({"metadata": {"name": "team-a"}})),
        ("no", json!({"metadata": {"name": "node-1.example"}})),
    ];
    for (r, obj) in ok {
        let errs = create(r, obj.clone());
        assert!(
            errs.is_empty(),
            "{r} {obj}: {:?}",
            errs.iter().map(FieldError::message).collect::<Vec<_>>()
        );
    }
}

#[test]
fn messages_read_like_kubernetes() {
    let errs = create("deploy", seed_with(|d| d["spec"]["replicas"] = json!(-1)));
    assert_eq!(
        find(&errs, "spec.replicas", "FieldValueInvalid").message(),
        "spec.replicas: Invalid value: -1: must be greater than or equal to 0"
    );

    let errs = create(
        "deploy",
        seed_with(|d| d["metadata"].as_object_mut().unwrap().clear()),
    );
    assert_eq!(
        find(&errs, "metadata.name", "FieldValueRequired").message(),
        "metadata.name: Required value: name or generateName is required"
    );

    let errs = create(
        "deploy",
        seed_with(|d| d["spec"]["template"]["metadata"]["labels"] = json!({"app": "x"})),
    );
    assert_eq!(
        find(&errs, "spec.template.metadata.labels", "FieldValueInvalid").message(),
        "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"x\"}: `selector` does not match template `labels`"
    );

    let errs = create(
        "deploy",
        seed_with(|d| d["spec"]["template"]["spec"]["restartPolicy"] = json!("Never")),
    );
    assert_eq!(
        find(&errs, "spec.template.spec.restartPolicy", "FieldValueNotSupported").message(),
        "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""
    );

    let errs = create("deploy", seed_with(|d| d["spec"]["selector"] = json!({})));
    assert_eq!(
        find(&errs, "spec.selector", "FieldValueInvalid").message(),
        "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment"
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let errs = create(
        "deploy",
        seed_with(|d| {
            d["spec"]["replicas"] = json!(-2);
            d["spec"]["minReadySeconds"] = json!(-1);
            container0(d)["image"] = json!("");
            container0(d)["ports"][0]["containerPort"] = json!(0);
        }),
    );
    find(&errs, "spec.replicas", "FieldValueInvalid");
    find(&errs, "spec.minReadySeconds", "FieldValueInvalid");
    find(&errs, &format!("{C0}.image"), "FieldValueRequired");
    find(
        &errs,
        &format!("{C0}.ports[0].containerPort"),
        "FieldValueRequired",
    );
    assert_eq!(errs.len(), 4, "{errs:?}");
    let res = by_name("deploy").unwrap();
    let msg = invalid_message(res, "nginx-deployment", &errs);
    assert!(
        msg.starts_with(
            "Deployment.apps \"nginx-deployment\" is invalid: [spec.replicas: Invalid value: -2"
        ),
        "{msg}"
    );
}

#[test]
fn workload_invalid_objects() {
    // (object, field, reason): each a distinct mistake.
    let cases: Vec<(&str, Value, String, &str)> = vec![
        (
            "deploy",
            seed_with(|d| {
                d["spec"].as_object_mut().unwrap().remove("selector");
            }),
            "spec.selector".into(),
            "FieldValueRequired",
        ),
        (
            "deploy",
            seed_with(|d| container0(d)["name"] = json!("Nginx_1")),
            format!("{C0}.name"),
            "FieldValueInvalid",
        ),
        (
            "deploy",
            seed_with(|d| {
                container0(d).as_object_mut().unwrap().remove("name");
            }),
            format!("{C0}.name"),
            "FieldValueRequired",
        ),
        (
            "deploy",
            seed_with(|d| {
                d["spec"]["template"]["spec"]["initContainers"] =
                    json!([{"name": "nginx", "image": "busybox"}])
            }),
            "spec.template.spec.initContainers[0].name".into(),
            "FieldValueDuplicate",
        ),
        (
            "deploy",
            seed_with(|d| container0(d)["ports"][0]["containerPort"] = json!(70000)),
            format!("{C0}.ports[0].containerPort"),
            "FieldValueInvalid",
        ),
        (
            "deploy",
            seed_with(|d| container0(d)["ports"][0]["hostPort"] = json!(-1)),
            format!("{C0}.ports[0].hostPort"),
            "FieldValueInvalid",
        ),
        (
            "deploy",
            seed_with(|d| container0(d)["ports"][0]["protocol"] = json!("HTTP")),
            format!("{C0}.ports[0].protocol"),
            "FieldValueNotSupported",
        ),
        (
            "deploy",
            seed_with(
                |d| container0(d)["ports"] = json!([{"name": "web", "containerPort": 80}, {"name": "web", "containerPort": 81}]),
            ),
            format!("{C0}.ports[1].name"),
            "FieldValueDuplicate",
        ),
        (
            "deploy",
            seed_with(|d| container0(d)["ports"][0]["name"] = json!("a-very-long-port-name")),
            format!("{C0}.ports[0].name"),
            "FieldValueInvalid",
        ),
        (
            "deploy",
            seed_with(|d| container0(d)["env"] = json!([{"name": "1BAD", "value": "x"}])),
            format!("{C0}.env[0].name"),
            "FieldValueInvalid",
        ),
        (
            "deploy",
            seed_with(
                |d| container0(d)["env"] = json!([{"name": "A", "value": "x", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]),
            ),
            format!("{C0}.env[0].valueFrom"),
            "FieldValueInvalid",
        ),
        (
            "deploy",
            seed_with(|d| d["spec"]["template"]["spec"]["volumes"] = json!([{"name": "v"}])),
            "spec.template.spec.volumes[0]".into(),
            "FieldValueRequired",
        ),
        (
            "deploy",
            seed_with(|d| {
                d["spec"]["template"]["spec"]["volumes"] =
                    json!([{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}])
            }),
            "spec.template.spec.volumes[1].name".into(),
            "FieldValueDuplicate",
        ),
        (
            "deploy",
            seed_with(|d| {
                container0(d)["volumeMounts"] = json!([{"name": "data", "mountPath": "/data"}])
            }),
            format!("{C0}.volumeMounts[0].name"),
            "FieldValueNotFound",
        ),
        (
            "deploy",
            seed_with(|d| {
                d["spec"]["template"]["spec"]["volumes"] =
                    json!([{"name": "data", "emptyDir": {}}]);
                container0(d)["volumeMounts"] = json!([{"name": "data", "mountPath": "data"}]);
            }),
            format!("{C0}.volumeMounts[0].mountPath"),
            "FieldValueInvalid",
        ),
        (
            "deploy",
            seed_with(|d| container0(d)["resources"] = json!({"limits": {"memory": "lots"}})),
            format!("{C0}.resources.limits[memory]"),
            "FieldValueInvalid",
        ),
        (
            "deploy",
            seed_with(|d| container0(d)["resources"] = json!({"requests": {"gpu": "1"}})),
            format!("{C0}.resources.requests[gpu]"),
            "FieldValueInvalid",
        ),
        (
            "deploy",
            seed_with(|d| container0(d)["livenessProbe"] = json!({"periodSeconds": 5})),
            format!("{C0}.livenessProbe"),
            "FieldValueRequired",
        ),
        (
            "deploy",
            seed_with(|d| {
                container0(d)["readinessProbe"] =
                    json!({"exec": {"command": ["true"]}, "tcpSocket": {"port": 80}})
            }),
            format!("{C0}.readinessProbe.tcpSocket"),
            "FieldValueForbidden",
        ),
        (
            "deploy",
            seed_with(|d| container0(d)["readinessProbe"] = json!({"httpGet": {"port": 0}})),
            format!("{C0}.readinessProbe.httpGet.port"),
            "FieldValueInvalid",
        ),
        (
            "deploy",
            seed_with(|d| {
                container0(d)["livenessProbe"] =
                    json!({"exec": {"command": ["true"]}, "successThreshold": 2})
            }),
            format!("{C0}.livenessProbe.successThreshold"),
            "FieldValueInvalid",
        ),
        (
            "deploy",
            seed_with(|d| {
                container0(d)["readinessProbe"] =
                    json!({"exec": {"command": ["true"]}, "failureThreshold": -1})
            }),
            format!("{C0}.readinessProbe.failureThreshold"),
            "FieldValueInvalid",
        ),
        (
            "deploy",
            seed_with(|d| d["spec"]["template"]["spec"]["dnsPolicy"] = json!("Google")),
            "spec.template.spec.dnsPolicy".into(),
            "FieldValueNotSupported",
        ),
        (
            "deploy",
            seed_with(|d| {
                d["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = json!(-5)
            }),
            "spec.template.spec.terminationGracePeriodSeconds".into(),
            "FieldValueInvalid",
        ),
        (
            "deploy",
            seed_with(
                |d| d["spec"]["strategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}),
            ),
            "spec.strategy.rollingUpdate.maxUnavailable".into(),
            "FieldValueInvalid",
        ),
        (
            "deploy",
            seed_with(|d| {
                d["spec"]["strategy"] =
                    json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "lots"}})
            }),
            "spec.strategy.rollingUpdate.maxSurge".into(),
            "FieldValueInvalid",
        ),
        (
            "deploy",
            seed_with(|d| d["spec"]["strategy"] = json!({"type": "BlueGreen"})),
            "spec.strategy.type".into(),
            "FieldValueNotSupported",
        ),
        (
            "deploy",
            seed_with(|d| {
                d["spec"]["strategy"] =
                    json!({"type": "Recreate", "rollingUpdate": {"maxSurge": 1}})
            }),
            "spec.strategy.rollingUpdate".into(),
            "FieldValueForbidden",
        ),
        (
            "deploy",
            seed_with(|d| d["spec"]["revisionHistoryLimit"] = json!(-1)),
            "spec.revisionHistoryLimit".into(),
            "FieldValueInvalid",
        ),
        (
            "deploy",
            seed_with(|d| {
                d["spec"]["selector"] =
                    json!({"matchExpressions": [{"key": "app", "operator": "In"}]})
            }),
            "spec.selector.matchExpressions[0].values".into(),
            "FieldValueRequired",
        ),
        (
            "deploy",
            seed_with(
                |d| d["spec"]["selector"] = json!({"matchExpressions": [{"key": "app", "operator": "Exists", "values": ["x"]}]}),
            ),
            "spec.selector.matchExpressions[0].values".into(),
            "FieldValueForbidden",
        ),
        (
            "deploy",
            seed_with(|d| d["metadata"]["labels"] = json!({"bad key": "v"})),
            "metadata.labels".into(),
            "FieldValueInvalid",
        ),
        (
            "deploy",
            seed_with(|d| d["metadata"]["labels"] = json!({"ok": "-bad-value"})),
            "metadata.labels".into(),
            "FieldValueInvalid",
        ),
        (
            "deploy",
            seed_with(|d| d["metadata"]["annotations"] = json!({"a/b/c": "v"})),
            "metadata.annotations".into(),
            "FieldValueInvalid",
        ),
        (
            "deploy",
            seed_with(|d| d["spec"]["template"]["metadata"]["labels"]["bad/key/x"] = json!("v")),
            "spec.template.labels".into(),
            "FieldValueInvalid",
        ),
        (
            "deploy",
            seed_with(|d| d["metadata"]["name"] = json!("Nginx")),
            "metadata.name".into(),
            "FieldValueInvalid",
        ),
        (
            "deploy",
            seed_with(|d| d["metadata"]["namespace"] = json!("team.a")),
            "metadata.namespace".into(),
            "FieldValueInvalid",
        ),
        (
            "deploy",
            seed_with(|d| d["metadata"]["name"] = json!("a".repeat(254))),
            "metadata.name".into(),
            "FieldValueInvalid",
        ),
        (
            "sts",
            json!({"metadata": {"name": "web"}, "spec": {"podManagementPolicy": "Random", "selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "a", "image": "b"}]}}}}),
            "spec.podManagementPolicy".into(),
            "FieldValueInvalid",
        ),
        (
            "sts",
            json!({"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "a", "image": "b"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "www"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]}}),
            "spec.volumeClaimTemplates[0].spec.resources[storage]".into(),
            "FieldValueRequired",
        ),
        (
            "ds",
            json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "a"}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1}},
            "template": {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "a", "image": "b"}]}}}}),
            "spec.updateStrategy.rollingUpdate.maxSurge".into(),
            "FieldValueInvalid",
        ),
        (
            "rs",
            json!({"metadata": {"name": "r"}, "spec": {"replicas": -1, "selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "a", "image": "b"}]}}}}),
            "spec.replicas".into(),
            "FieldValueInvalid",
        ),
    ];
    for (r, obj, field, reason) in &cases {
        let errs = create(r, obj.clone());
        find(&errs, field, reason);
    }
    assert!(cases.len() >= 25);
}

#[test]
fn exact_messages_for_common_mistakes() {
    let errs = create(
        "deploy",
        seed_with(|d| container0(d)["ports"][0]["containerPort"] = json!(70000)),
    );
    assert_eq!(
        find(&errs, &format!("{C0}.ports[0].containerPort"), "FieldValueInvalid").message(),
        format!("{C0}.ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive")
    );
    let errs = create(
        "deploy",
        seed_with(|d| container0(d)["ports"][0]["protocol"] = json!("HTTP")),
    );
    assert_eq!(
        find(&errs, &format!("{C0}.ports[0].protocol"), "FieldValueNotSupported").message(),
        format!("{C0}.ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"")
    );
    let errs = create(
        "deploy",
        seed_with(|d| {
            container0(d)["resources"] = json!({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}})
        }),
    );
    assert_eq!(
        find(&errs, &format!("{C0}.resources.requests"), "FieldValueInvalid").message(),
        format!("{C0}.resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1")
    );
    let errs = create(
        "deploy",
        seed_with(|d| container0(d)["livenessProbe"] = json!({"periodSeconds": 5})),
    );
    assert_eq!(
        find(&errs, &format!("{C0}.livenessProbe"), "FieldValueRequired").message(),
        format!("{C0}.livenessProbe: Required value: must specify a handler type")
    );
    let errs = create(
        "deploy",
        seed_with(|d| container0(d)["name"] = json!("a.b")),
    );
    assert_eq!(
        find(&errs, &format!("{C0}.name"), "FieldValueInvalid").message(),
        format!("{C0}.name: Invalid value: \"a.b\": must not contain dots")
    );
    let errs = create(
        "deploy",
        seed_with(
            |d| d["spec"]["strategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}),
        ),
    );
    assert_eq!(
        find(&errs, "spec.strategy.rollingUpdate.maxUnavailable", "FieldValueInvalid").message(),
        "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0"
    );
}

#[test]
fn pod_and_batch_invalid_objects() {
    let errs = create("po", pod(json!([])));
    assert_eq!(
        find(&errs, "spec.containers", "FieldValueRequired").message(),
        "spec.containers: Required value"
    );

    let mut p = pod(json!([{"name": "a", "image": "b"}]));
    p["spec"]["restartPolicy"] = json!("Sometimes");
    let errs = create("po", p);
    assert_eq!(
        find(&errs, "spec.restartPolicy", "FieldValueNotSupported").message(),
        "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\""
    );

    let mut p = pod(json!([{"name": "a", "image": "b"}]));
    p["spec"]["initContainers"] =
        json!([{"name": "init", "image": "b", "readinessProbe": {"exec": {"command": ["true"]}}}]);
    find(
        &create("po", p),
        "spec.initContainers[0].readinessProbe",
        "FieldValueForbidden",
    );

    // A Job's pods may not restart Always, and Always is the default: it must be set.
    let job = json!({"metadata": {"name": "pi"}, "spec": {"template": {"spec": {"containers": [{"name": "pi", "image": "perl"}]}}}});
    let errs = create("job", job);
    assert_eq!(
        find(&errs, "spec.template.spec.restartPolicy", "FieldValueNotSupported").message(),
        "spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\""
    );
    let job = json!({"metadata": {"name": "pi"}, "spec": {"backoffLimit": -1, "template": {"spec": {"containers": [{"name": "pi", "image": "perl"}], "restartPolicy": "Never"}}}});
    find(
        &create("job", job),
        "spec.backoffLimit",
        "FieldValueInvalid",
    );
    let job = json!({"metadata": {"name": "pi"}, "spec": {"manualSelector": true, "selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "c"}}, "spec": {"containers": [{"name": "pi", "image": "perl"}], "restartPolicy": "Never"}}}});
    find(
        &create("job", job),
        "spec.template.metadata.labels",
        "FieldValueInvalid",
    );

    let cj = |schedule: &str, policy: &str| {
        json!({"metadata": {"name": "hello"}, "spec": {"schedule": schedule, "concurrencyPolicy": policy,
            "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "h", "image": "busybox"}], "restartPolicy": "OnFailure"}}}}}})
    };
    let errs = create("cj", cj("* * * *", "Allow"));
    assert_eq!(
        find(&errs, "spec.schedule", "FieldValueInvalid").message(),
        "spec.schedule: Invalid value: \"* * * *\": expected exactly 5 fields, found 4: [* * * *]"
    );
    find(
        &create("cj", cj("61 * * * *", "Allow")),
        "spec.schedule",
        "FieldValueInvalid",
    );
    find(
        &create("cj", cj("@hourly", "Sometimes")),
        "spec.concurrencyPolicy",
        "FieldValueNotSupported",
    );
    let mut long = cj("@daily", "Forbid");
    long["metadata"]["name"] = json!("c".repeat(53));
    find(&create("cj", long), "metadata.name", "FieldValueInvalid");
}

#[test]
fn core_and_autoscaling_invalid_objects() {
    let svc = |spec: Value| json!({"metadata": {"name": "web"}, "spec": spec});
    find(
        &create("svc", svc(json!({"ports": [{"port": 0}]}))),
        "spec.ports[0].port",
        "FieldValueInvalid",
    );
    find(
        &create("svc", svc(json!({"ports": [{"port": 80}, {"port": 81}]}))),
        "spec.ports[0].name",
        "FieldValueRequired",
    );
    find(
        &create(
            "svc",
            svc(json!({"ports": [{"name": "a", "port": 80}, {"name": "a", "port": 81}]})),
        ),
        "spec.ports[1].name",
        "FieldValueDuplicate",
    );
    find(
        &create(
            "svc",
            svc(json!({"type": "Magic", "ports": [{"port": 80}]})),
        ),
        "spec.type",
        "FieldValueNotSupported",
    );
    find(
        &create(
            "svc",
            svc(json!({"clusterIP": "10.0.0", "ports": [{"port": 80}]})),
        ),
        "spec.clusterIP",
        "FieldValueInvalid",
    );
    find(
        &create(
            "svc",
            svc(json!({"ports": [{"port": 80, "targetPort": "8080"}]})),
        ),
        "spec.ports[0].targetPort",
        "FieldValueInvalid",
    );
    find(
        &create("svc", svc(json!({}))),
        "spec.ports",
        "FieldValueRequired",
    );
    let mut bad_name = svc(json!({"ports": [{"port": 80}]}));
    bad_name["metadata"]["name"] = json!("1web");
    find(
        &create("svc", bad_name),
        "metadata.name",
        "FieldValueInvalid",
    );

    let errs = create("ns", json!({"metadata": {"name": "a.b"}}));
    assert_eq!(
        find(&errs, "metadata.name", "FieldValueInvalid").message(),
        "metadata.name: Invalid value: \"a.b\": must not contain dots"
    );
    find(
        &create(
            "no",
            json!({"metadata": {"name": "n", "namespace": "default"}}),
        ),
        "metadata.namespace",
        "FieldValueForbidden",
    );

    find(
        &create(
            "pv",
            json!({"metadata": {"name": "pv"}, "spec": {"accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/d"}}}),
        ),
        "spec.capacity",
        "FieldValueRequired",
    );
    find(
        &create(
            "pv",
            json!({"metadata": {"name": "pv"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteSometimes"], "hostPath": {"path": "/d"}}}),
        ),
        "spec.accessModes",
        "FieldValueNotSupported",
    );
    find(
        &create(
            "pvc",
            json!({"metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteOnce"]}}),
        ),
        "spec.resources[storage]",
        "FieldValueRequired",
    );
    let errs = create(
        "pvc",
        json!({"metadata": {"name": "c"}, "spec": {"resources": {"requests": {"storage": "1Gi"}}}}),
    );
    assert_eq!(
        find(&errs, "spec.accessModes", "FieldValueRequired").message(),
        "spec.accessModes: Required value: at least 1 access mode is required"
    );

    let hpa = |spec: Value| json!({"metadata": {"name": "h"}, "spec": spec});
    let target = json!({"kind": "Deployment", "name": "web"});
    find(
        &create(
            "hpa",
            hpa(json!({"scaleTargetRef": target, "minReplicas": 5, "maxReplicas": 2})),
        ),
        "spec.maxReplicas",
        "FieldValueInvalid",
    );
    find(
        &create(
            "hpa",
            hpa(json!({"scaleTargetRef": target, "minReplicas": 0, "maxReplicas": 2})),
        ),
        "spec.minReplicas",
        "FieldValueInvalid",
    );
    find(
        &create(
            "hpa",
            hpa(json!({"scaleTargetRef": {"kind": "Deployment"}, "maxReplicas": 2})),
        ),
        "spec.scaleTargetRef.name",
        "FieldValueRequired",
    );
    find(
        &create(
            "hpa",
            hpa(json!({"scaleTargetRef": target, "maxReplicas": 2,
        "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 0}}}]})),
        ),
        "spec.metrics[0].resource.target.averageUtilization",
        "FieldValueInvalid",
    );
    find(
        &create(
            "hpa",
            hpa(
                json!({"scaleTargetRef": target, "maxReplicas": 2, "metrics": [{"type": "Resource"}]}),
            ),
        ),
        "spec.metrics[0].resource",
        "FieldValueRequired",
    );
    // A target type whose field is missing (AverageValue with a utilization).
    let errs = create(
        "hpa",
        hpa(json!({"scaleTargetRef": target, "maxReplicas": 2,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "AverageValue", "averageUtilization": 50}}}]})),
    );
    assert_eq!(
        find(
            &errs,
            "spec.metrics[0].resource.target.averageValue",
            "FieldValueRequired"
        )
        .message(),
        "spec.metrics[0].resource.target.averageValue: Required value: must set either a target value for metric or a per-pod target"
    );
}

#[test]
fn immutable_fields_on_update() {
    let errs = update(
        "deploy",
        seed(),
        seed_with(|d| {
            d["spec"]["selector"] = json!({"matchLabels": {"app": "web"}});
            d["spec"]["template"]["metadata"]["labels"] = json!({"app": "web"});
        }),
    );
    assert_eq!(
        find(&errs, "spec.selector", "FieldValueInvalid").message(),
        "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"
    );
    assert!(update(
        "deploy",
        seed(),
        seed_with(|d| container0(d)["image"] = json!("nginx:1.9.1"))
    )
    .is_empty());
    assert!(update(
        "deploy",
        seed(),
        seed_with(|d| d["spec"]["replicas"] = json!(5))
    )
    .is_empty());
    find(
        &update(
            "deploy",
            seed(),
            seed_with(|d| d["metadata"]["namespace"] = json!("other")),
        ),
        "metadata.namespace",
        "FieldValueInvalid",
    );

    let sts = |svc: &str, replicas: i64| {
        json!({"metadata": {"name": "web"}, "spec": {"serviceName": svc, "replicas": replicas, "selector": {"matchLabels": {"app": "a"}},
        "template": {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "a", "image": "b"}]}}}})
    };
    assert!(update("sts", sts("nginx", 1), sts("nginx", 3)).is_empty());
    let errs = update("sts", sts("nginx", 1), sts("other", 1));
    assert!(find(&errs, "spec", "FieldValueForbidden")
        .message()
        .starts_with(
            "spec: Forbidden: updates to statefulset spec for fields other than 'replicas'"
        ));

    let job = |image: &str| json!({"metadata": {"name": "pi"}, "spec": {"template": {"spec": {"containers": [{"name": "pi", "image": image}], "restartPolicy": "Never"}}}});
    find(
        &update("job", job("perl"), job("perl:5")),
        "spec.template",
        "FieldValueInvalid",
    );

    let p = |name: &str, image: &str| pod(json!([{"name": name, "image": image}]));
    assert!(
        update("po", p("a", "nginx:1"), p("a", "nginx:2")).is_empty(),
        "image updates are allowed"
    );
    let errs = update("po", p("a", "nginx:1"), p("b", "nginx:1"));
    let e = find(&errs, "spec", "FieldValueForbidden");
    assert!(e.message().starts_with("spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"), "{}", e.message());
    assert!(e.message().contains("spec.containers[0].name"));

    let svc = |ip: &str| json!({"metadata": {"name": "web"}, "spec": {"clusterIP": ip, "ports": [{"port": 80}]}});
    find(
        &update("svc", svc("10.0.0.10"), svc("10.0.0.11")),
        "spec.clusterIP",
        "FieldValueInvalid",
    );
    assert!(
        update("svc", svc("10.0.0.10"), svc("")).is_empty(),
        "an omitted clusterIP keeps the old one"
    );
}

#[test]
fn normalize_drops_unknown_fields_and_reports_type_errors() {
    let res = by_name("deploy").unwrap();
    let out = normalize(
        res,
        seed_with(|d| {
            d["spec"]["bogus"] = json!(1);
            container0(d)["colour"] = json!("blue");
        }),
    )
    .unwrap();
    assert!(out["spec"].get("bogus").is_none());
    assert!(out["spec"]["template"]["spec"]["containers"][0]
        .get("colour")
        .is_none());
    assert_eq!(out["spec"]["replicas"], 3);
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"],
        80
    );

    let err = normalize(res, seed_with(|d| d["spec"]["replicas"] = json!("three"))).unwrap_err();
    assert!(
        err.starts_with("Deployment in version \"v1\" cannot be handled as a Deployment: spec.replicas: invalid type: string \"three\""),
        "{err}"
    );
    let err = normalize(
        res,
        seed_with(|d| container0(d)["ports"][0]["containerPort"] = json!("eighty")),
    )
    .unwrap_err();
    assert!(
        err.contains("spec.template.spec.containers[0].ports[0].containerPort"),
        "{err}"
    );

    // Absent required fields stay absent, so validation calls them required.
    let out = normalize(
        res,
        seed_with(|d| {
            d["spec"].as_object_mut().unwrap().remove("selector");
        }),
    )
    .unwrap();
    assert!(out["spec"].get("selector").is_none(), "{out}");

    // Numbers for quantities become strings, as Kubernetes stores them.
    let out = normalize(
        by_name("po").unwrap(),
        pod(json!([{"name": "a", "image": "b", "resources": {"limits": {"cpu": 1}}}])),
    )
    .unwrap();
    assert_eq!(
        out["spec"]["containers"][0]["resources"]["limits"]["cpu"],
        "1"
    );

    assert!(
        normalize(res, json!({"apiVersion": "v1", "kind": "Deployment"}))
            .unwrap_err()
            .contains("does not match")
    );
    let filled = normalize(res, json!({"metadata": {"name": "x"}})).unwrap();
    assert_eq!(filled["apiVersion"], "apps/v1");
    assert_eq!(filled["kind"], "Deployment");
}

#[test]
fn storage_classes() {
    let sc = |extra: Value| {
        let mut v = json!({"metadata": {"name": "fast"}, "provisioner": "bosun.io/local-path"});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    };
    assert_eq!(create("sc", sc(json!({}))), vec![]);
    find(
        &create("sc", json!({"metadata": {"name": "fast"}})),
        "provisioner",
        "FieldValueRequired",
    );
    find(
        &create("sc", sc(json!({"reclaimPolicy": "Recycle"}))),
        "reclaimPolicy",
        "FieldValueNotSupported",
    );
    find(
        &create("sc", sc(json!({"volumeBindingMode": "Later"}))),
        "volumeBindingMode",
        "FieldValueNotSupported",
    );
    find(
        &create("sc", sc(json!({"provisioner": "not a name!"}))),
        "provisioner",
        "FieldValueInvalid",
    );
    let errs = update(
        "sc",
        sc(json!({})),
        sc(json!({"provisioner": "other.io/x", "volumeBindingMode": "WaitForFirstConsumer"})),
    );
    find(&errs, "provisioner", "FieldValueForbidden");
    find(&errs, "volumeBindingMode", "FieldValueInvalid");
    // What defaulting fills in.
    let res = by_name("sc").unwrap();
    let mut v = normalize(res, sc(json!({}))).unwrap();
    apply_defaults(res, &mut v);
    assert_eq!(
        (&v["reclaimPolicy"], &v["volumeBindingMode"]),
        (&json!("Delete"), &json!("Immediate"))
    );
}
