use super::*;

fn doc(key: &str) -> Value {
    serde_json::from_slice(&v3_documents()[key].body).unwrap()
}

/// Follows a `$ref` (or an `allOf` of one) within `doc`.
fn resolve<'a>(doc: &'a Value, field: &'a Value, prefix: &str, at: &str) -> &'a Value {
    let r = field
        .get("$ref")
        .or_else(|| field.pointer("/allOf/0/$ref"))
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{field} has a $ref"));
    let name = r.strip_prefix(prefix).expect("ref prefix");
    doc.pointer(at)
        .and_then(|defs| defs.get(name))
        .unwrap_or_else(|| panic!("{r} resolves"))
}

#[test]
fn v3_deployment_strategy_has_upstream_description_and_resolving_ref() {
    let d = doc("apis/apps/v1");
    let schemas = &d["components"]["schemas"];
    let deploy = &schemas["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        deploy["x-kubernetes-group-version-kind"],
        json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
    );
    assert!(deploy.get("required").is_none(), "{}", deploy["required"]);
    let spec = resolve(
        &d,
        &deploy["properties"]["spec"],
        V3_REF_PREFIX,
        "/components/schemas",
    );
    let strategy = &spec["properties"]["strategy"];
    assert!(strategy.get("$ref").is_none(), "v3 wraps refs in allOf");
    assert_eq!(
        strategy["description"],
        "The deployment strategy to use to replace existing pods with new ones."
    );
    let resolved = resolve(&d, strategy, V3_REF_PREFIX, "/components/schemas");
    assert_eq!(resolved["properties"]["type"]["type"], "string");
    let surge = &schemas["io.k8s.api.apps.v1.RollingUpdateDeployment"]["properties"]["maxSurge"];
    let int_or_string = resolve(&d, surge, V3_REF_PREFIX, "/components/schemas");
    assert_eq!(int_or_string["x-kubernetes-int-or-string"], true);
}

#[test]
fn every_served_kind_has_a_schema_in_its_group_version_and_in_v2() {
    let v2: Value = serde_json::from_slice(&published::empty().v2_json().body).unwrap();
    let definitions = v2["definitions"].as_object().unwrap();
    for r in served() {
        let d = doc(&gv_key(r.group, r.version));
        let schemas = d["components"]["schemas"].as_object().unwrap();
        assert!(
            schema_name_of(schemas, r).is_some(),
            "{} {}",
            r.api_version(),
            r.kind
        );
        assert!(
            schema_name_of(definitions, r).is_some(),
            "v2 {} {}",
            r.api_version(),
            r.kind
        );
    }
}

#[test]
fn every_ref_resolves_within_its_document() {
    fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    out.push(r);
                }
                m.values().for_each(|v| refs(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }
    for key in v3_documents().keys() {
        let d = doc(key);
        let mut found = Vec::new();
        refs(&d, &mut found);
        assert!(!found.is_empty());
        for r in found {
            let name = r.strip_prefix(V3_REF_PREFIX).expect(r);
            assert!(d["components"]["schemas"].get(name).is_some(), "{key}: {r}");
        }
    }
    let v2: Value = serde_json::from_slice(&published::empty().v2_json().body).unwrap();
    let mut found = Vec::new();
    refs(&v2, &mut found);
    for r in found {
        let name = r.strip_prefix(V2_REF_PREFIX).expect(r);
        assert!(v2["definitions"].get(name).is_some(), "v2: {r}");
    }
}

#[test]
fn v2beta2_autoscaler_is_named_in_its_own_version() {
    let d = doc("apis/autoscaling/v2beta2");
    let schemas = d["components"]["schemas"].as_object().unwrap();
    assert!(schemas.contains_key("io.k8s.api.autoscaling.v2beta2.HorizontalPodAutoscaler"));
    assert!(schemas
        .keys()
        .all(|k| !k.starts_with("io.k8s.api.autoscaling.v2.")));
}

#[test]
fn the_index_hash_is_the_content_hash() {
    let index = v3_index(&published::empty());
    let url = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap();
    let mut h = DefaultHasher::new();
    v3_documents()["apis/apps/v1"].body.hash(&mut h);
    assert!(
        url.ends_with(&format!("?hash={:016X}", h.finish())),
        "{url}"
    );
    let core = index["paths"]["api/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap();
    assert_ne!(url.rsplit('=').next(), core.rsplit('=').next());
}

/// Every `[]byte` field (`format: byte`) reachable from a served kind's
/// schema, as (kind, path) with `*` for a map's values.
fn byte_fields(defs: &Value, schema: &Value, kind: &str, path: &str, out: &mut Vec<String>) {
    if let Some(name) = schema
        .get("$ref")
        .or_else(|| schema.pointer("/allOf/0/$ref"))
        .and_then(Value::as_str)
    {
        let name = name.trim_start_matches(V2_REF_PREFIX);
        // Object meta and the like hold no bytes; recursion stops at them.
        if !name.starts_with("io.k8s.apimachinery.") && path.matches('.').count() < 12 {
            byte_fields(defs, &defs[name], kind, path, out);
        }
        return;
    }
    if schema["format"] == "byte" {
        out.push(format!("{kind} {}", path.trim_start_matches('.')));
    }
    for (name, prop) in schema["properties"].as_object().into_iter().flatten() {
        byte_fields(defs, prop, kind, &format!("{path}.{name}"), out);
    }
    for (sub, step) in [("items", "[]"), ("additionalProperties", ".*")] {
        if let Some(inner) = schema.get(sub).filter(|v| v.is_object()) {
            byte_fields(defs, inner, kind, &format!("{path}{step}"), out);
        }
    }
}

/// The decode makes Go's base64 of every `[]byte` map it knows of
/// (`bosun::validation::bytes::BYTE_MAPS`): a newly served kind with
/// bytes must be added there, or wrapped values in it would be refused.
#[test]
fn every_byte_field_of_a_served_kind_is_decoded_as_go_decodes_it() {
    let v2: Value = serde_json::from_slice(&published::empty().v2_json().body).unwrap();
    let defs = &v2["definitions"];
    let mut found = Vec::new();
    for r in served() {
        let Some(name) = schema_name_of(defs.as_object().unwrap(), r) else {
            continue;
        };
        byte_fields(defs, &defs[&name], r.kind, "", &mut found);
    }
    found.sort();
    found.dedup();
    let mut known: Vec<String> = bosun::validation::bytes::BYTE_MAPS
        .iter()
        .map(|(kind, field)| format!("{kind} {field}.*"))
        .chain(
            bosun::validation::bytes::BYTE_FIELDS
                .iter()
                .map(|(_, kind, list, path)| format!("{kind} {list}[].{path}")),
        )
        .chain(
            bosun::validation::bytes::BYTE_VALUES
                .iter()
                .map(|(_, kind, path)| format!("{kind} {path}")),
        )
        .collect();
    known.sort();
    assert_eq!(found, known);
}
