//! kubectl's side of a SPDY connection, by hand, for the unit tests of
//! [`super::remotecommand`] and [`super::portforward`].

use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::frame::{Frame, FrameReader, FrameWriter};

pub struct Kubectl {
    io: tokio::io::DuplexStream,
    reader: FrameReader,
    /// One writer: header compression runs across frames.
    writer: FrameWriter,
    buf: BytesMut,
}

impl Kubectl {
    pub fn new(io: tokio::io::DuplexStream) -> Kubectl {
        Kubectl {
            io,
            reader: FrameReader::default(),
            writer: FrameWriter::default(),
            buf: BytesMut::new(),
        }
    }

    pub async fn send(&mut self, frame: Frame) {
        let mut out = BytesMut::new();
        self.writer.encode(&frame, &mut out).unwrap();
        self.io.write_all(&out).await.unwrap();
    }

    /// Opens stream `stream_id` with these headers (`streamtype` and,
    /// for port-forward, `port` and `requestid`).
    pub async fn open(&mut self, stream_id: u32, headers: &[(&str, String)]) {
        let headers = headers
            .iter()
            .map(|(name, value)| (name.to_string(), value.clone()))
            .collect();
        self.send(Frame::SynStream {
            stream_id,
            associated_id: 0,
            priority: 0,
            flags: 0,
            headers,
        })
        .await;
    }

    /// The next frame the server sends, `None` once it closed; panics
    /// after 5 s of silence.
    pub async fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(f) = self.reader.decode(&mut self.buf).unwrap() {
                return Some(f);
            }
            let read =
                tokio::time::timeout(Duration::from_secs(5), self.io.read_buf(&mut self.buf))
                    .await
                    .expect("a frame within 5s");
            if read.unwrap() == 0 {
                return None;
            }
        }
    }
}
