//! The message shapes of Kubernetes' `generated.proto` files (vendored in
//! `control/proto/`, comments stripped), read once at first use. These
//! files are regular (proto2, flat messages, `optional`/`repeated`/`map`
//! fields of scalars or fully-qualified messages), so a small reader is
//! enough and no protobuf compiler is needed at build time.

use std::collections::HashMap;
use std::sync::OnceLock;

/// What a field holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldType {
    String,
    Bytes,
    Bool,
    Int32,
    Int64,
    Double,
    /// A message, by its full name without the leading dot.
    Message(String),
}

#[derive(Debug, Clone)]
pub struct Field {
    /// The proto field name, which Kubernetes makes its JSON name.
    pub name: String,
    pub number: u32,
    pub repeated: bool,
    /// `map<string, value>`: the key is always a string in Kubernetes.
    pub map: bool,
    /// The element type (the value type of a map).
    pub ty: FieldType,
}

#[derive(Debug, Default)]
pub struct Message {
    pub fields: Vec<Field>,
}

impl Message {
    pub fn by_number(&self, number: u32) -> Option<&Field> {
        self.fields.iter().find(|f| f.number == number)
    }
}

const FILES: &[&str] = &[
    include_str!("../../../proto/apimachinery_pkg_apis_meta_v1.proto"),
    include_str!("../../../proto/apimachinery_pkg_apis_meta_v1beta1.proto"),
    include_str!("../../../proto/apimachinery_pkg_api_resource.proto"),
    include_str!("../../../proto/apimachinery_pkg_runtime.proto"),
    include_str!("../../../proto/apimachinery_pkg_runtime_schema.proto"),
    include_str!("../../../proto/apimachinery_pkg_util_intstr.proto"),
    include_str!("../../../proto/api_core_v1.proto"),
    include_str!("../../../proto/api_apps_v1.proto"),
    include_str!("../../../proto/api_batch_v1.proto"),
    include_str!("../../../proto/api_autoscaling_v1.proto"),
    include_str!("../../../proto/api_autoscaling_v2.proto"),
    include_str!("../../../proto/api_policy_v1.proto"),
    include_str!("../../../proto/api_storage_v1.proto"),
    include_str!("../../../proto/api_discovery_v1.proto"),
    include_str!("../../../proto/api_coordination_v1.proto"),
    include_str!("../../../proto/api_events_v1.proto"),
    include_str!("../../../proto/api_authentication_v1.proto"),
    include_str!("../../../proto/api_authorization_v1.proto"),
    include_str!("../../../proto/api_rbac_v1.proto"),
    include_str!("../../../proto/api_networking_v1_networkpolicy.proto"),
    include_str!("../../../proto/api_networking_v1_ingress.proto"),
    include_str!("../../../proto/api_admissionregistration_v1.proto"),
    include_str!("../../../proto/api_scheduling_v1.proto"),
    include_str!("../../../proto/api_certificates_v1.proto"),
    include_str!("../../../proto/api_node_v1.proto"),
    include_str!("../../../proto/api_flowcontrol_v1.proto"),
];

/// Every message of the vendored files by full name
/// (`api.apps.v1.Deployment`).
pub fn messages() -> &'static HashMap<String, Message> {
    static SCHEMA: OnceLock<HashMap<String, Message>> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let mut out = HashMap::new();
        for file in FILES {
            parse_file(file, &mut out);
        }
        out
    })
}

pub fn message(name: &str) -> Option<&'static Message> {
    messages().get(name)
}

fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        rest = rest[i..].find("*/").map_or("", |j| &rest[i + j + 2..]);
    }
    out.push_str(rest);
    out.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn parse_type(package: &str, t: &str) -> FieldType {
    match t {
        "string" => FieldType::String,
        "bytes" => FieldType::Bytes,
        "bool" => FieldType::Bool,
        "int32" => FieldType::Int32,
        "int64" => FieldType::Int64,
        "double" => FieldType::Double,
        full if full.starts_with('.') => FieldType::Message(full[1..].to_string()),
        local => FieldType::Message(format!("{package}.{local}")),
    }
}

/// The JSON name of a proto field: the proto name, except where Go's
/// struct tags say otherwise (`BoundObjectReference.UID` is `uID` in
/// protobuf and `uid` in JSON).
fn json_name(proto: &str) -> &str {
    match proto {
        "uID" => "uid",
        other => other,
    }
}

fn parse_file(text: &str, out: &mut HashMap<String, Message>) {
    let text = strip_comments(text);
    let mut package = String::new();
    let mut current: Option<(String, Message)> = None;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(p) = line.strip_prefix("package ") {
            package = p.trim_end_matches(';').trim().to_string();
        } else if let Some(m) = line.strip_prefix("message ") {
            let name = m.trim_end_matches('{').trim();
            current = Some((format!("{package}.{name}"), Message::default()));
        } else if line == "}" {
            if let Some((name, msg)) = current.take() {
                out.insert(name, msg);
            }
        } else if let Some((_, msg)) = current.as_mut() {
            // `optional T name = N;`, `repeated T name = N;`,
            // `map<string, T> name = N;`
            let Some((decl, number)) = line.trim_end_matches(';').split_once('=') else {
                continue;
            };
            let Ok(number) = number.trim().parse::<u32>() else {
                continue;
            };
            let decl = decl.trim();
            let (repeated, map, ty, name) = if let Some(m) = decl.strip_prefix("map<") {
                let Some((args, name)) = m.split_once('>') else {
                    continue;
                };
                let value = args.split(',').nth(1).unwrap_or("string").trim();
                (false, true, value, name.trim())
            } else {
                let parts: Vec<&str> = decl.split_whitespace().collect();
                match parts.as_slice() {
                    ["optional" | "required", t, n] => (false, false, *t, *n),
                    ["repeated", t, n] => (true, false, *t, *n),
                    _ => continue,
                }
            };
            msg.fields.push(Field {
                name: json_name(name).to_string(),
                number,
                repeated,
                map,
                ty: parse_type(&package, ty),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_vendored_files() {
        let d = message("api.apps.v1.DeploymentSpec").expect("DeploymentSpec");
        let replicas = d.fields.iter().find(|f| f.name == "replicas").unwrap();
        assert_eq!((replicas.number, &replicas.ty), (1, &FieldType::Int32));
        let template = d.by_number(3).unwrap();
        assert_eq!(
            template.ty,
            FieldType::Message("api.core.v1.PodTemplateSpec".into())
        );
        let md = message("apimachinery.pkg.apis.meta.v1.ObjectMeta").unwrap();
        let labels = md.fields.iter().find(|f| f.name == "labels").unwrap();
        assert!(labels.map && labels.ty == FieldType::String);
        let c = message("api.core.v1.Container").unwrap();
        assert!(c.fields.iter().any(|f| f.name == "ports" && f.repeated));
        // Every message a field names is known.
        for (name, m) in messages() {
            for f in &m.fields {
                if let FieldType::Message(t) = &f.ty {
                    assert!(messages().contains_key(t), "{name}.{} names {t}", f.name);
                }
            }
        }
    }
}
