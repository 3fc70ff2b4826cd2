//! Names Kubernetes gives a fixed meaning (`k8s.io/api/core/v1`'s
//! well-known taints, the node lease namespace, volume finalizers and
//! annotations), shared by the control plane, the agent and the CLI.

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
