//! What a kind's printer is made of: the Table [`Column`] definition, the [`KindPrinter`]
//! pairing a kind's columns with the function computing its cells, and the columns many
//! kinds share (NAME, AGE, CONTAINERS, IMAGES, SELECTOR).

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

/// One column of a Table (`meta.k8s.io/v1` TableColumnDefinition).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    /// "string" or "integer".
    pub type_: &'static str,
    /// "name" for the column holding the object's name, "" otherwise.
    pub format: &'static str,
    pub description: &'static str,
    /// 0 = shown by default, 1 = only with `-o wide`.
    pub priority: i32,
}

impl Column {
    /// A string column shown by default.
    pub const fn text(name: &'static str, description: &'static str) -> Column {
        Column {
            name,
            type_: "string",
            format: "",
            description,
            priority: 0,
        }
    }

    /// An integer column shown by default.
    pub const fn integer(name: &'static str, description: &'static str) -> Column {
        Column {
            type_: "integer",
            ..Column::text(name, description)
        }
    }

    /// The same column, shown only with `-o wide` (priority 1).
    pub const fn wide(self) -> Column {
        Column {
            priority: 1,
            ..self
        }
    }

    /// The TableColumnDefinition JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.type_,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

/// The header kubectl prints for a column: its name upper-cased ("Up-to-date" → "UP-TO-DATE").
pub fn header(col: &Column) -> String {
    col.name.to_uppercase()
}

/// One kind's printer: its columns in kubectl's order and its row's cells, one per column,
/// computed from the object's JSON as of a time.
pub(super) struct KindPrinter {
    /// The API group, "" for the core group.
    pub group: &'static str,
    pub kind: &'static str,
    pub columns: &'static [Column],
    pub cells: fn(&Value, DateTime<Utc>) -> Vec<Value>,
}

pub(super) const NAME: Column = Column {
    format: "name",
    ..Column::text("Name", "Name must be unique within a namespace.")
};
pub(super) const AGE: Column = Column::text(
    "Age",
    "CreationTimestamp is a timestamp representing the server time when this object was created.",
);
pub(super) const CONTAINERS: Column =
    Column::text("Containers", "Names of each container in the template.").wide();
pub(super) const IMAGES: Column = Column::text(
    "Images",
    "Images referenced by each container in the template.",
)
.wide();
pub(super) const SELECTOR: Column = Column::text("Selector", "Label selector for pods.").wide();
