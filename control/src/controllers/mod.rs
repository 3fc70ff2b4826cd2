//! The controllers, one folder each: clients of the API that turn desired
//! state into more desired state (pods from ReplicaSets, ReplicaSets from
//! Deployments, ...), as kube-controller-manager's do. They are built on
//! the [`crate::toolkit`] they share with the scheduler, and started by
//! [`crate::manager`].

pub mod clusterroleaggregation;
pub mod cronjob;
pub mod daemonset;
pub mod deployment;
pub mod endpoints;
pub mod endpointslice;
pub mod eventttl;
pub mod garbagecollector;
pub mod job;
pub mod kubernetesservice;
pub mod namespace;
pub mod nodeipam;
pub mod nodelifecycle;
pub mod podautoscaler;
pub mod podgc;
pub mod replicaset;
pub mod rootcacertpublisher;
pub mod serviceaccount;
pub mod statefulset;
pub mod tainteviction;
pub mod volumebinding;
