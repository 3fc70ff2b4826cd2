pub mod resources;
pub mod defaults;
pub mod quantity;
pub mod selector;
pub mod validation;
