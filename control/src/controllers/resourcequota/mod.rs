//! The resource quota controller (kube-controller-manager's
//! `resourcequota`): each ResourceQuota's `status.hard` is its
//! `spec.hard` and `status.used` what the objects of its namespace use
//! now, by the same evaluators as admission ([`bosun::quota`]).
//!
//! 1. A quota is recomputed when it is created or its spec changes, when
//!    a pod, service, config map, secret or claim of its namespace goes
//!    or a pod stops counting (replenishment: what a deletion frees), and
//!    every [`RESYNC`] (what `count/<resource>` counts of other kinds).
//!    Not when only its status changed, nor when an object is created:
//!    admission has charged that already, and a recount racing a create
//!    (listing before the new object is stored, writing after the charge)
//!    would forget it and let the next create past the quota; upstream
//!    triggers on the same events for the same reason.
//! 2. Usage is recomputed from a list of each kind the quota names, so
//!    whatever admission charged for a create that then failed is given
//!    back; terminal pods and pods past their grace period do not count.
//! 3. The status is written only when it changed, at the revision read:
//!    a conflict with admission's charge is retried.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolumeClaim, Pod, ResourceQuota, Secret, Service,
};
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::Controller;
use kube::{Client, Resource, ResourceExt};
use serde_json::Value;

use bosun::quota::{self, Usage};
use bosun::resources::ResourceInfo;

use crate::toolkit::dynamic::dynamic_api;
use crate::toolkit::{run_controller, Clock, Shared};

pub type Error = crate::toolkit::api_errors::ApiError;

/// How often every quota is recomputed without a trigger.
pub const RESYNC: Duration = Duration::from_secs(30);

pub struct Context {
    pub client: Client,
    pub clock: Arc<dyn Clock>,
    /// Per quota (`ns/name`): the uid and generation last recomputed, and when.
    synced: Mutex<HashMap<String, (String, i64, Instant)>>,
    /// Quotas a replenishing event has asked to recompute.
    dirty: Mutex<HashSet<String>>,
}

impl Context {
    pub fn new(client: Client, clock: Arc<dyn Clock>) -> Self {
        Context {
            client,
            clock,
            synced: Mutex::default(),
            dirty: Mutex::default(),
        }
    }

    /// Marks the quotas of `obj`'s namespace for a recount; their refs.
    fn replenish<K: Resource>(
        &self,
        quotas: &Store<ResourceQuota>,
        obj: &K,
    ) -> Vec<ObjectRef<ResourceQuota>> {
        let refs = quotas_of(quotas, obj);
        let mut dirty = self.dirty.lock().expect("lock");
        for r in &refs {
            dirty.insert(format!(
                "{}/{}",
                r.namespace.as_deref().unwrap_or(""),
                r.name
            ));
        }
        refs
    }
}

/// The quotas of the namespace `obj` is in (what a change of it may move).
fn quotas_of<K: Resource>(quotas: &Store<ResourceQuota>, obj: &K) -> Vec<ObjectRef<ResourceQuota>> {
    let Some(ns) = obj.meta().namespace.as_deref() else {
        return Vec::new();
    };
    quotas
        .state()
        .iter()
        .filter(|q| q.metadata.namespace.as_deref() == Some(ns))
        .map(|q| ObjectRef::from_obj(q.as_ref()))
        .collect()
}

pub fn start(shared: &Arc<Shared>) -> BoxFuture<'static, ()> {
    let informers = &shared.informers;
    let quotas = informers.store::<ResourceQuota>();
    let ctx = Arc::new(Context::new(
        shared.client_for("resourcequota"),
        shared.clock.clone(),
    ));
    let (c, q) = (ctx.clone(), quotas.clone());
    let controller = Controller::for_shared_stream(
        informers.subscribe::<ResourceQuota>(),
        informers.store::<ResourceQuota>(),
    )
    // A pod that stops counting (terminal, or being deleted) frees quota.
    .watches_shared_stream(informers.subscribe::<Pod>(), move |p: Arc<Pod>| {
        let pod = serde_json::to_value(p.as_ref()).unwrap_or(Value::Null);
        let stopping = p.metadata.deletion_timestamp.is_some()
            || !quota::pod_counts(&pod, c.clock.now().timestamp());
        if stopping {
            c.replenish(&q, p.as_ref())
        } else {
            Vec::new()
        }
    });
    macro_rules! replenish_on_delete {
        ($controller:expr, $kind:ty) => {{
            let (c, q) = (ctx.clone(), quotas.clone());
            $controller.watches_stream(informers.deleted::<$kind>(), move |o: $kind| {
                c.replenish(&q, &o)
            })
        }};
    }
    let controller = replenish_on_delete!(controller, Pod);
    let controller = replenish_on_delete!(controller, Service);
    let controller = replenish_on_delete!(controller, ConfigMap);
    let controller = replenish_on_delete!(controller, Secret);
    let controller = replenish_on_delete!(controller, PersistentVolumeClaim);
    run_controller("resourcequota", controller, ctx, reconcile).boxed()
}

/// The resource whose objects a quota on `name` counts.
pub fn counted_resource(name: &str) -> Option<&'static ResourceInfo> {
    let plural = match name {
        "pods" | "cpu" | "memory" | "ephemeral-storage" => "pods",
        "services" | "services.nodeports" | "services.loadbalancers" => "services",
        "persistentvolumeclaims" | "requests.storage" => "persistentvolumeclaims",
        "configmaps" | "secrets" | "resourcequotas" | "replicationcontrollers" => name,
        n if n.starts_with("requests.") || n.starts_with("limits.") => "pods",
        n => n.strip_prefix("count/")?,
    };
    bosun::resources::by_name(plural).filter(|r| r.namespaced)
}

/// What the objects of `res` in `ns` use, as `quota_obj` counts them.
async fn usage_of(
    ctx: &Context,
    quota_obj: &Value,
    res: &ResourceInfo,
    ns: &str,
) -> Result<Usage, kube::Error> {
    let list = dynamic_api(&ctx.client, res, Some(ns))
        .list(&ListParams::default())
        .await?;
    let now = ctx.clock.now().timestamp();
    let is_pod = res.group.is_empty() && res.kind == "Pod";
    let mut total = Usage::new();
    for item in list.items {
        let obj = serde_json::to_value(&item).unwrap_or(Value::Null);
        if is_pod && !quota::pod_counts(&obj, now) {
            continue;
        }
        if !quota::quota_matches(quota_obj, res, &obj) {
            continue;
        }
        for (k, v) in quota::usage(res, &obj) {
            *total.entry(k).or_default() += v;
        }
    }
    Ok(total)
}

/// Recomputes one quota's status.
pub async fn reconcile(rq: Arc<ResourceQuota>, ctx: Arc<Context>) -> Result<Action, Error> {
    let Some(ns) = rq.namespace() else {
        return Ok(Action::await_change());
    };
    let key = format!("{ns}/{}", rq.name_any());
    let uid = rq.metadata.uid.clone().unwrap_or_default();
    let generation = rq.metadata.generation.unwrap_or_default();
    let dirty = ctx.dirty.lock().expect("lock").remove(&key);
    let last = ctx.synced.lock().expect("lock").get(&key).cloned();
    let has_status = rq.status.as_ref().is_some_and(|s| s.used.is_some());
    match last {
        Some((u, g, at)) if !dirty && has_status && u == uid && g == generation => {
            let since = at.elapsed();
            if since < RESYNC {
                return Ok(Action::requeue(RESYNC - since));
            }
        }
        _ => {}
    }
    let result = recount(&rq, &ctx, &ns).await;
    match &result {
        Ok(_) => {
            ctx.synced
                .lock()
                .expect("lock")
                .insert(key, (uid, generation, Instant::now()));
        }
        Err(_) => {
            ctx.dirty.lock().expect("lock").insert(key);
        }
    }
    result
}

/// Recomputes `rq`'s usage and writes its status if it changed.
async fn recount(rq: &ResourceQuota, ctx: &Context, ns: &str) -> Result<Action, Error> {
    let quota_obj = serde_json::to_value(rq).unwrap_or(Value::Null);
    let hard = rq
        .spec
        .as_ref()
        .and_then(|s| s.hard.clone())
        .unwrap_or_default();
    let names: BTreeSet<String> = hard.keys().cloned().collect();
    let mut by_resource: BTreeMap<&'static str, &'static ResourceInfo> = BTreeMap::new();
    for name in &names {
        if let Some(res) = counted_resource(name) {
            by_resource.insert(res.plural, res);
        }
    }
    let mut used = Usage::new();
    for res in by_resource.values() {
        for (k, v) in usage_of(ctx, &quota_obj, res, ns).await? {
            *used.entry(k).or_default() += v;
        }
    }
    for name in &names {
        used.entry(name.clone()).or_default();
    }
    let used_json = quota::to_resource_list(&used, Some(&names));
    let status = serde_json::json!({"hard": serde_json::to_value(&hard).unwrap_or_default(), "used": used_json});
    let current = serde_json::to_value(&rq.status).unwrap_or(Value::Null);
    if same_status(&current, &status) {
        return Ok(Action::requeue(RESYNC));
    }
    let mut next = quota_obj;
    next["status"] = status;
    let api: Api<ResourceQuota> = Api::namespaced(ctx.client.clone(), ns);
    let next: ResourceQuota = serde_json::from_value(next).expect("a ResourceQuota");
    api.replace_status(&rq.name_any(), &PostParams::default(), &next)
        .await?;
    Ok(Action::requeue(RESYNC))
}

/// Whether two statuses hold the same quantities (`1000m` is `1`).
fn same_status(a: &Value, b: &Value) -> bool {
    ["hard", "used"].iter().all(|k| {
        let (x, y) = (
            quota::from_resource_list(a.get(*k).unwrap_or(&Value::Null)),
            quota::from_resource_list(b.get(*k).unwrap_or(&Value::Null)),
        );
        x == y && a.get(*k).is_some() == b.get(*k).is_some()
    })
}

#[cfg(test)]
mod tests;
