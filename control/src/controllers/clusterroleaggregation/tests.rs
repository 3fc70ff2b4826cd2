use std::sync::Arc;

use k8s_openapi::api::rbac::v1::{AggregationRule, ClusterRole};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::gathered;
use crate::auth::rbac::policy::rule;

fn role(name: &str, label: Option<&str>, verbs: &[&str]) -> Arc<ClusterRole> {
    Arc::new(ClusterRole {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: label.map(|l| [(l.to_string(), "true".to_string())].into()),
            ..Default::default()
        },
        rules: Some(vec![rule(verbs, &[""], &["pods"])]),
        aggregation_rule: None,
    })
}

#[test]
fn an_aggregated_role_gathers_the_rules_of_the_roles_it_selects_once_each() {
    let view = ClusterRole {
        metadata: ObjectMeta {
            name: Some("view".into()),
            ..Default::default()
        },
        aggregation_rule: Some(AggregationRule {
            cluster_role_selectors: Some(vec![LabelSelector {
                match_labels: Some([("agg".to_string(), "true".to_string())].into()),
                ..Default::default()
            }]),
        }),
        rules: None,
    };
    let all = vec![
        role("b", Some("agg"), &["list"]),
        role("a", Some("agg"), &["get"]),
        role("c", None, &["delete"]),
        role("d", Some("agg"), &["get"]),
    ];
    let rules = gathered(&view, &all);
    assert_eq!(
        rules,
        vec![
            rule(&["get"], &[""], &["pods"]),
            rule(&["list"], &[""], &["pods"])
        ]
    );
}
