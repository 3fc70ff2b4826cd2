//! `describe service`: kubectl's layout, with each port's `Endpoints:` read
//! from the service's EndpointSlices (as kubectl 1.32 does): the ready
//! endpoints' `ip:port`, at most three, then ` + N more...`.

use serde_json::Value;

use super::sections::{labels_and_annotations, name_and_namespace};
use super::writer::{str_of, Out};

/// `a=b,c=d` in key order; `<none>` when empty (`labels.FormatLabels`).
fn format_selector(selector: &Value) -> String {
    let mut pairs: Vec<String> = selector
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    pairs.sort();
    if pairs.is_empty() {
        "<none>".into()
    } else {
        pairs.join(",")
    }
}

fn join_host_port(ip: &str, port: i64) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

/// The `Endpoints:` of the service port named `port_name`: the ready
/// endpoints of `slices` with that port (all of them for slices without
/// ports); `<none>` without slices.
pub(super) fn format_slice_endpoints(slices: &[Value], port_name: &str) -> String {
    const MAX: usize = 3;
    if slices.is_empty() {
        return "<none>".into();
    }
    let mut list: Vec<String> = Vec::new();
    let mut count = 0;
    let ready = |e: &&Value| e["conditions"]["ready"].as_bool() != Some(false);
    for slice in slices {
        let endpoints = slice["endpoints"].as_array().cloned().unwrap_or_default();
        let ports = slice["ports"].as_array().cloned().unwrap_or_default();
        let addresses: Vec<&str> = endpoints
            .iter()
            .filter(ready)
            .filter_map(|e| e["addresses"][0].as_str())
            .collect();
        if ports.is_empty() {
            for a in &addresses {
                if list.len() < MAX {
                    list.push(a.to_string());
                }
                count += 1;
            }
            continue;
        }
        for p in ports.iter().filter(|p| str_of(&p["name"]) == port_name) {
            for a in &addresses {
                if list.len() < MAX {
                    list.push(join_host_port(a, p["port"].as_i64().unwrap_or(0)));
                }
                count += 1;
            }
        }
    }
    let ret = list.join(",");
    if count > MAX {
        format!("{ret} + {} more...", count - MAX)
    } else {
        ret
    }
}

pub(super) fn describe_service(svc: &Value, slices: &[Value]) -> Out {
    let mut out = Out::default();
    let meta = &svc["metadata"];
    let spec = &svc["spec"];
    name_and_namespace(&mut out, meta);
    labels_and_annotations(&mut out, meta);
    out.kv(0, "Selector", &format_selector(&spec["selector"]));
    out.kv(0, "Type", str_of(&spec["type"]));
    if let Some(policy) = spec["ipFamilyPolicy"].as_str() {
        out.kv(0, "IP Family Policy", policy);
    }
    let list = |v: &Value| -> String {
        let items: Vec<&str> = v
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if items.is_empty() {
            "<none>".into()
        } else {
            items.join(",")
        }
    };
    out.kv(0, "IP Families", &list(&spec["ipFamilies"]));
    out.kv(0, "IP", str_of(&spec["clusterIP"]));
    out.kv(0, "IPs", &list(&spec["clusterIPs"]));
    if spec["externalIPs"]
        .as_array()
        .is_some_and(|a| !a.is_empty())
    {
        out.kv(0, "External IPs", &list(&spec["externalIPs"]));
    }
    if let Some(name) = spec["externalName"].as_str().filter(|s| !s.is_empty()) {
        out.kv(0, "External Name", name);
    }
    for p in spec["ports"].as_array().into_iter().flatten() {
        let name = str_of(&p["name"]);
        let shown = if name.is_empty() { "<unset>" } else { name };
        let protocol = p["protocol"].as_str().unwrap_or("TCP");
        let port = p["port"].as_i64().unwrap_or(0);
        out.line(0, &format!("Port:\t{shown}\t{port}/{protocol}"));
        let target = match &p["targetPort"] {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => port.to_string(),
        };
        out.kv(0, "TargetPort", &format!("{target}/{protocol}"));
        if let Some(node_port) = p["nodePort"].as_i64().filter(|n| *n != 0) {
            out.line(0, &format!("NodePort:\t{shown}\t{node_port}/{protocol}"));
        }
        out.kv(0, "Endpoints", &format_slice_endpoints(slices, name));
    }
    out.kv(0, "Session Affinity", str_of(&spec["sessionAffinity"]));
    if let Some(policy) = spec["externalTrafficPolicy"].as_str() {
        out.kv(0, "External Traffic Policy", policy);
    }
    if let Some(policy) = spec["internalTrafficPolicy"].as_str() {
        out.kv(0, "Internal Traffic Policy", policy);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn slice(ports: Value, ips: &[(&str, bool)]) -> Value {
        let eps: Vec<Value> = ips
            .iter()
            .map(|(ip, ready)| json!({"addresses": [ip], "conditions": {"ready": ready}}))
            .collect();
        json!({"ports": ports, "endpoints": eps})
    }

    #[test]
    fn service_layout_lists_ready_endpoints_per_port() {
        let svc = json!({
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
            "spec": {"selector": {"app": "web"}, "type": "ClusterIP",
                "ipFamilyPolicy": "SingleStack", "ipFamilies": ["IPv4"],
                "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
                          {"name": "admin", "port": 81, "targetPort": "admin", "protocol": "TCP"}],
                "sessionAffinity": "None", "internalTrafficPolicy": "Cluster"}
        });
        let http = json!([{"name": "http", "port": 8080, "protocol": "TCP"}]);
        let slices = [slice(
            http,
            &[
                ("10.244.1.2", true),
                ("10.244.1.3", true),
                ("10.244.1.4", false),
            ],
        )];
        let text = describe_service(&svc, &slices).finish();
        assert_eq!(
            text,
            "Name:                     web
Namespace:                default
Labels:                   app=web
Annotations:              <none>
Selector:                 app=web
Type:                     ClusterIP
IP Family Policy:         SingleStack
IP Families:              IPv4
IP:                       10.96.0.10
IPs:                      10.96.0.10
Port:                     http  80/TCP
TargetPort:               8080/TCP
Endpoints:                10.244.1.2:8080,10.244.1.3:8080
Port:                     admin  81/TCP
TargetPort:               admin/TCP
Endpoints:                
Session Affinity:         None
Internal Traffic Policy:  Cluster
"
        );
        assert_eq!(
            describe_service(&svc, &[])
                .finish()
                .matches("<none>")
                .count(),
            3
        );
    }

    #[test]
    fn endpoints_truncate_after_three() {
        let ports = json!([{"name": "", "port": 80}]);
        let ips = [
            ("10.0.0.1", true),
            ("10.0.0.2", true),
            ("10.0.0.3", true),
            ("10.0.0.4", true),
            ("10.0.0.5", true),
        ];
        assert_eq!(
            format_slice_endpoints(&[slice(ports, &ips)], ""),
            "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 2 more..."
        );
        assert_eq!(
            format_slice_endpoints(&[slice(json!([]), &ips[..2])], ""),
            "10.0.0.1,10.0.0.2"
        );
    }
}
