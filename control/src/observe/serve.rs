//! `GET /metrics` on the API port, authenticated like every path but the
//! health checks and `/version` (kube-apiserver authorizes `/metrics` as a
//! non-resource URL). Pods by node and phase are counted from the store
//! when it is read, as kube-state-metrics counts them from its cache.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use bosun::resources;
use http::{HeaderMap, StatusCode};

use super::{metrics, record_request, FlowLabels, FlowRejectLabels, LevelLabels, PhaseLabels};
use crate::api::error::ApiError;
use crate::api::ApiState;

/// The API `router` with `/metrics` beside it and every request of both
/// recorded.
pub fn routes(router: Router, state: Arc<ApiState>) -> Router {
    Router::new()
        .route("/metrics", get(serve))
        .with_state(state)
        .merge(router)
        .layer(middleware::from_fn(record_request))
}

async fn serve(State(state): State<Arc<ApiState>>, headers: HeaderMap) -> Response {
    if !bosun::serving::bearer_token_matches(&state.token, &headers) {
        return ApiError::unauthorized().into_response();
    }
    if let Err(e) = count_pods(&state).await {
        return ApiError::internal(format!("counting pods: {e}")).into_response();
    }
    copy_flowcontrol(&state);
    (
        StatusCode::OK,
        [(http::header::CONTENT_TYPE, bosun::observe::CONTENT_TYPE)],
        metrics().render(),
    )
        .into_response()
}

/// Sets the `apiserver_flowcontrol_*` metrics from flow control's counts.
fn copy_flowcontrol(state: &ApiState) {
    let m = metrics();
    for ((level, schema), stats) in state.flowcontrol.stats() {
        let labels = FlowLabels {
            priority_level: level.clone(),
            flow_schema: schema.clone(),
        };
        let dispatched = m.flow_dispatched.get_or_create(&labels);
        dispatched.inc_by(stats.dispatched.saturating_sub(dispatched.get()));
        m.flow_inqueue.get_or_create(&labels).set(stats.waiting);
        for (reason, n) in stats.rejected {
            let labels = FlowRejectLabels {
                priority_level: level.clone(),
                flow_schema: schema.clone(),
                reason,
            };
            let rejected = m.flow_rejected.get_or_create(&labels);
            rejected.inc_by(n.saturating_sub(rejected.get()));
        }
    }
    m.flow_limit.clear();
    for (level, seats) in state.flowcontrol.seats() {
        m.flow_limit
            .get_or_create(&LevelLabels {
                priority_level: level,
            })
            .set(seats as i64);
    }
}

/// Sets `bosun_pods_by_phase` from the pods in the store.
async fn count_pods(state: &ApiState) -> anyhow::Result<()> {
    let pods = resources::by_name("pods").expect("served");
    let (items, _) = state.store.list(&pods.storage_prefix()).await?;
    let mut counts: BTreeMap<(String, String), i64> = BTreeMap::new();
    for kv in items {
        // Read once per write and shared with lists and watches.
        let attrs = &crate::api::items::derived(pods, &kv.value).attrs;
        let node = attrs.field("spec.nodeName");
        let phase = match attrs.field("status.phase") {
            p if p.is_empty() => "Pending".to_string(),
            p => p,
        };
        *counts.entry((node, phase)).or_default() += 1;
    }
    let family = &metrics().pods_by_phase;
    family.clear();
    for ((node, phase), n) in counts {
        family.get_or_create(&PhaseLabels { node, phase }).set(n);
    }
    Ok(())
}
