//! The Services' environment variables every container gets, as the
//! kubelet sets them (`getServiceEnvVarMap` and `envvars.FromServices`):
//! for each Service with a ClusterIP in the pod's namespace (when the
//! pod's `enableServiceLinks` is true, the default), and always for the
//! `kubernetes` Service in `default`:
//!
//! - `<NAME>_SERVICE_HOST` (the ClusterIP) and `<NAME>_SERVICE_PORT` (the
//!   first port), `<NAME>_SERVICE_PORT_<PORT NAME>` for each named port;
//! - Docker links' `<NAME>_PORT=tcp://ip:port` (first port) and, per port,
//!   `<NAME>_PORT_<port>_<PROTO>` with `_PROTO`, `_PORT` and `_ADDR`.
//!
//! `<NAME>` is the Service's name upper-cased with `-` as `_`. In-cluster
//! clients (client-go, kube-rs `Client::try_default()`) find the API by
//! `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT`.
//!
//! The Services come from a watch-fed cache ([`ServiceEnv::start`]); a
//! container is not created before it has been filled once, as the
//! kubelet refuses to (its environment would lack variables).

use std::collections::BTreeMap;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;

/// The Services whose variables every pod gets, wherever it runs (the
/// kubelet's "master services").
const MASTER_SERVICES: &[&str] = &["kubernetes"];

/// The cache of Services the variables are made from.
#[derive(Clone)]
pub struct ServiceEnv {
    store: Store<Service>,
}

impl ServiceEnv {
    /// Starts watching every Service (the task ends when the returned
    /// handle is aborted).
    pub fn start(client: Client) -> (ServiceEnv, tokio::task::JoinHandle<()>) {
        let (store, writer) = reflector::store::<Service>();
        let api: Api<Service> = Api::all(client);
        let task = tokio::spawn(async move {
            let stream = watcher(api, watcher::Config::default())
                .default_backoff()
                // Only the spec and the name are read.
                .modify(|s| {
                    s.metadata.managed_fields = None;
                    s.metadata.annotations = None;
                    s.status = None;
                })
                .reflect(writer)
                .applied_objects();
            futures::pin_mut!(stream);
            while let Some(e) = stream.next().await {
                if let Err(e) = e {
                    tracing::warn!(error = %e, "watching services; retrying");
                }
            }
        });
        (ServiceEnv { store }, task)
    }

    /// The variables `pod`'s containers get, or the kubelet's error while
    /// the Services have not been listed yet.
    pub fn for_pod(&self, pod: &Pod) -> Result<Vec<(String, String)>, String> {
        if self.store.wait_until_ready().now_or_never().is_none() {
            return Err(
                "services have not yet been read at least once, cannot construct envvars".into(),
            );
        }
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let links = pod
            .spec
            .as_ref()
            .and_then(|s| s.enable_service_links)
            .unwrap_or(true);
        let services = self.store.state();
        Ok(for_namespace(
            services.iter().map(|s| s.as_ref()),
            ns,
            links,
        ))
    }
}

/// Whether the Service has a ClusterIP (not headless, not ExternalName).
fn has_cluster_ip(s: &Service) -> bool {
    s.spec
        .as_ref()
        .and_then(|s| s.cluster_ip.as_deref())
        .is_some_and(|ip| !ip.is_empty() && ip != "None")
}

/// The variables of the Services a pod in `ns` sees (`links`: its
/// `enableServiceLinks`), sorted by name.
pub fn for_namespace<'a>(
    services: impl IntoIterator<Item = &'a Service>,
    ns: &str,
    links: bool,
) -> Vec<(String, String)> {
    let mut chosen: BTreeMap<String, &Service> = BTreeMap::new();
    for s in services {
        if !has_cluster_ip(s) {
            continue;
        }
        let name = s.metadata.name.clone().unwrap_or_default();
        let s_ns = s.metadata.namespace.as_deref().unwrap_or("default");
        if s_ns == "default" && MASTER_SERVICES.contains(&name.as_str()) {
            chosen.entry(name).or_insert(s);
        } else if s_ns == ns && links {
            chosen.insert(name, s);
        }
    }
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    for s in chosen.values() {
        env.extend(from_service(s));
    }
    env.into_iter().collect()
}

/// `FOO-bar` as `FOO_BAR`.
fn env_name(s: &str) -> String {
    s.replace('-', "_").to_uppercase()
}

/// One Service's variables (`envvars.FromServices`).
pub fn from_service(s: &Service) -> Vec<(String, String)> {
    let Some(spec) = s.spec.as_ref() else {
        return Vec::new();
    };
    let ip = spec.cluster_ip.clone().unwrap_or_default();
    let ports = spec.ports.clone().unwrap_or_default();
    let Some(first) = ports.first() else {
        return Vec::new();
    };
    let prefix = env_name(s.metadata.name.as_deref().unwrap_or(""));
    let mut out = vec![
        (format!("{prefix}_SERVICE_HOST"), ip.clone()),
        (format!("{prefix}_SERVICE_PORT"), first.port.to_string()),
    ];
    for p in &ports {
        if let Some(name) = p.name.as_deref().filter(|n| !n.is_empty()) {
            out.push((
                format!("{prefix}_SERVICE_PORT_{}", env_name(name)),
                p.port.to_string(),
            ));
        }
    }
    let host = |port: i32| match ip.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(_)) => format!("[{ip}]:{port}"),
        _ => format!("{ip}:{port}"),
    };
    for (i, p) in ports.iter().enumerate() {
        let proto = p.protocol.clone().unwrap_or_else(|| "TCP".into());
        let lower = proto.to_lowercase();
        let url = format!("{lower}://{}", host(p.port));
        if i == 0 {
            out.push((format!("{prefix}_PORT"), url.clone()));
        }
        let port_prefix = format!("{prefix}_PORT_{}_{}", p.port, proto.to_uppercase());
        out.push((port_prefix.clone(), url));
        out.push((format!("{port_prefix}_PROTO"), lower));
        out.push((format!("{port_prefix}_PORT"), p.port.to_string()));
        out.push((format!("{port_prefix}_ADDR"), ip.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc(ns: &str, name: &str, ip: &str, ports: serde_json::Value) -> Service {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns},
            "spec": {"clusterIP": ip, "ports": ports}}))
        .unwrap()
    }

    #[test]
    fn the_kubelets_variables_for_the_kubernetes_service() {
        let api = svc(
            "default",
            "kubernetes",
            "10.96.0.1",
            json!([{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]),
        );
        let env: BTreeMap<_, _> = from_service(&api).into_iter().collect();
        let want: BTreeMap<String, String> = [
            ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
            ("KUBERNETES_SERVICE_PORT", "443"),
            ("KUBERNETES_SERVICE_PORT_HTTPS", "443"),
            ("KUBERNETES_PORT", "tcp://10.96.0.1:443"),
            ("KUBERNETES_PORT_443_TCP", "tcp://10.96.0.1:443"),
            ("KUBERNETES_PORT_443_TCP_PROTO", "tcp"),
            ("KUBERNETES_PORT_443_TCP_PORT", "443"),
            ("KUBERNETES_PORT_443_TCP_ADDR", "10.96.0.1"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(env, want);
    }

    #[test]
    fn which_services_a_pod_sees() {
        let all = [
            svc(
                "default",
                "kubernetes",
                "10.96.0.1",
                json!([{"name": "https", "port": 443}]),
            ),
            svc(
                "shop",
                "my-db",
                "10.96.3.4",
                json!([{"port": 5432, "protocol": "TCP"},
                {"name": "metrics", "port": 9187, "protocol": "UDP"}]),
            ),
            svc("shop", "headless", "None", json!([{"port": 80}])),
            svc("other", "elsewhere", "10.96.9.9", json!([{"port": 80}])),
        ];
        let env: BTreeMap<_, _> = for_namespace(&all, "shop", true).into_iter().collect();
        assert_eq!(env["KUBERNETES_SERVICE_HOST"], "10.96.0.1");
        assert_eq!(env["MY_DB_SERVICE_HOST"], "10.96.3.4");
        assert_eq!(env["MY_DB_SERVICE_PORT"], "5432");
        assert_eq!(env["MY_DB_SERVICE_PORT_METRICS"], "9187");
        assert_eq!(env["MY_DB_PORT_9187_UDP"], "udp://10.96.3.4:9187");
        assert!(!env.keys().any(|k| k.starts_with("HEADLESS_")));
        assert!(!env.keys().any(|k| k.starts_with("ELSEWHERE_")));
        // enableServiceLinks: false keeps only the API's.
        let env = for_namespace(&all, "shop", false);
        assert!(
            env.iter().all(|(k, _)| k.starts_with("KUBERNETES_")),
            "{env:?}"
        );
        assert!(!env.is_empty());
    }
}
