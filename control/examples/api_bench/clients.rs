//! HTTP clients for bosun (TLS, token) and etcd (plain), loopback only.

use super::*;

/// Refuses anything but a loopback address: this tool loads a server hard.
pub(crate) fn require_loopback(uri: &http::Uri) -> anyhow::Result<()> {
    let host = uri.host().context("the URL has no host")?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if !loopback {
        bail!("{uri} is not a loopback address; this benchmark only loads a local server");
    }
    Ok(())
}

pub(crate) async fn bosun_config(args: &Args) -> anyhow::Result<Config> {
    let kc = Kubeconfig::read_from(&args.kubeconfig)
        .with_context(|| format!("reading {}", args.kubeconfig.display()))?;
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    require_loopback(&config.cluster_url)?;
    Ok(config)
}

/// One client with its own connection pool (so one connection per worker).
pub(crate) fn new_client(config: &Config) -> anyhow::Result<Client> {
    Ok(Client::try_from(config.clone())?)
}

pub(crate) const JSON: &str = "application/json";

/// Sends one request and reads the whole response; an unexpected status is an error.
pub(crate) async fn call(
    client: &Client,
    method: Method,
    uri: &str,
    content_type: &str,
    body: Vec<u8>,
    want: StatusCode,
) -> Result<Bytes, String> {
    call_as(client, method, uri, content_type, JSON, body, want).await
}

/// [`call`], asking for the response in `accept`.
pub(crate) async fn call_as(
    client: &Client,
    method: Method,
    uri: &str,
    content_type: &str,
    accept: &str,
    body: Vec<u8>,
    want: StatusCode,
) -> Result<Bytes, String> {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header(http::header::CONTENT_TYPE, content_type)
        .header(http::header::ACCEPT, accept)
        .body(Body::from(body))
        .map_err(|e| e.to_string())?;
    let resp = client.send(req).await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let bytes = resp
        .into_body()
        .collect_bytes()
        .await
        .map_err(|e| e.to_string())?;
    if status != want {
        let text = String::from_utf8_lossy(&bytes);
        return Err(format!(
            "{status}: {}",
            text.chars().take(300).collect::<String>()
        ));
    }
    Ok(bytes)
}

/// Creates the namespace `ns`.
pub(crate) async fn create_namespace(admin: &Client, ns: &str) -> anyhow::Result<()> {
    let body = serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": ns}}))?;
    call(
        admin,
        Method::POST,
        "/api/v1/namespaces",
        JSON,
        body,
        StatusCode::CREATED,
    )
    .await
    .map_err(|e| anyhow::anyhow!("creating namespace {ns}: {e}"))?;
    Ok(())
}

/// A GET that must answer 200.
pub(crate) async fn get(client: &Client, uri: &str) -> Result<Bytes, String> {
    call(client, Method::GET, uri, JSON, Vec::new(), StatusCode::OK).await
}

/// Opens one connection per client before a phase, so no TLS handshake is timed.
pub(crate) async fn warm_up(clients: &[Arc<Worker>], uri: &str) -> anyhow::Result<()> {
    let calls = clients.iter().map(|w| get(&w.client, uri));
    for r in futures::future::join_all(calls).await {
        r.map_err(|e| anyhow::anyhow!("warm-up request to {uri}: {e}"))?;
    }
    Ok(())
}

/// One benchmark client and what it wrote.
pub(crate) struct Worker {
    pub(crate) client: Client,
    /// Names (bosun) or keys with their mod revision (etcd) this worker created.
    pub(crate) created: Mutex<Vec<(String, i64)>>,
}

pub(crate) fn workers(config: &Config, n: usize) -> anyhow::Result<Vec<Arc<Worker>>> {
    (0..n)
        .map(|_| {
            Ok(Arc::new(Worker {
                client: new_client(config)?,
                created: Mutex::new(Vec::new()),
            }))
        })
        .collect()
}
