use super::*;

/// A request with subject `cn`/`orgs` and alternative names `sans`, made
/// by `username`, to `signer` with `usages`.
fn csr(
    cn: &str,
    orgs: &[&str],
    sans: &[&str],
    username: &str,
    signer: &str,
    usages: &[&str],
) -> (CertificateSigningRequest, RequestInfo) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut p =
        rcgen::CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap();
    p.distinguished_name = rcgen::DistinguishedName::new();
    for o in orgs {
        p.distinguished_name
            .push(rcgen::DnType::OrganizationName, *o);
    }
    if !cn.is_empty() {
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
    }
    let pem = p.serialize_request(&key).unwrap().pem().unwrap();
    let info = bosun::validation::certificates::parse_request(pem.as_bytes()).unwrap();
    let mut csr = bosun::bootstrap::csr::object(&pem, None);
    csr.spec.signer_name = signer.into();
    csr.spec.usages = Some(usages.iter().map(|u| u.to_string()).collect());
    csr.spec.username = Some(username.into());
    (csr, info)
}

const KUBELET: &str = "kubernetes.io/kube-apiserver-client-kubelet";
const CLIENT: [&str; 2] = ["digital signature", "client auth"];
const RSA_CLIENT: [&str; 3] = ["key encipherment", "digital signature", "client auth"];

fn recognized(c: (CertificateSigningRequest, RequestInfo)) -> Vec<Recognized> {
    recognize(&c.0, &c.1)
}

#[test]
fn a_bootstrap_tokens_node_request_is_a_node_client_request() {
    let token = "system:bootstrap:abcdef";
    for usages in [&CLIENT[..], &RSA_CLIENT[..]] {
        assert_eq!(
            recognized(csr(
                "system:node:w1",
                &["system:nodes"],
                &[],
                token,
                KUBELET,
                usages
            )),
            vec![Recognized::NodeClient],
            "{usages:?}"
        );
    }
}

#[test]
fn a_node_asking_for_its_own_name_is_a_self_node_client_request_first() {
    let got = recognized(csr(
        "system:node:w1",
        &["system:nodes"],
        &[],
        "system:node:w1",
        KUBELET,
        &CLIENT,
    ));
    assert_eq!(
        got,
        vec![Recognized::SelfNodeClient, Recognized::NodeClient]
    );
    assert_eq!(got[0].subresource(), "selfnodeclient");
    assert_eq!(
        got[0].message(),
        "Auto approving self kubelet client certificate after SubjectAccessReview."
    );
    assert_eq!(got[1].subresource(), "nodeclient");
    assert_eq!(
        got[1].message(),
        "Auto approving kubelet client certificate after SubjectAccessReview."
    );
    // Another node's name is no self request.
    assert_eq!(
        recognized(csr(
            "system:node:w2",
            &["system:nodes"],
            &[],
            "system:node:w1",
            KUBELET,
            &CLIENT
        )),
        vec![Recognized::NodeClient]
    );
}

#[test]
fn anything_but_a_node_client_request_is_left_alone() {
    let who = "system:bootstrap:abcdef";
    let node = ["system:nodes"];
    let cases: Vec<(&str, (CertificateSigningRequest, RequestInfo))> = vec![
        (
            "another signer",
            csr(
                "system:node:w1",
                &node,
                &[],
                who,
                "kubernetes.io/kube-apiserver-client",
                &CLIENT,
            ),
        ),
        (
            "no organization",
            csr("system:node:w1", &[], &[], who, KUBELET, &CLIENT),
        ),
        (
            "another organization",
            csr(
                "system:node:w1",
                &["system:masters"],
                &[],
                who,
                KUBELET,
                &CLIENT,
            ),
        ),
        (
            "an extra organization",
            csr(
                "system:node:w1",
                &["system:nodes", "system:masters"],
                &[],
                who,
                KUBELET,
                &CLIENT,
            ),
        ),
        (
            "not a node's name",
            csr("jane", &node, &[], who, KUBELET, &CLIENT),
        ),
        ("no common name", csr("", &node, &[], who, KUBELET, &CLIENT)),
        (
            "a DNS name",
            csr(
                "system:node:w1",
                &node,
                &["w1.example"],
                who,
                KUBELET,
                &CLIENT,
            ),
        ),
        (
            "an IP address",
            csr(
                "system:node:w1",
                &node,
                &["10.0.0.1"],
                who,
                KUBELET,
                &CLIENT,
            ),
        ),
        (
            "server auth",
            csr(
                "system:node:w1",
                &node,
                &[],
                who,
                KUBELET,
                &["digital signature", "client auth", "server auth"],
            ),
        ),
        (
            "no client auth",
            csr(
                "system:node:w1",
                &node,
                &[],
                who,
                KUBELET,
                &["digital signature", "key encipherment"],
            ),
        ),
        (
            "no digital signature",
            csr("system:node:w1", &node, &[], who, KUBELET, &["client auth"]),
        ),
    ];
    for (what, c) in cases {
        assert_eq!(recognized(c), vec![], "{what}");
    }
}
