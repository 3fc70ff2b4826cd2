//! A StatefulSet's template history as ControllerRevisions
//! (`stateful_set_utils.go` `newRevision`/`ApplyRevision` and
//! `getStatefulSetRevisions`): each revision holds the patch that sets the
//! pod template, `{"spec": {"template": {..., "$patch": "replace"}}}`, as
//! Kubernetes stores it (so `kubectl rollout history/undo` read it the
//! same); the set's current revision is what its older pods run, the update
//! revision what its template says now.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use kube::ResourceExt;
use serde_json::{json, Value};

use super::{Context, Error};
use crate::toolkit::history::{
    self, find_equal_revisions, new_revision, next_revision, number_of, sort_revisions, History,
};

/// The revision data for the set's current template (`getPatch`).
pub fn revision_data(set: &StatefulSet) -> Value {
    let template = Some(&set.spec)
        .map(|s| serde_json::to_value(&s.template).unwrap_or(Value::Null))
        .unwrap_or(Value::Null);
    let mut template = match template {
        Value::Object(map) => map,
        _ => Default::default(),
    };
    template.insert("$patch".into(), json!("replace"));
    json!({"spec": {"template": template}})
}

/// A revision of the set's current template numbered `number`.
pub fn revision_of_set(set: &StatefulSet, number: i64, collision_count: i32) -> ControllerRevision {
    let labels = Some(&set.spec)
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.as_ref());
    let mut revision = new_revision(
        set,
        labels,
        revision_data(set),
        number,
        Some(collision_count),
    );
    // The set's annotations ride along (`kubernetes.io/change-cause` is
    // what `rollout history` prints); they are not part of equality.
    for (k, v) in set.annotations() {
        revision.annotations_mut().insert(k.clone(), v.clone());
    }
    revision
}

/// The set as it was at `revision`: its template replaced by the one the
/// revision holds (`ApplyRevision`).
pub fn apply_revision(set: &StatefulSet, revision: &ControllerRevision) -> StatefulSet {
    let mut out = set.clone();
    let mut template = revision
        .data
        .0
        .pointer("/spec/template")
        .cloned()
        .unwrap_or(Value::Null);
    if let Some(map) = template.as_object_mut() {
        map.remove("$patch");
    }
    if let (Some(spec), Ok(template)) = (
        Some(&mut out.spec),
        serde_json::from_value::<PodTemplateSpec>(template),
    ) {
        spec.template = template;
    }
    out
}

/// The set's current and update revisions, and its collision count,
/// creating or renumbering the update revision as needed
/// (`getStatefulSetRevisions`). `revisions` are the set's, sorted.
pub async fn current_and_update(
    ctx: &Context,
    set: &StatefulSet,
    revisions: &mut [Arc<ControllerRevision>],
) -> Result<(ControllerRevision, ControllerRevision, i32), Error> {
    sort_revisions(revisions);
    let status = set.status.clone().unwrap_or_default();
    let mut collision_count = status.collision_count.unwrap_or(0);
    let wanted = revision_of_set(set, next_revision(revisions), collision_count);
    let equal = find_equal_revisions(revisions, &wanted);
    let latest = revisions.last().map(|r| r.name_any());
    let history = History::new(ctx.client.clone());
    let update = match equal.last() {
        // The template is the latest revision's: nothing to write.
        Some(found) if Some(found.name_any()) == latest => (*found).clone(),
        // A rollback to an earlier template: that revision becomes the newest.
        Some(found) => history.update_revision(found, number_of(&wanted)).await?,
        None => history.create(&wanted, &mut collision_count).await?,
    };
    let current = status
        .current_revision
        .as_ref()
        .and_then(|name| revisions.iter().find(|r| &r.name_any() == name))
        .map(|r| (**r).clone())
        .unwrap_or_else(|| update.clone());
    Ok((current, update, collision_count))
}

/// Deletes the oldest revisions beyond `revisionHistoryLimit` that no live
/// pod runs and that are neither current nor update (`truncateHistory`).
pub async fn truncate_history(
    ctx: &Context,
    set: &StatefulSet,
    revisions: &[Arc<ControllerRevision>],
    in_use: &[&str],
) -> Result<(), Error> {
    let limit = Some(&set.spec)
        .and_then(|s| s.revision_history_limit)
        .unwrap_or(10)
        .max(0) as usize;
    let mut removable: Vec<Arc<ControllerRevision>> = revisions
        .iter()
        .filter(|r| !in_use.contains(&r.name_any().as_str()))
        .cloned()
        .collect();
    if removable.len() <= limit {
        return Ok(());
    }
    sort_revisions(&mut removable);
    let history = history::History::new(ctx.client.clone());
    for r in &removable[..removable.len() - limit] {
        history.delete(r).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(image: &str) -> StatefulSet {
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "web", "namespace": "default", "uid": "u"},
            "spec": {"selector": {"matchLabels": {"app": "nginx"}},
                     "template": {"metadata": {"labels": {"app": "nginx"}},
                                  "spec": {"containers": [{"name": "nginx", "image": image}]}}}
        }))
        .unwrap()
    }

    #[test]
    fn a_revision_replaces_the_template_and_applies_back() {
        let v1 = set("web:1");
        let r1 = revision_of_set(&v1, 1, 0);
        assert_eq!(r1.data.0["spec"]["template"]["$patch"], "replace");
        assert_eq!(r1.labels()["app"], "nginx");
        let v2 = set("web:2");
        let back = apply_revision(&v2, &r1);
        assert_eq!(
            back.spec.template.spec.unwrap().containers[0]
                .image
                .as_deref(),
            Some("web:1")
        );
        assert_ne!(revision_of_set(&v2, 2, 0).name_any(), r1.name_any());
        assert_eq!(revision_of_set(&v1, 5, 0).name_any(), r1.name_any());
        let mut recorded = set("web:1");
        recorded
            .annotations_mut()
            .insert("kubernetes.io/change-cause".into(), "kubectl apply".into());
        let r = revision_of_set(&recorded, 1, 0);
        assert_eq!(
            r.annotations()["kubernetes.io/change-cause"],
            "kubectl apply"
        );
        assert_eq!(r.name_any(), r1.name_any(), "annotations are not data");
    }
}
