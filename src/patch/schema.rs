//! What the built-in types' schema says about patching a field: the strategy and merge key of
//! each list (strategic merge patch's `patchStrategy`/`patchMergeKey`), the list type
//! server-side apply uses (`x-kubernetes-list-type`), and the maps owned as a whole.

/// How a list field is patched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ListKind {
    /// The patch's list replaces the original (the default, as for `args`, `tolerations`).
    Replace,
    /// A set of primitives: the patch's values are added (`metadata.finalizers`).
    MergePrimitive,
    /// A list of objects merged element by element on this key.
    MergeKey(&'static str),
}

const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

/// The patch strategy of list `field` found under `path` (field names and `[i]` indices).
pub(super) fn list_kind(path: &[String], field: &str) -> ListKind {
    let fields: Vec<&str> = path
        .iter()
        .filter(|s| !s.starts_with('['))
        .map(String::as_str)
        .collect();
    let parent = fields.last().copied();
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets" => ListKind::MergeKey("name"),
        "hostAliases" | "podIPs" | "hostIPs" => ListKind::MergeKey("ip"),
        "volumeMounts" => ListKind::MergeKey("mountPath"),
        "volumeDevices" => ListKind::MergeKey("devicePath"),
        "conditions" => ListKind::MergeKey("type"),
        "topologySpreadConstraints" => ListKind::MergeKey("topologyKey"),
        "addresses" if parent == Some("status") => ListKind::MergeKey("type"),
        "ownerReferences" if parent == Some("metadata") => ListKind::MergeKey("uid"),
        "finalizers" if parent == Some("metadata") => ListKind::MergePrimitive,
        // A webhook configuration's webhooks (the only top-level list so named).
        "webhooks" if parent.is_none() => ListKind::MergeKey("name"),
        "ports" => match parent {
            Some(p) if CONTAINER_LISTS.contains(&p) => ListKind::MergeKey("containerPort"),
            // A Service's spec.ports.
            Some("spec") if fields.len() == 1 => ListKind::MergeKey("port"),
            _ => ListKind::Replace,
        },
        _ => ListKind::Replace,
    }
}

/// How server-side apply treats a list (Kubernetes' `x-kubernetes-list-type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListType {
    /// Owned and replaced as a whole (`args`, `tolerations`, unknown lists).
    Atomic,
    /// A set of primitives, each value owned on its own (`metadata.finalizers`).
    Set,
    /// Objects owned element by element, identified by these key fields
    /// (`x-kubernetes-list-map-keys`).
    Map(&'static [&'static str]),
}

/// The list type server-side apply uses for list `field` under the field
/// names `fields`. It follows the strategic merge table above, with the
/// places where the OpenAPI list-map keys differ from the patch merge key:
/// ports are keyed by port and protocol, spread constraints by topology key
/// and `whenUnsatisfiable`, and a node's addresses are atomic.
pub fn apply_list_type(fields: &[String], field: &str) -> ListType {
    let parent = fields.last().map(String::as_str);
    match field {
        "ports" => match parent {
            Some(p) if CONTAINER_LISTS.contains(&p) => {
                return ListType::Map(&["containerPort", "protocol"])
            }
            Some("spec") if fields.len() == 1 => return ListType::Map(&["port", "protocol"]),
            _ => {}
        },
        "topologySpreadConstraints" => return ListType::Map(&["topologyKey", "whenUnsatisfiable"]),
        "addresses" => return ListType::Atomic,
        _ => {}
    }
    match list_kind(fields, field) {
        ListKind::Replace => ListType::Atomic,
        ListKind::MergePrimitive => ListType::Set,
        ListKind::MergeKey(key) => ListType::Map(single_key(key)),
    }
}

fn single_key(key: &'static str) -> &'static [&'static str] {
    match key {
        "name" => &["name"],
        "ip" => &["ip"],
        "mountPath" => &["mountPath"],
        "devicePath" => &["devicePath"],
        "type" => &["type"],
        "uid" => &["uid"],
        "topologyKey" => &["topologyKey"],
        "containerPort" => &["containerPort"],
        "port" => &["port"],
        _ => &[],
    }
}

/// The value a list-map key field takes when an element leaves it out
/// (its OpenAPI default), so `{containerPort: 80}` and `{containerPort: 80,
/// protocol: TCP}` are the same element.
pub fn list_key_default(key: &str) -> Option<&'static str> {
    (key == "protocol").then_some("TCP")
}

/// Whether a map is owned as a whole (`x-kubernetes-map-type: atomic`):
/// label selectors and node selectors.
pub fn is_atomic_map(field: &str) -> bool {
    matches!(
        field,
        "selector" | "labelSelector" | "namespaceSelector" | "nodeSelector"
    )
}
