pub mod defaults;
pub mod quantity;
pub mod resources;
pub mod selector;
pub mod validation;
