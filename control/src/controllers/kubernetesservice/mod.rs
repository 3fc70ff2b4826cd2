//! The `kubernetes` Service in `default`, kept as kube-apiserver's
//! bootstrap controller keeps it (`pkg/controlplane/controller/
//! kubernetesservice` and the master-count endpoint reconciler): how pods
//! reach the API. In-cluster clients (client-go's `InClusterConfig`,
//! kube-rs `Client::try_default()`) dial `KUBERNETES_SERVICE_HOST:
//! KUBERNETES_SERVICE_PORT`, which the agent sets to this Service's
//! ClusterIP and port, and its service proxy sends on to the endpoint
//! written here.
//!
//! - the Service: ClusterIP the first address of the service network
//!   (10.96.0.1, which the allocator never hands out to another one),
//!   port `https` 443 to the control plane's secure port, no selector,
//!   labels `component: apiserver`, `provider: kubernetes`; created when
//!   missing, its ports and type put back when changed;
//! - its Endpoints (labelled `endpointslice.kubernetes.io/skip-mirror`)
//!   and its EndpointSlice (named `kubernetes`, without the managed-by
//!   label, so the EndpointSlice controller leaves it alone): every live
//!   API server's advertised address and secure port, from their identity
//!   Leases ([`peers`], upstream's lease endpoint reconciler); a server
//!   stopping takes itself out ([`leave`]).
//!
//! It runs in the API server's process, not as one of the `--controllers`:
//! every control plane serves this Service. It looks again every 10s, as
//! upstream does, and at once when one of the three objects changes.

pub mod peers;
#[cfg(test)]
mod tests;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use serde_json::{json, Value};

use bosun::well_known::{SERVICE_NAME_LABEL, SKIP_MIRROR_LABEL};

use crate::toolkit::api_errors::is_status;

/// The Service's name and namespace.
pub const NAME: &str = "kubernetes";
pub const NAMESPACE: &str = "default";
/// The Service's one port: `https` 443.
pub const PORT_NAME: &str = "https";
pub const SERVICE_PORT: i32 = 443;
/// How often everything is checked even if no watch event came.
const INTERVAL: Duration = Duration::from_secs(10);

/// What the Service and its endpoints say.
#[derive(Debug, Clone, PartialEq)]
pub struct KubernetesServiceOptions {
    /// The Service's ClusterIP: the service network's first address.
    pub service_ip: Ipv4Addr,
    /// Where pods reach the control plane (its advertise address); no
    /// endpoints are written without one.
    pub advertise: Option<IpAddr>,
    /// The control plane's secure port.
    pub port: u16,
}

/// The Service as it should be.
pub fn desired_service(o: &KubernetesServiceOptions) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "labels": {"component": "apiserver", "provider": "kubernetes"},
        },
        "spec": {
            "type": "ClusterIP",
            "clusterIP": o.service_ip.to_string(),
            "clusterIPs": [o.service_ip.to_string()],
            "ports": service_ports(o),
            "sessionAffinity": "None",
        },
    })
}

fn service_ports(o: &KubernetesServiceOptions) -> Value {
    json!([{"name": PORT_NAME, "protocol": "TCP", "port": SERVICE_PORT, "targetPort": o.port}])
}

/// The Endpoints as they should be, given an advertise address.
pub fn desired_endpoints(o: &KubernetesServiceOptions, ip: IpAddr) -> Value {
    endpoints_for(&[SocketAddr::new(ip, o.port)])
}

/// The Endpoints listing every live API server (sorted): one subset per
/// secure port (one in any cluster whose servers share a port).
pub fn endpoints_for(servers: &[SocketAddr]) -> Value {
    let mut ports: Vec<u16> = servers.iter().map(|s| s.port()).collect();
    ports.dedup();
    ports.sort_unstable();
    ports.dedup();
    let subsets: Vec<Value> = ports
        .iter()
        .map(|port| {
            let addresses: Vec<Value> = servers
                .iter()
                .filter(|s| s.port() == *port)
                .map(|s| json!({"ip": s.ip().to_string()}))
                .collect();
            json!({"addresses": addresses,
                   "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}]})
        })
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "labels": {SKIP_MIRROR_LABEL: "true"},
        },
        "subsets": subsets,
    })
}

/// The EndpointSlice as it should be, given an advertise address.
pub fn desired_slice(o: &KubernetesServiceOptions, ip: IpAddr) -> Value {
    slice_for(&[SocketAddr::new(ip, o.port)]).expect("one server")
}

/// The EndpointSlice listing the live API servers of the lowest secure
/// port and address family (a slice has one set of ports; servers on
/// other ports, only possible when they share a host, are in the
/// Endpoints alone). None without servers.
pub fn slice_for(servers: &[SocketAddr]) -> Option<Value> {
    let first = servers.iter().min_by_key(|s| (s.port(), s.is_ipv6()))?;
    let same = |s: &&SocketAddr| s.port() == first.port() && s.is_ipv6() == first.is_ipv6();
    let endpoints: Vec<Value> = servers
        .iter()
        .filter(same)
        .map(|s| json!({"addresses": [s.ip().to_string()], "conditions": {"ready": true}}))
        .collect();
    Some(json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "labels": {SERVICE_NAME_LABEL: NAME},
        },
        "addressType": if first.is_ipv6() { "IPv6" } else { "IPv4" },
        "endpoints": endpoints,
        "ports": [{"name": PORT_NAME, "port": first.port(), "protocol": "TCP"}],
    }))
}

/// The ports as the Service format check compares them (name, port,
/// protocol, targetPort).
fn port_facts(ports: &Value) -> Vec<(String, i64, String, String)> {
    ports
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p["name"].as_str().unwrap_or("").to_string(),
                p["port"].as_i64().unwrap_or(0),
                p["protocol"].as_str().unwrap_or("TCP").to_string(),
                match &p["targetPort"] {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    _ => String::new(),
                },
            )
        })
        .collect()
}

/// The merge patch that puts a changed Service's ports and type back
/// (upstream's `checkServiceFormat`), or None if it is right.
pub fn service_repair(live: &Value, o: &KubernetesServiceOptions) -> Option<Value> {
    let want = service_ports(o);
    let right_type = live.pointer("/spec/type").and_then(Value::as_str) == Some("ClusterIP");
    let live_ports = live.pointer("/spec/ports").cloned().unwrap_or(Value::Null);
    if right_type && port_facts(&live_ports) == port_facts(&want) {
        return None;
    }
    Some(json!({"spec": {"type": "ClusterIP", "ports": want}}))
}

/// The merge patch that makes live Endpoints the desired ones, or None.
pub fn endpoints_repair(live: &Value, want: &Value) -> Option<Value> {
    let label = SKIP_MIRROR_LABEL;
    let labelled = live.pointer("/metadata/labels").and_then(|l| l.get(label))
        == want.pointer("/metadata/labels").and_then(|l| l.get(label));
    if labelled && live.get("subsets") == want.get("subsets") {
        return None;
    }
    Some(json!({"metadata": {"labels": want["metadata"]["labels"]}, "subsets": want["subsets"]}))
}

/// What makes a live EndpointSlice the desired one: None if it is, a
/// merge patch, or `Err(())` when its addressType (immutable) differs and
/// it must be made anew.
#[allow(clippy::result_unit_err)]
pub fn slice_repair(live: &Value, want: &Value) -> Result<Option<Value>, ()> {
    if live.get("addressType") != want.get("addressType") {
        return Err(());
    }
    let label = SERVICE_NAME_LABEL;
    let labelled =
        live.pointer("/metadata/labels").and_then(|l| l.get(label)) == Some(&json!(NAME));
    let conditions_ready = |v: &Value| -> Vec<(Value, bool)> {
        v["endpoints"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                (
                    e["addresses"].clone(),
                    e["conditions"]["ready"].as_bool().unwrap_or(false),
                )
            })
            .collect()
    };
    if labelled
        && conditions_ready(live) == conditions_ready(want)
        && live.get("ports") == want.get("ports")
    {
        return Ok(None);
    }
    Ok(Some(json!({
        "metadata": {"labels": want["metadata"]["labels"]},
        "endpoints": want["endpoints"],
        "ports": want["ports"],
    })))
}

/// One pass: this server's identity Lease renewed, the Service, then its
/// Endpoints and EndpointSlice listing every live API server.
pub async fn reconcile(client: &Client, o: &KubernetesServiceOptions) -> Result<(), kube::Error> {
    let own = o.advertise.map(|ip| SocketAddr::new(ip, o.port));
    if let Some(own) = own {
        peers::renew(client, own).await?;
    }
    let mut servers = peers::live(client).await?;
    servers.extend(own);
    servers.sort();
    servers.dedup();
    reconcile_with(client, o, &servers).await
}

/// Takes this server out of the endpoints at once (on shutdown), as
/// upstream's lease reconciler's `RemoveEndpoints`.
pub async fn leave(client: &Client, o: &KubernetesServiceOptions) -> Result<(), kube::Error> {
    let Some(ip) = o.advertise else {
        return Ok(());
    };
    let own = SocketAddr::new(ip, o.port);
    peers::remove(client, own).await?;
    let servers: Vec<SocketAddr> = peers::live(client)
        .await?
        .into_iter()
        .filter(|s| *s != own)
        .collect();
    reconcile_with(client, o, &servers).await
}

async fn reconcile_with(
    client: &Client,
    o: &KubernetesServiceOptions,
    servers: &[SocketAddr],
) -> Result<(), kube::Error> {
    let services: Api<Service> = Api::namespaced(client.clone(), NAMESPACE);
    match services.get_opt(NAME).await? {
        None => {
            let svc: Service = serde_json::from_value(desired_service(o)).expect("a Service");
            match services.create(&PostParams::default(), &svc).await {
                Ok(_) => tracing::info!(ip = %o.service_ip, "created the kubernetes Service"),
                Err(e) if is_status(&e, 409) => {}
                Err(e) => return Err(e),
            }
        }
        Some(live) => {
            let live = serde_json::to_value(&live).expect("serializable");
            // Servers on one host listen on different ports: the target
            // port of any live one is right (the endpoints say which).
            let target = live
                .pointer("/spec/ports/0/targetPort")
                .and_then(Value::as_u64);
            let o = match target {
                Some(t) if servers.iter().any(|s| u64::from(s.port()) == t) => {
                    &KubernetesServiceOptions {
                        port: t as u16,
                        ..o.clone()
                    }
                }
                _ => o,
            };
            if let Some(patch) = service_repair(&live, o) {
                tracing::info!("putting the kubernetes Service's ports back");
                services
                    .patch(NAME, &PatchParams::default(), &Patch::Merge(patch))
                    .await?;
            }
        }
    }
    if o.advertise.is_none() {
        return Ok(());
    }
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), NAMESPACE);
    let want = endpoints_for(servers);
    match endpoints.get_opt(NAME).await? {
        None => {
            let obj: Endpoints = serde_json::from_value(want).expect("Endpoints");
            match endpoints.create(&PostParams::default(), &obj).await {
                Ok(_) => {}
                Err(e) if is_status(&e, 409) => {}
                Err(e) => return Err(e),
            }
        }
        Some(live) => {
            let live = serde_json::to_value(&live).expect("serializable");
            if let Some(patch) = endpoints_repair(&live, &want) {
                tracing::info!(?servers, "updating the kubernetes Endpoints");
                endpoints
                    .patch(NAME, &PatchParams::default(), &Patch::Merge(patch))
                    .await?;
            }
        }
    }
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), NAMESPACE);
    let Some(want) = slice_for(servers) else {
        return Ok(());
    };
    let create = |slices: Api<EndpointSlice>, want: Value| async move {
        let obj: EndpointSlice = serde_json::from_value(want).expect("an EndpointSlice");
        match slices.create(&PostParams::default(), &obj).await {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 409) => Ok(()),
            Err(e) => Err(e),
        }
    };
    match slices.get_opt(NAME).await? {
        None => create(slices, want).await?,
        Some(live) => {
            let live = serde_json::to_value(&live).expect("serializable");
            match slice_repair(&live, &want) {
                Ok(None) => {}
                Ok(Some(patch)) => {
                    tracing::info!(?servers, "updating the kubernetes EndpointSlice");
                    slices
                        .patch(NAME, &PatchParams::default(), &Patch::Merge(patch))
                        .await?;
                }
                Err(()) => {
                    slices.delete(NAME, &DeleteParams::default()).await?;
                    create(slices, want).await?;
                }
            }
        }
    }
    Ok(())
}

/// A stream of "something changed" for one object named `kubernetes`.
fn changes<K>(client: &Client) -> futures::stream::BoxStream<'static, ()>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + 'static,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), NAMESPACE);
    // Backing off on errors: a watch the API refuses (it is shutting down)
    // is not retried in a tight loop.
    watcher::watcher(
        api,
        watcher::Config::default().fields(&format!("metadata.name={NAME}")),
    )
    .default_backoff()
    .filter_map(|e| async move {
        match e {
            Ok(watcher::Event::Apply(_)) | Ok(watcher::Event::Delete(_)) => Some(()),
            Ok(watcher::Event::InitDone) => Some(()),
            _ => None,
        }
    })
    .boxed()
}

/// Keeps the Service and its endpoints right until dropped: at start,
/// every [`INTERVAL`], and whenever one of them changes.
pub fn start(client: Client, o: KubernetesServiceOptions) -> BoxFuture<'static, ()> {
    async move {
        let mut events = futures::stream::select_all([
            changes::<Service>(&client),
            changes::<Endpoints>(&client),
            changes::<EndpointSlice>(&client),
        ]);
        let mut tick = tokio::time::interval(INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if let Err(e) = reconcile(&client, &o).await {
                tracing::warn!(error = %e, "keeping the kubernetes Service");
            }
            tokio::select! {
                _ = tick.tick() => {}
                Some(()) = events.next() => {}
            }
        }
    }
    .boxed()
}

/// The address published as the API's endpoint when `--advertise-address`
/// is not given, as kube-apiserver picks it: the bind address if it is a
/// specific, non-loopback one, else the IPv4 address of the interface of
/// the host's default route; None if the host has no such route.
pub fn default_advertise_address(bind: IpAddr) -> Option<IpAddr> {
    if !bind.is_unspecified() && !bind.is_loopback() {
        return Some(bind);
    }
    let routes = std::fs::read_to_string("/proc/net/route").ok()?;
    let interface = default_route_interface(&routes)?;
    nix::ifaddrs::getifaddrs()
        .ok()?
        .filter(|i| i.interface_name == interface)
        .find_map(|i| Some(IpAddr::V4(i.address?.as_sockaddr_in()?.ip())))
}

/// The interface of the first default route that is up in
/// `/proc/net/route`'s text.
pub fn default_route_interface(routes: &str) -> Option<String> {
    routes.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (iface, dest, flags, mask) = (f.first()?, f.get(1)?, f.get(3)?, f.get(7)?);
        let up = u32::from_str_radix(flags, 16).ok()? & 1 == 1;
        (*dest == "00000000" && *mask == "00000000" && up).then(|| iface.to_string())
    })
}
