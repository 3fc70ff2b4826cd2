//! Kubernetes resource quantities (`500m`, `0.5`, `200Mi`, `1e3`), parsed
//! the way `resource.ParseQuantity` does, kept as an exact decimal so
//! schedulers can sum and compare them without floating point.

use std::cmp::Ordering;
use std::fmt;

/// The error Kubernetes gives for a malformed quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    FormatWrong,
    #[error("unable to parse quantity's suffix")]
    Suffix,
}

/// A parsed quantity: `mantissa × 10^scale`, exactly (binary suffixes are
/// folded into the mantissa). The text it was parsed from is kept for display.
#[derive(Debug, Clone)]
pub struct Quantity {
    mantissa: i128,
    scale: i32,
    text: String,
}

const MAX_DIGITS: usize = 36;

fn pow10(exp: u32) -> Option<i128> {
    10i128.checked_pow(exp)
}

impl Quantity {
    /// The value × 1000, rounded up (Kubernetes' `MilliValue`).
    pub fn millis(&self) -> i128 {
        self.scaled_ceil(3)
    }

    /// The value, rounded up to a whole number (Kubernetes' `Value`).
    pub fn value(&self) -> i128 {
        self.scaled_ceil(0)
    }

    /// `ceil(value × 10^shift)`, saturating at the i128 bounds.
    fn scaled_ceil(&self, shift: i32) -> i128 {
        let exp = self.scale + shift;
        if exp >= 0 {
            match pow10(exp as u32) {
                Some(p) => self.mantissa.saturating_mul(p),
                None if self.mantissa == 0 => 0,
                None if self.mantissa > 0 => i128::MAX,
                None => i128::MIN,
            }
        } else {
            match pow10((-exp) as u32) {
                Some(p) => {
                    let q = self.mantissa / p;
                    if self.mantissa % p > 0 {
                        q + 1
                    } else {
                        q
                    }
                }
                // The divisor is larger than any mantissa: the value is in (-1, 1).
                None => i128::from(self.mantissa > 0),
            }
        }
    }

    /// -1, 0 or 1.
    pub fn signum(&self) -> i32 {
        self.mantissa.signum() as i32
    }

    pub fn is_zero(&self) -> bool {
        self.mantissa == 0
    }

    /// The text the quantity was parsed from.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Kubernetes' canonical form, as the API server stores it: `0.5` is
    /// `500m`, `1000` is `1k`, `1024Mi` is `1Gi`; binary suffixes stay
    /// binary while the value is a whole number of them, `1e3` stays an
    /// exponent.
    pub fn canonical(&self) -> String {
        if self.mantissa == 0 {
            return "0".into();
        }
        let suffix: String = self
            .text
            .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '+' || c == '-')
            .to_string();
        let binary = suffix.ends_with('i');
        let exponent = suffix.starts_with(['e', 'E']);
        let (mut m, mut e) = (self.mantissa, self.scale);
        while m % 10 == 0 {
            m /= 10;
            e += 1;
        }
        if binary && e >= 0 {
            if let Some(value) = pow10(e as u32).and_then(|p| m.checked_mul(p)) {
                for (k, name) in [
                    (6u32, "Ei"),
                    (5, "Pi"),
                    (4, "Ti"),
                    (3, "Gi"),
                    (2, "Mi"),
                    (1, "Ki"),
                    (0, ""),
                ] {
                    let unit = 1024i128.pow(k);
                    if value % unit == 0 {
                        return format!("{}{name}", value / unit);
                    }
                }
            }
        }
        let mut e3 = e.div_euclid(3) * 3;
        if e3 < -9 {
            // Finer than nano: round up to whole nanos, as Kubernetes does.
            let p = pow10((-9 - e) as u32).unwrap_or(i128::MAX);
            m = m / p + i128::from(m % p > 0);
            e = -9;
            e3 = -9;
        }
        let e3 = e3.min(18);
        let m = m * pow10((e - e3) as u32).unwrap_or(1);
        if exponent {
            return if e3 == 0 {
                m.to_string()
            } else {
                format!("{m}e{e3}")
            };
        }
        let name = match e3 {
            -9 => "n",
            -6 => "u",
            -3 => "m",
            0 => "",
            3 => "k",
            6 => "M",
            9 => "G",
            12 => "T",
            15 => "P",
            _ => "E",
        };
        format!("{m}{name}")
    }
}

/// Rewrites every quantity under resource maps (`requests`, `limits`,
/// `capacity`, `allocatable`, `hard`, `used`) into canonical form, as the
/// API server stores them.
pub fn canonicalize_quantities(obj: &mut serde_json::Value) {
    use serde_json::Value;
    const MAPS: [&str; 6] = [
        "requests",
        "limits",
        "capacity",
        "allocatable",
        "hard",
        "used",
    ];
    match obj {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if MAPS.contains(&k.as_str()) {
                    if let Value::Object(q) = v {
                        for value in q.values_mut() {
                            let text = match value {
                                Value::String(s) => s.clone(),
                                Value::Number(n) => n.to_string(),
                                _ => continue,
                            };
                            if let Ok(parsed) = parse_quantity(&text) {
                                *value = Value::String(parsed.canonical());
                            }
                        }
                        continue;
                    }
                }
                canonicalize_quantities(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(canonicalize_quantities),
        _ => {}
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        let (a, b) = (self.mantissa, other.mantissa);
        if a.signum() != b.signum() {
            return a.signum().cmp(&b.signum());
        }
        // Bring both to the smaller scale; on overflow the one being scaled up is larger in magnitude.
        let lift = |m: i128, by: i32| -> Option<i128> { m.checked_mul(pow10(by as u32)?) };
        match self.scale.cmp(&other.scale) {
            Ordering::Equal => a.cmp(&b),
            Ordering::Greater => match lift(a, self.scale - other.scale) {
                Some(x) => x.cmp(&b),
                None => {
                    if a > 0 {
                        Ordering::Greater
                    } else {
                        Ordering::Less
                    }
                }
            },
            Ordering::Less => match lift(b, other.scale - self.scale) {
                Some(y) => a.cmp(&y),
                None => {
                    if b > 0 {
                        Ordering::Less
                    } else {
                        Ordering::Greater
                    }
                }
            },
        }
    }
}

/// Parses a Kubernetes quantity.
pub fn parse_quantity(s: &str) -> Result<Quantity, QuantityError> {
    let text = s.trim();
    if text.is_empty() {
        return Err(QuantityError::FormatWrong);
    }
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut negative = false;
    if bytes[0] == b'+' || bytes[0] == b'-' {
        negative = bytes[0] == b'-';
        i = 1;
    }
    let num_start = i;
    while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
        i += 1;
    }
    let number = &text[num_start..i];
    let suffix = &text[i..];
    if number.is_empty()
        || number.matches('.').count() > 1
        || !number.bytes().any(|b| b.is_ascii_digit())
    {
        return Err(QuantityError::FormatWrong);
    }
    // The suffix must fit the shape [eEinumkKMGTP]*[-+]?[0-9]* before its meaning is checked.
    let letters_end = suffix
        .find(|c: char| !"eEinumkKMGTP".contains(c))
        .unwrap_or(suffix.len());
    let rest = &suffix[letters_end..];
    let rest_digits = rest.strip_prefix(['+', '-']).unwrap_or(rest);
    if !rest_digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(QuantityError::FormatWrong);
    }

    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    let mut digits: String = format!("{int_part}{frac_part}");
    let mut scale: i32 = -(frac_part.len() as i32);
    let trimmed = digits.trim_start_matches('0');
    digits = trimmed.to_string();
    if digits.len() > MAX_DIGITS {
        // Drop excess precision, rounding up as Kubernetes does.
        let drop = digits.len() - MAX_DIGITS;
        let round_up = digits[MAX_DIGITS..].bytes().any(|b| b != b'0');
        digits.truncate(MAX_DIGITS);
        scale += drop as i32;
        if round_up {
            let v: i128 = digits.parse().map_err(|_| QuantityError::FormatWrong)?;
            digits = (v + 1).to_string();
        }
    }
    let mut mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| QuantityError::FormatWrong)?
    };

    match suffix {
        "" => {}
        "n" => scale -= 9,
        "u" => scale -= 6,
        "m" => scale -= 3,
        "k" => scale += 3,
        "M" => scale += 6,
        "G" => scale += 9,
        "T" => scale += 12,
        "P" => scale += 15,
        "E" => scale += 18,
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
            let power = match suffix {
                "Ki" => 10,
                "Mi" => 20,
                "Gi" => 30,
                "Ti" => 40,
                "Pi" => 50,
                _ => 60,
            };
            mantissa = mantissa.saturating_mul(1i128 << power);
        }
        _ => {
            let exp = suffix
                .strip_prefix(['e', 'E'])
                .ok_or(QuantityError::Suffix)?;
            let exp: i32 = exp.parse().map_err(|_| QuantityError::Suffix)?;
            if !(-1000..=1000).contains(&exp) {
                return Err(QuantityError::Suffix);
            }
            scale += exp;
        }
    }
    if negative {
        mantissa = -mantissa;
    }
    Ok(Quantity {
        mantissa,
        scale,
        text: text.to_string(),
    })
}

/// Formats millicores the way `kubectl describe` does: `500m`, or `2` when whole.
pub fn format_milli_cpu(millis: i128) -> String {
    if millis % 1000 == 0 {
        (millis / 1000).to_string()
    } else {
        format!("{millis}m")
    }
}

/// Formats a byte count with the largest binary suffix that divides it (`128Mi`, `1Gi`, `1500`).
pub fn format_bytes(bytes: i128) -> String {
    const SUFFIXES: [(&str, u32); 6] = [
        ("Ei", 60),
        ("Pi", 50),
        ("Ti", 40),
        ("Gi", 30),
        ("Mi", 20),
        ("Ki", 10),
    ];
    if bytes != 0 {
        for (suffix, power) in SUFFIXES {
            let unit = 1i128 << power;
            if bytes % unit == 0 {
                return format!("{}{suffix}", bytes / unit);
            }
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_forms_match_kubernetes() {
        for (given, canonical) in [
            ("0.5", "500m"),
            ("1.5", "1500m"),
            ("2", "2"),
            ("100m", "100m"),
            ("1000m", "1"),
            ("1000", "1k"),
            ("1Gi", "1Gi"),
            ("1024Mi", "1Gi"),
            ("1.5Gi", "1536Mi"),
            ("200Mi", "200Mi"),
            ("1e3", "1e3"),
            ("0.1", "100m"),
            ("0", "0"),
            ("1k", "1k"),
            ("2048Ki", "2Mi"),
            ("1500000", "1500k"),
        ] {
            assert_eq!(
                parse_quantity(given).unwrap().canonical(),
                canonical,
                "{given}"
            );
        }
        let mut pod = serde_json::json!({"spec": {"containers": [{"resources":
            {"requests": {"cpu": 0.5, "memory": "1024Mi"}, "limits": {"cpu": "1000m"}}}]}});
        canonicalize_quantities(&mut pod);
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["requests"]["cpu"],
            "500m"
        );
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["requests"]["memory"],
            "1Gi"
        );
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["limits"]["cpu"],
            "1"
        );
    }

    fn q(s: &str) -> Quantity {
        parse_quantity(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn cpu_forms() {
        assert_eq!(q("500m").millis(), 500);
        assert_eq!(q("0.5").millis(), 500);
        assert_eq!(q("2").millis(), 2000);
        assert_eq!(q("2").value(), 2);
        assert_eq!(q(".25").millis(), 250);
        assert_eq!(q("1.").millis(), 1000);
        assert_eq!(q("0.1m").millis(), 1, "sub-milli precision rounds up");
        assert_eq!(q("500m").value(), 1, "value rounds up");
        assert_eq!(q("100n").millis(), 1);
        assert_eq!(q("1500u").millis(), 2);
    }

    #[test]
    fn memory_forms() {
        assert_eq!(q("200Mi").value(), 200 * 1024 * 1024);
        assert_eq!(q("1Gi").value(), 1 << 30);
        assert_eq!(q("1Ki").value(), 1024);
        assert_eq!(q("1k").value(), 1000);
        assert_eq!(q("1M").value(), 1_000_000);
        assert_eq!(q("1e3").value(), 1000);
        assert_eq!(q("1E3").value(), 1000);
        assert_eq!(q("1.5Gi").value(), 1536 * 1024 * 1024);
        assert_eq!(q("2e-3").millis(), 2);
        assert_eq!(q("-1").value(), -1);
        assert_eq!(q("+3").value(), 3);
        assert_eq!(q("1Ei").value(), 1i128 << 60);
    }

    #[test]
    fn comparisons_are_exact() {
        assert_eq!(q("1"), q("1000m"));
        assert_eq!(q("1Ki"), q("1024"));
        assert!(q("1Gi") > q("1G"));
        assert!(q("500m") < q("1"));
        assert!(q("-1") < q("0"));
        assert!(q("0").is_zero());
        assert_eq!(q("-2m").signum(), -1);
    }

    #[test]
    fn malformed_quantities() {
        for bad in [
            "", "abc", "1.2.3", "m", "1x", "1Ki2", "1 Gi", "--1", "1e", "1mm", "1Kii",
        ] {
            assert!(parse_quantity(bad).is_err(), "{bad:?} should not parse");
        }
        assert_eq!(
            parse_quantity("1x").unwrap_err(),
            QuantityError::FormatWrong
        );
        assert_eq!(parse_quantity("1mm").unwrap_err(), QuantityError::Suffix);
        assert!(QuantityError::FormatWrong
            .to_string()
            .starts_with("quantities must match"));
    }

    #[test]
    fn formatting_helpers() {
        assert_eq!(format_milli_cpu(500), "500m");
        assert_eq!(format_milli_cpu(2000), "2");
        assert_eq!(format_bytes(128 * 1024 * 1024), "128Mi");
        assert_eq!(format_bytes(1 << 30), "1Gi");
        assert_eq!(format_bytes(1500), "1500");
        assert_eq!(q("250m").to_string(), "250m");
    }
}
