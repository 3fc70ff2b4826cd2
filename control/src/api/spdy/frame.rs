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
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Headers {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    fn round_trip(frames: &[Frame]) -> Vec<Frame> {
        let mut writer = FrameWriter::default();
        let mut reader = FrameReader::default();
        let mut wire = BytesMut::new();
        for f in frames {
            writer.encode(f, &mut wire).unwrap();
        }
        let mut out = Vec::new();
        while let Some(f) = reader.decode(&mut wire).unwrap() {
            out.push(f);
        }
        assert!(wire.is_empty(), "bytes left over");
        out
    }

    #[test]
    fn every_frame_type_round_trips() {
        let frames = vec![
            Frame::SynStream {
                stream_id: 1,
                associated_id: 0,
                priority: 7,
                flags: FLAG_FIN,
                headers: h(&[("streamtype", "error"), ("port", "80")]),
            },
            Frame::SynReply {
                stream_id: 1,
                flags: 0,
                headers: vec![],
            },
            Frame::RstStream {
                stream_id: 3,
                status: RST_PROTOCOL_ERROR,
            },
            Frame::Settings {
                entries: vec![(1, 7, 65536)],
            },
            Frame::Ping { id: 9 },
            Frame::GoAway {
                last_good_stream_id: 5,
                status: GOAWAY_OK,
            },
            Frame::Headers {
                stream_id: 5,
                flags: 0,
                headers: h(&[("a", "b")]),
            },
            Frame::WindowUpdate {
                stream_id: 5,
                delta: 4096,
            },
            Frame::Data {
                stream_id: 5,
                flags: FLAG_FIN,
                data: Bytes::from_static(b"hello"),
            },
            Frame::Unknown { kind: 0x20 },
        ];
        assert_eq!(round_trip(&frames), frames);
    }

    #[test]
    fn header_blocks_share_one_context_across_frames() {
        let syn = |id: u32, kind: &str| Frame::SynStream {
            stream_id: id,
            associated_id: 0,
            priority: 0,
            flags: 0,
            headers: h(&[("streamtype", kind), ("requestid", "0")]),
        };
        let frames: Vec<Frame> = ["error", "stdin", "stdout", "stderr"]
            .iter()
            .enumerate()
            .map(|(i, k)| syn(2 * i as u32 + 1, k))
            .collect();
        let mut writer = FrameWriter::default();
        let mut wire = BytesMut::new();
        let mut sizes = Vec::new();
        for f in &frames {
            let before = wire.len();
            writer.encode(f, &mut wire).unwrap();
            sizes.push(wire.len() - before);
        }
        // Later blocks refer back to earlier ones: shorter on the wire.
        assert!(sizes[2] < sizes[0], "sizes {sizes:?}");
        let mut reader = FrameReader::default();
        let mut decoded = Vec::new();
        while let Some(f) = reader.decode(&mut wire).unwrap() {
            decoded.push(f);
        }
        assert_eq!(decoded, frames);
        // A fresh reader (a lost context) cannot read a later block alone.
        let mut wire = BytesMut::new();
        writer.encode(&syn(11, "resize"), &mut wire).unwrap();
        assert!(FrameReader::default().decode(&mut wire).is_err());
    }

    #[test]
    fn repeated_names_travel_joined_by_nul_and_come_back_apart() {
        let frames = vec![Frame::SynReply {
            stream_id: 1,
            flags: 0,
            headers: h(&[
                ("X-Stream-Protocol-Version", "v4"),
                ("x-stream-protocol-version", "v3"),
            ]),
        }];
        let Frame::SynReply { headers, .. } = &round_trip(&frames)[0] else {
            panic!()
        };
        assert_eq!(
            headers,
            &h(&[
                ("x-stream-protocol-version", "v4"),
                ("x-stream-protocol-version", "v3")
            ])
        );
        assert_eq!(header(headers, "X-Stream-Protocol-Version"), Some("v4"));
    }

    #[test]
    fn partial_frames_wait_for_more_bytes() {
        let mut writer = FrameWriter::default();
        let mut wire = BytesMut::new();
        let f = Frame::Data {
            stream_id: 3,
            flags: 0,
            data: Bytes::from_static(b"abcdef"),
        };
        writer.encode(&f, &mut wire).unwrap();
        let mut reader = FrameReader::default();
        let mut part = BytesMut::from(&wire[..10]);
        assert_eq!(reader.decode(&mut part).unwrap(), None);
        assert_eq!(part.len(), 10, "nothing consumed");
        part.extend_from_slice(&wire[10..]);
        assert_eq!(reader.decode(&mut part).unwrap(), Some(f));
    }

    #[test]
    fn malformed_frames_are_errors_not_panics() {
        let decode = |bytes: &[u8]| FrameReader::default().decode(&mut BytesMut::from(bytes));
        // Version 2.
        assert_eq!(
            decode(&[0x80, 2, 0, 6, 0, 0, 0, 4, 0, 0, 0, 1]),
            Err(FrameError::Version(2))
        );
        // A PING of 3 bytes, a GOAWAY of 4, a SYN_STREAM too short for its ids.
        assert!(matches!(
            decode(&[0x80, 3, 0, 6, 0, 0, 0, 3, 0, 0, 1]),
            Err(FrameError::Length { .. })
        ));
        assert!(decode(&[0x80, 3, 0, 7, 0, 0, 0, 4, 0, 0, 0, 1]).is_err());
        assert!(decode(&[0x80, 3, 0, 1, 0, 0, 0, 2, 0, 1]).is_err());
        // SETTINGS claiming more entries than it carries.
        assert!(decode(&[0x80, 3, 0, 4, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff]).is_err());
        // A SYN_REPLY whose header block is not zlib at all.
        assert!(matches!(
            decode(&[0x80, 3, 0, 2, 0, 0, 0, 8, 0, 0, 0, 1, 1, 2, 3, 4]),
            Err(FrameError::Compression(_))
        ));
        // A header block that claims a name longer than itself.
        let mut writer = FrameWriter::default();
        let mut block = BytesMut::new();
        let mut d = Compress::new(Compression::default(), true);
        d.set_dictionary(&DICTIONARY).unwrap();
        let raw = [0u8, 0, 0, 1, 0, 0, 0xff, 0xff, b'a'];
        let mut z = Vec::with_capacity(128);
        d.compress_vec(&raw, &mut z, FlushCompress::Sync).unwrap();
        block.put_u16(0x8003);
        block.put_u16(TYPE_SYN_REPLY);
        block.put_u32(4 + z.len() as u32);
        block.put_u32(1);
        block.put_slice(&z);
        assert!(matches!(
            FrameReader::default().decode(&mut block),
            Err(FrameError::HeaderBlock(_))
        ));
        // Writing still works after all that (nothing shared was touched).
        let mut out = BytesMut::new();
        writer.encode(&Frame::Ping { id: 1 }, &mut out).unwrap();
    }
}
