//! The web view's files over real HTTPS: served to anyone (they hold no
//! data) with their type, an ETag that revalidates to 304, and a
//! Content-Security-Policy, while the API behind them still answers
//! anonymous users 401; `--ui=false` turns them off.

mod common;

use common::ControlPlane;
use kube::Client;

/// A client with the cluster's CA and none of the admin's credentials.
async fn anonymous(cp: &ControlPlane) -> Client {
    let mut config = cp.config().await;
    config.auth_info = Default::default();
    Client::try_from(config).expect("client")
}

/// GETs `path` with `headers`: status, response headers and body.
async fn get(
    client: &Client,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, http::HeaderMap, String) {
    let mut req = http::Request::builder().method("GET").uri(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let res = client
        .send(req.body(kube::client::Body::empty()).unwrap())
        .await
        .expect("response");
    let code = res.status().as_u16();
    let headers = res.headers().clone();
    let bytes = res.into_body().collect_bytes().await.expect("body");
    (code, headers, String::from_utf8_lossy(&bytes).into_owned())
}

#[tokio::test]
async fn the_view_is_static_cached_and_locked_down() {
    let cp = ControlPlane::start();
    let anon = anonymous(&cp).await;

    let (code, h, body) = get(&anon, "/ui/", &[]).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(h["content-type"], "text/html; charset=utf-8");
    assert!(body.contains("id=\"signin\""), "the sign-in page: {body}");
    let csp = h["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
        "{csp}"
    );
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["cache-control"], "no-cache");

    let (code, h, js) = get(&anon, "/ui/app.js", &[]).await;
    assert_eq!(code, 200);
    assert_eq!(h["content-type"], "text/javascript; charset=utf-8");
    assert!(js.contains("sessionStorage"), "the app's script");
    let etag = h["etag"].to_str().unwrap().to_string();
    let (code, _, body) = get(&anon, "/ui/app.js", &[("if-none-match", &etag)]).await;
    assert_eq!(
        (code, body.as_str()),
        (304, ""),
        "revalidated with its ETag"
    );
    let (code, h, _) = get(&anon, "/ui/app.css", &[]).await;
    assert_eq!(
        (code, h["content-type"].to_str().unwrap()),
        (200, "text/css; charset=utf-8")
    );
    let (code, h, _) = get(&anon, "/ui", &[]).await;
    assert_eq!((code, h["location"].to_str().unwrap()), (301, "/ui/"));
    let (code, _, _) = get(&anon, "/ui/nothing.js", &[]).await;
    assert_eq!(code, 404);

    // The data is behind the API's authentication as always.
    let (code, _, _) = get(&anon, "/api/v1/pods", &[]).await;
    assert_eq!(code, 401);
}

#[tokio::test]
async fn ui_false_turns_it_off() {
    let cp = ControlPlane::start_with(&["--ui=false"]);
    let (code, _, _) = get(&anonymous(&cp).await, "/ui/", &[]).await;
    assert_eq!(code, 401, "an anonymous request is the API's again");
    let (code, _, _) = get(&cp.client().await, "/ui/", &[]).await;
    assert_eq!(code, 404);
}
