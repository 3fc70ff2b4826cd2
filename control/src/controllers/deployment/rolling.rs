//! rolling.go: the RollingUpdate strategy. The new set grows while the
//! sets hold at most `replicas + maxSurge` pods; old sets shrink while at
//! least `replicas - maxUnavailable` pods stay available.

use k8s_openapi::api::apps::v1::ReplicaSet;

use super::replicas::{self, available_replicas, spec_replicas};
use super::rollout::Rollout;
use super::Error;

fn name_of(rs: &ReplicaSet) -> String {
    rs.metadata.name.clone().unwrap_or_default()
}

impl Rollout<'_> {
    /// `rolloutRolling`.
    pub async fn rollout_rolling(&mut self) -> Result<(), Error> {
        if self.get_new_replica_set(true).await?.is_none() {
            return self.sync_rollout_status().await;
        }
        if self.reconcile_new_replica_set().await? {
            return self.sync_rollout_status().await;
        }
        if self.reconcile_old_replica_sets().await? {
            return self.sync_rollout_status().await;
        }
        if super::progress::deployment_complete(&self.d, &self.status()) {
            self.cleanup_deployment().await?;
        }
        self.sync_rollout_status().await
    }

    /// Grows (or shrinks) the new set toward `replicas` within maxSurge.
    async fn reconcile_new_replica_set(&mut self) -> Result<bool, Error> {
        let Some(new) = self.new_set() else {
            return Ok(false);
        };
        let desired = replicas::desired(&self.d);
        let name = name_of(new);
        let current = spec_replicas(new);
        if current == desired {
            return Ok(false);
        }
        if current > desired {
            return self.scale_rs(&name, desired, true).await;
        }
        let to = replicas::new_rs_new_replicas(&self.d, &self.all_sets(), new);
        self.scale_rs(&name, to, true).await
    }

    /// Shrinks old sets: unhealthy replicas first (they cost no
    /// availability), then healthy ones down to `replicas - maxUnavailable`
    /// available.
    async fn reconcile_old_replica_sets(&mut self) -> Result<bool, Error> {
        let olds = self.active_old_sets();
        let old_pods = replicas::total_spec(&olds);
        if old_pods == 0 {
            return Ok(false);
        }
        let Some(new) = self.new_set() else {
            return Ok(false);
        };
        let all_pods = replicas::total_spec(&self.all_sets());
        let min_available = replicas::desired(&self.d) - replicas::max_unavailable(&self.d);
        let new_unavailable = spec_replicas(new) - available_replicas(new);
        let max_scaled_down = all_pods - min_available - new_unavailable;
        if max_scaled_down <= 0 {
            return Ok(false);
        }
        let cleaned = self.cleanup_unhealthy_replicas(max_scaled_down).await?;
        let scaled = self.scale_down_old_replica_sets().await?;
        Ok(cleaned + scaled > 0)
    }

    /// Old sets with replicas, oldest first.
    fn active_old_sets(&self) -> Vec<&ReplicaSet> {
        self.old_sets()
            .into_iter()
            .filter(|rs| spec_replicas(rs) > 0)
            .collect()
    }

    /// Scales old sets down by their unavailable replicas, at most `max`
    /// in all (`cleanupUnhealthyReplicas`).
    async fn cleanup_unhealthy_replicas(&mut self, max: i32) -> Result<i32, Error> {
        let targets: Vec<(String, i32, i32)> = self
            .active_old_sets()
            .iter()
            .map(|rs| (name_of(rs), spec_replicas(rs), available_replicas(rs)))
            .collect();
        let mut total = 0;
        for (name, spec, available) in targets {
            if total >= max {
                break;
            }
            if spec == available {
                continue;
            }
            let down = (max - total).min(spec - available);
            if down <= 0 {
                continue;
            }
            self.scale_rs(&name, spec - down, true).await?;
            total += down;
        }
        Ok(total)
    }

    /// Scales old sets down, oldest first, as far as availability allows
    /// (`scaleDownOldReplicaSetsForRollingUpdate`).
    async fn scale_down_old_replica_sets(&mut self) -> Result<i32, Error> {
        let min_available = replicas::desired(&self.d) - replicas::max_unavailable(&self.d);
        // A set scaled down whose status has not caught up yet still
        // reports the pods it is removing as available: count at most
        // `spec.replicas` of each (stricter than Kubernetes, whose cache
        // can let a second scale-down through in that window).
        let available: i32 = self
            .all_sets()
            .iter()
            .map(|rs| available_replicas(rs).min(spec_replicas(rs)))
            .sum();
        if available <= min_available {
            return Ok(0);
        }
        let budget = available - min_available;
        let targets: Vec<(String, i32)> = self
            .active_old_sets()
            .iter()
            .map(|rs| (name_of(rs), spec_replicas(rs)))
            .collect();
        let mut total = 0;
        for (name, spec) in targets {
            if total >= budget {
                break;
            }
            let down = spec.min(budget - total);
            self.scale_rs(&name, spec - down, true).await?;
            total += down;
        }
        Ok(total)
    }
}
