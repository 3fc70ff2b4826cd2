//! `bosun get`: tables from the server's Table rendering, or the objects
//! themselves as YAML, JSON or names; `-w` follows with watch events.

use anyhow::{bail, Result};
use clap::Args;
use futures::StreamExt;
use serde_json::Value;

use super::client::{with_query, Ctx};
use super::errors;
use super::output::{list_of, name_of, to_json, to_yaml, with_type};
use super::table::{no_resources_message, Aligner, PrintOptions, Table, TABLE_ACCEPT};
use super::targets::{targets, Target};

#[derive(Debug, Args)]
pub struct GetArgs {
    /// TYPE[,TYPE...] [NAME...], or TYPE/NAME...
    #[arg(required = true, value_name = "TYPE[,TYPE] [NAME...]")]
    resources: Vec<String>,
    /// List the requested objects across all namespaces.
    #[arg(short = 'A', long)]
    all_namespaces: bool,
    /// Label selector to filter on, e.g. `-l app=nginx,tier!=db`.
    #[arg(short = 'l', long)]
    selector: Option<String>,
    /// Field selector to filter on, e.g. `--field-selector status.phase=Running`.
    #[arg(long)]
    field_selector: Option<String>,
    /// Output format: wide, yaml, json or name.
    #[arg(short = 'o', long)]
    output: Option<String>,
    /// After listing, watch for changes.
    #[arg(short = 'w', long)]
    watch: bool,
    /// Show all labels as the last column.
    #[arg(long)]
    show_labels: bool,
    /// Don't print headers.
    #[arg(long)]
    no_headers: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table { wide: bool },
    Yaml,
    Json,
    Name,
}

pub fn parse_format(o: Option<&str>) -> Result<Format> {
    Ok(match o {
        None | Some("") => Format::Table { wide: false },
        Some("wide") => Format::Table { wide: true },
        Some("yaml") => Format::Yaml,
        Some("json") => Format::Json,
        Some("name") => Format::Name,
        Some(other) => bail!(
            "unable to match a printer suitable for the output format \"{other}\", allowed formats are: json,name,wide,yaml"
        ),
    })
}

impl GetArgs {
    fn query(&self) -> Vec<(&'static str, String)> {
        vec![
            ("labelSelector", self.selector.clone().unwrap_or_default()),
            (
                "fieldSelector",
                self.field_selector.clone().unwrap_or_default(),
            ),
        ]
    }
}

fn pairs<'a>(q: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    q.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

pub async fn get(ctx: &Ctx, args: &GetArgs) -> Result<bool> {
    let format = parse_format(args.output.as_deref())?;
    let targets = targets(ctx, &args.resources).await?;
    if args.watch && targets.len() > 1 {
        bail!("you may only specify a single resource type");
    }
    let multi = targets.len() > 1;
    let namespace = (!args.all_namespaces).then_some(ctx.namespace.as_str());
    let mut failures: Vec<String> = Vec::new();

    match format {
        Format::Table { wide } => {
            let mut printed_any = false;
            let mut aligner = Aligner::default();
            let mut last_table = None;
            for target in &targets {
                let table = fetch_table(ctx, target, namespace, args, &mut failures).await?;
                let opts = print_options(target, args, wide, multi);
                if !table.rows.is_empty() {
                    if printed_any {
                        println!();
                    }
                    aligner = Aligner::default();
                    let mut lines = Vec::new();
                    if !args.no_headers {
                        lines.push(table.header(&opts));
                    }
                    lines.extend(table.body(&opts));
                    print!("{}", aligner.format(&lines));
                    printed_any = true;
                }
                last_table = Some((table, opts));
            }
            if !printed_any && failures.is_empty() && !args.watch {
                let all_cluster = targets.iter().all(|t| !t.info.namespaced);
                let ns = if all_cluster { None } else { namespace };
                eprintln!("{}", no_resources_message(ns));
            }
            report(&failures);
            if args.watch {
                if let Some((table, opts)) = last_table {
                    let target = &targets[0];
                    watch_table(
                        ctx,
                        target,
                        namespace,
                        args,
                        &table,
                        &opts,
                        aligner,
                        printed_any,
                    )
                    .await?;
                }
            }
        }
        _ => {
            let mut objects = Vec::new();
            let mut by_name = false;
            let mut resource_version = None;
            for target in &targets {
                if target.names.is_empty() {
                    let path = with_query(
                        &target.info.collection_path(namespace),
                        &pairs(&args.query()),
                    );
                    let list = ctx.get_json(&path).await?;
                    resource_version = list["metadata"]["resourceVersion"]
                        .as_str()
                        .map(str::to_string);
                    for item in list["items"].as_array().cloned().unwrap_or_default() {
                        objects.push((target.info, with_type(target.info, item)));
                    }
                } else {
                    by_name = true;
                    for name in &target.names {
                        let path =
                            Ctx::object_path(target.info, ctx.ns_for(target.info, None), name);
                        match ctx.get_json(&path).await {
                            Ok(obj) => objects.push((target.info, with_type(target.info, obj))),
                            Err(e @ kube::Error::Api(_)) => {
                                failures.push(errors::render(&e.into()))
                            }
                            Err(e) => return Err(e.into()),
                        }
                    }
                }
            }
            match format {
                Format::Name => {
                    for (info, obj) in &objects {
                        println!("{}", name_of(info, obj));
                    }
                }
                Format::Yaml | Format::Json => {
                    let single = by_name
                        && targets.len() == 1
                        && targets[0].names.len() == 1
                        && objects.len() == 1;
                    let value = if single {
                        objects[0].1.clone()
                    } else {
                        list_of(objects.iter().map(|(_, o)| o.clone()).collect())
                    };
                    if !objects.is_empty() || failures.is_empty() {
                        print!(
                            "{}",
                            if format == Format::Yaml {
                                to_yaml(&value)?
                            } else {
                                to_json(&value)?
                            }
                        );
                    }
                }
                Format::Table { .. } => unreachable!(),
            }
            report(&failures);
            if args.watch {
                watch_objects(ctx, &targets[0], namespace, args, format, resource_version).await?;
            }
        }
    }
    Ok(failures.is_empty())
}

fn report(failures: &[String]) {
    for f in failures {
        eprintln!("{f}");
    }
}

fn print_options(target: &Target, args: &GetArgs, wide: bool, multi: bool) -> PrintOptions {
    PrintOptions {
        wide,
        show_labels: args.show_labels,
        namespace_column: args.all_namespaces && target.info.namespaced,
        name_prefix: multi.then(|| target.info.kind_group()),
    }
}

/// The table of one target: the collection, or each named object's one-row table.
async fn fetch_table(
    ctx: &Ctx,
    target: &Target,
    namespace: Option<&str>,
    args: &GetArgs,
    failures: &mut Vec<String>,
) -> Result<Table> {
    if target.names.is_empty() {
        let ns = if target.info.namespaced {
            namespace
        } else {
            None
        };
        let path = with_query(&target.info.collection_path(ns), &pairs(&args.query()));
        return Ok(ctx.get_table(&path).await?);
    }
    let mut merged: Option<Table> = None;
    for name in &target.names {
        let path = Ctx::object_path(target.info, ctx.ns_for(target.info, None), name);
        match ctx.get_table(&path).await {
            Ok(t) => match &mut merged {
                Some(m) => m.rows.extend(t.rows),
                None => merged = Some(t),
            },
            Err(e @ kube::Error::Api(_)) => failures.push(errors::render(&e.into())),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(merged.unwrap_or_default())
}

fn watch_path(
    target: &Target,
    namespace: Option<&str>,
    args: &GetArgs,
    resource_version: Option<&str>,
) -> String {
    let mut field = args.field_selector.clone().unwrap_or_default();
    if target.names.len() == 1 {
        if !field.is_empty() {
            field.push(',');
        }
        field.push_str(&format!("metadata.name={}", target.names[0]));
    }
    with_query(
        &format!("{}?watch=true", target.info.collection_path(namespace)),
        &[
            ("labelSelector", args.selector.as_deref().unwrap_or("")),
            ("fieldSelector", &field),
            ("resourceVersion", resource_version.unwrap_or("")),
        ],
    )
}

fn row_resource_version(obj: &Value) -> Option<String> {
    obj["rows"][0]["object"]["metadata"]["resourceVersion"]
        .as_str()
        .or(obj["metadata"]["resourceVersion"].as_str())
        .map(str::to_string)
}

#[allow(clippy::too_many_arguments)]
async fn watch_table(
    ctx: &Ctx,
    target: &Target,
    namespace: Option<&str>,
    args: &GetArgs,
    initial: &Table,
    opts: &PrintOptions,
    mut aligner: Aligner,
    header_printed: bool,
) -> Result<()> {
    let mut rv = initial.resource_version().map(str::to_string);
    let mut header_printed = header_printed || args.no_headers;
    loop {
        let path = watch_path(target, namespace, args, rv.as_deref());
        let mut events = Box::pin(ctx.watch_lines(&path, Some(TABLE_ACCEPT)).await?);
        while let Some(event) = events.next().await {
            let (kind, obj) = event?;
            if let Some(v) = row_resource_version(&obj) {
                rv = Some(v);
            }
            if kind == "BOOKMARK" {
                continue;
            }
            let table: Table = serde_json::from_value(obj)?;
            let mut lines = Vec::new();
            if !header_printed {
                lines.push(table.header(opts));
                header_printed = true;
            }
            lines.extend(table.body(opts));
            print!("{}", aligner.format(&lines));
        }
    }
}

async fn watch_objects(
    ctx: &Ctx,
    target: &Target,
    namespace: Option<&str>,
    args: &GetArgs,
    format: Format,
    mut rv: Option<String>,
) -> Result<()> {
    loop {
        let path = watch_path(target, namespace, args, rv.as_deref());
        let mut events = Box::pin(ctx.watch_lines(&path, None).await?);
        while let Some(event) = events.next().await {
            let (kind, obj) = event?;
            if let Some(v) = obj["metadata"]["resourceVersion"].as_str() {
                rv = Some(v.to_string());
            }
            if kind == "BOOKMARK" {
                continue;
            }
            let obj = with_type(target.info, obj);
            match format {
                Format::Name => println!("{}", name_of(target.info, &obj)),
                Format::Yaml => print!("---\n{}", to_yaml(&obj)?),
                Format::Json => print!("{}", to_json(&obj)?),
                Format::Table { .. } => unreachable!(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_formats() {
        assert_eq!(parse_format(None).unwrap(), Format::Table { wide: false });
        assert_eq!(
            parse_format(Some("wide")).unwrap(),
            Format::Table { wide: true }
        );
        assert_eq!(parse_format(Some("name")).unwrap(), Format::Name);
        let e = parse_format(Some("xml")).unwrap_err().to_string();
        assert!(e.contains("\"xml\""), "{e}");
    }
}
