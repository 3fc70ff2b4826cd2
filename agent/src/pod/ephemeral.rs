//! Ephemeral containers, as kuberuntime's `SyncPod` starts them (step 6,
//! before the init containers, so a pod stuck initializing can still be
//! debugged): each one not started yet is made once, in the sandbox's
//! network and IPC namespaces and, with a `targetContainerName`, in that
//! container's PID namespace. One that exited stays exited: ephemeral
//! containers are never restarted.

use k8s_openapi::api::core::v1::Pod;

use super::sandbox::Sandbox;
use super::worker_state::{latest, PodWorker};
use crate::runtime::{ContainerInfo, ContainerState, Role, RuntimeError};
use crate::spec;

impl PodWorker {
    /// Starts every ephemeral container that has no instance yet.
    pub(super) async fn run_ephemeral_containers(
        &mut self,
        pod: &Pod,
        containers: &[ContainerInfo],
        sandbox: &Sandbox,
    ) -> Result<(), RuntimeError> {
        for (c, target) in spec::ephemeral_containers(pod) {
            match latest(containers, Role::Ephemeral, &c.name) {
                // Made but not started (the agent stopped in between).
                Some(l) if l.state == ContainerState::Created => {
                    self.start(Role::Ephemeral, &c.name, &l.id).await?;
                    continue;
                }
                Some(_) => continue,
                None => {}
            }
            let pid_target = match &target {
                None => None,
                Some(t) => {
                    let running = [Role::App, Role::Init]
                        .into_iter()
                        .filter_map(|role| latest(containers, role, t))
                        .find(|l| l.state == ContainerState::Running);
                    match running {
                        Some(l) => Some(l.id.clone()),
                        None => {
                            // As the kubelet's `getTargetID`; the next sync
                            // tries again.
                            let e = format!("unable to find target container {t}");
                            self.container_failed(
                                Role::Ephemeral,
                                &c.name,
                                "CreateContainerConfigError",
                                &e,
                            );
                            continue;
                        }
                    }
                }
            };
            self.create_and_start(pod, Role::Ephemeral, &c, 0, sandbox, pid_target.as_deref())
                .await?;
        }
        Ok(())
    }
}
