//! `bosun up --ha` on the real Docker Engine and Debian's etcd: three
//! control planes on a three-member etcd on loopback ports, and an agent
//! pointed at all three that keeps its node Ready, and runs a pod made
//! through a surviving API server, while the API server it was talking to
//! is SIGKILLed. `bosun down --purge` then leaves nothing behind.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{ensure_images, kubectl_context, wait_for, ClusterReaper, Run};

const MEMBERS: usize = 3;

/// A home of the test's own (kubeconfig, data dirs), on this host.
struct Host {
    home: PathBuf,
}

impl Host {
    fn bosun(&self, args: &[&str]) -> Run {
        let out = Command::new(env!("CARGO_BIN_EXE_bosun"))
            .args(args)
            .env("HOME", &self.home)
            .env("BOSUN_SERVICE_MANAGER", "bosun")
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        Run::from("bosun", args, out)
    }

    fn kubeconfig(&self) -> PathBuf {
        self.home.join(".bosun/kubeconfig")
    }

    fn control_dir(&self, name: &str) -> PathBuf {
        self.home.join(".bosun/clusters").join(name).join("control")
    }
}

/// Where `bosun up --ha` keeps control plane `i` (0-based) and etcd member `i`.
fn control_dir(dir: &Path, i: usize) -> PathBuf {
    if i == 0 {
        dir.to_path_buf()
    } else {
        dir.join(format!("control-{}", i + 1))
    }
}

fn etcd_dir(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("etcd-{}", i + 1))
}

/// Kills every process `bosun up --ha` started (by the pids it recorded)
/// and then what the ClusterReaper removes, also when the test fails.
struct HaReaper {
    dir: PathBuf,
    _cluster: ClusterReaper,
}

impl Drop for HaReaper {
    fn drop(&mut self) {
        for i in 0..MEMBERS {
            common::kill_started_processes(&control_dir(&self.dir, i));
            for file in ["etcd.supervisor.pid", "etcd.pid"] {
                bosun_test_support::process::kill_pid_file(&etcd_dir(&self.dir, i).join(file));
            }
        }
        // Its entry in the host's cluster registry, if `down --purge` did
        // not get to remove it: the one file that names this data dir.
        let registry = std::env::var("BOSUN_CLUSTERS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|_| match nix::unistd::geteuid().is_root() {
                true => PathBuf::from("/var/lib/bosun/clusters"),
                false => self.dir.ancestors().nth(3).unwrap().join("clusters.d"),
            });
        for entry in std::fs::read_dir(registry).into_iter().flatten().flatten() {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            let record: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
            if record["dataDir"].as_str() == Some(self.dir.to_str().unwrap()) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        // The ClusterReaper then kills the agent, removes its containers,
        // network and the dirs.
    }
}

/// Kills the control plane `bosun join --control-plane` started into a dir.
struct JoinedReaper(PathBuf);

impl Drop for JoinedReaper {
    fn drop(&mut self) {
        common::kill_started_processes(&self.0);
    }
}

fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z"))
}

fn sigkill(pid: i32) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// The remote ports of the established TCP connections `pid` holds (from
/// its socket fds and /proc/net/tcp).
fn remote_ports(pid: i32) -> Vec<u16> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|fds| {
            fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
                .filter_map(|l| {
                    let l = l.to_string_lossy().into_owned();
                    Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
                })
                .collect()
        })
        .unwrap_or_default();
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            // 01: ESTABLISHED.
            if cols.get(3) != Some(&"01")
                || !inodes.iter().any(|i| Some(&i.as_str()) == cols.get(9))
            {
                return None;
            }
            let port = cols.get(2)?.rsplit_once(':')?.1;
            u16::from_str_radix(port, 16).ok()
        })
        .collect()
}

/// The control plane (0-based) whose log says it took the Lease as
/// `identity` (`<hostname>_<uuid>`, made at each start).
fn holder_of(dir: &Path, identity: &str) -> Option<usize> {
    (0..MEMBERS).find(|&i| {
        std::fs::read_dir(control_dir(dir, i))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("control.log"))
            .any(|e| std::fs::read_to_string(e.path()).is_ok_and(|log| log.contains(identity)))
    })
}

const ROLLING: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: rolling}
spec:
  replicas: 3
  strategy: {rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}
  selector: {matchLabels: {app: rolling}}
  template:
    metadata: {labels: {app: rolling}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: bosun.local/busybox:1.35
        command: [sleep, '3600']
        env: [{name: V, value: '1'}]
        readinessProbe: {exec: {command: ['true']}, initialDelaySeconds: 3, periodSeconds: 1}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: scaled}
spec:
  replicas: 1
  selector: {matchLabels: {app: scaled}}
  template:
    metadata: {labels: {app: scaled}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - {name: c, image: bosun.local/busybox:1.35, command: [sleep, '3600']}
";

/// Starts a rolling update, SIGKILLs the control plane holding the
/// controller manager's Lease (never `down`, already dead), scales a
/// second Deployment at once, and waits for both Leases to move to the
/// one left and for both Deployments to finish through it. Returns the
/// killed control plane.
fn leader_killed_mid_rollout(
    dir: &Path,
    down: usize,
    ports: &[u16],
    kubectl: &dyn Fn(&[&str]) -> Run,
    tmp: &Path,
) -> usize {
    let holder = |via: &str, lease: &str| {
        kubectl(&[
            "--server",
            via,
            "get",
            "lease",
            "-n",
            "kube-system",
            lease,
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ])
        .stdout
    };
    let any_up = format!(
        "https://127.0.0.1:{}",
        ports[(0..MEMBERS).find(|&i| i != down).unwrap()]
    );
    // Both Leases held by one of the two left (after the first kill a
    // new holder may still be taking over).
    let mut leader = None;
    wait_for(
        "both Leases held by a live control plane",
        Duration::from_secs(60),
        || {
            let cm = holder(&any_up, "kube-controller-manager");
            let sched = holder(&any_up, "kube-scheduler");
            leader = holder_of(dir, &cm).filter(|&i| i != down);
            leader.is_some() && holder_of(dir, &sched).is_some_and(|i| i != down)
        },
    );
    let leader = leader.unwrap();
    let last = (0..MEMBERS).find(|&i| i != down && i != leader).unwrap();
    let via = format!("https://127.0.0.1:{}", ports[last]);
    let run = |args: &[&str]| {
        let mut all = vec!["--server", via.as_str()];
        all.extend_from_slice(args);
        kubectl(&all)
    };
    let manifest = tmp.join("rolling.yaml");
    std::fs::write(&manifest, ROLLING).unwrap();
    run(&["apply", "-f", manifest.to_str().unwrap()]).ok();
    for d in ["rolling", "scaled"] {
        run(&[
            "rollout",
            "status",
            &format!("deployment/{d}"),
            "--timeout=240s",
        ])
        .ok();
    }
    let before = [
        holder(&via, "kube-controller-manager"),
        holder(&via, "kube-scheduler"),
    ];
    // The rolling update starts (its new ReplicaSet exists) before the kill.
    run(&["set", "env", "deployment/rolling", "V=2"]).ok();
    wait_for(
        "the rolling update's new ReplicaSet",
        Duration::from_secs(60),
        || {
            run(&["get", "rs", "-l", "app=rolling", "-o", "name"])
                .stdout
                .lines()
                .count()
                == 2
        },
    );
    let leader_dir = control_dir(dir, leader);
    let supervisor = read_pid(&leader_dir.join("control.supervisor.pid")).unwrap();
    let control = read_pid(&leader_dir.join("control.pid")).unwrap();
    sigkill(supervisor);
    sigkill(control);
    let killed_at = std::time::Instant::now();
    run(&["scale", "deployment/scaled", "--replicas=4"]).ok();
    // Both Leases end up held by the control plane left: the one the
    // killed server held moves (the scheduler's may have been held by the
    // one left all along).
    let leases = ["kube-controller-manager", "kube-scheduler"];
    let moved_from_killed = before.clone().map(|h| holder_of(dir, &h) == Some(leader));
    let mut moved = [None, None];
    wait_for(
        "both Leases held by the control plane left",
        Duration::from_secs(60),
        || {
            for (i, lease) in leases.iter().enumerate() {
                if moved[i].is_none() && holder_of(dir, &holder(&via, lease)) == Some(last) {
                    moved[i] = Some(killed_at.elapsed());
                }
            }
            moved.iter().all(Option::is_some)
        },
    );
    for (i, lease) in leases.iter().enumerate() {
        if moved_from_killed[i] {
            let took = moved[i].unwrap();
            eprintln!(
                "leadership handed over after the SIGKILL: {lease} in {:.1} s",
                took.as_secs_f64()
            );
            // Upstream's defaults (a 15 s lease, renewals every 2 s): the
            // candidates follow the Lease and take it as it runs out, at
            // most the lease duration after the holder's last renewal,
            // which came before the kill (a retry period of slack for a
            // loaded machine).
            assert!(
                took <= Duration::from_secs(17),
                "the handover of {lease} took {took:?}"
            );
        }
    }
    for d in ["rolling", "scaled"] {
        run(&[
            "rollout",
            "status",
            &format!("deployment/{d}"),
            "--timeout=240s",
        ])
        .ok();
    }
    let ready = run(&[
        "get",
        "deployment/scaled",
        "-o",
        "jsonpath={.status.readyReplicas}",
    ]);
    assert_eq!(ready.ok(), "4");
    let sets = run(&[
        "get",
        "rs",
        "-l",
        "app=rolling",
        "-o",
        "jsonpath={range .items[*]}{.status.replicas}{\" \"}{end}",
    ]);
    let mut counts: Vec<&str> = sets.ok().split_whitespace().collect();
    counts.sort();
    assert_eq!(counts, ["0", "3"], "the rolling update did not finish");
    leader
}

/// The ports of the control planes, from their address files.
fn control_ports(dir: &Path) -> Vec<u16> {
    (0..MEMBERS)
        .map(|i| {
            let address = std::fs::read_to_string(control_dir(dir, i).join("address")).unwrap();
            address.trim().rsplit_once(':').unwrap().1.parse().unwrap()
        })
        .collect()
}

#[test]
fn an_ha_cluster_keeps_its_node_ready_and_runs_pods_while_an_api_server_is_killed() {
    if !bosun_test_support::etcd::installed() {
        eprintln!("skipping: etcd is not installed (apt-get install -y etcd-server)");
        return;
    }
    ensure_images();
    common::control_binary();
    common::agent_binary();
    let tmp = tempfile::tempdir().unwrap();
    let host = Host {
        home: tmp.path().to_path_buf(),
    };
    let name = format!("ha{}", std::process::id());
    let ctx = format!("bosun-{name}");
    let dir = host.control_dir(&name);
    let _reaper = HaReaper {
        dir: dir.clone(),
        _cluster: ClusterReaper {
            control: dir.clone(),
            node: name.clone(),
        },
    };

    let up = host.bosun(&["up", "--ha", "--name", &name, "--timeout", "240s"]);
    assert!(up.ok().contains("bosun is up."), "{}", up.stdout);
    let kubectl = |args: &[&str]| kubectl_context(&host.kubeconfig(), &ctx, args);
    let nodes = kubectl(&["get", "nodes", "-o", "name"]);
    assert_eq!(nodes.ok().trim(), format!("node/{name}"));
    let list = host.bosun(&["list"]);
    let row = list
        .ok()
        .lines()
        .find(|l| l.starts_with(&name))
        .unwrap_or_else(|| panic!("{name} not listed:\n{}", list.stdout))
        .to_string();
    assert!(row.contains("Running (HA 3/3)"), "{row}");
    for i in 0..MEMBERS {
        let etcd = read_pid(&etcd_dir(&dir, i).join("etcd.pid")).expect("an etcd pid");
        assert!(alive(etcd), "etcd member {} is not running", i + 1);
    }

    // A fourth control plane joins with the printed command: a wrong
    // certificate key is refused and leaves no key behind; the right one
    // gives an API server on the same etcd and PKI (the admin token works
    // there, its certificate verifies against the cluster CA).
    let join = up
        .stdout
        .lines()
        .find(|l| l.contains("--control-plane --certificate-key"))
        .unwrap_or_else(|| panic!("no control-plane join command:\n{}", up.stdout))
        .trim()
        .to_string();
    let join_args: Vec<&str> = join.split_whitespace().skip(1).collect();
    let key_at = join_args
        .iter()
        .position(|a| *a == "--certificate-key")
        .unwrap()
        + 1;
    let joined = tmp.path().join("joined");
    let joined_str = joined.to_str().unwrap().to_string();
    let _joined_reaper = JoinedReaper(joined.clone());
    let extra = [
        "--data-dir",
        joined_str.as_str(),
        "--control-plane-port",
        "0",
    ];
    let mut wrong: Vec<&str> = join_args.clone();
    let wrong_key = "0".repeat(64);
    wrong[key_at] = &wrong_key;
    wrong.extend(extra);
    let refused = host.bosun(&wrong);
    let err = refused.fails();
    assert!(err.contains("--certificate-key does not open"), "{err}");
    assert!(
        !joined.join("ca.key").exists(),
        "a key was written after a refusal"
    );
    let mut right = join_args.clone();
    right.extend(extra);
    let joined_up = host.bosun(&right);
    assert!(
        joined_up.ok().contains("is a control plane of the cluster"),
        "{}",
        joined_up.stdout
    );
    let address = std::fs::read_to_string(joined.join("address")).unwrap();
    // It listens on every interface (0.0.0.0:PORT); loopback is in its certificate.
    let port = address.trim().rsplit_once(':').unwrap().1;
    let via_joined = format!("https://127.0.0.1:{port}");
    let nodes = kubectl(&["--server", &via_joined, "get", "nodes", "-o", "name"]);
    assert_eq!(nodes.ok().trim(), format!("node/{name}"));
    // Its purge removes its own dir only: `agent` beside it stands for
    // another cluster's agent data (`~/.bosun/agent` beside
    // `~/.bosun/join-control-plane`).
    let beside = tmp.path().join("agent");
    std::fs::create_dir_all(&beside).unwrap();
    host.bosun(&["down", "--data-dir", &joined_str, "--purge", "--yes"])
        .ok();
    assert!(!joined.exists());
    assert!(
        beside.exists(),
        "down --purge of the joined control plane removed {beside:?}"
    );

    // The API server the agent talks to (through its load balancer).
    let ports = control_ports(&dir);
    let agent = read_pid(&dir.join("agent.pid")).expect("the agent's pid");
    let used: Vec<usize> = (0..MEMBERS)
        .filter(|&i| remote_ports(agent).contains(&ports[i]))
        .collect();
    assert!(
        !used.is_empty(),
        "the agent holds no connection to {ports:?}"
    );
    let victim = used[0];
    eprintln!(
        "{}\nthe agent talks to control plane {}",
        up.stdout,
        victim + 1
    );
    let survivor = (0..MEMBERS).find(|&i| i != victim).unwrap();
    let via_survivor = format!("https://127.0.0.1:{}", ports[survivor]);
    let survivor_kubectl = |args: &[&str]| {
        let mut all = vec!["--server", via_survivor.as_str()];
        all.extend_from_slice(args);
        kubectl(&all)
    };
    let renew_time = || {
        survivor_kubectl(&[
            "get",
            "lease",
            "-n",
            "kube-node-lease",
            &name,
            "-o",
            "jsonpath={.spec.renewTime}",
        ])
        .stdout
    };

    // SIGKILL it, and its supervisor first so that it stays down.
    let victim_dir = control_dir(&dir, victim);
    let supervisor = read_pid(&victim_dir.join("control.supervisor.pid")).unwrap();
    let control = read_pid(&victim_dir.join("control.pid")).unwrap();
    sigkill(supervisor);
    sigkill(control);
    wait_for(
        "the killed API server to be gone",
        Duration::from_secs(30),
        || !alive(control) && !alive(supervisor),
    );
    let before = renew_time();
    assert!(!before.is_empty(), "no node lease");

    // The agent renews its lease and keeps its node Ready through the others.
    wait_for(
        "the node's lease renewed after the API server was killed",
        Duration::from_secs(120),
        || {
            let now = renew_time();
            !now.is_empty() && now != before
        },
    );
    wait_for(
        "the agent's connections on a surviving API server",
        Duration::from_secs(60),
        || {
            let now = remote_ports(agent);
            !now.contains(&ports[victim])
                && (0..MEMBERS).any(|i| i != victim && now.contains(&ports[i]))
        },
    );
    let pod = tmp.path().join("pod.yaml");
    std::fs::write(
        &pod,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: after-kill}\nspec:\n  containers:\n  \
         - {name: c, image: bosun.local/busybox:1.35, command: [sleep, \"3600\"]}\n",
    )
    .unwrap();
    survivor_kubectl(&["apply", "-f", pod.to_str().unwrap()]).ok();
    survivor_kubectl(&[
        "wait",
        "--for=condition=Ready",
        "pod/after-kill",
        "--timeout=180s",
    ])
    .ok();
    let ready = survivor_kubectl(&[
        "get",
        "node",
        &name,
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
    ]);
    assert_eq!(ready.ok(), "True");
    // The bosun CLI fails over too: the kubeconfig names the dead server
    // first, the others in its extension.
    if victim == 0 {
        let get = host.bosun(&["get", "pod", "after-kill", "-o", "name"]);
        assert_eq!(get.ok().trim(), "pod/after-kill");
    }

    // The leader of the two left is killed in the middle of a rolling
    // update and a scale: another takes the controllers and the
    // scheduler over, and both finish.
    let killed = leader_killed_mid_rollout(&dir, victim, &ports, &kubectl, tmp.path());
    assert_ne!(killed, victim);

    // down and up again: every member and control plane comes back on
    // its ports, and the objects are still there (they live in etcd).
    host.bosun(&["down", "--name", &name]).ok();
    let again = host.bosun(&["up", "--name", &name, "--timeout", "240s"]);
    assert!(again.ok().contains("bosun is up."), "{}", again.stdout);
    assert_eq!(control_ports(&dir), ports, "the control planes moved");
    let list = host.bosun(&["list"]);
    assert!(list.ok().contains("Running (HA 3/3)"), "{}", list.stdout);
    let pod = kubectl(&["get", "pod", "after-kill", "-o", "name"]);
    assert_eq!(pod.ok().trim(), "pod/after-kill");

    // down --purge stops all seven processes and removes everything.
    let agent = read_pid(&dir.join("agent.pid")).expect("the agent's pid");
    let mut pids: Vec<i32> = vec![agent];
    for i in 0..MEMBERS {
        pids.extend(read_pid(&control_dir(&dir, i).join("control.pid")));
        pids.extend(read_pid(&etcd_dir(&dir, i).join("etcd.pid")));
    }
    host.bosun(&["down", "--name", &name, "--purge", "--yes"])
        .ok();
    for pid in pids {
        assert!(!alive(pid), "pid {pid} still runs after down --purge");
    }
    assert!(!host.home.join(".bosun/clusters").join(&name).exists());
    let list = host.bosun(&["list"]);
    assert!(!list.ok().contains(&name), "{}", list.stdout);
    assert!(
        common::docker_ids(&name).is_empty(),
        "containers of node {name} are left"
    );
}
