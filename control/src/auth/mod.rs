//! Who a request comes from and what they may do, as kube-apiserver's
//! authenticators and authorizers see it.
//!
//! - [`Identity`]: the admin (bosun's admin token), a service account (its
//!   JWT), a node (a client certificate the cluster CA signed with CN
//!   `system:node:<name>`, O `system:nodes`), a bootstrap token's user
//!   (`system:bootstrap:<id>`, which may only trade the token for a node
//!   certificate), or anonymous (which may only read kube-public's
//!   cluster-info).
//! - [`authorize`]: the admin and service accounts may do anything (as
//!   before this module); nodes go through the Node authorizer
//!   ([`node`]); everything else is forbidden in Kubernetes' words.
//! - [`bootstrap`]: bootstrap tokens checked against their Secrets, the
//!   cluster-info ConfigMap, the cleaner of expired tokens.
//! - [`credential`]: signing a node's certificate request with the CA.
//! - [`kubelet_client`]: the control plane's client certificate toward
//!   the agents' stream API.

pub mod bootstrap;
pub mod credential;
pub mod kubelet_client;
pub mod node;

use serde_json::Value;

use crate::store::Store;

/// The authenticated user of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    Admin,
    ServiceAccount,
    /// A node's client certificate: the node's name.
    Node(String),
    /// A client certificate of the CA that is not a node's: its CN.
    CertificateUser(String),
    /// A valid bootstrap token: its id.
    Bootstrap(String),
    Anonymous,
}

impl Identity {
    /// The user name, as Kubernetes' messages name it.
    pub fn user(&self) -> String {
        match self {
            Identity::Admin => "bosun-admin".into(),
            Identity::ServiceAccount => "system:serviceaccount".into(),
            Identity::Node(n) => format!("{}{n}", bosun::bootstrap::NODE_USER_PREFIX),
            Identity::CertificateUser(cn) => cn.clone(),
            Identity::Bootstrap(id) => format!("system:bootstrap:{id}"),
            Identity::Anonymous => "system:anonymous".into(),
        }
    }
}

/// The subject of the client certificate a connection presented, which
/// rustls checked against the cluster CA during the handshake.
pub use bosun::serving::PeerSubject as PeerCert;

impl Identity {
    /// Who a client certificate says its holder is.
    pub fn of_certificate(peer: &PeerCert) -> Identity {
        let is_node = peer
            .organizations
            .iter()
            .any(|o| o == bosun::bootstrap::NODES_GROUP);
        match peer
            .common_name
            .strip_prefix(bosun::bootstrap::NODE_USER_PREFIX)
        {
            Some(name) if is_node && !name.is_empty() => Identity::Node(name.to_string()),
            _ => Identity::CertificateUser(peer.common_name.clone()),
        }
    }
}

/// What a request asks to do, as Kubernetes' authorizer attributes.
#[derive(Debug, Clone)]
pub struct Attributes<'a> {
    pub user: String,
    /// get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: Option<&'a str>,
    pub namespace: Option<&'a str>,
    pub name: Option<&'a str>,
    /// The name of the object a create sends (its URL names none).
    pub created_name: Option<&'a str>,
}

impl Attributes<'_> {
    /// kube-apiserver's message for a denied request, with `reason`
    /// appended when there is one.
    pub fn forbidden(&self, reason: &str) -> String {
        let qualified = if self.group.is_empty() {
            self.resource.to_string()
        } else {
            format!("{}.{}", self.resource, self.group)
        };
        let object = match self.name {
            Some(n) => format!("{qualified} \"{n}\""),
            None => qualified,
        };
        let resource = match self.subresource {
            Some(s) => format!("{}/{s}", self.resource),
            None => self.resource.to_string(),
        };
        let scope = match self.namespace {
            Some(ns) => format!("in the namespace \"{ns}\""),
            None => "at the cluster scope".into(),
        };
        let mut message = format!(
            "{object} is forbidden: User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
            self.user, self.verb, self.group
        );
        if !reason.is_empty() {
            message.push_str(": ");
            message.push_str(reason);
        }
        message
    }
}

/// The Kubernetes verb of a request.
pub fn verb(method: &http::Method, named: bool, watch: bool) -> &'static str {
    match (method.as_str(), named) {
        ("GET" | "HEAD", true) => "get",
        ("GET" | "HEAD", false) if watch => "watch",
        ("GET" | "HEAD", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    }
}

/// `Ok` if `who` may do `a`; otherwise the message of the 403.
pub async fn authorize(
    store: &dyn Store,
    who: &Identity,
    a: &Attributes<'_>,
) -> Result<(), String> {
    match who {
        Identity::Admin | Identity::ServiceAccount => Ok(()),
        Identity::Node(name) => {
            let facts = node_facts(store, name, a).await?;
            node::decide(name, a, &facts)
        }
        _ => Err(a.forbidden("")),
    }
}

/// Reads from the store what the Node authorizer needs for `a`.
async fn node_facts(
    store: &dyn Store,
    node: &str,
    a: &Attributes<'_>,
) -> Result<node::NodeFacts, String> {
    let mut facts = node::NodeFacts::default();
    match node::needs(a) {
        node::Needs::Nothing => {}
        node::Needs::Pods => {
            let pods = bosun::resources::by_kind("v1", "Pod").expect("served");
            let (kvs, _) = store
                .list(&pods.storage_prefix())
                .await
                .map_err(|e| format!("reading the node's pods: {e}"))?;
            facts.pods = kvs
                .iter()
                .filter_map(|kv| serde_json::from_slice::<Value>(&kv.value).ok())
                .filter(|p| p["spec"]["nodeName"].as_str() == Some(node))
                .collect();
        }
        node::Needs::Object => {
            let res = bosun::resources::by_path(a.group, "v1", a.resource)
                .ok_or_else(|| a.forbidden(""))?;
            let key = res.storage_key(a.namespace, a.name.unwrap_or(""));
            facts.object = store
                .get(&key)
                .await
                .map_err(|e| format!("reading {key}: {e}"))?
                .and_then(|kv| serde_json::from_slice(&kv.value).ok());
        }
    }
    Ok(facts)
}
