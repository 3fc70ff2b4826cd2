//! Naming decisions: which names a CRD gets beside others of its group
//! and the built-in resources.

use serde_json::{json, Value};

use super::names::decide;

fn crd(group: &str, plural: &str, kind: &str, short: &[&str], accepted: bool) -> Value {
    let names = json!({"plural": plural, "singular": kind.to_lowercase(), "kind": kind,
        "listKind": format!("{kind}List"), "shortNames": short});
    json!({"metadata": {"name": format!("{plural}.{group}")},
        "spec": {"group": group, "names": names},
        "status": {"acceptedNames": if accepted { names.clone() } else { json!({"plural": "", "kind": ""}) }}})
}

#[test]
fn fresh_names_are_accepted() {
    let d = decide(
        &crd("example.com", "widgets", "Widget", &["wd"], false),
        &[],
    );
    assert!(d.conflict.is_none());
    assert_eq!(d.accepted["plural"], "widgets");
    assert_eq!(d.accepted["kind"], "Widget");
    assert_eq!(d.accepted["listKind"], "WidgetList");
    assert_eq!(d.accepted["shortNames"], json!(["wd"]));
}

#[test]
fn names_another_crd_of_the_group_holds_are_refused() {
    let holder = crd("example.com", "widgets", "Widget", &["wd"], true);
    let kind_clash = crd("example.com", "gadgets", "Widget", &[], false);
    let d = decide(&kind_clash, std::slice::from_ref(&holder));
    assert_eq!(
        d.conflict,
        Some((
            "ListKindConflict".into(),
            "\"WidgetList\" is already in use".into()
        ))
    );
    assert_eq!(d.accepted["plural"], "gadgets");
    assert_eq!(d.accepted["kind"], "");
    let short_clash = crd("example.com", "gizmos", "Gizmo", &["wd"], false);
    let d = decide(&short_clash, std::slice::from_ref(&holder));
    assert_eq!(
        d.conflict,
        Some((
            "ShortNamesConflict".into(),
            "\"wd\" is already in use".into()
        ))
    );
    // Another group is another namespace of names.
    let elsewhere = crd("other.com", "widgets", "Widget", &["wd"], false);
    assert!(decide(&elsewhere, &[holder]).conflict.is_none());
}

#[test]
fn built_in_names_of_the_group_are_refused_and_accepted_names_stay() {
    let d = decide(
        &crd("storage.k8s.io", "storageclasses", "Thing", &[], false),
        &[],
    );
    assert_eq!(
        d.conflict,
        Some((
            "PluralConflict".into(),
            "\"storageclasses\" is already in use".into()
        ))
    );
    // A CRD renaming its kind to a taken one keeps the kind it had.
    let holder = crd("example.com", "widgets", "Widget", &[], true);
    let mut mine = crd("example.com", "gadgets", "Gadget", &[], true);
    mine["spec"]["names"]["kind"] = json!("Widget");
    let d = decide(&mine, &[holder]);
    assert_eq!(d.conflict.unwrap().0, "KindConflict");
    assert_eq!(d.accepted["kind"], "Gadget");
}
