//! Per-kind rules, as the apiserver's registry strategies: what is
//! special about creating, updating or deleting one kind of object. The
//! verbs are generic; they ask [`for_res`] for the kind's [`Strategy`] at
//! each step, and kinds with nothing special get the defaults.
//!
//! - [`pod`]: pods start Pending with their QoS class; a running pod gets
//!   a grace period to stop;
//! - [`service`]: cluster IPs and node ports are allocated on create and
//!   kept on update;
//! - [`job`]: a Job selects its pods by its own uid;
//! - [`daemonset`]: the template generation counts template changes;
//! - [`statefulset`]: claim templates keep only the apiVersion/kind the
//!   client sent;
//! - [`namespace`]: a namespace starts Active with the `kubernetes`
//!   finalizer; deleting one makes it Terminating until the namespace
//!   controller has emptied it and removed that finalizer;
//! - [`volume`]: PersistentVolumes start Available, claims Pending;
//! - [`secret`]: `stringData` is folded into `data` on every write;
//! - [`node`]: a Node's pod range is set once, inside `--cluster-cidr`;
//! - [`ingress`]: an Ingress naming no class gets the default IngressClass;
//! - [`priority_class`]: the system PriorityClasses cannot be deleted;
//! - [`crd`]: a CustomResourceDefinition is defaulted, starts with its
//!   storage version stored, and is deleted only once its instances are
//!   gone (custom resources themselves have nothing special here);
//! - [`csr`]: a CertificateSigningRequest's spec never changes after
//!   create; its conditions get their timestamps.
//! - [`admission_policy`]: a ValidatingAdmissionPolicy's CEL expressions
//!   must compile.

mod admission_policy;
pub mod crd;
mod csr;
mod daemonset;
pub mod ingress;
mod job;
mod namespace;
mod node;
mod pod;
mod priority_class;
mod secret;
mod service;
pub mod service_account;
mod statefulset;
mod volume;

use async_trait::async_trait;
use axum::response::Response;
use bosun::validation::FieldError;
use serde_json::Value;

use super::error::ApiResult;
use super::{ApiOptions, ApiRequest, ApiState};

/// What is special about one kind. Every method has a default that does
/// nothing special.
#[async_trait]
pub trait Strategy: Send + Sync {
    /// Fix-ups of what decoding against the typed schema produced from
    /// what the client `sent`.
    fn normalize(&self, _sent: &Value, _decoded: &mut Value) {}

    /// The status a new object starts with (status is the controllers'
    /// and agents' to write, so what the client sent is dropped).
    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        None
    }

    /// Fills in what the server decides for a new object, after defaulting
    /// and before validation (admission: what the server's options add).
    fn prepare_for_create(&self, _options: &ApiOptions, _obj: &mut Value) {}

    /// Checks beyond the shared validation that need the server's options
    /// (`old`: the stored object on update, None on create); an error
    /// names the field.
    fn validate(
        &self,
        _options: &ApiOptions,
        _obj: &Value,
        _old: Option<&Value>,
    ) -> Vec<FieldError> {
        Vec::new()
    }

    /// Takes what the server holds for the object from the store (cluster
    /// IPs, ports), after validation; an error names the field.
    async fn allocate(&self, _state: &ApiState, _obj: &mut Value) -> ApiResult<Vec<FieldError>> {
        Ok(Vec::new())
    }

    /// Carries over from `current` what an update may leave out.
    fn prepare_for_update(&self, _current: &Value, _next: &mut Value) {}

    /// Fix-ups of a write through the subresource `sub` (`status`,
    /// `approval`) after what it may change was taken from the client.
    fn prepare_for_subresource_update(&self, _sub: &str, _current: &Value, _next: &mut Value) {}

    /// How long a deleted object is kept for its owner to stop it.
    fn deletion_grace(&self, _obj: &Value, _requested: Option<i64>) -> i64 {
        0
    }

    /// Whether something besides `metadata.finalizers` keeps a deleted
    /// object (a namespace's `spec.finalizers`).
    fn blocks_deletion(&self, _obj: &Value) -> bool {
        false
    }

    /// Marks an object that is now being deleted (a namespace's phase).
    fn mark_deleting(&self, _obj: &mut Value) {}

    /// A delete of its own instead of the generic one, if the kind has one.
    async fn delete(&self, _state: &ApiState, _req: &ApiRequest) -> Option<ApiResult<Response>> {
        None
    }
}

/// Kinds with nothing special.
struct Default;

impl Strategy for Default {}

/// The strategy of the resource `res` (custom resources get the
/// defaults, whatever their kind is called).
pub fn for_res(res: &bosun::resources::ResourceInfo) -> &'static dyn Strategy {
    if !res.is_builtin() {
        return &Default;
    }
    for_kind(res.kind)
}

/// The class marked default among `classes` (`is_default`), as the
/// DefaultStorageClass and DefaultIngressClass admission plugins pick it:
/// the newest, then the first by name; none being deleted.
pub fn newest_default(classes: &[Value], is_default: impl Fn(&Value) -> bool) -> Option<String> {
    classes
        .iter()
        .filter(|c| is_default(c) && super::object::meta_str(c, "deletionTimestamp").is_none())
        .max_by(|a, b| {
            let meta = |c: &Value, key| super::object::meta_str(c, key).unwrap_or("").to_string();
            meta(a, "creationTimestamp")
                .cmp(&meta(b, "creationTimestamp"))
                .then_with(|| meta(b, "name").cmp(&meta(a, "name")))
        })
        .and_then(|c| super::object::meta_str(c, "name").map(str::to_string))
}

/// Gives a new object that names no class (neither `spec.<field>` nor the
/// older `annotation`) the default one of `classes` (a resource name), if
/// there is one: a claim's StorageClass, an Ingress's IngressClass.
async fn set_default_class(
    state: &ApiState,
    obj: &mut Value,
    classes: &str,
    field: &str,
    annotation: &str,
    default_of: fn(&[Value]) -> Option<String>,
) -> ApiResult<()> {
    let named = obj
        .get("spec")
        .and_then(|s| s.get(field))
        .is_some_and(|v| !v.is_null())
        || obj
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(annotation))
            .is_some();
    if named {
        return Ok(());
    }
    let res = bosun::resources::by_name(classes).expect("served");
    let listed = super::request::list_all(state, res).await?;
    if let (Some(class), Some(spec)) = (
        default_of(&listed),
        obj.get_mut("spec").and_then(Value::as_object_mut),
    ) {
        spec.insert(field.into(), Value::String(class));
    }
    Ok(())
}

/// The strategy of a built-in `kind`.
fn for_kind(kind: &str) -> &'static dyn Strategy {
    match kind {
        "Pod" => &pod::PodStrategy,
        "Service" => &service::ServiceStrategy,
        "Job" => &job::JobStrategy,
        "StatefulSet" => &statefulset::StatefulSetStrategy,
        "DaemonSet" => &daemonset::DaemonSetStrategy,
        "Namespace" => &namespace::NamespaceStrategy,
        "Secret" => &secret::SecretStrategy,
        "PersistentVolume" => &volume::PersistentVolumeStrategy,
        "Node" => &node::NodeStrategy,
        "PersistentVolumeClaim" => &volume::PersistentVolumeClaimStrategy,
        "Ingress" => &ingress::IngressStrategy,
        "PriorityClass" => &priority_class::PriorityClassStrategy,
        "CustomResourceDefinition" => &crd::CustomResourceDefinitionStrategy,
        "CertificateSigningRequest" => &csr::CertificateSigningRequestStrategy,
        "ValidatingAdmissionPolicy" => &admission_policy::ValidatingAdmissionPolicyStrategy,
        _ => &Default,
    }
}
