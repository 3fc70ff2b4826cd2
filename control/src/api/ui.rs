//! The web view at `/ui/` (`--ui=false` turns it off): a few static
//! files compiled into the binary. They hold no cluster data: the page
//! signs in with a bearer token the user pastes and reads the cluster
//! through the ordinary API with it, so authentication and RBAC apply
//! unchanged. The token lives in the tab's sessionStorage and travels only
//! in the Authorization header; no cookie is set, so no request can ride
//! on ambient credentials (nothing for CSRF to forge).

use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};

/// Where the view is served.
pub const PREFIX: &str = "/ui";

/// What a page may load: only its own files and the API on the same
/// origin; no inline script or style, no framing.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

/// One compiled-in file.
pub struct Asset {
    pub path: &'static str,
    pub content_type: &'static str,
    pub body: &'static [u8],
    /// A strong ETag: FNV-1a of the body, computed at compile time.
    pub etag: &'static str,
}

const fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    hash
}

/// `"<16 hex digits>"`, the quoted form an ETag header carries.
const fn etag_of(bytes: &[u8]) -> [u8; 18] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let hash = fnv1a(bytes);
    let mut out = [b'"'; 18];
    let mut i = 0;
    while i < 16 {
        out[1 + i] = HEX[((hash >> (60 - 4 * i)) & 0xf) as usize];
        i += 1;
    }
    out
}

macro_rules! asset {
    ($path:literal, $file:literal, $type:literal) => {{
        const BODY: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/ui/", $file));
        const TAG: [u8; 18] = etag_of(BODY);
        Asset {
            path: $path,
            content_type: $type,
            body: BODY,
            etag: match std::str::from_utf8(&TAG) {
                Ok(s) => s,
                Err(_) => panic!("an ETag is ASCII"),
            },
        }
    }};
}

/// Every file of the view; the first load fetches all of them.
pub const ASSETS: &[Asset] = &[
    asset!("/ui/", "index.html", "text/html; charset=utf-8"),
    asset!("/ui/app.js", "app.js", "text/javascript; charset=utf-8"),
    asset!("/ui/app.css", "app.css", "text/css; charset=utf-8"),
    asset!("/ui/pages.css", "pages.css", "text/css; charset=utf-8"),
    asset!("/ui/pages.js", "pages.js", "text/javascript; charset=utf-8"),
    asset!(
        "/ui/workload.js",
        "workload.js",
        "text/javascript; charset=utf-8"
    ),
    asset!("/ui/pod.js", "pod.js", "text/javascript; charset=utf-8"),
    asset!("/ui/hpa.js", "hpa.js", "text/javascript; charset=utf-8"),
];

/// Whether `path` is the view's (and so answered by [`serve`] without
/// authentication).
pub fn is_ui(path: &str) -> bool {
    path == PREFIX || path.starts_with("/ui/")
}

/// Answers a request for one of the view's files.
pub fn serve(method: &Method, path: &str, headers: &HeaderMap) -> Response {
    if path == PREFIX {
        return (StatusCode::MOVED_PERMANENTLY, [(header::LOCATION, "/ui/")]).into_response();
    }
    let Some(asset) = ASSETS.iter().find(|a| a.path == path) else {
        return with_security(
            (
                StatusCode::NOT_FOUND,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                "not found\n",
            )
                .into_response(),
        );
    };
    if method != Method::GET && method != Method::HEAD {
        return with_security(
            (
                StatusCode::METHOD_NOT_ALLOWED,
                [(header::ALLOW, "GET, HEAD")],
                "method not allowed\n",
            )
                .into_response(),
        );
    }
    let fresh = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| {
            let t = t.trim();
            t == "*" || t.trim_start_matches("W/") == asset.etag
        });
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        // axum leaves out the body of a HEAD's answer.
        asset.body.into_response()
    };
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    h.insert(header::ETAG, HeaderValue::from_static(asset.etag));
    // Revalidated every time (a 304 when unchanged), so a new binary's
    // files are never mixed with an old one's.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    with_security(response)
}

fn with_security(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(path: &str, headers: &[(&'static str, &str)]) -> Response {
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            map.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        serve(&Method::GET, path, &map)
    }

    #[test]
    fn files_have_their_type_an_etag_and_a_policy() {
        for (path, ty) in [
            ("/ui/", "text/html"),
            ("/ui/app.js", "text/javascript"),
            ("/ui/app.css", "text/css"),
            ("/ui/pages.css", "text/css"),
            ("/ui/pages.js", "text/javascript"),
            ("/ui/workload.js", "text/javascript"),
            ("/ui/pod.js", "text/javascript"),
            ("/ui/hpa.js", "text/javascript"),
        ] {
            let r = get(path, &[]);
            assert_eq!(r.status(), StatusCode::OK, "{path}");
            let h = r.headers();
            assert!(
                h[header::CONTENT_TYPE].to_str().unwrap().starts_with(ty),
                "{path}"
            );
            assert!(h[header::CONTENT_SECURITY_POLICY]
                .to_str()
                .unwrap()
                .contains("script-src 'self'"));
            assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
            let tag = h[header::ETAG].to_str().unwrap();
            assert_eq!(tag.len(), 18, "{tag}");
            // The same tag back: not modified.
            assert_eq!(
                get(path, &[("if-none-match", tag)]).status(),
                StatusCode::NOT_MODIFIED
            );
        }
        // The files differ, so do their tags.
        assert_ne!(ASSETS[0].etag, ASSETS[1].etag);
        assert_eq!(
            get("/ui/app.js", &[("if-none-match", "\"0000000000000000\"")]).status(),
            StatusCode::OK
        );
    }

    #[test]
    fn unknown_paths_and_writes_are_refused() {
        assert_eq!(get("/ui/secret", &[]).status(), StatusCode::NOT_FOUND);
        assert_eq!(
            serve(&Method::POST, "/ui/", &HeaderMap::new()).status(),
            StatusCode::METHOD_NOT_ALLOWED
        );
        let r = get("/ui", &[]);
        assert_eq!(r.status(), StatusCode::MOVED_PERMANENTLY);
        assert_eq!(r.headers()[header::LOCATION], "/ui/");
    }

    #[test]
    fn the_first_load_stays_small() {
        let total: usize = ASSETS.iter().map(|a| a.body.len()).sum();
        assert!(total < 200 * 1024, "{total} bytes");
    }
}
