//! A kube client's error read as the API's answer: the HTTP status code
//! and the Status message a controller puts into events and conditions.

/// The HTTP status code of an API error (None for transport errors).
pub fn code_of(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// Whether the API answered `e` with status `code`.
pub fn is_status(e: &kube::Error, code: u16) -> bool {
    code_of(e) == Some(code)
}

/// The message of an API error (its Status message), else the error.
pub fn message_of(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if !s.message.is_empty() => s.message.clone(),
        other => other.to_string(),
    }
}

/// The error of a controller whose syncs fail only by the API failing.
#[derive(Debug, thiserror::Error)]
#[error("API: {0}")]
pub struct ApiError(#[from] pub kube::Error);
