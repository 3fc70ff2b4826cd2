//! The cache against the full rebuild it replaces: after any sequence of
//! pod and node events, assumptions and resyncs, every node info of the
//! snapshot is what summing the pod cache's pods (and the assumed ones)
//! from scratch gives.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::*;
use crate::scheduler::needs_scheduling;
use crate::scheduler::nodeinfo::{self, snapshot, NodeInfo};

fn node(name: &str, cpu: u32) -> Arc<Node> {
    Arc::new(
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name},
            "status": {"allocatable": {"cpu": format!("{cpu}m"), "memory": "4Gi", "pods": "110"}},
        }))
        .unwrap(),
    )
}

/// A pod of the test's pool: `p{n}`, its uid, its node ("" unbound),
/// its cpu request, a host port (0: none), an owner (None: none), and
/// whether it finished.
#[derive(Clone)]
struct Spec {
    name: String,
    uid: String,
    node: String,
    milli_cpu: u32,
    host_port: i32,
    owner: Option<&'static str>,
    finished: bool,
}

fn pod(s: &Spec) -> Arc<Pod> {
    let mut container = json!({"name": "c", "image": "i",
        "resources": {"requests": {"cpu": format!("{}m", s.milli_cpu)}}});
    if s.host_port > 0 {
        container["ports"] = json!([{"containerPort": 80, "hostPort": s.host_port}]);
    }
    let mut v = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": s.name, "namespace": "default", "uid": s.uid},
        "spec": {"nodeName": s.node, "containers": [container]},
        "status": {"phase": if s.finished { "Succeeded" } else { "Running" }},
    });
    if let Some(owner) = s.owner {
        v["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1",
            "kind": "ReplicaSet", "name": owner, "uid": owner, "controller": true}]);
    }
    Arc::new(serde_json::from_value(v).unwrap())
}

/// What a node info says, in an order that does not depend on the order
/// its pods came in.
#[derive(Debug, PartialEq)]
struct Summary {
    node: Node,
    allocatable: (i64, i64, i64),
    requested: (i64, i64),
    non_zero_requested: (i64, i64),
    pods: i64,
    ports: Vec<(String, String, i32)>,
    owners: Vec<(String, usize)>,
    pod_list: Vec<Pod>,
}

fn summary(info: &NodeInfo) -> Summary {
    let mut ports: Vec<_> = info
        .used_ports
        .iter()
        .map(|p| (p.ip.clone(), p.protocol.clone(), p.port))
        .collect();
    ports.sort();
    let mut owners: Vec<_> = info.owners.iter().map(|(k, v)| (k.clone(), *v)).collect();
    owners.sort();
    let mut pod_list: Vec<Pod> = info.pod_list.iter().map(|p| Pod::clone(p)).collect();
    pod_list.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    Summary {
        node: (*info.node).clone(),
        allocatable: (
            info.allocatable.milli_cpu,
            info.allocatable.memory,
            info.allowed_pods,
        ),
        requested: (info.requested.milli_cpu, info.requested.memory),
        non_zero_requested: (
            info.non_zero_requested.milli_cpu,
            info.non_zero_requested.memory,
        ),
        pods: info.pods,
        ports,
        owners,
        pod_list,
    }
}

/// The pod cache (pods by name, nodes by name) and the pods this
/// scheduler assumed (name: its uid, node, and the pod as it was bound),
/// as the scheduler kept them before the cache; [`World::rebuild`] is
/// its full rebuild.
#[derive(Default)]
struct World {
    pods: HashMap<String, Arc<Pod>>,
    nodes: HashMap<String, Arc<Node>>,
    assumed: HashMap<String, (String, String, Pod)>,
}

/// The scheduler bound `p` to `node`: assumed there in the cache and in
/// the world.
fn assume(world: &mut World, cache: &mut Cache, p: &Pod, node: &str) {
    cache.assume(p, node);
    let mut placed = p.clone();
    placed.spec.as_mut().unwrap().node_name = Some(node.into());
    let uid = p.metadata.uid.clone().unwrap();
    let name = p.metadata.name.clone().unwrap();
    world.assumed.insert(name, (uid, node.into(), placed));
}

impl World {
    fn rebuild(&self) -> Vec<Summary> {
        let mut counted: Vec<(Pod, String)> = Vec::new();
        for p in self.pods.values() {
            let spec = p.spec.as_ref().unwrap();
            let bound = spec.node_name.clone().unwrap_or_default();
            if !bound.is_empty() {
                counted.push(((**p).clone(), bound));
            } else if let Some((uid, node, placed)) =
                self.assumed.get(p.metadata.name.as_ref().unwrap())
            {
                // The pod as it was bound counts, as the scheduler kept it.
                if p.metadata.uid.as_ref() == Some(uid) {
                    counted.push((placed.clone(), node.clone()));
                }
            }
        }
        let pairs = counted.iter().map(|(p, n)| (p, n.as_str()));
        snapshot(self.nodes.values().cloned(), pairs)
            .iter()
            .map(summary)
            .collect()
    }

    /// The pod cache applies `p`; the scheduler drops an assumption the
    /// pod no longer needs (bound, finished, or another pod of the name).
    fn apply(&mut self, p: Arc<Pod>) {
        let name = p.metadata.name.clone().unwrap();
        let bound = !p
            .spec
            .as_ref()
            .unwrap()
            .node_name
            .as_deref()
            .unwrap_or("")
            .is_empty();
        let same = self
            .assumed
            .get(&name)
            .is_some_and(|(uid, _, _)| p.metadata.uid.as_ref() == Some(uid));
        if bound || !same || nodeinfo::is_terminal(&p) {
            self.assumed.remove(&name);
        }
        self.pods.insert(name, p);
    }
}

fn snapshot_of(cache: &Cache, world: &World, snap: &mut Snapshot) -> Vec<Summary> {
    cache.update_snapshot(world.nodes.values().cloned().collect(), snap);
    snap.infos().iter().map(summary).collect()
}

const NODES: [&str; 3] = ["a", "b", "c"];

/// One random step on `world` and `cache` alike; returns what it did.
fn step(rng: &mut StdRng, world: &mut World, cache: &mut Cache, uids: &mut u32) -> String {
    let name = format!("p{}", rng.random_range(0..8));
    let existing = world.pods.get(&name).cloned();
    let some_node = |rng: &mut StdRng| match rng.random_range(0..5) {
        0 => String::new(),
        // A node the cache of nodes does not (yet) hold.
        1 => "gone".to_string(),
        _ => NODES[rng.random_range(0..NODES.len())].to_string(),
    };
    match rng.random_range(0..100) {
        // A pod created, or changed (moved, resized, finished, recreated).
        0..=34 => {
            *uids += 1;
            let recreate = existing.is_none() || rng.random_bool(0.2);
            let uid = match &existing {
                Some(p) if !recreate => p.metadata.uid.clone().unwrap(),
                _ => format!("uid-{uids}"),
            };
            let s = Spec {
                name: name.clone(),
                uid,
                node: some_node(rng),
                milli_cpu: rng.random_range(0..4) * 100,
                host_port: [0, 0, 8080, 9090][rng.random_range(0..4)],
                owner: [None, Some("rs-1"), Some("rs-2")][rng.random_range(0..3)],
                finished: rng.random_bool(0.1),
            };
            let p = pod(&s);
            world.apply(p.clone());
            cache.on_pod(p);
            format!("apply {name} on {:?}", s.node)
        }
        // Deleted, with its deletion event or (a relist) without.
        35..=49 => {
            let Some(p) = world.pods.remove(&name) else {
                return "nothing to delete".into();
            };
            world.assumed.remove(&name);
            if rng.random_bool(0.7) {
                cache.on_pod_deleted(&p);
                format!("delete {name}")
            } else {
                format!("delete {name} silently")
            }
        }
        // Assumed on a node, as the scheduler does for a pod it bound.
        50..=69 => {
            let Some(p) = existing.filter(|p| needs_scheduling(p)) else {
                return "nothing to assume".into();
            };
            if cache.is_assumed(&p) {
                return "already assumed".into();
            }
            let node = NODES[rng.random_range(0..NODES.len())];
            assume(world, cache, &p, node);
            format!("assume {name} on {node}")
        }
        // The pod cache shows an assumed pod bound (where assumed, or
        // elsewhere: a moved binding).
        70..=79 => {
            let Some((_, node, _)) = world.assumed.get(&name).cloned() else {
                return "nothing assumed".into();
            };
            // Or its binding failed: the assumption is forgotten.
            if rng.random_bool(0.3) {
                cache.forget(existing.as_ref().unwrap());
                world.assumed.remove(&name);
                return format!("forget {name}");
            }
            let mut bound = Pod::clone(existing.as_ref().unwrap());
            let node = match rng.random_bool(0.8) {
                true => node,
                false => some_node(rng),
            };
            bound.spec.as_mut().unwrap().node_name = Some(node.clone());
            let bound = Arc::new(bound);
            world.apply(bound.clone());
            cache.on_pod(bound);
            format!("{name} shown bound to {node:?}")
        }
        // A node changed, went or came back.
        80..=89 => {
            let n = NODES[rng.random_range(0..NODES.len())];
            if rng.random_bool(0.3) {
                world.nodes.remove(n);
                format!("node {n} deleted")
            } else {
                world
                    .nodes
                    .insert(n.into(), node(n, rng.random_range(1..5) * 1000));
                format!("node {n} applied")
            }
        }
        // The tick's resync; before it, events may be replayed (a relist
        // sends every pod again).
        _ => {
            let pods: Vec<Arc<Pod>> = world.pods.values().cloned().collect();
            if rng.random_bool(0.5) {
                for p in &pods {
                    cache.on_pod(p.clone());
                }
            }
            cache.resync(&pods);
            "resync".into()
        }
    }
}

/// Every step's snapshot, kept and updated in place, equals the full
/// rebuild, whenever no deletion is outstanding (a deletion without its
/// event is the resync's to catch).
#[test]
fn the_incremental_snapshot_equals_the_full_rebuild() {
    for seed in 0..40u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let (mut world, mut cache, mut snap) =
            (World::default(), Cache::default(), Snapshot::default());
        let mut uids = 0;
        let mut missed_deletion = false;
        let mut log: Vec<String> = Vec::new();
        for _ in 0..400 {
            let did = step(&mut rng, &mut world, &mut cache, &mut uids);
            missed_deletion |= did.ends_with("silently");
            if did == "resync" {
                missed_deletion = false;
            }
            log.push(did);
            if missed_deletion {
                continue;
            }
            let got = snapshot_of(&cache, &world, &mut snap);
            let want = world.rebuild();
            assert!(
                got == want,
                "seed {seed}, after {} steps, last ones {:?}:\n got {got:#?}\nwant {want:#?}",
                log.len(),
                &log[log.len().saturating_sub(6)..]
            );
            // A snapshot made afresh says the same as the one kept.
            let fresh = snapshot_of(&cache, &world, &mut Snapshot::default());
            assert!(fresh == want, "seed {seed}: a fresh snapshot differs");
        }
    }
}

/// The cases by name, one after another on one cache: each step's
/// snapshot is the rebuild's, and says what a reader would check.
#[test]
fn added_moved_deleted_assumed_bound_and_expired_pods() {
    let (mut world, mut cache, mut snap) =
        (World::default(), Cache::default(), Snapshot::default());
    for n in ["a", "b"] {
        world.nodes.insert(n.into(), node(n, 2000));
    }
    let spec = |name: &str, node: &str| Spec {
        name: name.into(),
        uid: format!("uid-{name}"),
        node: node.into(),
        milli_cpu: 500,
        host_port: 8080,
        owner: Some("rs-1"),
        finished: false,
    };
    // What each node has: (pods, cpu requested, owner rs-1's count).
    let check =
        |cache: &Cache, world: &World, snap: &mut Snapshot, want: [(i64, i64, usize); 2]| {
            let got = snapshot_of(cache, world, snap);
            assert!(got == world.rebuild(), "not the rebuild:\n{got:#?}");
            let seen: Vec<(i64, i64, usize)> = snap
                .infos()
                .iter()
                .map(|i| {
                    (
                        i.pods,
                        i.requested.milli_cpu,
                        i.owners.get("rs-1").copied().unwrap_or(0),
                    )
                })
                .collect();
            assert_eq!(seen, want);
        };
    check(&cache, &world, &mut snap, [(0, 0, 0), (0, 0, 0)]);

    // Added: a bound pod counts on its node.
    let web = pod(&spec("web", "a"));
    world.apply(web.clone());
    cache.on_pod(web);
    check(&cache, &world, &mut snap, [(1, 500, 1), (0, 0, 0)]);

    // Moved: it counts on the new node only.
    let moved = pod(&spec("web", "b"));
    world.apply(moved.clone());
    cache.on_pod(moved.clone());
    check(&cache, &world, &mut snap, [(0, 0, 0), (1, 500, 1)]);
    assert!(
        snap.infos()[0].used_ports.is_empty(),
        "its port is free on a again"
    );

    // Deleted: nowhere.
    world.pods.remove("web");
    cache.on_pod_deleted(&moved);
    check(&cache, &world, &mut snap, [(0, 0, 0), (0, 0, 0)]);

    // Assumed, then shown bound where assumed: counted once all along.
    let api = pod(&spec("api", ""));
    world.apply(api.clone());
    cache.on_pod(api.clone());
    assert!(!cache.is_assumed(&api));
    assume(&mut world, &mut cache, &api, "a");
    assert!(cache.is_assumed(&api));
    check(&cache, &world, &mut snap, [(1, 500, 1), (0, 0, 0)]);
    // The pod cache shows it unbound a while longer (a status write).
    cache.on_pod(api.clone());
    check(&cache, &world, &mut snap, [(1, 500, 1), (0, 0, 0)]);
    let bound = pod(&spec("api", "a"));
    world.apply(bound.clone());
    cache.on_pod(bound.clone());
    assert!(!cache.is_assumed(&bound));
    check(&cache, &world, &mut snap, [(1, 500, 1), (0, 0, 0)]);
    // Finished: it takes nothing any more.
    let done = pod(&Spec {
        finished: true,
        ..spec("api", "a")
    });
    world.apply(done.clone());
    cache.on_pod(done);
    check(&cache, &world, &mut snap, [(0, 0, 0), (0, 0, 0)]);

    // Assumed, then expired: the pod was deleted before the pod cache
    // showed it bound, and its deletion was missed (a relist); the
    // tick's resync drops it.
    let job = pod(&spec("job", ""));
    world.apply(job.clone());
    cache.on_pod(job.clone());
    assume(&mut world, &mut cache, &job, "b");
    check(&cache, &world, &mut snap, [(0, 0, 0), (1, 500, 1)]);
    world.pods.remove("job");
    world.assumed.remove("job");
    let pods: Vec<Arc<Pod>> = world.pods.values().cloned().collect();
    cache.resync(&pods);
    assert!(!cache.is_assumed(&job));
    check(&cache, &world, &mut snap, [(0, 0, 0), (0, 0, 0)]);

    // Assumed, then another pod of the name (recreated) shows up
    // unbound: the assumption was the old pod's.
    let old = pod(&spec("db", ""));
    world.apply(old.clone());
    cache.on_pod(old.clone());
    assume(&mut world, &mut cache, &old, "a");
    let new = pod(&Spec {
        uid: "uid-db-2".into(),
        ..spec("db", "")
    });
    world.apply(new.clone());
    cache.on_pod(new.clone());
    check(&cache, &world, &mut snap, [(0, 0, 0), (0, 0, 0)]);

    // Assumed, then its binding failed: forgotten, its room free again.
    // Forgetting the old pod of a name changes nothing of the new one's.
    assume(&mut world, &mut cache, &new, "b");
    check(&cache, &world, &mut snap, [(0, 0, 0), (1, 500, 1)]);
    cache.forget(&old);
    assert!(
        cache.is_assumed(&new),
        "the old pod's failure is not the new one's"
    );
    cache.forget(&new);
    world.assumed.remove("db");
    assert!(!cache.is_assumed(&new));
    check(&cache, &world, &mut snap, [(0, 0, 0), (0, 0, 0)]);
}
