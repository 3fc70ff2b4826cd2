//! Docker's errors as bosun's: HTTP status codes matched the way
//! bollard's own tests do (404 no such thing, 304 already started or
//! stopped, 409 conflict), Docker's own words for the message.

use bollard::errors::Error as BollardError;

use super::REQUEST_TIMEOUT;
use crate::runtime::RuntimeError;

pub(super) fn status(e: &BollardError) -> Option<u16> {
    match e {
        BollardError::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

/// Docker's own words for an error, without bollard's wrapping.
pub(super) fn message(e: &BollardError) -> String {
    match e {
        BollardError::DockerResponseServerError { message, .. } => message.clone(),
        BollardError::DockerStreamError { error } => error.clone(),
        other => other.to_string(),
    }
}

pub(super) fn docker_err(e: BollardError) -> RuntimeError {
    match e {
        BollardError::RequestTimeoutError => RuntimeError::Timeout(REQUEST_TIMEOUT),
        e => RuntimeError::Docker(message(&e)),
    }
}

pub(super) fn not_found_or(e: BollardError, id: &str) -> RuntimeError {
    if status(&e) == Some(404) {
        RuntimeError::NotFound(id.to_string())
    } else {
        docker_err(e)
    }
}
