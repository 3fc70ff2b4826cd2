//! A deployment's ReplicaSets as `describe` and `rollout` read them: which objects a
//! controller owns, and pod templates compared without the label the deployment
//! controller adds to each set's template.

use serde_json::Value;

use bosun::owners::controller_of_json;

/// The label the deployment controller adds to a ReplicaSet's pod template.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// Whether `uid` is the object's controller.
pub fn controlled_by(obj: &Value, uid: &str) -> bool {
    controller_of_json(&obj["metadata"]).is_some_and(|r| r["uid"] == uid)
}

/// A template without the `pod-template-hash` label (and without an
/// emptied label map), for comparing and for writing back.
pub fn without_hash(template: &Value) -> Value {
    let mut t = template.clone();
    if let Some(labels) = t["metadata"]["labels"].as_object_mut() {
        labels.remove(POD_TEMPLATE_HASH);
        if labels.is_empty() {
            t["metadata"].as_object_mut().map(|m| m.remove("labels"));
        }
    }
    t
}
