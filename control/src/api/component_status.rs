//! `componentstatuses` (`cs`): the deprecated, read-only, cluster-scoped
//! health of the control plane's parts, as kube-apiserver still serves it:
//! `scheduler`, `controller-manager` and `etcd-0`, each with one
//! condition of type Healthy. bosun runs the scheduler and the
//! controllers in this process, so they are Healthy while it answers; the
//! store (etcd-0) is Healthy when a read of it succeeds.

use axum::response::Response;
use bosun::resources::ResourceInfo;
use http::{Method, StatusCode};
use serde_json::{json, Value};

use super::error::{ApiError, ApiResult};
use super::table::{self, IncludeObject};
use super::{object_response, ApiRequest, ApiState, Target};

pub fn is_component_status(target: &Target) -> bool {
    target.res.group.is_empty() && target.res.plural == "componentstatuses"
}

fn component(name: &str, healthy: Result<(), String>) -> Value {
    let condition = match healthy {
        Ok(()) => json!({"type": "Healthy", "status": "True", "message": "ok"}),
        Err(e) => json!({"type": "Healthy", "status": "False", "error": e}),
    };
    json!({"kind": "ComponentStatus", "apiVersion": "v1",
        "metadata": {"name": name}, "conditions": [condition]})
}

async fn components(state: &ApiState) -> Vec<Value> {
    let namespaces = bosun::resources::by_name("namespaces").expect("namespaces are served");
    let store = match state
        .store
        .get(&namespaces.storage_key(None, "default"))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) => Err(e.to_string()),
    };
    vec![
        component("scheduler", Ok(())),
        component("controller-manager", Ok(())),
        component("etcd-0", store),
    ]
}

pub async fn serve(state: &ApiState, req: ApiRequest) -> ApiResult<Response> {
    let res: &ResourceInfo = req.target.res;
    if req.method != Method::GET || req.target.subresource.is_some() || req.flag("watch") {
        return Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({} {})",
            if req.flag("watch") {
                "WATCH"
            } else {
                req.method.as_str()
            },
            res.plural
        )));
    }
    let mut items = components(state).await;
    if let Some(name) = &req.target.name {
        items.retain(|c| c["metadata"]["name"] == name.as_str());
        if items.is_empty() {
            return Err(ApiError::not_found(res, name));
        }
    }
    let body = if table::wants_table(&req.headers) {
        let include = IncludeObject::parse(req.param("includeObject"));
        table::table(res, None, &items, "", include)
    } else if req.target.name.is_some() {
        items.remove(0)
    } else {
        json!({"kind": "ComponentStatusList", "apiVersion": "v1", "metadata": {}, "items": items})
    };
    Ok(object_response(&req.headers, StatusCode::OK, &body))
}
