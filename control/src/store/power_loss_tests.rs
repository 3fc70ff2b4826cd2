//! "No acknowledged write is lost", tested for power loss.
//!
//! Killing the process (the API tests' kill -9) leaves the kernel's page
//! cache in place, so it shows nothing about fsync: a store that never
//! syncs passes it. Here the store runs on a simulated disk instead. The
//! disk keeps what was written since the last `sync_data` apart from what
//! is durable, and at an injected point the power goes: from then on every
//! write and sync fails. What the disk holds afterwards is what was synced
//! plus any subset of the writes after the last sync, at sector
//! granularity (a disk may persist some of its cache, in any order, and may
//! tear a write). The store is reopened from such an image and must hold
//! every write it acknowledged, in its objects and in its watch history.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;

use super::{EmbeddedStore, EventType, Revision, Store, StoreOptions};

const SECTOR: usize = 512;

#[derive(Debug)]
enum Pending {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

#[derive(Debug, Default)]
struct DiskState {
    /// What survives a power loss for sure: everything synced.
    durable: Vec<u8>,
    /// What the running process reads: durable plus the unsynced changes.
    cache: Vec<u8>,
    /// Changes since the last sync, in order.
    pending: Vec<Pending>,
    /// Mutating operations (writes, length changes, syncs) so far.
    ops: u64,
    /// The power goes after this many mutating operations.
    cut_after: Option<u64>,
    /// Whether the power is gone.
    dead: bool,
    /// Syncs so far.
    syncs: u64,
    /// How long a sync takes.
    sync_latency: std::time::Duration,
}

/// A disk with a volatile write cache, shared between the store that
/// writes to it and the test that cuts its power.
#[derive(Debug, Clone, Default)]
pub(crate) struct Disk(Arc<Mutex<DiskState>>);

fn power_gone() -> std::io::Error {
    std::io::Error::other("power loss")
}

impl Disk {
    /// A disk whose durable content is `image`.
    fn with_image(image: Vec<u8>) -> Disk {
        Disk(Arc::new(Mutex::new(DiskState {
            cache: image.clone(),
            durable: image,
            ..Default::default()
        })))
    }

    /// A disk whose syncs take `latency`, like a real one's.
    pub(crate) fn with_sync_latency(latency: std::time::Duration) -> Disk {
        let disk = Disk::default();
        disk.0.lock().unwrap().sync_latency = latency;
        disk
    }

    /// How many syncs the disk has done.
    pub(crate) fn syncs(&self) -> u64 {
        self.0.lock().unwrap().syncs
    }

    fn cut_power_after(&self, ops: u64) {
        self.0.lock().unwrap().cut_after = Some(ops);
    }

    fn ops(&self) -> u64 {
        self.0.lock().unwrap().ops
    }

    fn is_dead(&self) -> bool {
        self.0.lock().unwrap().dead
    }

    /// Counts one mutating operation; fails once the power is gone.
    fn mutate(s: &mut DiskState) -> std::io::Result<()> {
        if s.dead || s.cut_after.is_some_and(|n| s.ops >= n) {
            s.dead = true;
            return Err(power_gone());
        }
        s.ops += 1;
        Ok(())
    }

    /// What the disk holds after the power loss: the synced content plus
    /// the sectors of unsynced changes that `keep` picks (it is asked once
    /// per length change and once per sector written, in order).
    fn image_after_loss(&self, mut keep: impl FnMut() -> bool) -> Vec<u8> {
        let s = self.0.lock().unwrap();
        let mut image = s.durable.clone();
        for change in &s.pending {
            match change {
                Pending::SetLen(len) => {
                    if keep() {
                        image.resize(*len as usize, 0);
                    }
                }
                Pending::Write(offset, data) => {
                    let offset = *offset as usize;
                    for (i, sector) in data.chunks(SECTOR).enumerate() {
                        if keep() {
                            let at = offset + i * SECTOR;
                            if image.len() < at + sector.len() {
                                image.resize(at + sector.len(), 0);
                            }
                            image[at..at + sector.len()].copy_from_slice(sector);
                        }
                    }
                }
            }
        }
        image
    }
}

impl redb::StorageBackend for Disk {
    fn len(&self) -> std::io::Result<u64> {
        Ok(self.0.lock().unwrap().cache.len() as u64)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        let s = self.0.lock().unwrap();
        let offset = offset as usize;
        let src = s
            .cache
            .get(offset..offset + out.len())
            .ok_or_else(|| std::io::Error::other("read past the end"))?;
        out.copy_from_slice(src);
        Ok(())
    }

    fn set_len(&self, len: u64) -> std::io::Result<()> {
        let mut s = self.0.lock().unwrap();
        Self::mutate(&mut s)?;
        s.cache.resize(len as usize, 0);
        s.pending.push(Pending::SetLen(len));
        Ok(())
    }

    fn sync_data(&self) -> std::io::Result<()> {
        let mut s = self.0.lock().unwrap();
        Self::mutate(&mut s)?;
        std::thread::sleep(s.sync_latency);
        s.syncs += 1;
        s.durable = s.cache.clone();
        s.pending.clear();
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        let mut s = self.0.lock().unwrap();
        Self::mutate(&mut s)?;
        let offset = offset as usize;
        let end = offset + data.len();
        if s.cache.len() < end {
            return Err(std::io::Error::other("write past the end"));
        }
        s.cache[offset..end].copy_from_slice(data);
        s.pending.push(Pending::Write(offset as u64, data.to_vec()));
        Ok(())
    }
}

/// A small deterministic generator, so a failing crash point can be rerun.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }
}

/// What one key should hold after the crash.
#[derive(Debug, Clone, PartialEq)]
enum Expect {
    /// Acknowledged as this value at this revision.
    Value(Vec<u8>, Revision),
    /// Acknowledged as deleted at this revision.
    Deleted(Revision),
}

/// Per key: the last acknowledged state, and the state of a write that was
/// in flight when the power went (it may or may not have reached the disk).
#[derive(Debug, Default)]
struct Ledger {
    acked: BTreeMap<String, Expect>,
    in_flight: BTreeMap<String, Option<Vec<u8>>>,
    /// Every acknowledged write: revision -> (key, kind).
    revisions: BTreeMap<Revision, (String, EventType)>,
}

const WRITERS: usize = 4;
const KEYS_PER_WRITER: usize = 3;
const ROUNDS: usize = 4;

fn value(w: usize, k: usize, round: usize) -> Vec<u8> {
    format!("{{\"w\":{w},\"k\":{k},\"round\":{round}}}").into_bytes()
}

/// Each writer creates its keys, updates them, deletes one and creates it
/// again, one write at a time, and records what was acknowledged. It stops
/// at its first error (the power is gone).
async fn workload(store: Arc<EmbeddedStore>, ledger: Arc<Mutex<Ledger>>) {
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let store = store.clone();
            let ledger = ledger.clone();
            tokio::spawn(async move {
                let mut revs = [0; KEYS_PER_WRITER];
                for round in 0..ROUNDS {
                    for (k, rev) in revs.iter_mut().enumerate() {
                        let key = format!("/registry/pods/w{w}/k{k}");
                        let v = value(w, k, round);
                        // Round 2 deletes the first key; round 3 makes it again.
                        let deleting = round == 2 && k == 0;
                        let creating = round == 0 || (round == 3 && k == 0);
                        ledger
                            .lock()
                            .unwrap()
                            .in_flight
                            .insert(key.clone(), (!deleting).then(|| v.clone()));
                        let (result, kind) = if creating {
                            (store.create(&key, v.clone()).await, EventType::Added)
                        } else if deleting {
                            (store.delete(&key, *rev).await, EventType::Deleted)
                        } else {
                            (
                                store.update(&key, *rev, v.clone()).await,
                                EventType::Modified,
                            )
                        };
                        let Ok(r) = result else { return };
                        *rev = r;
                        let mut l = ledger.lock().unwrap();
                        l.in_flight.remove(&key);
                        l.revisions.insert(r, (key.clone(), kind));
                        let expect = if deleting {
                            Expect::Deleted(r)
                        } else {
                            Expect::Value(v, r)
                        };
                        l.acked.insert(key, expect);
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
}

fn options() -> StoreOptions {
    StoreOptions { history: 10_000 }
}

/// Runs the workload on a fresh disk whose power goes after `cut` mutating
/// operations counted from when the store is open (never, for `None`).
/// Returns the disk, what was acknowledged, and the operations the open
/// took.
async fn run_until_power_loss(cut: Option<u64>) -> (Disk, Ledger, u64) {
    let disk = Disk::default();
    let store = Arc::new(EmbeddedStore::on_backend(disk.clone(), options()).expect("open"));
    let opened = disk.ops();
    if let Some(cut) = cut {
        disk.cut_power_after(opened + cut);
    }
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    workload(store.clone(), ledger.clone()).await;
    drop(store);
    let ledger = std::mem::take(&mut *ledger.lock().unwrap());
    (disk, ledger, opened)
}

/// Reopens the store from `image` and checks that it holds every
/// acknowledged write, in its objects and in its watch history.
async fn check_recovered(image: Vec<u8>, ledger: &Ledger, what: &str) {
    let store = EmbeddedStore::on_backend(Disk::with_image(image), options())
        .unwrap_or_else(|e| panic!("{what}: the store does not open after the power loss: {e}"));
    let last_acked = ledger.revisions.keys().next_back().copied().unwrap_or(0);
    let revision = store.current_revision();
    assert!(
        revision >= last_acked,
        "{what}: the store is at revision {revision} after the power loss, \
         but revision {last_acked} was acknowledged"
    );
    for (key, expect) in &ledger.acked {
        let got = store.get(key).await.unwrap();
        let got_value = got.as_ref().map(|kv| kv.value.to_vec());
        // A write in flight at the power loss may have reached the disk.
        if let Some(in_flight) = ledger.in_flight.get(key) {
            if got_value == *in_flight {
                continue;
            }
        }
        match expect {
            Expect::Value(v, r) => {
                let kv = got.unwrap_or_else(|| {
                    panic!(
                        "{what}: {key} was acknowledged at revision {r} \
                         and is gone after the power loss"
                    )
                });
                assert_eq!(
                    (kv.value.to_vec(), kv.mod_revision),
                    (v.clone(), *r),
                    "{what}: {key} is not what was acknowledged at revision {r}"
                );
            }
            Expect::Deleted(r) => assert!(
                got.is_none(),
                "{what}: {key} was acknowledged as deleted at revision {r} \
                 and is back after the power loss"
            ),
        }
    }
    // The watch history replays every acknowledged write.
    let mut watch = store.watch("/registry/", 0).await.unwrap();
    let mut replayed = BTreeMap::new();
    while replayed.len() < revision as usize {
        let event = tokio::time::timeout(std::time::Duration::from_secs(5), watch.next())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{what}: the history ends at {:?} below revision {revision}",
                    replayed.keys().next_back()
                )
            })
            .expect("the watch stays open")
            .expect("the history reads");
        replayed.insert(event.revision, (event.key, event.kind));
    }
    for (rev, acked) in &ledger.revisions {
        assert_eq!(
            replayed.get(rev),
            Some(acked),
            "{what}: the watch history does not replay acknowledged revision {rev}"
        );
    }
}

#[tokio::test]
async fn no_acknowledged_write_is_lost_at_a_power_loss() {
    // Without a power loss: how many disk operations the workload takes,
    // and a check that the workload and the checks agree.
    let (disk, ledger, _) = run_until_power_loss(None).await;
    let total = disk.ops();
    let writes = WRITERS * KEYS_PER_WRITER * ROUNDS;
    assert_eq!(ledger.revisions.len(), writes, "every write acknowledged");
    check_recovered(disk.image_after_loss(|| false), &ledger, "no power loss").await;

    let mut rng = XorShift(0x5eed_b05c_0de5_1dea);
    let mut acked_at_loss = Vec::new();
    // Every 3rd operation of the run plus a random offset: writes of data
    // pages, of the header, and syncs all get their turn.
    let mut cut = 0;
    while cut < total {
        let (disk, ledger, _) = run_until_power_loss(Some(cut)).await;
        // Writers batch differently from run to run, so a run may take
        // fewer operations than the first: then the power goes after it.
        if disk.is_dead() {
            acked_at_loss.push(ledger.revisions.len());
        }
        let what = |image: &str| format!("power loss after operation {cut} of {total} ({image})");
        check_recovered(
            disk.image_after_loss(|| false),
            &ledger,
            &what("no unsynced sector kept"),
        )
        .await;
        check_recovered(
            disk.image_after_loss(|| true),
            &ledger,
            &what("every unsynced sector kept"),
        )
        .await;
        for _ in 0..2 {
            let seed = rng.next();
            let mut pick = XorShift(seed | 1);
            check_recovered(
                disk.image_after_loss(|| pick.coin()),
                &ledger,
                &what(&format!("random unsynced sectors kept, seed {seed:#x}")),
            )
            .await;
        }
        cut += 1 + rng.next() % 5;
    }
    // The cuts fell all through the run, not only before the first commit.
    assert!(
        acked_at_loss.first() == Some(&0) && acked_at_loss.iter().any(|&n| n > writes / 2),
        "acknowledged writes at the cuts: {acked_at_loss:?}"
    );
}
