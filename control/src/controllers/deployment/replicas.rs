//! Replica arithmetic (kube-controller-manager's `deploymentutil`):
//! maxSurge / maxUnavailable resolution, counts over sets, the replica
//! annotations and proportional scaling.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use bosun::well_known::{DESIRED_REPLICAS, MAX_REPLICAS};

/// `spec.replicas` of a set (1 when unset, as the API defaults it).
pub fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.replicas.unwrap_or(1)
}

pub fn set_spec_replicas(rs: &mut ReplicaSet, n: i32) {
    rs.spec.replicas = Some(n);
}

fn status_of(
    rs: &ReplicaSet,
    f: impl Fn(&k8s_openapi::api::apps::v1::ReplicaSetStatus) -> i32,
) -> i32 {
    rs.status.as_ref().map(f).unwrap_or(0)
}

pub fn actual_replicas(rs: &ReplicaSet) -> i32 {
    status_of(rs, |s| s.replicas)
}

pub fn available_replicas(rs: &ReplicaSet) -> i32 {
    status_of(rs, |s| s.available_replicas.unwrap_or(0))
}

pub fn ready_replicas(rs: &ReplicaSet) -> i32 {
    status_of(rs, |s| s.ready_replicas.unwrap_or(0))
}

/// Σ spec.replicas.
pub fn total_spec(rss: &[&ReplicaSet]) -> i32 {
    rss.iter().map(|rs| spec_replicas(rs)).sum()
}

/// Σ status.replicas.
pub fn total_actual(rss: &[&ReplicaSet]) -> i32 {
    rss.iter().map(|rs| actual_replicas(rs)).sum()
}

pub fn total_available(rss: &[&ReplicaSet]) -> i32 {
    rss.iter().map(|rs| available_replicas(rs)).sum()
}

pub fn total_ready(rss: &[&ReplicaSet]) -> i32 {
    rss.iter().map(|rs| ready_replicas(rs)).sum()
}

/// `spec.replicas` of the deployment.
pub fn desired(d: &Deployment) -> i32 {
    d.spec.replicas.unwrap_or(1)
}

pub fn is_rolling_update(d: &Deployment) -> bool {
    d.spec
        .strategy
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .is_none_or(|t| t == "RollingUpdate")
}

/// An int, or a percentage of `total` rounded up or down.
pub fn scaled_value(v: &IntOrString, total: i32, round_up: bool) -> Result<i32, String> {
    match v {
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(s) => {
            let pct: i64 = s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| format!("invalid value for IntOrString: invalid value {s:?}"))?;
            let scaled = pct * i64::from(total);
            let v = if round_up {
                (scaled + 99).div_euclid(100)
            } else {
                scaled.div_euclid(100)
            };
            Ok(v as i32)
        }
    }
}

/// (maxSurge, maxUnavailable) for `desired` replicas: surge rounds up,
/// unavailable rounds down, and when both come to 0 maxUnavailable is 1
/// (validation rejects both 0 as written; rounding can still get there).
pub fn resolve_fenceposts(
    max_surge: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    desired: i32,
) -> Result<(i32, i32), String> {
    let zero = IntOrString::Int(0);
    let surge = scaled_value(max_surge.unwrap_or(&zero), desired, true)?;
    let mut unavailable = scaled_value(max_unavailable.unwrap_or(&zero), desired, false)?;
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    Ok((surge, unavailable))
}

fn fenceposts(d: &Deployment) -> (i32, i32) {
    let ru = d
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.rolling_update.as_ref());
    let default = IntOrString::String("25%".into());
    let surge = ru.map_or(Some(&default), |r| r.max_surge.as_ref());
    let unavailable = ru.map_or(Some(&default), |r| r.max_unavailable.as_ref());
    // Validation rejects malformed values; be safe and treat them as 0.
    resolve_fenceposts(surge, unavailable, desired(d)).unwrap_or((0, 1))
}

/// How many pods above `replicas` a rolling update may run (0 for Recreate).
pub fn max_surge(d: &Deployment) -> i32 {
    if !is_rolling_update(d) {
        return 0;
    }
    fenceposts(d).0
}

/// How many of `replicas` may be unavailable (0 for Recreate), at most
/// `replicas`.
pub fn max_unavailable(d: &Deployment) -> i32 {
    if !is_rolling_update(d) || desired(d) == 0 {
        return 0;
    }
    fenceposts(d).1.min(desired(d))
}

/// The size of a new set as a rollout starts or continues
/// (`NewRSNewReplicas`).
pub fn new_rs_new_replicas(d: &Deployment, all: &[&ReplicaSet], new_rs: &ReplicaSet) -> i32 {
    let replicas = desired(d);
    if !is_rolling_update(d) {
        return replicas;
    }
    let current = total_spec(all);
    let max_total = replicas + max_surge(d);
    if current >= max_total {
        return spec_replicas(new_rs);
    }
    let scale_up = (max_total - current).min(replicas - spec_replicas(new_rs));
    spec_replicas(new_rs) + scale_up
}

fn annotation_i32(rs: &ReplicaSet, key: &str) -> Option<i32> {
    rs.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .and_then(|v| v.parse().ok())
}

pub fn desired_replicas_annotation(rs: &ReplicaSet) -> Option<i32> {
    annotation_i32(rs, DESIRED_REPLICAS)
}

/// Whether the desired/max replicas annotations differ from these.
pub fn replicas_annotations_need_update(rs: &ReplicaSet, desired: i32, max: i32) -> bool {
    annotation_i32(rs, DESIRED_REPLICAS) != Some(desired)
        || annotation_i32(rs, MAX_REPLICAS) != Some(max)
}

/// Sets the desired/max replicas annotations; true when they changed.
pub fn set_replicas_annotations(rs: &mut ReplicaSet, desired: i32, max: i32) -> bool {
    let a = rs.metadata.annotations.get_or_insert_with(Default::default);
    let mut changed = false;
    for (k, v) in [(DESIRED_REPLICAS, desired), (MAX_REPLICAS, max)] {
        let v = v.to_string();
        if a.get(k) != Some(&v) {
            a.insert(k.to_string(), v);
            changed = true;
        }
    }
    changed
}

/// The new set runs all of `replicas`, available, and knows it.
pub fn is_saturated(d: &Deployment, rs: Option<&ReplicaSet>) -> bool {
    let Some(rs) = rs else { return false };
    let Some(annotated) = desired_replicas_annotation(rs) else {
        return false;
    };
    let replicas = desired(d);
    spec_replicas(rs) == replicas && annotated == replicas && available_replicas(rs) == replicas
}

/// How many replicas `rs` gains (or loses) when the deployment's size
/// changes, from its share of the size it had before
/// (`getReplicaSetFraction`).
fn fraction(rs: &ReplicaSet, d: &Deployment) -> i32 {
    let replicas = desired(d);
    if replicas == 0 {
        return -spec_replicas(rs);
    }
    let max_now = replicas + max_surge(d);
    let before = match annotation_i32(rs, MAX_REPLICAS) {
        Some(n) if n != 0 => n,
        _ => {
            let status = d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0);
            if status == 0 {
                return 0;
            }
            status
        }
    };
    let size = f64::from(spec_replicas(rs)) * f64::from(max_now) / f64::from(before);
    size.round() as i32 - spec_replicas(rs)
}

/// `GetProportion`: the share of `to_add` for `rs`, never beyond what is
/// left to add (or remove).
fn proportion(rs: &ReplicaSet, d: &Deployment, to_add: i32, added: i32) -> i32 {
    if spec_replicas(rs) == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let f = fraction(rs, d);
    let allowed = to_add - added;
    if to_add > 0 {
        f.min(allowed)
    } else {
        f.max(allowed)
    }
}

fn creation_key(rs: &ReplicaSet) -> (Option<i64>, String) {
    (
        rs.metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_nanosecond() as i64),
        rs.metadata.name.clone().unwrap_or_default(),
    )
}

/// Oldest first, then by name (`ReplicaSetsByCreationTimestamp`).
pub fn sort_by_creation(rss: &mut [ReplicaSet]) {
    rss.sort_by_key(creation_key);
}

/// The new sizes of the active sets when a deployment is scaled in the
/// middle of a rollout (sync.go's `scale`, rolling-update branch): the
/// difference between `replicas + maxSurge` and what the sets hold now
/// is spread over them in proportion to their sizes, the leftover going
/// to the largest. Returns (name, new size) in the order to apply them.
pub fn proportional_sizes(d: &Deployment, active: &[&ReplicaSet]) -> Vec<(String, i32)> {
    let current = total_spec(active);
    let allowed = if desired(d) > 0 {
        desired(d) + max_surge(d)
    } else {
        0
    };
    let to_add = allowed - current;
    let mut sets: Vec<&ReplicaSet> = active.to_vec();
    // Larger first; among equals, newer first when growing, older first
    // when shrinking.
    sets.sort_by(|a, b| {
        spec_replicas(b).cmp(&spec_replicas(a)).then_with(|| {
            if to_add > 0 {
                creation_key(b).cmp(&creation_key(a))
            } else {
                creation_key(a).cmp(&creation_key(b))
            }
        })
    });
    let mut added = 0;
    let mut sizes: Vec<(String, i32)> = Vec::with_capacity(sets.len());
    for rs in &sets {
        let name = rs.metadata.name.clone().unwrap_or_default();
        if to_add != 0 {
            let p = proportion(rs, d, to_add, added);
            sizes.push((name, spec_replicas(rs) + p));
            added += p;
        } else {
            sizes.push((name, spec_replicas(rs)));
        }
    }
    if to_add != 0 {
        if let Some(first) = sizes.first_mut() {
            first.1 = (first.1 + to_add - added).max(0);
        }
    }
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pct(s: &str) -> IntOrString {
        IntOrString::String(s.into())
    }

    #[test]
    fn surge_rounds_up_and_unavailable_rounds_down() {
        // 25% of 3: surge 0.75 -> 1, unavailable 0.75 -> 0.
        assert_eq!(
            resolve_fenceposts(Some(&pct("25%")), Some(&pct("25%")), 3),
            Ok((1, 0))
        );
        assert_eq!(
            resolve_fenceposts(Some(&pct("25%")), Some(&pct("25%")), 10),
            Ok((3, 2))
        );
        assert_eq!(
            resolve_fenceposts(Some(&IntOrString::Int(1)), Some(&IntOrString::Int(1)), 3),
            Ok((1, 1))
        );
        assert_eq!(
            resolve_fenceposts(Some(&pct("0%")), Some(&pct("50%")), 5),
            Ok((0, 2))
        );
    }

    #[test]
    fn both_zero_after_rounding_means_one_unavailable() {
        assert_eq!(
            resolve_fenceposts(Some(&pct("0%")), Some(&pct("10%")), 5),
            Ok((0, 1))
        );
        assert_eq!(resolve_fenceposts(None, None, 5), Ok((0, 1)));
    }

    #[test]
    fn malformed_percent_is_an_error() {
        assert!(scaled_value(&pct("lots"), 3, true).is_err());
    }

    fn deployment(replicas: i32, surge: i32, unavailable: i32, status_replicas: i32) -> Deployment {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "strategy": {"type": "RollingUpdate",
                                  "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}},
                     "template": {"metadata": {"labels": {"app": "web"}}}},
            "status": {"replicas": status_replicas}
        }))
        .unwrap()
    }

    fn rs(name: &str, replicas: i32, max_replicas: i32, created: &str) -> ReplicaSet {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "creationTimestamp": created,
                         "annotations": {MAX_REPLICAS: max_replicas.to_string()}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}}
        }))
        .unwrap()
    }

    #[test]
    fn scaling_mid_rollout_is_proportional() {
        // Kubernetes' documented example: 10 replicas, maxSurge 3, a
        // rollout in progress with 8 old and 5 new, scaled to 15:
        // 5 more go 3 to the old set and 2 to the new one.
        let d = deployment(15, 3, 2, 13);
        let old = rs("web-old", 8, 13, "2026-01-01T00:00:00Z");
        let new = rs("web-new", 5, 13, "2026-01-01T00:01:00Z");
        let sizes = proportional_sizes(&d, &[&old, &new]);
        assert_eq!(sizes, vec![("web-old".into(), 11), ("web-new".into(), 7)]);
        // And back down to 10 from 18 / max 18.
        let d = deployment(10, 3, 2, 18);
        let old = rs("web-old", 11, 18, "2026-01-01T00:00:00Z");
        let new = rs("web-new", 7, 18, "2026-01-01T00:01:00Z");
        let sizes = proportional_sizes(&d, &[&old, &new]);
        assert_eq!(sizes, vec![("web-old".into(), 8), ("web-new".into(), 5)]);
    }

    #[test]
    fn a_new_set_grows_within_max_surge() {
        let d = deployment(4, 1, 1, 4);
        let old = rs("web-old", 4, 5, "2026-01-01T00:00:00Z");
        let mut new = rs("web-new", 0, 5, "2026-01-01T00:01:00Z");
        assert_eq!(new_rs_new_replicas(&d, &[&old, &new], &new), 1);
        set_spec_replicas(&mut new, 1);
        assert_eq!(new_rs_new_replicas(&d, &[&old, &new], &new), 1);
    }
}
