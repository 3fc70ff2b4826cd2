//! How many replicas a metric asks for: kube-controller-manager's
//! `replica_calculator.go` for Resource metrics. Pure functions over the
//! target's pods and their metrics, so every rule is unit-tested.
//!
//! - desired = ceil(ready pods × current / target), unless the ratio is
//!   within the tolerance (10%) of 1;
//! - pods being deleted, failed, finished or pending are ignored; for
//!   CPU, pods not yet ready (or whose sample predates their readiness)
//!   count as using nothing on a scale-up and are ignored otherwise;
//! - pods without metrics count as using 100% of their request (or the
//!   target, if higher) on a scale-down and nothing on a scale-up;
//! - if those conservative assumptions flip the direction, or bring the
//!   ratio within tolerance, the replica count stays.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;

use crate::toolkit::to_chrono;

/// One pod's usage of one resource, in milli-units (millicores for
/// CPU, millibytes for memory, as Kubernetes' `MilliValue`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PodMetric {
    pub value: i64,
    pub timestamp: DateTime<Utc>,
    pub window: Duration,
}

pub type PodMetrics = BTreeMap<String, PodMetric>;

/// The calculator's knobs (kube-controller-manager's flags).
#[derive(Debug, Clone, Copy)]
pub struct Calculator {
    /// `--horizontal-pod-autoscaler-tolerance`.
    pub tolerance: f64,
    /// `--horizontal-pod-autoscaler-cpu-initialization-period`.
    pub cpu_initialization_period: Duration,
    /// `--horizontal-pod-autoscaler-initial-readiness-delay`.
    pub initial_readiness_delay: Duration,
}

impl Default for Calculator {
    fn default() -> Self {
        Calculator {
            tolerance: 0.1,
            cpu_initialization_period: Duration::from_secs(300),
            initial_readiness_delay: Duration::from_secs(30),
        }
    }
}

/// A Resource metric's recommendation: replicas, and the current
/// utilization (percent of request, utilization targets only) and
/// average value (milli-units) for the HPA's status.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recommendation {
    pub replicas: i32,
    pub utilization: Option<i32>,
    pub raw_average: i64,
    pub timestamp: Option<DateTime<Utc>>,
}

struct Groups {
    ready: i32,
    unready: BTreeSet<String>,
    missing: BTreeSet<String>,
    ignored: BTreeSet<String>,
}

impl Groups {
    /// The second pass's conservative assumptions: a pod without metrics
    /// uses `on_scale_down(pod)` when the first pass scales down and
    /// nothing when it scales up (and is left out at a ratio of exactly
    /// 1); on a scale-up, not-ready pods use nothing.
    fn fill_in(
        &self,
        metrics: &mut PodMetrics,
        ratio: f64,
        now: DateTime<Utc>,
        on_scale_down: impl Fn(&str) -> i64,
    ) {
        let assumed = |value| PodMetric {
            value,
            timestamp: now,
            window: Duration::ZERO,
        };
        if ratio != 1.0 {
            for p in &self.missing {
                let value = if ratio < 1.0 { on_scale_down(p) } else { 0 };
                metrics.insert(p.clone(), assumed(value));
            }
        }
        if !self.unready.is_empty() && ratio > 1.0 {
            for p in &self.unready {
                metrics.insert(p.clone(), assumed(0));
            }
        }
    }
}

fn name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

fn std_to_chrono(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

/// `groupPods`: which pods count, which lack metrics, which are not ready.
fn group_pods(
    calc: &Calculator,
    pods: &[Pod],
    metrics: &PodMetrics,
    resource: &str,
    now: DateTime<Utc>,
) -> Groups {
    let mut g = Groups {
        ready: 0,
        unready: BTreeSet::new(),
        missing: BTreeSet::new(),
        ignored: BTreeSet::new(),
    };
    for pod in pods {
        let n = name(pod);
        let status = pod.status.clone().unwrap_or_default();
        let phase = status.phase.as_deref().unwrap_or("Pending");
        if pod.metadata.deletion_timestamp.is_some()
            || phase == "Failed"
            || phase == "Succeeded"
            || phase == "Pending"
        {
            g.ignored.insert(n);
            continue;
        }
        let Some(metric) = metrics.get(&n) else {
            g.missing.insert(n);
            continue;
        };
        if resource == "cpu" {
            let ready = status
                .conditions
                .as_ref()
                .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
            let start = status.start_time.as_ref().map(to_chrono);
            let unready = match (ready, start) {
                (Some(cond), Some(start)) => {
                    let transition = cond
                        .last_transition_time
                        .as_ref()
                        .map(to_chrono)
                        .unwrap_or(start);
                    if start + std_to_chrono(calc.cpu_initialization_period) > now {
                        // Still starting: a sample taken before one full window
                        // of readiness is not trusted.
                        cond.status == "False"
                            || metric.timestamp < transition + std_to_chrono(metric.window)
                    } else {
                        // Unready and never ready since it started.
                        cond.status == "False"
                            && start + std_to_chrono(calc.initial_readiness_delay) > transition
                    }
                }
                _ => true,
            };
            if unready {
                g.unready.insert(n);
                continue;
            }
        }
        g.ready += 1;
    }
    g
}

/// `calculatePodRequests`: each pod's request of `resource` (summed over
/// its containers), in milli-units; a container without one is an error.
pub fn pod_requests(pods: &[Pod], resource: &str) -> Result<BTreeMap<String, i64>, String> {
    let mut out = BTreeMap::new();
    for pod in pods {
        let mut total = 0i64;
        for c in pod
            .spec
            .as_ref()
            .map(|s| s.containers.as_slice())
            .unwrap_or_default()
        {
            let request = c
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get(resource))
                .and_then(|q| bosun::quantity::parse_quantity(&q.0).ok());
            match request {
                Some(q) => total += q.millis() as i64,
                None => {
                    return Err(format!(
                        "missing request for {resource} in container {} of Pod {}",
                        c.name,
                        name(pod)
                    ))
                }
            }
        }
        out.insert(name(pod), total);
    }
    Ok(out)
}

/// `GetResourceUtilizationRatio`: usage over target, the utilization in
/// percent of request, and the average raw usage.
fn utilization_ratio(
    metrics: &PodMetrics,
    requests: &BTreeMap<String, i64>,
    target_utilization: i32,
) -> Result<(f64, i32, i64), String> {
    let (mut total, mut requested, mut n) = (0i64, 0i64, 0i64);
    for (pod, m) in metrics {
        let Some(r) = requests.get(pod) else { continue };
        total += m.value;
        requested += r;
        n += 1;
    }
    if requested == 0 {
        return Err("no metrics returned matched known pods".into());
    }
    let utilization = (total * 100 / requested) as i32;
    Ok((
        f64::from(utilization) / f64::from(target_utilization),
        utilization,
        total / n,
    ))
}

fn latest(metrics: &PodMetrics) -> Option<DateTime<Utc>> {
    metrics.values().map(|m| m.timestamp).max()
}

impl Calculator {
    /// What both targets start with: the pods grouped, and the metrics
    /// of the ones that count (neither ignored nor unready); an error when
    /// there are no pods or none of them has metrics.
    fn counted(
        &self,
        pods: &[Pod],
        metrics: &mut PodMetrics,
        resource: &str,
        now: DateTime<Utc>,
    ) -> Result<Groups, String> {
        if pods.is_empty() {
            return Err("no pods returned by selector while calculating replica count".into());
        }
        let g = group_pods(self, pods, metrics, resource, now);
        metrics.retain(|p, _| !g.ignored.contains(p) && !g.unready.contains(p));
        if metrics.is_empty() {
            return Err("did not receive metrics for targeted pods (pods might be unready)".into());
        }
        Ok(g)
    }

    /// `GetResourceReplicas`: a Utilization target (percent of request).
    pub fn resource_replicas(
        &self,
        current: i32,
        target_utilization: i32,
        resource: &str,
        pods: &[Pod],
        mut metrics: PodMetrics,
        now: DateTime<Utc>,
    ) -> Result<Recommendation, String> {
        let g = self.counted(pods, &mut metrics, resource, now)?;
        let requests = pod_requests(pods, resource)?;
        let timestamp = latest(&metrics);
        let (ratio, utilization, raw) = utilization_ratio(&metrics, &requests, target_utilization)?;
        let result = |replicas| Recommendation {
            replicas,
            utilization: Some(utilization),
            raw_average: raw,
            timestamp,
        };
        let scale_up_with_unready = !g.unready.is_empty() && ratio > 1.0;
        if !scale_up_with_unready && g.missing.is_empty() {
            if (1.0 - ratio).abs() <= self.tolerance {
                return Ok(result(current));
            }
            return Ok(result((ratio * f64::from(g.ready)).ceil() as i32));
        }
        let fallback = i64::from(target_utilization.max(100));
        g.fill_in(&mut metrics, ratio, now, |p| {
            requests.get(p).copied().unwrap_or(0) * fallback / 100
        });
        let (new_ratio, _, _) = utilization_ratio(&metrics, &requests, target_utilization)?;
        Ok(result(self.rerun(current, ratio, new_ratio, metrics.len())))
    }

    /// `GetRawResourceReplicas`: an AverageValue target (milli-units per pod).
    pub fn raw_resource_replicas(
        &self,
        current: i32,
        target_average: i64,
        resource: &str,
        pods: &[Pod],
        mut metrics: PodMetrics,
        now: DateTime<Utc>,
    ) -> Result<Recommendation, String> {
        let g = self.counted(pods, &mut metrics, resource, now)?;
        let usage_ratio = |m: &PodMetrics| {
            let avg = m.values().map(|v| v.value).sum::<i64>() / m.len() as i64;
            (avg as f64 / target_average as f64, avg)
        };
        let timestamp = latest(&metrics);
        let (ratio, usage) = usage_ratio(&metrics);
        let result = |replicas| Recommendation {
            replicas,
            utilization: None,
            raw_average: usage,
            timestamp,
        };
        let scale_up_with_unready = !g.unready.is_empty() && ratio > 1.0;
        if !scale_up_with_unready && g.missing.is_empty() {
            if (1.0 - ratio).abs() <= self.tolerance {
                return Ok(result(current));
            }
            return Ok(result((ratio * f64::from(g.ready)).ceil() as i32));
        }
        g.fill_in(&mut metrics, ratio, now, |_| target_average);
        let (new_ratio, _) = usage_ratio(&metrics);
        Ok(result(self.rerun(current, ratio, new_ratio, metrics.len())))
    }

    /// The second pass, with the conservative assumptions filled in: no
    /// change if within tolerance or if the direction flipped.
    fn rerun(&self, current: i32, ratio: f64, new_ratio: f64, counted: usize) -> i32 {
        if (1.0 - new_ratio).abs() <= self.tolerance
            || (ratio < 1.0 && new_ratio > 1.0)
            || (ratio > 1.0 && new_ratio < 1.0)
        {
            return current;
        }
        let replicas = (new_ratio * counted as f64).ceil() as i32;
        if (new_ratio < 1.0 && replicas > current) || (new_ratio > 1.0 && replicas < current) {
            return current;
        }
        replicas
    }
}
