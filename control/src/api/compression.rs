//! Response compression, as kube-apiserver's `APIResponseCompression`: a
//! response of more than 128 KiB is gzipped (level 1, upstream's choice:
//! little CPU for nearly the best ratio) when the request's
//! `Accept-Encoding` names gzip.
//!
//! Only responses a handler marks [`Compressible`] are considered: objects,
//! lists, tables, Status answers and discovery. Watches, logs, exec,
//! port-forward, proxied answers and the web view's files are never
//! touched: a watch's events must reach the client as they happen.
//!
//! A streamed list's size is not known in advance, so, as upstream's
//! deferred response writer, its first chunks are held until they pass
//! the threshold (then the response is gzipped) or the stream ends (then
//! it goes out as it is). Once gzipped, each chunk is compressed and
//! flushed as it comes, so the client gets every chunk's objects without
//! waiting for the rest and the server never holds more than a chunk.

use std::io::Write;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use flate2::write::GzEncoder;
use flate2::Compression;
use futures::{stream, Stream, StreamExt};
use http::header::{ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_LENGTH, VARY};
use http::{HeaderMap, HeaderValue};

/// Responses larger than this are gzipped (upstream's
/// `defaultGzipThresholdBytes`).
pub const THRESHOLD: usize = 128 << 10;

/// Marks a response (in its extensions) as one that may be gzipped.
#[derive(Debug, Clone, Copy)]
pub struct Compressible;

/// Marks `response` [`Compressible`].
pub fn compressible(mut response: Response) -> Response {
    response.extensions_mut().insert(Compressible);
    response
}

/// Whether `Accept-Encoding` names gzip (not refused with `q=0`).
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';').map(str::trim);
            let name = parts.next().unwrap_or_default();
            let refused = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            name.eq_ignore_ascii_case("gzip") && !refused
        })
}

/// The middleware: gzips a [`Compressible`] response over [`THRESHOLD`]
/// to a request that accepts it.
pub async fn gzip(req: Request, next: Next) -> Response {
    let accepts = accepts_gzip(req.headers());
    let response = next.run(req).await;
    if !accepts
        || response.extensions().get::<Compressible>().is_none()
        || response.headers().contains_key(CONTENT_ENCODING)
    {
        return response;
    }
    compress(response).await
}

async fn compress(response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    let mut rest = body.into_data_stream();
    // What the body has given so far, held until it passes the threshold.
    let mut held: Vec<Bytes> = Vec::new();
    let mut size = 0usize;
    while size <= THRESHOLD {
        match rest.next().await {
            Some(Ok(chunk)) => {
                size += chunk.len();
                held.push(chunk);
            }
            // The body failed before the threshold: what came, then the
            // failure, as it would have been sent uncompressed.
            Some(Err(e)) => {
                let failed = stream::iter(held.into_iter().map(Ok).chain([Err(e)]));
                return Response::from_parts(parts, Body::from_stream(failed));
            }
            None => {
                // Small: as it is, now with its length.
                parts
                    .headers
                    .insert(CONTENT_LENGTH, HeaderValue::from(size));
                let body = match held.len() {
                    1 => Body::from(held.pop().expect("one chunk")),
                    _ => Body::from(held.concat()),
                };
                return Response::from_parts(parts, body);
            }
        }
    }
    parts.headers.remove(CONTENT_LENGTH);
    parts
        .headers
        .insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    parts
        .headers
        .append(VARY, HeaderValue::from_static("Accept-Encoding"));
    let chunks = stream::iter(held.into_iter().map(Ok)).chain(rest);
    Response::from_parts(parts, Body::from_stream(gzipped(chunks)))
}

/// `chunks` gzipped, each flushed (a zlib sync flush) as it comes so that
/// the client can decode it without waiting for the next; the gzip trailer
/// after the last.
fn gzipped<E: Send + 'static>(
    chunks: impl Stream<Item = Result<Bytes, E>> + Send + 'static,
) -> impl Stream<Item = Result<Bytes, E>> + Send + 'static {
    let encoder = GzEncoder::new(Vec::new(), Compression::fast());
    let chunks = chunks.map(Some).chain(stream::once(async { None }));
    chunks.scan(Some(encoder), |encoder, chunk| {
        let out = match (encoder.as_mut(), chunk) {
            // After a failure nothing more is sent.
            (None, _) => None,
            (Some(enc), Some(Ok(chunk))) => {
                // Writing to a Vec cannot fail.
                enc.write_all(&chunk).expect("gzip into memory");
                enc.flush().expect("gzip into memory");
                Some(Ok(Bytes::from(std::mem::take(enc.get_mut()))))
            }
            (Some(_), Some(Err(e))) => {
                *encoder = None;
                Some(Err(e))
            }
            (Some(_), None) => {
                let enc = encoder.take().expect("the encoder");
                Some(Ok(Bytes::from(enc.finish().expect("gzip into memory"))))
            }
        };
        futures::future::ready(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn headers(accept: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(ACCEPT_ENCODING, HeaderValue::from_str(accept).unwrap());
        h
    }

    #[test]
    fn gzip_is_accepted_only_when_named_and_not_refused() {
        assert!(accepts_gzip(&headers("gzip")));
        assert!(accepts_gzip(&headers("gzip, deflate, br, zstd")));
        assert!(accepts_gzip(&headers("br;q=1.0, GZIP;q=0.5")));
        assert!(!accepts_gzip(&headers("gzip;q=0")));
        assert!(!accepts_gzip(&headers("identity")));
        assert!(!accepts_gzip(&headers("x-gzip2")));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }

    async fn answer(body: Body) -> (HeaderMap, Vec<Bytes>) {
        let response = compress(compressible(Response::new(body))).await;
        let headers = response.headers().clone();
        let chunks = response
            .into_body()
            .into_data_stream()
            .map(|c| c.unwrap())
            .collect()
            .await;
        (headers, chunks)
    }

    fn gunzip(bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(bytes)
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    /// Chunks of JSON-like text that compress but not to nothing.
    fn chunks(n: usize, size: usize) -> Vec<Bytes> {
        (0..n)
            .map(|i| {
                let text: String = (0..size / 16)
                    .map(|j| format!("{{\"n\":{:09}}},", i * 100_000 + j))
                    .collect();
                Bytes::from(text.into_bytes())
            })
            .collect()
    }

    #[tokio::test]
    async fn a_small_stream_goes_out_as_it_is() {
        let parts = chunks(2, 16 << 10);
        let whole = parts.concat();
        let body = Body::from_stream(stream::iter(parts.into_iter().map(Ok::<_, std::io::Error>)));
        let (headers, got) = answer(body).await;
        assert!(headers.get(CONTENT_ENCODING).is_none());
        assert_eq!(headers[CONTENT_LENGTH], whole.len().to_string().as_str());
        assert_eq!(got.concat(), whole);
    }

    #[tokio::test]
    async fn a_large_stream_is_gzipped_chunk_by_chunk() {
        let parts = chunks(8, 64 << 10);
        let whole = parts.concat();
        let body = Body::from_stream(stream::iter(parts.into_iter().map(Ok::<_, std::io::Error>)));
        let (headers, got) = answer(body).await;
        assert_eq!(headers[CONTENT_ENCODING], "gzip");
        assert_eq!(headers[VARY], "Accept-Encoding");
        assert!(headers.get(CONTENT_LENGTH).is_none());
        let wire = got.concat();
        assert!(
            wire.len() < whole.len() / 3,
            "{} of {}",
            wire.len(),
            whole.len()
        );
        assert_eq!(gunzip(&wire), whole);
        // Every chunk after the held ones is flushed on its own: what came
        // before the trailer decodes to a prefix of the body without it.
        assert!(got.len() >= 6, "{} pieces", got.len());
        let before_last = got[..got.len() - 1].concat();
        let mut prefix = Vec::new();
        let _ = flate2::read::GzDecoder::new(before_last.as_slice()).read_to_end(&mut prefix);
        assert_eq!(prefix, whole, "all the chunks' bytes before the trailer");
    }

    #[tokio::test]
    async fn a_large_whole_body_is_gzipped_and_a_small_one_not() {
        let big = chunks(1, 200 << 10).concat();
        let (headers, got) = answer(Body::from(big.clone())).await;
        assert_eq!(headers[CONTENT_ENCODING], "gzip");
        assert_eq!(gunzip(&got.concat()), big);
        let small = chunks(1, THRESHOLD).concat();
        assert!(small.len() <= THRESHOLD);
        let (headers, got) = answer(Body::from(small.clone())).await;
        assert!(headers.get(CONTENT_ENCODING).is_none());
        assert_eq!(got.concat(), small);
    }
}
