//! Which FlowSchema a request belongs to, as upstream's
//! `apf_controller`/`rule.go`: the matching schema of lowest
//! `matchingPrecedence` (then name) whose priority level exists; a rule
//! matches when one of its subjects names the requester and one of its
//! resource or non-resource rules names what is asked.

use k8s_openapi::api::flowcontrol::v1 as fc;

/// What a request is, as APF looks at it (upstream's `RequestDigest`:
/// the user and the request info).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestDigest {
    pub user: String,
    pub groups: Vec<String>,
    pub what: Asked,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    Resource {
        /// get, list, watch, create, update, patch, delete, deletecollection.
        verb: String,
        group: String,
        resource: String,
        subresource: Option<String>,
        /// Empty for cluster-scoped requests and lists across namespaces.
        namespace: String,
    },
    /// A path outside the resource APIs: its lower-case HTTP method.
    NonResource { verb: String, path: String },
}

impl RequestDigest {
    /// Whether this is a watch (which holds its seat only while starting).
    pub fn is_watch(&self) -> bool {
        matches!(&self.what, Asked::Resource { verb, .. } if verb == "watch")
    }

    /// Upstream's long-running requests other than watches (the
    /// subresources that stream or upgrade): not held to a level at all.
    pub fn is_long_running(&self) -> bool {
        matches!(&self.what, Asked::Resource { verb, subresource, .. }
            if verb == "proxy"
                || matches!(subresource.as_deref(),
                    Some("attach" | "exec" | "proxy" | "log" | "portforward")))
    }

    /// The flow's distinguisher under a schema's method.
    pub fn distinguisher(&self, method: Option<&str>) -> &str {
        match (method, &self.what) {
            (Some("ByUser"), _) => &self.user,
            (Some("ByNamespace"), Asked::Resource { namespace, .. }) => namespace,
            _ => "",
        }
    }
}

/// `*` or a member.
fn has(list: &[String], want: &str) -> bool {
    list.iter().any(|s| s == "*" || s == want)
}

fn subject_matches(s: &fc::Subject, d: &RequestDigest) -> bool {
    match s.kind.as_str() {
        "User" => s
            .user
            .as_ref()
            .is_some_and(|u| u.name == "*" || u.name == d.user),
        "Group" => s
            .group
            .as_ref()
            .is_some_and(|g| g.name == "*" || d.groups.contains(&g.name)),
        "ServiceAccount" => s.service_account.as_ref().is_some_and(|sa| {
            let Some(rest) = d.user.strip_prefix("system:serviceaccount:") else {
                return false;
            };
            let Some((ns, name)) = rest.split_once(':') else {
                return false;
            };
            ns == sa.namespace && (sa.name == "*" || sa.name == name)
        }),
        _ => false,
    }
}

fn resource_rule_matches(r: &fc::ResourcePolicyRule, d: &Asked) -> bool {
    let Asked::Resource {
        verb,
        group,
        resource,
        subresource,
        namespace,
    } = d
    else {
        return false;
    };
    if !has(&r.verbs, verb) || !has(&r.api_groups, group) {
        return false;
    }
    let full = match subresource {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource.clone(),
    };
    if !has(&r.resources, &full) {
        return false;
    }
    if namespace.is_empty() {
        r.cluster_scope == Some(true)
    } else {
        r.namespaces.as_deref().is_some_and(|ns| has(ns, namespace))
    }
}

fn non_resource_rule_matches(r: &fc::NonResourcePolicyRule, d: &Asked) -> bool {
    let Asked::NonResource { verb, path } = d else {
        return false;
    };
    has(&r.verbs, verb)
        && r.non_resource_urls.iter().any(|u| {
            u == "*"
                || u == path
                || u.strip_suffix('*')
                    .is_some_and(|prefix| path.starts_with(prefix))
        })
}

/// Whether `rule` matches the request.
pub fn rule_matches(rule: &fc::PolicyRulesWithSubjects, d: &RequestDigest) -> bool {
    rule.subjects.iter().any(|s| subject_matches(s, d))
        && (rule
            .resource_rules
            .iter()
            .flatten()
            .any(|r| resource_rule_matches(r, &d.what))
            || rule
                .non_resource_rules
                .iter()
                .flatten()
                .any(|r| non_resource_rule_matches(r, &d.what)))
}

/// Whether any of a schema's rules matches the request.
pub fn schema_matches(spec: &fc::FlowSchemaSpec, d: &RequestDigest) -> bool {
    spec.rules.iter().flatten().any(|r| rule_matches(r, d))
}

/// The request's resource and verb from its path and query, as upstream's
/// `RequestInfoFactory`; None for the paths outside `/api` and `/apis`
/// group versions (non-resource requests).
pub fn resource_request(method: &str, path: &str, watch: bool) -> Option<Asked> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, rest) = match segments.as_slice() {
        ["api", _version, rest @ ..] if !rest.is_empty() => ("", rest),
        ["apis", group, _version, rest @ ..] if !rest.is_empty() => (*group, rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, tail @ ..] if !tail.is_empty() => (ns.to_string(), tail),
        _ => (String::new(), rest),
    };
    let (resource, name, subresource) = match rest {
        [r] => (*r, None, None),
        [r, n] => (*r, Some(*n), None),
        [r, n, s, ..] => (*r, Some(*n), Some(s.to_string())),
        [] => return None,
    };
    // `/api/v1/namespaces/NAME`: the namespace is the one named.
    let namespace = if namespace.is_empty() && group.is_empty() && resource == "namespaces" {
        name.unwrap_or_default().to_string()
    } else {
        namespace
    };
    Some(Asked::Resource {
        verb: crate::auth::verb(
            &method.parse().unwrap_or(http::Method::GET),
            name.is_some(),
            watch,
        )
        .to_string(),
        group: group.to_string(),
        resource: resource.to_string(),
        subresource,
        namespace,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn digest(user: &str, groups: &[&str], what: Asked) -> RequestDigest {
        RequestDigest {
            user: user.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            what,
        }
    }

    fn rule(v: serde_json::Value) -> fc::PolicyRulesWithSubjects {
        serde_json::from_value(v).unwrap()
    }

    fn get_pods(ns: &str) -> Asked {
        resource_request("GET", &format!("/api/v1/namespaces/{ns}/pods"), false).unwrap()
    }

    #[test]
    fn request_info_from_paths() {
        assert_eq!(
            resource_request(
                "GET",
                "/apis/apps/v1/namespaces/a/deployments/web/scale",
                false
            ),
            Some(Asked::Resource {
                verb: "get".into(),
                group: "apps".into(),
                resource: "deployments".into(),
                subresource: Some("scale".into()),
                namespace: "a".into(),
            })
        );
        let Some(Asked::Resource {
            verb, namespace, ..
        }) = resource_request("GET", "/api/v1/pods", true)
        else {
            panic!()
        };
        assert_eq!((verb.as_str(), namespace.as_str()), ("watch", ""));
        let Some(Asked::Resource {
            verb,
            namespace,
            resource,
            ..
        }) = resource_request("DELETE", "/api/v1/namespaces/team", false)
        else {
            panic!()
        };
        assert_eq!(
            (verb.as_str(), namespace.as_str(), resource.as_str()),
            ("delete", "team", "namespaces")
        );
        assert_eq!(resource_request("GET", "/apis/apps/v1", false), None);
        assert_eq!(resource_request("GET", "/healthz", false), None);
    }

    #[test]
    fn subjects_by_user_group_and_service_account() {
        let r = rule(json!({
            "subjects": [
                {"kind": "User", "user": {"name": "alice"}},
                {"kind": "Group", "group": {"name": "ops"}},
                {"kind": "ServiceAccount", "serviceAccount": {"namespace": "ci", "name": "*"}},
            ],
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                "clusterScope": true, "namespaces": ["*"]}],
        }));
        assert!(rule_matches(&r, &digest("alice", &[], get_pods("x"))));
        assert!(rule_matches(&r, &digest("bob", &["ops"], get_pods("x"))));
        assert!(rule_matches(
            &r,
            &digest("system:serviceaccount:ci:builder", &[], get_pods("x"))
        ));
        assert!(!rule_matches(
            &r,
            &digest("system:serviceaccount:prod:builder", &[], get_pods("x"))
        ));
        assert!(!rule_matches(&r, &digest("bob", &["dev"], get_pods("x"))));
    }

    #[test]
    fn resource_rules_verbs_groups_resources_and_scope() {
        let r = rule(json!({
            "subjects": [{"kind": "Group", "group": {"name": "*"}}],
            "resourceRules": [{"verbs": ["get", "list"], "apiGroups": [""],
                "resources": ["pods", "nodes/status"], "namespaces": ["team"]}],
        }));
        let d = |what| digest("u", &["g"], what);
        assert!(rule_matches(&r, &d(get_pods("team"))));
        assert!(!rule_matches(&r, &d(get_pods("other"))));
        // A list across namespaces is cluster-scoped: not without clusterScope.
        assert!(!rule_matches(
            &r,
            &d(resource_request("GET", "/api/v1/pods", false).unwrap())
        ));
        assert!(!rule_matches(
            &r,
            &d(resource_request("POST", "/api/v1/namespaces/team/pods", false).unwrap())
        ));
        assert!(!rule_matches(
            &r,
            &d(resource_request("GET", "/apis/apps/v1/namespaces/team/pods", false).unwrap())
        ));
        let status = resource_request("GET", "/api/v1/nodes/n1/status", false).unwrap();
        assert!(
            !rule_matches(&r, &d(status.clone())),
            "nodes are cluster-scoped"
        );
        let r2 = rule(json!({
            "subjects": [{"kind": "Group", "group": {"name": "*"}}],
            "resourceRules": [{"verbs": ["*"], "apiGroups": [""],
                "resources": ["nodes/status"], "clusterScope": true}],
        }));
        assert!(rule_matches(&r2, &d(status)));
        assert!(!rule_matches(
            &r2,
            &d(resource_request("GET", "/api/v1/nodes/n1", false).unwrap())
        ));
    }

    #[test]
    fn non_resource_rules_match_prefixes() {
        let r = rule(json!({
            "subjects": [{"kind": "Group", "group": {"name": "system:authenticated"}}],
            "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/openapi/*"]}],
        }));
        let nr = |verb: &str, path: &str| {
            digest(
                "u",
                &["system:authenticated"],
                Asked::NonResource {
                    verb: verb.into(),
                    path: path.into(),
                },
            )
        };
        assert!(rule_matches(&r, &nr("get", "/healthz")));
        assert!(rule_matches(&r, &nr("get", "/openapi/v2")));
        assert!(!rule_matches(&r, &nr("get", "/healthz/etcd")));
        assert!(!rule_matches(&r, &nr("post", "/healthz")));
        assert!(!rule_matches(
            &r,
            &digest("u", &["system:authenticated"], get_pods("a"))
        ));
    }

    #[test]
    fn long_running_and_distinguishers() {
        let logs = resource_request("GET", "/api/v1/namespaces/a/pods/p/log", false).unwrap();
        let d = digest("alice", &[], logs);
        assert!(d.is_long_running() && !d.is_watch());
        assert_eq!(d.distinguisher(Some("ByUser")), "alice");
        assert_eq!(d.distinguisher(Some("ByNamespace")), "a");
        assert_eq!(d.distinguisher(None), "");
        let w = digest(
            "a",
            &[],
            resource_request("GET", "/api/v1/pods", true).unwrap(),
        );
        assert!(w.is_watch() && !w.is_long_running());
    }
}
