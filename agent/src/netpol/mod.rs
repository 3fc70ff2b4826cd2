//! NetworkPolicy enforcement (networking.k8s.io/v1), what a CNI's policy
//! agent (kube-router, Calico's Felix) is to a Kubernetes node: each agent
//! filters the traffic of its own node's pods in one nftables table of its
//! own, `ip bosun-np-<node>`, beside the service proxy's.
//!
//! - [`model`]: what is kept of Pods, Namespaces and NetworkPolicies, and
//!   the per-pod rules of the node with every selector and named port
//!   resolved (pure).
//! - [`render`]: those rules as the nftables table (pure).
//! - [`sync`]: the watches, and the loop that replaces the table in one
//!   transaction within a second of a change.

pub mod model;
pub mod render;
pub mod sync;

#[cfg(test)]
mod tests;

pub use render::table_name;
pub use sync::NetworkPolicyEnforcer;
