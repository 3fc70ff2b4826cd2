//! `bosun port-forward TYPE/NAME [LOCAL:]REMOTE ...`: local ports forwarded
//! to a pod through the API's `pods/portforward`, as kubectl port-forward.
//!
//! - `pod/NAME` (or a bare NAME), `svc/NAME`, `deploy/NAME`: a service or a
//!   deployment picks one of its running pods (ready ones first) by its
//!   selector; a service port (number or name) becomes the pod port its
//!   `targetPort` names (a number, or a container port's name).
//! - Each accepted local connection gets a WebSocket of its own
//!   (kube-rs's `Api::<Pod>::portforward`), so connections run side by side.
//! - Runs until Ctrl-C; when the pod is deleted it ends with "lost
//!   connection to pod", as kubectl does.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use anyhow::{anyhow, bail, Context as _, Result};
use clap::Args;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, ListParams};
use kube::ResourceExt;
use tokio::net::{TcpListener, TcpStream};

use super::client::Ctx;

#[derive(Debug, Args)]
pub struct PortForwardArgs {
    /// pod/NAME (or NAME), svc/NAME or deploy/NAME.
    target: String,
    /// [LOCAL:]REMOTE: LOCAL defaults to REMOTE; empty or 0 picks a free port.
    #[arg(required = true, value_name = "[LOCAL:]REMOTE")]
    ports: Vec<String>,
    /// Addresses to listen on (comma-separated); localhost is 127.0.0.1 and ::1.
    #[arg(long, value_delimiter = ',', default_value = "localhost")]
    address: Vec<String>,
}

/// A `[LOCAL:]REMOTE` argument: the local port if given (0 for any), and
/// the remote port as written (a number or a port name).
fn parse_spec(spec: &str) -> Result<(Option<u16>, String)> {
    let (local, remote) = match spec.split_once(':') {
        Some((l, r)) => (Some(l), r),
        None => (None, spec),
    };
    if remote.is_empty() {
        bail!("invalid port specification {spec:?}: the remote port is missing");
    }
    let local = match local {
        None => None,
        Some("") => Some(0),
        Some(l) => Some(
            l.parse::<u16>()
                .with_context(|| format!("invalid local port {l:?} in {spec:?}"))?,
        ),
    };
    Ok((local, remote.to_string()))
}

/// A pod port: a number, or the name of one of its containers' ports.
fn pod_port(pod: &Pod, port: &str) -> Result<u16> {
    if let Ok(n) = port.parse::<u16>() {
        if n == 0 {
            bail!("remote port must be > 0");
        }
        return Ok(n);
    }
    pod.spec
        .iter()
        .flat_map(|s| &s.containers)
        .flat_map(|c| c.ports.iter().flatten())
        .find(|p| p.name.as_deref() == Some(port))
        .and_then(|p| u16::try_from(p.container_port).ok())
        .ok_or_else(|| {
            anyhow!(
                "Pod '{}' does not have a named port '{port}'",
                pod.name_any()
            )
        })
}

/// The service port `port` (number or name) names, and the pod port its
/// `targetPort` leads to.
fn service_port(svc: &Service, pod: &Pod, port: &str) -> Result<(u16, u16)> {
    let sp = svc
        .spec
        .iter()
        .flat_map(|s| s.ports.iter().flatten())
        .find(|p| p.port.to_string() == port || p.name.as_deref() == Some(port))
        .ok_or_else(|| {
            anyhow!(
                "Service {} does not have a service port {port}",
                svc.name_any()
            )
        })?;
    let number = u16::try_from(sp.port).context("service port out of range")?;
    let target = match &sp.target_port {
        None | Some(IntOrString::Int(0)) => number,
        Some(IntOrString::Int(n)) => u16::try_from(*n).context("targetPort out of range")?,
        Some(IntOrString::String(name)) => pod_port(pod, name)?,
    };
    Ok((number, target))
}

fn is_running(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

fn is_ready(p: &Pod) -> bool {
    p.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// The pod kubectl would pick among a selector's: running, ready ones
/// first, then the oldest.
fn pick_pod(mut pods: Vec<Pod>) -> Option<Pod> {
    pods.retain(is_running);
    pods.sort_by_key(|p| {
        (
            !is_ready(p),
            p.metadata.creation_timestamp.clone().map(|t| t.0),
            p.name_any(),
        )
    });
    pods.into_iter().next()
}

/// The pod to forward to and each `(local, remote)` pair.
async fn resolve(ctx: &Ctx, args: &PortForwardArgs) -> Result<(Pod, Vec<(u16, u16)>)> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let (kind, name) = args.target.split_once('/').unwrap_or(("pod", &args.target));
    if name.is_empty() {
        bail!("invalid resource name {:?}", args.target);
    }
    let by_selector = |selector: String, what: String| {
        let pods = pods.clone();
        async move {
            if selector.is_empty() {
                bail!("{what} has no selector, so it has no pods to forward to");
            }
            let list = pods.list(&ListParams::default().labels(&selector)).await?;
            pick_pod(list.items).ok_or_else(|| anyhow!("no running pod found for {what}"))
        }
    };
    let specs: Vec<(Option<u16>, String)> = args
        .ports
        .iter()
        .map(|s| parse_spec(s))
        .collect::<Result<_>>()?;
    match kind {
        "pod" | "pods" | "po" => {
            let pod = pods.get(name).await?;
            let ports = pod_ports(&pod, &specs)?;
            Ok((pod, ports))
        }
        "deployment" | "deployments" | "deploy" => {
            let deploy: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
            let d = deploy.get(name).await?;
            let selector = serde_json::to_value(&d.spec.selector).unwrap_or_default();
            let selector = bosun::selector::label_selector_string_json(Some(&selector));
            let pod = by_selector(selector, format!("deployment/{name}")).await?;
            let ports = pod_ports(&pod, &specs)?;
            Ok((pod, ports))
        }
        "service" | "services" | "svc" => {
            let services: Api<Service> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
            let svc = services.get(name).await?;
            let selector = svc
                .spec
                .as_ref()
                .and_then(|s| s.selector.as_ref())
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
            let pod = by_selector(selector, format!("service/{name}")).await?;
            let mut ports = Vec::new();
            for (local, remote) in &specs {
                let (number, target) = service_port(&svc, &pod, remote)?;
                ports.push((local.unwrap_or(number), target));
            }
            Ok((pod, ports))
        }
        other => bail!("cannot port-forward to a {other}: use pod/NAME, svc/NAME or deploy/NAME"),
    }
}

fn pod_ports(pod: &Pod, specs: &[(Option<u16>, String)]) -> Result<Vec<(u16, u16)>> {
    specs
        .iter()
        .map(|(local, remote)| {
            let remote = pod_port(pod, remote)?;
            Ok((local.unwrap_or(remote), remote))
        })
        .collect()
}

/// The addresses `--address` names (localhost: both loopbacks).
fn addresses(args: &[String]) -> Result<Vec<(IpAddr, bool)>> {
    let mut out = Vec::new();
    for a in args {
        if a == "localhost" {
            out.push((IpAddr::V4(Ipv4Addr::LOCALHOST), true));
            // Optional, as kubectl: not every host has IPv6.
            out.push((IpAddr::V6(Ipv6Addr::LOCALHOST), false));
        } else {
            let ip = a
                .parse()
                .with_context(|| format!("--address: {a:?} is not an IP address or localhost"))?;
            out.push((ip, true));
        }
    }
    Ok(out)
}

/// One local connection, forwarded over a port-forward of its own.
async fn forward(pods: Api<Pod>, pod: String, mut conn: TcpStream, local: u16, remote: u16) {
    let mut session = match pods.portforward(&pod, &[remote]).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: an error occurred forwarding {local} -> {remote}: {e}");
            return;
        }
    };
    let (Some(mut upstream), Some(error)) =
        (session.take_stream(remote), session.take_error(remote))
    else {
        return;
    };
    let _ = tokio::io::copy_bidirectional(&mut conn, &mut upstream).await;
    drop(upstream);
    drop(conn);
    if let Some(message) = error.await {
        eprintln!("error: an error occurred forwarding {local} -> {remote}: {message}");
    }
    let _ = session.join().await;
}

pub async fn port_forward(ctx: &Ctx, args: &PortForwardArgs) -> Result<bool> {
    let (pod, ports) = resolve(ctx, args).await?;
    if !is_running(&pod) {
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        bail!("unable to forward port because pod is not running. Current status={phase}");
    }
    let name = pod.name_any();
    let uid = pod.metadata.uid.clone();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let addrs = addresses(&args.address)?;
    let mut listeners = Vec::new();
    for (local, remote) in ports {
        // A local 0 is the port the first address got, on every address.
        let mut port = local;
        for (ip, required) in &addrs {
            let listener = match TcpListener::bind(SocketAddr::new(*ip, port)).await {
                Ok(l) => l,
                Err(_) if !required => continue,
                Err(e) => bail!("unable to listen on {ip}:{port}: {e}"),
            };
            port = listener.local_addr()?.port();
            let shown = match ip {
                IpAddr::V6(_) => format!("[{ip}]"),
                IpAddr::V4(_) => ip.to_string(),
            };
            println!("Forwarding from {shown}:{port} -> {remote}");
            listeners.push((listener, port, remote));
        }
    }
    for (listener, local, remote) in listeners {
        let (pods, name) = (pods.clone(), name.clone());
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let _ = conn.set_nodelay(true);
                println!("Handling connection for {local}");
                tokio::spawn(forward(pods.clone(), name.clone(), conn, local, remote));
            }
        });
    }
    let ended = kube::runtime::wait::await_condition(pods, &name, move |p: Option<&Pod>| {
        p.is_none_or(|p| p.metadata.uid != uid || !is_running(p))
    });
    tokio::select! {
        _ = tokio::signal::ctrl_c() => Ok(true),
        _ = ended => {
            eprintln!("error: lost connection to pod");
            Ok(false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web-1"},
            "spec": {"containers": [{"name": "app", "ports": [{"name": "http", "containerPort": 8080}]}]},
        }))
        .unwrap()
    }

    #[test]
    fn specs_read_as_kubectl_reads_them() {
        assert_eq!(parse_spec("8080:80").unwrap(), (Some(8080), "80".into()));
        assert_eq!(parse_spec("80").unwrap(), (None, "80".into()));
        assert_eq!(parse_spec(":80").unwrap(), (Some(0), "80".into()));
        assert_eq!(
            parse_spec("9000:http").unwrap(),
            (Some(9000), "http".into())
        );
        assert!(parse_spec("8080:").is_err());
        assert!(parse_spec("x:80")
            .unwrap_err()
            .to_string()
            .contains("invalid local port"));
    }

    #[test]
    fn named_pod_ports_become_numbers() {
        assert_eq!(pod_port(&pod(), "http").unwrap(), 8080);
        assert_eq!(pod_port(&pod(), "81").unwrap(), 81);
        assert!(pod_port(&pod(), "grpc")
            .unwrap_err()
            .to_string()
            .contains("does not have a named port 'grpc'"));
    }

    #[test]
    fn service_ports_map_to_their_target_ports() {
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {"ports": [
                {"name": "web", "port": 80, "targetPort": "http"},
                {"name": "alt", "port": 81, "targetPort": 9090},
                {"port": 82},
            ]},
        }))
        .unwrap();
        assert_eq!(service_port(&svc, &pod(), "80").unwrap(), (80, 8080));
        assert_eq!(service_port(&svc, &pod(), "web").unwrap(), (80, 8080));
        assert_eq!(service_port(&svc, &pod(), "81").unwrap(), (81, 9090));
        assert_eq!(service_port(&svc, &pod(), "82").unwrap(), (82, 82));
        assert!(service_port(&svc, &pod(), "83")
            .unwrap_err()
            .to_string()
            .contains("does not have a service port 83"));
    }

    #[test]
    fn running_ready_pods_are_picked_first() {
        let p = |name: &str, phase: &str, ready: &str| -> Pod {
            serde_json::from_value(json!({
                "metadata": {"name": name},
                "status": {"phase": phase, "conditions": [{"type": "Ready", "status": ready}]},
            }))
            .unwrap()
        };
        let picked = pick_pod(vec![
            p("a", "Pending", "False"),
            p("b", "Running", "False"),
            p("c", "Running", "True"),
        ]);
        assert_eq!(picked.unwrap().name_any(), "c");
        assert!(pick_pod(vec![p("a", "Pending", "False")]).is_none());
    }
}
