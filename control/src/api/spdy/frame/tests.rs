//! Unit tests of SPDY/3.1 frames and header compression.

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
