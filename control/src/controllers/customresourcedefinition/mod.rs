//! The CustomResourceDefinition controllers of the apiextensions-apiserver,
//! run by every API server (like the `kubernetes` Service's controller,
//! whatever `--controllers` says):
//!
//! 1. naming (`NamingConditionController`): the names a CRD asks for in
//!    `spec.names` are accepted into `status.acceptedNames` unless another
//!    CRD of the group already accepted them, or a built-in resource of
//!    the group uses them; then `NamesAccepted` is False with upstream's
//!    reason (`PluralConflict`, `KindConflict`, ...) and message (`"x" is
//!    already in use`), and the names accepted before stay;
//! 2. establishing (`EstablishingController`): once its names are
//!    accepted, a CRD is `Established`, and each API server serves it
//!    (see `api::custom`);
//! 3. finalizing (`FinalizingController`, [`finalize`]): a deleted CRD is
//!    `Terminating` behind the `customresourcecleanup` finalizer (added by
//!    its delete, see `api::strategy::crd`) until every instance in every
//!    namespace is gone; then the finalizer goes and so does the CRD.

mod finalize;
mod names;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::{watcher, Controller};
use kube::{Client, ResourceExt};
use serde_json::{json, Value};

use crate::api::strategy::crd::CLEANUP_FINALIZER;
use crate::toolkit::run_controller;

pub type Error = crate::toolkit::api_errors::ApiError;

pub struct Context {
    pub client: Client,
    pub crds: kube::runtime::reflector::Store<CustomResourceDefinition>,
}

/// Runs the controllers on `client` (the API server's own).
pub fn start(client: Client) -> BoxFuture<'static, ()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let controller = Controller::new(api, watcher::Config::default());
    let ctx = Arc::new(Context {
        client,
        crds: controller.store(),
    });
    run_controller("customresourcedefinition", controller, ctx, reconcile).boxed()
}

/// The condition `type_` of a CRD, if it has one.
pub(crate) fn condition<'a>(crd: &'a Value, type_: &str) -> Option<&'a Value> {
    crd.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// `conditions` with `new` in place of the one of its type; the transition
/// time moves only when the status does.
pub(crate) fn set_condition(conditions: &mut Vec<Value>, mut new: Value) {
    let now = bosun::time::now_rfc3339();
    match conditions.iter_mut().find(|c| c["type"] == new["type"]) {
        Some(old) => {
            new["lastTransitionTime"] = if old["status"] == new["status"] {
                old["lastTransitionTime"].clone()
            } else {
                json!(now)
            };
            *old = new;
        }
        None => {
            new["lastTransitionTime"] = json!(now);
            conditions.push(new);
        }
    }
}

fn cond(type_: &str, status: bool, reason: &str, message: &str) -> Value {
    json!({"type": type_, "status": if status { "True" } else { "False" },
        "reason": reason, "message": message})
}

/// Writes `status` if it differs from the CRD's, with its resourceVersion
/// as a precondition (a stale read is a conflict and comes back here).
async fn write_status(ctx: &Context, crd: &Value, status: Value) -> Result<(), Error> {
    if crd.get("status") == Some(&status) {
        return Ok(());
    }
    let name = crd["metadata"]["name"].as_str().unwrap_or_default();
    let api: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    let patch = json!({"metadata": {"resourceVersion": crd["metadata"]["resourceVersion"]},
        "status": status});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

async fn reconcile(crd: Arc<CustomResourceDefinition>, ctx: Arc<Context>) -> Result<Action, Error> {
    let obj =
        serde_json::to_value(crd.as_ref()).map_err(|e| Error::from(kube::Error::SerdeError(e)))?;
    if crd.metadata.deletion_timestamp.is_some() {
        if !crd.finalizers().iter().any(|f| f == CLEANUP_FINALIZER) {
            return Ok(Action::await_change());
        }
        return finalize::finalize(&ctx, &obj).await;
    }
    crate::toolkit::synced(&ctx.crds).await;
    let others: Vec<Value> = ctx
        .crds
        .state()
        .iter()
        .filter(|c| c.name_any() != crd.name_any())
        .filter_map(|c| serde_json::to_value(c.as_ref()).ok())
        .collect();
    let decided = names::decide(&obj, &others);
    let mut status = obj.get("status").cloned().unwrap_or_else(|| json!({}));
    status["acceptedNames"] = decided.accepted.clone();
    let mut conditions: Vec<Value> = status["conditions"].as_array().cloned().unwrap_or_default();
    let accepted = decided.conflict.is_none();
    match &decided.conflict {
        None => set_condition(
            &mut conditions,
            cond("NamesAccepted", true, "NoConflicts", "no conflicts found"),
        ),
        Some((reason, message)) => set_condition(
            &mut conditions,
            cond("NamesAccepted", false, reason, message),
        ),
    }
    let established = condition(&obj, "Established").is_some_and(|c| c["status"] == "True");
    if accepted && !established {
        set_condition(
            &mut conditions,
            cond(
                "Established",
                true,
                "InitialNamesAccepted",
                "the initial names have been accepted",
            ),
        );
    } else if !established {
        set_condition(
            &mut conditions,
            cond(
                "Established",
                false,
                "NotAccepted",
                "not all names are accepted",
            ),
        );
    }
    status["conditions"] = json!(conditions);
    write_status(&ctx, &obj, status).await?;
    if accepted {
        Ok(Action::await_change())
    } else {
        // The CRD holding the names may go; look again now and then.
        Ok(Action::requeue(Duration::from_secs(5)))
    }
}
