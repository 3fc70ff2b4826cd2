//! PriorityClasses: the system classes (`system-node-critical`,
//! `system-cluster-critical`) cannot be deleted, as upstream's
//! priorityclass REST storage refuses them.

use async_trait::async_trait;
use axum::response::Response;
use bosun::validation::scheduling::SYSTEM_PRIORITY_CLASSES;

use super::Strategy;
use crate::api::error::{ApiError, ApiResult};
use crate::api::request::name_of;
use crate::api::{ApiRequest, ApiState};

pub struct PriorityClassStrategy;

#[async_trait]
impl Strategy for PriorityClassStrategy {
    async fn delete(&self, _state: &ApiState, req: &ApiRequest) -> Option<ApiResult<Response>> {
        let name = name_of(req);
        SYSTEM_PRIORITY_CLASSES
            .iter()
            .any(|(n, ..)| *n == name)
            .then(|| {
                Err(ApiError::forbidden(format!(
                    "{} \"{name}\" is forbidden: this is a system priority class and cannot be deleted",
                    req.target.res.plural_group()
                )))
            })
    }
}
