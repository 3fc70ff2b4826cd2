//! The ValidatingAdmissionPolicies and their bindings, compiled and kept
//! from the store's watch (as upstream's policy plugin keeps them from
//! informers): every write consults them, so none lists the store. A
//! policy's CEL is compiled once per resourceVersion; an unchanged policy
//! keeps its programs across reloads. With no binding the check is one
//! lock read and an empty slice.
//!
//! [`check_expressions`] is the same compilation for validation: a policy
//! whose expression does not compile is refused at write, naming the field.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use bosun::crd_schema::cel::{compile_with, Program};
use bosun::selector::LabelSelector;
use bosun::validation::FieldError;
use k8s_openapi::api::admissionregistration::v1 as ar;
use serde_json::Value;

use crate::store::Store;

/// One expression compiled, or why it did not compile.
pub type Compiled = Result<Program, String>;

/// What a policy's or a binding's match resources say, ready to match.
#[derive(Clone)]
pub struct Matcher {
    pub resource_rules: Vec<ar::NamedRuleWithOperations>,
    pub exclude_rules: Vec<ar::NamedRuleWithOperations>,
    /// `matchPolicy: Exact`.
    pub exact: bool,
    pub namespace_selector: LabelSelector,
    pub object_selector: LabelSelector,
}

pub struct Validation {
    pub expression: String,
    pub program: Compiled,
    pub message: Option<String>,
    pub message_expression: Option<Compiled>,
    pub reason: Option<String>,
}

pub struct Policy {
    pub name: String,
    resource_version: String,
    /// `(apiVersion, kind)` of the params.
    pub param_kind: Option<(String, String)>,
    pub matcher: Matcher,
    /// `failurePolicy: Ignore`.
    pub ignore_failures: bool,
    pub match_conditions: Vec<(String, Compiled)>,
    pub variables: Vec<(String, Compiled)>,
    pub validations: Vec<Validation>,
    pub audit_annotations: Vec<(String, Compiled)>,
}

pub struct Binding {
    pub name: String,
    pub param_ref: Option<ar::ParamRef>,
    /// None: every request the policy matches.
    pub matcher: Option<Matcher>,
    pub actions: Vec<String>,
}

/// A policy and the bindings naming it, both by name.
pub struct Hook {
    pub policy: Arc<Policy>,
    pub bindings: Vec<Binding>,
}

/// The hooks of all bound policies, by policy name.
#[derive(Default)]
pub struct Snapshot {
    pub hooks: Vec<Hook>,
}

pub struct Policies {
    store: Arc<dyn Store>,
    snapshot: RwLock<Arc<Snapshot>>,
}

const PLURALS: [&str; 2] = [
    "validatingadmissionpolicies",
    "validatingadmissionpolicybindings",
];

fn prefix(plural: &str) -> String {
    bosun::resources::by_path("admissionregistration.k8s.io", "v1", plural)
        .expect("policies are served")
        .storage_prefix()
}

/// The variables every policy expression may name (`params` only with a
/// param kind). `authorizer` is not offered.
fn declared(has_params: bool, with_variables: bool) -> Vec<&'static str> {
    let mut v = vec!["object", "oldObject", "request", "namespaceObject"];
    if has_params {
        v.push("params");
    }
    if with_variables {
        v.push("variables");
    }
    v
}

fn compile(source: &str, vars: &[&str]) -> Compiled {
    compile_with(source, vars)
}

impl Policies {
    pub async fn new(store: Arc<dyn Store>) -> Result<Arc<Policies>, String> {
        let p = Arc::new(Policies {
            store,
            snapshot: RwLock::new(Arc::default()),
        });
        p.reload().await.map_err(|e| e.to_string())?;
        Ok(p)
    }

    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.read().expect("policies lock").clone()
    }

    async fn reload(&self) -> Result<u64, crate::store::StoreError> {
        let mut at = 0;
        let mut lists = Vec::new();
        for plural in PLURALS {
            let (kvs, rev) = self
                .store
                .list(&prefix(plural))
                .await
                .map_err(|e| crate::store::reading(plural, e))?;
            at = at.max(rev);
            lists.push(kvs);
        }
        let previous: BTreeMap<String, Arc<Policy>> = self
            .snapshot()
            .hooks
            .iter()
            .map(|h| (h.policy.name.clone(), h.policy.clone()))
            .collect();
        let mut bindings: BTreeMap<String, Vec<Binding>> = BTreeMap::new();
        for kv in &lists[1] {
            match serde_json::from_slice::<ar::ValidatingAdmissionPolicyBinding>(&kv.value) {
                Ok(b) => {
                    let (policy, binding) = binding(&b);
                    bindings.entry(policy).or_default().push(binding);
                }
                Err(e) => tracing::warn!(key = %kv.key, error = %e, "policies: unreadable"),
            }
        }
        let mut snap = Snapshot::default();
        // Keys end in the name: the listing is in name order.
        for kv in &lists[0] {
            let p = match serde_json::from_slice::<ar::ValidatingAdmissionPolicy>(&kv.value) {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(key = %kv.key, error = %e, "policies: unreadable");
                    continue;
                }
            };
            let name = p.metadata.name.clone().unwrap_or_default();
            let Some(bound) = bindings.remove(&name) else {
                continue;
            };
            let rv = kv.mod_revision.to_string();
            let policy = match previous.get(&name) {
                Some(old) if old.resource_version == rv => old.clone(),
                _ => Arc::new(policy(&p, rv)),
            };
            snap.hooks.push(Hook {
                policy,
                bindings: bound,
            });
        }
        *self.snapshot.write().expect("policies lock") = Arc::new(snap);
        Ok(at)
    }

    /// Follows the store's changes to both kinds until the store closes.
    pub async fn follow(self: Arc<Self>) {
        let prefixes: Vec<String> = PLURALS.iter().map(|p| prefix(p)).collect();
        crate::store::reload_on_change(self.store.as_ref(), &prefixes, "policies", || self.reload())
            .await
    }
}

fn selector(
    s: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
) -> LabelSelector {
    match s {
        Some(s) => {
            LabelSelector::from_label_selector(s).unwrap_or_else(|_| LabelSelector::nothing())
        }
        None => LabelSelector::everything(),
    }
}

pub fn matcher(m: &ar::MatchResources) -> Matcher {
    Matcher {
        resource_rules: m.resource_rules.clone().unwrap_or_default(),
        exclude_rules: m.exclude_resource_rules.clone().unwrap_or_default(),
        exact: m.match_policy.as_deref() == Some("Exact"),
        namespace_selector: selector(m.namespace_selector.as_ref()),
        object_selector: selector(m.object_selector.as_ref()),
    }
}

fn binding(b: &ar::ValidatingAdmissionPolicyBinding) -> (String, Binding) {
    let spec = b.spec.clone();
    (
        spec.policy_name.clone(),
        Binding {
            name: b.metadata.name.clone().unwrap_or_default(),
            param_ref: spec.param_ref.clone(),
            matcher: spec.match_resources.as_ref().map(matcher),
            actions: spec.validation_actions.clone(),
        },
    )
}

/// Compiles a stored policy.
pub fn policy(p: &ar::ValidatingAdmissionPolicy, resource_version: String) -> Policy {
    let spec = p.spec.clone().unwrap_or_default();
    let has_params = spec.param_kind.is_some();
    let plain = declared(has_params, false);
    let full = declared(has_params, true);
    Policy {
        name: p.metadata.name.clone().unwrap_or_default(),
        resource_version,
        param_kind: spec.param_kind.as_ref().map(|k| {
            (
                k.api_version.clone().unwrap_or_default(),
                k.kind.clone().unwrap_or_default(),
            )
        }),
        matcher: matcher(&spec.match_constraints.clone().unwrap_or_default()),
        ignore_failures: spec.failure_policy.as_deref() == Some("Ignore"),
        match_conditions: spec
            .match_conditions
            .iter()
            .flatten()
            .map(|m| (m.name.clone(), compile(&m.expression, &plain)))
            .collect(),
        variables: spec
            .variables
            .iter()
            .flatten()
            .map(|v| (v.name.clone(), compile(&v.expression, &full)))
            .collect(),
        validations: spec
            .validations
            .iter()
            .flatten()
            .map(|v| Validation {
                expression: v.expression.clone(),
                program: compile(&v.expression, &full),
                message: v.message.clone(),
                message_expression: v
                    .message_expression
                    .as_deref()
                    .filter(|m| !m.trim().is_empty())
                    .map(|m| compile(m, &full)),
                reason: v.reason.clone(),
            })
            .collect(),
        audit_annotations: spec
            .audit_annotations
            .iter()
            .flatten()
            .map(|a| (a.key.clone(), compile(&a.value_expression, &full)))
            .collect(),
    }
}

/// Every expression of a policy (JSON as written) compiled, as upstream's
/// validation does: `spec.validations[0].expression: Invalid value:
/// "...": compilation failed: ERROR: ...`.
pub fn check_expressions(obj: &Value) -> Vec<FieldError> {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let has_params = spec.get("paramKind").is_some_and(Value::is_object);
    let plain = declared(has_params, false);
    let full = declared(has_params, true);
    let mut errs = Vec::new();
    let mut check = |list: &str, field: &str, vars: &[&str]| {
        let items = spec.get(list).and_then(Value::as_array);
        for (i, item) in items.into_iter().flatten().enumerate() {
            let Some(src) = item.get(field).and_then(Value::as_str) else {
                continue;
            };
            if src.trim().is_empty() {
                continue;
            }
            if let Err(e) = compile(src, vars) {
                errs.push(FieldError::invalid(
                    format!("spec.{list}[{i}].{field}"),
                    src,
                    format!("compilation failed: {e}"),
                ));
            }
        }
    };
    check("matchConditions", "expression", &plain);
    check("variables", "expression", &full);
    check("validations", "expression", &full);
    check("validations", "messageExpression", &full);
    check("auditAnnotations", "valueExpression", &full);
    errs
}
