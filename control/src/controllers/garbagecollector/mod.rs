//! The garbage collector: deletes objects whose owners are gone, as
//! kube-controller-manager's garbagecollector does.
//!
//! It watches every kind of object and keeps the ownership graph
//! (`metadata.ownerReferences`, by uid). Then:
//!
//! - **Background** (the default propagation): the owner is deleted at
//!   once; its dependents, whose owners are now all gone, are deleted.
//! - **Foreground**: the owner stays, marked with a deletionTimestamp and
//!   the `foregroundDeletion` finalizer, while its dependents are deleted
//!   (in foreground themselves when they block their owner's deletion);
//!   once no blocking dependent is left, the finalizer is removed and the
//!   API server lets the owner go.
//! - **Orphan**: the owner carries the `orphan` finalizer; the collector
//!   removes the owner's reference from every dependent, then the
//!   finalizer.
//!
//! A dependent with several owners goes only when all of them are gone;
//! references to owners that are gone are removed while another owner
//! remains.

mod kinds;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{
    Api, DeleteParams, DynamicObject, PartialObjectMeta, Patch, PatchParams, Preconditions,
};
use kube::Client;
use serde_json::json;
use tokio::sync::mpsc;

use bosun::resources::{self, ResourceInfo};

use crate::toolkit::dynamic::api_resource;
use crate::toolkit::{KeyBackoff, Shared};

const FOREGROUND: &str = "foregroundDeletion";
const ORPHAN: &str = "orphan";

/// One object in the ownership graph.
#[derive(Debug, Clone)]
struct Node {
    res: &'static ResourceInfo,
    namespace: Option<String>,
    name: String,
    owners: Vec<OwnerReference>,
    deleting: bool,
    finalizers: Vec<String>,
}

impl Node {
    fn of(res: &'static ResourceInfo, md: &ObjectMeta) -> Option<(String, Node)> {
        Some((
            md.uid.clone()?,
            Node {
                res,
                namespace: md.namespace.clone(),
                name: md.name.clone()?,
                owners: md.owner_references.clone().unwrap_or_default(),
                deleting: md.deletion_timestamp.is_some(),
                finalizers: md.finalizers.clone().unwrap_or_default(),
            },
        ))
    }

    fn has_finalizer(&self, f: &str) -> bool {
        self.finalizers.iter().any(|x| x == f)
    }

    fn deleting_in_foreground(&self) -> bool {
        self.deleting && self.has_finalizer(FOREGROUND)
    }
}

/// Who owns whom, by uid.
#[derive(Default)]
struct Graph {
    nodes: HashMap<String, Node>,
    dependents: HashMap<String, HashSet<String>>,
}

impl Graph {
    fn upsert(&mut self, uid: String, node: Node) {
        self.remove(&uid);
        for o in &node.owners {
            self.dependents
                .entry(o.uid.clone())
                .or_default()
                .insert(uid.clone());
        }
        self.nodes.insert(uid, node);
    }

    fn remove(&mut self, uid: &str) -> Option<Node> {
        let node = self.nodes.remove(uid)?;
        for o in &node.owners {
            if let Some(d) = self.dependents.get_mut(&o.uid) {
                d.remove(uid);
                if d.is_empty() {
                    self.dependents.remove(&o.uid);
                }
            }
        }
        Some(node)
    }

    fn dependents_of(&self, uid: &str) -> Vec<String> {
        self.dependents
            .get(uid)
            .map(|d| d.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Work {
    /// Check whether a dependent's owners are still there.
    Dependent(String),
    /// Run the foregroundDeletion / orphan finalizer of an owner.
    Owner(String),
}

impl Work {
    fn key(&self) -> String {
        match self {
            Work::Dependent(u) => format!("dependent/{u}"),
            Work::Owner(u) => format!("owner/{u}"),
        }
    }
}

/// A change seen by a watch: objects by their metadata, all the
/// collector reads of them.
enum Change {
    Apply(&'static ResourceInfo, ObjectMeta),
    Delete(ObjectMeta),
    /// A (re)list of one kind begins: its objects are about to be replayed.
    ListStart(&'static ResourceInfo),
    ListItem(&'static ResourceInfo, ObjectMeta),
    ListDone(&'static ResourceInfo),
}

pub fn start(shared: &Arc<Shared>) -> BoxFuture<'static, ()> {
    let client = shared.client_for("garbagecollector");
    async move { GarbageCollector::new(client).run().await }.boxed()
}

pub struct GarbageCollector {
    client: Client,
    graph: Graph,
    queued: HashSet<Work>,
    backoff: Arc<KeyBackoff>,
    custom: kinds::CustomKinds,
}

impl GarbageCollector {
    pub fn new(client: Client) -> Self {
        GarbageCollector {
            client,
            graph: Graph::default(),
            queued: HashSet::new(),
            backoff: Arc::new(KeyBackoff::default()),
            custom: kinds::CustomKinds::default(),
        }
    }

    pub async fn run(mut self) {
        let (changes_tx, mut changes) = mpsc::channel::<Change>(1024);
        let kinds = kinds::watched();
        // The watches end with the collector (dropping the set aborts
        // them): on shutdown nothing keeps re-watching a stopped API.
        let mut watches = tokio::task::JoinSet::new();
        for res in kinds.iter().copied() {
            kinds::spawn_watch(&mut watches, &self.client, res, changes_tx.clone());
        }
        let mut resync = tokio::time::interval(kinds::RESYNC);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

        let (work_tx, mut work_rx) = mpsc::unbounded_channel::<Work>();
        // By (group, plural): custom resources may reuse a built-in plural.
        let mut synced: HashSet<(&'static str, &'static str)> = HashSet::new();
        let mut listing: HashMap<(&'static str, &'static str), HashSet<String>> = HashMap::new();
        let mut ready = false;
        loop {
            tokio::select! {
                _ = resync.tick() => {
                    self.custom.resync(&mut watches, &self.client, &changes_tx).await;
                }
                change = changes.recv() => {
                    let Some(change) = change else { return };
                    let mut follow = Vec::new();
                    match change {
                        Change::ListStart(res) => { listing.insert((res.group, res.plural), HashSet::new()); }
                        Change::ListItem(res, o) => {
                            if let Some(uid) = o.uid.clone() {
                                listing.entry((res.group, res.plural)).or_default().insert(uid);
                            }
                            follow = self.apply(res, &o);
                        }
                        Change::ListDone(res) => {
                            // Objects of this kind missing from the relist
                            // were deleted while the watch was down.
                            let seen = listing.remove(&(res.group, res.plural)).unwrap_or_default();
                            let gone: Vec<String> = self.graph.nodes.iter()
                                .filter(|(uid, n)| std::ptr::eq(n.res, res) && !seen.contains(*uid))
                                .map(|(uid, _)| uid.clone())
                                .collect();
                            for uid in gone {
                                follow.extend(self.forget(&uid));
                            }
                            // Readiness waits on the built-in kinds only.
                            if res.is_builtin() {
                                synced.insert((res.group, res.plural));
                            }
                            if !ready && synced.len() == kinds.len() {
                                ready = true;
                                tracing::debug!(objects = self.graph.nodes.len(), "garbage collector synced");
                                follow.extend(self.everything());
                            }
                        }
                        Change::Apply(res, o) => follow = self.apply(res, &o),
                        Change::Delete(o) => {
                            if let Some(uid) = o.uid.as_deref() {
                                follow = self.forget(uid);
                            }
                        }
                    }
                    // Until every kind is listed, an owner missing from the
                    // graph may just not be listed yet: wait.
                    if ready {
                        for w in follow {
                            if self.queued.insert(w.clone()) {
                                let _ = work_tx.send(w);
                            }
                        }
                    }
                }
                Some(work) = work_rx.recv() => {
                    self.queued.remove(&work);
                    let key = work.key();
                    match self.process(&work).await {
                        Ok(()) => self.backoff.forget(&key),
                        Err(e) => {
                            let delay = self.backoff.next(&key);
                            tracing::debug!(%key, error = %e, retry_in = ?delay, "garbage collector");
                            let tx = work_tx.clone();
                            tokio::spawn(async move {
                                tokio::time::sleep(delay).await;
                                let _ = tx.send(work);
                            });
                        }
                    }
                }
            }
        }
    }

    /// Records a new or changed object; returns what needs a look.
    fn apply(&mut self, res: &'static ResourceInfo, obj: &ObjectMeta) -> Vec<Work> {
        let Some((uid, node)) = Node::of(res, obj) else {
            return Vec::new();
        };
        let mut work = Vec::new();
        if node.deleting && (node.has_finalizer(FOREGROUND) || node.has_finalizer(ORPHAN)) {
            work.push(Work::Owner(uid.clone()));
        }
        if !node.owners.is_empty() {
            work.push(Work::Dependent(uid.clone()));
        }
        let previous_owners: Vec<String> = self
            .graph
            .nodes
            .get(&uid)
            .map(|n| n.owners.iter().map(|o| o.uid.clone()).collect())
            .unwrap_or_default();
        // An owner waiting on this dependent may be done when it changes
        // (e.g. it no longer references the owner).
        for o in previous_owners {
            if self.graph.nodes.get(&o).is_some_and(|n| n.deleting) {
                work.push(Work::Owner(o));
            }
        }
        self.graph.upsert(uid, node);
        work
    }

    /// Removes a deleted object; its dependents and waiting owners need a look.
    fn forget(&mut self, uid: &str) -> Vec<Work> {
        let Some(node) = self.graph.remove(uid) else {
            return Vec::new();
        };
        let mut work: Vec<Work> = self
            .graph
            .dependents_of(uid)
            .into_iter()
            .map(Work::Dependent)
            .collect();
        for o in &node.owners {
            if self.graph.nodes.get(&o.uid).is_some_and(|n| n.deleting) {
                work.push(Work::Owner(o.uid.clone()));
            }
        }
        work
    }

    /// Everything worth a look after the first full sync.
    fn everything(&self) -> Vec<Work> {
        let mut work = Vec::new();
        for (uid, n) in &self.graph.nodes {
            if !n.owners.is_empty() {
                work.push(Work::Dependent(uid.clone()));
            }
            if n.deleting && (n.has_finalizer(FOREGROUND) || n.has_finalizer(ORPHAN)) {
                work.push(Work::Owner(uid.clone()));
            }
        }
        work
    }

    async fn process(&mut self, work: &Work) -> kube::Result<()> {
        match work {
            Work::Dependent(uid) => self.check_dependent(uid).await,
            Work::Owner(uid) => self.finalize_owner(uid).await,
        }
    }

    /// Whether the owner a reference names still exists: the graph knows,
    /// and a live read confirms an owner the graph has not seen.
    async fn owner_state(
        &self,
        dependent: &Node,
        owner: &OwnerReference,
    ) -> kube::Result<OwnerState> {
        if let Some(n) = self.graph.nodes.get(&owner.uid) {
            return Ok(if n.deleting_in_foreground() {
                OwnerState::DeletingInForeground
            } else {
                OwnerState::Present
            });
        }
        let builtin = resources::by_kind(&owner.api_version, &owner.kind);
        let Some(res) = builtin.or_else(|| self.custom.by_kind(&owner.api_version, &owner.kind))
        else {
            // A kind this server does not serve cannot exist.
            return Ok(OwnerState::Absent);
        };
        let ns = if res.namespaced {
            dependent.namespace.as_deref()
        } else {
            None
        };
        match meta_api(&self.client, res, ns).get_opt(&owner.name).await? {
            Some(o) if o.metadata.uid.as_deref() == Some(owner.uid.as_str()) => {
                Ok(OwnerState::Present)
            }
            _ => Ok(OwnerState::Absent),
        }
    }

    async fn check_dependent(&self, uid: &str) -> kube::Result<()> {
        let Some(cached) = self.graph.nodes.get(uid).cloned() else {
            return Ok(());
        };
        if cached.owners.is_empty() {
            return Ok(());
        }
        let mut node = cached.clone();
        let mut live_version = None;
        let mut verified = false;
        loop {
            let (solid, dangling, waiting) = self.classify(&node).await?;
            if dangling.is_empty() && waiting.is_empty() {
                return Ok(());
            }
            if !verified {
                // Watches of different kinds are not ordered with each
                // other: the graph may not have seen this object's latest
                // references yet. Act only on what the API holds now.
                let api = meta_api(&self.client, cached.res, cached.namespace.as_deref());
                let Some(live) = api.get_opt(&cached.name).await? else {
                    return Ok(());
                };
                if live.metadata.uid.as_deref() != Some(uid) {
                    return Ok(());
                }
                live_version = live.metadata.resource_version.clone();
                node = Node::of(cached.res, &live.metadata)
                    .map(|(_, n)| n)
                    .unwrap_or(cached.clone());
                verified = true;
                continue;
            }
            return self
                .act_on_dependent(uid, &node, live_version, solid, dangling, waiting)
                .await;
        }
    }

    /// Splits a dependent's owners into those that remain, those that are
    /// gone and those being deleted in foreground.
    async fn classify(
        &self,
        node: &Node,
    ) -> kube::Result<(
        Vec<OwnerReference>,
        Vec<OwnerReference>,
        Vec<OwnerReference>,
    )> {
        let mut solid = Vec::new();
        let mut dangling = Vec::new();
        let mut waiting = Vec::new();
        for owner in &node.owners {
            match self.owner_state(node, owner).await? {
                OwnerState::Present => solid.push(owner.clone()),
                OwnerState::Absent => dangling.push(owner.clone()),
                OwnerState::DeletingInForeground => waiting.push(owner.clone()),
            }
        }
        Ok((solid, dangling, waiting))
    }

    async fn act_on_dependent(
        &self,
        uid: &str,
        node: &Node,
        live_version: Option<String>,
        solid: Vec<OwnerReference>,
        dangling: Vec<OwnerReference>,
        waiting: Vec<OwnerReference>,
    ) -> kube::Result<()> {
        let api = meta_api(&self.client, node.res, node.namespace.as_deref());
        if !solid.is_empty() {
            // Another owner remains: drop only the references to owners
            // that are gone or going.
            let gone: HashSet<&str> = dangling
                .iter()
                .chain(waiting.iter())
                .map(|o| o.uid.as_str())
                .collect();
            return remove_owner_refs(&api, node, uid, &gone).await;
        }
        if node.deleting {
            return Ok(()); // already on its way out
        }
        // Deleting in foreground when it blocks an owner that waits in
        // foreground, so the owner waits for the whole tree.
        let blocks = waiting.iter().any(|o| o.block_owner_deletion == Some(true));
        let has_dependents = !self.graph.dependents_of(uid).is_empty();
        let policy = if blocks && has_dependents {
            "Foreground"
        } else {
            "Background"
        };
        let dp = DeleteParams {
            propagation_policy: Some(if policy == "Foreground" {
                kube::api::PropagationPolicy::Foreground
            } else {
                kube::api::PropagationPolicy::Background
            }),
            preconditions: Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: live_version,
            }),
            ..Default::default()
        };
        tracing::info!(kind = node.res.kind, name = %node.name, namespace = ?node.namespace, policy, "deleting an object whose owners are gone");
        match api.delete(&node.name, &dp).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn finalize_owner(&self, uid: &str) -> kube::Result<()> {
        let Some(node) = self.graph.nodes.get(uid).cloned() else {
            return Ok(());
        };
        if !node.deleting {
            return Ok(());
        }
        let dependents = self.graph.dependents_of(uid);
        if node.has_finalizer(ORPHAN) {
            let only: HashSet<&str> = [uid].into_iter().collect();
            for d in &dependents {
                if let Some(dn) = self.graph.nodes.get(d) {
                    let api = meta_api(&self.client, dn.res, dn.namespace.as_deref());
                    remove_owner_refs(&api, dn, d, &only).await?;
                }
            }
            return remove_finalizer(&self.client, &node, uid, ORPHAN).await;
        }
        if node.has_finalizer(FOREGROUND) {
            let blocking = dependents.iter().any(|d| {
                self.graph.nodes.get(d).is_some_and(|dn| {
                    dn.owners
                        .iter()
                        .any(|o| o.uid == uid && o.block_owner_deletion == Some(true))
                })
            });
            if !blocking {
                // Non-blocking dependents still go, but need not be waited for.
                for d in &dependents {
                    Box::pin(self.check_dependent(d)).await?;
                }
                return remove_finalizer(&self.client, &node, uid, FOREGROUND).await;
            }
            for d in &dependents {
                Box::pin(self.check_dependent(d)).await?;
            }
        }
        Ok(())
    }
}

/// The objects of a kind by their metadata only: gets, patches and
/// watches ask for `PartialObjectMetadata`, as upstream's collector's
/// metadata client does.
type MetaApi = Api<PartialObjectMeta<DynamicObject>>;

/// `res` in `namespace` (all namespaces when None or cluster-scoped).
fn meta_api(client: &Client, res: &ResourceInfo, namespace: Option<&str>) -> MetaApi {
    let ar = api_resource(res);
    match namespace {
        Some(ns) if res.namespaced => Api::namespaced_with(client.clone(), ns, &ar),
        _ => Api::all_with(client.clone(), &ar),
    }
}

enum OwnerState {
    Present,
    Absent,
    DeletingInForeground,
}

/// Removes the references to `owners` from a dependent, only if its
/// references are still what the graph saw (else the next event retries).
async fn remove_owner_refs(
    api: &MetaApi,
    node: &Node,
    uid: &str,
    owners: &HashSet<&str>,
) -> kube::Result<()> {
    let kept: Vec<&OwnerReference> = node
        .owners
        .iter()
        .filter(|o| !owners.contains(o.uid.as_str()))
        .collect();
    if kept.len() == node.owners.len() {
        return Ok(());
    }
    let patch = json!([
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "test", "path": "/metadata/ownerReferences", "value": node.owners},
        {"op": "replace", "path": "/metadata/ownerReferences", "value": kept},
    ]);
    apply_guarded_patch(api, &node.name, patch).await
}

/// Removes `finalizer` from an owner being deleted; the API server deletes
/// it when none is left.
async fn remove_finalizer(
    client: &Client,
    node: &Node,
    uid: &str,
    finalizer: &str,
) -> kube::Result<()> {
    let kept: Vec<&String> = node.finalizers.iter().filter(|f| *f != finalizer).collect();
    let api = meta_api(client, node.res, node.namespace.as_deref());
    let patch = json!([
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "test", "path": "/metadata/finalizers", "value": node.finalizers},
        {"op": "replace", "path": "/metadata/finalizers", "value": kept},
    ]);
    tracing::info!(kind = node.res.kind, name = %node.name, finalizer, "dependents handled; removing the finalizer");
    apply_guarded_patch(&api, &node.name, patch).await
}

/// Applies a JSON patch whose `test` operations guard it (the object is
/// still the one seen, with the list seen); an object already gone is no
/// error.
async fn apply_guarded_patch(
    api: &MetaApi,
    name: &str,
    patch: serde_json::Value,
) -> kube::Result<()> {
    let patch: json_patch::Patch = serde_json::from_value(patch).expect("a valid JSON patch");
    match api
        .patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests;
