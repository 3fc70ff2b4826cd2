//! csrsigning: issues approved CertificateSigningRequests for the
//! kubernetes.io signers bosun serves from the cluster CA (the one that
//! signed the API server's certificate and that the API server trusts
//! for client certificates), as kube-controller-manager does with
//! `--cluster-signing-cert-file`. The certificate carries the request's
//! subject and alternative names, the usages asked for, and lives
//! `expirationSeconds` (default and at most `--cluster-signing-duration`,
//! a year unless set), never past the CA's own expiry. A
//! request breaking its signer's rules ([`super::checks`]) gets a
//! `Failed` condition (reason `SignerValidationFailure`) instead.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use k8s_openapi::ByteString;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::Controller;
use kube::{Client, ResourceExt};
use rcgen::{
    CertificateSigningRequestParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use super::checks::{check, SIGNERS};
use super::has_condition;
use crate::toolkit::{from_chrono, run_controller, Clock, Shared};

pub type Error = crate::toolkit::api_errors::ApiError;

/// `--cluster-signing-duration`'s default: the longest a certificate lives.
pub const MAX_DURATION: std::time::Duration = std::time::Duration::from_secs(365 * 86400);
/// How far back a certificate's validity starts, for clocks behind ours
/// (upstream's 5 minutes), but by no more than a tenth of its lifetime,
/// so that a certificate made short with `--cluster-signing-duration` is
/// not due for renewal (at 80% of its validity) as soon as it is issued.
const BACKDATE: time::Duration = time::Duration::minutes(5);

/// The cluster CA, to sign with.
pub struct CaSigner {
    issuer: Issuer<'static, KeyPair>,
    not_after: time::OffsetDateTime,
    /// The longest lifetime (`--cluster-signing-duration`).
    max: time::Duration,
}

impl CaSigner {
    /// The CA in `dir` (`ca.crt`, `ca.key`), issuing certificates of at
    /// most `max`.
    pub fn load(dir: &Path, max: std::time::Duration) -> anyhow::Result<CaSigner> {
        let ca_pem = std::fs::read_to_string(dir.join("ca.crt")).context("reading ca.crt")?;
        let key_pem = std::fs::read_to_string(dir.join("ca.key")).context("reading ca.key")?;
        let key = KeyPair::from_pem(&key_pem).context("parsing ca.key")?;
        let (_, pem) = x509_parser::pem::parse_x509_pem(ca_pem.as_bytes())
            .map_err(|e| anyhow::anyhow!("parsing ca.crt: {e}"))?;
        let not_after = pem
            .parse_x509()
            .map_err(|e| anyhow::anyhow!("parsing ca.crt: {e}"))?
            .validity()
            .not_after
            .to_datetime();
        let issuer = Issuer::from_ca_cert_pem(&ca_pem, key).context("parsing ca.crt")?;
        let max = time::Duration::try_from(max).context("--cluster-signing-duration")?;
        Ok(CaSigner {
            issuer,
            not_after,
            max,
        })
    }

    /// The PEM certificate for the PEM request `pem`.
    pub fn sign(
        &self,
        pem: &str,
        usages: &[String],
        expiration_seconds: Option<i32>,
        now: time::OffsetDateTime,
    ) -> Result<String, String> {
        let mut csr = CertificateSigningRequestParams::from_pem(pem)
            .map_err(|e| format!("unable to parse csr: {e}"))?;
        let lifetime = expiration_seconds
            .map(|s| time::Duration::seconds(s.into()).min(self.max))
            .unwrap_or(self.max);
        let p = &mut csr.params;
        p.is_ca = IsCa::ExplicitNoCa;
        p.key_usages = Vec::new();
        p.extended_key_usages = Vec::new();
        for u in usages {
            match usage(u) {
                Some(Usage::Key(k)) if !p.key_usages.contains(&k) => p.key_usages.push(k),
                Some(Usage::Extended(e)) if !p.extended_key_usages.contains(&e) => {
                    p.extended_key_usages.push(e)
                }
                _ => {}
            }
        }
        p.not_before = now - BACKDATE.min(lifetime / 10_i32);
        p.not_after = (now + lifetime).min(self.not_after);
        p.serial_number = Some(rcgen::SerialNumber::from_slice(
            uuid::Uuid::new_v4().as_bytes(),
        ));
        let cert = csr
            .signed_by(&self.issuer)
            .map_err(|e| format!("signing: {e}"))?;
        Ok(cert.pem())
    }
}

enum Usage {
    Key(KeyUsagePurpose),
    Extended(ExtendedKeyUsagePurpose),
}

/// A CSR usage as the certificate's key usage or extended key usage
/// (upstream's KeyUsagesFromStrings).
fn usage(u: &str) -> Option<Usage> {
    use ExtendedKeyUsagePurpose as E;
    use KeyUsagePurpose as K;
    Some(match u {
        "signing" | "digital signature" => Usage::Key(K::DigitalSignature),
        "content commitment" => Usage::Key(K::ContentCommitment),
        "key encipherment" => Usage::Key(K::KeyEncipherment),
        "key agreement" => Usage::Key(K::KeyAgreement),
        "data encipherment" => Usage::Key(K::DataEncipherment),
        "cert sign" => Usage::Key(K::KeyCertSign),
        "crl sign" => Usage::Key(K::CrlSign),
        "encipher only" => Usage::Key(K::EncipherOnly),
        "decipher only" => Usage::Key(K::DecipherOnly),
        "any" => Usage::Extended(E::Any),
        "server auth" => Usage::Extended(E::ServerAuth),
        "client auth" => Usage::Extended(E::ClientAuth),
        "code signing" => Usage::Extended(E::CodeSigning),
        "email protection" | "s/mime" => Usage::Extended(E::EmailProtection),
        "timestamping" => Usage::Extended(E::TimeStamping),
        "ocsp signing" => Usage::Extended(E::OcspSigning),
        _ => return None,
    })
}

pub struct Context {
    pub client: Client,
    pub ca: Option<CaSigner>,
    pub clock: Arc<dyn Clock>,
}

/// Sets up the signer on the shared caches; `ca_dir` holds the CA (None:
/// nothing is signed), `max` is the longest lifetime it issues.
pub fn start(
    shared: &Arc<Shared>,
    ca_dir: Option<PathBuf>,
    max: std::time::Duration,
) -> BoxFuture<'static, ()> {
    let ca = ca_dir.and_then(|dir| match CaSigner::load(&dir, max) {
        Ok(ca) => Some(ca),
        Err(e) => {
            tracing::warn!(error = %e, "csrsigning: no CA to sign with");
            None
        }
    });
    let informers = &shared.informers;
    let ctx = Arc::new(Context {
        client: shared.client_for("csrsigning"),
        ca,
        clock: shared.clock.clone(),
    });
    let controller = Controller::for_shared_stream(
        informers.subscribe::<CertificateSigningRequest>(),
        informers.store::<CertificateSigningRequest>(),
    );
    run_controller("csrsigning", controller, ctx, reconcile).boxed()
}

fn issued(csr: &CertificateSigningRequest) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.certificate.as_ref())
        .is_some_and(|c| !c.0.is_empty())
}

async fn reconcile(
    csr: Arc<CertificateSigningRequest>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let signer = csr.spec.signer_name.as_str();
    if !has_condition(&csr, "Approved")
        || has_condition(&csr, "Failed")
        || issued(&csr)
        || !SIGNERS.contains(&signer)
    {
        return Ok(Action::await_change());
    }
    let Some(ca) = &ctx.ca else {
        return Ok(Action::await_change());
    };
    let request = &csr.spec.request.0;
    let info = match bosun::validation::certificates::parse_request(request) {
        Ok(info) => info,
        Err(e) => {
            tracing::warn!(csr = %csr.name_any(), error = %e, "unable to parse csr");
            return Ok(Action::await_change());
        }
    };
    let usages = csr.spec.usages.clone().unwrap_or_default();
    let now = ctx.clock.now();
    let outcome = check(signer, &info, &usages).and_then(|()| {
        if info.organizations.len() > 1 {
            // rcgen keeps one value per subject attribute.
            return Err(
                "bosun cannot issue certificates with more than one subject organization yet"
                    .into(),
            );
        }
        let t = time::OffsetDateTime::from_unix_timestamp(now.timestamp())
            .map_err(|e| e.to_string())?;
        ca.sign(&info.pem, &usages, csr.spec.expiration_seconds, t)
    });
    let mut next = (*csr).clone();
    let status = next.status.get_or_insert_with(Default::default);
    match outcome {
        Ok(cert) => status.certificate = Some(ByteString(cert.into_bytes())),
        Err(message) => {
            let at = from_chrono(now);
            status.conditions.get_or_insert_with(Vec::new).push(
                CertificateSigningRequestCondition {
                    type_: "Failed".into(),
                    status: "True".into(),
                    reason: Some("SignerValidationFailure".into()),
                    message: Some(message),
                    last_update_time: Some(at.clone()),
                    last_transition_time: Some(at),
                },
            );
        }
    }
    let api: Api<CertificateSigningRequest> = Api::all(ctx.client.clone());
    api.replace_status(&csr.name_any(), &PostParams::default(), &next)
        .await?;
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests;
