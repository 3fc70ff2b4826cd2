//! networking.k8s.io/v1: NetworkPolicy, as Kubernetes'
//! `ValidateNetworkPolicy` (ports and their `endPort`, peers, `ipBlock`
//! CIDRs with `except` strictly inside `cidr`, `policyTypes`).

use ipnet::IpNet;
use serde_json::Value;

use super::meta::validate_label_selector;
use super::{arr_of, child, get, index, str_of, sub, FieldError};
use crate::names::{is_valid_port_name, is_valid_port_num};

const POLICY_TYPES: [&str; 2] = ["Ingress", "Egress"];
const CIDR_ERROR: &str = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)";

/// `ValidateNetworkPolicySpec` (the metadata is checked by the caller).
/// On update, CIDRs the stored policy already had are not checked again,
/// as upstream's `AllowCIDRsEvenIfInvalid`.
pub(crate) fn validate_network_policy(
    spec: &Value,
    old: Option<&Value>,
    errs: &mut Vec<FieldError>,
) {
    let old_cidrs = old.map(existing_cidrs).unwrap_or_default();
    validate_label_selector(sub(spec, "podSelector"), "spec.podSelector", errs);
    for (dir, peers) in [("ingress", "from"), ("egress", "to")] {
        for (i, rule) in arr_of(spec, dir).iter().enumerate() {
            let path = index(&child("spec", dir), i);
            for (j, port) in arr_of(rule, "ports").iter().enumerate() {
                validate_port(port, &index(&child(&path, "ports"), j), errs);
            }
            for (j, peer) in arr_of(rule, peers).iter().enumerate() {
                validate_peer(peer, &index(&child(&path, peers), j), &old_cidrs, errs);
            }
        }
    }
    let types = arr_of(spec, "policyTypes");
    if types.len() > POLICY_TYPES.len() {
        errs.push(FieldError::invalid(
            "spec.policyTypes",
            Value::Array(types.to_vec()),
            "may not specify more than two policyTypes",
        ));
        return;
    }
    for (i, t) in types.iter().enumerate() {
        let t = t.as_str().unwrap_or_default();
        if !POLICY_TYPES.contains(&t) {
            errs.push(FieldError::not_supported(
                index("spec.policyTypes", i),
                t,
                &POLICY_TYPES,
            ));
        }
    }
}

/// `ValidateNetworkPolicyPort`.
fn validate_port(port: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(p) = get(port, "protocol") {
        let p = p.as_str().unwrap_or_default();
        if !["TCP", "UDP", "SCTP"].contains(&p) {
            errs.push(FieldError::not_supported(
                child(path, "protocol"),
                p,
                &["TCP", "UDP", "SCTP"],
            ));
        }
    }
    let end = get(port, "endPort").and_then(Value::as_i64);
    let end_path = child(path, "endPort");
    match get(port, "port") {
        Some(Value::Number(n)) => {
            let n = n.as_i64().unwrap_or(0);
            for m in is_valid_port_num(n) {
                errs.push(FieldError::invalid(child(path, "port"), n, m));
            }
            if let Some(end) = end {
                if end < n {
                    errs.push(FieldError::invalid(
                        &end_path,
                        end,
                        "must be greater than or equal to `port`",
                    ));
                }
                for m in is_valid_port_num(end) {
                    errs.push(FieldError::invalid(&end_path, end, m));
                }
            }
        }
        Some(Value::String(s)) => {
            if let Some(end) = end {
                errs.push(FieldError::invalid(
                    &end_path,
                    end,
                    "may not be specified when `port` is non-numeric",
                ));
            }
            for m in is_valid_port_name(s) {
                errs.push(FieldError::invalid(child(path, "port"), s.as_str(), m));
            }
        }
        _ => {
            if let Some(end) = end {
                errs.push(FieldError::invalid(
                    &end_path,
                    end,
                    "may not be specified when `port` is not specified",
                ));
            }
        }
    }
}

/// `ValidateNetworkPolicyPeer`.
fn validate_peer(peer: &Value, path: &str, old_cidrs: &[String], errs: &mut Vec<FieldError>) {
    let mut n = 0;
    for sel in ["podSelector", "namespaceSelector"] {
        if let Some(s) = get(peer, sel) {
            n += 1;
            validate_label_selector(s, &child(path, sel), errs);
        }
    }
    let block = get(peer, "ipBlock");
    if let Some(b) = block {
        n += 1;
        validate_ip_block(b, &child(path, "ipBlock"), old_cidrs, errs);
    }
    if n == 0 {
        errs.push(FieldError::required(path, "must specify a peer"));
    } else if n > 1 && block.is_some() {
        errs.push(FieldError::forbidden(
            path,
            "may not specify both ipBlock and another peer",
        ));
    }
}

/// A CIDR as Go's `ParseCIDR` reads it, unless the stored object had it.
fn parse_cidr(
    value: &str,
    path: &str,
    old_cidrs: &[String],
    errs: &mut Vec<FieldError>,
) -> Option<IpNet> {
    match value.parse::<IpNet>() {
        Ok(net) => Some(net),
        Err(_) => {
            if !old_cidrs.iter().any(|c| c == value) {
                errs.push(FieldError::invalid(path, value, CIDR_ERROR));
            }
            None
        }
    }
}

/// `ValidateIPBlock`: `cidr` required and a CIDR, each `except` a CIDR
/// strictly inside it.
fn validate_ip_block(block: &Value, path: &str, old_cidrs: &[String], errs: &mut Vec<FieldError>) {
    let cidr = str_of(block, "cidr");
    if cidr.is_empty() {
        errs.push(FieldError::required(child(path, "cidr"), ""));
        return;
    }
    let Some(net) = parse_cidr(cidr, &child(path, "cidr"), old_cidrs, errs) else {
        return;
    };
    for (i, e) in arr_of(block, "except").iter().enumerate() {
        let e = e.as_str().unwrap_or_default();
        let p = index(&child(path, "except"), i);
        let Some(except) = parse_cidr(e, &p, old_cidrs, errs) else {
            continue;
        };
        if !net.contains(&except.addr()) || net.prefix_len() >= except.prefix_len() {
            errs.push(FieldError::invalid(
                &p,
                e,
                "must be a strict subset of `cidr`",
            ));
        }
    }
}

/// Every `cidr` and `except` of a stored policy.
fn existing_cidrs(old: &Value) -> Vec<String> {
    let spec = sub(old, "spec");
    let mut out = Vec::new();
    for (dir, peers) in [("ingress", "from"), ("egress", "to")] {
        for rule in arr_of(spec, dir) {
            for peer in arr_of(rule, peers) {
                let b = sub(peer, "ipBlock");
                out.push(str_of(b, "cidr").to_string());
                out.extend(
                    arr_of(b, "except")
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string),
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use crate::resources::by_name;
    use crate::validation::validate;

    fn errors(spec: Value) -> Vec<String> {
        let res = by_name("networkpolicies").unwrap();
        let mut obj = json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "np", "namespace": "default"}, "spec": spec});
        crate::defaults::apply_defaults(res, &mut obj);
        validate(res, &obj, None)
            .iter()
            .map(|e| e.message())
            .collect()
    }

    /// Upstream's ValidateNetworkPolicy cases: spec → the messages.
    #[test]
    fn upstream_cases() {
        let cases: Vec<(Value, Vec<&str>)> = vec![
            (json!({"podSelector": {}}), vec![]),
            (
                json!({"podSelector": {}, "ingress": [{"ports": [{"port": 80}, {"protocol": "UDP", "port": "dns"},
                    {"protocol": "SCTP", "port": 1000, "endPort": 2000}, {}]}],
                    "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}]}],
                    "policyTypes": ["Ingress", "Egress"]}),
                vec![],
            ),
            (
                json!({"podSelector": {}, "ingress": [{"ports": [{"protocol": "ICMP", "port": 80}]}]}),
                vec![r#"spec.ingress[0].ports[0].protocol: Unsupported value: "ICMP": supported values: "TCP", "UDP", "SCTP""#],
            ),
            (
                json!({"podSelector": {}, "ingress": [{"ports": [{"port": 70000}]}]}),
                vec!["spec.ingress[0].ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive"],
            ),
            (
                json!({"podSelector": {}, "egress": [{"ports": [{"port": 2000, "endPort": 1000}]}]}),
                vec!["spec.egress[0].ports[0].endPort: Invalid value: 1000: must be greater than or equal to `port`"],
            ),
            (
                json!({"podSelector": {}, "egress": [{"ports": [{"port": "http", "endPort": 1000}]}]}),
                vec!["spec.egress[0].ports[0].endPort: Invalid value: 1000: may not be specified when `port` is non-numeric"],
            ),
            (
                json!({"podSelector": {}, "egress": [{"ports": [{"endPort": 1000}]}]}),
                vec!["spec.egress[0].ports[0].endPort: Invalid value: 1000: may not be specified when `port` is not specified"],
            ),
            (
                json!({"podSelector": {}, "ingress": [{"from": [{}]}]}),
                vec!["spec.ingress[0].from[0]: Required value: must specify a peer"],
            ),
            (
                json!({"podSelector": {}, "ingress": [{"from": [{"podSelector": {}, "ipBlock": {"cidr": "10.0.0.0/8"}}]}]}),
                vec!["spec.ingress[0].from[0]: Forbidden: may not specify both ipBlock and another peer"],
            ),
            (
                json!({"podSelector": {}, "egress": [{"to": [{"ipBlock": {"cidr": ""}}]}]}),
                vec!["spec.egress[0].to[0].ipBlock.cidr: Required value"],
            ),
            (
                json!({"podSelector": {}, "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0"}}]}]}),
                vec![r#"spec.egress[0].to[0].ipBlock.cidr: Invalid value: "10.0.0.0": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"#],
            ),
            (
                json!({"podSelector": {}, "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.1.0.0/24", "10.0.0.0/16", "10.0.1.0/24"]}}]}]}),
                vec![
                    r#"spec.egress[0].to[0].ipBlock.except[0]: Invalid value: "10.1.0.0/24": must be a strict subset of `cidr`"#,
                    r#"spec.egress[0].to[0].ipBlock.except[1]: Invalid value: "10.0.0.0/16": must be a strict subset of `cidr`"#,
                ],
            ),
            (
                json!({"podSelector": {}, "policyTypes": ["Ingress", "Sideways"]}),
                vec![r#"spec.policyTypes[1]: Unsupported value: "Sideways": supported values: "Ingress", "Egress""#],
            ),
            (
                json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress", "Ingress"]}),
                vec![r#"spec.policyTypes: Invalid value: []string{"Ingress", "Egress", "Ingress"}: may not specify more than two policyTypes"#],
            ),
            (
                json!({"podSelector": {"matchExpressions": [{"key": "app", "operator": "In"}]}}),
                vec!["spec.podSelector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"],
            ),
        ];
        for (spec, want) in cases {
            assert_eq!(errors(spec.clone()), want, "{spec}");
        }
    }

    /// SetDefaults_NetworkPolicy and SetDefaults_NetworkPolicyPort.
    #[test]
    fn defaults() {
        let res = by_name("networkpolicies").unwrap();
        let cases = [
            (
                json!({}),
                json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
            ),
            (
                json!({"egress": [{"ports": [{"port": 53}]}]}),
                json!({"podSelector": {}, "egress": [{"ports": [{"port": 53, "protocol": "TCP"}]}],
                    "policyTypes": ["Ingress", "Egress"]}),
            ),
            (
                json!({"podSelector": {}, "policyTypes": ["Egress"], "ingress": [{"ports": [{"protocol": "UDP"}]}]}),
                json!({"podSelector": {}, "policyTypes": ["Egress"], "ingress": [{"ports": [{"protocol": "UDP"}]}]}),
            ),
        ];
        for (spec, want) in cases {
            let mut obj = json!({"spec": spec});
            crate::defaults::apply_defaults(res, &mut obj);
            assert_eq!(obj["spec"], want);
        }
    }
}
