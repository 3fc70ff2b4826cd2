//! Printing the server's `meta.k8s.io/v1` Tables the way kubectl does:
//! upper-case headers, left-aligned columns separated by at least three
//! spaces (kubectl's tabwriter: min width 6, padding 3, last column not
//! padded), `priority: 1` columns only with `-o wide`, a NAMESPACE column first
//! with `-A`, `TYPE/NAME` names when several types are printed, and LABELS
//! with `--show-labels`.

use serde::Deserialize;
use serde_json::Value;

/// The `Accept` header that asks the server for a Table.
pub const TABLE_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ColumnDefinition {
    pub name: String,
    #[serde(default)]
    pub format: String,
    #[serde(default)]
    pub priority: i32,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct TableRow {
    #[serde(default)]
    pub cells: Vec<Value>,
    /// `PartialObjectMetadata` (or the full object) the row shows.
    #[serde(default)]
    pub object: Value,
}

impl TableRow {
    pub fn namespace(&self) -> &str {
        self.object["metadata"]["namespace"].as_str().unwrap_or("")
    }
    /// `k=v,k2=v2` sorted by key, or `<none>`.
    pub fn labels(&self) -> String {
        match self.object["metadata"]["labels"].as_object() {
            Some(m) if !m.is_empty() => {
                let mut pairs: Vec<String> = m
                    .iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                    .collect();
                pairs.sort();
                pairs.join(",")
            }
            _ => "<none>".to_string(),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Table {
    #[serde(default)]
    pub column_definitions: Vec<ColumnDefinition>,
    #[serde(default)]
    pub rows: Vec<TableRow>,
    #[serde(default)]
    pub metadata: Value,
}

impl Table {
    pub fn resource_version(&self) -> Option<&str> {
        self.metadata["resourceVersion"]
            .as_str()
            .filter(|s| !s.is_empty())
    }
}

/// How to print a table.
#[derive(Debug, Clone, Default)]
pub struct PrintOptions {
    /// `-o wide`: include `priority: 1` columns.
    pub wide: bool,
    /// `--show-labels`: a LABELS column last.
    pub show_labels: bool,
    /// `-A` on a namespaced resource: a NAMESPACE column first.
    pub namespace_column: bool,
    /// `deployment.apps` when several types are printed: names become `deployment.apps/x`.
    pub name_prefix: Option<String>,
}

fn cell_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "<none>".to_string(),
        other => other.to_string(),
    }
}

impl Table {
    fn visible_columns(&self, opts: &PrintOptions) -> Vec<usize> {
        self.column_definitions
            .iter()
            .enumerate()
            .filter(|(_, c)| opts.wide || c.priority == 0)
            .map(|(i, _)| i)
            .collect()
    }

    fn name_column(&self) -> Option<usize> {
        self.column_definitions
            .iter()
            .position(|c| c.format == "name")
            .or_else(|| {
                self.column_definitions
                    .iter()
                    .position(|c| c.name.eq_ignore_ascii_case("name"))
            })
    }

    /// The header line's cells.
    pub fn header(&self, opts: &PrintOptions) -> Vec<String> {
        let mut out = Vec::new();
        if opts.namespace_column {
            out.push("NAMESPACE".to_string());
        }
        for i in self.visible_columns(opts) {
            out.push(self.column_definitions[i].name.to_uppercase());
        }
        if opts.show_labels {
            out.push("LABELS".to_string());
        }
        out
    }

    /// The cells of every row.
    pub fn body(&self, opts: &PrintOptions) -> Vec<Vec<String>> {
        let columns = self.visible_columns(opts);
        let name_col = self.name_column();
        self.rows
            .iter()
            .map(|row| {
                let mut out = Vec::new();
                if opts.namespace_column {
                    out.push(row.namespace().to_string());
                }
                for &i in &columns {
                    let mut text = row.cells.get(i).map(cell_text).unwrap_or_default();
                    if let (Some(prefix), Some(nc)) = (&opts.name_prefix, name_col) {
                        if nc == i {
                            text = format!("{prefix}/{text}");
                        }
                    }
                    out.push(text);
                }
                if opts.show_labels {
                    out.push(row.labels());
                }
                out
            })
            .collect()
    }
}

/// Column alignment that remembers widths across calls, like kubectl's
/// tabwriter with `RememberWidths`: rows printed later by a watch line up
/// with the table above them.
#[derive(Debug, Default)]
pub struct Aligner {
    widths: Vec<usize>,
}

const MIN_WIDTH: usize = 6;
const PADDING: usize = 3;

impl Aligner {
    /// Formats lines of cells; every line ends with `\n`.
    pub fn format(&mut self, lines: &[Vec<String>]) -> String {
        for line in lines {
            // The last cell of a line is not padded, so it does not widen its column.
            for (i, cell) in line.iter().enumerate().take(line.len().saturating_sub(1)) {
                let w = (cell.chars().count() + PADDING).max(MIN_WIDTH);
                if self.widths.len() <= i {
                    self.widths.resize(i + 1, 0);
                }
                self.widths[i] = self.widths[i].max(w);
            }
        }
        let mut out = String::new();
        for line in lines {
            for (i, cell) in line.iter().enumerate() {
                out.push_str(cell);
                if i + 1 < line.len() {
                    let pad = self.widths[i] - cell.chars().count();
                    out.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push('\n');
        }
        out
    }
}

/// Aligns lines of cells in one go.
pub fn align(lines: &[Vec<String>]) -> String {
    Aligner::default().format(lines)
}

/// kubectl's message for an empty result.
pub fn no_resources_message(namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) => format!("No resources found in {ns} namespace."),
        None => "No resources found".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployments() -> Table {
        serde_json::from_value(json!({
            "kind": "Table",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": "42"},
            "columnDefinitions": [
                {"name": "Name", "type": "string", "format": "name", "priority": 0},
                {"name": "Ready", "type": "string", "priority": 0},
                {"name": "Up-to-date", "type": "integer", "priority": 0},
                {"name": "Available", "type": "integer", "priority": 0},
                {"name": "Age", "type": "string", "priority": 0},
                {"name": "Containers", "type": "string", "priority": 1},
                {"name": "Images", "type": "string", "priority": 1},
            ],
            "rows": [
                {"cells": ["nginx-deployment", "3/3", 3, 3, "5m", "nginx", "nginx:1.7.9"],
                 "object": {"metadata": {"name": "nginx-deployment", "namespace": "default",
                                         "labels": {"app": "nginx", "tier": "web"}}}},
                {"cells": ["db", "0/1", 1, 0, "10s", "postgres", "postgres:16"],
                 "object": {"metadata": {"name": "db", "namespace": "prod"}}},
            ]
        }))
        .unwrap()
    }

    fn render(t: &Table, opts: &PrintOptions) -> String {
        let mut lines = vec![t.header(opts)];
        lines.extend(t.body(opts));
        align(&lines)
    }

    #[test]
    fn columns_align_like_kubectl() {
        let out = render(&deployments(), &PrintOptions::default());
        assert_eq!(
            out,
            "NAME               READY   UP-TO-DATE   AVAILABLE   AGE\n\
             nginx-deployment   3/3     3            3           5m\n\
             db                 0/1     1            0           10s\n"
        );
        assert_eq!(deployments().resource_version(), Some("42"));
    }

    #[test]
    fn wide_adds_priority_one_columns() {
        let opts = PrintOptions {
            wide: true,
            ..Default::default()
        };
        let out = render(&deployments(), &opts);
        let first = out.lines().next().unwrap();
        assert_eq!(
            first,
            "NAME               READY   UP-TO-DATE   AVAILABLE   AGE   CONTAINERS   IMAGES"
        );
        assert!(out.contains("5m    nginx        nginx:1.7.9\n"), "{out}");
    }

    #[test]
    fn all_namespaces_puts_namespace_first() {
        let opts = PrintOptions {
            namespace_column: true,
            ..Default::default()
        };
        let out = render(&deployments(), &opts);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("NAMESPACE   NAME  "), "{out}");
        assert!(
            lines[1].starts_with("default     nginx-deployment   3/3"),
            "{out}"
        );
        assert!(lines[2].starts_with("prod        db "), "{out}");
    }

    #[test]
    fn name_prefix_and_labels() {
        let opts = PrintOptions {
            show_labels: true,
            name_prefix: Some("deployment.apps".into()),
            ..Default::default()
        };
        let out = render(&deployments(), &opts);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].ends_with("AGE   LABELS"), "{out}");
        assert!(lines[1].starts_with("deployment.apps/nginx-deployment   3/3"));
        assert!(lines[1].ends_with("5m    app=nginx,tier=web"), "{out}");
        assert!(lines[2].ends_with("10s   <none>"), "{out}");
    }

    #[test]
    fn short_columns_are_at_least_six_wide_and_widths_are_remembered() {
        let mut a = Aligner::default();
        let first = a.format(&[vec!["A".into(), "B".into(), "C".into()]]);
        assert_eq!(first, "A     B     C\n");
        // A later row keeps the earlier widths and may widen them.
        let later = a.format(&[vec!["longer-name".into(), "x".into(), "y".into()]]);
        assert_eq!(later, "longer-name   x     y\n");
    }

    #[test]
    fn empty_messages() {
        assert_eq!(
            no_resources_message(Some("default")),
            "No resources found in default namespace."
        );
        assert_eq!(no_resources_message(None), "No resources found");
    }
}
