//! The checks the API server runs on every create and update: decoding into
//! the built-in type ([`normalize`]) and Kubernetes' field validation
//! ([`validate`]), which reports every problem at once with Kubernetes' field
//! paths, reasons and messages.
//!
//! Order on the server: `normalize` → [`crate::defaults::apply_defaults`] →
//! generate `metadata.name` from `generateName` and fill `metadata.namespace`
//! from the URL → `validate`.

mod admission_policy;
mod admissionregistration;
pub mod apiregistration;
mod apps;
mod autoscaling;
mod batch;
pub mod bytes;
pub mod certificates;
mod config;
mod container;
mod coordination;
mod core;
mod discovery;
mod ephemeral;
mod events;
mod flowcontrol;
mod ingress;
mod meta;
// Labels and annotations a CRD conversion webhook hands back are checked as written ones.
pub use meta::{validate_annotations, validate_labels};
pub use normalize::{normalize, normalize_checked};
mod networkpolicy;
mod node_api;
mod normalize;
mod pod;
pub mod policy;
mod quota;
mod rbac;
mod replication;
pub mod scheduling;
mod storage;
mod storage_csi;
mod volume_files;

use serde_json::Value;

use crate::resources::ResourceInfo;

/// What is wrong with a field; each maps to a Kubernetes `StatusCause` reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Required,
    Invalid,
    NotSupported,
    Duplicate,
    Forbidden,
    TooLong,
    TooMany,
    NotFound,
}

impl ErrorKind {
    /// The text Kubernetes puts after the field path (`Invalid value`).
    pub fn as_str(&self) -> &'static str {
        match self {
            ErrorKind::Required => "Required value",
            ErrorKind::Invalid => "Invalid value",
            ErrorKind::NotSupported => "Unsupported value",
            ErrorKind::Duplicate => "Duplicate value",
            ErrorKind::Forbidden => "Forbidden",
            ErrorKind::TooLong => "Too long",
            ErrorKind::TooMany => "Too many",
            ErrorKind::NotFound => "Not found",
        }
    }
}

/// One problem with one field, as Kubernetes' `field.Error`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// Path in Kubernetes' syntax: `spec.template.spec.containers[0].ports[1].containerPort`.
    pub field: String,
    pub kind: ErrorKind,
    /// The offending value; `None` leaves it out of the message.
    pub bad_value: Option<Value>,
    pub detail: String,
}

/// Kubernetes' message for an immutable field.
pub const FIELD_IMMUTABLE: &str = "field is immutable";
/// Kubernetes' message for a negative number.
pub const IS_NEGATIVE: &str = "must be greater than or equal to 0";

impl FieldError {
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> FieldError {
        FieldError {
            field: field.into(),
            kind: ErrorKind::Required,
            bad_value: None,
            detail: detail.into(),
        }
    }

    pub fn invalid(
        field: impl Into<String>,
        value: impl Into<Value>,
        detail: impl Into<String>,
    ) -> FieldError {
        FieldError {
            field: field.into(),
            kind: ErrorKind::Invalid,
            bad_value: Some(value.into()),
            detail: detail.into(),
        }
    }

    /// `field is immutable`, with the new value.
    pub fn immutable(field: impl Into<String>, value: impl Into<Value>) -> FieldError {
        Self::invalid(field, value, FIELD_IMMUTABLE)
    }

    pub fn not_supported(
        field: impl Into<String>,
        value: impl Into<Value>,
        supported: &[&str],
    ) -> FieldError {
        let quoted: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        FieldError {
            field: field.into(),
            kind: ErrorKind::NotSupported,
            bad_value: Some(value.into()),
            detail: if quoted.is_empty() {
                String::new()
            } else {
                format!("supported values: {}", quoted.join(", "))
            },
        }
    }

    pub fn duplicate(field: impl Into<String>, value: impl Into<Value>) -> FieldError {
        FieldError {
            field: field.into(),
            kind: ErrorKind::Duplicate,
            bad_value: Some(value.into()),
            detail: String::new(),
        }
    }

    pub fn not_found(field: impl Into<String>, value: impl Into<Value>) -> FieldError {
        FieldError {
            field: field.into(),
            kind: ErrorKind::NotFound,
            bad_value: Some(value.into()),
            detail: String::new(),
        }
    }

    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> FieldError {
        FieldError {
            field: field.into(),
            kind: ErrorKind::Forbidden,
            bad_value: None,
            detail: detail.into(),
        }
    }

    pub fn too_long(field: impl Into<String>, max_bytes: usize) -> FieldError {
        FieldError {
            field: field.into(),
            kind: ErrorKind::TooLong,
            bad_value: None,
            detail: format!(
                "may not be more than {max_bytes} {}",
                if max_bytes == 1 { "byte" } else { "bytes" }
            ),
        }
    }

    /// Kubernetes' `StatusCause.reason`.
    pub fn reason(&self) -> &'static str {
        match self.kind {
            ErrorKind::Required => "FieldValueRequired",
            ErrorKind::Invalid => "FieldValueInvalid",
            ErrorKind::NotSupported => "FieldValueNotSupported",
            ErrorKind::Duplicate => "FieldValueDuplicate",
            ErrorKind::Forbidden => "FieldValueForbidden",
            ErrorKind::TooLong => "FieldValueTooLong",
            ErrorKind::TooMany => "FieldValueTooMany",
            ErrorKind::NotFound => "FieldValueNotFound",
        }
    }

    /// The message without the field path (Kubernetes' `ErrorBody`), used as
    /// `StatusCause.message`.
    pub fn body(&self) -> String {
        let mut s = self.kind.as_str().to_string();
        let shows_value = !matches!(
            self.kind,
            ErrorKind::Required | ErrorKind::Forbidden | ErrorKind::TooLong
        );
        if let (true, Some(v)) = (shows_value, &self.bad_value) {
            s.push_str(": ");
            s.push_str(&go_value(&self.field, v));
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }

    /// The full message: `spec.replicas: Invalid value: -1: must be greater than or equal to 0`.
    pub fn message(&self) -> String {
        format!("{}: {}", self.field, self.body())
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

/// Go's `%q` for a string (close enough: JSON string escaping).
fn go_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

fn go_string_map(m: &serde_json::Map<String, Value>) -> String {
    let parts: Vec<String> = m
        .iter()
        .map(|(k, v)| {
            format!(
                "{}:{}",
                go_quote(k),
                go_quote(v.as_str().unwrap_or_default())
            )
        })
        .collect();
    format!("map[string]string{{{}}}", parts.join(", "))
}

fn go_string_slice(values: Option<&Value>) -> String {
    match values.and_then(Value::as_array) {
        None => "[]string(nil)".to_string(),
        Some(a) => {
            let parts: Vec<String> = a
                .iter()
                .map(|v| go_quote(v.as_str().unwrap_or_default()))
                .collect();
            format!("[]string{{{}}}", parts.join(", "))
        }
    }
}

/// A label selector as Go's `%#v` prints `v1.LabelSelector`.
fn go_label_selector(m: &serde_json::Map<String, Value>) -> String {
    let labels = match m.get("matchLabels").and_then(Value::as_object) {
        Some(l) => go_string_map(l),
        None => "map[string]string(nil)".to_string(),
    };
    let exprs = match m.get("matchExpressions").and_then(Value::as_array) {
        None => "[]v1.LabelSelectorRequirement(nil)".to_string(),
        Some(a) => {
            let parts: Vec<String> = a
                .iter()
                .map(|e| {
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{}}}",
                        go_quote(e.get("key").and_then(Value::as_str).unwrap_or_default()),
                        go_quote(
                            e.get("operator")
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                        ),
                        go_string_slice(e.get("values"))
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", parts.join(", "))
        }
    };
    format!("v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{exprs}}}")
}

/// Renders a bad value the way Kubernetes' messages show it.
fn go_value(field: &str, v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => go_quote(s),
        Value::Object(m)
            if field.ends_with("selector")
                && m.keys()
                    .all(|k| k == "matchLabels" || k == "matchExpressions") =>
        {
            go_label_selector(m)
        }
        Value::Object(m) if m.values().all(Value::is_string) => go_string_map(m),
        Value::Array(a) if a.iter().all(Value::is_string) => go_string_slice(Some(v)),
        other => other.to_string(),
    }
}

/// Kubernetes' 422 message: `Deployment.apps "web" is invalid: spec.replicas: ...`,
/// with several errors as `[a, b]`.
pub fn invalid_message(res: &ResourceInfo, name: &str, errs: &[FieldError]) -> String {
    let mut msgs: Vec<String> = Vec::new();
    for e in errs {
        let m = e.message();
        if !msgs.contains(&m) {
            msgs.push(m);
        }
    }
    let qualified = if res.group.is_empty() {
        res.kind.to_string()
    } else {
        format!("{}.{}", res.kind, res.group)
    };
    let joined = if msgs.len() == 1 {
        msgs.remove(0)
    } else {
        format!("[{}]", msgs.join(", "))
    };
    format!("{qualified} {name:?} is invalid: {joined}")
}

// ---- field paths -------------------------------------------------------------

/// `base.name`.
pub(crate) fn child(base: &str, name: &str) -> String {
    if base.is_empty() {
        name.to_string()
    } else {
        format!("{base}.{name}")
    }
}

/// `base[i]`.
pub(crate) fn index(base: &str, i: usize) -> String {
    format!("{base}[{i}]")
}

/// `base[key]`.
pub(crate) fn key(base: &str, k: &str) -> String {
    format!("{base}[{k}]")
}

// ---- JSON access ---------------------------------------------------------------

/// The field, unless absent or null.
pub(crate) fn get<'a>(v: &'a Value, k: &str) -> Option<&'a Value> {
    v.get(k).filter(|x| !x.is_null())
}

/// The string field, or "" when absent.
pub(crate) fn str_of<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

pub(crate) fn int_of(v: &Value, k: &str) -> Option<i64> {
    v.get(k).and_then(Value::as_i64)
}

pub(crate) fn arr_of<'a>(v: &'a Value, k: &str) -> &'a [Value] {
    v.get(k)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

pub(crate) fn obj_of<'a>(v: &'a Value, k: &str) -> Option<&'a serde_json::Map<String, Value>> {
    v.get(k).and_then(Value::as_object)
}

static NULL: Value = Value::Null;

/// The field or `null`, for walking into optional objects.
pub(crate) fn sub<'a>(v: &'a Value, k: &str) -> &'a Value {
    v.get(k).unwrap_or(&NULL)
}

/// `ValidateNonnegativeField` for an optional integer.
pub(crate) fn nonnegative(errs: &mut Vec<FieldError>, v: &Value, k: &str, path: &str) {
    if let Some(n) = int_of(v, k) {
        if n < 0 {
            errs.push(FieldError::invalid(child(path, k), n, IS_NEGATIVE));
        }
    }
}

// ---- validate ------------------------------------------------------------------

/// Validates a write to a pod's `ephemeralcontainers` subresource
/// (`ValidatePodEphemeralContainersUpdate`): the pod as a whole, then that
/// its existing ephemeral containers are neither removed nor changed.
pub fn validate_ephemeral_containers_update(pod: &Value, old: &Value) -> Vec<FieldError> {
    let res = crate::resources::by_name("pods").expect("pods are a resource");
    let mut errs = Vec::new();
    meta::validate_object_meta(res, sub(pod, "metadata"), &mut errs);
    meta::validate_object_meta_update(sub(pod, "metadata"), sub(old, "metadata"), &mut errs);
    pod::validate_pod_spec(sub(pod, "spec"), "spec", &mut errs);
    ephemeral::validate_update(pod, old, &mut errs);
    errs
}

/// Validates a create (`old` = None) or an update (`old` = the stored object).
/// Expects a normalized, defaulted object whose name and namespace are filled in.
pub fn validate(res: &ResourceInfo, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    meta::validate_object_meta(res, sub(obj, "metadata"), &mut errs);
    if let Some(old) = old {
        meta::validate_object_meta_update(sub(obj, "metadata"), sub(old, "metadata"), &mut errs);
    }
    let spec = sub(obj, "spec");
    let old_spec = old.map(|o| sub(o, "spec"));
    match (res.group, res.kind) {
        ("", "Pod") => {
            pod::validate_pod_spec(spec, "spec", &mut errs);
            match old_spec {
                Some(old_spec) => pod::validate_pod_update(spec, old_spec, &mut errs),
                None => ephemeral::forbid_on_create(spec, &mut errs),
            }
        }
        ("", "Service") => core::validate_service(obj, old, &mut errs),
        ("", "Endpoints") => core::validate_endpoints(obj, &mut errs),
        ("", "Node") => core::validate_node(obj, &mut errs),
        // ValidateServiceAccount checks only the metadata.
        ("", "Namespace") | ("", "ServiceAccount") => {}
        (group @ ("" | "events.k8s.io"), "Event") => {
            events::validate_event(obj, old, group == "events.k8s.io", &mut errs)
        }
        ("", "ConfigMap") => config::validate_config_map(obj, old, &mut errs),
        ("", "Secret") => config::validate_secret(obj, old, &mut errs),
        ("", "PersistentVolume") => core::validate_pv(spec, &mut errs),
        ("", "PersistentVolumeClaim") => core::validate_pvc(spec, old_spec, &mut errs),
        ("", "ResourceQuota") => quota::validate_resource_quota(obj, &mut errs),
        ("", "LimitRange") => quota::validate_limit_range(spec, &mut errs),
        ("", "PodTemplate") => replication::validate_pod_template_object(obj, &mut errs),
        ("", "ReplicationController") => {
            replication::validate_replication_controller(spec, &mut errs)
        }
        ("apps", "Deployment") => apps::validate_deployment(spec, old_spec, &mut errs),
        ("apps", "ReplicaSet") => apps::validate_replicaset(spec, old_spec, &mut errs),
        ("apps", "StatefulSet") => apps::validate_statefulset(spec, old_spec, &mut errs),
        ("apps", "DaemonSet") => apps::validate_daemonset(spec, old_spec, &mut errs),
        ("apps", "ControllerRevision") => apps::validate_controller_revision(obj, old, &mut errs),
        ("batch", "Job") => batch::validate_job(spec, old_spec, &mut errs),
        ("batch", "CronJob") => batch::validate_cronjob(obj, old, &mut errs),
        ("storage.k8s.io", "StorageClass") => storage::validate_storage_class(obj, old, &mut errs),
        ("coordination.k8s.io", "Lease") => coordination::validate_lease_spec(spec, &mut errs),
        ("discovery.k8s.io", "EndpointSlice") => {
            discovery::validate_endpoint_slice(obj, old, &mut errs)
        }
        ("networking.k8s.io", "NetworkPolicy") => {
            networkpolicy::validate_network_policy(spec, old, &mut errs)
        }
        ("autoscaling", "HorizontalPodAutoscaler") => {
            autoscaling::validate_hpa(res.version, spec, &mut errs)
        }
        ("policy", "PodDisruptionBudget") => policy::validate_pdb(obj, &mut errs),
        ("rbac.authorization.k8s.io", "Role") => rbac::validate_rules(obj, true, &mut errs),
        ("rbac.authorization.k8s.io", "ClusterRole") => rbac::validate_rules(obj, false, &mut errs),
        ("rbac.authorization.k8s.io", "RoleBinding") => {
            rbac::validate_binding(obj, old, true, &mut errs)
        }
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
            rbac::validate_binding(obj, old, false, &mut errs)
        }
        ("networking.k8s.io", "Ingress") => ingress::validate_ingress(obj, &mut errs),
        ("networking.k8s.io", "IngressClass") => {
            ingress::validate_ingress_class(obj, old, &mut errs)
        }
        ("scheduling.k8s.io", "PriorityClass") => {
            scheduling::validate_priority_class(obj, old, &mut errs)
        }
        ("storage.k8s.io", "CSIDriver") => storage_csi::validate_csi_driver(obj, old, &mut errs),
        ("storage.k8s.io", "CSINode") => storage_csi::validate_csi_node(obj, &mut errs),
        ("storage.k8s.io", "CSIStorageCapacity") => {
            storage_csi::validate_csi_storage_capacity(obj, &mut errs)
        }
        ("storage.k8s.io", "VolumeAttachment") => {
            storage_csi::validate_volume_attachment(obj, old, &mut errs)
        }
        ("node.k8s.io", "RuntimeClass") => node_api::validate_runtime_class(obj, old, &mut errs),
        ("flowcontrol.apiserver.k8s.io", "FlowSchema") => {
            flowcontrol::validate_flow_schema(obj, &mut errs)
        }
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration") => {
            flowcontrol::validate_priority_level(obj, &mut errs)
        }
        ("apiregistration.k8s.io", "APIService") => {
            apiregistration::validate_api_service(obj, &mut errs)
        }
        (
            "admissionregistration.k8s.io",
            kind @ ("ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration"),
        ) => {
            let mutating = kind == "MutatingWebhookConfiguration";
            admissionregistration::validate_webhook_configuration(obj, old, mutating, &mut errs)
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => {
            admission_policy::validate_policy(obj, &mut errs)
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => {
            admission_policy::validate_binding(obj, &mut errs)
        }
        ("certificates.k8s.io", "CertificateSigningRequest") => {
            certificates::validate_csr(obj, old, &mut errs)
        }
        _ => {}
    }
    errs
}

#[cfg(test)]
mod tests;
