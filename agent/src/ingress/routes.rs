//! The routing table: the Ingresses of this controller's class made into
//! hosts and paths, and a request's host and path matched against them as
//! the Ingress API defines it (`networking.k8s.io/v1` HTTPIngressPath):
//!
//! - hosts: a precise host matches the Host header exactly; `*.foo.com`
//!   matches exactly one label before `foo.com`; a rule without a host
//!   matches every host. A precise host is tried first, then a wildcard,
//!   then the rules without a host;
//! - paths: `Exact` matches the whole path; `Prefix` matches by path
//!   elements split on `/` (`/foo` matches `/foo`, `/foo/` and `/foo/bar`,
//!   not `/foobar`; a trailing `/` in either is ignored);
//!   `ImplementationSpecific` is `Prefix` here. The longest matching path
//!   wins, and `Exact` over `Prefix` for the same path;
//! - nothing matched: the default backend (the oldest Ingress's
//!   `defaultBackend`), else 404.

use std::collections::HashMap;

use k8s_openapi::api::networking::v1::{Ingress, IngressBackend};

/// How a rule's path is compared with the request's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    Exact,
    /// `Prefix`, and `ImplementationSpecific` as bosun implements it.
    Prefix,
}

/// A Service port an Ingress names: by number or by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PortRef {
    Number(u16),
    Name(String),
}

/// Where a request goes: a Service port in the Ingress's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    pub namespace: String,
    pub service: String,
    pub port: PortRef,
}

#[derive(Debug, Clone)]
struct Route {
    /// Path elements (`/a/b/` is `["a", "b"]`); for `Exact`, the path itself.
    elements: Vec<String>,
    path: String,
    kind: PathKind,
    target: Target,
}

/// Every route of this controller's Ingresses by host.
#[derive(Debug, Default, Clone)]
pub struct RouteTable {
    exact: HashMap<String, Vec<Route>>,
    /// `*.foo.com` under `foo.com`.
    wildcard: HashMap<String, Vec<Route>>,
    any_host: Vec<Route>,
    default_backend: Option<Target>,
}

/// The elements of a path: `/` is none, `/a//b/` is `a`, `b`.
fn elements(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|e| !e.is_empty())
        .map(str::to_string)
        .collect()
}

/// The target of a backend; None for a resource backend (which bosun does
/// not serve) or a service without a port.
pub fn target_of(namespace: &str, backend: &IngressBackend) -> Option<Target> {
    let svc = backend.service.as_ref()?;
    let port = svc.port.as_ref()?;
    let port = match (&port.name, port.number) {
        (Some(n), _) if !n.is_empty() => PortRef::Name(n.clone()),
        (_, Some(n)) => PortRef::Number(u16::try_from(n).ok()?),
        _ => return None,
    };
    Some(Target {
        namespace: namespace.to_string(),
        service: svc.name.clone(),
        port,
    })
}

impl RouteTable {
    /// The table of `ingresses` (already those of this controller's class),
    /// oldest first, which decides whose default backend is the default.
    pub fn build<'a>(ingresses: impl IntoIterator<Item = &'a Ingress>) -> RouteTable {
        let mut ingresses: Vec<&Ingress> = ingresses.into_iter().collect();
        ingresses.sort_by(|a, b| {
            let key = |i: &Ingress| {
                (
                    i.metadata.creation_timestamp.as_ref().map(|t| t.0),
                    i.metadata.namespace.clone(),
                    i.metadata.name.clone(),
                )
            };
            key(a).cmp(&key(b))
        });
        let mut table = RouteTable::default();
        for ing in ingresses {
            let ns = ing.metadata.namespace.as_deref().unwrap_or("default");
            let Some(spec) = ing.spec.as_ref() else {
                continue;
            };
            if table.default_backend.is_none() {
                table.default_backend =
                    spec.default_backend.as_ref().and_then(|b| target_of(ns, b));
            }
            for rule in spec.rules.iter().flatten() {
                let host = rule.host.as_deref().unwrap_or("").to_ascii_lowercase();
                let routes = if host.is_empty() {
                    &mut table.any_host
                } else if let Some(suffix) = host.strip_prefix("*.") {
                    table.wildcard.entry(suffix.to_string()).or_default()
                } else {
                    table.exact.entry(host).or_default()
                };
                for p in rule.http.iter().flat_map(|h| h.paths.iter()) {
                    let Some(target) = target_of(ns, &p.backend) else {
                        continue;
                    };
                    let path = p.path.clone().unwrap_or_else(|| "/".to_string());
                    let kind = match p.path_type.as_str() {
                        "Exact" => PathKind::Exact,
                        _ => PathKind::Prefix,
                    };
                    routes.push(Route {
                        elements: elements(&path),
                        path,
                        kind,
                        target,
                    });
                }
            }
        }
        table
    }

    /// Where a request for `host` (the Host header, a port allowed) and
    /// `path` goes; None: 404.
    pub fn route(&self, host: &str, path: &str) -> Option<&Target> {
        let host = host_without_port(host).to_ascii_lowercase();
        let wildcard = host
            .split_once('.')
            .and_then(|(_, suffix)| self.wildcard.get(suffix));
        [self.exact.get(&host), wildcard, Some(&self.any_host)]
            .into_iter()
            .flatten()
            .find_map(|routes| best_match(routes, path))
            .or(self.default_backend.as_ref())
    }

    /// Whether the table has nothing to serve.
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty()
            && self.wildcard.is_empty()
            && self.any_host.is_empty()
            && self.default_backend.is_none()
    }
}

/// `example.com:8080` is `example.com`; `[::1]:80` is `[::1]`.
pub fn host_without_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host
            .split_once(']')
            .map_or(host, |(h, _)| &host[..=h.len()]);
    }
    host.rsplit_once(':').map_or(host, |(h, _)| h)
}

/// Whether `route` matches the request path `path` (its elements `req`).
fn matches(route: &Route, path: &str, req: &[&str]) -> bool {
    match route.kind {
        PathKind::Exact => route.path == path,
        PathKind::Prefix => {
            route.elements.len() <= req.len() && route.elements.iter().zip(req).all(|(a, b)| a == b)
        }
    }
}

/// The longest matching route, `Exact` before `Prefix` at equal length.
fn best_match<'r>(routes: &'r [Route], path: &str) -> Option<&'r Target> {
    let req: Vec<&str> = path.split('/').filter(|e| !e.is_empty()).collect();
    routes
        .iter()
        .filter(|r| matches(r, path, &req))
        .max_by_key(|r| {
            (
                r.elements.len(),
                r.path.trim_end_matches('/').len(),
                r.kind == PathKind::Exact,
            )
        })
        .map(|r| &r.target)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ingress(rules: serde_json::Value, default_backend: Option<&str>) -> Ingress {
        let mut spec = json!({ "rules": rules });
        if let Some(svc) = default_backend {
            spec["defaultBackend"] = json!({"service": {"name": svc, "port": {"number": 80}}});
        }
        serde_json::from_value(json!({
            "metadata": {"name": "i", "namespace": "ns"},
            "spec": spec,
        }))
        .unwrap()
    }

    /// One host's paths, each `(pathType, path, service)`.
    fn paths(host: &str, list: &[(&str, &str, &str)]) -> serde_json::Value {
        let paths: Vec<_> = list
            .iter()
            .map(|(kind, path, svc)| {
                json!({"path": path, "pathType": kind,
                       "backend": {"service": {"name": svc, "port": {"number": 80}}}})
            })
            .collect();
        json!({"host": host, "http": {"paths": paths}})
    }

    fn routed<'t>(t: &'t RouteTable, host: &str, path: &str) -> Option<&'t str> {
        t.route(host, path).map(|t| t.service.as_str())
    }

    /// The Ingress documentation's table of path matches
    /// (concepts/services-networking/ingress, "Examples").
    #[test]
    fn upstream_path_matching_examples() {
        // (the rules' (pathType, path), the request path, whether it matches)
        type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, bool);
        let cases: &[Case] = &[
            (&[("Prefix", "/")], "/anything/at/all", true),
            (&[("Exact", "/foo")], "/foo", true),
            (&[("Exact", "/foo")], "/bar", false),
            (&[("Exact", "/foo")], "/foo/", false),
            (&[("Exact", "/foo/")], "/foo", false),
            (&[("Prefix", "/foo")], "/foo", true),
            (&[("Prefix", "/foo")], "/foo/", true),
            (&[("Prefix", "/foo/")], "/foo", true),
            (&[("Prefix", "/foo/")], "/foo/", true),
            (&[("Prefix", "/aaa/bb")], "/aaa/bbb", false),
            (&[("Prefix", "/aaa/bbb")], "/aaa/bbb", true),
            (&[("Prefix", "/aaa/bbb/")], "/aaa/bbb", true),
            (&[("Prefix", "/aaa/bbb")], "/aaa/bbb/", true),
            (&[("Prefix", "/aaa/bbb")], "/aaa/bbb/ccc", true),
            (&[("Prefix", "/aaa/bbb")], "/aaa/bbbxyz", false),
            (&[("Prefix", "/aaa")], "/ccc", false),
            (&[("ImplementationSpecific", "/aaa")], "/aaa/x", true),
        ];
        for (rules, path, want) in cases {
            let list: Vec<_> = rules.iter().map(|(k, p)| (*k, *p, "svc")).collect();
            let t = RouteTable::build([&ingress(json!([paths("h.test", &list)]), None)]);
            assert_eq!(
                routed(&t, "h.test", path).is_some(),
                *want,
                "{rules:?} {path}"
            );
        }
    }

    #[test]
    fn the_longest_path_wins_and_exact_beats_prefix() {
        let t = RouteTable::build([&ingress(
            json!([paths(
                "h.test",
                &[
                    ("Prefix", "/", "root"),
                    ("Prefix", "/aaa", "aaa"),
                    ("Prefix", "/aaa/bbb", "bbb"),
                    ("Prefix", "/foo", "foo-prefix"),
                    ("Exact", "/foo", "foo-exact"),
                ]
            )]),
            None,
        )]);
        assert_eq!(routed(&t, "h.test", "/aaa/ccc"), Some("aaa"));
        assert_eq!(routed(&t, "h.test", "/aaa/bbb"), Some("bbb"));
        assert_eq!(routed(&t, "h.test", "/ccc"), Some("root"));
        assert_eq!(routed(&t, "h.test", "/foo"), Some("foo-exact"));
        assert_eq!(routed(&t, "h.test", "/foo/x"), Some("foo-prefix"));
    }

    #[test]
    fn hosts_exact_then_wildcard_then_any_then_default() {
        let t = RouteTable::build([&ingress(
            json!([
                paths("a.example.com", &[("Prefix", "/", "exact")]),
                paths("*.example.com", &[("Prefix", "/", "wild")]),
                paths("", &[("Prefix", "/any", "any")]),
            ]),
            Some("fallback"),
        )]);
        assert_eq!(routed(&t, "a.example.com", "/"), Some("exact"));
        assert_eq!(routed(&t, "A.Example.com:8080", "/"), Some("exact"));
        assert_eq!(routed(&t, "b.example.com", "/"), Some("wild"));
        // One label only: not the bare domain, not two labels.
        assert_eq!(routed(&t, "example.com", "/x"), Some("fallback"));
        assert_eq!(routed(&t, "c.b.example.com", "/any/1"), Some("any"));
        assert_eq!(routed(&t, "other.test", "/nothing"), Some("fallback"));
        let none = RouteTable::build([&ingress(
            json!([paths("a.test", &[("Exact", "/", "x")])]),
            None,
        )]);
        assert_eq!(routed(&none, "b.test", "/"), None);
    }

    #[test]
    fn ports_by_name_and_number_and_host_ports() {
        let ing: Ingress = serde_json::from_value(json!({
            "metadata": {"name": "i", "namespace": "ns"},
            "spec": {"rules": [{"host": "h.test", "http": {"paths": [
                {"path": "/", "pathType": "Prefix",
                 "backend": {"service": {"name": "web", "port": {"name": "http"}}}}]}}]}
        }))
        .unwrap();
        let t = RouteTable::build([&ing]);
        assert_eq!(
            t.route("h.test:80", "/"),
            Some(&Target {
                namespace: "ns".into(),
                service: "web".into(),
                port: PortRef::Name("http".into())
            })
        );
        assert_eq!(host_without_port("[::1]:443"), "[::1]");
        assert_eq!(host_without_port("h.test"), "h.test");
    }
}
