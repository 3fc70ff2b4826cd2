//! TEMPORARY: replaced by the validation module from branch `valid`.
use crate::resources::ResourceInfo;
use serde_json::Value;
#[derive(Debug, Clone)]
pub struct FieldError {
    pub field: String,
    pub bad_value: Option<Value>,
    pub detail: String,
}
impl FieldError {
    pub fn reason(&self) -> &'static str {
        "FieldValueInvalid"
    }
    pub fn message(&self) -> String {
        format!("{}: Invalid value: {}", self.field, self.detail)
    }
}
pub fn normalize(_res: &ResourceInfo, obj: Value) -> Result<Value, String> {
    Ok(obj)
}
pub fn validate(_res: &ResourceInfo, obj: &Value, _old: Option<&Value>) -> Vec<FieldError> {
    let mut out = Vec::new();
    if obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        out.push(FieldError {
            field: "metadata.name".into(),
            bad_value: None,
            detail: "name or generateName is required".into(),
        });
    }
    out
}
