//! Custom resources: what each API server serves from the
//! CustomResourceDefinitions in its store, as the apiextensions-apiserver's
//! `crdHandler` does.
//!
//! [`CustomResources`] is one API server's registry, kept by
//! [`CustomResources::follow`] from the store: a CRD's served versions are
//! served once it is `Established` (the CRD controllers in
//! `controllers/customresourcedefinition` decide that), under its accepted
//! names, and no longer once the CRD is gone from the store. A CRD being
//! deleted stays served for reads and deletes (its instances are being
//! removed) but refuses creates.
//!
//! Each served version has a [`CustomVersion`]: its interned
//! [`ResourceInfo`] (see [`intern`]), which the generic verbs work with as
//! they do with built-in ones, and what only a CRD says (printer columns,
//! scale paths, the schema for [`schema::admit`]). A request's target
//! carries it.

pub mod conversion;
pub mod intern;
pub mod schema;
pub mod serve;
pub mod table;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bosun::resources::ResourceInfo;
use serde_json::Value;

use crate::store::{EventType, Revision, Store, StoreError};

/// Where CRDs are kept in the store.
pub const CRD_PREFIX: &str = "/registry/customresourcedefinitions.apiextensions.k8s.io/";

/// One printer column of a CRD version (`additionalPrinterColumns`).
#[derive(Debug, Clone, PartialEq)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub json_path: String,
}

/// A CRD version's `subresources.scale`.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalePaths {
    /// `.spec.replicas`-like paths, as the CRD gives them.
    pub spec_replicas: String,
    pub status_replicas: String,
    pub label_selector: Option<String>,
}

/// One served version of a custom resource.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomVersion {
    pub res: &'static ResourceInfo,
    /// The CRD's name (`<plural>.<group>`).
    pub crd_name: String,
    pub list_kind: String,
    pub columns: Vec<PrinterColumn>,
    pub scale: Option<ScalePaths>,
    /// `schema.openAPIV3Schema`, if the version has one.
    pub schema: Option<Value>,
    /// The same compiled once (CEL rules and patterns too) for
    /// [`schema::admit`].
    pub structural: Compiled,
    /// The CRD is being deleted: no new objects.
    pub terminating: bool,
    /// The CRD's conversion webhook (`strategy: Webhook`), shared by its
    /// versions.
    pub conversion: Option<Arc<conversion::Webhook>>,
}

/// A version's compiled schema; None when it has none (or, which
/// validation refuses on write, one that does not compile).
#[derive(Debug, Clone)]
pub struct Compiled(pub Option<bosun::crd_schema::Structural>);

impl PartialEq for Compiled {
    /// Compiled from [`CustomVersion::schema`], which is compared.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Compiled {
    fn of(schema: Option<&Value>, crd: &str) -> Compiled {
        Compiled(schema.and_then(|s| {
            bosun::crd_schema::Structural::new(s, "schema.openAPIV3Schema")
                .map_err(|errs| {
                    tracing::warn!(
                        crd,
                        errors = errs.len(),
                        "a stored CRD's schema does not compile"
                    )
                })
                .ok()
        }))
    }
}

fn strs(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn text(v: &Value, pointer: &str) -> String {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// Whether a CRD's condition `type_` is True.
pub fn condition_true(crd: &Value, type_: &str) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == type_ && c["status"] == "True")
        })
}

/// The versions a CRD serves, once it is established, under its accepted
/// names; none before.
pub fn served_versions(crd: &Value) -> Vec<CustomVersion> {
    if !condition_true(crd, "Established") {
        return Vec::new();
    }
    let names = &crd["status"]["acceptedNames"];
    let plural = text(names, "/plural");
    let kind = text(names, "/kind");
    if plural.is_empty() || kind.is_empty() {
        return Vec::new();
    }
    let spec = &crd["spec"];
    let versions: &[Value] = spec["versions"].as_array().map_or(&[], Vec::as_slice);
    let storage = versions
        .iter()
        .find(|v| v["storage"] == true)
        .map(|v| text(v, "/name"))
        .unwrap_or_default();
    let terminating = crd.pointer("/metadata/deletionTimestamp").is_some();
    let conversion = conversion::Webhook::of(crd);
    let mut out = Vec::new();
    for v in versions.iter().filter(|v| v["served"] == true) {
        let mut subresources = Vec::new();
        if v.pointer("/subresources/status").is_some() {
            subresources.push("status".to_string());
        }
        let scale = v.pointer("/subresources/scale").map(|s| ScalePaths {
            spec_replicas: text(s, "/specReplicasPath"),
            status_replicas: text(s, "/statusReplicasPath"),
            label_selector: s
                .get("labelSelectorPath")
                .and_then(Value::as_str)
                .map(str::to_string),
        });
        if scale.is_some() {
            subresources.push("scale".to_string());
        }
        let selectable = v["selectableFields"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f["jsonPath"].as_str())
            .map(|p| p.trim_start_matches('.').to_string())
            .collect();
        let description = intern::Description {
            group: text(spec, "/group"),
            version: text(v, "/name"),
            kind: kind.clone(),
            plural: plural.clone(),
            singular: {
                let s = text(names, "/singular");
                if s.is_empty() {
                    kind.to_ascii_lowercase()
                } else {
                    s
                }
            },
            namespaced: spec["scope"] == "Namespaced",
            short_names: strs(names.get("shortNames")),
            categories: strs(names.get("categories")),
            subresources,
            storage_version: storage.clone(),
            selectable_fields: selectable,
        };
        let columns = v["additionalPrinterColumns"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| PrinterColumn {
                name: text(c, "/name"),
                type_: text(c, "/type"),
                format: text(c, "/format"),
                description: text(c, "/description"),
                priority: c["priority"].as_i64().unwrap_or(0),
                json_path: text(c, "/jsonPath"),
            })
            .collect();
        let list_kind = match text(names, "/listKind") {
            l if l.is_empty() => format!("{kind}List"),
            l => l,
        };
        out.push(CustomVersion {
            res: intern::resource(&description),
            crd_name: text(crd, "/metadata/name"),
            list_kind,
            columns,
            scale,
            schema: v.pointer("/schema/openAPIV3Schema").cloned(),
            structural: Compiled::of(
                v.pointer("/schema/openAPIV3Schema"),
                &text(crd, "/metadata/name"),
            ),
            terminating,
            conversion: conversion.clone(),
        });
    }
    out
}

/// Kubernetes' order of versions (`version.CompareKubeAwareVersionStrings`):
/// GA before beta before alpha, higher numbers first, then anything else
/// by name.
pub fn version_priority(a: &str, b: &str) -> std::cmp::Ordering {
    fn key(v: &str) -> (u8, i64, i64, String) {
        let parse = || -> Option<(i64, u8, i64)> {
            let rest = v.strip_prefix('v')?;
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let major: i64 = digits.parse().ok()?;
            let tail = &rest[digits.len()..];
            if tail.is_empty() {
                return Some((major, 0, 0));
            }
            for (word, rank) in [("beta", 1), ("alpha", 2)] {
                if let Some(n) = tail.strip_prefix(word) {
                    let minor: i64 = if n.is_empty() { 0 } else { n.parse().ok()? };
                    return Some((major, rank, minor));
                }
            }
            None
        };
        match parse() {
            Some((major, rank, minor)) => (rank, -major, -minor, String::new()),
            None => (3, 0, 0, v.to_string()),
        }
    }
    key(a).cmp(&key(b))
}

/// One API server's custom resources.
pub struct CustomResources {
    store: Arc<dyn Store>,
    /// Every served version, by CRD name.
    served: RwLock<BTreeMap<String, Vec<Arc<CustomVersion>>>>,
    /// The store revision the registry reflects (0 while relisting).
    applied: tokio::sync::watch::Sender<Revision>,
    /// Changes whenever what is served changes (a CRD established,
    /// changed or gone), unique in the process: what the OpenAPI
    /// documents are rebuilt on.
    generation: AtomicU64,
}

/// The source of [`CustomResources::snapshot`]'s generations.
static GENERATIONS: AtomicU64 = AtomicU64::new(1);

fn next_generation() -> u64 {
    GENERATIONS.fetch_add(1, Ordering::Relaxed)
}

impl CustomResources {
    pub fn new(store: Arc<dyn Store>) -> Arc<CustomResources> {
        Arc::new(CustomResources {
            store,
            served: RwLock::new(BTreeMap::new()),
            applied: tokio::sync::watch::Sender::new(0),
            generation: AtomicU64::new(next_generation()),
        })
    }

    /// Every served version (as [`CustomResources::all`]) with the
    /// generation they are at: the same generation, in any registry of
    /// the process, means the same versions.
    pub fn snapshot(&self) -> (u64, Vec<Arc<CustomVersion>>) {
        let served = self.served.read().expect("custom resources lock");
        let generation = self.generation.load(Ordering::Relaxed);
        (generation, served.values().flatten().cloned().collect())
    }

    /// Every served version, CRDs by name, versions by priority.
    pub fn all(&self) -> Vec<Arc<CustomVersion>> {
        self.served
            .read()
            .expect("custom resources lock")
            .values()
            .flatten()
            .cloned()
            .collect()
    }

    /// The version served at `group`/`version` under `plural`.
    pub fn by_path(&self, group: &str, version: &str, plural: &str) -> Option<Arc<CustomVersion>> {
        self.find(|r| r.group == group && r.version == version && r.plural == plural)
    }

    /// The version serving objects of `apiVersion` and `kind`.
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<CustomVersion>> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        self.find(|r| r.group == group && r.version == version && r.kind == kind)
    }

    fn find(&self, pred: impl Fn(&ResourceInfo) -> bool) -> Option<Arc<CustomVersion>> {
        self.served
            .read()
            .expect("custom resources lock")
            .values()
            .flatten()
            .find(|v| pred(v.res))
            .cloned()
    }

    /// Waits (a little) until the registry reflects every write up to the
    /// store's current revision: a client that saw a CRD established may
    /// use its resource at once.
    pub async fn caught_up(&self) {
        let want = self.store.current_revision();
        let mut rx = self.applied.subscribe();
        let _ = tokio::time::timeout(Duration::from_secs(2), rx.wait_for(|r| *r >= want)).await;
    }

    fn set(&self, name: &str, crd: Option<&Value>) {
        let versions: Vec<Arc<CustomVersion>> = crd
            .map(served_versions)
            .unwrap_or_default()
            .into_iter()
            .map(Arc::new)
            .collect();
        let mut sorted = versions;
        sorted.sort_by(|a, b| version_priority(a.res.version, b.res.version));
        let mut served = self.served.write().expect("custom resources lock");
        let before = if sorted.is_empty() {
            served.remove(name)
        } else {
            served.insert(name.to_string(), sorted.clone())
        };
        if before.unwrap_or_default() != sorted {
            self.generation.store(next_generation(), Ordering::Relaxed);
        }
    }

    /// Keeps the registry from the store's CRDs until the store closes:
    /// lists them, then applies every change; relists when the watch
    /// fails or ends.
    pub async fn follow(self: Arc<Self>) {
        loop {
            self.applied.send_replace(0);
            let (items, revision) = match self.store.list(CRD_PREFIX).await {
                Ok(r) => r,
                Err(StoreError::Closed) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "custom resources: listing CRDs");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            self.served.write().expect("custom resources lock").clear();
            self.generation.store(next_generation(), Ordering::Relaxed);
            for kv in &items {
                if let Ok(crd) = serde_json::from_slice::<Value>(&kv.value[..]) {
                    self.set(&kv.key[CRD_PREFIX.len()..], Some(&crd));
                }
            }
            // Every key: the revision applied then follows the store's.
            let mut events = match self.store.watch("", revision).await {
                Ok(s) => s,
                Err(StoreError::Closed) => return,
                Err(e) => {
                    tracing::info!(error = %e, "custom resources: watching the store; relisting");
                    continue;
                }
            };
            self.applied.send_replace(revision);
            loop {
                match futures::StreamExt::next(&mut events).await {
                    Some(Ok(event)) => {
                        if let Some(name) = event.key.strip_prefix(CRD_PREFIX) {
                            let crd = match event.kind {
                                EventType::Deleted => None,
                                _ => serde_json::from_slice::<Value>(&event.value[..]).ok(),
                            };
                            self.set(name, crd.as_ref());
                        }
                        self.applied.send_replace(event.revision);
                    }
                    Some(Err(StoreError::Closed)) => return,
                    Some(Err(e)) => {
                        tracing::info!(error = %e, "custom resources: the watch failed; relisting");
                        break;
                    }
                    None => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        break;
                    }
                }
            }
        }
    }
}

/// The resources served besides the built-in ones, as discovery lists
/// them: each CRD's versions, highest priority first.
pub fn resources(custom: &CustomResources) -> Vec<&'static ResourceInfo> {
    custom.all().iter().map(|v| v.res).collect()
}
