//! Turning errors into the lines kubectl prints.

use kube::core::Status;

/// `Error from server (NotFound): pods "x" not found`, with an optional
/// context between the reason and the message, as kubectl puts
/// `error when creating "nginx.yaml"` there.
pub fn server_error_line(status: &Status, context: Option<&str>) -> String {
    let head = if status.reason.is_empty() {
        "Error from server".to_string()
    } else {
        format!("Error from server ({})", status.reason)
    };
    match context {
        Some(c) => format!("{head}: {c}: {}", status.message),
        None => format!("{head}: {}", status.message),
    }
}

/// The status inside an error chain, if the server answered with one.
pub fn api_status(e: &anyhow::Error) -> Option<&Status> {
    e.chain()
        .find_map(|c| match c.downcast_ref::<kube::Error>() {
            Some(kube::Error::Api(s)) => Some(s.as_ref()),
            _ => None,
        })
}

pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404 || s.reason == "NotFound")
}

/// One object's outcome in a command that works through several: the value of a success;
/// for a failure, its message on stderr and `ok` cleared, so the command goes on with the
/// rest and exits non-zero at the end, as kubectl does.
pub fn report<T>(result: anyhow::Result<T>, ok: &mut bool) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(e) => {
            eprintln!("{}", render(&e));
            *ok = false;
            None
        }
    }
}

/// The whole message for an error that ends a command.
pub fn render(e: &anyhow::Error) -> String {
    if let Some(status) = api_status(e) {
        // Contexts added on the way up (outermost first), up to the server error.
        let contexts: Vec<String> = e
            .chain()
            .take_while(|c| c.downcast_ref::<kube::Error>().is_none())
            .map(|c| c.to_string())
            .collect();
        let ctx = (!contexts.is_empty()).then(|| contexts.join(": "));
        return server_error_line(status, ctx.as_deref());
    }
    let text = format!("{e:#}");
    if text.contains("Connection refused") || text.contains("connection refused") {
        if let Some(server) = super::client::SERVER.get() {
            return format!(
                "The connection to the server {server} was refused - did you specify the right host or port?"
            );
        }
    }
    if text.starts_with("error: ") || text.starts_with("Error from server") {
        text
    } else {
        format!("error: {text}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    fn status(reason: &str, message: &str, code: u16) -> Status {
        Status {
            reason: reason.into(),
            message: message.into(),
            code,
            ..Default::default()
        }
    }

    #[test]
    fn not_found_reads_like_kubectl() {
        let e: anyhow::Error =
            kube::Error::Api(Box::new(status("NotFound", "pods \"x\" not found", 404))).into();
        assert_eq!(
            render(&e),
            "Error from server (NotFound): pods \"x\" not found"
        );
    }

    #[test]
    fn context_goes_between_reason_and_message() {
        let r: Result<(), kube::Error> = Err(kube::Error::Api(Box::new(status(
            "AlreadyExists",
            "deployments.apps \"web\" already exists",
            409,
        ))));
        let e = r.context("error when creating \"web.yaml\"").unwrap_err();
        assert_eq!(
            render(&e),
            "Error from server (AlreadyExists): error when creating \"web.yaml\": deployments.apps \"web\" already exists"
        );
    }

    #[test]
    fn other_errors_get_the_error_prefix() {
        let e = anyhow::anyhow!("the server doesn't have a resource type \"widgets\"");
        assert_eq!(
            render(&e),
            "error: the server doesn't have a resource type \"widgets\""
        );
    }
}
