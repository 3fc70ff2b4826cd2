//! Claiming what an owner controls (kube-controller-manager's
//! `ControllerRefManager`): of the candidates in the owner's namespace,
//! those that name the owner as controller and still match its selector
//! are its own; matching orphans are adopted (the owner's reference patched
//! in) and owned objects that no longer match are released (the reference
//! patched out). Objects of other controllers are never touched.
//!
//! Both patches carry the object's uid as a precondition, so a claim never
//! lands on a different object that took the same name. An owner adopts
//! only after a fresh read (not the cache) shows it is still there and not
//! being deleted, and at most one such read is made per claim.

use std::sync::Arc;

use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tokio::sync::OnceCell;

use bosun::owners::{controller_of, controller_ref};
use bosun::selector::LabelSelector;

use super::api_errors::{code_of, message_of};
use super::Cached;

/// A patch to claim or release an object failed.
#[derive(Debug, thiserror::Error)]
#[error("{action} {kind} {name}: {message}")]
pub struct ClaimError {
    /// `adopting` or `releasing`.
    pub action: &'static str,
    /// The claimed object's kind, lower case (`pod`, `replicaset`).
    pub kind: String,
    pub name: String,
    pub message: String,
}

/// The bounds an owner or an owned object needs here: cached, and
/// namespaced.
pub trait Namespaced: Cached + Resource<Scope = NamespaceResourceScope> {}

impl<K: Cached + Resource<Scope = NamespaceResourceScope>> Namespaced for K {}

/// The owners an orphan may join: those in its namespace that `accepts`
/// (whose selector matches it). An object with a controller, or on its way
/// out, is nobody's to adopt. Feeds a controller's watch of orphans.
pub fn owners_that_may_adopt<O: Cached, K: Resource>(
    owners: &Store<O>,
    orphan: &K,
    accepts: impl Fn(&O) -> bool,
) -> Vec<ObjectRef<O>> {
    let meta = orphan.meta();
    if controller_of(meta).is_some() || meta.deletion_timestamp.is_some() {
        return Vec::new();
    }
    owners
        .state()
        .iter()
        .filter(|o| o.meta().namespace == meta.namespace && accepts(o))
        .map(|o| ObjectRef::from_obj(o.as_ref()))
        .collect()
}

/// Claims objects for one owner during one sync.
pub struct ClaimManager<'a, O> {
    client: Client,
    owner: &'a O,
    /// None selects nothing (a missing, empty or invalid selector).
    selector: Option<&'a LabelSelector>,
    /// The fresh read's verdict, made once, when the first orphan matches.
    can_adopt: OnceCell<bool>,
}

impl<'a, O: Namespaced> ClaimManager<'a, O> {
    pub fn new(client: Client, owner: &'a O, selector: Option<&'a LabelSelector>) -> Self {
        ClaimManager {
            client,
            owner,
            selector,
            can_adopt: OnceCell::new(),
        }
    }

    fn owner_uid(&self) -> String {
        self.owner.uid().unwrap_or_default()
    }

    fn owner_deleting(&self) -> bool {
        self.owner.meta().deletion_timestamp.is_some()
    }

    fn matches<K: Resource>(&self, obj: &K) -> bool {
        self.selector.is_some_and(|s| s.matches(obj.labels()))
    }

    /// The owner's objects among `candidates`, in their order, after
    /// adopting matching orphans and releasing owned objects that no
    /// longer match (`ClaimObject`). Adopted objects are returned as the
    /// API wrote them; objects that went away meanwhile are left out.
    pub async fn claim<K: Namespaced>(
        &self,
        candidates: impl IntoIterator<Item = Arc<K>>,
    ) -> Result<Vec<Arc<K>>, ClaimError> {
        self.claim_members(candidates, |_| true).await
    }

    /// [`claim`](Self::claim) where an object must also pass `member` to
    /// match (a StatefulSet's pods must carry its name and an ordinal).
    pub async fn claim_members<K: Namespaced>(
        &self,
        candidates: impl IntoIterator<Item = Arc<K>>,
        member: impl Fn(&K) -> bool,
    ) -> Result<Vec<Arc<K>>, ClaimError> {
        let uid = self.owner_uid();
        let deleting = self.owner_deleting();
        let mut owned = Vec::new();
        for obj in candidates {
            if obj.namespace() != self.owner.namespace() {
                continue;
            }
            let matches = self.matches(obj.as_ref()) && member(&obj);
            match controller_of(obj.meta()) {
                Some(r) if r.uid != uid => {}
                Some(_) if matches => owned.push(obj),
                // An owner on its way out leaves its objects as they are
                // (the garbage collector deals with them).
                Some(_) if deleting => {}
                Some(_) => self.release(obj.as_ref()).await?,
                None if deleting || !matches => {}
                None if obj.meta().deletion_timestamp.is_some() => {}
                None => {
                    if !self.can_adopt().await {
                        continue;
                    }
                    if let Some(adopted) = self.adopt(obj.as_ref()).await? {
                        owned.push(Arc::new(adopted));
                    }
                }
            }
        }
        Ok(owned)
    }

    /// Whether the owner, read from the API rather than the cache, is the
    /// same one and not being deleted: an owner must not adopt on its way
    /// out (`RecheckDeletionTimestamp`).
    async fn can_adopt(&self) -> bool {
        *self
            .can_adopt
            .get_or_init(|| async {
                let api: Api<O> = Api::namespaced(
                    self.client.clone(),
                    &self.owner.namespace().unwrap_or_default(),
                );
                match api.get(&self.owner.name_any()).await {
                    Ok(fresh) => {
                        fresh.uid() == self.owner.uid() && fresh.meta().deletion_timestamp.is_none()
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "rechecking the owner before adopting");
                        false
                    }
                }
            })
            .await
    }

    /// Patches the owner in as the object's controller; None if the
    /// object is gone or is no longer the one we saw.
    async fn adopt<K: Namespaced>(&self, obj: &K) -> Result<Option<K>, ClaimError> {
        let patch = json!({"metadata": {
            "ownerReferences": [controller_ref(self.owner)],
            "uid": obj.uid(),
        }});
        self.patch(obj, patch, "adopting").await
    }

    /// Patches the owner's reference out of an object that no longer
    /// matches.
    async fn release<K: Namespaced>(&self, obj: &K) -> Result<(), ClaimError> {
        let patch = json!({"metadata": {
            "ownerReferences": [{"$patch": "delete", "uid": self.owner_uid()}],
            "uid": obj.uid(),
        }});
        self.patch(obj, patch, "releasing").await.map(|_| ())
    }

    async fn patch<K: Namespaced>(
        &self,
        obj: &K,
        patch: serde_json::Value,
        action: &'static str,
    ) -> Result<Option<K>, ClaimError> {
        let api: Api<K> =
            Api::namespaced(self.client.clone(), &obj.namespace().unwrap_or_default());
        match api
            .patch(
                &obj.name_any(),
                &PatchParams::default(),
                &Patch::Strategic(patch),
            )
            .await
        {
            Ok(written) => Ok(Some(written)),
            // Gone, or replaced by another object of that name (its uid
            // differs), or being deleted.
            Err(e) if matches!(code_of(&e), Some(404 | 409 | 422)) => Ok(None),
            Err(e) => Err(ClaimError {
                action,
                kind: K::kind(&()).to_lowercase(),
                name: obj.name_any(),
                message: message_of(&e),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::toolkit::testing::TestApi;
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    use serde_json::Value;

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}}
        })
    }

    /// A ReplicaSet labelled `app=<app>`, controlled by `owner` if given.
    fn replica_set(name: &str, app: &str, owner: Option<&Deployment>) -> Value {
        let refs: Vec<_> = owner.iter().map(|d| controller_ref(*d)).collect();
        json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": app},
                         "ownerReferences": refs},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": {"app": app}},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}}
        })
    }

    fn names(sets: &[Arc<ReplicaSet>]) -> Vec<String> {
        sets.iter().map(|s| s.name_any()).collect()
    }

    #[tokio::test]
    async fn adopts_matching_orphans_releases_strays_and_leaves_others_alone() {
        let api = TestApi::start().await;
        let d: Deployment = api.create(deployment()).await;
        let other: Deployment = api
            .create(json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "other", "namespace": "default"},
                "spec": deployment()["spec"].clone()
            }))
            .await;
        let owned: ReplicaSet = api.create(replica_set("owned", "web", Some(&d))).await;
        let orphan: ReplicaSet = api.create(replica_set("orphan", "web", None)).await;
        let stray: ReplicaSet = api.create(replica_set("stray", "db", Some(&d))).await;
        let unrelated: ReplicaSet = api.create(replica_set("unrelated", "db", None)).await;
        let others: ReplicaSet = api.create(replica_set("others", "web", Some(&other))).await;

        let selector = LabelSelector::from_label_selector(&d.spec.selector).unwrap();
        let claims = ClaimManager::new(api.client.clone(), &d, Some(&selector));
        let candidates =
            [&owned, &orphan, &stray, &unrelated, &others].map(|s| Arc::new(s.clone()));
        let claimed = claims.claim(candidates).await.unwrap();
        assert_eq!(names(&claimed), ["owned", "orphan"]);
        // The adopted set is returned as the API wrote it.
        assert_eq!(
            controller_of(claimed[1].meta()).map(|r| r.uid.clone()),
            d.uid()
        );

        let sets = api.api::<ReplicaSet>(Some("default"));
        let now = |name: &'static str| {
            let sets = sets.clone();
            async move { sets.get(name).await.unwrap() }
        };
        assert_eq!(
            controller_of(now("orphan").await.meta()).map(|r| r.uid.clone()),
            d.uid()
        );
        assert!(
            controller_of(now("stray").await.meta()).is_none(),
            "released"
        );
        assert!(controller_of(now("unrelated").await.meta()).is_none());
        assert_eq!(
            controller_of(now("others").await.meta()).map(|r| r.uid.clone()),
            other.uid()
        );
    }

    #[tokio::test]
    async fn an_owner_adopts_nothing_without_a_selector_or_once_it_is_gone() {
        let api = TestApi::start().await;
        let d: Deployment = api.create(deployment()).await;
        let orphan: ReplicaSet = api.create(replica_set("orphan", "web", None)).await;

        // No selector selects nothing.
        let claims = ClaimManager::new(api.client.clone(), &d, None);
        assert!(claims
            .claim([Arc::new(orphan.clone())])
            .await
            .unwrap()
            .is_empty());

        // The cached owner still looks alive, but the API has it gone: the
        // fresh read stops the adoption.
        api.api::<Deployment>(Some("default"))
            .delete("web", &Default::default())
            .await
            .unwrap();
        let selector = LabelSelector::from_label_selector(&d.spec.selector).unwrap();
        let claims = ClaimManager::new(api.client.clone(), &d, Some(&selector));
        assert!(claims.claim([Arc::new(orphan)]).await.unwrap().is_empty());
        let now = api
            .api::<ReplicaSet>(Some("default"))
            .get("orphan")
            .await
            .unwrap();
        assert!(controller_of(now.meta()).is_none());
    }

    #[tokio::test]
    async fn a_claim_never_lands_on_another_object_of_the_same_name() {
        let api = TestApi::start().await;
        let d: Deployment = api.create(deployment()).await;
        let seen: ReplicaSet = api.create(replica_set("orphan", "web", None)).await;
        let sets = api.api::<ReplicaSet>(Some("default"));
        sets.delete("orphan", &Default::default()).await.unwrap();
        let _: ReplicaSet = api.create(replica_set("orphan", "web", None)).await;

        let selector = LabelSelector::from_label_selector(&d.spec.selector).unwrap();
        let claims = ClaimManager::new(api.client.clone(), &d, Some(&selector));
        // The cache's stale copy carries the old uid: nothing is adopted.
        assert!(claims.claim([Arc::new(seen)]).await.unwrap().is_empty());
        assert!(controller_of(sets.get("orphan").await.unwrap().meta()).is_none());
    }
}
