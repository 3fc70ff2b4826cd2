//! Objects served as the store holds them: lists and watches answer from
//! the stored JSON without decoding each object into a tree, as
//! kube-apiserver's watch cache serves objects it decoded once.
//!
//! What a selector looks at (labels and the kind's selectable fields) and
//! where the object's `metadata` starts are read once per write
//! ([`Derived`], kept with the store's [`Stored`] bytes and shared by every
//! list and watcher that reads that write). The object a client gets is
//! the stored bytes with its `metadata.resourceVersion` spliced in: the
//! store keeps objects without it, the revision of their write standing for
//! it.

use std::borrow::Cow;
use std::collections::BTreeMap;

use bosun::resources::ResourceInfo;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

pub use super::attrs::Attrs;
use super::error::{ApiError, ApiResult};
use super::object::{from_storage_version, set_resource_version};
use crate::store::{DerivedRef, Stored};

/// What the API server reads from one write's bytes, once.
pub struct Derived {
    /// What selectors test.
    pub attrs: Attrs,
    /// Where `metadata` is in the bytes; None when they have no
    /// `metadata` object (such an object is served by decoding it).
    ///
    /// Nothing else is kept: the object as served (its bytes with the
    /// resourceVersion spliced in) is written straight into each list or
    /// watch line, which copies the bytes anyway. Keeping it too, as this
    /// once did for watch events, held a second copy of every watched
    /// object for as long as the store held the object.
    metadata_at: Option<MetadataSpan>,
}

/// The `metadata` object in a write's bytes.
#[derive(Clone, Copy)]
struct MetadataSpan {
    /// Offset just past its opening `{` (offsets are u32s, to keep
    /// [`Derived`] small: no stored object comes near 4 GiB).
    inside: u32,
    /// Offset just past its closing `}`.
    end: u32,
    /// Whether it has no fields.
    empty: bool,
}

/// The fields each kind can be selected by, besides metadata.name and
/// metadata.namespace (Kubernetes' field label conversion functions).
pub fn selectable_fields(kind: &str) -> &'static [&'static str] {
    match kind {
        "Pod" => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        "Event" => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        "Node" => &["spec.unschedulable"],
        "Namespace" => &["status.phase"],
        "Job" => &["status.successful"],
        "ReplicaSet" => &["status.replicas"],
        "ReplicationController" => &["status.replicas"],
        _ => &[],
    }
}

/// The fields `res` can be selected by besides metadata.name and
/// metadata.namespace: a built-in kind's, or a custom resource's
/// `selectableFields`.
pub fn selectable(res: &ResourceInfo) -> &'static [&'static str] {
    if res.is_builtin() {
        selectable_fields(res.kind)
    } else {
        res.selectable_fields
    }
}

/// A JSON string borrowed from the bytes where it has no escapes.
#[derive(Deserialize, PartialEq, Eq, PartialOrd, Ord)]
struct Text<'a>(#[serde(borrow)] Cow<'a, str>);

impl std::borrow::Borrow<str> for Text<'_> {
    fn borrow(&self) -> &str {
        &self.0
    }
}

type RawMap<'a> = BTreeMap<Text<'a>, &'a RawValue>;

/// Appends a field's value, by its dotted path in an object read one
/// level at a time, each level's values left as raw JSON until needed.
fn raw_field(top: &RawMap<'_>, path: &str, out: &mut String) {
    // An Event's `source` field selects by its component.
    let path = if path == "source" {
        "source.component"
    } else {
        path
    };
    let mut segments = path.split('.');
    let Some(mut raw) = segments.next().and_then(|first| top.get(first).copied()) else {
        return;
    };
    for segment in segments {
        let Ok(level) = serde_json::from_str::<RawMap<'_>>(raw.get()) else {
            return;
        };
        match level.get(segment) {
            Some(next) => raw = next,
            None => return,
        }
    }
    match serde_json::from_str::<Value>(raw.get()) {
        Ok(Value::String(s)) => out.push_str(&s),
        Ok(Value::Bool(b)) => out.push_str(if b { "true" } else { "false" }),
        Ok(Value::Number(n)) => out.push_str(&n.to_string()),
        _ => {}
    }
}

#[derive(Deserialize, Default)]
struct MetadataView<'a> {
    #[serde(default, borrow)]
    labels: Option<BTreeMap<Text<'a>, Text<'a>>>,
}

fn derive(res: &ResourceInfo, bytes: &[u8]) -> Derived {
    let mut derived = Derived {
        attrs: Attrs::default(),
        metadata_at: None,
    };
    let Ok(top) = serde_json::from_slice::<RawMap<'_>>(bytes) else {
        return derived;
    };
    let mut view = MetadataView::default();
    if let Some(metadata) = top.get("metadata") {
        let raw = metadata.get();
        if let Some(inside) = raw.strip_prefix('{') {
            let start = raw.as_ptr() as usize - bytes.as_ptr() as usize;
            derived.metadata_at = Some(MetadataSpan {
                inside: offset(start + 1),
                end: offset(start + raw.len()),
                empty: inside.trim_start().starts_with('}'),
            });
        }
        // Labels that are not a map of strings are none, as they were
        // when read into a map of Strings.
        view = serde_json::from_str(raw).unwrap_or_default();
    }
    let labels = view.labels.unwrap_or_default();
    derived.attrs = Attrs::new(
        selectable(res),
        labels.iter().map(|(k, v)| (&*k.0, &*v.0)),
        |field, out| raw_field(&top, field, out),
    );
    derived
}

/// A stored object's byte offset, as kept in a [`MetadataSpan`].
fn offset(at: usize) -> u32 {
    u32::try_from(at).expect("a stored object is smaller than 4 GiB")
}

/// What the API server reads from a stored object, made on first use and
/// shared with every other reader of the same write.
pub fn derived<'a>(res: &ResourceInfo, value: &'a Stored) -> DerivedRef<'a, Derived> {
    value.derived(|bytes| derive(res, bytes))
}

/// Whether objects of `res` are served as they are stored (apart from
/// their resourceVersion): the version served is the storage version.
pub fn served_as_stored(res: &ResourceInfo) -> bool {
    res.version == res.storage_version && res.shares_storage_of().is_none()
}

/// Appends the object `value` holds, as served for `res` at revision
/// `rev`, to `out`.
pub fn write_object(
    out: &mut Vec<u8>,
    res: &ResourceInfo,
    value: &Stored,
    rev: u64,
) -> ApiResult<()> {
    if served_as_stored(res) {
        let derived = derived(res, value);
        if let Some(span) = derived.metadata_at {
            out.extend_from_slice(&value[..span.inside as usize]);
            write_resource_version(out, rev, span.empty);
            out.extend_from_slice(&value[span.inside as usize..]);
            return Ok(());
        }
    }
    let obj = decode(res, value, rev)?;
    serde_json::to_writer(out, &obj).map_err(|e| ApiError::internal(e.to_string()))
}

/// `"resourceVersion":"REV"` and the comma before the fields after it.
fn write_resource_version(out: &mut Vec<u8>, rev: u64, empty: bool) {
    out.extend_from_slice(b"\"resourceVersion\":\"");
    out.extend_from_slice(rev.to_string().as_bytes());
    out.extend_from_slice(if empty { b"\"" } else { b"\"," });
}

/// The apiVersion of the metadata-only form in `meta.k8s.io` `version`.
fn partial_api_version(version: &str) -> String {
    format!("meta.k8s.io/{version}")
}

/// The `PartialObjectMetadata` of an object (kube-apiserver's
/// `asPartialObjectMetadata`): its whole `metadata` under the
/// `meta.k8s.io/<version>` kind.
pub fn partial(obj: &Value, version: &str) -> Value {
    serde_json::json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": partial_api_version(version),
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| serde_json::json!({})),
    })
}

/// Appends the `PartialObjectMetadata` of the object `value` holds at
/// revision `rev`, cut from the stored bytes: the `metadata` object is
/// copied as it is stored, the resourceVersion spliced in, and nothing
/// else of the object is read. Metadata is the same in every version of
/// a kind (conversions touch spec and status), so this holds for every
/// served version; a custom resource converted by webhook (which may
/// change labels and annotations) is cut after its conversion instead.
pub fn write_metadata(
    out: &mut Vec<u8>,
    res: &ResourceInfo,
    value: &Stored,
    rev: u64,
    version: &str,
) -> ApiResult<()> {
    out.extend_from_slice(b"{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"");
    out.extend_from_slice(partial_api_version(version).as_bytes());
    out.extend_from_slice(b"\",\"metadata\":");
    match derived(res, value).metadata_at {
        Some(span) => {
            out.push(b'{');
            write_resource_version(out, rev, span.empty);
            out.extend_from_slice(&value[span.inside as usize..span.end as usize]);
        }
        None => {
            let obj = decode(res, value, rev)?;
            serde_json::to_writer(&mut *out, &obj["metadata"])
                .map_err(|e| ApiError::internal(e.to_string()))?;
        }
    }
    out.push(b'}');
    Ok(())
}

/// The `PartialObjectMetadata` of the object `value` holds at revision
/// `rev` as a JSON tree, only its `metadata` decoded (for protobuf).
pub fn metadata_value(
    res: &ResourceInfo,
    value: &Stored,
    rev: u64,
    version: &str,
) -> ApiResult<Value> {
    let mut obj = match derived(res, value).metadata_at {
        Some(span) => {
            let metadata: Value =
                serde_json::from_slice(&value[span.inside as usize - 1..span.end as usize])
                    .map_err(|e| ApiError::internal(format!("corrupt stored object: {e}")))?;
            serde_json::json!({ "metadata": metadata })
        }
        None => decode(res, value, rev)?,
    };
    set_resource_version(&mut obj, rev);
    Ok(partial(&obj, version))
}

/// The object `value` holds as served for `res` at revision `rev`, as a
/// JSON tree (for Tables, protobuf and what edits objects).
pub fn decode(res: &ResourceInfo, value: &Stored, rev: u64) -> ApiResult<Value> {
    let mut obj: Value = serde_json::from_slice(value)
        .map_err(|e| ApiError::internal(format!("corrupt stored object: {e}")))?;
    set_resource_version(&mut obj, rev);
    Ok(from_storage_version(res, obj))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pods() -> &'static ResourceInfo {
        bosun::resources::by_name("pods").unwrap()
    }

    fn stored(v: &Value) -> std::sync::Arc<Stored> {
        Stored::new(serde_json::to_vec(v).unwrap())
    }

    #[test]
    fn served_bytes_are_the_object_with_its_resource_version() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"}},
            "spec": {"nodeName": "n1"}});
        let value = stored(&pod);
        let mut out = Vec::new();
        write_object(&mut out, pods(), &value, 42).unwrap();
        let mut want = pod.clone();
        want["metadata"]["resourceVersion"] = json!("42");
        assert_eq!(serde_json::from_slice::<Value>(&out).unwrap(), want);
        // A delete's event carries the last bytes at the delete's revision.
        let mut out = Vec::new();
        write_object(&mut out, pods(), &value, 43).unwrap();
        want["metadata"]["resourceVersion"] = json!("43");
        assert_eq!(serde_json::from_slice::<Value>(&out).unwrap(), want);

        // Empty metadata, keys with escapes, metadata not first: still whole.
        for obj in [
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": {}}),
            json!({"apiVersion": "v1", "kind": "Pod", "a\"b": {"metadata": {"x": 1}},
                "metadata": {"name": "q\"}"}}),
            json!({"apiVersion": "v1", "kind": "Pod", "spec": {"metadata": "nope"}}),
        ] {
            let mut out = Vec::new();
            write_object(&mut out, pods(), &stored(&obj), 7).unwrap();
            let mut want = obj.clone();
            want["metadata"]["resourceVersion"] = json!("7");
            assert_eq!(
                serde_json::from_slice::<Value>(&out).unwrap(),
                want,
                "{obj}"
            );
        }
    }

    #[test]
    fn metadata_is_cut_from_the_stored_bytes() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "spec": {"metadata": {"name": "not this"}, "nodeName": "n1"},
            "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "web", "uid": "u1"}]},
            "status": {"phase": "Running"}});
        for obj in [
            pod,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": {}}),
            json!({"apiVersion": "v1", "kind": "Pod", "spec": {}}),
        ] {
            let value = stored(&obj);
            let mut out = Vec::new();
            write_metadata(&mut out, pods(), &value, 42, "v1").unwrap();
            let cut: Value = serde_json::from_slice(&out).unwrap();
            let mut want = obj.clone();
            want["metadata"]["resourceVersion"] = json!("42");
            let want = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": want["metadata"]});
            assert_eq!(cut, want, "{obj}");
            assert_eq!(partial(&decode(pods(), &value, 42).unwrap(), "v1"), want);
            assert_eq!(metadata_value(pods(), &value, 42, "v1").unwrap(), want);
        }
        let mut out = Vec::new();
        write_metadata(
            &mut out,
            pods(),
            &stored(&json!({"metadata": {}})),
            1,
            "v1beta1",
        )
        .unwrap();
        assert!(out
            .starts_with(br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1beta1""#));
    }
}
