//! What the agent waits for when it starts. After a host reboot the
//! agent may well start before Docker answers and before the control
//! plane does; as the kubelet does, it waits for both with back-off
//! instead of exiting, saying every so often what it waits for, and
//! reports a runtime that does not answer in its Node's Ready condition
//! once the control plane can hear it.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};

/// Waits that start short and double up to a cap.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
    max: Duration,
    steps: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            next: Duration::from_millis(250),
            max: Duration::from_secs(10),
            steps: 0,
        }
    }
}

impl Backoff {
    /// The next wait.
    pub fn step(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(self.max);
        self.steps += 1;
        d
    }

    /// Whether the wait just taken is worth a log line: the first few,
    /// then about one a minute.
    pub fn worth_saying(&self) -> bool {
        self.steps <= 3 || self.steps.is_multiple_of(6)
    }
}

/// Whether an API error may go away by itself: the server not answering,
/// overloaded or failing, as opposed to a refusal (401, 403, 404, 422).
pub fn is_transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 429 || s.code >= 500,
        _ => true,
    }
}

/// Runs `attempt` until it succeeds or fails for good, waiting with
/// back-off while the control plane does not answer.
pub async fn until_answered<T, F, Fut>(what: &str, mut attempt: F) -> kube::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = kube::Result<T>>,
{
    let mut backoff = Backoff::default();
    loop {
        match attempt().await {
            Ok(v) => {
                if backoff.steps > 0 {
                    tracing::info!("the control plane answers: {what}");
                }
                return Ok(v);
            }
            Err(e) if is_transient(&e) => {
                let wait = backoff.step();
                if backoff.worth_saying() {
                    tracing::warn!(error = %e, "waiting for the control plane ({what}); retrying in {wait:?}");
                }
                tokio::time::sleep(wait).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// The cluster's service range as the control plane publishes it in
/// kube-public's cluster-info (readable by anyone), or None if it does
/// not (a control plane older than that key).
pub async fn published_service_range(client: &Client) -> kube::Result<Option<String>> {
    published(client, bosun::bootstrap::CLUSTER_INFO_SERVICE_RANGE).await
}

/// The cluster's pod network (`--cluster-cidr`) as cluster-info
/// publishes it, or None from a control plane older than that key.
pub async fn published_cluster_cidr(client: &Client) -> kube::Result<Option<String>> {
    published(client, bosun::bootstrap::CLUSTER_INFO_CLUSTER_CIDR).await
}

async fn published(client: &Client, key: &str) -> kube::Result<Option<String>> {
    let api: Api<ConfigMap> =
        Api::namespaced(client.clone(), bosun::bootstrap::CLUSTER_INFO_NAMESPACE);
    let cm = until_answered("reading cluster-info", || {
        api.get_opt(bosun::bootstrap::CLUSTER_INFO)
    })
    .await?;
    Ok(cm
        .and_then(|c| c.data)
        .and_then(|mut d| d.remove(key))
        .filter(|r| !r.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_cap() {
        let mut b = Backoff::default();
        let waits: Vec<u128> = (0..8).map(|_| b.step().as_millis()).collect();
        assert_eq!(waits, [250, 500, 1000, 2000, 4000, 8000, 10000, 10000]);
    }

    #[test]
    fn refusals_are_final_and_silence_is_not() {
        let api = |code: u16| {
            kube::Error::Api(
                kube::core::Status::failure("x", "y")
                    .with_code(code)
                    .boxed(),
            )
        };
        assert!(!is_transient(&api(403)));
        assert!(!is_transient(&api(404)));
        assert!(is_transient(&api(503)));
        assert!(is_transient(&api(429)));
    }
}
