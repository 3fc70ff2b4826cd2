//! bosun's shared library: the served resources, Kubernetes' defaulting
//! and validation, label selectors, quantities, patches and printers.

pub mod bootstrap;
pub mod crd_schema;
pub mod cron;
pub mod defaults;
pub mod disruption;
pub mod event_versions;
pub mod events;
pub mod fieldmanager;
pub mod files;
pub mod flowcontrol;
pub mod hostnet;
pub mod metrics;
pub mod names;
pub mod observe;
pub mod owners;
pub mod patch;
pub mod printers;
pub mod quantity;
pub mod quota;
pub mod resources;
pub mod selector;
pub mod serving;
pub mod snapshot;
pub mod time;
pub mod validation;
pub mod version;
pub mod well_known;
pub mod yaml;
