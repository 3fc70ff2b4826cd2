//! The request handler hickory-server calls for every query: answers from
//! the zone, forwards the rest to the upstreams with a short deadline, and
//! gives SERVFAIL when they fail, FORMERR for a request that is not one
//! question. hickory-server itself drops what is shorter than a header and
//! gives FORMERR for what does not parse.

use std::net::SocketAddr;
use std::time::Duration;

use hickory_server::net::runtime::Time;
use hickory_server::net::xfer::Protocol;
use hickory_server::proto::op::{Edns, Message, Metadata, OpCode, ResponseCode};
use hickory_server::proto::rr::{DNSClass, Record};
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::zone_handler::MessageResponseBuilder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::lookup::Answer;
use super::zone::Zone;
use super::SharedZone;

/// The UDP payload size we advertise with EDNS (the DNS flag day's).
const EDNS_PAYLOAD: u16 = 1232;

#[derive(Clone)]
pub struct DnsHandler {
    zone: SharedZone,
    upstreams: Vec<SocketAddr>,
    timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("no upstream resolvers")]
    NoUpstreams,
    #[error("upstream {0} did not answer in time")]
    Timeout(SocketAddr),
    #[error("upstream {0}: {1}")]
    Io(SocketAddr, std::io::Error),
    #[error("upstream {0} sent an unreadable answer: {1}")]
    Bad(SocketAddr, String),
}

impl DnsHandler {
    pub fn new(zone: SharedZone, upstreams: Vec<SocketAddr>, timeout: Duration) -> Self {
        DnsHandler {
            zone,
            upstreams,
            timeout,
        }
    }

    /// Sends the query as it came to each upstream in turn, sharing the
    /// deadline between them; the first answer wins.
    pub async fn forward(&self, raw: &[u8], id: u16, tcp: bool) -> Result<Message, ForwardError> {
        if self.upstreams.is_empty() {
            return Err(ForwardError::NoUpstreams);
        }
        let each = self.timeout / self.upstreams.len() as u32;
        let mut last = ForwardError::NoUpstreams;
        for up in &self.upstreams {
            let attempt = async {
                let mut msg = if tcp {
                    forward_tcp(*up, raw).await?
                } else {
                    forward_udp(*up, raw, id).await?
                };
                // A truncated UDP answer is asked again over TCP.
                if !tcp && msg.metadata.truncation {
                    msg = forward_tcp(*up, raw).await?;
                }
                Ok::<_, ForwardError>(msg)
            };
            match tokio::time::timeout(each, attempt).await {
                Ok(Ok(msg)) => return Ok(msg),
                Ok(Err(e)) => last = e,
                Err(_) => last = ForwardError::Timeout(*up),
            }
            tracing::debug!(upstream = %up, error = %last, "forwarding failed");
        }
        Err(last)
    }
}

async fn forward_udp(up: SocketAddr, raw: &[u8], id: u16) -> Result<Message, ForwardError> {
    let io = |e| ForwardError::Io(up, e);
    let local: SocketAddr = if up.is_ipv4() {
        "0.0.0.0:0".parse().expect("addr")
    } else {
        "[::]:0".parse().expect("addr")
    };
    let sock = tokio::net::UdpSocket::bind(local).await.map_err(io)?;
    sock.connect(up).await.map_err(io)?;
    sock.send(raw).await.map_err(io)?;
    let mut buf = vec![0u8; 65535];
    loop {
        let n = sock.recv(&mut buf).await.map_err(io)?;
        // Anything else arriving on the port is ignored.
        match Message::from_vec(&buf[..n]) {
            Ok(m) if m.metadata.id == id => return Ok(m),
            _ => continue,
        }
    }
}

async fn forward_tcp(up: SocketAddr, raw: &[u8]) -> Result<Message, ForwardError> {
    let io = |e| ForwardError::Io(up, e);
    let mut s = tokio::net::TcpStream::connect(up).await.map_err(io)?;
    let len =
        u16::try_from(raw.len()).map_err(|_| ForwardError::Bad(up, "query too long".into()))?;
    let mut out = len.to_be_bytes().to_vec();
    out.extend_from_slice(raw);
    s.write_all(&out).await.map_err(io)?;
    let n = s.read_u16().await.map_err(io)? as usize;
    let mut buf = vec![0u8; n];
    s.read_exact(&mut buf).await.map_err(io)?;
    Message::from_vec(&buf).map_err(|e| ForwardError::Bad(up, e.to_string()))
}

fn response_meta(request: &Request, rcode: ResponseCode) -> Metadata {
    let mut meta = Metadata::response_from_request(&request.metadata);
    meta.recursion_available = true;
    meta.response_code = rcode;
    meta
}

async fn send<R: ResponseHandler>(
    request: &Request,
    mut handle: R,
    meta: Metadata,
    answers: &[Record],
    authority: &[Record],
    additionals: &[Record],
) -> ResponseInfo {
    let mut edns = Edns::new();
    edns.set_max_payload(EDNS_PAYLOAD);
    let mut builder = MessageResponseBuilder::from_message_request(request);
    if request.edns.is_some() {
        builder.edns(&edns);
    }
    let response = builder.build(
        meta,
        answers.iter(),
        authority.iter(),
        std::iter::empty(),
        additionals.iter(),
    );
    match handle.send_response(response).await {
        Ok(info) => info,
        Err(e) => {
            tracing::debug!(error = %e, "sending a DNS response");
            hickory_server::proto::op::Header {
                metadata: meta,
                counts: Default::default(),
            }
            .into()
        }
    }
}

#[async_trait::async_trait]
impl RequestHandler for DnsHandler {
    async fn handle_request<R: ResponseHandler, T: Time>(
        &self,
        request: &Request,
        handle: R,
    ) -> ResponseInfo {
        let zone = self.zone.read().expect("zone lock").clone();
        self.respond(&zone, request, handle).await
    }
}

impl DnsHandler {
    /// Answers `request` from `zone` (the general path: every protocol,
    /// every kind of request).
    pub async fn respond<R: ResponseHandler>(
        &self,
        zone: &Zone,
        request: &Request,
        handle: R,
    ) -> ResponseInfo {
        let fail = |rcode| response_meta(request, rcode);
        if request.metadata.op_code != OpCode::Query {
            return send(request, handle, fail(ResponseCode::NotImp), &[], &[], &[]).await;
        }
        let queries = request.queries.queries();
        if queries.len() != 1 {
            return send(request, handle, fail(ResponseCode::FormErr), &[], &[], &[]).await;
        }
        let query = queries[0].original();
        if query.query_class() != DNSClass::IN && query.query_class() != DNSClass::ANY {
            return send(request, handle, fail(ResponseCode::NotImp), &[], &[], &[]).await;
        }
        match zone.lookup(query.name(), query.query_type(), request.src().ip()) {
            Answer::Zone {
                rcode,
                answers,
                authority,
                additionals,
            } => {
                let mut meta = response_meta(request, rcode);
                meta.authoritative = true;
                send(request, handle, meta, &answers, &authority, &additionals).await
            }
            Answer::Forward => {
                let tcp = request.protocol() == Protocol::Tcp;
                match self
                    .forward(request.as_slice(), request.metadata.id, tcp)
                    .await
                {
                    Ok(msg) => {
                        let mut meta = response_meta(request, msg.metadata.response_code);
                        meta.authoritative = msg.metadata.authoritative;
                        meta.authentic_data = msg.metadata.authentic_data;
                        send(
                            request,
                            handle,
                            meta,
                            &msg.answers,
                            &msg.authorities,
                            &msg.additionals,
                        )
                        .await
                    }
                    Err(e) => {
                        tracing::debug!(name = %query.name(), error = %e, "SERVFAIL");
                        send(request, handle, fail(ResponseCode::ServFail), &[], &[], &[]).await
                    }
                }
            }
        }
    }
}
