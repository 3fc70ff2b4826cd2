//! discovery.k8s.io/v1: EndpointSlice, as Kubernetes' `ValidateEndpointSlice`.

use std::collections::BTreeSet;

use serde_json::Value;

use super::container::PROTOCOLS;
use super::{arr_of, child, get, index, str_of, ErrorKind, FieldError};
use crate::names::*;

const ADDRESS_TYPES: [&str; 3] = ["FQDN", "IPv4", "IPv6"];
const MAX_ENDPOINTS: usize = 1000;
const MAX_ADDRESSES: usize = 100;
const MAX_PORTS: usize = 100;

/// Kubernetes' `field.TooMany`: `Too many: 1001: must have at most 1000 items`.
fn too_many(field: String, n: usize, max: usize) -> FieldError {
    FieldError {
        field,
        kind: ErrorKind::TooMany,
        bad_value: Some((n as u64).into()),
        detail: format!("must have at most {max} items"),
    }
}

pub(crate) fn validate_endpoint_slice(
    obj: &Value,
    old: Option<&Value>,
    errs: &mut Vec<FieldError>,
) {
    let address_type = str_of(obj, "addressType");
    let known_type = ADDRESS_TYPES.contains(&address_type);
    if address_type.is_empty() {
        errs.push(FieldError::required("addressType", ""));
    } else if !known_type {
        errs.push(FieldError::not_supported(
            "addressType",
            address_type,
            &ADDRESS_TYPES,
        ));
    }
    if let Some(old) = old {
        let was = str_of(old, "addressType");
        if was != address_type {
            errs.push(FieldError::immutable("addressType", address_type));
        }
    }

    let endpoints = arr_of(obj, "endpoints");
    if endpoints.len() > MAX_ENDPOINTS {
        errs.push(too_many("endpoints".into(), endpoints.len(), MAX_ENDPOINTS));
    }
    for (i, ep) in endpoints.iter().enumerate() {
        let path = index("endpoints", i);
        let addresses_path = child(&path, "addresses");
        let addresses = arr_of(ep, "addresses");
        if addresses.is_empty() {
            errs.push(FieldError::required(
                &addresses_path,
                "must contain at least 1 address",
            ));
        } else if addresses.len() > MAX_ADDRESSES {
            errs.push(too_many(
                addresses_path.clone(),
                addresses.len(),
                MAX_ADDRESSES,
            ));
        }
        for (j, a) in addresses.iter().enumerate() {
            let a = a.as_str().unwrap_or_default();
            let field = index(&addresses_path, j);
            match address_type {
                "IPv4" if a.parse::<std::net::Ipv4Addr>().is_err() => {
                    errs.push(FieldError::invalid(
                        field,
                        a,
                        "must be a valid IPv4 address",
                    ));
                }
                "IPv6" if a.parse::<std::net::Ipv6Addr>().is_err() => {
                    errs.push(FieldError::invalid(
                        field,
                        a,
                        "must be a valid IPv6 address",
                    ));
                }
                "FQDN" => {
                    for m in is_dns1123_subdomain(a) {
                        errs.push(FieldError::invalid(&field, a, m));
                    }
                }
                _ => {}
            }
        }
        let hostname = str_of(ep, "hostname");
        if get(ep, "hostname").is_some_and(|h| !h.is_null()) {
            for m in is_dns1123_label(hostname) {
                errs.push(FieldError::invalid(child(&path, "hostname"), hostname, m));
            }
        }
        let node_name = str_of(ep, "nodeName");
        if get(ep, "nodeName").is_some_and(|n| !n.is_null()) {
            for m in is_dns1123_subdomain(node_name) {
                errs.push(FieldError::invalid(child(&path, "nodeName"), node_name, m));
            }
        }
    }

    let ports = arr_of(obj, "ports");
    if ports.len() > MAX_PORTS {
        errs.push(too_many("ports".into(), ports.len(), MAX_PORTS));
    }
    let mut names = BTreeSet::new();
    for (i, p) in ports.iter().enumerate() {
        let path = index("ports", i);
        let name = str_of(p, "name");
        if !name.is_empty() {
            for m in is_dns1123_label(name) {
                errs.push(FieldError::invalid(child(&path, "name"), name, m));
            }
        }
        if !names.insert(name) {
            errs.push(FieldError::duplicate(child(&path, "name"), name));
        }
        let protocol = str_of(p, "protocol");
        if protocol.is_empty() {
            errs.push(FieldError::required(child(&path, "protocol"), ""));
        } else if !PROTOCOLS.contains(&protocol) {
            errs.push(FieldError::not_supported(
                child(&path, "protocol"),
                protocol,
                &PROTOCOLS,
            ));
        }
        if let Some(port) = get(p, "port").filter(|v| !v.is_null()) {
            let n = port.as_i64().unwrap_or(0);
            for m in is_valid_port_num(n) {
                errs.push(FieldError::invalid(child(&path, "port"), n, m));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::super::{normalize, validate, FieldError};
    use crate::defaults::apply_defaults;
    use crate::resources::by_name;

    fn prepared(obj: Value) -> Value {
        let res = by_name("endpointslices").unwrap();
        let mut obj = normalize(res, obj).expect("normalize");
        apply_defaults(res, &mut obj);
        obj["metadata"]["namespace"] = json!("default");
        obj
    }

    fn check(obj: Value, old: Option<Value>) -> Vec<String> {
        let res = by_name("endpointslices").unwrap();
        let old = old.map(prepared);
        validate(res, &prepared(obj), old.as_ref())
            .iter()
            .map(FieldError::message)
            .collect()
    }

    fn slice(address_type: &str, endpoints: Value, ports: Value) -> Value {
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"name": "web-abc12"}, "addressType": address_type,
               "endpoints": endpoints, "ports": ports})
    }

    #[test]
    fn a_good_slice_passes_and_ports_default_to_tcp() {
        let good = slice(
            "IPv4",
            json!([{"addresses": ["10.244.1.2"], "conditions": {"ready": true},
                    "hostname": "web-0", "nodeName": "node-1",
                    "targetRef": {"kind": "Pod", "name": "web-0", "namespace": "default"}}]),
            json!([{"name": "http", "port": 80}]),
        );
        assert_eq!(check(good.clone(), None), Vec::<String>::new());
        assert_eq!(
            prepared(good)["ports"],
            json!([{"name": "http", "port": 80, "protocol": "TCP"}])
        );
    }

    #[test]
    fn bad_slices_name_every_bad_field() {
        let errs = check(
            slice(
                "IPv5",
                json!([{"addresses": []}, {"addresses": ["300.1.1.1"], "hostname": "Web_0"}]),
                json!([{"name": "http", "port": 70000, "protocol": "QUIC"}, {"name": "http", "port": 81}]),
            ),
            None,
        );
        let want = [
            "addressType: Unsupported value: \"IPv5\": supported values: \"FQDN\", \"IPv4\", \"IPv6\"",
            "endpoints[0].addresses: Required value: must contain at least 1 address",
            "endpoints[1].hostname: Invalid value: \"Web_0\"",
            "ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive",
            "ports[0].protocol: Unsupported value: \"QUIC\"",
            "ports[1].name: Duplicate value: \"http\"",
        ];
        for w in want {
            assert!(
                errs.iter().any(|e| e.starts_with(w)),
                "no {w:?} in {errs:#?}"
            );
        }
        let v4 = check(
            slice("IPv4", json!([{"addresses": ["fd00::1"]}]), json!([])),
            None,
        );
        assert_eq!(
            v4,
            ["endpoints[0].addresses[0]: Invalid value: \"fd00::1\": must be a valid IPv4 address"]
        );
        let too_many: Vec<Value> = (0..101).map(|i| json!({"port": 1000 + i})).collect();
        let errs = check(slice("IPv4", json!([]), json!(too_many)), None);
        assert!(
            errs.iter()
                .any(|e| e == "ports: Too many: 101: must have at most 100 items"),
            "{errs:#?}"
        );
        assert_eq!(
            check(json!({"metadata": {"name": "x"}}), None),
            ["addressType: Required value"]
        );
    }

    #[test]
    fn the_address_type_is_immutable() {
        let old = slice("IPv4", json!([]), json!([]));
        let errs = check(slice("IPv6", json!([]), json!([])), Some(old));
        assert_eq!(
            errs,
            ["addressType: Invalid value: \"IPv6\": field is immutable"]
        );
    }
}
