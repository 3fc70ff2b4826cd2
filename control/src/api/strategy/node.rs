//! Nodes: a Node's pod range (`spec.podCIDR`, `spec.podCIDRs`) is set once,
//! from nothing to a range inside the cluster's pod network
//! (`--cluster-cidr`), and never changed after, as kube-apiserver's
//! `ValidateNodeUpdate` has it ("node updates may not change podCIDR except
//! from \"\" to valid"). Every agent routes a Node's range to that node, so
//! a range outside the cluster's (`0.0.0.0/1`) or another node's would
//! take traffic that is not the node's. Which writer may set it at all is
//! NodeRestriction's business ([`crate::auth::node::admission`]).

use bosun::validation::FieldError;
use ipnet::Ipv4Net;
use serde_json::Value;

use super::Strategy;
use crate::api::ApiOptions;

/// An IPv4 CIDR without host bits, or why not.
fn parse_cidr(s: &str) -> Result<Ipv4Net, String> {
    let net: Ipv4Net = s
        .parse()
        .map_err(|_| "must be an IPv4 CIDR like 10.244.1.0/24".to_string())?;
    if net != net.trunc() {
        return Err(format!("has host bits set (did you mean {}?)", net.trunc()));
    }
    Ok(net)
}

pub struct NodeStrategy;

const UNCHANGEABLE: &str = "node updates may not change podCIDR except from \"\" to valid";

fn ranges(obj: &Value) -> (String, Vec<String>) {
    let spec = &obj["spec"];
    let one = spec["podCIDR"].as_str().unwrap_or_default().to_string();
    let all = spec["podCIDRs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| v.as_str().unwrap_or_default().to_string())
        .collect();
    (one, all)
}

/// The field errors of `obj`'s pod range against `old` (None: a create)
/// and the cluster's pod network `cluster`.
pub fn validate_pod_cidrs(cluster: &Ipv4Net, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let (one, all) = ranges(obj);
    if let Some(old) = old {
        let (was_one, was_all) = ranges(old);
        if (!was_all.is_empty() && all != was_all) || (!was_one.is_empty() && one != was_one) {
            return vec![FieldError::forbidden("spec.podCIDRs", UNCHANGEABLE)];
        }
        if (one.clone(), all.clone()) == (was_one, was_all) {
            // Unchanged ranges are not judged again (a range taken before
            // the cluster CIDR changed stays the node's).
            return Vec::new();
        }
    }
    let mut errs = Vec::new();
    if all.len() > 1 {
        errs.push(FieldError::invalid(
            "spec.podCIDRs",
            Value::from(all.clone()),
            "may specify no more than one CIDR for each IP family",
        ));
    }
    if !one.is_empty() && !all.is_empty() && all[0] != one {
        errs.push(FieldError::invalid(
            "spec.podCIDR",
            one.as_str(),
            "must equal spec.podCIDRs[0]",
        ));
    }
    let fields = std::iter::once(("spec.podCIDR".to_string(), &one))
        .filter(|(_, v)| !v.is_empty())
        .chain(
            all.iter()
                .enumerate()
                .map(|(i, v)| (format!("spec.podCIDRs[{i}]"), v)),
        );
    for (field, value) in fields {
        match parse_cidr(value) {
            Err(e) => errs.push(FieldError::invalid(field, value.as_str(), e)),
            Ok(c) if !cluster.contains(&c) => errs.push(FieldError::invalid(
                field,
                value.as_str(),
                format!("must be a subnet of the cluster's pod network {cluster} (--cluster-cidr)"),
            )),
            Ok(_) => {}
        }
    }
    errs
}

impl Strategy for NodeStrategy {
    fn validate(&self, options: &ApiOptions, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        validate_pod_cidrs(&options.cluster_cidr, obj, old)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(one: Option<&str>, all: &[&str]) -> Value {
        let mut n = json!({"metadata": {"name": "a"}, "spec": {"podCIDRs": all}});
        if let Some(c) = one {
            n["spec"]["podCIDR"] = json!(c);
        }
        n
    }

    fn messages(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(|e| e.message()).collect()
    }

    #[test]
    fn a_pod_cidr_is_set_once_inside_the_cluster_cidr() {
        let cluster: Ipv4Net = "10.244.0.0/16".parse().unwrap();
        let none = node(None, &[]);
        let assigned = node(Some("10.244.3.0/24"), &["10.244.3.0/24"]);
        assert!(validate_pod_cidrs(&cluster, &none, None).is_empty());
        assert!(validate_pod_cidrs(&cluster, &assigned, None).is_empty());
        assert!(validate_pod_cidrs(&cluster, &assigned, Some(&none)).is_empty());
        assert!(validate_pod_cidrs(&cluster, &assigned, Some(&assigned)).is_empty());
        let forbidden = vec![format!("spec.podCIDRs: Forbidden: {UNCHANGEABLE}")];
        for changed in [
            node(Some("10.244.4.0/24"), &["10.244.4.0/24"]),
            node(Some("10.244.3.0/24"), &["10.244.4.0/24"]),
            node(Some("10.244.4.0/24"), &["10.244.3.0/24"]),
            node(None, &[]),
        ] {
            assert_eq!(
                messages(validate_pod_cidrs(&cluster, &changed, Some(&assigned))),
                forbidden,
                "{changed}"
            );
        }
        assert_eq!(
            messages(validate_pod_cidrs(&cluster, &node(Some("0.0.0.0/1"), &["0.0.0.0/1"]), None)),
            [
                "spec.podCIDR: Invalid value: \"0.0.0.0/1\": must be a subnet of the cluster's pod network 10.244.0.0/16 (--cluster-cidr)",
                "spec.podCIDRs[0]: Invalid value: \"0.0.0.0/1\": must be a subnet of the cluster's pod network 10.244.0.0/16 (--cluster-cidr)",
            ]
        );
        let bad = messages(validate_pod_cidrs(
            &cluster,
            &node(None, &["10.244.1.7/24"]),
            Some(&none),
        ));
        assert_eq!(bad.len(), 1);
        assert!(
            bad[0].starts_with("spec.podCIDRs[0]: Invalid value: \"10.244.1.7/24\""),
            "{bad:?}"
        );
        let two = messages(validate_pod_cidrs(
            &cluster,
            &node(None, &["10.244.1.0/24", "10.244.2.0/24"]),
            None,
        ));
        assert!(two[0].contains("no more than one CIDR"), "{two:?}");
        let mismatch = messages(validate_pod_cidrs(
            &cluster,
            &node(Some("10.244.1.0/24"), &["10.244.2.0/24"]),
            None,
        ));
        assert!(
            mismatch[0].contains("must equal spec.podCIDRs[0]"),
            "{mismatch:?}"
        );
        // A range outside a cluster CIDR changed since stays valid.
        let narrower: Ipv4Net = "10.250.0.0/16".parse().unwrap();
        assert!(validate_pod_cidrs(&narrower, &assigned, Some(&assigned)).is_empty());
    }
}
