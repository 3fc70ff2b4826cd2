//! What the API server assigns on create, as Kubernetes' registry does:
//! a Service's cluster IP and node ports, a Job's controller-uid selector.

use std::collections::HashSet;
use std::net::Ipv4Addr;

use bosun::validation::FieldError;
use rand::Rng;
use serde_json::{json, Value};

/// The service network: 10.96.0.0/12, as kubeadm's default.
const SERVICE_NET: u32 = u32::from_be_bytes([10, 96, 0, 0]);
const SERVICE_NET_SIZE: u32 = 1 << 20;
/// `.1` is the API's own service and `.10` cluster DNS, by convention;
/// neither is handed out at random.
const RESERVED: [u32; 2] = [1, 10];
const NODE_PORTS: std::ops::RangeInclusive<i64> = 30000..=32767;

/// The service network's first address: the `kubernetes` Service's
/// ClusterIP, which only that Service may hold.
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);

/// Whether `svc` is `default/kubernetes`.
fn is_kubernetes_service(svc: &Value) -> bool {
    svc.pointer("/metadata/name").and_then(Value::as_str) == Some("kubernetes")
        && svc
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default")
            == "default"
}

pub fn in_service_net(ip: Ipv4Addr) -> bool {
    u32::from(ip).wrapping_sub(SERVICE_NET) < SERVICE_NET_SIZE
}

/// Assigns `spec.clusterIP(s)` and node ports to a new Service, given the
/// ones other Services hold.
pub fn service(
    svc: &mut Value,
    used_ips: &HashSet<String>,
    used_ports: &HashSet<i64>,
) -> Result<(), FieldError> {
    let may_hold_first = is_kubernetes_service(svc);
    let spec = &mut svc["spec"];
    let kind = spec["type"].as_str().unwrap_or("ClusterIP").to_string();
    if kind == "ExternalName" {
        return Ok(());
    }
    let requested = spec["clusterIP"].as_str().unwrap_or("").to_string();
    let ip = match requested.as_str() {
        "None" => "None".to_string(),
        "" => {
            let mut rng = rand::rng();
            loop {
                let offset = rng.random_range(2..SERVICE_NET_SIZE - 1);
                if RESERVED.contains(&offset) {
                    continue;
                }
                let ip = Ipv4Addr::from(SERVICE_NET + offset).to_string();
                if !used_ips.contains(&ip) {
                    break ip;
                }
            }
        }
        given => {
            let parsed: Ipv4Addr = given.parse().map_err(|_| {
                FieldError::invalid(
                    "spec.clusterIP",
                    json!(given),
                    "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                )
            })?;
            if !in_service_net(parsed) {
                return Err(FieldError::invalid(
                    "spec.clusterIPs",
                    json!([given]),
                    "failed to allocate IP: the provided IP is not in the valid range. The range of valid IPs is 10.96.0.0/12",
                ));
            }
            if parsed == KUBERNETES_SERVICE_IP && !may_hold_first {
                return Err(FieldError::invalid(
                    "spec.clusterIPs",
                    json!([given]),
                    format!("failed to allocate IP {given}: provided IP is reserved for the kubernetes Service in default"),
                ));
            }
            if used_ips.contains(given) {
                return Err(FieldError::invalid(
                    "spec.clusterIPs",
                    json!([given]),
                    format!("failed to allocate IP {given}: provided IP is already allocated"),
                ));
            }
            given.to_string()
        }
    };
    spec["clusterIP"] = json!(ip);
    spec["clusterIPs"] = json!([ip]);
    if ip != "None" {
        spec["ipFamilies"] = json!(["IPv4"]);
        spec["ipFamilyPolicy"] = json!("SingleStack");
    }
    if kind == "NodePort" || kind == "LoadBalancer" {
        let mut taken: HashSet<i64> = used_ports.clone();
        if let Some(ports) = spec["ports"].as_array_mut() {
            for (i, port) in ports.iter_mut().enumerate() {
                match port["nodePort"].as_i64() {
                    Some(p) if !NODE_PORTS.contains(&p) => {
                        return Err(FieldError::invalid(
                            format!("spec.ports[{i}].nodePort"),
                            json!(p),
                            "provided port is not in the valid range. The range of valid ports is 30000-32767",
                        ))
                    }
                    Some(p) if !taken.insert(p) => {
                        return Err(FieldError::invalid(
                            format!("spec.ports[{i}].nodePort"),
                            json!(p),
                            "provided port is already allocated",
                        ))
                    }
                    Some(_) => {}
                    None => {
                        let free = NODE_PORTS
                            .clone()
                            .find(|p| !taken.contains(p))
                            .ok_or_else(|| {
                                FieldError::forbidden(
                                    format!("spec.ports[{i}].nodePort"),
                                    "no node ports left in the range 30000-32767",
                                )
                            })?;
                        taken.insert(free);
                        port["nodePort"] = json!(free);
                    }
                }
            }
        }
    }
    Ok(())
}

/// The cluster IPs and node ports that `services` hold.
pub fn held_by(services: &[Value]) -> (HashSet<String>, HashSet<i64>) {
    let mut ips = HashSet::new();
    let mut ports = HashSet::new();
    for s in services {
        if let Some(ip) = s.pointer("/spec/clusterIP").and_then(Value::as_str) {
            ips.insert(ip.to_string());
        }
        for p in s
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(n) = p["nodePort"].as_i64() {
                ports.insert(n);
            }
        }
    }
    (ips, ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_ips_come_from_the_service_net_and_are_unique() {
        let mut used = HashSet::new();
        for _ in 0..50 {
            let mut svc = json!({"spec": {"ports": [{"port": 80}]}});
            service(&mut svc, &used, &HashSet::new()).unwrap();
            let ip = svc["spec"]["clusterIP"].as_str().unwrap().to_string();
            assert!(in_service_net(ip.parse().unwrap()), "{ip}");
            assert!(used.insert(ip));
        }
        let mut headless = json!({"spec": {"clusterIP": "None"}});
        service(&mut headless, &used, &HashSet::new()).unwrap();
        assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
        let taken = used.iter().next().unwrap().clone();
        let mut clash = json!({"spec": {"clusterIP": taken}});
        let err = service(&mut clash, &used, &HashSet::new()).unwrap_err();
        assert_eq!(err.field, "spec.clusterIPs");
        // The first address is the kubernetes Service's alone.
        let mut grab = json!({"metadata": {"name": "x", "namespace": "default"},
            "spec": {"clusterIP": "10.96.0.1"}});
        let err = service(&mut grab, &HashSet::new(), &HashSet::new()).unwrap_err();
        assert!(err.to_string().contains("reserved"), "{err}");
        let mut api = json!({"metadata": {"name": "kubernetes", "namespace": "default"},
            "spec": {"clusterIP": "10.96.0.1"}});
        service(&mut api, &HashSet::new(), &HashSet::new()).unwrap();
    }

    #[test]
    fn node_ports_are_allocated_and_checked() {
        let used_ports: HashSet<i64> = [30000].into();
        let mut svc = json!({"spec": {"type": "NodePort", "ports": [{"port": 80}, {"port": 81, "nodePort": 30005}]}});
        service(&mut svc, &HashSet::new(), &used_ports).unwrap();
        assert_eq!(svc["spec"]["ports"][0]["nodePort"], 30001);
        let mut bad =
            json!({"spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 80}]}});
        assert_eq!(
            service(&mut bad, &HashSet::new(), &used_ports)
                .unwrap_err()
                .field,
            "spec.ports[0].nodePort"
        );
    }
}
