//! The printer for apiextensions.k8s.io: CustomResourceDefinitions get the
//! apiserver's default table (`rest.NewDefaultTableConvertor`), NAME and
//! CREATED AT, as Roles do.

use super::column::{KindPrinter, NAME};
use super::rbac::{role_cells, CREATED_AT};

pub(super) const CUSTOM_RESOURCE_DEFINITION: KindPrinter = KindPrinter {
    group: "apiextensions.k8s.io",
    kind: "CustomResourceDefinition",
    columns: &[NAME, CREATED_AT],
    cells: role_cells,
};
