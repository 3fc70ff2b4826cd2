//! kube-controller-manager's certificate controllers for
//! CertificateSigningRequests:
//!
//! - [`approver`] (`csrapproving`): approves nodes' client certificate
//!   requests when their requester may make them (a bootstrap token
//!   joining, a node renewing its own), as kubelet TLS bootstrapping
//!   needs;
//! - [`signer`] (`csrsigning`): issues approved requests to the
//!   `kubernetes.io/kube-apiserver-client`,
//!   `kubernetes.io/kube-apiserver-client-kubelet` and
//!   `kubernetes.io/kubelet-serving` signers from the cluster CA, after
//!   [`checks`] (upstream's per-signer rules on subject and usages; a
//!   request that breaks them gets a `Failed` condition instead);
//! - [`cleaner`] (`csrcleaner`): removes requests once they are done
//!   with (upstream's durations).
//!
//! All act as upstream's `certificate-controller` service account.

pub mod approver;
pub mod checks;
pub mod cleaner;
pub mod signer;

pub use bosun::validation::certificates::RequestInfo;

/// Whether `csr` has a condition of type `t` (status True).
pub fn has_condition(
    csr: &k8s_openapi::api::certificates::v1::CertificateSigningRequest,
    t: &str,
) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == t && c.status == "True"))
}
