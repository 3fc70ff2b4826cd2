//! `bosun create configmap|secret` against a real `bosun-control`, and the
//! same objects through kubectl.

mod common;

use common::Cluster;
use serde_json::Value;

fn get_json(c: &Cluster, what: &[&str]) -> Value {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    args.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(c.bosun(&args).ok()).unwrap()
}

#[test]
fn create_configmap_and_secrets_as_kubectl() {
    let c = Cluster::start();
    let props = c.write("game.properties", "lives=3\n");
    let env = c.write("app.env", "# settings\nMODE=fast\nLEVEL=2\n");
    assert_eq!(
        c.bosun(&[
            "create",
            "configmap",
            "game",
            "--from-literal=player=one",
            &format!("--from-file={props}"),
            &format!("--from-file=ui={props}"),
        ])
        .ok(),
        "configmap/game created\n"
    );
    let cm = get_json(&c, &["cm", "game"]);
    assert_eq!(cm["data"]["player"], "one");
    assert_eq!(cm["data"]["game.properties"], "lives=3\n");
    assert_eq!(cm["data"]["ui"], "lives=3\n");
    assert_eq!(
        c.bosun(&["create", "cm", "env", &format!("--from-env-file={env}")])
            .ok(),
        "configmap/env created\n"
    );
    assert_eq!(get_json(&c, &["cm", "env"])["data"]["MODE"], "fast");

    assert_eq!(
        c.bosun(&[
            "create",
            "secret",
            "generic",
            "db",
            "--from-literal=user=admin",
            "--type=example.com/db"
        ])
        .ok(),
        "secret/db created\n"
    );
    let s = get_json(&c, &["secret", "db"]);
    assert_eq!(s["data"]["user"], "YWRtaW4=");
    assert_eq!(s["type"], "example.com/db");

    let crt = c.write("tls.crt", "CERT");
    let key = c.write("tls.key", "KEY");
    assert_eq!(
        c.bosun(&["create", "secret", "tls", "web", "--cert", &crt, "--key", &key])
            .ok(),
        "secret/web created\n"
    );
    assert_eq!(get_json(&c, &["secret", "web"])["data"]["tls.key"], "S0VZ");
    assert_eq!(
        c.bosun(&[
            "create",
            "secret",
            "docker-registry",
            "reg",
            "--docker-server=registry.example:5000",
            "--docker-username=u",
            "--docker-password=p",
        ])
        .ok(),
        "secret/reg created\n"
    );

    let table = c.bosun(&["get", "secrets"]).ok().to_string();
    let (header, rows) = common::parse_table(&table);
    assert_eq!(header, ["NAME", "TYPE", "DATA", "AGE"]);
    let row = |n: &str| rows.iter().find(|r| r[0] == n).unwrap().clone();
    assert_eq!(row("reg")[1], "kubernetes.io/dockerconfigjson");
    assert_eq!(row("web")[1..3], ["kubernetes.io/tls", "2"]);
    let table = c.bosun(&["get", "cm"]).ok().to_string();
    let (header, rows) = common::parse_table(&table);
    assert_eq!(header, ["NAME", "DATA", "AGE"]);
    assert_eq!(rows.iter().find(|r| r[0] == "game").unwrap()[1], "3");

    // Errors before anything is sent, and the server's own.
    let err = c
        .bosun(&[
            "create",
            "cm",
            "dup",
            "--from-literal=a=1",
            "--from-literal=a=2",
        ])
        .fails()
        .to_string();
    assert!(
        err.contains("cannot add key \"a\", another key by that name already exists"),
        "{err}"
    );
    let err = c
        .bosun(&["create", "cm", "game", "--from-literal=a=1"])
        .fails()
        .to_string();
    assert!(err.contains("configmaps \"game\" already exists"), "{err}");
}
