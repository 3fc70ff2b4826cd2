//! What the integration tests of the three packages share (each package's
//! `tests/common` or `tests/cluster` keeps only what its own tests need):
//!
//! - [`wait`]: one `wait_for`, polling a condition until a deadline;
//! - [`binaries`]: the workspace's binaries (built if missing), kubectl,
//!   the repository's root;
//! - [`images`]: the test images, built by `scripts/build-images.sh`;
//! - [`process`]: child processes that die with the test;
//! - [`control`]: starting `bosun-control` in a data dir and waiting
//!   until it serves;
//! - [`client`]: a kube client from an admin kubeconfig;
//! - [`docker`]: a test node's containers, and removing what it made;
//! - [`etcd`]: a throwaway etcd member for the etcd store's tests;
//! - [`text`]: log tails for failure messages.

pub mod binaries;
pub mod client;
pub mod control;
pub mod docker;
pub mod etcd;
pub mod images;
pub mod process;
pub mod text;
pub mod wait;

pub use wait::wait_for;
