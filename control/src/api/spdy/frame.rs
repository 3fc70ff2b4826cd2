//! SPDY/3.1 frames on the wire, and the two header-compression contexts.
//!
//! Every frame starts with 8 bytes. A control frame: the control bit and
//! version 3 (`0x8003`), a 16-bit type, 8 bits of flags and a 24-bit
//! length; a data frame: a 31-bit stream id, 8 bits of flags and a 24-bit
//! length. Header blocks (SYN_STREAM, SYN_REPLY, HEADERS) are a count and
//! length-prefixed names and values, compressed by one zlib stream per
//! direction for the life of the connection, primed with the SPDY/3
//! dictionary and sync-flushed after each block; so a [`FrameReader`] and
//! a [`FrameWriter`] each keep their context across frames and must see
//! every header block of their direction, in order.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use super::dictionary::DICTIONARY;

pub const VERSION: u16 = 3;
/// FIN on data and control frames: the sender's half of the stream ends.
pub const FLAG_FIN: u8 = 0x01;

const TYPE_SYN_STREAM: u16 = 1;
const TYPE_SYN_REPLY: u16 = 2;
const TYPE_RST_STREAM: u16 = 3;
const TYPE_SETTINGS: u16 = 4;
const TYPE_PING: u16 = 6;
const TYPE_GOAWAY: u16 = 7;
const TYPE_HEADERS: u16 = 8;
const TYPE_WINDOW_UPDATE: u16 = 9;

/// RST_STREAM status: a frame that breaks the protocol.
pub const RST_PROTOCOL_ERROR: u32 = 1;
/// GOAWAY status: a normal end.
pub const GOAWAY_OK: u32 = 0;

/// The largest header block accepted once decompressed.
const MAX_HEADER_BLOCK: usize = 256 * 1024;
/// The largest frame payload the 24-bit length allows.
pub const MAX_PAYLOAD: usize = (1 << 24) - 1;

/// Header names (lowercase, as SPDY/3 requires) and values; a value the
/// sender joined with NULs is split into several entries.
pub type Headers = Vec<(String, String)>;

/// The first value of `name` (compared without case).
pub fn header<'h>(headers: &'h Headers, name: &str) -> Option<&'h str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    SynStream {
        stream_id: u32,
        associated_id: u32,
        priority: u8,
        flags: u8,
        headers: Headers,
    },
    SynReply {
        stream_id: u32,
        flags: u8,
        headers: Headers,
    },
    RstStream {
        stream_id: u32,
        status: u32,
    },
    Settings {
        /// (flags, id, value)
        entries: Vec<(u8, u32, u32)>,
    },
    Ping {
        id: u32,
    },
    GoAway {
        last_good_stream_id: u32,
        status: u32,
    },
    Headers {
        stream_id: u32,
        flags: u8,
        headers: Headers,
    },
    WindowUpdate {
        stream_id: u32,
        delta: u32,
    },
    Data {
        stream_id: u32,
        flags: u8,
        data: Bytes,
    },
    /// A control frame type SPDY/3.1 does not define: receivers ignore it.
    Unknown {
        kind: u16,
    },
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("SPDY control frame of version {0}, want 3")]
    Version(u16),
    #[error("SPDY {kind} frame of {len} bytes is malformed")]
    Length { kind: &'static str, len: usize },
    #[error("SPDY header block: {0}")]
    HeaderBlock(String),
    #[error("SPDY header compression: {0}")]
    Compression(String),
    #[error("SPDY frame payload of {0} bytes is over the 24-bit limit")]
    TooLarge(usize),
}

/// Decodes frames a peer sends, keeping its header-decompression context.
pub struct FrameReader {
    inflate: Decompress,
}

impl Default for FrameReader {
    fn default() -> Self {
        FrameReader {
            inflate: Decompress::new(true),
        }
    }
}

impl FrameReader {
    /// Takes one whole frame off the front of `buf`; `None` until one is
    /// there.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        if buf.len() < 8 {
            return Ok(None);
        }
        let len = (u32::from_be_bytes([0, buf[5], buf[6], buf[7]])) as usize;
        if buf.len() < 8 + len {
            return Ok(None);
        }
        let head = buf.split_to(8);
        let mut payload = buf.split_to(len).freeze();
        let flags = head[4];
        if head[0] & 0x80 == 0 {
            let stream_id = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
            return Ok(Some(Frame::Data {
                stream_id,
                flags,
                data: payload,
            }));
        }
        let version = u16::from_be_bytes([head[0], head[1]]) & 0x7fff;
        if version != VERSION {
            return Err(FrameError::Version(version));
        }
        let kind = u16::from_be_bytes([head[2], head[3]]);
        let need = |kind: &'static str, ok: bool| {
            if ok {
                Ok(())
            } else {
                Err(FrameError::Length { kind, len })
            }
        };
        let frame = match kind {
            TYPE_SYN_STREAM => {
                need("SYN_STREAM", len >= 10)?;
                let stream_id = payload.get_u32() & 0x7fff_ffff;
                let associated_id = payload.get_u32() & 0x7fff_ffff;
                let priority = payload.get_u8() >> 5;
                let _slot = payload.get_u8();
                let headers = self.headers(&payload)?;
                Frame::SynStream {
                    stream_id,
                    associated_id,
                    priority,
                    flags,
                    headers,
                }
            }
            TYPE_SYN_REPLY | TYPE_HEADERS => {
                need("SYN_REPLY/HEADERS", len >= 4)?;
                let stream_id = payload.get_u32() & 0x7fff_ffff;
                let headers = self.headers(&payload)?;
                if kind == TYPE_SYN_REPLY {
                    Frame::SynReply {
                        stream_id,
                        flags,
                        headers,
                    }
                } else {
                    Frame::Headers {
                        stream_id,
                        flags,
                        headers,
                    }
                }
            }
            TYPE_RST_STREAM => {
                need("RST_STREAM", len == 8)?;
                Frame::RstStream {
                    stream_id: payload.get_u32() & 0x7fff_ffff,
                    status: payload.get_u32(),
                }
            }
            TYPE_SETTINGS => {
                need("SETTINGS", len >= 4)?;
                let count = payload.get_u32() as usize;
                need("SETTINGS", payload.len() == count.saturating_mul(8))?;
                let entries = (0..count)
                    .map(|_| {
                        let word = payload.get_u32();
                        ((word >> 24) as u8, word & 0x00ff_ffff, payload.get_u32())
                    })
                    .collect();
                Frame::Settings { entries }
            }
            TYPE_PING => {
                need("PING", len == 4)?;
                Frame::Ping {
                    id: payload.get_u32(),
                }
            }
            TYPE_GOAWAY => {
                need("GOAWAY", len == 8)?;
                Frame::GoAway {
                    last_good_stream_id: payload.get_u32() & 0x7fff_ffff,
                    status: payload.get_u32(),
                }
            }
            TYPE_WINDOW_UPDATE => {
                need("WINDOW_UPDATE", len == 8)?;
                Frame::WindowUpdate {
                    stream_id: payload.get_u32() & 0x7fff_ffff,
                    delta: payload.get_u32() & 0x7fff_ffff,
                }
            }
            kind => Frame::Unknown { kind },
        };
        Ok(Some(frame))
    }

    /// Inflates one header block in this direction's context and parses it.
    fn headers(&mut self, compressed: &[u8]) -> Result<Headers, FrameError> {
        let mut block = Vec::with_capacity(compressed.len() * 4 + 64);
        let mut input = compressed;
        loop {
            if block.capacity() - block.len() < 256 {
                block.reserve(block.capacity().max(1024));
            }
            let before_in = self.inflate.total_in();
            let result = self
                .inflate
                .decompress_vec(input, &mut block, FlushDecompress::Sync);
            input = &input[(self.inflate.total_in() - before_in) as usize..];
            match result {
                Ok(Status::StreamEnd) => {
                    return Err(FrameError::Compression(
                        "the peer ended its header stream".into(),
                    ))
                }
                Ok(_) => {}
                Err(e) if e.needs_dictionary().is_some() => {
                    self.inflate
                        .set_dictionary(&DICTIONARY)
                        .map_err(|e| FrameError::Compression(e.to_string()))?;
                    continue;
                }
                Err(e) => return Err(FrameError::Compression(e.to_string())),
            }
            if block.len() > MAX_HEADER_BLOCK {
                return Err(FrameError::HeaderBlock(format!(
                    "over {MAX_HEADER_BLOCK} bytes once inflated"
                )));
            }
            // Done when all input is in and the output did not fill up.
            if input.is_empty() && block.capacity() - block.len() >= 256 {
                break;
            }
        }
        parse_block(&block)
    }
}

fn parse_block(mut block: &[u8]) -> Result<Headers, FrameError> {
    let bad = |what: &str| FrameError::HeaderBlock(what.to_string());
    let take = |block: &mut &[u8]| -> Result<Vec<u8>, FrameError> {
        if block.len() < 4 {
            return Err(bad("truncated length"));
        }
        let n = block.get_u32() as usize;
        if block.len() < n {
            return Err(bad("a name or value runs past the block"));
        }
        let (v, rest) = block.split_at(n);
        *block = rest;
        Ok(v.to_vec())
    };
    if block.len() < 4 {
        return Err(bad("no header count"));
    }
    let count = block.get_u32() as usize;
    let mut headers = Vec::with_capacity(count.min(64));
    for _ in 0..count {
        let name = String::from_utf8(take(&mut block)?).map_err(|_| bad("name is not UTF-8"))?;
        let value = String::from_utf8(take(&mut block)?).map_err(|_| bad("value is not UTF-8"))?;
        for v in value.split('\0') {
            headers.push((name.to_ascii_lowercase(), v.to_string()));
        }
    }
    if !block.is_empty() {
        return Err(bad("bytes after the last header"));
    }
    Ok(headers)
}

/// Encodes frames toward a peer, keeping this direction's header
/// compression context.
pub struct FrameWriter {
    deflate: Compress,
}

impl Default for FrameWriter {
    fn default() -> Self {
        let mut deflate = Compress::new(Compression::default(), true);
        deflate
            .set_dictionary(&DICTIONARY)
            .expect("a fresh deflate stream takes a dictionary");
        FrameWriter { deflate }
    }
}

impl FrameWriter {
    /// Appends `frame` to `out`.
    pub fn encode(&mut self, frame: &Frame, out: &mut BytesMut) -> Result<(), FrameError> {
        let control = |out: &mut BytesMut, kind: u16, flags: u8, payload: &[u8]| {
            if payload.len() > MAX_PAYLOAD {
                return Err(FrameError::TooLarge(payload.len()));
            }
            out.put_u16(0x8000 | VERSION);
            out.put_u16(kind);
            out.put_u32(((flags as u32) << 24) | payload.len() as u32);
            out.put_slice(payload);
            Ok(())
        };
        let mut p = BytesMut::new();
        match frame {
            Frame::Data {
                stream_id,
                flags,
                data,
            } => {
                if data.len() > MAX_PAYLOAD {
                    return Err(FrameError::TooLarge(data.len()));
                }
                out.put_u32(stream_id & 0x7fff_ffff);
                out.put_u32(((*flags as u32) << 24) | data.len() as u32);
                out.put_slice(data);
                Ok(())
            }
            Frame::SynStream {
                stream_id,
                associated_id,
                priority,
                flags,
                headers,
            } => {
                p.put_u32(stream_id & 0x7fff_ffff);
                p.put_u32(associated_id & 0x7fff_ffff);
                p.put_u8((priority & 0x07) << 5);
                p.put_u8(0);
                self.headers(headers, &mut p)?;
                control(out, TYPE_SYN_STREAM, *flags, &p)
            }
            Frame::SynReply {
                stream_id,
                flags,
                headers,
            }
            | Frame::Headers {
                stream_id,
                flags,
                headers,
            } => {
                p.put_u32(stream_id & 0x7fff_ffff);
                self.headers(headers, &mut p)?;
                let kind = if matches!(frame, Frame::SynReply { .. }) {
                    TYPE_SYN_REPLY
                } else {
                    TYPE_HEADERS
                };
                control(out, kind, *flags, &p)
            }
            Frame::RstStream { stream_id, status } => {
                p.put_u32(stream_id & 0x7fff_ffff);
                p.put_u32(*status);
                control(out, TYPE_RST_STREAM, 0, &p)
            }
            Frame::Settings { entries } => {
                p.put_u32(entries.len() as u32);
                for (flags, id, value) in entries {
                    p.put_u32(((*flags as u32) << 24) | (id & 0x00ff_ffff));
                    p.put_u32(*value);
                }
                control(out, TYPE_SETTINGS, 0, &p)
            }
            Frame::Ping { id } => control(out, TYPE_PING, 0, &id.to_be_bytes()),
            Frame::GoAway {
                last_good_stream_id,
                status,
            } => {
                p.put_u32(last_good_stream_id & 0x7fff_ffff);
                p.put_u32(*status);
                control(out, TYPE_GOAWAY, 0, &p)
            }
            Frame::WindowUpdate { stream_id, delta } => {
                p.put_u32(stream_id & 0x7fff_ffff);
                p.put_u32(delta & 0x7fff_ffff);
                control(out, TYPE_WINDOW_UPDATE, 0, &p)
            }
            Frame::Unknown { kind } => control(out, *kind, 0, &[]),
        }
    }

    /// Serializes and deflates one header block (sync-flushed, so the peer
    /// can inflate it on its own) onto `out`.
    fn headers(&mut self, headers: &Headers, out: &mut BytesMut) -> Result<(), FrameError> {
        // Repeated names go out once, their values joined by NULs.
        let mut merged: Vec<(String, String)> = Vec::new();
        for (name, value) in headers {
            let name = name.to_ascii_lowercase();
            match merged.iter_mut().find(|(n, _)| *n == name) {
                Some((_, v)) => {
                    v.push('\0');
                    v.push_str(value);
                }
                None => merged.push((name, value.clone())),
            }
        }
        let mut block = Vec::new();
        block.put_u32(merged.len() as u32);
        for (name, value) in &merged {
            block.put_u32(name.len() as u32);
            block.put_slice(name.as_bytes());
            block.put_u32(value.len() as u32);
            block.put_slice(value.as_bytes());
        }
        let mut compressed = Vec::with_capacity(block.len() + 64);
        let mut input = block.as_slice();
        loop {
            if compressed.capacity() - compressed.len() < 64 {
                compressed.reserve(compressed.capacity().max(256));
            }
            let before_in = self.deflate.total_in();
            self.deflate
                .compress_vec(input, &mut compressed, FlushCompress::Sync)
                .map_err(|e| FrameError::Compression(e.to_string()))?;
            input = &input[(self.deflate.total_in() - before_in) as usize..];
            if input.is_empty() && compressed.capacity() - compressed.len() >= 64 {
                break;
            }
        }
        out.put_slice(&compressed);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
