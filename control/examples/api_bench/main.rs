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
pub(crate) struct Args {
    /// The admin kubeconfig the server wrote (DIR/admin.kubeconfig).
    #[arg(long)]
    pub(crate) kubeconfig: PathBuf,
    /// Concurrent clients (one connection each).
    #[arg(long, default_value_t = 32)]
    pub(crate) concurrency: usize,
    /// Target writes per second of the create and update phases.
    #[arg(long, default_value_t = 500.0)]
    pub(crate) rate: f64,
    /// Seconds each of the create and update phases lasts.
    #[arg(long, default_value_t = 10.0)]
    pub(crate) duration: f64,
    /// Watches opened for the fan-out phase.
    #[arg(long, default_value_t = 100)]
    pub(crate) watchers: usize,
    /// Pods created while the watches are open.
    #[arg(long, default_value_t = 200)]
    pub(crate) watch_events: usize,
    /// Creates per second while the watches are open.
    #[arg(long, default_value_t = 50.0)]
    pub(crate) watch_rate: f64,
    /// Lists per variant from the single client.
    #[arg(long, default_value_t = 20)]
    pub(crate) list_rounds: usize,
    /// Lists per variant from each of the concurrent clients.
    #[arg(long, default_value_t = 3)]
    pub(crate) list_rounds_concurrent: usize,
    /// Seconds after which one request counts as failed.
    #[arg(long, default_value_t = 10.0)]
    pub(crate) op_timeout: f64,
    /// etcd's client URL (http://127.0.0.1:PORT): also run create/update there.
    #[arg(long)]
    pub(crate) etcd: Option<String>,
    /// bosun-control's pid: report its CPU time per phase and its memory.
    #[arg(long)]
    pub(crate) server_pid: Option<u32>,
    /// etcd's pid: report its CPU time per phase and its memory.
    #[arg(long)]
    pub(crate) etcd_pid: Option<u32>,
    /// Also write the results as JSON here.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Leave out the list phase (e.g. to profile the writes alone).
    #[arg(long)]
    pub(crate) skip_list: bool,
    /// Leave out the watch fan-out phase.
    #[arg(long)]
    pub(crate) skip_watch: bool,
    /// Instead of the phases above: create N pods and list them, once as
    /// JSON and once as protobuf, and compare bytes, time and server CPU.
    #[arg(long, default_value_t = 0)]
    pub(crate) encodings: usize,
}

mod bosun_phases;
mod clients;
mod encodings;
mod etcd_phases;
mod numbers;
mod objects;
mod open_loop;
mod report;
use bosun_phases::*;
use clients::*;
use encodings::*;
use etcd_phases::*;
use numbers::*;
use objects::*;
use open_loop::*;
use report::*;

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

    let admin = new_client(&config)?;
    if args.encodings > 0 {
        return compare_encodings(&args, &config, &admin, &ns, &date).await;
    }

    // Fresh namespace.
    create_namespace(&admin, &ns).await?;

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

/// The `--encodings` run: JSON first, then protobuf, the same pods.
async fn compare_encodings(
    args: &Args,
    config: &Config,
    admin: &Client,
    ns: &str,
    date: &str,
) -> anyhow::Result<()> {
    let ws = workers(config, args.concurrency)?;
    warm_up(&ws, "/api/v1/namespaces/default").await?;
    let mut steps = Vec::new();
    for (encoding, media_type) in [("json", JSON), ("protobuf", PROTOBUF)] {
        let ns = format!("{ns}-{encoding}");
        steps.extend(
            encoding_steps(args, admin, &ws, &ns, encoding, media_type, args.encodings).await?,
        );
    }
    println!();
    print_encoding_steps(&steps);
    let bosun_mem = memory_json(args.server_pid);
    println!(
        "peak RSS (VmHWM): bosun {}",
        mib(bosun_mem["vm_hwm_kib"].as_u64())
    );
    if let Some(path) = &args.json {
        let out = json!({
            "date": date,
            "server": config.cluster_url.to_string(),
            "args": {"concurrency": args.concurrency, "pods": args.encodings},
            "encodings": steps.iter().map(EncodingStep::to_json).collect::<Vec<_>>(),
            "memory": bosun_mem,
        });
        std::fs::write(path, serde_json::to_vec_pretty(&out)?)
            .with_context(|| format!("writing {}", path.display()))?;
        println!("results written to {}", path.display());
    }
    Ok(())
}
