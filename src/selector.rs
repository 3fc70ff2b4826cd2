//! Label and field selectors, parsed and matched the way Kubernetes does
//! (`app=nginx,tier!=fe`, `env in (prod,qa)`, `!canary`;
//! `metadata.name=web,status.phase!=Running`, in `fields`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;

use crate::names::{is_qualified_name, is_valid_label_value};

mod fields;

pub use fields::{FieldSelector, FieldTerm};

/// A selector that could not be parsed or built; the message names the bad part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, SelectorError> {
    Err(SelectorError(msg.into()))
}

/// A selector operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    Equals,
    DoubleEquals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

/// One requirement of a label selector: `key op values`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    pub values: BTreeSet<String>,
}

impl Requirement {
    /// Builds a requirement, checking the key, the values and their count as Kubernetes does.
    pub fn new(
        key: &str,
        operator: Operator,
        values: impl IntoIterator<Item = String>,
    ) -> Result<Requirement, SelectorError> {
        let values: BTreeSet<String> = values.into_iter().collect();
        let key_errs = is_qualified_name(key);
        if !key_errs.is_empty() {
            return err(format!(
                "key: Invalid value: {key:?}: {}",
                key_errs.join("; ")
            ));
        }
        match operator {
            Operator::In | Operator::NotIn => {
                if values.is_empty() {
                    return err(format!(
                        "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty (key {key:?})"
                    ));
                }
            }
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals => {
                if values.len() != 1 {
                    return err(format!(
                        "values: Invalid value: {values:?}: exact-match compatibility requires one single value (key {key:?})"
                    ));
                }
            }
            Operator::Exists | Operator::DoesNotExist => {
                if !values.is_empty() {
                    return err(format!(
                        "values: Invalid value: {values:?}: values set must be empty for exists and does not exist (key {key:?})"
                    ));
                }
            }
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    return err(format!(
                        "values: Invalid value: {values:?}: for 'Gt', 'Lt' operators, exactly one value is required (key {key:?})"
                    ));
                }
                for v in &values {
                    if v.parse::<i64>().is_err() {
                        return err(format!(
                            "values[0]: Invalid value: {v:?}: for 'Gt', 'Lt' operators, the value must be an integer (key {key:?})"
                        ));
                    }
                }
            }
        }
        for v in &values {
            let v_errs = is_valid_label_value(v);
            if !v_errs.is_empty() {
                return err(format!(
                    "values: Invalid value: {v:?}: {} (key {key:?})",
                    v_errs.join("; ")
                ));
            }
        }
        Ok(Requirement {
            key: key.to_string(),
            operator,
            values,
        })
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::Equals | Operator::DoubleEquals | Operator::In => {
                value.is_some_and(|v| self.values.contains(v))
            }
            Operator::NotEquals | Operator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let Some(have) = value.and_then(|v| v.parse::<i64>().ok()) else {
                    return false;
                };
                let Some(want) = self
                    .values
                    .iter()
                    .next()
                    .and_then(|v| v.parse::<i64>().ok())
                else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let joined = || self.values.iter().cloned().collect::<Vec<_>>().join(",");
        match self.operator {
            Operator::Exists => write!(f, "{}", self.key),
            Operator::DoesNotExist => write!(f, "!{}", self.key),
            Operator::Equals => write!(f, "{}={}", self.key, joined()),
            Operator::DoubleEquals => write!(f, "{}=={}", self.key, joined()),
            Operator::NotEquals => write!(f, "{}!={}", self.key, joined()),
            Operator::In => write!(f, "{} in ({})", self.key, joined()),
            Operator::NotIn => write!(f, "{} notin ({})", self.key, joined()),
            Operator::GreaterThan => write!(f, "{}>{}", self.key, joined()),
            Operator::LessThan => write!(f, "{}<{}", self.key, joined()),
        }
    }
}

/// A label selector: every requirement must hold. The empty selector matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    /// A selector that matches nothing (a nil `metav1.LabelSelector`).
    nothing: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Ident(String),
    Eq,
    DoubleEq,
    NotEq,
    Bang,
    In,
    NotIn,
    Gt,
    Lt,
    Open,
    Close,
    Comma,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Ident(s) => f.write_str(s),
            Token::Eq => f.write_str("="),
            Token::DoubleEq => f.write_str("=="),
            Token::NotEq => f.write_str("!="),
            Token::Bang => f.write_str("!"),
            Token::In => f.write_str("in"),
            Token::NotIn => f.write_str("notin"),
            Token::Gt => f.write_str(">"),
            Token::Lt => f.write_str("<"),
            Token::Open => f.write_str("("),
            Token::Close => f.write_str(")"),
            Token::Comma => f.write_str(","),
        }
    }
}

fn is_special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '<' | '>') || c.is_whitespace()
}

fn lex(s: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let next = chars.get(i + 1).copied();
        let tok = match c {
            '=' if next == Some('=') => {
                i += 1;
                Token::DoubleEq
            }
            '=' => Token::Eq,
            '!' if next == Some('=') => {
                i += 1;
                Token::NotEq
            }
            '!' => Token::Bang,
            '(' => Token::Open,
            ')' => Token::Close,
            ',' => Token::Comma,
            '>' => Token::Gt,
            '<' => Token::Lt,
            _ => {
                let start = i;
                while i < chars.len() && !is_special(chars[i]) {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                out.push(match word.as_str() {
                    "in" => Token::In,
                    "notin" => Token::NotIn,
                    _ => Token::Ident(word),
                });
                continue;
            }
        };
        out.push(tok);
        i += 1;
    }
    out
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }
    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        let bang = if self.peek() == Some(&Token::Bang) {
            self.pos += 1;
            true
        } else {
            false
        };
        let key = match self.next() {
            Some(Token::Ident(k)) => k,
            // `in`/`notin` are fine as keys when they stand where a key belongs.
            Some(Token::In) => "in".to_string(),
            Some(Token::NotIn) => "notin".to_string(),
            Some(t) => {
                return err(format!(
                    "unable to parse requirement: found '{t}', expected: identifier"
                ))
            }
            None => return err("unable to parse requirement: found '', expected: identifier"),
        };
        if bang {
            return match self.peek() {
                None | Some(Token::Comma) => Requirement::new(&key, Operator::DoesNotExist, []),
                Some(t) => err(format!(
                    "unable to parse requirement: found '{t}', expected: ',' or 'end of string' after '!{key}'"
                )),
            };
        }
        let op = match self.peek() {
            None | Some(Token::Comma) => return Requirement::new(&key, Operator::Exists, []),
            Some(Token::Eq) => Operator::Equals,
            Some(Token::DoubleEq) => Operator::DoubleEquals,
            Some(Token::NotEq) => Operator::NotEquals,
            Some(Token::In) => Operator::In,
            Some(Token::NotIn) => Operator::NotIn,
            Some(Token::Gt) => Operator::GreaterThan,
            Some(Token::Lt) => Operator::LessThan,
            Some(t) => {
                return err(format!(
                    "found '{t}', expected: in, notin, =, ==, !=, gt, lt (after key {key:?})"
                ))
            }
        };
        self.pos += 1;
        let values: Vec<String> = match op {
            Operator::In | Operator::NotIn => {
                if self.next() != Some(Token::Open) {
                    return err(format!(
                        "found '{}', expected: '(' after '{key} {}'",
                        self.prev_text(),
                        if op == Operator::In { "in" } else { "notin" }
                    ));
                }
                let mut vals = Vec::new();
                loop {
                    match self.next() {
                        Some(Token::Close) => break,
                        Some(Token::Ident(v)) => {
                            vals.push(v);
                            match self.next() {
                                Some(Token::Comma) => continue,
                                Some(Token::Close) => break,
                                t => {
                                    return err(format!(
                                        "found '{}', expected: ',' or ')' in the values of {key:?}",
                                        t.map(|t| t.to_string()).unwrap_or_default()
                                    ))
                                }
                            }
                        }
                        Some(Token::Comma) => vals.push(String::new()),
                        t => {
                            return err(format!(
                            "found '{}', expected: ',', ')' or identifier in the values of {key:?}",
                            t.map(|t| t.to_string()).unwrap_or_default()
                        ))
                        }
                    }
                }
                vals
            }
            _ => match self.peek() {
                Some(Token::Ident(v)) => {
                    let v = v.clone();
                    self.pos += 1;
                    vec![v]
                }
                None | Some(Token::Comma) => vec![String::new()],
                Some(t) => {
                    return err(format!(
                        "found '{t}', expected: identifier as the value of {key:?}"
                    ))
                }
            },
        };
        Requirement::new(&key, op, values)
    }

    fn prev_text(&self) -> String {
        self.tokens
            .get(self.pos.saturating_sub(1))
            .map(|t| t.to_string())
            .unwrap_or_default()
    }
}

impl LabelSelector {
    /// The selector that matches everything.
    pub fn everything() -> LabelSelector {
        LabelSelector::default()
    }

    /// The selector that matches nothing (Kubernetes' result for a nil selector).
    pub fn nothing() -> LabelSelector {
        LabelSelector {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// Parses the query-string form: `a=b,c!=d,env in (prod,qa),tier notin (fe),key,!key`.
    pub fn parse(s: &str) -> Result<LabelSelector, SelectorError> {
        let mut parser = Parser {
            tokens: lex(s),
            pos: 0,
        };
        let mut requirements = Vec::new();
        if parser.tokens.is_empty() {
            return Ok(LabelSelector::everything());
        }
        loop {
            requirements.push(parser.requirement()?);
            match parser.next() {
                None => break,
                Some(Token::Comma) => {
                    if parser.peek().is_none() {
                        return err("found '', expected: identifier after ','");
                    }
                }
                Some(t) => return err(format!("found '{t}', expected: ',' or 'end of string'")),
            }
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector {
            requirements,
            nothing: false,
        })
    }

    /// Converts an API `LabelSelector` (matchLabels + matchExpressions).
    pub fn from_label_selector(
        sel: &metav1::LabelSelector,
    ) -> Result<LabelSelector, SelectorError> {
        let mut requirements = Vec::new();
        for (k, v) in sel.match_labels.iter().flatten() {
            requirements.push(Requirement::new(k, Operator::Equals, [v.clone()])?);
        }
        for expr in sel.match_expressions.iter().flatten() {
            let op = match expr.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => return err(format!("{other:?} is not a valid label selector operator")),
            };
            requirements.push(Requirement::new(
                &expr.key,
                op,
                expr.values.clone().unwrap_or_default(),
            )?);
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector {
            requirements,
            nothing: false,
        })
    }

    /// Converts an optional API selector; `None` matches nothing, as in Kubernetes.
    pub fn from_optional(
        sel: Option<&metav1::LabelSelector>,
    ) -> Result<LabelSelector, SelectorError> {
        match sel {
            Some(s) => Self::from_label_selector(s),
            None => Ok(Self::nothing()),
        }
    }

    /// Converts the JSON form of an API selector (as found in stored objects).
    pub fn from_json(value: &serde_json::Value) -> Result<LabelSelector, SelectorError> {
        let sel: metav1::LabelSelector = serde_json::from_value(value.clone())
            .map_err(|e| SelectorError(format!("invalid label selector: {e}")))?;
        Self::from_label_selector(&sel)
    }

    /// Converts an optional API selector read as JSON (a stored object's `spec.selector`);
    /// missing or `null` matches nothing, like a nil selector.
    pub fn from_optional_json(
        value: Option<&serde_json::Value>,
    ) -> Result<LabelSelector, SelectorError> {
        match value {
            None | Some(serde_json::Value::Null) => Ok(Self::nothing()),
            Some(v) => Self::from_json(v),
        }
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// True for the selector that matches everything.
    pub fn is_empty(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }
}

impl fmt::Display for LabelSelector {
    /// The query-string form, as in a scale subresource's `status.selector`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.requirements.iter().map(|r| r.to_string()).collect();
        f.write_str(&parts.join(","))
    }
}

/// An API label selector as kubectl prints it (`metav1.FormatLabelSelector`): its
/// requirements sorted by key, as `key=value`, `key in (a,b)`, `key notin (a,b)`, `key`
/// (Exists) and `!key` (DoesNotExist), joined by commas; `<none>` when it selects everything
/// or is missing, `<error>` when it is not a valid selector.
pub fn format_label_selector(sel: Option<&metav1::LabelSelector>) -> String {
    render(LabelSelector::from_optional(sel), "<none>")
}

/// [`format_label_selector`] for a selector read as JSON, such as a stored object's
/// `spec.selector`.
pub fn format_label_selector_json(sel: Option<&serde_json::Value>) -> String {
    render(LabelSelector::from_optional_json(sel), "<none>")
}

/// What kubectl prints where it shows the converted `labels.Selector` itself (the SELECTOR
/// column of deployments, replica sets and daemon sets, `describe deployment`, a Scale's
/// `status.selector`): [`format_label_selector_json`] but "" when it selects everything.
pub fn label_selector_string_json(sel: Option<&serde_json::Value>) -> String {
    render(LabelSelector::from_optional_json(sel), "")
}

fn render(sel: Result<LabelSelector, SelectorError>, everything: &str) -> String {
    match sel {
        Err(_) => "<error>".to_string(),
        Ok(sel) if sel.requirements.is_empty() => everything.to_string(),
        Ok(sel) => sel.to_string(),
    }
}

#[cfg(test)]
mod tests;
