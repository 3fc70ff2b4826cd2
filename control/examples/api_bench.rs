//! Load benchmark of a running `bosun-control` (and, for comparison, of a
//! bare etcd taking the same writes). Not a test: it measures and reports.
//!
//! ```text
//! cargo run --release -p bosun-control --example api_bench -- \
//!     --kubeconfig DIR/admin.kubeconfig [--concurrency 32] [--rate 500] \
//!     [--duration 10] [--watchers 100] [--etcd http://127.0.0.1:PORT] \
//!     [--server-pid PID] [--etcd-pid PID] [--json results.json]
//! ```
//!
//! Phases, each bounded in operation count and in time:
//! - create: C clients create small pods in a fresh namespace, open loop at
//!   R writes/s for D seconds;
//! - update: the same clients merge-patch a label of those pods at R/s;
//! - list: the whole namespace, with and without a labelSelector, from one
//!   client and from C clients at once;
//! - watch: W watches on the namespace, then M pods created at a modest
//!   rate; every (watcher, event) pair's delivery latency is recorded;
//! - etcd (with `--etcd`): the create and update workload written straight
//!   into etcd through its JSON gateway, as kube-apiserver's storage layer
//!   would (a transaction per write that checks the create or mod revision).
//!
//! Open loop: each client has a fixed schedule (client w sends its k-th
//! request at `start + (w + k*C)/R`); latency is measured from the
//! scheduled time, so a server that falls behind is charged for the queue
//! it causes (no coordinated omission). Both servers are spoken to with the
//! same HTTP stack (kube-rs's client, HTTP/1.1, one kept-alive connection
//! per client); bosun over TLS with its bearer token, etcd over plain HTTP.
//! Request bodies are serialized before the clock starts and response
//! bodies are read but parsed only after it stops.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use axum::body::Bytes;
use base64::Engine;
use clap::Parser;
use futures::StreamExt;
use http::{Method, Request, StatusCode};
use kube::api::{ApiResource, DynamicObject, WatchEvent, WatchParams};
use kube::client::Body;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde_json::{json, Value};

#[derive(Parser, Debug, Clone)]
#[command(about = "Load benchmark of bosun-control's API (and of etcd for comparison)")]
struct Args {
    /// The admin kubeconfig the server wrote (DIR/admin.kubeconfig).
    #[arg(long)]
    kubeconfig: PathBuf,
    /// Concurrent clients (one connection each).
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Target writes per second of the create and update phases.
    #[arg(long, default_value_t = 500.0)]
    rate: f64,
    /// Seconds each of the create and update phases lasts.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Watches opened for the fan-out phase.
    #[arg(long, default_value_t = 100)]
    watchers: usize,
    /// Pods created while the watches are open.
    #[arg(long, default_value_t = 200)]
    watch_events: usize,
    /// Creates per second while the watches are open.
    #[arg(long, default_value_t = 50.0)]
    watch_rate: f64,
    /// Lists per variant from the single client.
    #[arg(long, default_value_t = 20)]
    list_rounds: usize,
    /// Lists per variant from each of the concurrent clients.
    #[arg(long, default_value_t = 3)]
    list_rounds_concurrent: usize,
    /// Seconds after which one request counts as failed.
    #[arg(long, default_value_t = 10.0)]
    op_timeout: f64,
    /// etcd's client URL (http://127.0.0.1:PORT): also run create/update there.
    #[arg(long)]
    etcd: Option<String>,
    /// bosun-control's pid: report its CPU time per phase and its memory.
    #[arg(long)]
    server_pid: Option<u32>,
    /// etcd's pid: report its CPU time per phase and its memory.
    #[arg(long)]
    etcd_pid: Option<u32>,
    /// Also write the results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Leave out the list phase (e.g. to profile the writes alone).
    #[arg(long)]
    skip_list: bool,
    /// Leave out the watch fan-out phase.
    #[arg(long)]
    skip_watch: bool,
}

// ---------------------------------------------------------------- numbers

/// Latency percentiles of one set of samples, in milliseconds.
#[derive(Debug, Clone, Default)]
struct Stats {
    count: usize,
    p50: f64,
    p90: f64,
    p99: f64,
    max: f64,
    mean: f64,
}

impl Stats {
    fn of(samples: &[Duration]) -> Stats {
        if samples.is_empty() {
            return Stats::default();
        }
        let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        // Nearest rank: the smallest sample with at least q of them at or below it.
        let rank = |q: f64| ms[((q * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1];
        Stats {
            count: ms.len(),
            p50: rank(0.50),
            p90: rank(0.90),
            p99: rank(0.99),
            max: ms[ms.len() - 1],
            mean: ms.iter().sum::<f64>() / ms.len() as f64,
        }
    }

    fn to_json(&self) -> Value {
        let r = |x: f64| (x * 1000.0).round() / 1000.0;
        json!({"count": self.count, "p50_ms": r(self.p50), "p90_ms": r(self.p90),
               "p99_ms": r(self.p99), "max_ms": r(self.max), "mean_ms": r(self.mean)})
    }
}

/// CPU time (user + system) a process has used so far, from /proc.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: skip past it.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of stat(5) (utime, stime) are 11 and 12 after the name.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0) // USER_HZ is 100 on Linux
}

/// A `Vm*` line of /proc/PID/status, in KiB.
fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// CPU time all processes of the host have used so far (busy time of every core).
fn host_busy_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|t| t.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal: all but idle and iowait.
    let busy: u64 = ticks
        .iter()
        .take(8)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, t)| t)
        .sum();
    Some(busy as f64 / 100.0)
}

/// CPU used by the processes we watch over one phase, and by everything
/// else on the host ("other": a phase it is large for was disturbed).
struct CpuMeter {
    pids: Vec<(&'static str, u32)>,
    start: Vec<Option<f64>>,
    host: Option<f64>,
}

impl CpuMeter {
    fn start(args: &Args) -> CpuMeter {
        let mut pids = vec![("bench", std::process::id())];
        if let Some(p) = args.server_pid {
            pids.push(("bosun", p));
        }
        if let Some(p) = args.etcd_pid {
            pids.push(("etcd", p));
        }
        let start = pids.iter().map(|(_, p)| cpu_seconds(*p)).collect();
        CpuMeter {
            pids,
            start,
            host: host_busy_seconds(),
        }
    }

    /// CPU seconds each process used since `start`.
    fn stop(self) -> HashMap<&'static str, f64> {
        let mut used: HashMap<&'static str, f64> = self
            .pids
            .iter()
            .zip(self.start)
            .filter_map(|((name, pid), start)| Some((*name, cpu_seconds(*pid)? - start?)))
            .collect();
        if let (Some(before), Some(after)) = (self.host, host_busy_seconds()) {
            let ours: f64 = used.values().sum();
            used.insert("other", (after - before - ours).max(0.0));
        }
        used
    }
}

// ---------------------------------------------------------------- open loop

#[derive(Default)]
struct WorkerRun {
    /// From the scheduled send time to the response (queueing included).
    latency: Vec<Duration>,
    /// From the actual send time to the response.
    service: Vec<Duration>,
    errors: usize,
    first_error: Option<String>,
    last_done: Option<Instant>,
}

struct LoadResult {
    name: String,
    target: &'static str,
    rate: f64,
    attempted: usize,
    ok: usize,
    errors: usize,
    first_error: Option<String>,
    /// From the first scheduled send to the last response.
    elapsed: Duration,
    latency: Stats,
    service: Stats,
    cpu: HashMap<&'static str, f64>,
}

impl LoadResult {
    fn achieved(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    fn to_json(&self) -> Value {
        let cpu: serde_json::Map<String, Value> = self
            .cpu
            .iter()
            .map(|(k, v)| (k.to_string(), json!((v * 1000.0).round() / 1000.0)))
            .collect();
        json!({
            "phase": self.name, "target": self.target, "target_rate": self.rate,
            "attempted": self.attempted, "ok": self.ok, "errors": self.errors,
            "first_error": self.first_error,
            "elapsed_s": self.elapsed.as_secs_f64(), "achieved_per_s": self.achieved(),
            "latency": self.latency.to_json(), "service_time": self.service.to_json(),
            "cpu_seconds": cpu,
        })
    }
}

/// Runs `op(state, worker, k)` on every worker's open-loop schedule: worker
/// w sends its k-th request at `start + (w + k * workers) / rate`, until
/// `duration` has passed; requests still scheduled after the hard deadline
/// are not sent.
async fn open_loop<S, F, Fut>(
    states: &[Arc<S>],
    rate: f64,
    duration: Duration,
    op_timeout: Duration,
    op: F,
) -> (Vec<WorkerRun>, Instant)
where
    S: Send + Sync + 'static,
    F: Fn(Arc<S>, usize, usize) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let workers = states.len();
    let start = Instant::now() + Duration::from_millis(20);
    let end = start + duration;
    let hard_deadline = end + op_timeout + Duration::from_secs(5);
    let mut tasks = Vec::new();
    for (w, state) in states.iter().enumerate() {
        let state = state.clone();
        let op = op.clone();
        tasks.push(tokio::spawn(async move {
            let mut run = WorkerRun::default();
            for k in 0.. {
                let intended = start + Duration::from_secs_f64((w + k * workers) as f64 / rate);
                if intended >= end || Instant::now() >= hard_deadline {
                    break;
                }
                tokio::time::sleep_until(intended.into()).await;
                let sent = Instant::now();
                let outcome = tokio::time::timeout(op_timeout, op(state.clone(), w, k)).await;
                let done = Instant::now();
                run.last_done = Some(done);
                let error = match outcome {
                    Ok(Ok(())) => {
                        run.latency.push(done - intended);
                        run.service.push(done - sent);
                        continue;
                    }
                    Ok(Err(e)) => e,
                    Err(_) => format!("timed out after {op_timeout:?}"),
                };
                run.errors += 1;
                run.first_error.get_or_insert(error);
            }
            run
        }));
    }
    let mut runs = Vec::new();
    for t in tasks {
        runs.push(t.await.expect("worker task"));
    }
    (runs, start)
}

fn summarize(
    name: &str,
    target: &'static str,
    rate: f64,
    runs: Vec<WorkerRun>,
    start: Instant,
    cpu: HashMap<&'static str, f64>,
) -> LoadResult {
    let mut latency = Vec::new();
    let mut service = Vec::new();
    let mut errors = 0;
    let mut first_error = None;
    let mut last = start;
    for run in runs {
        latency.extend(run.latency);
        service.extend(run.service);
        errors += run.errors;
        first_error = first_error.or(run.first_error);
        last = last.max(run.last_done.unwrap_or(start));
    }
    LoadResult {
        name: name.to_string(),
        target,
        rate,
        attempted: latency.len() + errors,
        ok: latency.len(),
        errors,
        first_error,
        elapsed: last - start,
        latency: Stats::of(&latency),
        service: Stats::of(&service),
        cpu,
    }
}

// ---------------------------------------------------------------- objects

/// A small, realistic pod: one container with a port, requests, labels.
fn pod(ns: &str, name: &str, group: usize, rev: usize) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {"app": "bench", "tier": "web", "group": format!("g{}", group % 10),
                       "rev": rev.to_string()},
        },
        "spec": {
            "containers": [{
                "name": "web",
                "image": "nginx:1.27",
                "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
            }],
            "restartPolicy": "Always",
        },
    })
}

fn pod_name(w: usize, k: usize) -> String {
    format!("bench-{w}-{k}")
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

// ---------------------------------------------------------------- clients

/// Refuses anything but a loopback address: this tool loads a server hard.
fn require_loopback(uri: &http::Uri) -> anyhow::Result<()> {
    let host = uri.host().context("the URL has no host")?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if !loopback {
        bail!("{uri} is not a loopback address; this benchmark only loads a local server");
    }
    Ok(())
}

async fn bosun_config(args: &Args) -> anyhow::Result<Config> {
    let kc = Kubeconfig::read_from(&args.kubeconfig)
        .with_context(|| format!("reading {}", args.kubeconfig.display()))?;
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    require_loopback(&config.cluster_url)?;
    Ok(config)
}

/// One client with its own connection pool (so one connection per worker).
fn new_client(config: &Config) -> anyhow::Result<Client> {
    Ok(Client::try_from(config.clone())?)
}

const JSON: &str = "application/json";

/// Sends one request and reads the whole response; an unexpected status is an error.
async fn call(
    client: &Client,
    method: Method,
    uri: &str,
    content_type: &str,
    body: Vec<u8>,
    want: StatusCode,
) -> Result<Bytes, String> {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header(http::header::CONTENT_TYPE, content_type)
        .header(http::header::ACCEPT, "application/json")
        .body(Body::from(body))
        .map_err(|e| e.to_string())?;
    let resp = client.send(req).await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let bytes = resp
        .into_body()
        .collect_bytes()
        .await
        .map_err(|e| e.to_string())?;
    if status != want {
        let text = String::from_utf8_lossy(&bytes);
        return Err(format!(
            "{status}: {}",
            text.chars().take(300).collect::<String>()
        ));
    }
    Ok(bytes)
}

/// A GET that must answer 200.
async fn get(client: &Client, uri: &str) -> Result<Bytes, String> {
    call(client, Method::GET, uri, JSON, Vec::new(), StatusCode::OK).await
}

/// Opens one connection per client before a phase, so no TLS handshake is timed.
async fn warm_up(clients: &[Arc<Worker>], uri: &str) -> anyhow::Result<()> {
    let calls = clients.iter().map(|w| get(&w.client, uri));
    for r in futures::future::join_all(calls).await {
        r.map_err(|e| anyhow::anyhow!("warm-up request to {uri}: {e}"))?;
    }
    Ok(())
}

/// One benchmark client and what it wrote.
struct Worker {
    client: Client,
    /// Names (bosun) or keys with their mod revision (etcd) this worker created.
    created: Mutex<Vec<(String, i64)>>,
}

fn workers(config: &Config, n: usize) -> anyhow::Result<Vec<Arc<Worker>>> {
    (0..n)
        .map(|_| {
            Ok(Arc::new(Worker {
                client: new_client(config)?,
                created: Mutex::new(Vec::new()),
            }))
        })
        .collect()
}

// ---------------------------------------------------------------- bosun phases

async fn bosun_create(args: &Args, ws: &[Arc<Worker>], ns: &str) -> LoadResult {
    let cpu = CpuMeter::start(args);
    let ns = ns.to_string();
    let (runs, start) = open_loop(
        ws,
        args.rate,
        Duration::from_secs_f64(args.duration),
        Duration::from_secs_f64(args.op_timeout),
        move |w: Arc<Worker>, wi, k| {
            let name = pod_name(wi, k);
            let body = serde_json::to_vec(&pod(&ns, &name, k, 0)).expect("json");
            let uri = format!("/api/v1/namespaces/{ns}/pods");
            async move {
                call(
                    &w.client,
                    Method::POST,
                    &uri,
                    JSON,
                    body,
                    StatusCode::CREATED,
                )
                .await?;
                w.created.lock().expect("lock").push((name, 0));
                Ok(())
            }
        },
    )
    .await;
    summarize("create", "bosun", args.rate, runs, start, cpu.stop())
}

async fn bosun_update(args: &Args, ws: &[Arc<Worker>], ns: &str) -> LoadResult {
    let cpu = CpuMeter::start(args);
    let ns = ns.to_string();
    let (runs, start) = open_loop(
        ws,
        args.rate,
        Duration::from_secs_f64(args.duration),
        Duration::from_secs_f64(args.op_timeout),
        move |w: Arc<Worker>, _wi, k| {
            let name = {
                let created = w.created.lock().expect("lock");
                (!created.is_empty()).then(|| created[k % created.len()].0.clone())
            };
            let body =
                serde_json::to_vec(&json!({"metadata": {"labels": {"rev": (k + 1).to_string()}}}))
                    .expect("json");
            let ns = ns.clone();
            async move {
                let name = name.ok_or("this client created no pod to update")?;
                let uri = format!("/api/v1/namespaces/{ns}/pods/{name}");
                call(
                    &w.client,
                    Method::PATCH,
                    &uri,
                    "application/merge-patch+json",
                    body,
                    StatusCode::OK,
                )
                .await
                .map(drop)
            }
        },
    )
    .await;
    summarize("update", "bosun", args.rate, runs, start, cpu.stop())
}

struct ListResult {
    name: String,
    clients: usize,
    lists: usize,
    errors: usize,
    items: usize,
    bytes: usize,
    elapsed: Duration,
    latency: Stats,
    cpu: HashMap<&'static str, f64>,
}

impl ListResult {
    fn to_json(&self) -> Value {
        json!({
            "variant": self.name, "clients": self.clients, "lists": self.lists,
            "errors": self.errors, "items_per_list": self.items / self.lists.max(1),
            "bytes_per_list": self.bytes / self.lists.max(1),
            "elapsed_s": self.elapsed.as_secs_f64(),
            "objects_per_s": self.items as f64 / self.elapsed.as_secs_f64().max(1e-9),
            "latency": self.latency.to_json(),
            "cpu_seconds": self.cpu,
        })
    }
}

#[derive(serde::Deserialize)]
struct ListBody {
    items: Vec<serde::de::IgnoredAny>,
}

/// `rounds` lists of `query` from each of `clients`, all at once.
async fn bosun_list(
    args: &Args,
    ws: &[Arc<Worker>],
    ns: &str,
    name: &str,
    selector: Option<&str>,
    rounds: usize,
) -> ListResult {
    let uri = match selector {
        Some(s) => format!("/api/v1/namespaces/{ns}/pods?labelSelector={s}"),
        None => format!("/api/v1/namespaces/{ns}/pods"),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let timeout = Duration::from_secs_f64(args.op_timeout);
    let cpu = CpuMeter::start(args);
    let start = Instant::now();
    let tasks = ws.iter().map(|w| {
        let uri = uri.clone();
        async move {
            let mut out = Vec::new();
            for _ in 0..rounds {
                if Instant::now() > deadline {
                    break;
                }
                let sent = Instant::now();
                let res = tokio::time::timeout(timeout, get(&w.client, &uri)).await;
                out.push((sent.elapsed(), res.ok().and_then(Result::ok)));
            }
            out
        }
    });
    let all: Vec<_> = futures::future::join_all(tasks)
        .await
        .into_iter()
        .flatten()
        .collect();
    let elapsed = start.elapsed();
    let cpu = cpu.stop();
    let mut latency = Vec::new();
    let (mut items, mut bytes, mut errors) = (0, 0, 0);
    for (took, body) in all {
        match body.and_then(|b| Some((b.len(), serde_json::from_slice::<ListBody>(&b).ok()?))) {
            Some((len, list)) => {
                latency.push(took);
                items += list.items.len();
                bytes += len;
            }
            None => errors += 1,
        }
    }
    ListResult {
        name: name.to_string(),
        clients: ws.len(),
        lists: latency.len(),
        errors,
        items,
        bytes,
        elapsed,
        latency: Stats::of(&latency),
        cpu,
    }
}

/// When one create was sent and when it was acknowledged.
type SentAcked = Option<(Instant, Instant)>;

struct WatchResult {
    watchers: usize,
    events: usize,
    open_time: Duration,
    create: LoadResult,
    /// Receipt at a watcher minus the create's acknowledgement.
    after_ack: Stats,
    /// Receipt at a watcher minus the create's send time.
    after_send: Stats,
    /// Pairs where the event reached the watcher before the creator heard back.
    before_ack: usize,
    expected_pairs: usize,
    received_pairs: usize,
    complete_watchers: usize,
    duplicates: usize,
    cpu: HashMap<&'static str, f64>,
}

impl WatchResult {
    fn to_json(&self) -> Value {
        json!({
            "watchers": self.watchers, "events": self.events,
            "open_all_watches_s": self.open_time.as_secs_f64(),
            "create": self.create.to_json(),
            "delivery_after_ack": self.after_ack.to_json(),
            "delivery_after_send": self.after_send.to_json(),
            "pairs_delivered_before_ack": self.before_ack,
            "expected_pairs": self.expected_pairs, "received_pairs": self.received_pairs,
            "watchers_with_every_event": self.complete_watchers,
            "duplicate_events": self.duplicates,
            "every_watcher_got_every_event": self.complete_watchers == self.watchers
                && self.received_pairs == self.expected_pairs,
            "cpu_seconds": self.cpu,
        })
    }
}

async fn bosun_watch(args: &Args, config: &Config, ns: &str) -> anyhow::Result<WatchResult> {
    let m = args.watch_events;
    let ar = ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: "Pod".into(),
        plural: "pods".into(),
    };
    // Start every watch at the namespace's current revision, so nothing is missed.
    let lister = new_client(config)?;
    let list = get(&lister, &format!("/api/v1/namespaces/{ns}/pods?limit=1"))
        .await
        .map_err(anyhow::Error::msg)?;
    let list: Value = serde_json::from_slice(&list)?;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .context("the list has no resourceVersion")?
        .to_string();

    let cpu = CpuMeter::start(args);
    let watch_client = new_client(config)?;
    let api: Api<DynamicObject> = Api::namespaced_with(watch_client, ns, &ar);
    let wp = WatchParams::default().timeout(290);
    let open_start = Instant::now();
    let streams = futures::future::join_all((0..args.watchers).map(|_| api.watch(&wp, &rv))).await;
    let open_time = open_start.elapsed();
    let deadline = Instant::now()
        + Duration::from_secs_f64(m as f64 / args.watch_rate + args.op_timeout + 20.0);
    let mut watchers = Vec::new();
    for s in streams {
        let stream = s.context("opening a watch")?;
        watchers.push(tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            let mut got: Vec<(usize, Instant)> = Vec::new();
            let mut seen = vec![false; m];
            let mut distinct = 0;
            while distinct < m {
                let next = tokio::time::timeout_at(deadline.into(), stream.next()).await;
                let Ok(Some(event)) = next else { break };
                let now = Instant::now();
                let Ok(WatchEvent::Added(obj)) = event else {
                    continue;
                };
                let idx = obj
                    .metadata
                    .name
                    .as_deref()
                    .and_then(|n| n.strip_prefix("watch-"))
                    .and_then(|i| i.parse::<usize>().ok())
                    .filter(|i| *i < m);
                if let Some(i) = idx {
                    if !seen[i] {
                        seen[i] = true;
                        distinct += 1;
                    }
                    got.push((i, now));
                }
            }
            got
        }));
    }

    // Creator: a few clients at the modest rate; event i is sent at start + i/rate.
    let creators = workers(config, args.concurrency.clamp(1, 4))?;
    warm_up(&creators, &format!("/api/v1/namespaces/{ns}")).await?;
    let times: Arc<Mutex<Vec<SentAcked>>> = Arc::new(Mutex::new(vec![None; m]));
    let n = creators.len();
    let ns_owned = ns.to_string();
    let times_w = times.clone();
    let (runs, start) = open_loop(
        &creators,
        args.watch_rate,
        Duration::from_secs_f64((m as f64 - 0.5) / args.watch_rate),
        Duration::from_secs_f64(args.op_timeout),
        move |w: Arc<Worker>, wi, k| {
            let i = wi + k * n;
            let name = format!("watch-{i}");
            let body = serde_json::to_vec(&pod(&ns_owned, &name, i, 0)).expect("json");
            let uri = format!("/api/v1/namespaces/{ns_owned}/pods");
            let times = times_w.clone();
            async move {
                let sent = Instant::now();
                call(
                    &w.client,
                    Method::POST,
                    &uri,
                    JSON,
                    body,
                    StatusCode::CREATED,
                )
                .await?;
                let acked = Instant::now();
                if let Some(slot) = times.lock().expect("lock").get_mut(i) {
                    *slot = Some((sent, acked));
                }
                Ok(())
            }
        },
    )
    .await;
    let create = summarize(
        "watch-create",
        "bosun",
        args.watch_rate,
        runs,
        start,
        HashMap::new(),
    );

    let mut after_ack = Vec::new();
    let mut after_send = Vec::new();
    let (mut before_ack, mut received, mut complete, mut duplicates) = (0, 0, 0, 0);
    let times = times.lock().expect("lock").clone();
    let expected: usize = times.iter().filter(|t| t.is_some()).count();
    for w in watchers {
        let got = w.await.context("watcher task")?;
        let mut seen = vec![false; m];
        let mut distinct = 0;
        for (i, at) in got {
            if seen[i] {
                duplicates += 1;
                continue;
            }
            seen[i] = true;
            let Some((sent, acked)) = times[i] else {
                continue;
            };
            distinct += 1;
            after_send.push(at.saturating_duration_since(sent));
            if at < acked {
                before_ack += 1;
            }
            after_ack.push(at.saturating_duration_since(acked));
        }
        received += distinct;
        if distinct == expected {
            complete += 1;
        }
    }
    Ok(WatchResult {
        watchers: args.watchers,
        events: expected,
        open_time,
        create,
        after_ack: Stats::of(&after_ack),
        after_send: Stats::of(&after_send),
        before_ack,
        expected_pairs: expected * args.watchers,
        received_pairs: received,
        complete_watchers: complete,
        duplicates,
        cpu: cpu.stop(),
    })
}

// ---------------------------------------------------------------- etcd phases

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// One transaction that writes `value` at `key` if its create revision
/// (`expected_mod` None) or mod revision (Some) is what the caller knows,
/// as kube-apiserver's etcd3 storage does for create and update.
fn etcd_txn(key: &str, value: &[u8], expected_mod: Option<i64>) -> Vec<u8> {
    let compare = match expected_mod {
        None => {
            json!({"key": b64(key.as_bytes()), "target": "CREATE", "result": "EQUAL", "create_revision": "0"})
        }
        Some(rev) => {
            json!({"key": b64(key.as_bytes()), "target": "MOD", "result": "EQUAL", "mod_revision": rev.to_string()})
        }
    };
    serde_json::to_vec(&json!({
        "compare": [compare],
        "success": [{"request_put": {"key": b64(key.as_bytes()), "value": b64(value)}}],
    }))
    .expect("json")
}

/// The revision a successful transaction wrote at, or why it did not.
fn etcd_txn_revision(body: &[u8]) -> Result<i64, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    if v["succeeded"] != json!(true) {
        return Err(format!(
            "transaction did not succeed: {}",
            String::from_utf8_lossy(body)
        ));
    }
    let rev = &v["header"]["revision"];
    rev.as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| rev.as_i64())
        .ok_or_else(|| format!("no revision in {}", String::from_utf8_lossy(body)))
}

fn etcd_key(ns: &str, name: &str) -> String {
    format!("/registry/pods/{ns}/{name}")
}

async fn etcd_create(args: &Args, ws: &[Arc<Worker>], ns: &str) -> LoadResult {
    let cpu = CpuMeter::start(args);
    let ns = ns.to_string();
    let (runs, start) = open_loop(
        ws,
        args.rate,
        Duration::from_secs_f64(args.duration),
        Duration::from_secs_f64(args.op_timeout),
        move |w: Arc<Worker>, wi, k| {
            let name = pod_name(wi, k);
            let key = etcd_key(&ns, &name);
            let value = serde_json::to_vec(&pod(&ns, &name, k, 0)).expect("json");
            let body = etcd_txn(&key, &value, None);
            async move {
                let resp = call(
                    &w.client,
                    Method::POST,
                    "/v3/kv/txn",
                    JSON,
                    body,
                    StatusCode::OK,
                )
                .await?;
                let rev = etcd_txn_revision(&resp)?;
                w.created.lock().expect("lock").push((key, rev));
                Ok(())
            }
        },
    )
    .await;
    summarize("create", "etcd", args.rate, runs, start, cpu.stop())
}

async fn etcd_update(args: &Args, ws: &[Arc<Worker>], ns: &str) -> LoadResult {
    let cpu = CpuMeter::start(args);
    let ns = ns.to_string();
    let (runs, start) = open_loop(
        ws,
        args.rate,
        Duration::from_secs_f64(args.duration),
        Duration::from_secs_f64(args.op_timeout),
        move |w: Arc<Worker>, _wi, k| {
            let slot = {
                let created = w.created.lock().expect("lock");
                (!created.is_empty()).then(|| {
                    let i = k % created.len();
                    (i, created[i].clone())
                })
            };
            let ns = ns.clone();
            async move {
                let (i, (key, rev)) = slot.ok_or("this client created no key to update")?;
                let name = key.rsplit('/').next().unwrap_or_default().to_string();
                // The whole object, its label changed: what an update stores.
                let value = serde_json::to_vec(&pod(&ns, &name, k, k + 1)).expect("json");
                let body = etcd_txn(&key, &value, Some(rev));
                let resp = call(
                    &w.client,
                    Method::POST,
                    "/v3/kv/txn",
                    JSON,
                    body,
                    StatusCode::OK,
                )
                .await?;
                let new_rev = etcd_txn_revision(&resp)?;
                w.created.lock().expect("lock")[i].1 = new_rev;
                Ok(())
            }
        },
    )
    .await;
    summarize("update", "etcd", args.rate, runs, start, cpu.stop())
}

// ---------------------------------------------------------------- report

fn fmt_ms(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn print_load_header() {
    println!(
        "{:<7} {:<6} {:>11} {:>9} {:>8} {:>8} {:>8} {:>8} {:>9} {:>11} {:>11}",
        "target",
        "phase",
        "ok/sent",
        "achieved",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "svc p99",
        "server cpu",
        "bench cpu"
    );
}

fn print_load(r: &LoadResult) {
    // CPU time per successful operation.
    let per_op = |who: &str| {
        r.cpu
            .get(who)
            .map(|s| format!("{:.0} us/op", s * 1e6 / r.ok.max(1) as f64))
            .unwrap_or_else(|| "-".into())
    };
    println!(
        "{:<7} {:<6} {:>11} {:>7.0}/s {:>8} {:>8} {:>8} {:>8} {:>9} {:>11} {:>11}",
        r.target,
        r.name,
        format!("{}/{}", r.ok, r.attempted),
        r.achieved(),
        fmt_ms(r.latency.p50),
        fmt_ms(r.latency.p90),
        fmt_ms(r.latency.p99),
        fmt_ms(r.latency.max),
        fmt_ms(r.service.p99),
        per_op(r.target),
        per_op("bench"),
    );
    if let Some(e) = &r.first_error {
        println!("        {} errors; first: {e}", r.errors);
    }
    if let Some(other) = r.cpu.get("other") {
        let cores = other / r.elapsed.as_secs_f64().max(1e-9);
        if cores > 0.1 {
            println!("        other processes on the host used {cores:.2} cores meanwhile");
        }
    }
}

fn memory_json(pid: Option<u32>) -> Value {
    match pid {
        Some(p) => json!({"pid": p, "vm_hwm_kib": status_kib(p, "VmHWM"),
                          "vm_rss_kib": status_kib(p, "VmRSS")}),
        None => Value::Null,
    }
}

fn mib(kib: Option<u64>) -> String {
    kib.map(|k| format!("{:.1} MiB", k as f64 / 1024.0))
        .unwrap_or_else(|| "-".into())
}

// ---------------------------------------------------------------- main

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.concurrency == 0 || args.rate <= 0.0 || args.duration <= 0.0 || args.watch_rate <= 0.0 {
        bail!("--concurrency, --rate, --duration and --watch-rate must be positive");
    }
    let config = bosun_config(&args).await?;
    let date = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let ns = format!("bench-{}", unix_now() as u64);
    println!(
        "api_bench {date}: server {}, namespace {ns}, {} clients, {} writes/s for {} s, {} watchers",
        config.cluster_url, args.concurrency, args.rate, args.duration, args.watchers
    );

    // Fresh namespace.
    let admin = new_client(&config)?;
    let ns_body = serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": ns}}))?;
    call(
        &admin,
        Method::POST,
        "/api/v1/namespaces",
        JSON,
        ns_body,
        StatusCode::CREATED,
    )
    .await
    .map_err(|e| anyhow::anyhow!("creating namespace {ns}: {e}"))?;

    let ws = workers(&config, args.concurrency)?;
    warm_up(&ws, &format!("/api/v1/namespaces/{ns}")).await?;

    println!();
    print_load_header();
    let create = bosun_create(&args, &ws, &ns).await;
    print_load(&create);
    let update = bosun_update(&args, &ws, &ns).await;
    print_load(&update);

    // What the server stores for one of those pods (after defaulting).
    let first_pod = ws[0].created.lock().expect("lock").first().cloned();
    let stored_pod_bytes = match first_pod {
        Some((name, _)) => get(&admin, &format!("/api/v1/namespaces/{ns}/pods/{name}"))
            .await
            .map(|b| b.len())
            .ok(),
        None => None,
    };

    let mut lists = Vec::new();
    let single = &ws[..1];
    let variants: &[(&str, Option<&str>)] = if args.skip_list {
        &[]
    } else {
        &[("all", None), ("selector", Some("group%3Dg3"))]
    };
    for &(name, sel) in variants {
        lists.push(bosun_list(&args, single, &ns, name, sel, args.list_rounds).await);
        lists.push(bosun_list(&args, &ws, &ns, name, sel, args.list_rounds_concurrent).await);
    }
    if !lists.is_empty() {
        println!();
        println!(
            "{:<9} {:>7} {:>6} {:>6} {:>10} {:>8} {:>8} {:>8} {:>12}",
            "list", "clients", "lists", "items", "bytes", "p50 ms", "p99 ms", "max ms", "objects/s"
        );
        for l in &lists {
            println!(
                "{:<9} {:>7} {:>6} {:>6} {:>10} {:>8} {:>8} {:>8} {:>12.0}{}",
                l.name,
                l.clients,
                l.lists,
                l.items / l.lists.max(1),
                l.bytes / l.lists.max(1),
                fmt_ms(l.latency.p50),
                fmt_ms(l.latency.p99),
                fmt_ms(l.latency.max),
                l.items as f64 / l.elapsed.as_secs_f64().max(1e-9),
                if l.errors > 0 {
                    format!("  ({} errors)", l.errors)
                } else {
                    String::new()
                },
            );
        }
    }

    let watch = if args.skip_watch {
        None
    } else {
        Some(bosun_watch(&args, &config, &ns).await?)
    };
    if let Some(watch) = &watch {
        println!();
        println!(
        "watch fan-out: {} watchers opened in {:.0} ms; {} pods created at {:.0}/s (create p99 {} ms)",
        watch.watchers,
        watch.open_time.as_secs_f64() * 1e3,
        watch.events,
        watch.create.achieved(),
        fmt_ms(watch.create.latency.p99),
    );
        println!(
            "  delivery after ack:  p50 {} ms, p99 {} ms, max {} ms over {} watcher x event pairs \
         ({} arrived before the ack)",
            fmt_ms(watch.after_ack.p50),
            fmt_ms(watch.after_ack.p99),
            fmt_ms(watch.after_ack.max),
            watch.after_ack.count,
            watch.before_ack
        );
        println!(
            "  delivery after send: p50 {} ms, p99 {} ms, max {} ms",
            fmt_ms(watch.after_send.p50),
            fmt_ms(watch.after_send.p99),
            fmt_ms(watch.after_send.max),
        );
        println!(
            "  {}/{} pairs received, {}/{} watchers got every event, {} duplicates",
            watch.received_pairs,
            watch.expected_pairs,
            watch.complete_watchers,
            watch.watchers,
            watch.duplicates
        );
    }

    let mut etcd = Vec::new();
    if let Some(url) = &args.etcd {
        let uri: http::Uri = url.parse().with_context(|| format!("--etcd {url}"))?;
        require_loopback(&uri)?;
        let etcd_config = Config::new(uri);
        let ews = workers(&etcd_config, args.concurrency)?;
        // Any cheap request opens the connections; /version answers GET.
        warm_up(&ews, "/version").await?;
        etcd.push(etcd_create(&args, &ews, &ns).await);
        etcd.push(etcd_update(&args, &ews, &ns).await);
    }

    println!();
    println!(
        "side by side ({} clients, target {} writes/s, {} s per phase; latency from the scheduled send):",
        args.concurrency, args.rate, args.duration
    );
    print_load_header();
    for r in [&create, &update].into_iter().chain(etcd.iter()) {
        print_load(r);
    }
    let bosun_mem = memory_json(args.server_pid);
    let etcd_mem = memory_json(args.etcd_pid);
    println!(
        "peak RSS (VmHWM): bosun {}, etcd {}",
        mib(bosun_mem["vm_hwm_kib"].as_u64()),
        mib(etcd_mem["vm_hwm_kib"].as_u64())
    );
    if let Some(b) = stored_pod_bytes {
        println!("one pod as bosun stores and returns it: {b} bytes");
    }

    if let Some(path) = &args.json {
        let out = json!({
            "date": date,
            "server": config.cluster_url.to_string(),
            "namespace": ns,
            "args": {
                "concurrency": args.concurrency, "rate": args.rate, "duration_s": args.duration,
                "watchers": args.watchers, "watch_events": args.watch_events,
                "watch_rate": args.watch_rate, "list_rounds": args.list_rounds,
                "list_rounds_concurrent": args.list_rounds_concurrent,
                "op_timeout_s": args.op_timeout, "etcd": args.etcd,
            },
            "bosun": {
                "create": create.to_json(),
                "update": update.to_json(),
                "list": lists.iter().map(ListResult::to_json).collect::<Vec<_>>(),
                "watch": watch.as_ref().map(WatchResult::to_json),
                "stored_pod_bytes": stored_pod_bytes,
                "memory": bosun_mem,
            },
            "etcd": if etcd.is_empty() { Value::Null } else { json!({
                "create": etcd[0].to_json(),
                "update": etcd[1].to_json(),
                "memory": etcd_mem,
            })},
        });
        std::fs::write(path, serde_json::to_vec_pretty(&out)?)
            .with_context(|| format!("writing {}", path.display()))?;
        println!("results written to {}", path.display());
    }
    Ok(())
}
