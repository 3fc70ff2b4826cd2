//! What the agent is configured with, and what configures a pod's
//! containers from the API:
//!
//! - [`AgentConfig`] (`agent`): the agent's own settings;
//! - [`sources`]: the ConfigMaps and Secrets a pod's environment and
//!   volumes read, and the environment made from them;
//! - [`watch_manager`]: the ConfigMap and Secret managers, one shared
//!   watch per object the node's pods reference;
//! - [`service_env`]: the Services' variables every container gets.

mod agent;
pub mod service_env;
pub mod sources;
pub mod watch_manager;

pub use agent::AgentConfig;
