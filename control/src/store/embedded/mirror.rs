//! Every object in memory as well as in the file: gets and lists are
//! answered from here, at the revision of the last commit, without a read
//! transaction and without copying a byte of any object.
//!
//! The writer thread updates it after each commit and before it announces
//! the commit's events, so a list is never behind a watch event a client
//! has already seen. Each write's bytes are one [`Stored`], shared by the
//! mirror, every list that returns it and the event every watcher gets,
//! so what the API server derives from an object (its labels, where its
//! metadata starts) is made once per write.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use redb::ReadableTable;

use super::codec::decode_object;
use super::{backend, OBJECTS};
use crate::store::{Event, EventType, KeyValue, Result, Revision, Stored};

#[derive(Default)]
struct State {
    /// The revision of the last commit applied.
    revision: Revision,
    /// key -> (mod revision, value)
    objects: BTreeMap<String, (Revision, Arc<Stored>)>,
}

#[derive(Default)]
pub(super) struct Mirror {
    state: RwLock<State>,
}

impl Mirror {
    /// The objects of the store file as it was committed at `revision`.
    pub(super) fn load(txn: &redb::ReadTransaction, revision: Revision) -> Result<Mirror> {
        let table = txn.open_table(OBJECTS).map_err(backend)?;
        let mut objects = BTreeMap::new();
        for entry in table.iter().map_err(backend)? {
            let (key, raw) = entry.map_err(backend)?;
            let kv = decode_object(key.value(), raw.value());
            objects.insert(kv.key, (kv.mod_revision, kv.value));
        }
        Ok(Mirror {
            state: RwLock::new(State { revision, objects }),
        })
    }

    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn get(&self, key: &str) -> Option<KeyValue> {
        let state = self.read();
        state.objects.get(key).map(|(rev, value)| KeyValue {
            key: key.to_string(),
            value: value.clone(),
            mod_revision: *rev,
        })
    }

    /// Every object whose key starts with `prefix`, in key order, and the
    /// revision they are all as of.
    pub(super) fn list(&self, prefix: &str) -> (Vec<KeyValue>, Revision) {
        let state = self.read();
        let items = state
            .objects
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(key, _)| key.starts_with(prefix))
            .map(|(key, (rev, value))| KeyValue {
                key: key.clone(),
                value: value.clone(),
                mod_revision: *rev,
            })
            .collect();
        (items, state.revision)
    }

    /// Applies the events of a commit, in order, up to `revision`. Each
    /// event's `prev` becomes the value the mirror held (the same bytes,
    /// shared with whoever read them before) so that what readers derived
    /// from the old value is not made again to compare with the new.
    pub(super) fn apply(&self, events: &mut [Event], revision: Revision) {
        let mut state = self.write();
        for event in events.iter_mut() {
            let old = match event.kind {
                EventType::Added | EventType::Modified => state
                    .objects
                    .insert(event.key.clone(), (event.revision, event.value.clone())),
                EventType::Deleted => state.objects.remove(&event.key),
            };
            if let (Some((_, old)), Some(prev)) = (old, event.prev.as_mut()) {
                if old.as_ref() == prev.as_ref() {
                    *prev = old;
                }
            }
        }
        state.revision = state.revision.max(revision);
    }
}
