//! The certificates API's part of the bootstrap policy, as upstream's
//! bootstrappolicy: the `system:certificates.k8s.io:*` roles (approving
//! for each kubernetes.io signer, and requesting node client
//! certificates), `system:node-bootstrapper`, and the rules of
//! `system:controller:certificate-controller`, which bosun's csrapproving,
//! csrsigning and csrcleaner loops act as; and the bindings kubeadm makes
//! for kubelet TLS bootstrapping.

use k8s_openapi::api::rbac::v1::PolicyRule;

use super::build::{events, named, rule};

const CERTIFICATES: &str = "certificates.k8s.io";
pub const KUBE_APISERVER_CLIENT: &str = "kubernetes.io/kube-apiserver-client";
pub const KUBE_APISERVER_CLIENT_KUBELET: &str = "kubernetes.io/kube-apiserver-client-kubelet";
pub const KUBELET_SERVING: &str = "kubernetes.io/kubelet-serving";
pub const LEGACY_UNKNOWN: &str = "kubernetes.io/legacy-unknown";

fn approver(signer: &str) -> PolicyRule {
    named(rule(&["approve"], &[CERTIFICATES], &["signers"]), &[signer])
}

/// The cluster roles (name, rules).
pub(super) fn roles() -> Vec<(&'static str, Vec<PolicyRule>)> {
    vec![
        (
            "system:node-bootstrapper",
            vec![rule(
                &["create", "get", "list", "watch"],
                &[CERTIFICATES],
                &["certificatesigningrequests"],
            )],
        ),
        (
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            vec![rule(
                &["create"],
                &[CERTIFICATES],
                &["certificatesigningrequests/nodeclient"],
            )],
        ),
        (
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            vec![rule(
                &["create"],
                &[CERTIFICATES],
                &["certificatesigningrequests/selfnodeclient"],
            )],
        ),
        (
            "system:certificates.k8s.io:kube-apiserver-client-approver",
            vec![approver(KUBE_APISERVER_CLIENT)],
        ),
        (
            "system:certificates.k8s.io:kube-apiserver-client-kubelet-approver",
            vec![approver(KUBE_APISERVER_CLIENT_KUBELET)],
        ),
        (
            "system:certificates.k8s.io:kubelet-serving-approver",
            vec![approver(KUBELET_SERVING)],
        ),
        (
            "system:certificates.k8s.io:legacy-unknown-approver",
            vec![approver(LEGACY_UNKNOWN)],
        ),
    ]
}

/// The bindings kubeadm makes for kubelet TLS bootstrapping (name, role,
/// group): bootstrap tokens (all in `system:bootstrappers`) may create
/// CertificateSigningRequests and have their node client requests
/// approved (csrapproving asks for `nodeclient`), nodes have their
/// renewals approved (`selfnodeclient`).
pub(super) fn bindings() -> [(&'static str, &'static str, &'static str); 3] {
    [
        (
            "kubeadm:kubelet-bootstrap",
            "system:node-bootstrapper",
            "system:bootstrappers",
        ),
        (
            "kubeadm:node-autoapprove-bootstrap",
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            "system:bootstrappers",
        ),
        (
            "kubeadm:node-autoapprove-certificate-rotation",
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            "system:nodes",
        ),
    ]
}

/// `system:controller:certificate-controller`'s rules.
pub(super) fn certificate_controller_rules() -> Vec<PolicyRule> {
    vec![
        rule(
            &["get", "list", "watch", "delete"],
            &[CERTIFICATES],
            &["certificatesigningrequests"],
        ),
        rule(
            &["update"],
            &[CERTIFICATES],
            &[
                "certificatesigningrequests/status",
                "certificatesigningrequests/approval",
            ],
        ),
        approver(KUBE_APISERVER_CLIENT_KUBELET),
        named(
            rule(&["sign"], &[CERTIFICATES], &["signers"]),
            &[
                LEGACY_UNKNOWN,
                KUBE_APISERVER_CLIENT,
                KUBE_APISERVER_CLIENT_KUBELET,
                KUBELET_SERVING,
            ],
        ),
        rule(
            &["create"],
            &["authorization.k8s.io"],
            &["subjectaccessreviews"],
        ),
        events(),
    ]
}
