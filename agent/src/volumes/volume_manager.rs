//! The volume manager (the kubelet's `volumemanager`), shared by the
//! node's pod workers: before each sync of a pod it finds what the pod's
//! volumes (and its containers' environment) are made of, which the sync
//! then mounts ([`super::setup`]):
//!
//! - `persistentVolumeClaim` volumes become the hostPath of the volume
//!   their claim is bound to ([`super::persistent_claim::resolve`]), or
//!   the reasons they cannot be mounted yet;
//! - the ConfigMaps and Secrets the pod references, from the node's
//!   ConfigMap and Secret managers (one shared watch per object, which
//!   wakes the pod when its object changes), and the service account
//!   tokens of its projected volumes.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use tokio::sync::Notify;

use super::persistent_claim;
use crate::config::sources::{references_any, ConfigManagers, ConfigSources};

/// What a pod's volumes are made of, found before one sync.
pub struct PreparedVolumes {
    /// The pod with its bound claims' volumes as hostPaths.
    pub pod: Pod,
    /// Why claim-backed volumes cannot be mounted yet (claims missing or
    /// not bound).
    pub unmountable_claims: Vec<String>,
    /// The referenced ConfigMaps, Secrets and tokens.
    pub config_sources: ConfigSources,
}

/// The node's volume manager.
#[derive(Clone)]
pub struct VolumeManager {
    client: Client,
    config: ConfigManagers,
}

impl VolumeManager {
    pub fn new(client: Client) -> Self {
        VolumeManager {
            config: ConfigManagers::new(client.clone()),
            client,
        }
    }

    /// The node's ConfigMap and Secret managers.
    pub fn config(&self) -> &ConfigManagers {
        &self.config
    }

    /// What `pod`'s volumes and environment are made of now (`previous`:
    /// what the last sync had, whose fresh tokens are kept). The pod's
    /// references are registered with the ConfigMap and Secret managers,
    /// whose watches notify `wake` when one of the objects changes.
    pub async fn prepare(
        &self,
        pod: &Pod,
        previous: &ConfigSources,
        wake: &Arc<Notify>,
    ) -> PreparedVolumes {
        let (pod, unmountable_claims) = persistent_claim::resolve(&self.client, pod).await;
        let config_sources = if references_any(&pod) {
            self.config.register_pod(&pod, wake);
            self.config.resolve(&pod, previous).await
        } else {
            ConfigSources::default()
        };
        PreparedVolumes {
            pod,
            unmountable_claims,
            config_sources,
        }
    }

    /// How soon the pod must be looked at again for its volumes' sake: a
    /// claim is bound moments after its pod is placed, and a container
    /// waiting for a ConfigMap or Secret (`waits_on_config`) is checked
    /// every second (besides the watch's wake-up); tokens are asked for
    /// again before they expire.
    pub fn recheck_after(&self, prepared: &PreparedVolumes, waits_on_config: bool) -> Duration {
        let soon = if !prepared.unmountable_claims.is_empty() || waits_on_config {
            Duration::from_secs(1)
        } else {
            Duration::MAX
        };
        let now = chrono::Utc::now().timestamp();
        let token = prepared
            .config_sources
            .refresh_after(now)
            .unwrap_or(Duration::MAX);
        soon.min(token)
    }

    /// Pod `uid` is gone: its references are released (the last pod to
    /// reference an object stops its watch).
    pub fn release_pod(&self, uid: &str) {
        self.config.release_pod(uid);
    }
}
