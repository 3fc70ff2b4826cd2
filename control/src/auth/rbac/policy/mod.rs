//! The bootstrap policy, as kube-apiserver's `bootstrappolicy`: the roles
//! every cluster starts with and the bindings that give them to the
//! system's users. Reconciled at every start (see [`super::reconcile`]).
//! The controller roles are upstream's for the controllers bosun runs,
//! each bound to the controller's service account in kube-system, which
//! is the user bosun's in-process controllers act as.

use k8s_openapi::api::rbac::v1::{
    AggregationRule, ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::GROUP as RBAC;
use crate::auth::user;

mod build;
mod certificates;
mod controllers;

pub use build::rule;
use build::{events, named, urls, READ, READ_WRITE, WRITE};
use controllers::extras;
pub use controllers::{controller_account, controllers};

pub const AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";
const BOOTSTRAPPING: &str = "kubernetes.io/bootstrapping";
pub const CONTROLLER_PREFIX: &str = "system:controller:";
pub const AGGREGATE_TO: &str = "rbac.authorization.k8s.io/aggregate-to-";

fn meta(name: &str, labels: &[(&str, &str)]) -> ObjectMeta {
    let mut all: std::collections::BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    all.insert(BOOTSTRAPPING.into(), "rbac-defaults".into());
    ObjectMeta {
        name: Some(name.into()),
        labels: Some(all),
        annotations: Some([(AUTOUPDATE.to_string(), "true".to_string())].into()),
        ..Default::default()
    }
}

fn role(name: &str, rules: Vec<PolicyRule>) -> ClusterRole {
    ClusterRole {
        metadata: meta(name, &[]),
        rules: Some(rules),
        ..Default::default()
    }
}

fn labelled(name: &str, label: &str, rules: Vec<PolicyRule>) -> ClusterRole {
    let key = format!("{AGGREGATE_TO}{label}");
    ClusterRole {
        metadata: meta(name, &[(&key, "true")]),
        rules: Some(rules),
        ..Default::default()
    }
}

/// A role whose rules the aggregation controller gathers from the roles
/// labelled `aggregate-to-<of>`; `label`, if any, aggregates it further.
fn aggregated(name: &str, of: &str, label: Option<&str>) -> ClusterRole {
    let key = label.map(|l| format!("{AGGREGATE_TO}{l}"));
    let labels: Vec<(&str, &str)> = key.iter().map(|k| (k.as_str(), "true")).collect();
    ClusterRole {
        metadata: meta(name, &labels),
        aggregation_rule: Some(AggregationRule {
            cluster_role_selectors: Some(vec![LabelSelector {
                match_labels: Some([(format!("{AGGREGATE_TO}{of}"), "true".to_string())].into()),
                ..Default::default()
            }]),
        }),
        rules: Some(Vec::new()),
    }
}

fn view_rules() -> Vec<PolicyRule> {
    vec![
        rule(
            READ,
            &[""],
            &[
                "pods",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/status",
                "endpoints",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
                "configmaps",
            ],
        ),
        rule(
            READ,
            &[""],
            &[
                "limitranges",
                "resourcequotas",
                "bindings",
                "events",
                "replicationcontrollers/status",
                "pods/log",
                "pods/status",
                "resourcequotas/status",
                "namespaces/status",
            ],
        ),
        rule(READ, &[""], &["namespaces"]),
        rule(READ, &["discovery.k8s.io"], &["endpointslices"]),
        rule(
            READ,
            &["apps"],
            &[
                "controllerrevisions",
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
                "statefulsets",
                "statefulsets/scale",
                "statefulsets/status",
            ],
        ),
        rule(
            READ,
            &["autoscaling"],
            &[
                "horizontalpodautoscalers",
                "horizontalpodautoscalers/status",
            ],
        ),
        rule(
            READ,
            &["batch"],
            &["cronjobs", "cronjobs/status", "jobs", "jobs/status"],
        ),
        rule(
            READ,
            &["policy"],
            &["poddisruptionbudgets", "poddisruptionbudgets/status"],
        ),
        rule(
            READ,
            &["networking.k8s.io"],
            &["ingresses", "ingresses/status", "networkpolicies"],
        ),
    ]
}

fn edit_rules() -> Vec<PolicyRule> {
    vec![
        rule(&["impersonate"], &[""], &["serviceaccounts"]),
        rule(
            WRITE,
            &[""],
            &[
                "pods",
                "pods/attach",
                "pods/proxy",
                "pods/exec",
                "pods/portforward",
            ],
        ),
        rule(&["create"], &[""], &["pods/eviction"]),
        rule(
            WRITE,
            &[""],
            &[
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/proxy",
                "persistentvolumeclaims",
                "configmaps",
                "secrets",
                "events",
            ],
        ),
        rule(&["create"], &[""], &["serviceaccounts/token"]),
        rule(
            WRITE,
            &["apps"],
            &[
                "daemonsets",
                "deployments",
                "deployments/rollback",
                "deployments/scale",
                "replicasets",
                "replicasets/scale",
                "statefulsets",
                "statefulsets/scale",
            ],
        ),
        rule(WRITE, &["autoscaling"], &["horizontalpodautoscalers"]),
        rule(WRITE, &["batch"], &["cronjobs", "jobs"]),
        rule(WRITE, &["policy"], &["poddisruptionbudgets"]),
        rule(
            WRITE,
            &["networking.k8s.io"],
            &["ingresses", "networkpolicies"],
        ),
        rule(WRITE, &["coordination.k8s.io"], &["leases"]),
        rule(READ, &["coordination.k8s.io"], &["leases"]),
        rule(
            READ,
            &[""],
            &[
                "pods/attach",
                "pods/exec",
                "pods/portforward",
                "pods/proxy",
                "secrets",
                "services/proxy",
            ],
        ),
    ]
}

fn admin_rules() -> Vec<PolicyRule> {
    vec![
        rule(
            &["create"],
            &["authorization.k8s.io"],
            &["localsubjectaccessreviews"],
        ),
        rule(READ_WRITE, &[RBAC], &["rolebindings", "roles"]),
    ]
}

fn scheduler_rules() -> Vec<PolicyRule> {
    vec![
        events(),
        rule(&["create"], &["coordination.k8s.io"], &["leases"]),
        // Upstream's get and update, and (bosun's) list and watch of the
        // one Lease: candidates follow it to take over the moment it runs
        // out (`leaderelection`).
        named(
            rule(
                &["get", "update", "list", "watch"],
                &["coordination.k8s.io"],
                &["leases"],
            ),
            &["kube-scheduler"],
        ),
        rule(READ, &[""], &["nodes"]),
        rule(&["get", "list", "watch", "delete"], &[""], &["pods"]),
        rule(&["create"], &[""], &["bindings", "pods/binding"]),
        rule(&["patch", "update"], &[""], &["pods/status"]),
        rule(READ, &[""], &["replicationcontrollers", "services"]),
        rule(READ, &["apps", "extensions"], &["replicasets"]),
        rule(READ, &["apps"], &["statefulsets"]),
        rule(READ, &["policy"], &["poddisruptionbudgets"]),
        rule(
            READ,
            &[""],
            &["persistentvolumeclaims", "persistentvolumes"],
        ),
        // Volume binding: the claims of WaitForFirstConsumer volumes learn
        // their node (upstream updates them; bosun patches).
        rule(&["update", "patch"], &[""], &["persistentvolumeclaims"]),
        rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
        rule(
            &["create"],
            &["authorization.k8s.io"],
            &["subjectaccessreviews"],
        ),
        rule(
            READ,
            &["storage.k8s.io"],
            &[
                "csinodes",
                "csidrivers",
                "csistoragecapacities",
                "storageclasses",
            ],
        ),
        rule(READ, &[""], &["namespaces"]),
    ]
}

fn controller_manager_rules() -> Vec<PolicyRule> {
    vec![
        events(),
        rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
        rule(
            &["create"],
            &["authorization.k8s.io"],
            &["subjectaccessreviews"],
        ),
        // The shared informers.
        rule(&["list", "watch"], &["*"], &["*"]),
        rule(&["create"], &["coordination.k8s.io"], &["leases"]),
        // Upstream's get and update, and (bosun's) list and watch of the
        // one Lease: candidates follow it to take over the moment it runs
        // out (`leaderelection`).
        named(
            rule(
                &["get", "update", "list", "watch"],
                &["coordination.k8s.io"],
                &["leases"],
            ),
            &["kube-controller-manager"],
        ),
        rule(&["create"], &[""], &["secrets", "serviceaccounts"]),
        rule(&["delete"], &[""], &["secrets"]),
        rule(
            &["get"],
            &[""],
            &["configmaps", "namespaces", "secrets", "serviceaccounts"],
        ),
        rule(&["update"], &[""], &["secrets", "serviceaccounts"]),
        rule(&["create"], &[""], &["serviceaccounts/token"]),
    ]
}

/// The built-in ingress controller every agent runs, acting as its node:
/// what an ingress controller's ClusterRole grants (ingress-nginx's and
/// Traefik's): Ingresses and classes read, Ingress status written, the
/// TLS Secrets read, the default IngressClass created at start.
pub const INGRESS_CONTROLLER: &str = "system:bosun:ingress-controller";

fn ingress_controller_rules() -> Vec<PolicyRule> {
    vec![
        rule(
            READ,
            &["networking.k8s.io"],
            &["ingresses", "ingressclasses"],
        ),
        rule(&["create"], &["networking.k8s.io"], &["ingressclasses"]),
        rule(
            &["update", "patch"],
            &["networking.k8s.io"],
            &["ingresses/status"],
        ),
        // Its TLS Secrets: the Node authorizer lets a node get those an
        // Ingress names (auth::ingress_tls_secret), and no other.
    ]
}

pub fn cluster_roles() -> Vec<ClusterRole> {
    let mut out = vec![
        role(
            "cluster-admin",
            vec![rule(&["*"], &["*"], &["*"]), urls(&["*"], &["*"])],
        ),
        role(
            "system:discovery",
            vec![urls(
                &["get"],
                &[
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                    "/version/",
                ],
            )],
        ),
        role(
            "system:public-info-viewer",
            vec![urls(
                &["get"],
                &["/healthz", "/livez", "/readyz", "/version", "/version/"],
            )],
        ),
        role(
            "system:basic-user",
            vec![
                rule(
                    &["create"],
                    &["authentication.k8s.io"],
                    &["selfsubjectreviews"],
                ),
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
            ],
        ),
        role(
            "system:monitoring",
            vec![urls(
                &["get"],
                &[
                    "/healthz",
                    "/healthz/*",
                    "/livez",
                    "/livez/*",
                    "/readyz",
                    "/readyz/*",
                    "/metrics",
                    "/metrics/slis",
                ],
            )],
        ),
        role(
            "system:auth-delegator",
            vec![
                rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["subjectaccessreviews"],
                ),
            ],
        ),
        aggregated("admin", "admin", None),
        aggregated("edit", "edit", Some("admin")),
        aggregated("view", "view", Some("edit")),
        labelled("system:aggregate-to-admin", "admin", admin_rules()),
        labelled("system:aggregate-to-edit", "edit", edit_rules()),
        labelled("system:aggregate-to-view", "view", view_rules()),
        role(user::KUBE_SCHEDULER, scheduler_rules()),
        role(user::KUBE_CONTROLLER_MANAGER, controller_manager_rules()),
        role(INGRESS_CONTROLLER, ingress_controller_rules()),
    ];
    for (name, rules) in certificates::roles() {
        out.push(role(name, rules));
    }
    let mut seen = std::collections::HashSet::new();
    for (controller, sa, mut rules) in controllers() {
        rules.extend(extras(controller));
        if seen.insert(sa) {
            out.push(role(&format!("{CONTROLLER_PREFIX}{sa}"), rules));
        }
    }
    out
}

fn binding(role: &str, subjects: Vec<Subject>) -> ClusterRoleBinding {
    named_binding(role, role, subjects)
}

fn named_binding(name: &str, role: &str, subjects: Vec<Subject>) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: meta(name, &[]),
        role_ref: RoleRef {
            api_group: Some(RBAC.into()),
            kind: "ClusterRole".into(),
            name: role.into(),
        },
        subjects: Some(subjects),
    }
}

fn subject(kind: &str, name: &str) -> Subject {
    Subject {
        kind: kind.into(),
        name: name.into(),
        api_group: Some(RBAC.into()),
        namespace: None,
    }
}

pub fn cluster_role_bindings() -> Vec<ClusterRoleBinding> {
    let group = |n| subject("Group", n);
    let mut out = vec![
        binding("cluster-admin", vec![group(user::SYSTEM_MASTERS)]),
        binding("system:discovery", vec![group(user::ALL_AUTHENTICATED)]),
        binding("system:basic-user", vec![group(user::ALL_AUTHENTICATED)]),
        binding(
            "system:public-info-viewer",
            vec![
                group(user::ALL_AUTHENTICATED),
                group(user::ALL_UNAUTHENTICATED),
            ],
        ),
        binding("system:monitoring", vec![group("system:monitoring")]),
        binding(
            user::KUBE_SCHEDULER,
            vec![subject("User", user::KUBE_SCHEDULER)],
        ),
        binding(
            user::KUBE_CONTROLLER_MANAGER,
            vec![subject("User", user::KUBE_CONTROLLER_MANAGER)],
        ),
        binding(INGRESS_CONTROLLER, vec![group("system:nodes")]),
    ];
    for (name, role, g) in certificates::bindings() {
        out.push(named_binding(name, role, vec![group(g)]));
    }
    let mut seen = std::collections::HashSet::new();
    for (_, sa, _) in controllers() {
        if seen.insert(sa) {
            out.push(binding(
                &format!("{CONTROLLER_PREFIX}{sa}"),
                vec![Subject {
                    kind: "ServiceAccount".into(),
                    name: sa.into(),
                    namespace: Some("kube-system".into()),
                    api_group: None,
                }],
            ));
        }
    }
    out
}
