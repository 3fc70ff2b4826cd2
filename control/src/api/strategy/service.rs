//! Services: a cluster IP (and node ports for NodePort services) allocated
//! from what other services do not hold yet on create, and kept on an
//! update that leaves them out.

use async_trait::async_trait;
use bosun::validation::FieldError;
use serde_json::{json, Value};

use super::Strategy;
use crate::api::allocate::claims;
use crate::api::error::{ApiError, ApiResult};
use crate::api::request::list_all;
use crate::api::{allocate, ApiState};

pub struct ServiceStrategy;

/// How often a create chooses again after losing its choice to another
/// (node ports are picked lowest first, so concurrent creates of NodePort
/// Services lose to each other in turn).
const CLAIM_TRIES: usize = 100;

#[async_trait]
impl Strategy for ServiceStrategy {
    async fn allocate(&self, state: &ApiState, obj: &mut Value) -> ApiResult<Vec<FieldError>> {
        let res = bosun::resources::by_name("services").expect("served");
        let services = list_all(state, res).await?;
        let (mut ips, mut ports) = allocate::held_by(&services);
        // Chosen from what the listed Services hold, then claimed in the
        // store; what another API server (or a concurrent create) claimed
        // in between is taken as held and the choice made again.
        let requested = obj.clone();
        for _ in 0..CLAIM_TRIES {
            *obj = requested.clone();
            if let Err(e) = allocate::service(&state.options.service_range, obj, &ips, &ports) {
                return Ok(vec![e]);
            }
            let taken = claims::claim_all(state.store.as_ref(), obj)
                .await
                .map_err(|e| ApiError::from_store(e, res, ""))?;
            if taken.is_empty() {
                return Ok(Vec::new());
            }
            for key in taken {
                if let Some(ip) = key.strip_prefix(claims::IP_PREFIX) {
                    ips.insert(ip.to_string());
                } else if let Some(port) = key.strip_prefix(claims::PORT_PREFIX) {
                    ports.extend(port.parse::<i64>().ok());
                }
            }
        }
        Err(ApiError::from_store(
            crate::store::StoreError::Backend(
                "could not claim a cluster IP or node port: too many concurrent allocations".into(),
            ),
            res,
            "",
        ))
    }

    fn prepare_for_update(&self, current: &Value, next: &mut Value) {
        for field in ["clusterIP", "clusterIPs"] {
            let given = next.pointer(&format!("/spec/{field}"));
            if given.is_none_or(|v| v == "" || v == &json!([])) {
                if let (Some(old), Some(spec)) = (
                    current.pointer(&format!("/spec/{field}")),
                    next.get_mut("spec").and_then(Value::as_object_mut),
                ) {
                    spec.insert(field.into(), old.clone());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_without_a_cluster_ip_keeps_the_allocated_one() {
        let current = json!({"spec": {"clusterIP": "10.96.0.7", "clusterIPs": ["10.96.0.7"]}});
        let mut next = json!({"spec": {"ports": [{"port": 80}]}});
        ServiceStrategy.prepare_for_update(&current, &mut next);
        assert_eq!(next["spec"]["clusterIP"], "10.96.0.7");
        assert_eq!(next["spec"]["clusterIPs"], json!(["10.96.0.7"]));
    }
}
