//! YAML from peers that are not trusted (request bodies, a cluster's
//! kubeconfig read before its CA is), decoded with a bound on what it
//! expands to.
//!
//! An alias (`*a`) repeats everything its anchor (`&a`) holds, so a few
//! kilobytes of YAML can stand for gigabytes of JSON (the "billion laughs").
//! serde_yaml's own guard counts alias jumps (at most 100 per event of the
//! document), not the size they expand to: one anchor of 5000 items named
//! 500 times passes it and expands to 2.5 million values. Here the value is
//! built by a visitor that charges each scalar, key and container its
//! length as compact JSON against a budget, and stops as soon as the
//! budget is spent, before the rest is allocated.

use std::cell::Cell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Why YAML was not decoded.
#[derive(Debug, thiserror::Error)]
pub enum YamlError {
    /// The document expands to more than the budget.
    #[error(
        "the YAML document expands to more than {limit} bytes as JSON \
         (its aliases repeat what their anchors hold); it was not decoded"
    )]
    TooLarge { limit: usize },
    #[error("{0}")]
    Syntax(#[from] serde_yaml::Error),
}

/// Decodes one YAML document into JSON, refusing it as soon as it would
/// expand to more than `limit` bytes of compact JSON (counted as written,
/// give or take a byte per array or object).
pub fn from_slice_bounded(bytes: &[u8], limit: usize) -> Result<Value, YamlError> {
    let budget = Budget {
        left: Cell::new(limit),
        exceeded: Cell::new(false),
    };
    let decoded = Bounded(&budget).deserialize(serde_yaml::Deserializer::from_slice(bytes));
    if budget.exceeded.get() {
        return Err(YamlError::TooLarge { limit });
    }
    Ok(decoded?)
}

/// [`from_slice_bounded`] on text.
pub fn from_str_bounded(text: &str, limit: usize) -> Result<Value, YamlError> {
    from_slice_bounded(text.as_bytes(), limit)
}

struct Budget {
    left: Cell<usize>,
    exceeded: Cell<bool>,
}

impl Budget {
    fn charge<E: serde::de::Error>(&self, bytes: usize) -> Result<(), E> {
        match self.left.get().checked_sub(bytes) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => {
                self.exceeded.set(true);
                Err(E::custom("the document expands past its size limit"))
            }
        }
    }
}

/// Decimal digits of `n`, as JSON writes it.
fn digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

#[derive(Clone, Copy)]
struct Bounded<'b>(&'b Budget);

impl<'de> DeserializeSeed<'de> for Bounded<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Bounded<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        self.0.charge(4)?;
        Ok(Value::Null)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        self.deserialize(de)
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        self.0.charge(if v { 4 } else { 5 })?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        self.0
            .charge(digits(v.unsigned_abs()) + usize::from(v < 0))?;
        Ok(Value::from(v))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        self.0.charge(digits(v))?;
        Ok(Value::from(v))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        let value = serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number);
        self.0.charge(value.to_string().len())?;
        Ok(value)
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        self.0.charge(v.len() + 2)?;
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Value, E> {
        self.0.charge(v.len() + 2)?;
        Ok(Value::String(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.0.charge(2)?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self)? {
            self.0.charge(1)?;
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.0.charge(2)?;
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            self.0.charge(key.len() + 4)?;
            let value = map.next_value_seed(self)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One anchor of `items` entries, referenced `refs` times.
    fn bomb(items: usize, refs: usize) -> String {
        let mut y = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\nx: &a [");
        y.push_str(&vec!["xxxxxxxx"; items].join(","));
        y.push_str("]\ny:\n");
        for _ in 0..refs {
            y.push_str("- *a\n");
        }
        y
    }

    #[test]
    fn decodes_as_serde_yaml_does_within_the_limit() {
        let text = "a: 1\nb: [true, null, -2.5, \"s\", 18446744073709551615]\nc: {d: e}\n";
        let plain: Value = serde_yaml::from_str(text).unwrap();
        assert_eq!(from_str_bounded(text, 1 << 20).unwrap(), plain);
        // The budget is the compact JSON length, give or take.
        let json = serde_json::to_string(&plain).unwrap();
        assert!(from_str_bounded(text, json.len() + 8).is_ok());
        assert!(matches!(
            from_str_bounded(text, json.len() / 2),
            Err(YamlError::TooLarge { .. })
        ));
        let small = bomb(10, 3);
        assert_eq!(
            from_str_bounded(&small, 1 << 20).unwrap(),
            serde_yaml::from_str::<Value>(&small).unwrap()
        );
    }

    #[test]
    fn an_alias_bomb_is_refused_before_it_expands() {
        let text = bomb(5000, 500);
        assert!(text.len() < 60_000, "{}", text.len());
        let started = std::time::Instant::now();
        let err = from_str_bounded(&text, 3 << 20).unwrap_err();
        assert!(matches!(err, YamlError::TooLarge { limit } if limit == 3 << 20));
        assert!(err.to_string().contains("aliases"), "{err}");
        // Refusing it does not take the time expanding it would.
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn syntax_errors_stay_syntax_errors() {
        assert!(matches!(
            from_str_bounded("a: [1", 1 << 20),
            Err(YamlError::Syntax(_))
        ));
        assert!(matches!(
            from_str_bounded("---\na: 1\n---\nb: 2\n", 1 << 20),
            Err(YamlError::Syntax(_))
        ));
    }
}
