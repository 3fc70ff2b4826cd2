//! What the controller writes to the API: the `bosun` IngressClass at
//! start, and each served Ingress's `status.loadBalancer.ingress`.
//!
//! Every node serves every Ingress of the class, so the status lists the
//! address of every node running the controller, as ingress-nginx does
//! without a published Service (the nodes its pods run on). Each agent
//! adds its own address to the list (a merge patch guarded by the
//! Ingress's resourceVersion, retried on the next rebuild after a
//! conflict) and takes it out of Ingresses that are no longer its.

use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;

use super::{CLASS_NAME, CONTROLLER, DEFAULT_CLASS_ANNOTATION};

/// Creates IngressClass `bosun` (controller [`CONTROLLER`]) unless it
/// exists, marked as the default unless another class already is.
pub async fn ensure_default_class(client: &Client) {
    let api = Api::<IngressClass>::all(client.clone());
    let existing = match api.list(&Default::default()).await {
        Ok(l) => l.items,
        Err(e) => {
            tracing::warn!(error = %e, "ingress: listing IngressClasses; not making the default class");
            return;
        }
    };
    if existing
        .iter()
        .any(|c| c.metadata.name.as_deref() == Some(CLASS_NAME))
    {
        return;
    }
    let other_default = existing.iter().any(|c| {
        c.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
            .is_some_and(|v| v == "true")
    });
    let mut class = json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IngressClass",
        "metadata": {"name": CLASS_NAME},
        "spec": {"controller": CONTROLLER},
    });
    if !other_default {
        class["metadata"]["annotations"] = json!({ DEFAULT_CLASS_ANNOTATION: "true" });
    }
    let class: IngressClass = serde_json::from_value(class).expect("an IngressClass");
    match api.create(&PostParams::default(), &class).await {
        Ok(_) => tracing::info!(
            default = !other_default,
            "ingress: made IngressClass {CLASS_NAME}"
        ),
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => tracing::warn!(error = %e, "ingress: making IngressClass {CLASS_NAME}"),
    }
}

/// The addresses of `ing`'s status with `ip` in it (`serve`) or out of it,
/// sorted; None when that is what it already says.
pub fn next_addresses(ing: &Ingress, ip: &str, serve: bool) -> Option<Vec<String>> {
    let current: Vec<String> = ing
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|i| i.ip.clone())
        .collect();
    let has = current.iter().any(|c| c == ip);
    if has == serve {
        return None;
    }
    let mut next: Vec<String> = current.into_iter().filter(|c| c != ip).collect();
    if serve {
        next.push(ip.to_string());
    }
    next.sort();
    next.dedup();
    Some(next)
}

/// Puts this node's address into `ing`'s status (`serve`) or takes it out.
pub async fn publish(client: &Client, ing: &Ingress, ip: &str, serve: bool) {
    let Some(addresses) = next_addresses(ing, ip, serve) else {
        return;
    };
    let (Some(ns), Some(name)) = (
        ing.metadata.namespace.as_deref(),
        ing.metadata.name.as_deref(),
    ) else {
        return;
    };
    let entries: Vec<_> = addresses.iter().map(|a| json!({ "ip": a })).collect();
    let patch = json!({
        "metadata": {"resourceVersion": ing.metadata.resource_version},
        "status": {"loadBalancer": {"ingress": entries}},
    });
    let api = Api::<Ingress>::namespaced(client.clone(), ns);
    match api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => tracing::debug!(namespace = ns, name, ?addresses, "ingress: status written"),
        // Someone wrote it first: the watch brings the new version and a
        // rebuild that tries again.
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {}
        Err(e) => tracing::warn!(namespace = ns, name, error = %e, "ingress: writing status"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn addresses_merge_with_other_nodes() {
        let ing: Ingress = serde_json::from_value(json!({
            "metadata": {"name": "i", "namespace": "ns"},
            "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.2"}]}},
        }))
        .unwrap();
        assert_eq!(
            next_addresses(&ing, "10.0.0.1", true),
            Some(vec!["10.0.0.1".to_string(), "10.0.0.2".to_string()])
        );
        assert_eq!(next_addresses(&ing, "10.0.0.2", true), None);
        assert_eq!(next_addresses(&ing, "10.0.0.2", false), Some(vec![]));
        assert_eq!(next_addresses(&ing, "10.0.0.1", false), None);
    }
}
