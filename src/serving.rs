//! What bosun's two servers (the control plane's API and the agent's
//! stream API) share: their HTTPS listener and its limits
//! ([`connections`]), their log setup, the bearer token check, the query
//! string as Kubernetes clients send it, the `Status` object every
//! error answers with, and the TLS client that trusts one agent's
//! published certificate.

use std::sync::Arc;

pub mod connections;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use serde_json::{json, Value};

/// How the servers write their log lines (`--log-format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event; coloured only on a terminal.
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `target`,
    /// `fields.message` and the event's other fields), for log shippers.
    Json,
}

/// Logs to stderr in `format`, filtered by `BOSUN_LOG` (default `info`).
/// Text is coloured only when stderr is a terminal, so a log file (`bosun
/// up`'s `control.log`, a supervisor's capture) holds plain text.
pub fn init_logging(format: LogFormat) {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("BOSUN_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder.json().with_ansi(false).init(),
    }
}

/// The hard bound on a shutdown: the process exits `after` from now, with
/// a warning, unless it ended before (a task that never yields, a runtime
/// that cannot stop). A thread of its own, so a busy runtime cannot hold it
/// up.
pub fn exit_after(after: std::time::Duration) {
    let spawned = std::thread::Builder::new()
        .name("shutdown-deadline".into())
        .spawn(move || {
            std::thread::sleep(after);
            tracing::warn!(after = ?after, "still not stopped after SIGTERM; exiting anyway");
            std::process::exit(1);
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "no thread to bound the shutdown");
    }
}

/// The subject (common name and organizations) of a client certificate
/// that the TLS handshake already checked against a trusted CA; the
/// control plane and the agents' stream API both authorize by it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerSubject {
    pub common_name: String,
    pub organizations: Vec<String>,
}

impl PeerSubject {
    /// The subject of a DER certificate.
    pub fn from_der(der: &[u8]) -> Option<PeerSubject> {
        let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
        let subject = cert.subject();
        let common_name = subject
            .iter_common_name()
            .next()?
            .as_str()
            .ok()?
            .to_string();
        let organizations = subject
            .iter_organization()
            .filter_map(|o| o.as_str().ok().map(String::from))
            .collect();
        Some(PeerSubject {
            common_name,
            organizations,
        })
    }
}

/// The bearer token the request presents, if any.
pub fn bearer_token(headers: &http::HeaderMap) -> Option<&str> {
    headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
}

/// Whether the request's `Authorization: Bearer` token is `token` (never
/// when `token` is empty).
pub fn bearer_token_matches(token: &str, headers: &http::HeaderMap) -> bool {
    match bearer_token(headers) {
        // Every byte is compared so the time taken does not reveal a prefix.
        Some(t) if t.len() == token.len() && !token.is_empty() => {
            t.bytes()
                .zip(token.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
        }
        _ => false,
    }
}

/// The query's key/value pairs, decoded, in order, repeated keys kept
/// (exec's `command=sh&command=-c`).
pub fn query_pairs(uri: &http::Uri) -> Vec<(String, String)> {
    uri.query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default()
}

/// A `metav1.Status` of a request that succeeded without an object to
/// return (a binding, an eviction).
pub fn success_status(code: u16) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": code,
    })
}

/// A `metav1.Status` of a failed request.
pub fn failure_status(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_configured_token_is_accepted() {
        let mut headers = http::HeaderMap::new();
        assert!(!bearer_token_matches("secret", &headers));
        headers.insert(
            http::header::AUTHORIZATION,
            "Bearer secret".parse().unwrap(),
        );
        assert!(bearer_token_matches("secret", &headers));
        assert!(!bearer_token_matches("secreT", &headers));
        assert!(!bearer_token_matches("", &http::HeaderMap::new()));
        headers.insert(http::header::AUTHORIZATION, "Bearer ".parse().unwrap());
        assert!(!bearer_token_matches("", &headers));
    }

    #[test]
    fn queries_keep_repeated_keys_in_order_and_decode() {
        let uri: http::Uri = "/exec?command=sh&command=-c&command=echo%20hi&tty=true"
            .parse()
            .unwrap();
        assert_eq!(
            query_pairs(&uri),
            [
                ("command".to_string(), "sh".to_string()),
                ("command".into(), "-c".into()),
                ("command".into(), "echo hi".into()),
                ("tty".into(), "true".into()),
            ]
        );
        assert!(query_pairs(&"/healthz".parse().unwrap()).is_empty());
    }

    #[test]
    fn failures_are_status_objects() {
        let s = failure_status(404, "NotFound", "pods \"x\" not found");
        assert_eq!(
            (s["kind"].as_str(), s["status"].as_str(), s["code"].as_u64()),
            (Some("Status"), Some("Failure"), Some(404))
        );
    }
}

/// A TLS client configuration that accepts exactly one server certificate
/// (DER), as the control plane trusts the certificate an agent publishes
/// on its Node; any other is refused with `refusal`.
pub fn pinned_client_config(
    der: &[u8],
    refusal: &'static str,
) -> Result<rustls::ClientConfig, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(
        rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PinnedCertificate {
                der: Some(der.to_vec()),
                refusal,
                provider,
            }))
            .with_no_client_auth(),
    )
}

/// A TLS client configuration that accepts any server certificate (its
/// signature over the handshake is still checked), as kube-apiserver's
/// proxy transport does for `pods/proxy` and `services/proxy` with an
/// `https:` scheme (`InsecureSkipVerify`): a pod's certificate names no
/// address the API server could check.
pub fn any_certificate_client_config() -> Result<rustls::ClientConfig, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(
        rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PinnedCertificate {
                der: None,
                refusal: "unused",
                provider,
            }))
            .with_no_client_auth(),
    )
}

#[derive(Debug)]
struct PinnedCertificate {
    /// The one certificate accepted; `None` accepts any.
    der: Option<Vec<u8>>,
    refusal: &'static str,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for PinnedCertificate {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self
            .der
            .as_deref()
            .is_none_or(|der| end_entity.as_ref() == der)
        {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(self.refusal.into()))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
