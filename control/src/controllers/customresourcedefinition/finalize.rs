//! The finalizing controller: a deleted CRD's instances, in every
//! namespace, are deleted through the API (their own finalizers and
//! owners honoured), the CRD `Terminating` meanwhile; once none is left
//! the `customresourcecleanup` finalizer is removed and the CRD goes.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::{json, Value};

use super::{cond, set_condition, write_status, Context, Error};
use crate::api::strategy::crd::CLEANUP_FINALIZER;

/// A served version of the CRD to reach its instances through, with the
/// accepted names (none if it was never served: it has no instances).
fn instances_api(ctx: &Context, crd: &Value) -> Option<Api<DynamicObject>> {
    let names = &crd["status"]["acceptedNames"];
    let plural = names["plural"].as_str().filter(|p| !p.is_empty())?;
    let kind = names["kind"].as_str().filter(|k| !k.is_empty())?;
    let group = crd["spec"]["group"].as_str()?;
    let version = crd["spec"]["versions"]
        .as_array()?
        .iter()
        .find(|v| v["served"] == true)?["name"]
        .as_str()?;
    let ar = ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    };
    Some(Api::all_with(ctx.client.clone(), &ar))
}

pub(super) async fn finalize(ctx: &Context, crd: &Value) -> Result<Action, Error> {
    let mut left = 0;
    if let Some(api) = instances_api(ctx, crd) {
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                for item in &list.items {
                    let name = item.metadata.name.clone().unwrap_or_default();
                    let ns_api = match &item.metadata.namespace {
                        Some(ns) => Api::<DynamicObject>::namespaced_with(
                            ctx.client.clone(),
                            ns,
                            &api_resource(crd),
                        ),
                        None => api.clone(),
                    };
                    match ns_api.delete(&name, &DeleteParams::default()).await {
                        Ok(_) => {}
                        Err(e) if crate::toolkit::api_errors::is_status(&e, 404) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                left = api.list(&ListParams::default()).await?.items.len();
            }
            // Not served here (yet or any more): nothing to reach.
            Err(e) if crate::toolkit::api_errors::is_status(&e, 404) => {}
            Err(e) => return Err(e.into()),
        }
    }
    if left > 0 {
        // Some instances wait on their own finalizers: say so, and look
        // again soon.
        let mut status = crd["status"].clone();
        let mut conditions: Vec<Value> =
            status["conditions"].as_array().cloned().unwrap_or_default();
        set_condition(
            &mut conditions,
            cond(
                "Terminating",
                true,
                "InstanceDeletionInProgress",
                "CustomResource deletion is in progress",
            ),
        );
        status["conditions"] = json!(conditions);
        write_status(ctx, crd, status).await?;
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let name = crd["metadata"]["name"].as_str().unwrap_or_default();
    let finalizers: Vec<Value> = crd["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| *f != CLEANUP_FINALIZER)
        .cloned()
        .collect();
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    let patch = json!({"metadata": {"resourceVersion": crd["metadata"]["resourceVersion"],
        "finalizers": finalizers}});
    match crds
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(Action::await_change()),
        Err(e) if crate::toolkit::api_errors::is_status(&e, 404) => Ok(Action::await_change()),
        Err(e) => Err(e.into()),
    }
}

fn api_resource(crd: &Value) -> ApiResource {
    let names = &crd["status"]["acceptedNames"];
    let group = crd["spec"]["group"].as_str().unwrap_or_default();
    let version = crd["spec"]["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["served"] == true))
        .and_then(|v| v["name"].as_str())
        .unwrap_or_default();
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: names["kind"].as_str().unwrap_or_default().into(),
        plural: names["plural"].as_str().unwrap_or_default().into(),
    }
}
