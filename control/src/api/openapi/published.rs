//! The documents as one API server publishes them: the built-in group
//! versions' (built once per process) with its custom resources' added,
//! as the apiextensions-apiserver's OpenAPI controllers add each
//! established CRD's served versions.
//!
//! A [`Published`] is built for a generation of the server's custom
//! resources ([`CustomResources::snapshot`], which changes when a CRD is
//! established, changed or gone) on the first request that sees it, and
//! reused until the generation moves: the custom group versions' v3
//! documents at once, the v2 document (JSON or protobuf) when first asked
//! for. The built-in v2 definitions are encoded once and the custom ones
//! appended.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use schemars::JsonSchema;
use serde_json::{json, Map, Value};

use super::paths::{self, Dialect};
use super::schemas::{self, V2_REF_PREFIX, V3_REF_PREFIX};
use super::{crd, gnostic, gv_key, info, Document};
use crate::api::custom::{CustomResources, CustomVersion};

/// What one generation of a server's custom resources publishes.
pub struct Published {
    generation: u64,
    versions: Vec<Arc<CustomVersion>>,
    /// The custom group versions' v3 documents, by key (`apis/<g>/<v>`).
    v3: BTreeMap<String, Document>,
    v2_json: OnceLock<Document>,
    v2_protobuf: OnceLock<Document>,
}

/// The documents of the current generation of `custom`'s resources.
pub fn current(custom: &CustomResources) -> Arc<Published> {
    // A few servers may share a process (tests); generations are unique
    // in it, so the last few built serve them all.
    static CACHE: Mutex<Vec<Arc<Published>>> = Mutex::new(Vec::new());
    let (generation, versions) = custom.snapshot();
    let mut cache = CACHE.lock().expect("openapi cache lock");
    if let Some(p) = cache.iter().find(|p| p.generation == generation) {
        return p.clone();
    }
    let p = Arc::new(Published::build(generation, versions));
    cache.push(p.clone());
    if cache.len() > 4 {
        cache.remove(0);
    }
    p
}

/// The definitions of `T` and all it refers to (v3 `$ref`s).
fn closure_of<T: JsonSchema>() -> Map<String, Value> {
    let mut gen = schemas::generator();
    gen.subschema_for::<T>();
    gen.take_definitions(false)
}

/// ObjectMeta and ListMeta with what they refer to.
fn meta_schemas() -> &'static Map<String, Value> {
    static DEFS: OnceLock<Map<String, Value>> = OnceLock::new();
    DEFS.get_or_init(|| {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta};
        let mut defs = closure_of::<ObjectMeta>();
        defs.extend(closure_of::<ListMeta>());
        defs
    })
}

/// autoscaling/v1's Scale with what it refers to.
fn scale_schemas() -> &'static Map<String, Value> {
    static DEFS: OnceLock<Map<String, Value>> = OnceLock::new();
    DEFS.get_or_init(|| {
        let mut defs = closure_of::<k8s_openapi::api::autoscaling::v1::Scale>();
        if let Some(s) = defs.get_mut(crd::SCALE).and_then(Value::as_object_mut) {
            s.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": "autoscaling", "kind": "Scale", "version": "v1"}]),
            );
        }
        defs
    })
}

/// The definitions (v3 `$ref`s) and paths of some custom versions.
fn custom_parts(
    dialect: Dialect,
    versions: &[&CustomVersion],
) -> (Map<String, Value>, Map<String, Value>) {
    let prefix = match dialect {
        Dialect::V2 => V2_REF_PREFIX,
        Dialect::V3 => V3_REF_PREFIX,
    };
    let mut defs = meta_schemas().clone();
    let mut all_paths = Map::new();
    for v in versions {
        let r = v.res;
        let name = crd::definition_name(r.group, r.version, r.kind);
        let kind_ref = format!("{prefix}{name}");
        let scale_ref = format!("{prefix}{}", crd::SCALE);
        all_paths.extend(paths::paths(dialect, &[r], |_| Some(kind_ref.clone())));
        all_paths.extend(paths::subresource_paths(
            dialect,
            r,
            Some(&kind_ref),
            Some(&scale_ref),
        ));
        if r.has_subresource("scale") {
            defs.extend(scale_schemas().clone());
        }
        for (name, schema) in crd::definitions(v) {
            let schema = match dialect {
                Dialect::V2 => crd::to_v2(&schema),
                Dialect::V3 => schema,
            };
            defs.insert(name, schema);
        }
    }
    (defs, all_paths)
}

/// Rewrites v3 `$ref`s to v2's.
fn v2_refs(defs: &Map<String, Value>) -> Map<String, Value> {
    let text = serde_json::to_string(defs).expect("schemas serialize");
    serde_json::from_str(
        &text.replace(&format!("\"{V3_REF_PREFIX}"), &format!("\"{V2_REF_PREFIX}")),
    )
    .expect("schemas parse")
}

/// What a server without custom resources publishes.
#[cfg(test)]
pub fn empty() -> Published {
    Published::build(0, Vec::new())
}

impl Published {
    pub(super) fn build(generation: u64, versions: Vec<Arc<CustomVersion>>) -> Published {
        let started = Instant::now();
        let mut by_gv: BTreeMap<String, Vec<&CustomVersion>> = BTreeMap::new();
        for v in &versions {
            by_gv
                .entry(gv_key(v.res.group, v.res.version))
                .or_default()
                .push(v);
        }
        let v3: BTreeMap<String, Document> = by_gv
            .into_iter()
            // A built-in group version keeps its own document.
            .filter(|(key, _)| !super::v3_documents().contains_key(key))
            .map(|(key, vs)| {
                let (schemas, paths) = custom_parts(Dialect::V3, &vs);
                let mut doc = json!({
                    "openapi": "3.0.0",
                    "info": info(),
                    "paths": paths,
                    "components": {"schemas": schemas},
                });
                schemas::wrap_refs_in_all_of(&mut doc["components"]);
                (key, Document::new(&doc))
            })
            .collect();
        if !versions.is_empty() {
            tracing::info!(
                versions = versions.len(),
                documents = v3.len(),
                micros = started.elapsed().as_micros() as u64,
                "generated the custom resources' OpenAPI v3 documents"
            );
        }
        Published {
            generation,
            versions,
            v3,
            v2_json: OnceLock::new(),
            v2_protobuf: OnceLock::new(),
        }
    }

    /// The custom resources' v2 definitions not among the built-in ones,
    /// with `$ref`s as v2's, and their paths.
    fn custom_v2(&self) -> (Map<String, Value>, Map<String, Value>) {
        let versions: Vec<&CustomVersion> = self.versions.iter().map(|v| &**v).collect();
        let (defs, paths) = custom_parts(Dialect::V2, &versions);
        let builtin = &super::v2_builtin().0;
        let defs: Map<String, Value> = defs
            .into_iter()
            .filter(|(name, _)| !builtin.contains_key(name))
            .collect();
        (v2_refs(&defs), paths)
    }

    /// A custom group version's v3 document.
    pub fn v3_document(&self, key: &str) -> Option<&Document> {
        self.v3.get(key)
    }

    /// The custom group versions' v3 documents.
    pub fn v3_documents(&self) -> &BTreeMap<String, Document> {
        &self.v3
    }

    /// `/openapi/v2` as JSON.
    pub fn v2_json(&self) -> &Document {
        self.v2_json.get_or_init(|| {
            let started = Instant::now();
            let (builtin_defs, builtin_paths) = super::v2_builtin();
            let (defs, paths) = self.custom_v2();
            let mut definitions = builtin_defs.clone();
            definitions.extend(defs);
            let mut all_paths = builtin_paths.clone();
            all_paths.extend(paths);
            let doc = Document::new(&json!({
                "swagger": "2.0",
                "info": info(),
                "paths": all_paths,
                "definitions": definitions,
            }));
            tracing::info!(
                bytes = doc.body.len(),
                millis = started.elapsed().as_millis() as u64,
                "generated the OpenAPI v2 document"
            );
            doc
        })
    }

    /// `/openapi/v2` in gnostic's protobuf.
    pub fn v2_protobuf(&self) -> &Document {
        self.v2_protobuf.get_or_init(|| {
            let started = Instant::now();
            let mut entries = super::v2_builtin_protobuf().clone();
            entries.extend(gnostic::encode_definitions(&self.custom_v2().0));
            let doc = Document::from_bytes(gnostic::encode_document(&info(), &entries));
            tracing::info!(
                bytes = doc.body.len(),
                millis = started.elapsed().as_millis() as u64,
                "generated the OpenAPI v2 protobuf document"
            );
            doc
        })
    }
}
