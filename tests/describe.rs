//! End-to-end: `bosun describe` of persistent volumes and claims prints what
//! `kubectl describe` prints for the same objects, against a real `bosun-control`.

mod common;

use common::{example, wait_for, Cluster};
use std::time::Duration;

const CLAIM_AND_POD: &str = "\
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, labels: {app: db}}
spec:
  storageClassName: \"\"
  volumeName: pv1
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 500Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: db-0}
spec:
  nodeName: nowhere
  containers: [{name: db, image: bosun.local/busybox}]
  volumes: [{name: d, persistentVolumeClaim: {claimName: data}}]
";

#[test]
fn describe_pv_and_pvc_print_what_kubectl_prints() {
    let c = Cluster::start();
    c.bosun(&["apply", "-f", &example("pv.yaml")]).ok();
    let file = c.write("claim.yaml", CLAIM_AND_POD);
    c.bosun(&["apply", "-f", &file]).ok();
    wait_for("the claim to bind", Duration::from_secs(20), || {
        c.kubectl(&["get", "pvc", "data", "-o", "jsonpath={.status.phase}"])
            .stdout
            == "Bound"
    });
    wait_for("the volume to bind", Duration::from_secs(20), || {
        c.kubectl(&["get", "pv", "pv1", "-o", "jsonpath={.status.phase}"])
            .stdout
            == "Bound"
    });

    for (kind, name, want) in [
        (
            "pv",
            "pv1",
            &[
                "Claim:           default/data\n",
                "Status:          Bound\n",
            ][..],
        ),
        (
            "pv",
            "pv2",
            &["Claim:           \n", "    Path:          /tmp/pv2\n"][..],
        ),
        (
            "pvc",
            "data",
            &["Volume:        pv1\n", "Used By:       db-0\n"][..],
        ),
    ] {
        let ours = c.bosun(&["describe", kind, name]).ok().to_string();
        let theirs = c.kubectl(&["describe", kind, name]).ok().to_string();
        assert_eq!(ours, theirs, "bosun describe {kind} {name}");
        for w in want {
            assert!(ours.contains(w), "no {w:?} in:\n{ours}");
        }
    }
}
