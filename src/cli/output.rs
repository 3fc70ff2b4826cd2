//! `-o yaml|json|name` output.

use anyhow::Result;
use serde_json::{json, Map, Value};

use bosun::resources::ResourceInfo;

/// Rebuilds every map with its keys sorted, so output and the
/// last-applied annotation do not depend on how serde_json orders maps.
pub fn sort_keys(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let mut out = Map::new();
            for k in keys {
                out.insert(k.clone(), sort_keys(&m[k]));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(sort_keys).collect()),
        other => other.clone(),
    }
}

/// Items of a list response lack `apiVersion` and `kind`; put them back.
pub fn with_type(info: &ResourceInfo, mut obj: Value) -> Value {
    if let Some(m) = obj.as_object_mut() {
        m.entry("apiVersion")
            .or_insert_with(|| Value::String(info.api_version()));
        m.entry("kind")
            .or_insert_with(|| Value::String(info.kind.to_string()));
    }
    obj
}

/// kubectl's `kind: List` wrapper for several objects.
pub fn list_of(items: Vec<Value>) -> Value {
    json!({
        "apiVersion": "v1",
        "items": items,
        "kind": "List",
        "metadata": {"resourceVersion": ""},
    })
}

/// `deployment.apps/nginx`.
pub fn name_of(info: &ResourceInfo, obj: &Value) -> String {
    format!(
        "{}/{}",
        info.kind_group(),
        obj["metadata"]["name"].as_str().unwrap_or_default()
    )
}

pub fn to_yaml(v: &Value) -> Result<String> {
    Ok(serde_yaml::to_string(&sort_keys(v))?)
}

pub fn to_json(v: &Value) -> Result<String> {
    let mut s = serde_json::to_string_pretty(&sort_keys(v))?;
    s.push('\n');
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bosun::resources::by_name;

    #[test]
    fn names_carry_kind_and_group() {
        let d = by_name("deploy").unwrap();
        let p = by_name("po").unwrap();
        let obj = json!({"metadata": {"name": "nginx"}});
        assert_eq!(name_of(d, &obj), "deployment.apps/nginx");
        assert_eq!(name_of(p, &obj), "pod/nginx");
    }

    #[test]
    fn list_items_get_their_type_and_yaml_is_sorted() {
        let d = by_name("deploy").unwrap();
        let item = with_type(
            d,
            json!({"spec": {"replicas": 3}, "metadata": {"name": "a"}}),
        );
        let out = to_yaml(&list_of(vec![item])).unwrap();
        assert_eq!(
            out,
            "apiVersion: v1\nitems:\n- apiVersion: apps/v1\n  kind: Deployment\n  metadata:\n    name: a\n  spec:\n    replicas: 3\nkind: List\nmetadata:\n  resourceVersion: ''\n"
        );
    }
}
