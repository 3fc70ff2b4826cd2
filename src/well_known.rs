//! Names Kubernetes gives a fixed meaning (`k8s.io/api/core/v1`'s
//! well-known taints, the node lease namespace, volume finalizers and
//! annotations, the deployment and service labels and annotations),
//! shared by the control plane, the agent and the CLI.

/// The node's Ready condition is False.
pub const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
/// The node's Ready condition is Unknown: its agent went silent.
pub const TAINT_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// The node is cordoned (`spec.unschedulable`).
pub const TAINT_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
pub const TAINT_MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
pub const TAINT_DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
pub const TAINT_PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
pub const TAINT_NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";

/// Where each node's heartbeat Lease lives.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// The finalizer that keeps a claim while pods use it.
pub const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";
/// The finalizer that keeps a volume while it is bound.
pub const PV_PROTECTION: &str = "kubernetes.io/pv-protection";
/// The claim annotation naming the node the scheduler chose for a
/// `WaitForFirstConsumer` claim's pod.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

/// The finalizer in a namespace's `spec.finalizers` that keeps it until
/// the namespace controller has deleted everything in it.
pub const NAMESPACE_FINALIZER: &str = "kubernetes";

/// A Deployment's revision, on it and on each of its ReplicaSets.
pub const REVISION: &str = "deployment.kubernetes.io/revision";
/// The earlier revisions a ReplicaSet stood for, comma-separated.
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
/// The Deployment's `spec.replicas` when it last scaled this ReplicaSet.
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
/// `spec.replicas` plus max surge when the Deployment last scaled this set.
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
/// Why an object changed: the command line `--record` writes, shown by
/// `rollout history`.
pub const CHANGE_CAUSE: &str = "kubernetes.io/change-cause";
/// The configuration `apply` last wrote, for its three-way merge.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// The rollback request of extensions/v1beta1 Deployments.
pub const DEPRECATED_ROLLBACK_TO: &str = "deprecated.deployment.rollback.to";
/// Deployment annotations that are not part of its template's revision:
/// neither copied onto a new ReplicaSet nor taken back from one on undo
/// (upstream's `annotationsToSkip`, the same list in the deployment
/// controller and in kubectl).
pub const DEPLOYMENT_ANNOTATIONS_TO_SKIP: &[&str] = &[
    LAST_APPLIED,
    REVISION,
    REVISION_HISTORY,
    DESIRED_REPLICAS,
    MAX_REPLICAS,
    DEPRECATED_ROLLBACK_TO,
];

/// The label naming the Service an EndpointSlice belongs to.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// Endpoints with this label are not mirrored into EndpointSlices.
pub const SKIP_MIRROR_LABEL: &str = "endpointslice.kubernetes.io/skip-mirror";
/// The node label holding its hostname, the usual topology key.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// The node label naming its operating system (`GOOS`).
pub const OS_LABEL: &str = "kubernetes.io/os";
/// The node label naming its CPU architecture (`GOARCH`).
pub const ARCH_LABEL: &str = "kubernetes.io/arch";
