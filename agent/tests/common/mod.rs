//! Shared helpers for the agent's tests on real Docker.
//!
//! Every test makes its own node (`rt-test-<pid>-<random>`) with its own pod
//! network; the [`TestNode`] guard removes every container labelled with
//! that node and the network when it is dropped, also when the test panics.

#![allow(dead_code, unused_imports)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bosun_test_support::docker;
pub use bosun_test_support::images::{ensure_images, BUSYBOX, WEB1, WEB2};

use bosun_agent::runtime::docker::DockerRuntime;
use bosun_agent::runtime::{
    ContainerConfig, ContainerInfo, ContainerRuntime, ContainerState, DnsConfig, PodRef, Role,
    SandboxConfig,
};

fn random_hex(n: usize) -> String {
    (0..n)
        .map(|_| char::from_digit(rand::random_range(0..16u32), 16).unwrap())
        .collect()
}

/// One node of the tests: a runtime, a node name and its pod network.
pub struct TestNode {
    pub rt: DockerRuntime,
    pub node: String,
    pub network: String,
    pub subnet: String,
}

impl TestNode {
    /// A new node with a network on a free /24 in 10.244.128.0/17 (the
    /// lower half is left to clusters started by other tests).
    pub async fn new() -> TestNode {
        ensure_images();
        let rt = DockerRuntime::connect(None).expect("connecting to Docker");
        // The test binary's pid in the name lets `scripts/test.sh` tell
        // the leftovers of a killed run from a run still going.
        let node = format!("rt-test-{}-{}", std::process::id(), random_hex(8));
        let network = format!("bosun-{node}");
        let mut guard = TestNode {
            rt,
            node,
            network,
            subnet: String::new(),
        };
        let mut last_err = None;
        for _ in 0..20 {
            let subnet = format!("10.244.{}.0/24", rand::random_range(128..255u32));
            match guard
                .rt
                .ensure_network(&guard.network, &subnet, &guard.node)
                .await
            {
                Ok(()) => {
                    guard.subnet = subnet;
                    return guard;
                }
                // Another test's network holds this subnet: try another.
                Err(e) if e.to_string().contains("overlap") => last_err = Some(e),
                Err(e) => panic!("ensure_network: {e}"),
            }
        }
        panic!("no free subnet: {last_err:?}");
    }

    pub fn pod(&self, name: &str) -> PodRef {
        PodRef {
            namespace: "default".to_string(),
            name: name.to_string(),
            uid: format!(
                "{}-{}-4{}-8{}-{}",
                random_hex(8),
                random_hex(4),
                random_hex(3),
                random_hex(3),
                random_hex(12)
            ),
        }
    }

    pub fn sandbox_config(&self, pod: &PodRef) -> SandboxConfig {
        SandboxConfig {
            pod: pod.clone(),
            hostname: pod.name.clone(),
            fqdn: None,
            network: self.network.clone(),
            host_network: false,
            host_ipc: false,
            host_pid: false,
            dns: DnsConfig::default(),
            ports: vec![],
            extra_hosts: vec![],
            runtime: None,
        }
    }

    /// Creates and starts a container of `image` running `cmd` in the pod.
    pub async fn run(
        &self,
        pod: &PodRef,
        sandbox: &str,
        name: &str,
        image: &str,
        cmd: &[&str],
        share_pid: bool,
    ) -> String {
        let config = container(name, image, cmd, share_pid);
        let id = self
            .rt
            .create_container(&self.node, pod, Role::App, sandbox, &config)
            .await
            .unwrap_or_else(|e| panic!("create {name}: {e}"));
        self.rt
            .start_container(&id)
            .await
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        id
    }

    /// Runs `cmd` in container `id`, expecting exit code 0; returns stdout.
    pub async fn sh(&self, id: &str, script: &str) -> String {
        let out = self
            .rt
            .exec(
                id,
                &["sh".to_string(), "-c".to_string(), script.to_string()],
                Duration::from_secs(10),
            )
            .await
            .unwrap_or_else(|e| panic!("exec {script:?}: {e}"));
        assert_eq!(
            out.exit_code,
            0,
            "exec {script:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until container `id` has exited; returns what inspect says.
    pub async fn wait_exited(&self, id: &str) -> ContainerInfo {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let info = self.rt.inspect_container(id).await.expect("inspect");
            if info.state == ContainerState::Exited {
                return info;
            }
            assert!(Instant::now() < deadline, "{id} did not exit: {info:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

pub fn container(name: &str, image: &str, cmd: &[&str], share_pid: bool) -> ContainerConfig {
    ContainerConfig {
        name: name.to_string(),
        image: image.to_string(),
        args: cmd.iter().map(|s| s.to_string()).collect(),
        share_pid,
        spec_hash: format!("hash-{name}"),
        labels: BTreeMap::from([("test.extra".to_string(), name.to_string())]),
        ..Default::default()
    }
}

impl Drop for TestNode {
    fn drop(&mut self) {
        docker::remove_containers(&docker::node_containers(&self.node, &[]));
        docker::remove_network(&self.network);
    }
}

/// Whether `ip` lies in the IPv4 /24 `subnet` (`a.b.c.0/24`).
pub fn in_subnet24(ip: &str, subnet: &str) -> bool {
    let prefix = subnet.trim_end_matches("0/24");
    ip.starts_with(prefix) && ip[prefix.len()..].parse::<u8>().is_ok()
}
