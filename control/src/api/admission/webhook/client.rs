//! Calling one admission webhook through the API server's webhook client
//! ([`crate::api::webhook_client`], shared with CRD conversion): the
//! AdmissionReview posted to its URL or Service, bounded by
//! `timeoutSeconds`. Errors read as upstream's:
//! `failed to call webhook: Post "URL": WHY`.

use serde_json::Value;

use super::configs::Hook;
use crate::api::webhook_client::{self, Destination};
use crate::api::ApiState;

/// Posts `review` to `hook`; its decoded answer, or why the call failed.
pub async fn call(state: &ApiState, hook: &Hook, review: &Value) -> Result<Value, String> {
    let to = Destination {
        endpoint: &hook.endpoint,
        tls: &hook.tls,
        timeout: hook.timeout,
    };
    webhook_client::call(state, &to, review)
        .await
        .map_err(|why| format!("failed to call webhook: {why}"))
}
