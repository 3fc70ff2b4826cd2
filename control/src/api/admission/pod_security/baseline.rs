//! The baseline checks, each as upstream's `policy/check_<id>.go` words
//! it: what is forbidden and the message naming the containers, volumes
//! and values.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Probe, SELinuxOptions};

use super::levels::Level;
use super::policy::{
    containers_named, containers_where, forbid, go_quote, join_quote, pluralize, setters, Check,
    Forbidden, PodView, VersionedCheck,
};

const fn v(min_minor: u32, check: super::policy::CheckFn) -> VersionedCheck {
    VersionedCheck {
        min_minor,
        check,
        overrides: &[],
    }
}

pub static CHECKS: &[Check] = &[
    Check {
        id: "appArmorProfile",
        level: Level::Baseline,
        versions: &[v(0, app_armor_profile)],
    },
    Check {
        id: "capabilities_baseline",
        level: Level::Baseline,
        versions: &[v(0, capabilities_baseline)],
    },
    Check {
        id: "hostNamespaces",
        level: Level::Baseline,
        versions: &[v(0, host_namespaces)],
    },
    Check {
        id: "hostPathVolumes",
        level: Level::Baseline,
        versions: &[v(0, host_path_volumes)],
    },
    Check {
        id: "hostPorts",
        level: Level::Baseline,
        versions: &[v(0, host_ports)],
    },
    Check {
        id: "hostProbesAndHostLifecycle",
        level: Level::Baseline,
        versions: &[v(34, host_probes_and_host_lifecycle)],
    },
    Check {
        id: "privileged",
        level: Level::Baseline,
        versions: &[v(0, privileged)],
    },
    Check {
        id: "procMount",
        level: Level::Baseline,
        versions: &[v(0, proc_mount_1_0), v(35, proc_mount_1_35)],
    },
    Check {
        id: "seLinuxOptions",
        level: Level::Baseline,
        versions: &[v(0, se_linux_options_1_0), v(31, se_linux_options_1_31)],
    },
    Check {
        id: "seccompProfile_baseline",
        level: Level::Baseline,
        versions: &[v(0, seccomp_baseline_1_0), v(19, seccomp_baseline_1_19)],
    },
    Check {
        id: "sysctls",
        level: Level::Baseline,
        versions: &[
            v(0, sysctls_1_0),
            v(27, sysctls_1_27),
            v(29, sysctls_1_29),
            v(32, sysctls_1_32),
            v(37, sysctls_1_37),
        ],
    },
    Check {
        id: "windowsHostProcess",
        level: Level::Baseline,
        versions: &[v(0, windows_host_process)],
    },
];

fn security_context(c: &Container) -> Option<&k8s_openapi::api::core::v1::SecurityContext> {
    c.security_context.as_ref()
}

fn windows_host_process(pod: &PodView) -> Option<Forbidden> {
    let bad = containers_where(pod, |c| {
        security_context(c)
            .and_then(|s| s.windows_options.as_ref())
            .and_then(|w| w.host_process)
            == Some(true)
    });
    let pod_set = pod
        .pod_security_context()
        .and_then(|s| s.windows_options.as_ref())
        .and_then(|w| w.host_process)
        == Some(true);
    let who = setters(pod_set, &bad);
    if who.is_empty() {
        return None;
    }
    forbid(
        "hostProcess",
        format!(
            "{} must not set securityContext.windowsOptions.hostProcess=true",
            who.join(" and ")
        ),
    )
}

fn allowed_app_armor_type(t: &str) -> bool {
    matches!(t, "RuntimeDefault" | "Localhost")
}

fn app_armor_profile(pod: &PodView) -> Option<Forbidden> {
    let mut bad_values = BTreeSet::new();
    let mut pod_set = false;
    if let Some(p) = pod
        .pod_security_context()
        .and_then(|s| s.app_armor_profile.as_ref())
    {
        if !allowed_app_armor_type(&p.type_) {
            pod_set = true;
            bad_values.insert(p.type_.clone());
        }
    }
    let mut bad_containers = Vec::new();
    for c in &pod.containers {
        if let Some(p) = security_context(c).and_then(|s| s.app_armor_profile.as_ref()) {
            if !allowed_app_armor_type(&p.type_) {
                bad_containers.push(c.name.clone());
                bad_values.insert(p.type_.clone());
            }
        }
    }
    let mut who = setters(pod_set, &bad_containers);
    let mut forbidden_annotations: Vec<String> = pod
        .annotations
        .iter()
        .filter(|(k, v)| {
            k.starts_with("container.apparmor.security.beta.kubernetes.io/")
                && !(v.is_empty() || *v == "runtime/default" || v.starts_with("localhost/"))
        })
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect();
    let mut values: Vec<String> = bad_values.into_iter().collect();
    if !forbidden_annotations.is_empty() {
        forbidden_annotations.sort();
        who.push(pluralize("annotation", "annotations", forbidden_annotations.len()).to_string());
        values.extend(forbidden_annotations);
    }
    if who.is_empty() {
        return None;
    }
    forbid(
        pluralize(
            "forbidden AppArmor profile",
            "forbidden AppArmor profiles",
            values.len(),
        ),
        format!(
            "{} must not set AppArmor profile type to {}",
            who.join(" and "),
            join_quote(&values)
        ),
    )
}

const CAPABILITIES_ALLOWED: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

fn capabilities_baseline(pod: &PodView) -> Option<Forbidden> {
    let mut bad_containers = Vec::new();
    let mut non_default = BTreeSet::new();
    for c in &pod.containers {
        let added = security_context(c)
            .and_then(|s| s.capabilities.as_ref())
            .and_then(|caps| caps.add.as_ref());
        let mut valid = true;
        for cap in added.into_iter().flatten() {
            if !CAPABILITIES_ALLOWED.contains(&cap.as_str()) {
                valid = false;
                non_default.insert(cap.clone());
            }
        }
        if !valid {
            bad_containers.push(c.name.clone());
        }
    }
    if bad_containers.is_empty() {
        return None;
    }
    let caps: Vec<String> = non_default.into_iter().collect();
    forbid(
        "non-default capabilities",
        format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_named(&bad_containers),
            join_quote(&caps)
        ),
    )
}

fn host_namespaces(pod: &PodView) -> Option<Forbidden> {
    let spec = &pod.spec;
    let set: Vec<&str> = [
        (spec.host_network, "hostNetwork=true"),
        (spec.host_pid, "hostPID=true"),
        (spec.host_ipc, "hostIPC=true"),
    ]
    .iter()
    .filter(|(on, _)| *on == Some(true))
    .map(|(_, what)| *what)
    .collect();
    if set.is_empty() {
        return None;
    }
    forbid("host namespaces", set.join(", "))
}

/// The names of the volumes with a `hostPath` source.
pub fn host_path_volume_names(pod: &PodView) -> Vec<String> {
    pod.volumes
        .iter()
        .filter(|v| v.get("hostPath").is_some_and(|s| !s.is_null()))
        .map(|v| v["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn host_path_volumes(pod: &PodView) -> Option<Forbidden> {
    let names = host_path_volume_names(pod);
    if names.is_empty() {
        return None;
    }
    forbid(
        "hostPath volumes",
        format!(
            "{} {}",
            pluralize("volume", "volumes", names.len()),
            join_quote(&names)
        ),
    )
}

fn host_ports(pod: &PodView) -> Option<Forbidden> {
    let mut bad_containers = Vec::new();
    let mut ports = BTreeSet::new();
    for c in &pod.containers {
        let mut valid = true;
        for p in c.ports.iter().flatten() {
            if let Some(hp) = p.host_port.filter(|hp| *hp != 0) {
                valid = false;
                ports.insert(hp.to_string());
            }
        }
        if !valid {
            bad_containers.push(c.name.clone());
        }
    }
    if bad_containers.is_empty() {
        return None;
    }
    let ports: Vec<String> = ports.into_iter().collect();
    forbid(
        "hostPort",
        format!(
            "{} {} {} {}",
            containers_named(&bad_containers),
            pluralize("uses", "use", bad_containers.len()),
            pluralize("hostPort", "hostPorts", ports.len()),
            ports.join(", ")
        ),
    )
}

fn probe_hosts(probe: Option<&Probe>) -> Vec<String> {
    let Some(p) = probe else { return Vec::new() };
    let http = p.http_get.as_ref().and_then(|h| h.host.clone());
    let tcp = p.tcp_socket.as_ref().and_then(|t| t.host.clone());
    [http, tcp]
        .into_iter()
        .flatten()
        .filter(|h| !h.is_empty())
        .collect()
}

fn handler_hosts(handler: Option<&LifecycleHandler>) -> Vec<String> {
    let Some(h) = handler else { return Vec::new() };
    let http = h.http_get.as_ref().and_then(|g| g.host.clone());
    let tcp = h.tcp_socket.as_ref().and_then(|t| t.host.clone());
    [http, tcp]
        .into_iter()
        .flatten()
        .filter(|h| !h.is_empty())
        .collect()
}

fn host_probes_and_host_lifecycle(pod: &PodView) -> Option<Forbidden> {
    let mut bad_containers = BTreeSet::new();
    let mut hosts = BTreeSet::new();
    for c in &pod.containers {
        let lifecycle = c.lifecycle.as_ref();
        let found = [
            probe_hosts(c.liveness_probe.as_ref()),
            probe_hosts(c.readiness_probe.as_ref()),
            probe_hosts(c.startup_probe.as_ref()),
            handler_hosts(lifecycle.and_then(|l| l.post_start.as_ref())),
            handler_hosts(lifecycle.and_then(|l| l.pre_stop.as_ref())),
        ];
        for h in found.into_iter().flatten() {
            bad_containers.insert(c.name.clone());
            hosts.insert(h);
        }
    }
    if bad_containers.is_empty() {
        return None;
    }
    let names: Vec<String> = bad_containers.into_iter().collect();
    let hosts: Vec<String> = hosts.into_iter().collect();
    forbid(
        "probe or lifecycle host",
        format!(
            "{} {} {} {}",
            containers_named(&names),
            pluralize("uses", "use", names.len()),
            pluralize(
                "probe or lifecycle host",
                "probe or lifecycle hosts",
                hosts.len()
            ),
            join_quote(&hosts)
        ),
    )
}

fn privileged(pod: &PodView) -> Option<Forbidden> {
    let bad = containers_where(pod, |c| {
        security_context(c).and_then(|s| s.privileged) == Some(true)
    });
    if bad.is_empty() {
        return None;
    }
    forbid(
        "privileged",
        format!(
            "{} must not set securityContext.privileged=true",
            containers_named(&bad)
        ),
    )
}

/// Any `procMount` but `Default` is forbidden (restricted keeps this
/// version for pods in user namespaces too).
pub fn proc_mount_1_0(pod: &PodView) -> Option<Forbidden> {
    let mut bad_containers = Vec::new();
    let mut types = BTreeSet::new();
    for c in &pod.containers {
        if let Some(pm) = security_context(c).and_then(|s| s.proc_mount.as_ref()) {
            if pm != "Default" {
                bad_containers.push(c.name.clone());
                types.insert(pm.clone());
            }
        }
    }
    if bad_containers.is_empty() {
        return None;
    }
    let types: Vec<String> = types.into_iter().collect();
    forbid(
        "procMount",
        format!(
            "{} must not set securityContext.procMount to {}",
            containers_named(&bad_containers),
            join_quote(&types)
        ),
    )
}

fn proc_mount_1_35(pod: &PodView) -> Option<Forbidden> {
    if pod.in_user_namespace() {
        return None;
    }
    proc_mount_1_0(pod)
}

const SELINUX_TYPES_1_0: &[&str] = &["", "container_t", "container_init_t", "container_kvm_t"];
const SELINUX_TYPES_1_31: &[&str] = &[
    "",
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];

fn se_linux_options_1_0(pod: &PodView) -> Option<Forbidden> {
    se_linux_options(pod, SELINUX_TYPES_1_0)
}

fn se_linux_options_1_31(pod: &PodView) -> Option<Forbidden> {
    se_linux_options(pod, SELINUX_TYPES_1_31)
}

fn se_linux_options(pod: &PodView, allowed: &[&str]) -> Option<Forbidden> {
    let mut bad_types = BTreeSet::new();
    let (mut set_user, mut set_role) = (false, false);
    let mut valid = |o: &SELinuxOptions| {
        let mut ok = true;
        let t = o.type_.clone().unwrap_or_default();
        if !allowed.contains(&t.as_str()) {
            ok = false;
            bad_types.insert(t);
        }
        if o.user.as_ref().is_some_and(|u| !u.is_empty()) {
            ok = false;
            set_user = true;
        }
        if o.role.as_ref().is_some_and(|r| !r.is_empty()) {
            ok = false;
            set_role = true;
        }
        ok
    };
    let pod_set = pod
        .pod_security_context()
        .and_then(|s| s.se_linux_options.as_ref())
        .is_some_and(|o| !valid(o));
    let mut bad_containers = Vec::new();
    for c in &pod.containers {
        if let Some(o) = security_context(c).and_then(|s| s.se_linux_options.as_ref()) {
            if !valid(o) {
                bad_containers.push(c.name.clone());
            }
        }
    }
    let who = setters(pod_set, &bad_containers);
    if who.is_empty() {
        return None;
    }
    let mut bad_data = Vec::new();
    if !bad_types.is_empty() {
        let types: Vec<String> = bad_types.into_iter().collect();
        bad_data.push(format!(
            "{} {}",
            pluralize("type", "types", types.len()),
            join_quote(&types)
        ));
    }
    if set_user {
        bad_data.push("user may not be set".to_string());
    }
    if set_role {
        bad_data.push("role may not be set".to_string());
    }
    forbid(
        "seLinuxOptions",
        format!(
            "{} set forbidden securityContext.seLinuxOptions: {}",
            who.join(" and "),
            bad_data.join("; ")
        ),
    )
}

pub fn valid_seccomp(t: &str) -> bool {
    matches!(t, "Localhost" | "RuntimeDefault")
}

const SECCOMP_POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
const SECCOMP_CONTAINER_ANNOTATION: &str = "container.seccomp.security.alpha.kubernetes.io/";

fn seccomp_baseline_1_0(pod: &PodView) -> Option<Forbidden> {
    let valid =
        |v: &str| v == "runtime/default" || v == "docker/default" || v.starts_with("localhost/");
    let mut forbidden = BTreeSet::new();
    let mut keys = vec![SECCOMP_POD_ANNOTATION.to_string()];
    keys.extend(
        pod.containers
            .iter()
            .map(|c| format!("{SECCOMP_CONTAINER_ANNOTATION}{}", c.name)),
    );
    for key in keys {
        if let Some(v) = pod.annotations.get(&key) {
            if !valid(v) {
                forbidden.insert(format!("{key}={}", go_quote(v)));
            }
        }
    }
    if forbidden.is_empty() {
        return None;
    }
    let list: Vec<String> = forbidden.into_iter().collect();
    forbid(
        "seccompProfile",
        format!(
            "forbidden {} {}",
            pluralize("annotation", "annotations", list.len()),
            list.join(", ")
        ),
    )
}

fn seccomp_baseline_1_19(pod: &PodView) -> Option<Forbidden> {
    let mut bad_values = BTreeSet::new();
    let mut pod_set = false;
    if let Some(p) = pod
        .pod_security_context()
        .and_then(|s| s.seccomp_profile.as_ref())
    {
        if !valid_seccomp(&p.type_) {
            pod_set = true;
            bad_values.insert(p.type_.clone());
        }
    }
    let mut bad_containers = Vec::new();
    for c in &pod.containers {
        if let Some(p) = security_context(c).and_then(|s| s.seccomp_profile.as_ref()) {
            if !valid_seccomp(&p.type_) {
                bad_containers.push(c.name.clone());
                bad_values.insert(p.type_.clone());
            }
        }
    }
    let who = setters(pod_set, &bad_containers);
    if who.is_empty() {
        return None;
    }
    let values: Vec<String> = bad_values.into_iter().collect();
    forbid(
        "seccompProfile",
        format!(
            "{} must not set securityContext.seccompProfile.type to {}",
            who.join(" and "),
            join_quote(&values)
        ),
    )
}

const SYSCTLS_1_0: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
];
const SYSCTLS_1_27: &[&str] = &["net.ipv4.ip_local_reserved_ports"];
const SYSCTLS_1_29: &[&str] = &[
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];
const SYSCTLS_1_32: &[&str] = &["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"];
const SYSCTLS_1_37: &[&str] = &[
    "net.ipv4.tcp_slow_start_after_idle",
    "net.ipv4.tcp_notsent_lowat",
];

fn sysctls_1_0(pod: &PodView) -> Option<Forbidden> {
    sysctls(pod, &[SYSCTLS_1_0])
}

fn sysctls_1_27(pod: &PodView) -> Option<Forbidden> {
    sysctls(pod, &[SYSCTLS_1_0, SYSCTLS_1_27])
}

fn sysctls_1_29(pod: &PodView) -> Option<Forbidden> {
    sysctls(pod, &[SYSCTLS_1_0, SYSCTLS_1_27, SYSCTLS_1_29])
}

fn sysctls_1_32(pod: &PodView) -> Option<Forbidden> {
    sysctls(
        pod,
        &[SYSCTLS_1_0, SYSCTLS_1_27, SYSCTLS_1_29, SYSCTLS_1_32],
    )
}

fn sysctls_1_37(pod: &PodView) -> Option<Forbidden> {
    sysctls(
        pod,
        &[
            SYSCTLS_1_0,
            SYSCTLS_1_27,
            SYSCTLS_1_29,
            SYSCTLS_1_32,
            SYSCTLS_1_37,
        ],
    )
}

fn sysctls(pod: &PodView, allowed: &[&[&str]]) -> Option<Forbidden> {
    let forbidden: Vec<&str> = pod
        .pod_security_context()
        .and_then(|s| s.sysctls.as_ref())
        .into_iter()
        .flatten()
        .map(|s| s.name.as_str())
        .filter(|name| !allowed.iter().any(|set| set.contains(name)))
        .collect();
    if forbidden.is_empty() {
        return None;
    }
    forbid("forbidden sysctls", forbidden.join(", "))
}
