//! Connecting to the cluster: which kubeconfig, which context, which
//! namespace; plus the requests every verb shares.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{anyhow, Context as _, Result};
use futures::{AsyncBufReadExt, Stream, StreamExt};
use kube::api::{Api, DynamicObject};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::ApiResource;
use kube::Client;
use serde_json::Value;

use bosun::resources::ResourceInfo;

use super::table::{Table, TABLE_ACCEPT};

/// The server URL of the current connection, for the "connection refused" message.
pub static SERVER: OnceLock<String> = OnceLock::new();

pub fn home_dir() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// `~/.bosun/kubeconfig`: where `bosun up` writes the kubeconfig.
pub fn bosun_kubeconfig() -> PathBuf {
    home_dir().join(".bosun").join("kubeconfig")
}

/// The kubeconfig to read: `--kubeconfig`, else `$KUBECONFIG` (its first
/// entry), else `~/.bosun/kubeconfig` if it exists, else `~/.kube/config`.
pub fn kubeconfig_path(explicit: Option<&Path>) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_path_buf();
    }
    if let Some(env) = std::env::var_os("KUBECONFIG") {
        if let Some(first) = std::env::split_paths(&env).find(|p| !p.as_os_str().is_empty()) {
            return first;
        }
    }
    let bosun = bosun_kubeconfig();
    if bosun.exists() {
        return bosun;
    }
    home_dir().join(".kube").join("config")
}

/// Flags every verb shares.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    pub namespace: Option<String>,
}

/// A connection and the namespace verbs act in.
#[derive(Clone)]
pub struct Ctx {
    pub client: Client,
    /// The same API without kube's automatic retries of 429/503/504, for
    /// requests whose refusals the command reports and retries itself
    /// (drain's evictions, as kubectl's).
    pub client_no_retry: Client,
    pub namespace: String,
}

/// `ApiResource` for one entry of bosun's resource table.
pub fn api_resource(info: &ResourceInfo) -> ApiResource {
    ApiResource {
        group: info.group.to_string(),
        version: info.version.to_string(),
        api_version: info.api_version(),
        kind: info.kind.to_string(),
        plural: info.plural.to_string(),
    }
}

/// Appends a query string built from non-empty pairs.
pub fn with_query(path: &str, pairs: &[(&str, &str)]) -> String {
    let mut out = path.to_string();
    let mut first = !path.contains('?');
    for (k, v) in pairs.iter().filter(|(_, v)| !v.is_empty()) {
        out.push(if first { '?' } else { '&' });
        first = false;
        out.push_str(k);
        out.push('=');
        out.push_str(&encode(v));
    }
    out
}

fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

impl Ctx {
    pub async fn connect(opts: &ConnectOptions) -> Result<Ctx> {
        let path = kubeconfig_path(opts.kubeconfig.as_deref());
        if !path.exists() {
            return Err(anyhow!(
                "no kubeconfig at {} (start a cluster with `bosun up`, or pass --kubeconfig)",
                path.display()
            ));
        }
        let kc = Kubeconfig::read_from(&path)
            .with_context(|| format!("reading kubeconfig {}", path.display()))?;
        let options = KubeConfigOptions {
            context: opts.context.clone(),
            ..Default::default()
        };
        let servers = super::failover::other_servers(&kc, opts.context.as_deref());
        let mut config = kube::Config::from_custom_kubeconfig(kc, &options)
            .await
            .with_context(|| format!("loading kubeconfig {}", path.display()))?;
        if !servers.is_empty() {
            config.cluster_url = super::failover::live_server(&config.cluster_url, &servers).await;
        }
        let _ = SERVER.set(
            config
                .cluster_url
                .authority()
                .map(|a| a.to_string())
                .unwrap_or_else(|| config.cluster_url.to_string()),
        );
        let namespace = opts
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let mut once = config.clone();
        once.default_retry = false;
        let client = Client::try_from(config).context("building the API client")?;
        let client_no_retry = Client::try_from(once).context("building the API client")?;
        Ok(Ctx {
            client,
            client_no_retry,
            namespace,
        })
    }

    /// The namespace to use for `info`: None for cluster-scoped resources.
    pub fn ns_for<'a>(&'a self, info: &ResourceInfo, explicit: Option<&'a str>) -> Option<&'a str> {
        info.namespaced.then(|| explicit.unwrap_or(&self.namespace))
    }

    pub fn api(&self, info: &ResourceInfo, namespace: Option<&str>) -> Api<DynamicObject> {
        let ar = api_resource(info);
        match namespace {
            Some(ns) if info.namespaced => Api::namespaced_with(self.client.clone(), ns, &ar),
            _ => Api::all_with(self.client.clone(), &ar),
        }
    }

    /// Path of one object.
    pub fn object_path(info: &ResourceInfo, namespace: Option<&str>, name: &str) -> String {
        format!("{}/{}", info.collection_path(namespace), encode(name))
    }

    /// PATCH of one object (or subresource) with a JSON merge patch, or a
    /// strategic merge patch when `strategic`; returns the object.
    pub async fn patch_json(
        &self,
        path: &str,
        strategic: bool,
        patch: &Value,
    ) -> Result<Value, kube::Error> {
        let content_type = if strategic {
            "application/strategic-merge-patch+json"
        } else {
            "application/merge-patch+json"
        };
        self.request_json(
            http::Method::PATCH,
            path,
            None,
            Some(content_type),
            Some(patch),
        )
        .await
    }

    /// A request with JSON body (or none); returns the parsed response.
    pub async fn request_json(
        &self,
        method: http::Method,
        path: &str,
        accept: Option<&str>,
        content_type: Option<&str>,
        body: Option<&Value>,
    ) -> Result<Value, kube::Error> {
        let mut req = http::Request::builder().method(method).uri(path);
        if let Some(a) = accept {
            req = req.header(http::header::ACCEPT, a);
        }
        if let Some(ct) = content_type {
            req = req.header(http::header::CONTENT_TYPE, ct);
        }
        let body = body
            .map(|b| serde_json::to_vec(b).expect("JSON values serialize"))
            .unwrap_or_default();
        let req = req.body(body).map_err(kube::Error::HttpError)?;
        let text = self.client.request_text(req).await?;
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text).map_err(kube::Error::SerdeError)
    }

    pub async fn get_json(&self, path: &str) -> Result<Value, kube::Error> {
        self.request_json(http::Method::GET, path, None, None, None)
            .await
    }

    /// GET `path` as a server-side Table.
    pub async fn get_table(&self, path: &str) -> Result<Table, kube::Error> {
        let v = self
            .request_json(http::Method::GET, path, Some(TABLE_ACCEPT), None, None)
            .await?;
        serde_json::from_value(v).map_err(kube::Error::SerdeError)
    }

    /// Opens a watch at `path` (which must carry `watch=true`) and yields
    /// `(type, object)` per event line.
    pub async fn watch_lines(
        &self,
        path: &str,
        accept: Option<&str>,
    ) -> Result<impl Stream<Item = Result<(String, Value)>> + use<>, kube::Error> {
        let mut req = http::Request::builder()
            .method(http::Method::GET)
            .uri(path)
            .header(http::header::ACCEPT_ENCODING, "identity");
        if let Some(a) = accept {
            req = req.header(http::header::ACCEPT, a);
        }
        let req = req.body(Vec::new()).map_err(kube::Error::HttpError)?;
        let reader = self.client.request_stream(req).await?;
        Ok(reader.lines().filter_map(|line| async move {
            let line = match line {
                Ok(l) => l,
                Err(e) => return Some(Err(anyhow!("reading watch events: {e}"))),
            };
            if line.trim().is_empty() {
                return None;
            }
            let v: Value = match serde_json::from_str(&line) {
                Ok(v) => v,
                Err(e) => return Some(Err(anyhow!("bad watch event {line:?}: {e}"))),
            };
            let kind = v["type"].as_str().unwrap_or_default().to_string();
            if kind == "ERROR" {
                let status: kube::core::Status =
                    serde_json::from_value(v["object"].clone()).unwrap_or_default();
                return Some(Err(kube::Error::Api(Box::new(status)).into()));
            }
            Some(Ok((kind, v["object"].clone())))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_skip_empty_values_and_encode() {
        assert_eq!(
            with_query(
                "/api/v1/pods",
                &[
                    ("labelSelector", "app=nginx,tier in (a)"),
                    ("fieldSelector", "")
                ]
            ),
            "/api/v1/pods?labelSelector=app%3Dnginx%2Ctier%20in%20%28a%29"
        );
        assert_eq!(
            with_query("/x?watch=true", &[("resourceVersion", "7")]),
            "/x?watch=true&resourceVersion=7"
        );
    }
}
