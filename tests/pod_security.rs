//! Pod Security Admission with the real `kubectl` against a running
//! `bosun-control`: a namespace labelled `enforce=baseline` refuses a
//! privileged pod with upstream's message and takes a plain one;
//! `warn=restricted` lets a pod in with kubectl printing upstream's
//! warning; a Deployment's privileged template is only warned about, and
//! its ReplicaSet's pods are the ones refused; labelling a namespace that
//! has privileged pods names them; `--pod-security-default` sets the
//! levels of unlabelled namespaces and a bad value is refused naming the
//! flag. Enforcement is the API's alone, so no agent or Docker is needed
//! (no pod ever runs).

mod common;

use std::process::Command;
use std::time::Duration;

use common::{wait_for, Cluster};

fn pod(name: &str, privileged: bool) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
  - name: app
    image: bosun.local/busybox
    command: [sleep, '3600']
    securityContext:
      privileged: {privileged}
"
    )
}

const PRIVILEGED_DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: bosun.local/web:1
        securityContext:
          privileged: true
";

const PRIVILEGED_MESSAGE: &str = "violates PodSecurity \"baseline:latest\": privileged (container \"app\" must not set securityContext.privileged=true)";

const RESTRICTED_WARNING: &str = "Warning: would violate PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false (container \"app\" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container \"app\" must set securityContext.capabilities.drop=[\"ALL\"]), runAsNonRoot != true (pod or container \"app\" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container \"app\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")";

#[test]
fn namespace_labels_enforce_and_warn_with_kubectl() {
    let c = Cluster::start();
    let priv_pod = c.write("priv.yaml", &pod("priv", true));
    let plain_pod = c.write("plain.yaml", &pod("plain", false));

    // enforce=baseline: the privileged pod is refused, naming the check.
    c.kubectl(&["create", "namespace", "locked"]).ok();
    c.kubectl(&[
        "label",
        "namespace",
        "locked",
        "pod-security.kubernetes.io/enforce=baseline",
    ])
    .ok();
    let err = c
        .kubectl(&["apply", "-n", "locked", "-f", &priv_pod])
        .fails()
        .to_string();
    assert!(
        err.contains(&format!(
            "Error from server (Forbidden): error when creating \"{priv_pod}\": pods \"priv\" is forbidden: {PRIVILEGED_MESSAGE}"
        )),
        "{err}"
    );
    let run = c.kubectl(&["apply", "-n", "locked", "-f", &plain_pod]);
    assert!(run.ok().contains("pod/plain created"), "{}", run.stdout);
    assert!(!run.stderr.contains("Warning"), "{}", run.stderr);
    let out = c.kubectl(&["get", "pods", "-n", "locked", "-o", "name"]);
    assert_eq!(out.ok().trim(), "pod/plain");

    // warn=restricted: the pod is created and kubectl prints the warning.
    c.kubectl(&["create", "namespace", "soft"]).ok();
    c.kubectl(&[
        "label",
        "namespace",
        "soft",
        "pod-security.kubernetes.io/warn=restricted",
    ])
    .ok();
    let run = c.kubectl(&["apply", "-n", "soft", "-f", &plain_pod]);
    assert!(run.ok().contains("pod/plain created"), "{}", run.stdout);
    assert!(run.stderr.contains(RESTRICTED_WARNING), "{}", run.stderr);

    // A workload template is warned about, never refused; the pods its
    // ReplicaSet makes are.
    let deploy = c.write("deploy.yaml", PRIVILEGED_DEPLOYMENT);
    let run = c.kubectl(&["apply", "-n", "locked", "-f", &deploy]);
    assert!(
        run.ok().contains("deployment.apps/web created"),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr.contains(
            "Warning: would violate PodSecurity \"baseline:latest\": privileged (container \"web\" must not set securityContext.privileged=true)"
        ),
        "{}",
        run.stderr
    );
    wait_for(
        "the ReplicaSet's pod to be refused",
        Duration::from_secs(30),
        || {
            let out = c.kubectl(&[
                "get",
                "rs",
                "-n",
                "locked",
                "-l",
                "app=web",
                "-o",
                "jsonpath={.items[*].status.conditions[*].message}",
            ]);
            out.code == 0
                && out
                    .stdout
                    .contains("is forbidden: violates PodSecurity \"baseline:latest\": privileged")
        },
    );

    // Making enforce stricter over existing privileged pods names them.
    c.kubectl(&["create", "namespace", "apps"]).ok();
    c.kubectl(&["apply", "-n", "apps", "-f", &priv_pod]).ok();
    let run = c.kubectl(&[
        "label",
        "namespace",
        "apps",
        "pod-security.kubernetes.io/enforce=baseline",
    ]);
    assert!(
        run.ok().contains("namespace/apps labeled"),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr.contains(
            "Warning: existing pods in namespace \"apps\" violate the new PodSecurity enforce level \"baseline:latest\"\nWarning: priv: privileged"
        ),
        "{}",
        run.stderr
    );

    // A bad level is refused as upstream refuses it.
    let err = c
        .kubectl(&[
            "label",
            "namespace",
            "soft",
            "pod-security.kubernetes.io/enforce=strict",
        ])
        .fails()
        .to_string();
    assert!(
        err.contains("metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted"),
        "{err}"
    );
}

#[test]
fn pod_security_default_flag_sets_the_levels_of_unlabelled_namespaces() {
    let c = Cluster::start_with(&["--pod-security-default=enforce=baseline,warn=restricted"]);
    let priv_pod = c.write("priv.yaml", &pod("priv", true));
    let plain_pod = c.write("plain.yaml", &pod("plain", false));
    let err = c.kubectl(&["apply", "-f", &priv_pod]).fails().to_string();
    assert!(
        err.contains(&format!("pods \"priv\" is forbidden: {PRIVILEGED_MESSAGE}")),
        "{err}"
    );
    let run = c.kubectl(&["apply", "-f", &plain_pod]);
    assert!(run.ok().contains("pod/plain created"), "{}", run.stdout);
    assert!(run.stderr.contains(RESTRICTED_WARNING), "{}", run.stderr);

    // A namespace's own label wins over the default.
    c.kubectl(&["create", "namespace", "open"]).ok();
    c.kubectl(&[
        "label",
        "namespace",
        "open",
        "pod-security.kubernetes.io/enforce=privileged",
        "pod-security.kubernetes.io/warn=privileged",
    ])
    .ok();
    let run = c.kubectl(&["apply", "-n", "open", "-f", &priv_pod]);
    assert!(run.ok().contains("pod/priv created"), "{}", run.stdout);
    assert!(!run.stderr.contains("Warning"), "{}", run.stderr);

    // A bad default is refused at start, naming the flag.
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(common::control_binary())
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--port", "0", "--pod-security-default", "enforce=strict"])
        .output()
        .expect("running bosun-control");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--pod-security-default")
            && stderr.contains(
                "enforce level \"strict\" must be one of privileged, baseline, restricted"
            ),
        "{stderr}"
    );
}
