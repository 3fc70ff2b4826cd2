use super::*;

fn request(cn: &str, org: &str) -> String {
    let key = KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, org);
    params.serialize_request(&key).unwrap().pem().unwrap()
}

#[test]
fn issues_the_subject_and_usages_for_the_requested_time() {
    let dir = tempfile::tempdir().unwrap();
    crate::tls::load_or_create(dir.path(), &["127.0.0.1".to_string()]).unwrap();
    let ca = CaSigner::load(dir.path(), MAX_DURATION).unwrap();
    let now = time::OffsetDateTime::now_utc();
    let usages = vec!["digital signature".to_string(), "client auth".to_string()];
    let pem = ca
        .sign(&request("jane", "devs"), &usages, Some(600), now)
        .unwrap();
    let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
    let cert = block.parse_x509().unwrap();
    let subject = cert.subject();
    assert_eq!(
        subject.iter_common_name().next().unwrap().as_str().unwrap(),
        "jane"
    );
    assert_eq!(
        subject
            .iter_organization()
            .next()
            .unwrap()
            .as_str()
            .unwrap(),
        "devs"
    );
    let lifetime = cert.validity().not_after.timestamp() - now.unix_timestamp();
    assert!((599..=601).contains(&lifetime), "{lifetime}");
    crate::auth::credential::tests::assert_client_auth_signed_by_ca(&cert, dir.path());
    // Never past the CA's own expiry.
    let capped = CaSigner {
        not_after: now + time::Duration::seconds(900),
        ..ca
    };
    let pem = capped
        .sign(&request("jane", "devs"), &usages, None, now)
        .unwrap();
    let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
    let lifetime =
        block.parse_x509().unwrap().validity().not_after.timestamp() - now.unix_timestamp();
    assert!((899..=901).contains(&lifetime), "{lifetime}");
}

#[test]
fn the_lifetime_is_at_most_the_cluster_signing_duration() {
    let dir = tempfile::tempdir().unwrap();
    crate::tls::load_or_create(dir.path(), &["127.0.0.1".to_string()]).unwrap();
    let ca = CaSigner::load(dir.path(), std::time::Duration::from_secs(30)).unwrap();
    let now = time::OffsetDateTime::now_utc();
    let usages = vec!["digital signature".to_string(), "client auth".to_string()];
    let pem = ca
        .sign(
            &request("system:node:w1", "system:nodes"),
            &usages,
            Some(600),
            now,
        )
        .unwrap();
    let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
    let cert = block.parse_x509().unwrap();
    let validity = cert.validity();
    assert_eq!(validity.not_after.timestamp() - now.unix_timestamp(), 30);
    // Backdated by a tenth of that, not 5 minutes: renewal at 80% of
    // the validity comes after the certificate is issued.
    assert_eq!(now.unix_timestamp() - validity.not_before.timestamp(), 3);
}
