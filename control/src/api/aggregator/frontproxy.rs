//! The aggregator's identity toward extension API servers, as
//! kube-apiserver's `--requestheader-*` and `--proxy-client-*` flags set
//! it up: a request-header CA made on first start in the data dir
//! (`front-proxy-ca.crt`/`.key`, beside the cluster CA), a client
//! certificate it signs (CN `front-proxy-client`, made anew in memory at
//! each start), the headers that carry the caller's identity, and the
//! `kube-system/extension-apiserver-authentication` ConfigMap that tells
//! extension servers which CA and names to trust for those headers.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use http::{HeaderMap, HeaderName, HeaderValue};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::client::ResolvesClientCert;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::sign::CertifiedKey;
use serde_json::{json, Value};

use crate::auth::user::UserInfo;

/// The client certificate's common name (kubeadm's), the one name in
/// `requestheader-allowed-names`.
pub const CLIENT_COMMON_NAME: &str = "front-proxy-client";
pub const USERNAME_HEADER: &str = "X-Remote-User";
pub const GROUP_HEADER: &str = "X-Remote-Group";
pub const EXTRA_HEADER_PREFIX: &str = "X-Remote-Extra-";
/// Where extension servers read how to authenticate the aggregator.
pub const AUTHENTICATION_CONFIG_MAP: &str = "extension-apiserver-authentication";
/// The Role in kube-system that may read that ConfigMap.
pub const AUTHENTICATION_READER_ROLE: &str = "extension-apiserver-authentication-reader";
const CA_COMMON_NAME: &str = "bosun-front-proxy-ca";

/// The request-header CA and the client certificate it signed.
#[derive(Debug)]
pub struct FrontProxy {
    pub ca_pem: String,
    key: Arc<CertifiedKey>,
}

impl FrontProxy {
    /// Loads the request-header CA from `dir` (making it on first start)
    /// and signs a fresh client certificate with it.
    pub fn load_or_create(dir: &Path) -> anyhow::Result<FrontProxy> {
        let ca_crt = dir.join("front-proxy-ca.crt");
        let ca_key = dir.join("front-proxy-ca.key");
        if !ca_crt.exists() || !ca_key.exists() {
            let key = KeyPair::generate().context("generating the front-proxy CA key")?;
            let cert = ca_params()?.self_signed(&key)?;
            bosun::files::write_atomically(&ca_key, &key.serialize_pem(), 0o600)
                .with_context(|| format!("writing {}", ca_key.display()))?;
            bosun::files::write_atomically(&ca_crt, &cert.pem(), 0o644)
                .with_context(|| format!("writing {}", ca_crt.display()))?;
        }
        let ca_pem = std::fs::read_to_string(&ca_crt).context("reading front-proxy-ca.crt")?;
        let key_pem = std::fs::read_to_string(&ca_key).context("reading front-proxy-ca.key")?;
        let issuer = Issuer::new(ca_params()?, KeyPair::from_pem(&key_pem)?);
        Ok(FrontProxy {
            ca_pem,
            key: Arc::new(client_certificate(&issuer)?),
        })
    }

    /// Presents the front-proxy client certificate on a connection.
    pub fn client_resolver(&self) -> Arc<dyn ResolvesClientCert> {
        Arc::new(ClientCert(self.key.clone()))
    }
}

fn ca_params() -> anyhow::Result<CertificateParams> {
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name
        .push(DnType::CommonName, CA_COMMON_NAME);
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca.not_after = rcgen::date_time_ymd(2126, 1, 1);
    Ok(ca)
}

fn client_certificate(issuer: &Issuer<'_, KeyPair>) -> anyhow::Result<CertifiedKey> {
    let key = KeyPair::generate().context("generating the front-proxy client key")?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params
        .distinguished_name
        .push(DnType::CommonName, CLIENT_COMMON_NAME);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::minutes(5);
    params.not_after = now + time::Duration::days(365);
    params.serial_number = Some(rcgen::SerialNumber::from_slice(
        uuid::Uuid::new_v4().as_bytes(),
    ));
    let cert = params
        .signed_by(&key, issuer)
        .context("signing the front-proxy client certificate")?;
    let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    CertifiedKey::from_der(
        vec![CertificateDer::from(cert.der().to_vec())],
        der,
        &rustls::crypto::ring::default_provider(),
    )
    .context("loading the front-proxy client key")
}

#[derive(Debug)]
struct ClientCert(Arc<CertifiedKey>);

impl ResolvesClientCert for ClientCert {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// Puts the caller's identity into `headers` as the request-header
/// authenticator of an extension server reads it: the user, one
/// `X-Remote-Group` per group, one `X-Remote-Extra-<key>` per extra
/// value (the key percent-encoded, as upstream's proxy does). Whatever
/// identity headers the caller sent are dropped first: only the
/// aggregator speaks for the user.
pub fn set_identity_headers(headers: &mut HeaderMap, user: &UserInfo) {
    let ours: Vec<HeaderName> = headers
        .keys()
        .filter(|k| {
            let k = k.as_str();
            k == "x-remote-user" || k == "x-remote-group" || k.starts_with("x-remote-extra-")
        })
        .cloned()
        .collect();
    for k in ours {
        headers.remove(k);
    }
    if let Ok(v) = HeaderValue::from_str(&user.name) {
        headers.insert(HeaderName::from_static("x-remote-user"), v);
    }
    for group in &user.groups {
        if let Ok(v) = HeaderValue::from_str(group) {
            headers.append(HeaderName::from_static("x-remote-group"), v);
        }
    }
    for (key, values) in &user.extra {
        let encoded = percent_encoding::utf8_percent_encode(key, EXTRA_KEY_ESCAPES).to_string();
        let Ok(name) = HeaderName::from_bytes(format!("x-remote-extra-{encoded}").as_bytes())
        else {
            continue;
        };
        for value in values {
            if let Ok(v) = HeaderValue::from_str(value) {
                headers.append(name.clone(), v);
            }
        }
    }
}

/// What `url.PathEscape` escapes in a header name, minus what a header
/// name may hold anyway.
const EXTRA_KEY_ESCAPES: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The ConfigMap kube-apiserver publishes for extension servers: the
/// client CA of the cluster and the request-header settings, lists as
/// JSON arrays.
pub fn authentication_config_map(client_ca_pem: &str, requestheader_ca_pem: &str) -> Value {
    let list = |items: &[&str]| serde_json::to_string(items).expect("strings");
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": AUTHENTICATION_CONFIG_MAP, "namespace": "kube-system"},
        "data": {
            "client-ca-file": client_ca_pem,
            "requestheader-client-ca-file": requestheader_ca_pem,
            "requestheader-allowed-names": list(&[CLIENT_COMMON_NAME]),
            "requestheader-username-headers": list(&[USERNAME_HEADER]),
            "requestheader-group-headers": list(&[GROUP_HEADER]),
            "requestheader-extra-headers-prefix": list(&[EXTRA_HEADER_PREFIX]),
        },
    })
}

/// The Role upstream bootstraps in kube-system so that extension servers
/// (bound to it, as metrics-server's bundle does) may read the ConfigMap,
/// and its binding for the scheduler and controller manager.
pub fn authentication_reader() -> (Value, Value) {
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": AUTHENTICATION_READER_ROLE, "namespace": "kube-system",
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"],
            "resourceNames": [AUTHENTICATION_CONFIG_MAP], "verbs": ["get", "list", "watch"]}],
    });
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": format!("system::{AUTHENTICATION_READER_ROLE}"),
            "namespace": "kube-system",
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
            "name": AUTHENTICATION_READER_ROLE},
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
             "name": crate::auth::user::KUBE_CONTROLLER_MANAGER},
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
             "name": crate::auth::user::KUBE_SCHEDULER},
        ],
    });
    (role, binding)
}

/// Publishes the authentication ConfigMap (created, or updated when it
/// differs) and the Role and RoleBinding that let it be read (created
/// when missing), as kube-apiserver does at start.
pub async fn publish(
    client: &kube::Client,
    client_ca_pem: &str,
    requestheader_ca_pem: &str,
) -> kube::Result<()> {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    use kube::api::{Api, PostParams};
    let want: ConfigMap = serde_json::from_value(authentication_config_map(
        client_ca_pem,
        requestheader_ca_pem,
    ))
    .expect("a ConfigMap");
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    match config_maps.get_opt(AUTHENTICATION_CONFIG_MAP).await? {
        None => {
            config_maps.create(&PostParams::default(), &want).await?;
        }
        Some(mut current) if current.data != want.data => {
            current.data = want.data;
            config_maps
                .replace(AUTHENTICATION_CONFIG_MAP, &PostParams::default(), &current)
                .await?;
        }
        Some(_) => {}
    }
    let (role, binding) = authentication_reader();
    let role: Role = serde_json::from_value(role).expect("a Role");
    let binding: RoleBinding = serde_json::from_value(binding).expect("a RoleBinding");
    let created = |r: kube::Result<()>| match r {
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        other => other,
    };
    let roles: Api<Role> = Api::namespaced(client.clone(), "kube-system");
    created(roles.create(&PostParams::default(), &role).await.map(drop))?;
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), "kube-system");
    created(
        bindings
            .create(&PostParams::default(), &binding)
            .await
            .map(drop),
    )
}

#[cfg(test)]
mod tests;
