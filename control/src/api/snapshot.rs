//! `GET /bosun/v1/snapshot` ([`bosun::snapshot::PATH`]): the store at one
//! revision and the data dir's keys as one snapshot file, streamed as it
//! is read, for the cluster admin only (it holds the CA key). What `bosun
//! snapshot save` fetches; as etcd's `snapshot save`, but the server takes
//! the copy, since the store file is its own.

use std::io::{self, Write};

use axum::body::{Body, Bytes};
use axum::response::Response;
use http::{Method, StatusCode};
use tokio_stream::wrappers::ReceiverStream;

use super::error::{ApiError, ApiResult};
use super::ApiState;
use crate::auth::Identity;

/// Response headers naming the snapshot's revision and object count (the
/// file's header says the same).
pub const REVISION_HEADER: &str = "x-bosun-snapshot-revision";
pub const OBJECTS_HEADER: &str = "x-bosun-snapshot-objects";

pub async fn serve(state: &ApiState, who: &Identity, method: &Method) -> ApiResult<Response> {
    if *who == Identity::Anonymous {
        return Err(ApiError::unauthorized());
    }
    // The whole store holds every Secret: members of system:masters only
    // (the admin token, a system:masters client certificate).
    if !who.user_info().is_master() {
        return Err(ApiError::forbidden(format!(
            "User \"{}\" cannot get the store snapshot: only the cluster admin can",
            who.user()
        )));
    }
    if method != Method::GET {
        return Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on {}",
            bosun::snapshot::PATH
        )));
    }
    let snapshots = state.snapshots.clone().ok_or_else(|| {
        ApiError::internal(
            "this server's store takes no snapshots (on etcd, use `etcdctl snapshot save`)",
        )
    })?;
    let taken = tokio::task::spawn_blocking(move || snapshots.take())
        .await
        .map_err(|e| ApiError::internal(format!("taking the snapshot: {e}")))?
        .map_err(|e| ApiError::internal(format!("taking the snapshot: {e:#}")))?;
    let header = taken.header.clone();
    tracing::info!(
        revision = header.revision,
        objects = header.objects,
        bytes = header.encoded_len(),
        "serving a snapshot"
    );
    let (tx, rx) = tokio::sync::mpsc::channel::<io::Result<Bytes>>(8);
    tokio::task::spawn_blocking(move || {
        let out = io::BufWriter::with_capacity(256 * 1024, ChannelWriter(tx.clone()));
        if let Err(e) = taken.write_to(out) {
            // The body ends with an error: the client's copy is short and
            // fails its checksum; it never looks whole.
            tracing::warn!(error = %e, "streaming a snapshot");
            let _ = tx.blocking_send(Err(e));
        }
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "application/octet-stream")
        .header(http::header::CONTENT_LENGTH, header.encoded_len())
        .header(REVISION_HEADER, header.revision)
        .header(OBJECTS_HEADER, header.objects)
        .body(Body::from_stream(ReceiverStream::new(rx)))
        .map_err(|e| ApiError::internal(e.to_string()))
}

/// Hands what is written to the response body, waiting while the client
/// is slower than the disk.
struct ChannelWriter(tokio::sync::mpsc::Sender<io::Result<Bytes>>);

impl Write for ChannelWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .blocking_send(Ok(Bytes::copy_from_slice(buf)))
            .map_err(|_| io::Error::other("the client went away"))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
