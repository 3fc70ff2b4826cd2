//! CustomResourceDefinitions with the real kubectl against a running
//! `bosun-control`: a CRD is applied and established, its objects are
//! created, listed with its printer columns, watched, patched, applied
//! server-side, scaled through the scale subresource, written through
//! status, collected with their owner, and listed by `kubectl get all`; a
//! second CRD taking its kind is refused its names; deleting the CRD
//! deletes its objects and its resource is no longer served.

mod common;

use std::time::Duration;

use common::{parse_table, spawn_lines, wait_for, Cluster};
use serde_json::Value;

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
    shortNames: [wd]
    categories: [all]
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              replicas: {type: integer}
              color: {type: string}
          status:
            type: object
            properties:
              replicas: {type: integer}
    selectableFields:
    - jsonPath: .spec.color
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
    additionalPrinterColumns:
    - name: Replicas
      type: integer
      jsonPath: .spec.replicas
    - name: Color
      type: string
      jsonPath: .spec.color
      priority: 1
";

const CLASH: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: gadgets
    kind: Widget
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
";

fn widget(name: &str, replicas: u32) -> String {
    format!(
        "apiVersion: example.com/v1
kind: Widget
metadata:
  name: {name}
spec:
  replicas: {replicas}
  color: blue
"
    )
}

fn get_json(c: &Cluster, args: &[&str]) -> Value {
    let mut argv = vec!["get"];
    argv.extend_from_slice(args);
    argv.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(c.kubectl(&argv).ok()).expect("kubectl -o json prints JSON")
}

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
fn kubectl_serves_a_custom_resource_from_its_definition() {
    let c = Cluster::start();
    let crd = c.write("crd.yaml", CRD);
    c.kubectl(&["apply", "-f", &crd]).ok();
    established(&c);
    let def = get_json(&c, &["crd", "widgets.example.com"]);
    assert_eq!(def["status"]["acceptedNames"]["kind"], "Widget");
    assert_eq!(def["status"]["storedVersions"], serde_json::json!(["v1"]));
    assert_eq!(def["spec"]["conversion"]["strategy"], "None");
    let (head, _) = parse_table(c.kubectl(&["get", "crds"]).ok());
    assert_eq!(head, ["NAME", "CREATED AT"]);
    let resources = c.kubectl(&["api-resources", "--api-group=example.com"]);
    assert!(
        resources.ok().contains("widgets") && resources.ok().contains("wd"),
        "{}",
        resources.stdout
    );

    // A watch from the start sees the object made next.
    let watch = c.command(
        common::kubectl_binary(),
        &["get", "widgets", "-w", "-o", "name"],
    );
    let (_watch, lines) = spawn_lines(watch);

    let one = c.write("one.yaml", &widget("one", 2));
    let out = c.kubectl(&["apply", "-f", &one]);
    assert!(
        out.ok().contains("widget.example.com/one created"),
        "{}",
        out.stdout
    );
    let line = lines
        .recv_timeout(Duration::from_secs(60))
        .expect("the watch sees the new widget");
    assert_eq!(line, "widget.example.com/one");

    // The printer columns; the priority 1 one only with -o wide.
    let (head, rows) = parse_table(c.kubectl(&["get", "wd"]).ok());
    assert_eq!(head, ["NAME", "REPLICAS"]);
    assert_eq!(rows[0][..2], ["one".to_string(), "2".to_string()]);
    let (head, rows) = parse_table(c.kubectl(&["get", "wd", "-o", "wide"]).ok());
    assert_eq!(head, ["NAME", "REPLICAS", "COLOR"]);
    assert_eq!(rows[0][2], "blue");
    // `kubectl get all` includes the category's resources.
    assert!(
        c.kubectl(&["get", "all"])
            .ok()
            .contains("widget.example.com/one"),
        "get all lists the widget"
    );

    // Client-side apply again (kubectl patches a custom resource with a
    // merge patch) and a replace carrying the resourceVersion read.
    let again = c.write("one-again.yaml", &widget("one", 2).replace("blue", "teal"));
    let out = c.kubectl(&["apply", "-f", &again]);
    assert!(
        out.ok().contains("widget.example.com/one configured"),
        "{}",
        out.stdout
    );
    let mut obj = get_json(&c, &["wd", "one"]);
    assert_eq!(obj["spec"]["color"], "teal");
    obj["spec"]["color"] = "blue".into();
    let replaced = c.write("one-replaced.json", &obj.to_string());
    c.kubectl(&["replace", "-f", &replaced]).ok();
    let stale = c.kubectl(&["replace", "-f", &replaced]);
    assert!(
        stale.fails().contains("the object has been modified"),
        "{}",
        stale.stderr
    );

    // Merge patch; a strategic merge patch is refused as upstream does.
    c.kubectl(&[
        "patch",
        "wd",
        "one",
        "--type=merge",
        "-p",
        r#"{"spec":{"color":"red"}}"#,
    ])
    .ok();
    let smp = c.kubectl(&["patch", "wd", "one", "-p", r#"{"spec":{"color":"green"}}"#]);
    assert!(
        smp.fails().contains("application/merge-patch+json"),
        "{}",
        smp.stderr
    );
    let obj = get_json(&c, &["wd", "one"]);
    assert_eq!(obj["spec"]["color"], "red");
    // Created, applied, replaced, patched: four generations.
    assert_eq!(obj["metadata"]["generation"], 4);

    // The scale subresource moves .spec.replicas; status writes go through
    // /status only.
    c.kubectl(&["scale", "widget/one", "--replicas=5"]).ok();
    let obj = get_json(&c, &["wd", "one"]);
    assert_eq!(obj["spec"]["replicas"], 5);
    c.kubectl(&[
        "patch",
        "wd",
        "one",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":3}}"#,
    ])
    .ok();
    assert!(get_json(&c, &["wd", "one"]).get("status").is_none());
    c.kubectl(&[
        "patch",
        "wd",
        "one",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":3},"spec":{"replicas":9}}"#,
    ])
    .ok();
    let obj = get_json(&c, &["wd", "one"]);
    assert_eq!(obj["status"]["replicas"], 3);
    assert_eq!(obj["spec"]["replicas"], 5);

    // Server-side apply records the manager.
    let two = c.write("two.yaml", &widget("two", 1));
    c.kubectl(&["apply", "--server-side", "-f", &two]).ok();
    let obj = get_json(&c, &["wd", "two", "--show-managed-fields"]);
    assert_eq!(obj["metadata"]["managedFields"][0]["manager"], "kubectl");
    assert_eq!(obj["metadata"]["managedFields"][0]["operation"], "Apply");

    // A widget owned by a ConfigMap goes with it.
    c.kubectl(&["create", "configmap", "owner"]).ok();
    let uid = get_json(&c, &["cm", "owner"])["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let owned = format!(
        "apiVersion: example.com/v1
kind: Widget
metadata:
  name: owned
  ownerReferences:
  - apiVersion: v1
    kind: ConfigMap
    name: owner
    uid: {uid}
spec: {{}}
"
    );
    let owned = c.write("owned.yaml", &owned);
    c.kubectl(&["apply", "-f", &owned]).ok();
    c.kubectl(&["delete", "cm", "owner"]).ok();
    wait_for(
        "the owned widget to be collected",
        Duration::from_secs(60),
        || c.kubectl(&["get", "wd", "owned"]).code != 0,
    );

    // Field selectors on the version's selectableFields.
    let red = c.kubectl(&["get", "wd", "--field-selector=spec.color=red", "-o", "name"]);
    assert_eq!(red.ok().trim(), "widget.example.com/one");
    let bad = c.kubectl(&["get", "wd", "--field-selector=spec.size=1"]);
    assert!(
        bad.fails().contains("field label not supported: spec.size"),
        "{}",
        bad.stderr
    );

    // RBAC authorizes custom resources by group and plural.
    c.kubectl(&["create", "serviceaccount", "reader"]).ok();
    c.kubectl(&[
        "create",
        "role",
        "widget-reader",
        "--verb=get,list",
        "--resource=widgets.example.com",
    ])
    .ok();
    c.kubectl(&[
        "create",
        "rolebinding",
        "widget-reader",
        "--role=widget-reader",
        "--serviceaccount=default:reader",
    ])
    .ok();
    let reader = "--as=system:serviceaccount:default:reader";
    c.kubectl(&["get", "wd", "one", reader]).ok();
    let denied = c.kubectl(&["delete", "wd", "one", reader]);
    assert!(
        denied
            .fails()
            .contains("cannot delete resource \"widgets\" in API group \"example.com\""),
        "{}",
        denied.stderr
    );

    // Deleting a namespace deletes its widgets.
    c.kubectl(&["create", "namespace", "scratch"]).ok();
    let three = c.write("three.yaml", &widget("three", 1));
    c.kubectl(&["apply", "-n", "scratch", "-f", &three]).ok();
    c.kubectl(&["delete", "namespace", "scratch", "--timeout=90s"])
        .ok();
    let left = c.kubectl(&[
        "get",
        "--raw",
        "/apis/example.com/v1/namespaces/scratch/widgets/three",
    ]);
    assert_ne!(left.code, 0, "the widget went with its namespace");

    // A second CRD asking for the same kind in the group is refused it.
    let clash = c.write("clash.yaml", CLASH);
    c.kubectl(&["apply", "-f", &clash]).ok();
    let reason = wait_for(
        "NamesAccepted on the clash",
        Duration::from_secs(60),
        || {
            let obj = get_json(&c, &["crd", "gadgets.example.com"]);
            obj["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "NamesAccepted")
                .map(|c| {
                    (
                        c["status"].clone(),
                        c["reason"].clone(),
                        c["message"].clone(),
                    )
                })
        },
    );
    assert_eq!(reason.0, "False");
    // Upstream reports the last name refused: the list kind after the kind.
    assert_eq!(reason.1, "ListKindConflict");
    assert_eq!(reason.2, "\"WidgetList\" is already in use");

    // Deleting the CRD deletes its widgets; then the resource is gone.
    c.kubectl(&["delete", "crd", "widgets.example.com", "--timeout=90s"])
        .ok();
    let gone = c.kubectl(&[
        "get",
        "--raw",
        "/apis/example.com/v1/namespaces/default/widgets",
    ]);
    assert_ne!(gone.code, 0);
    assert!(gone.stderr.contains("NotFound"), "{}", gone.stderr);
    // Recreated, it serves no leftovers.
    c.kubectl(&["apply", "-f", &crd]).ok();
    established(&c);
    wait_for("widgets served again", Duration::from_secs(60), || {
        c.kubectl(&["get", "--raw", "/apis/example.com/v1/widgets"])
            .code
            == 0
    });
    let list: Value = serde_json::from_str(
        c.kubectl(&["get", "--raw", "/apis/example.com/v1/widgets"])
            .ok(),
    )
    .unwrap();
    assert_eq!(list["items"], serde_json::json!([]), "{}", c.log());
}

const GIZMOS: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gizmos, kind: Gizmo}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            x-kubernetes-validations:
            - rule: self.size <= self.limit
              message: size must not exceed limit
            properties:
              size: {type: integer, minimum: 1}
              limit: {type: integer, default: 10}
              mode: {type: string, enum: [fast, slow], default: slow}
              owner:
                type: string
                x-kubernetes-validations:
                - rule: self == oldSelf
                  message: owner is immutable
";

fn gizmo(spec: &str) -> String {
    format!("apiVersion: example.com/v1\nkind: Gizmo\nmetadata: {{name: g}}\nspec: {spec}\n")
}

/// A CRD's schema acts on every write as the apiextensions-apiserver's:
/// unknown fields pruned, defaults filled in, types, bounds, enums and
/// CEL rules (transition rules too) checked with the field's path.
#[test]
fn a_crd_schema_prunes_defaults_and_validates_writes() {
    let c = Cluster::start();
    let crd = c.write("gizmos.yaml", GIZMOS);
    c.kubectl(&["apply", "-f", &crd]).ok();
    c.kubectl(&[
        "wait",
        "--for=condition=established",
        "--timeout=60s",
        "crd/gizmos.example.com",
    ])
    .ok();

    // Unknown fields are dropped, defaults appear on read back.
    let g = c.write("g.yaml", &gizmo("{size: 3, owner: ann, extra: x}"));
    c.kubectl(&["create", "--validate=false", "-f", &g]).ok();
    let obj = get_json(&c, &["gizmo", "g"]);
    assert_eq!(
        obj["spec"],
        serde_json::json!({"size": 3, "limit": 10, "mode": "slow", "owner": "ann"}),
        "{obj}"
    );

    // Bad writes name their field; nothing is stored.
    for (spec, message) in [
        (
            "{size: many}",
            "spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\"",
        ),
        (
            "{size: 0}",
            "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1",
        ),
        (
            "{size: 1, mode: warp}",
            "spec.mode: Unsupported value: \"warp\": supported values: \"fast\", \"slow\"",
        ),
        ("{limit: 2}", "spec.size: Required value"),
        (
            "{size: 20, limit: 5}",
            "spec: Invalid value: \"object\": size must not exceed limit",
        ),
    ] {
        let bad = c.write("bad.yaml", &gizmo(spec).replace("name: g", "name: bad"));
        let run = c.kubectl(&["create", "--validate=false", "-f", &bad]);
        let err = run.fails();
        assert!(err.contains(message), "{spec}: {err}");
    }
    assert!(c
        .kubectl(&["get", "gizmos", "-o", "name"])
        .ok()
        .trim()
        .eq("gizmo.example.com/g"));

    // A transition rule: owner may not change once set.
    let run = c.kubectl(&[
        "patch",
        "gizmo",
        "g",
        "--type=merge",
        "-p",
        r#"{"spec":{"owner":"bob"}}"#,
    ]);
    let err = run.fails();
    assert!(
        err.contains("spec.owner: Invalid value: \"bob\": owner is immutable"),
        "{err}"
    );
    c.kubectl(&[
        "patch",
        "gizmo",
        "g",
        "--type=merge",
        "-p",
        r#"{"spec":{"size":4}}"#,
    ])
    .ok();
    assert_eq!(get_json(&c, &["gizmo", "g"])["spec"]["size"], 4);

    // A CRD whose schema is not structural, or whose rule does not
    // compile, is refused naming the field.
    let broken = GIZMOS
        .replace("gizmos", "doodads")
        .replace("Gizmo", "Doodad")
        .replace("self.size <= self.limit", "self.size <=");
    let broken = c.write("doodads.yaml", &broken);
    let run = c.kubectl(&["apply", "-f", &broken]);
    let err = run.fails();
    assert!(
        err.contains("spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value"),
        "{err}"
    );
}

/// The bosun CLI finds custom resources in the server's discovery, as
/// kubectl does: apply (the CRD and then its objects in one run), get
/// with the CRD's columns and short name, `get all`, label, scale,
/// describe and delete.
#[test]
fn the_bosun_cli_works_on_custom_resources() {
    let c = Cluster::start();
    let crd = c.write("crd.yaml", CRD);
    c.bosun(&["apply", "-f", &crd]).ok();
    established(&c);
    let one = c.write("one.yaml", &widget("one", 2));
    assert_eq!(
        c.bosun(&["apply", "-f", &one]).ok().trim(),
        "widget.example.com/one created"
    );

    let (ours, our_rows) = parse_table(c.bosun(&["get", "wd"]).ok());
    let (theirs, their_rows) = parse_table(c.kubectl(&["get", "wd"]).ok());
    assert_eq!(ours, theirs);
    assert_eq!(ours, ["NAME", "REPLICAS"]);
    assert_eq!(our_rows[0][..2], their_rows[0][..2]);
    let all = c.bosun(&["get", "all"]).ok().to_string();
    assert!(all.contains("widget.example.com/one"), "{all}");

    c.bosun(&["label", "widgets.example.com", "one", "tier=gold"])
        .ok();
    c.bosun(&["scale", "wd/one", "--replicas=5"]).ok();
    let obj = get_json(&c, &["wd", "one"]);
    assert_eq!(obj["metadata"]["labels"]["tier"], "gold");
    assert_eq!(obj["spec"]["replicas"], 5);
    let described = c.bosun(&["describe", "widget", "one"]).ok().to_string();
    assert!(described.contains("Replicas:  5"), "{described}");

    c.bosun(&["delete", "widget.v1.example.com", "one"]).ok();
    c.kubectl(&["get", "wd", "one"]).fails();
    let unknown = c.bosun(&["get", "sprockets"]);
    assert!(
        unknown
            .fails()
            .contains("the server doesn't have a resource type \"sprockets\""),
        "{}",
        unknown.stderr
    );
}
