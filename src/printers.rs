//! TEMPORARY: replaced by the printers module from branch `patch`.
use crate::resources::ResourceInfo;
use chrono::{DateTime, Utc};
use serde_json::Value;
pub struct Column {
    pub name: &'static str,
    pub type_: &'static str,
    pub format: &'static str,
    pub description: &'static str,
    pub priority: i32,
}
pub fn columns(_res: &ResourceInfo) -> Vec<Column> {
    vec![
        Column {
            name: "Name",
            type_: "string",
            format: "name",
            description: "",
            priority: 0,
        },
        Column {
            name: "Age",
            type_: "string",
            format: "",
            description: "",
            priority: 0,
        },
    ]
}
pub fn row_cells(_res: &ResourceInfo, obj: &Value, _now: DateTime<Utc>) -> Vec<Value> {
    vec![obj["metadata"]["name"].clone(), Value::from("0s")]
}
