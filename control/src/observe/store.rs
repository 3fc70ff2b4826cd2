//! `bosun_store_operation_duration_seconds{operation,kind}`: the store
//! wrapped in a decorator that times each call (etcd's
//! `etcd_request_duration_seconds{operation,type}` for the embedded store).
//! A watch is timed to its stream being open.

use std::sync::Arc;
use std::time::Instant;

use bosun::resources::RESOURCES;

use super::{metrics, StoreLabels};
use crate::store::{EventStream, KeyValue, ProgressWatch, Result, Revision, Store};

/// A store that records how long each operation on the inner one takes.
pub struct ObservedStore {
    inner: Arc<dyn Store>,
}

impl ObservedStore {
    pub fn new(inner: Arc<dyn Store>) -> Self {
        ObservedStore { inner }
    }
}

/// The kind a key (or prefix) `/registry/<plural[.group]>/...` holds;
/// empty for one that names no served resource.
pub fn kind_of_key(key: &str) -> &'static str {
    let Some(segment) = key
        .strip_prefix("/registry/")
        .and_then(|k| k.split('/').next())
    else {
        return "";
    };
    RESOURCES
        .iter()
        .filter(|r| r.is_storage_version())
        .find(|r| match segment.strip_prefix(r.plural) {
            Some("") => r.group.is_empty(),
            Some(rest) => rest.strip_prefix('.') == Some(r.group),
            None => false,
        })
        .map_or("", |r| r.kind)
}

fn record(operation: &'static str, key: &str, started: Instant) {
    metrics()
        .store_duration
        .get_or_create(&StoreLabels {
            operation,
            kind: kind_of_key(key),
        })
        .observe(started.elapsed().as_secs_f64());
}

#[async_trait::async_trait]
impl Store for ObservedStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let started = Instant::now();
        let r = self.inner.get(key).await;
        record("get", key, started);
        r
    }

    async fn list(&self, prefix: &str) -> Result<(Vec<KeyValue>, Revision)> {
        let started = Instant::now();
        let r = self.inner.list(prefix).await;
        record("list", prefix, started);
        r
    }

    async fn list_stale(&self, prefix: &str) -> Result<(Vec<KeyValue>, Revision)> {
        let started = Instant::now();
        let r = self.inner.list_stale(prefix).await;
        record("list", prefix, started);
        r
    }

    async fn list_from(
        &self,
        prefix: &str,
        start: &str,
        revision: Option<Revision>,
    ) -> Result<(Vec<KeyValue>, Revision)> {
        let started = Instant::now();
        let r = self.inner.list_from(prefix, start, revision).await;
        record("list", prefix, started);
        r
    }

    async fn create(&self, key: &str, value: Vec<u8>) -> Result<Revision> {
        let started = Instant::now();
        let r = self.inner.create(key, value).await;
        record("create", key, started);
        r
    }

    async fn update(&self, key: &str, expected: Revision, value: Vec<u8>) -> Result<Revision> {
        let started = Instant::now();
        let r = self.inner.update(key, expected, value).await;
        record("update", key, started);
        r
    }

    async fn delete(&self, key: &str, expected: Revision) -> Result<Revision> {
        let started = Instant::now();
        let r = self.inner.delete(key, expected).await;
        record("delete", key, started);
        r
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<EventStream> {
        let started = Instant::now();
        let r = self.inner.watch(prefix, after).await;
        record("watch", prefix, started);
        r
    }

    async fn watch_with_progress(&self, prefix: &str, after: Revision) -> Result<ProgressWatch> {
        let started = Instant::now();
        let r = self.inner.watch_with_progress(prefix, after).await;
        record("watch", prefix, started);
        r
    }

    fn current_revision(&self) -> Revision {
        self.inner.current_revision()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_their_kinds() {
        assert_eq!(kind_of_key("/registry/pods/default/web"), "Pod");
        assert_eq!(kind_of_key("/registry/pods/"), "Pod");
        assert_eq!(
            kind_of_key("/registry/deployments.apps/default/web"),
            "Deployment"
        );
        assert_eq!(kind_of_key("/registry/namespaces/default"), "Namespace");
        assert_eq!(kind_of_key("/registry/"), "");
        assert_eq!(kind_of_key("/registry/widgets/x"), "");
        assert_eq!(kind_of_key("/elsewhere/pods/x"), "");
    }
}
