//! A small admission webhook server, as policy engines run in a pod: HTTPS
//! with the certificate and key in `$TLS_CERT` and `$TLS_KEY` (default
//! `/tls/tls.crt` and `/tls/tls.key`, a Secret volume), on `$PORT`
//! (default 8443), answering `admission.k8s.io/v1` AdmissionReviews:
//!
//! - `POST /validate`: refuses an object labelled `deny: "true"` (403,
//!   `objects labelled deny=true are refused by webhook-server`); allows
//!   anything else with the warning `webhook-server saw NAME`.
//! - `POST /mutate`: a JSONPatch adding the label `mutated: "true"`.
//! - `POST /convert`: an `apiextensions.k8s.io/v1` ConversionReview for
//!   a Widget between `v1` (`spec.size: "3"`, a string) and `v2`
//!   (`spec.replicas: 3`, a number), any group; a size that is not a
//!   number fails the review (`spec.size "x" is not a number`).
//! - `GET /healthz`: `ok`, for a readiness probe.
//!
//! `scripts/build-images.sh --webhook-server` puts it into the image
//! `bosun.local/webhook-server:1`, which the agent's webhook test runs.

use std::sync::Arc;

use axum::body::Body;
use base64::Engine;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{json, Value};

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn respond(code: u16, body: Vec<u8>) -> http::Response<Body> {
    http::Response::builder()
        .status(code)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .expect("response")
}

/// The answer to one review: `mutate` adds the label, else the label
/// `deny: "true"` is refused.
fn answer(review: &Value, mutate: bool) -> Value {
    let request = &review["request"];
    let object = &request["object"];
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let mut response = json!({"uid": request["uid"], "allowed": true});
    if mutate {
        let patch = if object["metadata"]["labels"].is_object() {
            json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "true"}])
        } else {
            json!([{"op": "add", "path": "/metadata/labels", "value": {"mutated": "true"}}])
        };
        response["patchType"] = json!("JSONPatch");
        response["patch"] = json!(base64::engine::general_purpose::STANDARD
            .encode(serde_json::to_vec(&patch).expect("patch")));
    } else if object["metadata"]["labels"]["deny"] == "true" {
        response["allowed"] = json!(false);
        response["status"] = json!({"code": 403, "reason": "Forbidden",
            "message": "objects labelled deny=true are refused by webhook-server"});
    } else {
        response["warnings"] = json!([format!("webhook-server saw {name}")]);
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

/// One object in `desired` (`GROUP/v1` or `GROUP/v2`).
fn convert_widget(mut obj: Value, desired: &str) -> Result<Value, String> {
    let spec = obj
        .get_mut("spec")
        .and_then(Value::as_object_mut)
        .map(std::mem::take)
        .unwrap_or_default();
    let mut out = serde_json::Map::new();
    for (k, v) in spec {
        match (k.as_str(), desired.ends_with("/v2")) {
            ("size", true) => {
                let text = v.as_str().unwrap_or_default();
                let n: i64 = text
                    .parse()
                    .map_err(|_| format!("spec.size {text:?} is not a number"))?;
                out.insert("replicas".into(), json!(n));
            }
            ("replicas", false) => {
                out.insert(
                    "size".into(),
                    json!(v.as_i64().unwrap_or_default().to_string()),
                );
            }
            _ => {
                out.insert(k, v);
            }
        }
    }
    obj["spec"] = Value::Object(out);
    obj["apiVersion"] = json!(desired);
    Ok(obj)
}

/// The answer to a ConversionReview.
fn conversion(review: &Value) -> Value {
    let request = &review["request"];
    let desired = request["desiredAPIVersion"].as_str().unwrap_or_default();
    let objects = request["objects"].as_array().cloned().unwrap_or_default();
    let converted: Result<Vec<Value>, String> = objects
        .into_iter()
        .map(|o| convert_widget(o, desired))
        .collect();
    let response = match converted {
        Ok(objects) => json!({"uid": request["uid"], "result": {"status": "Success"},
            "convertedObjects": objects}),
        Err(why) => json!({"uid": request["uid"],
            "result": {"status": "Failure", "message": why}}),
    };
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response})
}

async fn handle(
    req: http::Request<Incoming>,
) -> Result<http::Response<Body>, std::convert::Infallible> {
    let path = req.uri().path().to_string();
    if path == "/healthz" {
        return Ok(respond(200, b"ok".to_vec()));
    }
    let mutate = match path.as_str() {
        "/mutate" => true,
        "/validate" | "/convert" => false,
        _ => return Ok(respond(404, b"{}".to_vec())),
    };
    let bytes = match axum::body::to_bytes(Body::new(req.into_body()), 8 << 20).await {
        Ok(b) => b,
        Err(e) => return Ok(respond(400, e.to_string().into_bytes())),
    };
    let review: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => return Ok(respond(400, e.to_string().into_bytes())),
    };
    if path == "/convert" {
        let out = conversion(&review);
        eprintln!(
            "/convert {} object(s) to {} -> {}",
            review["request"]["objects"].as_array().map_or(0, Vec::len),
            review["request"]["desiredAPIVersion"]
                .as_str()
                .unwrap_or_default(),
            out["response"]["result"]["status"]
        );
        return Ok(respond(200, serde_json::to_vec(&out).expect("json")));
    }
    let out = answer(&review, mutate);
    eprintln!(
        "{path} {} {} -> allowed={}",
        review["request"]["operation"].as_str().unwrap_or_default(),
        review["request"]["name"].as_str().unwrap_or_default(),
        out["response"]["allowed"]
    );
    Ok(respond(200, serde_json::to_vec(&out).expect("json")))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cert_path = env_or("TLS_CERT", "/tls/tls.crt");
    let key_path = env_or("TLS_KEY", "/tls/tls.key");
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(&cert_path)?.collect::<Result<_, _>>()?;
    let key = PrivateKeyDer::from_pem_file(&key_path)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let port = env_or("PORT", "8443");
    let listener = tokio::net::TcpListener::bind(format!("0.0.0.0:{port}")).await?;
    eprintln!("webhook-server listening on :{port}");
    loop {
        let (tcp, _) = listener.accept().await?;
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let service = hyper::service::service_fn(handle);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tls), service)
                .await;
        });
    }
}
