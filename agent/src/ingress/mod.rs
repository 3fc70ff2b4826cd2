//! The built-in ingress controller every agent runs (as k3s bundles
//! Traefik): it serves the Ingresses of the IngressClasses whose
//! controller is [`CONTROLLER`] on the node's HTTP and HTTPS ports,
//! straight to the ready endpoints of the Services they name (no second
//! hop through a cluster IP).
//!
//! - [`routes`]: hosts and paths as the Ingress API matches them;
//! - [`serve`]: the listeners and the reverse proxy;
//! - [`tls`]: certificates by SNI from the Ingresses' TLS Secrets;
//! - [`status`]: the default IngressClass made at start, and the node's
//!   address in `status.loadBalancer.ingress`.
//!
//! The table is rebuilt from one watch of Ingresses and one of
//! IngressClasses (and the agent's shared Services and EndpointSlices)
//! within a tenth of a second of a change and swapped in whole: open
//! connections keep going, the next request sees the new table.
//! Endpoints are read at each request, so they follow the
//! EndpointSlices as soon as the agent's cache does.

pub mod routes;
pub mod serve;
pub mod status;
pub mod tls;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::api::Api;
use kube::Client;
use tokio::sync::Notify;

use crate::services::watch::{feed, rebuild_on_change};
use crate::services::{Key, ServiceCache};
use routes::RouteTable;

/// The `spec.controller` of the IngressClasses bosun's agents serve.
pub const CONTROLLER: &str = "bosun.dev/ingress";
/// The IngressClass the agents make at start.
pub const CLASS_NAME: &str = "bosun";
/// The annotation that makes an IngressClass the default.
pub const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";
/// The class annotation Ingresses used before `spec.ingressClassName`.
pub const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";
/// How long a burst of changes is gathered before one rebuild.
const REBUILD_WINDOW: Duration = Duration::from_millis(100);
/// Secrets are read at each rebuild and at least this often.
const RESYNC: Duration = Duration::from_secs(10);

/// What one agent's ingress controller needs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// 0: no HTTP listener.
    pub http_port: u16,
    /// 0: no HTTPS listener.
    pub https_port: u16,
    pub node_name: String,
    /// Written to the Ingresses' `status.loadBalancer.ingress`.
    pub node_ip: String,
}

/// What is kept of an IngressClass.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassInfo {
    pub controller: String,
    pub default: bool,
}

impl ClassInfo {
    fn of(c: &IngressClass) -> Option<ClassInfo> {
        Some(ClassInfo {
            controller: c.spec.as_ref()?.controller.clone().unwrap_or_default(),
            default: c
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
                .is_some_and(|v| v == "true"),
        })
    }
}

/// The watches' view of the cluster.
#[derive(Debug, Default)]
pub struct IngressState {
    pub ingresses: BTreeMap<Key, Ingress>,
    pub classes: BTreeMap<Key, ClassInfo>,
}

impl IngressState {
    /// Whether `ing` is this controller's: its class (or the deprecated
    /// annotation) names a class of [`CONTROLLER`]; without either, when
    /// one of ours is the default class (an Ingress stored before the
    /// default class existed).
    pub fn is_ours(&self, ing: &Ingress) -> bool {
        let ours = |name: &str| {
            self.classes
                .get(&(String::new(), name.to_string()))
                .is_some_and(|c| c.controller == CONTROLLER)
        };
        let class = ing
            .spec
            .as_ref()
            .and_then(|s| s.ingress_class_name.as_deref());
        let annotation = ing
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(CLASS_ANNOTATION))
            .map(String::as_str);
        match class.or(annotation) {
            Some(name) => ours(name),
            None => self
                .classes
                .values()
                .any(|c| c.default && c.controller == CONTROLLER),
        }
    }

    pub fn ours(&self) -> impl Iterator<Item = &Ingress> {
        self.ingresses.values().filter(|i| self.is_ours(i))
    }
}

/// What the listeners read: swapped whole at each rebuild.
#[derive(Default)]
pub struct Shared {
    pub table: RwLock<Arc<RouteTable>>,
    pub certs: RwLock<Arc<tls::CertMap>>,
}

/// Starts the controller: the default IngressClass, the watches, the
/// rebuild loop and the listeners. A port that cannot be bound is logged
/// and tried again later; the agent keeps running either way.
pub async fn start(client: Client, services: ServiceCache, settings: Settings) {
    status::ensure_default_class(&client).await;
    let state: Arc<RwLock<IngressState>> = Arc::default();
    let shared: Arc<Shared> = Arc::default();
    let changed = Arc::new(Notify::new());
    services.subscribe(&changed);
    let wake = {
        let c = changed.clone();
        move || c.notify_one()
    };
    tokio::spawn(feed(
        "ingress watch",
        Api::<Ingress>::all(client.clone()),
        state.clone(),
        wake.clone(),
        |i: &Ingress| Some(i.clone()),
        |s: &mut IngressState| &mut s.ingresses,
    ));
    tokio::spawn(feed(
        "ingress watch",
        Api::<IngressClass>::all(client.clone()),
        state.clone(),
        wake,
        ClassInfo::of,
        |s: &mut IngressState| &mut s.classes,
    ));
    {
        let changed = changed.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(RESYNC).await;
                changed.notify_one();
            }
        });
    }
    let default_cert = match tls::default_certificate() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "ingress: making the default certificate; HTTPS is off");
            return;
        }
    };
    serve::listen(
        settings.clone(),
        shared.clone(),
        services.clone(),
        default_cert,
    );
    let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(1);
    tokio::spawn(rebuild_on_change(changed, REBUILD_WINDOW, move || {
        let _ = tx.try_send(());
    }));
    while rx.recv().await.is_some() {
        let ours: Vec<Ingress> = state
            .read()
            .expect("ingress state")
            .ours()
            .cloned()
            .collect();
        let table = RouteTable::build(&ours);
        *shared.table.write().expect("route table") = Arc::new(table);
        let certs = tls::load(&client, &ours).await;
        *shared.certs.write().expect("certificates") = Arc::new(certs);
        let all: Vec<Ingress> = state
            .read()
            .expect("ingress state")
            .ingresses
            .values()
            .cloned()
            .collect();
        let ours_keys: std::collections::HashSet<(Option<String>, Option<String>)> = ours
            .iter()
            .map(|i| (i.metadata.namespace.clone(), i.metadata.name.clone()))
            .collect();
        for ing in &all {
            let mine =
                ours_keys.contains(&(ing.metadata.namespace.clone(), ing.metadata.name.clone()));
            status::publish(&client, ing, &settings.node_ip, mine).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn state(classes: &[(&str, &str, bool)]) -> IngressState {
        IngressState {
            ingresses: BTreeMap::new(),
            classes: classes
                .iter()
                .map(|(n, c, d)| {
                    (
                        (String::new(), n.to_string()),
                        ClassInfo {
                            controller: c.to_string(),
                            default: *d,
                        },
                    )
                })
                .collect(),
        }
    }

    fn ing(class: Option<&str>, annotation: Option<&str>) -> Ingress {
        let mut v = json!({"metadata": {"name": "i", "namespace": "ns"}, "spec": {}});
        if let Some(c) = class {
            v["spec"]["ingressClassName"] = json!(c);
        }
        if let Some(a) = annotation {
            v["metadata"]["annotations"] = json!({ CLASS_ANNOTATION: a });
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn which_ingresses_are_ours() {
        let s = state(&[
            ("bosun", CONTROLLER, true),
            ("nginx", "k8s.io/ingress-nginx", false),
        ]);
        assert!(s.is_ours(&ing(Some("bosun"), None)));
        assert!(!s.is_ours(&ing(Some("nginx"), None)));
        assert!(!s.is_ours(&ing(Some("missing"), None)));
        assert!(s.is_ours(&ing(None, Some("bosun"))));
        assert!(!s.is_ours(&ing(None, Some("nginx"))));
        // No class at all: ours while our class is the default.
        assert!(s.is_ours(&ing(None, None)));
        let other_default = state(&[
            ("bosun", CONTROLLER, false),
            ("nginx", "k8s.io/ingress-nginx", true),
        ]);
        assert!(!other_default.is_ours(&ing(None, None)));
    }
}
