//! Bundles people apply every day, unchanged but for image names
//! (`tests/bundles/`): ingress-nginx's cloud bundle, metrics-server's
//! high-availability bundle, kube-prometheus' NetworkPolicies and
//! PodDisruptionBudget, and a shared namespace's quota, limits and
//! priority class. `kubectl apply -f` takes every object (no "no matches
//! for kind"), a second apply changes nothing, and the kinds are acted on:
//! the metrics-server pods get the priority of `system-cluster-critical`,
//! its budget and the namespace's quota get their status from their
//! controllers; metrics-server's APIService takes `metrics.k8s.io` over
//! from bosun's own metrics and, with no metrics-server pod running, is
//! not Available (MissingEndpoints). (The bundles'
//! ValidatingWebhookConfiguration and custom resources are issue 26's and
//! left out of the files.)

mod common;

use std::time::{Duration, Instant};

use common::Cluster;

fn bundle(name: &str) -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/bundles")
        .join(name)
        .display()
        .to_string()
}

const BUNDLES: [&str; 4] = [
    "ingress-nginx.yaml",
    "metrics-server-ha.yaml",
    "kube-prometheus-parts.yaml",
    "shared-namespace.yaml",
];

/// Polls `kubectl args` until its stdout satisfies `done`.
fn wait_kubectl(c: &Cluster, args: &[&str], what: &str, done: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let out = c.kubectl(args);
        if out.code == 0 && done(&out.stdout) {
            return out.stdout;
        }
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "timed out waiting for {what}: kubectl {args:?} printed\n{}{}\ncontrol log:\n{}",
            out.stdout,
            out.stderr,
            bosun_test_support::text::tail(&c.log(), 30)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn everyday_bundles_apply_and_are_acted_on() {
    let c = Cluster::start();
    for name in BUNDLES {
        let file = bundle(name);
        let applied = c.kubectl(&["apply", "-f", &file]);
        let out = applied.ok();
        assert!(
            !applied.stderr.contains("no matches for kind"),
            "{name}: {}",
            applied.stderr
        );
        // Every object of the file was created, and reads back.
        let objects = out.lines().filter(|l| l.ends_with(" created")).count();
        let documents = std::fs::read_to_string(&file)
            .unwrap()
            .split("\n---")
            .filter(|d| d.contains("kind:"))
            .count();
        assert_eq!(objects, documents, "{name}:\n{out}");
        let listed = c.kubectl(&["get", "-f", &file, "-o", "name"]);
        assert_eq!(listed.ok().lines().count(), documents, "{name}");
        // Applying again changes no spec. (kubectl still sends a patch for
        // some objects, as against Kubernetes: `$retainKeys` for a
        // Deployment strategy naming no `type`, the whole selector of a
        // budget, whose patch strategy is `replace`; the server must find
        // nothing to change, so no generation moves; resourceVersions do,
        // as controllers write status meanwhile.)
        let versions = |c: &Cluster| {
            let out = c.kubectl(&["get", "-f", &file, "-o", "jsonpath={..metadata.generation}"]);
            out.ok().to_string()
        };
        let before = versions(&c);
        c.kubectl(&["apply", "-f", &file]).ok();
        assert_eq!(
            versions(&c),
            before,
            "{name}: a second apply changed objects"
        );
    }

    // Priority admission: the metrics-server pods carry the system class's
    // priority (no node runs them; the ReplicaSet makes them all the same).
    let priorities = wait_kubectl(
        &c,
        &[
            "get",
            "pods",
            "-n",
            "kube-system",
            "-l",
            "k8s-app=metrics-server",
            "-o",
            "jsonpath={range .items[*]}{.spec.priority}{\" \"}{end}",
        ],
        "two metrics-server pods",
        |out| out.split_whitespace().count() == 2,
    );
    assert_eq!(priorities.trim(), "2000000000 2000000000");

    // metrics-server's APIService now serves metrics.k8s.io: with none
    // of its pods running, it is not Available and its requests get 503.
    wait_kubectl(
        &c,
        &["get", "apiservice", "v1beta1.metrics.k8s.io"],
        "metrics-server's APIService to miss its endpoints",
        |out| {
            out.contains("kube-system/metrics-server") && out.contains("False (MissingEndpoints)")
        },
    );
    let top = c.kubectl(&["get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes"]);
    assert!(
        top.code != 0 && top.stderr.contains("service unavailable"),
        "{}{}",
        top.stdout,
        top.stderr
    );

    // The disruption controller counts the budget's pods (none Ready).
    wait_kubectl(
        &c,
        &[
            "get",
            "pdb",
            "metrics-server",
            "-n",
            "kube-system",
            "-o",
            "jsonpath={.status.expectedPods} {.status.disruptionsAllowed}",
        ],
        "the metrics-server budget's status",
        |out| out == "2 0",
    );

    // The quota controller fills in the shared namespace's quota, and its
    // admission counts a Deployment created there.
    c.kubectl(&[
        "create",
        "deployment",
        "web",
        "-n",
        "team-a",
        "--image=bosun.local/web:1",
    ])
    .ok();
    wait_kubectl(
        &c,
        &[
            "get",
            "quota",
            "compute-resources",
            "-n",
            "team-a",
            "-o",
            "jsonpath={.status.used.count/deployments\\.apps}",
        ],
        "the quota to count the Deployment",
        |out| out == "1",
    );
    // The namespace's LimitRange gave the Deployment's pod its defaults.
    let limits = wait_kubectl(
        &c,
        &[
            "get",
            "pods",
            "-n",
            "team-a",
            "-l",
            "app=web",
            "-o",
            "jsonpath={.items[0].spec.containers[0].resources}",
        ],
        "the Deployment's pod",
        |out| !out.is_empty(),
    );
    assert!(limits.contains("\"cpu\":\"500m\""), "{limits}");
}
