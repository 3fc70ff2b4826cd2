//! TEMPORARY: replaced by the defaults module from branch `valid`.
pub fn apply_defaults(_res: &crate::resources::ResourceInfo, _obj: &mut serde_json::Value) {}
