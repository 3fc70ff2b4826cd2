//! `bosun set image`: changes container images of a pod template.

use anyhow::{anyhow, bail, Result};
use clap::{ArgAction, Args, Subcommand};
use serde_json::{json, Value};

use super::client::Ctx;
use super::errors;
use super::record;
use super::targets::parse_targets;

#[derive(Debug, Args)]
pub struct SetArgs {
    #[command(subcommand)]
    command: SetCommand,
}

#[derive(Debug, Subcommand)]
enum SetCommand {
    /// Update the images of a pod template: CONTAINER=IMAGE, or *=IMAGE for all.
    Image(ImageArgs),
}

#[derive(Debug, Args)]
pub struct ImageArgs {
    /// TYPE NAME... (or TYPE/NAME...) then CONTAINER=IMAGE...
    #[arg(required = true, value_name = "TYPE NAME CONTAINER=IMAGE")]
    args: Vec<String>,
    /// Record the command in the `kubernetes.io/change-cause` annotation.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    record: bool,
}

/// `(container name or "*", image)` pairs.
pub type ImageUpdates = Vec<(String, String)>;

/// Splits `TYPE NAME c=img c2=img2` into the resources and the images.
pub fn split_images(args: &[String]) -> Result<(Vec<String>, ImageUpdates)> {
    let mut resources = Vec::new();
    let mut images = Vec::new();
    for a in args {
        match a.split_once('=') {
            Some((c, image)) => {
                if c.is_empty() || image.is_empty() {
                    bail!("invalid image update {a:?}: must be CONTAINER_NAME=IMAGE");
                }
                images.push((c.to_string(), image.to_string()));
            }
            None if images.is_empty() => resources.push(a.clone()),
            None => bail!("all resources must be specified before image changes: {a}"),
        }
    }
    if images.is_empty() {
        bail!("at least one image update is required");
    }
    Ok((resources, images))
}

/// Where a kind keeps its pod spec.
pub fn pod_spec_pointer(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "Pod" => "/spec",
        "CronJob" => "/spec/jobTemplate/spec/template/spec",
        "Deployment"
        | "ReplicaSet"
        | "StatefulSet"
        | "DaemonSet"
        | "Job"
        | "ReplicationController" => "/spec/template/spec",
        _ => return None,
    })
}

/// The strategic merge patch that sets the images in `pod_spec` (at
/// `pointer` in the object), or kubectl's error for an unknown container.
/// `None` when every image is already the requested one.
pub fn image_patch(
    pod_spec: &Value,
    pointer: &str,
    images: &[(String, String)],
) -> Result<Option<Value>> {
    let mut changes: Vec<(&str, String, String)> = Vec::new();
    for (name, image) in images {
        let mut found = false;
        for list in ["initContainers", "containers"] {
            for c in pod_spec[list].as_array().into_iter().flatten() {
                let cname = c["name"].as_str().unwrap_or_default();
                if name == "*" || cname == name {
                    found = true;
                    if c["image"].as_str() != Some(image.as_str()) {
                        changes.retain(|(l, n, _)| !(*l == list && n == cname));
                        changes.push((list, cname.to_string(), image.clone()));
                    }
                }
            }
        }
        if !found {
            bail!("unable to find container named {name:?}");
        }
    }
    if changes.is_empty() {
        return Ok(None);
    }
    let mut spec = json!({});
    for (list, name, image) in changes {
        let entries = spec[list].as_array().cloned().unwrap_or_default();
        let mut entries = entries;
        entries.push(json!({"name": name, "image": image}));
        spec[list] = Value::Array(entries);
    }
    // Nest the spec at its pointer: /spec/template/spec -> {"spec":{"template":{"spec":..}}}.
    let mut patch = spec;
    for key in pointer.trim_start_matches('/').split('/').rev() {
        patch = json!({ key: patch });
    }
    Ok(Some(patch))
}

pub async fn set(ctx: &Ctx, args: &SetArgs) -> Result<bool> {
    match &args.command {
        SetCommand::Image(a) => image(ctx, a).await,
    }
}

async fn image(ctx: &Ctx, args: &ImageArgs) -> Result<bool> {
    let (resources, images) = split_images(&args.args)?;
    if resources.is_empty() {
        bail!("one or more resources must be specified as <resource> <name> or <resource>/<name>");
    }
    let targets = parse_targets(&resources).map_err(|e| anyhow!(e))?;
    let mut objects = Vec::new();
    for t in &targets {
        let Some(pointer) = pod_spec_pointer(t.info.kind) else {
            bail!(
                "{} do not have a pod template whose image can be set",
                t.info.plural_group()
            );
        };
        if t.names.is_empty() {
            bail!("resource(s) were provided, but no name was specified");
        }
        objects.extend(t.names.iter().map(|n| (t.info, pointer, n.clone())));
    }
    let mut ok = true;
    for (info, pointer, name) in objects {
        let path = Ctx::object_path(info, ctx.ns_for(info, None), &name);
        let result = async {
            let current = ctx.get_json(&path).await?;
            let pod_spec = current.pointer(pointer).cloned().unwrap_or(Value::Null);
            let mut patch = image_patch(&pod_spec, pointer, &images)?;
            if args.record {
                let cause = record::command_line();
                if current["metadata"]["annotations"][record::CHANGE_CAUSE].as_str()
                    != Some(cause.as_str())
                {
                    let p = patch.get_or_insert_with(|| json!({}));
                    p["metadata"] = json!({"annotations": {record::CHANGE_CAUSE: cause}});
                }
            }
            let Some(patch) = patch else {
                return anyhow::Ok(false);
            };
            ctx.patch_json(&path, true, &patch).await?;
            Ok(true)
        }
        .await;
        // kubectl says nothing when nothing changes.
        if let Some(true) = errors::report(result, &mut ok) {
            println!("{}/{name} image updated", info.kind_group());
        }
    }
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::test_args::strings as s;

    #[test]
    fn images_follow_resources() {
        let (r, i) = split_images(&s(&["deployment/web", "web=a:2", "side=b:1"])).unwrap();
        assert_eq!(r, s(&["deployment/web"]));
        assert_eq!(
            i,
            vec![("web".into(), "a:2".into()), ("side".into(), "b:1".into())]
        );
        assert!(split_images(&s(&["deployment/web"])).is_err());
        assert!(split_images(&s(&["deploy", "web=a", "x"])).is_err());
    }

    #[test]
    fn patch_names_the_changed_containers_only() {
        let spec = json!({"containers": [{"name": "web", "image": "a:1"}, {"name": "side", "image": "b:1"}],
                          "initContainers": [{"name": "init", "image": "c:1"}]});
        let p = image_patch(
            &spec,
            "/spec/template/spec",
            &[("web".into(), "a:2".into())],
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            p,
            json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "a:2"}]}}}})
        );
        let all = image_patch(&spec, "/spec", &[("*".into(), "z:9".into())])
            .unwrap()
            .unwrap();
        assert_eq!(all["spec"]["containers"].as_array().unwrap().len(), 2);
        assert_eq!(all["spec"]["initContainers"][0]["image"], "z:9");
        assert!(image_patch(&spec, "/spec", &[("web".into(), "a:1".into())])
            .unwrap()
            .is_none());
        let e = image_patch(&spec, "/spec", &[("x".into(), "a:1".into())]).unwrap_err();
        assert_eq!(e.to_string(), "unable to find container named \"x\"");
    }
}
