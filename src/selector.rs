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

fn check_key(key: &str) -> Result<(), SelectorError> {
    let key_errs = is_qualified_name(key);
    if key_errs.is_empty() {
        return Ok(());
    }
    err(format!(
        "key: Invalid value: {key:?}: {}",
        key_errs.join("; ")
    ))
}

impl Requirement {
    /// Builds a requirement, checking the key, the values and their count as Kubernetes does.
    pub fn new(
        key: &str,
        operator: Operator,
        values: impl IntoIterator<Item = String>,
    ) -> Result<Requirement, SelectorError> {
        let values: BTreeSet<String> = values.into_iter().collect();
        check_key(key)?;
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
        self.matches_by(|key| labels.get(key).map(String::as_str))
    }

    /// Whether labels read by `get` (a key's value, None when the object
    /// has no such label) hold this requirement: what [`Self::matches`]
    /// does for labels kept other than in a map.
    pub fn matches_by<'v>(&self, get: impl Fn(&str) -> Option<&'v str>) -> bool {
        let value = get(&self.key);
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
    /// The end of the string (upstream's EndOfStringToken), shown as ''.
    End,
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
            Token::End => Ok(()),
        }
    }
}

/// Upstream's lexer takes only these as blanks; any other character that
/// is not an operator is part of a word.
fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

fn is_special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '<' | '>') || is_blank(c)
}

fn lex(s: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if is_blank(c) {
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

/// Where the parser reads: `in` and `notin` are operators only where an
/// operator belongs; as keys and values they are words (`notin=in`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    Operator,
    Values,
}

/// A recursive descent over the tokens, step for step upstream's
/// `labels.Parser`, so the same strings parse, to the same requirements,
/// and fail with the same messages.
struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn look(&self, ctx: Context) -> Token {
        let t = self.tokens.get(self.pos).cloned().unwrap_or(Token::End);
        match (ctx, t) {
            (Context::Values, Token::In) => Token::Ident("in".into()),
            (Context::Values, Token::NotIn) => Token::Ident("notin".into()),
            (_, t) => t,
        }
    }

    fn take(&mut self, ctx: Context) -> Token {
        let t = self.look(ctx);
        self.pos += 1;
        t
    }

    fn requirements(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut out = Vec::new();
        loop {
            match self.look(Context::Values) {
                Token::Ident(_) | Token::Bang => {
                    let r = self.requirement().map_err(|e| {
                        SelectorError(format!("unable to parse requirement: {}", e.0))
                    })?;
                    out.push(r);
                    match self.take(Context::Values) {
                        Token::End => return Ok(out),
                        Token::Comma => match self.look(Context::Values) {
                            Token::Ident(_) | Token::Bang => {}
                            t => {
                                return err(format!("found '{t}', expected: identifier after ','"))
                            }
                        },
                        t => return err(format!("found '{t}', expected: ',' or 'end of string'")),
                    }
                }
                Token::End => return Ok(out),
                t => {
                    return err(format!(
                        "found '{t}', expected: !, identifier, or 'end of string'"
                    ))
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        let mut t = self.take(Context::Values);
        let absent = t == Token::Bang;
        if absent {
            t = self.take(Context::Values);
        }
        let Token::Ident(key) = t else {
            return err(format!("found '{t}', expected: identifier"));
        };
        check_key(&key)?;
        if absent {
            return Requirement::new(&key, Operator::DoesNotExist, []);
        }
        if matches!(self.look(Context::Values), Token::End | Token::Comma) {
            return Requirement::new(&key, Operator::Exists, []);
        }
        let op = match self.take(Context::Operator) {
            Token::In => Operator::In,
            Token::NotIn => Operator::NotIn,
            Token::Eq => Operator::Equals,
            Token::DoubleEq => Operator::DoubleEquals,
            Token::NotEq => Operator::NotEquals,
            Token::Gt => Operator::GreaterThan,
            Token::Lt => Operator::LessThan,
            t => {
                return err(format!(
                    "found '{t}', expected: in, notin, =, ==, !=, gt, lt"
                ))
            }
        };
        let values = match op {
            Operator::In | Operator::NotIn => self.values()?,
            _ => self.exact_value()?,
        };
        Requirement::new(&key, op, values)
    }

    /// `(a,b)`; an empty element, and `()`, stand for the empty value.
    fn values(&mut self) -> Result<BTreeSet<String>, SelectorError> {
        let t = self.take(Context::Values);
        if t != Token::Open {
            return err(format!("found '{t}' expected: '('"));
        }
        match self.look(Context::Values) {
            first @ (Token::Ident(_) | Token::Comma) => {
                let set = self.value_list()?;
                if self.take(Context::Values) != Token::Close {
                    return err(format!("found '{first}', expected: ')'"));
                }
                Ok(set)
            }
            Token::Close => {
                self.pos += 1;
                Ok(BTreeSet::from([String::new()]))
            }
            t => err(format!("found '{t}', expected: ',', ')' or identifier")),
        }
    }

    fn value_list(&mut self) -> Result<BTreeSet<String>, SelectorError> {
        let mut set = BTreeSet::new();
        loop {
            match self.take(Context::Values) {
                Token::Ident(v) => {
                    set.insert(v);
                    match self.look(Context::Values) {
                        Token::Comma => {}
                        Token::Close => return Ok(set),
                        t => return err(format!("found '{t}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if set.is_empty() {
                        set.insert(String::new());
                    }
                    match self.look(Context::Values) {
                        Token::Close => {
                            set.insert(String::new());
                            return Ok(set);
                        }
                        Token::Comma => {
                            set.insert(String::new());
                        }
                        _ => {}
                    }
                }
                t => return err(format!("found '{t}', expected: ',', or identifier")),
            }
        }
    }

    /// The value of `=`, `==`, `!=`, `>`, `<`: empty when none follows.
    fn exact_value(&mut self) -> Result<BTreeSet<String>, SelectorError> {
        if matches!(self.look(Context::Values), Token::End | Token::Comma) {
            return Ok(BTreeSet::from([String::new()]));
        }
        match self.take(Context::Values) {
            Token::Ident(v) => Ok(BTreeSet::from([v])),
            t => err(format!("found '{t}', expected: identifier")),
        }
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

    /// Parses the query-string form: `a=b,c!=d,env in (prod,qa),tier notin (fe),key,!key`,
    /// as upstream's `labels.Parse` (a trailing comma is refused there too).
    pub fn parse(s: &str) -> Result<LabelSelector, SelectorError> {
        let mut parser = Parser {
            tokens: lex(s),
            pos: 0,
        };
        let mut requirements = parser.requirements()?;
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
        self.matches_by(|key| labels.get(key).map(String::as_str))
    }

    /// Whether the labels read by `get` (a key's value, None when the
    /// object has no such label) match, as [`Self::matches`] on a map.
    pub fn matches_by<'v>(&self, get: impl Fn(&str) -> Option<&'v str>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches_by(&get))
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
#[cfg(test)]
mod upstream_tests;
