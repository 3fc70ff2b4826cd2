//! The cluster's shared PKI handed to a further control plane, as
//! `kubeadm init --upload-certs` / `kubeadm join --control-plane
//! --certificate-key` do it:
//!
//! - on a control-plane host the admin uploads the files every control
//!   plane shares (`super::up::ha::SHARED_PKI`: CA key, service-account
//!   key, front-proxy CA, admin token) and the cluster's ranges, encrypted
//!   with AES-256-GCM under a fresh random key, as Secret
//!   `kube-system/bosun-certs`, and is shown the key (hex) once;
//! - the Secret is readable by bootstrap tokens (a Role and RoleBinding to
//!   `system:bootstrappers`) and is owned by a bootstrap token of its own
//!   that expires in [`UPLOAD_TTL`], so the garbage collector removes it
//!   with the token, as kubeadm's `kubeadm-certs`;
//! - `bosun join --control-plane` fetches it with a bootstrap token and
//!   opens it with `--certificate-key`: only whoever holds both (an admin
//!   gave them) gets the keys; the key never reaches the cluster.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _, Result};
use base64::Engine;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::client::Ctx;
use bosun::bootstrap::BootstrapToken;

/// The Secret holding the encrypted bundle.
pub const SECRET: &str = "bosun-certs";
const NAMESPACE: &str = "kube-system";
const ROLE: &str = "bosun:bosun-certs";
const AAD: &[u8] = b"bosun-certs/v1";
/// How long the uploaded bundle (and its token) lives.
pub const UPLOAD_TTL: Duration = Duration::from_secs(2 * 3600);

/// What a further control plane needs to be one of the cluster's.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Bundle {
    /// File name (in the data dir) to contents.
    pub files: BTreeMap<String, String>,
    #[serde(rename = "clusterCIDR")]
    pub cluster_cidr: String,
    #[serde(rename = "serviceCIDR")]
    pub service_cidr: String,
}

impl Bundle {
    /// The shared files of the control plane in `dir`.
    pub fn read(
        dir: &Path,
        names: &[&str],
        cluster_cidr: String,
        service_cidr: String,
    ) -> Result<Bundle> {
        let mut files = BTreeMap::new();
        for name in names {
            let path = dir.join(name);
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            files.insert(name.to_string(), text);
        }
        Ok(Bundle {
            files,
            cluster_cidr,
            service_cidr,
        })
    }
}

fn aead_key(key: &[u8]) -> Result<LessSafeKey> {
    let unbound = UnboundKey::new(&AES_256_GCM, key)
        .map_err(|_| anyhow!("--certificate-key: expected 64 hex digits (a 32-byte key)"))?;
    Ok(LessSafeKey::new(unbound))
}

/// `nonce || ciphertext+tag` of `bundle` under `key`.
pub fn seal(bundle: &Bundle, key: &[u8]) -> Result<Vec<u8>> {
    let mut nonce = [0u8; NONCE_LEN];
    SystemRandom::new()
        .fill(&mut nonce)
        .map_err(|_| anyhow!("no randomness for the nonce"))?;
    let mut data = serde_json::to_vec(bundle)?;
    aead_key(key)?
        .seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(AAD),
            &mut data,
        )
        .map_err(|_| anyhow!("encrypting the certificates"))?;
    let mut out = nonce.to_vec();
    out.extend(data);
    Ok(out)
}

/// The bundle sealed in `sealed`, if `key` opens it.
pub fn open(sealed: &[u8], key: &[u8]) -> Result<Bundle> {
    if sealed.len() < NONCE_LEN {
        bail!("the uploaded certificates are cut short");
    }
    let (nonce, rest) = sealed.split_at(NONCE_LEN);
    let mut data = rest.to_vec();
    let nonce = Nonce::try_assume_unique_for_key(nonce).expect("NONCE_LEN bytes");
    let plain = aead_key(key)?
        .open_in_place(nonce, Aad::from(AAD), &mut data)
        .map_err(|_| {
            anyhow!(
                "--certificate-key does not open the uploaded certificates (a wrong key, or \
                 certificates uploaded again since; `bosun up --ha` on the first host uploads them \
                 again and prints the current one)"
            )
        })?;
    serde_json::from_slice(plain).context("the uploaded certificates are not a bundle")
}

/// A key's hex form and back.
pub fn key_hex(key: &[u8]) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn parse_key(hex: &str) -> Result<Vec<u8>> {
    let hex = hex.trim();
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!("--certificate-key: expected 64 hex digits (a 32-byte key)");
    }
    Ok((0..32)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("checked hex"))
        .collect())
}

/// Creates `obj` at `path`, or replaces the one there (by name).
async fn apply(ctx: &Ctx, path: &str, name: &str, obj: &serde_json::Value) -> Result<()> {
    let created = ctx
        .request_json(
            http::Method::POST,
            path,
            None,
            Some("application/json"),
            Some(obj),
        )
        .await;
    match created {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            ctx.request_json(
                http::Method::PUT,
                &format!("{path}/{name}"),
                None,
                Some("application/json"),
                Some(obj),
            )
            .await
            .with_context(|| format!("replacing {path}/{name}"))?;
            Ok(())
        }
        Err(e) => Err(e).with_context(|| format!("creating {path}/{name}")),
    }
}

/// Uploads `bundle` encrypted under a new key; returns the key (hex) and
/// the bootstrap token that owns the upload (good for [`UPLOAD_TTL`]).
pub async fn upload(ctx: &Ctx, bundle: &Bundle) -> Result<(String, BootstrapToken)> {
    let mut key = [0u8; 32];
    SystemRandom::new()
        .fill(&mut key)
        .map_err(|_| anyhow!("no randomness for the key"))?;
    let sealed = seal(bundle, &key)?;
    // The token the bundle lives and dies with.
    let token = super::token::create(
        ctx,
        UPLOAD_TTL,
        Some("owns the uploaded control-plane certificates"),
    )
    .await?;
    let token_secret = ctx
        .get_json(&format!(
            "/api/v1/namespaces/{NAMESPACE}/secrets/{}",
            token.secret_name()
        ))
        .await
        .context("reading the token's Secret")?;
    let b64 = base64::engine::general_purpose::STANDARD.encode(&sealed);
    let secret = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": SECRET,
            "namespace": NAMESPACE,
            "ownerReferences": [{
                "apiVersion": "v1",
                "kind": "Secret",
                "name": token.secret_name(),
                "uid": token_secret["metadata"]["uid"],
            }],
        },
        "type": "Opaque",
        "data": {"bundle": b64},
    });
    let secrets = format!("/api/v1/namespaces/{NAMESPACE}/secrets");
    apply(ctx, &secrets, SECRET, &secret).await?;
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": ROLE, "namespace": NAMESPACE},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": [SECRET], "verbs": ["get"]}],
    });
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": ROLE, "namespace": NAMESPACE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": bosun::bootstrap::BOOTSTRAPPERS_GROUP}],
    });
    let rbac = format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}");
    apply(ctx, &format!("{rbac}/roles"), ROLE, &role).await?;
    apply(ctx, &format!("{rbac}/rolebindings"), ROLE, &binding).await?;
    Ok((key_hex(&key), token))
}

/// The sealed bundle, fetched with `client` (a bootstrap token's).
pub async fn download(client: &kube::Client) -> Result<Vec<u8>> {
    let path = format!("/api/v1/namespaces/{NAMESPACE}/secrets/{SECRET}");
    let req = http::Request::get(&path).body(Vec::new())?;
    let text = match client.request_text(req).await {
        Ok(t) => t,
        Err(kube::Error::Api(s)) if s.code == 404 => bail!(
            "the cluster holds no uploaded certificates (they expire after {}h); run `bosun \
             up --ha` again on the first host to upload them",
            UPLOAD_TTL.as_secs() / 3600
        ),
        Err(e) => return Err(e).context("reading the uploaded certificates"),
    };
    let secret: serde_json::Value = serde_json::from_str(&text)?;
    let b64 = secret["data"]["bundle"]
        .as_str()
        .ok_or_else(|| anyhow!("Secret {SECRET} holds no bundle"))?;
    Ok(base64::engine::general_purpose::STANDARD.decode(b64)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle() -> Bundle {
        Bundle {
            files: [("ca.key".to_string(), "KEY".to_string())].into(),
            cluster_cidr: "10.244.0.0/16".into(),
            service_cidr: "10.96.0.0/12".into(),
        }
    }

    #[test]
    fn only_the_key_opens_the_bundle() {
        let key = [7u8; 32];
        let sealed = seal(&bundle(), &key).unwrap();
        assert!(!String::from_utf8_lossy(&sealed).contains("KEY"));
        assert_eq!(open(&sealed, &key).unwrap(), bundle());
        let err = open(&sealed, &[8u8; 32]).unwrap_err().to_string();
        assert!(err.contains("--certificate-key does not open"), "{err}");
        let mut tampered = sealed.clone();
        *tampered.last_mut().unwrap() ^= 1;
        assert!(open(&tampered, &key).is_err());
    }

    #[test]
    fn keys_are_64_hex_digits() {
        let key = [0xabu8; 32];
        assert_eq!(parse_key(&key_hex(&key)).unwrap(), key);
        for bad in ["", "abc", &"g".repeat(64)] {
            let err = parse_key(bad).unwrap_err().to_string();
            assert!(err.contains("64 hex digits"), "{err}");
        }
    }
}
