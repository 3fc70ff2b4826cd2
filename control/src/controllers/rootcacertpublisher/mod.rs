//! The root CA publisher (kube-controller-manager's
//! `root-ca-cert-publisher`): every namespace that is not being deleted
//! has the ConfigMap `kube-root-ca.crt` whose `ca.crt` is the CA the API
//! server's certificate is signed by, so pods can check whom they talk
//! to (the projected service account volume mounts it). An edited or
//! deleted one is put back.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::Controller;
use kube::{Client, ResourceExt};

use crate::controllers::serviceaccount::is_terminating;
use crate::toolkit::api_errors::is_status;
use crate::toolkit::{run_controller, synced, Shared};

/// The ConfigMap's name and key.
pub const NAME: &str = "kube-root-ca.crt";
pub const KEY: &str = "ca.crt";
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

pub type Error = crate::toolkit::api_errors::ApiError;

pub struct Context {
    pub client: Client,
    pub config_maps: Store<ConfigMap>,
    /// The CA's certificate, PEM.
    pub ca: String,
}

/// Sets up the controller on the shared caches; the returned future runs
/// it. `ca` is the PEM to publish.
pub fn start(shared: &Arc<Shared>, ca: String) -> BoxFuture<'static, ()> {
    let informers = &shared.informers;
    let ctx = Arc::new(Context {
        client: shared.client_for("root-ca-cert-publisher"),
        config_maps: informers.store::<ConfigMap>(),
        ca,
    });
    let controller = Controller::for_shared_stream(
        informers.subscribe::<Namespace>(),
        informers.store::<Namespace>(),
    )
    .watches_shared_stream(informers.subscribe::<ConfigMap>(), |cm| namespace_of(&cm))
    .watches_stream(informers.deleted::<ConfigMap>(), |cm| namespace_of(&cm));
    run_controller("root-ca-cert-publisher", controller, ctx, reconcile).boxed()
}

/// The namespace whose published CA `cm` is, if it is one.
fn namespace_of(cm: &ConfigMap) -> Option<ObjectRef<Namespace>> {
    (cm.name_any() == NAME)
        .then(|| cm.namespace().map(|ns| ObjectRef::new(&ns)))
        .flatten()
}

async fn reconcile(ns: Arc<Namespace>, ctx: Arc<Context>) -> Result<Action, Error> {
    if is_terminating(&ns) || ctx.ca.is_empty() {
        return Ok(Action::await_change());
    }
    synced(&ctx.config_maps).await;
    let name = ns.name_any();
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &name);
    let want = BTreeMap::from([(KEY.to_string(), ctx.ca.clone())]);
    match ctx.config_maps.get(&ObjectRef::new(NAME).within(&name)) {
        Some(cm) if cm.data.as_ref() == Some(&want) => {}
        Some(cm) => {
            // An update (upstream's role grants no patch), at the
            // resourceVersion read: a stale cache is a conflict, retried.
            let mut next = cm.as_ref().clone();
            next.data = Some(want);
            next.binary_data = None;
            api.replace(NAME, &PostParams::default(), &next).await?;
        }
        None => {
            let cm = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(NAME.into()),
                    annotations: Some(BTreeMap::from([(
                        "kubernetes.io/description".to_string(),
                        DESCRIPTION.to_string(),
                    )])),
                    ..Default::default()
                },
                data: Some(want),
                ..Default::default()
            };
            match api.create(&PostParams::default(), &cm).await {
                Ok(_) => {}
                Err(e) if is_status(&e, 409) || is_status(&e, 403) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests;
