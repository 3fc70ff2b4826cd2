//! Unit tests: the replica calculation and the stabilization and policy
//! rules as pure functions at chosen times, and whole syncs against the
//! real API handlers on an in-memory store with the toolkit's fake clock
//! and a fake metrics source. No agent runs: the tests play the node.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::{
    HPAScalingPolicy, HPAScalingRules, HorizontalPodAutoscaler,
};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::{json, Value};

use super::behavior::History;
use super::metrics::MetricsSource;
use super::replica_calculator::{pod_requests, Calculator, PodMetric, PodMetrics};
use super::sync::sync;
use super::{Context, PodAutoscalerOptions};
use crate::toolkit::testing::{eventually, TestApi};
use crate::toolkit::Clock;

const WAIT: Duration = Duration::from_secs(10);

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
}

fn at(s: i64) -> DateTime<Utc> {
    t0() + chrono::Duration::seconds(s)
}

/// A Running pod requesting `cpu`, started at `started` and Ready since
/// `ready_since` (None: not Ready).
fn pod(name: &str, cpu: Option<&str>, phase: &str, started: i64, ready_since: Option<i64>) -> Pod {
    let mut resources = json!({});
    if let Some(cpu) = cpu {
        resources = json!({"requests": {"cpu": cpu}});
    }
    let ready = match ready_since {
        Some(t) => json!([{"type": "Ready", "status": "True",
            "lastTransitionTime": at(t).to_rfc3339()}]),
        None => json!([{"type": "Ready", "status": "False",
            "lastTransitionTime": at(started).to_rfc3339()}]),
    };
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": resources}]},
        "status": {"phase": phase, "startTime": at(started).to_rfc3339(), "conditions": ready},
    }))
    .unwrap()
}

/// A pod started long ago and Ready since.
fn ready(name: &str) -> Pod {
    pod(name, Some("100m"), "Running", -3600, Some(-3590))
}

fn usage(pairs: &[(&str, i64)], sampled: i64) -> PodMetrics {
    pairs
        .iter()
        .map(|(p, v)| {
            (
                p.to_string(),
                PodMetric {
                    value: *v,
                    timestamp: at(sampled),
                    window: Duration::from_secs(10),
                },
            )
        })
        .collect()
}

fn calc() -> Calculator {
    Calculator::default()
}

#[test]
fn desired_is_ceil_of_current_times_ratio_outside_the_tolerance() {
    let pods = [ready("a"), ready("b"), ready("c")];
    // 100m requested each; target 50%.
    let r = calc()
        .resource_replicas(
            3,
            50,
            "cpu",
            &pods,
            usage(&[("a", 52), ("b", 52), ("c", 52)], 0),
            at(0),
        )
        .unwrap();
    // 52% / 50% = 1.04: within 10%, no change.
    assert_eq!(
        (r.replicas, r.utilization, r.raw_average),
        (3, Some(52), 52)
    );
    let r = calc()
        .resource_replicas(
            3,
            50,
            "cpu",
            &pods,
            usage(&[("a", 90), ("b", 80), ("c", 70)], 0),
            at(0),
        )
        .unwrap();
    // 80% / 50% = 1.6 → ceil(4.8) = 5.
    assert_eq!((r.replicas, r.utilization), (5, Some(80)));
    let r = calc()
        .resource_replicas(
            3,
            50,
            "cpu",
            &pods,
            usage(&[("a", 10), ("b", 10), ("c", 10)], 0),
            at(0),
        )
        .unwrap();
    // 10% / 50% = 0.2 → ceil(0.6) = 1.
    assert_eq!(r.replicas, 1);
    let tight = Calculator {
        tolerance: 0.01,
        ..calc()
    };
    let r = tight
        .resource_replicas(
            3,
            50,
            "cpu",
            &pods,
            usage(&[("a", 52), ("b", 52), ("c", 52)], 0),
            at(0),
        )
        .unwrap();
    assert_eq!(r.replicas, 4, "a 1% tolerance lets 4% through");
}

#[test]
fn missing_metrics_hold_back_a_scale_down_and_count_as_nothing_on_a_scale_up() {
    let pods = [ready("a"), ready("b"), ready("c")];
    // Scale down: a and b at 10%, c without metrics counts as 100%:
    // (10+10+100)/300 = 40% of a 50% target → ceil(0.8 × 3) = 3.
    let r = calc()
        .resource_replicas(
            3,
            50,
            "cpu",
            &pods,
            usage(&[("a", 10), ("b", 10)], 0),
            at(0),
        )
        .unwrap();
    assert_eq!(r.replicas, 3);
    // Scale up: a at 100% (ratio 2), b and c missing count as 0:
    // 100/300 = 33% → 0.67, the direction flips: no change.
    let r = calc()
        .resource_replicas(3, 50, "cpu", &pods, usage(&[("a", 100)], 0), at(0))
        .unwrap();
    assert_eq!(r.replicas, 3);
    // Without the missing ones the same usage would have doubled it.
    let r = calc()
        .resource_replicas(1, 50, "cpu", &pods[..1], usage(&[("a", 100)], 0), at(0))
        .unwrap();
    assert_eq!(r.replicas, 2);
}

#[test]
fn unready_and_pending_pods_are_conservative() {
    // b started 60 s ago and is not Ready yet; c is Pending; d is being deleted.
    let mut d = ready("d");
    d.metadata.deletion_timestamp = Some(crate::toolkit::from_chrono(at(0)));
    let pods = [
        ready("a"),
        pod("b", Some("100m"), "Running", -60, None),
        pod("c", Some("100m"), "Pending", -60, None),
        d,
    ];
    // Scale up: a at 200% of a 100% target, b's burst (startup) counts as 0:
    // (200 + 0) / 200 = 100%: within tolerance, no change from 2.
    let m = usage(&[("a", 200), ("b", 300), ("c", 300), ("d", 300)], 0);
    let r = calc()
        .resource_replicas(2, 100, "cpu", &pods, m.clone(), at(0))
        .unwrap();
    assert_eq!(r.replicas, 2);
    assert_eq!(r.utilization, Some(200), "status shows the ready pods' use");
    // Once b is Ready for a full window its samples count: (200+300)/200 → 5.
    let pods_ready = [
        ready("a"),
        pod("b", Some("100m"), "Running", -60, Some(-30)),
    ];
    let r = calc()
        .resource_replicas(2, 100, "cpu", &pods_ready, m.clone(), at(0))
        .unwrap();
    assert_eq!(r.replicas, 5);
    // A sample older than readiness + window is not trusted during startup.
    let stale = usage(&[("a", 200), ("b", 300)], -25);
    let r = calc()
        .resource_replicas(2, 100, "cpu", &pods_ready, stale, at(0))
        .unwrap();
    assert_eq!(r.replicas, 2);
    // Memory has no readiness rule.
    let r = calc()
        .raw_resource_replicas(
            2,
            100,
            "memory",
            &pods[..2],
            usage(&[("a", 200), ("b", 300)], 0),
            at(0),
        )
        .unwrap();
    assert_eq!((r.replicas, r.raw_average), (5, 250));
    // Only unready pods: nothing to go on.
    let err = calc()
        .resource_replicas(1, 50, "cpu", &pods[1..2], usage(&[("b", 10)], 0), at(0))
        .unwrap_err();
    assert!(
        err.contains("did not receive metrics for targeted pods"),
        "{err}"
    );
}

#[test]
fn a_container_without_a_request_is_an_error_naming_it() {
    let pods = [ready("a"), pod("b", None, "Running", -3600, Some(-3590))];
    let err = pod_requests(&pods, "cpu").unwrap_err();
    assert_eq!(err, "missing request for cpu in container c of Pod b");
    let err = calc()
        .resource_replicas(
            2,
            50,
            "cpu",
            &pods,
            usage(&[("a", 10), ("b", 10)], 0),
            at(0),
        )
        .unwrap_err();
    assert_eq!(err, "missing request for cpu in container c of Pod b");
    assert!(calc()
        .resource_replicas(0, 50, "cpu", &[], PodMetrics::new(), at(0))
        .unwrap_err()
        .contains("no pods returned by selector"));
}

#[test]
fn without_behavior_scale_down_waits_for_the_window_and_scale_up_is_capped() {
    let window = Duration::from_secs(300);
    let mut h = History::default();
    h.record_initial(5, at(0));
    // A lower recommendation within 5 min of a higher one is held back.
    let n = h.normalize(5, 2, 1, 10, window, at(15));
    assert_eq!((n.replicas, n.able_reason), (5, "ScaleDownStabilized"));
    let n = h.normalize(5, 2, 1, 10, window, at(200));
    assert_eq!(n.replicas, 5);
    // Once the 5 there is older than the window the highest left is 2.
    let n = h.normalize(5, 2, 1, 10, window, at(301));
    assert_eq!((n.replicas, n.able_reason), (2, "ReadyForNewScale"));
    assert!(!n.limited);
    // Up: at most max(2 × current, 4) at once, then maxReplicas.
    let mut h = History::default();
    let n = h.normalize(1, 50, 1, 10, window, at(0));
    assert_eq!(
        (n.replicas, n.limit_reason, n.limited),
        (4, "ScaleUpLimit", true)
    );
    let n = h.normalize(4, 50, 1, 10, window, at(15));
    assert_eq!(n.replicas, 8);
    let n = h.normalize(8, 50, 1, 10, window, at(30));
    assert_eq!((n.replicas, n.limit_reason), (10, "TooManyReplicas"));
    // Below min.
    let mut h = History::default();
    let n = h.normalize(3, 1, 2, 10, Duration::ZERO, at(0));
    assert_eq!((n.replicas, n.limit_reason), (2, "TooFewReplicas"));
}

fn rules(
    window: Option<i32>,
    select: Option<&str>,
    policies: &[(&str, i32, i32)],
) -> HPAScalingRules {
    HPAScalingRules {
        stabilization_window_seconds: window,
        select_policy: select.map(String::from),
        policies: Some(
            policies
                .iter()
                .map(|(t, v, p)| HPAScalingPolicy {
                    type_: t.to_string(),
                    value: *v,
                    period_seconds: *p,
                })
                .collect(),
        ),
        tolerance: None,
    }
}

#[test]
fn policies_limit_the_rate_per_period_and_select_policy_picks_one() {
    let down = rules(Some(0), None, &[("Percent", 100, 15)]);
    // Up by at most 1 pod per 60 s.
    let up = rules(Some(0), None, &[("Pods", 1, 60)]);
    let mut h = History::default();
    let n = h.normalize_with_behavior(2, 10, 1, 10, &up, &down, at(0));
    assert_eq!((n.replicas, n.limit_reason), (3, "ScaleUpLimit"));
    h.store_scale_event(&up, &down, 2, 3, at(0));
    // 30 s later the period still holds the +1: no more.
    let n = h.normalize_with_behavior(3, 10, 1, 10, &up, &down, at(30));
    assert_eq!(n.replicas, 3);
    // After the period, one more.
    let n = h.normalize_with_behavior(3, 10, 1, 10, &up, &down, at(61));
    assert_eq!(n.replicas, 4);

    // Max of (4 pods, 100%) from 10 is 20; Min of them is 14.
    let max_up = rules(
        Some(0),
        Some("Max"),
        &[("Pods", 4, 15), ("Percent", 100, 15)],
    );
    let min_up = rules(
        Some(0),
        Some("Min"),
        &[("Pods", 4, 15), ("Percent", 100, 15)],
    );
    let n = History::default().normalize_with_behavior(10, 50, 1, 100, &max_up, &down, at(0));
    assert_eq!(n.replicas, 20);
    let n = History::default().normalize_with_behavior(10, 50, 1, 100, &min_up, &down, at(0));
    assert_eq!(n.replicas, 14);
    // Disabled: no scale up at all; max still applies downwards.
    let off = rules(Some(0), Some("Disabled"), &[("Pods", 4, 15)]);
    let n = History::default().normalize_with_behavior(3, 9, 1, 10, &off, &down, at(0));
    assert_eq!(n.replicas, 3);
    // Down by at most 50% per 60 s, rounded down.
    let half = rules(Some(0), None, &[("Percent", 50, 60)]);
    let mut h = History::default();
    let n = h.normalize_with_behavior(9, 1, 1, 10, &up, &half, at(0));
    assert_eq!((n.replicas, n.limit_reason), (4, "ScaleDownLimit"));
    h.store_scale_event(&up, &half, 9, 4, at(0));
    let n = h.normalize_with_behavior(4, 1, 1, 10, &up, &half, at(10));
    assert_eq!(
        n.replicas, 4,
        "the period began at 9: 50% of it is already gone"
    );
}

#[test]
fn stabilization_windows_of_a_behavior() {
    let up = rules(Some(60), None, &[("Pods", 100, 15)]);
    let down = rules(Some(30), None, &[("Percent", 100, 15)]);
    let mut h = History::default();
    h.record_initial(2, at(0));
    // Up is held to the lowest recommendation of the last 60 s (2).
    let n = h.normalize_with_behavior(2, 6, 1, 10, &up, &down, at(10));
    assert_eq!((n.replicas, n.able_reason), (2, "ScaleUpStabilized"));
    let n = h.normalize_with_behavior(2, 6, 1, 10, &up, &down, at(61));
    assert_eq!(n.replicas, 6);
    // Down is held to the highest of the last 30 s (6).
    let n = h.normalize_with_behavior(6, 1, 1, 10, &up, &down, at(70));
    assert_eq!((n.replicas, n.able_reason), (6, "ScaleDownStabilized"));
    let n = h.normalize_with_behavior(6, 1, 1, 10, &up, &down, at(101));
    assert_eq!(n.replicas, 1);
}

/// Metrics a test sets by hand.
#[derive(Default)]
struct FakeMetrics(Mutex<BTreeMap<String, i64>>);

#[async_trait::async_trait]
impl MetricsSource for FakeMetrics {
    async fn resource_metric(&self, _: &str, _: &str, _: &str) -> Result<PodMetrics, String> {
        let m = self.0.lock().unwrap();
        if m.is_empty() {
            return Err("no metrics returned from resource metrics API".into());
        }
        Ok(m.iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    PodMetric {
                        value: *v,
                        timestamp: t0() - chrono::Duration::seconds(5),
                        window: Duration::from_secs(10),
                    },
                )
            })
            .collect())
    }
}

struct Env {
    api: TestApi,
    ctx: Context,
    metrics: Arc<FakeMetrics>,
}

async fn env() -> Env {
    let api = TestApi::start().await;
    let shared = api.shared();
    let metrics = Arc::new(FakeMetrics::default());
    let ctx = Context::new(&shared, PodAutoscalerOptions::default(), metrics.clone());
    shared.informers.start();
    shared.informers.wait_ready().await;
    Env { api, ctx, metrics }
}

impl Env {
    /// The seed's hpa-demo: a Deployment of `replicas` (no controller
    /// runs, so its pods are made here) requesting `cpu`.
    async fn deployment(&self, replicas: i32, cpu: Option<&str>) {
        let mut container = json!({"name": "nginx", "image": "nginx"});
        if let Some(cpu) = cpu {
            container["resources"] = json!({"requests": {"cpu": cpu, "memory": "50Mi"}});
        }
        self.api
            .create::<Deployment>(json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "hpa-demo", "namespace": "default"},
                "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "nginx"}},
                    "template": {"metadata": {"labels": {"app": "nginx"}},
                        "spec": {"containers": [container.clone()]}}}
            }))
            .await;
        for i in 0..replicas {
            let name = format!("hpa-demo-{i}");
            self.api
                .create::<Pod>(json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": "default", "labels": {"app": "nginx"}},
                    "spec": {"containers": [container.clone()]},
                }))
                .await;
            self.api
                .api::<Pod>(Some("default"))
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"phase": "Running",
                        "startTime": at(-3600).to_rfc3339(),
                        "conditions": [{"type": "Ready", "status": "True",
                            "lastTransitionTime": at(-3590).to_rfc3339()}]}})),
                )
                .await
                .unwrap();
        }
        eventually("the pod cache", WAIT, || async {
            let n = self
                .ctx
                .pods
                .store()
                .state()
                .iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .count();
            (n == replicas as usize).then_some(())
        })
        .await;
    }

    async fn hpa(&self, spec: Value) -> HorizontalPodAutoscaler {
        let mut hpa = json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "hpa-demo", "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "hpa-demo"},
                "minReplicas": 1, "maxReplicas": 10,
                "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 5}}}]}
        });
        if let Value::Object(extra) = spec {
            for (k, v) in extra {
                hpa["spec"][k] = v;
            }
        }
        self.api.create::<HorizontalPodAutoscaler>(hpa).await
    }

    async fn get_hpa(&self) -> HorizontalPodAutoscaler {
        self.api
            .api::<HorizontalPodAutoscaler>(Some("default"))
            .get("hpa-demo")
            .await
            .unwrap()
    }

    async fn replicas(&self) -> i32 {
        self.api
            .api::<Deployment>(Some("default"))
            .get("hpa-demo")
            .await
            .unwrap()
            .spec
            .replicas
            .unwrap()
    }

    async fn sync(&self) -> HorizontalPodAutoscaler {
        let hpa = self.get_hpa().await;
        let _ = sync(&hpa, &self.ctx).await;
        self.get_hpa().await
    }

    async fn event(&self, reason: &str) -> Event {
        eventually(&format!("a {reason} event"), WAIT, || async {
            self.api
                .api::<Event>(Some("default"))
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .find(|e| e.reason.as_deref() == Some(reason))
        })
        .await
    }
}

fn condition(hpa: &HorizontalPodAutoscaler, type_: &str) -> (String, String, String) {
    let c = hpa
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
        .unwrap_or_else(|| panic!("no {type_} condition"));
    (
        c.status.clone(),
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    )
}

#[tokio::test]
async fn a_sync_scales_the_target_and_reports_why() {
    let env = env().await;
    env.deployment(1, Some("50m")).await;
    env.hpa(json!({})).await;
    // Before the first sample: no scaling, and the condition says why.
    let hpa = env.sync().await;
    let (status, reason, message) = condition(&hpa, "ScalingActive");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "FailedGetResourceMetric")
    );
    assert!(
        message.contains("no metrics returned from resource metrics API"),
        "{message}"
    );
    assert_eq!(condition(&hpa, "AbleToScale").1, "SucceededGetScale");
    assert_eq!(env.replicas().await, 1);

    // 45m of a 50m request is 90% of a 5% target: up to 4 at most at once.
    env.metrics
        .0
        .lock()
        .unwrap()
        .insert("hpa-demo-0".into(), 45);
    env.api.clock.advance(Duration::from_secs(15));
    let hpa = env.sync().await;
    assert_eq!(env.replicas().await, 4);
    let status = hpa.status.clone().unwrap();
    assert_eq!(
        (status.current_replicas, status.desired_replicas),
        (Some(1), 4)
    );
    let current = &status.current_metrics.unwrap()[0];
    let current = &current.resource.as_ref().unwrap().current;
    assert_eq!(current.average_utilization, Some(90));
    assert_eq!(current.average_value.as_ref().unwrap().0, "45m");
    assert_eq!(
        crate::toolkit::to_chrono(status.last_scale_time.as_ref().unwrap()),
        env.api.clock.now()
    );
    assert_eq!(condition(&hpa, "ScalingActive").1, "ValidMetricFound");
    assert_eq!(condition(&hpa, "AbleToScale").1, "SucceededRescale");
    assert_eq!(
        condition(&hpa, "ScalingLimited"),
        (
            "True".into(),
            "ScaleUpLimit".into(),
            "the desired replica count is increasing faster than the maximum scale rate".into()
        )
    );
    let event = env.event("SuccessfulRescale").await;
    assert_eq!(
        event.message.as_deref(),
        Some("New size: 4; reason: cpu resource utilization (percentage of request) above target")
    );
}

#[tokio::test]
async fn a_target_without_requests_reports_the_condition_and_is_not_scaled() {
    let env = env().await;
    env.deployment(2, None).await;
    env.hpa(json!({})).await;
    env.metrics
        .0
        .lock()
        .unwrap()
        .insert("hpa-demo-0".into(), 45);
    env.metrics
        .0
        .lock()
        .unwrap()
        .insert("hpa-demo-1".into(), 45);
    let hpa = env.sync().await;
    let (status, reason, message) = condition(&hpa, "ScalingActive");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "FailedGetResourceMetric")
    );
    assert!(
        message.starts_with("the HPA was unable to compute the replica count: failed to get cpu utilization: missing request for cpu in container nginx of Pod hpa-demo-"),
        "{message}"
    );
    assert_eq!(env.replicas().await, 2);
    assert_eq!(hpa.status.unwrap().current_replicas, Some(2));
    let event = env.event("FailedComputeMetricsReplicas").await;
    assert!(event
        .message
        .unwrap()
        .starts_with("invalid metrics (1 invalid out of 1)"));
}

#[tokio::test]
async fn status_is_written_over_the_version_it_was_computed_from() {
    let env = env().await;
    env.deployment(1, Some("50m")).await;
    env.hpa(json!({})).await;
    let stale = env.get_hpa().await;
    // Someone else writes the HPA in between.
    env.api
        .api::<HorizontalPodAutoscaler>(Some("default"))
        .patch(
            "hpa-demo",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
        )
        .await
        .unwrap();
    let err = sync(&stale, &env.ctx).await.unwrap_err();
    assert!(err.to_string().contains("writing the status"), "{err}");
    assert!(env
        .get_hpa()
        .await
        .status
        .is_none_or(|s| s.conditions.is_none()));
}

#[tokio::test]
async fn min_and_max_bound_the_target_whatever_the_metrics() {
    let env = env().await;
    env.deployment(3, Some("50m")).await;
    env.hpa(json!({"minReplicas": 1, "maxReplicas": 2})).await;
    env.sync().await;
    assert_eq!(env.replicas().await, 2);
    let event = env.event("SuccessfulRescale").await;
    assert_eq!(
        event.message.as_deref(),
        Some("New size: 2; reason: Current number of replicas above Spec.MaxReplicas")
    );
}
