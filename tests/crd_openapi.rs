//! A CRD's schema in bosun's OpenAPI documents, read by the real kubectl:
//! `kubectl explain` prints its descriptions and types (v3, and v2 as
//! gnostic protobuf), `kubectl apply --validate=strict` refuses an unknown
//! field naming it and `--validate=warn` warns, and once the CRD is
//! deleted its documents are gone.

mod common;

use common::Cluster;

const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    schema:
      openAPIV3Schema:
        type: object
        description: A Widget is a thing of some size.
        properties:
          spec:
            type: object
            description: What the widget should be.
            required: [size]
            properties:
              size:
                type: integer
                description: How many parts the widget has.
              color:
                type: string
                description: The widget's color.
";

const WIDGET: &str = "apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
spec:
  size: 3
";

fn established(c: &Cluster) {
    c.kubectl(&[
        "wait",
        "--for=condition=established",
        "--timeout=60s",
        "crd/widgets.example.com",
    ])
    .ok();
}

#[test]
fn kubectl_explains_and_validates_a_crd_from_its_schema() {
    let c = Cluster::start();
    let crd = c.write("crd.yaml", CRD);
    c.kubectl(&["apply", "-f", &crd]).ok();
    established(&c);

    // explain reads the v3 document of example.com/v1.
    let out = c.kubectl(&["explain", "widgets"]).ok().to_string();
    assert!(out.contains("GROUP:      example.com"), "{out}");
    assert!(out.contains("KIND:       Widget"), "{out}");
    assert!(out.contains("A Widget is a thing of some size."), "{out}");
    for field in [
        "apiVersion\t<string>",
        "metadata\t<ObjectMeta>",
        "spec\t<Object>",
    ] {
        assert!(out.contains(field), "{field} not in:\n{out}");
    }
    let out = c
        .kubectl(&["explain", "widgets.spec.size"])
        .ok()
        .to_string();
    assert!(out.contains("FIELD: size <integer>"), "{out}");
    assert!(out.contains("How many parts the widget has."), "{out}");
    let out = c.kubectl(&["explain", "widgets.spec"]).ok().to_string();
    assert!(out.contains("size\t<integer> -required-"), "{out}");
    assert!(out.contains("color\t<string>"), "{out}");
    // And the v2 document, which kubectl reads as gnostic protobuf.
    let out = c
        .kubectl(&[
            "explain",
            "widgets.spec.color",
            "--output",
            "plaintext-openapiv2",
        ])
        .ok()
        .to_string();
    assert!(out.contains("The widget's color."), "{out}");

    // An unknown field: refused with strict validation, nothing written...
    let bad = c.write("bad.yaml", &format!("{WIDGET}  bogus: 1\n"));
    let err = c
        .kubectl(&["apply", "--validate=strict", "-f", &bad])
        .fails()
        .to_string();
    assert!(err.contains("unknown field \"spec.bogus\""), "{err}");
    let got = c.kubectl(&["get", "widgets", "-o", "name"]);
    assert_eq!(got.ok().trim(), "", "{}", got.stdout);
    // ...a warning with warn, the object written without it.
    let run = c.kubectl(&["apply", "--validate=warn", "-f", &bad]);
    assert!(run.ok().contains("widget.example.com/w created"));
    assert!(
        run.stderr.contains("Warning: unknown field \"spec.bogus\""),
        "{}",
        run.stderr
    );
    let spec = c.kubectl(&["get", "widget", "w", "-o", "jsonpath={.spec}"]);
    assert_eq!(spec.ok(), r#"{"size":3}"#);
    // A known field passes strict validation (and patches).
    let good = c.write("good.yaml", &format!("{WIDGET}  color: red\n"));
    let run = c.kubectl(&["apply", "--validate=strict", "-f", &good]);
    assert!(run.ok().contains("widget.example.com/w configured"));

    // Deleting the CRD takes its group version out of the documents.
    c.kubectl(&["delete", "crd", "widgets.example.com", "--timeout=90s"])
        .ok();
    let index = c.kubectl(&["get", "--raw", "/openapi/v3"]).ok().to_string();
    assert!(!index.contains("example.com"), "{index}");
    let v2 = c.kubectl(&["get", "--raw", "/openapi/v2"]).ok().to_string();
    assert!(!v2.contains("com.example.v1.Widget"));
    // kubectl's discovery cache still knows widgets: explain finds no schema.
    let stale = c.kubectl(&["explain", "widgets"]);
    assert_ne!(stale.code, 0, "{}", stale.stdout);
    // With fresh discovery, the resource type is gone.
    let fresh = c.path("fresh-cache").display().to_string();
    let err = c
        .kubectl(&["explain", "widgets", "--cache-dir", &fresh])
        .fails()
        .to_string();
    assert!(
        err.contains("the server doesn't have a resource type \"widgets\""),
        "{err}"
    );
}
