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
