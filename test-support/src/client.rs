//! A kube client for a test cluster, from its admin kubeconfig.

use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// The client configuration of `kubeconfig`'s current context.
pub async fn config(kubeconfig: &Path) -> Config {
    let kc = Kubeconfig::read_from(kubeconfig).expect("reading the kubeconfig");
    Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("a client config from the kubeconfig")
}

/// A client of `kubeconfig`'s current context.
pub async fn client(kubeconfig: &Path) -> Client {
    Client::try_from(config(kubeconfig).await).expect("a client")
}

/// The same without kube-rs's retries of 429, 503 and 504 (with back-off
/// up to minutes): for tests that assert such an answer, as `bosun drain`
/// does for its evictions.
pub async fn client_no_retry(kubeconfig: &Path) -> Client {
    let mut config = config(kubeconfig).await;
    config.default_retry = false;
    Client::try_from(config).expect("a client")
}
