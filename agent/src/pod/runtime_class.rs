//! The pod's runtime handler, as the kubelet's RuntimeClass manager's
//! `LookupRuntimeHandler`: no `runtimeClassName`, the engine's default;
//! else the named RuntimeClass's `handler`, which the Docker runtime
//! passes as the containers' runtime (`runc` is Docker's default). A
//! class that cannot be read fails the pod's sandbox
//! (`FailedCreatePodSandBox`), as the kubelet's does.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::node::v1::RuntimeClass;
use kube::{Api, Client};

/// Reads RuntimeClasses through the API (a node may read them all).
#[derive(Clone)]
pub struct RuntimeClasses {
    client: Client,
}

impl RuntimeClasses {
    pub fn new(client: Client) -> Self {
        RuntimeClasses { client }
    }

    /// The handler of the pod's RuntimeClass; None when it names none.
    pub async fn handler_for(&self, pod: &Pod) -> Result<Option<String>, String> {
        let Some(name) = pod
            .spec
            .as_ref()
            .and_then(|s| s.runtime_class_name.as_deref())
            .filter(|n| !n.is_empty())
        else {
            return Ok(None);
        };
        let api: Api<RuntimeClass> = Api::all(self.client.clone());
        match api.get_opt(name).await {
            Ok(Some(class)) => Ok(Some(class.handler)),
            // The lister's NotFound, in its words.
            Ok(None) => Err(format!("runtimeclass.node.k8s.io \"{name}\" not found")),
            Err(e) => Err(format!("failed to lookup RuntimeClass {name}: {e}")),
        }
    }
}
