//! `describe` for kinds without a layout of their own: the object's fields but metadata as
//! indented `Key:  value` lines.

use serde_json::Value;

use bosun::resources::ResourceInfo;

use super::sections::labels_and_annotations;
use super::writer::{str_of, title_case, Out};

fn common_header(out: &mut Out, obj: &Value, info: &ResourceInfo) {
    let meta = &obj["metadata"];
    out.kv(0, "Name", str_of(&meta["name"]));
    if info.namespaced {
        out.kv(0, "Namespace", str_of(&meta["namespace"]));
    }
}

/// Everything but metadata, as indented `Key:  value` lines.
fn generic_value(out: &mut Out, indent: usize, key: &str, v: &Value) {
    match v {
        Value::Object(m) if m.is_empty() => out.kv(indent, key, "<none>"),
        Value::Object(m) => {
            out.line(indent, &format!("{key}:"));
            for (k, v) in m {
                generic_value(out, indent + 2, &title_case(k), v);
            }
        }
        Value::Array(a) if a.is_empty() => out.kv(indent, key, "<none>"),
        Value::Array(a) => {
            out.line(indent, &format!("{key}:"));
            for item in a {
                match item {
                    Value::Object(m) => {
                        let mut first = true;
                        for (k, v) in m {
                            let k = title_case(k);
                            if first {
                                generic_value(out, indent + 2, &k, v);
                                first = false;
                            } else {
                                generic_value(out, indent + 4, &k, v);
                            }
                        }
                    }
                    Value::String(x) => out.line(indent + 2, x),
                    other => out.line(indent + 2, &other.to_string()),
                }
            }
        }
        Value::String(x) => out.kv(indent, key, x),
        Value::Null => out.kv(indent, key, "<none>"),
        other => out.kv(indent, key, &other.to_string()),
    }
}

pub(super) fn describe_generic(obj: &Value, info: &ResourceInfo) -> Out {
    let mut out = Out::default();
    common_header(&mut out, obj, info);
    let meta = &obj["metadata"];
    labels_and_annotations(&mut out, meta);
    out.kv(0, "API Version", str_of(&obj["apiVersion"]));
    out.kv(0, "Kind", str_of(&obj["kind"]));
    if let Some(m) = obj.as_object() {
        for (k, v) in m {
            if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            generic_value(&mut out, 0, &title_case(k), v);
        }
    }
    out
}
