//! The schemas of every served kind, from k8s-openapi's `JsonSchema`
//! impls (upstream's descriptions, types and special types such as
//! Quantity and IntOrString), named as upstream names them
//! (`io.k8s.api.apps.v1.Deployment`) and marked with
//! `x-kubernetes-group-version-kind` on the top-level kinds.

use bosun::resources::ResourceInfo;
use k8s_openapi::api::{
    apps, authentication, authorization, autoscaling, batch, coordination, core, discovery,
    networking, rbac, storage,
};
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{json, Map, Value};

/// Where `$ref`s point while generating; the v2 document rewrites them.
pub const V3_REF_PREFIX: &str = "#/components/schemas/";
pub const V2_REF_PREFIX: &str = "#/definitions/";

pub fn generator() -> SchemaGenerator {
    SchemaSettings::draft07()
        .with(|s| {
            s.definitions_path = "/components/schemas".into();
            s.meta_schema = None;
            s.transforms = Vec::new();
        })
        .into_generator()
}

fn add<T: JsonSchema>(gen: &mut SchemaGenerator) -> String {
    gen.subschema_for::<T>();
    T::schema_name().into_owned()
}

/// Adds the kind's schema (and all it refers to) to the generator and
/// returns its name, or None for a kind k8s-openapi has no type for.
/// autoscaling/v2beta2 has the same shape as v2 (k8s-openapi 1.37 no
/// longer carries it): v2's types are used and renamed by the caller.
fn add_kind(gen: &mut SchemaGenerator, r: &ResourceInfo) -> Option<String> {
    let version = if r.group == "autoscaling" && r.version == "v2beta2" {
        "v2"
    } else {
        r.version
    };
    Some(match (r.group, version, r.kind) {
        ("", "v1", "Namespace") => add::<core::v1::Namespace>(gen),
        ("", "v1", "Node") => add::<core::v1::Node>(gen),
        ("", "v1", "Pod") => add::<core::v1::Pod>(gen),
        ("", "v1", "Service") => add::<core::v1::Service>(gen),
        ("", "v1", "Endpoints") => add::<core::v1::Endpoints>(gen),
        ("", "v1", "Event") => add::<core::v1::Event>(gen),
        ("events.k8s.io", "v1", "Event") => add::<k8s_openapi::api::events::v1::Event>(gen),
        ("", "v1", "PersistentVolume") => add::<core::v1::PersistentVolume>(gen),
        ("", "v1", "PersistentVolumeClaim") => add::<core::v1::PersistentVolumeClaim>(gen),
        ("", "v1", "ConfigMap") => add::<core::v1::ConfigMap>(gen),
        ("", "v1", "Secret") => add::<core::v1::Secret>(gen),
        ("", "v1", "ServiceAccount") => add::<core::v1::ServiceAccount>(gen),
        ("", "v1", "ResourceQuota") => add::<core::v1::ResourceQuota>(gen),
        ("", "v1", "LimitRange") => add::<core::v1::LimitRange>(gen),
        ("", "v1", "PodTemplate") => add::<core::v1::PodTemplate>(gen),
        ("", "v1", "ReplicationController") => add::<core::v1::ReplicationController>(gen),
        ("", "v1", "ComponentStatus") => add::<core::v1::ComponentStatus>(gen),
        ("", "v1", "Binding") => add::<core::v1::Binding>(gen),
        ("apps", "v1", "Deployment") => add::<apps::v1::Deployment>(gen),
        ("apps", "v1", "ReplicaSet") => add::<apps::v1::ReplicaSet>(gen),
        ("apps", "v1", "StatefulSet") => add::<apps::v1::StatefulSet>(gen),
        ("apps", "v1", "DaemonSet") => add::<apps::v1::DaemonSet>(gen),
        ("apps", "v1", "ControllerRevision") => add::<apps::v1::ControllerRevision>(gen),
        ("batch", "v1", "Job") => add::<batch::v1::Job>(gen),
        ("batch", "v1", "CronJob") => add::<batch::v1::CronJob>(gen),
        ("storage.k8s.io", "v1", "StorageClass") => add::<storage::v1::StorageClass>(gen),
        ("coordination.k8s.io", "v1", "Lease") => add::<coordination::v1::Lease>(gen),
        ("discovery.k8s.io", "v1", "EndpointSlice") => add::<discovery::v1::EndpointSlice>(gen),
        ("networking.k8s.io", "v1", "NetworkPolicy") => add::<networking::v1::NetworkPolicy>(gen),
        ("rbac.authorization.k8s.io", "v1", "ClusterRole") => add::<rbac::v1::ClusterRole>(gen),
        ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding") => {
            add::<rbac::v1::ClusterRoleBinding>(gen)
        }
        ("rbac.authorization.k8s.io", "v1", "Role") => add::<rbac::v1::Role>(gen),
        ("rbac.authorization.k8s.io", "v1", "RoleBinding") => add::<rbac::v1::RoleBinding>(gen),
        ("scheduling.k8s.io", "v1", "PriorityClass") => {
            add::<k8s_openapi::api::scheduling::v1::PriorityClass>(gen)
        }
        ("authentication.k8s.io", "v1", "TokenReview") => {
            add::<authentication::v1::TokenReview>(gen)
        }
        ("authentication.k8s.io", "v1", "SelfSubjectReview") => {
            add::<authentication::v1::SelfSubjectReview>(gen)
        }
        ("authorization.k8s.io", "v1", "SubjectAccessReview") => {
            add::<authorization::v1::SubjectAccessReview>(gen)
        }
        ("authorization.k8s.io", "v1", "SelfSubjectAccessReview") => {
            add::<authorization::v1::SelfSubjectAccessReview>(gen)
        }
        ("authorization.k8s.io", "v1", "LocalSubjectAccessReview") => {
            add::<authorization::v1::LocalSubjectAccessReview>(gen)
        }
        ("authorization.k8s.io", "v1", "SelfSubjectRulesReview") => {
            add::<authorization::v1::SelfSubjectRulesReview>(gen)
        }
        ("autoscaling", "v1", "HorizontalPodAutoscaler") => {
            add::<autoscaling::v1::HorizontalPodAutoscaler>(gen)
        }
        ("autoscaling", "v2", "HorizontalPodAutoscaler") => {
            add::<autoscaling::v2::HorizontalPodAutoscaler>(gen)
        }
        ("networking.k8s.io", "v1", "Ingress") => {
            add::<k8s_openapi::api::networking::v1::Ingress>(gen)
        }
        ("networking.k8s.io", "v1", "IngressClass") => {
            add::<k8s_openapi::api::networking::v1::IngressClass>(gen)
        }
        ("policy", "v1", "PodDisruptionBudget") => {
            add::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(gen)
        }
        ("apiregistration.k8s.io", "v1", "APIService") => {
            add::<k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService>(gen)
        }
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition") => add::<
            k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        >(gen),
        ("certificates.k8s.io", "v1", "CertificateSigningRequest") => {
            add::<k8s_openapi::api::certificates::v1::CertificateSigningRequest>(gen)
        }
        ("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration") => {
            add::<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration>(gen)
        }
        ("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration") => {
            add::<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration>(gen)
        }
        ("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy") => {
            add::<k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy>(gen)
        }
        ("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding") => {
            add::<k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding>(gen)
        }
        ("storage.k8s.io", "v1", "CSIDriver") => add::<k8s_openapi::api::storage::v1::CSIDriver>(gen),
        ("storage.k8s.io", "v1", "CSINode") => add::<k8s_openapi::api::storage::v1::CSINode>(gen),
        ("storage.k8s.io", "v1", "CSIStorageCapacity") => {
            add::<k8s_openapi::api::storage::v1::CSIStorageCapacity>(gen)
        }
        ("storage.k8s.io", "v1", "VolumeAttachment") => {
            add::<k8s_openapi::api::storage::v1::VolumeAttachment>(gen)
        }
        ("node.k8s.io", "v1", "RuntimeClass") => {
            add::<k8s_openapi::api::node::v1::RuntimeClass>(gen)
        }
        ("flowcontrol.apiserver.k8s.io", "v1", "FlowSchema") => {
            add::<k8s_openapi::api::flowcontrol::v1::FlowSchema>(gen)
        }
        ("flowcontrol.apiserver.k8s.io", "v1", "PriorityLevelConfiguration") => {
            add::<k8s_openapi::api::flowcontrol::v1::PriorityLevelConfiguration>(gen)
        }
        _ => return None,
    })
}

/// The schemas of the kinds served at `group`/`version` and of every type
/// they refer to, keyed by upstream's names, `$ref`s as
/// `#/components/schemas/<name>`.
pub fn schemas(group: &str, version: &str, kinds: &[&ResourceInfo]) -> Map<String, Value> {
    let mut gen = generator();
    let tops: Vec<(String, &ResourceInfo)> = kinds
        .iter()
        .filter_map(|r| add_kind(&mut gen, r).map(|name| (name, *r)))
        .collect();
    let mut defs = gen.take_definitions(false);
    let mut tops = tops;
    if group == "autoscaling" && version == "v2beta2" {
        let (from, to) = (
            "io.k8s.api.autoscaling.v2.",
            "io.k8s.api.autoscaling.v2beta2.",
        );
        let text = serde_json::to_string(&defs).expect("schemas serialize");
        defs = serde_json::from_str(&text.replace(from, to)).expect("schemas parse");
        for (name, _) in &mut tops {
            *name = name.replace(from, to);
        }
    }
    for (name, r) in tops {
        if let Some(schema) = defs.get_mut(&name).and_then(Value::as_object_mut) {
            mark_top_level(schema, r);
        }
    }
    // A CRD schema's `default`, `enum` and `example` hold any JSON value:
    // upstream's definition has no type (k8s-openapi's says object, and
    // kubectl's client-side validation would refuse `default: 10`).
    if let Some(json) = defs
        .get_mut("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON")
        .and_then(Value::as_object_mut)
    {
        json.remove("type");
        json.remove("properties");
        json.remove("additionalProperties");
    }
    defs
}

/// The GVK extension clients find a kind's schema by, and upstream's
/// `required` list: k8s-openapi requires `metadata` (and some kinds'
/// `spec`) because its Rust fields are not optional, where the API does
/// not (a Pod without metadata in a manifest is a server-side error, not
/// a schema one); an Event does require its metadata upstream.
pub fn mark_top_level(schema: &mut Map<String, Value>, r: &ResourceInfo) {
    schema.insert(
        "x-kubernetes-group-version-kind".into(),
        json!([{"group": r.group, "kind": r.kind, "version": r.version}]),
    );
    let keep_metadata = r.group.is_empty() && r.kind == "Event";
    if let Some(required) = schema.get_mut("required").and_then(Value::as_array_mut) {
        required.retain(|f| f != "spec" && (keep_metadata || f != "metadata"));
        if required.is_empty() {
            schema.remove("required");
        }
    }
}

/// OpenAPI 3.0 ignores the siblings of a `$ref`: as upstream's v3
/// documents do, a field's `$ref` with its own description goes into an
/// `allOf` of one, next to the description.
pub fn wrap_refs_in_all_of(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if map.len() > 1 {
                if let Some(r) = map.remove("$ref") {
                    map.insert("allOf".into(), json!([{"$ref": r}]));
                }
            }
            map.values_mut().for_each(wrap_refs_in_all_of);
        }
        Value::Array(items) => items.iter_mut().for_each(wrap_refs_in_all_of),
        _ => {}
    }
}
