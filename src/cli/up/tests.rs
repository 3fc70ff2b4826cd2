use super::*;
use clap::Parser;

#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    node: NodeArgs,
}

#[test]
fn node_flags_become_the_agents_flags() {
    let f = Flags::try_parse_from([
        "bosun",
        "--node-interface",
        "eth1",
        "--pod-cidr",
        "10.244.5.0/24",
    ])
    .unwrap();
    assert_eq!(
        f.node.agent_args(),
        ["--node-interface", "eth1", "--pod-cidr", "10.244.5.0/24"]
    );
    let f = Flags::try_parse_from(["bosun", "--node-ip", "192.168.56.11"]).unwrap();
    assert_eq!(f.node.agent_args(), ["--node-ip", "192.168.56.11"]);
    assert!(Flags::try_parse_from(["bosun"])
        .unwrap()
        .node
        .agent_args()
        .is_empty());
    // An address and an interface at once, or an address that is none,
    // is refused naming the flag.
    let both =
        Flags::try_parse_from(["bosun", "--node-ip", "10.0.0.1", "--node-interface", "eth1"]);
    assert!(both.is_err_and(|e| e.to_string().contains("--node-interface")));
    let bad = Flags::try_parse_from(["bosun", "--node-ip", "eth1"]);
    assert!(bad.is_err_and(|e| e.to_string().contains("--node-ip")));
}

#[test]
fn kubeconfig_is_written_and_updated_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kc");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: other\n  cluster:\n    server: https://x\n",
    )
    .unwrap();
    let cluster = |server: &str| {
        serde_yaml::from_str::<serde_yaml::Value>(&format!(
            "server: {server}\ncertificate-authority-data: Q0E=\n"
        ))
        .unwrap()
    };
    let names = KubeconfigNames::of(clusters::DEFAULT_NAME);
    write_kubeconfig(&path, &names, &cluster("https://127.0.0.1:1"), "t1").unwrap();
    write_kubeconfig(&path, &names, &cluster("https://127.0.0.1:2"), "t2").unwrap();
    // A named cluster is another context beside it, and the current one.
    let b = KubeconfigNames::of("b");
    write_kubeconfig(&path, &b, &cluster("https://127.0.0.1:3"), "t3").unwrap();
    let kc = kube::config::Kubeconfig::read_from(&path).unwrap();
    assert_eq!(kc.current_context.as_deref(), Some("bosun-b"));
    assert_eq!(kc.clusters.len(), 3);
    write_kubeconfig(&path, &names, &cluster("https://127.0.0.1:2"), "t2").unwrap();
    let kc = kube::config::Kubeconfig::read_from(&path).unwrap();
    assert_eq!(kc.current_context.as_deref(), Some("bosun"));
    assert_eq!(kc.clusters.len(), 3);
    let bosun = kc.clusters.iter().find(|c| c.name == "bosun").unwrap();
    assert_eq!(
        bosun.cluster.as_ref().unwrap().server.as_deref(),
        Some("https://127.0.0.1:2")
    );
    assert_eq!(
        bosun
            .cluster
            .as_ref()
            .unwrap()
            .certificate_authority_data
            .as_deref(),
        Some("Q0E=")
    );
    assert_eq!(kc.auth_infos.len(), 2);
    let ctx = kc.contexts[0].context.as_ref().unwrap();
    assert_eq!(ctx.namespace.as_deref(), Some("default"));
}

fn layout() -> ha::Layout {
    ha::Layout {
        members: (0..3)
            .map(|i| ha::Member {
                etcd_client_port: 2000 + i,
                etcd_peer_port: 3000 + i,
                control_port: 4000 + i,
            })
            .collect(),
        tls: true,
    }
}

#[test]
fn an_ha_layout_gives_every_control_plane_all_members_and_the_agent_the_others() {
    let l = layout();
    assert_eq!(
        l.store_url(),
        "etcd://127.0.0.1:2000,127.0.0.1:2001,127.0.0.1:2002"
    );
    assert_eq!(
        l.agent_args(),
        [
            "--api-servers",
            "https://127.0.0.1:4001,https://127.0.0.1:4002"
        ]
    );
    let cluster: serde_yaml::Value =
        serde_yaml::from_str("server: https://127.0.0.1:4000\ncertificate-authority-data: Q0E=")
            .unwrap();
    let body = l.kubeconfig_cluster(&cluster);
    assert_eq!(body["server"], "https://127.0.0.1:4000");
    assert_eq!(body["extensions"][0]["name"], "bosun.io/servers");
    assert_eq!(
        body["extensions"][0]["extension"]["servers"][1],
        "https://127.0.0.1:4002"
    );
}

#[test]
fn a_clusters_etcd_is_kept_and_cannot_change() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    assert_eq!(
        ha::external_store(dir, None, &Default::default()).unwrap(),
        None
    );
    let err = ha::external_store(dir, Some("http://x:2379"), &Default::default()).unwrap_err();
    assert!(err.to_string().contains("expected etcd://"), "{err}");
    let a = "etcd://10.0.0.1:2379";
    assert_eq!(
        ha::external_store(dir, Some(a), &Default::default())
            .unwrap()
            .as_deref(),
        Some(a)
    );
    assert_eq!(
        ha::external_store(dir, None, &Default::default())
            .unwrap()
            .as_deref(),
        Some(a)
    );
    let err =
        ha::external_store(dir, Some("etcd://10.0.0.2:2379"), &Default::default()).unwrap_err();
    assert!(err.to_string().contains("cannot change"), "{err}");
}
