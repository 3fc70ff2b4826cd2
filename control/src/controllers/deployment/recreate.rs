//! recreate.go: the Recreate strategy. Old sets go to 0 and the new set
//! is created (or grown) only once no old pod is left running.

use super::replicas::{self, spec_replicas};
use super::rollout::Rollout;
use super::Error;

impl Rollout<'_> {
    /// `rolloutRecreate`.
    pub async fn rollout_recreate(&mut self) -> Result<(), Error> {
        // No new set yet: creating it now would scale up before down.
        self.get_new_replica_set(false).await?;
        if self.scale_down_old_for_recreate().await? {
            return self.sync_rollout_status().await;
        }
        if self.old_pods_running() {
            return self.sync_rollout_status().await;
        }
        let Some(i) = (match self.new_index() {
            Some(i) => Some(i),
            None => self.get_new_replica_set(true).await?,
        }) else {
            return self.sync_rollout_status().await;
        };
        let name = self.rss[i].metadata.name.clone().unwrap_or_default();
        self.scale_rs(&name, replicas::desired(&self.d), true)
            .await?;
        if super::progress::deployment_complete(&self.d, &self.status()) {
            self.cleanup_deployment().await?;
        }
        self.sync_rollout_status().await
    }

    async fn scale_down_old_for_recreate(&mut self) -> Result<bool, Error> {
        let olds: Vec<String> = self
            .old_sets()
            .iter()
            .filter(|rs| spec_replicas(rs) > 0)
            .filter_map(|rs| rs.metadata.name.clone())
            .collect();
        let mut scaled = false;
        for name in olds {
            scaled |= self.scale_rs(&name, 0, true).await?;
        }
        Ok(scaled)
    }

    /// Whether an old set still reports replicas or an old pod is not
    /// finished (`oldPodsRunning`).
    fn old_pods_running(&self) -> bool {
        let olds = self.old_sets();
        if replicas::total_actual(&olds) > 0 {
            return true;
        }
        let new_uid = self.new_set().and_then(|rs| rs.metadata.uid.clone());
        self.pods_by_rs.iter().any(|(uid, pods)| {
            Some(uid) != new_uid.as_ref()
                && pods.iter().any(|p| {
                    !matches!(
                        p.status.as_ref().and_then(|s| s.phase.as_deref()),
                        Some("Failed") | Some("Succeeded")
                    )
                })
        })
    }
}
