//! The status manager (the kubelet's `status_manager`): the one place
//! that writes a pod's status, and deletes the pod object once a deleted
//! pod's terminal status is written and its containers are gone. One per pod worker; it remembers what it
//! last wrote, so
//!
//! - a status equal to the last one written is not written again (an
//!   idle pod makes no request), and one that failed to be written is
//!   written on the next sync (the worker's retry is the manager's);
//! - the watch's copy of the pod, which may still be from before the last
//!   write, is seen with that write merged in ([`StatusManager::with_own_status`]);
//! - a condition someone else changed after the last write (the node
//!   lifecycle controller marks the pods of a node that stopped
//!   heartbeating not Ready) is written again, as the kubelet's
//!   `needsReconcile` does ([`StatusManager::notice_other_writers`]).

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::Client;
use serde_json::{json, Value};

use super::to_json;
use crate::observe::PodStart;

/// What one pod's status writes remember.
pub struct StatusManager {
    client: Client,
    /// The status last written, and as JSON (the merge patch's `status`).
    written: Option<(PodStatus, Value)>,
    /// The pod's resourceVersion that write made.
    written_at: Option<u64>,
    /// Pod start latency, observed from the statuses written.
    start: PodStart,
}

impl StatusManager {
    pub fn new(client: Client) -> Self {
        StatusManager {
            client,
            written: None,
            written_at: None,
            start: PodStart::default(),
        }
    }

    /// The pod as this agent last left it: the watch may still deliver
    /// the object from before our last status write, and a status
    /// computed from that one would forget what the write set (startTime,
    /// transition times) and write again. Only the agent writes a bound
    /// pod's status, so its own last write is never older than the
    /// watched copy.
    pub fn with_own_status(&self, pod: &Pod) -> Pod {
        with_own_status(pod, self.written.as_ref().map(|(_, json)| json))
    }

    /// Writes `status` as the status of `pod` (a merge patch of the status
    /// subresource), unless it is what was last written; true if it wrote
    /// it now. A failed write is logged and tried again with the next
    /// status.
    pub async fn set_pod_status(&mut self, pod: &Pod, status: PodStatus) -> bool {
        if self.written.as_ref().is_some_and(|(w, _)| *w == status) {
            return false;
        }
        let json = to_json(&status);
        let name = pod.metadata.name.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace(pod));
        let patch = Patch::Merge(json!({ "status": json }));
        match api
            .patch_status(&name, &PatchParams::default(), &patch)
            .await
        {
            Ok(updated) => {
                self.start.status_written(pod, &status);
                self.written = Some((status, json));
                self.written_at = revision(&updated);
                true
            }
            Err(e) => {
                tracing::warn!(pod = %name, error = %e, "writing pod status");
                false
            }
        }
    }

    /// Forgets the last write if `pod`, as watched, is newer than it and
    /// says otherwise of a condition it wrote, so the next status is
    /// written whatever it is: another writer changed it (the node
    /// lifecycle controller's Ready=False while the node's heartbeats
    /// were late), and the pod stays that way until the agent says again
    /// what it sees. A watched copy older than the write is no news.
    pub fn notice_other_writers(&mut self, pod: &Pod) {
        let Some((_, json)) = &self.written else {
            return;
        };
        if overwritten(pod, json, self.written_at) {
            tracing::info!(
                pod = %pod.metadata.name.as_deref().unwrap_or_default(),
                "pod status changed by another writer; writing it again"
            );
            self.written = None;
            self.written_at = None;
        }
    }

    /// Whether `status` is the one last written.
    pub fn has_written(&self, status: &PodStatus) -> bool {
        self.written.as_ref().is_some_and(|(w, _)| w == status)
    }

    /// Whether a container of the pod waits with CreateContainerConfigError
    /// (a ConfigMap or Secret it reads is missing), as last written.
    pub fn waits_on_config(&self) -> bool {
        let Some((status, _)) = &self.written else {
            return false;
        };
        let containers = status.container_statuses.iter().flatten();
        containers
            .chain(status.init_container_statuses.iter().flatten())
            .any(|c| {
                c.state
                    .as_ref()
                    .and_then(|s| s.waiting.as_ref())
                    .and_then(|w| w.reason.as_deref())
                    == Some("CreateContainerConfigError")
            })
    }

    /// Deletes the pod object once its containers are gone (grace period
    /// 0, only if it is still the same pod), as the kubelet's status
    /// manager does for a terminated pod being deleted.
    pub async fn finish_deletion(&self, pod: &Pod) {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace(pod));
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: pod.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api
            .delete(pod.metadata.name.as_deref().unwrap_or_default(), &params)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => tracing::warn!(error = %e, "deleting a terminated pod"),
        }
    }
}

fn namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}

/// A pod's resourceVersion as a number: bosun's are the store's
/// revisions, which only grow (on etcd too).
fn revision(pod: &Pod) -> Option<u64> {
    pod.metadata.resource_version.as_deref()?.parse().ok()
}

/// Whether the watched `pod` is newer than the agent's last status write
/// (`written`, made at `written_at`) and a condition that write set has
/// another status in it.
fn overwritten(pod: &Pod, written: &Value, written_at: Option<u64>) -> bool {
    let (Some(at), Some(now)) = (written_at, revision(pod)) else {
        return false;
    };
    if now <= at {
        return false;
    }
    let watched = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    written["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| {
            let watched = watched
                .into_iter()
                .flatten()
                .find(|w| Some(w.type_.as_str()) == c["type"].as_str());
            watched.is_some_and(|w| Some(w.status.as_str()) != c["status"].as_str())
        })
}

/// `pod` with the fields of `written` (the last status written) over its
/// watched status.
fn with_own_status(pod: &Pod, written: Option<&Value>) -> Pod {
    let Some(Value::Object(written)) = written else {
        return pod.clone();
    };
    let mut status = serde_json::to_value(pod.status.clone().unwrap_or_default())
        .unwrap_or_else(|_| Value::Object(Default::default()));
    if let Value::Object(fields) = &mut status {
        for (k, v) in written {
            fields.insert(k.clone(), v.clone());
        }
    }
    let mut pod = pod.clone();
    pod.status = serde_json::from_value(status).ok().or(pod.status);
    pod
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_watched_pod_gets_the_agents_last_written_status() {
        let watched: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Pending", "qosClass": "BestEffort",
                       "conditions": [{"type": "PodScheduled", "status": "True"}]}
        }))
        .unwrap();
        let written = json!({"phase": "Running", "startTime": "2026-12-03T08:37:56Z"});
        let seen = with_own_status(&watched, Some(&written));
        let status = seen.status.unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert_eq!(
            status.start_time.map(|t| t.0.to_string()).as_deref(),
            Some("2026-12-03T08:37:56Z")
        );
        // What the agent did not write stays as watched.
        assert_eq!(status.qos_class.as_deref(), Some("BestEffort"));
        // Before any write, the watched pod is used as it is.
        assert_eq!(with_own_status(&watched, None), watched);
    }

    #[test]
    fn a_condition_another_writer_changed_after_the_agents_write_is_noticed() {
        let written = json!({"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "ContainersReady", "status": "True"}]});
        let watched = |rv: &str, ready: &str| -> Pod {
            serde_json::from_value(json!({
                "metadata": {"name": "p", "namespace": "default", "resourceVersion": rv},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
                "status": {"phase": "Running", "conditions": [
                    {"type": "Ready", "status": ready},
                    {"type": "ContainersReady", "status": "True"},
                    {"type": "DisruptionTarget", "status": "True"}]}
            }))
            .unwrap()
        };
        // The node lifecycle controller's Ready=False, after the write.
        assert!(overwritten(&watched("12", "False"), &written, Some(10)));
        // The same from a watch still behind the write: no news.
        assert!(!overwritten(&watched("9", "False"), &written, Some(10)));
        // Newer, but what the agent wrote still holds (a condition the
        // agent does not write, DisruptionTarget, is not its to undo).
        assert!(!overwritten(&watched("12", "True"), &written, Some(10)));
        // The write's revision unknown: nothing to compare.
        assert!(!overwritten(&watched("12", "False"), &written, None));
    }
}
