//! The controller against the real API handlers on an in-memory store;
//! the tests play the agents (they create Nodes) and run passes.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{DeleteParams, ListParams};
use serde_json::json;

use super::*;
use crate::toolkit::testing::{eventually, TestApi};

const WAIT: Duration = Duration::from_secs(10);

fn options(cluster: &str) -> NodeIpamOptions {
    NodeIpamOptions::parse(cluster, 24).unwrap()
}

async fn setup(api: &TestApi, cluster: &str) -> Arc<Context> {
    let shared = api.shared();
    let ctx = Arc::new(Context::new(&shared, options(cluster)));
    shared.informers.start();
    synced(&ctx.nodes).await;
    ctx
}

async fn add_node(api: &TestApi, name: &str, pod_cidr: Option<&str>) {
    let spec = match pod_cidr {
        Some(c) => json!({"podCIDR": c, "podCIDRs": [c]}),
        None => json!({}),
    };
    api.create::<Node>(json!({"metadata": {"name": name}, "spec": spec}))
        .await;
}

/// Every Node's pod CIDR from the API (None: not yet set).
async fn cidrs(api: &TestApi) -> BTreeMap<String, Option<String>> {
    let nodes = api.api::<Node>(None).list(&ListParams::default()).await;
    nodes
        .unwrap()
        .items
        .into_iter()
        .map(|n| {
            let spec = n.spec.clone().unwrap_or_default();
            if let Some(c) = &spec.pod_cidr {
                assert_eq!(
                    spec.pod_cidrs.as_deref(),
                    Some(&[c.clone()][..]),
                    "podCIDRs"
                );
            }
            (n.name_any(), spec.pod_cidr)
        })
        .collect()
}

/// Runs passes until every Node has a pod CIDR; returns them.
async fn all_assigned(api: &TestApi, ctx: &Context, count: usize) -> BTreeMap<String, String> {
    eventually("every node has a pod CIDR", WAIT, || async {
        pass(ctx).await;
        let now = cidrs(api).await;
        (now.len() == count && now.values().all(Option::is_some))
            .then(|| now.into_iter().map(|(n, c)| (n, c.unwrap())).collect())
    })
    .await
}

fn assert_distinct_inside(cidrs: &BTreeMap<String, String>, cluster: &str) {
    let cluster = cidrset::parse(cluster).unwrap();
    let mut seen = BTreeSet::new();
    for (node, c) in cidrs {
        let cidr = cidrset::parse(c).unwrap();
        assert_eq!(cidr.prefix_len(), 24, "{node}: {c}");
        assert!(cluster.contains(&cidr), "{node}: {c} outside {cluster}");
        assert!(seen.insert(cidr), "{node}: {c} handed out twice: {cidrs:?}");
    }
}

async fn warnings_for(api: &TestApi, node: &str) -> Vec<String> {
    let events = api.api::<Event>(Some("default"));
    let list = events.list(&ListParams::default()).await.unwrap().items;
    list.into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(node))
        .filter(|e| e.reason.as_deref() == Some(CIDR_NOT_AVAILABLE))
        .map(|e| e.message.unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn many_nodes_get_distinct_cidrs_and_a_restart_hands_out_none_twice() {
    let api = TestApi::start().await;
    let ctx = setup(&api, "10.244.0.0/16").await;
    // The agent's old name hash put node-0 and node-59 (and node-10 and
    // node-96, ...) on one subnet.
    let names: Vec<String> = (0..100).map(|i| format!("node-{i}")).collect();
    for name in &names {
        add_node(&api, name, None).await;
    }
    let first = all_assigned(&api, &ctx, names.len()).await;
    assert_distinct_inside(&first, "10.244.0.0/16");

    // A new controller (a restarted control plane) on the same API:
    // Nodes made meanwhile get subnets none of the first ones has.
    drop(ctx);
    for i in 0..10 {
        add_node(&api, &format!("late-{i}"), None).await;
    }
    let ctx = setup(&api, "10.244.0.0/16").await;
    let second = all_assigned(&api, &ctx, names.len() + 10).await;
    assert_distinct_inside(&second, "10.244.0.0/16");
    for (node, c) in &first {
        assert_eq!(&second[node], c, "{node} kept its pod CIDR");
    }
}

#[tokio::test]
async fn a_preset_cidr_is_kept_and_marked_used_and_a_clash_is_reported() {
    let api = TestApi::start().await;
    let ctx = setup(&api, "10.244.0.0/22").await;
    add_node(&api, "fixed", Some("10.244.0.0/24")).await;
    add_node(&api, "a", None).await;
    add_node(&api, "b", None).await;
    add_node(&api, "c", None).await;
    let got = all_assigned(&api, &ctx, 4).await;
    assert_eq!(got["fixed"], "10.244.0.0/24");
    assert_distinct_inside(&got, "10.244.0.0/22");

    // A node claiming a subnet another node has keeps it, but says so.
    add_node(&api, "clash", Some("10.244.0.0/24")).await;
    let warning = eventually("a CIDRNotAvailable event for clash", WAIT, || async {
        pass(&ctx).await;
        warnings_for(&api, "clash").await.into_iter().next()
    })
    .await;
    assert!(
        warning.contains("10.244.0.0/24") && warning.contains("fixed"),
        "{warning}"
    );
    assert_eq!(warnings_for(&api, "fixed").await, Vec::<String>::new());
    assert_eq!(cidrs(&api).await["clash"].as_deref(), Some("10.244.0.0/24"));
}

#[tokio::test]
async fn a_deleted_nodes_cidr_is_free_again_and_an_exhausted_range_is_reported() {
    let api = TestApi::start().await;
    let ctx = setup(&api, "10.244.0.0/23").await;
    add_node(&api, "a", None).await;
    add_node(&api, "b", None).await;
    let got = all_assigned(&api, &ctx, 2).await;
    assert_distinct_inside(&got, "10.244.0.0/23");

    add_node(&api, "c", None).await;
    let warning = eventually("c told the range is full", WAIT, || async {
        pass(&ctx).await;
        warnings_for(&api, "c").await.into_iter().next()
    })
    .await;
    assert!(warning.contains("10.244.0.0/23"), "{warning}");
    assert_eq!(cidrs(&api).await["c"], None);

    api.api::<Node>(None)
        .delete("a", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the cache sees a gone", WAIT, || async {
        (ctx.nodes.state().len() == 2).then_some(())
    })
    .await;
    let after = all_assigned(&api, &ctx, 2).await;
    assert_eq!(after["c"], got["a"], "c got a's freed subnet");
    assert_eq!(after["b"], got["b"]);
}

#[tokio::test]
async fn the_running_controller_assigns_a_new_node_on_its_own() {
    let api = TestApi::start().await;
    let shared = api.shared();
    let run = tokio::spawn(start(&shared, options("10.244.0.0/16")));
    shared.informers.start();
    add_node(&api, "n1", None).await;
    let cidr = eventually("n1 has a pod CIDR", WAIT, || async {
        cidrs(&api).await["n1"].clone()
    })
    .await;
    assert!(cidr.starts_with("10.244."), "{cidr}");
    run.abort();
}

#[test]
fn bad_flags_name_the_flag() {
    let err = NodeIpamOptions::parse("10.244.0.0", 24).unwrap_err();
    assert!(err.starts_with("--cluster-cidr"), "{err}");
    let err = NodeIpamOptions::parse("10.244.0.0/16", 12).unwrap_err();
    assert!(err.contains("--node-cidr-mask-size"), "{err}");
}
