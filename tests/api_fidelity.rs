//! Requests that clients written against Kubernetes send, through the real
//! kubectl against a running `bosun-control`, answered as Kubernetes
//! answers them: `[]byte` values (a Secret's `data`, a ConfigMap's
//! `binaryData`) base64 wrapped over several lines, as PEM files pasted into
//! manifests are, in creates, client-side and server-side applies, merge
//! and JSON patches; and selectors built by joining terms, with a trailing comma.

mod common;

use base64::Engine;
use common::Cluster;

/// `n` bytes of every value, different for each `seed`.
fn payload(n: usize, seed: u32) -> Vec<u8> {
    (0..n as u32)
        .map(|i| (i.wrapping_mul(31).wrapping_add(seed * 7) % 256) as u8)
        .collect()
}

/// `bytes` as base64 wrapped at `width` columns, each line ended by `eol`.
fn wrapped(bytes: &[u8], width: usize, eol: &str) -> Vec<String> {
    let flat = base64::engine::general_purpose::STANDARD.encode(bytes);
    flat.as_bytes()
        .chunks(width)
        .map(|c| format!("{}{eol}", std::str::from_utf8(c).unwrap()))
        .collect()
}

/// A YAML block scalar (`|`) of `lines`, indented for a map value.
fn block(lines: &[String]) -> String {
    lines.iter().map(|l| format!("    {l}")).collect()
}

/// The bytes kubectl shows at `jsonpath`, decoded as `base64 -d` would:
/// strict base64, so the value is stored in canonical form too.
fn stored_bytes(c: &Cluster, object: &[&str], jsonpath: &str) -> Vec<u8> {
    let mut args = vec!["get"];
    args.extend_from_slice(object);
    let path = format!("jsonpath={{{jsonpath}}}");
    args.extend_from_slice(&["-o", &path]);
    let text = c.kubectl(&args).ok().to_string();
    base64::engine::general_purpose::STANDARD
        .decode(text.trim_end())
        .unwrap_or_else(|e| panic!("{jsonpath} is canonical base64 ({e}): {text:?}"))
}

#[test]
fn wrapped_base64_values_round_trip_byte_for_byte() {
    let c = Cluster::start();
    let cert = payload(300, 1);
    let blob = payload(300, 2);
    // Wrapped at 76 columns as PEM and `base64` do, in a YAML block scalar:
    // kubectl sends the value with its line breaks.
    let manifest = c.write(
        "wrapped.yaml",
        &format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: tls}}\ntype: Opaque\n\
             data:\n  tls.crt: |\n{}---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: blob}}\n\
             binaryData:\n  blob: |\n{}",
            block(&wrapped(&cert, 76, "\n")),
            block(&wrapped(&blob, 64, "\n")),
        ),
    );
    let out = c.kubectl(&["apply", "-f", &manifest]);
    assert!(out.ok().contains("secret/tls created"), "{}", out.stdout);
    assert_eq!(
        stored_bytes(&c, &["secret", "tls"], r".data.tls\.crt"),
        cert
    );
    assert_eq!(
        stored_bytes(&c, &["configmap", "blob"], ".binaryData.blob"),
        blob
    );

    // A second apply changes the value (kubectl sends a strategic merge
    // patch), wrapped with CRLF this time.
    let cert2 = payload(300, 3);
    let json = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tls"}, "type": "Opaque",
        "data": {"tls.crt": wrapped(&cert2, 76, "\r\n").concat()},
    });
    let again = c.write("again.json", &json.to_string());
    let out = c.kubectl(&["apply", "-f", &again]);
    assert!(out.ok().contains("secret/tls configured"), "{}", out.stdout);
    assert_eq!(
        stored_bytes(&c, &["secret", "tls"], r".data.tls\.crt"),
        cert2
    );

    // A merge patch carrying a value with a line break in it.
    c.kubectl(&[
        "patch",
        "secret",
        "tls",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"short":"YWJj\nZA=="}}"#,
    ])
    .ok();
    assert_eq!(stored_bytes(&c, &["secret", "tls"], ".data.short"), b"abcd");
    // A JSON patch too.
    c.kubectl(&[
        "patch",
        "secret",
        "tls",
        "--type",
        "json",
        "-p",
        r#"[{"op":"add","path":"/data/json","value":"YW\r\nI="}]"#,
    ])
    .ok();
    assert_eq!(stored_bytes(&c, &["secret", "tls"], ".data.json"), b"ab");

    // Server-side apply: a second manager applying the same bytes wrapped
    // differently owns the field with the first, without a conflict, as the
    // values are the same once decoded.
    let ssa = |wrap: usize| {
        c.write(
            &format!("ssa-{wrap}.yaml"),
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: ssa}}\n\
                 binaryData:\n  blob: |\n{}",
                block(&wrapped(&blob, wrap, "\n"))
            ),
        )
    };
    c.kubectl(&["apply", "--server-side", "-f", &ssa(76)]).ok();
    let out = c.kubectl(&[
        "apply",
        "--server-side",
        "--field-manager",
        "other",
        "-f",
        &ssa(60),
    ]);
    assert!(out.ok().contains("serverside-applied"), "{}", out.stdout);
    assert_eq!(
        stored_bytes(&c, &["configmap", "ssa"], ".binaryData.blob"),
        blob
    );

    // bosun apply sends its YAML as JSON too.
    let mine = c.write(
        "bosun.yaml",
        &format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: mine}}\n\
             data:\n  key.pem: |\n{}",
            block(&wrapped(&cert, 64, "\n"))
        ),
    );
    c.bosun(&["apply", "-f", &mine]).ok();
    assert_eq!(
        stored_bytes(&c, &["secret", "mine"], r".data.key\.pem"),
        cert
    );
}

#[test]
fn base64_that_go_refuses_is_refused_naming_the_field() {
    let c = Cluster::start();
    let cert = payload(300, 4);
    let lines = wrapped(&cert, 76, "\n");
    // A space or a tab where the line break was, and bad padding: Go's
    // decoder refuses them, and so does Kubernetes.
    let cases = [
        ("space", lines.concat().replacen('\n', " ", 1), 76),
        ("tab", lines.concat().replacen('\n', "\t", 1), 76),
        ("padding", "YQ=".to_string(), 3),
    ];
    for (name, value, at) in cases {
        let json = serde_json::json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
            "data": {"tls.crt": value},
        });
        let file = c.write(&format!("{name}.json"), &json.to_string());
        let err = c.kubectl(&["apply", "-f", &file]).fails().to_string();
        assert!(
            err.contains(&format!(
                "cannot be handled as a Secret: data.tls.crt: illegal base64 data at input byte {at}"
            )),
            "{name}: {err}"
        );
        assert!(err.contains("BadRequest"), "{name}: {err}");
        c.kubectl(&["get", "secret", name]).fails();
    }
}

#[test]
fn selectors_joined_with_a_trailing_comma_as_kubernetes() {
    let c = Cluster::start();
    let pods = c.write(
        "pods.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web-1, labels: {app: web}}\n\
         spec:\n  containers: [{name: a, image: bosun.local/web:1}]\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: db-1, labels: {app: db}}\n\
         spec:\n  containers: [{name: a, image: bosun.local/web:1}]\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: blank, labels: {app: \"\"}}\n\
         spec:\n  containers: [{name: a, image: bosun.local/web:1}]\n",
    );
    c.kubectl(&["apply", "-f", &pods]).ok();
    let names = |args: &[&str]| {
        let mut argv = vec!["get", "pods", "-o", "name"];
        argv.extend_from_slice(args);
        let mut names: Vec<String> = c.kubectl(&argv).ok().lines().map(String::from).collect();
        names.sort();
        names.join(" ")
    };
    // Field selectors: empty terms are skipped, as fields.ParseSelector does.
    assert_eq!(
        names(&["--field-selector", "metadata.name=web-1,"]),
        "pod/web-1"
    );
    assert_eq!(
        names(&[
            "--field-selector",
            ",metadata.name=db-1,,metadata.namespace=default,"
        ]),
        "pod/db-1"
    );
    let raw = c
        .kubectl(&[
            "get",
            "--raw",
            "/api/v1/namespaces/default/pods?fieldSelector=metadata.name%3Dweb-1%2C",
        ])
        .ok()
        .to_string();
    let list: serde_json::Value = serde_json::from_str(&raw).unwrap();
    let items: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(items, ["web-1"]);
    // An unescaped '=' in a value is refused, with upstream's message.
    let err = c
        .kubectl(&["get", "pods", "--field-selector", "metadata.name=web-1=x"])
        .fails()
        .to_string();
    assert!(
        err.contains("invalid field selector: unescaped character in value: 61"),
        "{err}"
    );

    // Label selectors: labels.Parse refuses a trailing comma, and so does
    // bosun, with upstream's message, from kubectl and on the wire.
    let err = c
        .kubectl(&["get", "pods", "-l", "app=web,"])
        .fails()
        .to_string();
    assert!(
        err.contains("found '', expected: identifier after ','"),
        "{err}"
    );
    let err = c
        .kubectl(&[
            "get",
            "--raw",
            "/api/v1/namespaces/default/pods?labelSelector=app%3Dweb%2C",
        ])
        .fails()
        .to_string();
    assert!(
        err.contains("found '', expected: identifier after ','"),
        "{err}"
    );
    // A trailing comma inside a value list, and an empty list, stand for
    // the empty value (the pod labelled `app: ""`).
    assert_eq!(names(&["-l", "app in (web,)"]), "pod/blank pod/web-1");
    assert_eq!(names(&["-l", "app notin (web,)"]), "pod/db-1");
    assert_eq!(names(&["-l", "app in ()"]), "pod/blank");
    // `in` is a value where a value stands.
    assert_eq!(names(&["-l", "app!=in,app notin (db,)"]), "pod/web-1");
}
