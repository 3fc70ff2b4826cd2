//! Each check against upstream's messages, and the order and version
//! rules of the levels.

use serde_json::{json, Value};

use super::levels::{Level, LevelVersion, Version};
use super::policy::{forbidden_detail, PodView};
use super::registry::{evaluate, newest_minor};
use super::significant_pod_update;

fn baseline() -> LevelVersion {
    LevelVersion {
        level: Level::Baseline,
        version: Version::Latest,
    }
}

fn restricted() -> LevelVersion {
    LevelVersion {
        level: Level::Restricted,
        version: Version::Latest,
    }
}

fn at(level: Level, minor: u32) -> LevelVersion {
    LevelVersion {
        level,
        version: Version::V1(minor),
    }
}

/// A pod with one container `app`, changed by `edit`.
fn pod(edit: impl FnOnce(&mut Value)) -> Value {
    let mut p = json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "app", "image": "bosun.local/busybox"}]}
    });
    edit(&mut p);
    p
}

/// A pod that passes restricted: the starting point of restricted tests.
fn restricted_pod(edit: impl FnOnce(&mut Value)) -> Value {
    pod(|p| {
        p["spec"]["securityContext"] = json!({
            "runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}});
        p["spec"]["containers"][0]["securityContext"] = json!({
            "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}});
        edit(p);
    })
}

fn check(lv: LevelVersion, pod: &Value) -> String {
    let view = PodView::new(pod.get("metadata"), &pod["spec"]).expect("a pod spec");
    forbidden_detail(&evaluate(lv, &view))
}

#[test]
fn a_plain_pod_passes_baseline_and_a_hardened_one_restricted() {
    assert_eq!(check(baseline(), &pod(|_| {})), "");
    assert_eq!(check(restricted(), &restricted_pod(|_| {})), "");
    let privileged = LevelVersion::PRIVILEGED;
    let p = pod(|p| p["spec"]["hostPID"] = json!(true));
    assert_eq!(check(privileged, &p), "");
}

#[test]
fn privileged_names_the_containers() {
    let p = pod(|p| p["spec"]["containers"][0]["securityContext"] = json!({"privileged": true}));
    assert_eq!(
        check(baseline(), &p),
        "privileged (container \"app\" must not set securityContext.privileged=true)"
    );
    let p = pod(|p| {
        p["spec"]["initContainers"] = json!([{"name": "init", "image": "x",
            "securityContext": {"privileged": true}}]);
        p["spec"]["containers"][0]["securityContext"] = json!({"privileged": true});
    });
    assert_eq!(
        check(baseline(), &p),
        "privileged (containers \"init\", \"app\" must not set securityContext.privileged=true)"
    );
}

#[test]
fn host_namespaces_and_host_ports() {
    let p = pod(|p| {
        p["spec"]["hostNetwork"] = json!(true);
        p["spec"]["hostPID"] = json!(true);
        p["spec"]["hostIPC"] = json!(true);
    });
    assert_eq!(
        check(baseline(), &p),
        "host namespaces (hostNetwork=true, hostPID=true, hostIPC=true)"
    );
    let p = pod(|p| {
        p["spec"]["containers"][0]["ports"] = json!([{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81, "hostPort": 10000}]);
    });
    assert_eq!(
        check(baseline(), &p),
        "hostPort (container \"app\" uses hostPorts 10000, 8080)"
    );
}

#[test]
fn host_path_volumes_and_restricted_volume_types() {
    let p = pod(|p| {
        p["spec"]["volumes"] = json!([
            {"name": "root", "hostPath": {"path": "/"}},
            {"name": "data", "emptyDir": {}},
            {"name": "share", "nfs": {"server": "s", "path": "/x"}}]);
    });
    assert_eq!(check(baseline(), &p), "hostPath volumes (volume \"root\")");
    let p = restricted_pod(|r| r["spec"]["volumes"] = p["spec"]["volumes"].clone());
    // restrictedVolumes replaces the baseline hostPath check.
    assert_eq!(
        check(restricted(), &p),
        "restricted volume types (volumes \"root\", \"share\" use restricted volume types \"hostPath\", \"nfs\")"
    );
}

#[test]
fn capabilities_baseline_and_restricted() {
    let p = pod(|p| {
        p["spec"]["containers"][0]["securityContext"] =
            json!({"capabilities": {"add": ["NET_ADMIN", "CHOWN", "SYS_ADMIN"]}});
    });
    assert_eq!(
        check(baseline(), &p),
        "non-default capabilities (container \"app\" must not include \"NET_ADMIN\", \"SYS_ADMIN\" in securityContext.capabilities.add)"
    );
    let p = restricted_pod(|p| {
        p["spec"]["containers"][0]["securityContext"]["capabilities"] =
            json!({"add": ["NET_BIND_SERVICE", "CHOWN"]});
    });
    assert_eq!(
        check(restricted(), &p),
        "unrestricted capabilities (container \"app\" must set securityContext.capabilities.drop=[\"ALL\"]; container \"app\" must not include \"CHOWN\" in securityContext.capabilities.add)"
    );
    let p = restricted_pod(|p| {
        p["spec"]["containers"][0]["securityContext"]["capabilities"] =
            json!({"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]});
    });
    assert_eq!(check(restricted(), &p), "");
}

#[test]
fn seccomp_baseline_and_restricted() {
    let p = pod(|p| {
        p["spec"]["securityContext"] = json!({"seccompProfile": {"type": "Unconfined"}});
    });
    assert_eq!(
        check(baseline(), &p),
        "seccompProfile (pod must not set securityContext.seccompProfile.type to \"Unconfined\")"
    );
    let p = pod(|_| {});
    assert_eq!(check(baseline(), &p), "");
    let p = restricted_pod(|p| {
        p["spec"]["securityContext"]
            .as_object_mut()
            .unwrap()
            .remove("seccompProfile");
    });
    assert_eq!(
        check(restricted(), &p),
        "seccompProfile (pod or container \"app\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
    );
    let p = restricted_pod(|p| {
        p["spec"]["containers"][0]["securityContext"]["seccompProfile"] =
            json!({"type": "Unconfined"});
    });
    assert_eq!(
        check(restricted(), &p),
        "seccompProfile (container \"app\" must not set securityContext.seccompProfile.type to \"Unconfined\")"
    );
}

#[test]
fn run_as_non_root_and_run_as_user() {
    let p = restricted_pod(|p| {
        p["spec"]["securityContext"]
            .as_object_mut()
            .unwrap()
            .remove("runAsNonRoot");
    });
    assert_eq!(
        check(restricted(), &p),
        "runAsNonRoot != true (pod or container \"app\" must set securityContext.runAsNonRoot=true)"
    );
    let p = restricted_pod(|p| {
        p["spec"]["securityContext"]["runAsNonRoot"] = json!(false);
        p["spec"]["containers"][0]["securityContext"]["runAsNonRoot"] = json!(false);
    });
    assert_eq!(
        check(restricted(), &p),
        "runAsNonRoot != true (pod and container \"app\" must not set securityContext.runAsNonRoot=false)"
    );
    let p = restricted_pod(|p| {
        p["spec"]["containers"][0]["securityContext"]["runAsUser"] = json!(0);
    });
    assert_eq!(
        check(restricted(), &p),
        "runAsUser=0 (container \"app\" must not set runAsUser=0)"
    );
    // From v1.35 a pod in a user namespace may run as root.
    let p = restricted_pod(|p| {
        p["spec"]["hostUsers"] = json!(false);
        p["spec"]["securityContext"]["runAsUser"] = json!(0);
        p["spec"]["securityContext"]["runAsNonRoot"] = json!(false);
    });
    assert_eq!(check(restricted(), &p), "");
    assert_eq!(
        check(at(Level::Restricted, 34), &p),
        "runAsNonRoot != true (pod must not set securityContext.runAsNonRoot=false), runAsUser=0 (pod must not set runAsUser=0)"
    );
}

#[test]
fn privilege_escalation_and_the_restricted_order() {
    // A plain pod fails restricted on every count, in upstream's order.
    assert_eq!(
        check(restricted(), &pod(|_| {})),
        "allowPrivilegeEscalation != false (container \"app\" must set securityContext.allowPrivilegeEscalation=false), \
unrestricted capabilities (container \"app\" must set securityContext.capabilities.drop=[\"ALL\"]), \
runAsNonRoot != true (pod or container \"app\" must set securityContext.runAsNonRoot=true), \
seccompProfile (pod or container \"app\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
    );
    // Windows pods are exempt from these from v1.25.
    let p = restricted_pod(|p| {
        p["spec"]["os"] = json!({"name": "windows"});
        p["spec"]["containers"][0]["securityContext"] = json!({});
    });
    assert_eq!(check(restricted(), &p), "");
}

#[test]
fn baseline_failures_come_in_check_id_order() {
    let p = pod(|p| {
        p["spec"]["hostNetwork"] = json!(true);
        p["spec"]["containers"][0]["securityContext"] = json!({"privileged": true,
            "capabilities": {"add": ["SYS_ADMIN"]}});
        p["spec"]["volumes"] = json!([{"name": "root", "hostPath": {"path": "/"}}]);
    });
    assert_eq!(
        check(baseline(), &p),
        "non-default capabilities (container \"app\" must not include \"SYS_ADMIN\" in securityContext.capabilities.add), \
host namespaces (hostNetwork=true), hostPath volumes (volume \"root\"), \
privileged (container \"app\" must not set securityContext.privileged=true)"
    );
}

#[test]
fn app_armor_se_linux_proc_mount_and_host_process() {
    let p = pod(|p| {
        p["metadata"]["annotations"] =
            json!({"container.apparmor.security.beta.kubernetes.io/app": "unconfined"});
        p["spec"]["securityContext"] = json!({"appArmorProfile": {"type": "Unconfined"}});
    });
    assert_eq!(
        check(baseline(), &p),
        "forbidden AppArmor profiles (pod and annotation must not set AppArmor profile type to \"Unconfined\", \"container.apparmor.security.beta.kubernetes.io/app=\"unconfined\"\")"
    );
    let p = pod(|p| {
        p["spec"]["containers"][0]["securityContext"] =
            json!({"seLinuxOptions": {"type": "spc_t", "user": "root"}});
    });
    assert_eq!(
        check(baseline(), &p),
        "seLinuxOptions (container \"app\" set forbidden securityContext.seLinuxOptions: type \"spc_t\"; user may not be set)"
    );
    let p = pod(|p| {
        p["spec"]["containers"][0]["securityContext"] = json!({"procMount": "Unmasked"});
    });
    assert_eq!(
        check(baseline(), &p),
        "procMount (container \"app\" must not set securityContext.procMount to \"Unmasked\")"
    );
    let p = pod(|p| {
        p["spec"]["securityContext"] = json!({"windowsOptions": {"hostProcess": true}});
    });
    assert_eq!(
        check(baseline(), &p),
        "hostProcess (pod must not set securityContext.windowsOptions.hostProcess=true)"
    );
}

#[test]
fn sysctls_and_probe_hosts_by_version() {
    let p = pod(|p| {
        p["spec"]["securityContext"] = json!({"sysctls": [
            {"name": "net.ipv4.tcp_rmem", "value": "1"},
            {"name": "kernel.msgmax", "value": "1"}]});
    });
    assert_eq!(check(baseline(), &p), "forbidden sysctls (kernel.msgmax)");
    assert_eq!(
        check(at(Level::Baseline, 31), &p),
        "forbidden sysctls (net.ipv4.tcp_rmem, kernel.msgmax)"
    );
    let p = pod(|p| {
        p["spec"]["containers"][0]["livenessProbe"] =
            json!({"httpGet": {"port": 80, "host": "10.0.0.1"}});
    });
    assert_eq!(
        check(baseline(), &p),
        "probe or lifecycle host (container \"app\" uses probe or lifecycle host \"10.0.0.1\")"
    );
    assert_eq!(check(at(Level::Baseline, 33), &p), "");
}

#[test]
fn latest_is_the_newest_check_version() {
    assert_eq!(newest_minor(), 37);
    // A future version is evaluated as the newest there is.
    let p = pod(|p| p["spec"]["hostPID"] = json!(true));
    assert_eq!(
        check(at(Level::Baseline, 99), &p),
        "host namespaces (hostPID=true)"
    );
}

#[test]
fn ephemeral_containers_are_checked_too() {
    let p = pod(|p| {
        p["spec"]["ephemeralContainers"] = json!([{"name": "debug", "image": "x",
            "targetContainerName": "app", "securityContext": {"privileged": true}}]);
    });
    assert_eq!(
        check(baseline(), &p),
        "privileged (container \"debug\" must not set securityContext.privileged=true)"
    );
}

#[test]
fn only_image_and_container_changes_make_a_pod_update_significant() {
    let old = pod(|_| {});
    let relabeled = pod(|p| p["metadata"]["labels"] = json!({"a": "b"}));
    assert!(!significant_pod_update(&relabeled, &old));
    let new_image = pod(|p| p["spec"]["containers"][0]["image"] = json!("other"));
    assert!(significant_pod_update(&new_image, &old));
    let debug = pod(|p| {
        p["spec"]["ephemeralContainers"] = json!([{"name": "debug", "image": "x"}]);
    });
    assert!(significant_pod_update(&debug, &old));
    assert!(!significant_pod_update(&debug, &debug));
}
