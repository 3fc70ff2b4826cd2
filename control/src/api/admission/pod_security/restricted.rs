//! The restricted checks, each as upstream's `policy/check_<id>.go` words
//! it. Some replace a baseline check (`overrides`): restricted volume
//! types cover hostPath, restricted capabilities and seccomp are stricter
//! forms of the baseline ones, and from v1.35 procMount stays unrelaxed
//! for pods in user namespaces.

use std::collections::BTreeSet;

use super::baseline::{proc_mount_1_0, valid_seccomp};
use super::levels::Level;
use super::policy::{
    containers_named, forbid, join_quote, pluralize, Check, CheckFn, Forbidden, PodView,
    VersionedCheck,
};

const fn v(min_minor: u32, check: CheckFn) -> VersionedCheck {
    VersionedCheck {
        min_minor,
        check,
        overrides: &[],
    }
}

const fn replacing(
    min_minor: u32,
    check: CheckFn,
    overrides: &'static [&'static str],
) -> VersionedCheck {
    VersionedCheck {
        min_minor,
        check,
        overrides,
    }
}

pub static CHECKS: &[Check] = &[
    Check {
        id: "allowPrivilegeEscalation",
        level: Level::Restricted,
        versions: &[
            v(8, allow_privilege_escalation_1_8),
            v(25, allow_privilege_escalation_1_25),
        ],
    },
    Check {
        id: "capabilities_restricted",
        level: Level::Restricted,
        versions: &[
            replacing(22, capabilities_1_22, &["capabilities_baseline"]),
            replacing(25, capabilities_1_25, &["capabilities_baseline"]),
        ],
    },
    Check {
        id: "procMount_restricted",
        level: Level::Restricted,
        versions: &[replacing(35, proc_mount_1_0, &["procMount"])],
    },
    Check {
        id: "restrictedVolumes",
        level: Level::Restricted,
        versions: &[replacing(0, restricted_volumes, &["hostPathVolumes"])],
    },
    Check {
        id: "runAsNonRoot",
        level: Level::Restricted,
        versions: &[v(0, run_as_non_root_1_0), v(35, run_as_non_root_1_35)],
    },
    Check {
        id: "runAsUser",
        level: Level::Restricted,
        versions: &[v(23, run_as_user_1_23), v(35, run_as_user_1_35)],
    },
    Check {
        id: "seccompProfile_restricted",
        level: Level::Restricted,
        versions: &[
            replacing(19, seccomp_1_19, &["seccompProfile_baseline"]),
            replacing(25, seccomp_1_25, &["seccompProfile_baseline"]),
        ],
    },
];

fn allow_privilege_escalation_1_8(pod: &PodView) -> Option<Forbidden> {
    let bad: Vec<String> = pod
        .containers
        .iter()
        .filter(|c| {
            c.security_context
                .as_ref()
                .and_then(|s| s.allow_privilege_escalation)
                != Some(false)
        })
        .map(|c| c.name.clone())
        .collect();
    if bad.is_empty() {
        return None;
    }
    forbid(
        "allowPrivilegeEscalation != false",
        format!(
            "{} must set securityContext.allowPrivilegeEscalation=false",
            containers_named(&bad)
        ),
    )
}

fn allow_privilege_escalation_1_25(pod: &PodView) -> Option<Forbidden> {
    if pod.is_windows() {
        return None;
    }
    allow_privilege_escalation_1_8(pod)
}

fn capabilities_1_22(pod: &PodView) -> Option<Forbidden> {
    let mut missing_drop_all = Vec::new();
    let mut adding_forbidden = Vec::new();
    let mut forbidden_caps = BTreeSet::new();
    for c in &pod.containers {
        let Some(caps) = c
            .security_context
            .as_ref()
            .and_then(|s| s.capabilities.as_ref())
        else {
            missing_drop_all.push(c.name.clone());
            continue;
        };
        if !caps.drop.iter().flatten().any(|d| d == "ALL") {
            missing_drop_all.push(c.name.clone());
        }
        let mut added_forbidden = false;
        for a in caps.add.iter().flatten() {
            if a != "NET_BIND_SERVICE" {
                added_forbidden = true;
                forbidden_caps.insert(a.clone());
            }
        }
        if added_forbidden {
            adding_forbidden.push(c.name.clone());
        }
    }
    let mut details = Vec::new();
    if !missing_drop_all.is_empty() {
        details.push(format!(
            "{} must set securityContext.capabilities.drop=[\"ALL\"]",
            containers_named(&missing_drop_all)
        ));
    }
    if !adding_forbidden.is_empty() {
        let caps: Vec<String> = forbidden_caps.into_iter().collect();
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_named(&adding_forbidden),
            join_quote(&caps)
        ));
    }
    if details.is_empty() {
        return None;
    }
    forbid("unrestricted capabilities", details.join("; "))
}

fn capabilities_1_25(pod: &PodView) -> Option<Forbidden> {
    if pod.is_windows() {
        return None;
    }
    capabilities_1_22(pod)
}

/// Volume sources restricted pods may use.
const ALLOWED_VOLUMES: &[&str] = &[
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

/// The sources upstream names, in the order it looks for them.
const NAMED_VOLUMES: &[&str] = &[
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
];

fn restricted_volumes(pod: &PodView) -> Option<Forbidden> {
    let mut bad_volumes = Vec::new();
    let mut bad_types = BTreeSet::new();
    for vol in &pod.volumes {
        let has = |source: &&str| vol.get(*source).is_some_and(|s| !s.is_null());
        if ALLOWED_VOLUMES.iter().any(has) {
            continue;
        }
        bad_volumes.push(vol["name"].as_str().unwrap_or_default().to_string());
        let kind = NAMED_VOLUMES
            .iter()
            .find(|s| has(s))
            .copied()
            .unwrap_or("unknown");
        bad_types.insert(kind.to_string());
    }
    if bad_volumes.is_empty() {
        return None;
    }
    let types: Vec<String> = bad_types.into_iter().collect();
    forbid(
        "restricted volume types",
        format!(
            "{} {} {} {} {}",
            pluralize("volume", "volumes", bad_volumes.len()),
            join_quote(&bad_volumes),
            pluralize("uses", "use", bad_volumes.len()),
            pluralize(
                "restricted volume type",
                "restricted volume types",
                types.len()
            ),
            join_quote(&types)
        ),
    )
}

fn run_as_non_root_1_0(pod: &PodView) -> Option<Forbidden> {
    let mut pod_bad = false;
    let mut pod_non_root = false;
    match pod.pod_security_context().and_then(|s| s.run_as_non_root) {
        Some(false) => pod_bad = true,
        Some(true) => pod_non_root = true,
        None => {}
    }
    let mut explicitly_bad = Vec::new();
    let mut implicitly_bad = Vec::new();
    for c in &pod.containers {
        match c.security_context.as_ref().and_then(|s| s.run_as_non_root) {
            Some(false) => explicitly_bad.push(c.name.clone()),
            Some(true) => {}
            None if !pod_non_root => implicitly_bad.push(c.name.clone()),
            None => {}
        }
    }
    let mut who = Vec::new();
    if pod_bad {
        who.push("pod".to_string());
    }
    if !explicitly_bad.is_empty() {
        who.push(containers_named(&explicitly_bad));
    }
    if !who.is_empty() {
        return forbid(
            "runAsNonRoot != true",
            format!(
                "{} must not set securityContext.runAsNonRoot=false",
                who.join(" and ")
            ),
        );
    }
    if !implicitly_bad.is_empty() {
        return forbid(
            "runAsNonRoot != true",
            format!(
                "pod or {} must set securityContext.runAsNonRoot=true",
                containers_named(&implicitly_bad)
            ),
        );
    }
    None
}

fn run_as_non_root_1_35(pod: &PodView) -> Option<Forbidden> {
    if pod.in_user_namespace() {
        return None;
    }
    run_as_non_root_1_0(pod)
}

fn run_as_user_1_23(pod: &PodView) -> Option<Forbidden> {
    let mut who = Vec::new();
    if pod.pod_security_context().and_then(|s| s.run_as_user) == Some(0) {
        who.push("pod".to_string());
    }
    let bad: Vec<String> = pod
        .containers
        .iter()
        .filter(|c| c.security_context.as_ref().and_then(|s| s.run_as_user) == Some(0))
        .map(|c| c.name.clone())
        .collect();
    if !bad.is_empty() {
        who.push(containers_named(&bad));
    }
    if who.is_empty() {
        return None;
    }
    forbid(
        "runAsUser=0",
        format!("{} must not set runAsUser=0", who.join(" and ")),
    )
}

fn run_as_user_1_35(pod: &PodView) -> Option<Forbidden> {
    if pod.in_user_namespace() {
        return None;
    }
    run_as_user_1_23(pod)
}

fn seccomp_1_19(pod: &PodView) -> Option<Forbidden> {
    let mut bad_values = BTreeSet::new();
    let mut who = Vec::new();
    let mut pod_set = false;
    if let Some(p) = pod
        .pod_security_context()
        .and_then(|s| s.seccomp_profile.as_ref())
    {
        if valid_seccomp(&p.type_) {
            pod_set = true;
        } else {
            who.push("pod".to_string());
            bad_values.insert(p.type_.clone());
        }
    }
    let mut explicitly_bad = Vec::new();
    let mut implicitly_bad = Vec::new();
    for c in &pod.containers {
        match c
            .security_context
            .as_ref()
            .and_then(|s| s.seccomp_profile.as_ref())
        {
            Some(p) if !valid_seccomp(&p.type_) => {
                explicitly_bad.push(c.name.clone());
                bad_values.insert(p.type_.clone());
            }
            Some(_) => {}
            None if !pod_set => implicitly_bad.push(c.name.clone()),
            None => {}
        }
    }
    if !explicitly_bad.is_empty() {
        who.push(containers_named(&explicitly_bad));
    }
    if !who.is_empty() {
        let values: Vec<String> = bad_values.into_iter().collect();
        return forbid(
            "seccompProfile",
            format!(
                "{} must not set securityContext.seccompProfile.type to {}",
                who.join(" and "),
                join_quote(&values)
            ),
        );
    }
    if !implicitly_bad.is_empty() {
        return forbid(
            "seccompProfile",
            format!(
                "pod or {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
                containers_named(&implicitly_bad)
            ),
        );
    }
    None
}

fn seccomp_1_25(pod: &PodView) -> Option<Forbidden> {
    if pod.is_windows() {
        return None;
    }
    seccomp_1_19(pod)
}
