//! The controllers, one folder each: clients of the API that turn desired
//! state into more desired state (pods from ReplicaSets, ReplicaSets from
//! Deployments, ...), as kube-controller-manager's do. They are built on
//! the [`crate::toolkit`] they share with the scheduler, and started by
//! [`crate::manager`]'s registry. A controller's shared state (clients,
//! caches, recorder, clock) is its `Context`, the second argument of its
//! `reconcile`, as kube-rs names it.
//!
//! One exception: [`kubernetesservice`] is the API server's own
//! controller (upstream keeps it in `pkg/controlplane/controller/`, not in
//! kube-controller-manager): every API server runs it, whatever
//! `--controllers` says, so [`crate::server`] starts it, as its own
//! client (`kube-apiserver`), not from the shared informers. It lives here
//! because it is written like the others: a loop that reconciles API
//! objects through the API.

pub mod certificates;
pub mod clusterroleaggregation;
pub mod cronjob;
pub mod customresourcedefinition;
pub mod daemonset;
pub mod deployment;
pub mod disruption;
pub mod endpoints;
pub mod endpointslice;
pub mod eventttl;
pub mod garbagecollector;
pub mod job;
/// The `kubernetes` Service: run by [`crate::server`], not the manager.
pub mod kubernetesservice;
pub mod namespace;
pub mod nodeipam;
pub mod nodelifecycle;
pub mod podautoscaler;
pub mod podgc;
pub mod replicaset;
pub mod replicationcontroller;
pub mod resourcequota;
pub mod rootcacertpublisher;
pub mod serviceaccount;
pub mod statefulset;
pub mod tainteviction;
pub mod volumebinding;
