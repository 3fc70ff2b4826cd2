//! `bosun scale`: sets `spec.replicas` through the `scale` subresource.

use anyhow::{bail, Result};
use clap::{ArgAction, Args};
use serde_json::json;

use super::client::Ctx;
use super::errors;
use super::record;
use super::targets::targets;

#[derive(Debug, Args)]
pub struct ScaleArgs {
    /// TYPE NAME... or TYPE/NAME... (deployment, replicaset, statefulset).
    #[arg(required = true, value_name = "TYPE NAME")]
    resources: Vec<String>,
    /// The new number of replicas.
    #[arg(long)]
    replicas: Option<i64>,
    /// Precondition: scale only if the current number of replicas is this.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    current_replicas: i64,
    /// Precondition: scale only if the object's resourceVersion is this.
    #[arg(long, default_value = "")]
    resource_version: String,
    /// Record the command in the `kubernetes.io/change-cause` annotation.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    record: bool,
}

/// kubectl's message when a precondition does not hold.
pub fn precondition_error(what: &str, expected: &str, actual: &str) -> String {
    format!("Expected {what} to be {expected}, was {actual}")
}

pub async fn scale(ctx: &Ctx, args: &ScaleArgs) -> Result<bool> {
    let replicas = match args.replicas {
        Some(r) if r >= 0 => r,
        _ => bail!("--replicas=COUNT is required, and COUNT must be greater than or equal to 0"),
    };
    let targets = targets(ctx, &args.resources).await?;
    let mut objects = Vec::new();
    for t in &targets {
        if !t.info.has_subresource("scale") {
            bail!(
                "cannot scale {}: the server does not serve a scale subresource for it",
                t.info.plural_group()
            );
        }
        if t.names.is_empty() {
            bail!("resource(s) were provided, but no name was specified");
        }
        objects.extend(t.names.iter().map(|n| (t.info, n.clone())));
    }
    let mut ok = true;
    for (info, name) in objects {
        let ns = ctx.ns_for(info, None);
        let path = Ctx::object_path(info, ns, &name);
        let scale_path = format!("{path}/scale");
        let result = async {
            if args.current_replicas >= 0 || !args.resource_version.is_empty() {
                // A read-check-write with the read's resourceVersion, as kubectl does.
                let mut current = ctx.get_json(&scale_path).await?;
                let have = current["spec"]["replicas"].as_i64().unwrap_or(0);
                if args.current_replicas >= 0 && have != args.current_replicas {
                    bail!(precondition_error(
                        "replicas",
                        &args.current_replicas.to_string(),
                        &have.to_string()
                    ));
                }
                let rv = current["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                if !args.resource_version.is_empty() && rv != args.resource_version {
                    bail!(precondition_error(
                        "resource version",
                        &args.resource_version,
                        &rv
                    ));
                }
                current["spec"]["replicas"] = json!(replicas);
                ctx.request_json(
                    http::Method::PUT,
                    &scale_path,
                    None,
                    Some("application/json"),
                    Some(&current),
                )
                .await?;
            } else {
                ctx.patch_json(&scale_path, false, &json!({"spec": {"replicas": replicas}}))
                    .await?;
            }
            if args.record {
                annotate_change_cause(ctx, &path).await?;
            }
            anyhow::Ok(())
        }
        .await;
        if let Some(()) = errors::report(result, &mut ok) {
            println!("{}/{name} scaled", info.kind_group());
        }
    }
    Ok(ok)
}

/// Writes the command line into the object's change-cause annotation.
pub async fn annotate_change_cause(ctx: &Ctx, path: &str) -> Result<()> {
    let body = json!({"metadata": {"annotations": {record::CHANGE_CAUSE: record::command_line()}}});
    ctx.patch_json(path, false, &body).await?;
    Ok(())
}
