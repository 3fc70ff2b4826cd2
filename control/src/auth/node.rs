//! What a node's credential may do: Kubernetes' Node authorizer and
//! NodeRestriction admission in one decision. A node reads what its pods
//! need (the cluster-wide objects every node watches, and the ConfigMaps,
//! Secrets, ServiceAccounts and claims that pods bound to it name) and
//! writes only its own Node, its own Lease, the status of pods bound to
//! it, Events, tokens for its pods' service accounts, and
//! CertificateSigningRequests (to renew its certificate). Anything else
//! is forbidden.
//!
//! The decision is a pure function of the request and [`NodeFacts`]
//! (whether a pod bound to the node references the object asked for, the
//! object written); [`super::authorize`] gathers the facts when a rule
//! needs them, the first from the node [`graph`], the second from the
//! store. What a write
//! the authorizer lets through may change is [`admission`]'s to judge
//! (NodeRestriction), once the object it would store is known.

pub mod admission;
pub mod graph;
mod refs;

pub use refs::{referenced, PodRefs};

use bosun::well_known::HOSTNAME_LABEL;
use serde_json::Value;

use super::Attributes;

/// What the decision may need to know beyond the request.
#[derive(Debug, Default)]
pub struct NodeFacts {
    /// The pods whose `spec.nodeName` is the node, judged when
    /// `referenced` is not known (the server always asks the graph; a
    /// caller without one may give the pods).
    pub pods: Vec<Value>,
    /// Whether a pod bound to the node references the object the request
    /// names ([`referenced_object`]), as the node graph ([`graph`])
    /// answered; None: judged from `pods`.
    pub referenced: Option<bool>,
    /// The stored object the request names, if it needs looking at (the
    /// pod whose status is written, the volume patched).
    pub object: Option<Value>,
}

/// Which facts a request needs, so only those are read.
#[derive(Debug, PartialEq, Eq)]
pub enum Needs {
    Nothing,
    /// The pods bound to the node (reads of what they reference).
    Pods,
    /// The stored object the request names.
    Object,
}

/// Resources every node reads whole (their watches feed the pod loop,
/// the node-local DNS server and volume cleanup).
const READ_ALL: &[(&str, &str)] = &[
    ("", "pods"),
    ("", "nodes"),
    ("", "services"),
    ("", "endpoints"),
    ("", "namespaces"),
    ("", "persistentvolumes"),
    ("discovery.k8s.io", "endpointslices"),
    // The agent enforces the NetworkPolicies of its pods.
    ("networking.k8s.io", "networkpolicies"),
    // The runtime handler of its pods (system:node's rule upstream).
    ("node.k8s.io", "runtimeclasses"),
];

/// Resources a node reads only by name, and only when a pod bound to it
/// references the object.
const READ_REFERENCED: &[&str] = &[
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "serviceaccounts",
];

fn is_read(verb: &str) -> bool {
    matches!(verb, "get" | "list" | "watch")
}

fn is_write(verb: &str) -> bool {
    matches!(verb, "create" | "update" | "patch")
}

pub fn needs(a: &Attributes) -> Needs {
    match (a.group, a.resource, a.subresource, a.verb) {
        ("", r, None, "get") if READ_REFERENCED.contains(&r) => Needs::Pods,
        ("", "secrets" | "configmaps", None, "list" | "watch") if a.name.is_some() => Needs::Pods,
        ("", "serviceaccounts", Some("token"), "create") => Needs::Pods,
        ("", "pods", Some("status"), v) if is_write(v) => Needs::Object,
        ("", "pods", None, "delete") => Needs::Object,
        ("", "persistentvolumes", None, "update" | "patch") => Needs::Object,
        _ => Needs::Nothing,
    }
}

/// The object (resource, namespace, name) a request that [`Needs::Pods`]
/// is judged by: a pod bound to the node must reference it.
pub fn referenced_object<'a>(a: &Attributes<'a>) -> (&'a str, &'a str, &'a str) {
    let resource = match a.subresource {
        Some("token") => "serviceaccounts",
        _ => a.resource,
    };
    let name = a.name.or(a.created_name).unwrap_or("");
    (resource, a.namespace.unwrap_or(""), name)
}

impl NodeFacts {
    /// Whether a pod bound to the node references `resource` `ns/name`.
    fn references(&self, ns: &str, resource: &str, name: &str) -> bool {
        match self.referenced {
            Some(answer) => answer,
            None => self
                .pods
                .iter()
                .any(|p| pod_namespace(p) == ns && references(p, resource, name)),
        }
    }
}

/// `Ok` if node `node` may do `a`; otherwise the reason, in Kubernetes'
/// words, for the 403.
pub fn decide(node: &str, a: &Attributes, facts: &NodeFacts) -> Result<(), String> {
    let verb = a.verb;
    let name = a.name.or(a.created_name).unwrap_or("");
    let ns = a.namespace.unwrap_or("");
    match (a.group, a.resource, a.subresource) {
        (g, r, None) if is_read(verb) && READ_ALL.contains(&(g, r)) => Ok(()),
        ("", "pods" | "nodes", Some("status")) if verb == "get" => Ok(()),
        ("", r, None) if READ_REFERENCED.contains(&r) => {
            // Secrets and ConfigMaps may also be listed and watched one at
            // a time (`fieldSelector=metadata.name=NAME`, which names the
            // object as upstream's RequestInfo takes it), as the kubelet's
            // watch-based managers do.
            let by_name = verb == "get"
                || (matches!(verb, "list" | "watch") && matches!(r, "secrets" | "configmaps"));
            if !by_name || name.is_empty() {
                return Err(a.forbidden(&format!(
                    "can only {verb} individual {r} referenced by pods bound to node '{node}'"
                )));
            }
            if facts.references(ns, r, name) {
                Ok(())
            } else {
                Err(a.forbidden(&format!(
                    "no relationship found between node '{node}' and this object"
                )))
            }
        }
        ("", "serviceaccounts", Some("token")) if verb == "create" => {
            if facts.references(ns, "serviceaccounts", name) {
                Ok(())
            } else {
                Err(a.forbidden(&format!(
                    "no relationship found between node '{node}' and this object"
                )))
            }
        }
        ("", "nodes", None | Some("status")) if is_write(verb) || verb == "delete" => {
            if name == node {
                Ok(())
            } else {
                Err(format!(
                    "node \"{node}\" is not allowed to modify node \"{name}\""
                ))
            }
        }
        ("coordination.k8s.io", "leases", None) if ns == "kube-node-lease" => {
            if (is_write(verb) || matches!(verb, "get" | "delete")) && name == node {
                Ok(())
            } else {
                Err(format!(
                    "node \"{node}\" is not allowed to {verb} lease \"{ns}/{name}\""
                ))
            }
        }
        ("", "pods", Some("status")) if is_write(verb) => {
            if facts.object.as_ref().is_some_and(|p| bound_to(p, node)) {
                Ok(())
            } else {
                Err(format!(
                    "node \"{node}\" can only update pod status for pods with spec.nodeName set to itself"
                ))
            }
        }
        ("", "pods", None) if verb == "delete" => {
            if facts.object.as_ref().is_some_and(|p| bound_to(p, node)) {
                Ok(())
            } else {
                Err(format!(
                    "node \"{node}\" can only delete pods with spec.nodeName set to itself"
                ))
            }
        }
        ("" | "events.k8s.io", "events", None) if is_write(verb) => Ok(()),
        // Renewing its client certificate (system:node's rule upstream):
        // csrapproving approves only a request for the node's own name.
        ("certificates.k8s.io", "certificatesigningrequests", None)
            if matches!(verb, "create" | "get" | "list" | "watch") =>
        {
            Ok(())
        }
        // Local-path volumes pinned to this node: the agent removes their
        // cleanup finalizer once their directory is gone (and admission
        // lets it change nothing else).
        ("", "persistentvolumes", None) if verb == "update" || verb == "patch" => {
            if facts.object.as_ref().is_some_and(|pv| pinned_to(pv, node)) {
                Ok(())
            } else {
                Err(format!(
                    "node \"{node}\" can only modify persistentvolumes pinned to itself"
                ))
            }
        }
        _ => Err(a.forbidden("")),
    }
}

fn pod_namespace(pod: &Value) -> &str {
    pod["metadata"]["namespace"].as_str().unwrap_or("default")
}

fn bound_to(pod: &Value, node: &str) -> bool {
    pod["spec"]["nodeName"].as_str() == Some(node)
}

fn pinned_to(pv: &Value, node: &str) -> bool {
    pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| t["matchExpressions"].as_array().into_iter().flatten())
        .any(|e| {
            e["key"] == HOSTNAME_LABEL
                && e["operator"] == "In"
                && e["values"]
                    .as_array()
                    .is_some_and(|v| v.iter().any(|v| v == node))
        })
}

/// Whether `pod` names object `name` of `resource`: in its volumes
/// (secret, configMap, projected sources, claims), its containers' env
/// and envFrom, its image pull secrets, its service account.
fn references(pod: &Value, resource: &str, name: &str) -> bool {
    let mut found = false;
    referenced(pod, |r, n| found |= r == resource && n == name);
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attrs<'a>(
        verb: &'a str,
        group: &'a str,
        resource: &'a str,
        sub: Option<&'a str>,
        ns: Option<&'a str>,
        name: Option<&'a str>,
    ) -> Attributes<'a> {
        Attributes {
            user: "system:node:a".into(),
            verb,
            group,
            resource,
            subresource: sub,
            namespace: ns,
            name,
            created_name: None,
        }
    }

    fn pod(name: &str, node: &str) -> Value {
        json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "nodeName": node,
                "serviceAccountName": "web",
                "volumes": [
                    {"name": "s", "secret": {"secretName": "mounted"}},
                    {"name": "p", "projected": {"sources": [{"configMap": {"name": "projected-cm"}}]}},
                    {"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
                ],
                "containers": [{
                    "name": "c",
                    "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "env-secret", "key": "k"}}}],
                    "envFrom": [{"configMapRef": {"name": "env-cm"}}],
                }],
            },
        })
    }

    fn facts_of(pods: Vec<Value>) -> NodeFacts {
        NodeFacts {
            pods,
            ..Default::default()
        }
    }

    #[test]
    fn a_node_writes_only_its_own_node_and_lease() {
        let none = NodeFacts::default();
        for verb in ["create", "update", "patch"] {
            let own = attrs(verb, "", "nodes", None, None, Some("a"));
            assert_eq!(decide("a", &own, &none), Ok(()));
            let other = attrs(verb, "", "nodes", Some("status"), None, Some("b"));
            assert_eq!(
                decide("a", &other, &none).unwrap_err(),
                "node \"a\" is not allowed to modify node \"b\""
            );
            let lease = |n| {
                attrs(
                    verb,
                    "coordination.k8s.io",
                    "leases",
                    None,
                    Some("kube-node-lease"),
                    Some(n),
                )
            };
            assert_eq!(decide("a", &lease("a"), &none), Ok(()));
            assert!(decide("a", &lease("b"), &none).is_err());
        }
        // A create names its object in the body.
        let create = |n| Attributes {
            created_name: Some(n),
            ..attrs("create", "", "nodes", None, None, None)
        };
        assert_eq!(decide("a", &create("a"), &none), Ok(()));
        assert!(decide("a", &create("b"), &none).is_err());
        // Leases elsewhere are not the node's.
        let elsewhere = attrs(
            "update",
            "coordination.k8s.io",
            "leases",
            None,
            Some("kube-system"),
            Some("a"),
        );
        assert!(decide("a", &elsewhere, &none).is_err());
    }

    #[test]
    fn secrets_are_readable_only_when_a_pod_of_the_node_uses_them() {
        let own = facts_of(vec![pod("web-1", "a")]);
        let get = |r, n| attrs("get", "", r, None, Some("default"), Some(n));
        for (r, n) in [
            ("secrets", "mounted"),
            ("secrets", "env-secret"),
            ("configmaps", "env-cm"),
            ("configmaps", "projected-cm"),
            ("persistentvolumeclaims", "data"),
            ("serviceaccounts", "web"),
        ] {
            assert_eq!(decide("a", &get(r, n), &own), Ok(()), "{r}/{n}");
        }
        let err = decide("a", &get("secrets", "db-password"), &own).unwrap_err();
        assert_eq!(
            err,
            "secrets \"db-password\" is forbidden: User \"system:node:a\" cannot get resource \"secrets\" in API group \"\" in the namespace \"default\": no relationship found between node 'a' and this object"
        );
        // The same name in another namespace is another object.
        let other_ns = attrs("get", "", "secrets", None, Some("prod"), Some("mounted"));
        assert!(decide("a", &other_ns, &own).is_err());
        // Without a pod of its own using it, node a gets nothing (the
        // facts hold only the pods bound to the node asking).
        assert!(decide("a", &get("secrets", "mounted"), &facts_of(vec![])).is_err());
        // Listing or watching all secrets is never a node's business.
        let list = attrs("list", "", "secrets", None, Some("default"), None);
        assert!(decide("a", &list, &own)
            .unwrap_err()
            .contains("cannot list"));
        // One referenced Secret or ConfigMap by name (a field selector on
        // metadata.name) may be listed and watched; nothing else may.
        for verb in ["list", "watch"] {
            let one = |r, n| attrs(verb, "", r, None, Some("default"), Some(n));
            assert_eq!(needs(&one("secrets", "mounted")), Needs::Pods);
            assert_eq!(decide("a", &one("secrets", "mounted"), &own), Ok(()));
            assert_eq!(decide("a", &one("configmaps", "env-cm"), &own), Ok(()));
            assert!(decide("a", &one("secrets", "db-password"), &own).is_err());
            assert!(decide("a", &one("persistentvolumeclaims", "data"), &own).is_err());
            assert!(decide("a", &one("serviceaccounts", "web"), &own).is_err());
        }
        // Token requests only for service accounts its pods run as.
        let token = |sa| {
            attrs(
                "create",
                "",
                "serviceaccounts",
                Some("token"),
                Some("default"),
                Some(sa),
            )
        };
        assert_eq!(decide("a", &token("web"), &own), Ok(()));
        assert!(decide("a", &token("admin"), &own).is_err());
    }

    #[test]
    fn pod_status_only_for_pods_bound_to_the_node() {
        let patch = attrs(
            "patch",
            "",
            "pods",
            Some("status"),
            Some("default"),
            Some("web-1"),
        );
        let mine = NodeFacts {
            object: Some(pod("web-1", "a")),
            ..Default::default()
        };
        assert_eq!(decide("a", &patch, &mine), Ok(()));
        let theirs = NodeFacts {
            object: Some(pod("web-1", "b")),
            ..Default::default()
        };
        assert_eq!(
            decide("a", &patch, &theirs).unwrap_err(),
            "node \"a\" can only update pod status for pods with spec.nodeName set to itself"
        );
        let delete = attrs("delete", "", "pods", None, Some("default"), Some("web-1"));
        assert_eq!(decide("a", &delete, &mine), Ok(()));
        assert!(decide("a", &delete, &theirs).is_err());
        // Changing a pod's spec is not a node's business at all.
        let update = attrs("update", "", "pods", None, Some("default"), Some("web-1"));
        assert!(decide("a", &update, &mine)
            .unwrap_err()
            .contains("cannot update resource \"pods\""));
    }

    #[test]
    fn everything_else_is_forbidden_in_kubernetes_words() {
        let none = NodeFacts::default();
        let reads = attrs("watch", "", "pods", None, None, None);
        assert_eq!(decide("a", &reads, &none), Ok(()));
        let deploy = attrs("create", "apps", "deployments", None, Some("default"), None);
        assert_eq!(
            decide("a", &deploy, &none).unwrap_err(),
            "deployments.apps is forbidden: User \"system:node:a\" cannot create resource \"deployments\" in API group \"apps\" in the namespace \"default\""
        );
        let del = attrs("delete", "", "namespaces", None, None, Some("kube-system"));
        assert_eq!(
            decide("a", &del, &none).unwrap_err(),
            "namespaces \"kube-system\" is forbidden: User \"system:node:a\" cannot delete resource \"namespaces\" in API group \"\" at the cluster scope"
        );
        let event = attrs("create", "", "events", None, Some("default"), None);
        assert_eq!(decide("a", &event, &none), Ok(()));
    }

    #[test]
    fn a_node_requests_and_watches_certificates_but_approves_none() {
        let none = NodeFacts::default();
        let csrs = "certificatesigningrequests";
        for verb in ["create", "get", "list", "watch"] {
            let a = attrs(verb, "certificates.k8s.io", csrs, None, None, None);
            assert_eq!(decide("a", &a, &none), Ok(()), "{verb}");
        }
        for (verb, sub) in [
            ("update", Some("approval")),
            ("update", Some("status")),
            ("delete", None),
        ] {
            let a = attrs(verb, "certificates.k8s.io", csrs, sub, None, Some("c"));
            assert!(decide("a", &a, &none).is_err(), "{verb} {sub:?}");
        }
    }

    #[test]
    fn volumes_pinned_to_the_node_may_lose_their_finalizer() {
        let pv = |node: &str| {
            json!({"spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [{
                "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]
            }]}}}})
        };
        let patch = attrs("patch", "", "persistentvolumes", None, None, Some("pv-1"));
        let facts = |n| NodeFacts {
            object: Some(pv(n)),
            ..Default::default()
        };
        assert_eq!(decide("a", &patch, &facts("a")), Ok(()));
        assert!(decide("a", &patch, &facts("b")).is_err());
    }
}
