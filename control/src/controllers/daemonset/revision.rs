//! A DaemonSet's template history as ControllerRevisions (`update.go`
//! `constructHistory`, `snapshot`, `cleanupHistory`, `Match`).
//!
//! As in Kubernetes: a revision is named `<set>-<hash>`, the hash taken
//! over the pod template and the set's collision count; it carries the
//! template's labels plus `controller-revision-hash: <hash>` (so
//! `get controllerrevision -l name=fluentd-elasticsearch` finds it) and
//! the set's annotations (`kubernetes.io/change-cause`), and holds the
//! patch that puts the template back,
//! `{"spec": {"template": {..., "$patch": "replace"}}}`, which is what
//! `kubectl rollout history/undo daemonset` read and send back.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use serde_json::{json, Value};

use bosun::owners::controller_ref;

use super::{Context, Error, HASH_LABEL};
use crate::toolkit::api_errors::is_status;
use crate::toolkit::hash::hash_value;
use crate::toolkit::history::{number_of, revision_name, sort_revisions, History};

/// The revision data for the set's template (`getPatch`).
pub fn revision_data(ds: &DaemonSet) -> Value {
    let template = serde_json::to_value(&ds.spec.template).unwrap_or(Value::Null);
    let mut template = match template {
        Value::Object(map) => map,
        _ => Default::default(),
    };
    template.insert("$patch".into(), json!("replace"));
    json!({"spec": {"template": template}})
}

/// The hash of the set's template and collision count
/// (`controller.ComputeHash`): the revision's name suffix and the pods'
/// `controller-revision-hash`.
pub fn template_hash(ds: &DaemonSet) -> String {
    let template = serde_json::to_value(&ds.spec.template).unwrap_or(Value::Null);
    let collisions = ds.status.as_ref().and_then(|s| s.collision_count);
    hash_value(&template, collisions)
}

/// Whether `revision` holds the set's current template (`Match`).
pub fn matches(ds: &DaemonSet, revision: &ControllerRevision) -> bool {
    revision.data.0 == revision_data(ds)
}

/// A new revision of the set's template numbered `number` (`snapshot`).
pub fn new_revision(ds: &DaemonSet, number: i64) -> ControllerRevision {
    let hash = template_hash(ds);
    let mut labels = ds
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(HASH_LABEL.into(), hash.clone());
    let annotations = ds.metadata.annotations.clone().filter(|a| !a.is_empty());
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(revision_name(&ds.name_any(), &hash)),
            namespace: ds.namespace(),
            labels: Some(labels),
            annotations,
            owner_references: Some(vec![controller_ref(ds)]),
            ..Default::default()
        },
        data: RawExtension(revision_data(ds)),
        revision: Some(number),
    }
}

fn api(ctx: &Context, ds: &DaemonSet) -> Api<ControllerRevision> {
    Api::namespaced(ctx.client.clone(), &ds.namespace().unwrap_or_default())
}

/// The set's current revision (the one holding its template; made or
/// renumbered to be the newest) and its older ones (`constructHistory`).
/// `revisions` are those the set controls.
pub async fn construct_history(
    ctx: &Context,
    ds: &DaemonSet,
    revisions: Vec<Arc<ControllerRevision>>,
) -> Result<(ControllerRevision, Vec<Arc<ControllerRevision>>), Error> {
    let (mut current, old): (Vec<_>, Vec<_>) = revisions.into_iter().partition(|r| matches(ds, r));
    let next = old.iter().map(|r| number_of(r)).max().unwrap_or(0) + 1;
    sort_revisions(&mut current);
    let history = History::new(ctx.client.clone());
    let Some(keep) = current.pop() else {
        return Ok((snapshot(ctx, ds, next).await?, old));
    };
    // Duplicates of the current template (a race between two syncs): keep
    // the newest.
    for dup in &current {
        history.delete(dup).await?;
    }
    let keep = if number_of(&keep) < next {
        history.update_revision(&keep, next).await?
    } else {
        (*keep).clone()
    };
    Ok((keep, old))
}

/// Creates the revision for the set's template; a different revision
/// already holding its name bumps the set's collision count and fails
/// this sync (the next one hashes again), as Kubernetes does.
async fn snapshot(ctx: &Context, ds: &DaemonSet, number: i64) -> Result<ControllerRevision, Error> {
    let revision = new_revision(ds, number);
    let api = api(ctx, ds);
    match api.create(&PostParams::default(), &revision).await {
        Ok(created) => Ok(created),
        Err(e) if is_status(&e, 409) => {
            let existing = api.get(&revision.name_any()).await?;
            if matches(ds, &existing) {
                return Ok(existing);
            }
            let count = ds
                .status
                .as_ref()
                .and_then(|s| s.collision_count)
                .unwrap_or(0)
                + 1;
            let sets: Api<DaemonSet> =
                Api::namespaced(ctx.client.clone(), &ds.namespace().unwrap_or_default());
            sets.patch_status(
                &ds.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"collisionCount": count}})),
            )
            .await?;
            Err(Error::Failed(format!(
                "hash collision on revision {}; collisionCount is now {count}",
                revision.name_any()
            )))
        }
        Err(e) => Err(e.into()),
    }
}

/// Deletes the oldest revisions beyond `revisionHistoryLimit` that no pod
/// of the set runs (`cleanupHistory`).
pub async fn cleanup_history(
    ctx: &Context,
    ds: &DaemonSet,
    mut old: Vec<Arc<ControllerRevision>>,
    live_hashes: &HashSet<String>,
) -> Result<(), Error> {
    let limit = ds.spec.revision_history_limit.unwrap_or(10).max(0) as usize;
    let mut to_kill = old.len().saturating_sub(limit);
    if to_kill == 0 {
        return Ok(());
    }
    sort_revisions(&mut old);
    let history = History::new(ctx.client.clone());
    for r in &old {
        if to_kill == 0 {
            break;
        }
        if r.labels()
            .get(HASH_LABEL)
            .is_some_and(|h| live_hashes.contains(h))
        {
            continue;
        }
        history.delete(r).await?;
        to_kill -= 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ds(image: &str) -> DaemonSet {
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "fluentd-elasticsearch", "namespace": "kube-system", "uid": "u",
                         "annotations": {"kubernetes.io/change-cause": "set image"}},
            "spec": {"selector": {"matchLabels": {"name": "fluentd-elasticsearch"}},
                     "template": {"metadata": {"labels": {"name": "fluentd-elasticsearch"}},
                                  "spec": {"containers": [{"name": "f", "image": image}]}}}
        }))
        .unwrap()
    }

    #[test]
    fn revisions_are_named_and_labelled_as_kubernetes_does() {
        let one = new_revision(&ds("a"), 1);
        let hash = template_hash(&ds("a"));
        assert_eq!(one.name_any(), format!("fluentd-elasticsearch-{hash}"));
        assert_eq!(one.labels()["name"], "fluentd-elasticsearch");
        assert_eq!(one.labels()[HASH_LABEL], hash);
        assert_eq!(one.annotations()["kubernetes.io/change-cause"], "set image");
        assert_eq!(one.data.0["spec"]["template"]["$patch"], "replace");
        assert!(matches(&ds("a"), &one));
        assert!(!matches(&ds("b"), &one));
        assert_ne!(template_hash(&ds("b")), hash);
        let mut collided = ds("a");
        collided.status = Some(Default::default());
        collided.status.as_mut().unwrap().collision_count = Some(1);
        assert_ne!(template_hash(&collided), hash);
    }
}
