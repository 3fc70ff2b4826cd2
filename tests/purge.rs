//! `bosun down --purge` on real Docker: after `bosun up` with a local agent
//! that runs a pod, a purge refuses without confirmation, and with `--yes`
//! leaves no container, network, iptables rule, data or kubeconfig of that
//! bosun behind. On the way, the agent's forward rule lives in bosun's own
//! chain `BOSUN-FORWARD` with one jump from `DOCKER-USER`, which a plain
//! `bosun down` keeps (the pods keep running), a restart does not
//! duplicate, and the agent puts back when someone removes it.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{
    agent_binary, chain_rules, control_binary, docker_ids, forward_jumps, rule_exists, wait_for,
    HostReaper, Run, FORWARD_CHAIN,
};

fn network_exists(name: &str) -> bool {
    Command::new("docker")
        .args(["network", "inspect", name])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("docker network inspect")
        .success()
}

#[test]
fn down_purge_removes_everything_bosun_made_on_the_host() {
    control_binary();
    agent_binary();
    let home = tempfile::tempdir().unwrap();
    let data = home.path().join("bosun").join("control");
    let agent_data = home.path().join("bosun").join("agent");
    let kubeconfig = home.path().join(".bosun/kubeconfig");
    let node = format!("purge-{}", std::process::id());
    // A /16 of its own, so the rule is this node's alone.
    let (pod_cidr, cidr) = ("10.251.7.0/24", "10.251.0.0/16");
    // On etcd with BOSUN_TEST_STORE=etcd; stopped after the reaper.
    let etcd = common::test_store_etcd();
    let store = common::up_store_args(&etcd);
    let _reaper = HostReaper {
        dirs: vec![data.clone()],
        node: node.clone(),
        cidr: cidr.into(),
    };
    let bosun = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_bosun"))
            .args(args)
            .env("HOME", home.path())
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        Run::from("bosun", args, out)
    };
    let d = data.display().to_string();
    let up = || {
        bosun(
            &[
                "up",
                "--data-dir",
                &d,
                "--port",
                "0",
                "--node-name",
                &node,
                "--pod-cidr",
                pod_cidr,
                // The node's range must lie in the cluster's pod network.
                "--cluster-cidr",
                cidr,
            ]
            .into_iter()
            .chain(store.iter().map(String::as_str))
            .collect::<Vec<&str>>(),
        )
        .ok();
    };
    up();
    // With the default service-account token volume: a tmpfs under the
    // agent's data dir, which purge unmounts before removing the dir.
    let manifest = home.path().join("pod.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: stays\nspec:\n  containers:\n  - name: app\n    image: bosun.local/not-built:1\n    imagePullPolicy: Never\n",
    )
    .unwrap();
    bosun(&["apply", "-f", &manifest.display().to_string()]).ok();
    // The pod's sandbox runs even though its image is missing.
    wait_for(
        "the pod's sandbox container",
        Duration::from_secs(60),
        || !docker_ids(&node).is_empty(),
    );
    assert!(network_exists(&format!("bosun-{node}")));
    assert!(rule_exists(cidr), "the agent adds its pod-traffic rule");
    assert_eq!(
        forward_jumps(),
        1,
        "one jump from DOCKER-USER to {FORWARD_CHAIN}"
    );
    assert!(agent_data.exists() && kubeconfig.exists());

    // A plain `bosun down` keeps pods running, and with them the rule;
    // the agent started again adds no second jump.
    bosun(&["down", "--data-dir", &d]).ok();
    assert!(
        !docker_ids(&node).is_empty(),
        "pods keep running after down"
    );
    assert!(rule_exists(cidr), "the rule stays while pods run");
    up();
    assert!(rule_exists(cidr));
    assert_eq!(forward_jumps(), 1, "a restarted agent adds no second jump");

    // A firewall reload (or a hand) drops the jump: the agent's periodic
    // network sync puts it back. Twice, so the second return cannot be
    // the restarted agent's first pod sync but only the periodic one.
    for _ in 0..2 {
        let dropped = Command::new("iptables")
            .args(["-w", "-D", "DOCKER-USER", "-j", FORWARD_CHAIN])
            .status()
            .unwrap();
        assert!(dropped.success());
        wait_for(
            "the agent to put the jump to BOSUN-FORWARD back",
            Duration::from_secs(45),
            || forward_jumps() == 1,
        );
    }

    // No terminal to ask on and no --yes: nothing happens.
    let refused = bosun(&["down", "--purge", "--data-dir", &d]);
    assert!(refused.fails().contains("pass --yes"), "{}", refused.stderr);
    assert!(
        !docker_ids(&node).is_empty(),
        "nothing removed when refused"
    );
    assert!(
        data.join("control.pid").exists(),
        "still running when refused"
    );

    let purged = bosun(&["down", "--purge", "--yes", "--data-dir", &d]);
    let text = purged.ok().to_string();
    assert!(text.contains("bosun is purged from this host."), "{text}");
    assert!(docker_ids(&node).is_empty(), "containers left: {text}");
    assert!(!network_exists(&format!("bosun-{node}")), "{text}");
    assert!(!rule_exists(cidr), "iptables rule left: {text}");
    // Other bosun agents on this machine may still use the chain; it goes
    // with its jump once this node's rule was the last one.
    match chain_rules(FORWARD_CHAIN) {
        None => assert_eq!(forward_jumps(), 0, "a jump to a removed chain: {text}"),
        Some(rules) => {
            assert!(!rules.is_empty(), "an empty {FORWARD_CHAIN} left: {text}");
            assert_eq!(forward_jumps(), 1, "{text}");
        }
    }
    for gone in [&data, &agent_data, &kubeconfig] {
        assert!(!gone.exists(), "{} left: {text}", gone.display());
    }
}
