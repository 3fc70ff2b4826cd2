//! The user a request is authenticated as, as Kubernetes' `user.Info`:
//! a name, a uid, groups and extra values. Authorization (RBAC, the
//! access reviews, impersonation) looks only at this.

use std::collections::BTreeMap;

/// Members may do anything; the authorizer asks no further.
pub const SYSTEM_MASTERS: &str = "system:masters";
pub const ALL_AUTHENTICATED: &str = "system:authenticated";
pub const ALL_UNAUTHENTICATED: &str = "system:unauthenticated";
pub const ANONYMOUS: &str = "system:anonymous";
pub const SERVICE_ACCOUNTS: &str = "system:serviceaccounts";
pub const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";
pub const BOOTSTRAPPERS: &str = "system:bootstrappers";
/// The in-process API clients' users, as upstream's components.
pub const APISERVER: &str = "system:apiserver";
pub const KUBE_SCHEDULER: &str = "system:kube-scheduler";
pub const KUBE_CONTROLLER_MANAGER: &str = "system:kube-controller-manager";

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// A user in `groups`, and so also in `system:authenticated`.
    pub fn authenticated(name: impl Into<String>, groups: &[&str]) -> UserInfo {
        let mut groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        if !groups.iter().any(|g| g == ALL_AUTHENTICATED) {
            groups.push(ALL_AUTHENTICATED.into());
        }
        UserInfo {
            name: name.into(),
            groups,
            ..Default::default()
        }
    }

    pub fn anonymous() -> UserInfo {
        UserInfo {
            name: ANONYMOUS.into(),
            groups: vec![ALL_UNAUTHENTICATED.into()],
            ..Default::default()
        }
    }

    /// The user of service account `name` in `namespace`.
    pub fn service_account(namespace: &str, name: &str, uid: &str) -> UserInfo {
        let ns_group = format!("{SERVICE_ACCOUNTS}:{namespace}");
        UserInfo {
            uid: uid.to_string(),
            ..UserInfo::authenticated(
                service_account_user(namespace, name),
                &[SERVICE_ACCOUNTS, &ns_group],
            )
        }
    }

    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    pub fn is_master(&self) -> bool {
        self.in_group(SYSTEM_MASTERS)
    }

    /// The namespace and name of the service account this user is.
    pub fn as_service_account(&self) -> Option<(&str, &str)> {
        split_service_account(&self.name)
    }
}

/// `system:serviceaccount:<namespace>:<name>`.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}")
}

/// The namespace and name in `system:serviceaccount:<namespace>:<name>`.
pub fn split_service_account(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix(SERVICE_ACCOUNT_PREFIX)?;
    let (ns, name) = rest.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some((ns, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_account_users_carry_their_groups() {
        let u = UserInfo::service_account("ns1", "robot", "u-1");
        assert_eq!(u.name, "system:serviceaccount:ns1:robot");
        assert_eq!(
            u.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ns1",
                "system:authenticated"
            ]
        );
        assert_eq!(u.as_service_account(), Some(("ns1", "robot")));
        assert_eq!(split_service_account("system:serviceaccount:ns1"), None);
        assert_eq!(split_service_account("system:node:n1"), None);
        assert!(!u.is_master());
        assert!(UserInfo::authenticated("a", &[SYSTEM_MASTERS]).is_master());
    }
}
