//! CEL expressions over JSON values, as Kubernetes evaluates
//! `x-kubernetes-validations` rules (and, later, admission `matchConditions`):
//! compile once with [`compile`], then evaluate against named JSON variables
//! with [`Program::eval`] or [`Program::eval_bool`].
//!
//! The interpreter is the `cel` crate (cel-rust) with its strings, lists and
//! math extensions, plus Kubernetes' list `isSorted`, `sum`, `min` and `max`. Not provided: timestamps and durations (the crate's
//! `chrono` feature is off), the `quantity`, `url`, `ip`/`cidr` and
//! `format` libraries, and static type checking: [`compile_with`] refuses
//! undeclared variables, but an unknown field or function fails when the
//! expression runs, not when it is compiled.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use cel::extractors::This;
use cel::objects::Key;
use cel::{Context, Env, ExecutionError, Value as CelValue};
use serde_json::Value;

static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| {
    let mut env = Env::stdlib();
    // The extensions are written against the stdlib: a failure here is a bug
    // in the crate, and every rule would fail to run anyway.
    let _ = env.add_extension(cel::extensions::strings);
    let _ = env.add_extension(cel::extensions::lists);
    let _ = env.add_extension(cel::extensions::math);
    Arc::new(env)
});

/// A compiled CEL expression; cheap to clone and shared between threads.
#[derive(Clone)]
pub struct Program {
    source: Arc<str>,
    inner: Arc<cel::Program>,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Program({:?})", self.source)
    }
}

/// Compiles `source`; the error is upstream's shape
/// (`ERROR: <input>:1:5: Syntax error: ...`).
pub fn compile(source: &str) -> Result<Program, String> {
    match ENV.compile(source) {
        Ok(p) => Ok(Program {
            source: source.into(),
            inner: Arc::new(p),
        }),
        Err(e) => Err(e.to_string().trim().to_string()),
    }
}

/// Names an expression may use without declaring them: the extension
/// libraries' namespaces and the type names.
const BUILTIN_NAMES: &[&str] = &[
    "math",
    "strings",
    "lists",
    "base64",
    "optional",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "list",
    "map",
    "null_type",
    "type",
    "dyn",
];

static MACRO_VARS: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(
        r"(?:all|exists|exists_one|map|filter|sortBy|transformList|transformMap)\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,(?:\s*([A-Za-z_][A-Za-z0-9_]*)\s*,)?",
    )
    .expect("static regex")
});

/// [`compile`], refusing a reference to a variable other than `vars` (and
/// the macros' own iteration variables), as cel-go's checker does.
pub fn compile_with(source: &str, vars: &[&str]) -> Result<Program, String> {
    let program = compile(source)?;
    let mut bound: Vec<&str> = vars.to_vec();
    bound.extend(BUILTIN_NAMES);
    for c in MACRO_VARS.captures_iter(source) {
        bound.extend(c.iter().skip(1).flatten().map(|m| m.as_str()));
    }
    let refs = program.inner.references();
    let mut unknown: Vec<&str> = refs
        .variables()
        .into_iter()
        .filter(|v| !bound.contains(v))
        .collect();
    unknown.sort_by_key(|v| word_at(source, v));
    if let Some(name) = unknown.first() {
        let col = word_at(source, name).map_or(1, |i| source[..i].chars().count() + 1);
        return Err(format!(
            "ERROR: <input>:1:{col}: undeclared reference to '{name}' (in container '')"
        ));
    }
    Ok(program)
}

/// Where `word` first stands alone in `source`.
fn word_at(source: &str, word: &str) -> Option<usize> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    source.match_indices(word).map(|(i, _)| i).find(|&i| {
        let before = source[..i].chars().next_back();
        let after = source[i + word.len()..].chars().next();
        !before.is_some_and(|c| is_ident(c) || c == '.') && !after.is_some_and(is_ident)
    })
}

impl Program {
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the expression names the variable `name` (e.g. `oldSelf`).
    pub fn refers_to(&self, name: &str) -> bool {
        self.inner.references().has_variable(name)
    }

    /// Evaluates the expression with `vars` bound (JSON converted to CEL).
    pub fn eval(&self, vars: &[(&str, &Value)]) -> Result<CelValue, String> {
        let mut ctx = Context::with_env(ENV.clone());
        for (name, v) in vars {
            ctx.add_variable_from_value(*name, to_cel(v));
        }
        let _ = ctx.add_function("isSorted", is_sorted);
        let _ = ctx.add_function("sum", sum);
        let _ = ctx.add_function("min", list_min);
        let _ = ctx.add_function("max", list_max);
        self.inner.execute(&ctx).map_err(|e| e.to_string())
    }

    /// Evaluates an expression that must yield a bool.
    pub fn eval_bool(&self, vars: &[(&str, &Value)]) -> Result<bool, String> {
        match self.eval(vars)? {
            CelValue::Bool(b) => Ok(b),
            other => Err(format!("expected a bool, got {}", other.type_of())),
        }
    }

    /// Evaluates the expression into JSON ([`from_cel`]): admission
    /// policies' variables and audit annotations.
    pub fn eval_json(&self, vars: &[(&str, &Value)]) -> Result<Value, String> {
        self.eval(vars).map(|v| from_cel(&v))
    }

    /// Evaluates an expression that must yield a string.
    pub fn eval_string(&self, vars: &[(&str, &Value)]) -> Result<String, String> {
        match self.eval(vars)? {
            CelValue::String(s) => Ok(s.to_string()),
            other => Err(format!("expected a string, got {}", other.type_of())),
        }
    }
}

/// A CEL value as JSON: the inverse of [`to_cel`] (bytes as base64,
/// other values by their debug form).
pub fn from_cel(v: &CelValue) -> Value {
    match v {
        CelValue::Null => Value::Null,
        CelValue::Bool(b) => Value::Bool(*b),
        CelValue::Int(i) => Value::from(*i),
        CelValue::UInt(u) => Value::from(*u),
        CelValue::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
        CelValue::String(s) => Value::String(s.to_string()),
        CelValue::Bytes(b) => {
            use base64::Engine;
            Value::String(base64::engine::general_purpose::STANDARD.encode(b.as_slice()))
        }
        CelValue::List(l) => Value::Array(l.iter().map(from_cel).collect()),
        CelValue::Map(m) => Value::Object(
            m.map
                .iter()
                .map(|(k, v)| {
                    let k = match k {
                        Key::String(s) => s.to_string(),
                        Key::Int(i) => i.to_string(),
                        Key::Uint(u) => u.to_string(),
                        Key::Bool(b) => b.to_string(),
                    };
                    (k, from_cel(v))
                })
                .collect(),
        ),
        other => Value::String(format!("{other:?}")),
    }
}

/// A JSON value as CEL sees it: integers as `int` (`uint` past i64), other
/// numbers as `double`, objects as maps with string keys.
pub fn to_cel(v: &Value) -> CelValue {
    match v {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                CelValue::Int(i)
            } else if let Some(u) = n.as_u64() {
                CelValue::UInt(u)
            } else {
                CelValue::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => CelValue::String(Arc::new(s.clone())),
        Value::Array(a) => CelValue::List(Arc::new(a.iter().map(to_cel).collect())),
        Value::Object(m) => {
            let map: HashMap<Key, CelValue> = m
                .iter()
                .map(|(k, v)| (Key::from(k.clone()), to_cel(v)))
                .collect();
            CelValue::Map(map.into())
        }
    }
}

fn list(this: &CelValue) -> Result<&[CelValue], ExecutionError> {
    match this {
        CelValue::List(l) => Ok(l.as_slice()),
        other => Err(ExecutionError::function_error(
            "list",
            format!("expected a list, got {}", other.type_of()),
        )),
    }
}

fn is_sorted(This(this): This<CelValue>) -> Result<bool, ExecutionError> {
    let l = list(&this)?;
    Ok(l.windows(2).all(|w| w[0] <= w[1]))
}

fn sum(This(this): This<CelValue>) -> Result<CelValue, ExecutionError> {
    let l = list(&this)?;
    if l.iter().all(|v| matches!(v, CelValue::Int(_))) {
        let mut t: i64 = 0;
        for v in l {
            if let CelValue::Int(i) = v {
                t = t
                    .checked_add(*i)
                    .ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?;
            }
        }
        return Ok(CelValue::Int(t));
    }
    let mut t = 0.0;
    for v in l {
        t += match v {
            CelValue::Int(i) => *i as f64,
            CelValue::UInt(u) => *u as f64,
            CelValue::Float(f) => *f,
            other => {
                return Err(ExecutionError::function_error(
                    "sum",
                    format!("cannot add {}", other.type_of()),
                ))
            }
        };
    }
    Ok(CelValue::Float(t))
}

fn extreme(this: &CelValue, name: &str, want_max: bool) -> Result<CelValue, ExecutionError> {
    let l = list(this)?;
    let mut best: Option<&CelValue> = None;
    for v in l {
        best = match best {
            None => Some(v),
            Some(b) if (want_max && v > b) || (!want_max && v < b) => Some(v),
            keep => keep,
        };
    }
    best.cloned()
        .ok_or_else(|| ExecutionError::function_error(name, "list is empty"))
}

fn list_min(This(this): This<CelValue>) -> Result<CelValue, ExecutionError> {
    extreme(&this, "min", false)
}

fn list_max(This(this): This<CelValue>) -> Result<CelValue, ExecutionError> {
    extreme(&this, "max", true)
}
