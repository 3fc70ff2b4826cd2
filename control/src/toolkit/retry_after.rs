//! The in-process clients wait and try again when the API asks them to, as
//! client-go's `rest.Request` does (`checkWait`, `retryAfterSeconds`,
//! `withRetry.IsNextRetry`): an answer of 429 Too Many Requests, or any
//! 5xx, that carries `Retry-After: N` is sent again after N seconds, at
//! most [`MAX_RETRIES`] times; without `Retry-After` nothing is retried.
//!
//! API Priority and Fairness refuses a request with 429 and
//! `Retry-After: 1` when its level's seats and queues are full; without
//! this, a controller's sync failed at the first refusal and its key backed
//! off exponentially (to minutes under a sustained burst, such as a
//! ReplicaSet deleting 500 pods at once).
//!
//! Only a request whose body can be sent again is retried (kube's
//! `Body::try_clone`: the body is bytes in memory, as every request of a
//! kube `Api` is), and never a watch (`watch=true`): its caller (the
//! informers' watcher) starts it again with a back-off of its own.

use std::time::Duration;

use http::{Request, Response, StatusCode};
use kube::client::Body;

/// The most times one request is sent again (client-go's `maxRetries`,
/// set to 10 in `rest.NewRequest`).
pub const MAX_RETRIES: u32 = 10;

/// The tower layer: wrap an in-process client's service in it.
pub fn layer() -> tower::retry::RetryLayer<RetryAfter> {
    tower::retry::RetryLayer::new(RetryAfter::default())
}

/// The retry policy: one copy per request counts its retries.
#[derive(Clone, Debug, Default)]
pub struct RetryAfter {
    retries: u32,
}

/// How long the server asks to wait before the request is sent again
/// (`checkWait`): an answer of 429 or 5xx with `Retry-After` in whole
/// seconds; None for any other answer. A negative wait is no wait.
pub fn requested_wait(status: StatusCode, headers: &http::HeaderMap) -> Option<Duration> {
    if status != StatusCode::TOO_MANY_REQUESTS && !status.is_server_error() {
        return None;
    }
    let seconds: i64 = headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds.max(0) as u64))
}

/// Whether the request is a watch (`?watch=true` or `?watch=1`).
fn is_watch(req: &Request<Body>) -> bool {
    req.uri().query().is_some_and(|q| {
        q.split('&')
            .any(|pair| matches!(pair, "watch=true" | "watch=1"))
    })
}

impl<B, E> tower::retry::Policy<Request<Body>, Response<B>, E> for RetryAfter {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        req: &mut Request<Body>,
        result: &mut Result<Response<B>, E>,
    ) -> Option<Self::Future> {
        let response = result.as_ref().ok()?;
        let wait = requested_wait(response.status(), response.headers())?;
        if self.retries >= MAX_RETRIES {
            tracing::debug!(uri = %req.uri(), status = %response.status(),
                "giving up after {MAX_RETRIES} retries");
            return None;
        }
        self.retries += 1;
        tracing::debug!(uri = %req.uri(), status = %response.status(), ?wait,
            attempt = self.retries, "the API asked to retry after a while");
        Some(tokio::time::sleep(wait))
    }

    fn clone_request(&mut self, req: &Request<Body>) -> Option<Request<Body>> {
        if is_watch(req) {
            return None;
        }
        let mut copy = Request::new(req.body().try_clone()?);
        *copy.method_mut() = req.method().clone();
        *copy.uri_mut() = req.uri().clone();
        *copy.version_mut() = req.version();
        *copy.headers_mut() = req.headers().clone();
        *copy.extensions_mut() = req.extensions().clone();
        Some(copy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};
    use tokio::time::Instant;

    /// A scripted answer: the status and its `Retry-After`, if any.
    type Answer = (u16, Option<&'static str>);
    /// A request as the fake API got it: method, URI, body, when.
    type Seen = (String, String, Vec<u8>, Instant);

    /// A fake API answering from a script, one answer per request, and
    /// recording what it was sent (method, URI, body).
    #[derive(Clone, Default)]
    struct Scripted {
        answers: Arc<Mutex<VecDeque<Answer>>>,
        seen: Arc<Mutex<Vec<Seen>>>,
    }

    impl Scripted {
        fn new(answers: &[(u16, Option<&'static str>)]) -> Scripted {
            Scripted {
                answers: Arc::new(Mutex::new(answers.iter().copied().collect())),
                ..Default::default()
            }
        }

        fn client(&self) -> kube::Client {
            let me = self.clone();
            let service = tower::ServiceBuilder::new()
                .layer(layer())
                .service(tower::service_fn(move |req: Request<Body>| {
                    let me = me.clone();
                    async move {
                        let (parts, body) = req.into_parts();
                        let bytes = axum::body::to_bytes(axum::body::Body::new(body), usize::MAX)
                            .await
                            .unwrap()
                            .to_vec();
                        me.seen.lock().unwrap().push((
                            parts.method.to_string(),
                            parts.uri.to_string(),
                            bytes,
                            Instant::now(),
                        ));
                        let (code, after) =
                            me.answers.lock().unwrap().pop_front().unwrap_or((200, None));
                        let mut res = Response::builder().status(code);
                        if let Some(after) = after {
                            res = res.header("Retry-After", after);
                        }
                        let body = if code == 200 {
                            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}"#
                                .to_string()
                        } else {
                            format!(
                                r#"{{"apiVersion":"v1","kind":"Status","status":"Failure","message":"answered {code}","code":{code}}}"#
                            )
                        };
                        Ok::<_, std::convert::Infallible>(
                            res.body(axum::body::Body::from(body)).unwrap(),
                        )
                    }
                }));
            kube::Client::new(service, "default")
        }

        fn seen(&self) -> Vec<(String, String, Vec<u8>, Instant)> {
            self.seen.lock().unwrap().clone()
        }
    }

    fn config_maps(client: &kube::Client) -> kube::Api<k8s_openapi::api::core::v1::ConfigMap> {
        kube::Api::namespaced(client.clone(), "default")
    }

    fn code(e: kube::Error) -> u16 {
        match e {
            kube::Error::Api(s) => s.code,
            other => panic!("not an API error: {other}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_429_with_retry_after_is_sent_again_after_the_wait_with_its_body() {
        let api = Scripted::new(&[(429, Some("1")), (429, Some("2")), (200, None)]);
        let start = Instant::now();
        let cm = serde_json::from_value(serde_json::json!({"metadata": {"name": "c"}})).unwrap();
        let created = config_maps(&api.client())
            .create(&Default::default(), &cm)
            .await
            .expect("created after two refusals");
        assert_eq!(created.metadata.name.as_deref(), Some("c"));
        let seen = api.seen();
        assert_eq!(seen.len(), 3);
        for (method, uri, body, _) in &seen {
            assert_eq!(method, "POST");
            assert_eq!(uri, &seen[0].1);
            assert_eq!(body, &seen[0].2);
            assert!(!body.is_empty());
        }
        // Each attempt waited the seconds the previous answer named.
        assert_eq!(seen[1].3 - start, Duration::from_secs(1));
        assert_eq!(seen[2].3 - seen[1].3, Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_5xx_with_retry_after_is_retried_too() {
        let api = Scripted::new(&[(503, Some("1")), (500, Some("0")), (200, None)]);
        config_maps(&api.client()).get("c").await.expect("got it");
        assert_eq!(api.seen().len(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_after_ten_retries_with_the_last_answer() {
        let api = Scripted::new(&[(429, Some("1")); 20]);
        let start = Instant::now();
        let err = config_maps(&api.client())
            .delete("c", &Default::default())
            .await
            .unwrap_err();
        assert_eq!(code(err), 429);
        assert_eq!(api.seen().len(), 1 + MAX_RETRIES as usize);
        assert_eq!(start.elapsed(), Duration::from_secs(MAX_RETRIES as u64));
    }

    #[tokio::test(start_paused = true)]
    async fn no_retry_without_retry_after_nor_for_other_answers_nor_watches() {
        for answer in [(429, None), (503, None), (409, Some("1")), (404, Some("1"))] {
            let api = Scripted::new(&[answer, (200, None)]);
            let err = config_maps(&api.client()).get("c").await.unwrap_err();
            assert_eq!(code(err), answer.0);
            assert_eq!(api.seen().len(), 1, "{answer:?}");
        }
        // A watch's refusal goes back to its caller at once.
        let api = Scripted::new(&[(429, Some("1")), (200, None)]);
        let req =
            Request::get("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=1")
                .body(Body::empty())
                .unwrap();
        let res = api.client().send(req).await.unwrap();
        assert_eq!(res.status(), 429);
        assert_eq!(api.seen().len(), 1);
    }

    #[test]
    fn the_wait_is_read_as_client_go_reads_it() {
        let headers = |v: &str| {
            let mut h = http::HeaderMap::new();
            h.insert(http::header::RETRY_AFTER, v.parse().unwrap());
            h
        };
        let too_many = StatusCode::TOO_MANY_REQUESTS;
        assert_eq!(
            requested_wait(too_many, &headers("3")),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            requested_wait(too_many, &headers("-1")),
            Some(Duration::ZERO)
        );
        // client-go reads whole seconds only, not an HTTP date.
        assert_eq!(
            requested_wait(too_many, &headers("Wed, 21 Oct 2015 07:28:00 GMT")),
            None
        );
        assert_eq!(requested_wait(too_many, &http::HeaderMap::new()), None);
        assert_eq!(
            requested_wait(StatusCode::GATEWAY_TIMEOUT, &headers("1")),
            Some(Duration::from_secs(1))
        );
        assert_eq!(requested_wait(StatusCode::CONFLICT, &headers("1")), None);
    }
}
