//! `bosun scale`, `set image`, `rollout ...`, `describe deployment|rs` and
//! `get deploy,rs` against a real `bosun-control`, and kubectl's own verbs
//! against the same objects. No deployment or replicaset controller runs
//! here: each test stages what those controllers would write (ReplicaSets
//! with revisions and ownerReferences, deployment status and conditions)
//! through the API, then checks what the CLI prints and writes.

mod common;

use std::sync::mpsc::Receiver;
use std::time::Duration;

use common::{spawn_lines, Cluster};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{json, Value};

const CONTROLLERS: &str = "--controllers=garbagecollector,eventttl";
const REVISION: &str = "deployment.kubernetes.io/revision";
const CAUSE: &str = "kubernetes.io/change-cause";

/// A cluster plus a client to stage the controllers' writes.
struct Staged {
    c: Cluster,
    rt: tokio::runtime::Runtime,
    client: kube::Client,
}

fn template(app: &str, image: &str, hash: Option<&str>) -> Value {
    let mut labels = json!({"app": app});
    if let Some(h) = hash {
        labels["pod-template-hash"] = json!(h);
    }
    json!({"metadata": {"labels": labels},
           "spec": {"containers": [{"name": "web", "image": image,
                                    "ports": [{"containerPort": 80}]}]}})
}

impl Staged {
    fn start() -> Staged {
        let c = Cluster::start_with(&[CONTROLLERS]);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let kc = Kubeconfig::read_from(c.kubeconfig()).unwrap();
        let client = rt.block_on(async {
            let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .unwrap();
            kube::Client::try_from(config).unwrap()
        });
        Staged { c, rt, client }
    }

    fn api(&self, kind: &str) -> Api<DynamicObject> {
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("apps", "v1", kind));
        Api::namespaced_with(self.client.clone(), "default", &ar)
    }

    fn get(&self, kind: &str, name: &str) -> Value {
        let api = self.api(kind);
        let obj = self.rt.block_on(api.get(name)).unwrap();
        serde_json::to_value(obj).unwrap()
    }

    fn create(&self, kind: &str, obj: Value) -> Value {
        let api = self.api(kind);
        let obj: DynamicObject = serde_json::from_value(obj).unwrap();
        let out = self
            .rt
            .block_on(api.create(&PostParams::default(), &obj))
            .unwrap();
        serde_json::to_value(out).unwrap()
    }

    fn patch_status(&self, kind: &str, name: &str, status: Value) {
        let api = self.api(kind);
        self.rt
            .block_on(api.patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            ))
            .unwrap();
    }

    /// A deployment at `revision` with `image`, as the controller leaves it.
    fn deployment(&self, name: &str, image: &str, revision: i64) -> Value {
        self.create(
            "Deployment",
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "labels": {"app": name},
                    "annotations": {REVISION: revision.to_string()}},
                "spec": {"replicas": 3, "selector": {"matchLabels": {"app": name}},
                    "template": template(name, image, None)}}),
        )
    }

    /// A ReplicaSet of `owner` at `revision`, named `<deployment>-<hash>`.
    fn replicaset(
        &self,
        owner: &Value,
        hash: &str,
        image: &str,
        revision: i64,
        cause: Option<&str>,
        replicas: i64,
    ) -> Value {
        let app = owner["metadata"]["name"].as_str().unwrap();
        let mut annotations = json!({REVISION: revision.to_string()});
        if let Some(c) = cause {
            annotations[CAUSE] = json!(c);
        }
        let rs = self.create(
            "ReplicaSet",
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": format!("{app}-{hash}"),
                    "labels": {"app": app, "pod-template-hash": hash},
                    "annotations": annotations,
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                        "name": app, "uid": owner["metadata"]["uid"],
                        "controller": true, "blockOwnerDeletion": true}]},
                "spec": {"replicas": replicas,
                    "selector": {"matchLabels": {"app": app, "pod-template-hash": hash}},
                    "template": template(app, image, Some(hash))}}),
        );
        let name = rs["metadata"]["name"].as_str().unwrap().to_string();
        self.patch_status(
            "ReplicaSet",
            &name,
            json!({"replicas": replicas, "readyReplicas": replicas,
                   "availableReplicas": replicas, "fullyLabeledReplicas": replicas}),
        );
        rs
    }

    /// Deployment status with observedGeneration caught up.
    fn deployment_status(&self, name: &str, mut status: Value) {
        let generation = self.get("Deployment", name)["metadata"]["generation"].clone();
        status["observedGeneration"] = generation;
        self.patch_status("Deployment", name, status);
    }
}

/// Three revisions of `web` (1: web:1 no cause, 2: web:2, 3: web:3 current).
fn three_revisions(s: &Staged) -> Value {
    let d = s.deployment("web", "bosun.local/web:3", 3);
    s.replicaset(&d, "aaa111", "bosun.local/web:1", 1, None, 0);
    s.replicaset(
        &d,
        "bbb222",
        "bosun.local/web:2",
        2,
        Some("bosun set image deployment/web web=bosun.local/web:2 --record=true"),
        0,
    );
    s.replicaset(
        &d,
        "ccc333",
        "bosun.local/web:3",
        3,
        Some("bosun set image deployment/web web=bosun.local/web:3 --record=true"),
        3,
    );
    s.deployment_status(
        "web",
        json!({"replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                 "message": "Deployment has minimum availability."},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                 "message": "ReplicaSet \"web-ccc333\" has successfully progressed."}]}),
    );
    d
}

fn image_of(d: &Value) -> &str {
    d["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap()
}

#[test]
fn history_undo_pause_resume_restart() {
    let s = Staged::start();
    three_revisions(&s);
    let c = &s.c;

    assert_eq!(
        c.bosun(&["rollout", "history", "deployment/web"]).ok(),
        "deployment.apps/web \n\
         REVISION  CHANGE-CAUSE\n\
         1         <none>\n\
         2         bosun set image deployment/web web=bosun.local/web:2 --record=true\n\
         3         bosun set image deployment/web web=bosun.local/web:3 --record=true\n\n"
    );
    let rev2 = c
        .bosun(&["rollout", "history", "deploy", "web", "--revision=2"])
        .ok()
        .to_string();
    let lines: Vec<&str> = rev2.lines().collect();
    assert_eq!(lines[0], "deployment.apps/web with revision #2", "{rev2}");
    assert_eq!(lines[1], "Pod Template:", "{rev2}");
    assert!(
        rev2.contains("  Labels:\tapp=web\n\tpod-template-hash=bbb222\n"),
        "{rev2}"
    );
    assert!(
        rev2.contains("  Annotations:\tkubernetes.io/change-cause: bosun set image deployment/web web=bosun.local/web:2 --record=true\n"),
        "{rev2}"
    );
    assert!(rev2.contains("    Image:\tbosun.local/web:2\n"), "{rev2}");
    assert!(rev2.contains("    Port:\t80/TCP\n"), "{rev2}");
    assert_eq!(
        c.bosun(&["rollout", "history", "deployment/web", "--revision=9"])
            .fails(),
        "error: unable to find the specified revision\n"
    );

    // Undo with no revision goes to the previous one (2), through the
    // template and the change-cause; the revision annotation stays for the controller.
    assert_eq!(
        c.bosun(&["rollout", "undo", "deployment/web"]).ok(),
        "deployment.apps/web rolled back\n"
    );
    let d = s.get("Deployment", "web");
    assert_eq!(image_of(&d), "bosun.local/web:2");
    assert_eq!(
        d["spec"]["template"]["metadata"]["labels"],
        json!({"app": "web"}),
        "the pod-template-hash label is not copied back"
    );
    assert_eq!(
        d["metadata"]["annotations"][CAUSE],
        "bosun set image deployment/web web=bosun.local/web:2 --record=true"
    );
    assert_eq!(d["metadata"]["annotations"][REVISION], "3");
    assert_eq!(
        c.bosun(&["rollout", "undo", "deployment/web", "--to-revision=2"])
            .ok(),
        "deployment.apps/web skipped rollback (current template already matches revision 2)\n"
    );
    assert_eq!(
        c.bosun(&["rollout", "undo", "deployment/web", "--to-revision=7"])
            .fails(),
        "error: unable to find specified revision 7 in history\n"
    );
    // Back to 1, which has no change-cause: the annotation goes.
    assert_eq!(
        c.bosun(&["rollout", "undo", "deployment/web", "--to-revision=1"])
            .ok(),
        "deployment.apps/web rolled back\n"
    );
    let d = s.get("Deployment", "web");
    assert_eq!(image_of(&d), "bosun.local/web:1");
    assert!(d["metadata"]["annotations"].get(CAUSE).is_none(), "{d}");

    // Pause and resume flip spec.paused, with kubectl's errors when there is nothing to do.
    assert_eq!(
        c.bosun(&["rollout", "pause", "deployment/web"]).ok(),
        "deployment.apps/web paused\n"
    );
    assert_eq!(s.get("Deployment", "web")["spec"]["paused"], true);
    assert_eq!(
        c.bosun(&["rollout", "pause", "deployment/web"]).fails(),
        "error: deployments.apps \"web\" is already paused\n"
    );
    assert_eq!(
        c.bosun(&["rollout", "undo", "deployment/web"]).fails(),
        "error: you cannot rollback a paused deployment; resume it first with 'bosun rollout resume deployment/web' and try again\n"
    );
    assert!(c
        .bosun(&["rollout", "restart", "deployment/web"])
        .fails()
        .contains("can't restart paused deployment (run rollout resume first)"));
    assert_eq!(
        c.bosun(&["rollout", "resume", "deploy/web"]).ok(),
        "deployment.apps/web resumed\n"
    );
    assert_ne!(s.get("Deployment", "web")["spec"]["paused"], true);
    assert_eq!(
        c.bosun(&["rollout", "resume", "deployment/web"]).fails(),
        "error: deployments.apps \"web\" is not paused\n"
    );

    // Restart stamps the template, which is what starts a rollout.
    assert_eq!(
        c.bosun(&["rollout", "restart", "deployment/web"]).ok(),
        "deployment.apps/web restarted\n"
    );
    let d = s.get("Deployment", "web");
    let stamp = d["spec"]["template"]["metadata"]["annotations"]
        ["kubectl.kubernetes.io/restartedAt"]
        .as_str()
        .expect("restartedAt annotation");
    let at = chrono::DateTime::parse_from_rfc3339(stamp).unwrap();
    assert!((chrono::Utc::now() - at.to_utc()).num_seconds().abs() < 60);
    assert_eq!(
        image_of(&d),
        "bosun.local/web:1",
        "restart keeps the template"
    );

    assert!(c
        .bosun(&["rollout", "undo", "pod/web"])
        .fails()
        .contains("no rollbacker has been implemented for \"Pod\""));
}

#[test]
fn describe_and_get_deployments_and_replicasets() {
    let s = Staged::start();
    let d = three_revisions(&s);
    let c = &s.c;
    // One old set still has a pod.
    let rs2 = s.get("ReplicaSet", "web-bbb222");
    s.rt.block_on(s.api("ReplicaSet").patch(
        "web-bbb222",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    ))
    .unwrap();
    s.patch_status("ReplicaSet", "web-bbb222", json!({"replicas": 1}));
    assert!(rs2["metadata"]["uid"].is_string());

    let text = c.bosun(&["describe", "deployment", "web"]).ok().to_string();
    let lines: Vec<&str> = text.lines().collect();
    for want in [
        "Name:                   web",
        "Namespace:              default",
        "Labels:                 app=web",
        "Annotations:            deployment.kubernetes.io/revision: 3",
        "Selector:               app=web",
        "Replicas:               3 desired | 3 updated | 3 total | 3 available | 0 unavailable",
        "StrategyType:           RollingUpdate",
        "MinReadySeconds:        0",
        "RollingUpdateStrategy:  25% max unavailable, 25% max surge",
        "Pod Template:",
        "  Labels:  app=web",
        "    Image:         bosun.local/web:3",
        "Conditions:",
        "  Type           Status  Reason",
        "  ----           ------  ------",
        "  Available      True    MinimumReplicasAvailable",
        "  Progressing    True    NewReplicaSetAvailable",
        "OldReplicaSets:  web-aaa111 (0/0 replicas created), web-bbb222 (1/1 replicas created)",
        "NewReplicaSet:   web-ccc333 (3/3 replicas created)",
        "Events:          <none>",
    ] {
        assert!(lines.contains(&want), "missing {want:?} in:\n{text}");
    }
    assert!(lines[2].starts_with("CreationTimestamp:      "), "{text}");

    let text = c.bosun(&["describe", "rs", "web-ccc333"]).ok().to_string();
    let lines: Vec<&str> = text.lines().collect();
    for want in [
        "Name:           web-ccc333",
        "Selector:       app=web,pod-template-hash=ccc333",
        "Controlled By:  Deployment/web",
        "Replicas:       3 current / 3 desired",
        "Pods Status:    0 Running / 0 Waiting / 0 Succeeded / 0 Failed",
        "    Image:         bosun.local/web:3",
    ] {
        assert!(lines.contains(&want), "missing {want:?} in:\n{text}");
    }

    // Several types in one get: one table each, names prefixed with the type.
    let out = c.bosun(&["get", "deploy,rs"]).ok().to_string();
    let blocks: Vec<&str> = out.split("\n\n").collect();
    assert_eq!(blocks.len(), 2, "{out}");
    let (h, rows) = common::parse_table(blocks[0]);
    assert_eq!(h, ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]);
    assert_eq!(rows[0][..4], ["deployment.apps/web", "3/3", "3", "3"]);
    let (h, rows) = common::parse_table(blocks[1]);
    assert_eq!(h, ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]);
    let names: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(
        names,
        [
            "replicaset.apps/web-aaa111",
            "replicaset.apps/web-bbb222",
            "replicaset.apps/web-ccc333"
        ]
    );
    assert_eq!(rows[2][1..4], ["3", "3", "3"]);
    let wide = c.bosun(&["get", "rs", "-o", "wide"]).ok().to_string();
    let (h, rows) = common::parse_table(&wide);
    assert_eq!(
        h,
        [
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
    assert_eq!(
        rows[2][5..],
        [
            "web",
            "bosun.local/web:3",
            "app=web,pod-template-hash=ccc333"
        ]
    );
    assert_eq!(d["kind"], "Deployment");
}

/// The next line from a running command, within a deadline.
fn next_line(rx: &Receiver<String>, what: &str) -> String {
    rx.recv_timeout(Duration::from_secs(15))
        .unwrap_or_else(|_| panic!("no line from rollout status while waiting for {what}"))
}

#[test]
fn status_follows_the_rollout_and_fails_at_the_deadline() {
    let s = Staged::start();
    let c = &s.c;
    s.deployment("web", "bosun.local/web:2", 2);

    // Nothing observed yet.
    assert_eq!(
        c.bosun(&["rollout", "status", "deployment/web", "--watch=false"])
            .ok(),
        "Waiting for deployment spec update to be observed...\n"
    );
    s.deployment_status(
        "web",
        json!({"replicas": 4, "updatedReplicas": 1, "availableReplicas": 3}),
    );
    assert_eq!(
        c.bosun(&["rollout", "status", "deployment/web", "--timeout=1s"])
            .fails(),
        "error: timed out waiting for the condition\n"
    );
    assert!(c
        .bosun(&["rollout", "status", "deployment/web", "--revision=1"])
        .fails()
        .contains("desired revision (1) is different from the running revision (2)"));

    let (mut child, rx) = spawn_lines(c.command(
        env!("CARGO_BIN_EXE_bosun"),
        &["rollout", "status", "deployment/web"],
    ));
    assert_eq!(
        next_line(&rx, "the first status"),
        "Waiting for deployment \"web\" rollout to finish: 1 out of 3 new replicas have been updated..."
    );
    // A change that leaves the message as it is prints nothing.
    s.deployment_status(
        "web",
        json!({"replicas": 4, "updatedReplicas": 1, "availableReplicas": 3, "readyReplicas": 4}),
    );
    s.deployment_status(
        "web",
        json!({"replicas": 4, "updatedReplicas": 3, "availableReplicas": 3}),
    );
    assert_eq!(
        next_line(&rx, "old replicas"),
        "Waiting for deployment \"web\" rollout to finish: 1 old replicas are pending termination..."
    );
    s.deployment_status(
        "web",
        json!({"replicas": 3, "updatedReplicas": 3, "availableReplicas": 2}),
    );
    assert_eq!(
        next_line(&rx, "availability"),
        "Waiting for deployment \"web\" rollout to finish: 2 of 3 updated replicas are available..."
    );
    s.deployment_status(
        "web",
        json!({"replicas": 3, "updatedReplicas": 3, "availableReplicas": 3}),
    );
    assert_eq!(
        next_line(&rx, "success"),
        "deployment \"web\" successfully rolled out"
    );
    let status = child.0.wait().unwrap();
    assert!(status.success());
    assert!(
        rx.recv_timeout(Duration::from_secs(5)).is_err(),
        "no more lines"
    );

    // A stalled rollout: the command waits, then fails when the deadline condition appears.
    s.deployment("stuck", "bosun.local/web:2", 2);
    s.deployment_status(
        "stuck",
        json!({"replicas": 4, "updatedReplicas": 1, "availableReplicas": 3,
            "conditions": [{"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated"}]}),
    );
    let (mut child, rx) = spawn_lines(c.command(
        env!("CARGO_BIN_EXE_bosun"),
        &["rollout", "status", "deploy/stuck", "--timeout=60s"],
    ));
    assert_eq!(
        next_line(&rx, "the first status"),
        "Waiting for deployment \"stuck\" rollout to finish: 1 out of 3 new replicas have been updated..."
    );
    s.deployment_status(
        "stuck",
        json!({"replicas": 4, "updatedReplicas": 1, "availableReplicas": 3,
            "conditions": [{"type": "Progressing", "status": "False",
                "reason": "ProgressDeadlineExceeded",
                "message": "ReplicaSet \"stuck-x\" has timed out progressing."}]}),
    );
    assert_eq!(child.0.wait().unwrap().code(), Some(1));
    // The same state, read once more, gives the message kubectl prints.
    assert_eq!(
        c.bosun(&["rollout", "status", "deploy/stuck"]).fails(),
        "error: deployment \"stuck\" exceeded its progress deadline\n"
    );
    assert_eq!(
        c.bosun(&["rollout", "status", "deployment/nope"]).fails(),
        "Error from server (NotFound): deployments.apps \"nope\" not found\n"
    );
}

#[test]
fn scale_and_set_image() {
    let s = Staged::start();
    let c = &s.c;
    let d = s.deployment("web", "bosun.local/web:1", 1);
    s.replicaset(&d, "aaa111", "bosun.local/web:1", 1, None, 3);

    assert_eq!(
        c.bosun(&["scale", "deployment/web", "--replicas=4"]).ok(),
        "deployment.apps/web scaled\n"
    );
    assert_eq!(s.get("Deployment", "web")["spec"]["replicas"], 4);
    assert_eq!(
        c.bosun(&[
            "scale",
            "deploy",
            "web",
            "--replicas=2",
            "--current-replicas=3"
        ])
        .fails(),
        "error: Expected replicas to be 3, was 4\n"
    );
    assert_eq!(s.get("Deployment", "web")["spec"]["replicas"], 4);
    assert_eq!(
        c.bosun(&[
            "scale",
            "deploy",
            "web",
            "--replicas=2",
            "--current-replicas=4",
            "--record"
        ])
        .ok(),
        "deployment.apps/web scaled\n"
    );
    let d = s.get("Deployment", "web");
    assert_eq!(d["spec"]["replicas"], 2);
    assert_eq!(
        d["metadata"]["annotations"][CAUSE],
        "bosun scale deploy web --current-replicas=4 --record=true --replicas=2"
    );
    assert_eq!(
        c.bosun(&["scale", "rs/web-aaa111", "--replicas=0"]).ok(),
        "replicaset.apps/web-aaa111 scaled\n"
    );
    assert_eq!(s.get("ReplicaSet", "web-aaa111")["spec"]["replicas"], 0);
    assert!(c
        .bosun(&["scale", "deployment/web"])
        .fails()
        .contains("--replicas=COUNT is required"));

    assert_eq!(
        c.bosun(&[
            "set",
            "image",
            "deployment/web",
            "web=bosun.local/web:2",
            "--record"
        ])
        .ok(),
        "deployment.apps/web image updated\n"
    );
    let d = s.get("Deployment", "web");
    assert_eq!(image_of(&d), "bosun.local/web:2");
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"], 80,
        "the rest of the container stays"
    );
    assert_eq!(
        d["metadata"]["annotations"][CAUSE],
        "bosun set image deployment/web web=bosun.local/web:2 --record=true"
    );
    assert_eq!(
        c.bosun(&["set", "image", "deployment/web", "nope=bosun.local/web:3"])
            .fails(),
        "error: unable to find container named \"nope\"\n"
    );
    assert_eq!(
        c.bosun(&["set", "image", "deploy", "web", "*=bosun.local/web:3"])
            .ok(),
        "deployment.apps/web image updated\n"
    );
    assert_eq!(image_of(&s.get("Deployment", "web")), "bosun.local/web:3");

    // create and apply record too, with -f as kubectl spells it.
    let file = c.write(
        "api.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api}\nspec:\n  selector: {matchLabels: {app: api}}\n  template:\n    metadata: {labels: {app: api}}\n    spec: {containers: [{name: api, image: \"bosun.local/web:1\"}]}\n",
    );
    assert_eq!(
        c.bosun(&["create", "-f", &file, "--record"]).ok(),
        "deployment.apps/api created\n"
    );
    assert_eq!(
        s.get("Deployment", "api")["metadata"]["annotations"][CAUSE],
        format!("bosun create --filename={file} --record=true").as_str()
    );
    let edited = c.write(
        "api2.yaml",
        &std::fs::read_to_string(&file)
            .unwrap()
            .replace("web:1", "web:2"),
    );
    assert_eq!(
        c.bosun(&["apply", "-f", &edited, "--record=true"]).ok(),
        "deployment.apps/api configured\n"
    );
    assert_eq!(
        s.get("Deployment", "api")["metadata"]["annotations"][CAUSE],
        format!("bosun apply --filename={edited} --record=true").as_str()
    );

    // A change-cause written by hand is what history shows too.
    assert_eq!(
        c.bosun(&[
            "annotate",
            "rs",
            "web-aaa111",
            "kubernetes.io/change-cause=first release"
        ])
        .ok(),
        "replicaset.apps/web-aaa111 annotated\n"
    );
    assert!(c
        .bosun(&["rollout", "history", "deployment/web"])
        .ok()
        .contains("\n1         first release\n"));
}

/// kubectl's own verbs against the same staged objects.
#[test]
fn kubectl_scale_set_image_and_rollout_work_against_bosun() {
    // kubectl is required: scripts/test.sh installs it.
    let version = std::process::Command::new(common::kubectl_binary())
        .args(["version", "--client"])
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "kubectl ({}) does not run: {e}; this test needs it",
                common::kubectl_binary()
            )
        });
    assert!(version.status.success(), "kubectl version --client failed");
    let s = Staged::start();
    three_revisions(&s);
    let c = &s.c;

    assert_eq!(
        c.kubectl(&["scale", "deployment/web", "--replicas=4"]).ok(),
        "deployment.apps/web scaled\n"
    );
    assert_eq!(s.get("Deployment", "web")["spec"]["replicas"], 4);
    assert_eq!(
        c.kubectl(&[
            "scale",
            "deployment/web",
            "--replicas=3",
            "--current-replicas=4"
        ])
        .ok(),
        "deployment.apps/web scaled\n"
    );
    // Scaling bumped the generation; the controller would observe it.
    s.deployment_status(
        "web",
        json!({"replicas": 3, "updatedReplicas": 3, "availableReplicas": 3}),
    );
    assert_eq!(
        c.kubectl(&["rollout", "status", "deployment/web", "--timeout=20s"])
            .ok(),
        "deployment \"web\" successfully rolled out\n"
    );
    // History and a revision's template read the same as bosun's.
    let history = c.kubectl(&["rollout", "history", "deployment/web"]);
    assert_eq!(
        history.ok(),
        c.bosun(&["rollout", "history", "deployment/web"]).ok()
    );
    let rev = c.kubectl(&["rollout", "history", "deployment/web", "--revision=2"]);
    assert_eq!(
        rev.ok(),
        c.bosun(&["rollout", "history", "deployment/web", "--revision=2"])
            .ok()
    );
    let described = c
        .kubectl(&["describe", "deployment", "web"])
        .ok()
        .to_string();
    assert_eq!(
        described,
        c.bosun(&["describe", "deployment", "web"]).ok(),
        "kubectl's describe and bosun's agree"
    );

    assert_eq!(
        c.kubectl(&["rollout", "undo", "deployment/web"]).ok(),
        "deployment.apps/web rolled back\n"
    );
    assert_eq!(image_of(&s.get("Deployment", "web")), "bosun.local/web:2");
    assert_eq!(
        c.kubectl(&["rollout", "undo", "deployment/web", "--to-revision=1"])
            .ok(),
        "deployment.apps/web rolled back\n"
    );
    assert_eq!(image_of(&s.get("Deployment", "web")), "bosun.local/web:1");

    assert_eq!(
        c.kubectl(&["rollout", "pause", "deployment/web"]).ok(),
        "deployment.apps/web paused\n"
    );
    assert_eq!(s.get("Deployment", "web")["spec"]["paused"], true);
    assert_eq!(
        c.kubectl(&["rollout", "resume", "deployment/web"]).ok(),
        "deployment.apps/web resumed\n"
    );
    assert_ne!(s.get("Deployment", "web")["spec"]["paused"], true);
    assert_eq!(
        c.kubectl(&["rollout", "restart", "deployment/web"]).ok(),
        "deployment.apps/web restarted\n"
    );
    assert!(
        s.get("Deployment", "web")["spec"]["template"]["metadata"]["annotations"]
            ["kubectl.kubernetes.io/restartedAt"]
            .is_string()
    );

    let set = c.kubectl(&[
        "set",
        "image",
        "deployment/web",
        "web=bosun.local/web:5",
        "--record",
    ]);
    assert_eq!(set.ok(), "deployment.apps/web image updated\n");
    let d = s.get("Deployment", "web");
    assert_eq!(image_of(&d), "bosun.local/web:5");
    let cause = d["metadata"]["annotations"][CAUSE].as_str().unwrap();
    assert!(
        cause.starts_with("kubectl set image deployment/web web=bosun.local/web:5")
            && cause.contains("--record=true"),
        "{cause}"
    );
    assert_eq!(
        c.kubectl(&["set", "image", "deployment/web", "nope=x"])
            .fails(),
        "error: unable to find container named \"nope\"\n"
    );
}
