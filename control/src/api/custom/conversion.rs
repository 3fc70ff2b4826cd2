//! CRD conversion webhooks, as the apiextensions-apiserver's
//! `webhookConverter`: a CRD with `spec.conversion.strategy: Webhook` has
//! its objects converted between the stored version and the version a
//! request speaks by a `ConversionReview` posted to
//! `spec.conversion.webhook.clientConfig` (through the API server's webhook
//! client, [`crate::api::webhook_client`], shared with admission webhooks).
//!
//! Where it acts: every read in another version than the stored one (get;
//! a list's page in one review; each watch event), and every write in a
//! version other than the storage version, which is admitted and validated
//! in its own version and converted just before it is stored. With
//! `strategy: None` (or in the storage version) nothing is called and only
//! apiVersion is rewritten, as before.
//!
//! The webhook's answer is checked as upstream checks it: the review's
//! kind and uid, `result.status`, one object per object sent, each in the
//! desired group version with the same kind, name, namespace and uid; its
//! metadata is the original's but for labels and annotations, which the
//! webhook may change (checked as written ones). Every failure is a 500
//! worded as upstream's: `conversion webhook for GROUP/VERSION, Kind=KIND
//! failed: ...`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::CustomVersion;
use crate::api::error::ApiError;
use crate::api::webhook_client::{self, Destination, Endpoint};
use crate::api::ApiState;

/// How long one conversion call may take (upstream's webhook client
/// default).
const TIMEOUT: Duration = Duration::from_secs(30);

/// A CRD's conversion webhook, read once per CRD change.
pub struct Webhook {
    endpoint: Endpoint,
    tls: Result<Arc<rustls::ClientConfig>, String>,
    /// The ConversionReview version sent: the first of
    /// `conversionReviewVersions` bosun speaks (v1 or v1beta1).
    review_version: Option<&'static str>,
    /// `spec.conversion` as the CRD has it (compared instead of the TLS
    /// client).
    raw: Value,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl PartialEq for Webhook {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}

impl Webhook {
    /// The conversion webhook of `crd`, if it converts by webhook.
    pub fn of(crd: &Value) -> Option<Arc<Webhook>> {
        let conv = crd.pointer("/spec/conversion")?;
        if conv["strategy"] != "Webhook" {
            return None;
        }
        let hook = &conv["webhook"];
        let cc = &hook["clientConfig"];
        let ca = match cc["caBundle"].as_str().filter(|s| !s.is_empty()) {
            None => Ok(None),
            // Read as Go reads a []byte: line breaks skipped.
            Some(text) => bosun::validation::bytes::decode_std(text)
                .map(Some)
                .map_err(|e| format!("caBundle: {e}")),
        };
        let tls = ca.and_then(|ca| webhook_client::tls_config(ca.as_deref()).map(Arc::new));
        let review_version = hook["conversionReviewVersions"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|v| match v.as_str() {
                Some("v1") => Some("v1"),
                Some("v1beta1") => Some("v1beta1"),
                _ => None,
            });
        Some(Arc::new(Webhook {
            endpoint: Endpoint::of_client_config(cc),
            tls,
            review_version,
            raw: conv.clone(),
        }))
    }
}

/// The webhook converting objects read as `v`, when its CRD converts by
/// webhook (a stored object in another version than `v`'s, also one
/// stored before the storage version changed, is sent to it).
pub fn for_reads(v: Option<&Arc<CustomVersion>>) -> Option<(&CustomVersion, &Webhook)> {
    let v = v?;
    Some((v.as_ref(), v.conversion.as_deref()?))
}

/// The webhook converting objects written as `v`, when `v` is not the
/// storage version and its CRD converts by webhook.
pub fn needed(v: Option<&Arc<CustomVersion>>) -> Option<(&CustomVersion, &Webhook)> {
    for_reads(v).filter(|(v, _)| !v.res.is_storage_version())
}

/// `group/version` of `v`'s storage version.
pub fn storage_api_version(v: &CustomVersion) -> String {
    format!("{}/{}", v.res.group, v.res.storage_version)
}

fn gvk(obj: &Value) -> String {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let kind = obj["kind"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    format!("{group}/{version}, Kind={kind}")
}

/// A 500 with no reason, as kube-apiserver answers an error that is not
/// a Status (kubectl prints `Error from server: MESSAGE`).
fn failure(message: String) -> ApiError {
    ApiError {
        code: 500,
        reason: "",
        message,
        details: None,
    }
}

/// `objects` in `desired` (`group/version`): those already in it as they
/// are, the others converted by `hook` in one review.
pub async fn convert(
    state: &ApiState,
    hook: &Webhook,
    mut objects: Vec<Value>,
    desired: &str,
) -> Result<Vec<Value>, ApiError> {
    let todo: Vec<usize> = (0..objects.len())
        .filter(|i| objects[*i]["apiVersion"] != desired)
        .collect();
    let Some(first) = todo.first() else {
        return Ok(objects);
    };
    let what = gvk(&objects[*first]);
    let failed = |why: String| failure(format!("conversion webhook for {what} failed: {why}"));
    let Some(review_version) = hook.review_version else {
        return Err(failure("no supported conversion review versions".into()));
    };
    let uid = uuid::Uuid::new_v4().to_string();
    let sent: Vec<&Value> = todo.iter().map(|i| &objects[*i]).collect();
    let review = json!({
        "apiVersion": format!("apiextensions.k8s.io/{review_version}"),
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": sent},
    });
    let to = Destination {
        endpoint: &hook.endpoint,
        tls: &hook.tls,
        timeout: TIMEOUT,
    };
    let answer = webhook_client::call(state, &to, &review)
        .await
        .map_err(failed)?;
    let converted = converted_objects(review_version, &uid, answer).map_err(failed)?;
    if converted.len() != todo.len() {
        return Err(failure(format!(
            "conversion webhook for {what} returned {} objects, expected {}",
            converted.len(),
            todo.len()
        )));
    }
    let (group, version) = desired.split_once('/').unwrap_or(("", desired));
    for (at, (i, mut out)) in todo.into_iter().zip(converted).enumerate() {
        let invalid = |why: String| {
            failure(format!(
                "conversion webhook for {what} returned invalid converted object at index {at}: {why}"
            ))
        };
        let original = &objects[i];
        if out["apiVersion"] != desired {
            return Err(invalid(format!(
                "invalid groupVersion (expected {group}/{version}, received {})",
                out["apiVersion"].as_str().unwrap_or_default()
            )));
        }
        same_identity(original, &out).map_err(invalid)?;
        restore_metadata(original, &mut out).map_err(|why| {
            failure(format!(
                "conversion webhook for {what} returned invalid metadata in object at index {at}: {why}"
            ))
        })?;
        objects[i] = out;
    }
    Ok(objects)
}

/// `obj` in `desired`, converted by `hook` if it is not in it.
pub async fn convert_one(
    state: &ApiState,
    hook: &Webhook,
    obj: Value,
    desired: &str,
) -> Result<Value, ApiError> {
    let mut out = convert(state, hook, vec![obj], desired).await?;
    Ok(out.pop().expect("one object in, one out"))
}

/// A stored object (or objects) as `custom`'s version serves them:
/// converted by its CRD's webhook when it has one and this is not the
/// storage version; otherwise as they are (the response rewrites
/// apiVersion).
pub async fn to_served(
    state: &ApiState,
    custom: Option<&Arc<CustomVersion>>,
    objects: Vec<Value>,
) -> Result<Vec<Value>, ApiError> {
    match for_reads(custom) {
        Some((v, hook)) => convert(state, hook, objects, &v.res.api_version()).await,
        None => Ok(objects),
    }
}

/// [`to_served`] for one object.
pub async fn one_to_served(
    state: &ApiState,
    custom: Option<&Arc<CustomVersion>>,
    obj: Value,
) -> Result<Value, ApiError> {
    match for_reads(custom) {
        Some((v, hook)) => convert_one(state, hook, obj, &v.res.api_version()).await,
        None => Ok(obj),
    }
}

/// A written object, decoded in the version `custom` serves, keeps that
/// version through admission and validation when a webhook converts it
/// (the decoder labelled it with the storage version).
pub fn keep_request_version(custom: Option<&Arc<CustomVersion>>, obj: &mut Value) {
    if let Some((v, _)) = needed(custom) {
        obj["apiVersion"] = json!(v.res.api_version());
    }
}

/// What to store for a written object in `custom`'s version: None when
/// it is stored as it is, else its conversion to the storage version.
pub async fn to_stored(
    state: &ApiState,
    custom: Option<&Arc<CustomVersion>>,
    obj: &Value,
) -> Result<Option<Value>, ApiError> {
    match needed(custom) {
        Some((v, hook)) => convert_one(state, hook, obj.clone(), &storage_api_version(v))
            .await
            .map(Some),
        None => Ok(None),
    }
}

/// The converted objects of a ConversionReview answer, or why it is not
/// one answering ours.
fn converted_objects(version: &str, uid: &str, mut answer: Value) -> Result<Vec<Value>, String> {
    if version == "v1" {
        let got = gvk(&answer);
        if got != "apiextensions.k8s.io/v1, Kind=ConversionReview" {
            return Err(format!(
                "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got {got}"
            ));
        }
    }
    let Some(response) = answer.get_mut("response").filter(|r| r.is_object()) else {
        return Err("no response provided".into());
    };
    // v1beta1 answers were never held to the uid upstream.
    if version == "v1" && response["uid"] != uid {
        return Err(format!(
            "expected response.uid={uid:?}, got {:?}",
            response["uid"].as_str().unwrap_or_default()
        ));
    }
    let result = &response["result"];
    if result["status"] != "Success" {
        return Err(match result["message"].as_str().filter(|m| !m.is_empty()) {
            Some(m) => m.to_string(),
            None => format!(
                "response.result.status was '{}', not 'Success'",
                result["status"].as_str().unwrap_or_default()
            ),
        });
    }
    match response["convertedObjects"].take() {
        Value::Array(items) => Ok(items),
        Value::Null => Ok(Vec::new()),
        _ => Err("response.convertedObjects must be a list".into()),
    }
}

fn meta<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.pointer(&format!("/metadata/{field}"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// upstream's `validateConvertedObject`: what says which object it is
/// stays.
fn same_identity(original: &Value, out: &Value) -> Result<(), String> {
    let kind = |o: &Value| o["kind"].as_str().unwrap_or_default().to_string();
    if kind(original) != kind(out) {
        return Err(format!(
            "invalid kind (expected {}, received {})",
            kind(original),
            kind(out)
        ));
    }
    for (field, word) in [("name", "name"), ("namespace", "namespace"), ("uid", "UID")] {
        let (a, b) = (meta(original, field), meta(out, field));
        if a != b {
            return Err(format!("must have the same {word}: {a} != {b}"));
        }
    }
    Ok(())
}

/// upstream's `restoreObjectMeta`: `out` gets the original's metadata,
/// with the labels and annotations the webhook answered (checked as
/// written ones when it changed them).
fn restore_metadata(original: &Value, out: &mut Value) -> Result<(), String> {
    let answered = match out.get("metadata") {
        None => return Err("missing metadata in converted object".into()),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => {
            return Err(format!(
                "invalid metadata of type {} in converted object",
                go_type(other)
            ))
        }
    };
    let mut restored: Map<String, Value> = original["metadata"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for field in ["labels", "annotations"] {
        let given = match answered.get(field) {
            None | Some(Value::Null) => {
                restored.remove(field);
                continue;
            }
            Some(Value::Object(m)) => m,
            Some(other) => {
                return Err(format!(
                    "invalid metadata.{field} of type {} in converted object",
                    go_type(other)
                ))
            }
        };
        for (k, v) in given {
            if !v.is_string() {
                return Err(format!(
                    "metadata.{field}[{k}] must be a string, but is {} in converted object",
                    go_type(v)
                ));
            }
        }
        let value = Value::Object(given.clone());
        if restored.get(field) != Some(&value) {
            let mut errs = Vec::new();
            if field == "labels" {
                bosun::validation::validate_labels(Some(&value), "metadata.labels", &mut errs);
            } else {
                // upstream names the path so.
                bosun::validation::validate_annotations(
                    Some(&value),
                    "metadata.annotation",
                    &mut errs,
                );
            }
            match errs.len() {
                0 => {}
                1 => return Err(errs[0].message()),
                _ => {
                    let all: Vec<String> = errs.iter().map(|e| e.message()).collect();
                    return Err(format!("[{}]", all.join(", ")));
                }
            }
        }
        restored.insert(field.to_string(), value);
    }
    out["metadata"] = Value::Object(restored);
    Ok(())
}

/// Go's name for the type of a decoded JSON value (`%T`).
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_checked_as_upstream_checks_them() {
        let ok = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": "u", "result": {"status": "Success"},
                "convertedObjects": [{"a": 1}]}});
        assert_eq!(
            converted_objects("v1", "u", ok.clone()).unwrap(),
            vec![json!({"a": 1})]
        );
        assert_eq!(
            converted_objects("v1", "other", ok.clone()).unwrap_err(),
            "expected response.uid=\"other\", got \"u\""
        );
        let mut wrong_kind = ok.clone();
        wrong_kind["kind"] = json!("AdmissionReview");
        assert_eq!(
            converted_objects("v1", "u", wrong_kind).unwrap_err(),
            "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got apiextensions.k8s.io/v1, Kind=AdmissionReview"
        );
        let mut refused = ok.clone();
        refused["response"]["result"] =
            json!({"status": "Failure", "message": "size is not a number"});
        assert_eq!(
            converted_objects("v1", "u", refused).unwrap_err(),
            "size is not a number"
        );
        let mut bare = ok;
        bare["response"]["result"] = json!({"status": "Failure"});
        assert_eq!(
            converted_objects("v1", "u", bare).unwrap_err(),
            "response.result.status was 'Failure', not 'Success'"
        );
        assert_eq!(
            converted_objects("v1beta1", "u", json!({})).unwrap_err(),
            "no response provided"
        );
    }

    #[test]
    fn only_labels_and_annotations_come_from_the_webhook() {
        let original = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "d", "uid": "1", "resourceVersion": "7",
                "labels": {"a": "1"}}});
        let mut out = json!({"apiVersion": "example.com/v2", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "d", "uid": "1", "resourceVersion": "99",
                "generation": 5, "annotations": {"converted": "yes"}}, "spec": {}});
        same_identity(&original, &out).unwrap();
        restore_metadata(&original, &mut out).unwrap();
        assert_eq!(
            out["metadata"],
            json!({"name": "w", "namespace": "d", "uid": "1", "resourceVersion": "7",
                "annotations": {"converted": "yes"}})
        );
        let renamed =
            json!({"kind": "Widget", "metadata": {"name": "x", "namespace": "d", "uid": "1"}});
        assert_eq!(
            same_identity(&original, &renamed).unwrap_err(),
            "must have the same name: w != x"
        );
        let mut bad_label = json!({"metadata": {"labels": {"a": "not ok!"}}});
        let err = restore_metadata(&original, &mut bad_label).unwrap_err();
        assert!(
            err.starts_with("metadata.labels: Invalid value: \"not ok!\""),
            "{err}"
        );
        let mut number = json!({"metadata": {"labels": {"a": 1}}});
        assert_eq!(
            restore_metadata(&original, &mut number).unwrap_err(),
            "metadata.labels[a] must be a string, but is int64 in converted object"
        );
        assert_eq!(
            restore_metadata(&original, &mut json!({})).unwrap_err(),
            "missing metadata in converted object"
        );
    }

    #[test]
    fn a_webhook_crd_names_its_endpoint_and_review_version() {
        let crd = json!({"spec": {"conversion": {"strategy": "Webhook", "webhook": {
            "conversionReviewVersions": ["v2", "v1beta1", "v1"],
            "clientConfig": {"service": {"namespace": "ns", "name": "conv", "path": "/convert"}}}}}});
        let hook = Webhook::of(&crd).unwrap();
        assert_eq!(hook.review_version, Some("v1beta1"));
        assert_eq!(
            hook.endpoint,
            Endpoint::Service {
                namespace: "ns".into(),
                name: "conv".into(),
                port: 443,
                path: "/convert".into()
            }
        );
        assert!(Webhook::of(&json!({"spec": {"conversion": {"strategy": "None"}}})).is_none());
        assert!(Webhook::of(&json!({"spec": {}})).is_none());
    }
}
