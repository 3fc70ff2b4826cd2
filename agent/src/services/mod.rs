//! Services and EndpointSlices as the agent keeps them: one slimmed model
//! ([`model`]) fed by one watch of each kind ([`ServiceCache`]), shared by
//! the cluster DNS (`crate::dns`) and the service proxy (`crate::proxy`).
//!
//! - [`model`]: what is kept of a Service and an EndpointSlice.
//! - [`watch`]: the watch-fed map and the rebuild-per-burst loop every
//!   cache of the agent runs on (the DNS's Pods too).
//! - [`cache`]: the shared cache and its subscribers.

pub mod cache;
pub mod model;
pub mod watch;

#[cfg(test)]
pub(crate) mod tests;

pub use cache::ServiceCache;
pub use model::{Key, Proto, ServiceState, SliceInfo, SvcInfo, SvcPort};
