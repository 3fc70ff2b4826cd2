//! What each kubernetes.io signer requires of a request before it signs,
//! as upstream's csrsigning `isRecognized` checks and
//! `ValidateKubeletClientCSR` / `ValidateKubeletServingCSR`, in their
//! words (the `Failed` condition's message).

use std::collections::BTreeSet;

use super::RequestInfo;

pub const KUBE_APISERVER_CLIENT: &str = "kubernetes.io/kube-apiserver-client";
pub const KUBE_APISERVER_CLIENT_KUBELET: &str = "kubernetes.io/kube-apiserver-client-kubelet";
pub const KUBELET_SERVING: &str = "kubernetes.io/kubelet-serving";

/// The signers bosun issues for.
pub const SIGNERS: [&str; 3] = [
    KUBE_APISERVER_CLIENT,
    KUBE_APISERVER_CLIENT_KUBELET,
    KUBELET_SERVING,
];

fn set(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Go's `sets.List` of a set, as `fmt` prints it: `[a b c]`.
fn listed(s: &BTreeSet<String>) -> String {
    format!("[{}]", s.iter().cloned().collect::<Vec<_>>().join(" "))
}

/// Ok if `signer` may issue `req` with `usages`, else upstream's reason.
pub fn check(signer: &str, req: &RequestInfo, usages: &[String]) -> Result<(), String> {
    let usages: BTreeSet<String> = usages.iter().cloned().collect();
    match signer {
        KUBE_APISERVER_CLIENT => {
            let allowed = set(&["digital signature", "key encipherment", "client auth"]);
            for u in &usages {
                if !allowed.contains(u) {
                    return Err(format!("invalid usage for client certificate: {u}"));
                }
            }
            Ok(())
        }
        KUBE_APISERVER_CLIENT_KUBELET => kubelet_client(req, &usages),
        KUBELET_SERVING => kubelet_serving(req, &usages),
        _ => Err(format!("unrecognized signerName {signer:?}")),
    }
}

fn node_org(req: &RequestInfo) -> Result<(), String> {
    if req.organizations != ["system:nodes"] {
        return Err("subject organization is not system:nodes".into());
    }
    Ok(())
}

fn node_cn(req: &RequestInfo) -> Result<(), String> {
    if !req.common_name.starts_with("system:node:") {
        return Err("subject common name does not begin with system:node:".into());
    }
    Ok(())
}

fn kubelet_client(req: &RequestInfo, usages: &BTreeSet<String>) -> Result<(), String> {
    node_org(req)?;
    if !req.dns_names.is_empty() {
        return Err("DNS subjectAltNames are not allowed".into());
    }
    if !req.emails.is_empty() {
        return Err("Email subjectAltNames are not allowed".into());
    }
    if !req.ip_addresses.is_empty() {
        return Err("IP subjectAltNames are not allowed".into());
    }
    if !req.uris.is_empty() {
        return Err("URI subjectAltNames are not allowed".into());
    }
    node_cn(req)?;
    let rsa = set(&["digital signature", "key encipherment", "client auth"]);
    let no_rsa = set(&["digital signature", "client auth"]);
    if *usages != rsa && *usages != no_rsa {
        return Err(format!("usages did not match {}", listed(&rsa)));
    }
    Ok(())
}

fn kubelet_serving(req: &RequestInfo, usages: &BTreeSet<String>) -> Result<(), String> {
    node_org(req)?;
    if req.dns_names.is_empty() && req.ip_addresses.is_empty() {
        return Err("DNS or IP subjectAltName is required".into());
    }
    if !req.emails.is_empty() {
        return Err("Email subjectAltNames are not allowed".into());
    }
    if !req.uris.is_empty() {
        return Err("URI subjectAltNames are not allowed".into());
    }
    let rsa = set(&["digital signature", "key encipherment", "server auth"]);
    let no_rsa = set(&["digital signature", "server auth"]);
    if *usages != rsa && *usages != no_rsa {
        return Err(format!("usages did not match {}", listed(&rsa)));
    }
    node_cn(req)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(cn: &str, orgs: &[&str], dns: &[&str]) -> RequestInfo {
        RequestInfo {
            common_name: cn.into(),
            organizations: orgs.iter().map(|s| s.to_string()).collect(),
            dns_names: dns.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn usages(u: &[&str]) -> Vec<String> {
        u.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn each_signer_as_upstream() {
        let jane = req("jane", &["devs"], &[]);
        assert!(check(KUBE_APISERVER_CLIENT, &jane, &usages(&["client auth"])).is_ok());
        assert_eq!(
            check(KUBE_APISERVER_CLIENT, &jane, &usages(&["server auth"])).unwrap_err(),
            "invalid usage for client certificate: server auth"
        );
        let node = req("system:node:w1", &["system:nodes"], &[]);
        let client = usages(&["digital signature", "client auth"]);
        assert!(check(KUBE_APISERVER_CLIENT_KUBELET, &node, &client).is_ok());
        assert_eq!(
            check(KUBE_APISERVER_CLIENT_KUBELET, &jane, &client).unwrap_err(),
            "subject organization is not system:nodes"
        );
        assert_eq!(
            check(
                KUBE_APISERVER_CLIENT_KUBELET,
                &node,
                &usages(&["client auth"])
            )
            .unwrap_err(),
            "usages did not match [client auth digital signature key encipherment]"
        );
        let serving = usages(&["digital signature", "key encipherment", "server auth"]);
        assert_eq!(
            check(KUBELET_SERVING, &node, &serving).unwrap_err(),
            "DNS or IP subjectAltName is required"
        );
        let named = req("system:node:w1", &["system:nodes"], &["w1"]);
        assert!(check(KUBELET_SERVING, &named, &serving).is_ok());
        assert_eq!(
            check(KUBE_APISERVER_CLIENT_KUBELET, &named, &client).unwrap_err(),
            "DNS subjectAltNames are not allowed"
        );
        let stranger = req("jane", &["system:nodes"], &["w1"]);
        assert_eq!(
            check(KUBELET_SERVING, &stranger, &serving).unwrap_err(),
            "subject common name does not begin with system:node:"
        );
    }
}
