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

/// The terms between commas, a backslash escaping the character after it
/// (upstream's `splitTerms`); escapes stay in the terms.
pub(super) fn split_terms(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == ',' {
            parts.push(&s[start..i]);
            start = i + 1;
        }
    }
    parts.push(&s[start..]);
    parts
}

/// The field, whether the operator is `!=`, and the raw value, split at the
/// first operator (upstream's `splitTerm`: no escapes in the field name,
/// `!=` and `==` tried before `=` at each position).
pub(super) fn split_term(term: &str) -> Option<(&str, bool, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for (op, negated) in [("!=", true), ("==", false), ("=", false)] {
            if let Some(value) = rest.strip_prefix(op) {
                return Some((&term[..i], negated, value));
            }
        }
    }
    None
}

/// A value with its escapes (`\\`, `\,`, `\=`) resolved; any other escape,
/// a lone backslash at the end, or an unescaped `,` or `=` is an error
/// (upstream's `UnescapeValue`, whose message prints the character's code).
fn unescape(s: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(n @ ('\\' | ',' | '=')) => out.push(n),
                Some(n) => {
                    return err(format!(
                        "invalid field selector: invalid escape sequence: \\{n}"
                    ))
                }
                None => return err("invalid field selector: invalid escape sequence: \\"),
            },
            ',' | '=' => {
                return err(format!(
                    "invalid field selector: unescaped character in value: {}",
                    u32::from(c)
                ))
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

impl FieldSelector {
    /// Parses `a=b`, `a==b`, `a!=b` terms separated by commas, as upstream's
    /// `fields.ParseSelector`: empty terms are skipped (`a=b,` is `a=b`, so
    /// clients can join terms), nothing is trimmed, the terms are sorted.
    /// Whether a field may be selected on is the caller's check.
    pub fn parse(s: &str) -> Result<FieldSelector, SelectorError> {
        let mut parts = split_terms(s);
        parts.sort_unstable();
        let mut terms = Vec::new();
        for part in parts.into_iter().filter(|p| !p.is_empty()) {
            let Some((field, negated, raw)) = split_term(part) else {
                return err(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                ));
            };
            terms.push(FieldTerm {
                field: field.to_string(),
                value: unescape(raw)?,
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
