//! `bosun top node|pod`: resource use from `metrics.k8s.io`, in kubectl
//! top's columns: CPU in millicores (`12m`), memory in MiB (`5Mi`), and
//! for nodes the share of allocatable (`CPU(%)`, `MEMORY(%)`).

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use serde_json::Value;

use super::client::{with_query, Ctx};
use super::table::{align, no_resources_message};
use bosun::quantity::parse_quantity;

#[derive(Debug, Args)]
pub struct TopArgs {
    #[command(subcommand)]
    what: TopCommand,
}

#[derive(Debug, Subcommand)]
enum TopCommand {
    /// Display resource (CPU/memory) usage of nodes.
    #[command(alias = "nodes", alias = "no")]
    Node(TopNodeArgs),
    /// Display resource (CPU/memory) usage of pods.
    #[command(alias = "pods", alias = "po")]
    Pod(TopPodArgs),
}

#[derive(Debug, Args)]
pub struct TopNodeArgs {
    /// One node's name.
    name: Option<String>,
    /// Label selector to filter on.
    #[arg(short = 'l', long)]
    selector: Option<String>,
    /// Sort by `cpu` or `memory`.
    #[arg(long, value_parser = ["cpu", "memory"])]
    sort_by: Option<String>,
    /// Leave out the header line.
    #[arg(long)]
    no_headers: bool,
}

#[derive(Debug, Args)]
pub struct TopPodArgs {
    /// One pod's name.
    name: Option<String>,
    /// Label selector to filter on.
    #[arg(short = 'l', long)]
    selector: Option<String>,
    /// Pods of every namespace.
    #[arg(short = 'A', long)]
    all_namespaces: bool,
    /// One line per container.
    #[arg(long)]
    containers: bool,
    /// Sort by `cpu` or `memory`.
    #[arg(long, value_parser = ["cpu", "memory"])]
    sort_by: Option<String>,
    /// Leave out the header line.
    #[arg(long)]
    no_headers: bool,
}

const GROUP_PATH: &str = "/apis/metrics.k8s.io/v1beta1";

/// Millicores and bytes of a `usage` map, rounded up as Kubernetes'
/// `MilliValue` and `Value` are.
fn usage_of(usage: &Value) -> (i128, i128) {
    let q = |k: &str| {
        usage[k]
            .as_str()
            .and_then(|s| parse_quantity(s).ok())
            .map(|q| (q.millis(), q.value()))
            .unwrap_or((0, 0))
    };
    (q("cpu").0, q("memory").1)
}

/// kubectl's cells: `45m`, `5Mi`.
fn cpu_cell(millis: i128) -> String {
    format!("{millis}m")
}

fn memory_cell(bytes: i128) -> String {
    format!("{}Mi", bytes / (1024 * 1024))
}

/// kubectl's percentage: usage / allocatable, both in milli-units,
/// truncated.
fn percent_cell(used_millis: i128, available_millis: i128) -> String {
    if available_millis <= 0 {
        return "<unknown>".into();
    }
    let fraction = used_millis as f64 / available_millis as f64 * 100.0;
    format!("{}%", fraction as i64)
}

/// kubectl's tabwriter terminates every cell (the last too) with a tab,
/// so every column, the last included, is padded.
fn print_lines(mut lines: Vec<Vec<String>>) {
    for l in &mut lines {
        l.push(String::new());
    }
    print!("{}", align(&lines));
}

async fn metrics_api_available(ctx: &Ctx) -> Result<()> {
    let groups = ctx.get_json("/apis").await?;
    let served = groups["groups"]
        .as_array()
        .is_some_and(|g| g.iter().any(|g| g["name"] == "metrics.k8s.io"));
    if !served {
        bail!("Metrics API not available");
    }
    Ok(())
}

fn sort(rows: &mut [(String, i128, i128, Vec<String>)], by: Option<&str>) {
    match by {
        Some("cpu") => rows.sort_by_key(|r| std::cmp::Reverse(r.1)),
        Some("memory") => rows.sort_by_key(|r| std::cmp::Reverse(r.2)),
        _ => {}
    }
}

pub async fn top(ctx: &Ctx, args: &TopArgs) -> Result<bool> {
    metrics_api_available(ctx).await?;
    match &args.what {
        TopCommand::Node(a) => top_node(ctx, a).await,
        TopCommand::Pod(a) => top_pod(ctx, a).await,
    }
}

async fn top_node(ctx: &Ctx, args: &TopNodeArgs) -> Result<bool> {
    let selector: Vec<(&str, &str)> = args
        .selector
        .as_deref()
        .map(|s| vec![("labelSelector", s)])
        .unwrap_or_default();
    let (metrics, nodes) = match &args.name {
        Some(name) => (
            vec![ctx.get_json(&format!("{GROUP_PATH}/nodes/{name}")).await?],
            vec![ctx.get_json(&format!("/api/v1/nodes/{name}")).await?],
        ),
        None => {
            let m = ctx
                .get_json(&with_query(&format!("{GROUP_PATH}/nodes"), &selector))
                .await?;
            let n = ctx
                .get_json(&with_query("/api/v1/nodes", &selector))
                .await?;
            (
                m["items"].as_array().cloned().unwrap_or_default(),
                n["items"].as_array().cloned().unwrap_or_default(),
            )
        }
    };
    if metrics.is_empty() {
        bail!("metrics not available yet");
    }
    let mut rows = Vec::new();
    for m in &metrics {
        let name = m["metadata"]["name"].as_str().unwrap_or_default();
        let (cpu, mem) = usage_of(&m["usage"]);
        let alloc = nodes
            .iter()
            .find(|n| n["metadata"]["name"] == name)
            .map(|n| usage_of(&n["status"]["allocatable"]))
            .unwrap_or((0, 0));
        rows.push((
            name.to_string(),
            cpu,
            mem,
            vec![
                name.to_string(),
                cpu_cell(cpu),
                percent_cell(cpu, alloc.0),
                memory_cell(mem),
                percent_cell(mem * 1000, alloc.1 * 1000),
            ],
        ));
    }
    sort(&mut rows, args.sort_by.as_deref());
    let mut lines = Vec::new();
    if !args.no_headers {
        lines.push(
            ["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"]
                .map(String::from)
                .to_vec(),
        );
    }
    lines.extend(rows.into_iter().map(|r| r.3));
    // Nodes without metrics, as kubectl shows them.
    for n in &nodes {
        let name = n["metadata"]["name"].as_str().unwrap_or_default();
        if args.name.is_none() && !metrics.iter().any(|m| m["metadata"]["name"] == name) {
            let mut line = vec![name.to_string()];
            line.extend(std::iter::repeat_n("<unknown>".to_string(), 4));
            lines.push(line);
        }
    }
    print_lines(lines);
    Ok(true)
}

async fn top_pod(ctx: &Ctx, args: &TopPodArgs) -> Result<bool> {
    let ns = (!args.all_namespaces).then_some(ctx.namespace.as_str());
    let scope = match ns {
        Some(ns) => format!("{GROUP_PATH}/namespaces/{ns}/pods"),
        None => format!("{GROUP_PATH}/pods"),
    };
    let metrics = match &args.name {
        Some(name) => match ctx.get_json(&format!("{scope}/{name}")).await {
            Ok(m) => vec![m],
            Err(kube::Error::Api(s)) if s.code == 404 => {
                let pod = ctx
                    .get_json(&format!(
                        "/api/v1/namespaces/{}/pods/{name}",
                        ns.unwrap_or("default")
                    ))
                    .await?;
                let age = pod["metadata"]["creationTimestamp"]
                    .as_str()
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                    .map(|t| {
                        bosun::printers::human_duration(
                            chrono::Utc::now() - t.with_timezone(&chrono::Utc),
                        )
                    })
                    .unwrap_or_else(|| "<unknown>".into());
                bail!(
                    "Metrics not available for pod {}/{name}, age: {age}",
                    ns.unwrap_or("default")
                );
            }
            Err(e) => return Err(e.into()),
        },
        None => {
            let selector: Vec<(&str, &str)> = args
                .selector
                .as_deref()
                .map(|s| vec![("labelSelector", s)])
                .unwrap_or_default();
            let m = ctx.get_json(&with_query(&scope, &selector)).await?;
            let items = m["items"].as_array().cloned().unwrap_or_default();
            if items.is_empty() {
                let pods_path = match ns {
                    Some(ns) => format!("/api/v1/namespaces/{ns}/pods"),
                    None => "/api/v1/pods".to_string(),
                };
                let pods = ctx.get_json(&with_query(&pods_path, &selector)).await?;
                if pods["items"].as_array().is_some_and(|p| !p.is_empty()) {
                    bail!("metrics not available yet");
                }
                eprintln!("{}", no_resources_message(ns));
                return Ok(true);
            }
            items
        }
    };
    let mut rows = Vec::new();
    for m in &metrics {
        let pod = m["metadata"]["name"].as_str().unwrap_or_default();
        let pod_ns = m["metadata"]["namespace"].as_str().unwrap_or_default();
        let containers = m["containers"].as_array().cloned().unwrap_or_default();
        let mut prefix = Vec::new();
        if args.all_namespaces {
            prefix.push(pod_ns.to_string());
        }
        if args.containers {
            for c in &containers {
                let (cpu, mem) = usage_of(&c["usage"]);
                let mut cells = prefix.clone();
                cells.extend([
                    pod.to_string(),
                    c["name"].as_str().unwrap_or_default().to_string(),
                    cpu_cell(cpu),
                    memory_cell(mem),
                ]);
                rows.push((pod.to_string(), cpu, mem, cells));
            }
        } else {
            let (cpu, mem) = containers
                .iter()
                .map(|c| usage_of(&c["usage"]))
                .fold((0, 0), |(a, b), (c, d)| (a + c, b + d));
            let mut cells = prefix;
            cells.extend([pod.to_string(), cpu_cell(cpu), memory_cell(mem)]);
            rows.push((pod.to_string(), cpu, mem, cells));
        }
    }
    sort(&mut rows, args.sort_by.as_deref());
    let mut lines = Vec::new();
    if !args.no_headers {
        let mut header = Vec::new();
        if args.all_namespaces {
            header.push("NAMESPACE");
        }
        if args.containers {
            header.extend(["POD", "NAME"]);
        } else {
            header.push("NAME");
        }
        header.extend(["CPU(cores)", "MEMORY(bytes)"]);
        lines.push(header.into_iter().map(String::from).collect());
    }
    lines.extend(rows.into_iter().map(|r| r.3));
    print_lines(lines);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cells_as_kubectl_prints_them() {
        let (cpu, mem) = usage_of(&json!({"cpu": "45000001n", "memory": "5120Ki"}));
        // MilliValue rounds up; MiB are whole.
        assert_eq!(cpu_cell(cpu), "46m");
        assert_eq!(memory_cell(mem), "5Mi");
        assert_eq!(memory_cell(5 * 1024 * 1024 - 1), "4Mi");
        assert_eq!(percent_cell(250, 2000), "12%");
        assert_eq!(percent_cell(250, 0), "<unknown>");
    }
}
