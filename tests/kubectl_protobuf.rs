//! kubectl's typed commands against a real `bosun-control`: `create
//! deployment|job|namespace|service`, `autoscale`, `scale` and `drain` send
//! their bodies as `application/vnd.kubernetes.protobuf`, and bosun must
//! store the same objects the JSON path would; kubectl asks for protobuf
//! answers too and must read them.

mod common;

use common::Cluster;
use serde_json::Value;

fn get_json(c: &Cluster, args: &[&str]) -> Value {
    let mut argv = vec!["get"];
    argv.extend_from_slice(args);
    argv.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(c.kubectl(&argv).ok()).expect("kubectl -o json prints JSON")
}

#[test]
fn kubectl_typed_commands_send_protobuf_and_bosun_stores_their_objects() {
    let c = Cluster::start();

    // The request really is protobuf (kubectl -v=8 shows its headers).
    let run = c.kubectl(&[
        "create",
        "deployment",
        "web",
        "--image=bosun.local/web:1",
        "--port=8080",
        "-v=8",
    ]);
    run.ok();
    assert!(
        run.stderr
            .contains("Content-Type: application/vnd.kubernetes.protobuf"),
        "kubectl should send protobuf:\n{}",
        run.stderr
    );
    // ... and so is the answer, which kubectl decodes to print the name.
    assert_eq!(
        run.stderr
            .matches("Content-Type: application/vnd.kubernetes.protobuf")
            .count(),
        2,
        "kubectl should get protobuf back:\n{}",
        run.stderr
    );
    assert!(run.stdout.contains("deployment.apps/web created"));
    let d = get_json(&c, &["deployment", "web"]);
    assert_eq!(d["spec"]["replicas"], 1);
    assert_eq!(d["spec"]["selector"]["matchLabels"]["app"], "web");
    let container = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "bosun.local/web:1");
    assert_eq!(container["ports"][0]["containerPort"], 8080);
    // Defaults applied as for JSON: the wire's empty strings did not count as set.
    assert_eq!(container["imagePullPolicy"], "IfNotPresent");
    assert_eq!(d["spec"]["template"]["spec"]["restartPolicy"], "Always");
    assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
    assert!(d["metadata"]["creationTimestamp"].is_string());
    assert!(d["metadata"].get("generateName").is_none());

    c.kubectl(&[
        "create",
        "job",
        "j",
        "--image=bosun.local/web:1",
        "--",
        "true",
    ])
    .ok();
    let j = get_json(&c, &["job", "j"]);
    assert_eq!(
        j["spec"]["template"]["spec"]["containers"][0]["command"],
        serde_json::json!(["true"])
    );
    assert_eq!(j["spec"]["template"]["spec"]["restartPolicy"], "Never");
    assert_eq!(j["spec"]["backoffLimit"], 6);

    c.kubectl(&["create", "namespace", "n"]).ok();
    assert_eq!(
        get_json(&c, &["namespace", "n"])["status"]["phase"],
        "Active"
    );

    c.kubectl(&["create", "service", "clusterip", "s", "--tcp=80:8080"])
        .ok();
    let s = get_json(&c, &["service", "s"]);
    assert_eq!(s["spec"]["ports"][0]["port"], 80);
    assert_eq!(s["spec"]["ports"][0]["targetPort"], 8080);
    assert_eq!(s["spec"]["selector"]["app"], "s");
    assert!(s["spec"]["clusterIP"]
        .as_str()
        .is_some_and(|ip| !ip.is_empty()));

    c.kubectl(&[
        "autoscale",
        "deployment",
        "web",
        "--max=3",
        "--cpu-percent=70",
    ])
    .ok();
    let h = get_json(&c, &["hpa.v2.autoscaling", "web"]);
    assert_eq!(h["spec"]["maxReplicas"], 3);
    assert_eq!(h["spec"]["scaleTargetRef"]["name"], "web");
    assert_eq!(
        h["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
        70
    );

    // scale writes the Scale subresource; 0 is kept (a pointer's zero).
    c.kubectl(&["scale", "deployment", "web", "--replicas=0"])
        .ok();
    assert_eq!(get_json(&c, &["deployment", "web"])["spec"]["replicas"], 0);
    c.kubectl(&["scale", "deployment", "web", "--replicas=2"])
        .ok();
    assert_eq!(get_json(&c, &["deployment", "web"])["spec"]["replicas"], 2);

    // describe reads through typed clients (protobuf lists and objects).
    let out = c
        .kubectl(&["describe", "deployment", "web"])
        .ok()
        .to_string();
    assert!(
        out.contains("Replicas:") && out.contains("bosun.local/web:1"),
        "{out}"
    );

    // drain cordons (a JSON patch) and evicts through policy/v1 Evictions
    // (protobuf).
    let manifest = c.write(
        "node.yaml",
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: p1}\n\
         spec:\n  nodeName: n1\n  containers: [{name: a, image: bosun.local/web:1}]\n",
    );
    c.kubectl(&["apply", "-f", &manifest]).ok();
    let out = c
        .kubectl(&[
            "drain",
            "n1",
            "--force",
            "--grace-period=0",
            "--timeout=60s",
        ])
        .ok()
        .to_string();
    assert!(out.contains("pod/p1 evicted"), "{out}");
    assert!(out.contains("node/n1 drained"), "{out}");
    assert_eq!(get_json(&c, &["node", "n1"])["spec"]["unschedulable"], true);
    c.kubectl(&["get", "pod", "p1"]).fails();
}
