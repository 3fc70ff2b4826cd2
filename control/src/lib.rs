//! bosun's control plane: the Kubernetes-shaped API server on an embedded
//! store (and, in later steps, the scheduler and the controllers).

pub mod api;
pub mod controllers;
pub mod scheduler;
pub mod server;
pub mod store;
pub mod tls;
