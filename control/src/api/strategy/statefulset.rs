//! StatefulSets: decoding against k8s-openapi writes apiVersion and kind
//! into every embedded claim template; keep only what the client sent.

use serde_json::Value;

use super::Strategy;

pub struct StatefulSetStrategy;

impl Strategy for StatefulSetStrategy {
    fn normalize(&self, sent: &Value, decoded: &mut Value) {
        let sent = sent.pointer("/spec/volumeClaimTemplates");
        let Some(templates) = decoded
            .pointer_mut("/spec/volumeClaimTemplates")
            .and_then(Value::as_array_mut)
        else {
            return;
        };
        for (i, t) in templates.iter_mut().enumerate() {
            let given = sent.and_then(|s| s.get(i));
            for key in ["apiVersion", "kind"] {
                if given.and_then(|g| g.get(key)).is_none() {
                    t.as_object_mut().map(|o| o.remove(key));
                }
            }
        }
    }
}
