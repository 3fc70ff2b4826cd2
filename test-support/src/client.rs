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
