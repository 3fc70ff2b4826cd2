//! Server-side printing: a `meta.k8s.io/v1` Table for clients that ask for
//! one in their Accept header (kubectl and bosun's CLI do).

use bosun::printers;
use bosun::resources::ResourceInfo;
use chrono::Utc;
use http::HeaderMap;
use serde_json::Value;

/// What each row carries besides its cells (`?includeObject=`).
pub use bosun::printers::IncludeObject;

/// Whether the client prefers a Table (`application/json;as=Table;g=meta.k8s.io;v=v1`).
pub fn wants_table(headers: &HeaderMap) -> bool {
    headers
        .get_all(http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|media| {
            let params: Vec<&str> = media.split(';').map(str::trim).collect();
            params.contains(&"as=Table") && params.contains(&"g=meta.k8s.io")
        })
}

/// A Table of `objects` with the kind's columns, their ages as of now.
pub fn table(
    res: &ResourceInfo,
    objects: &[Value],
    resource_version: &str,
    include: IncludeObject,
) -> Value {
    printers::table(res, objects, resource_version, include, Utc::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_accept_header_asks_for_a_table() {
        let mut h = HeaderMap::new();
        h.insert(
            http::header::ACCEPT,
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
                .parse()
                .unwrap(),
        );
        assert!(wants_table(&h));
        h.insert(http::header::ACCEPT, "application/json".parse().unwrap());
        assert!(!wants_table(&h));
    }
}
