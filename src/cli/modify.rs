//! `bosun label`, `bosun annotate` and `bosun patch`.

use anyhow::{anyhow, bail, Result};
use clap::Args;
use serde_json::{Map, Value};

use super::client::Ctx;
use super::errors;
use super::targets::targets;

#[derive(Debug, Args)]
pub struct LabelArgs {
    /// TYPE NAME... KEY=VALUE... KEY-... (or TYPE/NAME ...)
    #[arg(required = true, value_name = "TYPE NAME KEY=VAL... KEY-")]
    args: Vec<String>,
    /// Allow replacing a key that already has a value.
    #[arg(long)]
    overwrite: bool,
}

#[derive(Debug, Args)]
pub struct PatchArgs {
    /// TYPE NAME or TYPE/NAME.
    #[arg(required = true, value_name = "TYPE NAME")]
    resources: Vec<String>,
    /// The patch, JSON or YAML.
    #[arg(short = 'p', long)]
    patch: String,
    /// strategic, merge or json.
    #[arg(long = "type", default_value = "strategic")]
    patch_type: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Labels,
    Annotations,
}

impl Field {
    fn key(self) -> &'static str {
        match self {
            Field::Labels => "labels",
            Field::Annotations => "annotations",
        }
    }
    fn past(self) -> &'static str {
        match self {
            Field::Labels => "labeled",
            Field::Annotations => "annotated",
        }
    }
    fn singular(self) -> &'static str {
        match self {
            Field::Labels => "label",
            Field::Annotations => "annotation",
        }
    }
}

/// One requested change: set a key, or remove it (`key-`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Set(String, String),
    Remove(String),
}

/// Splits `TYPE NAME k=v k-` into the resource arguments and the changes.
pub fn split_changes(args: &[String]) -> Result<(Vec<String>, Vec<Change>)> {
    let mut resources = Vec::new();
    let mut changes = Vec::new();
    for a in args {
        if let Some((k, v)) = a.split_once('=') {
            if k.is_empty() {
                bail!("invalid label spec: {a}");
            }
            changes.push(Change::Set(k.to_string(), v.to_string()));
        } else if let Some(k) = a.strip_suffix('-').filter(|_| !resources.is_empty()) {
            changes.push(Change::Remove(k.to_string()));
        } else if changes.is_empty() {
            resources.push(a.clone());
        } else {
            bail!("all resources must be specified before label changes: {a}");
        }
    }
    if changes.is_empty() {
        bail!("at least one label update is required");
    }
    Ok((resources, changes))
}

/// The merge patch for `changes` against the current map, or the message
/// kubectl gives when a key has a value and `--overwrite` is not set.
/// `None` when nothing would change.
pub fn plan(
    current: &Map<String, Value>,
    changes: &[Change],
    overwrite: bool,
    field: Field,
) -> Result<Option<Map<String, Value>>> {
    let mut patch = Map::new();
    for c in changes {
        match c {
            Change::Set(k, v) => {
                match current.get(k).and_then(Value::as_str) {
                    Some(old) if old == v => continue,
                    Some(old) if !overwrite => {
                        bail!("'{k}' already has a value ({old}), and --overwrite is false")
                    }
                    _ => {}
                }
                patch.insert(k.clone(), Value::String(v.clone()));
            }
            Change::Remove(k) => {
                if current.contains_key(k) {
                    patch.insert(k.clone(), Value::Null);
                } else {
                    eprintln!("{} \"{k}\" not found.", field.singular());
                }
            }
        }
    }
    Ok((!patch.is_empty()).then_some(patch))
}

/// One object named on the command line: its API path and `kind.group/name` as messages
/// show it.
struct NamedObject {
    path: String,
    shown: String,
}

/// The objects `resources` names (TYPE NAME... or TYPE/NAME...); at least one.
async fn named_objects(ctx: &Ctx, resources: &[String]) -> Result<Vec<NamedObject>> {
    let targets = targets(ctx, resources).await?;
    let objects: Vec<NamedObject> = targets
        .iter()
        .flat_map(|t| {
            t.names.iter().map(move |name| NamedObject {
                path: Ctx::object_path(t.info, ctx.ns_for(t.info, None), name),
                shown: format!("{}/{name}", t.info.kind_group()),
            })
        })
        .collect();
    if objects.is_empty() {
        bail!("resource(s) were provided, but no name was specified");
    }
    Ok(objects)
}

pub async fn label(ctx: &Ctx, args: &LabelArgs, field: Field) -> Result<bool> {
    let (resources, changes) = split_changes(&args.args)?;
    let objects = named_objects(ctx, &resources).await?;
    let mut ok = true;
    for NamedObject { path, shown } in objects {
        let result = async {
            let current = ctx.get_json(&path).await?;
            let map = current["metadata"][field.key()]
                .as_object()
                .cloned()
                .unwrap_or_default();
            let Some(patch) = plan(&map, &changes, args.overwrite, field)? else {
                return anyhow::Ok(false);
            };
            let body = serde_json::json!({"metadata": {field.key(): patch}});
            ctx.patch_json(&path, false, &body).await?;
            Ok(true)
        }
        .await;
        match errors::report(result, &mut ok) {
            Some(true) => println!("{shown} {}", field.past()),
            Some(false) => println!("{shown} not {}", field.past()),
            None => {}
        }
    }
    Ok(ok)
}

/// The content type of a `--type`.
pub fn patch_content_type(t: &str) -> Result<&'static str> {
    Ok(match t {
        "strategic" => "application/strategic-merge-patch+json",
        "merge" => "application/merge-patch+json",
        "json" => "application/json-patch+json",
        other => bail!("--type must be one of [json merge strategic], not \"{other}\""),
    })
}

pub async fn patch(ctx: &Ctx, args: &PatchArgs) -> Result<bool> {
    let content_type = patch_content_type(&args.patch_type)?;
    let body: Value = serde_yaml::from_str::<serde_yaml::Value>(&args.patch)
        .map_err(|e| anyhow!("unable to parse \"{}\": {e}", args.patch))
        .and_then(|y| Ok(serde_json::to_value(y)?))?;
    let objects = named_objects(ctx, &args.resources).await?;
    let mut ok = true;
    for NamedObject { path, shown } in objects {
        let result = async {
            let before = ctx.get_json(&path).await?;
            let after = ctx
                .request_json(
                    http::Method::PATCH,
                    &path,
                    None,
                    Some(content_type),
                    Some(&body),
                )
                .await?;
            anyhow::Ok(
                before["metadata"]["resourceVersion"] != after["metadata"]["resourceVersion"],
            )
        }
        .await;
        match errors::report(result, &mut ok) {
            Some(true) => println!("{shown} patched"),
            Some(false) => println!("{shown} patched (no change)"),
            None => {}
        }
    }
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::test_args::strings as s;
    use serde_json::json;

    #[test]
    fn changes_follow_resources() {
        let (r, c) = split_changes(&s(&["pod", "web", "app=nginx", "tier-"])).unwrap();
        assert_eq!(r, s(&["pod", "web"]));
        assert_eq!(
            c,
            vec![
                Change::Set("app".into(), "nginx".into()),
                Change::Remove("tier".into())
            ]
        );
        assert!(split_changes(&s(&["pod", "web"])).is_err());
    }

    #[test]
    fn overwrite_is_required_to_change_a_value() {
        let current = json!({"app": "nginx"}).as_object().cloned().unwrap();
        let change = [Change::Set("app".into(), "web".into())];
        let e = plan(&current, &change, false, Field::Labels).unwrap_err();
        assert_eq!(
            e.to_string(),
            "'app' already has a value (nginx), and --overwrite is false"
        );
        let p = plan(&current, &change, true, Field::Labels)
            .unwrap()
            .unwrap();
        assert_eq!(Value::Object(p), json!({"app": "web"}));
        // Same value, or removing a missing key: nothing to do.
        let same = [
            Change::Set("app".into(), "nginx".into()),
            Change::Remove("x".into()),
        ];
        assert!(plan(&current, &same, false, Field::Labels)
            .unwrap()
            .is_none());
        let rm = [Change::Remove("app".into())];
        assert_eq!(
            Value::Object(plan(&current, &rm, false, Field::Labels).unwrap().unwrap()),
            json!({"app": null})
        );
    }
}
