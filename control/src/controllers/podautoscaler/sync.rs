//! One sync of a HorizontalPodAutoscaler: `reconcileAutoscaler` of
//! kube-controller-manager's `horizontal.go`.
//!
//! Read the target's scale; unless scaling is off (0 replicas) or the
//! size is outside min/max, ask each metric for a replica count (the
//! highest wins; a metric that cannot be computed sets ScalingActive=False
//! with its reason, and if none can, nothing is scaled); stabilize and
//! limit the recommendation ([`super::behavior`]); write the new size
//! through the scale subresource with a SuccessfulRescale event naming the
//! reason; write the status (current/desired replicas, current metrics,
//! conditions AbleToScale, ScalingActive, ScalingLimited, lastScaleTime)
//! over the HPA's version it was computed from, and only if it changed.

use chrono::{DateTime, Utc};
use k8s_openapi::api::autoscaling::v2::{
    HorizontalPodAutoscaler, HorizontalPodAutoscalerCondition, HorizontalPodAutoscalerStatus,
    MetricSpec, MetricStatus, MetricValueStatus, ResourceMetricStatus,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::{json, Value};

use bosun::events::{reference_to, EventType};
use bosun::selector::LabelSelector;

use super::behavior::defaulted;
use super::replica_calculator::Recommendation;
use super::{Context, Error};
use crate::toolkit::api_errors::{code_of, message_of};
use crate::toolkit::{from_chrono, key_of};

pub const ABLE_TO_SCALE: &str = "AbleToScale";
pub const SCALING_ACTIVE: &str = "ScalingActive";
pub const SCALING_LIMITED: &str = "ScalingLimited";

/// `setCondition`: the transition time moves only when the status does.
fn set_condition(
    status: &mut HorizontalPodAutoscalerStatus,
    type_: &str,
    value: bool,
    reason: &str,
    message: impl Into<String>,
    now: DateTime<Utc>,
) {
    let value = if value { "True" } else { "False" };
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let i = match conditions.iter().position(|c| c.type_ == type_) {
        Some(i) => i,
        None => {
            conditions.push(HorizontalPodAutoscalerCondition {
                type_: type_.into(),
                ..Default::default()
            });
            conditions.len() - 1
        }
    };
    let c = &mut conditions[i];
    if c.status != value {
        c.last_transition_time = Some(from_chrono(now));
    }
    c.status = value.into();
    c.reason = Some(reason.into());
    c.message = Some(message.into());
}

/// A milli-unit figure as a canonical quantity (`45m`, `5242880`).
fn milli_quantity(milli: i64) -> k8s_openapi::apimachinery::pkg::api::resource::Quantity {
    let text = format!("{milli}m");
    k8s_openapi::apimachinery::pkg::api::resource::Quantity(
        bosun::quantity::parse_quantity(&text)
            .map(|q| q.canonical())
            .unwrap_or(text),
    )
}

/// The target's Scale: the API path of its scale subresource and the
/// Scale object.
async fn get_scale(
    ctx: &Context,
    hpa: &HorizontalPodAutoscaler,
) -> Result<(String, Value), String> {
    let spec = &hpa.spec;
    let target = &spec.scale_target_ref;
    let api_version = target.api_version.as_deref().unwrap_or_default();
    let res = bosun::resources::by_kind(api_version, &target.kind)
        .filter(|r| r.has_subresource("scale"))
        .ok_or_else(|| {
            format!(
                "no scale subresource for {}.{} (bosun scales Deployments, ReplicaSets and StatefulSets)",
                target.kind,
                if api_version.is_empty() { "<no apiVersion>" } else { api_version }
            )
        })?;
    let ns = hpa.namespace().unwrap_or_default();
    let path = format!(
        "{}/{}/scale",
        res.collection_path(Some(&ns)),
        url::form_urlencoded::byte_serialize(target.name.as_bytes()).collect::<String>()
    );
    let req = http::Request::get(&path)
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    let text = ctx
        .client
        .request_text(req)
        .await
        .map_err(|e| message_of(&e))?;
    let scale: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    Ok((path, scale))
}

async fn update_scale(
    ctx: &Context,
    path: &str,
    mut scale: Value,
    replicas: i32,
) -> Result<(), String> {
    scale["spec"]["replicas"] = json!(replicas);
    let req = http::Request::put(path)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(serde_json::to_vec(&scale).unwrap_or_default())
        .map_err(|e| e.to_string())?;
    ctx.client
        .request_text(req)
        .await
        .map(|_| ())
        .map_err(|e| message_of(&e))
}

/// The pods the target's selector picks, from the cache.
fn pods_of(ctx: &Context, namespace: &str, selector: &LabelSelector) -> Vec<Pod> {
    ctx.pods
        .in_namespace(namespace)
        .iter()
        .filter(|p| selector.matches(p.labels()))
        .map(|p| p.as_ref().clone())
        .collect()
}

/// One metric's replica count, or the condition explaining why not.
struct MetricFailure {
    reason: String,
    message: String,
    error: String,
}

async fn replicas_for_metric(
    ctx: &Context,
    hpa: &HorizontalPodAutoscaler,
    metric: &MetricSpec,
    current: i32,
    selector: (&str, &LabelSelector),
    now: DateTime<Utc>,
) -> Result<(Recommendation, String, MetricStatus), MetricFailure> {
    let ns = hpa.namespace().unwrap_or_default();
    let fail = |reason: &str, error: String| {
        ctx.recorder.record(
            &reference_to(hpa),
            EventType::Warning,
            reason,
            error.clone(),
        );
        MetricFailure {
            reason: reason.into(),
            message: format!("the HPA was unable to compute the replica count: {error}"),
            error,
        }
    };
    let Some(source) = metric
        .resource
        .as_ref()
        .filter(|_| metric.type_ == "Resource")
    else {
        let t = metric.type_.clone();
        return Err(fail(
            &format!("FailedGet{t}Metric"),
            format!("bosun computes only metrics of type Resource (cpu, memory), not {t}"),
        ));
    };
    let resource = source.name.as_str();
    let wrap = |e: MetricFailure| MetricFailure {
        error: format!(
            "failed to get {resource} resource metric value: {}",
            e.error
        ),
        ..e
    };
    let metrics = ctx
        .metrics
        .resource_metric(resource, &ns, selector.0)
        .await
        .map_err(|e| {
            wrap(fail(
                "FailedGetResourceMetric",
                format!("unable to get metrics for resource {resource}: {e}"),
            ))
        })?;
    let pods = pods_of(ctx, &ns, selector.1);
    let target = &source.target;
    if let Some(avg) = target.average_value.as_ref() {
        let avg = bosun::quantity::parse_quantity(&avg.0)
            .map(|q| q.millis() as i64)
            .unwrap_or(0);
        let rec = ctx
            .calculator
            .raw_resource_replicas(current, avg, resource, &pods, metrics, now)
            .map_err(|e| {
                wrap(fail(
                    "FailedGetResourceMetric",
                    format!("failed to get {resource} usage: {e}"),
                ))
            })?;
        let status = MetricStatus {
            type_: "Resource".into(),
            resource: Some(ResourceMetricStatus {
                name: resource.into(),
                current: MetricValueStatus {
                    average_value: Some(milli_quantity(rec.raw_average)),
                    ..Default::default()
                },
            }),
            ..Default::default()
        };
        return Ok((rec, format!("{resource} resource"), status));
    }
    let Some(utilization) = target.average_utilization else {
        return Err(wrap(fail(
            "FailedGetResourceMetric",
            "invalid resource metric source: neither an average utilization target nor an average value (usage) target was set".into(),
        )));
    };
    let rec = ctx
        .calculator
        .resource_replicas(current, utilization, resource, &pods, metrics, now)
        .map_err(|e| {
            wrap(fail(
                "FailedGetResourceMetric",
                format!("failed to get {resource} utilization: {e}"),
            ))
        })?;
    let status = MetricStatus {
        type_: "Resource".into(),
        resource: Some(ResourceMetricStatus {
            name: resource.into(),
            current: MetricValueStatus {
                average_utilization: rec.utilization,
                average_value: Some(milli_quantity(rec.raw_average)),
                ..Default::default()
            },
        }),
        ..Default::default()
    };
    Ok((
        rec,
        format!("{resource} resource utilization (percentage of request)"),
        status,
    ))
}

/// A metric whose value is not known (yet), as Kubernetes leaves it in
/// the status: kubectl prints `<unknown>`.
fn unknown_status(metric: &MetricSpec) -> MetricStatus {
    MetricStatus {
        type_: metric.type_.clone(),
        resource: metric.resource.as_ref().map(|r| ResourceMetricStatus {
            name: r.name.clone(),
            current: Default::default(),
        }),
        ..Default::default()
    }
}

/// Writes the status over the HPA version it was computed from, if it
/// changed.
async fn write_status(
    ctx: &Context,
    hpa: &HorizontalPodAutoscaler,
    status: &HorizontalPodAutoscalerStatus,
) -> Result<(), Error> {
    if hpa.status.as_ref() == Some(status) {
        return Ok(());
    }
    let patch = json!({
        "metadata": {"resourceVersion": hpa.metadata.resource_version},
        "status": {
            "currentReplicas": status.current_replicas,
            "desiredReplicas": status.desired_replicas,
            "currentMetrics": status.current_metrics,
            "conditions": status.conditions,
            "lastScaleTime": status.last_scale_time,
        },
    });
    let api: Api<HorizontalPodAutoscaler> =
        Api::namespaced(ctx.client.clone(), &hpa.namespace().unwrap_or_default());
    match api
        .patch_status(
            &hpa.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if code_of(&e) == Some(404) => Ok(()),
        Err(e) => Err(Error::Api(format!(
            "writing the status of {}: {}",
            key_of(hpa),
            message_of(&e)
        ))),
    }
}

/// One sync of `hpa` at the context's clock.
pub async fn sync(hpa: &HorizontalPodAutoscaler, ctx: &Context) -> Result<(), Error> {
    let now = ctx.clock.now();
    let key = key_of(hpa);
    let spec = hpa.spec.clone();
    let mut status = hpa.status.clone().unwrap_or_default();
    let object = reference_to(hpa);
    let reference = format!(
        "{}/{}/{}",
        spec.scale_target_ref.kind,
        hpa.namespace().unwrap_or_default(),
        spec.scale_target_ref.name
    );

    let (scale_path, scale) = match get_scale(ctx, hpa).await {
        Ok(s) => s,
        Err(e) => {
            ctx.recorder
                .record(&object, EventType::Warning, "FailedGetScale", e.clone());
            set_condition(
                &mut status,
                ABLE_TO_SCALE,
                false,
                "FailedGetScale",
                format!("the HPA controller was unable to get the target's current scale: {e}"),
                now,
            );
            write_status(ctx, hpa, &status).await?;
            return Err(Error::Api(format!(
                "failed to query scale subresource for {reference}: {e}"
            )));
        }
    };
    set_condition(
        &mut status,
        ABLE_TO_SCALE,
        true,
        "SucceededGetScale",
        "the HPA controller was able to get the target's current scale",
        now,
    );
    let current = scale["spec"]["replicas"].as_i64().unwrap_or(0) as i32;
    ctx.history(&key, |h| h.record_initial(current, now));
    let min = spec.min_replicas.unwrap_or(1);
    let max = spec.max_replicas;
    let metrics = spec.metrics.clone().unwrap_or_default();

    let mut metric_statuses: Option<Vec<MetricStatus>> = None;
    let mut rescale_reason = String::new();
    let desired;
    let rescale;
    if current == 0 && min != 0 {
        desired = 0;
        rescale = false;
        set_condition(
            &mut status,
            SCALING_ACTIVE,
            false,
            "ScalingDisabled",
            "scaling is disabled since the replica count of the target is zero",
            now,
        );
    } else if current > max {
        rescale_reason = "Current number of replicas above Spec.MaxReplicas".into();
        desired = max;
        rescale = true;
    } else if current < min {
        rescale_reason = "Current number of replicas below Spec.MinReplicas".into();
        desired = min;
        rescale = true;
    } else {
        // computeReplicasForMetrics.
        let selector_text = scale["status"]["selector"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let selector = if selector_text.is_empty() {
            Err("the HPA target's scale is missing a selector".to_string())
        } else {
            LabelSelector::parse(&selector_text).map_err(|e| {
                format!(
                    "couldn't convert selector into a corresponding internal selector object: {}",
                    e.0
                )
            })
        };
        let selector = match selector {
            Ok(s) => s,
            Err(message) => {
                ctx.recorder.record(
                    &object,
                    EventType::Warning,
                    "InvalidSelector",
                    message.clone(),
                );
                set_condition(
                    &mut status,
                    SCALING_ACTIVE,
                    false,
                    "InvalidSelector",
                    message.clone(),
                    now,
                );
                status.current_replicas = Some(current);
                write_status(ctx, hpa, &status).await?;
                return Err(Error::Api(format!("{reference}: {message}")));
            }
        };
        let mut statuses = Vec::with_capacity(metrics.len());
        let mut best: Option<(i32, String)> = None;
        let mut failures: Vec<MetricFailure> = Vec::new();
        for m in &metrics {
            match replicas_for_metric(ctx, hpa, m, current, (&selector_text, &selector), now).await
            {
                Ok((rec, name, st)) => {
                    statuses.push(st);
                    if best.as_ref().is_none_or(|(r, _)| rec.replicas > *r) {
                        best = Some((rec.replicas, name));
                    }
                }
                Err(f) => {
                    statuses.push(unknown_status(m));
                    failures.push(f);
                }
            }
        }
        metric_statuses = Some(statuses);
        let proposal = best.clone().map(|b| b.0).unwrap_or(0);
        if !failures.is_empty() && (failures.len() >= metrics.len() || proposal < current) {
            let first = &failures[0];
            set_condition(
                &mut status,
                SCALING_ACTIVE,
                false,
                &first.reason,
                first.message.clone(),
                now,
            );
            status.current_replicas = Some(current);
            status.current_metrics = metric_statuses;
            write_status(ctx, hpa, &status).await?;
            let error = format!(
                "invalid metrics ({} invalid out of {}), first error is: {}",
                failures.len(),
                metrics.len(),
                first.error
            );
            ctx.recorder.record(
                &object,
                EventType::Warning,
                "FailedComputeMetricsReplicas",
                error.clone(),
            );
            return Err(Error::Api(format!(
                "failed to compute desired number of replicas based on listed metrics for {reference}: {error}"
            )));
        }
        let (proposal, metric_name) = best.unwrap_or((0, String::new()));
        tracing::debug!(hpa = %key, current, proposal, metric = %metric_name, "metrics' recommendation");
        set_condition(
            &mut status,
            SCALING_ACTIVE,
            true,
            "ValidMetricFound",
            format!(
                "the HPA was able to successfully calculate a replica count from {metric_name}"
            ),
            now,
        );
        if proposal > current {
            rescale_reason = format!("{metric_name} above target");
        }
        if proposal < current {
            rescale_reason = "All metrics below target".into();
        }
        let normalized = match spec.behavior.as_ref() {
            None => ctx.history(&key, |h| {
                h.normalize(
                    current,
                    proposal,
                    min,
                    max,
                    ctx.options.downscale_stabilization,
                    now,
                )
            }),
            Some(b) => {
                let (up, down) = defaulted(b, ctx.options.downscale_stabilization);
                ctx.history(&key, |h| {
                    h.normalize_with_behavior(current, proposal, min, max, &up, &down, now)
                })
            }
        };
        set_condition(
            &mut status,
            ABLE_TO_SCALE,
            true,
            normalized.able_reason,
            normalized.able_message,
            now,
        );
        set_condition(
            &mut status,
            SCALING_LIMITED,
            normalized.limited,
            normalized.limit_reason,
            normalized.limit_message,
            now,
        );
        desired = normalized.replicas;
        rescale = desired != current;
    }

    let mut final_desired = current;
    if rescale {
        if let Err(e) = update_scale(ctx, &scale_path, scale.clone(), desired).await {
            ctx.recorder.record(
                &object,
                EventType::Warning,
                "FailedRescale",
                format!("New size: {desired}; reason: {rescale_reason}; error: {e}"),
            );
            set_condition(
                &mut status,
                ABLE_TO_SCALE,
                false,
                "FailedUpdateScale",
                format!("the HPA controller was unable to update the target scale: {e}"),
                now,
            );
            status.current_replicas = Some(current);
            status.current_metrics = metric_statuses;
            write_status(ctx, hpa, &status).await?;
            return Err(Error::Api(format!("failed to rescale {reference}: {e}")));
        }
        set_condition(
            &mut status,
            ABLE_TO_SCALE,
            true,
            "SucceededRescale",
            format!("the HPA controller was able to update the target scale to {desired}"),
            now,
        );
        ctx.recorder.record(
            &object,
            EventType::Normal,
            "SuccessfulRescale",
            format!("New size: {desired}; reason: {rescale_reason}"),
        );
        if let Some(b) = spec.behavior.as_ref() {
            let (up, down) = defaulted(b, ctx.options.downscale_stabilization);
            ctx.history(&key, |h| {
                h.store_scale_event(&up, &down, current, desired, now)
            });
        }
        final_desired = desired;
        status.last_scale_time = Some(from_chrono(now));
        tracing::info!(hpa = %key, from = current, to = desired, reason = %rescale_reason, metrics = ?metric_statuses, "rescaled");
    }
    status.current_replicas = Some(current);
    status.desired_replicas = final_desired;
    status.current_metrics = metric_statuses;
    write_status(ctx, hpa, &status).await
}
