use base64::Engine;
use serde_json::{json, Value};

use super::*;

fn csr_pem(cn: &str, orgs: &[&str], dns: &[&str]) -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params =
        rcgen::CertificateParams::new(dns.iter().map(|d| d.to_string()).collect::<Vec<_>>())
            .unwrap();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    for o in orgs {
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, *o);
    }
    params.serialize_request(&key).unwrap().pem().unwrap()
}

fn csr(request: &str) -> Value {
    json!({"metadata": {"name": "c"}, "spec": {
        "request": base64::engine::general_purpose::STANDARD.encode(request),
        "signerName": "kubernetes.io/kube-apiserver-client",
        "usages": ["client auth"],
    }})
}

fn messages(obj: &Value, old: Option<&Value>) -> Vec<String> {
    let mut errs = Vec::new();
    validate_csr(obj, old, &mut errs);
    errs.iter().map(FieldError::message).collect()
}

#[test]
fn a_signed_request_parses_with_its_subject() {
    // rcgen keeps one value per attribute type: one organization.
    let pem = csr_pem("jane", &["devs"], &["a.example.com"]);
    let info = parse_request(pem.as_bytes()).unwrap();
    assert_eq!(info.common_name, "jane");
    assert_eq!(info.organizations, ["devs"]);
    assert_eq!(info.dns_names, ["a.example.com"]);
    assert!(messages(&csr(&pem), None).is_empty());
}

#[test]
fn a_bad_request_is_named() {
    let errs = messages(
        &csr("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
        None,
    );
    assert_eq!(
        errs,
        ["spec.request: Invalid value: PEM block type must be CERTIFICATE REQUEST"]
    );
    // A request whose signature does not match its contents.
    let pem = csr_pem("jane", &[], &[]);
    let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
    let mut der = block.contents.clone();
    let n = der.len();
    der[n - 5] ^= 0xff;
    let b64 = base64::engine::general_purpose::STANDARD.encode(&der);
    let tampered =
        format!("-----BEGIN CERTIFICATE REQUEST-----\n{b64}\n-----END CERTIFICATE REQUEST-----\n");
    let errs = messages(&csr(&tampered), None);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with("spec.request: Invalid value: x509:"),
        "{errs:?}"
    );
}

#[test]
fn spec_fields_as_upstream() {
    let mut obj = csr(&csr_pem("jane", &[], &[]));
    obj["spec"]["signerName"] = json!("example/signer");
    obj["spec"]["expirationSeconds"] = json!(599);
    obj["spec"]["usages"] = json!(["client auth", "client auth", "flying"]);
    let errs = messages(&obj, None);
    for want in [
        "spec.signerName: Invalid value: \"example\": should be a domain with at least two segments separated by dots",
        "spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 seconds (10 minutes)",
        "spec.usages[1]: Duplicate value: \"client auth\"",
        "spec.usages[2]: Unsupported value: \"flying\"",
    ] {
        assert!(errs.iter().any(|e| e.starts_with(want)), "{want} not in {errs:#?}");
    }
    obj["spec"]["signerName"] = json!("");
    obj["spec"]["usages"] = json!([]);
    let errs = messages(&obj, None);
    assert!(
        errs.contains(&"spec.signerName: Required value".to_string()),
        "{errs:?}"
    );
    assert!(errs.contains(&"spec.usages: Required value: usages must be provided".to_string()));
    obj["spec"]["signerName"] = json!("a/b/c");
    assert!(messages(&obj, None).iter().any(|e| e.contains(
        "must be a fully qualified domain and path of the form 'example.com/signer-name'"
    )));
}

#[test]
fn approved_and_denied_are_exclusive() {
    let mut obj = csr(&csr_pem("jane", &[], &[]));
    obj["status"] = json!({"conditions": [
        {"type": "Approved", "status": "True"}, {"type": "Denied", "status": "True"}]});
    let errs = messages(&obj, Some(&obj.clone()));
    assert_eq!(
        errs,
        ["status.conditions[1].type: Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive"]
    );
    obj["status"] = json!({"conditions": [{"type": "Approved", "status": "False"}]});
    let errs = messages(&obj, Some(&obj.clone()));
    assert_eq!(
        errs,
        ["status.conditions[0].status: Unsupported value: \"False\": supported values: \"True\""]
    );
}

#[test]
fn only_approval_sets_approval_and_only_status_the_certificate() {
    let old = json!({"status": {}});
    let approved = json!({"status": {"conditions": [{"type": "Approved", "status": "True"}]}});
    assert!(validate_status_update(&approved, &old, Some("approval")).is_empty());
    let errs = validate_status_update(&approved, &old, Some("status"));
    assert_eq!(
        errs[0].message(),
        "status.conditions: Forbidden: updates may not add a condition of type \"Approved\""
    );
    let issued = json!({"status": {"certificate": "bm90IGEgY2VydA=="}});
    let errs = validate_status_update(&issued, &old, Some("approval"));
    assert_eq!(
        errs[0].message(),
        "status.certificate: Forbidden: updates may not set certificate content"
    );
    let errs = validate_status_update(&issued, &old, Some("status"));
    assert!(
        errs[0].message().contains("CERTIFICATE PEM block"),
        "{errs:?}"
    );
    let errs = validate_status_update(&old, &issued, Some("status"));
    assert!(errs[0]
        .message()
        .contains("may not modify existing certificate content"));
}
