//! What both endpoint controllers read off a service and its pods
//! (Kubernetes' `pkg/controller/util/endpoint` and `podutil.FindPort`):
//! which pods a service selects, which of them belong in its endpoints,
//! whether they are ready, their hostname, and each service port's number
//! on each pod.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{ObjectReference, Pod, Service, ServicePort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::ResourceExt;

use crate::toolkit::PodIndex;

/// The service's selector; None when it has none (or an empty one, which
/// the API stores as none): then its endpoints are not managed.
pub fn selector_of(svc: &Service) -> Option<&BTreeMap<String, String>> {
    svc.spec
        .as_ref()?
        .selector
        .as_ref()
        .filter(|s| !s.is_empty())
}

/// Whether every pair of `selector` is among `labels`.
fn selects(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The pods of the service's namespace its selector matches.
pub fn selected_pods(svc: &Service, pods: &PodIndex) -> Vec<std::sync::Arc<Pod>> {
    let Some(selector) = selector_of(svc) else {
        return Vec::new();
    };
    pods.in_namespace(svc.metadata.namespace.as_deref().unwrap_or_default())
        .into_iter()
        .filter(|p| selects(selector, p.labels()))
        .collect()
}

pub fn publishes_not_ready(svc: &Service) -> bool {
    svc.spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false)
}

pub fn is_headless(svc: &Service) -> bool {
    svc.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None")
}

pub fn service_ports(svc: &Service) -> &[ServicePort] {
    svc.spec
        .as_ref()
        .and_then(|s| s.ports.as_deref())
        .unwrap_or_default()
}

/// The pod's (first) IP, if it has one yet.
pub fn pod_ip(pod: &Pod) -> Option<&str> {
    let status = pod.status.as_ref()?;
    status
        .pod_ip
        .as_deref()
        .filter(|ip| !ip.is_empty())
        .or_else(|| {
            status
                .pod_ips
                .as_ref()?
                .first()
                .map(|ip| ip.ip.as_str())
                .filter(|ip| !ip.is_empty())
        })
}

pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

pub use crate::toolkit::pods::is_ready;

/// The node the pod is bound to, if any.
pub fn node_name_of(pod: &Pod) -> Option<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty())
}

/// `ShouldPodBeInEndpoints`: not finished (Succeeded or Failed), has an
/// IP, and is not terminating unless `include_terminating`.
pub fn should_be_in_endpoints(pod: &Pod, include_terminating: bool) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded") | Some("Failed")) {
        return false;
    }
    if pod_ip(pod).is_none() {
        return false;
    }
    include_terminating || !is_terminating(pod)
}

/// The pod's hostname when it names itself under the service
/// (`hostname` set and `subdomain` equal to the service's name), as a
/// StatefulSet's pods do: the DNS name `<hostname>.<svc>.<ns>.svc`.
pub fn hostname_for(pod: &Pod, svc: &Service) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    let hostname = spec.hostname.as_deref().filter(|h| !h.is_empty())?;
    (spec.subdomain.as_deref() == Some(svc.name_any().as_str())
        && pod.namespace() == svc.namespace())
    .then(|| hostname.to_string())
}

/// A reference to the pod, as endpoints carry it.
pub fn pod_ref(pod: &Pod) -> ObjectReference {
    ObjectReference {
        kind: Some("Pod".into()),
        namespace: pod.namespace(),
        name: Some(pod.name_any()),
        uid: pod.metadata.uid.clone(),
        ..Default::default()
    }
}

/// The protocol of a service port (TCP when unset).
pub fn protocol_of(port: &ServicePort) -> &str {
    port.protocol.as_deref().unwrap_or("TCP")
}

/// `FindPort`: the service port's `targetPort` on this pod. A number is
/// itself; a name is looked up among the pod's containers' ports with the
/// same protocol (None when no container has it: the pod is left out of
/// that port).
pub fn find_port(pod: &Pod, port: &ServicePort) -> Option<i32> {
    match &port.target_port {
        None => Some(port.port),
        Some(IntOrString::Int(n)) if *n == 0 => Some(port.port),
        Some(IntOrString::Int(n)) => Some(*n),
        Some(IntOrString::String(name)) if name.is_empty() => Some(port.port),
        Some(IntOrString::String(name)) => {
            let spec = pod.spec.as_ref()?;
            spec.containers
                .iter()
                .flat_map(|c| c.ports.iter().flatten())
                .find(|p| {
                    p.name.as_deref() == Some(name.as_str())
                        && p.protocol.as_deref().unwrap_or("TCP") == protocol_of(port)
                })
                .map(|p| p.container_port)
        }
    }
}

/// Which pods each service's endpoints listed at its last sync, so that a
/// pod relabelled away from a service (or deleted) still wakes the
/// service it was in (Kubernetes compares a pod's old and new labels; a
/// watch-fed cache only has the new ones).
#[derive(Default)]
pub struct Membership {
    by_service: Mutex<HashMap<(String, String), BTreeSet<String>>>,
}

impl Membership {
    pub fn record(&self, svc: &Service, pods: BTreeSet<String>) {
        let key = (svc.namespace().unwrap_or_default(), svc.name_any());
        self.by_service.lock().unwrap().insert(key, pods);
    }

    pub fn forget(&self, namespace: &str, name: &str) {
        self.by_service
            .lock()
            .unwrap()
            .remove(&(namespace.to_string(), name.to_string()));
    }

    /// The services to sync when `pod` changes: those whose selector
    /// matches it now, and those whose endpoints listed it.
    pub fn services_for(&self, services: &Store<Service>, pod: &Pod) -> Vec<ObjectRef<Service>> {
        let ns = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        let mut out: BTreeSet<(String, String)> = services
            .state()
            .iter()
            .filter(|s| s.namespace().as_deref() == Some(ns.as_str()))
            .filter(|s| selector_of(s).is_some_and(|sel| selects(sel, pod.labels())))
            .map(|s| (ns.clone(), s.name_any()))
            .collect();
        for ((svc_ns, svc), pods) in self.by_service.lock().unwrap().iter() {
            if *svc_ns == ns && pods.contains(&name) {
                out.insert((svc_ns.clone(), svc.clone()));
            }
        }
        out.into_iter()
            .map(|(ns, name)| ObjectRef::new(&name).within(&ns))
            .collect()
    }
}
