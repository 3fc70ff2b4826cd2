//! What the API server assigns on create, as Kubernetes' registry does:
//! a Service's cluster IP and node ports, a Job's controller-uid selector.

pub mod claims;

use std::collections::HashSet;
use std::net::Ipv4Addr;

use bosun::validation::FieldError;
use ipnet::{IpAdd, Ipv4Net};
use rand::Rng;
use serde_json::{json, Value};

/// The service network by default: 10.96.0.0/12, as kubeadm's
/// (kube-apiserver's `--service-cluster-ip-range`).
pub const DEFAULT_SERVICE_RANGE: &str = "10.96.0.0/12";
/// `.1` is the API's own service and `.10` cluster DNS, by convention;
/// neither is handed out at random (offsets from the range's network
/// address).
const RESERVED: [u32; 2] = [1, 10];
const NODE_PORTS: std::ops::RangeInclusive<i64> = 30000..=32767;

/// The range Services' cluster IPs come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceRange(Ipv4Net);

impl Default for ServiceRange {
    fn default() -> Self {
        ServiceRange(DEFAULT_SERVICE_RANGE.parse().expect("a valid CIDR"))
    }
}

impl std::fmt::Display for ServiceRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl ServiceRange {
    /// A range with room for the reserved addresses and some services
    /// (at most a /28 is refused, as kube-apiserver refuses tiny ranges).
    pub fn parse(s: &str) -> Result<ServiceRange, String> {
        let net: Ipv4Net = s
            .parse()
            .map_err(|_| format!("{s:?} is not an IPv4 CIDR like 10.96.0.0/12"))?;
        if net.prefix_len() > 28 {
            return Err(format!("{s}: too small, the range needs at least a /28"));
        }
        if net.trunc() != net {
            return Err(format!(
                "{s}: has host bits set; did you mean {}?",
                net.trunc()
            ));
        }
        Ok(ServiceRange(net))
    }

    /// The address `offset` past the range's network address.
    fn at(&self, offset: u32) -> Ipv4Addr {
        self.0.network().saturating_add(offset)
    }

    /// A random address for a Service: one of the range's hosts (neither
    /// its network nor its broadcast address), not a reserved one.
    fn random_ip(&self, rng: &mut impl Rng) -> Ipv4Addr {
        // The hosts run from offset 1 to the last before the broadcast
        // address; a /28 at most leaves 14.
        let last = self.0.hosts().count() as u32;
        loop {
            let offset = rng.random_range(2..=last);
            if !RESERVED.contains(&offset) {
                return self.at(offset);
            }
        }
    }

    /// The range's first address: the `kubernetes` Service's ClusterIP,
    /// which only that Service may hold.
    pub fn kubernetes_service_ip(&self) -> Ipv4Addr {
        self.at(1)
    }

    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        self.0.contains(&ip)
    }
}

/// Whether `svc` is `default/kubernetes`.
fn is_kubernetes_service(svc: &Value) -> bool {
    svc.pointer("/metadata/name").and_then(Value::as_str) == Some("kubernetes")
        && svc
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default")
            == "default"
}

/// Assigns `spec.clusterIP(s)` from `range` and node ports to a new
/// Service, given the ones other Services hold.
pub fn service(
    range: &ServiceRange,
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
                let ip = range.random_ip(&mut rng).to_string();
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
            if !range.contains(parsed) {
                return Err(FieldError::invalid(
                    "spec.clusterIPs",
                    json!([given]),
                    format!("failed to allocate IP: the provided IP is not in the valid range. The range of valid IPs is {range}"),
                ));
            }
            if parsed == range.kubernetes_service_ip() && !may_hold_first {
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
        let range = ServiceRange::default();
        let mut used = HashSet::new();
        for _ in 0..50 {
            let mut svc = json!({"spec": {"ports": [{"port": 80}]}});
            service(&range, &mut svc, &used, &HashSet::new()).unwrap();
            let ip = svc["spec"]["clusterIP"].as_str().unwrap().to_string();
            assert!(range.contains(ip.parse().unwrap()), "{ip}");
            assert!(used.insert(ip));
        }
        let mut headless = json!({"spec": {"clusterIP": "None"}});
        service(&range, &mut headless, &used, &HashSet::new()).unwrap();
        assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
        let taken = used.iter().next().unwrap().clone();
        let mut clash = json!({"spec": {"clusterIP": taken}});
        let err = service(&range, &mut clash, &used, &HashSet::new()).unwrap_err();
        assert_eq!(err.field, "spec.clusterIPs");
        // The first address is the kubernetes Service's alone.
        let mut grab = json!({"metadata": {"name": "x", "namespace": "default"},
            "spec": {"clusterIP": "10.96.0.1"}});
        let err = service(&range, &mut grab, &HashSet::new(), &HashSet::new()).unwrap_err();
        assert!(err.to_string().contains("reserved"), "{err}");
        let mut api = json!({"metadata": {"name": "kubernetes", "namespace": "default"},
            "spec": {"clusterIP": "10.96.0.1"}});
        service(&range, &mut api, &HashSet::new(), &HashSet::new()).unwrap();
    }

    #[test]
    fn random_cluster_ips_skip_the_network_broadcast_and_reserved_addresses() {
        let range = ServiceRange::parse("10.112.0.16/28").unwrap();
        assert_eq!(range.kubernetes_service_ip(), Ipv4Addr::new(10, 112, 0, 17));
        let mut rng = rand::rng();
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..2000 {
            seen.insert(range.random_ip(&mut rng).octets()[3] - 16);
        }
        let all_but_reserved: Vec<u8> = (2..=14).filter(|o| *o != 10).collect();
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), all_but_reserved);
        // With one address left, that one is given.
        let used: HashSet<String> = all_but_reserved
            .iter()
            .filter(|o| **o != 7)
            .map(|o| format!("10.112.0.{}", 16 + o))
            .collect();
        let mut svc = json!({"spec": {"ports": [{"port": 80}]}});
        service(&range, &mut svc, &used, &HashSet::new()).unwrap();
        assert_eq!(svc["spec"]["clusterIP"], "10.112.0.23");
    }

    #[test]
    fn node_ports_are_allocated_and_checked() {
        let used_ports: HashSet<i64> = [30000].into();
        let mut svc = json!({"spec": {"type": "NodePort", "ports": [{"port": 80}, {"port": 81, "nodePort": 30005}]}});
        service(
            &ServiceRange::default(),
            &mut svc,
            &HashSet::new(),
            &used_ports,
        )
        .unwrap();
        assert_eq!(svc["spec"]["ports"][0]["nodePort"], 30001);
        let mut bad =
            json!({"spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 80}]}});
        assert_eq!(
            service(
                &ServiceRange::default(),
                &mut bad,
                &HashSet::new(),
                &used_ports
            )
            .unwrap_err()
            .field,
            "spec.ports[0].nodePort"
        );
    }

    #[test]
    fn another_range_gives_its_own_addresses_and_names_itself() {
        let range = ServiceRange::parse("10.112.0.0/16").unwrap();
        assert_eq!(range.kubernetes_service_ip(), Ipv4Addr::new(10, 112, 0, 1));
        for _ in 0..20 {
            let mut svc = json!({"spec": {"ports": [{"port": 80}]}});
            service(&range, &mut svc, &HashSet::new(), &HashSet::new()).unwrap();
            let ip: Ipv4Addr = svc["spec"]["clusterIP"].as_str().unwrap().parse().unwrap();
            assert!(range.contains(ip), "{ip}");
        }
        let mut outside = json!({"spec": {"clusterIP": "10.96.0.5"}});
        let err = service(&range, &mut outside, &HashSet::new(), &HashSet::new()).unwrap_err();
        assert!(
            err.to_string()
                .contains("The range of valid IPs is 10.112.0.0/16"),
            "{err}"
        );
        assert!(ServiceRange::parse("10.112.0.0/30").is_err());
        assert!(ServiceRange::parse("10.112.0.1/16")
            .unwrap_err()
            .contains("10.112.0.0/16"));
        assert!(ServiceRange::parse("nope").is_err());
    }
}
