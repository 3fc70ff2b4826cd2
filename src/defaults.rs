//! Kubernetes' defaulting for the fields users leave out (the `SetDefaults_*`
//! functions of the built-in API groups). Runs after
//! [`crate::validation::normalize`] and before [`crate::validation::validate`].

use serde_json::{json, Map, Value};

use crate::resources::ResourceInfo;

mod csi;
mod flowcontrol;
mod pod;
mod replication;
mod webhooks;

pub use pod::default_pull_policy;
use pod::{default_pod_spec, default_template};

/// Fills in the defaults of `obj` for its resource.
pub fn apply_defaults(res: &ResourceInfo, obj: &mut Value) {
    let kind = res.kind;
    let version = res.version;
    let group = res.group;
    let Some(root) = obj.as_object_mut() else {
        return;
    };
    match (group, kind) {
        ("", "Pod") => {
            let spec = object_at(root, "spec");
            default_pod_spec(spec);
            // A container with limits but no requests requests its limits.
            for list in ["containers", "initContainers"] {
                for c in array_at(spec, list) {
                    let Some(res) = c.get_mut("resources").and_then(Value::as_object_mut) else {
                        continue;
                    };
                    let Some(limits) = res.get("limits").and_then(Value::as_object).cloned() else {
                        continue;
                    };
                    let requests = object_at(res, "requests");
                    for (k, v) in limits {
                        requests.entry(k).or_insert(v);
                    }
                }
            }
        }
        ("apps", "Deployment") => {
            let spec = object_at(root, "spec");
            set(spec, "replicas", json!(1));
            let strategy = object_at(spec, "strategy");
            set_str(strategy, "type", "RollingUpdate");
            if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
                let ru = object_at(strategy, "rollingUpdate");
                set(ru, "maxUnavailable", json!("25%"));
                set(ru, "maxSurge", json!("25%"));
            }
            set(spec, "revisionHistoryLimit", json!(10));
            set(spec, "progressDeadlineSeconds", json!(600));
            default_template(spec);
        }
        ("", "ReplicationController") => replication::default_replication_controller(root),
        ("", "PodTemplate") => replication::default_pod_template(root),
        ("apps", "ReplicaSet") => {
            let spec = object_at(root, "spec");
            set(spec, "replicas", json!(1));
            default_template(spec);
        }
        ("apps", "StatefulSet") => {
            let spec = object_at(root, "spec");
            set(spec, "replicas", json!(1));
            set_str(spec, "podManagementPolicy", "OrderedReady");
            let strategy = object_at(spec, "updateStrategy");
            set_str(strategy, "type", "RollingUpdate");
            if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
                set(object_at(strategy, "rollingUpdate"), "partition", json!(0));
            }
            set(spec, "revisionHistoryLimit", json!(10));
            let retention = object_at(spec, "persistentVolumeClaimRetentionPolicy");
            set_str(retention, "whenDeleted", "Retain");
            set_str(retention, "whenScaled", "Retain");
            // Claim templates are left as written (the claims made from
            // them get the PVC defaults), so re-applying a manifest is a
            // no-op.
            default_template(spec);
        }
        ("apps", "DaemonSet") => {
            let spec = object_at(root, "spec");
            let strategy = object_at(spec, "updateStrategy");
            set_str(strategy, "type", "RollingUpdate");
            if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
                let ru = object_at(strategy, "rollingUpdate");
                set(ru, "maxUnavailable", json!(1));
                set(ru, "maxSurge", json!(0));
            }
            set(spec, "revisionHistoryLimit", json!(10));
            default_template(spec);
        }
        ("batch", "Job") => {
            let spec = object_at(root, "spec");
            if is_unset(spec.get("completions")) && is_unset(spec.get("parallelism")) {
                spec.insert("completions".into(), json!(1));
            }
            set(spec, "parallelism", json!(1));
            set(
                spec,
                "backoffLimit",
                json!(if is_unset(spec.get("backoffLimitPerIndex")) {
                    6
                } else {
                    i32::MAX
                }),
            );
            set(spec, "completionMode", json!("NonIndexed"));
            set(spec, "suspend", json!(false));
            let replacement = if is_unset(spec.get("podFailurePolicy")) {
                "TerminatingOrFailed"
            } else {
                "Failed"
            };
            set(spec, "podReplacementPolicy", json!(replacement));
            default_template(spec);
            // A Job without labels takes its pod template's.
            let tpl_labels = spec
                .get("template")
                .and_then(|t| t.get("metadata"))
                .and_then(|m| m.get("labels"))
                .filter(|l| l.is_object())
                .cloned();
            if let Some(labels) = tpl_labels {
                let meta = object_at(root, "metadata");
                let empty = meta
                    .get("labels")
                    .and_then(Value::as_object)
                    .is_none_or(Map::is_empty);
                if empty {
                    meta.insert("labels".into(), labels);
                }
            }
        }
        ("batch", "CronJob") => {
            let spec = object_at(root, "spec");
            set_str(spec, "concurrencyPolicy", "Allow");
            set(spec, "suspend", json!(false));
            set(spec, "successfulJobsHistoryLimit", json!(3));
            set(spec, "failedJobsHistoryLimit", json!(1));
            default_template(object_at(object_at(spec, "jobTemplate"), "spec"));
        }
        ("", "Service") => {
            let spec = object_at(root, "spec");
            set_str(spec, "sessionAffinity", "None");
            if spec.get("sessionAffinity").and_then(Value::as_str) == Some("None") {
                spec.remove("sessionAffinityConfig");
            }
            set_str(spec, "type", "ClusterIP");
            for port in array_at(spec, "ports") {
                set_str(port, "protocol", "TCP");
                let unset = match port.get("targetPort") {
                    None | Some(Value::Null) => true,
                    Some(Value::Number(n)) => n.as_i64() == Some(0),
                    Some(Value::String(s)) => s.is_empty(),
                    _ => false,
                };
                if unset {
                    if let Some(p) = port.get("port").cloned() {
                        port.insert("targetPort".into(), p);
                    }
                }
            }
            let ty = spec
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if ty == "NodePort" || ty == "LoadBalancer" {
                set_str(spec, "externalTrafficPolicy", "Cluster");
            }
            if ty != "ExternalName" {
                set_str(spec, "internalTrafficPolicy", "Cluster");
            }
            if ty == "LoadBalancer" {
                set(spec, "allocateLoadBalancerNodePorts", json!(true));
            }
        }
        ("discovery.k8s.io", "EndpointSlice") => {
            // SetDefaults_EndpointPort: an unnamed port is named "", TCP by default.
            for port in array_at(root, "ports") {
                set(port, "name", json!(""));
                set_str(port, "protocol", "TCP");
            }
        }
        ("networking.k8s.io", "NetworkPolicy") => {
            // SetDefaults_NetworkPolicy: Ingress always, Egress when there
            // are egress rules; SetDefaults_NetworkPolicyPort: TCP. The pod
            // selector is a value in Go, so `{}` when left out.
            let spec = object_at(root, "spec");
            set(spec, "podSelector", json!({}));
            for dir in ["ingress", "egress"] {
                for rule in array_at(spec, dir) {
                    for port in array_at(rule, "ports") {
                        set_str(port, "protocol", "TCP");
                    }
                }
            }
            let no_types = spec
                .get("policyTypes")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty);
            if no_types {
                let egress = spec
                    .get("egress")
                    .and_then(Value::as_array)
                    .is_some_and(|e| !e.is_empty());
                let mut types = vec![json!("Ingress")];
                if egress {
                    types.push(json!("Egress"));
                }
                spec.insert("policyTypes".into(), Value::Array(types));
            }
        }
        ("", "PersistentVolume") => {
            let spec = object_at(root, "spec");
            set_str(spec, "persistentVolumeReclaimPolicy", "Retain");
            set_str(spec, "volumeMode", "Filesystem");
        }
        ("", "PersistentVolumeClaim") => {
            set_str(object_at(root, "spec"), "volumeMode", "Filesystem");
        }
        // SetDefaults_LimitRangeItem: a Container item's default limit is
        // its max, its default request its default limit, else its min.
        ("", "LimitRange") => {
            for item in array_at(object_at(root, "spec"), "limits") {
                if item.get("type").and_then(Value::as_str) != Some("Container") {
                    continue;
                }
                let list = |item: &Map<String, Value>, k: &str| {
                    item.get(k)
                        .and_then(Value::as_object)
                        .cloned()
                        .unwrap_or_default()
                };
                let (max, min) = (list(item, "max"), list(item, "min"));
                let mut default = list(item, "default");
                for (k, v) in max {
                    default.entry(k).or_insert(v);
                }
                let mut request = list(item, "defaultRequest");
                for (k, v) in default.iter().chain(min.iter()) {
                    request.entry(k.clone()).or_insert(v.clone());
                }
                if !default.is_empty() {
                    item.insert("default".into(), Value::Object(default));
                }
                if !request.is_empty() {
                    item.insert("defaultRequest".into(), Value::Object(request));
                }
            }
        }
        ("storage.k8s.io", "StorageClass") => {
            set_str(root, "reclaimPolicy", "Delete");
            set_str(root, "volumeBindingMode", "Immediate");
        }
        ("autoscaling", "HorizontalPodAutoscaler") => {
            let spec = object_at(root, "spec");
            set(spec, "minReplicas", json!(1));
            if version != "v1"
                && spec
                    .get("metrics")
                    .and_then(Value::as_array)
                    .is_none_or(Vec::is_empty)
            {
                spec.insert(
                    "metrics".into(),
                    json!([{
                        "type": "Resource",
                        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}
                    }]),
                );
            }
        }
        // SetDefaults_Secret.
        ("", "Secret") => set_str(root, "type", "Opaque"),
        // SetDefaults_IngressClass: parameters are cluster-scoped unless said.
        ("networking.k8s.io", "IngressClass") => {
            let spec = object_at(root, "spec");
            if let Some(Value::Object(p)) = spec.get_mut("parameters") {
                set_str(p, "scope", "Cluster");
            }
        }
        // SetDefaults_PriorityClass.
        ("scheduling.k8s.io", "PriorityClass") => {
            // `value` is a plain int32 upstream: written even when 0.
            set(root, "value", json!(0));
            set_str(root, "preemptionPolicy", "PreemptLowerPriority");
        }
        // SetDefaults_ServiceReference (apiregistration): port 443.
        ("apiregistration.k8s.io", "APIService") => {
            let spec = object_at(root, "spec");
            if let Some(Value::Object(service)) = spec.get_mut("service") {
                set(service, "port", json!(443));
            }
        }
        // SetDefaults_Subject: users and groups are RBAC's.
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            for s in array_at(root, "subjects") {
                if matches!(
                    s.get("kind").and_then(Value::as_str),
                    Some("User" | "Group")
                ) {
                    set_str(s, "apiGroup", "rbac.authorization.k8s.io");
                }
            }
        }
        ("storage.k8s.io", "CSIDriver") => csi::default_csi_driver(root),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => {
            webhooks::default_policy(root)
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => {
            webhooks::default_policy_binding(root)
        }
        ("flowcontrol.apiserver.k8s.io", "FlowSchema") => flowcontrol::default_flow_schema(root),
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration") => {
            flowcontrol::default_priority_level(root)
        }
        ("admissionregistration.k8s.io", k) => {
            webhooks::default_webhooks(root, k == "MutatingWebhookConfiguration")
        }
        _ => {}
    }
}

fn is_unset(v: Option<&Value>) -> bool {
    v.is_none_or(Value::is_null)
}

/// Sets `key` when absent or null.
fn set(map: &mut Map<String, Value>, key: &str, value: Value) {
    if is_unset(map.get(key)) {
        map.insert(key.to_string(), value);
    }
}

/// Sets a string `key` when absent, null or empty.
fn set_str(map: &mut Map<String, Value>, key: &str, value: &str) {
    let empty = match map.get(key) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        _ => false,
    };
    if empty {
        map.insert(key.to_string(), Value::String(value.to_string()));
    }
}

/// Sets a number `key` when absent, null or 0 (Go's zero value).
fn set_nonzero(map: &mut Map<String, Value>, key: &str, value: i64) {
    let zero = match map.get(key) {
        None | Some(Value::Null) => true,
        Some(Value::Number(n)) => n.as_i64() == Some(0),
        _ => false,
    };
    if zero {
        map.insert(key.to_string(), json!(value));
    }
}

/// The object at `key`, created when absent or not an object.
fn object_at<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let slot = map
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut().expect("just made an object")
}

/// The objects in the list at `key` (none when absent).
fn array_at<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    map.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flat_map(|a| a.iter_mut())
        .filter_map(Value::as_object_mut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::by_name;

    fn seed_deployment() -> Value {
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

    #[test]
    fn seed_deployment_defaults_field_by_field() {
        let mut d = seed_deployment();
        apply_defaults(by_name("deploy").unwrap(), &mut d);
        let spec = &d["spec"];
        assert_eq!(spec["replicas"], 3, "a set value is kept");
        assert_eq!(spec["strategy"]["type"], "RollingUpdate");
        assert_eq!(spec["strategy"]["rollingUpdate"]["maxUnavailable"], "25%");
        assert_eq!(spec["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        assert_eq!(spec["revisionHistoryLimit"], 10);
        assert_eq!(spec["progressDeadlineSeconds"], 600);
        let pod = &spec["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Always");
        assert_eq!(pod["dnsPolicy"], "ClusterFirst");
        assert_eq!(pod["terminationGracePeriodSeconds"], 30);
        assert_eq!(pod["schedulerName"], "default-scheduler");
        assert_eq!(pod["securityContext"], json!({}));
        assert_eq!(pod["enableServiceLinks"], true);
        let c = &pod["containers"][0];
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["terminationMessagePolicy"], "File");
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        assert_eq!(c["ports"][0]["containerPort"], 80);
        assert_eq!(c["resources"], json!({}));
        assert_eq!(
            d["metadata"]["labels"],
            json!({"app": "nginx"}),
            "metadata untouched"
        );
        // Defaulting twice changes nothing.
        let once = d.clone();
        apply_defaults(by_name("deploy").unwrap(), &mut d);
        assert_eq!(d, once);
    }

    #[test]
    fn missing_replicas_and_recreate_strategy() {
        let mut d = seed_deployment();
        d["spec"].as_object_mut().unwrap().remove("replicas");
        d["spec"]["strategy"] = json!({"type": "Recreate"});
        apply_defaults(by_name("deploy").unwrap(), &mut d);
        assert_eq!(d["spec"]["replicas"], 1);
        assert!(d["spec"]["strategy"].get("rollingUpdate").is_none());
    }

    #[test]
    fn pull_policy_follows_the_tag() {
        assert_eq!(default_pull_policy("nginx"), "Always");
        assert_eq!(default_pull_policy("nginx:latest"), "Always");
        assert_eq!(default_pull_policy("nginx:1.25"), "IfNotPresent");
        assert_eq!(default_pull_policy("localhost:5000/app"), "Always");
        assert_eq!(default_pull_policy("localhost:5000/app:v1"), "IfNotPresent");
        assert_eq!(default_pull_policy("busybox@sha256:abc"), "IfNotPresent");
    }

    #[test]
    fn pod_probes_and_limits() {
        let mut pod = json!({"spec": {"containers": [{
            "name": "a", "image": "busybox",
            "livenessProbe": {"httpGet": {"port": 80}},
            "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 5},
            "resources": {"limits": {"cpu": "500m"}}
        }]}});
        apply_defaults(by_name("po").unwrap(), &mut pod);
        let c = &pod["spec"]["containers"][0];
        assert_eq!(c["imagePullPolicy"], "Always");
        let live = &c["livenessProbe"];
        assert_eq!(live["timeoutSeconds"], 1);
        assert_eq!(live["periodSeconds"], 10);
        assert_eq!(live["successThreshold"], 1);
        assert_eq!(live["failureThreshold"], 3);
        assert_eq!(live["httpGet"]["path"], "/");
        assert_eq!(live["httpGet"]["scheme"], "HTTP");
        assert_eq!(c["readinessProbe"]["periodSeconds"], 5);
        assert_eq!(
            c["resources"]["requests"]["cpu"], "500m",
            "requests copy limits"
        );
    }

    #[test]
    fn workload_kinds() {
        let tpl = json!({"spec": {"containers": [{"name": "a", "image": "busybox"}]}});
        let mut sts = json!({"spec": {"template": tpl.clone(), "volumeClaimTemplates": [{"metadata": {"name": "d"}, "spec": {}}]}});
        apply_defaults(by_name("sts").unwrap(), &mut sts);
        assert_eq!(sts["spec"]["replicas"], 1);
        assert_eq!(sts["spec"]["podManagementPolicy"], "OrderedReady");
        assert_eq!(
            sts["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        );
        assert_eq!(sts["spec"]["revisionHistoryLimit"], 10);
        assert!(sts["spec"]["volumeClaimTemplates"][0]["spec"]
            .get("volumeMode")
            .is_none());

        let mut ds = json!({"spec": {"template": tpl.clone()}});
        apply_defaults(by_name("ds").unwrap(), &mut ds);
        assert_eq!(
            ds["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
        );
        assert_eq!(ds["spec"]["revisionHistoryLimit"], 10);

        let mut rs = json!({"spec": {"template": tpl.clone()}});
        apply_defaults(by_name("rs").unwrap(), &mut rs);
        assert_eq!(rs["spec"]["replicas"], 1);

        let mut job = json!({"spec": {"template": {"metadata": {"labels": {"app": "pi"}}, "spec": {"containers": [{"name": "pi", "image": "perl"}], "restartPolicy": "Never"}}}});
        apply_defaults(by_name("job").unwrap(), &mut job);
        assert_eq!(job["spec"]["completions"], 1);
        assert_eq!(job["spec"]["parallelism"], 1);
        assert_eq!(job["spec"]["backoffLimit"], 6);
        assert_eq!(job["spec"]["completionMode"], "NonIndexed");
        assert_eq!(job["spec"]["suspend"], false);
        assert_eq!(
            job["spec"]["template"]["spec"]["restartPolicy"], "Never",
            "explicit value kept"
        );
        assert_eq!(job["metadata"]["labels"], json!({"app": "pi"}));

        let mut parallel = json!({"spec": {"parallelism": 3, "template": tpl.clone()}});
        apply_defaults(by_name("job").unwrap(), &mut parallel);
        assert!(
            parallel["spec"].get("completions").is_none(),
            "work-queue jobs keep completions unset"
        );

        let mut cj = json!({"spec": {"schedule": "*/1 * * * *", "jobTemplate": {"spec": {"template": tpl.clone()}}}});
        apply_defaults(by_name("cj").unwrap(), &mut cj);
        assert_eq!(cj["spec"]["concurrencyPolicy"], "Allow");
        assert_eq!(cj["spec"]["suspend"], false);
        assert_eq!(cj["spec"]["successfulJobsHistoryLimit"], 3);
        assert_eq!(cj["spec"]["failedJobsHistoryLimit"], 1);
        assert_eq!(
            cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"],
            "Always"
        );
        assert!(cj["spec"]["jobTemplate"]["spec"]
            .get("backoffLimit")
            .is_none());
    }

    #[test]
    fn services_volumes_hpa() {
        let mut svc = json!({"spec": {"selector": {"app": "web"}, "ports": [{"port": 80}, {"port": 443, "targetPort": "https"}]}});
        apply_defaults(by_name("svc").unwrap(), &mut svc);
        assert_eq!(svc["spec"]["type"], "ClusterIP");
        assert_eq!(svc["spec"]["sessionAffinity"], "None");
        assert_eq!(svc["spec"]["ports"][0]["protocol"], "TCP");
        assert_eq!(svc["spec"]["ports"][0]["targetPort"], 80);
        assert_eq!(svc["spec"]["ports"][1]["targetPort"], "https");

        let mut pv = json!({"spec": {"capacity": {"storage": "1Gi"}}});
        apply_defaults(by_name("pv").unwrap(), &mut pv);
        assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");
        assert_eq!(pv["spec"]["volumeMode"], "Filesystem");

        let mut pvc = json!({"spec": {}});
        apply_defaults(by_name("pvc").unwrap(), &mut pvc);
        assert_eq!(pvc["spec"]["volumeMode"], "Filesystem");

        let mut hpa = json!({"spec": {"maxReplicas": 5}});
        apply_defaults(by_name("hpa").unwrap(), &mut hpa);
        assert_eq!(hpa["spec"]["minReplicas"], 1);
        assert_eq!(
            hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            80
        );
    }
}
