//! A node's client certificate through the certificates.k8s.io API, as
//! the kubelet's TLS bootstrap and certificate manager get theirs: a
//! CertificateSigningRequest (`generateName: node-csr-`, signer
//! `kubernetes.io/kube-apiserver-client-kubelet`, usages digital signature
//! and client auth), watched until the control plane issues it (its
//! csrapproving controller approves a node's request, csrsigning signs it)
//! or it is denied or fails. `bosun join`, the agent's renewal and the
//! hollow nodes all go through [`request_certificate`].

use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use k8s_openapi::ByteString;
use kube::api::{Api, ObjectMeta, PostParams};

/// The signer of nodes' client certificates.
pub const SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// The prefix of the requests' generated names, the kubelet's.
pub const NAME_PREFIX: &str = "node-csr-";
/// The usages a node asks for with an ECDSA key (the kubelet adds key
/// encipherment for RSA keys only).
pub const USAGES: [&str; 2] = ["digital signature", "client auth"];

/// The request for the PEM certificate request `pem`, valid for
/// `expiration_seconds` if given.
pub fn object(pem: &str, expiration_seconds: Option<i32>) -> CertificateSigningRequest {
    CertificateSigningRequest {
        metadata: ObjectMeta {
            generate_name: Some(NAME_PREFIX.into()),
            ..Default::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(pem.as_bytes().to_vec()),
            signer_name: SIGNER.into(),
            usages: Some(USAGES.iter().map(|u| u.to_string()).collect()),
            expiration_seconds,
            ..Default::default()
        },
        status: None,
    }
}

/// How a request ended, as far as [`request_certificate`] looks.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// The issued certificate (PEM).
    Issued(String),
    /// Denied or Failed: the condition's type, reason and message.
    Refused(String),
}

/// The outcome of `csr` if it has one yet.
pub fn outcome(csr: &CertificateSigningRequest) -> Option<Outcome> {
    let status = csr.status.as_ref()?;
    for c in status.conditions.iter().flatten() {
        if (c.type_ == "Denied" || c.type_ == "Failed") && c.status == "True" {
            let reason = c.reason.as_deref().unwrap_or("");
            let message = c.message.as_deref().unwrap_or("");
            return Some(Outcome::Refused(format!(
                "{} ({reason}): {message}",
                c.type_.to_lowercase()
            )));
        }
    }
    let cert = status.certificate.as_ref().filter(|c| !c.0.is_empty())?;
    Some(Outcome::Issued(
        String::from_utf8_lossy(&cert.0).into_owned(),
    ))
}

/// Creates the request for the PEM certificate request `pem` through
/// `client` and waits up to `timeout` for its certificate (PEM). A
/// refused request, and one still pending after `timeout`, is an error
/// naming the request; an error of the create keeps the API's
/// [`kube::Error`] (to be told apart with `downcast_ref`).
pub async fn request_certificate(
    client: &kube::Client,
    pem: &str,
    expiration_seconds: Option<i32>,
    timeout: Duration,
) -> anyhow::Result<String> {
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let made = api
        .create(&PostParams::default(), &object(pem, expiration_seconds))
        .await
        .context("creating the certificate signing request")?;
    let name = made
        .metadata
        .name
        .clone()
        .ok_or_else(|| anyhow!("the created certificate signing request has no name"))?;
    let done = |csr: Option<&CertificateSigningRequest>| csr.and_then(outcome).is_some();
    let waited = tokio::time::timeout(
        timeout,
        kube::runtime::wait::await_condition(api.clone(), &name, done),
    )
    .await;
    let csr = match waited {
        Ok(Ok(Some(csr))) => csr,
        Ok(Ok(None)) => {
            bail!("the certificate signing request {name} was deleted before it was issued")
        }
        Ok(Err(e)) => {
            return Err(e).with_context(|| format!("watching the certificate signing request {name}"))
        }
        Err(_) => bail!(
            "the certificate signing request {name} was not issued within {timeout:?}: it is Pending \
             (kubectl describe csr {name} says why it was not approved; a cluster admin may approve it \
             with kubectl certificate approve {name})"
        ),
    };
    match outcome(&csr) {
        Some(Outcome::Issued(cert)) => Ok(cert),
        Some(Outcome::Refused(why)) => {
            bail!("the certificate signing request {name} was {why}")
        }
        None => bail!("the certificate signing request {name} has no outcome"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::certificates::v1::{
        CertificateSigningRequestCondition, CertificateSigningRequestStatus,
    };

    fn with(conditions: &[(&str, &str)], cert: &str) -> CertificateSigningRequest {
        let mut csr = object("PEM", Some(3600));
        csr.status = Some(CertificateSigningRequestStatus {
            certificate: (!cert.is_empty()).then(|| ByteString(cert.as_bytes().to_vec())),
            conditions: Some(
                conditions
                    .iter()
                    .map(|(t, reason)| CertificateSigningRequestCondition {
                        type_: t.to_string(),
                        status: "True".into(),
                        reason: Some(reason.to_string()),
                        message: Some("because".into()),
                        ..Default::default()
                    })
                    .collect(),
            ),
        });
        csr
    }

    #[test]
    fn the_request_is_a_kubelets() {
        let csr = object("PEM", None);
        assert_eq!(csr.metadata.generate_name.as_deref(), Some("node-csr-"));
        assert_eq!(
            csr.spec.signer_name,
            "kubernetes.io/kube-apiserver-client-kubelet"
        );
        assert_eq!(
            csr.spec.usages.unwrap(),
            vec!["digital signature", "client auth"]
        );
        assert_eq!(csr.spec.request.0, b"PEM");
    }

    #[test]
    fn issued_denied_failed_and_pending() {
        assert_eq!(outcome(&object("PEM", None)), None);
        assert_eq!(outcome(&with(&[("Approved", "AutoApproved")], "")), None);
        assert_eq!(
            outcome(&with(&[("Approved", "AutoApproved")], "CERT")),
            Some(Outcome::Issued("CERT".into()))
        );
        assert_eq!(
            outcome(&with(&[("Denied", "NotMine")], "")),
            Some(Outcome::Refused("denied (NotMine): because".into()))
        );
        assert_eq!(
            outcome(&with(
                &[
                    ("Approved", "AutoApproved"),
                    ("Failed", "SignerValidationFailure")
                ],
                ""
            )),
            Some(Outcome::Refused(
                "failed (SignerValidationFailure): because".into()
            ))
        );
    }
}
