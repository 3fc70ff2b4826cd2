//! Answers in the encoding the client asked for: JSON, or Kubernetes
//! protobuf when the client prefers it and the kind has a message; large
//! bodies gzipped when the client accepts it.

use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use serde_json::Value;

use super::{compression, negotiate, protobuf};

/// A JSON answer, gzipped when large and the client accepts it.
pub(super) fn json_response(code: StatusCode, body: &Value) -> Response {
    compression::compressible(
        (
            code,
            [(http::header::CONTENT_TYPE, "application/json")],
            serde_json::to_vec(body).unwrap_or_default(),
        )
            .into_response(),
    )
}

/// Whether the client's Accept header prefers Kubernetes protobuf: the
/// first media range bosun can answer is protobuf (kubectl's typed
/// clients send `application/vnd.kubernetes.protobuf,application/json`).
/// A Table is always answered in JSON, as kube-apiserver does.
pub fn prefers_protobuf(headers: &HeaderMap) -> bool {
    negotiate::lenient(headers).encoding == negotiate::Encoding::Protobuf
}

/// An object (or list, or Status) in the encoding the client prefers:
/// protobuf when it asks for it first and the kind has a message, JSON
/// otherwise.
pub fn object_response(headers: &HeaderMap, code: StatusCode, body: &Value) -> Response {
    encoded_response(negotiate::lenient(headers).encoding, code, body)
}

/// `body` in `encoding` (JSON when it has no protobuf form).
pub fn encoded_response(encoding: negotiate::Encoding, code: StatusCode, body: &Value) -> Response {
    if encoding == negotiate::Encoding::Protobuf {
        match protobuf::encode_object(body) {
            Ok(bytes) => {
                return compression::compressible(
                    (
                        code,
                        [(http::header::CONTENT_TYPE, protobuf::MEDIA_TYPE)],
                        bytes,
                    )
                        .into_response(),
                )
            }
            Err(e) => tracing::debug!(error = %e, "answering in JSON: no protobuf form"),
        }
    }
    json_response(code, body)
}
