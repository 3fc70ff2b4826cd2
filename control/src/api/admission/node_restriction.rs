//! NodeRestriction at the API: the rules live in
//! [`crate::auth::node::admission`] (pure, on the object as it would be
//! stored); this reads what they need from the store: the writing node's
//! own addresses, for the kinds whose rules name them.

use serde_json::Value;

use super::super::error::{ApiError, ApiResult};
use super::super::{ApiRequest, ApiState};
use crate::auth::node::admission::{admit, needs_addresses};
use crate::auth::Identity;

/// Refuses (403) a node's write from `old` (None: a create) to `new`
/// that is not its to make; anyone else's passes.
pub async fn admit_write(
    state: &ApiState,
    req: &ApiRequest,
    name: &str,
    old: Option<&Value>,
    new: &Value,
) -> ApiResult<()> {
    let res = req.target.res;
    let addresses = match &req.who {
        Identity::Node(node) if needs_addresses(&req.who, res.kind) => {
            node_addresses(state, node).await?
        }
        _ => Vec::new(),
    };
    admit(&req.who, res.kind, &addresses, old, new)
        .map_err(|why| ApiError::forbidden_object(res, name, &why))
}

/// The addresses in `node`'s Node status (none if it has no Node).
async fn node_addresses(state: &ApiState, node: &str) -> ApiResult<Vec<String>> {
    let nodes = bosun::resources::by_kind("v1", "Node").expect("served");
    let obj = match state.store.get(&nodes.storage_key(None, node)).await {
        Ok(Some(kv)) => super::super::object::from_store(&kv)?,
        Ok(None) => return Ok(Vec::new()),
        Err(e) => return Err(ApiError::from_store(e, nodes, node)),
    };
    Ok(obj["status"]["addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["address"].as_str().map(String::from))
        .collect())
}
