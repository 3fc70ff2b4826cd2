//! Tables of schemas and objects with upstream's messages.

use serde_json::{json, Value};

use super::{validate_crd, Structural};

const BASE: &str = "spec.versions[0].schema.openAPIV3Schema";

pub(super) fn compile(schema: Value) -> Structural {
    Structural::new(&schema, BASE).unwrap_or_else(|e| panic!("{:?}", msgs(&e)))
}

pub(super) fn msgs(errs: &[crate::validation::FieldError]) -> Vec<String> {
    errs.iter().map(|e| e.message()).collect()
}

fn schema_errors(schema: Value) -> Vec<String> {
    match Structural::new(&schema, BASE) {
        Ok(_) => Vec::new(),
        Err(e) => msgs(&e),
    }
}

/// A root schema with `spec` holding `props`.
pub(super) fn with_spec(props: Value) -> Value {
    json!({"type": "object", "properties": {"spec": {"type": "object", "properties": props}}})
}

pub(super) fn obj(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "a"}, "spec": spec})
}

#[test]
fn structural_schema_rules() {
    let p = |s: &str| format!("{BASE}.{s}");
    let cases: Vec<(Value, String)> = vec![
        (
            with_spec(json!({"replicas": {"minimum": 1}})),
            format!(
                "{}: Required value: must not be empty for specified object fields",
                p("properties[spec].properties[replicas].type")
            ),
        ),
        (
            json!({"properties": {}}),
            format!("{}: Required value: must not be empty at the root", p("type")),
        ),
        (
            json!({"type": "string"}),
            format!("{}: Invalid value: \"string\": must be object at the root", p("type")),
        ),
        (
            with_spec(json!({"l": {"type": "array"}})),
            format!("{}: Required value: must be specified", p("properties[spec].properties[l].items")),
        ),
        (
            with_spec(json!({"l": {"type": "array", "items": {}}})),
            format!(
                "{}: Required value: must not be empty for specified array items",
                p("properties[spec].properties[l].items.type")
            ),
        ),
        (
            with_spec(json!({"m": {"type": "object", "properties": {"a": {"type": "string"}},
                "additionalProperties": {"type": "string"}}})),
            format!(
                "{}: Forbidden: additionalProperties and properties are mutual exclusive",
                p("properties[spec].properties[m].additionalProperties")
            ),
        ),
        (
            json!({"type": "object", "properties": {"metadata": {"type": "object",
                "properties": {"labels": {"type": "object"}}}}}),
            format!(
                "{}: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified",
                p("properties[metadata]")
            ),
        ),
        (
            with_spec(json!({"a": {"type": "string", "anyOf": [{"type": "string"}]}})),
            format!(
                "{}: Forbidden: must be empty to be structural",
                p("properties[spec].properties[a].anyOf[0].type")
            ),
        ),
        (
            with_spec(json!({"a": {"type": "object", "allOf": [{"properties": {"metadata": {}}}]}})),
            format!(
                "{}: Forbidden: must not be specified in a nested context",
                p("properties[spec].properties[a].allOf[0].properties[metadata]")
            ),
        ),
        (
            with_spec(json!({"a": {"type": "string", "pattern": "(["}})),
            format!("{}: Invalid value: \"([\": must be a valid regular expression", p("properties[spec].properties[a].pattern")),
        ),
        (
            with_spec(json!({"a": {"type": "array", "uniqueItems": true, "items": {"type": "string"}}})),
            format!(
                "{}: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
                p("properties[spec].properties[a].uniqueItems")
            ),
        ),
        (
            with_spec(json!({"a": {"$ref": "#/definitions/x"}})),
            format!("{}: Forbidden: $ref is not supported", p("properties[spec].properties[a].$ref")),
        ),
        (
            with_spec(json!({"a": {"type": "date"}})),
            format!(
                "{}: Unsupported value: \"date\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\"",
                p("properties[spec].properties[a].type")
            ),
        ),
        (
            with_spec(json!({"a": {"type": "object", "x-kubernetes-embedded-resource": true}})),
            format!(
                "{}: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
                p("properties[spec].properties[a].properties")
            ),
        ),
        (
            with_spec(json!({"a": {"x-kubernetes-int-or-string": true, "x-kubernetes-preserve-unknown-fields": true}})),
            format!(
                "{}: Invalid value: true: must be false if x-kubernetes-int-or-string is true",
                p("properties[spec].properties[a].x-kubernetes-preserve-unknown-fields")
            ),
        ),
        (
            with_spec(json!({"a": {"type": "array", "x-kubernetes-list-type": "map",
                "items": {"type": "object", "properties": {"k": {"type": "string"}}}}})),
            format!(
                "{}: Required value: must not be empty if x-kubernetes-list-type is map",
                p("properties[spec].properties[a].x-kubernetes-list-map-keys")
            ),
        ),
        (
            with_spec(json!({"a": {"type": "integer", "default": "x"}})),
            format!(
                "{}: Invalid value: \"string\": in body must be of type integer: \"string\"",
                p("properties[spec].properties[a].default")
            ),
        ),
        (
            with_spec(json!({"a": {"type": "string", "x-kubernetes-validations": [{"rule": "self =="}]}})),
            format!(
                "{}: Invalid value: \"self ==\": compilation failed: ERROR: <input>:1:8: Syntax error",
                p("properties[spec].properties[a].x-kubernetes-validations[0].rule")
            ),
        ),
        (
            with_spec(json!({"a": {"type": "string", "x-kubernetes-validations": [{"rule": "self == other"}]}})),
            format!(
                "{}: Invalid value: \"self == other\": compilation failed: ERROR: <input>:1:9: undeclared reference to 'other' (in container '')",
                p("properties[spec].properties[a].x-kubernetes-validations[0].rule")
            ),
        ),
        (
            with_spec(json!({"a": {"type": "string", "x-kubernetes-validations": [{"rule": ""}]}})),
            format!(
                "{}: Required value: rule is not specified",
                p("properties[spec].properties[a].x-kubernetes-validations[0].rule")
            ),
        ),
        (
            with_spec(json!({"a": {"type": "object", "x-kubernetes-validations":
                [{"rule": "true", "fieldPath": ".nope"}]}})),
            format!(
                "{}: Invalid value: \".nope\": fieldPath must be a valid path: does not refer to a valid field",
                p("properties[spec].properties[a].x-kubernetes-validations[0].fieldPath")
            ),
        ),
        (
            with_spec(json!({"a": {"type": "string", "x-kubernetes-validations":
                [{"rule": "true", "reason": "Nope"}]}})),
            format!(
                "{}: Unsupported value: \"Nope\"",
                p("properties[spec].properties[a].x-kubernetes-validations[0].reason")
            ),
        ),
        (
            json!({"type": "object", "properties": {"spec": {"type": "object"}},
                "anyOf": [{"properties": {"spec": {"properties": {"x": {"minimum": 1}}}}}]}),
            format!(
                "{}: Required value: because it is defined in {}",
                p("properties[spec].properties[x]"),
                p("anyOf[0].properties[spec].properties[x]")
            ),
        ),
    ];
    for (schema, want) in cases {
        let got = schema_errors(schema.clone());
        assert!(
            got.iter().any(|g| g.starts_with(&want)),
            "schema {schema}\nwant a message starting {want:?}\ngot {got:#?}"
        );
    }
}

#[test]
fn structural_schemas_accepted() {
    for schema in [
        with_spec(json!({"port": {"x-kubernetes-int-or-string": true,
            "anyOf": [{"type": "integer"}, {"type": "string"}]}})),
        with_spec(json!({"any": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}})),
        with_spec(
            json!({"tmpl": {"type": "object", "x-kubernetes-embedded-resource": true,
            "x-kubernetes-preserve-unknown-fields": true}}),
        ),
        json!({"type": "object", "properties": {"metadata": {"type": "object",
            "properties": {"name": {"type": "string", "maxLength": 10}}}}}),
        with_spec(
            json!({"a": {"type": "string", "oneOf": [{"pattern": "^a"}, {"pattern": "^b"}]}}),
        ),
        with_spec(json!({"a": {"type": "integer", "default": 3}})),
        with_spec(json!({"a": {"type": "string", "x-kubernetes-patch-strategy": "merge"}})),
    ] {
        assert!(
            schema_errors(schema.clone()).is_empty(),
            "{schema}: {:?}",
            schema_errors(schema.clone())
        );
    }
}

#[test]
fn value_validation_messages() {
    let s = compile(with_spec(json!({
        "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
        "ratio": {"type": "number", "exclusiveMaximum": true, "maximum": 1, "multipleOf": 0.25},
        "name": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"},
        "mode": {"type": "string", "enum": ["Fast", "Slow"]},
        "tags": {"type": "array", "maxItems": 2, "minItems": 1, "items": {"type": "string"}},
        "labels": {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "string"}},
        "id": {"type": "string", "format": "uuid"},
        "when": {"type": "string", "format": "date-time"},
        "opt": {"type": "string", "nullable": true},
        "port": {"x-kubernetes-int-or-string": true},
        "need": {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}},
    })));
    let cases: Vec<(Value, &str)> = vec![
        (json!({"replicas": "3"}), "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""),
        (json!({"replicas": 0}), "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1"),
        (json!({"replicas": 11}), "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10"),
        (json!({"replicas": 1.5}), "spec.replicas: Invalid value: \"number\": spec.replicas in body must be of type integer: \"number\""),
        (json!({"ratio": 1}), "spec.ratio: Invalid value: 1: spec.ratio in body should be less than 1"),
        (json!({"ratio": 0.3}), "spec.ratio: Invalid value: 0.3: spec.ratio in body should be a multiple of 0.25"),
        (json!({"name": "a"}), "spec.name: Invalid value: \"a\": spec.name in body should be at least 2 chars long"),
        (json!({"name": "abcdef"}), "spec.name: Too long: may not be more than 5 bytes"),
        (json!({"name": "AB"}), "spec.name: Invalid value: \"AB\": spec.name in body should match '^[a-z]+$'"),
        (json!({"mode": "Medium"}), "spec.mode: Unsupported value: \"Medium\": supported values: \"Fast\", \"Slow\""),
        (json!({"tags": ["a", "b", "c"]}), "spec.tags: Too many: 3: must have at most 2 items"),
        (json!({"tags": []}), "spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items"),
        (json!({"tags": ["a", 1]}), "spec.tags[1]: Invalid value: \"integer\": spec.tags[1] in body must be of type string: \"integer\""),
        (json!({"labels": {"a": "1", "b": "2"}}), "spec.labels: Too many: 2: must have at most 1 items"),
        (json!({"labels": {"a": 1}}), "spec.labels.a: Invalid value: \"integer\": spec.labels.a in body must be of type string: \"integer\""),
        (json!({"id": "nope"}), "spec.id: Invalid value: \"nope\": spec.id in body must be of type uuid: \"nope\""),
        (json!({"when": "yesterday"}), "spec.when: Invalid value: \"yesterday\": spec.when in body must be of type date-time: \"yesterday\""),
        (json!({"port": true}), "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\""),
        (json!({"need": {}}), "spec.need.a: Required value"),
        (json!({"replicas": null}), "spec.replicas: Invalid value: \"null\": spec.replicas in body must be of type integer: \"null\""),
    ];
    for (spec, want) in cases {
        let got = msgs(&s.validate(&obj(spec.clone()), None));
        assert_eq!(got, vec![want.to_string()], "spec {spec}");
    }
    let ok = obj(
        json!({"replicas": 3, "ratio": 0.75, "name": "abc", "mode": "Fast", "tags": ["x"],
        "labels": {"a": "b"}, "id": "123e4567-e89b-12d3-a456-426614174000",
        "when": "2024-01-02T03:04:05Z", "opt": null, "port": "http", "need": {"a": "x"}}),
    );
    assert_eq!(msgs(&s.validate(&ok, None)), Vec::<String>::new());
}

#[test]
fn list_types_and_junctors() {
    let s = compile(with_spec(json!({
        "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port"],
            "items": {"type": "object", "required": ["port"], "properties": {
                "port": {"type": "integer"}, "name": {"type": "string"}}}},
        "size": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
        "one": {"type": "string", "oneOf": [{"pattern": "^a"}, {"pattern": "b$"}]},
        "not": {"type": "string", "not": {"enum": ["x"]}},
    })));
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (json!({"set": ["a", "b", "a"]}), vec!["spec.set[2]: Duplicate value: \"a\""]),
        (
            json!({"ports": [{"port": 80, "name": "a"}, {"port": 80, "name": "b"}]}),
            vec!["spec.ports[1]: Duplicate value: {\"port\":80}"],
        ),
        (
            json!({"size": true}),
            vec![
                "spec.size: Invalid value: \"\": spec.size must validate at least one schema (anyOf)",
                "spec.size: Invalid value: \"boolean\": spec.size in body must be of type integer: \"boolean\"",
            ],
        ),
        (json!({"one": "ab"}), vec!["spec.one: Invalid value: \"\": spec.one must validate one and only one schema (oneOf)"]),
        (json!({"not": "x"}), vec!["spec.not: Invalid value: \"\": spec.not must not validate the schema (not)"]),
    ];
    for (spec, want) in cases {
        assert_eq!(
            msgs(&s.validate(&obj(spec.clone()), None)),
            want,
            "spec {spec}"
        );
    }
    let ok = obj(
        json!({"set": ["a", "b"], "ports": [{"port": 80}, {"port": 443}], "size": "1Gi", "one": "ax", "not": "y"}),
    );
    assert_eq!(msgs(&s.validate(&ok, None)), Vec::<String>::new());
}

#[test]
fn embedded_resources() {
    let s = compile(with_spec(json!({
        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
            "x-kubernetes-preserve-unknown-fields": true},
    })));
    let got = msgs(&s.validate(
        &obj(json!({"template": {"metadata": {"name": "Bad_Name"}}})),
        None,
    ));
    assert_eq!(
        got[0],
        "spec.template.apiVersion: Required value: must not be empty"
    );
    assert_eq!(
        got[1],
        "spec.template.kind: Required value: must not be empty"
    );
    assert!(got[2].starts_with("spec.template.metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"), "{got:?}");
    // Pruning keeps the embedded object's own fields but trims its metadata to ObjectMeta.
    let mut o = obj(
        json!({"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "bogus": 1},
        "spec": {"anything": true}}}),
    );
    let removed = s.prune_reporting(&mut o);
    assert_eq!(removed, vec!["spec.template.metadata.bogus"]);
    assert_eq!(
        o["spec"]["template"],
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"anything": true}})
    );
}

#[test]
fn pruning() {
    let s = compile(json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "keep": {"type": "string"},
            "list": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                "properties": {"typed": {"type": "object", "properties": {"x": {"type": "string"}}}}},
            "map": {"type": "object", "additionalProperties": {"type": "object", "properties": {"v": {"type": "string"}}}},
        }},
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
    }}));
    let mut o = json!({
        "apiVersion": "example.com/v1", "kind": "Thing",
        "metadata": {"name": "a", "labels": {"x": "y"}},
        "spec": {"keep": "k", "drop": 1, "list": [{"a": "1", "b": "2"}],
            "free": {"anything": {"deep": 1}, "typed": {"x": "1", "y": "2"}},
            "map": {"k1": {"v": "1", "w": "2"}}},
        "status": {"ready": true, "extra": "x"},
        "unknownTop": 1,
    });
    let mut removed = s.prune_reporting(&mut o);
    removed.sort();
    assert_eq!(
        removed,
        vec![
            "spec.drop",
            "spec.free.typed.y",
            "spec.list[0].b",
            "spec.map.k1.w",
            "status.extra",
            "unknownTop"
        ]
    );
    assert_eq!(
        o,
        json!({
            "apiVersion": "example.com/v1", "kind": "Thing",
            "metadata": {"name": "a", "labels": {"x": "y"}},
            "spec": {"keep": "k", "list": [{"a": "1"}], "free": {"anything": {"deep": 1}, "typed": {"x": "1"}},
                "map": {"k1": {"v": "1"}}},
            "status": {"ready": true},
        })
    );
}

#[test]
fn defaulting() {
    let s = compile(with_spec(json!({
        "replicas": {"type": "integer", "default": 1},
        "nested": {"type": "object", "default": {}, "properties": {
            "mode": {"type": "string", "default": "Fast"},
        }},
        "withUnknown": {"type": "object", "default": {"a": "x", "junk": 1}, "properties": {"a": {"type": "string"}}},
        "items": {"type": "array", "items": {"type": "object", "properties": {
            "weight": {"type": "integer", "default": 10}}}},
        "nullable": {"type": "string", "nullable": true, "default": "d"},
        "plain": {"type": "string"},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
            "level": {"type": "string", "default": "info"}}},
    })));
    let mut o = obj(
        json!({"items": [{}, {"weight": 2}], "nullable": null, "plain": null, "free": {"other": 1}}),
    );
    s.prune(&mut o);
    s.apply_defaults(&mut o);
    assert_eq!(
        o["spec"],
        json!({
            "replicas": 1,
            "nested": {"mode": "Fast"},
            "withUnknown": {"a": "x"},
            "items": [{"weight": 10}, {"weight": 2}],
            "nullable": null,
            "free": {"other": 1, "level": "info"},
        })
    );
    // A null for a non-nullable field with a default takes the default.
    let mut o = obj(json!({"replicas": null}));
    s.apply_defaults(&mut o);
    assert_eq!(o["spec"]["replicas"], json!(1));
    assert!(s.validate(&o, None).is_empty());
}

fn crd(schema: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList",
                "shortNames": ["wd"], "categories": ["all"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": schema},
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas"}},
                "additionalPrinterColumns": [{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}],
                "selectableFields": [{"jsonPath": ".spec.color"}],
            }],
        },
    })
}

fn widget_schema() -> Value {
    json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}, "color": {"type": "string"}}},
        "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
    }})
}

#[test]
fn crd_validation() {
    let good = crd(widget_schema());
    assert_eq!(msgs(&validate_crd(&good, None)), Vec::<String>::new());
    type Edit = fn(&mut Value);
    let cases: Vec<(Edit, &str)> = vec![
        (|c| c["metadata"]["name"] = json!("x.example.com"),
            "metadata.name: Invalid value: \"x.example.com\": must be spec.names.plural+\".\"+spec.group"),
        (|c| { c["spec"]["group"] = json!("example"); c["metadata"]["name"] = json!("widgets.example") },
            "spec.group: Invalid value: \"example\": should be a domain with at least one dot"),
        (|c| c["spec"]["scope"] = json!("Global"),
            "spec.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespaced\""),
        (|c| c["spec"]["names"]["kind"] = json!(""), "spec.names.kind: Required value"),
        (|c| c["spec"]["names"]["listKind"] = json!("Widget"),
            "spec.names.listKind: Invalid value: \"Widget\": kind and listKind may not be the same"),
        (|c| c["spec"]["versions"][0]["storage"] = json!(false),
            "spec.versions: Invalid value: "),
        (|c| { let v = c["spec"]["versions"][0].clone(); c["spec"]["versions"].as_array_mut().unwrap().push(v) },
            "spec.versions: Invalid value: "),
        (|c| c["spec"]["versions"][0]["name"] = json!("V1"), "spec.versions[0].name: Invalid value: \"V1\""),
        (|c| c["spec"]["versions"][0]["schema"] = json!(null),
            "spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"),
        (|c| c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"] = json!({}),
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[replicas].type: Required value: must not be empty for specified object fields"),
        (|c| c["spec"]["versions"][0]["subresources"]["scale"]["specReplicasPath"] = json!(".status.x"),
            "spec.versions[0].subresources.scale.specReplicasPath: Invalid value: \".status.x\": should be a json path under .spec"),
        (|c| c["spec"]["versions"][0]["additionalPrinterColumns"][0]["type"] = json!("float"),
            "spec.versions[0].additionalPrinterColumns[0].type: Unsupported value: \"float\""),
        (|c| c["spec"]["versions"][0]["additionalPrinterColumns"][0]["jsonPath"] = json!(""),
            "spec.versions[0].additionalPrinterColumns[0].jsonPath: Required value"),
        (|c| c["spec"]["versions"][0]["selectableFields"][0]["jsonPath"] = json!(".spec.nope"),
            "spec.versions[0].selectableFields[0].jsonPath: Invalid value: \".spec.nope\": is an invalid path"),
        (|c| c["spec"]["conversion"] = json!({"strategy": "Webhook"}),
            "spec.conversion.webhook: Required value: required when strategy is set to Webhook"),
        (|c| c["spec"]["conversion"] = json!({"strategy": "Magic"}),
            "spec.conversion.strategy: Unsupported value: \"Magic\""),
        (|c| c["spec"]["preserveUnknownFields"] = json!(true),
            "spec.preserveUnknownFields: Invalid value: true: cannot set to true"),
    ];
    for (edit, want) in cases {
        let mut c = good.clone();
        edit(&mut c);
        let got = msgs(&validate_crd(&c, None));
        assert!(
            got.iter().any(|g| g.starts_with(want)),
            "want {want:?}, got {got:#?}"
        );
    }
    // Updates: group and plural are immutable, scope and kind once
    // established, stored versions must stay listed.
    let mut old = good.clone();
    old["status"] = json!({"storedVersions": ["v1beta1", "v1"]});
    let mut new = good.clone();
    new["spec"]["scope"] = json!("Cluster");
    new["spec"]["names"]["kind"] = json!("Gadget");
    new["spec"]["names"]["listKind"] = json!("GadgetList");
    assert_eq!(
        msgs(&validate_crd(&new, Some(&old))),
        vec!["status.storedVersions[0]: Invalid value: \"v1beta1\": must appear in spec.versions"]
    );
    old["status"]["conditions"] = json!([{"type": "Established", "status": "True"}]);
    new["spec"]["group"] = json!("other.example.com");
    new["metadata"]["name"] = json!("widgets.other.example.com");
    assert_eq!(
        msgs(&validate_crd(&new, Some(&old))),
        vec![
            "spec.group: Invalid value: \"other.example.com\": field is immutable",
            "spec.scope: Invalid value: \"Cluster\": field is immutable",
            "spec.names.kind: Invalid value: \"Gadget\": field is immutable",
            "status.storedVersions[0]: Invalid value: \"v1beta1\": must appear in spec.versions",
        ]
    );
}
