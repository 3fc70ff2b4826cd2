//! Service account tokens: JSON Web Tokens the control plane signs (ES256,
//! a key made on first start and kept in the data dir) and accepts as
//! bearer tokens, with the claims kube-apiserver puts in them: issuer and
//! audience, expiry, `sub: system:serviceaccount:<ns>:<name>` and the
//! `kubernetes.io` claim naming the service account and the object the
//! token is bound to (a pod), by name and uid. A token bound to a pod is
//! good only while that pod (with that uid) exists; checking that is the
//! API's part ([`crate::api`]), since it needs the store.
//!
//! The JWS itself (encoding, ES256 signing, the signature and algorithm
//! checks) is jsonwebtoken's; this module holds the key, the claims and
//! the times, which it checks against the caller's clock.

use std::path::Path;

use anyhow::Context;
use base64::Engine;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair as _};
use serde::{Deserialize, Serialize};

/// The issuer and default audience, as kube-apiserver's defaults
/// (`--service-account-issuer`, `--api-audiences`).
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// A name and uid, as the `kubernetes.io` claim names objects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ref {
    pub name: String,
    pub uid: String,
}

/// The `kubernetes.io` claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesClaim {
    pub namespace: String,
    pub serviceaccount: Ref,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<Ref>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<Ref>,
}

/// A token's claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub iss: String,
    pub sub: String,
    pub aud: Vec<String>,
    pub exp: i64,
    pub iat: i64,
    pub nbf: i64,
    pub jti: String,
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: KubernetesClaim,
}

impl Claims {
    /// Claims for service account `sa` in `namespace`, valid from `now`
    /// for `seconds`, bound to `pod` if given.
    pub fn new(
        namespace: &str,
        sa: Ref,
        pod: Option<Ref>,
        audiences: Vec<String>,
        now: i64,
        seconds: i64,
    ) -> Claims {
        Claims {
            iss: ISSUER.into(),
            sub: format!("system:serviceaccount:{namespace}:{}", sa.name),
            aud: audiences,
            exp: now + seconds,
            iat: now,
            nbf: now,
            jti: uuid::Uuid::new_v4().to_string(),
            kubernetes: KubernetesClaim {
                namespace: namespace.into(),
                serviceaccount: sa,
                pod,
                node: None,
            },
        }
    }
}

/// Signs and checks tokens with one key.
pub struct TokenIssuer {
    signing: EncodingKey,
    checking: DecodingKey,
    key_id: String,
}

impl std::fmt::Debug for TokenIssuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenIssuer")
            .field("key_id", &self.key_id)
            .finish()
    }
}

impl TokenIssuer {
    /// An issuer with the key in `dir/sa.key`, made on first start.
    pub fn load_or_create(dir: &Path) -> anyhow::Result<TokenIssuer> {
        let path = dir.join("sa.key");
        let pem = match std::fs::read_to_string(&path) {
            Ok(pem) => pem,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key = rcgen::KeyPair::generate().context("generating sa.key")?;
                let pem = key.serialize_pem();
                bosun::files::write_atomically(&path, &pem, 0o600)
                    .with_context(|| format!("writing {}", path.display()))?;
                pem
            }
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let key = rcgen::KeyPair::from_pem(&pem).context("parsing sa.key")?;
        TokenIssuer::from_pkcs8(&key.serialize_der())
    }

    /// An issuer with a fresh key that lives only in memory (tests).
    pub fn ephemeral() -> TokenIssuer {
        let key = rcgen::KeyPair::generate().expect("generating a P-256 key");
        TokenIssuer::from_pkcs8(&key.serialize_der()).expect("a generated key loads")
    }

    fn from_pkcs8(der: &[u8]) -> anyhow::Result<TokenIssuer> {
        // Loaded once here to refuse any other kind of key at start, and
        // for its public half.
        let key = EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            der,
            &SystemRandom::new(),
        )
        .map_err(|e| anyhow::anyhow!("sa.key is not a P-256 key: {e}"))?;
        let public = key.public_key().as_ref();
        // kube-apiserver's key id: the hash of the public key.
        let digest = ring::digest::digest(&ring::digest::SHA256, public);
        Ok(TokenIssuer {
            signing: EncodingKey::from_ec_der(der),
            checking: DecodingKey::from_ec_der(public),
            key_id: B64.encode(digest.as_ref()),
        })
    }

    /// The signed token carrying `claims`.
    pub fn sign(&self, claims: &Claims) -> String {
        // `{"alg":"ES256","kid":...}`, as kube-apiserver's (no `typ`).
        let header = Header {
            typ: None,
            kid: Some(self.key_id.clone()),
            ..Header::new(Algorithm::ES256)
        };
        jsonwebtoken::encode(&header, claims, &self.signing).expect("ES256 signing does not fail")
    }

    /// The claims of `token` if this issuer signed it, it is meant for
    /// the API (`audience`) and it is valid at `now`; otherwise why not.
    pub fn verify(&self, token: &str, audience: &str, now: i64) -> Result<Claims, String> {
        let mut validation = Validation::new(Algorithm::ES256);
        validation.set_issuer(&[ISSUER]);
        validation.set_audience(&[audience]);
        // The times are checked below against `now`, not the system clock.
        validation.validate_exp = false;
        validation.required_spec_claims.clear();
        let claims = jsonwebtoken::decode::<Claims>(token, &self.checking, &validation)
            .map_err(|e| match e.kind() {
                ErrorKind::InvalidToken => "not a JWT".to_string(),
                ErrorKind::InvalidSignature => "invalid signature".into(),
                ErrorKind::InvalidAlgorithm => "unexpected algorithm".into(),
                ErrorKind::InvalidIssuer => "unknown issuer".into(),
                ErrorKind::InvalidAudience => "token audiences do not include the API".into(),
                ErrorKind::Base64(_) => "bad encoding".into(),
                ErrorKind::Json(e) => format!("bad header or claims: {e}"),
                _ => e.to_string(),
            })?
            .claims;
        if now >= claims.exp {
            return Err("token has expired".into());
        }
        if now < claims.nbf {
            return Err("token is not valid yet".into());
        }
        Ok(claims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(now: i64) -> Claims {
        Claims::new(
            "default",
            Ref {
                name: "default".into(),
                uid: "u1".into(),
            },
            Some(Ref {
                name: "web".into(),
                uid: "p1".into(),
            }),
            vec![ISSUER.into()],
            now,
            3600,
        )
    }

    #[test]
    fn signed_tokens_verify_and_carry_their_claims() {
        let issuer = TokenIssuer::ephemeral();
        let token = issuer.sign(&claims(1000));
        let got = issuer.verify(&token, ISSUER, 1001).unwrap();
        assert_eq!(got.sub, "system:serviceaccount:default:default");
        assert_eq!(got.kubernetes.pod.unwrap().uid, "p1");
        assert_eq!(got.exp, 4600);
    }

    #[test]
    fn forged_expired_and_foreign_tokens_are_refused() {
        let issuer = TokenIssuer::ephemeral();
        let token = issuer.sign(&claims(1000));
        assert_eq!(
            issuer.verify(&token, ISSUER, 4600).unwrap_err(),
            "token has expired"
        );
        assert!(issuer.verify(&token, ISSUER, 999).is_err());
        assert!(issuer
            .verify(&token, "https://other", 1001)
            .unwrap_err()
            .contains("audiences"));
        // Another key's token.
        let other = TokenIssuer::ephemeral().sign(&claims(1000));
        assert_eq!(
            issuer.verify(&other, ISSUER, 1001).unwrap_err(),
            "invalid signature"
        );
        // Claims changed after signing.
        let mut parts: Vec<String> = token.split('.').map(String::from).collect();
        let mut forged = claims(1000);
        forged.sub = "system:serviceaccount:kube-system:admin".into();
        parts[1] = B64.encode(serde_json::to_vec(&forged).unwrap());
        assert_eq!(
            issuer.verify(&parts.join("."), ISSUER, 1001).unwrap_err(),
            "invalid signature"
        );
        assert_eq!(issuer.verify("abc", ISSUER, 1).unwrap_err(), "not a JWT");
    }

    /// A token as bosun signed them by hand before jsonwebtoken, and
    /// still does: `{"alg":"ES256","kid":...}`, the claims, a fixed-size
    /// P-256 signature, each base64url without padding.
    fn hand_signed(der: &[u8], key_id: &str, claims: &Claims) -> String {
        let rng = SystemRandom::new();
        let key = EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, der, &rng)
            .unwrap();
        let header = serde_json::json!({"alg": "ES256", "kid": key_id});
        let signed = format!(
            "{}.{}",
            B64.encode(header.to_string()),
            B64.encode(serde_json::to_vec(claims).unwrap())
        );
        let sig = key.sign(&rng, signed.as_bytes()).unwrap();
        format!("{signed}.{}", B64.encode(sig.as_ref()))
    }

    #[test]
    fn tokens_signed_before_verify_and_new_ones_look_the_same() {
        let der = rcgen::KeyPair::generate().unwrap().serialize_der();
        let issuer = TokenIssuer::from_pkcs8(&der).unwrap();
        let old = hand_signed(&der, &issuer.key_id, &claims(1000));
        assert_eq!(issuer.verify(&old, ISSUER, 1001).unwrap(), claims_of(&old));
        // Header and claims byte for byte (the signature is randomized).
        let new = issuer.sign(&claims_of(&old));
        let head = |t: &str| t.rsplit_once('.').unwrap().0.to_string();
        assert_eq!(head(&new), head(&old));
        // Tokens whose header names another algorithm are refused.
        let with_alg = |alg: &str| {
            let header = B64.encode(format!(r#"{{"alg":"{alg}"}}"#));
            format!("{header}.{}.", old.split('.').nth(1).unwrap())
        };
        assert_eq!(
            issuer.verify(&with_alg("HS256"), ISSUER, 1001).unwrap_err(),
            "unexpected algorithm"
        );
        assert!(issuer.verify(&with_alg("none"), ISSUER, 1001).is_err());
    }

    fn claims_of(token: &str) -> Claims {
        let part = token.split('.').nth(1).unwrap();
        serde_json::from_slice(&B64.decode(part).unwrap()).unwrap()
    }

    #[test]
    fn the_key_is_kept_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let a = TokenIssuer::load_or_create(dir.path()).unwrap();
        let token = a.sign(&claims(1000));
        let b = TokenIssuer::load_or_create(dir.path()).unwrap();
        assert!(b.verify(&token, ISSUER, 1001).is_ok());
    }
}
