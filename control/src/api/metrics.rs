//! `metrics.k8s.io/v1beta1`: NodeMetrics and PodMetrics, built on each
//! request from the latest readings of the agents involved (their
//! `/stats/summary`, reached as `pods/log` is: the address and pinned
//! certificate published on the Node), as metrics-server serves them from
//! the kubelets'. Read-only: `get` and `list` (label selectors; pods by
//! namespace or across all). A pod or node with no reading yet (new, or
//! its agent unreachable or not collecting) is left out of lists and is
//! NotFound to a get, as with metrics-server.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bosun::metrics::{node_metrics, pod_metrics, Summary};
use bosun::resources::{self, ResourceInfo};
use http::{HeaderMap, Method, StatusCode};
use serde_json::{json, Value};

use super::error::{ApiError, ApiResult};
use super::list::list_matching;
use super::proxy::{agent_endpoint, agent_get, connect};
use super::{object_response, ApiRequest, ApiState, Target};

/// How long a node's agent has to answer.
const AGENT_TIMEOUT: Duration = Duration::from_secs(5);

pub fn is_metrics(target: &Target) -> bool {
    target.res.group == "metrics.k8s.io"
}

/// One agent's latest summary.
async fn summary_of(state: &ApiState, node: &Value) -> Result<Summary, String> {
    let name = node["metadata"]["name"].as_str().unwrap_or_default();
    let endpoint = agent_endpoint(name, node).map_err(|e| e.message)?;
    let fetch = async {
        let mut sender = connect(state, &endpoint).await.map_err(|e| e.message)?;
        let req = agent_get(&endpoint, "/stats/summary")
            .body(Body::empty())
            .map_err(|e| e.to_string())?;
        let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status();
        let body = axum::body::to_bytes(Body::new(resp.into_body()), 64 << 20)
            .await
            .map_err(|e| e.to_string())?;
        if !status.is_success() {
            return Err(format!(
                "{status}: {}",
                String::from_utf8_lossy(&body)
                    .chars()
                    .take(200)
                    .collect::<String>()
            ));
        }
        serde_json::from_slice::<Summary>(&body).map_err(|e| e.to_string())
    };
    tokio::time::timeout(AGENT_TIMEOUT, fetch)
        .await
        .map_err(|_| "timed out".to_string())?
}

/// The summaries of the named nodes' agents (those that answered).
async fn summaries(state: &ApiState, nodes: &[Value]) -> HashMap<String, Summary> {
    let fetches = nodes.iter().map(|node| async move {
        let name = node["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match summary_of(state, node).await {
            Ok(s) => Some((name, s)),
            Err(e) => {
                tracing::debug!(node = %name, error = %e, "metrics: no summary from the agent");
                None
            }
        }
    });
    futures::future::join_all(fetches)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// A request for the core resource behind a metrics resource: same
/// namespace, name and selectors.
fn core_request(req: &ApiRequest, plural: &str) -> ApiRequest {
    let res = resources::by_path("", "v1", plural).expect("core resource");
    ApiRequest {
        who: req.who.clone(),
        method: Method::GET,
        target: Target {
            res,
            namespace: req.target.namespace.clone(),
            name: None,
            subresource: None,
            custom: None,
        },
        query: req
            .query
            .iter()
            .filter(|(k, _)| *k == "labelSelector")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        headers: HeaderMap::new(),
        output: Default::default(),
        body: Default::default(),
        body_limit: req.body_limit,
    }
}

fn name_of(obj: &Value) -> &str {
    obj["metadata"]["name"].as_str().unwrap_or_default()
}

/// Serves a `metrics.k8s.io` request.
pub async fn serve(state: &ApiState, req: ApiRequest) -> ApiResult<Response> {
    let res = req.target.res;
    if req.method != Method::GET || req.target.subresource.is_some() || req.flag("watch") {
        return Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({} {})",
            if req.flag("watch") {
                "WATCH"
            } else {
                req.method.as_str()
            },
            res.plural_group()
        )));
    }
    let items = match res.kind {
        "NodeMetrics" => node_items(state, &req).await?,
        _ => pod_items(state, &req).await?,
    };
    match &req.target.name {
        Some(name) => {
            let item = items
                .into_iter()
                .next()
                .ok_or_else(|| ApiError::not_found(res, name))?;
            Ok(object_response(&req.headers, StatusCode::OK, &item))
        }
        None => Ok(object_response(
            &req.headers,
            StatusCode::OK,
            &json!({
                "kind": format!("{}List", res.kind),
                "apiVersion": res.api_version(),
                "metadata": {},
                "items": items,
            }),
        )),
    }
}

async fn node_items(state: &ApiState, req: &ApiRequest) -> ApiResult<Vec<Value>> {
    let (mut nodes, _) = list_matching(state, &core_request(req, "nodes")).await?;
    if let Some(name) = &req.target.name {
        nodes.retain(|n| name_of(n) == name);
    }
    let summaries = summaries(state, &nodes).await;
    Ok(nodes
        .iter()
        .filter_map(|n| {
            let stats = summaries.get(name_of(n))?.node.as_ref()?;
            Some(node_metrics(stats, &n["metadata"]["labels"]))
        })
        .collect())
}

async fn pod_items(state: &ApiState, req: &ApiRequest) -> ApiResult<Vec<Value>> {
    let (mut pods, _) = list_matching(state, &core_request(req, "pods")).await?;
    if let Some(name) = &req.target.name {
        pods.retain(|p| name_of(p) == name);
    }
    // The nodes the pods run on, each asked once.
    let node_names: BTreeMap<&str, ()> = pods
        .iter()
        .filter_map(|p| p["spec"]["nodeName"].as_str())
        .filter(|n| !n.is_empty())
        .map(|n| (n, ()))
        .collect();
    let nodes_res: &ResourceInfo = resources::by_path("", "v1", "nodes").expect("nodes");
    let mut nodes = Vec::new();
    for name in node_names.keys() {
        if let Some(kv) = state
            .store
            .get(&nodes_res.storage_key(None, name))
            .await
            .map_err(|e| ApiError::from_store(e, nodes_res, name))?
        {
            nodes.push(super::object::from_store(&kv)?);
        }
    }
    let summaries = summaries(state, &nodes).await;
    let mut items = Vec::new();
    for pod in &pods {
        let Some(summary) = pod["spec"]["nodeName"]
            .as_str()
            .and_then(|n| summaries.get(n))
        else {
            continue;
        };
        let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
        let ns = pod["metadata"]["namespace"].as_str().unwrap_or_default();
        if let Some(stats) = summary
            .pods
            .iter()
            .find(|s| s.pod_ref.uid == uid && s.pod_ref.namespace == ns)
        {
            items.push(pod_metrics(stats, &pod["metadata"]["labels"]));
        }
    }
    Ok(items)
}
