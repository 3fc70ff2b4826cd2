//! The namespace controller (kube-controller-manager's `namespace`): a
//! namespace being deleted is Terminating until everything in it is gone.
//! Each sync deletes every namespaced kind's objects in it (pods with
//! their grace period, objects with finalizers waiting for those), reports
//! what is left in the namespace's conditions as Kubernetes words them,
//! and once nothing is left removes the `kubernetes` finalizer through the
//! `finalize` subresource, after which the API deletes the namespace.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::core::v1::{Namespace, NamespaceCondition, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::Controller;
use kube::{Client, ResourceExt};
use serde_json::json;

use bosun::resources::{ResourceInfo, RESOURCES};

use crate::toolkit::api_errors::{code_of, message_of};
use crate::toolkit::dynamic::dynamic_api;
use crate::toolkit::{from_chrono, run_controller, Clock, Shared};

use bosun::well_known::NAMESPACE_FINALIZER as FINALIZER;

/// How soon a namespace with content left is looked at again (sooner
/// when one of its pods goes).
const RECHECK: Duration = Duration::from_secs(2);

pub type Error = crate::toolkit::api_errors::ApiError;

pub struct Context {
    pub client: Client,
    pub clock: Arc<dyn Clock>,
}

/// Sets up the controller on the shared caches; the returned future runs it.
pub fn start(shared: &Arc<Shared>) -> BoxFuture<'static, ()> {
    let informers = &shared.informers;
    let ctx = Arc::new(Context {
        client: shared.client_for("namespace"),
        clock: shared.clock.clone(),
    });
    let controller = Controller::for_shared_stream(
        informers.subscribe::<Namespace>(),
        informers.store::<Namespace>(),
    )
    // A pod that finished terminating may have been the last thing left.
    .watches_stream(informers.deleted::<Pod>(), |pod: Pod| {
        pod.namespace().map(|ns| ObjectRef::new(&ns))
    });
    run_controller("namespace", controller, ctx, reconcile).boxed()
}

/// What one pass found in a namespace.
#[derive(Debug, Default, PartialEq)]
pub struct Remaining {
    /// Objects left, by `plural.group`.
    pub by_resource: BTreeMap<String, usize>,
    /// Objects left holding each finalizer.
    pub by_finalizer: BTreeMap<String, usize>,
    /// Deletes or lists that failed.
    pub failures: Vec<String>,
}

impl Remaining {
    fn is_empty(&self) -> bool {
        self.by_resource.is_empty() && self.failures.is_empty()
    }
}

/// The kinds a namespace holds: every namespaced resource, once (in the
/// version it is stored in).
fn namespaced_kinds() -> impl Iterator<Item = &'static ResourceInfo> {
    RESOURCES
        .iter()
        .filter(|r| r.namespaced && r.is_storage_version())
}

pub async fn reconcile(ns: Arc<Namespace>, ctx: Arc<Context>) -> Result<Action, Error> {
    let finalizing = ns
        .spec
        .as_ref()
        .and_then(|s| s.finalizers.as_ref())
        .is_some_and(|f| f.iter().any(|f| f == FINALIZER));
    if ns.metadata.deletion_timestamp.is_none() || !finalizing {
        return Ok(Action::await_change());
    }
    let name = ns.name_any();
    let left = delete_content(&ctx.client, &name).await;
    write_conditions(&ctx, &ns, &left).await?;
    if !left.is_empty() {
        return Ok(Action::requeue(RECHECK));
    }
    finalize(&ctx.client, &ns).await?;
    Ok(Action::await_change())
}

/// Deletes every object in the namespace and counts what is still there.
pub async fn delete_content(client: &Client, namespace: &str) -> Remaining {
    let mut left = Remaining::default();
    // Custom resources too, as discovery lists them.
    let custom = match crate::toolkit::dynamic::custom_resources(client).await {
        Ok(c) => c,
        Err(e) => {
            left.failures.push(format!(
                "customresourcedefinitions.apiextensions.k8s.io: {}",
                message_of(&e)
            ));
            Vec::new()
        }
    };
    let custom = custom.into_iter().filter(|r| r.namespaced);
    for res in namespaced_kinds().chain(custom) {
        let api = dynamic_api(client, res, Some(namespace));
        let what = format!("{}.{}", res.plural, res.group);
        match api
            .delete_collection(&DeleteParams::background(), &ListParams::default())
            .await
        {
            Ok(_) => {}
            // A kind that cannot be deleted (read-only) holds nothing.
            Err(e) if matches!(code_of(&e), Some(404 | 405)) => continue,
            Err(e) => left.failures.push(format!("{what}: {}", message_of(&e))),
        }
        match api.list(&ListParams::default()).await {
            Ok(list) if list.items.is_empty() => {}
            Ok(list) => {
                left.by_resource.insert(what, list.items.len());
                for obj in &list.items {
                    for f in obj.finalizers() {
                        *left.by_finalizer.entry(f.clone()).or_default() += 1;
                    }
                }
            }
            Err(e) => left.failures.push(format!("{what}: {}", message_of(&e))),
        }
    }
    left
}

/// The deletion conditions Kubernetes' namespace controller reports, in
/// its words: (type, true?, reason, message).
pub fn conditions(left: &Remaining) -> Vec<(&'static str, bool, &'static str, String)> {
    let failed = !left.failures.is_empty();
    let resources: Vec<String> = left
        .by_resource
        .iter()
        .map(|(r, n)| format!("{r} has {n} resource instances"))
        .collect();
    let finalizers: Vec<String> = left
        .by_finalizer
        .iter()
        .map(|(f, n)| format!("{f} in {n} resource instances"))
        .collect();
    vec![
        (
            "NamespaceDeletionDiscoveryFailure",
            false,
            "ResourcesDiscovered",
            "All resources successfully discovered".into(),
        ),
        (
            "NamespaceDeletionGroupVersionParsingFailure",
            false,
            "ParsedGroupVersions",
            "All legacy kube types successfully parsed".into(),
        ),
        if failed {
            (
                "NamespaceDeletionContentFailure",
                true,
                "ContentDeletionFailed",
                format!(
                    "Failed to delete all resource types, {} remaining: {}",
                    left.failures.len(),
                    left.failures.join(", ")
                ),
            )
        } else {
            (
                "NamespaceDeletionContentFailure",
                false,
                "ContentDeleted",
                "All content successfully deleted, may be waiting on finalization".into(),
            )
        },
        if resources.is_empty() {
            (
                "NamespaceContentRemaining",
                false,
                "ContentRemoved",
                "All content successfully removed".into(),
            )
        } else {
            (
                "NamespaceContentRemaining",
                true,
                "SomeResourcesRemain",
                format!("Some resources are remaining: {}", resources.join(", ")),
            )
        },
        if finalizers.is_empty() {
            (
                "NamespaceFinalizersRemaining",
                false,
                "ContentHasNoFinalizers",
                "All content-preserving finalizers finished".into(),
            )
        } else {
            (
                "NamespaceFinalizersRemaining",
                true,
                "SomeFinalizersRemain",
                format!(
                    "Some content in the namespace has finalizers remaining: {}",
                    finalizers.join(", ")
                ),
            )
        },
    ]
}

/// Writes the conditions when they changed (a condition keeps its
/// transition time while its status stays).
async fn write_conditions(ctx: &Context, ns: &Namespace, left: &Remaining) -> Result<(), Error> {
    let old = ns
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let now = from_chrono(ctx.clock.now());
    let new: Vec<NamespaceCondition> = conditions(left)
        .into_iter()
        .map(|(type_, on, reason, message)| {
            let status = if on { "True" } else { "False" }.to_string();
            let since = old
                .iter()
                .find(|c| c.type_ == type_ && c.status == status)
                .and_then(|c| c.last_transition_time.clone())
                .unwrap_or_else(|| now.clone());
            NamespaceCondition {
                type_: type_.into(),
                status,
                reason: Some(reason.into()),
                message: Some(message),
                last_transition_time: Some(since),
            }
        })
        .collect();
    if new == old {
        return Ok(());
    }
    let api: Api<Namespace> = Api::all(ctx.client.clone());
    let patch = json!({"status": {"phase": "Terminating", "conditions": new}});
    match api
        .patch_status(
            &ns.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
    {
        Err(e) if code_of(&e) == Some(404) => Ok(()),
        other => Ok(other.map(drop)?),
    }
}

/// Removes this controller's finalizer through `namespaces/finalize`.
async fn finalize(client: &Client, ns: &Namespace) -> Result<(), Error> {
    let mut next = ns.clone();
    if let Some(f) = next.spec.as_mut().and_then(|s| s.finalizers.as_mut()) {
        f.retain(|f| f != FINALIZER);
    }
    let api: Api<Namespace> = Api::all(client.clone());
    match api
        .replace_subresource("finalize", &ns.name_any(), &PostParams::default(), &next)
        .await
    {
        // Gone already, or changed under us (the next sync finalizes).
        Err(e) if matches!(code_of(&e), Some(404 | 409)) => Ok(()),
        other => Ok(other.map(drop)?),
    }
}

#[cfg(test)]
mod tests;
