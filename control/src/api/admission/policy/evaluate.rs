//! One policy evaluated for one binding and one param, as upstream's
//! policy `validator`: the match conditions (any false skips the policy,
//! an error is a failure), the variables in order (`variables.NAME`, each
//! seeing the ones before it), each validation (false: a denial with its
//! message; an error: a failure), then the audit annotations. A failure
//! is a denial under `failurePolicy: Fail` and nothing under `Ignore`.

use serde_json::{Map, Value};

use super::configs::{Compiled, Policy, Validation};

/// What one validation (or a failure) decided against the request.
#[derive(Debug, Clone, PartialEq)]
pub struct Denial {
    pub message: String,
    /// The validation's reason (None: Invalid).
    pub reason: Option<String>,
    /// The index of the validation in the policy (for audit).
    pub index: usize,
}

/// What evaluating a policy gave.
#[derive(Debug, Default, PartialEq)]
pub struct Outcome {
    pub denials: Vec<Denial>,
    /// Audit annotations `(key, value)` to publish.
    pub annotations: Vec<(String, String)>,
}

/// The variables an evaluation sees.
pub struct Inputs<'a> {
    pub object: &'a Value,
    pub old_object: &'a Value,
    pub request: &'a Value,
    pub params: &'a Value,
    pub namespace_object: &'a Value,
}

fn base<'a>(i: &'a Inputs<'a>, variables: &'a Value) -> Vec<(&'static str, &'a Value)> {
    vec![
        ("object", i.object),
        ("oldObject", i.old_object),
        ("request", i.request),
        ("params", i.params),
        ("namespaceObject", i.namespace_object),
        ("variables", variables),
    ]
}

fn failure(policy: &Policy, message: String, index: usize, out: &mut Outcome) {
    if !policy.ignore_failures {
        out.denials.push(Denial {
            message,
            reason: None,
            index,
        });
    }
}

/// Evaluates `policy` on the request described by `inputs`.
pub fn evaluate(policy: &Policy, inputs: &Inputs<'_>) -> Outcome {
    let mut out = Outcome::default();
    let empty = Value::Object(Map::new());
    for (name, program) in &policy.match_conditions {
        let result = match program {
            Ok(p) => p
                .eval_bool(&base(inputs, &empty))
                .map_err(|e| format!("failed to evaluate match condition {name:?}: {e}")),
            Err(e) => Err(format!(
                "compilation failed for match condition {name:?}: {e}"
            )),
        };
        match result {
            Ok(true) => {}
            Ok(false) => return out,
            Err(why) => {
                failure(policy, why, 0, &mut out);
                return out;
            }
        }
    }
    let (variables, broken) = variables(&policy.variables, inputs);
    let vars = base(inputs, &variables);
    for (index, v) in policy.validations.iter().enumerate() {
        match check(v, &vars, &broken) {
            Ok(None) => {}
            Ok(Some(message)) => out.denials.push(Denial {
                message,
                reason: v.reason.clone(),
                index,
            }),
            Err(why) => failure(policy, why, index, &mut out),
        }
    }
    for (key, program) in &policy.audit_annotations {
        let result = match program {
            Ok(p) => p.eval_json(&vars),
            Err(e) => {
                failure(policy, format!("compilation failed: {e}"), 0, &mut out);
                continue;
            }
        };
        match result {
            Ok(Value::String(s)) if !s.trim().is_empty() => {
                out.annotations.push((key.clone(), s.trim().to_string()))
            }
            Ok(Value::String(_) | Value::Null) => {}
            Ok(other) => failure(
                policy,
                format!(
                    "valueExpression for key {key:?} resulted in unsupported return type: {}. \
                     Return type must be either string or null.",
                    json_type(&other)
                ),
                0,
                &mut out,
            ),
            Err(e) => failure(
                policy,
                format!("valueExpression for key {key:?} resulted in error: {e}"),
                0,
                &mut out,
            ),
        }
    }
    out
}

/// The variables evaluated in order, each seeing those before it; and the
/// ones that failed, with why (a validation naming one fails with it).
fn variables(defs: &[(String, Compiled)], inputs: &Inputs<'_>) -> (Value, Vec<(String, String)>) {
    let mut done = Map::new();
    let mut broken = Vec::new();
    for (name, program) in defs {
        let so_far = Value::Object(done.clone());
        let result = match program {
            Ok(p) => p.eval_json(&base(inputs, &so_far)),
            Err(e) => Err(format!("compilation failed: {e}")),
        };
        match result {
            Ok(v) => {
                done.insert(name.clone(), v);
            }
            Err(e) => broken.push((name.clone(), e)),
        }
    }
    (Value::Object(done), broken)
}

/// One validation: `Ok(None)` passes, `Ok(Some(message))` is refused,
/// `Err` failed to evaluate.
fn check(
    v: &Validation,
    vars: &[(&str, &Value)],
    broken: &[(String, String)],
) -> Result<Option<String>, String> {
    let program = v
        .program
        .as_ref()
        .map_err(|e| format!("compilation failed: {e}"))?;
    let failed = |e: String| {
        let source = program.source();
        match broken
            .iter()
            .find(|(name, _)| source.contains(&format!("variables.{name}")))
        {
            Some((name, why)) => format!(
                "expression '{}' resulted in error: variable {name:?}: {why}",
                v.expression.trim()
            ),
            None => format!(
                "expression '{}' resulted in error: {e}",
                v.expression.trim()
            ),
        }
    };
    match program.eval_json(vars) {
        Ok(Value::Bool(true)) => Ok(None),
        Ok(Value::Bool(false)) => Ok(Some(message(v, vars))),
        Ok(other) => Err(failed(format!(
            "expected a bool, got {}",
            json_type(&other)
        ))),
        Err(e) => Err(failed(e)),
    }
}

/// A refused validation's message: `messageExpression`'s (a non-empty
/// single line), else `message`, else `failed expression: EXPRESSION`.
pub fn message(v: &Validation, vars: &[(&str, &Value)]) -> String {
    let from_expression = match &v.message_expression {
        Some(Ok(p)) => match p.eval_string(vars) {
            Ok(m) => Some(m.trim().to_string()).filter(|m| !m.is_empty() && !m.contains('\n')),
            Err(e) => {
                tracing::debug!(error = %e, "evaluating messageExpression");
                None
            }
        },
        _ => None,
    };
    from_expression
        .or_else(|| {
            v.message
                .as_deref()
                .map(str::trim)
                .filter(|m| !m.is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| format!("failed expression: {}", v.expression.trim()))
}

/// The CEL type name of a JSON value.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() => "int",
        Value::Number(n) if n.is_u64() => "uint",
        Value::Number(_) => "double",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}
