//! What of a pod the Node authorizer reads ([`PodRefs`]): its namespace,
//! its node and the fields that name other objects, decoded from a stored
//! pod's bytes with nothing else of it.

use serde::Deserialize;
use serde_json::Value;

/// Calls `visit` with (resource, name) for every object `pod` names, as
/// [`super::decide`] reads them (the same name may come more than once): see
/// [`PodRefs::visit`].
pub fn referenced(pod: &Value, visit: impl FnMut(&'static str, &str)) {
    if let Ok(refs) = PodRefs::deserialize(pod) {
        refs.visit(visit);
    }
}

/// What of a pod the Node authorizer reads: its namespace, its node and
/// the fields that name other objects. Read from a stored pod's bytes
/// with nothing else of it decoded (the node graph reads one per pod
/// write, most of them status writes).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct PodRefs {
    metadata: RefsMeta,
    spec: RefsSpec,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RefsMeta {
    namespace: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct RefsSpec {
    node_name: Option<String>,
    service_account_name: Option<String>,
    volumes: Option<Vec<RefsVolume>>,
    init_containers: Option<Vec<RefsContainer>>,
    containers: Option<Vec<RefsContainer>>,
    ephemeral_containers: Option<Vec<RefsContainer>>,
    image_pull_secrets: Option<Vec<Named>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct RefsVolume {
    persistent_volume_claim: Option<ClaimRef>,
    secret: Option<SecretVolume>,
    config_map: Option<Named>,
    projected: Option<Projected>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct ClaimRef {
    claim_name: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct SecretVolume {
    secret_name: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Projected {
    sources: Option<Vec<ProjectedSource>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct ProjectedSource {
    secret: Option<Named>,
    config_map: Option<Named>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct RefsContainer {
    env: Option<Vec<RefsEnv>>,
    env_from: Option<Vec<RefsEnvFrom>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct RefsEnv {
    value_from: Option<RefsEnvSource>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct RefsEnvSource {
    secret_key_ref: Option<Named>,
    config_map_key_ref: Option<Named>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct RefsEnvFrom {
    secret_ref: Option<Named>,
    config_map_ref: Option<Named>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Named {
    name: Option<String>,
}

fn each<T>(list: &Option<Vec<T>>) -> std::slice::Iter<'_, T> {
    list.as_deref().unwrap_or_default().iter()
}

fn name(n: &Option<Named>) -> Option<&String> {
    n.as_ref().and_then(|n| n.name.as_ref())
}

impl PodRefs {
    /// Reads a stored pod's bytes; None if they are not a pod.
    pub fn from_slice(bytes: &[u8]) -> Option<PodRefs> {
        serde_json::from_slice(bytes).ok()
    }

    /// The pod's namespace (`default` when it names none).
    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or("default")
    }

    /// The node the pod is bound to, if any.
    pub fn node(&self) -> Option<&str> {
        self.spec.node_name.as_deref().filter(|n| !n.is_empty())
    }

    /// Calls `visit` with (resource, name) for every object the pod
    /// names (the same name may come more than once): its service account
    /// (`default` when it names none), the claims of its volumes, the
    /// Secrets and ConfigMaps of its volumes (projected sources too), its
    /// containers' env and envFrom, and its image pull secrets.
    pub fn visit(&self, mut visit: impl FnMut(&'static str, &str)) {
        let spec = &self.spec;
        let sa = spec
            .service_account_name
            .as_deref()
            .filter(|s| !s.is_empty())
            .unwrap_or("default");
        visit("serviceaccounts", sa);
        let mut named = |resource: &'static str, name: Option<&String>| {
            if let Some(n) = name {
                visit(resource, n);
            }
        };
        for v in each(&spec.volumes) {
            let claim = v.persistent_volume_claim.as_ref();
            named(
                "persistentvolumeclaims",
                claim.and_then(|c| c.claim_name.as_ref()),
            );
            let secret = v.secret.as_ref();
            named("secrets", secret.and_then(|s| s.secret_name.as_ref()));
            named("configmaps", name(&v.config_map));
            for s in v.projected.iter().flat_map(|p| each(&p.sources)) {
                named("secrets", name(&s.secret));
                named("configmaps", name(&s.config_map));
            }
        }
        let containers = each(&spec.init_containers)
            .chain(each(&spec.containers))
            .chain(each(&spec.ephemeral_containers));
        for c in containers {
            for e in each(&c.env).filter_map(|e| e.value_from.as_ref()) {
                named("secrets", name(&e.secret_key_ref));
                named("configmaps", name(&e.config_map_key_ref));
            }
            for e in each(&c.env_from) {
                named("secrets", name(&e.secret_ref));
                named("configmaps", name(&e.config_map_ref));
            }
        }
        for s in each(&spec.image_pull_secrets) {
            named("secrets", s.name.as_ref());
        }
    }
}
