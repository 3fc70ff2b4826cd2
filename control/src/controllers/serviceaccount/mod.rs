//! The serviceaccount controller (kube-controller-manager's
//! `serviceaccount`): every namespace that is not being deleted has a
//! ServiceAccount named `default`, made when the namespace appears and
//! again if it is deleted, so pods that name no account run as it.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::Controller;
use kube::{Client, ResourceExt};

use crate::toolkit::api_errors::is_status;
use crate::toolkit::{run_controller, synced, Shared};

/// The account every namespace gets.
pub const DEFAULT: &str = "default";

pub type Error = crate::toolkit::api_errors::ApiError;

pub struct Context {
    pub client: Client,
    pub accounts: Store<ServiceAccount>,
}

/// Sets up the controller on the shared caches; the returned future runs it.
pub fn start(shared: &Arc<Shared>) -> BoxFuture<'static, ()> {
    let informers = &shared.informers;
    let ctx = Arc::new(Context {
        client: shared.client_for("serviceaccount"),
        accounts: informers.store::<ServiceAccount>(),
    });
    let controller = Controller::for_shared_stream(
        informers.subscribe::<Namespace>(),
        informers.store::<Namespace>(),
    )
    .watches_stream(
        informers.deleted::<ServiceAccount>(),
        |sa: ServiceAccount| {
            (sa.name_any() == DEFAULT)
                .then(|| sa.namespace().map(|ns| ObjectRef::new(&ns)))
                .flatten()
        },
    );
    run_controller("serviceaccount", controller, ctx, reconcile).boxed()
}

/// Whether the namespace is going away (no new objects may be made in it).
pub fn is_terminating(ns: &Namespace) -> bool {
    ns.metadata.deletion_timestamp.is_some()
        || ns.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating")
}

async fn reconcile(ns: Arc<Namespace>, ctx: Arc<Context>) -> Result<Action, Error> {
    if is_terminating(&ns) {
        return Ok(Action::await_change());
    }
    synced(&ctx.accounts).await;
    let name = ns.name_any();
    if ctx
        .accounts
        .get(&ObjectRef::new(DEFAULT).within(&name))
        .is_some()
    {
        return Ok(Action::await_change());
    }
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(DEFAULT.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: Api<ServiceAccount> = Api::namespaced(ctx.client.clone(), &name);
    match api.create(&PostParams::default(), &account).await {
        Ok(_) => tracing::debug!(namespace = %name, "made the default service account"),
        // Made by another (or a cache behind); refused because the
        // namespace has just started terminating.
        Err(e) if is_status(&e, 409) || is_status(&e, 403) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests;
