//! The real kubectl reads bosun's OpenAPI documents: `kubectl explain`
//! prints upstream's field docs at any depth and in any served version,
//! and `kubectl apply --validate=strict` names an unknown field.

mod common;

use common::Cluster;

/// The lines of `kubectl explain`'s FIELDS list: `name\t<type>`.
fn fields(out: &str) -> Vec<String> {
    let list = out
        .split("FIELDS:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no FIELDS in:\n{out}"));
    list.lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   ") && l.contains('\t'))
        .map(|l| l.trim().to_string())
        .collect()
}

#[test]
fn kubectl_explain_prints_upstream_field_docs() {
    let c = Cluster::start();

    let out = c
        .kubectl(&["explain", "deployment.spec.strategy"])
        .ok()
        .to_string();
    assert!(out.contains("GROUP:      apps"), "{out}");
    assert!(out.contains("KIND:       Deployment"), "{out}");
    assert!(
        out.contains("FIELD: strategy <DeploymentStrategy>"),
        "{out}"
    );
    assert!(
        out.contains("The deployment strategy to use to replace existing pods with new ones."),
        "{out}"
    );
    assert_eq!(
        fields(&out),
        ["rollingUpdate\t<RollingUpdateDeployment>", "type\t<string>"],
        "{out}"
    );
    assert!(
        out.contains("Type of deployment. Can be \"Recreate\" or \"RollingUpdate\"."),
        "{out}"
    );

    // Deep down, through lists and the special IntOrString type.
    let out = c
        .kubectl(&["explain", "pod.spec.containers.livenessProbe.httpGet.port"])
        .ok()
        .to_string();
    assert!(out.contains("FIELD: port <IntOrString>"), "{out}");
    assert!(
        out.contains("Name or number of the port to access on the container."),
        "{out}"
    );

    // A version other than the preferred one.
    let out = c
        .kubectl(&[
            "explain",
            "hpa.spec.metrics",
            "--api-version=autoscaling/v2",
        ])
        .ok()
        .to_string();
    assert!(out.contains("VERSION:    v2"), "{out}");
    assert!(out.contains("FIELD: metrics <[]MetricSpec>"), "{out}");
    let listed = fields(&out);
    for f in [
        "resource\t<ResourceMetricSource>",
        "type\t<string> -required-",
    ] {
        assert!(listed.iter().any(|l| l == f), "{f} not in {listed:?}");
    }

    // The v2 document, which kubectl reads as gnostic protobuf.
    let out = c
        .kubectl(&[
            "explain",
            "deployment.spec.strategy",
            "--output",
            "plaintext-openapiv2",
        ])
        .ok()
        .to_string();
    assert!(out.contains("RESOURCE: strategy <Object>"), "{out}");
    assert!(
        out.contains("The deployment strategy to use to replace existing pods with new ones."),
        "{out}"
    );
    assert!(out.contains("rollingUpdate\t<Object>"), "{out}");

    // The whole tree of a kind.
    let out = c
        .kubectl(&["explain", "pods", "--recursive"])
        .ok()
        .to_string();
    let tree: Vec<&str> = out.lines().map(str::trim).collect();
    for line in [
        "spec\t<PodSpec>",
        "containers\t<[]Container> -required-",
        "livenessProbe\t<Probe>",
        "httpGet\t<HTTPGetAction>",
        "port\t<IntOrString> -required-",
        "status\t<PodStatus>",
    ] {
        assert!(tree.contains(&line), "{line} not in:\n{out}");
    }
}

const DEPLOYMENT: &str = "apiVersion: apps/v1
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
";

#[test]
fn kubectl_apply_validate_strict_names_the_unknown_field() {
    let c = Cluster::start();
    let bad = c.write("bad.yaml", &format!("{DEPLOYMENT}        bogusField: 1\n"));
    let err = c
        .kubectl(&["apply", "--validate=strict", "-f", &bad])
        .fails()
        .to_string();
    assert!(
        err.contains("unknown field \"spec.template.spec.containers[0].bogusField\""),
        "{err}"
    );
    // Nothing was written.
    let got = c.kubectl(&["get", "deployments", "-o", "name"]);
    assert_eq!(got.ok().trim(), "", "{}", got.stdout);

    // The same manifest without the field applies, and a changed one
    // patches (kubectl reads the v3 document first, then falls back).
    let good = c.write("good.yaml", DEPLOYMENT);
    let out = c.kubectl(&["apply", "--validate=strict", "-f", &good]);
    assert!(out.ok().contains("deployment.apps/web created"));
    let two = c.write(
        "two.yaml",
        &DEPLOYMENT.replace("replicas: 1", "replicas: 2"),
    );
    let out = c.kubectl(&["apply", "--validate=strict", "-f", &two]);
    assert!(out.ok().contains("deployment.apps/web configured"));
    let replicas = c.kubectl(&[
        "get",
        "deployment",
        "web",
        "-o",
        "jsonpath={.spec.replicas}",
    ]);
    assert_eq!(replicas.ok(), "2");

    // A container dropped from the manifest is removed: kubectl's patch
    // deletes it by name (its built-in patch metadata), which the served
    // schemas, without patch merge keys, must not override (a patch made
    // from them sends the list whole, and the server's merge by name
    // would keep the dropped container).
    let both = c.write(
        "both.yaml",
        &format!("{DEPLOYMENT}      - name: helper\n        image: bosun.local/helper:1\n"),
    );
    c.kubectl(&["apply", "-f", &both]).ok();
    c.kubectl(&["apply", "-f", &good]).ok();
    let names = c.kubectl(&[
        "get",
        "deployment",
        "web",
        "-o",
        "jsonpath={.spec.replicas} {.spec.template.spec.containers[*].name}",
    ]);
    assert_eq!(names.ok(), "1 web");
}
