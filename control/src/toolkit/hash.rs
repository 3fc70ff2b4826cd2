//! The hash that names what controllers make from templates: a
//! Deployment's `pod-template-hash`, a ControllerRevision's name
//! (kube-controller-manager's `controller.ComputeHash` and
//! `history.HashControllerRevision`).
//!
//! Kubernetes hashes a spew dump of the Go struct (or a revision's raw
//! data) with FNV-32a; bosun hashes the canonical JSON (keys sorted) the
//! same way, mixes in the collision count, and renders the number in
//! Kubernetes' safe-encoded alphabet (no vowels, no look-alike digits).

use serde_json::Value;

/// apimachinery's `rand.SafeEncodeString` alphabet.
pub const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

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

/// Writes `v` as JSON with object keys sorted, so equal values give equal
/// bytes whatever order their maps were built in.
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

/// The safe-encoded FNV-32a of `value`'s canonical JSON and, when set,
/// the collision count (written as 4 little-endian bytes, as Kubernetes
/// does).
pub fn hash_value(value: &Value, collision_count: Option<i32>) -> String {
    let mut text = String::new();
    canonical(value, &mut text);
    let mut hasher = Fnv32a::new();
    hasher.write(text.as_bytes());
    if let Some(count) = collision_count {
        hasher.write(&(count as u32).to_le_bytes());
    }
    safe_encode(&hasher.0.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hash_is_stable_safe_encoded_and_depends_on_value_and_collisions() {
        let v = json!({"image": "web:1"});
        let a = hash_value(&v, None);
        assert_eq!(a, hash_value(&v, None));
        assert!(
            (1..=10).contains(&a.len()) && a.bytes().all(|b| ALPHABET.contains(&b)),
            "{a}"
        );
        assert_ne!(a, hash_value(&json!({"image": "web:2"}), None));
        assert_ne!(a, hash_value(&v, Some(1)));
        assert_ne!(hash_value(&v, Some(1)), hash_value(&v, Some(2)));
    }

    #[test]
    fn key_order_does_not_change_the_hash() {
        let a: Value = serde_json::from_str(r#"{"a":1,"b":{"y":[1,2],"x":"s"}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"b":{"x":"s","y":[1,2]},"a":1}"#).unwrap();
        assert_eq!(hash_value(&a, None), hash_value(&b, None));
        let mut text = String::new();
        canonical(&b, &mut text);
        assert_eq!(text, r#"{"a":1,"b":{"x":"s","y":[1,2]}}"#);
    }

    #[test]
    fn safe_encoding_matches_apimachinery() {
        // "0" is byte 48: 48 % 27 = 21 -> '4'; "9" is 57 % 27 = 3 -> 'f'.
        assert_eq!(safe_encode("09"), "4f");
    }
}
