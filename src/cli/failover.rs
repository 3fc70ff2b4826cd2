//! The bosun CLI's side of a cluster with several control planes: the
//! kubeconfig's cluster entry names one `server` (all kubectl reads) and,
//! in an extension kubectl keeps but ignores, the others
//! ([`SERVERS_EXTENSION`]: `{"servers": ["https://HOST:PORT", ...]}`). The
//! CLI uses the `server` when it accepts connections and otherwise the
//! first of the others that does, so `bosun get ...` works while the API
//! server the kubeconfig names is down. kubectl users point it at another
//! one by hand (`kubectl config set-cluster NAME --server URL`) or put a
//! load balancer in front, as kubeadm's HA setup expects.

use std::time::Duration;

use kube::config::{Kubeconfig, NamedExtension};

/// The cluster extension listing the other control planes.
pub const SERVERS_EXTENSION: &str = "bosun.io/servers";

/// How long one control plane gets to accept a connection.
const DIAL_TIMEOUT: Duration = Duration::from_secs(2);

/// The extension entry naming `servers`.
pub fn servers_extension(servers: &[String]) -> NamedExtension {
    NamedExtension {
        name: SERVERS_EXTENSION.into(),
        extension: serde_json::json!({ "servers": servers }),
    }
}

/// The other control planes of the cluster of `context` (default: the
/// current one), as the extension lists them; none without it.
pub fn other_servers(kc: &Kubeconfig, context: Option<&str>) -> Vec<String> {
    let Some(context) = context.or(kc.current_context.as_deref()) else {
        return Vec::new();
    };
    let cluster = kc
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone());
    kc.clusters
        .iter()
        .filter(|c| Some(&c.name) == cluster.as_ref())
        .filter_map(|c| c.cluster.as_ref()?.extensions.as_ref())
        .flatten()
        .filter(|e| e.name == SERVERS_EXTENSION)
        .filter_map(|e| e.extension["servers"].as_array())
        .flatten()
        .filter_map(|s| s.as_str().map(String::from))
        .collect()
}

/// `server` if it accepts a TCP connection, else the first of `others`
/// that does, else `server` (whose error the request then reports).
pub async fn live_server(server: &http::Uri, others: &[String]) -> http::Uri {
    let candidates = std::iter::once(server.clone())
        .chain(others.iter().filter_map(|s| s.parse::<http::Uri>().ok()));
    for candidate in candidates {
        let Some(authority) = candidate.authority() else {
            continue;
        };
        let address = match authority.port_u16() {
            Some(_) => authority.to_string(),
            None => format!("{}:443", authority.host()),
        };
        let dial = tokio::net::TcpStream::connect(address);
        if let Ok(Ok(_)) = tokio::time::timeout(DIAL_TIMEOUT, dial).await {
            return candidate;
        }
    }
    server.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig(extension: &str) -> Kubeconfig {
        let text = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: bosun-x\n\
             clusters:\n- name: bosun-x\n  cluster:\n    server: https://127.0.0.1:1\n{extension}\
             - name: other\n  cluster:\n    server: https://127.0.0.1:2\n\
             contexts:\n- name: bosun-x\n  context: {{cluster: bosun-x, user: u}}\n\
             users:\n- name: u\n  user: {{token: t}}\n"
        );
        Kubeconfig::from_yaml(&text).unwrap()
    }

    #[test]
    fn the_other_servers_come_from_the_current_clusters_extension() {
        let kc = kubeconfig(
            "    extensions:\n    - name: bosun.io/servers\n      extension:\n        servers: [\"https://127.0.0.1:3\", \"https://127.0.0.1:4\"]\n",
        );
        assert_eq!(
            other_servers(&kc, None),
            ["https://127.0.0.1:3", "https://127.0.0.1:4"]
        );
        assert!(other_servers(&kubeconfig(""), None).is_empty());
    }

    #[tokio::test]
    async fn a_server_that_refuses_is_passed_over_for_one_that_accepts() {
        let live = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let live_url = format!("https://{}", live.local_addr().unwrap());
        let others = [live_url.clone()];
        let dead = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let dead_url: http::Uri = format!("https://{}", dead.local_addr().unwrap())
            .parse()
            .unwrap();
        assert_eq!(live_server(&dead_url, &others).await, dead_url);
        drop(dead);
        assert_eq!(
            live_server(&dead_url, &others).await.to_string(),
            format!("{live_url}/")
        );
    }
}
