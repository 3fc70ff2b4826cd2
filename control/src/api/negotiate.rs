//! Which form of an answer a client's Accept header asks for, as
//! kube-apiserver's `negotiation` package and `RequestScope` decide it:
//! the encoding (JSON or Kubernetes protobuf) and what the object is
//! turned into first (nothing, a Table, or its metadata only, a
//! `meta.k8s.io` `PartialObjectMetadata(List)`).
//!
//! The media ranges are tried in order of preference (`q`, then the more
//! specific first); the first the server can answer wins. A range asking
//! for a conversion (`as=`, `g=`, `v=`) is answerable only for a
//! `meta.k8s.io/v1` or `v1beta1` `Table` (in JSON) or
//! `PartialObjectMetadata(List)` (in JSON or protobuf); a custom resource
//! itself has no protobuf form (its metadata does). When no range is
//! answerable and one of them asked for a conversion, the answer is
//! upstream's 406; a header naming only media types bosun does not write
//! (YAML, `text/html`) still gets JSON, as it did before.

use http::HeaderMap;

use super::error::{ApiError, ApiResult};
use super::protobuf::MEDIA_TYPE as PROTOBUF;

/// How the answer is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoding {
    #[default]
    Json,
    Protobuf,
}

/// What the object (or list) is turned into before it is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Convert {
    /// The object as it is.
    #[default]
    Object,
    /// A `meta.k8s.io` Table (server-side printing).
    Table,
    /// `PartialObjectMetadata` of `meta.k8s.io/<version>`: one object, or
    /// each object of a watch.
    Metadata(&'static str),
    /// `PartialObjectMetadataList` of `meta.k8s.io/<version>`: a list.
    MetadataList(&'static str),
}

/// The negotiated form of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Output {
    pub encoding: Encoding,
    pub convert: Convert,
}

impl Output {
    /// The `meta.k8s.io` version of the metadata-only form asked for.
    pub fn metadata_version(&self) -> Option<&'static str> {
        match self.convert {
            Convert::Metadata(v) | Convert::MetadataList(v) => Some(v),
            _ => None,
        }
    }
}

/// What every resource endpoint can write, in upstream's 406 message.
const ACCEPTED: &str = "application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// The 406 for an Accept header nothing can answer.
pub fn not_acceptable() -> ApiError {
    ApiError::not_acceptable(format!(
        "only the following media types are accepted: {ACCEPTED}"
    ))
}

/// One media range of an Accept header.
struct Clause<'a> {
    media: &'a str,
    params: Vec<(&'a str, &'a str)>,
    q: f32,
}

impl Clause<'_> {
    fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }

    fn asks_conversion(&self) -> bool {
        ["as", "g", "v"].iter().any(|p| self.param(p).is_some())
    }
}

fn clauses(headers: &HeaderMap) -> Vec<Clause<'_>> {
    let mut out: Vec<Clause<'_>> = headers
        .get_all(http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|range| {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().filter(|m| !m.is_empty())?;
            let mut params = Vec::new();
            let mut q = 1.0;
            for p in parts {
                let Some((k, v)) = p.split_once('=') else {
                    continue;
                };
                let (k, v) = (k.trim(), v.trim().trim_matches('"'));
                if k == "q" {
                    q = v.parse().unwrap_or(0.0);
                } else {
                    params.push((k, v));
                }
            }
            Some(Clause { media, params, q })
        })
        .collect();
    // Preferred first: by q, then a concrete type before a wildcard
    // (goautoneg's order); otherwise as the client listed them.
    let wild = |c: &Clause<'_>| c.media.starts_with('*') as u8 + c.media.ends_with("/*") as u8;
    out.sort_by(|a, b| {
        b.q.partial_cmp(&a.q)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(wild(a).cmp(&wild(b)))
    });
    out
}

/// The answer one media range asks for, if the server can give it.
fn answerable(clause: &Clause<'_>, custom: bool) -> Option<Output> {
    if clause.q <= 0.0 {
        return None;
    }
    let encoding = match clause.media.to_ascii_lowercase().as_str() {
        "application/json" | "application/*" | "*/*" => Encoding::Json,
        PROTOBUF => Encoding::Protobuf,
        _ => return None,
    };
    if clause
        .param("stream")
        .is_some_and(|s| !s.is_empty() && s != "watch")
    {
        return None;
    }
    let convert = if clause.asks_conversion() {
        let version = match (clause.param("g"), clause.param("v")) {
            (Some("meta.k8s.io"), Some("v1")) => "v1",
            (Some("meta.k8s.io"), Some("v1beta1")) => "v1beta1",
            _ => return None,
        };
        match clause.param("as") {
            // Tables are written in JSON (and YAML) only.
            Some("Table") if encoding == Encoding::Json => Convert::Table,
            Some("PartialObjectMetadata") => Convert::Metadata(version),
            Some("PartialObjectMetadataList") => Convert::MetadataList(version),
            _ => return None,
        }
    } else {
        // A custom resource has no protobuf form of its own.
        if custom && encoding == Encoding::Protobuf {
            return None;
        }
        Convert::Object
    };
    Some(Output { encoding, convert })
}

/// The form the request's Accept header asks for (`custom`: the resource
/// is a custom resource), or a 406 when it asks only for conversions the
/// server does not know.
pub fn negotiate(headers: &HeaderMap, custom: bool) -> ApiResult<Output> {
    let clauses = clauses(headers);
    if let Some(out) = clauses.iter().find_map(|c| answerable(c, custom)) {
        return Ok(out);
    }
    if clauses.iter().any(Clause::asks_conversion) {
        return Err(not_acceptable());
    }
    Ok(Output::default())
}

/// As [`negotiate`], taking what cannot be answered as plain JSON: for
/// answers that are not a resource's objects (reviews, Status).
pub fn lenient(headers: &HeaderMap) -> Output {
    negotiate(headers, false).unwrap_or_default()
}

/// The 406 upstream gives for the metadata form of the wrong shape: a
/// single object's on a list or the other way round.
pub fn check_shape(output: &Output, list: bool, what: &str) -> ApiResult<()> {
    match output.convert {
        Convert::Metadata(_) if list => Err(ApiError::not_acceptable(format!(
            "you requested PartialObjectMetadata, but the requested object is a list ({what})"
        ))),
        Convert::MetadataList(_) if !list => Err(ApiError::not_acceptable(format!(
            "you requested PartialObjectMetadataList, but the requested object is not a list ({what})"
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(http::header::ACCEPT, v.parse().unwrap());
        h
    }

    fn out(encoding: Encoding, convert: Convert) -> Output {
        Output { encoding, convert }
    }

    #[test]
    fn clients_headers_pick_their_forms() {
        use Convert::*;
        use Encoding::*;
        let cases = [
            ("", out(Json, Object)),
            ("application/json", out(Json, Object)),
            ("*/*", out(Json, Object)),
            (
                "application/vnd.kubernetes.protobuf,application/json",
                out(Protobuf, Object),
            ),
            (
                "application/json,application/vnd.kubernetes.protobuf",
                out(Json, Object),
            ),
            // kubectl get
            (
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
                out(Json, Table),
            ),
            // kube-rs
            (
                "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
                out(Json, Metadata("v1")),
            ),
            (
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
                out(Json, MetadataList("v1")),
            ),
            // client-go's metadata client
            (
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
                out(Protobuf, MetadataList("v1")),
            ),
            (
                "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1",
                out(Json, Metadata("v1beta1")),
            ),
            // An unknown conversion first, a known form after it.
            (
                "application/json;as=Foo;g=meta.k8s.io;v=v1,application/json",
                out(Json, Object),
            ),
            // Preference by q.
            (
                "application/json;q=0.5,application/vnd.kubernetes.protobuf",
                out(Protobuf, Object),
            ),
            // Only types bosun does not write: JSON, as before.
            ("application/yaml", out(Json, Object)),
            ("text/html", out(Json, Object)),
        ];
        for (header, want) in cases {
            assert_eq!(negotiate(&accept(header), false).unwrap(), want, "{header}");
        }
    }

    #[test]
    fn unknown_conversions_are_not_acceptable() {
        for header in [
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1alpha1",
            "application/json;as=PartialObjectMetadata;g=k8s.io;v=v1",
            "application/json;as=PartialObject;g=meta.k8s.io;v=v1",
            "application/json;as=Service;g=;v=v1",
            "application/json;g=meta.k8s.io;v=v1",
            "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1",
            "application/json;stream=other;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        ] {
            let err = negotiate(&accept(header), false).unwrap_err();
            assert_eq!((err.code, err.reason), (406, "NotAcceptable"), "{header}");
            assert_eq!(
                err.message,
                "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
            );
        }
    }

    #[test]
    fn custom_resources_have_protobuf_metadata_only() {
        let pb = accept("application/vnd.kubernetes.protobuf,application/json");
        assert_eq!(
            negotiate(&pb, true).unwrap(),
            out(Encoding::Json, Convert::Object)
        );
        let meta = accept(
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        );
        assert_eq!(
            negotiate(&meta, true).unwrap(),
            out(Encoding::Protobuf, Convert::Metadata("v1"))
        );
    }

    #[test]
    fn the_metadata_form_must_fit_the_answer() {
        let one = out(Encoding::Json, Convert::Metadata("v1"));
        let many = out(Encoding::Json, Convert::MetadataList("v1"));
        assert!(check_shape(&one, false, "Pod").is_ok());
        assert!(check_shape(&many, true, "PodList").is_ok());
        assert_eq!(check_shape(&one, true, "PodList").unwrap_err().code, 406);
        assert_eq!(check_shape(&many, false, "Pod").unwrap_err().code, 406);
    }
}
