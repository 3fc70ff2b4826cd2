pub mod defaults;
pub mod patch;
pub mod printers;
pub mod resources;
pub mod selector;
pub mod validation;
