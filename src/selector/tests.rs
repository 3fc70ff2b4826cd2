//! Unit tests of label and field selectors: parsing, matching, conversion from the API
//! form and kubectl's rendering.

use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn sel(s: &str) -> LabelSelector {
    LabelSelector::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

#[test]
fn equality_selectors() {
    let web = labels(&[("app", "web"), ("tier", "fe")]);
    assert!(sel("app=web").matches(&web));
    assert!(sel("app==web").matches(&web));
    assert!(!sel("app=db").matches(&web));
    assert!(sel("app!=db").matches(&web));
    assert!(!sel("app!=web").matches(&web));
    assert!(
        sel("missing!=x").matches(&web),
        "!= matches an absent label"
    );
    assert!(sel("app=web,tier=fe").matches(&web));
    assert!(!sel("app=web,tier=be").matches(&web));
    assert!(sel(" app = web , tier = fe ").matches(&web));
    assert!(sel("role=").matches(&labels(&[("role", "")])));
}

#[test]
fn set_selectors() {
    let prod = labels(&[("env", "prod"), ("tier", "be")]);
    assert!(sel("env in (prod,qa)").matches(&prod));
    assert!(!sel("env in (dev)").matches(&prod));
    assert!(sel("tier notin (fe)").matches(&prod));
    assert!(!sel("tier notin (be, fe)").matches(&prod));
    assert!(sel("env").matches(&prod));
    assert!(!sel("!env").matches(&prod));
    assert!(sel("!canary").matches(&prod));
    assert!(sel("env in (prod),!canary,tier").matches(&prod));
    assert!(sel("example.com/role notin (x)").matches(&prod));
    assert!(sel("n>3").matches(&labels(&[("n", "5")])));
    assert!(!sel("n<3").matches(&labels(&[("n", "5")])));
}

/// A lookup that is not a map (a sorted slice, as the API server keeps
/// labels) matches as the map does, the missing key included.
#[test]
fn matches_by_a_lookup() {
    let pairs = [("env", "prod"), ("tier", "be")];
    let get = |key: &str| {
        pairs
            .binary_search_by(|(k, _)| (*k).cmp(key))
            .ok()
            .map(|i| pairs[i].1)
    };
    for (s, want) in [
        ("env=prod", true),
        ("env!=prod", false),
        ("canary!=x", true),
        ("env in (qa,prod)", true),
        ("tier notin (be)", false),
        ("canary notin (x)", true),
        ("tier", true),
        ("!tier", false),
        ("!canary", true),
        ("canary", false),
        ("env=prod,tier=fe", false),
    ] {
        assert_eq!(sel(s).matches_by(get), want, "{s}");
        assert_eq!(sel(s).matches(&labels(&pairs)), want, "{s}");
    }
    assert!(!LabelSelector::nothing().matches_by(get));
}

#[test]
fn empty_matches_everything() {
    let s = sel("");
    assert!(s.is_empty());
    assert!(s.matches(&labels(&[])));
    assert!(s.matches(&labels(&[("a", "b")])));
    assert!(!sel("a=b").is_empty());
    assert!(!LabelSelector::nothing().matches(&labels(&[])));
    assert!(!LabelSelector::nothing().is_empty());
}

#[test]
fn parse_errors_name_the_bad_part() {
    let e = LabelSelector::parse("app=web,bad key=x").unwrap_err();
    assert!(e.0.contains("key"), "{e}");
    let e = LabelSelector::parse("-app=web").unwrap_err();
    assert!(e.0.contains("\"-app\""), "{e}");
    let e = LabelSelector::parse("env in prod").unwrap_err();
    assert!(e.0.contains("'('"), "{e}");
    let e = LabelSelector::parse("app=web,").unwrap_err();
    assert!(e.0.contains("identifier"), "{e}");
    let e = LabelSelector::parse("app=we b").unwrap_err();
    assert!(e.0.contains("'b'"), "{e}");
    let e = LabelSelector::parse("app=-web-").unwrap_err();
    assert!(e.0.contains("\"-web-\""), "{e}");
    assert!(LabelSelector::parse("env in (a,b").is_err());
    assert!(LabelSelector::parse("!a=b").is_err());
    assert!(LabelSelector::parse("n>x").is_err());
}

#[test]
fn display_is_the_query_form() {
    assert_eq!(sel("tier=fe,app=web").to_string(), "app=web,tier=fe");
    assert_eq!(sel("env in (qa,prod)").to_string(), "env in (prod,qa)");
    assert_eq!(sel("!a,b notin (x)").to_string(), "!a,b notin (x)");
}

#[test]
fn from_api_selector() {
    let api: metav1::LabelSelector = serde_json::from_value(serde_json::json!({
        "matchLabels": {"app": "nginx"},
        "matchExpressions": [
            {"key": "env", "operator": "In", "values": ["prod", "qa"]},
            {"key": "canary", "operator": "DoesNotExist"}
        ]
    }))
    .unwrap();
    let s = LabelSelector::from_label_selector(&api).unwrap();
    assert!(s.matches(&labels(&[("app", "nginx"), ("env", "qa")])));
    assert!(!s.matches(&labels(&[("app", "nginx"), ("env", "qa"), ("canary", "1")])));
    assert!(!s.matches(&labels(&[("app", "nginx")])));
    assert_eq!(s.to_string(), "app=nginx,!canary,env in (prod,qa)");

    let empty = LabelSelector::from_label_selector(&metav1::LabelSelector::default()).unwrap();
    assert!(empty.is_empty());

    let bad_op: metav1::LabelSelector = serde_json::from_value(serde_json::json!({
        "matchExpressions": [{"key": "a", "operator": "Near", "values": ["x"]}]
    }))
    .unwrap();
    assert!(LabelSelector::from_label_selector(&bad_op)
        .unwrap_err()
        .0
        .contains("Near"));
    let in_without_values: metav1::LabelSelector = serde_json::from_value(serde_json::json!({
        "matchExpressions": [{"key": "a", "operator": "In"}]
    }))
    .unwrap();
    assert!(LabelSelector::from_label_selector(&in_without_values).is_err());
    let exists_with_values: metav1::LabelSelector = serde_json::from_value(serde_json::json!({
        "matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]
    }))
    .unwrap();
    assert!(LabelSelector::from_label_selector(&exists_with_values).is_err());
    assert!(!LabelSelector::from_optional(None)
        .unwrap()
        .matches(&labels(&[])));
}

#[test]
fn field_selectors() {
    let get = |f: &str| match f {
        "metadata.name" => Some("web-1".to_string()),
        "status.phase" => Some("Running".to_string()),
        "spec.nodeName" => Some(String::new()),
        _ => None,
    };
    let fs = FieldSelector::parse("metadata.name=web-1,status.phase!=Pending").unwrap();
    assert!(fs.matches(get));
    assert_eq!(fs.fields(), vec!["metadata.name", "status.phase"]);
    assert!(!FieldSelector::parse("status.phase==Pending")
        .unwrap()
        .matches(get));
    assert!(FieldSelector::parse("spec.nodeName=").unwrap().matches(get));
    assert!(!FieldSelector::parse("spec.nodeName!=")
        .unwrap()
        .matches(get));
    assert!(FieldSelector::parse("").unwrap().matches(get));
    assert!(FieldSelector::parse("").unwrap().is_empty());
    let escaped = FieldSelector::parse(r"metadata.name=a\,b").unwrap();
    assert_eq!(escaped.terms()[0].value, "a,b");
    assert!(FieldSelector::parse("metadata.name")
        .unwrap_err()
        .0
        .contains("metadata.name"));
}

/// A typed API selector from its JSON form.
fn api(value: serde_json::Value) -> metav1::LabelSelector {
    serde_json::from_value(value).unwrap()
}

#[test]
fn format_label_selector_like_kubectl() {
    use serde_json::json;
    let cases = [
        // Every operator; requirements sorted by key, values sorted.
        (
            json!({"matchLabels": {"tier": "fe", "app": "web"}}),
            "app=web,tier=fe",
        ),
        (
            json!({"matchExpressions": [{"key": "env", "operator": "In", "values": ["qa", "prod"]}]}),
            "env in (prod,qa)",
        ),
        (
            json!({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["b", "a"]}]}),
            "env notin (a,b)",
        ),
        (
            json!({"matchExpressions": [{"key": "canary", "operator": "Exists"}]}),
            "canary",
        ),
        (
            json!({"matchExpressions": [{"key": "legacy", "operator": "DoesNotExist"}]}),
            "!legacy",
        ),
        // matchLabels and matchExpressions interleave by key.
        (
            json!({"matchLabels": {"app": "web", "zone": "a"}, "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["b", "a"]},
                {"key": "legacy", "operator": "DoesNotExist"},
                {"key": "beta", "operator": "Exists"}]}),
            "app=web,beta,!legacy,tier in (a,b),zone=a",
        ),
        // Selecting everything.
        (json!({}), "<none>"),
        (json!({"matchLabels": {}, "matchExpressions": []}), "<none>"),
        // Not a valid selector.
        (
            json!({"matchExpressions": [{"key": "a", "operator": "Near", "values": ["x"]}]}),
            "<error>",
        ),
        (
            json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}),
            "<error>",
        ),
        (json!({"matchLabels": {"bad key": "x"}}), "<error>"),
    ];
    for (json, want) in cases {
        assert_eq!(format_label_selector_json(Some(&json)), want, "{json}");
        assert_eq!(
            format_label_selector(Some(&api(json.clone()))),
            want,
            "{json}"
        );
        let bare = if want == "<none>" { "" } else { want };
        assert_eq!(label_selector_string_json(Some(&json)), bare, "{json}");
    }
    // A missing selector, kubectl's nil one.
    assert_eq!(format_label_selector(None), "<none>");
    assert_eq!(format_label_selector_json(None), "<none>");
    assert_eq!(label_selector_string_json(None), "");
    assert_eq!(
        format_label_selector_json(Some(&serde_json::Value::Null)),
        "<none>"
    );
    // JSON that is no selector at all.
    assert_eq!(
        format_label_selector_json(Some(&json!("app=web"))),
        "<error>"
    );
}
