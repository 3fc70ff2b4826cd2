//! What the scheduler knows of one node: the node itself and the sum of
//! what the pods already on it (bound or assumed) take from it, as
//! kube-scheduler's `NodeInfo`.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Node, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// What a pod asks for when its containers do not say, for scoring only
/// (kube-scheduler's `DefaultMilliCPURequest` and `DefaultMemoryRequest`):
/// so that pods without requests still spread.
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// The pod count a node takes when its status does not say.
pub const DEFAULT_MAX_PODS: i64 = 110;

/// cpu (in millicores) and memory (in bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resources {
    pub milli_cpu: i64,
    pub memory: i64,
}

impl Resources {
    fn add(&mut self, other: Resources) {
        self.milli_cpu += other.milli_cpu;
        self.memory += other.memory;
    }

    fn sub(&mut self, other: Resources) {
        self.milli_cpu -= other.milli_cpu;
        self.memory -= other.memory;
    }

    fn max(&mut self, other: Resources) {
        self.milli_cpu = self.milli_cpu.max(other.milli_cpu);
        self.memory = self.memory.max(other.memory);
    }

    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0 && self.memory == 0
    }
}

fn quantity(q: Option<&Quantity>, milli: bool) -> Option<i64> {
    let q = bosun::quantity::parse_quantity(&q?.0).ok()?;
    let v = if milli { q.millis() } else { q.value() };
    Some(v.clamp(0, i64::MAX as i128) as i64)
}

/// One container's requests (limits stand in for missing requests, as
/// defaulting does); with `non_zero`, the scoring defaults for unset ones.
fn container_requests(c: &Container, non_zero: bool) -> Resources {
    let res = c.resources.as_ref();
    let get = |name: &str, milli: bool| {
        let requested = res
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get(name));
        let limited = res
            .and_then(|r| r.limits.as_ref())
            .and_then(|r| r.get(name));
        quantity(requested.or(limited), milli)
    };
    let cpu = get("cpu", true);
    let memory = get("memory", false);
    if non_zero {
        Resources {
            milli_cpu: cpu.unwrap_or(DEFAULT_MILLI_CPU_REQUEST),
            memory: memory.unwrap_or(DEFAULT_MEMORY_REQUEST),
        }
    } else {
        Resources {
            milli_cpu: cpu.unwrap_or(0),
            memory: memory.unwrap_or(0),
        }
    }
}

/// What a pod requests, as Kubernetes computes it: the sum over its
/// containers and its restartable init containers (sidecars), or the
/// largest init container's request (plus the sidecars started before
/// it) if that is more; plus the pod's overhead.
pub fn pod_requests(spec: &PodSpec, non_zero: bool) -> Resources {
    let mut total = Resources::default();
    for c in &spec.containers {
        total.add(container_requests(c, non_zero));
    }
    let mut sidecars = Resources::default();
    let mut init_max = Resources::default();
    for c in spec.init_containers.iter().flatten() {
        let r = container_requests(c, non_zero);
        if c.restart_policy.as_deref() == Some("Always") {
            sidecars.add(r);
            init_max.max(sidecars);
        } else {
            let mut during = sidecars;
            during.add(r);
            init_max.max(during);
        }
    }
    total.add(sidecars);
    total.max(init_max);
    if let Some(overhead) = &spec.overhead {
        total.add(Resources {
            milli_cpu: quantity(overhead.get("cpu"), true).unwrap_or(0),
            memory: quantity(overhead.get("memory"), false).unwrap_or(0),
        });
    }
    total
}

/// A host port a container takes: (address, protocol, port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    pub ip: String,
    pub protocol: String,
    pub port: i32,
}

impl HostPort {
    /// Two uses of a port clash when protocol and port agree and either
    /// binds every address.
    pub fn conflicts(&self, other: &HostPort) -> bool {
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip == other.ip || self.ip == "0.0.0.0" || other.ip == "0.0.0.0")
    }
}

/// The host ports a pod's containers ask for.
pub fn host_ports(spec: &PodSpec) -> Vec<HostPort> {
    let init = spec.init_containers.iter().flatten();
    spec.containers
        .iter()
        .chain(init)
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|&h| h > 0)?;
            let ip = p.host_ip.clone().filter(|i| !i.is_empty());
            Some(HostPort {
                ip: ip.unwrap_or_else(|| "0.0.0.0".into()),
                protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                port,
            })
        })
        .collect()
}

/// The uid of the pod's controlling owner, if it has one.
pub fn controller_uid(pod: &Pod) -> Option<&str> {
    crate::toolkit::controller_of(&pod.metadata).map(|o| o.uid.as_str())
}

/// Whether a pod has finished: it no longer takes anything from its node.
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// One node and what its pods take from it.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    pub node: Arc<Node>,
    pub allocatable: Resources,
    pub allowed_pods: i64,
    /// The pods' requests.
    pub requested: Resources,
    /// The pods' requests with the scoring defaults for unset ones.
    pub non_zero_requested: Resources,
    pub pods: i64,
    pub used_ports: Vec<HostPort>,
    /// How many of its pods each controlling owner (by uid) has here.
    pub owners: HashMap<String, usize>,
    /// The pods counted here (the ones preemption may remove), shared
    /// with the pod cache: a node info is copied per scheduling cycle.
    pub pod_list: Vec<Arc<Pod>>,
}

impl NodeInfo {
    pub fn new(node: Arc<Node>) -> Self {
        let mut info = NodeInfo {
            node: Arc::default(),
            allocatable: Resources::default(),
            allowed_pods: 0,
            requested: Resources::default(),
            non_zero_requested: Resources::default(),
            pods: 0,
            used_ports: Vec::new(),
            owners: HashMap::new(),
            pod_list: Vec::new(),
        };
        info.set_node(node);
        info
    }

    /// The node (again), with what it offers; the pods counted stay.
    pub fn set_node(&mut self, node: Arc<Node>) {
        let alloc = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
        self.allocatable = Resources {
            milli_cpu: quantity(alloc.and_then(|a| a.get("cpu")), true).unwrap_or(0),
            memory: quantity(alloc.and_then(|a| a.get("memory")), false).unwrap_or(0),
        };
        self.allowed_pods =
            quantity(alloc.and_then(|a| a.get("pods")), false).unwrap_or(DEFAULT_MAX_PODS);
        self.node = node;
    }

    pub fn name(&self) -> &str {
        self.node.metadata.name.as_deref().unwrap_or("")
    }

    /// Counts a (non-terminal) pod bound or assumed to this node.
    pub fn add_pod(&mut self, pod: &Pod) {
        self.add_shared(Arc::new(pod.clone()));
    }

    /// [`NodeInfo::add_pod`] without a copy of the pod.
    pub fn add_shared(&mut self, pod: Arc<Pod>) {
        let Some(spec) = &pod.spec else { return };
        self.requested.add(pod_requests(spec, false));
        self.non_zero_requested.add(pod_requests(spec, true));
        self.pods += 1;
        self.used_ports.extend(host_ports(spec));
        if let Some(uid) = controller_uid(&pod) {
            *self.owners.entry(uid.to_string()).or_default() += 1;
        }
        self.pod_list.push(pod);
    }

    /// Takes back what [`NodeInfo::add_shared`] counted for `pod` (the
    /// same `Arc`); false if it was not counted here.
    pub fn remove_pod(&mut self, pod: &Arc<Pod>) -> bool {
        let Some(i) = self.pod_list.iter().position(|p| Arc::ptr_eq(p, pod)) else {
            return false;
        };
        self.pod_list.swap_remove(i);
        let Some(spec) = &pod.spec else { return true };
        self.requested.sub(pod_requests(spec, false));
        self.non_zero_requested.sub(pod_requests(spec, true));
        self.pods -= 1;
        for port in host_ports(spec) {
            if let Some(j) = self.used_ports.iter().position(|u| *u == port) {
                self.used_ports.swap_remove(j);
            }
        }
        if let Some(uid) = controller_uid(pod) {
            if let Some(n) = self.owners.get_mut(uid) {
                *n -= 1;
                if *n == 0 {
                    self.owners.remove(uid);
                }
            }
        }
        true
    }
}

/// Node infos for `nodes` with the non-terminal pods of `pods` counted on
/// the node each is bound to.
pub fn snapshot<'a>(
    nodes: impl IntoIterator<Item = Arc<Node>>,
    pods: impl IntoIterator<Item = (&'a Pod, &'a str)>,
) -> Vec<NodeInfo> {
    let mut infos: Vec<NodeInfo> = nodes.into_iter().map(NodeInfo::new).collect();
    infos.sort_by(|a, b| a.name().cmp(b.name()));
    let index: HashMap<String, usize> = infos
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name().to_string(), i))
        .collect();
    for (pod, node) in pods {
        if is_terminal(pod) {
            continue;
        }
        if let Some(&i) = index.get(node) {
            infos[i].add_pod(pod);
        }
    }
    infos
}
