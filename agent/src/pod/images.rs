//! A container's image, as the kubelet's image manager
//! (`EnsureImageExists`) handles it: used if present and the pull policy
//! allows, else pulled, with image-pull back-off after a failed pull.

use std::time::Instant;

use k8s_openapi::api::core::v1::Container;

use super::backoff::BackoffKey;
use super::worker_state::PodWorker;
use crate::events::PodEvent;
use crate::runtime::{Role, RuntimeError};

impl PodWorker {
    /// Pulls the image as the policy says; false (with a waiting reason)
    /// if it is not there to use.
    pub(super) async fn ensure_image(
        &mut self,
        role: Role,
        c: &Container,
    ) -> Result<bool, RuntimeError> {
        let image = c.image.clone().unwrap_or_default();
        let policy = c
            .image_pull_policy
            .clone()
            .unwrap_or_else(|| bosun::defaults::default_pull_policy(&image).to_string());
        let present = self.rt.image_id(&image).await?.is_some();
        match policy.as_str() {
            "Never" if !present => {
                let message =
                    format!("Container image \"{image}\" is not present with pull policy of Never");
                self.record_and_wait(
                    PodEvent::warning("ErrImageNeverPull", message.clone()).about(role, &c.name),
                    &c.name,
                    "ErrImageNeverPull",
                    message,
                );
                return Ok(false);
            }
            "IfNotPresent" | "Never" if present => {
                self.record(
                    PodEvent::normal(
                        "Pulled",
                        format!("Container image \"{image}\" already present on machine"),
                    )
                    .about(role, &c.name),
                );
                return Ok(true);
            }
            _ => {}
        }
        let key = BackoffKey::Pull(c.name.clone());
        let now = Instant::now();
        if self.backoff.waiting(&key, now).is_some() {
            let message = format!("Back-off pulling image \"{image}\"");
            self.set_waiting(&c.name, "ImagePullBackOff", message);
            return Ok(false);
        }
        self.record(
            PodEvent::normal("Pulling", format!("Pulling image \"{image}\"")).about(role, &c.name),
        );
        let started = Instant::now();
        let img = image.clone();
        match self
            .rt
            .pull_image(&image, &move |line| tracing::debug!(image = %img, "{line}"))
            .await
        {
            Ok(_) => {
                crate::observe::image_pulled(started.elapsed());
                self.backoff.forget(&key);
                self.record(
                    PodEvent::normal(
                        "Pulled",
                        format!(
                            "Successfully pulled image \"{image}\" in {:?}",
                            started.elapsed()
                        ),
                    )
                    .about(role, &c.name),
                );
                Ok(true)
            }
            Err(e) => {
                self.backoff.start(key, now, false);
                let message = format!("Failed to pull image \"{image}\": {e}");
                self.record_and_wait(
                    PodEvent::warning("Failed", message.clone()).about(role, &c.name),
                    &c.name,
                    "ErrImagePull",
                    message,
                );
                Ok(false)
            }
        }
    }
}
