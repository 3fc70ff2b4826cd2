//! Answers already encoded, for the fast path: the general path's response
//! to a query, filed under the query's bytes after its ID, so that the same
//! question asked again (any ID) is answered by copying the bytes and
//! patching the ID.
//!
//! The whole rest of the query is the key (flags, counts, the question as
//! sent, with its letter case, and the EDNS record): everything the response
//! is made from but the ID. A response is then a function of its key and of
//! the zone alone, as long as only questions the zone answers alone are
//! filed ([`super::super::Zone::answers_alone`]), so a cached answer is
//! byte for byte the one the general path would give. Each build of the zone
//! has a new generation; answers filed under another generation are dropped
//! (lazily, by the first query after the change).

use std::collections::HashMap;
use std::sync::RwLock;

/// The most bytes of keys and answers kept; past it the store starts over
/// (a client sending ever new keys, such as random EDNS cookies, cannot
/// make it grow without end).
const BUDGET: usize = 2 << 20;
/// Per entry, besides its bytes: the map's slot and the two allocations.
const OVERHEAD: usize = 64;

/// The DNS header's bytes the fast path looks at.
mod header {
    pub const LEN: usize = 12;
}

/// The key of a query the fast path may answer: a plain standard query
/// (QR=0, opcode QUERY, not truncated, one question, no answer or
/// authority records, at most one additional, the EDNS OPT) of at most 512
/// bytes. `None` for anything else, which the general path answers.
pub fn question_key(query: &[u8]) -> Option<&[u8]> {
    if query.len() <= header::LEN || query.len() > 512 {
        return None;
    }
    let flags = query[2];
    let qr = flags & 0x80 != 0;
    let opcode = (flags >> 3) & 0x0f;
    let tc = flags & 0x02 != 0;
    let count = |at: usize| u16::from_be_bytes([query[at], query[at + 1]]);
    let plain = !qr
        && opcode == 0
        && !tc
        && count(4) == 1
        && count(6) == 0
        && count(8) == 0
        && count(10) <= 1;
    plain.then(|| &query[2..])
}

#[derive(Default)]
struct Filed {
    generation: u64,
    bytes: usize,
    answers: HashMap<Box<[u8]>, Box<[u8]>>,
}

/// Encoded answers of one zone generation, shared by the socket workers.
#[derive(Default)]
pub struct Answers {
    filed: RwLock<Filed>,
}

impl Answers {
    /// Writes the answer filed under `key` for this zone generation into
    /// `out` with the query's `id`; false if there is none.
    pub fn answer(&self, generation: u64, key: &[u8], id: [u8; 2], out: &mut Vec<u8>) -> bool {
        let filed = self.filed.read().expect("answers lock");
        if filed.generation != generation {
            return false;
        }
        let Some(answer) = filed.answers.get(key) else {
            return false;
        };
        out.clear();
        out.extend_from_slice(answer);
        out[..2].copy_from_slice(&id);
        true
    }

    /// Files `response` (to a query whose bytes after the ID are `key`)
    /// for this zone generation, dropping what another generation filed.
    pub fn file(&self, generation: u64, key: &[u8], response: &[u8]) {
        if response.len() < header::LEN {
            return;
        }
        let mut filed = self.filed.write().expect("answers lock");
        // A newer zone was filed already: this answer is of an older one.
        if filed.generation > generation {
            return;
        }
        let size = key.len() + response.len() + OVERHEAD;
        if filed.generation != generation || filed.bytes + size > BUDGET {
            filed.answers = HashMap::new();
            filed.bytes = 0;
            filed.generation = generation;
        }
        if filed.answers.insert(key.into(), response.into()).is_none() {
            filed.bytes += size;
        }
    }

    /// How many answers are filed (for tests).
    pub fn count(&self) -> usize {
        self.filed.read().expect("answers lock").answers.len()
    }
}
