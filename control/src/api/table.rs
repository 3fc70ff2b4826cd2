//! Server-side printing: a `meta.k8s.io/v1` Table for clients that ask for
//! one in their Accept header (kubectl and bosun's CLI do).

use bosun::printers;
use bosun::resources::ResourceInfo;
use chrono::Utc;
use http::HeaderMap;
use serde_json::Value;

use super::custom::CustomVersion;

/// What each row carries besides its cells (`?includeObject=`).
pub use bosun::printers::IncludeObject;

/// Whether the client prefers a Table (`application/json;as=Table;g=meta.k8s.io;v=v1`
/// is the first form of its Accept header the server can answer).
pub fn wants_table(headers: &HeaderMap) -> bool {
    super::negotiate::lenient(headers).convert == super::negotiate::Convert::Table
}

/// A Table of `objects` with the kind's columns (a custom resource's
/// from its CRD version), their ages as of now.
pub fn table(
    res: &ResourceInfo,
    custom: Option<&CustomVersion>,
    objects: &[Value],
    resource_version: &str,
    include: IncludeObject,
) -> Value {
    match custom {
        Some(v) => super::custom::table::table(v, objects, resource_version, include, Utc::now()),
        None => printers::table(res, objects, resource_version, include, Utc::now()),
    }
}

/// A Table without rows, for [`row`]s to be added to `rows`.
pub fn empty_table(
    res: &ResourceInfo,
    custom: Option<&CustomVersion>,
    resource_version: &str,
) -> Value {
    match custom {
        Some(v) => {
            super::custom::table::table(v, &[], resource_version, IncludeObject::None, Utc::now())
        }
        None => printers::empty_table(res, resource_version),
    }
}

/// One row of a Table of `res`.
pub fn row(
    res: &ResourceInfo,
    custom: Option<&CustomVersion>,
    obj: &Value,
    include: IncludeObject,
) -> Value {
    match custom {
        Some(v) => super::custom::table::row(v, obj, include, Utc::now()),
        None => printers::row(res, obj, include, Utc::now()),
    }
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
