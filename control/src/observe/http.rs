//! The apiserver's request metrics, recorded by one middleware around the
//! whole API: `apiserver_request_total` and
//! `apiserver_request_duration_seconds` for every request, and for watches
//! `apiserver_longrunning_requests` and `apiserver_registered_watchers`
//! for as long as the response body is open.
//!
//! Labels follow the apiserver's (`RequestInfoFactory` and the metrics'
//! `cleanVerb`): the verb is the HTTP method in capitals, except `LIST` for
//! a GET of a collection, `WATCH` for `?watch=true` (or the old `/watch/`
//! prefix) and `APPLY` for a server-side apply patch; scope is `resource`
//! when the URL names an object, `namespace` for a namespaced collection,
//! `cluster` otherwise. A path that names no served resource is labelled
//! with empty group, version and resource, so no URL a client makes up
//! adds a label value.

use std::time::Instant;

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use bosun::resources;
use futures::StreamExt;
use http::Method;
use prometheus_client::metrics::gauge::Gauge;

use super::{metrics, CodeLabels, RequestLabels, WatcherLabels};

/// What the metrics say about one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestInfo {
    pub labels: RequestLabels,
    /// The kind a watch is on, for `apiserver_registered_watchers`.
    pub kind: &'static str,
}

const APPLY_PATCH: &str = "application/apply-patch+yaml";

fn method_verb(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        _ => "other",
    }
}

impl RequestInfo {
    /// The labels of a request with `method`, `path`, `query` and
    /// Content-Type `content_type`.
    pub fn of(method: &Method, path: &str, query: Option<&str>, content_type: &str) -> Self {
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let (group, version, mut rest): (&str, &str, &[&str]) = match segments.as_slice() {
            ["api", version, rest @ ..] if !rest.is_empty() => ("", version, rest),
            ["apis", group, version, rest @ ..] if !rest.is_empty() => (group, version, rest),
            _ => return Self::non_resource(method),
        };
        let mut watch_path = false;
        if rest.first() == Some(&"watch") {
            watch_path = true;
            rest = &rest[1..];
        }
        // `namespaces/<ns>/<resource>...`, unless that is the namespace
        // itself (`namespaces/<ns>` or `namespaces/<ns>/status`).
        let (namespaced, rest) = match rest {
            ["namespaces", _, plural, ..]
                if resources::by_path(group, version, plural).is_some_and(|r| r.namespaced) =>
            {
                (true, &rest[2..])
            }
            _ => (false, rest),
        };
        let (plural, name, sub) = match rest {
            [plural] => (*plural, None, None),
            [plural, name] => (*plural, Some(*name), None),
            [plural, name, sub] => (*plural, Some(*name), Some(*sub)),
            _ => return Self::non_resource(method),
        };
        let Some(res) = resources::by_path(group, version, plural) else {
            return Self::non_resource(method);
        };
        let subresource = sub
            .and_then(|s| res.subresources.iter().find(|known| **known == s))
            .copied()
            .unwrap_or("");
        let scope = if name.is_some() {
            "resource"
        } else if namespaced {
            "namespace"
        } else {
            "cluster"
        };
        let watch_param = query.is_some_and(|q| {
            q.split('&')
                .any(|kv| matches!(kv, "watch=true" | "watch=1" | "watch=True"))
        });
        let mut verb = method_verb(method);
        if verb == "GET" && scope != "resource" {
            verb = "LIST";
        }
        if *method == Method::GET && (watch_param || watch_path) {
            verb = "WATCH";
        }
        if verb == "PATCH" && content_type.starts_with(APPLY_PATCH) {
            verb = "APPLY";
        }
        RequestInfo {
            labels: RequestLabels {
                verb,
                group: res.group,
                version: res.version,
                resource: res.plural,
                subresource,
                scope,
            },
            kind: res.kind,
        }
    }

    fn non_resource(method: &Method) -> Self {
        RequestInfo {
            labels: RequestLabels {
                verb: method_verb(method),
                group: "",
                version: "",
                resource: "",
                subresource: "",
                scope: "",
            },
            kind: "",
        }
    }

    fn with_code(&self, code: u16) -> CodeLabels {
        let l = &self.labels;
        CodeLabels {
            verb: l.verb,
            group: l.group,
            version: l.version,
            resource: l.resource,
            subresource: l.subresource,
            scope: l.scope,
            code,
        }
    }
}

/// Holds a gauge up by one until dropped.
struct Held(Gauge);

impl Held {
    fn new(gauge: Gauge) -> Held {
        gauge.inc();
        Held(gauge)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The middleware: labels the request, runs it, counts it with its code
/// and times it to the response head; a watch's body keeps the
/// long-running gauges up until it ends.
pub async fn record_request(req: Request, next: Next) -> Response {
    let content_type = req
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let info = RequestInfo::of(
        req.method(),
        req.uri().path(),
        req.uri().query(),
        content_type,
    );
    let started = Instant::now();
    let response = next.run(req).await;
    let m = metrics();
    m.requests
        .get_or_create(&info.with_code(response.status().as_u16()))
        .inc();
    m.request_duration
        .get_or_create(&info.labels)
        .observe(started.elapsed().as_secs_f64());
    if info.labels.verb != "WATCH" || !response.status().is_success() {
        return response;
    }
    let held = (
        Held::new(m.longrunning.get_or_create(&info.labels).clone()),
        Held::new(
            m.watchers
                .get_or_create(&WatcherLabels {
                    group: info.labels.group,
                    version: info.labels.version,
                    kind: info.kind,
                })
                .clone(),
        ),
    );
    let (parts, body) = response.into_parts();
    let body = body.into_data_stream().map(move |chunk| {
        let _watching = &held;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(method: Method, url: &str) -> RequestLabels {
        labels_typed(method, url, "application/json")
    }

    fn labels_typed(method: Method, url: &str, content_type: &str) -> RequestLabels {
        let uri: http::Uri = url.parse().unwrap();
        RequestInfo::of(&method, uri.path(), uri.query(), content_type).labels
    }

    fn expect(
        verb: &'static str,
        group: &'static str,
        resource: &'static str,
        subresource: &'static str,
        scope: &'static str,
    ) -> RequestLabels {
        RequestLabels {
            verb,
            group,
            version: "v1",
            resource,
            subresource,
            scope,
        }
    }

    #[test]
    fn verbs_follow_the_apiservers_metrics() {
        let pods = "/api/v1/namespaces/default/pods";
        assert_eq!(
            labels(Method::POST, pods),
            expect("POST", "", "pods", "", "namespace")
        );
        assert_eq!(
            labels(Method::GET, pods),
            expect("LIST", "", "pods", "", "namespace")
        );
        assert_eq!(
            labels(Method::GET, "/api/v1/pods?watch=true&resourceVersion=5"),
            expect("WATCH", "", "pods", "", "cluster")
        );
        assert_eq!(
            labels(Method::GET, "/api/v1/watch/namespaces/default/pods"),
            expect("WATCH", "", "pods", "", "namespace")
        );
        assert_eq!(
            labels(Method::GET, "/api/v1/namespaces/default/pods/web"),
            expect("GET", "", "pods", "", "resource")
        );
        assert_eq!(
            labels(Method::PUT, "/api/v1/namespaces/default/pods/web/status"),
            expect("PUT", "", "pods", "status", "resource")
        );
        assert_eq!(
            labels(
                Method::PATCH,
                "/apis/apps/v1/namespaces/ns/deployments/d/scale"
            ),
            expect("PATCH", "apps", "deployments", "scale", "resource")
        );
        assert_eq!(
            labels_typed(
                Method::PATCH,
                "/apis/apps/v1/namespaces/ns/deployments/d?fieldManager=kubectl",
                "application/apply-patch+yaml"
            ),
            expect("APPLY", "apps", "deployments", "", "resource")
        );
        assert_eq!(
            labels(Method::DELETE, "/api/v1/namespaces/default/pods"),
            expect("DELETE", "", "pods", "", "namespace")
        );
        assert_eq!(
            labels(Method::POST, "/api/v1/namespaces/default/pods/web/binding"),
            expect("POST", "", "pods", "binding", "resource")
        );
    }

    #[test]
    fn namespaces_themselves_are_cluster_scoped_objects() {
        assert_eq!(
            labels(Method::GET, "/api/v1/namespaces/kube-system"),
            expect("GET", "", "namespaces", "", "resource")
        );
        assert_eq!(
            labels(Method::PUT, "/api/v1/namespaces/kube-system/finalize"),
            expect("PUT", "", "namespaces", "finalize", "resource")
        );
        assert_eq!(
            labels(Method::GET, "/api/v1/nodes"),
            expect("LIST", "", "nodes", "", "cluster")
        );
    }

    #[test]
    fn paths_that_name_no_resource_add_no_label_values() {
        let none = |verb| RequestLabels {
            verb,
            group: "",
            version: "",
            resource: "",
            subresource: "",
            scope: "",
        };
        assert_eq!(labels(Method::GET, "/metrics"), none("GET"));
        assert_eq!(labels(Method::GET, "/apis/apps/v1"), none("GET"));
        assert_eq!(labels(Method::GET, "/api/v1/widgets-made-up"), none("GET"));
        assert_eq!(
            labels(
                Method::GET,
                "/api/v1/namespaces/default/pods/web/made-up-sub"
            ),
            expect("GET", "", "pods", "", "resource")
        );
        assert_eq!(labels(Method::TRACE, "/version"), none("other"));
    }
}
