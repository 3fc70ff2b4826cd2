//! bosun's node agent: the kubelet of bosun. It runs the pods bound to its
//! node on Docker and reports their status to the control plane.

pub mod atomic_writer;
pub mod certificate;
pub mod claims;
pub mod config;
pub mod config_sources;
pub mod config_volumes;
pub mod dns;
pub mod downward_api;
pub mod events;
pub mod metrics;
pub mod network;
pub mod node;
pub mod observe;
pub mod pod;
pub mod probes;
pub mod proxy;
pub mod runtime;
pub mod safe_path;
pub mod service_env;
pub mod services;
pub mod spec;
pub mod startup;
pub mod status;
pub mod streams;
pub mod subpath;
pub mod sync_loop;
pub mod volumes;
