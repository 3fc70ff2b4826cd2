//! Resolving `TYPE[,TYPE] [NAME...]` and `TYPE/NAME ...` arguments.

use anyhow::{anyhow, Result};

use bosun::resources::{ResourceInfo, RESOURCES};

use super::client::Ctx;
use super::discovered;

/// One resource type and the names asked for (empty: all of them).
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub info: &'static ResourceInfo,
    pub names: Vec<String>,
}

pub fn resolve_type(name: &str) -> Result<Vec<&'static ResourceInfo>, String> {
    if name == "all" {
        return Ok(RESOURCES
            .iter()
            .filter(|r| r.categories.contains(&"all") && r.is_storage_version())
            .chain(discovered::in_category("all"))
            .collect());
    }
    discovered::by_name(name)
        .map(|r| vec![r])
        .ok_or_else(|| format!("the server doesn't have a resource type \"{name}\""))
}

/// [`parse_targets`], reading the server's discovery first when a type is
/// not bosun's own (a custom resource) or is `all` (whose category
/// custom resources may join).
pub async fn targets(ctx: &Ctx, args: &[String]) -> Result<Vec<Target>> {
    let wants_all = args
        .first()
        .is_some_and(|a| a.split(',').any(|t| t.split('/').next() == Some("all")));
    match parse_targets(args) {
        Ok(t) if !wants_all => Ok(t),
        first => {
            if discovered::refresh(ctx).await.is_err() {
                // Unreachable discovery: the first answer stands.
                return first.map_err(|e| anyhow!(e));
            }
            parse_targets(args).map_err(|e| anyhow!(e))
        }
    }
}

/// kubectl's argument forms: `pods`, `pods a b`, `deploy,svc`, `pod/a svc/b`.
pub fn parse_targets(args: &[String]) -> Result<Vec<Target>, String> {
    let Some(first) = args.first() else {
        return Err("you must specify the type of resource to get".to_string());
    };
    let mut out: Vec<Target> = Vec::new();
    if first.contains('/') {
        for arg in args {
            let Some((ty, name)) = arg.split_once('/') else {
                return Err(format!(
                    "there is no need to specify a resource type as a separate argument when passing arguments in resource/name form (e.g. 'bosun get resource/<resource_name>' instead of 'bosun get resource resource/<resource_name>'): {arg}"
                ));
            };
            if name.is_empty() {
                return Err(format!(
                    "arguments in resource/name form must have a single resource and name: {arg}"
                ));
            }
            for info in resolve_type(ty)? {
                match out.iter_mut().find(|t| std::ptr::eq(t.info, info)) {
                    Some(t) => t.names.push(name.to_string()),
                    None => out.push(Target {
                        info,
                        names: vec![name.to_string()],
                    }),
                }
            }
        }
        return Ok(out);
    }
    let names: Vec<String> = args[1..].to_vec();
    if let Some(bad) = names.iter().find(|n| n.contains('/')) {
        return Err(format!(
            "there is no need to specify a resource type as a separate argument when passing arguments in resource/name form: {bad}"
        ));
    }
    for ty in first.split(',').filter(|t| !t.is_empty()) {
        for info in resolve_type(ty)? {
            if !out.iter().any(|t| std::ptr::eq(t.info, info)) {
                out.push(Target {
                    info,
                    names: names.clone(),
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::test_args::strings as s;

    #[test]
    fn forms() {
        let t = parse_targets(&s(&["deploy,svc"])).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].info.kind, "Deployment");
        assert_eq!(t[1].info.kind, "Service");
        assert!(t[0].names.is_empty());

        let t = parse_targets(&s(&["po", "a", "b"])).unwrap();
        assert_eq!(t[0].names, s(&["a", "b"]));

        let t = parse_targets(&s(&["pod/a", "deployment.apps/web", "po/b"])).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].names, s(&["a", "b"]));
        assert_eq!(t[1].info.plural, "deployments");
    }

    #[test]
    fn unknown_type_reads_like_kubectl() {
        assert_eq!(
            parse_targets(&s(&["widgets"])).unwrap_err(),
            "the server doesn't have a resource type \"widgets\""
        );
    }

    #[test]
    fn all_expands_to_the_all_category() {
        let t = parse_targets(&s(&["all"])).unwrap();
        let kinds: Vec<&str> = t.iter().map(|t| t.info.kind).collect();
        assert!(kinds.contains(&"Pod") && kinds.contains(&"Deployment"));
        assert!(!kinds.contains(&"Namespace"));
        assert_eq!(
            kinds
                .iter()
                .filter(|k| **k == "HorizontalPodAutoscaler")
                .count(),
            1
        );
    }
}
