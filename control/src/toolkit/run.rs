//! The loop driver: [`run_controller`] runs a kube-runtime `Controller`
//! with a reconcile function and per-key exponential back-off on errors;
//! kube-runtime opens one tracing span per reconcile (object and reason).

use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;

use futures::StreamExt;
use kube::runtime::controller::Action;
use kube::runtime::Controller;
use kube::Resource;
use serde::de::DeserializeOwned;

use super::{Cached, KeyBackoff};

/// `namespace/name` (or `name`) of an object: the work-queue key
/// (client-go's `MetaNamespaceKeyFunc`), the one key of an object the
/// controllers and the scheduler use.
pub fn key_of<K: Resource>(obj: &K) -> String {
    match obj.meta().namespace.as_deref() {
        Some(ns) => format!("{ns}/{}", obj.meta().name.as_deref().unwrap_or_default()),
        None => obj.meta().name.clone().unwrap_or_default(),
    }
}

/// Runs `controller` with `reconcile` until it ends, with per-key
/// exponential back-off on errors. kube-runtime's loop opens the span per
/// reconcile (object and reason); failures are logged here once each.
pub async fn run_controller<K, C, E, R, Fut>(
    name: &'static str,
    controller: Controller<K>,
    ctx: Arc<C>,
    mut reconcile: R,
) where
    K: Cached + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Debug + Unpin,
    C: Send + Sync + 'static,
    E: std::error::Error + Send + Sync + 'static,
    R: FnMut(Arc<K>, Arc<C>) -> Fut,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
{
    let backoff = Arc::new(KeyBackoff::default());
    let on_success = backoff.clone();
    let wrapped = move |obj: Arc<K>, ctx: Arc<C>| {
        let key = key_of(obj.as_ref());
        let backoff = on_success.clone();
        let fut = reconcile(obj, ctx);
        async move {
            let timer = crate::observe::Reconcile::start(name);
            let result = fut.await;
            timer.finish(result.is_ok());
            if result.is_ok() {
                backoff.forget(&key);
            }
            result
        }
    };
    let error_policy = move |obj: Arc<K>, error: &E, _: Arc<C>| {
        let key = key_of(obj.as_ref());
        let delay = backoff.next(&key);
        tracing::warn!(controller = name, %key, %error, retry_in = ?delay, "reconcile failed");
        Action::requeue(delay)
    };
    controller
        .run(wrapped, error_policy, ctx)
        .for_each(|result| {
            if let Err(e) = result {
                tracing::debug!(controller = name, error = %e, "controller loop");
            }
            futures::future::ready(())
        })
        .await;
}
