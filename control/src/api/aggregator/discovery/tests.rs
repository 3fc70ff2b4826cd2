use super::*;

fn widgets() -> Value {
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "demo.bosun.dev/v1",
        "resources": [{"name": "widgets", "singularName": "widget", "namespaced": true,
            "kind": "Widget", "verbs": ["get", "list"], "shortNames": ["wd"]}]})
}

fn remote(group: &str, version: &str, gp: i64, vp: i64, resources: Option<Value>) -> RemoteVersion {
    RemoteVersion {
        group: group.into(),
        version: version.into(),
        group_priority_minimum: gp,
        version_priority: vp,
        resources,
    }
}

#[test]
fn remote_groups_join_the_group_list() {
    let mut list = api_group_list(&[]);
    let before = list["groups"].as_array().unwrap().len();
    merge_group_list(
        &mut list,
        &[
            remote("demo.bosun.dev", "v1", 1000, 15, None),
            remote("metrics.k8s.io", "v1beta1", 100, 100, None),
        ],
    );
    let groups = list["groups"].as_array().unwrap();
    assert_eq!(
        groups.len(),
        before + 1,
        "metrics.k8s.io is not listed twice"
    );
    let demo = groups.last().unwrap();
    assert_eq!(demo["name"], "demo.bosun.dev");
    assert_eq!(
        demo["preferredVersion"]["groupVersion"],
        "demo.bosun.dev/v1"
    );
    let metrics = groups
        .iter()
        .find(|g| g["name"] == "metrics.k8s.io")
        .unwrap();
    assert_eq!(metrics["versions"].as_array().unwrap().len(), 1);
}

#[test]
fn aggregated_discovery_carries_the_backends_resources() {
    let mut doc = aggregated::document(&[], false, "v2");
    merge_aggregated(
        &mut doc,
        &[
            remote("demo.bosun.dev", "v1", 1000, 15, Some(widgets())),
            remote("late.bosun.dev", "v1", 1000, 15, None),
        ],
    );
    let items = doc["items"].as_array().unwrap();
    let demo = items
        .iter()
        .find(|g| g["metadata"]["name"] == "demo.bosun.dev")
        .unwrap();
    let r = &demo["versions"][0]["resources"][0];
    assert_eq!(r["resource"], "widgets");
    assert_eq!(r["scope"], "Namespaced");
    assert_eq!(r["responseKind"]["kind"], "Widget");
    assert_eq!(r["shortNames"], json!(["wd"]));
    assert_eq!(demo["versions"][0]["freshness"], "Current");
    let late = items
        .iter()
        .find(|g| g["metadata"]["name"] == "late.bosun.dev")
        .unwrap();
    assert_eq!(late["versions"][0]["freshness"], "Stale");
}

#[test]
fn a_remote_version_replaces_bosuns_own() {
    let mut doc = aggregated::document(&[], false, "v2");
    let mut list = widgets();
    list["resources"][0]["name"] = json!("pods");
    list["resources"][0]["kind"] = json!("PodMetrics");
    merge_aggregated(
        &mut doc,
        &[remote("metrics.k8s.io", "v1beta1", 100, 100, Some(list))],
    );
    let metrics = doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "metrics.k8s.io")
        .unwrap();
    let versions = metrics["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 1);
    let names: Vec<&Value> = versions[0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["resource"])
        .collect();
    assert_eq!(names, [&json!("pods")]);
}
