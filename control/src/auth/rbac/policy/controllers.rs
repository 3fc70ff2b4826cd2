//! The controllers' roles: upstream's `system:controller:*` roles for the
//! controllers bosun runs, each bound to the controller's service account
//! in kube-system, plus what bosun's controllers do beyond them.

use k8s_openapi::api::rbac::v1::PolicyRule;

use super::build::{events, rule, READ};
use crate::auth::rbac::GROUP as RBAC;

/// Each controller bosun runs (its `--controllers` name), the service
/// account it acts as, and that account's rules.
pub fn controllers() -> Vec<(&'static str, &'static str, Vec<PolicyRule>)> {
    let mut all = vec![
        (
            "replicaset",
            "replicaset-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update"],
                    &["apps"],
                    &["replicasets"],
                ),
                rule(
                    &["update"],
                    &["apps"],
                    &["replicasets/status", "replicasets/finalizers"],
                ),
                rule(
                    &["list", "watch", "patch", "create", "delete"],
                    &[""],
                    &["pods"],
                ),
                events(),
            ],
        ),
        (
            "replicationcontroller",
            "replication-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update"],
                    &[""],
                    &["replicationcontrollers"],
                ),
                rule(
                    &["update"],
                    &[""],
                    &[
                        "replicationcontrollers/status",
                        "replicationcontrollers/finalizers",
                    ],
                ),
                rule(
                    &["list", "watch", "patch", "create", "delete"],
                    &[""],
                    &["pods"],
                ),
                events(),
            ],
        ),
        (
            "deployment",
            "deployment-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update"],
                    &["apps"],
                    &["deployments"],
                ),
                rule(
                    &["update"],
                    &["apps"],
                    &["deployments/status", "deployments/finalizers"],
                ),
                rule(
                    &[
                        "get", "list", "watch", "create", "update", "patch", "delete",
                    ],
                    &["apps"],
                    &["replicasets"],
                ),
                rule(&["get", "list", "watch", "update"], &[""], &["pods"]),
                events(),
            ],
        ),
        (
            "statefulset",
            "statefulset-controller",
            vec![
                rule(&["list", "watch"], &[""], &["pods"]),
                rule(READ, &["apps"], &["statefulsets"]),
                rule(
                    &["update"],
                    &["apps"],
                    &["statefulsets/status", "statefulsets/finalizers"],
                ),
                rule(
                    &["get", "create", "delete", "update", "patch"],
                    &[""],
                    &["pods"],
                ),
                rule(
                    &[
                        "get", "create", "delete", "update", "patch", "list", "watch",
                    ],
                    &["apps"],
                    &["controllerrevisions"],
                ),
                rule(
                    &["get", "create", "list", "watch", "update", "delete"],
                    &[""],
                    &["persistentvolumeclaims"],
                ),
                rule(&["update"], &[""], &["pods/finalizers"]),
                events(),
            ],
        ),
        (
            "daemonset",
            "daemon-set-controller",
            vec![
                rule(READ, &["apps"], &["daemonsets"]),
                rule(
                    &["update"],
                    &["apps"],
                    &["daemonsets/status", "daemonsets/finalizers"],
                ),
                rule(&["list", "watch"], &[""], &["nodes"]),
                rule(
                    &["list", "watch", "create", "delete", "patch"],
                    &[""],
                    &["pods"],
                ),
                rule(&["create"], &[""], &["pods/binding"]),
                rule(
                    &[
                        "get", "list", "watch", "create", "delete", "update", "patch",
                    ],
                    &["apps"],
                    &["controllerrevisions"],
                ),
                events(),
            ],
        ),
        (
            "job",
            "job-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update", "patch"],
                    &["batch"],
                    &["jobs"],
                ),
                rule(&["update"], &["batch"], &["jobs/status", "jobs/finalizers"]),
                rule(
                    &["list", "watch", "create", "delete", "patch"],
                    &[""],
                    &["pods"],
                ),
                events(),
            ],
        ),
        (
            "cronjob",
            "cronjob-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update"],
                    &["batch"],
                    &["cronjobs"],
                ),
                rule(
                    &[
                        "get", "list", "watch", "create", "update", "delete", "patch",
                    ],
                    &["batch"],
                    &["jobs"],
                ),
                rule(
                    &["update"],
                    &["batch"],
                    &["cronjobs/status", "cronjobs/finalizers"],
                ),
                rule(&["list", "watch", "delete"], &[""], &["pods"]),
                events(),
            ],
        ),
        (
            "horizontalpodautoscaling",
            "horizontal-pod-autoscaler",
            vec![
                rule(READ, &["autoscaling"], &["horizontalpodautoscalers"]),
                rule(
                    &["update"],
                    &["autoscaling"],
                    &["horizontalpodautoscalers/status"],
                ),
                rule(&["get", "update"], &["*"], &["*/scale"]),
                rule(&["list", "watch"], &[""], &["pods"]),
                rule(&["list", "watch"], &["metrics.k8s.io"], &["pods"]),
                rule(
                    READ,
                    &["custom.metrics.k8s.io", "external.metrics.k8s.io"],
                    &["*"],
                ),
                events(),
            ],
        ),
        (
            "volumebinding",
            "persistent-volume-binder",
            vec![
                rule(
                    &["get", "list", "watch", "update", "create", "delete"],
                    &[""],
                    &["persistentvolumes"],
                ),
                rule(&["update"], &[""], &["persistentvolumes/status"]),
                rule(
                    &["get", "list", "watch", "update"],
                    &[""],
                    &["persistentvolumeclaims"],
                ),
                rule(&["update"], &[""], &["persistentvolumeclaims/status"]),
                rule(
                    &["list", "watch", "get", "create", "delete"],
                    &[""],
                    &["pods"],
                ),
                rule(READ, &["storage.k8s.io"], &["storageclasses"]),
                rule(&["list", "watch"], &[""], &["nodes"]),
                events(),
            ],
        ),
        (
            "endpoints",
            "endpoint-controller",
            vec![
                rule(READ, &[""], &["services", "pods"]),
                rule(
                    &["get", "list", "watch", "create", "update", "delete"],
                    &[""],
                    &["endpoints"],
                ),
                rule(&["create"], &[""], &["endpoints/restricted"]),
                events(),
            ],
        ),
        (
            "endpointslice",
            "endpointslice-controller",
            vec![
                rule(READ, &[""], &["services", "pods", "nodes"]),
                rule(&["update"], &[""], &["services/finalizers"]),
                rule(
                    &["get", "list", "watch", "create", "update", "delete"],
                    &["discovery.k8s.io"],
                    &["endpointslices"],
                ),
                events(),
            ],
        ),
        ("nodeipam", "node-controller", node_controller_rules()),
        ("nodelifecycle", "node-controller", node_controller_rules()),
        ("tainteviction", "node-controller", node_controller_rules()),
        (
            "podgc",
            "pod-garbage-collector",
            vec![
                rule(&["list", "watch", "delete"], &[""], &["pods"]),
                rule(READ, &[""], &["nodes"]),
                rule(&["patch"], &[""], &["pods/status"]),
            ],
        ),
        (
            "namespace",
            "namespace-controller",
            vec![
                rule(&["get", "list", "watch", "delete"], &[""], &["namespaces"]),
                rule(
                    &["update"],
                    &[""],
                    &["namespaces/finalize", "namespaces/status"],
                ),
                rule(
                    &["get", "list", "watch", "delete", "deletecollection"],
                    &["*"],
                    &["*"],
                ),
            ],
        ),
        (
            "serviceaccount",
            "service-account-controller",
            vec![rule(&["create"], &[""], &["serviceaccounts"]), events()],
        ),
        (
            "root-ca-cert-publisher",
            "root-ca-cert-publisher",
            vec![
                rule(&["create", "update"], &[""], &["configmaps"]),
                events(),
            ],
        ),
        (
            "garbagecollector",
            "generic-garbage-collector",
            vec![
                rule(
                    &["get", "list", "watch", "patch", "update", "delete"],
                    &["*"],
                    &["*"],
                ),
                events(),
            ],
        ),
        (
            "clusterrole-aggregation",
            "clusterrole-aggregation-controller",
            vec![rule(
                &["escalate", "get", "list", "watch", "update", "patch"],
                &[RBAC],
                &["clusterroles"],
            )],
        ),
        (
            "resourcequota",
            "resourcequota-controller",
            vec![
                // Quota may count any kind (`count/<resource>`): it lists everything.
                rule(&["list", "watch"], &["*"], &["*"]),
                rule(&["update"], &[""], &["resourcequotas/status"]),
                events(),
            ],
        ),
        (
            "disruption",
            "disruption-controller",
            vec![
                rule(READ, &["extensions", "apps"], &["deployments"]),
                rule(READ, &["apps", "extensions"], &["replicasets"]),
                rule(READ, &[""], &["replicationcontrollers"]),
                rule(READ, &["policy"], &["poddisruptionbudgets"]),
                rule(READ, &["apps"], &["statefulsets"]),
                rule(&["update"], &["policy"], &["poddisruptionbudgets/status"]),
                rule(&["get"], &["*"], &["*/scale"]),
                rule(&["patch", "update"], &[""], &["pods/status"]),
                events(),
            ],
        ),
        // Not an upstream controller: Kubernetes expires Events with
        // etcd leases; bosun deletes them.
        (
            "eventttl",
            "event-ttl-controller",
            vec![rule(
                &["list", "watch", "delete"],
                &["", "events.k8s.io"],
                &["events"],
            )],
        ),
    ];
    // Upstream's csrapproving, csrsigning and csrcleaner all run as
    // certificate-controller.
    for name in ["csrapproving", "csrsigning", "csrcleaner"] {
        all.push((
            name,
            "certificate-controller",
            super::certificates::certificate_controller_rules(),
        ));
    }
    all
}

fn node_controller_rules() -> Vec<PolicyRule> {
    vec![
        rule(
            &["get", "list", "watch", "update", "delete", "patch"],
            &[""],
            &["nodes"],
        ),
        rule(&["patch", "update"], &[""], &["nodes/status"]),
        rule(&["patch", "update"], &[""], &["pods/status"]),
        rule(&["list", "watch", "get", "delete"], &[""], &["pods"]),
        events(),
    ]
}

/// What bosun's controllers do beyond upstream's roles: they write
/// status (and a Deployment's revision annotation) with merge patches
/// where upstream's send updates, and the Job controller also deletes
/// finished Jobs past `ttlSecondsAfterFinished` (upstream's
/// ttl-after-finished controller). Each is added to the controller's role.
pub(super) fn extras(controller: &str) -> Vec<PolicyRule> {
    let patch = |group: &str, resources: &[&str]| vec![rule(&["patch"], &[group], resources)];
    match controller {
        "job" => vec![
            rule(&["patch"], &["batch"], &["jobs/status"]),
            rule(&["delete"], &["batch"], &["jobs"]),
        ],
        "replicaset" => patch("apps", &["replicasets/status"]),
        "replicationcontroller" => patch("", &["replicationcontrollers/status"]),
        "deployment" => patch("apps", &["deployments", "deployments/status"]),
        "statefulset" => patch("apps", &["statefulsets/status"]),
        "daemonset" => patch("apps", &["daemonsets/status"]),
        "cronjob" => patch("batch", &["cronjobs/status"]),
        "horizontalpodautoscaling" => patch("autoscaling", &["horizontalpodautoscalers/status"]),
        "namespace" => patch("", &["namespaces/status", "namespaces/finalize"]),
        "volumebinding" => patch(
            "",
            &[
                "persistentvolumes",
                "persistentvolumes/status",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
            ],
        ),
        _ => Vec::new(),
    }
}

/// The service account an in-process controller acts as.
pub fn controller_account(controller: &str) -> Option<&'static str> {
    controllers()
        .into_iter()
        .find(|(c, _, _)| *c == controller)
        .map(|(_, sa, _)| sa)
}
