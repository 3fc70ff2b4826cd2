//! `bosun describe`: kubectl's layouts for pods, deployments, replica sets, services,
//! persistent volumes and claims, priority classes, namespaces with their quotas and
//! limit ranges, ingresses and their classes, network policies, a generic `key: value` layout for
//! other kinds, and the object's events.

mod apps;
mod generic;
mod namespace;
mod networking;
mod pod;
mod policy;
mod scheduling;
mod sections;
mod service;
mod storage;
mod writer;

use anyhow::{anyhow, bail, Result};
use chrono::{DateTime, Utc};
use clap::Args;
use serde_json::Value;

use bosun::printers::human_duration;
use bosun::resources::{by_name, ResourceInfo};

use super::client::{with_query, Ctx};
use super::errors;
use super::replica_sets::controlled_by;
use super::targets::targets;
use apps::{describe_deployment, describe_replicaset};
use generic::describe_generic;
use pod::describe_pod;
use policy::describe_pod_disruption_budget;
use service::describe_service;
use storage::{describe_persistent_volume, describe_persistent_volume_claim};
use writer::{parse_time, str_of, Out};

pub use sections::pod_template_text;
pub use writer::tabwrite;

#[derive(Debug, Args)]
pub struct DescribeArgs {
    /// TYPE [NAME...] or TYPE/NAME.
    #[arg(required = true, value_name = "TYPE [NAME...]")]
    resources: Vec<String>,
    /// Describe the objects matching this label selector.
    #[arg(short = 'l', long)]
    selector: Option<String>,
}

/// The Events section from `events` whose involvedObject is this object.
async fn events(ctx: &Ctx, info: &ResourceInfo, obj: &Value, out: &mut Out) {
    let Some(events_info) = by_name("events") else {
        return;
    };
    let name = str_of(&obj["metadata"]["name"]);
    let ns = obj["metadata"]["namespace"].as_str();
    let uid = str_of(&obj["metadata"]["uid"]);
    let path = with_query(
        &events_info.collection_path(ns),
        &[("fieldSelector", &format!("involvedObject.name={name}"))],
    );
    let list = ctx.get_json(&path).await.unwrap_or(Value::Null);
    let mut items: Vec<Value> = list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| {
            let io = &e["involvedObject"];
            (io["kind"].as_str().is_none_or(|k| k == info.kind))
                && (io["uid"].as_str().is_none_or(|u| u.is_empty() || u == uid))
        })
        .collect();
    if items.is_empty() {
        out.kv(0, "Events", "<none>");
        return;
    }
    let last = |e: &Value| {
        parse_time(&e["lastTimestamp"])
            .or_else(|| parse_time(&e["eventTime"]))
            .or_else(|| parse_time(&e["metadata"]["creationTimestamp"]))
    };
    items.sort_by_key(|e| last(e));
    let now = Utc::now();
    out.line(0, "Events:");
    out.line(2, "Type\tReason\tAge\tFrom\tMessage");
    out.line(2, "----\t------\t----\t----\t-------");
    for e in &items {
        let age_of = |t: Option<DateTime<Utc>>| {
            t.map(|t| human_duration(now - t))
                .unwrap_or_else(|| "<unknown>".to_string())
        };
        let count = e["count"].as_i64().unwrap_or(1);
        let age = if count > 1 {
            format!(
                "{} (x{count} over {})",
                age_of(last(e)),
                age_of(parse_time(&e["firstTimestamp"]))
            )
        } else {
            age_of(last(e))
        };
        let from = e["source"]["component"]
            .as_str()
            .or(e["reportingComponent"].as_str())
            .unwrap_or("");
        out.line(
            2,
            &format!(
                "{}\t{}\t{age}\t{from}\t{}",
                str_of(&e["type"]),
                str_of(&e["reason"]),
                str_of(&e["message"]).trim()
            ),
        );
    }
}

/// The objects of `plural` in the object's namespace controlled by it.
async fn controlled(ctx: &Ctx, obj: &Value, plural: &str) -> Result<Vec<Value>> {
    let info = by_name(plural).ok_or_else(|| anyhow!("{plural} not served"))?;
    let uid = str_of(&obj["metadata"]["uid"]);
    let list = ctx
        .get_json(&info.collection_path(obj["metadata"]["namespace"].as_str()))
        .await
        .unwrap_or(Value::Null);
    Ok(list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|r| controlled_by(r, uid))
        .collect())
}

/// The EndpointSlices of a service (labelled `kubernetes.io/service-name`).
async fn service_slices(ctx: &Ctx, svc: &Value) -> Vec<Value> {
    let Some(info) = by_name("endpointslices") else {
        return Vec::new();
    };
    let name = str_of(&svc["metadata"]["name"]);
    let path = with_query(
        &info.collection_path(svc["metadata"]["namespace"].as_str()),
        &[(
            "labelSelector",
            &format!("kubernetes.io/service-name={name}"),
        )],
    );
    let list = ctx.get_json(&path).await.unwrap_or(Value::Null);
    list["items"].as_array().cloned().unwrap_or_default()
}

/// The objects of `plural` in the namespace `ns` names.
async fn in_namespace(ctx: &Ctx, plural: &str, ns: &Value) -> Vec<Value> {
    let Some(info) = by_name(plural) else {
        return Vec::new();
    };
    let path = info.collection_path(ns["metadata"]["name"].as_str());
    let list = ctx.get_json(&path).await.unwrap_or(Value::Null);
    list["items"].as_array().cloned().unwrap_or_default()
}

/// Each service an ingress's backends name, with its EndpointSlices, or
/// the error reading it (kubectl shows `svc:80 (<error: …>)`).
async fn ingress_backends(ctx: &Ctx, ing: &Value) -> networking::Backends {
    let mut found = networking::Backends::new();
    let Some(services) = by_name("services") else {
        return found;
    };
    let ns = ing["metadata"]["namespace"].as_str();
    for name in networking::backend_services(ing) {
        let got = match ctx.get_json(&Ctx::object_path(services, ns, &name)).await {
            Ok(svc) => {
                let slices = service_slices(ctx, &svc).await;
                Ok((svc, slices))
            }
            Err(kube::Error::Api(e)) => Err(e.message),
            Err(e) => Err(e.to_string()),
        };
        found.insert(name, got);
    }
    found
}

/// The pods of the object's namespace.
async fn namespace_pods(ctx: &Ctx, obj: &Value) -> Vec<Value> {
    let Some(info) = by_name("pods") else {
        return Vec::new();
    };
    let list = ctx
        .get_json(&info.collection_path(obj["metadata"]["namespace"].as_str()))
        .await
        .unwrap_or(Value::Null);
    list["items"].as_array().cloned().unwrap_or_default()
}

async fn describe_one(ctx: &Ctx, info: &'static ResourceInfo, obj: Value) -> Result<String> {
    let obj = super::output::with_type(info, obj);
    let mut out = match info.kind {
        "Pod" => describe_pod(&obj),
        "Deployment" => describe_deployment(&obj, &controlled(ctx, &obj, "replicasets").await?),
        "ReplicaSet" => describe_replicaset(&obj, &controlled(ctx, &obj, "pods").await?),
        "Service" if info.group.is_empty() => {
            describe_service(&obj, &service_slices(ctx, &obj).await)
        }
        "PersistentVolume" if info.group.is_empty() => describe_persistent_volume(&obj),
        "PersistentVolumeClaim" if info.group.is_empty() => {
            describe_persistent_volume_claim(&obj, &namespace_pods(ctx, &obj).await)
        }
        "PriorityClass" => scheduling::describe_priority_class(&obj),
        "Namespace" if info.group.is_empty() => namespace::describe_namespace(
            &obj,
            &in_namespace(ctx, "resourcequotas", &obj).await,
            &in_namespace(ctx, "limitranges", &obj).await,
        ),
        "ResourceQuota" if info.group.is_empty() => namespace::describe_resource_quota(&obj),
        "LimitRange" if info.group.is_empty() => namespace::describe_limit_range(&obj),
        "Ingress" if info.group == "networking.k8s.io" => {
            networking::describe_ingress(&obj, &ingress_backends(ctx, &obj).await)
        }
        "IngressClass" if info.group == "networking.k8s.io" => {
            networking::describe_ingress_class(&obj)
        }
        "NetworkPolicy" if info.group == "networking.k8s.io" => {
            networking::describe_network_policy(&obj)
        }
        "PodDisruptionBudget" if info.group == "policy" => describe_pod_disruption_budget(&obj),
        _ => describe_generic(&obj, info),
    };
    // kubectl shows no events for these kinds.
    if !matches!(
        info.kind,
        "Namespace" | "ResourceQuota" | "LimitRange" | "NetworkPolicy"
    ) {
        events(ctx, info, &obj, &mut out).await;
    }
    Ok(out.finish())
}

pub async fn describe(ctx: &Ctx, args: &DescribeArgs) -> Result<bool> {
    let targets = targets(ctx, &args.resources).await?;
    let mut ok = true;
    let mut first = true;
    for t in &targets {
        let ns = ctx.ns_for(t.info, None);
        let objects: Vec<Result<Value, kube::Error>> = if t.names.is_empty() {
            let path = with_query(
                &t.info.collection_path(ns),
                &[("labelSelector", args.selector.as_deref().unwrap_or(""))],
            );
            let list = ctx.get_json(&path).await?;
            list["items"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(Ok)
                .collect()
        } else {
            let mut v = Vec::new();
            for name in &t.names {
                v.push(ctx.get_json(&Ctx::object_path(t.info, ns, name)).await);
            }
            v
        };
        for obj in objects {
            match obj {
                Ok(obj) => {
                    if !first {
                        println!();
                        println!();
                    }
                    first = false;
                    print!("{}", describe_one(ctx, t.info, obj).await?);
                }
                Err(e @ kube::Error::Api(_)) => {
                    eprintln!("{}", errors::render(&e.into()));
                    ok = false;
                }
                Err(e) => bail!(e),
            }
        }
    }
    Ok(ok)
}

#[cfg(test)]
mod tests;
