//! `bosun autoscale`: creates a HorizontalPodAutoscaler for a deployment,
//! replica set or stateful set, as `kubectl autoscale` does (named after
//! the target; `--cpu-percent` becomes a CPU utilization metric).

use anyhow::{bail, Result};
use clap::Args;
use serde_json::json;

use super::client::Ctx;
use super::targets::targets;

#[derive(Debug, Args)]
pub struct AutoscaleArgs {
    /// TYPE NAME or TYPE/NAME (deployment, replicaset, statefulset).
    #[arg(required = true, value_name = "TYPE NAME")]
    resource: Vec<String>,
    /// The lower limit for the number of pods (default: the server's, 1).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    min: i32,
    /// The upper limit for the number of pods.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    max: i32,
    /// The target average CPU utilization over all the pods, as a
    /// percentage of what they request (default: the server's, 80%).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    cpu_percent: i32,
    /// The new autoscaler's name (default: the target's).
    #[arg(long)]
    name: Option<String>,
}

pub async fn autoscale(ctx: &Ctx, args: &AutoscaleArgs) -> Result<bool> {
    if args.max < 1 {
        bail!(
            "--max=MAXPODS is required and must be at least 1, max replicas: {}",
            args.max
        );
    }
    if args.min > args.max {
        bail!(
            "--max=MAXPODS must be larger or equal to --min=MINPODS, max: {}, min: {}",
            args.max,
            args.min
        );
    }
    let targets = targets(ctx, &args.resource).await?;
    let (info, name) = match targets.as_slice() {
        [t] if t.names.len() == 1 => (t.info, t.names[0].clone()),
        _ => bail!("exactly one TYPE NAME (or TYPE/NAME) is autoscaled at a time"),
    };
    if !info.has_subresource("scale") {
        bail!(
            "cannot autoscale a {}: it has no scale subresource",
            info.kind
        );
    }
    let ns = ctx.namespace.clone();
    // The target must exist (kubectl reads it first too).
    ctx.get_json(&Ctx::object_path(info, Some(&ns), &name))
        .await?;
    let hpa_name = args.name.clone().unwrap_or_else(|| name.clone());
    let mut spec = json!({
        "scaleTargetRef": {"apiVersion": info.api_version(), "kind": info.kind, "name": name},
        "maxReplicas": args.max,
    });
    if args.min >= 1 {
        spec["minReplicas"] = json!(args.min);
    }
    if args.cpu_percent >= 0 {
        spec["metrics"] = json!([{"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": args.cpu_percent}}}]);
    }
    let hpa = json!({
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": hpa_name, "namespace": ns},
        "spec": spec,
    });
    let hpa_res = bosun::resources::by_name("hpa").expect("hpa is served");
    ctx.request_json(
        http::Method::POST,
        &hpa_res.collection_path(Some(&ns)),
        None,
        Some("application/json"),
        Some(&hpa),
    )
    .await?;
    println!("horizontalpodautoscaler.autoscaling/{hpa_name} autoscaled");
    Ok(true)
}
