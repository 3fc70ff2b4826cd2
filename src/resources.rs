//! The resources bosun serves: one static table shared by the API server
//! (routing, discovery, storage keys) and the CLI (resolving `deploy`,
//! `deployments.apps`, `po` to a resource).

/// One served resource, as discovery describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceInfo {
    /// API group; empty for the core group.
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    /// `status` and/or `scale`.
    pub subresources: &'static [&'static str],
    /// The version objects are kept in; other versions are converted on the way in and out.
    pub storage_version: &'static str,
    /// The fields a field selector may name besides `metadata.name` and
    /// `metadata.namespace`, for custom resources (a CRD version's
    /// `selectableFields`); built-in kinds list theirs by kind in the API
    /// server, so theirs is empty here.
    pub selectable_fields: &'static [&'static str],
}

impl ResourceInfo {
    /// `v1` for the core group, `apps/v1` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `deployment.apps`, or `pod` for the core group: kubectl's prefix in
    /// `deployment.apps/nginx created`.
    pub fn kind_group(&self) -> String {
        let lower = self.kind.to_ascii_lowercase();
        if self.group.is_empty() {
            lower
        } else {
            format!("{lower}.{}", self.group)
        }
    }

    /// `deployments.apps` or `pods`: the qualified resource name in errors.
    pub fn plural_group(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// URL prefix of the group version: `/api/v1` or `/apis/apps/v1`.
    pub fn group_version_path(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }

    /// Collection URL, optionally inside a namespace.
    pub fn collection_path(&self, namespace: Option<&str>) -> String {
        match namespace {
            Some(ns) if self.namespaced => {
                format!(
                    "{}/namespaces/{ns}/{}",
                    self.group_version_path(),
                    self.plural
                )
            }
            _ => format!("{}/{}", self.group_version_path(), self.plural),
        }
    }

    pub fn has_subresource(&self, sub: &str) -> bool {
        self.subresources.contains(&sub)
    }

    /// The verbs and kind discovery lists for a subresource, as Kubernetes
    /// does: `pods/log` is read-only, `pods/exec`, `pods/attach` and `pods/portforward` are
    /// upgraded streams (`create` and `get`), `pods/binding` is created
    /// (a `Binding`), the rest read and write an
    /// object of the resource's kind (`scale` one of `autoscaling/v1` Scale).
    pub fn subresource_discovery(&self, sub: &str) -> (&'static [&'static str], &'static str) {
        match sub {
            "log" => (&["get"], self.kind),
            "exec" => (&["create", "get"], "PodExecOptions"),
            "attach" => (&["create", "get"], "PodAttachOptions"),
            "portforward" => (&["create", "get"], "PodPortForwardOptions"),
            "scale" => (&["get", "patch", "update"], "Scale"),
            "binding" => (&["create"], "Binding"),
            "eviction" => (&["create"], "Eviction"),
            "token" => (&["create"], "TokenRequest"),
            "finalize" => (&["update"], self.kind),
            _ => (&["get", "patch", "update"], self.kind),
        }
    }

    /// Whether this entry is the version objects are stored in.
    pub fn is_storage_version(&self) -> bool {
        self.version == self.storage_version && self.shares_storage_of().is_none()
    }

    /// The resource of another group whose objects this one serves in its
    /// own shape: events.k8s.io/v1 Events are core v1 Events, as upstream
    /// stores them (one object, read and written through either API).
    pub fn shares_storage_of(&self) -> Option<&'static ResourceInfo> {
        if self.group == "events.k8s.io" && self.plural == "events" {
            return RESOURCES
                .iter()
                .find(|r| r.group.is_empty() && r.plural == "events");
        }
        None
    }

    /// The key prefix of every object of this resource in the store:
    /// `/registry/<plural>/` (every version of a resource shares it).
    pub fn storage_prefix(&self) -> String {
        if let Some(shared) = self.shares_storage_of() {
            return shared.storage_prefix();
        }
        format!("/registry/{}/", self.plural_group())
    }

    /// The store key of one object: `/registry/<plural>/<namespace>/<name>`,
    /// or `/registry/<plural>/<name>` for cluster-scoped resources.
    pub fn storage_key(&self, namespace: Option<&str>, name: &str) -> String {
        match namespace {
            Some(ns) if self.namespaced => format!("{}{ns}/{name}", self.storage_prefix()),
            _ => format!("{}{name}", self.storage_prefix()),
        }
    }

    /// Matches the names a user may type: plural, singular, short name or
    /// kind, each optionally qualified by group (`deploy.apps`) or by
    /// version and group (`deployments.v1.apps`).
    pub fn matches_name(&self, name: &str) -> bool {
        let name = name.to_ascii_lowercase();
        let (base, qualifier) = match name.split_once('.') {
            Some((b, q)) => (b.to_string(), Some(q.to_string())),
            None => (name.clone(), None),
        };
        let base_ok = base == self.plural
            || base == self.singular
            || base == self.kind.to_ascii_lowercase()
            || self.short_names.contains(&base.as_str());
        if !base_ok {
            return false;
        }
        match qualifier {
            None => true,
            Some(q) => {
                q == self.group
                    || q == format!("{}.{}", self.version, self.group)
                    || (self.group.is_empty() && q == self.version)
            }
        }
    }
}

macro_rules! res {
    ($group:expr, $version:expr, $kind:expr, $plural:expr, $singular:expr, $namespaced:expr,
     short: [$($short:expr),*], cat: [$($cat:expr),*], sub: [$($sub:expr),*]) => {
        res!($group, $version, $kind, $plural, $singular, $namespaced,
             short: [$($short),*], cat: [$($cat),*], sub: [$($sub),*], storage: $version)
    };
    ($group:expr, $version:expr, $kind:expr, $plural:expr, $singular:expr, $namespaced:expr,
     short: [$($short:expr),*], cat: [$($cat:expr),*], sub: [$($sub:expr),*], storage: $storage:expr) => {
        ResourceInfo {
            group: $group,
            version: $version,
            kind: $kind,
            plural: $plural,
            singular: $singular,
            namespaced: $namespaced,
            short_names: &[$($short),*],
            categories: &[$($cat),*],
            subresources: &[$($sub),*],
            storage_version: $storage,
            selectable_fields: &[],
        }
    };
}

/// Every resource served, in the order `api-resources` lists them.
pub static RESOURCES: &[ResourceInfo] = &[
    res!("", "v1", "Namespace", "namespaces", "namespace", false,
         short: ["ns"], cat: [], sub: ["status", "finalize"]),
    res!("", "v1", "Node", "nodes", "node", false,
         short: ["no"], cat: [], sub: ["status"]),
    res!("", "v1", "Pod", "pods", "pod", true,
         short: ["po"], cat: ["all"], sub: ["status", "binding", "eviction", "log", "exec", "attach", "portforward", "ephemeralcontainers"]),
    res!("", "v1", "Service", "services", "service", true,
         short: ["svc"], cat: ["all"], sub: ["status"]),
    res!("", "v1", "Endpoints", "endpoints", "endpoints", true,
         short: ["ep"], cat: [], sub: []),
    res!("", "v1", "Event", "events", "event", true,
         short: ["ev"], cat: [], sub: []),
    // The same objects as core v1 Events, in another shape (see
    // `shares_storage_of`).
    res!("events.k8s.io", "v1", "Event", "events", "event", true,
         short: ["ev"], cat: [], sub: []),
    res!("", "v1", "PersistentVolume", "persistentvolumes", "persistentvolume", false,
         short: ["pv"], cat: [], sub: ["status"]),
    res!("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", "persistentvolumeclaim", true,
         short: ["pvc"], cat: [], sub: ["status"]),
    res!("", "v1", "ConfigMap", "configmaps", "configmap", true,
         short: ["cm"], cat: [], sub: []),
    res!("", "v1", "Secret", "secrets", "secret", true,
         short: [], cat: [], sub: []),
    res!("", "v1", "ServiceAccount", "serviceaccounts", "serviceaccount", true,
         short: ["sa"], cat: [], sub: ["token"]),
    res!("", "v1", "ResourceQuota", "resourcequotas", "resourcequota", true,
         short: ["quota"], cat: [], sub: ["status"]),
    res!("", "v1", "LimitRange", "limitranges", "limitrange", true,
         short: ["limits"], cat: [], sub: []),
    res!("", "v1", "PodTemplate", "podtemplates", "podtemplate", true,
         short: [], cat: [], sub: []),
    res!("", "v1", "ReplicationController", "replicationcontrollers", "replicationcontroller",
         true, short: ["rc"], cat: ["all"], sub: ["status", "scale"]),
    res!("apps", "v1", "Deployment", "deployments", "deployment", true,
         short: ["deploy"], cat: ["all"], sub: ["status", "scale"]),
    res!("apps", "v1", "ReplicaSet", "replicasets", "replicaset", true,
         short: ["rs"], cat: ["all"], sub: ["status", "scale"]),
    res!("apps", "v1", "StatefulSet", "statefulsets", "statefulset", true,
         short: ["sts"], cat: ["all"], sub: ["status", "scale"]),
    res!("apps", "v1", "DaemonSet", "daemonsets", "daemonset", true,
         short: ["ds"], cat: ["all"], sub: ["status"]),
    res!("apps", "v1", "ControllerRevision", "controllerrevisions", "controllerrevision", true,
         short: [], cat: [], sub: []),
    res!("batch", "v1", "Job", "jobs", "job", true,
         short: [], cat: ["all"], sub: ["status"]),
    res!("batch", "v1", "CronJob", "cronjobs", "cronjob", true,
         short: ["cj"], cat: ["all"], sub: ["status"]),
    res!("storage.k8s.io", "v1", "StorageClass", "storageclasses", "storageclass", false,
         short: ["sc"], cat: [], sub: []),
    res!("coordination.k8s.io", "v1", "Lease", "leases", "lease", true,
         short: [], cat: [], sub: []),
    res!("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", "endpointslice", true,
         short: [], cat: [], sub: []),
    res!("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", "clusterrole", false,
         short: [], cat: [], sub: []),
    res!("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings",
         "clusterrolebinding", false,
         short: [], cat: [], sub: []),
    res!("rbac.authorization.k8s.io", "v1", "Role", "roles", "role", true,
         short: [], cat: [], sub: []),
    res!("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", "rolebinding", true,
         short: [], cat: [], sub: []),
    res!("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", "networkpolicy", true,
         short: ["netpol"], cat: [], sub: []),
    res!("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers",
         "horizontalpodautoscaler", true,
         short: ["hpa"], cat: ["all"], sub: ["status"]),
    res!("autoscaling", "v1", "HorizontalPodAutoscaler", "horizontalpodautoscalers",
         "horizontalpodautoscaler", true,
         short: ["hpa"], cat: ["all"], sub: ["status"], storage: "v2"),
    // The seeds' version: the same shape as v2 (Kubernetes 1.25 still
    // served it, converting to v2).
    res!("autoscaling", "v2beta2", "HorizontalPodAutoscaler", "horizontalpodautoscalers",
         "horizontalpodautoscaler", true,
         short: ["hpa"], cat: ["all"], sub: ["status"], storage: "v2"),
    res!("networking.k8s.io", "v1", "Ingress", "ingresses", "ingress", true,
         short: ["ing"], cat: [], sub: ["status"]),
    res!("networking.k8s.io", "v1", "IngressClass", "ingressclasses", "ingressclass", false,
         short: [], cat: [], sub: []),
    res!("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", "priorityclass", false,
         short: ["pc"], cat: [], sub: []),
    res!("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", "poddisruptionbudget",
         true, short: ["pdb"], cat: [], sub: ["status"]),
    res!("apiregistration.k8s.io", "v1", "APIService", "apiservices", "apiservice", false,
         short: [], cat: ["api-extensions"], sub: ["status"]),
    res!("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions",
         "customresourcedefinition", false, short: ["crd", "crds"], cat: ["api-extensions"],
         sub: ["status"]),
    res!("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration",
         "validatingwebhookconfigurations", "validatingwebhookconfiguration", false,
         short: [], cat: ["api-extensions"], sub: []),
    res!("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration",
         "mutatingwebhookconfigurations", "mutatingwebhookconfiguration", false,
         short: [], cat: ["api-extensions"], sub: []),
    res!("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy",
         "validatingadmissionpolicies", "validatingadmissionpolicy", false,
         short: [], cat: ["api-extensions"], sub: ["status"]),
    res!("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding",
         "validatingadmissionpolicybindings", "validatingadmissionpolicybinding", false,
         short: [], cat: ["api-extensions"], sub: []),
    res!("certificates.k8s.io", "v1", "CertificateSigningRequest", "certificatesigningrequests",
         "certificatesigningrequest", false, short: ["csr"], cat: [], sub: ["status", "approval"]),
    res!("node.k8s.io", "v1", "RuntimeClass", "runtimeclasses", "runtimeclass", false,
         short: [], cat: [], sub: []),
    // API Priority and Fairness: acted on by the API server's flow control.
    res!("flowcontrol.apiserver.k8s.io", "v1", "FlowSchema", "flowschemas", "flowschema", false,
         short: [], cat: [], sub: ["status"]),
    res!("flowcontrol.apiserver.k8s.io", "v1", "PriorityLevelConfiguration",
         "prioritylevelconfigurations", "prioritylevelconfiguration", false,
         short: [], cat: [], sub: ["status"]),
    // Stored only: bosun runs no CSI plugins (see the README).
    res!("storage.k8s.io", "v1", "CSIDriver", "csidrivers", "csidriver", false,
         short: [], cat: [], sub: []),
    res!("storage.k8s.io", "v1", "CSINode", "csinodes", "csinode", false,
         short: [], cat: [], sub: []),
    res!("storage.k8s.io", "v1", "CSIStorageCapacity", "csistoragecapacities",
         "csistoragecapacity", true, short: [], cat: [], sub: []),
    res!("storage.k8s.io", "v1", "VolumeAttachment", "volumeattachments", "volumeattachment",
         false, short: [], cat: [], sub: ["status"]),
];

/// Resources served but not stored: `metrics.k8s.io`'s NodeMetrics and
/// PodMetrics, built on each request from the agents' latest readings
/// (as metrics-server serves them), read-only (`get`, `list`).
pub static READ_ONLY_RESOURCES: &[ResourceInfo] = &[
    res!("metrics.k8s.io", "v1beta1", "NodeMetrics", "nodes", "", false,
         short: [], cat: [], sub: []),
    res!("metrics.k8s.io", "v1beta1", "PodMetrics", "pods", "", true,
         short: [], cat: [], sub: []),
    // The deprecated health of the control plane's parts, answered from
    // its own state.
    res!("", "v1", "ComponentStatus", "componentstatuses", "componentstatus", false,
         short: ["cs"], cat: [], sub: []),
];

/// Resources that are only created, answered and never stored: the
/// authentication and authorization reviews (`kubectl auth can-i`,
/// `kubectl auth whoami`, webhook token and access checks).
pub static CREATE_ONLY_RESOURCES: &[ResourceInfo] = &[
    // A pod's binding to a node, as `pods/binding` (the Binding names the pod).
    res!("", "v1", "Binding", "bindings", "", true,
         short: [], cat: [], sub: []),
    res!("authentication.k8s.io", "v1", "TokenReview", "tokenreviews", "", false,
         short: [], cat: [], sub: []),
    res!("authentication.k8s.io", "v1", "SelfSubjectReview", "selfsubjectreviews", "", false,
         short: [], cat: [], sub: []),
    res!("authorization.k8s.io", "v1", "SubjectAccessReview", "subjectaccessreviews", "", false,
         short: [], cat: [], sub: []),
    res!("authorization.k8s.io", "v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews", "",
         false, short: [], cat: [], sub: []),
    res!("authorization.k8s.io", "v1", "LocalSubjectAccessReview", "localsubjectaccessreviews", "",
         true, short: [], cat: [], sub: []),
    res!("authorization.k8s.io", "v1", "SelfSubjectRulesReview", "selfsubjectrulesreviews", "",
         false, short: [], cat: [], sub: []),
];

/// Every resource served: the stored ones, then the read-only ones, then
/// the create-only ones.
pub fn served() -> impl Iterator<Item = &'static ResourceInfo> {
    RESOURCES
        .iter()
        .chain(READ_ONLY_RESOURCES.iter())
        .chain(CREATE_ONLY_RESOURCES.iter())
}

impl ResourceInfo {
    /// Whether the resource is only created and answered, never stored.
    pub fn is_create_only(&self) -> bool {
        CREATE_ONLY_RESOURCES
            .iter()
            .any(|r| r.group == self.group && r.plural == self.plural)
    }

    /// Whether the resource is one of bosun's own (in the static tables),
    /// not a custom resource a CustomResourceDefinition brought.
    pub fn is_builtin(&self) -> bool {
        served().any(|r| r == self)
    }

    /// Whether the resource is served but not stored (only `get` and `list`).
    pub fn is_read_only(&self) -> bool {
        READ_ONLY_RESOURCES
            .iter()
            .any(|r| r.group == self.group && r.plural == self.plural)
    }
}

/// The API groups other than core, each with its versions, preferred first.
pub fn groups() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for r in served().filter(|r| !r.group.is_empty()) {
        match out.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, versions)) => {
                if !versions.contains(&r.version) {
                    versions.push(r.version);
                }
            }
            None => out.push((r.group, vec![r.version])),
        }
    }
    out
}

/// The resource served at `group`/`version` under `plural`.
pub fn by_path(group: &str, version: &str, plural: &str) -> Option<&'static ResourceInfo> {
    served().find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The resource for an object's `apiVersion` and `kind`.
pub fn by_kind(api_version: &str, kind: &str) -> Option<&'static ResourceInfo> {
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    served().find(|r| r.group == group && r.version == version && r.kind == kind)
}

/// The resource a user means by `name` (`po`, `deployments.apps`, `Deployment`).
/// When several versions serve it, the preferred (storage) version wins.
pub fn by_name(name: &str) -> Option<&'static ResourceInfo> {
    preferred(RESOURCES.iter().filter(|r| r.matches_name(name)))
}

/// Of the versions that serve one name, the one kept in storage (the
/// preferred version), else the first.
pub fn preferred<'a>(
    mut matches: impl Iterator<Item = &'a ResourceInfo>,
) -> Option<&'a ResourceInfo> {
    let first = matches.next()?;
    Some(
        std::iter::once(first)
            .chain(matches)
            .find(|r| r.is_storage_version())
            .unwrap_or(first),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_like_kubectl() {
        assert_eq!(by_name("po").unwrap().kind, "Pod");
        assert_eq!(by_name("deploy").unwrap().plural, "deployments");
        assert_eq!(by_name("deployments.apps").unwrap().kind, "Deployment");
        assert_eq!(by_name("deployment.v1.apps").unwrap().kind, "Deployment");
        assert_eq!(by_name("Deployment").unwrap().group, "apps");
        assert_eq!(by_name("hpa").unwrap().version, "v2");
        assert_eq!(by_name("ep").unwrap().kind, "Endpoints");
        assert_eq!(by_name("cm").unwrap().kind, "ConfigMap");
        assert_eq!(by_name("secrets").unwrap().kind, "Secret");
        assert_eq!(by_name("sa").unwrap().kind, "ServiceAccount");
        assert!(by_name("deployments.batch").is_none());
        assert!(by_name("widgets").is_none());
    }

    #[test]
    fn keys_and_paths() {
        let deploy = by_name("deploy").unwrap();
        assert_eq!(
            deploy.storage_key(Some("default"), "web"),
            "/registry/deployments.apps/default/web"
        );
        assert_eq!(
            deploy.collection_path(Some("ns1")),
            "/apis/apps/v1/namespaces/ns1/deployments"
        );
        let node = by_name("no").unwrap();
        assert_eq!(
            node.storage_key(Some("ignored"), "n1"),
            "/registry/nodes/n1"
        );
        assert_eq!(node.collection_path(None), "/api/v1/nodes");
        assert_eq!(deploy.kind_group(), "deployment.apps");
    }

    #[test]
    fn groups_list_each_once() {
        let g = groups();
        let autoscaling = g.iter().find(|(n, _)| *n == "autoscaling").unwrap();
        assert_eq!(autoscaling.1, vec!["v2", "v1", "v2beta2"]);
        assert_eq!(g.iter().filter(|(n, _)| *n == "apps").count(), 1);
        assert!(g
            .iter()
            .any(|(n, v)| *n == "metrics.k8s.io" && *v == ["v1beta1"]));
    }

    #[test]
    fn metrics_are_served_read_only_and_do_not_shadow_core_names() {
        let pods = by_path("metrics.k8s.io", "v1beta1", "pods").unwrap();
        assert_eq!(pods.kind, "PodMetrics");
        assert!(pods.is_read_only() && pods.namespaced);
        assert_eq!(by_name("pods").unwrap().kind, "Pod");
        assert_eq!(by_name("nodes").unwrap().kind, "Node");
        assert!(!by_name("po").unwrap().is_read_only());
    }

    #[test]
    fn events_k8s_io_events_are_stored_as_core_events() {
        let v1 = by_path("events.k8s.io", "v1", "events").unwrap();
        assert_eq!(
            v1.storage_key(Some("default"), "e1"),
            "/registry/events/default/e1"
        );
        assert!(!v1.is_storage_version());
        assert_eq!(by_name("ev").unwrap().group, "");
        assert_eq!(
            by_name("events.events.k8s.io").unwrap().group,
            "events.k8s.io"
        );
        assert_eq!(by_name("rc").unwrap().kind, "ReplicationController");
    }
}
