//! Resource metrics: every `interval` the [`MetricsCollector`] takes one
//! reading of each running app container (Docker's one-shot stats: one
//! short request per container, no stream held open) and of the host
//! (`/proc/stat`, `/proc/meminfo`), turns two successive readings into a
//! CPU rate, and keeps the result as a [`Summary`] that the agent's API
//! serves at `/stats/summary` for the control plane's `metrics.k8s.io`.
//!
//! A container is reported from its second reading on (a rate needs
//! two), and a pod only once all its running app containers are; so a
//! new pod has no metrics for one interval, as with metrics-server.

pub mod node;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use bosun::metrics::{
    ContainerStats, CpuStats, MemoryStats, NodeStats, PodReference, PodStats, Summary,
};
use chrono::{DateTime, Utc};
use futures::StreamExt;

use crate::runtime::{ContainerInfo, ContainerRuntime, ContainerState, Role};

/// How many stats requests are in flight at once.
const CONCURRENCY: usize = 4;

/// A cumulative CPU reading.
#[derive(Debug, Clone, Copy)]
struct Reading {
    cpu_nanos: u64,
    at: Instant,
}

/// One reading of a container: its cumulative CPU, its memory working
/// set, and the wall-clock time of the reading.
type Sample = (Reading, u64, DateTime<Utc>);

#[derive(Default)]
struct State {
    /// The last reading of each container (by id) and of the host.
    containers: HashMap<String, Reading>,
    host: Option<Reading>,
    latest: Summary,
}

/// Samples this node's containers and the host on a shared interval.
pub struct MetricsCollector {
    rt: Arc<dyn ContainerRuntime>,
    node: String,
    state: Mutex<State>,
    /// Reads the host: busy CPU nanoseconds and memory in use (a function
    /// so unit tests can feed numbers).
    read_host: Box<dyn Fn() -> Option<(u64, u64)> + Send + Sync>,
}

/// One sample as the stats summary reports it: CPU (rate, cumulative
/// time, window) and memory at `time`.
fn usage(
    time: DateTime<Utc>,
    cpu_nanos: u64,
    nano_cores: u64,
    window: f64,
    working_set_bytes: u64,
) -> (CpuStats, MemoryStats) {
    (
        CpuStats {
            time,
            usage_nano_cores: nano_cores,
            usage_core_nano_seconds: cpu_nanos,
            window_seconds: window,
        },
        MemoryStats {
            time,
            working_set_bytes,
        },
    )
}

/// The CPU rate between two readings, in nanocores, and the window.
fn rate(prev: Reading, now: Reading) -> Option<(u64, f64)> {
    let elapsed = now.at.checked_duration_since(prev.at)?.as_secs_f64();
    if elapsed <= 0.0 || now.cpu_nanos < prev.cpu_nanos {
        return None;
    }
    let nano_cores = (now.cpu_nanos - prev.cpu_nanos) as f64 / elapsed;
    Some((nano_cores.round() as u64, elapsed))
}

/// The current instance of each running app container: the newest by
/// restart count.
fn running_app_containers(all: Vec<ContainerInfo>) -> Vec<ContainerInfo> {
    let mut newest: BTreeMap<(String, String), ContainerInfo> = BTreeMap::new();
    for c in all {
        if c.role != Role::App || c.state != ContainerState::Running {
            continue;
        }
        let key = (c.pod.uid.clone(), c.name.clone());
        match newest.get(&key) {
            Some(have) if have.restart_count >= c.restart_count => {}
            _ => {
                newest.insert(key, c);
            }
        }
    }
    newest.into_values().collect()
}

impl MetricsCollector {
    pub fn new(rt: Arc<dyn ContainerRuntime>, node: &str) -> Self {
        Self::with_host_reader(rt, node, Box::new(node::read_host))
    }

    pub fn with_host_reader(
        rt: Arc<dyn ContainerRuntime>,
        node: &str,
        read_host: Box<dyn Fn() -> Option<(u64, u64)> + Send + Sync>,
    ) -> Self {
        MetricsCollector {
            rt,
            node: node.to_string(),
            state: Mutex::new(State::default()),
            read_host,
        }
    }

    /// The latest summary.
    pub fn summary(&self) -> Summary {
        self.state.lock().unwrap().latest.clone()
    }

    /// Samples every `interval` until `stop` flips.
    pub async fn run(
        self: Arc<Self>,
        interval: Duration,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                _ = stop.changed() => return,
            }
            self.sample().await;
        }
    }

    /// Takes one reading of everything and updates the summary.
    pub async fn sample(&self) {
        let containers = match self.rt.list_containers(&self.node).await {
            Ok(all) => running_app_containers(all),
            Err(e) => {
                tracing::debug!(error = %e, "metrics: listing containers failed");
                return;
            }
        };
        let rt = &self.rt;
        let readings: Vec<(ContainerInfo, Option<Sample>)> = futures::stream::iter(containers)
            .map(|c| async move {
                let usage = rt.container_usage(&c.id).await;
                let at = (Instant::now(), Utc::now());
                let reading = match usage {
                    Ok(u) => Some((
                        Reading {
                            cpu_nanos: u.cpu_usage_nanos,
                            at: at.0,
                        },
                        u.memory_working_set_bytes,
                        at.1,
                    )),
                    Err(e) => {
                        tracing::debug!(container = %c.id, error = %e, "metrics: stats failed");
                        None
                    }
                };
                (c, reading)
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        let host = (self.read_host)().map(|(cpu, mem)| {
            (
                Reading {
                    cpu_nanos: cpu,
                    at: Instant::now(),
                },
                mem,
                Utc::now(),
            )
        });

        let mut st = self.state.lock().unwrap();
        let mut next_readings = HashMap::new();
        // Pods by uid: their reference, their containers with a rate, and
        // whether a running container lacks one.
        let mut pods: BTreeMap<String, (PodReference, Vec<ContainerStats>, bool)> = BTreeMap::new();
        for (c, reading) in readings {
            let entry = pods.entry(c.pod.uid.clone()).or_insert_with(|| {
                (
                    PodReference {
                        name: c.pod.name.clone(),
                        namespace: c.pod.namespace.clone(),
                        uid: c.pod.uid.clone(),
                    },
                    Vec::new(),
                    false,
                )
            });
            let Some((now, memory, time)) = reading else {
                entry.2 = true;
                continue;
            };
            match st.containers.get(&c.id).and_then(|prev| rate(*prev, now)) {
                Some((nano_cores, window)) => {
                    let (cpu, memory) = usage(time, now.cpu_nanos, nano_cores, window, memory);
                    entry.1.push(ContainerStats {
                        name: c.name.clone(),
                        cpu,
                        memory,
                    })
                }
                None => entry.2 = true,
            }
            next_readings.insert(c.id.clone(), now);
        }
        st.containers = next_readings;
        st.latest.pods = pods
            .into_values()
            .filter(|(_, containers, incomplete)| !incomplete && !containers.is_empty())
            .map(|(pod_ref, mut containers, _)| {
                containers.sort_by(|a, b| a.name.cmp(&b.name));
                PodStats {
                    pod_ref,
                    containers,
                }
            })
            .collect();
        if let Some((now, memory, time)) = host {
            if let Some((nano_cores, window)) = st.host.and_then(|prev| rate(prev, now)) {
                let (cpu, memory) = usage(time, now.cpu_nanos, nano_cores, window, memory);
                st.latest.node = Some(NodeStats {
                    node_name: self.node.clone(),
                    cpu,
                    memory,
                });
            }
            st.host = Some(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::fake::FakeRuntime;
    use crate::runtime::{ContainerConfig, ContainerUsage, PodRef};

    fn pod(name: &str) -> PodRef {
        PodRef {
            namespace: "default".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
        }
    }

    async fn start(fake: &FakeRuntime, pod: &PodRef, name: &str) -> String {
        let config = ContainerConfig {
            name: name.into(),
            image: "busybox".into(),
            ..Default::default()
        };
        let id = fake
            .create_container("n1", pod, Role::App, "sb", &config)
            .await
            .unwrap();
        fake.start_container(&id).await.unwrap();
        id
    }

    #[tokio::test(start_paused = true)]
    async fn two_readings_make_a_rate_and_pods_wait_for_every_container() {
        let fake = Arc::new(FakeRuntime::new());
        fake.add_image("busybox");
        let web = pod("web");
        let a = start(&fake, &web, "app").await;
        let host = Arc::new(Mutex::new((0u64, 1000u64)));
        let host_reader = host.clone();
        let collector = MetricsCollector::with_host_reader(
            fake.clone(),
            "n1",
            Box::new(move || Some(*host_reader.lock().unwrap())),
        );
        fake.set_usage(
            &a,
            ContainerUsage {
                cpu_usage_nanos: 1_000_000_000,
                memory_working_set_bytes: 5 << 20,
            },
        );
        collector.sample().await;
        // One reading: no rate yet.
        assert!(collector.summary().pods.is_empty());
        assert!(collector.summary().node.is_none());

        tokio::time::advance(Duration::from_secs(10)).await;
        // 0.5 s of CPU in 10 s: 50m.
        fake.set_usage(
            &a,
            ContainerUsage {
                cpu_usage_nanos: 1_500_000_000,
                memory_working_set_bytes: 6 << 20,
            },
        );
        *host.lock().unwrap() = (20_000_000_000, 2000);
        // A second container appears: the pod waits for its second reading.
        let b = start(&fake, &web, "sidecar").await;
        collector.sample().await;
        assert!(collector.summary().pods.is_empty());
        let node = collector
            .summary()
            .node
            .expect("node stats after two readings");
        assert_eq!(node.cpu.usage_nano_cores, 2_000_000_000);
        assert_eq!(node.memory.working_set_bytes, 2000);

        tokio::time::advance(Duration::from_secs(10)).await;
        fake.set_usage(
            &a,
            ContainerUsage {
                cpu_usage_nanos: 2_500_000_000,
                memory_working_set_bytes: 6 << 20,
            },
        );
        collector.sample().await;
        let summary = collector.summary();
        assert_eq!(summary.pods.len(), 1);
        let p = &summary.pods[0];
        assert_eq!(p.pod_ref.name, "web");
        let names: Vec<&str> = p.containers.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["app", "sidecar"]);
        assert_eq!(p.containers[0].cpu.usage_nano_cores, 100_000_000);
        assert_eq!(p.containers[0].memory.working_set_bytes, 6 << 20);
        assert_eq!(p.containers[1].cpu.usage_nano_cores, 0);
        assert!((p.containers[0].cpu.window_seconds - 10.0).abs() < 0.01);
        let _ = b;
    }

    #[test]
    fn a_counter_going_backwards_is_no_rate() {
        let t = Instant::now();
        let prev = Reading {
            cpu_nanos: 100,
            at: t,
        };
        let later = Reading {
            cpu_nanos: 50,
            at: t + Duration::from_secs(1),
        };
        assert!(rate(prev, later).is_none());
        assert_eq!(
            rate(
                prev,
                Reading {
                    cpu_nanos: 1_000_000_100,
                    at: t + Duration::from_secs(2)
                }
            ),
            Some((500_000_000, 2.0))
        );
    }
}
