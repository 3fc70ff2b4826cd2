//! A tiny in-cluster client, as a controller running in a pod starts:
//! kube-rs `Client::try_default()` finds the API by the pod's
//! `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT` and
//! authenticates with the service account token, CA and namespace mounted
//! at `/var/run/secrets/kubernetes.io/serviceaccount`. It then lists the
//! pods of its namespace and prints, one `key=value` a line:
//!
//! ```text
//! server=https://10.96.0.1/
//! namespace=default
//! subject=system:serviceaccount:default:default
//! pods=api-client,other
//! ```
//!
//! or `error=<what failed>` and exits 1. `scripts/build-images.sh
//! --in-cluster-client` puts it into the image `bosun.local/in-cluster-client`,
//! which the agent's service account test runs.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::Client;

const TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/// The `sub` claim of the mounted token (who the API takes us for).
fn subject() -> Option<String> {
    use base64::Engine;
    let token = std::fs::read_to_string(TOKEN).ok()?;
    let payload = token.trim().split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    claims["sub"].as_str().map(String::from)
}

async fn run() -> Result<(), String> {
    let config = kube::Config::infer()
        .await
        .map_err(|e| format!("no in-cluster config: {e}"))?;
    println!("server={}", config.cluster_url);
    println!("namespace={}", config.default_namespace);
    println!("subject={}", subject().unwrap_or_default());
    let client = Client::try_default()
        .await
        .map_err(|e| format!("Client::try_default: {e}"))?;
    let pods: Api<Pod> = Api::default_namespaced(client);
    let list = pods
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("listing pods: {e}"))?;
    let names: Vec<String> = list
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    println!("pods={}", names.join(","));
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    if let Err(e) = run().await {
        println!("error={e}");
        std::process::exit(1);
    }
}
