//! ValidatingAdmissionPolicy with the real kubectl: upstream's documented
//! example (`object.spec.replicas <= 5` on Deployments, bound with Deny
//! to namespaces labelled `environment: test`), a policy whose limit
//! comes from a ConfigMap param, a Warn (and Audit) binding, a policy
//! whose expression does not compile, kubectl's columns, and enforcement
//! ending when the binding is deleted.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bosun_test_support::binaries::kubectl_binary;
use common::{raw, ControlPlane};

/// kubectl's exit status, stdout and stderr.
fn kubectl(cp: &ControlPlane, args: &[&str], stdin: &str) -> (bool, String, String) {
    let mut child = Command::new(kubectl_binary())
        .arg("--kubeconfig")
        .arg(cp.kubeconfig_path())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl is installed");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("writing kubectl's stdin");
    let out = child.wait_with_output().expect("kubectl ran");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok(cp: &ControlPlane, args: &[&str], stdin: &str) -> String {
    let (success, out, err) = kubectl(cp, args, stdin);
    assert!(success, "kubectl {args:?}: {err}");
    out
}

fn apply(cp: &ControlPlane, yaml: &str) -> String {
    ok(cp, &["apply", "-f", "-"], yaml)
}

fn deployment(name: &str, namespace: &str, replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec: {{containers: [{{name: web, image: bosun.local/web:1}}]}}
"
    )
}

/// `kubectl create` of a Deployment (`--dry-run=server` when `dry`).
fn create(cp: &ControlPlane, name: &str, ns: &str, replicas: u32, dry: bool) -> (bool, String) {
    let mut args = vec!["create", "-f", "-"];
    if dry {
        args.push("--dry-run=server");
    }
    let (success, out, err) = kubectl(cp, &args, &deployment(name, ns, replicas));
    (success, format!("{out}{err}"))
}

/// Retries a server-side dry-run create until `done` holds for its
/// outcome: the policies follow the store, as upstream's informers do.
fn until(
    cp: &ControlPlane,
    ns: &str,
    replicas: u32,
    what: &str,
    done: impl Fn(bool, &str) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (success, out) = create(cp, "probe", ns, replicas, true);
        if done(success, &out) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: last answer {out}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

const DEMO_POLICY: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: demo-policy.example.com
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups:   [apps]
      apiVersions: [v1]
      operations:  [CREATE, UPDATE]
      resources:   [deployments]
  validations:
  - expression: object.spec.replicas <= 5
";

const DEMO_BINDING: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: demo-binding-test.example.com
spec:
  policyName: demo-policy.example.com
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels:
        environment: test
";

const REFUSED: &str = "The deployments \"nginx\" is invalid: : ValidatingAdmissionPolicy \
    'demo-policy.example.com' with binding 'demo-binding-test.example.com' denied request: \
    failed expression: object.spec.replicas <= 5";

#[tokio::test(flavor = "multi_thread")]
async fn upstream_example_denies_in_selected_namespaces_until_unbound() {
    let cp = ControlPlane::start();
    ok(&cp, &["create", "namespace", "test"], "");
    ok(&cp, &["label", "namespace", "test", "environment=test"], "");
    ok(&cp, &["create", "namespace", "prod"], "");

    // An expression that does not compile is refused, naming the field.
    let broken = DEMO_POLICY.replace("object.spec.replicas <= 5", "object.spec.replicas <=");
    let (success, _, err) = kubectl(&cp, &["apply", "-f", "-"], &broken);
    assert!(!success, "a policy that does not compile was stored");
    assert!(
        err.contains(
            "spec.validations[0].expression: Invalid value: \"object.spec.replicas <=\": \
             compilation failed: ERROR: <input>:1:"
        ),
        "{err}"
    );
    let (success, _, err) = kubectl(
        &cp,
        &["apply", "-f", "-"],
        &DEMO_POLICY.replace("object.spec.replicas <= 5", "authorizer.allowed()"),
    );
    assert!(!success, "authorizer is not offered: {err}");
    assert!(
        err.contains("undeclared reference to 'authorizer'"),
        "{err}"
    );

    apply(&cp, DEMO_POLICY);
    apply(&cp, DEMO_BINDING);
    until(&cp, "test", 6, "the binding takes effect", |ok, out| {
        !ok && out.contains("denied request")
    });

    let (created, out) = create(&cp, "nginx", "test", 6, false);
    assert!(!created, "six replicas went through: {out}");
    assert!(out.contains(REFUSED), "{out}");
    let (created, out) = create(&cp, "nginx", "test", 5, false);
    assert!(created, "five replicas: {out}");
    // Updates are matched too; the scale subresource is not named by
    // the rule (`deployments`, not `deployments/scale`), as upstream.
    let (success, _, err) = kubectl(
        &cp,
        &[
            "patch",
            "deployment/nginx",
            "-n",
            "test",
            "-p",
            r#"{"spec":{"replicas":7}}"#,
        ],
        "",
    );
    assert!(!success, "patched past the limit");
    assert!(err.contains("denied request: failed expression"), "{err}");
    ok(
        &cp,
        &["scale", "deployment/nginx", "-n", "test", "--replicas=7"],
        "",
    );
    // Not in a namespace the binding's selector leaves out.
    let (created, out) = create(&cp, "nginx", "prod", 6, false);
    assert!(created, "prod is not selected: {out}");

    let table = ok(&cp, &["get", "validatingadmissionpolicies"], "");
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "VALIDATIONS", "PARAMKIND", "AGE"],
        "{table}"
    );
    assert!(
        table.contains("demo-policy.example.com   1             <unset>"),
        "{table}"
    );
    let table = ok(&cp, &["get", "validatingadmissionpolicybindings"], "");
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "POLICYNAME", "PARAMREF", "AGE"], "{table}");
    assert!(table.contains("demo-policy.example.com"), "{table}");

    ok(
        &cp,
        &[
            "delete",
            "validatingadmissionpolicybinding",
            "demo-binding-test.example.com",
        ],
        "",
    );
    until(
        &cp,
        "test",
        6,
        "enforcement ends with the binding",
        |ok, _| ok,
    );
    let (created, out) = create(&cp, "big", "test", 6, false);
    assert!(created, "{out}");
}

const PARAM_POLICY: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: replica-limit
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
  variables:
  - name: limit
    expression: int(params.data.maxReplicas)
  validations:
  - expression: object.spec.replicas <= variables.limit
    messageExpression: \"'replicas must be no greater than ' + string(variables.limit)\"
    reason: Forbidden
";

const PARAM_BINDING: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: replica-limit-limited
spec:
  policyName: replica-limit
  validationActions: [Deny]
  paramRef: {name: limits, namespace: policy-params, parameterNotFoundAction: Deny}
  matchResources:
    namespaceSelector: {matchLabels: {limited: \"yes\"}}
";

const WARN_POLICY: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: named-web
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [deployments]
  validations:
  - expression: object.metadata.name.startsWith('web-')
    message: deployments should be named web-*
";

const WARN_BINDING: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: named-web-warn
spec:
  policyName: named-web
  validationActions: [Warn, Audit]
  matchResources:
    namespaceSelector: {matchLabels: {warned: \"yes\"}}
";

#[tokio::test(flavor = "multi_thread")]
async fn params_warnings_and_not_found_params() {
    let cp = ControlPlane::start();
    ok(&cp, &["create", "namespace", "policy-params"], "");
    ok(&cp, &["create", "namespace", "limited"], "");
    ok(&cp, &["label", "namespace", "limited", "limited=yes"], "");
    ok(&cp, &["create", "namespace", "warned"], "");
    ok(&cp, &["label", "namespace", "warned", "warned=yes"], "");

    apply(&cp, PARAM_POLICY);
    apply(&cp, PARAM_BINDING);
    // No param yet, parameterNotFoundAction Deny: the binding fails
    // closed.
    until(&cp, "limited", 1, "the binding takes effect", |ok, out| {
        !ok && out.contains("failed to configure binding")
    });
    let (created, out) = create(&cp, "a", "limited", 1, false);
    assert!(!created);
    assert!(
        out.contains(
            "ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-limited' \
             denied request: failed to configure binding: no params found for policy binding \
             with `Deny` parameterNotFoundAction"
        ),
        "{out}"
    );

    ok(
        &cp,
        &[
            "create",
            "configmap",
            "limits",
            "-n",
            "policy-params",
            "--from-literal=maxReplicas=3",
        ],
        "",
    );
    // The param is read per request: no wait.
    let (created, out) = create(&cp, "a", "limited", 4, false);
    assert!(!created, "four replicas went through: {out}");
    assert!(
        out.contains(
            "Error from server (Forbidden): error when creating \"STDIN\": deployments.apps \"a\" \
             is forbidden: ValidatingAdmissionPolicy 'replica-limit' with binding \
             'replica-limit-limited' denied request: replicas must be no greater than 3"
        ),
        "{out}"
    );
    // The reason's HTTP code, and the message as the one cause.
    let body = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "raw"},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "raw"}},
            "template": {"metadata": {"labels": {"app": "raw"}},
                "spec": {"containers": [{"name": "web", "image": "bosun.local/web:1"}]}}}});
    let (code, status) = raw(
        &cp.client().await,
        "POST",
        "/apis/apps/v1/namespaces/limited/deployments",
        "application/json",
        serde_json::to_vec(&body).unwrap(),
    )
    .await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(status["reason"], "Forbidden", "{status}");
    assert_eq!(
        status["details"]["causes"][0]["message"],
        "ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-limited' denied \
         request: replicas must be no greater than 3",
        "{status}"
    );
    let (created, out) = create(&cp, "a", "limited", 3, false);
    assert!(created, "{out}");
    ok(
        &cp,
        &[
            "patch",
            "configmap",
            "limits",
            "-n",
            "policy-params",
            "-p",
            r#"{"data":{"maxReplicas":"10"}}"#,
        ],
        "",
    );
    let (created, out) = create(&cp, "b", "limited", 4, false);
    assert!(created, "the raised limit: {out}");
    let table = ok(
        &cp,
        &["get", "validatingadmissionpolicies", "replica-limit"],
        "",
    );
    assert!(table.contains("v1/ConfigMap"), "{table}");
    let table = ok(
        &cp,
        &[
            "get",
            "validatingadmissionpolicybindings",
            "replica-limit-limited",
        ],
        "",
    );
    assert!(table.contains("policy-params/limits"), "{table}");

    apply(&cp, WARN_POLICY);
    apply(&cp, WARN_BINDING);
    until(
        &cp,
        "warned",
        1,
        "the warning binding takes effect",
        |ok, out| ok && out.contains("Warning: Validation failed"),
    );
    let (created, out) = create(&cp, "api", "warned", 1, false);
    assert!(created, "a Warn binding lets the write through: {out}");
    assert!(
        out.contains(
            "Warning: Validation failed for ValidatingAdmissionPolicy 'named-web' with binding \
             'named-web-warn': deployments should be named web-*"
        ),
        "{out}"
    );
    ok(&cp, &["get", "deployment", "api", "-n", "warned"], "");
    let (created, out) = create(&cp, "web-ok", "warned", 1, false);
    assert!(created && !out.contains("Warning"), "{out}");
    let log = cp.log();
    assert!(
        log.contains("validation.policy.admission.k8s.io/validation_failure")
            && log.contains(r#""binding":"named-web-warn""#),
        "no audit line in the log"
    );
}
