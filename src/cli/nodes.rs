//! `bosun cordon`, `uncordon` and `taint`: kubectl's node maintenance
//! verbs, with its messages.

use anyhow::{anyhow, bail, Result};
use clap::Args;
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use super::client::Ctx;
use bosun::names::{is_qualified_name, is_valid_label_value};

#[derive(Debug, Args)]
pub struct CordonArgs {
    /// The nodes.
    #[arg(value_name = "NODE")]
    pub nodes: Vec<String>,
    /// Selector (label query) to filter on.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
}

/// The nodes named, or selected by `-l`.
pub async fn select_nodes(
    ctx: &Ctx,
    verb: &str,
    names: &[String],
    selector: Option<&str>,
) -> Result<Vec<Node>> {
    let api: Api<Node> = Api::all(ctx.client.clone());
    let mut out = Vec::new();
    if let Some(sel) = selector {
        if !names.is_empty() {
            bail!("cannot specify both a node name and a selector");
        }
        out = api.list(&ListParams::default().labels(sel)).await?.items;
        if out.is_empty() {
            bail!("No resources found");
        }
        return Ok(out);
    }
    if names.is_empty() {
        bail!("USAGE: {verb} NODE [flags]\nSee 'bosun {verb} -h' for help and examples");
    }
    for name in names {
        let name = name.strip_prefix("node/").unwrap_or(name);
        out.push(api.get(name).await.map_err(|e| match e {
            kube::Error::Api(s) if s.code == 404 => anyhow!("nodes \"{name}\" not found"),
            e => e.into(),
        })?);
    }
    Ok(out)
}

/// Sets `spec.unschedulable` on each node: `node/X cordoned`, or
/// `already cordoned` when it was.
pub async fn cordon(ctx: &Ctx, args: &CordonArgs, on: bool) -> Result<bool> {
    let verb = if on { "cordon" } else { "uncordon" };
    for node in select_nodes(ctx, verb, &args.nodes, args.selector.as_deref()).await? {
        println!("{}", set_unschedulable(ctx, &node, on).await?);
    }
    Ok(true)
}

/// Cordons (or uncordons) one node; returns kubectl's line for it.
pub async fn set_unschedulable(ctx: &Ctx, node: &Node, on: bool) -> Result<String> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let verb = if on { "cordoned" } else { "uncordoned" };
    let now = node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
    if now == on {
        return Ok(format!("node/{name} already {verb}"));
    }
    let api: Api<Node> = Api::all(ctx.client.clone());
    let value = if on { json!(true) } else { json!(null) };
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"unschedulable": value}})),
    )
    .await?;
    Ok(format!("node/{name} {verb}"))
}

#[derive(Debug, Args)]
pub struct TaintArgs {
    /// `nodes NAME... KEY[=VALUE]:EFFECT... KEY[:EFFECT]-...`
    #[arg(required = true, value_name = "ARGS", allow_hyphen_values = true)]
    pub args: Vec<String>,
    /// Select all nodes.
    #[arg(long)]
    pub all: bool,
    /// Selector (label query) to filter on.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// Replace a taint with the same key and effect.
    #[arg(long)]
    pub overwrite: bool,
}

const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// A taint to remove: a key, and maybe one effect.
#[derive(Debug, Clone, PartialEq)]
pub struct Removal {
    key: String,
    effect: Option<String>,
}

impl std::fmt::Display for Removal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.effect {
            Some(e) => write!(f, "{}:{e}", self.key),
            None => f.write_str(&self.key),
        }
    }
}

/// kubectl's `parseTaints`: `key=value:Effect` and `key:Effect` add,
/// `key-` and `key:Effect-` remove.
pub fn parse_taints(specs: &[String]) -> Result<(Vec<Taint>, Vec<Removal>)> {
    let mut add: Vec<Taint> = Vec::new();
    let mut remove = Vec::new();
    for spec in specs {
        if let Some(r) = spec.strip_suffix('-') {
            let (key, effect) = match r.split_once(':') {
                Some((k, e)) => (k, Some(e.to_string())),
                None => (r, None),
            };
            if let Some(e) = &effect {
                check_effect(e)?;
            }
            check_key(key, spec)?;
            remove.push(Removal {
                key: key.into(),
                effect,
            });
            continue;
        }
        let (kv, effect) = spec
            .split_once(':')
            .ok_or_else(|| anyhow!("invalid taint spec: {spec}"))?;
        check_effect(effect)?;
        let (key, value) = match kv.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (kv, None),
        };
        check_key(key, spec)?;
        if let Some(v) = value {
            if let Some(m) = is_valid_label_value(v).first() {
                bail!("invalid taint spec: {spec}, {m}");
            }
        }
        if add.iter().any(|t| t.key == key && t.effect == effect) {
            bail!("duplicated taints with the same key and effect: {spec}");
        }
        add.push(Taint {
            key: key.into(),
            value: value.filter(|v| !v.is_empty()).map(str::to_string),
            effect: effect.into(),
            time_added: None,
        });
    }
    let both: Vec<String> = add
        .iter()
        .filter(|t| {
            remove
                .iter()
                .any(|r| r.key == t.key && r.effect.as_ref().is_none_or(|e| *e == t.effect))
        })
        .map(|t| format!("{}:{}", t.key, t.effect))
        .collect();
    if !both.is_empty() {
        bail!(
            "can not both modify and remove the following taint(s) in the same command: {}",
            both.join(", ")
        );
    }
    Ok((add, remove))
}

fn check_effect(effect: &str) -> Result<()> {
    if !EFFECTS.contains(&effect) {
        bail!(
            "invalid taint effect: {effect}, unsupported taint effect, supported values: {}",
            EFFECTS.join(", ")
        );
    }
    Ok(())
}

fn check_key(key: &str, spec: &str) -> Result<()> {
    if let Some(m) = is_qualified_name(key).first() {
        bail!("invalid taint spec: {spec}, {m}");
    }
    Ok(())
}

/// The node's taints after the change, and kubectl's word for it.
pub fn apply_taints(
    node: &str,
    current: &[Taint],
    add: &[Taint],
    remove: &[Removal],
    overwrite: bool,
    now: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> Result<(Vec<Taint>, &'static str)> {
    let mut next: Vec<Taint> = current.to_vec();
    for r in remove {
        let before = next.len();
        next.retain(|t| !(t.key == r.key && r.effect.as_ref().is_none_or(|e| *e == t.effect)));
        if next.len() == before {
            bail!("taint {:?} not found", r.to_string());
        }
    }
    let mut clashing = Vec::new();
    for t in add {
        let mut t = t.clone();
        // tolerationSeconds of NoExecute tolerations count from here.
        if t.effect == "NoExecute" {
            t.time_added = Some(now.clone());
        }
        match next
            .iter_mut()
            .find(|c| c.key == t.key && c.effect == t.effect)
        {
            Some(c) if overwrite => *c = t,
            Some(_) => clashing.push(t.key.clone()),
            None => next.push(t),
        }
    }
    if !clashing.is_empty() {
        bail!(
            "node {node} already has {} taint(s) with same effect(s) and --overwrite is false",
            clashing.join(",")
        );
    }
    let word = match (add.is_empty(), remove.is_empty()) {
        (false, false) => "modified",
        (false, true) => "tainted",
        _ => "untainted",
    };
    Ok((next, word))
}

/// `bosun taint nodes X key=value:Effect` / `key-`.
pub async fn taint(ctx: &Ctx, args: &TaintArgs) -> Result<bool> {
    let (kind, rest) = args
        .args
        .split_first()
        .ok_or_else(|| anyhow!("at least one taint update is required"))?;
    let (kind, first) = match kind.split_once('/') {
        Some((k, n)) => (k, Some(n.to_string())),
        None => (kind.as_str(), None),
    };
    if !["node", "nodes", "no"].contains(&kind) {
        bail!("invalid resource type {kind}, only node types are supported");
    }
    let mut names: Vec<String> = first.into_iter().collect();
    let mut specs = Vec::new();
    for a in rest {
        if a.contains('=') || a.contains(':') || a.ends_with('-') {
            specs.push(a.clone());
        } else {
            names.push(a.clone());
        }
    }
    if specs.is_empty() {
        bail!("at least one taint update is required");
    }
    let (add, remove) = parse_taints(&specs)?;
    let api: Api<Node> = Api::all(ctx.client.clone());
    let nodes = if args.all {
        api.list(&ListParams::default()).await?.items
    } else {
        select_nodes(ctx, "taint", &names, args.selector.as_deref()).await?
    };
    let now =
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    for node in nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let current = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        let (next, word) =
            apply_taints(&name, &current, &add, &remove, args.overwrite, now.clone())?;
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"resourceVersion": node.metadata.resource_version},
                "spec": {"taints": next},
            })),
        )
        .await?;
        println!("node/{name} {word}");
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    fn now() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        )
    }

    #[test]
    fn taint_specs_parse_as_kubectl_does() {
        let (add, remove) = parse_taints(&specs(&[
            "dedicated=db:NoSchedule",
            "gpu:NoExecute",
            "old-",
            "x:NoSchedule-",
        ]))
        .unwrap();
        assert_eq!(add.len(), 2);
        assert_eq!(add[0].value.as_deref(), Some("db"));
        assert_eq!(add[1].value, None);
        assert_eq!(
            remove.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
            ["old", "x:NoSchedule"]
        );
        let err = parse_taints(&specs(&["k=v:Sometimes"]))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("invalid taint effect: Sometimes"), "{err}");
        let err = parse_taints(&specs(&["k=v"])).unwrap_err().to_string();
        assert_eq!(err, "invalid taint spec: k=v");
        let err = parse_taints(&specs(&["k:NoSchedule", "k-"]))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("can not both modify and remove"), "{err}");
    }

    #[test]
    fn taints_apply_with_kubectl_rules() {
        let (add, _) = parse_taints(&specs(&["k=v:NoSchedule"])).unwrap();
        let (next, word) = apply_taints("n1", &[], &add, &[], false, now()).unwrap();
        assert_eq!((next.len(), word), (1, "tainted"));
        // The same key and effect again needs --overwrite.
        let (again, _) = parse_taints(&specs(&["k=w:NoSchedule"])).unwrap();
        let err = apply_taints("n1", &next, &again, &[], false, now()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "node n1 already has k taint(s) with same effect(s) and --overwrite is false"
        );
        let (over, _) = apply_taints("n1", &next, &again, &[], true, now()).unwrap();
        assert_eq!(over[0].value.as_deref(), Some("w"));
        // Removal by key takes every effect; a missing one is an error.
        let (_, remove) = parse_taints(&specs(&["k-"])).unwrap();
        let (left, word) = apply_taints("n1", &over, &[], &remove, false, now()).unwrap();
        assert_eq!((left.len(), word), (0, "untainted"));
        let err = apply_taints("n1", &left, &[], &remove, false, now()).unwrap_err();
        assert_eq!(err.to_string(), "taint \"k\" not found");
        // NoExecute taints are stamped with the time they were added.
        let (ne, _) = parse_taints(&specs(&["k:NoExecute"])).unwrap();
        let (next, _) = apply_taints("n1", &[], &ne, &[], false, now()).unwrap();
        assert_eq!(next[0].time_added, Some(now()));
    }
}
