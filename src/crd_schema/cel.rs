//! CEL expressions over JSON values, as Kubernetes evaluates
//! `x-kubernetes-validations` rules (and, later, admission `matchConditions`):
//! compile once with [`compile`], then evaluate against named JSON variables
//! with [`Program::eval`] or [`Program::eval_bool`].
//!
//! The interpreter is the `cel` crate (cel-rust) with its strings, lists and
//! math extensions, plus Kubernetes' list `isSorted`, `sum`, `min` and `max`. Not provided: timestamps and durations (the crate's
//! `chrono` feature is off), the `quantity`, `url`, `ip`/`cidr` and
//! `format` libraries, and static type checking (a rule referring to an
//! unknown field fails when it runs, not when it is compiled).

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

    /// Evaluates an expression that must yield a string.
    pub fn eval_string(&self, vars: &[(&str, &Value)]) -> Result<String, String> {
        match self.eval(vars)? {
            CelValue::String(s) => Ok(s.to_string()),
            other => Err(format!("expected a string, got {}", other.type_of())),
        }
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
