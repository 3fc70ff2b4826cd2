//! Printers for rbac.authorization.k8s.io, as kubectl's `printRole`,
//! `printClusterRole`, `printRoleBinding` and `printClusterRoleBinding`.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::age::age_cell;
use super::column::{Column, KindPrinter, AGE, NAME};
use super::fields::{array_at, name_cell, str_at};

pub(super) const CREATED_AT: Column = Column {
    type_: "date",
    ..Column::text(
        "Created At",
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
    )
};

const BINDING_COLUMNS: &[Column] = &[
    NAME,
    Column::text("Role", "RoleRef references a Role or a ClusterRole."),
    AGE,
    Column::text("Users", "Users in the binding.").wide(),
    Column::text("Groups", "Groups in the binding.").wide(),
    Column::text("ServiceAccounts", "ServiceAccounts in the binding.").wide(),
];

pub(super) const ROLE: KindPrinter = KindPrinter {
    group: "rbac.authorization.k8s.io",
    kind: "Role",
    columns: &[NAME, CREATED_AT],
    cells: role_cells,
};

pub(super) const CLUSTER_ROLE: KindPrinter = KindPrinter {
    kind: "ClusterRole",
    ..ROLE
};

pub(super) const ROLE_BINDING: KindPrinter = KindPrinter {
    group: "rbac.authorization.k8s.io",
    kind: "RoleBinding",
    columns: BINDING_COLUMNS,
    cells: binding_cells,
};

pub(super) const CLUSTER_ROLE_BINDING: KindPrinter = KindPrinter {
    kind: "ClusterRoleBinding",
    ..ROLE_BINDING
};

pub(super) fn role_cells(role: &Value, _now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name_cell(role),
        str_at(role, "/metadata/creationTimestamp").into(),
    ]
}

/// kubectl's `SubjectsStrings`: users, groups and `namespace:name` of
/// service accounts, each joined with ", ".
fn subjects(binding: &Value, kind: &str) -> String {
    array_at(binding, "/subjects")
        .iter()
        .filter(|s| s["kind"].as_str() == Some(kind))
        .map(|s| {
            let name = s["name"].as_str().unwrap_or("");
            match (kind, s["namespace"].as_str()) {
                ("ServiceAccount", Some(ns)) => format!("{ns}/{name}"),
                _ => name.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn binding_cells(binding: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name_cell(binding),
        format!(
            "{}/{}",
            str_at(binding, "/roleRef/kind"),
            str_at(binding, "/roleRef/name")
        )
        .into(),
        age_cell(binding, now),
        subjects(binding, "User").into(),
        subjects(binding, "Group").into(),
        subjects(binding, "ServiceAccount").into(),
    ]
}
