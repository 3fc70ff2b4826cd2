//! bosun's node agent: the kubelet of bosun. It runs the pods bound to its
//! node on Docker and reports their status to the control plane.

pub mod config;
pub mod dns;
pub mod events;
pub mod hollow;
pub mod ingress;
pub mod loadbalancer;
pub mod memory;
pub mod metrics;
pub mod netpol;
pub mod network;
pub mod node;
pub mod observe;
pub mod pod;
pub mod probes;
pub mod proxy;
pub mod runtime;
pub mod server;
pub mod services;
pub mod spec;
pub mod startup;
pub mod status;
pub mod sync_loop;
pub mod volumes;
