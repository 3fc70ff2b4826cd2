//! certificates.k8s.io/v1 CertificateSigningRequest, as upstream's
//! `pkg/apis/certificates/validation` checks it: the request a PEM
//! `CERTIFICATE REQUEST` whose signature verifies, a well-formed
//! `signerName` (`example.com/signer-name`), known and unique usages,
//! `expirationSeconds` of 600 at least; conditions with a type and a
//! status (`True` only, for Approved and Denied), unique, Approved and
//! Denied exclusive. Which writes may change which part (only `approval`
//! the Approved/Denied conditions, only `status` the certificate) is the
//! API server's to check ([`validate_status_update`]).
//!
//! [`parse_request`] also gives the signers what they check of a request.

use std::collections::HashSet;

use base64::Engine;
use serde_json::Value;
use x509_parser::prelude::{FromDer, GeneralName, ParsedExtension, X509CertificationRequest};

use super::{arr_of, child, get, index, str_of, ErrorKind, FieldError};
use crate::names::{is_dns1123_label, is_dns1123_subdomain};

/// Every key usage v1 accepts (upstream's allValidUsages).
pub const USAGES: [&str; 23] = [
    "signing",
    "digital signature",
    "content commitment",
    "key encipherment",
    "key agreement",
    "data encipherment",
    "cert sign",
    "crl sign",
    "encipher only",
    "decipher only",
    "any",
    "server auth",
    "client auth",
    "code signing",
    "email protection",
    "s/mime",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "timestamping",
    "ocsp signing",
    "microsoft sgc",
    "netscape sgc",
];

/// The least `expirationSeconds` a request may ask for.
pub const MIN_EXPIRATION_SECONDS: i64 = 600;

/// What a signer looks at in a certificate request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestInfo {
    pub common_name: String,
    pub organizations: Vec<String>,
    pub dns_names: Vec<String>,
    pub ip_addresses: Vec<std::net::IpAddr>,
    pub emails: Vec<String>,
    pub uris: Vec<String>,
    /// The request in PEM, as sent.
    pub pem: String,
}

/// Parses a PEM certificate request and checks its signature, as
/// upstream's parseCSR and CheckSignature; the error in upstream's words
/// where it has them.
pub fn parse_request(pem: &[u8]) -> Result<RequestInfo, String> {
    const PEM_ERR: &str = "PEM block type must be CERTIFICATE REQUEST";
    let (_, block) = x509_parser::pem::parse_x509_pem(pem).map_err(|_| PEM_ERR.to_string())?;
    if block.label != "CERTIFICATE REQUEST" {
        return Err(PEM_ERR.into());
    }
    let (_, csr) = X509CertificationRequest::from_der(&block.contents)
        .map_err(|e| format!("x509: malformed certificate request: {e}"))?;
    csr.verify_signature()
        .map_err(|e| format!("x509: invalid signature: {e}"))?;
    let subject = &csr.certification_request_info.subject;
    let text = |a: &x509_parser::x509::AttributeTypeAndValue| a.as_str().unwrap_or("").to_string();
    let mut info = RequestInfo {
        common_name: subject
            .iter_common_name()
            .next()
            .map(text)
            .unwrap_or_default(),
        organizations: subject.iter_organization().map(text).collect(),
        pem: String::from_utf8_lossy(pem).into_owned(),
        ..Default::default()
    };
    for ext in csr.requested_extensions().into_iter().flatten() {
        let ParsedExtension::SubjectAlternativeName(san) = ext else {
            continue;
        };
        for name in &san.general_names {
            match name {
                GeneralName::DNSName(d) => info.dns_names.push(d.to_string()),
                GeneralName::RFC822Name(e) => info.emails.push(e.to_string()),
                GeneralName::URI(u) => info.uris.push(u.to_string()),
                GeneralName::IPAddress(b) => match b.len() {
                    4 => info
                        .ip_addresses
                        .push(<[u8; 4]>::try_from(*b).expect("4 bytes").into()),
                    16 => info
                        .ip_addresses
                        .push(<[u8; 16]>::try_from(*b).expect("16 bytes").into()),
                    _ => {}
                },
                _ => {}
            }
        }
    }
    Ok(info)
}

/// The request's PEM bytes (`spec.request` is base64 in JSON).
pub fn request_bytes(obj: &Value) -> Option<Vec<u8>> {
    let b64 = obj.pointer("/spec/request").and_then(Value::as_str)?;
    base64::engine::general_purpose::STANDARD.decode(b64).ok()
}

/// Validates a CSR on create (`old` None) or update. The spec cannot
/// change after create (the server keeps the stored one), so it is
/// checked on create only.
pub(crate) fn validate_csr(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    if old.is_none() {
        validate_spec(obj, errs);
    }
    validate_conditions(obj, errs);
}

fn validate_spec(obj: &Value, errs: &mut Vec<FieldError>) {
    let spec = get(obj, "spec").unwrap_or(&Value::Null);
    match request_bytes(obj) {
        None if str_of(spec, "request").is_empty() => {
            errs.push(FieldError::required("spec.request", ""))
        }
        None => errs.push(invalid_request("illegal base64 data".into())),
        Some(pem) => {
            if let Err(e) = parse_request(&pem) {
                errs.push(invalid_request(e));
            }
        }
    }
    validate_signer_name("spec.signerName", str_of(spec, "signerName"), errs);
    if let Some(s) = get(spec, "expirationSeconds").and_then(Value::as_i64) {
        if s < MIN_EXPIRATION_SECONDS {
            errs.push(FieldError::invalid(
                "spec.expirationSeconds",
                s,
                "may not specify a duration less than 600 seconds (10 minutes)",
            ));
        }
    }
    let usages = arr_of(spec, "usages");
    if usages.is_empty() {
        errs.push(FieldError::required(
            "spec.usages",
            "usages must be provided",
        ));
    }
    let mut seen = HashSet::new();
    for (i, u) in usages.iter().enumerate() {
        let u = u.as_str().unwrap_or_default();
        if !USAGES.contains(&u) {
            let mut sorted = USAGES;
            sorted.sort_unstable();
            errs.push(FieldError::not_supported(
                index("spec.usages", i),
                u,
                &sorted,
            ));
        }
        if !seen.insert(u) {
            errs.push(FieldError::duplicate(index("spec.usages", i), u));
        }
    }
}

/// The request is not repeated in the message: it is kilobytes of PEM.
fn invalid_request(detail: String) -> FieldError {
    FieldError {
        field: "spec.request".into(),
        kind: ErrorKind::Invalid,
        bad_value: None,
        detail,
    }
}

/// Upstream's ValidateSignerName: `<domain>/<path>`, the domain DNS
/// labels with at least one dot, the path a DNS subdomain.
pub(crate) fn validate_signer_name(path: &str, name: &str, errs: &mut Vec<FieldError>) {
    if name.is_empty() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    let segments: Vec<&str> = name.split('/').collect();
    if segments.len() != 2 {
        errs.push(FieldError::invalid(
            path,
            name,
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        ));
        return;
    }
    let (domain, signer_path) = (segments[0], segments[1]);
    if domain.len() > 253 {
        errs.push(FieldError::too_long(path, 253));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    for label in &labels {
        let bad = is_dns1123_label(label);
        if !bad.is_empty() {
            for m in bad {
                errs.push(FieldError::invalid(
                    path,
                    domain,
                    format!("validating label {label:?}: {m}"),
                ));
            }
            break;
        }
    }
    if labels.len() < 2 {
        errs.push(FieldError::invalid(
            path,
            domain,
            "should be a domain with at least two segments separated by dots",
        ));
    }
    let max_path = 253 - domain.len().min(252) - 1;
    if signer_path.len() > max_path {
        errs.push(FieldError::too_long(path, max_path));
    }
    for m in is_dns1123_subdomain(&signer_path.to_lowercase()) {
        errs.push(FieldError::invalid(
            path,
            signer_path,
            format!("validating path {signer_path:?}: {m}"),
        ));
    }
}

fn validate_conditions(obj: &Value, errs: &mut Vec<FieldError>) {
    let conds = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let base = "status.conditions";
    let (mut approved, mut denied) = (false, false);
    let mut seen = HashSet::new();
    for (i, c) in conds.iter().enumerate() {
        let p = index(base, i);
        let kind = str_of(c, "type");
        if kind.is_empty() {
            errs.push(FieldError::required(child(&p, "type"), ""));
        }
        let approval = kind == "Approved" || kind == "Denied";
        let allowed: &[&str] = if approval {
            &["True"]
        } else {
            &["False", "True", "Unknown"]
        };
        match str_of(c, "status") {
            "" => errs.push(FieldError::required(child(&p, "status"), "")),
            s if !allowed.contains(&s) => {
                errs.push(FieldError::not_supported(child(&p, "status"), s, allowed))
            }
            _ => {}
        }
        if (kind == "Approved" && denied) || (kind == "Denied" && approved) {
            errs.push(FieldError::invalid(
                child(&p, "type"),
                kind,
                "Approved and Denied conditions are mutually exclusive",
            ));
        }
        approved |= kind == "Approved";
        denied |= kind == "Denied";
        if !seen.insert(kind) {
            errs.push(FieldError::duplicate(child(&p, "type"), kind));
        }
    }
}

/// What only one subresource may change, as upstream's status and
/// approval update validations: `status` writes may not add or remove
/// Approved/Denied conditions; a certificate once set may not change;
/// only `status` sets it.
pub fn validate_status_update(
    obj: &Value,
    old: &Value,
    subresource: Option<&str>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let count = |v: &Value, t: &str| {
        v.pointer("/status/conditions")
            .and_then(Value::as_array)
            .map_or(0, |a| a.iter().filter(|c| str_of(c, "type") == t).count())
    };
    if subresource != Some("approval") {
        for t in ["Approved", "Denied"] {
            let (now, before) = (count(obj, t), count(old, t));
            if now > before {
                errs.push(FieldError::forbidden(
                    "status.conditions",
                    format!("updates may not add a condition of type {t:?}"),
                ));
            } else if now < before {
                errs.push(FieldError::forbidden(
                    "status.conditions",
                    format!("updates may not remove a condition of type {t:?}"),
                ));
            }
        }
    }
    let cert = |v: &Value| {
        v.pointer("/status/certificate")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (new_cert, old_cert) = (cert(obj), cert(old));
    if new_cert != old_cert {
        if subresource != Some("status") {
            errs.push(FieldError::forbidden(
                "status.certificate",
                "updates may not set certificate content",
            ));
        } else if !old_cert.is_empty() {
            errs.push(FieldError::forbidden(
                "status.certificate",
                "updates may not modify existing certificate content",
            ));
        } else if let Some(e) = certificate_problem(&new_cert) {
            errs.push(FieldError {
                field: "status.certificate".into(),
                kind: ErrorKind::Invalid,
                bad_value: None,
                detail: e,
            });
        }
    }
    errs
}

/// Upstream's validateCertificate: PEM with at least one CERTIFICATE
/// block, each parsing.
fn certificate_problem(b64: &str) -> Option<String> {
    let Ok(pem) = base64::engine::general_purpose::STANDARD.decode(b64) else {
        return Some("illegal base64 data".into());
    };
    let mut found = 0;
    for block in x509_parser::pem::Pem::iter_from_buffer(&pem) {
        let Ok(block) = block else {
            return Some("invalid PEM data".into());
        };
        if block.label != "CERTIFICATE" {
            return Some(format!(
                "only CERTIFICATE PEM blocks are allowed, found {:?}",
                block.label
            ));
        }
        if let Err(e) = block.parse_x509() {
            return Some(format!("{e}"));
        }
        found += 1;
    }
    (found == 0).then(|| "must contain at least one CERTIFICATE PEM block".into())
}

#[cfg(test)]
mod tests;
