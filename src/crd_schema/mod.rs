//! CustomResourceDefinition schemas as the apiextensions-apiserver uses them:
//! [`Structural::new`] compiles a version's `openAPIV3Schema` (refusing one
//! that is not structural, with upstream's messages, and compiling its CEL
//! rules once); [`Structural::prune`], [`Structural::apply_defaults`] and
//! [`Structural::validate`] are what the server runs on every custom object,
//! in that order; [`validate_crd`] validates the CRD object itself.
//!
//! Pure library: the API server plugs it into its CRD serving. On a write:
//! `prune_reporting` (its paths are the `unknown field "spec.x"` warnings,
//! or errors under `fieldValidation=Strict`) → `apply_defaults` → ObjectMeta
//! validation → `validate(new, Some(old))` on updates (ratcheting unchanged
//! values, running transition rules). On a read from storage: `prune` →
//! `apply_defaults`.

pub mod cel;
mod crd;
mod formats;
mod prune;
mod rules;
mod schema;
mod structural;
mod validate;

#[cfg(test)]
mod cel_tests;
#[cfg(test)]
mod smoke_tests;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use serde_json::Value;

pub use crd::validate_crd;
use schema::Node;

use crate::validation::FieldError;

/// A compiled structural schema; cheap to clone (shared), `Send + Sync`.
#[derive(Debug, Clone)]
pub struct Structural {
    root: Arc<Node>,
}

impl Structural {
    /// Compiles a CRD version's `schema.openAPIV3Schema`, checking it is
    /// structural and well formed as the apiextensions-apiserver does; errors
    /// name the field under `base` (e.g.
    /// `spec.versions[0].schema.openAPIV3Schema.properties[spec].type`).
    pub fn new(schema: &Value, base: &str) -> Result<Structural, Vec<FieldError>> {
        let mut errs = Vec::new();
        let mut root = schema::parse(schema, base, &mut errs);
        if errs.is_empty() {
            structural::check(&root, structural::Level::Root, base, &mut errs);
            structural::completeness(&root, base, &mut errs);
        }
        if errs.is_empty() {
            prune::prune_defaults(&mut root, base, &mut Vec::new());
            check_defaults(&root, base, &mut errs);
        }
        if errs.is_empty() {
            Ok(Structural {
                root: Arc::new(root),
            })
        } else {
            errs.sort_by_key(FieldError::message);
            errs.dedup();
            Err(errs)
        }
    }

    /// Drops fields the schema does not declare, as upstream's pruning
    /// (apiVersion, kind and metadata stay at the root; an embedded
    /// resource's metadata keeps only ObjectMeta's fields).
    pub fn prune(&self, obj: &mut Value) {
        self.prune_reporting(obj);
    }

    /// [`Structural::prune`], returning the paths removed (for `unknown
    /// field "spec.foo"` warnings).
    pub fn prune_reporting(&self, obj: &mut Value) -> Vec<String> {
        let mut out = Vec::new();
        prune::prune(Some(&self.root), obj, prune::At::Root, "", &mut out);
        out
    }

    /// Applies `default`s as upstream's structural defaulting (after pruning,
    /// on read and write): missing fields and nulls of non-nullable fields
    /// get their default; other nulls of non-nullable fields are dropped.
    pub fn apply_defaults(&self, obj: &mut Value) {
        prune::default(&self.root, obj);
    }

    /// Validates a whole object against the schema, including CEL
    /// `x-kubernetes-validations` (transition rules with `oldSelf` only when
    /// `old` is given), returning every error with upstream's paths and
    /// messages. Root metadata is the server's ObjectMeta validation's
    /// business; only the schema's name/generateName restrictions apply here.
    pub fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut errs = Vec::new();
        validate::validate_root(&self.root, obj, old, &mut errs);
        errs
    }
}

impl Structural {
    /// The schema type at a simple JSON path (`.spec.replicas`), if the
    /// schema declares that field: for selectableFields and printer columns.
    pub fn type_at(&self, json_path: &str) -> Option<String> {
        let mut node: &Node = &self.root;
        for part in json_path.strip_prefix('.')?.split('.') {
            node = node.properties.get(part)?;
        }
        Some(node.ty.clone())
    }
}

/// Every `default` must validate against its own schema (upstream refuses
/// the CRD otherwise), and `metadata` at the root may carry none.
fn check_defaults(n: &Node, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(d) = &n.default {
        let mut inner = Vec::new();
        validate::validate_root(n, d, None, &mut inner);
        for e in inner {
            let field = if e.field == validate::ROOT {
                format!("{path}.default")
            } else {
                format!("{path}.default.{}", e.field)
            };
            errs.push(FieldError { field, ..e });
        }
    }
    for (k, p) in &n.properties {
        check_defaults(p, &format!("{path}.properties[{k}]"), errs);
    }
    if let Some(items) = &n.items {
        check_defaults(items, &format!("{path}.items"), errs);
    }
    if let Some(schema::Additional::Schema(s)) = &n.additional {
        check_defaults(s, &format!("{path}.additionalProperties"), errs);
    }
}
