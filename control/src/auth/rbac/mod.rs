//! The RBAC authorizer, as kube-apiserver's: Roles and ClusterRoles hold
//! rules, RoleBindings and ClusterRoleBindings grant them to users,
//! groups and service accounts, and a request is allowed when one rule
//! granted to its user allows it. Nothing is allowed otherwise.
//!
//! - [`Rbac`]: an in-memory index of the four kinds, kept in step with
//!   the store by watches; a request the index would deny is checked
//!   again on a fresh read, so a binding just created counts at once;
//! - [`rule`]: matching a rule to a request, and covering rules with
//!   rules (escalation prevention);
//! - [`escalation`]: who may create or change a role or a binding;
//! - [`policy`]: the bootstrap roles and bindings, reconciled at start.

pub mod escalation;
pub mod policy;
pub mod reconcile;
pub mod rule;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};

use super::user::UserInfo;
use crate::store::{Store, StoreError};

pub const GROUP: &str = "rbac.authorization.k8s.io";

/// The four kinds, as the store holds them.
#[derive(Debug, Default)]
pub struct Index {
    cluster_roles: HashMap<String, ClusterRole>,
    roles: HashMap<(String, String), Role>,
    cluster_role_bindings: Vec<ClusterRoleBinding>,
    role_bindings: HashMap<String, Vec<RoleBinding>>,
}

fn prefix(plural: &str) -> String {
    bosun::resources::by_path(GROUP, "v1", plural)
        .expect("rbac kinds are served")
        .storage_prefix()
}

const PLURALS: [&str; 4] = [
    "clusterroles",
    "roles",
    "clusterrolebindings",
    "rolebindings",
];

impl Index {
    /// Everything stored now, and the revision it was read at.
    pub async fn load(store: &dyn Store) -> Result<(Index, u64), StoreError> {
        let mut index = Index::default();
        let mut at = 0;
        for plural in PLURALS {
            let (kvs, rev) = store
                .list(&prefix(plural))
                .await
                .map_err(|e| crate::store::reading(plural, e))?;
            at = at.max(rev);
            for kv in kvs {
                index.add(plural, &kv.value);
            }
        }
        Ok((index, at))
    }

    fn add(&mut self, plural: &str, bytes: &[u8]) {
        fn parse<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Option<T> {
            serde_json::from_slice(bytes).ok()
        }
        match plural {
            "clusterroles" => {
                if let Some(r) = parse::<ClusterRole>(bytes) {
                    let name = r.metadata.name.clone().unwrap_or_default();
                    self.cluster_roles.insert(name, r);
                }
            }
            "roles" => {
                if let Some(r) = parse::<Role>(bytes) {
                    let key = (
                        r.metadata.namespace.clone().unwrap_or_default(),
                        r.metadata.name.clone().unwrap_or_default(),
                    );
                    self.roles.insert(key, r);
                }
            }
            "clusterrolebindings" => {
                if let Some(b) = parse::<ClusterRoleBinding>(bytes) {
                    self.cluster_role_bindings.push(b);
                }
            }
            _ => {
                if let Some(b) = parse::<RoleBinding>(bytes) {
                    let ns = b.metadata.namespace.clone().unwrap_or_default();
                    self.role_bindings.entry(ns).or_default().push(b);
                }
            }
        }
    }

    /// The rules a binding's roleRef names (none if the role is missing).
    fn role_rules(&self, role: &RoleRef, namespace: Option<&str>) -> &[PolicyRule] {
        let rules = match (role.kind.as_str(), namespace) {
            ("ClusterRole", _) => self
                .cluster_roles
                .get(&role.name)
                .and_then(|r| r.rules.as_deref()),
            ("Role", Some(ns)) => self
                .roles
                .get(&(ns.to_string(), role.name.clone()))
                .and_then(|r| r.rules.as_deref()),
            _ => None,
        };
        rules.unwrap_or(&[])
    }

    /// Every rule granted to `user` at the cluster scope and, with a
    /// namespace, in it (upstream's `VisitRulesFor`).
    pub fn rules_for(&self, user: &UserInfo, namespace: Option<&str>) -> Vec<PolicyRule> {
        let mut out = Vec::new();
        for b in &self.cluster_role_bindings {
            if applies(b.subjects.as_deref(), user, None) {
                out.extend_from_slice(self.role_rules(&b.role_ref, None));
            }
        }
        if let Some(ns) = namespace.filter(|n| !n.is_empty()) {
            for b in self.role_bindings.get(ns).into_iter().flatten() {
                if applies(b.subjects.as_deref(), user, Some(ns)) {
                    out.extend_from_slice(self.role_rules(&b.role_ref, Some(ns)));
                }
            }
        }
        out
    }

    pub fn cluster_role(&self, name: &str) -> Option<&ClusterRole> {
        self.cluster_roles.get(name)
    }

    pub fn role(&self, namespace: &str, name: &str) -> Option<&Role> {
        self.roles.get(&(namespace.to_string(), name.to_string()))
    }

    fn allows(&self, user: &UserInfo, request: &rule::Request, namespace: Option<&str>) -> bool {
        self.rules_for(user, namespace)
            .iter()
            .any(|r| rule::allows(r, request))
    }
}

/// Whether one of `subjects` is `user` (a service account subject with no
/// namespace means one in the binding's namespace).
fn applies(subjects: Option<&[Subject]>, user: &UserInfo, namespace: Option<&str>) -> bool {
    subjects
        .unwrap_or(&[])
        .iter()
        .any(|s| match s.kind.as_str() {
            "User" => s.name == user.name,
            "Group" => user.in_group(&s.name),
            "ServiceAccount" => {
                let ns = s
                    .namespace
                    .as_deref()
                    .filter(|n| !n.is_empty())
                    .or(namespace);
                ns.is_some_and(|ns| user.name == super::user::service_account_user(ns, &s.name))
            }
            _ => false,
        })
}

/// The authorizer: the index, and the store it follows.
pub struct Rbac {
    store: Arc<dyn Store>,
    index: RwLock<Arc<Index>>,
}

impl Rbac {
    /// An index of what the store holds now; [`Rbac::follow`] keeps it
    /// current.
    pub async fn new(store: Arc<dyn Store>) -> Result<Arc<Rbac>, String> {
        let (index, _) = Index::load(store.as_ref())
            .await
            .map_err(|e| e.to_string())?;
        Ok(Arc::new(Rbac {
            store,
            index: RwLock::new(Arc::new(index)),
        }))
    }

    pub fn index(&self) -> Arc<Index> {
        self.index.read().expect("rbac index lock").clone()
    }

    async fn reload(&self) -> Result<u64, StoreError> {
        let (index, rev) = Index::load(self.store.as_ref()).await?;
        *self.index.write().expect("rbac index lock") = Arc::new(index);
        Ok(rev)
    }

    /// Whether `user` may do `request` (in `namespace`). A denial is
    /// checked again on a fresh read of the store: the index may not
    /// have seen a binding that was just written.
    pub async fn allows(
        &self,
        user: &UserInfo,
        request: &rule::Request<'_>,
        namespace: Option<&str>,
    ) -> bool {
        if self.index().allows(user, request, namespace) {
            return true;
        }
        match self.reload().await {
            Ok(_) => self.index().allows(user, request, namespace),
            Err(e) => {
                tracing::warn!(error = %e, "rbac: re-reading roles and bindings");
                false
            }
        }
    }

    /// Follows the store's changes to the four kinds until the store
    /// closes: every change reloads the index (RBAC changes are rare).
    pub async fn follow(self: Arc<Self>) {
        let prefixes: Vec<String> = PLURALS.iter().map(|p| prefix(p)).collect();
        crate::store::reload_on_change(self.store.as_ref(), &prefixes, "rbac", || self.reload())
            .await
    }
}

#[cfg(test)]
mod tests;
