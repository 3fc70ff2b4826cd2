//! From a metric's recommendation to the replica count to set:
//! stabilization windows and scaling policies (`spec.behavior`), or,
//! without a behavior, the controller's scale-down stabilization and its
//! fixed scale-up limit — `normalizeDesiredReplicas*` and the
//! `calculateScale*Limit*` functions of kube-controller-manager's
//! `horizontal.go`. The history they need (recent recommendations, recent
//! scale events) is kept per HPA in [`History`]; time comes from the
//! caller, so tests move it by hand.

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::autoscaling::v2::{
    HPAScalingPolicy, HPAScalingRules, HorizontalPodAutoscalerBehavior,
};

/// A recommendation the metrics made at some time.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Timestamped {
    replicas: i32,
    at: DateTime<Utc>,
}

/// A rescale: how many replicas it added or removed, and when.
#[derive(Debug, Clone, Copy, PartialEq)]
struct ScaleEvent {
    change: i32,
    at: DateTime<Utc>,
    outdated: bool,
}

/// What the controller remembers of one HPA between syncs.
#[derive(Debug, Clone, Default)]
pub struct History {
    recommendations: Vec<Timestamped>,
    scale_ups: Vec<ScaleEvent>,
    scale_downs: Vec<ScaleEvent>,
}

/// The outcome of normalization, with the reasons for the conditions
/// AbleToScale (stabilized or not) and ScalingLimited.
#[derive(Debug, Clone, PartialEq)]
pub struct Normalized {
    pub replicas: i32,
    pub able_reason: &'static str,
    pub able_message: &'static str,
    /// Whether the rate or the bounds cut the recommendation.
    pub limited: bool,
    pub limit_reason: &'static str,
    pub limit_message: &'static str,
}

fn secs(d: i32) -> chrono::Duration {
    chrono::Duration::seconds(i64::from(d))
}

/// Kubernetes' defaults for `behavior` (`GenerateHPAScaleUpRules`,
/// `GenerateHPAScaleDownRules`): up at most 4 pods or 100% per 15 s with
/// no window; down at most 100% per 15 s with the controller's window.
pub fn defaulted(
    behavior: &HorizontalPodAutoscalerBehavior,
    downscale_window: Duration,
) -> (HPAScalingRules, HPAScalingRules) {
    let policy = |type_: &str, value: i32| HPAScalingPolicy {
        type_: type_.into(),
        value,
        period_seconds: 15,
    };
    let mut up = behavior.scale_up.clone().unwrap_or_default();
    if up.stabilization_window_seconds.is_none() {
        up.stabilization_window_seconds = Some(0);
    }
    if up.select_policy.is_none() {
        up.select_policy = Some("Max".into());
    }
    if up.policies.as_ref().is_none_or(Vec::is_empty) {
        up.policies = Some(vec![policy("Pods", 4), policy("Percent", 100)]);
    }
    let mut down = behavior.scale_down.clone().unwrap_or_default();
    if down.stabilization_window_seconds.is_none() {
        down.stabilization_window_seconds = Some(downscale_window.as_secs() as i32);
    }
    if down.select_policy.is_none() {
        down.select_policy = Some("Max".into());
    }
    if down.policies.as_ref().is_none_or(Vec::is_empty) {
        down.policies = Some(vec![policy("Percent", 100)]);
    }
    (up, down)
}

/// Replicas added (or removed) by `events` within the last `period` seconds.
fn change_in_period(period: i32, events: &[ScaleEvent], now: DateTime<Utc>) -> i32 {
    let cutoff = now - secs(period);
    events
        .iter()
        .filter(|e| e.at > cutoff)
        .map(|e| e.change)
        .sum()
}

impl History {
    /// `recordInitialRecommendation`: the first sync remembers the
    /// current size as a recommendation.
    pub fn record_initial(&mut self, current: i32, now: DateTime<Utc>) {
        if self.recommendations.is_empty() {
            self.recommendations.push(Timestamped {
                replicas: current,
                at: now,
            });
        }
    }

    /// Replaces an old entry, or appends.
    fn remember(&mut self, replicas: i32, now: DateTime<Utc>, old: Option<usize>) {
        let entry = Timestamped { replicas, at: now };
        match old {
            Some(i) => self.recommendations[i] = entry,
            None => self.recommendations.push(entry),
        }
    }

    /// `normalizeDesiredReplicas`: no `behavior`. The highest
    /// recommendation of the last `downscale_window` wins, then the scale
    /// up is limited to max(2 × current, 4) and clamped to min/max.
    pub fn normalize(
        &mut self,
        current: i32,
        desired: i32,
        min: i32,
        max: i32,
        downscale_window: Duration,
        now: DateTime<Utc>,
    ) -> Normalized {
        let cutoff = now - chrono::Duration::from_std(downscale_window).unwrap_or_default();
        let mut stabilized = desired;
        let mut old = None;
        for (i, r) in self.recommendations.iter().enumerate() {
            if r.at < cutoff {
                old = Some(i);
            } else if r.replicas > stabilized {
                stabilized = r.replicas;
            }
        }
        self.remember(desired, now, old);
        let (able_reason, able_message) = if stabilized != desired {
            (
                "ScaleDownStabilized",
                "recent recommendations were higher than current one, applying the highest recent recommendation",
            )
        } else {
            ("ReadyForNewScale", "recommended size matches current size")
        };
        let scale_up_limit = (2 * current).max(4);
        let (maximum, max_reason, max_message) = if max > scale_up_limit {
            (
                scale_up_limit,
                "ScaleUpLimit",
                "the desired replica count is increasing faster than the maximum scale rate",
            )
        } else {
            (
                max,
                "TooManyReplicas",
                "the desired replica count is more than the maximum replica count",
            )
        };
        let (replicas, limit_reason, limit_message) = if stabilized < min {
            (
                min,
                "TooFewReplicas",
                "the desired replica count is less than the minimum replica count",
            )
        } else if stabilized > maximum {
            (maximum, max_reason, max_message)
        } else {
            (
                stabilized,
                "DesiredWithinRange",
                "the desired count is within the acceptable range",
            )
        };
        Normalized {
            replicas,
            able_reason,
            able_message,
            limited: replicas != stabilized,
            limit_reason,
            limit_message,
        }
    }

    /// `normalizeDesiredReplicasWithBehaviors`: stabilize within the
    /// scale-up and scale-down windows, then limit the change by the
    /// policies of the direction taken, then clamp to min/max.
    #[allow(clippy::too_many_arguments)]
    pub fn normalize_with_behavior(
        &mut self,
        current: i32,
        desired: i32,
        min: i32,
        max: i32,
        up: &HPAScalingRules,
        down: &HPAScalingRules,
        now: DateTime<Utc>,
    ) -> Normalized {
        // Stabilization.
        let up_cutoff = now - secs(up.stabilization_window_seconds.unwrap_or(0));
        let down_cutoff = now - secs(down.stabilization_window_seconds.unwrap_or(300));
        let (mut up_rec, mut down_rec) = (desired, desired);
        let mut old = None;
        for (i, r) in self.recommendations.iter().enumerate() {
            if r.at > up_cutoff {
                up_rec = up_rec.min(r.replicas);
            }
            if r.at > down_cutoff {
                down_rec = down_rec.max(r.replicas);
            }
            if r.at < up_cutoff && r.at < down_cutoff {
                old = Some(i);
            }
        }
        let stabilized = current.max(up_rec).min(down_rec);
        self.remember(desired, now, old);
        let (able_reason, able_message) = if stabilized == desired {
            ("ReadyForNewScale", "recommended size matches current size")
        } else if desired >= current {
            (
                "ScaleUpStabilized",
                "recent recommendations were lower than current one, applying the lowest recent recommendation",
            )
        } else {
            (
                "ScaleDownStabilized",
                "recent recommendations were higher than current one, applying the highest recent recommendation",
            )
        };

        // Rate limits and bounds.
        let mut out = (
            stabilized,
            "DesiredWithinRange",
            "the desired count is within the acceptable range",
        );
        if stabilized > current {
            let limit = self.policy_limit(current, up, now, true).max(current);
            let (maximum, reason, message) = if max > limit {
                (
                    limit,
                    "ScaleUpLimit",
                    "the desired replica count is increasing faster than the maximum scale rate",
                )
            } else {
                (
                    max,
                    "TooManyReplicas",
                    "the desired replica count is more than the maximum replica count",
                )
            };
            if stabilized > maximum {
                out = (maximum, reason, message);
            }
        } else if stabilized < current {
            let limit = self.policy_limit(current, down, now, false).min(current);
            let (minimum, reason, message) = if min < limit {
                (
                    limit,
                    "ScaleDownLimit",
                    "the desired replica count is decreasing faster than the maximum scale rate",
                )
            } else {
                (
                    min,
                    "TooFewReplicas",
                    "the desired replica count is less than the minimum replica count",
                )
            };
            if stabilized < minimum {
                out = (minimum, reason, message);
            }
        }
        Normalized {
            replicas: out.0,
            able_reason,
            able_message,
            limited: out.0 != stabilized,
            limit_reason: out.1,
            limit_message: out.2,
        }
    }

    /// `calculateScaleUpLimitWithScalingRules` (`up`) and
    /// `calculateScaleDownLimitWithBehaviors`: the furthest the policies
    /// let the count move from `current`, counting from where it stood at
    /// the start of each policy's period. selectPolicy `Max` takes the
    /// policy allowing the biggest change, `Min` the smallest.
    fn policy_limit(
        &self,
        current: i32,
        rules: &HPAScalingRules,
        now: DateTime<Utc>,
        up: bool,
    ) -> i32 {
        let select = rules.select_policy.as_deref().unwrap_or("Max");
        if select == "Disabled" {
            return current;
        }
        // Up with Max, or down with Min: the highest proposal.
        let highest = up == (select != "Min");
        let mut result = if highest { i32::MIN } else { i32::MAX };
        for p in rules.policies.as_deref().unwrap_or_default() {
            let added = change_in_period(p.period_seconds, &self.scale_ups, now);
            let removed = change_in_period(p.period_seconds, &self.scale_downs, now);
            let start = current - added + removed;
            let fraction = f64::from(p.value) / 100.0;
            let proposed = match (p.type_.as_str(), up) {
                ("Pods", true) => start + p.value,
                ("Pods", false) => start - p.value,
                (_, true) => (f64::from(start) * (1.0 + fraction)).ceil() as i32,
                (_, false) => (f64::from(start) * (1.0 - fraction)) as i32,
            };
            result = if highest {
                result.max(proposed)
            } else {
                result.min(proposed)
            };
        }
        result
    }

    /// `storeScaleEvent`: remembers a rescale for the policies' periods
    /// (only HPAs with a behavior use them).
    pub fn store_scale_event(
        &mut self,
        up: &HPAScalingRules,
        down: &HPAScalingRules,
        previous: i32,
        new: i32,
        now: DateTime<Utc>,
    ) {
        let (events, rules, change) = if new > previous {
            (&mut self.scale_ups, up, new - previous)
        } else {
            (&mut self.scale_downs, down, previous - new)
        };
        let longest = rules
            .policies
            .as_deref()
            .unwrap_or_default()
            .iter()
            .map(|p| p.period_seconds)
            .max()
            .unwrap_or(0);
        let cutoff = now - secs(longest);
        for e in events.iter_mut() {
            if e.at < cutoff {
                e.outdated = true;
            }
        }
        let event = ScaleEvent {
            change,
            at: now,
            outdated: false,
        };
        match events.iter_mut().find(|e| e.outdated) {
            Some(slot) => *slot = event,
            None => events.push(event),
        }
    }
}
