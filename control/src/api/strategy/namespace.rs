//! Namespaces, as the apiserver's namespace strategy: a namespace starts
//! Active with the `kubernetes` finalizer in `spec.finalizers`, which only
//! the `finalize` subresource changes. Deleting one marks it Terminating
//! (new content is refused from then on); the namespace controller
//! deletes what is in it and then finalizes it, and it goes once no
//! finalizer of either kind is left. `default`, `kube-system` and
//! `kube-public` cannot be deleted.

use async_trait::async_trait;
use axum::response::Response;
use serde_json::{json, Value};

use super::Strategy;
use crate::api::error::{ApiError, ApiResult};
use crate::api::request::name_of;
use crate::api::{ApiOptions, ApiRequest, ApiState};

use bosun::well_known::NAMESPACE_FINALIZER as FINALIZER;

pub struct NamespaceStrategy;

/// `spec.finalizers` of a namespace.
pub fn spec_finalizers(obj: &Value) -> Vec<&str> {
    obj.pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[async_trait]
impl Strategy for NamespaceStrategy {
    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({"phase": "Active"}))
    }

    fn prepare_for_create(&self, _options: &ApiOptions, obj: &mut Value) {
        obj["spec"] = json!({"finalizers": [FINALIZER]});
    }

    fn prepare_for_update(&self, current: &Value, next: &mut Value) {
        // Only the finalize subresource changes spec.finalizers.
        match current.pointer("/spec/finalizers") {
            Some(f) => next["spec"]["finalizers"] = f.clone(),
            None => {
                if let Some(spec) = next.get_mut("spec").and_then(Value::as_object_mut) {
                    spec.remove("finalizers");
                }
            }
        }
    }

    fn blocks_deletion(&self, obj: &Value) -> bool {
        !spec_finalizers(obj).is_empty()
    }

    fn mark_deleting(&self, obj: &mut Value) {
        obj["status"]["phase"] = json!("Terminating");
    }

    async fn delete(&self, _state: &ApiState, req: &ApiRequest) -> Option<ApiResult<Response>> {
        let name = name_of(req);
        if matches!(name, "default" | "kube-system" | "kube-public") {
            return Some(Err(ApiError::forbidden(format!(
                "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
            ))));
        }
        // The generic delete marks it; the namespace controller empties it.
        None
    }
}
