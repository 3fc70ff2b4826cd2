//! `application/vnd.kubernetes.protobuf`: Kubernetes' protobuf encoding,
//! transcoded to and from the JSON `Value`s the handlers work on.
//!
//! The envelope (as apimachinery's `runtime/serializer/protobuf`): the
//! four bytes `k8s\0`, then a `runtime.Unknown` message whose `typeMeta`
//! names the apiVersion and kind and whose `raw` is the kind's message.
//! The kind's message is read and written field by field from the
//! message shapes in [`schema`], mapping the types whose JSON form differs
//! from their protobuf form: `Time`/`MicroTime` (seconds and nanos, JSON
//! RFC 3339), `Duration` (nanoseconds, JSON `1m30s`), `Quantity` (a
//! message holding a string, JSON the string), `IntOrString` (a tagged
//! message, JSON a number or a string), `RawExtension`/`FieldsV1` (bytes
//! holding JSON, JSON the value inline), `bytes` (JSON base64).
//!
//! Presence: Go's generated marshallers write every non-pointer field,
//! zero or not, where JSON's `omitempty` leaves zeros out. So a zero
//! scalar (`""`, `0`, `false`) read from the wire is dropped, as JSON
//! would have it (messages stay: `maxUnavailable: 0` is an IntOrString
//! that was set, and JSON keeps empty structs too), except for the pointer fields in [`KEEP_ZERO`] whose
//! explicit zero means something (`replicas: 0`, `backoffLimit: 0`,
//! `automountServiceAccountToken: false`, `storageClassName: ""`).

pub mod schema;
pub(crate) mod wire;

mod decode;
mod encode;
mod envelope;
mod special_types;

use serde_json::Value;

use schema::FieldType;

pub use decode::decode_message;
pub use encode::encode_message;
pub use envelope::{
    decode_object, decode_watch_frame, encode_object, encode_watch_frame, open_envelope,
};

/// The media type, as clients name it in Content-Type and Accept.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// What every protobuf-encoded object starts with.
pub const MAGIC: &[u8; 4] = b"k8s\0";

const META: &str = "apimachinery.pkg.apis.meta.v1";
const UNKNOWN: &str = "apimachinery.pkg.runtime.Unknown";

/// Pointer fields whose zero value is kept when it is on the wire: Go
/// writes a pointer field only when it is set, so a zero there was meant.
pub const KEEP_ZERO: &[&str] = &[
    "replicas",
    "minReplicas",
    "backoffLimit",
    "backoffLimitPerIndex",
    "maxFailedIndexes",
    "parallelism",
    "completions",
    "ttlSecondsAfterFinished",
    "activeDeadlineSeconds",
    "startingDeadlineSeconds",
    "terminationGracePeriodSeconds",
    "tolerationSeconds",
    "stabilizationWindowSeconds",
    "gracePeriodSeconds",
    "revisionHistoryLimit",
    "progressDeadlineSeconds",
    "successfulJobsHistoryLimit",
    "failedJobsHistoryLimit",
    "automountServiceAccountToken",
    "enableServiceLinks",
    "shareProcessNamespace",
    "hostUsers",
    "storageClassName",
    "runAsUser",
    "runAsGroup",
    "runAsNonRoot",
    "fsGroup",
    "privileged",
    "allowPrivilegeEscalation",
    "readOnlyRootFilesystem",
    "defaultMode",
    "mode",
    "optional",
    "ready",
    "serving",
    "terminating",
    "orphanDependents",
    "leaseDurationSeconds",
    "leaseTransitions",
    "expirationSeconds",
    "port",
];

/// Fields Go embeds with `json:",inline"`: their fields sit in the parent
/// object in JSON.
const INLINE: &[(&str, &str)] = &[
    ("api.core.v1.Probe", "handler"),
    ("api.core.v1.Volume", "volumeSource"),
    ("api.core.v1.PersistentVolumeSpec", "persistentVolumeSource"),
    ("api.core.v1.EphemeralContainer", "ephemeralContainerCommon"),
    ("api.core.v1.VolumeMountStatus", "volumeStatus"),
    ("api.networking.v1.IngressRule", "ingressRuleValue"),
    ("api.admissionregistration.v1.RuleWithOperations", "rule"),
    (
        "api.admissionregistration.v1.NamedRuleWithOperations",
        "ruleWithOperations",
    ),
];

fn is_inline(message: &str, field: &str) -> bool {
    // ConfigMap and Secret references embed a LocalObjectReference.
    field == "localObjectReference" || INLINE.contains(&(message, field))
}

/// Why a body could not be read or an object could not be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Error(pub String);

type Result<T> = std::result::Result<T, Error>;

fn err<T>(msg: impl Into<String>) -> Result<T> {
    Err(Error(msg.into()))
}

/// The full name of the message of `kind` in `apiVersion`, if bosun knows it:
/// `apps/v1 Deployment` is `api.apps.v1.Deployment`; meta kinds (`Status`,
/// `DeleteOptions`, `PartialObjectMetadata`) are found in `meta/v1` from
/// any version, but for those `meta/v1beta1` has of its own.
pub fn message_name(api_version: &str, kind: &str) -> Option<String> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    // autoscaling/v2beta2's messages are v2's (the same fields and
    // numbers); its proto file is not vendored.
    let version = match (group, version) {
        ("autoscaling", "v2beta2") => "v2",
        _ => version,
    };
    let package = match group {
        "" => "core",
        g => g.split('.').next().unwrap_or(g),
    };
    // meta.k8s.io/v1beta1's PartialObjectMetadataList is its own message
    // (other field numbers than v1's); its other kinds are v1's.
    [
        format!("api.{package}.{version}.{kind}"),
        format!("apimachinery.pkg.apis.meta.{version}.{kind}"),
        format!("{META}.{kind}"),
    ]
    .into_iter()
    .find(|n| schema::message(n).is_some())
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn type_name(ty: &FieldType) -> &str {
    match ty {
        FieldType::String => "string",
        FieldType::Bytes => "bytes",
        FieldType::Bool => "bool",
        FieldType::Int32 => "int32",
        FieldType::Int64 => "int64",
        FieldType::Double => "double",
        FieldType::Message(m) => m,
    }
}

fn as_i64(v: &Value, path: &str) -> Result<i64> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
            .ok_or_else(|| Error(format!("{path}: expected an integer, got {n}"))),
        Value::String(s) => s
            .parse()
            .map_err(|_| Error(format!("{path}: expected an integer, got {s:?}"))),
        other => err(format!("{path}: expected an integer, got {other}")),
    }
}

#[cfg(test)]
mod tests;
