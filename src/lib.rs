pub mod patch;
pub mod printers;
pub mod resources;
