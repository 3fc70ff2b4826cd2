use super::*;

fn values(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_callers_identity_replaces_any_it_sent() {
    let mut headers = HeaderMap::new();
    headers.insert("x-remote-user", HeaderValue::from_static("mallory"));
    headers.insert("x-remote-group", HeaderValue::from_static("system:masters"));
    headers.insert("x-remote-extra-scopes", HeaderValue::from_static("all"));
    headers.insert("accept", HeaderValue::from_static("application/json"));
    let mut user = UserInfo::authenticated("alice", &["dev", "ops"]);
    user.extra.insert(
        "authentication.kubernetes.io/pod-name".into(),
        vec!["web-1".into()],
    );
    set_identity_headers(&mut headers, &user);
    assert_eq!(values(&headers, "x-remote-user"), ["alice"]);
    assert_eq!(
        values(&headers, "x-remote-group"),
        ["dev", "ops", "system:authenticated"]
    );
    assert!(values(&headers, "x-remote-extra-scopes").is_empty());
    assert_eq!(
        values(
            &headers,
            "x-remote-extra-authentication.kubernetes.io%2fpod-name"
        ),
        ["web-1"]
    );
    assert_eq!(values(&headers, "accept"), ["application/json"]);
}

#[test]
fn the_config_map_lists_settings_as_json_arrays() {
    let cm = authentication_config_map("CLIENT CA", "FRONT CA");
    assert_eq!(cm["data"]["client-ca-file"], "CLIENT CA");
    assert_eq!(cm["data"]["requestheader-client-ca-file"], "FRONT CA");
    assert_eq!(
        cm["data"]["requestheader-allowed-names"],
        "[\"front-proxy-client\"]"
    );
    assert_eq!(
        cm["data"]["requestheader-extra-headers-prefix"],
        "[\"X-Remote-Extra-\"]"
    );
}

#[test]
fn the_client_certificate_is_signed_by_the_request_header_ca() {
    let dir = tempfile::tempdir().unwrap();
    let first = FrontProxy::load_or_create(dir.path()).unwrap();
    let again = FrontProxy::load_or_create(dir.path()).unwrap();
    assert_eq!(first.ca_pem, again.ca_pem, "the CA is kept across starts");
    let key = first.client_resolver().resolve(&[], &[]).unwrap();
    let (_, cert) = x509_parser::parse_x509_certificate(key.cert[0].as_ref()).unwrap();
    let cn = cert.subject().iter_common_name().next().unwrap();
    assert_eq!(cn.as_str().unwrap(), CLIENT_COMMON_NAME);
    let (_, ca) = x509_parser::pem::parse_x509_pem(first.ca_pem.as_bytes()).unwrap();
    let ca = ca.parse_x509().unwrap();
    cert.verify_signature(Some(ca.public_key())).unwrap();
}
