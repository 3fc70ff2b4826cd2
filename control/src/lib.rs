//! bosun's control plane, as one process (`bosun-control`):
//!
//! - [`api`]: the Kubernetes-shaped HTTP API (routing, one file per verb,
//!   per-kind rules in `api/strategy/`, watch, discovery, the proxy to the
//!   agents for logs, exec and attach; `api/aggregator/` the APIServices
//!   and the extension API servers requests are proxied to);
//! - [`store`]: the `Store` trait and its embedded backend;
//! - [`scheduler`]: places pods on nodes;
//! - [`controllers`]: one folder per controller;
//! - [`toolkit`]: what the scheduler and the controllers share (informers,
//!   claims, pod templates, revisions, node and volume matching);
//! - [`manager`]: which of them run, started as equals;
//! - [`observe`]: the Prometheus metrics at `/metrics`;
//! - [`server`]: starts it all; [`tls`]: the CA and serving certificate;
//! - [`snapshot`]: copies of the store and the keys, served and periodic.

pub mod api;
pub mod auth;
pub mod controllers;
pub mod leaderelection;
pub mod manager;
pub mod observe;
pub mod scheduler;
pub mod server;
pub mod snapshot;
pub mod store;
pub mod tls;
pub mod tokens;
pub mod toolkit;
