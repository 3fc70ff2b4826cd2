//! `DockerRuntime` on the real Docker Engine: pods made of a pause sandbox
//! and containers joined to it behave like Kubernetes pods.

mod common;

use std::time::{Duration, Instant};

use bosun_agent::runtime::{
    ContainerRuntime, ContainerState, DnsConfig, PortMapping, Role, RuntimeError, SANDBOX_CONTAINER,
};
use common::{container, in_subnet24, TestNode, BUSYBOX, WEB1, WEB2};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn sandbox_sets_ip_hostname_dns_and_hosts_for_the_pod() {
    let t = TestNode::new().await;
    let pod = t.pod("web-0");
    let mut config = t.sandbox_config(&pod);
    config.fqdn = Some("web-0.nginx.default.svc.cluster.local".to_string());
    config.dns = DnsConfig {
        servers: vec!["10.96.0.10".to_string()],
        searches: vec![
            "default.svc.cluster.local".to_string(),
            "svc.cluster.local".to_string(),
        ],
        options: vec!["ndots:5".to_string()],
    };
    config.extra_hosts = vec![(
        "10.1.2.3".to_string(),
        vec!["foo.local".to_string(), "bar".to_string()],
    )];
    let sandbox = t.rt.run_sandbox(&t.node, &config).await.unwrap();

    let info = t.rt.inspect_container(&sandbox).await.unwrap();
    assert_eq!(info.role, Role::Sandbox);
    assert_eq!(info.name, SANDBOX_CONTAINER);
    assert_eq!(info.state, ContainerState::Running);
    assert_eq!(info.pod, pod);
    let ip = info.ip.clone().expect("the sandbox has an IP");
    assert!(in_subnet24(&ip, &t.subnet), "{ip} not in {}", t.subnet);
    assert!(info.started_at.is_some());

    let app = t
        .run(&pod, &sandbox, "app", BUSYBOX, &["sleep", "3600"], false)
        .await;
    // The pod's hostname, as every container of it sees it.
    assert_eq!(t.sh(&app, "hostname").await.trim(), "web-0");
    // The pod's IP is the app's too.
    let addrs = t.sh(&app, "ip -4 -o addr show eth0 || ifconfig eth0").await;
    assert!(addrs.contains(&ip), "{addrs}");

    let resolv = t.sh(&app, "cat /etc/resolv.conf").await;
    assert!(
        resolv.contains("search default.svc.cluster.local svc.cluster.local"),
        "{resolv}"
    );
    assert!(resolv.contains("ndots:5"), "{resolv}");
    // On a user-defined network Docker's embedded resolver (127.0.0.11)
    // answers and forwards to the pod's servers; it names them in a comment.
    assert!(
        resolv.contains("10.96.0.10")
            || (resolv.contains("nameserver 127.0.0.11") && dns_servers(&t, &sandbox).await),
        "{resolv}"
    );

    let hosts = t.sh(&app, "cat /etc/hosts").await;
    assert!(
        hosts.contains(&format!(
            "{ip}\tweb-0.nginx.default.svc.cluster.local web-0"
        )),
        "{hosts}"
    );
    assert!(hosts.contains("10.1.2.3\tfoo.local"), "{hosts}");
    assert!(hosts.contains("10.1.2.3\tbar"), "{hosts}");
}

/// Whether Docker kept the pod's DNS server for the embedded resolver.
async fn dns_servers(t: &TestNode, id: &str) -> bool {
    let c =
        t.rt.client()
            .await
            .unwrap()
            .inspect_container(
                id,
                None::<bollard::query_parameters::InspectContainerOptions>,
            )
            .await
            .unwrap();
    c.host_config.and_then(|h| h.dns) == Some(vec!["10.96.0.10".to_string()])
}

#[tokio::test]
async fn containers_share_the_network_and_with_share_pid_the_processes() {
    let t = TestNode::new().await;
    let pod = t.pod("shared");
    let host_port: u16 = rand::random_range(20000..30000);
    let mut config = t.sandbox_config(&pod);
    config.ports = vec![PortMapping {
        container_port: 80,
        host_port,
        protocol: "TCP".to_string(),
        host_ip: Some("127.0.0.1".to_string()),
    }];
    let sandbox = t.rt.run_sandbox(&t.node, &config).await.unwrap();

    t.run(&pod, &sandbox, "web", WEB1, &[], true).await;
    let shell = t
        .run(&pod, &sandbox, "shell", BUSYBOX, &["sleep", "3600"], true)
        .await;
    let lonely = t
        .run(&pod, &sandbox, "lonely", BUSYBOX, &["sleep", "3601"], false)
        .await;

    // One network namespace: the web server answers on the pod's loopback.
    let mut page = String::new();
    for _ in 0..50 {
        let out =
            t.rt.exec(
                &shell,
                &args(&["wget", "-qO-", "http://127.0.0.1:80/"]),
                Duration::from_secs(5),
            )
            .await
            .unwrap();
        page = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.exit_code == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(page, "web v1\n");
    assert_eq!(
        t.sh(&lonely, "wget -qO- http://127.0.0.1:80/").await,
        "web v1\n"
    );

    // The hostPort published on the sandbox reaches the pod from the host.
    let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", host_port))
        .await
        .expect("connecting to the hostPort");
    conn.write_all(b"GET / HTTP/1.0\r\n\r\n").await.unwrap();
    let mut response = String::new();
    conn.read_to_string(&mut response).await.unwrap();
    assert!(response.ends_with("web v1\n"), "{response}");

    // shareProcessNamespace: pause is PID 1 and the others' processes show.
    let ps = t.sh(&shell, "ps -o pid,comm,args").await;
    let pid1 = ps
        .lines()
        .find(|l| l.split_whitespace().next() == Some("1"))
        .unwrap_or_else(|| panic!("no PID 1 in {ps}"));
    assert!(pid1.contains("pause"), "{ps}");
    assert!(ps.contains("httpd"), "{ps}");
    assert!(!ps.contains("sleep 3601"), "{ps}");

    // Without it, a container sees only its own processes.
    let ps = t.sh(&lonely, "ps -o pid,args").await;
    assert!(!ps.contains("pause"), "{ps}");
    assert!(!ps.contains("httpd"), "{ps}");
    assert!(ps.contains("sleep 3601"), "{ps}");

    // An orphan goes to PID 1 (pause), which reaps it when it dies: no
    // zombie is left behind.
    // (Its output goes nowhere, or the exec would wait for it to close.)
    t.sh(&shell, "sleep 1 </dev/null >/dev/null 2>&1 & exit 0")
        .await;
    let ps = t.sh(&shell, "ps -o pid,ppid,args").await;
    let orphan = ps
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4 && f[1] == "1" && f[2] == "sleep" && f[3] == "1")
                .then(|| f[0].to_string())
        })
        .unwrap_or_else(|| panic!("the orphan is not pause's child: {ps}"));
    // It dies after a second; reaped, its /proc entry goes (a zombie's
    // stays, in state Z).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stat = t
            .sh(
                &shell,
                &format!("cat /proc/{orphan}/stat 2>/dev/null || true"),
            )
            .await;
        if stat.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the orphan {orphan} was not reaped: {stat}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stats = t.sh(&shell, "cat /proc/[0-9]*/stat").await;
    let zombies: Vec<&str> = stats
        .lines()
        .filter(|l| {
            l.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z'))
        })
        .collect();
    assert!(zombies.is_empty(), "zombies: {zombies:?}");

    // pause ends at once on SIGTERM, with status 0.
    let started = Instant::now();
    t.rt.stop_container(&sandbox, Duration::from_secs(20))
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "stopping the sandbox took {:?}",
        started.elapsed()
    );
    let info = t.wait_exited(&sandbox).await;
    assert_eq!(info.exit_code, Some(0));
}

#[tokio::test]
async fn stop_kills_after_the_grace_period_and_stays_idempotent() {
    let t = TestNode::new().await;
    let pod = t.pod("stubborn");
    let sandbox =
        t.rt.run_sandbox(&t.node, &t.sandbox_config(&pod))
            .await
            .unwrap();
    let stubborn = t
        .run(
            &pod,
            &sandbox,
            "stubborn",
            BUSYBOX,
            &["sh", "-c", "trap '' TERM; while true; do sleep 0.1; done"],
            false,
        )
        .await;
    let started = Instant::now();
    t.rt.stop_container(&stubborn, Duration::from_secs(1))
        .await
        .unwrap();
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(6),
        "{took:?}"
    );
    let info = t.wait_exited(&stubborn).await;
    assert_eq!(info.exit_code, Some(137), "SIGKILLed: {info:?}");

    // Stopping a stopped or a missing container, removing twice: fine.
    t.rt.stop_container(&stubborn, Duration::from_secs(1))
        .await
        .unwrap();
    t.rt.remove_container(&stubborn).await.unwrap();
    t.rt.remove_container(&stubborn).await.unwrap();
    t.rt.stop_container(&stubborn, Duration::from_secs(1))
        .await
        .unwrap();
    assert!(matches!(
        t.rt.inspect_container(&stubborn).await,
        Err(RuntimeError::NotFound(_))
    ));
    assert!(matches!(
        t.rt.start_container(&stubborn).await,
        Err(RuntimeError::NotFound(_))
    ));
}

#[tokio::test]
async fn list_containers_reports_exactly_the_nodes_containers() {
    let a = TestNode::new().await;
    let b = TestNode::new().await;

    let pod = a.pod("job");
    let sandbox =
        a.rt.run_sandbox(&a.node, &a.sandbox_config(&pod))
            .await
            .unwrap();
    let mut failing = container(
        "work",
        BUSYBOX,
        &[
            "sh",
            "-c",
            "echo hello; echo world; sleep 0.2; echo bye >&2; exit 3",
        ],
        false,
    );
    failing.restart_count = 2;
    let init =
        a.rt.create_container(&a.node, &pod, Role::Init, &sandbox, &failing)
            .await
            .unwrap();
    a.rt.start_container(&init).await.unwrap();
    let created =
        a.rt.create_container(
            &a.node,
            &pod,
            Role::App,
            &sandbox,
            &container("later", BUSYBOX, &["true"], false),
        )
        .await
        .unwrap();

    let other_pod = b.pod("other");
    let other_sandbox =
        b.rt.run_sandbox(&b.node, &b.sandbox_config(&other_pod))
            .await
            .unwrap();

    let exited = a.wait_exited(&init).await;
    assert_eq!(exited.exit_code, Some(3));
    // Both times are known. (Not necessarily in order: for a container that
    // exits at once Docker may stamp FinishedAt before StartedAt.)
    assert!(
        exited.started_at.is_some() && exited.finished_at.is_some(),
        "{exited:?}"
    );
    let (s, f) = (exited.started_at.unwrap(), exited.finished_at.unwrap());
    assert!((f - s).num_seconds().abs() < 5, "{exited:?}");
    // The last lines of stdout and stderr together.
    assert_eq!(a.rt.logs_tail(&init, 2).await.unwrap(), "world\nbye\n");
    assert_eq!(a.rt.logs_tail(&init, 1).await.unwrap(), "bye\n");

    let list = a.rt.list_containers(&a.node).await.unwrap();
    let mut ids: Vec<&str> = list.iter().map(|c| c.id.as_str()).collect();
    ids.sort();
    let mut want = vec![sandbox.as_str(), init.as_str(), created.as_str()];
    want.sort();
    assert_eq!(ids, want);
    for c in &list {
        assert_eq!(c.pod, pod);
        if c.id == sandbox {
            assert_eq!((c.role, c.name.as_str()), (Role::Sandbox, "POD"));
            assert_eq!(c.state, ContainerState::Running);
            assert!(in_subnet24(c.ip.as_deref().unwrap(), &a.subnet), "{c:?}");
            assert!(c.image.starts_with("bosun.local/pause:"));
        } else if c.id == init {
            assert_eq!((c.role, c.name.as_str()), (Role::Init, "work"));
            assert_eq!(c.state, ContainerState::Exited);
            assert_eq!(c.exit_code, Some(3));
            assert_eq!(c.restart_count, 2);
            assert_eq!(c.spec_hash, "hash-work");
            assert_eq!(c.image, BUSYBOX);
            assert!(c.image_id.starts_with("sha256:"), "{c:?}");
            assert_eq!(c.ip, None);
        } else {
            assert_eq!((c.role, c.name.as_str()), (Role::App, "later"));
            assert_eq!(c.state, ContainerState::Created);
            assert_eq!(c.exit_code, None);
            assert_eq!(c.started_at, None);
        }
    }

    let list = b.rt.list_containers(&b.node).await.unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].id, other_sandbox);
    assert_eq!(list[0].pod, other_pod);
}

#[tokio::test]
async fn exec_returns_exit_code_and_output_or_times_out() {
    let t = TestNode::new().await;
    let pod = t.pod("exec");
    let sandbox =
        t.rt.run_sandbox(&t.node, &t.sandbox_config(&pod))
            .await
            .unwrap();
    let app = t
        .run(&pod, &sandbox, "app", BUSYBOX, &["sleep", "3600"], false)
        .await;

    let out =
        t.rt.exec(
            &app,
            &args(&["sh", "-c", "echo out; echo err >&2; exit 7"]),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_eq!(out.exit_code, 7);
    assert_eq!(out.stdout, b"out\n");
    assert_eq!(out.stderr, b"err\n");

    let started = Instant::now();
    let slow =
        t.rt.exec(&app, &args(&["sleep", "5"]), Duration::from_millis(300))
            .await;
    assert!(
        matches!(slow, Err(RuntimeError::Timeout(d)) if d == Duration::from_millis(300)),
        "{slow:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));

    let missing =
        t.rt.exec(
            "no-such-container-here",
            &args(&["true"]),
            Duration::from_secs(5),
        )
        .await;
    assert!(
        matches!(missing, Err(RuntimeError::NotFound(_))),
        "{missing:?}"
    );
}

#[tokio::test]
async fn images_networks_and_version() {
    let t = TestNode::new().await;
    assert!(t.rt.version().await.unwrap().starts_with("docker://"));

    // The network is there once, with its subnet; another subnet is refused.
    t.rt.ensure_network(&t.network, &t.subnet, &t.node)
        .await
        .unwrap();
    let err =
        t.rt.ensure_network(&t.network, "10.244.127.0/24", &t.node)
            .await
            .unwrap_err();
    assert!(err.to_string().contains(&t.subnet), "{err}");

    let pause = t.rt.ensure_pause_image().await.unwrap();
    assert_eq!(
        pause,
        format!("bosun.local/pause:{}", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(t.rt.ensure_pause_image().await.unwrap(), pause);
    assert!(t.rt.image_id(&pause).await.unwrap().is_some());

    assert!(t
        .rt
        .image_id(BUSYBOX)
        .await
        .unwrap()
        .unwrap()
        .starts_with("sha256:"));
    assert_eq!(t.rt.image_id("bosun.local/nothing:0").await.unwrap(), None);

    // No registry: a pull fails with Docker's reason, and so does a
    // container of a missing image.
    let lines = std::sync::Mutex::new(Vec::<String>::new());
    let pulled = tokio::time::timeout(
        Duration::from_secs(30),
        t.rt.pull_image("bosun.invalid/nothing:1", &|l| {
            lines.lock().unwrap().push(l.to_string())
        }),
    )
    .await
    .expect("the pull gave up in time");
    match pulled {
        Err(RuntimeError::PullFailed { image, message }) => {
            assert_eq!(image, "bosun.invalid/nothing:1");
            assert!(message.contains("bosun.invalid"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let pod = t.pod("noimage");
    let sandbox =
        t.rt.run_sandbox(&t.node, &t.sandbox_config(&pod))
            .await
            .unwrap();
    let err =
        t.rt.create_container(
            &t.node,
            &pod,
            Role::App,
            &sandbox,
            &container("app", "bosun.local/nothing:0", &[], false),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RuntimeError::ImageNotFound(i) if i == "bosun.local/nothing:0"),
        "{err:?}"
    );
}

/// The runtime remembers the pod network it found, so a burst of
/// sandboxes does not inspect it once each; a network removed behind its
/// back must still come back for the next pod, as the pod worker retries it
/// (ensure the network, run the sandbox).
#[tokio::test]
async fn a_pod_network_removed_behind_the_runtimes_back_comes_back() {
    let t = TestNode::new().await;
    // TestNode made the network through the runtime, which noted it.
    bosun_test_support::docker::remove_network(&t.network);
    let pod = t.pod("renet");
    let mut errors = Vec::new();
    let mut sandbox = None;
    for _ in 0..2 {
        t.rt.ensure_network(&t.network, &t.subnet, &t.node)
            .await
            .unwrap();
        match t.rt.run_sandbox(&t.node, &t.sandbox_config(&pod)).await {
            Ok(id) => {
                sandbox = Some(id);
                break;
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    let sandbox = sandbox.unwrap_or_else(|| panic!("no sandbox after a retry: {errors:?}"));
    let info = t.rt.inspect_container(&sandbox).await.unwrap();
    assert_eq!(info.state, ContainerState::Running);
    let ip = info.ip.expect("the sandbox has an IP");
    assert!(in_subnet24(&ip, &t.subnet), "{ip} not in {}", t.subnet);
}

#[tokio::test]
async fn pods_of_two_nodes_on_one_engine_reach_each_other() {
    let a = TestNode::new().await;
    let b = TestNode::new().await;
    let pod_a = a.pod("client");
    let sandbox_a =
        a.rt.run_sandbox(&a.node, &a.sandbox_config(&pod_a))
            .await
            .unwrap();
    let client = a
        .run(
            &pod_a,
            &sandbox_a,
            "client",
            BUSYBOX,
            &["sleep", "3600"],
            false,
        )
        .await;
    let pod_b = b.pod("server");
    let sandbox_b =
        b.rt.run_sandbox(&b.node, &b.sandbox_config(&pod_b))
            .await
            .unwrap();
    b.run(&pod_b, &sandbox_b, "web", WEB2, &[], false).await;
    let ip_b =
        b.rt.inspect_container(&sandbox_b)
            .await
            .unwrap()
            .ip
            .unwrap();
    assert!(in_subnet24(&ip_b, &b.subnet));

    // Docker isolates bridge networks; ensure_network's iptables rule lets
    // pod traffic through. (No `wget -T`: it segfaults in this static
    // busybox; the exec timeout bounds the wait instead.)
    let mut page = String::new();
    for _ in 0..50 {
        let out =
            a.rt.exec(
                &client,
                &args(&["wget", "-qO-", &format!("http://{ip_b}/")]),
                Duration::from_secs(5),
            )
            .await
            .unwrap();
        page = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.exit_code == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(page, "web v2\n");
}

#[tokio::test]
async fn container_config_reaches_the_process() {
    let t = TestNode::new().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("data.txt"), "from the host\n").unwrap();
    let pod = t.pod("configured");
    let sandbox =
        t.rt.run_sandbox(&t.node, &t.sandbox_config(&pod))
            .await
            .unwrap();
    let mut config = container("app", BUSYBOX, &["3600"], false);
    config.entrypoint = args(&["sleep"]);
    config.env = vec![("GREETING".to_string(), "hello there".to_string())];
    config.working_dir = Some("/tmp".to_string());
    config.mounts = vec![bosun_agent::runtime::Mount {
        host_path: dir.path().display().to_string(),
        container_path: "/data".to_string(),
        read_only: true,
    }];
    config.run_as_user = Some(1000);
    config.run_as_group = Some(3000);
    config.read_only_root_fs = true;
    config.memory_limit = Some(64 * 1024 * 1024);
    config.cpu_limit_millis = Some(500);
    config.cpu_request_millis = Some(250);
    config.cap_drop = args(&["NET_RAW"]);
    let id =
        t.rt.create_container(&t.node, &pod, Role::App, &sandbox, &config)
            .await
            .unwrap();
    t.rt.start_container(&id).await.unwrap();

    assert_eq!(t.sh(&id, "id -u; id -g").await, "1000\n3000\n");
    assert_eq!(
        t.sh(&id, "echo $GREETING; pwd").await,
        "hello there\n/tmp\n"
    );
    assert_eq!(t.sh(&id, "cat /data/data.txt").await, "from the host\n");
    assert!(t.sh(&id, "ps -o args").await.contains("sleep 3600"));
    // Read-only: neither the bind mount nor the root filesystem is writable.
    assert_eq!(
        t.sh(
            &id,
            "touch /data/x 2>/dev/null || echo ro; touch /x 2>/dev/null || echo ro"
        )
        .await,
        "ro\nro\n"
    );

    let c =
        t.rt.client()
            .await
            .unwrap()
            .inspect_container(
                &id,
                None::<bollard::query_parameters::InspectContainerOptions>,
            )
            .await
            .unwrap();
    let hc = c.host_config.unwrap();
    assert_eq!(hc.memory, Some(64 * 1024 * 1024));
    assert_eq!(hc.nano_cpus, Some(500_000_000));
    assert_eq!(hc.cpu_shares, Some(256));
    assert_eq!(hc.cap_drop, Some(args(&["NET_RAW"])));
    assert_eq!(hc.network_mode, Some(format!("container:{sandbox}")));
    assert_eq!(hc.ipc_mode, Some(format!("container:{sandbox}")));
    let labels = c.config.unwrap().labels.unwrap();
    assert_eq!(labels.get("test.extra").map(String::as_str), Some("app"));
    assert_eq!(
        labels.get("io.bosun.pod.uid").map(String::as_str),
        Some(pod.uid.as_str())
    );

    // A container of the same name (same restart count) replaces a stopped
    // leftover, but not a running one.
    let err =
        t.rt.create_container(&t.node, &pod, Role::App, &sandbox, &config)
            .await
            .unwrap_err();
    assert!(err.to_string().contains("running"), "{err}");
    t.rt.stop_container(&id, Duration::ZERO).await.unwrap();
    let again =
        t.rt.create_container(&t.node, &pod, Role::App, &sandbox, &config)
            .await
            .unwrap();
    assert_ne!(again, id);
    assert!(matches!(
        t.rt.inspect_container(&id).await,
        Err(RuntimeError::NotFound(_))
    ));

    // A command that cannot run: start fails with Docker's reason, and the
    // container stays Created with that reason and exit code 127.
    let mut bad = container("bad", BUSYBOX, &[], false);
    bad.entrypoint = args(&["/no/such/program"]);
    let bad =
        t.rt.create_container(&t.node, &pod, Role::App, &sandbox, &bad)
            .await
            .unwrap();
    let err = t.rt.start_container(&bad).await.unwrap_err();
    assert!(err.to_string().contains("/no/such/program"), "{err}");
    let info = t.rt.inspect_container(&bad).await.unwrap();
    assert_eq!(info.state, ContainerState::Created);
    assert_eq!(info.exit_code, Some(127));
    assert!(info.reason.unwrap().contains("/no/such/program"));
}

#[tokio::test]
async fn host_network_pods_use_the_hosts_network() {
    let t = TestNode::new().await;
    let pod = t.pod("hostnet");
    let mut config = t.sandbox_config(&pod);
    config.host_network = true;
    let sandbox = t.rt.run_sandbox(&t.node, &config).await.unwrap();
    let info = t.rt.inspect_container(&sandbox).await.unwrap();
    assert_eq!(info.ip, None);
    let mut app = container("app", BUSYBOX, &["sleep", "3600"], false);
    app.host_network = true;
    let id =
        t.rt.create_container(&t.node, &pod, Role::App, &sandbox, &app)
            .await
            .unwrap();
    t.rt.start_container(&id).await.unwrap();
    let host = nix::unistd::gethostname().unwrap();
    assert_eq!(t.sh(&id, "hostname").await.trim(), host.to_str().unwrap());
}
