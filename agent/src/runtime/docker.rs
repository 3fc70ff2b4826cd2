//! The Docker implementation of [`super::ContainerRuntime`], through bollard.
//! (Being written on branch `docker`.)

/// Runs pods on a Docker Engine.
pub struct DockerRuntime;
