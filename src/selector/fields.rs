//! Field selectors (`metadata.name=web,status.phase!=Running`), as apimachinery's
//! `fields` package: terms of `=`, `==` or `!=` joined by commas, values escaped with `\`.

use super::{err, SelectorError};

/// One term of a field selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldTerm {
    pub field: String,
    pub value: String,
    pub negated: bool,
}

/// A field selector (`metadata.name=web,status.phase!=Running`): every term must hold.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

/// Splits on `sep` outside backslash escapes.
fn split_escaped(s: &str, sep: char) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            cur.push(c);
            if let Some(n) = chars.next() {
                cur.push(n);
            }
        } else if c == sep {
            parts.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    parts.push(cur);
    parts
}

fn unescape(s: &str) -> Result<String, SelectorError> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(n @ ('\\' | ',' | '=' | '!')) => out.push(n),
                Some(n) => {
                    return err(format!(
                        "invalid escape sequence '\\{n}' in field selector value {s:?}"
                    ))
                }
                None => {
                    return err(format!(
                        "unterminated escape sequence in field selector value {s:?}"
                    ))
                }
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

impl FieldSelector {
    /// Parses `a=b`, `a==b`, `a!=b` terms separated by commas; empty = everything.
    pub fn parse(s: &str) -> Result<FieldSelector, SelectorError> {
        let mut terms = Vec::new();
        if s.trim().is_empty() {
            return Ok(FieldSelector { terms });
        }
        for part in split_escaped(s, ',') {
            let part = part.trim();
            if part.is_empty() {
                return err(format!("invalid selector: '{s}'; empty term"));
            }
            // Find the first unescaped operator.
            let bytes = part.as_bytes();
            let mut i = 0;
            let mut found = None;
            while i < bytes.len() {
                match bytes[i] {
                    b'\\' => i += 2,
                    b'!' if bytes.get(i + 1) == Some(&b'=') => {
                        found = Some((i, 2, true));
                        break;
                    }
                    b'=' if bytes.get(i + 1) == Some(&b'=') => {
                        found = Some((i, 2, false));
                        break;
                    }
                    b'=' => {
                        found = Some((i, 1, false));
                        break;
                    }
                    _ => i += 1,
                }
            }
            let Some((at, len, negated)) = found else {
                return err(format!(
                    "invalid selector: '{part}'; can't understand '{part}'"
                ));
            };
            let field = part[..at].trim();
            if field.is_empty() {
                return err(format!("invalid selector: '{part}'; field name is empty"));
            }
            let value = unescape(part[at + len..].trim())?;
            terms.push(FieldTerm {
                field: field.to_string(),
                value,
                negated,
            });
        }
        Ok(FieldSelector { terms })
    }

    /// Whether an object matches; `get` returns a field's value (`None` counts as empty).
    pub fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.terms.iter().all(|t| {
            let have = get(&t.field).unwrap_or_default();
            (have == t.value) != t.negated
        })
    }

    /// The field names used, so callers can reject unsupported ones.
    pub fn fields(&self) -> Vec<&str> {
        self.terms.iter().map(|t| t.field.as_str()).collect()
    }

    pub fn terms(&self) -> &[FieldTerm] {
        &self.terms
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}
