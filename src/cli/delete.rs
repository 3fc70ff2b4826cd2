//! `bosun delete`: by file, by type and names, by selector or `--all`;
//! waits (by watching) until the objects are gone.

use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use clap::{ArgAction, Args};
use futures::StreamExt;
use serde_json::{json, Value};

use bosun::resources::ResourceInfo;

use super::apply::{namespace_of, resource_of};
use super::client::{with_query, Ctx};
use super::errors;
use super::manifest::load;
use super::table::no_resources_message;
use super::targets::targets;

#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// TYPE NAME..., TYPE/NAME..., or TYPE with -l / --all.
    #[arg(value_name = "TYPE [NAME...]")]
    resources: Vec<String>,
    /// File, directory or `-` naming the objects to delete.
    #[arg(short = 'f', long = "filename")]
    files: Vec<String>,
    /// Process the directory given in -f recursively.
    #[arg(short = 'R', long)]
    recursive: bool,
    /// Delete the objects matching this label selector.
    #[arg(short = 'l', long)]
    selector: Option<String>,
    /// Delete all objects of the type in the namespace.
    #[arg(long)]
    all: bool,
    /// With -l or --all: across all namespaces.
    #[arg(short = 'A', long)]
    all_namespaces: bool,
    /// Seconds given to the object to terminate gracefully (-1: the object's default).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    grace_period: i64,
    /// Remove immediately, bypassing graceful deletion.
    #[arg(long)]
    force: bool,
    /// How dependents go: background, foreground or orphan.
    #[arg(long, default_value = "background", num_args = 0..=1, default_missing_value = "background")]
    cascade: String,
    /// Wait until the objects are gone (`--wait=false` to return at once).
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    wait: bool,
    /// How long to wait for the objects to go, e.g. 30s, 2m.
    #[arg(long, default_value = "60s")]
    timeout: String,
    /// Treat "not found" as success.
    #[arg(long)]
    ignore_not_found: bool,
}

/// `30s`, `2m`, `1h`, `500ms`, or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: f64 = num.parse().map_err(|_| anyhow!("invalid duration {s:?}"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => bail!("invalid duration {s:?}"),
    };
    Ok(Duration::from_secs_f64(secs))
}

/// kubectl's `--cascade` values to a propagation policy.
pub fn propagation(cascade: &str) -> Result<&'static str> {
    Ok(match cascade {
        "background" | "true" => "Background",
        "foreground" => "Foreground",
        "orphan" | "false" => "Orphan",
        other => bail!(
            "invalid cascade value ({other}). Must be \"background\", \"foreground\", or \"orphan\""
        ),
    })
}

/// The DeleteOptions body.
pub fn delete_options(grace_period: i64, force: bool, policy: &str) -> Value {
    let mut opts = json!({
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "propagationPolicy": policy,
    });
    let grace = if force && grace_period < 0 {
        0
    } else if grace_period == 0 && !force {
        // kubectl: 0 without --force means "as fast as possible", i.e. 1.
        1
    } else {
        grace_period
    };
    if grace >= 0 {
        opts["gracePeriodSeconds"] = json!(grace);
    }
    opts
}

struct Victim {
    info: &'static ResourceInfo,
    namespace: Option<String>,
    name: String,
}

async fn collect(ctx: &Ctx, args: &DeleteArgs) -> Result<Vec<Victim>> {
    let mut out = Vec::new();
    if !args.files.is_empty() {
        if !args.resources.is_empty() {
            bail!("there is no need to specify a resource type as a separate argument when passing arguments in resource/name form or with -f");
        }
        for m in load(&args.files, args.recursive)? {
            let info = resource_of(ctx, &m).await?;
            let namespace = namespace_of(ctx, info, &m, false)?;
            out.push(Victim {
                info,
                namespace,
                name: m.name().to_string(),
            });
        }
        return Ok(out);
    }
    if args.resources.is_empty() {
        bail!("You must provide one or more resources by argument or filename.");
    }
    let targets = targets(ctx, &args.resources).await?;
    for t in targets {
        let ns = ctx.ns_for(t.info, None).map(str::to_string);
        if !t.names.is_empty() {
            if args.all || args.selector.is_some() {
                bail!("name cannot be provided when a selector is specified");
            }
            for name in t.names {
                out.push(Victim {
                    info: t.info,
                    namespace: ns.clone(),
                    name,
                });
            }
            continue;
        }
        if !args.all && args.selector.is_none() {
            bail!("resource(s) were provided, but no name was specified");
        }
        let list_ns = if args.all_namespaces {
            None
        } else {
            ns.as_deref()
        };
        let path = with_query(
            &t.info.collection_path(list_ns),
            &[("labelSelector", args.selector.as_deref().unwrap_or(""))],
        );
        let list = ctx.get_json(&path).await?;
        for item in list["items"].as_array().cloned().unwrap_or_default() {
            out.push(Victim {
                info: t.info,
                namespace: item["metadata"]["namespace"]
                    .as_str()
                    .filter(|s| !s.is_empty())
                    .map(str::to_string),
                name: item["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            });
        }
    }
    Ok(out)
}

pub async fn delete(ctx: &Ctx, args: &DeleteArgs) -> Result<bool> {
    let policy = propagation(&args.cascade)?;
    let timeout = parse_duration(&args.timeout)?;
    if args.force {
        eprintln!("Warning: Immediate deletion does not wait for confirmation that the running resource has been terminated. The resource may continue to run on the cluster indefinitely.");
    }
    let victims = collect(ctx, args).await?;
    let by_selector = args.selector.is_some() || args.all;
    if victims.is_empty() {
        let ns = (!args.all_namespaces).then_some(ctx.namespace.as_str());
        eprintln!("{}", no_resources_message(ns));
        return Ok(true);
    }
    let body = delete_options(args.grace_period, args.force, policy);
    let mut ok = true;
    let mut deleted = Vec::new();
    for v in &victims {
        let path = Ctx::object_path(v.info, v.namespace.as_deref(), &v.name);
        match ctx
            .request_json(
                http::Method::DELETE,
                &path,
                None,
                Some("application/json"),
                Some(&body),
            )
            .await
        {
            Ok(_) => {
                println!("{} \"{}\" deleted", v.info.kind_group(), v.name);
                deleted.push(v);
            }
            Err(e) if errors::is_not_found(&e) && (args.ignore_not_found || by_selector) => {}
            Err(e) => {
                eprintln!("{}", errors::render(&e.into()));
                ok = false;
            }
        }
    }
    if args.wait {
        let deadline = tokio::time::Instant::now() + timeout;
        for v in deleted {
            errors::report(wait_gone(ctx, v, deadline).await, &mut ok);
        }
    }
    Ok(ok)
}

/// Waits for the object to disappear: a GET, then a watch from its
/// resourceVersion until the DELETED event.
async fn wait_gone(ctx: &Ctx, v: &Victim, deadline: tokio::time::Instant) -> Result<()> {
    let path = Ctx::object_path(v.info, v.namespace.as_deref(), &v.name);
    let timed_out = || {
        anyhow!(
            "timed out waiting for the condition on {}/{}",
            v.info.plural,
            v.name
        )
    };
    let work = async {
        loop {
            let rv = match ctx.get_json(&path).await {
                Ok(obj) => obj["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                Err(e) if errors::is_not_found(&e) => return Ok(()),
                Err(e) => return Err(anyhow::Error::from(e)),
            };
            let watch = with_query(
                &format!(
                    "{}?watch=true",
                    v.info.collection_path(v.namespace.as_deref())
                ),
                &[
                    ("fieldSelector", &format!("metadata.name={}", v.name)),
                    ("resourceVersion", &rv),
                ],
            );
            let mut events = Box::pin(ctx.watch_lines(&watch, None).await?);
            while let Some(event) = events.next().await {
                let (kind, _) = event?;
                if kind == "DELETED" {
                    return Ok(());
                }
            }
            // The watch ended (server timeout); look again.
        }
    };
    match tokio::time::timeout_at(deadline, work).await {
        Ok(r) => r,
        Err(_) => Err(timed_out()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("7").unwrap(), Duration::from_secs(7));
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn delete_options_follow_kubectl() {
        let o = delete_options(-1, false, "Background");
        assert_eq!(o["propagationPolicy"], "Background");
        assert!(o.get("gracePeriodSeconds").is_none());
        assert_eq!(delete_options(-1, true, "Orphan")["gracePeriodSeconds"], 0);
        assert_eq!(delete_options(0, false, "Orphan")["gracePeriodSeconds"], 1);
        assert_eq!(
            delete_options(30, false, "Foreground")["gracePeriodSeconds"],
            30
        );
        assert_eq!(propagation("orphan").unwrap(), "Orphan");
        assert!(propagation("sideways").is_err());
    }
}
