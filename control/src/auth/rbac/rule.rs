//! Whether a PolicyRule allows a request (upstream's `RuleAllows`), and
//! whether one set of rules covers another (upstream's `Covers`, which
//! escalation prevention asks of the rules a user would grant).

use k8s_openapi::api::rbac::v1::PolicyRule;

/// What a request asks, as the RBAC authorizer matches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request<'a> {
    Resource {
        verb: &'a str,
        group: &'a str,
        /// `pods`, with `log` as the subresource for `pods/log`.
        resource: &'a str,
        subresource: Option<&'a str>,
        /// Empty for a create or a list.
        name: &'a str,
    },
    NonResource {
        verb: &'a str,
        path: &'a str,
    },
}

fn has(list: &[String], want: &str) -> bool {
    list.iter().any(|v| v == want)
}

fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    has(&rule.verbs, "*") || has(&rule.verbs, verb)
}

fn list(v: &Option<Vec<String>>) -> &[String] {
    v.as_deref().unwrap_or(&[])
}

fn resource_matches(rule: &PolicyRule, resource: &str, subresource: Option<&str>) -> bool {
    list(&rule.resources).iter().any(|r| match subresource {
        _ if r == "*" => true,
        None => r == resource,
        // `pods/log`, or `*/log` for any resource's.
        Some(s) => r
            .split_once('/')
            .is_some_and(|(res, sub)| sub == s && (res == resource || res == "*")),
    })
}

fn url_matches(rule: &PolicyRule, path: &str) -> bool {
    list(&rule.non_resource_urls).iter().any(|u| {
        u == "*"
            || u == path
            || u.strip_suffix('*')
                .is_some_and(|prefix| path.starts_with(prefix))
    })
}

/// Whether `rule` allows `request`.
pub fn allows(rule: &PolicyRule, request: &Request) -> bool {
    match *request {
        Request::Resource {
            verb,
            group,
            resource,
            subresource,
            name,
        } => {
            let groups = list(&rule.api_groups);
            let names = list(&rule.resource_names);
            verb_matches(rule, verb)
                && (has(groups, "*") || has(groups, group))
                && resource_matches(rule, resource, subresource)
                && (names.is_empty() || has(names, name))
        }
        Request::NonResource { verb, path } => verb_matches(rule, verb) && url_matches(rule, path),
    }
}

/// One verb on one resource (and name), or one verb on one URL: the
/// pieces upstream breaks a rule into before asking whether they are
/// covered.
fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let mut out = Vec::new();
    let one = |v: &str| Some(vec![v.to_string()]);
    for verb in &rule.verbs {
        for group in list(&rule.api_groups) {
            for resource in list(&rule.resources) {
                let names = list(&rule.resource_names);
                if names.is_empty() {
                    out.push(PolicyRule {
                        verbs: vec![verb.clone()],
                        api_groups: one(group),
                        resources: one(resource),
                        ..Default::default()
                    });
                }
                for name in names {
                    out.push(PolicyRule {
                        verbs: vec![verb.clone()],
                        api_groups: one(group),
                        resources: one(resource),
                        resource_names: one(name),
                        ..Default::default()
                    });
                }
            }
        }
        for url in list(&rule.non_resource_urls) {
            out.push(PolicyRule {
                verbs: vec![verb.clone()],
                non_resource_urls: one(url),
                ..Default::default()
            });
        }
    }
    out
}

fn covers_all(
    owner: &[String],
    wanted: &[String],
    covers_one: impl Fn(&str, &str) -> bool,
) -> bool {
    wanted
        .iter()
        .all(|w| owner.iter().any(|o| o == "*" || covers_one(o, w)))
}

fn resource_covers(owner: &str, wanted: &str) -> bool {
    if owner == wanted {
        return true;
    }
    // `*/scale` covers `deployments/scale`; `pods/*` covers `pods/log`.
    match (owner.split_once('/'), wanted.split_once('/')) {
        (Some(("*", sub)), Some((_, wanted_sub))) => sub == wanted_sub,
        (Some((res, "*")), Some((wanted_res, _))) => res == wanted_res,
        _ => false,
    }
}

fn url_covers(owner: &str, wanted: &str) -> bool {
    owner == wanted
        || owner
            .strip_suffix('*')
            .is_some_and(|prefix| wanted.starts_with(prefix))
}

fn rule_covers(owner: &PolicyRule, sub: &PolicyRule) -> bool {
    let eq = |o: &str, w: &str| o == w;
    let owner_names = list(&owner.resource_names);
    let names_ok = owner_names.is_empty()
        || (!list(&sub.resource_names).is_empty()
            && list(&sub.resource_names)
                .iter()
                .all(|n| has(owner_names, n)));
    covers_all(&owner.verbs, &sub.verbs, eq)
        && covers_all(list(&owner.api_groups), list(&sub.api_groups), eq)
        && covers_all(
            list(&owner.resources),
            list(&sub.resources),
            resource_covers,
        )
        && covers_all(
            list(&owner.non_resource_urls),
            list(&sub.non_resource_urls),
            url_covers,
        )
        && names_ok
}

/// The parts of `wanted` that `owner` does not cover; empty if it covers
/// them all.
pub fn uncovered(owner: &[PolicyRule], wanted: &[PolicyRule]) -> Vec<PolicyRule> {
    wanted
        .iter()
        .flat_map(breakdown)
        .filter(|piece| !owner.iter().any(|o| rule_covers(o, piece)))
        .collect()
}

/// A rule as upstream's `CompactString` prints it in escalation errors:
/// `{APIGroups:["apps"], Resources:["deployments"], Verbs:["get"]}`.
pub fn compact(rule: &PolicyRule) -> String {
    let q = |v: &[String]| {
        v.iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut parts = Vec::new();
    if !list(&rule.api_groups).is_empty() {
        parts.push(format!("APIGroups:[{}]", q(list(&rule.api_groups))));
    }
    if !list(&rule.resources).is_empty() {
        parts.push(format!("Resources:[{}]", q(list(&rule.resources))));
    }
    if !list(&rule.non_resource_urls).is_empty() {
        parts.push(format!(
            "NonResourceURLs:[{}]",
            q(list(&rule.non_resource_urls))
        ));
    }
    if !list(&rule.resource_names).is_empty() {
        parts.push(format!("ResourceNames:[{}]", q(list(&rule.resource_names))));
    }
    parts.push(format!("Verbs:[{}]", q(&rule.verbs)));
    format!("{{{}}}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        PolicyRule {
            verbs: v(verbs),
            api_groups: Some(v(groups)),
            resources: Some(v(resources)),
            ..Default::default()
        }
    }

    fn res<'a>(verb: &'a str, group: &'a str, combined: &'a str) -> Request<'a> {
        let (resource, subresource) = match combined.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (combined, None),
        };
        Request::Resource {
            verb,
            group,
            resource,
            subresource,
            name: "",
        }
    }

    #[test]
    fn rules_allow_what_they_name_and_wildcards() {
        let r = rule(&["get", "list"], &[""], &["pods", "pods/log"]);
        assert!(allows(&r, &res("get", "", "pods")));
        assert!(allows(&r, &res("get", "", "pods/log")));
        assert!(!allows(&r, &res("get", "", "pods/exec")));
        assert!(!allows(&r, &res("delete", "", "pods")));
        assert!(!allows(&r, &res("get", "apps", "pods")));
        let star = rule(&["*"], &["*"], &["*"]);
        assert!(allows(
            &star,
            &res("deletecollection", "apps", "deployments")
        ));
        let scale = rule(&["get"], &["*"], &["*/scale"]);
        assert!(allows(&scale, &res("get", "apps", "deployments/scale")));
        assert!(!allows(&scale, &res("get", "apps", "deployments")));

        let mut named = rule(&["get"], &[""], &["configmaps"]);
        named.resource_names = Some(vec!["cluster-info".into()]);
        let get = |name| Request::Resource {
            verb: "get",
            group: "",
            resource: "configmaps",
            subresource: None,
            name,
        };
        assert!(allows(&named, &get("cluster-info")));
        assert!(!allows(&named, &get("other")));
        assert!(!allows(&named, &res("get", "", "configmaps")));

        let urls = PolicyRule {
            verbs: vec!["get".into()],
            non_resource_urls: Some(vec!["/healthz".into(), "/apis/*".into()]),
            ..Default::default()
        };
        let url = |path| Request::NonResource { verb: "get", path };
        assert!(allows(&urls, &url("/healthz")));
        assert!(allows(&urls, &url("/apis/apps/v1")));
        assert!(!allows(&urls, &url("/api/v1")));
    }

    #[test]
    fn coverage_breaks_rules_into_pieces() {
        let owner = vec![
            rule(&["get", "list"], &[""], &["pods", "secrets"]),
            rule(&["create"], &["apps"], &["*"]),
        ];
        assert!(uncovered(&owner, &[rule(&["get"], &[""], &["pods"])]).is_empty());
        assert!(uncovered(&owner, &[rule(&["create"], &["apps"], &["deployments"])]).is_empty());
        let missing = uncovered(&owner, &[rule(&["get", "delete"], &[""], &["pods"])]);
        assert_eq!(missing.len(), 1);
        assert_eq!(
            compact(&missing[0]),
            r#"{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}"#
        );
        // A wildcard is only covered by a wildcard.
        assert_eq!(
            uncovered(&owner, &[rule(&["*"], &[""], &["pods"])]).len(),
            1
        );
        let admin = vec![rule(&["*"], &["*"], &["*"])];
        assert!(uncovered(&admin, &[rule(&["*"], &["*"], &["*"])]).is_empty());
        // Named access does not cover unnamed access.
        let mut named = rule(&["get"], &[""], &["secrets"]);
        named.resource_names = Some(vec!["a".into()]);
        assert_eq!(
            uncovered(&[named.clone()], &[rule(&["get"], &[""], &["secrets"])]).len(),
            1
        );
        assert!(uncovered(&[rule(&["get"], &[""], &["secrets"])], &[named]).is_empty());
        assert!(uncovered(
            &[rule(&["get"], &[""], &["pods/*"])],
            &[rule(&["get"], &[""], &["pods/log"])]
        )
        .is_empty());
    }
}
