//! ControllerRevisions: the template history that StatefulSets and
//! DaemonSets keep, one immutable snapshot per distinct template, numbered
//! in the order they were current (kube-controller-manager's
//! `pkg/controller/history`). `rollout history` lists them and `rollout
//! undo` copies one back.
//!
//! A revision is named `<owner>-<hash>`, the hash taken over its data and
//! the owner's collision count; when a different revision already holds
//! that name, the count is bumped and the name taken again.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::{json, Value};

use bosun::owners::controller_ref;

use super::api_errors::is_status;
use super::hash::hash_value;

/// The label that carries a revision's hash (`ControllerRevisionHashLabel`).
pub const HASH_LABEL: &str = "controller.kubernetes.io/hash";

/// Longest owner-name prefix of a revision name, leaving room for the hash
/// within the 253 characters of a name.
const MAX_PREFIX: usize = 223;

/// `<prefix>-<hash>`, the prefix cut to fit (`ControllerRevisionName`).
pub fn revision_name(prefix: &str, hash: &str) -> String {
    let cut = prefix
        .char_indices()
        .nth(MAX_PREFIX)
        .map_or(prefix, |(i, _)| &prefix[..i]);
    format!("{cut}-{hash}")
}

fn data_of(revision: &ControllerRevision) -> &Value {
    &revision.data.0
}

/// A revision's number (0 when unset).
pub fn number_of(revision: &ControllerRevision) -> i64 {
    revision.revision.unwrap_or(0)
}

/// The hash of a revision's data and the owner's collision count
/// (`HashControllerRevision`).
pub fn hash_revision(revision: &ControllerRevision, collision_count: Option<i32>) -> String {
    hash_value(data_of(revision), collision_count)
}

/// A new revision of `owner` holding `data`, labelled like the owner's
/// pods (`template_labels`) plus the hash, controlled by the owner
/// (`NewControllerRevision`).
pub fn new_revision<O: Resource<DynamicType = ()>>(
    owner: &O,
    template_labels: Option<&BTreeMap<String, String>>,
    data: Value,
    revision: i64,
    collision_count: Option<i32>,
) -> ControllerRevision {
    let mut cr = ControllerRevision {
        metadata: ObjectMeta {
            namespace: owner.namespace(),
            labels: Some(template_labels.cloned().unwrap_or_default()),
            owner_references: Some(vec![controller_ref(owner)]),
            ..Default::default()
        },
        data: RawExtension(data),
        revision: Some(revision),
    };
    let hash = hash_revision(&cr, collision_count);
    cr.metadata.name = Some(revision_name(&owner.name_any(), &hash));
    cr.labels_mut().insert(HASH_LABEL.into(), hash);
    cr
}

/// Orders revisions by number, then age, then name
/// (`SortControllerRevisions`).
pub fn sort_revisions<R: Borrow<ControllerRevision>>(revisions: &mut [R]) {
    revisions.sort_by(|a, b| compare(a.borrow(), b.borrow()));
}

fn compare(a: &ControllerRevision, b: &ControllerRevision) -> Ordering {
    number_of(a)
        .cmp(&number_of(b))
        .then_with(|| {
            let created = |r: &ControllerRevision| r.metadata.creation_timestamp.clone();
            created(a).cmp(&created(b))
        })
        .then_with(|| a.name_any().cmp(&b.name_any()))
}

/// Whether two revisions hold the same data; differing hash labels say
/// no without comparing (`EqualRevision`).
pub fn equal_revision(a: &ControllerRevision, b: &ControllerRevision) -> bool {
    let hash = |r: &ControllerRevision| r.labels().get(HASH_LABEL).cloned();
    if let (Some(ha), Some(hb)) = (hash(a), hash(b)) {
        if ha != hb {
            return false;
        }
    }
    data_of(a) == data_of(b)
}

/// The revisions equal to `needle` (`FindEqualRevisions`).
pub fn find_equal_revisions<'a, R: Borrow<ControllerRevision>>(
    revisions: &'a [R],
    needle: &ControllerRevision,
) -> Vec<&'a ControllerRevision> {
    revisions
        .iter()
        .map(Borrow::borrow)
        .filter(|r| equal_revision(r, needle))
        .collect()
}

/// The number the next revision gets: one past the highest
/// (`NextRevision`).
pub fn next_revision<R: Borrow<ControllerRevision>>(revisions: &[R]) -> i64 {
    revisions
        .iter()
        .map(|r| number_of(r.borrow()))
        .max()
        .map_or(1, |m| m + 1)
}

/// Writes revisions through the API (`realHistory`).
pub struct History {
    client: Client,
}

impl History {
    pub fn new(client: Client) -> Self {
        History { client }
    }

    fn api(&self, namespace: &str) -> Api<ControllerRevision> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// Creates `revision` under its hash name. When another revision
    /// already holds the name, returns that one if it is equal, else bumps
    /// `collision_count` and tries the next name, as Kubernetes does
    /// (the caller persists the count in its status).
    pub async fn create(
        &self,
        revision: &ControllerRevision,
        collision_count: &mut i32,
    ) -> Result<ControllerRevision, kube::Error> {
        let ns = revision.namespace().unwrap_or_default();
        let prefix = revision
            .owner_references()
            .first()
            .map(|o| o.name.clone())
            .unwrap_or_else(|| revision.name_any());
        let api = self.api(&ns);
        loop {
            let mut attempt = revision.clone();
            let hash = hash_revision(&attempt, Some(*collision_count));
            attempt.metadata.name = Some(revision_name(&prefix, &hash));
            attempt.labels_mut().insert(HASH_LABEL.into(), hash);
            match api.create(&PostParams::default(), &attempt).await {
                Ok(created) => return Ok(created),
                Err(e) if is_status(&e, 409) => {
                    let existing = api.get(&attempt.name_any()).await?;
                    if equal_revision(&existing, &attempt) {
                        return Ok(existing);
                    }
                    *collision_count += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Gives an existing revision a new number (a rollback to it makes it
    /// the newest again).
    pub async fn update_revision(
        &self,
        revision: &ControllerRevision,
        number: i64,
    ) -> Result<ControllerRevision, kube::Error> {
        if number_of(revision) == number {
            return Ok(revision.clone());
        }
        self.api(&revision.namespace().unwrap_or_default())
            .patch(
                &revision.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({"revision": number})),
            )
            .await
    }

    /// Deletes a revision; one already gone is no error.
    pub async fn delete(&self, revision: &ControllerRevision) -> Result<(), kube::Error> {
        match self
            .api(&revision.namespace().unwrap_or_default())
            .delete(&revision.name_any(), &DeleteParams::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 404) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::toolkit::testing::TestApi;
    use k8s_openapi::api::apps::v1::StatefulSet;

    fn owner() -> StatefulSet {
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "web", "namespace": "default", "uid": "u-web"},
        }))
        .unwrap()
    }

    fn labels() -> BTreeMap<String, String> {
        BTreeMap::from([("app".to_string(), "nginx".to_string())])
    }

    fn revision(image: &str, number: i64) -> ControllerRevision {
        new_revision(
            &owner(),
            Some(&labels()),
            json!({"spec": {"template": {"spec": {"containers": [{"image": image}]}}}}),
            number,
            None,
        )
    }

    #[test]
    fn a_revision_is_named_by_its_hash_and_owned_by_its_owner() {
        let r = revision("web:1", 1);
        let hash = r.labels()[HASH_LABEL].clone();
        assert_eq!(r.name_any(), format!("web-{hash}"));
        assert_eq!(r.labels()["app"], "nginx");
        assert_eq!(r.namespace().as_deref(), Some("default"));
        let owner = &r.owner_references()[0];
        assert_eq!(
            (owner.uid.as_str(), owner.controller),
            ("u-web", Some(true))
        );
        assert_eq!(number_of(&r), 1);
        // Same data, same name; other data or another collision count, another.
        assert_eq!(revision("web:1", 7).name_any(), r.name_any());
        assert_ne!(revision("web:2", 1).name_any(), r.name_any());
        assert_ne!(hash_revision(&r, Some(1)), hash_revision(&r, None));
    }

    #[test]
    fn long_owner_names_are_cut_to_leave_room_for_the_hash() {
        let name = revision_name(&"x".repeat(300), "abc");
        assert_eq!(name.len(), MAX_PREFIX + 4);
        assert!(name.ends_with("x-abc"));
        assert_eq!(revision_name("web", "abc"), "web-abc");
    }

    #[test]
    fn equality_numbering_and_order() {
        let one = revision("web:1", 1);
        let two = revision("web:2", 2);
        let one_again = revision("web:1", 3);
        assert!(equal_revision(&one, &one_again));
        assert!(!equal_revision(&one, &two));
        // Equal data under different hash labels: the labels decide.
        let mut relabelled = one_again.clone();
        relabelled
            .labels_mut()
            .insert(HASH_LABEL.into(), "other".into());
        assert!(!equal_revision(&one, &relabelled));

        let mut all = vec![one_again.clone(), two.clone(), one.clone()];
        sort_revisions(&mut all);
        assert_eq!(all.iter().map(number_of).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(next_revision(&all), 4);
        assert_eq!(next_revision::<ControllerRevision>(&[]), 1);
        let equal = find_equal_revisions(&all, &one);
        assert_eq!(
            equal.iter().map(|r| number_of(r)).collect::<Vec<_>>(),
            [1, 3]
        );
    }

    #[tokio::test]
    async fn create_returns_an_equal_revision_and_steps_past_collisions() {
        let api = TestApi::start().await;
        let history = History::new(api.client.clone());
        let mut collisions = 0;
        let first = history
            .create(&revision("web:1", 1), &mut collisions)
            .await
            .unwrap();
        assert_eq!(collisions, 0);

        // The same data again: the existing revision, no collision.
        let again = history
            .create(&revision("web:1", 2), &mut collisions)
            .await
            .unwrap();
        assert_eq!(
            (again.name_any(), number_of(&again), collisions),
            (first.name_any(), 1, 0)
        );

        // Another revision squatting on the name web:2 would get: the
        // count is bumped and the next name taken.
        let wanted = revision("web:2", 2);
        let squatter_name = revision_name("web", &hash_revision(&wanted, Some(0)));
        let mut squatter = revision("web:9", 9);
        squatter.metadata.name = Some(squatter_name.clone());
        api.api::<ControllerRevision>(Some("default"))
            .create(&PostParams::default(), &squatter)
            .await
            .unwrap();
        let second = history.create(&wanted, &mut collisions).await.unwrap();
        assert_eq!(collisions, 1);
        assert_ne!(second.name_any(), squatter_name);
        assert_eq!(second.labels()[HASH_LABEL], hash_revision(&wanted, Some(1)));

        let renumbered = history.update_revision(&first, 3).await.unwrap();
        assert_eq!(number_of(&renumbered), 3);
        history.delete(&renumbered).await.unwrap();
        history.delete(&renumbered).await.unwrap();
        assert!(api
            .api::<ControllerRevision>(Some("default"))
            .get_opt(&first.name_any())
            .await
            .unwrap()
            .is_none());
    }
}
