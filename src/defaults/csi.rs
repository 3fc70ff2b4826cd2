//! `SetDefaults_CSIDriver`: attach required, no pod info on mount, no
//! storage capacity tracking, fsGroup applied for ReadWriteOnce volumes
//! with a filesystem type, no republish, persistent volumes only, no
//! SELinux mount option.

use serde_json::{json, Map, Value};

use super::{object_at, set};

pub(super) fn default_csi_driver(root: &mut Map<String, Value>) {
    let spec = object_at(root, "spec");
    set(spec, "attachRequired", json!(true));
    set(spec, "podInfoOnMount", json!(false));
    set(spec, "storageCapacity", json!(false));
    set(spec, "fsGroupPolicy", json!("ReadWriteOnceWithFSType"));
    set(spec, "requiresRepublish", json!(false));
    set(spec, "volumeLifecycleModes", json!(["Persistent"]));
    set(spec, "seLinuxMount", json!(false));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_defaults_leave_what_is_set() {
        let mut root = json!({"spec": {"attachRequired": false}});
        default_csi_driver(root.as_object_mut().unwrap());
        assert_eq!(root["spec"]["attachRequired"], false);
        assert_eq!(root["spec"]["volumeLifecycleModes"], json!(["Persistent"]));
        assert_eq!(root["spec"]["fsGroupPolicy"], "ReadWriteOnceWithFSType");
    }
}
