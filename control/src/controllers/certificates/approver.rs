//! csrapproving: approves nodes' client certificate requests, as
//! kube-controller-manager's `sarApprover`. A request to the
//! `kubernetes.io/kube-apiserver-client-kubelet` signer that is a node
//! client request (upstream's isNodeClientCert: what that signer would
//! issue, [`super::checks`]: CN `system:node:NAME`, O exactly
//! `system:nodes`, no alternative names, usages digital signature and
//! client auth [and key encipherment]) is approved (reason
//! `AutoApproved`, upstream's messages) when a SubjectAccessReview of
//! its requester (`spec.username`, `uid`, `groups`, `extra`) allows
//! `create` on `certificatesigningrequests/selfnodeclient` (the CN is the
//! requester's own name: a node renewing) or
//! `certificatesigningrequests/nodeclient` (a bootstrap token joining).
//! Anything else is left Pending for a human (`kubectl certificate
//! approve|deny`), with an event saying why.
//!
//! bosun adds one rule: a `nodeclient` request for the name of a live
//! node ([`crate::auth::credential::live_node`]) from anyone but that
//! node is not approved (event `NodeNameInUse`): whoever holds a
//! bootstrap token would otherwise get that node's pods, Secrets and
//! routes. A human may still approve it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bosun::bootstrap::NODE_USER_PREFIX;
use bosun::events::{reference_to, EventRecorder, EventType};
use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::Controller;
use kube::{Client, ResourceExt};

use super::checks::{check, KUBE_APISERVER_CLIENT_KUBELET};
use super::{has_condition, RequestInfo};
use crate::toolkit::{from_chrono, run_controller, synced, Clock, Shared};

pub type Error = crate::toolkit::api_errors::ApiError;

/// Where nodes' Leases are.
const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// How often a request left Pending is looked at again (upstream retries
/// with back-off): a binding granted later, or a node gone, approves it.
const RETRY: Duration = Duration::from_secs(60);

/// One of upstream's recognizers: which permission approves a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recognized {
    /// A node asking for its own name.
    SelfNodeClient,
    /// Anyone asking for a node's certificate.
    NodeClient,
}

impl Recognized {
    /// The subresource of `certificatesigningrequests` the requester must
    /// be allowed to `create`.
    pub fn subresource(self) -> &'static str {
        match self {
            Recognized::SelfNodeClient => "selfnodeclient",
            Recognized::NodeClient => "nodeclient",
        }
    }

    /// The Approved condition's message, upstream's.
    pub fn message(self) -> &'static str {
        match self {
            Recognized::SelfNodeClient => {
                "Auto approving self kubelet client certificate after SubjectAccessReview."
            }
            Recognized::NodeClient => {
                "Auto approving kubelet client certificate after SubjectAccessReview."
            }
        }
    }
}

/// Upstream's isNodeClientCert: the kubelet client signer, and a
/// request it would issue.
pub fn is_node_client(csr: &CertificateSigningRequest, req: &RequestInfo) -> bool {
    csr.spec.signer_name == KUBE_APISERVER_CLIENT_KUBELET
        && check(
            KUBE_APISERVER_CLIENT_KUBELET,
            req,
            csr.spec.usages.as_deref().unwrap_or_default(),
        )
        .is_ok()
}

/// The recognizers `csr` matches, in the order upstream tries them:
/// selfnodeclient (the CN is the requester's name), then nodeclient.
pub fn recognize(csr: &CertificateSigningRequest, req: &RequestInfo) -> Vec<Recognized> {
    if !is_node_client(csr, req) {
        return Vec::new();
    }
    let mut out = Vec::new();
    if csr.spec.username.as_deref() == Some(req.common_name.as_str()) {
        out.push(Recognized::SelfNodeClient);
    }
    out.push(Recognized::NodeClient);
    out
}

pub struct Context {
    pub client: Client,
    pub recorder: EventRecorder,
    pub nodes: Store<Node>,
    pub leases: Store<Lease>,
    pub clock: Arc<dyn Clock>,
    /// The requests (uid and event reason) already given an event, so a
    /// request looked at again does not repeat it.
    reported: Mutex<HashSet<(String, &'static str)>>,
}

pub fn start(shared: &Arc<Shared>) -> BoxFuture<'static, ()> {
    let informers = &shared.informers;
    let ctx = Arc::new(Context {
        client: shared.client_for("csrapproving"),
        recorder: shared.recorder("certificate-controller"),
        nodes: informers.store::<Node>(),
        leases: informers.store::<Lease>(),
        clock: shared.clock.clone(),
        reported: Mutex::new(HashSet::new()),
    });
    let controller = Controller::for_shared_stream(
        informers.subscribe::<CertificateSigningRequest>(),
        informers.store::<CertificateSigningRequest>(),
    );
    run_controller("csrapproving", controller, ctx, reconcile).boxed()
}

/// Why the node named `node` is held by a live node now, from the caches.
async fn live(ctx: &Context, node: &str) -> Option<String> {
    synced(&ctx.nodes).await;
    synced(&ctx.leases).await;
    let obj = ctx.nodes.get(&ObjectRef::new(node))?;
    let lease = ctx
        .leases
        .get(&ObjectRef::new(node).within(NODE_LEASE_NAMESPACE));
    let obj = serde_json::to_value(&*obj).ok()?;
    let lease = lease.and_then(|l| serde_json::to_value(&*l).ok());
    crate::auth::credential::live_node(&obj, lease.as_ref(), ctx.clock.now())
}

/// Whether the requester of `csr` may `create` `subresource` of
/// certificatesigningrequests, as a SubjectAccessReview answers.
async fn authorized(
    ctx: &Context,
    csr: &CertificateSigningRequest,
    subresource: &str,
) -> Result<bool, Error> {
    let spec = &csr.spec;
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: spec.username.clone(),
            uid: spec.uid.clone(),
            groups: spec.groups.clone(),
            extra: spec.extra.clone(),
            resource_attributes: Some(ResourceAttributes {
                group: Some("certificates.k8s.io".into()),
                resource: Some("certificatesigningrequests".into()),
                subresource: Some(subresource.into()),
                verb: Some("create".into()),
                version: Some("*".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: Api<SubjectAccessReview> = Api::all(ctx.client.clone());
    let answer = api.create(&PostParams::default(), &review).await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// Records an event about `csr` once per request and reason.
fn report(
    ctx: &Context,
    csr: &CertificateSigningRequest,
    type_: EventType,
    reason: &'static str,
    message: String,
) {
    let uid = csr.metadata.uid.clone().unwrap_or_default();
    if ctx
        .reported
        .lock()
        .expect("not poisoned")
        .insert((uid, reason))
    {
        tracing::info!(csr = %csr.name_any(), reason, %message, "left pending");
        ctx.recorder
            .record(&reference_to(csr), type_, reason, message);
    }
}

async fn reconcile(
    csr: Arc<CertificateSigningRequest>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let issued = csr
        .status
        .as_ref()
        .and_then(|s| s.certificate.as_ref())
        .is_some_and(|c| !c.0.is_empty());
    if issued || has_condition(&csr, "Approved") || has_condition(&csr, "Denied") {
        return Ok(Action::await_change());
    }
    let info = match bosun::validation::certificates::parse_request(&csr.spec.request.0) {
        Ok(info) => info,
        Err(e) => {
            tracing::warn!(csr = %csr.name_any(), error = %e, "unable to parse csr");
            return Ok(Action::await_change());
        }
    };
    let tried = recognize(&csr, &info);
    if tried.is_empty() {
        return Ok(Action::await_change());
    }
    let requester = csr.spec.username.clone().unwrap_or_default();
    for r in &tried {
        if *r == Recognized::NodeClient && requester != info.common_name {
            let node = info
                .common_name
                .strip_prefix(NODE_USER_PREFIX)
                .unwrap_or_default();
            if let Some(why) = live(&ctx, node).await {
                report(
                    &ctx,
                    &csr,
                    EventType::Warning,
                    "NodeNameInUse",
                    format!(
                        "Not auto approving: node \"{node}\" already exists and is live ({why}), and \
                         \"{requester}\" is not that node; a bootstrap token cannot take the name of a \
                         live node. Join with another node name, or remove the node first."
                    ),
                );
                return Ok(Action::requeue(RETRY));
            }
        }
        if authorized(&ctx, &csr, r.subresource()).await? {
            approve(&ctx, &csr, r.message()).await?;
            return Ok(Action::await_change());
        }
    }
    let subresources: Vec<&str> = tried.iter().map(|r| r.subresource()).collect();
    report(
        &ctx,
        &csr,
        EventType::Normal,
        "NotAutoApproved",
        format!(
            "Recognized as a node client certificate request ({}) but \"{requester}\" may not create \
             certificatesigningrequests/{}: left for an approver (kubectl certificate approve)",
            subresources.join(", "),
            subresources.join(" or certificatesigningrequests/")
        ),
    );
    Ok(Action::requeue(RETRY))
}

async fn approve(
    ctx: &Context,
    csr: &CertificateSigningRequest,
    message: &str,
) -> Result<(), Error> {
    let mut next = csr.clone();
    let at = from_chrono(ctx.clock.now());
    next.status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new)
        .push(CertificateSigningRequestCondition {
            type_: "Approved".into(),
            status: "True".into(),
            reason: Some("AutoApproved".into()),
            message: Some(message.into()),
            last_update_time: Some(at.clone()),
            last_transition_time: Some(at),
        });
    let api: Api<CertificateSigningRequest> = Api::all(ctx.client.clone());
    api.replace_subresource("approval", &csr.name_any(), &PostParams::default(), &next)
        .await?;
    tracing::info!(csr = %csr.name_any(), requester = ?csr.spec.username, message, "approved");
    Ok(())
}

#[cfg(test)]
mod tests;
