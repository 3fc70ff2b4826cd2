//! The UDP side of the server: a few worker threads receiving on one
//! socket. A plain query the zone has answered before is answered on the
//! worker itself from [`answers::Answers`] (copy, patch the ID, send: no
//! parsing, no allocation, no task). Everything else (a first question,
//! names outside the zone, anything unusual or malformed) goes to the
//! general path on the runtime: hickory-server's parsing and the
//! [`DnsHandler`], encoded as hickory-server's own UDP server encodes it,
//! and filed for next time when the zone alone answers it. TCP stays with
//! hickory-server's server.

pub mod answers;

#[cfg(test)]
mod tests;

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use hickory_server::net::xfer::Protocol;
use hickory_server::net::NetError;
use hickory_server::proto::op::{Header, MessageType, ResponseCode};
use hickory_server::proto::rr::Record;
use hickory_server::proto::serialize::binary::{
    BinDecodable, BinDecoder, BinEncodable, BinEncoder,
};
use hickory_server::server::{Request, ResponseHandler, ResponseInfo};
use hickory_server::zone_handler::{MessageResponse, MessageResponseBuilder, Queries};

use super::{DnsHandler, SharedZone};
use answers::{question_key, Answers};

/// hickory-server's receive buffer: longer datagrams arrive cut to this.
const RECEIVE_BUFFER: usize = 4096;
/// How often a worker blocked on an idle socket looks whether it is to stop
/// (shutting the socket down wakes it at once; this is the fallback).
const STOP_CHECK: Duration = Duration::from_millis(500);

/// A response encoded as hickory-server's UDP server encodes it (at most
/// the EDNS payload size, else 512 bytes; SERVFAIL if it cannot be
/// encoded), kept instead of sent.
#[derive(Clone, Default)]
pub struct Encoded(pub Arc<Mutex<Option<Vec<u8>>>>);

impl Encoded {
    pub fn take(&self) -> Option<Vec<u8>> {
        self.0.lock().expect("encoded").take()
    }
}

#[async_trait::async_trait]
impl ResponseHandler for Encoded {
    async fn send_response<'a>(
        &mut self,
        response: MessageResponse<
            '_,
            'a,
            impl Iterator<Item = &'a Record> + Send + 'a,
            impl Iterator<Item = &'a Record> + Send + 'a,
            impl Iterator<Item = &'a Record> + Send + 'a,
            impl Iterator<Item = &'a Record> + Send + 'a,
        >,
    ) -> Result<ResponseInfo, NetError> {
        let id = response.metadata().id;
        let max = response.edns().map(|e| e.max_payload()).unwrap_or(512);
        let mut bytes = Vec::with_capacity(512);
        let mut encoder = BinEncoder::new(&mut bytes);
        encoder.set_max_size(max);
        let info = match response.destructive_emit(&mut encoder) {
            Ok(info) => info,
            Err(e) => {
                tracing::debug!(error = %e, "encoding a DNS response; SERVFAIL");
                bytes.clear();
                let mut metadata = hickory_server::proto::op::Metadata::new(
                    id,
                    MessageType::Response,
                    hickory_server::proto::op::OpCode::Query,
                );
                metadata.response_code = ResponseCode::ServFail;
                let header = Header {
                    metadata,
                    counts: Default::default(),
                };
                let mut encoder = BinEncoder::new(&mut bytes);
                encoder.set_max_size(512);
                header.emit(&mut encoder)?;
                ResponseInfo::from(header)
            }
        };
        *self.0.lock().expect("encoded") = Some(bytes);
        Ok(info)
    }
}

/// What hickory-server's UDP server refuses to answer to: port 0, an
/// unspecified or broadcast address.
fn answerable(src: &SocketAddr) -> bool {
    src.port() != 0
        && !src.ip().is_unspecified()
        && !matches!(src.ip(), std::net::IpAddr::V4(v4) if v4.is_broadcast())
}

/// The general path's response to the datagram `raw` from `src`, as
/// hickory-server's UDP server gives it: nothing for what has no header
/// or is itself a response, FORMERR for what does not parse. With it,
/// whether the zone alone answered (the same for every client).
pub async fn general(
    handler: &DnsHandler,
    zone: &super::Zone,
    raw: Vec<u8>,
    src: SocketAddr,
) -> Option<(Vec<u8>, bool)> {
    let encoded = Encoded::default();
    // As hickory-server: what has no header is dropped.
    let head = raw.get(..12)?.to_vec();
    match Request::from_bytes(raw, src, Protocol::Udp) {
        Ok(request) => {
            if request.metadata.message_type == MessageType::Response {
                return None;
            }
            let alone = request.queries.queries().len() == 1
                && zone.answers_alone(request.queries.queries()[0].name());
            handler.respond(zone, &request, encoded.clone()).await;
            Some((encoded.take()?, alone))
        }
        Err(e) => {
            // As hickory-server: what does not parse gets FORMERR.
            tracing::debug!(error = %e, %src, "DNS: FORMERR");
            let header = Header::read(&mut BinDecoder::new(&head)).ok()?;
            let queries = Queries::read(&mut BinDecoder::new(&[]), 0).ok()?;
            let response = MessageResponseBuilder::new(&queries, None)
                .error_msg(&header.metadata, ResponseCode::FormErr);
            let mut handle = encoded.clone();
            handle.send_response(response).await.ok()?;
            Some((encoded.take()?, false))
        }
    }
}

/// The workers on one UDP socket.
pub struct UdpFront {
    socket: Arc<UdpSocket>,
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
    pub answers: Arc<Answers>,
}

/// What every worker shares.
struct Shared {
    socket: Arc<UdpSocket>,
    handler: DnsHandler,
    zone: SharedZone,
    answers: Arc<Answers>,
    stop: Arc<AtomicBool>,
    runtime: tokio::runtime::Handle,
}

impl UdpFront {
    /// Starts `workers` threads serving `socket` (must be called on the
    /// runtime the general path is to run on).
    pub fn start(
        socket: UdpSocket,
        handler: DnsHandler,
        zone: SharedZone,
        workers: usize,
    ) -> std::io::Result<UdpFront> {
        socket.set_read_timeout(Some(STOP_CHECK))?;
        let socket = Arc::new(socket);
        let answers = Arc::new(Answers::default());
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared {
            socket: socket.clone(),
            handler,
            zone,
            answers: answers.clone(),
            stop: stop.clone(),
            runtime: tokio::runtime::Handle::current(),
        });
        let mut threads = Vec::new();
        for i in 0..workers.max(1) {
            let shared = shared.clone();
            threads.push(
                std::thread::Builder::new()
                    .name(format!("dns-udp-{i}"))
                    .spawn(move || serve(&shared))?,
            );
        }
        Ok(UdpFront {
            socket,
            stop,
            workers: threads,
            answers,
        })
    }

    /// Stops the workers and waits for them.
    pub async fn stop(mut self) {
        let workers = std::mem::take(&mut self.workers);
        drop(self);
        let _ = tokio::task::spawn_blocking(move || {
            for w in workers {
                let _ = w.join();
            }
        })
        .await;
    }
}

impl Drop for UdpFront {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the workers blocked in recv (on Linux, also for UDP); they
        // drop their handles on the socket and it closes.
        let _ =
            nix::sys::socket::shutdown(self.socket.as_raw_fd(), nix::sys::socket::Shutdown::Read);
    }
}

/// One worker: receive, answer from the filed answers or hand over.
fn serve(shared: &Arc<Shared>) {
    let mut buf = vec![0u8; RECEIVE_BUFFER];
    let mut out = Vec::with_capacity(512);
    while !shared.stop.load(Ordering::Relaxed) {
        let (n, src) = match shared.socket.recv_from(&mut buf) {
            Ok(got) => got,
            Err(e) => {
                use std::io::ErrorKind::{Interrupted, TimedOut, WouldBlock};
                if !matches!(e.kind(), WouldBlock | TimedOut | Interrupted) {
                    tracing::debug!(error = %e, "DNS: receiving on UDP");
                }
                continue;
            }
        };
        let query = &buf[..n];
        if n < 12 || !answerable(&src) {
            continue;
        }
        let generation = shared.zone.read().expect("zone lock").generation();
        if let Some(key) = question_key(query) {
            if shared
                .answers
                .answer(generation, key, [query[0], query[1]], &mut out)
            {
                if let Err(e) = shared.socket.send_to(&out, src) {
                    tracing::debug!(error = %e, %src, "DNS: sending on UDP");
                }
                continue;
            }
        }
        let shared = shared.clone();
        let raw = query.to_vec();
        let runtime = shared.runtime.clone();
        runtime.spawn(async move {
            let zone = shared.zone.read().expect("zone lock").clone();
            let key = question_key(&raw).map(<[u8]>::to_vec);
            let Some((response, alone)) = general(&shared.handler, &zone, raw, src).await else {
                return;
            };
            if let (true, Some(key)) = (alone, key) {
                shared.answers.file(zone.generation(), &key, &response);
            }
            if let Err(e) = shared.socket.send_to(&response, src) {
                tracing::debug!(error = %e, %src, "DNS: sending on UDP");
            }
        });
    }
}
