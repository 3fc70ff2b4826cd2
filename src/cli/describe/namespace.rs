//! `describe namespace`, `describe resourcequota` and `describe limitrange`:
//! kubectl's layouts (`describeNamespace`, `describeQuota`,
//! `describeLimitRange` in kubectl's describe.go). A namespace's page ends
//! with its quotas and limit ranges, in the same tables.

use std::collections::BTreeSet;

use serde_json::Value;

use bosun::quantity::{format_bytes, parse_quantity};

use super::writer::{rfc1123z, str_of, Out};
use crate::cli::apply::LAST_APPLIED;

/// kubectl's help text under `Scopes:` for each quota scope it explains.
fn scope_help(scope: &str) -> Option<&'static str> {
    Some(match scope {
        "Terminating" => "Matches all pods that have an active deadline. These pods have a limited lifespan on a node before being actively terminated by the system.",
        "NotTerminating" => "Matches all pods that do not have an active deadline. These pods usually include long running pods whose container command is not expected to terminate.",
        "BestEffort" => "Matches all pods that do not have resource requirements set. These pods have a best effort quality of service.",
        "NotBestEffort" => "Matches all pods that have at least one resource requirement set. These pods have a burstable or guaranteed quality of service.",
        _ => return None,
    })
}

/// How a quantity is written: a binary suffix (`Mi`), an exponent (`e3`)
/// or a decimal suffix (`k`, `m`, none).
#[derive(PartialEq)]
enum Format {
    Binary,
    Exponent,
    Decimal,
}

fn format_of(q: &str) -> Format {
    let suffix = q.trim_start_matches(|c: char| c.is_ascii_digit() || matches!(c, '.' | '+' | '-'));
    if suffix.ends_with('i') {
        Format::Binary
    } else if suffix.starts_with(['e', 'E']) {
        Format::Exponent
    } else {
        Format::Decimal
    }
}

/// `used` written as `hard` is: kubectl rewrites a used amount whose
/// format differs from the limit's as its whole value in the limit's
/// format (`0` beside `1Gi`, `134217728` beside `1G`).
fn used_like_hard(used: &str, hard: &str) -> String {
    let want = format_of(hard);
    if format_of(used) == want {
        return used.to_string();
    }
    let Ok(value) = parse_quantity(used).map(|q| q.value()) else {
        return used.to_string();
    };
    match want {
        Format::Binary => format_bytes(value),
        Format::Exponent => parse_quantity(&format!("{value}e0"))
            .map(|q| q.canonical())
            .unwrap_or_else(|_| value.to_string()),
        Format::Decimal => parse_quantity(&value.to_string())
            .map(|q| q.canonical())
            .unwrap_or_else(|_| value.to_string()),
    }
}

/// The `Scopes:` line and its help lines, at `indent` (kubectl writes the
/// help as ` * text` at the top level and `* text` inside a namespace).
fn scopes(out: &mut Out, indent: usize, bullet: &str, quota: &Value) {
    let mut scopes: Vec<&str> = quota["spec"]["scopes"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if scopes.is_empty() {
        return;
    }
    scopes.sort();
    out.kv(indent, "Scopes", &scopes.join(", "));
    for scope in scopes {
        if let Some(help) = scope_help(scope) {
            out.line(indent, &format!("{bullet}{help}"));
        }
    }
}

/// The `Resource  Used  Hard` rows of a quota, by resource name.
fn quota_rows(out: &mut Out, indent: usize, dashes: &str, quota: &Value) {
    out.line(indent, "Resource\tUsed\tHard");
    out.line(indent, &format!("--------\t{dashes}\t{dashes}"));
    let status = &quota["status"];
    let Some(hard) = status["hard"].as_object() else {
        return;
    };
    // A BTreeMap's keys are already in kubectl's (string) order.
    for (resource, h) in hard {
        let h = h.as_str().unwrap_or_default();
        let used = status["used"][resource].as_str().unwrap_or("0");
        out.line(
            indent,
            &format!("{resource}\t{}\t{h}", used_like_hard(used, h)),
        );
    }
}

pub(super) fn describe_resource_quota(quota: &Value) -> Out {
    let mut out = Out::default();
    out.kv(0, "Name", str_of(&quota["metadata"]["name"]));
    out.kv(0, "Namespace", str_of(&quota["metadata"]["namespace"]));
    scopes(&mut out, 0, " * ", quota);
    quota_rows(&mut out, 0, "----", quota);
    out
}

/// One row per resource a limit item names: `Type Resource Min Max
/// Default Request Default Limit Max Limit/Request Ratio`, `-` where the
/// item sets no value. (kubectl walks a Go map here, so its row order
/// within an item varies; bosun's is by resource name.)
fn limit_rows(out: &mut Out, prefix: &str, limit_range: &Value) {
    const COLUMNS: [&str; 5] = [
        "min",
        "max",
        "defaultRequest",
        "default",
        "maxLimitRequestRatio",
    ];
    for item in limit_range["spec"]["limits"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let resources: BTreeSet<&String> = COLUMNS
            .iter()
            .filter_map(|c| item[*c].as_object())
            .flat_map(|m| m.keys())
            .collect();
        for r in resources {
            let cells: Vec<&str> = COLUMNS
                .iter()
                .map(|c| item[*c][r.as_str()].as_str().unwrap_or("-"))
                .collect();
            out.line(
                0,
                &format!(
                    "{prefix}{}\t{r}\t{}",
                    str_of(&item["type"]),
                    cells.join("\t")
                ),
            );
        }
    }
}

const LIMIT_HEADER: &str =
    "Type\tResource\tMin\tMax\tDefault Request\tDefault Limit\tMax Limit/Request Ratio";
const LIMIT_DASHES: &str =
    "----\t--------\t---\t---\t---------------\t-------------\t-----------------------";

pub(super) fn describe_limit_range(limit_range: &Value) -> Out {
    let mut out = Out::default();
    out.kv(0, "Name", str_of(&limit_range["metadata"]["name"]));
    out.kv(
        0,
        "Namespace",
        str_of(&limit_range["metadata"]["namespace"]),
    );
    out.line(0, LIMIT_HEADER);
    out.line(0, LIMIT_DASHES);
    limit_rows(&mut out, "", limit_range);
    out
}

/// `describe namespace`: its name, labels, annotations, phase and
/// conditions, then its quotas and limit ranges.
pub(super) fn describe_namespace(ns: &Value, quotas: &[Value], limit_ranges: &[Value]) -> Out {
    let mut out = Out::default();
    let meta = &ns["metadata"];
    out.kv(0, "Name", str_of(&meta["name"]));
    out.map(0, "Labels", &meta["labels"], "=", &[]);
    out.map(
        0,
        "Annotations",
        &meta["annotations"],
        ": ",
        &[LAST_APPLIED],
    );
    out.kv(0, "Status", str_of(&ns["status"]["phase"]));
    if let Some(conds) = ns["status"]["conditions"]
        .as_array()
        .filter(|c| !c.is_empty())
    {
        out.line(0, "Conditions:");
        out.line(2, "Type\tStatus\tLastTransitionTime\tReason\tMessage");
        out.line(2, "----\t------\t------------------\t------\t-------");
        for c in conds {
            out.line(
                2,
                &format!(
                    "{}\t{}\t{}\t{}\t{}",
                    str_of(&c["type"]),
                    str_of(&c["status"]),
                    rfc1123z(&c["lastTransitionTime"]),
                    str_of(&c["reason"]),
                    str_of(&c["message"])
                ),
            );
        }
    }
    out.line(0, "");
    if quotas.is_empty() {
        out.line(0, "No resource quota.");
    } else {
        let mut quotas: Vec<&Value> = quotas.iter().collect();
        quotas.sort_by_key(|q| str_of(&q["metadata"]["name"]).to_string());
        out.line(0, "Resource Quotas");
        for q in quotas {
            out.kv(2, "Name", str_of(&q["metadata"]["name"]));
            scopes(&mut out, 2, "* ", q);
            quota_rows(&mut out, 2, "---", q);
        }
    }
    out.line(0, "");
    if limit_ranges.is_empty() {
        out.line(0, "No LimitRange resource.");
    } else {
        out.line(0, "Resource Limits");
        out.line(0, &format!(" {LIMIT_HEADER}"));
        out.line(0, &format!(" {LIMIT_DASHES}"));
        for lr in limit_ranges {
            limit_rows(&mut out, " ", lr);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn used_is_written_as_the_limit_is() {
        assert_eq!(used_like_hard("0", "1Gi"), "0");
        assert_eq!(used_like_hard("128Mi", "1G"), "134217728");
        assert_eq!(used_like_hard("2k", "4Ki"), "2000");
        assert_eq!(used_like_hard("500m", "2"), "500m");
        assert_eq!(used_like_hard("512Mi", "1Gi"), "512Mi");
    }

    #[test]
    fn quota_reads_like_kubectl() {
        let q = json!({"metadata": {"name": "compute", "namespace": "team"},
            "spec": {"scopes": ["NotTerminating", "BestEffort"]},
            "status": {"hard": {"pods": "10", "requests.memory": "1Gi"},
                       "used": {"pods": "2", "requests.memory": "0"}}});
        assert_eq!(
            describe_resource_quota(&q).finish(),
            "Name:       compute\n\
             Namespace:  team\n\
             Scopes:     BestEffort, NotTerminating\n \
             * Matches all pods that do not have resource requirements set. These pods have a best effort quality of service.\n \
             * Matches all pods that do not have an active deadline. These pods usually include long running pods whose container command is not expected to terminate.\n\
             Resource         Used  Hard\n\
             --------         ----  ----\n\
             pods             2     10\n\
             requests.memory  0     1Gi\n"
        );
    }

    #[test]
    fn limit_range_rows_mark_unset_values() {
        let lr = json!({"metadata": {"name": "limits", "namespace": "team"},
            "spec": {"limits": [{"type": "Container",
                "default": {"cpu": "500m"}, "max": {"memory": "1Gi"}}]}});
        let text = describe_limit_range(&lr).finish();
        let rows: Vec<Vec<&str>> = text
            .lines()
            .filter(|l| l.starts_with("Container"))
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows,
            [
                ["Container", "cpu", "-", "-", "-", "500m", "-"],
                ["Container", "memory", "-", "1Gi", "-", "-", "-"]
            ],
            "{text}"
        );
    }
}
