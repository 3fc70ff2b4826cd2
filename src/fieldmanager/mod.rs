//! Server-side apply's field management: which manager owns which fields
//! of an object (`metadata.managedFields`), computed on plain JSON values.
//!
//! - [`fieldset`]: the set of field paths and its `FieldsV1` form.
//! - [`walk`]: fields an object sets, differences, merge and removal,
//!   against the list types of [`crate::patch::apply_list_type`].
//! - [`managed`]: the entries, and how apply and update move ownership.

pub mod fieldset;
pub mod managed;
pub mod walk;

#[cfg(test)]
mod tests;

pub use fieldset::FieldSet;
pub use managed::{Actor, Applied, Conflict, Entry, Scope};
