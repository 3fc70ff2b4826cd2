//! Printers for Ingress and IngressClass (`networking.k8s.io`), as
//! kubectl's printIngress and printIngressClass show them.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::age::age_cell;
use super::column::{Column, KindPrinter, AGE, NAME};
use super::fields::{array_at, name_cell, non_empty_or, str_at};

pub(super) const INGRESS: KindPrinter = KindPrinter {
    group: "networking.k8s.io",
    kind: "Ingress",
    columns: &[
        NAME,
        Column::text("Class", "The name of the IngressClass resource that should be used for additional configuration"),
        Column::text("Hosts", "Hosts that incoming requests are matched against before the ingress rule"),
        Column::text("Address", "Address is a list containing ingress points for the load-balancer"),
        Column::text("Ports", "Ports of TLS configurations that open"),
        AGE,
    ],
    cells: ingress_cells,
};

pub(super) const INGRESS_CLASS: KindPrinter = KindPrinter {
    group: "networking.k8s.io",
    kind: "IngressClass",
    columns: &[
        NAME,
        Column::text(
            "Controller",
            "Controller that is responsible for handling this class",
        ),
        Column::text(
            "Parameters",
            "A reference to a resource with additional parameters",
        ),
        AGE,
    ],
    cells: ingress_class_cells,
};

/// kubectl's loadBalancerWidth: a longer ADDRESS is cut to 13 characters and `...`.
const LOAD_BALANCER_WIDTH: usize = 16;

fn ingress_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let class = non_empty_or(str_at(obj, "/spec/ingressClassName"), "<none>");
    let ports = if array_at(obj, "/spec/tls").is_empty() {
        "80"
    } else {
        "80, 443"
    };
    vec![
        name_cell(obj),
        class.into(),
        hosts(obj).into(),
        address(obj).into(),
        ports.into(),
        age_cell(obj, now),
    ]
}

/// formatHosts: the rules' hosts, three at most then `+ N more...`; `*` when none.
fn hosts(obj: &Value) -> String {
    let hosts: Vec<&str> = array_at(obj, "/spec/rules")
        .iter()
        .map(|r| str_at(r, "/host"))
        .filter(|h| !h.is_empty())
        .collect();
    if hosts.is_empty() {
        return "*".to_string();
    }
    let mut out = hosts.iter().take(3).copied().collect::<Vec<_>>().join(",");
    if hosts.len() > 3 {
        out.push_str(&format!(" + {} more...", hosts.len() - 3));
    }
    out
}

/// ingressLoadBalancerStatusStringer without `-o wide`: IPs and hostnames joined.
fn address(obj: &Value) -> String {
    let parts: Vec<&str> = array_at(obj, "/status/loadBalancer/ingress")
        .iter()
        .flat_map(|i| [str_at(i, "/ip"), str_at(i, "/hostname")])
        .filter(|s| !s.is_empty())
        .collect();
    let joined = parts.join(",");
    if joined.len() > LOAD_BALANCER_WIDTH {
        format!("{}...", &joined[..LOAD_BALANCER_WIDTH - 3])
    } else {
        joined
    }
}

fn ingress_class_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let parameters = match obj.pointer("/spec/parameters").filter(|p| p.is_object()) {
        Some(p) => {
            let mut s = str_at(p, "/kind").to_string();
            if let Some(g) = p.get("apiGroup").and_then(Value::as_str) {
                s.push('.');
                s.push_str(g);
            }
            format!("{s}/{}", str_at(p, "/name"))
        }
        None => "<none>".to_string(),
    };
    vec![
        name_cell(obj),
        str_at(obj, "/spec/controller").into(),
        parameters.into(),
        age_cell(obj, now),
    ]
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use serde_json::json;

    use super::*;

    #[test]
    fn ingress_row_as_kubectl_prints_it() {
        let obj = json!({
            "metadata": {"name": "web"},
            "spec": {"ingressClassName": "bosun",
                     "rules": [{"host": "a.test"}, {"host": "b.test"}, {}, {"host": "c.test"}, {"host": "d.test"}],
                     "tls": [{"secretName": "s"}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.168.10.10"}, {"ip": "192.168.10.11"}]}},
        });
        let cells = ingress_cells(&obj, Utc::now());
        assert_eq!(cells[1], "bosun");
        assert_eq!(cells[2], "a.test,b.test,c.test + 1 more...");
        assert_eq!(cells[3], "192.168.10.10...");
        assert_eq!(cells[4], "80, 443");
        let bare = json!({"metadata": {"name": "x"}, "spec": {}});
        let cells = ingress_cells(&bare, Utc::now());
        assert_eq!(
            (&cells[1], &cells[2], &cells[3], &cells[4]),
            (&json!("<none>"), &json!("*"), &json!(""), &json!("80"))
        );
    }

    #[test]
    fn ingress_class_parameters() {
        let obj = json!({"metadata": {"name": "c"}, "spec": {"controller": "bosun.dev/ingress",
            "parameters": {"apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "p"}}});
        let cells = ingress_class_cells(&obj, Utc::now());
        assert_eq!(cells[2], "IngressParameters.k8s.example.com/p");
        let plain = json!({"metadata": {"name": "c"}, "spec": {"controller": "bosun.dev/ingress"}});
        assert_eq!(ingress_class_cells(&plain, Utc::now())[2], "<none>");
    }
}
