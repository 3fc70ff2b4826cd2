//! The node's client certificate, renewed before it expires, as the
//! kubelet's certificate manager does (`--rotate-certificates`):
//!
//! - when the kubeconfig's user has a client certificate (a joined node's
//!   credential), a new key is made on this host at 80% of the
//!   certificate's lifetime and the control plane issues a certificate
//!   for it through a CertificateSigningRequest made with the current
//!   certificate (`bosun::bootstrap::csr`: csrapproving approves a node's
//!   request for its own name, as `selfnodeclient`), asking for the same
//!   lifetime as the current one (600 s at least, as the API requires;
//!   the control plane's `--cluster-signing-duration` caps it);
//! - the kubeconfig is rewritten whole or not at all (a temp file renamed
//!   over it), so a crash leaves the old or the new credential, never half;
//! - the agent's client is a [`Swappable`] one: every request goes through
//!   the client built from the newest credential, so new connections
//!   present the new certificate without a restart (open watches finish on
//!   the connection they have);
//! - a failed renewal is retried every tenth of the time left (1 to 30 s).

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use anyhow::{anyhow, Context as _};
use base64::Engine;
use futures::future::BoxFuture;
use kube::client::Body;

/// How long a renewal waits for its request to be issued before it is
/// retried.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The share of a certificate's lifetime after which it is renewed.
pub const RENEW_AT: f64 = 0.8;

/// When a certificate valid from `not_before` to `not_after` is renewed.
pub fn renew_at(not_before: SystemTime, not_after: SystemTime) -> SystemTime {
    let lifetime = not_after
        .duration_since(not_before)
        .unwrap_or(Duration::ZERO);
    not_before + lifetime.mul_f64(RENEW_AT)
}

/// How long to wait before retrying a failed renewal, with `left` until
/// the certificate expires.
pub fn retry_after(left: Duration) -> Duration {
    (left / 10).clamp(Duration::from_secs(1), Duration::from_secs(30))
}

/// A kube client whose requests go to the client of the newest
/// credential.
#[derive(Clone)]
pub struct Swappable(Arc<RwLock<kube::Client>>);

impl tower::Service<http::Request<Body>> for Swappable {
    type Response = http::Response<Body>;
    type Error = kube::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let client = self.0.read().expect("not poisoned").clone();
        Box::pin(async move { client.send(req).await })
    }
}

/// A certificate's subject common name and validity.
#[derive(Debug, Clone, PartialEq)]
pub struct Validity {
    pub common_name: String,
    pub not_before: SystemTime,
    pub not_after: SystemTime,
}

/// The common name and validity of a PEM certificate.
pub fn validity(pem: &str) -> anyhow::Result<Validity> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes())
        .map_err(|e| anyhow!("the client certificate is not PEM: {e}"))?;
    let cert = pem
        .parse_x509()
        .map_err(|e| anyhow!("the client certificate does not parse: {e}"))?;
    let at = |t: x509_parser::time::ASN1Time| {
        SystemTime::UNIX_EPOCH + Duration::from_secs(t.timestamp().max(0) as u64)
    };
    let common_name = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .ok_or_else(|| anyhow!("the client certificate has no common name"))?
        .to_string();
    Ok(Validity {
        common_name,
        not_before: at(cert.validity().not_before),
        not_after: at(cert.validity().not_after),
    })
}

/// Renews the certificate of the kubeconfig at `path`.
pub struct Rotation {
    path: PathBuf,
    current: Swappable,
    /// Where the client goes: the kubeconfig's server, or the agent's
    /// control-plane load balancer in its place.
    cluster_url: http::Uri,
}

/// The agent's client for the kubeconfig at `path` (read into `config`)
/// and, when its user has a client certificate, the [`Rotation`] that
/// keeps it valid.
pub fn client(
    path: &Path,
    config: kube::Config,
) -> anyhow::Result<(kube::Client, Option<Rotation>)> {
    let has_certificate = user_certificate(path).is_ok_and(|(cert, _)| !cert.is_empty());
    let default_ns = config.default_namespace.clone();
    let cluster_url = config.cluster_url.clone();
    let inner = kube::Client::try_from(config)?;
    if !has_certificate {
        return Ok((inner, None));
    }
    let current = Swappable(Arc::new(RwLock::new(inner)));
    let client = kube::Client::new(current.clone(), default_ns);
    Ok((
        client,
        Some(Rotation {
            path: path.to_path_buf(),
            current,
            cluster_url,
        }),
    ))
}

/// The user entry of the kubeconfig's current context.
fn current_user(doc: &serde_yaml::Value) -> anyhow::Result<usize> {
    let context = doc["current-context"].as_str().unwrap_or_default();
    let user = doc["contexts"]
        .as_sequence()
        .and_then(|cs| cs.iter().find(|c| c["name"].as_str() == Some(context)))
        .and_then(|c| c["context"]["user"].as_str())
        .ok_or_else(|| anyhow!("the kubeconfig has no current context with a user"))?;
    doc["users"]
        .as_sequence()
        .and_then(|us| us.iter().position(|u| u["name"].as_str() == Some(user)))
        .ok_or_else(|| anyhow!("the kubeconfig has no user {user:?}"))
}

/// The client certificate and key (PEM) of the kubeconfig's user.
fn user_certificate(path: &Path) -> anyhow::Result<(String, String)> {
    let text = std::fs::read_to_string(path)?;
    let doc: serde_yaml::Value = serde_yaml::from_str(&text)?;
    let user = &doc["users"][current_user(&doc)?]["user"];
    let field = |name: &str| -> anyhow::Result<String> {
        let b64 = user[name].as_str().unwrap_or_default();
        let bytes = base64::engine::general_purpose::STANDARD.decode(b64)?;
        Ok(String::from_utf8(bytes)?)
    };
    Ok((field("client-certificate-data")?, field("client-key-data")?))
}

/// Writes the new certificate and key into the kubeconfig at `path`.
fn write_certificate(path: &Path, cert: &str, key: &str) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path)?;
    let mut doc: serde_yaml::Value = serde_yaml::from_str(&text)?;
    let at = current_user(&doc)?;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let user = &mut doc["users"][at]["user"];
    user["client-certificate-data"] = b64(cert).into();
    user["client-key-data"] = b64(key).into();
    bosun::files::write_atomically(path, &serde_yaml::to_string(&doc)?, 0o600)
        .with_context(|| format!("writing {}", path.display()))
}

impl Rotation {
    /// Renews the certificate whenever it is due, until `stop`.
    pub async fn run(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        loop {
            let wait = match user_certificate(&self.path).and_then(|(c, _)| validity(&c)) {
                Ok(v) => {
                    let due = renew_at(v.not_before, v.not_after);
                    due.duration_since(SystemTime::now())
                        .unwrap_or(Duration::ZERO)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "reading the node's client certificate");
                    Duration::from_secs(30)
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.changed() => return,
            }
            if let Err(e) = self.renew().await {
                let left = user_certificate(&self.path)
                    .and_then(|(c, _)| validity(&c))
                    .ok()
                    .and_then(|v| v.not_after.duration_since(SystemTime::now()).ok())
                    .unwrap_or(Duration::ZERO);
                let again = retry_after(left);
                tracing::warn!(error = %format!("{e:#}"), ?left, ?again, "renewing the node's client certificate failed");
                tokio::select! {
                    _ = tokio::time::sleep(again) => {}
                    _ = stop.changed() => return,
                }
            }
        }
    }

    /// One renewal: a new key here, its certificate from the control
    /// plane, the kubeconfig rewritten, the client swapped.
    async fn renew(&self) -> anyhow::Result<()> {
        let (cert, _) = user_certificate(&self.path)?;
        let old = validity(&cert)?;
        let node = old
            .common_name
            .strip_prefix(bosun::bootstrap::NODE_USER_PREFIX)
            .ok_or_else(|| {
                anyhow!(
                    "the client certificate is not a node's: {}",
                    old.common_name
                )
            })?;
        let (key, csr) = bosun::bootstrap::node_certificate_request(node)?;
        let lifetime = old
            .not_after
            .duration_since(old.not_before)
            .unwrap_or_default()
            .as_secs();
        // At least what the API takes; the control plane's
        // --cluster-signing-duration may still shorten it.
        let least = bosun::validation::certificates::MIN_EXPIRATION_SECONDS as u64;
        let expiration = lifetime.clamp(least, i32::MAX as u64) as i32;
        let client = self.current.0.read().expect("not poisoned").clone();
        let new_cert = &bosun::bootstrap::csr::request_certificate(
            &client,
            &csr,
            Some(expiration),
            REQUEST_TIMEOUT,
        )
        .await
        .context("requesting the renewed certificate")?;
        let new = validity(new_cert)?;
        write_certificate(&self.path, new_cert, &key.serialize_pem())?;
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.path)?;
        let mut config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
        config.cluster_url = self.cluster_url.clone();
        *self.current.0.write().expect("not poisoned") = kube::Client::try_from(config)?;
        let until = chrono::DateTime::<chrono::Utc>::from(new.not_after).to_rfc3339();
        tracing::info!(node = %old.common_name, %until, "renewed the node's client certificate");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewal_is_due_at_80_percent_of_the_lifetime() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert_eq!(
            renew_at(t0, t0 + Duration::from_secs(100)),
            t0 + Duration::from_secs(80)
        );
        let year = Duration::from_secs(365 * 86400);
        assert_eq!(renew_at(t0, t0 + year), t0 + year.mul_f64(0.8));
        // A certificate whose end is before its start is due at once.
        assert_eq!(renew_at(t0, t0 - Duration::from_secs(5)), t0);
    }

    #[test]
    fn retries_come_every_tenth_of_the_time_left_within_bounds() {
        assert_eq!(
            retry_after(Duration::from_secs(100)),
            Duration::from_secs(10)
        );
        assert_eq!(retry_after(Duration::ZERO), Duration::from_secs(1));
        assert_eq!(
            retry_after(Duration::from_secs(86400)),
            Duration::from_secs(30)
        );
    }

    #[test]
    fn the_certificate_is_read_from_and_written_to_the_current_user() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.kubeconfig");
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "system:node:w1");
        let cert = params.self_signed(&key).unwrap().pem();
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{{name: k, cluster: {{server: 'https://127.0.0.1:1'}}}}]\ncontexts: [{{name: c, context: {{cluster: k, user: system:node:w1}}}}]\nusers:\n- {{name: other, user: {{token: t}}}}\n- name: system:node:w1\n  user: {{client-certificate-data: {}, client-key-data: {}}}\n",
                b64(&cert),
                b64(&key.serialize_pem())
            ),
        )
        .unwrap();
        let (read, _) = user_certificate(&path).unwrap();
        assert_eq!(read, cert);
        assert_eq!(validity(&read).unwrap().common_name, "system:node:w1");
        write_certificate(&path, "NEW CERT", "NEW KEY").unwrap();
        assert_eq!(
            user_certificate(&path).unwrap(),
            ("NEW CERT".to_string(), "NEW KEY".to_string())
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("token: t"), "the other user is kept: {text}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
