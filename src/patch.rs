//! TEMPORARY: replaced by the patch module from branch `patch`.
use serde_json::Value;
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PatchError(String);
pub fn apply_merge_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    let mut out = target.clone();
    json_patch::merge(&mut out, patch);
    Ok(out)
}
pub fn apply_json_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    let p: json_patch::Patch =
        serde_json::from_value(patch.clone()).map_err(|e| PatchError(e.to_string()))?;
    let mut out = target.clone();
    json_patch::patch(&mut out, &p).map_err(|e| PatchError(e.to_string()))?;
    Ok(out)
}
pub fn apply_strategic_merge_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    apply_merge_patch(target, patch)
}
