//! `describe ingress` and `describe networkpolicy`: kubectl's layouts
//! (`describeIngressV1` and `describeNetworkPolicy` in kubectl's
//! describe.go). An ingress's backends show their service's ready
//! endpoints, read beforehand by the caller.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::Value;

use bosun::selector::format_label_selector_json;

use super::sections::labels_and_annotations;
use super::service::format_slice_endpoints;
use super::writer::{parse_time, str_of, Out};
use crate::cli::apply::LAST_APPLIED;

/// What the caller found for one backend service: the Service and its
/// EndpointSlices, or the error reading them.
pub(super) type Backends = BTreeMap<String, Result<(Value, Vec<Value>), String>>;

/// The service names an ingress's backends name (default backend and
/// every path), for the caller to read.
pub(super) fn backend_services(ing: &Value) -> Vec<String> {
    let spec = &ing["spec"];
    let mut names: Vec<String> = Vec::new();
    let mut add = |b: &Value| {
        if let Some(n) = b["service"]["name"].as_str() {
            if !names.iter().any(|x| x == n) {
                names.push(n.to_string());
            }
        }
    };
    add(&spec["defaultBackend"]);
    for rule in spec["rules"].as_array().into_iter().flatten() {
        for path in rule["http"]["paths"].as_array().into_iter().flatten() {
            add(&path["backend"]);
        }
    }
    names
}

/// `name:port` (the port's number, else its name).
fn service_backend(svc: &Value) -> String {
    let port = match svc["port"]["number"].as_i64() {
        Some(n) if n != 0 => n.to_string(),
        _ => str_of(&svc["port"]["name"]).to_string(),
    };
    format!("{}:{port}", str_of(&svc["name"]))
}

/// `svc:80 (10.0.0.5:8080)`, or a resource backend's `APIGroup: …`.
fn describe_backend(backend: &Value, found: &Backends) -> String {
    if let Some(svc) = backend.get("service").filter(|s| !s.is_null()) {
        let sb = service_backend(svc);
        return match found.get(str_of(&svc["name"])) {
            Some(Ok((service, slices))) => {
                let number = svc["port"]["number"].as_i64().unwrap_or(0);
                let name = str_of(&svc["port"]["name"]);
                let mut port_name = "";
                for sp in service["spec"]["ports"].as_array().into_iter().flatten() {
                    let matches = (number != 0 && sp["port"].as_i64() == Some(number))
                        || (!name.is_empty() && str_of(&sp["name"]) == name);
                    if matches {
                        port_name = str_of(&sp["name"]);
                    }
                }
                format!("{sb} ({})", format_slice_endpoints(slices, port_name))
            }
            Some(Err(e)) => format!("{sb} (<error: {e}>)"),
            None => sb,
        };
    }
    if let Some(r) = backend.get("resource").filter(|r| !r.is_null()) {
        let group = r["apiGroup"].as_str().unwrap_or("<none>");
        return format!(
            "APIGroup: {group}, Kind: {}, Name: {}",
            str_of(&r["kind"]),
            str_of(&r["name"])
        );
    }
    String::new()
}

pub(super) fn describe_ingress(ing: &Value, found: &Backends) -> Out {
    let mut out = Out::default();
    let meta = &ing["metadata"];
    let spec = &ing["spec"];
    out.kv(0, "Name", str_of(&meta["name"]));
    out.map(0, "Labels", &meta["labels"], "=", &[]);
    out.kv(0, "Namespace", str_of(&meta["namespace"]));
    let address: Vec<&str> = ing["status"]["loadBalancer"]["ingress"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| {
            i["ip"]
                .as_str()
                .filter(|s| !s.is_empty())
                .or(i["hostname"].as_str())
        })
        .collect();
    out.kv(0, "Address", &address.join(","));
    out.kv(
        0,
        "Ingress Class",
        spec["ingressClassName"].as_str().unwrap_or("<none>"),
    );
    let default = match spec.get("defaultBackend").filter(|b| !b.is_null()) {
        Some(b) => describe_backend(b, found),
        None => "<default>".to_string(),
    };
    out.kv(0, "Default backend", &default);
    if let Some(tls) = spec["tls"].as_array().filter(|t| !t.is_empty()) {
        out.line(0, "TLS:");
        for t in tls {
            let hosts: Vec<&str> = t["hosts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            match t["secretName"].as_str().filter(|s| !s.is_empty()) {
                None => out.line(2, &format!("SNI routes {}", hosts.join(","))),
                Some(secret) => out.line(2, &format!("{secret} terminates {}", hosts.join(","))),
            }
        }
    }
    out.line(0, "Rules:");
    out.line(2, "Host\tPath\tBackends");
    out.line(2, "----\t----\t--------");
    let mut count = 0;
    for rule in spec["rules"].as_array().into_iter().flatten() {
        let Some(paths) = rule["http"]["paths"].as_array() else {
            continue;
        };
        count += 1;
        let host = rule["host"]
            .as_str()
            .filter(|h| !h.is_empty())
            .unwrap_or("*");
        out.line(2, &format!("{host}\t"));
        for p in paths {
            out.line(
                4,
                &format!(
                    "\t{} \t{}",
                    str_of(&p["path"]),
                    describe_backend(&p["backend"], found)
                ),
            );
        }
    }
    if count == 0 {
        out.line(2, &format!("*\t*\t{default}"));
    }
    out.map(
        0,
        "Annotations",
        &meta["annotations"],
        ": ",
        &[LAST_APPLIED],
    );
    out
}

/// `%s` of a metav1.Time in Go: `2024-05-01 10:00:00 +0000 UTC`.
fn go_time(v: &Value) -> String {
    parse_time(v)
        .map(|t: DateTime<Utc>| t.format("%Y-%m-%d %H:%M:%S %z UTC").to_string())
        .unwrap_or_else(|| "0001-01-01 00:00:00 +0000 UTC".into())
}

/// `To Port:`/`From:` (ingress) or `To Port:`/`To:` (egress) lines of a
/// policy's rules, separated by `----------`.
fn rules(out: &mut Out, rules: &Value, peers_key: &str, peer_word: &str, direction: &str) {
    const IND: &str = "    ";
    let rules = rules.as_array().cloned().unwrap_or_default();
    if rules.is_empty() {
        out.line(
            0,
            &format!("{IND}<none> (Selected pods are isolated for {direction} connectivity)"),
        );
        return;
    }
    let not_restricted = if peer_word == "From" {
        "source"
    } else {
        "destination"
    };
    for (i, rule) in rules.iter().enumerate() {
        let ports = rule["ports"].as_array().cloned().unwrap_or_default();
        if ports.is_empty() {
            out.line(
                0,
                &format!("{IND}To Port: <any> (traffic allowed to all ports)"),
            );
        }
        for p in &ports {
            let port = match &p["port"] {
                Value::Null => "<nil>".to_string(),
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let proto = p["protocol"].as_str().unwrap_or("TCP");
            match p["endPort"].as_i64() {
                Some(end) => out.line(0, &format!("{IND}To Port Range: {port}-{end}/{proto}")),
                None => out.line(0, &format!("{IND}To Port: {port}/{proto}")),
            }
        }
        let peers = rule[peers_key].as_array().cloned().unwrap_or_default();
        if peers.is_empty() {
            out.line(
                0,
                &format!("{IND}{peer_word}: <any> (traffic not restricted by {not_restricted})"),
            );
        }
        for peer in &peers {
            out.line(0, &format!("{IND}{peer_word}:"));
            let sel = |k: &str| format_label_selector_json(Some(&peer[k]));
            let has = |k: &str| !peer[k].is_null();
            if has("podSelector") && has("namespaceSelector") {
                out.line(
                    2,
                    &format!("{IND}NamespaceSelector: {}", sel("namespaceSelector")),
                );
                out.line(2, &format!("{IND}PodSelector: {}", sel("podSelector")));
            } else if has("podSelector") {
                out.line(2, &format!("{IND}PodSelector: {}", sel("podSelector")));
            } else if has("namespaceSelector") {
                out.line(
                    2,
                    &format!("{IND}NamespaceSelector: {}", sel("namespaceSelector")),
                );
            } else if has("ipBlock") {
                let except: Vec<&str> = peer["ipBlock"]["except"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                out.line(2, &format!("{IND}IPBlock:"));
                out.line(
                    4,
                    &format!("{IND}CIDR: {}", str_of(&peer["ipBlock"]["cidr"])),
                );
                out.line(4, &format!("{IND}Except: {}", except.join(", ")));
            }
        }
        if i + 1 != rules.len() {
            out.line(0, &format!("{IND}----------"));
        }
    }
}

pub(super) fn describe_network_policy(np: &Value) -> Out {
    let mut out = Out::default();
    let meta = &np["metadata"];
    let spec = &np["spec"];
    out.kv(0, "Name", str_of(&meta["name"]));
    out.kv(0, "Namespace", str_of(&meta["namespace"]));
    out.kv(0, "Created on", &go_time(&meta["creationTimestamp"]));
    labels_and_annotations(&mut out, meta);
    out.line(0, "Spec:");
    let pod_selector = &spec["podSelector"];
    let empty = |k: &str| {
        pod_selector[k]
            .as_object()
            .map(|m| m.is_empty())
            .or(pod_selector[k].as_array().map(|a| a.is_empty()))
            .unwrap_or(true)
    };
    if empty("matchLabels") && empty("matchExpressions") {
        out.line(
            2,
            "PodSelector:     <none> (Allowing the specific traffic to all pods in this namespace)",
        );
    } else {
        out.line(
            2,
            &format!(
                "PodSelector:     {}",
                format_label_selector_json(Some(pod_selector))
            ),
        );
    }
    let types: Vec<&str> = spec["policyTypes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if types.contains(&"Ingress") {
        out.line(2, "Allowing ingress traffic:");
        rules(&mut out, &spec["ingress"], "from", "From", "ingress");
    } else {
        out.line(2, "Not affecting ingress traffic");
    }
    if types.contains(&"Egress") {
        out.line(2, "Allowing egress traffic:");
        rules(&mut out, &spec["egress"], "to", "To", "egress");
    } else {
        out.line(2, "Not affecting egress traffic");
    }
    out.line(2, &format!("Policy Types: {}", types.join(", ")));
    out
}

pub(super) fn describe_ingress_class(class: &Value) -> Out {
    let mut out = Out::default();
    let meta = &class["metadata"];
    out.kv(0, "Name", str_of(&meta["name"]));
    labels_and_annotations(&mut out, meta);
    let spec = &class["spec"];
    out.kv(0, "Controller", str_of(&spec["controller"]));
    let params = &spec["parameters"];
    if !params.is_null() {
        out.line(0, "Parameters:");
        if let Some(group) = params["apiGroup"].as_str() {
            out.kv(2, "APIGroup", group);
        }
        out.kv(2, "Kind", str_of(&params["kind"]));
        out.kv(2, "Name", str_of(&params["name"]));
    }
    out
}
