//! How objects and events are laid out in the store file's tables: an object is its
//! mod revision (8 bytes, big-endian) then its JSON; an event is its kind (one byte) then
//! length-prefixed key, value and previous value.

use crate::store::{Event, EventType, KeyValue, Revision, Stored};

pub(super) fn decode_object(key: &str, raw: &[u8]) -> KeyValue {
    let (rev, json) = raw.split_at(8);
    KeyValue {
        key: key.to_string(),
        value: Stored::new(json),
        mod_revision: u64::from_be_bytes(rev.try_into().expect("8 bytes")),
    }
}

pub(super) fn encode_object(rev: Revision, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + value.len());
    out.extend_from_slice(&rev.to_be_bytes());
    out.extend_from_slice(value);
    out
}

fn put_chunk(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

fn take_chunk<'a>(raw: &mut &'a [u8]) -> Option<&'a [u8]> {
    if raw.len() < 4 {
        return None;
    }
    let len = u32::from_be_bytes(raw[..4].try_into().ok()?) as usize;
    let chunk = raw.get(4..4 + len)?;
    *raw = &raw[4 + len..];
    Some(chunk)
}

pub(super) fn encode_event(e: &Event) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + e.key.len() + e.value.len());
    out.push(match e.kind {
        EventType::Added => 0,
        EventType::Modified => 1,
        EventType::Deleted => 2,
    });
    put_chunk(&mut out, e.key.as_bytes());
    put_chunk(&mut out, &e.value);
    if let Some(prev) = &e.prev {
        put_chunk(&mut out, prev);
    }
    out
}

/// The key of an encoded event, read without decoding the rest.
pub(super) fn event_key(raw: &[u8]) -> Option<&[u8]> {
    let mut rest = raw.get(1..)?;
    take_chunk(&mut rest)
}

pub(super) fn decode_event(revision: Revision, raw: &[u8]) -> Option<Event> {
    let (&kind, mut rest) = raw.split_first()?;
    let kind = match kind {
        0 => EventType::Added,
        1 => EventType::Modified,
        2 => EventType::Deleted,
        _ => return None,
    };
    let key = String::from_utf8(take_chunk(&mut rest)?.to_vec()).ok()?;
    let value = Stored::new(take_chunk(&mut rest)?);
    let prev = take_chunk(&mut rest).map(Stored::new);
    Some(Event {
        revision,
        kind,
        key,
        value,
        prev,
    })
}
