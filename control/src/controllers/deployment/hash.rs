//! The `pod-template-hash`: what names a Deployment's ReplicaSets and
//! keeps their selectors apart (kube-controller-manager's
//! `controller.ComputeHash` and `deploymentutil.EqualIgnoreHash`).
//!
//! Kubernetes hashes a spew dump of the Go struct with FNV-32a; bosun
//! hashes the canonical JSON of the template (keys sorted) the same way,
//! mixes in `status.collisionCount`, and renders the number in
//! Kubernetes' safe-encoded alphabet (no vowels, no look-alike digits).

use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::Value;

use super::POD_TEMPLATE_HASH;

/// apimachinery's `rand.SafeEncodeString` alphabet.
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// FNV-1a, 32 bits.
struct Fnv32a(u32);

impl Fnv32a {
    fn new() -> Self {
        Fnv32a(0x811c_9dc5)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u32::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0193);
        }
    }
}

/// Writes `v` as JSON with object keys sorted, so equal templates give
/// equal bytes whatever order their maps were built in.
fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Maps each character of `s` into the safe alphabet, as
/// `rand.SafeEncodeString` does.
fn safe_encode(s: &str) -> String {
    s.bytes()
        .map(|b| ALPHABET[usize::from(b) % ALPHABET.len()] as char)
        .collect()
}

/// The hash of `template` (as the Deployment has it, without a hash
/// label) and the collision count.
pub fn compute_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let value = serde_json::to_value(template).unwrap_or(Value::Null);
    let mut text = String::new();
    canonical(&value, &mut text);
    let mut hasher = Fnv32a::new();
    hasher.write(text.as_bytes());
    if let Some(count) = collision_count {
        // Kubernetes writes the count as 4 little-endian bytes.
        hasher.write(&(count as u32).to_le_bytes());
    }
    safe_encode(&hasher.0.to_string())
}

/// `template` as compared for "is this the same template": without the
/// hash label, with no labels the same as empty labels.
fn comparable(template: &PodTemplateSpec) -> Value {
    let mut t = template.clone();
    let md = t.metadata.get_or_insert_with(Default::default);
    if let Some(labels) = md.labels.as_mut() {
        labels.remove(POD_TEMPLATE_HASH);
        if labels.is_empty() {
            md.labels = None;
        }
    }
    if md.annotations.as_ref().is_some_and(|a| a.is_empty()) {
        md.annotations = None;
    }
    serde_json::to_value(&t).unwrap_or(Value::Null)
}

/// Whether two templates are the same but for the `pod-template-hash`
/// label (which only ReplicaSet templates carry).
pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    comparable(a) == comparable(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(image: &str) -> PodTemplateSpec {
        serde_json::from_value(serde_json::json!({
            "metadata": {"labels": {"app": "web", "tier": "front"}},
            "spec": {"containers": [{"name": "web", "image": image}]}
        }))
        .unwrap()
    }

    #[test]
    fn hash_is_stable_safe_encoded_and_depends_on_template_and_collisions() {
        let a = compute_hash(&template("web:1"), None);
        assert_eq!(a, compute_hash(&template("web:1"), None));
        assert!(
            (1..=10).contains(&a.len()) && a.bytes().all(|b| ALPHABET.contains(&b)),
            "{a}"
        );
        assert_ne!(a, compute_hash(&template("web:2"), None));
        assert_ne!(a, compute_hash(&template("web:1"), Some(1)));
        assert_ne!(
            compute_hash(&template("web:1"), Some(1)),
            compute_hash(&template("web:1"), Some(2))
        );
    }

    #[test]
    fn label_order_does_not_change_the_hash() {
        let reordered: PodTemplateSpec = serde_json::from_value(serde_json::json!({
            "spec": {"containers": [{"image": "web:1", "name": "web"}]},
            "metadata": {"labels": {"tier": "front", "app": "web"}}
        }))
        .unwrap();
        assert_eq!(
            compute_hash(&template("web:1"), None),
            compute_hash(&reordered, None)
        );
    }

    #[test]
    fn equality_ignores_only_the_hash_label() {
        let mut with_hash = template("web:1");
        with_hash
            .metadata
            .as_mut()
            .unwrap()
            .labels
            .as_mut()
            .unwrap()
            .insert(POD_TEMPLATE_HASH.into(), "abc".into());
        assert!(equal_ignore_hash(&template("web:1"), &with_hash));
        assert!(!equal_ignore_hash(&template("web:2"), &with_hash));
    }

    #[test]
    fn safe_encoding_matches_apimachinery() {
        // "0" is byte 48: 48 % 27 = 21 -> '4'; "9" is 57 % 27 = 3 -> 'f'.
        assert_eq!(safe_encode("09"), "4f");
    }
}
