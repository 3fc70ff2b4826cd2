//! The Kubernetes version bosun reports (`/version`, a Node's
//! kubeletVersion): the minor version whose API it serves, which is the
//! one its k8s-openapi types are built for (the `v1_NN` feature in the
//! workspace's Cargo.toml). kubectl warns when it is more than one minor
//! version away from the server.

k8s_openapi::k8s_if_1_33! { pub const KUBERNETES_MINOR: u32 = 33; }
k8s_openapi::k8s_if_1_34! { pub const KUBERNETES_MINOR: u32 = 34; }
k8s_openapi::k8s_if_1_35! { pub const KUBERNETES_MINOR: u32 = 35; }
k8s_openapi::k8s_if_1_36! { pub const KUBERNETES_MINOR: u32 = 36; }
k8s_openapi::k8s_if_1_37! { pub const KUBERNETES_MINOR: u32 = 37; }

/// `v1.<minor>.0-bosun.<bosun's version>`, as a gitVersion.
pub fn git_version() -> String {
    format!(
        "v1.{KUBERNETES_MINOR}.0-bosun.{}",
        env!("CARGO_PKG_VERSION")
    )
}
