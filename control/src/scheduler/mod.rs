//! The scheduler: binds every pod without a node to the node that fits it
//! best, as kube-scheduler's default profile does (filters, then scores,
//! ties broken at random), one pod at a time, through the API's `binding`
//! subresource. A pod no node fits stays Pending with PodScheduled=False
//! (reason Unschedulable) and a FailedScheduling event, and is tried again
//! when a node or a pod changes in a way that may make room, and
//! periodically with back-off.
//!
//! Pods and nodes come from the shared caches. What the pods on each
//! node take is kept by the scheduler's own [`cache`], pod event by pod
//! event. A pod a node was chosen for is "assumed" on its node there
//! until the pod cache shows it bound, so a burst of pods spreads
//! correctly before the cache catches up.
//!
//! As upstream, binding is a cycle of its own: once a node is chosen and
//! the pod assumed there, the next pod is scheduled while the binding
//! (the claims' selected node, then the `binding` subresource) goes on in
//! a task of its own, up to [`BIND_CONCURRENCY`] at once. A binding that
//! fails forgets the assumption and the pod is tried again.
//!
//! The queue serves higher priorities first. A pod no node fits may
//! preempt pods of lower priority ([`preemption`]): it is nominated to
//! the node (`status.nominatedNodeName`), the victims are deleted, and
//! the room they leave is kept for it (pods nominated to a node count
//! there against pods of lower or equal priority).

mod binding;
pub mod cache;
pub mod filters;
pub mod message;
pub mod nodeinfo;
mod nominator;
pub mod preemption;
pub mod queue;
pub mod scores;
#[cfg(test)]
mod tests;
pub mod volumes;

use crate::toolkit::synced;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bosun::events::{EventRecorder, EventType};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{
    Node, ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Client;
use serde_json::json;
use tokio::sync::{mpsc, Semaphore};

pub use binding::Binding;

use crate::observe;
use crate::toolkit::{key_of, Shared};
use cache::{Cache, Snapshot};
use nodeinfo::NodeInfo;
use nominator::Nominator;
use queue::SchedulingQueue;

/// The name pods ask for in `spec.schedulerName` (or leave empty).
pub const SCHEDULER_NAME: &str = "default-scheduler";

/// How often parked pods and the caches are looked over.
const TICK: Duration = Duration::from_secs(1);

/// How many bindings may be under way at once. Each is one or two API
/// writes; with one at a time the scheduler could place no more pods a
/// second than one write's round trip allows.
pub const BIND_CONCURRENCY: usize = 16;

/// Whether this scheduler should place `pod`: no node yet, ours to place,
/// not being deleted, not finished.
pub fn needs_scheduling(pod: &Pod) -> bool {
    let Some(spec) = &pod.spec else { return false };
    spec.node_name.as_deref().unwrap_or("").is_empty()
        && matches!(
            spec.scheduler_name.as_deref(),
            None | Some("") | Some(SCHEDULER_NAME)
        )
        && pod.metadata.deletion_timestamp.is_none()
        && !nodeinfo::is_terminal(pod)
}

/// What may make an unschedulable pod fit: its spec and labels.
fn pod_fingerprint(pod: &Pod) -> String {
    serde_json::to_string(&(&pod.spec, &pod.metadata.labels)).unwrap_or_default()
}

/// The node a pending pod was nominated to by a preemption, if any.
fn nominated_node(pod: &Pod) -> Option<&str> {
    pod.status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .filter(|n| !n.is_empty())
}

fn pod_ref(key: &str) -> ObjectRef<Pod> {
    match key.split_once('/') {
        Some((ns, name)) => ObjectRef::new(name).within(ns),
        None => ObjectRef::new(key),
    }
}

fn reference(pod: &Pod) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        resource_version: pod.metadata.resource_version.clone(),
        ..Default::default()
    }
}

/// What became of one attempt to schedule a pod.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Assumed on this node; its binding goes on in a task of its own and
    /// reports back as a [`Binding`].
    Assumed(String),
    Unschedulable(String),
    /// The pod is gone or already bound: nothing to do.
    Skipped,
    /// The API failed; try again soon.
    Failed,
}

impl Outcome {
    /// `scheduler_schedule_attempts_total`'s result; none for a pod that
    /// needed no attempt after all.
    pub fn result(&self) -> Option<&'static str> {
        match self {
            // Counted when its binding ends (`Binding::result`).
            Outcome::Assumed(_) => None,
            Outcome::Unschedulable(_) => Some("unschedulable"),
            Outcome::Failed => Some("error"),
            Outcome::Skipped => None,
        }
    }
}

pub struct Scheduler {
    client: Client,
    pods: Store<Pod>,
    nodes: Store<Node>,
    claims: Store<PersistentVolumeClaim>,
    volumes: Store<PersistentVolume>,
    classes: Store<StorageClass>,
    /// PodDisruptionBudgets, which preemption spares where it can.
    budgets: Store<PodDisruptionBudget>,
    recorder: EventRecorder,
    queue: SchedulingQueue,
    /// What the pods bound or assumed to each node take.
    cache: Cache,
    /// The node infos of the last scheduling cycle.
    snapshot: Snapshot,
    node_fingerprints: HashMap<String, String>,
    nominator: Nominator,
    /// Where binding tasks report how they ended.
    bindings: mpsc::UnboundedSender<Binding>,
    /// Bounds the bindings under way ([`BIND_CONCURRENCY`]).
    binding_slots: Arc<Semaphore>,
}

/// Sets up the scheduler on the shared caches; the returned future is
/// its loop.
pub fn start(shared: &Arc<Shared>) -> BoxFuture<'static, ()> {
    let pod_events = shared.informers.subscribe::<Pod>();
    let node_events = shared.informers.subscribe::<Node>();
    let pod_deletions = shared.informers.deleted::<Pod>();
    let node_deletions = shared.informers.deleted::<Node>();
    // A claim bound or a volume made may let a waiting pod in.
    let claim_events = shared.informers.subscribe::<PersistentVolumeClaim>();
    let volume_events = shared.informers.subscribe::<PersistentVolume>();
    let (scheduler, mut bindings) = Scheduler::new(shared);
    async move {
        let mut scheduler = scheduler;
        let mut pod_events = std::pin::pin!(pod_events);
        let mut node_events = std::pin::pin!(node_events);
        let mut pod_deletions = std::pin::pin!(pod_deletions);
        let mut node_deletions = std::pin::pin!(node_deletions);
        let mut claim_events = std::pin::pin!(claim_events);
        let mut volume_events = std::pin::pin!(volume_events);
        let (pods, nodes) = (scheduler.pods.clone(), scheduler.nodes.clone());
        let (claims, volumes, classes) = (
            scheduler.claims.clone(),
            scheduler.volumes.clone(),
            scheduler.classes.clone(),
        );
        let mut ready = std::pin::pin!(async move {
            synced(&pods).await;
            synced(&nodes).await;
            synced(&claims).await;
            synced(&volumes).await;
            synced(&classes).await;
        }
        .fuse());
        let mut is_ready = false;
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = &mut ready, if !is_ready => {
                    is_ready = true;
                    scheduler.on_tick();
                }
                Some(pod) = pod_events.next() => scheduler.on_pod(&pod),
                Some(node) = node_events.next() => scheduler.on_node(&node),
                Some(Ok(pod)) = pod_deletions.next() => scheduler.on_pod_deleted(&pod),
                Some(Ok(node)) = node_deletions.next() => {
                    scheduler.node_fingerprints.remove(node.metadata.name.as_deref().unwrap_or(""));
                }
                Some(_) = claim_events.next() => scheduler.queue.move_all_to_active(),
                Some(_) = volume_events.next() => scheduler.queue.move_all_to_active(),
                Some(done) = bindings.recv() => scheduler.on_binding(done),
                _ = tick.tick() => if is_ready { scheduler.on_tick() },
            }
            if is_ready {
                scheduler.schedule_queued().await;
            }
            scheduler.queue.observe();
        }
    }
    .boxed()
}

impl Scheduler {
    /// The scheduler, and where its binding tasks report.
    pub fn new(shared: &Arc<Shared>) -> (Self, mpsc::UnboundedReceiver<Binding>) {
        let (bindings, reports) = mpsc::unbounded_channel();
        let scheduler = Scheduler {
            client: shared.scheduler_client.clone(),
            pods: shared.informers.store::<Pod>(),
            nodes: shared.informers.store::<Node>(),
            claims: shared.informers.store::<PersistentVolumeClaim>(),
            volumes: shared.informers.store::<PersistentVolume>(),
            classes: shared.informers.store::<StorageClass>(),
            budgets: shared.informers.store::<PodDisruptionBudget>(),
            recorder: shared.recorder(SCHEDULER_NAME),
            queue: SchedulingQueue::default(),
            cache: Cache::default(),
            snapshot: Snapshot::default(),
            node_fingerprints: HashMap::new(),
            nominator: Nominator::default(),
            bindings,
            binding_slots: Arc::new(Semaphore::new(BIND_CONCURRENCY)),
        };
        (scheduler, reports)
    }

    /// Whether `pod` was bound by us and the cache has not caught up.
    fn is_assumed(&self, pod: &Pod) -> bool {
        self.cache.is_assumed(pod)
    }

    fn on_pod(&mut self, pod: &Arc<Pod>) {
        let key = key_of(pod.as_ref());
        self.nominator.on_pod(pod);
        let assumed = self.is_assumed(pod);
        self.cache.on_pod(pod.clone());
        if needs_scheduling(pod) {
            if assumed {
                return;
            }
            self.queue
                .add_or_update(&key, &pod_fingerprint(pod), preemption::priority(pod));
            return;
        }
        self.queue.forget(&key);
        let bound = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
        if bound.is_some_and(|n| !n.is_empty()) {
            // A pod that finished or is leaving frees its node's room.
            if nodeinfo::is_terminal(pod) || pod.metadata.deletion_timestamp.is_some() {
                self.queue.move_all_to_active();
            }
        }
    }

    fn on_pod_deleted(&mut self, pod: &Pod) {
        let key = key_of(pod);
        self.nominator.forget(&key);
        self.queue.forget(&key);
        self.cache.on_pod_deleted(pod);
        let bound = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
        if bound.is_some_and(|n| !n.is_empty()) {
            self.queue.move_all_to_active();
        }
    }

    fn on_node(&mut self, node: &Node) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let print = crate::toolkit::scheduling::node_fingerprint(node);
        if self.node_fingerprints.get(&name) != Some(&print) {
            self.node_fingerprints.insert(name, print);
            self.queue.move_all_to_active();
        }
    }

    /// Level-triggered catch-up: parked pods whose back-off ran out go
    /// back to the queue, and any pod needing a node that the queue does
    /// not know (a missed event) joins it.
    fn on_tick(&mut self) {
        self.queue.flush_backed_off();
        let pods = self.pods.state();
        for pod in &pods {
            if needs_scheduling(pod) && !self.is_assumed(pod) {
                self.queue
                    .add_if_unknown(&key_of(pod.as_ref()), preemption::priority(pod));
            }
        }
        self.nominator.refresh(&pods);
        for node in self.nodes.state() {
            self.on_node(&node);
        }
        // Pods deleted during a relist (which sends no deletion), and
        // assumed pods the pod cache no longer has, leave the cache.
        self.cache.resync(&pods);
    }

    /// Schedules every queued pod, one at a time, each against the
    /// snapshot brought up to date with the pods bound or assumed since.
    pub async fn schedule_queued(&mut self) {
        if self.queue.is_empty() {
            return;
        }
        let mut snapshot = std::mem::take(&mut self.snapshot);
        while let Some(key) = self.queue.pop() {
            let Some(pod) = self.pods.get(&pod_ref(&key)) else {
                self.queue.forget(&key);
                continue;
            };
            if !needs_scheduling(&pod) || self.is_assumed(&pod) {
                self.queue.forget(&key);
                continue;
            }
            let started = std::time::Instant::now();
            self.cache
                .update_snapshot(self.nodes.state(), &mut snapshot);
            let outcome = self.schedule_one(&pod, snapshot.infos(), started).await;
            observe::scheduling_attempt(outcome.result(), started);
            let priority = preemption::priority(&pod);
            match outcome {
                Outcome::Assumed(_) | Outcome::Skipped => self.queue.forget(&key),
                Outcome::Unschedulable(_) => {
                    self.queue.park(&key, &pod_fingerprint(&pod), priority)
                }
                Outcome::Failed => self
                    .queue
                    .park_briefly(&key, &pod_fingerprint(&pod), priority),
            }
        }
        self.snapshot = snapshot;
    }

    /// Filters and scores one pod, assumes it on the node chosen and starts
    /// its binding (`started`: when its attempt began).
    pub async fn schedule_one(
        &mut self,
        pod: &Arc<Pod>,
        infos: &[NodeInfo],
        started: std::time::Instant,
    ) -> Outcome {
        let storage = volumes::Storage {
            claims: self.claims.state(),
            volumes: self.volumes.state(),
            classes: self.classes.state(),
        };
        let pod_volumes = match volumes::prefilter(pod, &storage) {
            Ok(v) => v,
            Err(why) => {
                let msg = message::prefilter_error(infos.len(), &why);
                self.unschedulable(pod, &msg).await;
                return Outcome::Unschedulable(msg);
            }
        };
        let nominated = self.nominator.nominated_for(&self.pods, pod);
        let mut feasible = Vec::new();
        let mut per_node = Vec::with_capacity(infos.len());
        for (i, info) in infos.iter().enumerate() {
            let mut reasons = match nominated.iter().any(|(_, n)| n == info.name()) {
                // The room kept for pods nominated here counts against it.
                true => {
                    let mut with = info.clone();
                    for (p, _) in nominated.iter().filter(|(_, n)| n == info.name()) {
                        with.add_pod(p);
                    }
                    filters::filter(pod, &with)
                }
                false => filters::filter(pod, info),
            };
            if reasons.is_empty() {
                reasons.extend(volumes::filter(&pod_volumes, &info.node));
            }
            if reasons.is_empty() {
                feasible.push(i);
            }
            per_node.push(reasons);
        }
        if feasible.is_empty() {
            let failures: Vec<Vec<filters::Reason>> =
                per_node.iter().filter(|r| !r.is_empty()).cloned().collect();
            let msg = message::fit_error(infos.len(), &failures);
            self.unschedulable(pod, &msg).await;
            if preemption::eligible(pod, infos) {
                let budgets = preemption::PdbBudgets(
                    self.budgets.state().iter().map(|b| (**b).clone()).collect(),
                );
                if let Some((i, victims)) = preemption::find_node(pod, infos, &per_node, &budgets) {
                    let node = infos[i].name().to_string();
                    if let Err(e) = self.preempt(pod, &node, &victims.pods).await {
                        tracing::warn!(pod = %key_of(pod.as_ref()), %node, error = %e, "preempting");
                        return Outcome::Failed;
                    }
                    self.nominator.nominate(pod);
                }
            }
            return Outcome::Unschedulable(msg);
        }
        let candidates: Vec<&NodeInfo> = feasible.iter().map(|&i| &infos[i]).collect();
        let scores = scores::score(pod, &candidates);
        let chosen = feasible[scores::pick(&scores).expect("feasible is not empty")];
        let node = infos[chosen].name().to_string();
        // Upstream's assume, then its binding cycle in a goroutine: the pod
        // counts on the node from now on, so the next pods see its room
        // taken while the binding goes on.
        self.cache.assume(pod, &node);
        self.start_binding(pod, &node, pod_volumes, started).await;
        Outcome::Assumed(node)
    }

    /// Upstream's `prepareCandidate`: each victim gets a DisruptionTarget
    /// condition and a Preempted event and is deleted; pods of lower
    /// priority nominated to the node lose that; then `pod` is nominated
    /// there. The pod is tried again as the victims go.
    async fn preempt(&self, pod: &Pod, node: &str, victims: &[Pod]) -> kube::Result<()> {
        let uid = pod.metadata.uid.as_deref().unwrap_or("");
        let scheduler = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref())
            .filter(|n| !n.is_empty())
            .unwrap_or(SCHEDULER_NAME);
        for victim in victims {
            let ns = victim.metadata.namespace.as_deref().unwrap_or("default");
            let name = victim.metadata.name.as_deref().unwrap_or("");
            let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
            tracing::info!(pod = %key_of(pod), victim = %key_of(victim), %node, "preempting");
            let condition = json!({"status": {"conditions": [{
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "PreemptionByScheduler",
                "message": format!("{scheduler}: preempting to accommodate a higher priority pod"),
                "lastTransitionTime": bosun::time::now_rfc3339(),
            }]}});
            match api
                .patch_status(name, &PatchParams::default(), &Patch::Strategic(condition))
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => continue,
                Err(e) => return Err(e),
            }
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => continue,
                Err(e) => return Err(e),
            }
            self.recorder.record(
                &reference(victim),
                EventType::Normal,
                "Preempted",
                format!("Preempted by pod {uid} on node {node}"),
            );
        }
        let mine = preemption::priority(pod);
        for (other, _) in self.nominator.nominated(&self.pods) {
            let lower_here = nominated_node(&other) == Some(node)
                && preemption::priority(&other) < mine
                && other.metadata.uid != pod.metadata.uid;
            if lower_here {
                self.set_nominated(&other, None).await?;
            }
        }
        self.set_nominated(pod, Some(node)).await
    }

    async fn set_nominated(&self, pod: &Pod, node: Option<&str>) -> kube::Result<()> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let name = pod.metadata.name.as_deref().unwrap_or("");
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let patch = json!({"status": {"nominatedNodeName": node}});
        match api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// PodScheduled=False (Unschedulable) on the pod and a FailedScheduling
    /// event (the recorder folds repeats into a count).
    async fn unschedulable(&self, pod: &Pod, msg: &str) {
        tracing::debug!(pod = %key_of(pod), %msg, "unschedulable");
        self.recorder
            .record(&reference(pod), EventType::Warning, "FailedScheduling", msg);
        let current = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"));
        let same = current.is_some_and(|c| {
            c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
                && c.message.as_deref() == Some(msg)
        });
        if same {
            return;
        }
        let transition = match current {
            Some(c) if c.status == "False" => c.last_transition_time.clone(),
            _ => None,
        }
        .map(|t| serde_json::to_value(t).unwrap_or_default())
        .unwrap_or_else(|| json!(bosun::time::now_rfc3339()));
        let patch = json!({"status": {"conditions": [{
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": msg,
            "lastProbeTime": null,
            "lastTransitionTime": transition,
        }]}});
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let name = pod.metadata.name.as_deref().unwrap_or("");
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        if let Err(e) = api
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
        {
            tracing::debug!(pod = %key_of(pod), error = %e, "setting PodScheduled=False");
        }
    }
}
