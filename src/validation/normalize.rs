//! Normalizing a written object: decoded into its built-in type and
//! encoded again, as the API server's decoding does (unknown fields
//! dropped, a wrongly typed field refused in Kubernetes' words), keeping
//! the absent required fields absent for validation to name.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::resources::ResourceInfo;

fn roundtrip<T: DeserializeOwned + Serialize>(v: &Value) -> Result<Value, String> {
    let typed: T = serde_path_to_error::deserialize(v).map_err(|e| e.to_string())?;
    serde_json::to_value(&typed).map_err(|e| e.to_string())
}

/// Removes what decoding added but the user never wrote: empty objects and
/// lists that stand for absent required fields, so validation still reports
/// them as `Required value`.
fn prune_added(out: &mut Value, input: Option<&Value>) {
    match out {
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                let inp = input.and_then(|i| i.get(&k)).filter(|x| !x.is_null());
                let child = map.get_mut(&k).expect("key listed");
                prune_added(child, inp);
                if inp.is_none() {
                    let empty = match child {
                        Value::Object(m) => m.is_empty(),
                        Value::Array(a) => a.is_empty(),
                        _ => false,
                    };
                    if empty {
                        map.remove(&k);
                    }
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                prune_added(item, input.and_then(|a| a.get(i)));
            }
        }
        _ => {}
    }
}

/// Decodes `obj` into the built-in type for `res` and encodes it again: unknown
/// fields are dropped and a wrongly typed field is an error in Kubernetes'
/// words (`Deployment in version "v1" cannot be handled as a Deployment: ...`).
/// Kinds without a built-in type come back unchanged.
pub fn normalize(res: &ResourceInfo, obj: Value) -> Result<Value, String> {
    let Value::Object(mut map) = obj else {
        return Err(format!(
            "{} in version {:?} cannot be handled as a {}: the object must be a JSON object",
            res.kind, res.version, res.kind
        ));
    };
    let api_version = res.api_version();
    match map.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("apiVersion".into(), Value::String(api_version.clone()));
        }
        Some(v) if v != api_version => {
            return Err(format!(
                "the API version in the data ({v}) does not match the expected API version ({api_version})"
            ))
        }
        _ => {}
    }
    match map.get("kind").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("kind".into(), Value::String(res.kind.to_string()));
        }
        Some(k) if k != res.kind => {
            return Err(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                res.kind
            ))
        }
        _ => {}
    }
    let input = Value::Object(map);
    Ok(normalize_checked(res, &input)?.unwrap_or(input))
}

/// [`normalize`] of an object whose apiVersion and kind the caller has
/// already checked to be `res`'s, decoded from a borrow: the normalized
/// object, or None when the kind has no built-in type (the object is then
/// its own normal form).
pub fn normalize_checked(res: &ResourceInfo, input: &Value) -> Result<Option<Value>, String> {
    use k8s_openapi::api::{
        apps::v1 as apps, autoscaling, batch::v1 as batchv1, core::v1 as corev1, rbac::v1 as rbacv1,
    };
    let cannot = |detail: String| {
        format!(
            "{} in version {:?} cannot be handled as a {}: {detail}",
            res.kind, res.version, res.kind
        )
    };
    if !input.is_object() {
        return Err(cannot("the object must be a JSON object".to_string()));
    }
    // `[]byte` values as Go reads them, canonical before the strict typed decode.
    let canonical = super::bytes::canonical(res, input).map_err(cannot)?;
    let v = canonical.as_ref().unwrap_or(input);
    let out = match (res.group, res.version, res.kind) {
        ("", "v1", "Pod") => roundtrip::<corev1::Pod>(v),
        ("", "v1", "Service") => roundtrip::<corev1::Service>(v),
        ("", "v1", "Endpoints") => roundtrip::<corev1::Endpoints>(v),
        ("", "v1", "Node") => roundtrip::<corev1::Node>(v),
        ("", "v1", "Namespace") => roundtrip::<corev1::Namespace>(v),
        ("", "v1", "Event") => roundtrip::<corev1::Event>(v),
        ("events.k8s.io", "v1", "Event") => {
            roundtrip::<k8s_openapi::api::events::v1::Event>(v)
        }
        ("", "v1", "PersistentVolume") => roundtrip::<corev1::PersistentVolume>(v),
        ("", "v1", "PersistentVolumeClaim") => roundtrip::<corev1::PersistentVolumeClaim>(v),
        ("", "v1", "ConfigMap") => roundtrip::<corev1::ConfigMap>(v),
        ("", "v1", "Secret") => roundtrip::<corev1::Secret>(v),
        ("", "v1", "ServiceAccount") => roundtrip::<corev1::ServiceAccount>(v),
        ("", "v1", "ResourceQuota") => roundtrip::<corev1::ResourceQuota>(v),
        ("", "v1", "LimitRange") => roundtrip::<corev1::LimitRange>(v),
        ("", "v1", "PodTemplate") => roundtrip::<corev1::PodTemplate>(v),
        ("", "v1", "ReplicationController") => roundtrip::<corev1::ReplicationController>(v),
        ("apps", "v1", "Deployment") => roundtrip::<apps::Deployment>(v),
        ("apps", "v1", "ReplicaSet") => roundtrip::<apps::ReplicaSet>(v),
        ("apps", "v1", "StatefulSet") => roundtrip::<apps::StatefulSet>(v),
        ("apps", "v1", "DaemonSet") => roundtrip::<apps::DaemonSet>(v),
        ("apps", "v1", "ControllerRevision") => roundtrip::<apps::ControllerRevision>(v),
        ("batch", "v1", "Job") => roundtrip::<batchv1::Job>(v),
        ("batch", "v1", "CronJob") => roundtrip::<batchv1::CronJob>(v),
        ("storage.k8s.io", "v1", "StorageClass") => {
            roundtrip::<k8s_openapi::api::storage::v1::StorageClass>(v)
        }
        ("coordination.k8s.io", "v1", "Lease") => {
            roundtrip::<k8s_openapi::api::coordination::v1::Lease>(v)
        }
        ("discovery.k8s.io", "v1", "EndpointSlice") => {
            roundtrip::<k8s_openapi::api::discovery::v1::EndpointSlice>(v)
        }
        ("networking.k8s.io", "v1", "NetworkPolicy") => {
            roundtrip::<k8s_openapi::api::networking::v1::NetworkPolicy>(v)
        }
        ("autoscaling", "v2", "HorizontalPodAutoscaler") => {
            roundtrip::<autoscaling::v2::HorizontalPodAutoscaler>(v)
        }
        // v2beta2 has v2's shape: decoded as v2, then given its apiVersion back.
        ("autoscaling", "v2beta2", "HorizontalPodAutoscaler") => {
            let mut v = v.clone();
            v["apiVersion"] = serde_json::json!("autoscaling/v2");
            roundtrip::<autoscaling::v2::HorizontalPodAutoscaler>(&v).map(|mut out| {
                out["apiVersion"] = serde_json::json!("autoscaling/v2beta2");
                out
            })
        }
        ("autoscaling", "v1", "HorizontalPodAutoscaler") => {
            roundtrip::<autoscaling::v1::HorizontalPodAutoscaler>(v)
        }
        ("policy", "v1", "PodDisruptionBudget") => {
            roundtrip::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(v)
        }
        ("rbac.authorization.k8s.io", "v1", "Role") => roundtrip::<rbacv1::Role>(v),
        ("rbac.authorization.k8s.io", "v1", "ClusterRole") => roundtrip::<rbacv1::ClusterRole>(v),
        ("rbac.authorization.k8s.io", "v1", "RoleBinding") => roundtrip::<rbacv1::RoleBinding>(v),
        ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding") => {
            roundtrip::<rbacv1::ClusterRoleBinding>(v)
        }
        ("networking.k8s.io", "v1", "Ingress") => {
            roundtrip::<k8s_openapi::api::networking::v1::Ingress>(v)
        }
        ("networking.k8s.io", "v1", "IngressClass") => {
            roundtrip::<k8s_openapi::api::networking::v1::IngressClass>(v)
        }
        ("storage.k8s.io", "v1", "CSIDriver") => {
            roundtrip::<k8s_openapi::api::storage::v1::CSIDriver>(v)
        }
        ("storage.k8s.io", "v1", "CSINode") => roundtrip::<k8s_openapi::api::storage::v1::CSINode>(v),
        ("storage.k8s.io", "v1", "CSIStorageCapacity") => {
            roundtrip::<k8s_openapi::api::storage::v1::CSIStorageCapacity>(v)
        }
        ("storage.k8s.io", "v1", "VolumeAttachment") => {
            roundtrip::<k8s_openapi::api::storage::v1::VolumeAttachment>(v)
        }
        ("node.k8s.io", "v1", "RuntimeClass") => {
            roundtrip::<k8s_openapi::api::node::v1::RuntimeClass>(v)
        }
        ("flowcontrol.apiserver.k8s.io", "v1", "FlowSchema") => {
            roundtrip::<k8s_openapi::api::flowcontrol::v1::FlowSchema>(v)
        }
        ("flowcontrol.apiserver.k8s.io", "v1", "PriorityLevelConfiguration") => {
            roundtrip::<k8s_openapi::api::flowcontrol::v1::PriorityLevelConfiguration>(v)
        }
        ("scheduling.k8s.io", "v1", "PriorityClass") => {
            roundtrip::<k8s_openapi::api::scheduling::v1::PriorityClass>(v)
        }
        ("apiregistration.k8s.io", "v1", "APIService") => {
            roundtrip::<k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService>(v)
        }
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition") => roundtrip::<
            k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        >(v),
        ("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration") => roundtrip::<
            k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
        >(v),
        ("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration") => roundtrip::<
            k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration,
        >(v),
        ("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy") => roundtrip::<
            k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy,
        >(v),
        ("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding") => roundtrip::<
            k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
        >(v),
        ("certificates.k8s.io", "v1", "CertificateSigningRequest") => roundtrip::<
            k8s_openapi::api::certificates::v1::CertificateSigningRequest,
        >(v),
        _ => return Ok(None),
    };
    let mut out = out.map_err(cannot)?;
    prune_added(&mut out, Some(input));
    Ok(Some(out))
}
