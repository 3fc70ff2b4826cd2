//! metrics.k8s.io/v1beta1 (NodeMetrics, PodMetrics): k8s-openapi has no
//! types for them, so their schemas are written here, minimal: the fields
//! bosun serves, named as metrics-server's OpenAPI names them.

use bosun::resources::ResourceInfo;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use schemars::JsonSchema;
use serde_json::{json, Map, Value};

use super::schemas::{mark_top_level, V3_REF_PREFIX};

const PREFIX: &str = "io.k8s.metrics.pkg.apis.metrics.v1beta1.";

fn reference<T: JsonSchema>(description: &str) -> Value {
    json!({"$ref": format!("{V3_REF_PREFIX}{}", T::schema_name()), "description": description})
}

fn usage(of: &str) -> Value {
    json!({
        "description": format!("The memory and CPU usage of the {of}, over the window."),
        "type": "object",
        "additionalProperties": {"$ref": format!("{V3_REF_PREFIX}{}", Quantity::schema_name())},
    })
}

fn common(description: &str) -> Map<String, Value> {
    let mut properties = Map::new();
    properties.insert("apiVersion".into(), json!({"description": "APIVersion of this object: metrics.k8s.io/v1beta1.", "type": "string"}));
    properties.insert(
        "kind".into(),
        json!({"description": "Kind of this object.", "type": "string"}),
    );
    properties.insert(
        "metadata".into(),
        reference::<ObjectMeta>("Standard object's metadata."),
    );
    properties.insert(
        "timestamp".into(),
        reference::<Time>("The end of the window the usage was measured over."),
    );
    properties.insert("window".into(), json!({"description": "The length of the window the usage was measured over, as a duration (\"30s\").", "type": "string"}));
    let mut schema = Map::new();
    schema.insert("description".into(), json!(description));
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    schema
}

/// The metrics kinds among `kinds`, plus what they refer to.
pub fn schemas(kinds: &[&ResourceInfo]) -> Map<String, Value> {
    let mut gen = super::schemas::generator();
    gen.subschema_for::<ObjectMeta>();
    gen.subschema_for::<Time>();
    gen.subschema_for::<Quantity>();
    let mut defs = gen.take_definitions(false);
    for r in kinds {
        let mut schema = match r.kind {
            "NodeMetrics" => {
                let mut s = common("The resource usage of a node, as the agent last measured it.");
                s["properties"]["usage"] = usage("node");
                s
            }
            "PodMetrics" => {
                let mut s = common(
                    "The resource usage of a pod's containers, as the agent last measured it.",
                );
                s["properties"]["containers"] = json!({
                    "description": "The usage of each container of the pod.",
                    "type": "array",
                    "items": {"$ref": format!("{V3_REF_PREFIX}{PREFIX}ContainerMetrics")},
                });
                defs.insert(
                    format!("{PREFIX}ContainerMetrics"),
                    json!({
                        "description": "The resource usage of one container.",
                        "type": "object",
                        "properties": {
                            "name": {"description": "The container's name in the pod's spec.", "type": "string"},
                            "usage": usage("container"),
                        },
                        "required": ["name", "usage"],
                    }),
                );
                s
            }
            _ => continue,
        };
        mark_top_level(&mut schema, r);
        defs.insert(format!("{PREFIX}{}", r.kind), Value::Object(schema));
    }
    defs
}
