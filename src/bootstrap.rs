//! Joining hosts, the parts the CLI and the control plane share: bootstrap
//! tokens in kubeadm's format (`[a-z0-9]{6}.[a-z0-9]{16}`, the id public,
//! the secret not) kept as `bootstrap.kubernetes.io/token` Secrets in
//! kube-system, and the CA hash a joining host pins the cluster's CA with
//! (kubeadm's `--discovery-token-ca-cert-hash`: `sha256:` and the hex
//! SHA-256 of the CA certificate's SubjectPublicKeyInfo).

use base64::Engine;
use chrono::{DateTime, Utc};
use rand::Rng;
use serde_json::{json, Value};

pub mod csr;

/// The Secret type of bootstrap tokens.
pub const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
/// Where bootstrap token Secrets live, named `bootstrap-token-<id>`.
pub const NAMESPACE: &str = "kube-system";
pub const SECRET_PREFIX: &str = "bootstrap-token-";
/// The group every bootstrap token's user is in.
pub const BOOTSTRAPPERS_GROUP: &str = "system:bootstrappers";
/// The ConfigMap in kube-public anyone may read, with a kubeconfig naming
/// the server and its CA (kubeadm's cluster-info).
pub const CLUSTER_INFO_NAMESPACE: &str = "kube-public";
pub const CLUSTER_INFO: &str = "cluster-info";
/// The key of cluster-info that holds the cluster's service range (the
/// control plane's `--service-cluster-ip-range`), which `bosun join` gives
/// the agent's service proxy.
pub const CLUSTER_INFO_SERVICE_RANGE: &str = "serviceClusterIPRange";
/// The key of cluster-info that holds the cluster's pod network (the
/// control plane's `--cluster-cidr`): agents route only to Node pod
/// ranges inside it.
pub const CLUSTER_INFO_CLUSTER_CIDR: &str = "clusterCIDR";
/// The subject of a node's client certificate.
pub const NODES_GROUP: &str = "system:nodes";
pub const NODE_USER_PREFIX: &str = "system:node:";

/// A new key for node `node` and the PEM certificate request a node puts
/// in its CertificateSigningRequest ([`csr`]): subject
/// `CN=system:node:<node>`, `O=system:nodes`, as the kubelet's bootstrap
/// and certificate rotation ask for its client certificate.
pub fn node_certificate_request(node: &str) -> anyhow::Result<(rcgen::KeyPair, String)> {
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, NODES_GROUP);
    params.distinguished_name.push(
        rcgen::DnType::CommonName,
        format!("{NODE_USER_PREFIX}{node}"),
    );
    let csr = params.serialize_request(&key)?.pem()?;
    Ok((key, csr))
}

const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
const ID_LEN: usize = 6;
const SECRET_LEN: usize = 16;

/// A bootstrap token: `<id>.<secret>`.
#[derive(Clone, PartialEq, Eq)]
pub struct BootstrapToken {
    pub id: String,
    pub secret: String,
}

impl std::fmt::Debug for BootstrapToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BootstrapToken({}.<secret>)", self.id)
    }
}

impl std::fmt::Display for BootstrapToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.id, self.secret)
    }
}

fn random_chars(n: usize) -> String {
    let mut rng = rand::rng();
    (0..n)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

fn in_alphabet(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| ALPHABET.contains(&b))
}

impl BootstrapToken {
    /// A fresh random token.
    pub fn generate() -> BootstrapToken {
        BootstrapToken {
            id: random_chars(ID_LEN),
            secret: random_chars(SECRET_LEN),
        }
    }

    /// Reads `<id>.<secret>`, as kubeadm checks it.
    pub fn parse(s: &str) -> Result<BootstrapToken, String> {
        match s.split_once('.') {
            Some((id, secret)) if in_alphabet(id, ID_LEN) && in_alphabet(secret, SECRET_LEN) => {
                Ok(BootstrapToken {
                    id: id.into(),
                    secret: secret.into(),
                })
            }
            _ => Err(format!(
                "the bootstrap token \"{}\" was not of the form \"[a-z0-9]{{6}}.[a-z0-9]{{16}}\"",
                redact(s)
            )),
        }
    }

    /// The name of the Secret holding the token.
    pub fn secret_name(&self) -> String {
        secret_name(&self.id)
    }

    /// The Secret that makes the token valid: usable for authentication
    /// (joining), until `expiration` if given.
    pub fn secret(&self, description: Option<&str>, expiration: Option<DateTime<Utc>>) -> Value {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let mut data = serde_json::Map::new();
        data.insert("token-id".into(), b64(&self.id).into());
        data.insert("token-secret".into(), b64(&self.secret).into());
        data.insert("usage-bootstrap-authentication".into(), b64("true").into());
        data.insert("auth-extra-groups".into(), b64(BOOTSTRAPPERS_GROUP).into());
        if let Some(d) = description {
            data.insert("description".into(), b64(d).into());
        }
        if let Some(t) = expiration {
            data.insert("expiration".into(), b64(&rfc3339(t)).into());
        }
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": self.secret_name(), "namespace": NAMESPACE},
            "type": SECRET_TYPE,
            "data": data,
        })
    }
}

/// Never prints a token's secret in an error.
fn redact(s: &str) -> String {
    match s.split_once('.') {
        Some((id, _)) => format!("{id}.<secret>"),
        None if s.chars().count() > 6 => format!("{}...", s.chars().take(6).collect::<String>()),
        None => s.to_string(),
    }
}

/// The Secret name of token `id`.
pub fn secret_name(id: &str) -> String {
    format!("{SECRET_PREFIX}{id}")
}

/// RFC 3339 in UTC to the second, as kubeadm writes `expiration`.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A field of a bootstrap token Secret's `data`, decoded.
pub fn secret_field(secret: &Value, key: &str) -> Option<String> {
    let raw = secret["data"][key].as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(raw).ok()?;
    String::from_utf8(bytes).ok()
}

/// When the token in `secret` expires, if it does.
pub fn expiration(secret: &Value) -> Option<DateTime<Utc>> {
    let text = secret_field(secret, "expiration")?;
    DateTime::parse_from_rfc3339(&text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// Whether the token in `secret` has expired at `now`. An `expiration`
/// that does not parse counts as expired, as kubeadm's token cleaner does.
pub fn is_expired(secret: &Value, now: DateTime<Utc>) -> bool {
    match secret_field(secret, "expiration") {
        None => false,
        Some(_) => expiration(secret).is_none_or(|t| now >= t),
    }
}

/// `sha256:<hex>` of the SubjectPublicKeyInfo of the first certificate in
/// `pem`, kubeadm's CA certificate hash.
pub fn ca_cert_hash(pem: &str) -> Result<String, String> {
    let (_, parsed) = x509_parser::pem::parse_x509_pem(pem.as_bytes())
        .map_err(|e| format!("the CA is not a PEM certificate: {e}"))?;
    let cert = parsed
        .parse_x509()
        .map_err(|e| format!("the CA certificate does not parse: {e}"))?;
    let digest = ring::digest::digest(&ring::digest::SHA256, cert.public_key().raw);
    Ok(format!("sha256:{}", hex(digest.as_ref())))
}

/// Checks the form of a `--ca-cert-hash` (`sha256:` and 64 hex digits)
/// and returns it in lower case.
pub fn parse_ca_cert_hash(s: &str) -> Result<String, String> {
    let hex_part = s.strip_prefix("sha256:").ok_or_else(|| {
        format!("--ca-cert-hash {s:?}: must start with \"sha256:\" (the only hash supported)")
    })?;
    if hex_part.len() != 64 || !hex_part.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "--ca-cert-hash {s:?}: expected \"sha256:\" and 64 hexadecimal digits"
        ));
    }
    Ok(format!("sha256:{}", hex_part.to_ascii_lowercase()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tokens_have_kubeadms_form_and_parse_back() {
        let t = BootstrapToken::generate();
        assert_eq!((t.id.len(), t.secret.len()), (6, 16));
        assert_eq!(BootstrapToken::parse(&t.to_string()).unwrap(), t);
        assert_ne!(BootstrapToken::generate(), t);
        assert_eq!(t.secret_name(), format!("bootstrap-token-{}", t.id));
    }

    #[test]
    fn malformed_tokens_are_refused_without_echoing_the_secret() {
        for bad in [
            "abcdef0123456789abcdef",
            "abcde.0123456789abcdef",
            "abcdef.0123456789abcde",
            "ABCDEF.0123456789abcdef",
            "abcdef.0123456789abcdeF",
            "abc-ef.0123456789abcdef",
            "",
        ] {
            let err = BootstrapToken::parse(bad).unwrap_err();
            assert!(err.contains("[a-z0-9]{6}.[a-z0-9]{16}"), "{err}");
            assert!(!err.contains("0123456789"), "secret echoed: {err}");
        }
    }

    #[test]
    fn the_secret_carries_the_token_and_its_expiry() {
        let t = BootstrapToken::parse("abcdef.0123456789abcdef").unwrap();
        let now = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let s = t.secret(Some("for node b"), Some(now + chrono::Duration::hours(24)));
        assert_eq!(s["type"], SECRET_TYPE);
        assert_eq!(s["metadata"]["name"], "bootstrap-token-abcdef");
        assert_eq!(s["metadata"]["namespace"], "kube-system");
        assert_eq!(secret_field(&s, "token-id").unwrap(), "abcdef");
        assert_eq!(
            secret_field(&s, "token-secret").unwrap(),
            "0123456789abcdef"
        );
        assert_eq!(secret_field(&s, "description").unwrap(), "for node b");
        assert_eq!(
            secret_field(&s, "expiration").unwrap(),
            "2026-01-02T00:00:00Z"
        );
        assert!(!is_expired(&s, now));
        assert!(!is_expired(&s, now + chrono::Duration::hours(23)));
        assert!(is_expired(&s, now + chrono::Duration::hours(24)));
        // No expiration: valid until deleted.
        assert!(!is_expired(&t.secret(None, None), now));
        // A garbled expiration is no licence to live forever.
        let mut garbled = s.clone();
        garbled["data"]["expiration"] = base64::engine::general_purpose::STANDARD
            .encode("tomorrow")
            .into();
        assert!(is_expired(&garbled, now));
    }

    #[test]
    fn ca_hashes_are_of_the_public_key_and_checked_for_form() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(Vec::<String>::new())
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let hash = ca_cert_hash(&cert.pem()).unwrap();
        let want = ring::digest::digest(
            &ring::digest::SHA256,
            &rcgen::PublicKeyData::subject_public_key_info(&key),
        );
        assert_eq!(hash, format!("sha256:{}", hex(want.as_ref())));
        assert_eq!(
            parse_ca_cert_hash(&hash.to_uppercase().replace("SHA256", "sha256")).unwrap(),
            hash
        );
        assert!(parse_ca_cert_hash("md5:abcd")
            .unwrap_err()
            .contains("sha256:"));
        assert!(parse_ca_cert_hash("sha256:abcd")
            .unwrap_err()
            .contains("64 hexadecimal"));
        assert!(ca_cert_hash("not pem").is_err());
    }
}
