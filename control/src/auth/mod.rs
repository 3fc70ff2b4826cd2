//! Who a request comes from and what they may do, as kube-apiserver's
//! authenticators and authorizers see it.
//!
//! - [`Identity`]: the admin (bosun's admin token), a service account (its
//!   JWT), an in-process component or an impersonated user, a node (a client certificate the cluster CA signed with CN
//!   `system:node:<name>`, O `system:nodes`), a bootstrap token's user
//!   (`system:bootstrap:<id>`, which may only trade the token for a node
//!   certificate), or anonymous (which may only read kube-public's
//!   cluster-info).
//! - [`user`]: the user and groups of an identity, as `user.Info`.
//! - [`authorize`]: system:masters (the admin) may do anything; nodes go
//!   through the Node authorizer ([`node`], which answers "does a pod of
//!   this node use that object" from its graph, [`NodeGraph`]), then RBAC; everyone else
//!   through RBAC ([`rbac`]); what is denied is forbidden in Kubernetes'
//!   words.
//! - [`bootstrap`]: bootstrap tokens checked against their Secrets, the
//!   cluster-info ConfigMap, the cleaner of expired tokens.
//! - [`credential`]: signing a node's certificate request with the CA.
//! - [`kubelet_client`]: the control plane's client certificate toward
//!   the agents' stream API.

pub mod bootstrap;
pub mod credential;
pub mod kubelet_client;
pub mod node;
pub mod rbac;
pub mod user;

use serde_json::Value;

use crate::store::Store;
pub use node::graph::NodeGraph;
pub use user::UserInfo;

/// The authenticated user of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// bosun's admin token: a member of system:masters.
    Admin,
    /// A service account's token.
    ServiceAccount(UserInfo),
    /// A node's client certificate: the node's name.
    Node(String),
    /// A client certificate of the CA that is not a node's: its CN as the
    /// user, its O's as groups.
    CertificateUser(UserInfo),
    /// A valid bootstrap token: its id.
    Bootstrap(String),
    Anonymous,
    /// An in-process component (the scheduler, a controller), or the user
    /// a request impersonates.
    User(UserInfo),
}

/// The admin token's user name.
pub const ADMIN_USER: &str = "bosun-admin";

impl Identity {
    /// The user name, as Kubernetes' messages name it.
    pub fn user(&self) -> String {
        self.user_info().name
    }

    /// The user and groups authorization sees.
    pub fn user_info(&self) -> UserInfo {
        match self {
            Identity::Admin => UserInfo::authenticated(ADMIN_USER, &[user::SYSTEM_MASTERS]),
            Identity::ServiceAccount(u) | Identity::CertificateUser(u) | Identity::User(u) => {
                u.clone()
            }
            Identity::Node(n) => UserInfo::authenticated(
                format!("{}{n}", bosun::bootstrap::NODE_USER_PREFIX),
                &[bosun::bootstrap::NODES_GROUP],
            ),
            Identity::Bootstrap(id) => {
                UserInfo::authenticated(format!("system:bootstrap:{id}"), &[user::BOOTSTRAPPERS])
            }
            Identity::Anonymous => UserInfo::anonymous(),
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
            _ => {
                let groups: Vec<&str> = peer.organizations.iter().map(String::as_str).collect();
                Identity::CertificateUser(UserInfo::authenticated(
                    peer.common_name.clone(),
                    &groups,
                ))
            }
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
    /// The request as RBAC rules match it (no name on a create).
    pub fn rbac_request(&self) -> rbac::rule::Request<'_> {
        rbac::rule::Request::Resource {
            verb: self.verb,
            group: self.group,
            resource: self.resource,
            subresource: self.subresource,
            name: self.name.unwrap_or(""),
        }
    }

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

/// `Ok` if `who` may do `a`; otherwise the message of the 403. The chain
/// is kube-apiserver's: system:masters may do anything; a node's request
/// goes to the Node authorizer, then RBAC; everyone else's to RBAC.
pub async fn authorize(
    store: &dyn Store,
    rbac: &rbac::Rbac,
    graph: &NodeGraph,
    who: &Identity,
    a: &Attributes<'_>,
) -> Result<(), String> {
    let user = who.user_info();
    if user.is_master() {
        return Ok(());
    }
    let mut reason = String::new();
    if let Identity::Node(name) = who {
        let facts = node_facts(store, graph, name, a).await?;
        match node::decide(name, a, &facts) {
            Ok(()) => return Ok(()),
            Err(message) => reason = message,
        }
        if ingress_tls_secret(store, a).await? {
            return Ok(());
        }
    }
    if rbac.allows(&user, &a.rbac_request(), a.namespace).await {
        return Ok(());
    }
    if !reason.is_empty() {
        return Err(reason);
    }
    Err(a.forbidden(""))
}

/// Whether `a` is a GET of a Secret that an Ingress of its namespace
/// names in `spec.tls`: every node's built-in ingress controller serves
/// every Ingress and terminates its TLS, so any node may read those
/// Secrets, and no other (RBAC grants nodes no Secret).
async fn ingress_tls_secret(store: &dyn Store, a: &Attributes<'_>) -> Result<bool, String> {
    let (Some(ns), Some(name)) = (a.namespace, a.name) else {
        return Ok(false);
    };
    if a.verb != "get" || !a.group.is_empty() || a.resource != "secrets" || a.subresource.is_some()
    {
        return Ok(false);
    }
    let ingresses = bosun::resources::by_kind("networking.k8s.io/v1", "Ingress").expect("served");
    let (kvs, _) = store
        .list(&format!("{}{ns}/", ingresses.storage_prefix()))
        .await
        .map_err(|e| format!("reading the namespace's ingresses: {e}"))?;
    Ok(kvs.iter().any(|kv| {
        serde_json::from_slice::<Value>(&kv.value).is_ok_and(|ing| {
            ing["spec"]["tls"]
                .as_array()
                .is_some_and(|tls| tls.iter().any(|t| t["secretName"] == name))
        })
    }))
}

/// Reads what the Node authorizer needs for `a`: whether a pod of the
/// node references the object asked for from the node graph alone (as of
/// the store's revision now, so a pod bound a moment ago counts, unless
/// the graph cannot catch up in time); the object written from the
/// store.
async fn node_facts(
    store: &dyn Store,
    graph: &NodeGraph,
    node: &str,
    a: &Attributes<'_>,
) -> Result<node::NodeFacts, String> {
    let mut facts = node::NodeFacts::default();
    match node::needs(a) {
        node::Needs::Nothing => {}
        node::Needs::Pods => {
            let (resource, ns, name) = node::referenced_object(a);
            if name.is_empty() {
                // Denied whatever the pods are.
                return Ok(facts);
            }
            let at = store.current_revision();
            facts.referenced = Some(graph.has_path(resource, ns, name, node, at).await);
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
