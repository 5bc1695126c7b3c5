//! A flush of several immutable memtables at once (issue 20): every
//! acknowledged (synced) write survives a power loss at every I/O step of
//! the merged flush, rewritten keys and deletes included; so do memtables
//! that share one WAL under a small write budget (issue 60).

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};

use basalt::fs::{FileLock, Fs, RandomAccessFile, WritableFile};
use basalt::testing::{CrashMode, MemFs};
use basalt::{Db, Options, Result, WriteBatch, WriteOptions};

const DIR: &str = "/db";

/// A file system whose SST creations wait while the gate is shut: the
/// flush thread stops at its first file, and memtables queue up behind it.
#[derive(Debug, Clone)]
struct GatedFs {
    inner: MemFs,
    open: Arc<(Mutex<bool>, Condvar)>,
}

impl GatedFs {
    fn set_open(&self, open: bool) {
        *self.open.0.lock().expect("gate") = open;
        self.open.1.notify_all();
    }
}

impl Fs for GatedFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        if path.extension().is_some_and(|e| e == "sst") {
            let mut open = self.open.0.lock().expect("gate");
            while !*open {
                open = self.open.1.wait(open).expect("gate");
            }
        }
        self.inner.create(path)
    }
    fn open(&self, path: &Path) -> Result<Box<dyn RandomAccessFile>> {
        self.inner.open(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        self.inner.remove(path)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn exists(&self, path: &Path) -> Result<bool> {
        self.inner.exists(path)
    }
    fn is_dir(&self, path: &Path) -> Result<bool> {
        self.inner.is_dir(path)
    }
    fn create_dir_all(&self, path: &Path) -> Result<()> {
        self.inner.create_dir_all(path)
    }
    fn sync_dir(&self, path: &Path) -> Result<()> {
        self.inner.sync_dir(path)
    }
    fn lock(&self, path: &Path, dir: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock(path, dir)
    }
}

/// How the memtables queue up: each on a WAL of its own (16 KiB memtables,
/// a 64 MiB budget), or several on one WAL (a 64 KiB budget switches
/// memtables at 16 KiB, and a WAL at 64 KiB).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Queue {
    WalEach,
    SharedWal,
}

impl Queue {
    fn options(self, fs: Arc<dyn Fs>) -> Options {
        let o = Options::default().fs(fs).immutable_memtables_max(16);
        match self {
            Queue::WalEach => o.memtable_bytes_max(16 << 10).write_buffer_bytes_max(64 << 20),
            Queue::SharedWal => o.memtable_bytes_max(64 << 10).write_buffer_bytes_max(64 << 10),
        }
    }

    /// Immutable memtables to queue: within the budget.
    fn memtables(self) -> usize {
        match self {
            Queue::WalEach => 5,
            Queue::SharedWal => 3,
        }
    }
}

fn options(fs: Arc<dyn Fs>) -> Options {
    Queue::WalEach.options(fs)
}

/// Writes synced batches (keys rewritten across memtables, some deleted)
/// with the flush held at its first file until at least five memtables
/// are immutable; returns the database, its gate and what it acknowledged.
fn queue_memtables(base: &MemFs, seed: u64) -> (Db, GatedFs, BTreeMap<Vec<u8>, Vec<u8>>) {
    queue_memtables_as(Queue::WalEach, base, seed)
}

/// [`queue_memtables`], with memtables queued as `queue` says.
fn queue_memtables_as(queue: Queue, base: &MemFs, seed: u64) -> (Db, GatedFs, BTreeMap<Vec<u8>, Vec<u8>>) {
    let fs = GatedFs { inner: base.clone(), open: Arc::new((Mutex::new(false), Condvar::new())) };
    let db = Db::open(DIR, queue.options(Arc::new(fs.clone()))).expect("open");
    let mut rng = common::rng(seed);
    let mut model = BTreeMap::new();
    let synced = WriteOptions::default().sync(true);
    let mut n = 0u64;
    while db.stats().immutable_memtables < queue.memtables() {
        let mut batch = WriteBatch::new();
        for _ in 0..20 {
            let key = format!("k{:03}", rand::Rng::random_range(&mut rng, 0..300)).into_bytes();
            if rand::Rng::random_bool(&mut rng, 0.15) {
                batch.delete(&key);
                model.remove(&key);
            } else {
                let value =
                    format!("{n}-{}", "v".repeat(rand::Rng::random_range(&mut rng, 0..120))).into_bytes();
                batch.put(&key, &value);
                model.insert(key, value);
            }
            n += 1;
        }
        db.write_opt(batch, &synced).expect("write");
        assert!(n < 2_000_000, "memtables never queued up");
    }
    (db, fs, model)
}

/// The first key where `got` and `want` differ, for a short failure
/// message (`None` when they are equal).
fn first_difference(got: &BTreeMap<Vec<u8>, Vec<u8>>, want: &BTreeMap<Vec<u8>, Vec<u8>>) -> Option<String> {
    let keys: std::collections::BTreeSet<&Vec<u8>> = got.keys().chain(want.keys()).collect();
    keys.into_iter().find(|k| got.get(*k) != want.get(*k)).map(|k| {
        let show =
            |v: Option<&Vec<u8>>| v.map(|v| String::from_utf8_lossy(&v[..v.len().min(12)]).into_owned());
        format!("{}: got {:?}, want {:?}", String::from_utf8_lossy(k), show(got.get(k)), show(want.get(k)))
    })
}

fn contents(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.iter::<&[u8]>(..)
        .map(|item| {
            let (k, v) = item.expect("read");
            (k.to_vec(), v.to_vec())
        })
        .collect()
}

#[test]
fn merged_flush_survives_power_loss_at_every_step() {
    common::run_seeded("merged_flush_survives_power_loss_at_every_step", 2, |seed| {
        let base = MemFs::new();
        // The whole run once: several memtables go into one flush.
        {
            let (db, gate, model) = queue_memtables(&common::history::copy(&base), seed);
            let queued = db.stats().immutable_memtables;
            gate.set_open(true);
            db.flush().expect("flush");
            db.wait_for_background_work().expect("settle");
            let stats = db.stats();
            assert!(
                stats.flushes < queued as u64,
                "{queued} memtables in {} flushes: none merged",
                stats.flushes
            );
            assert_eq!(first_difference(&contents(&db), &model), None);
        }
        let mut step = 0;
        loop {
            let image = common::history::copy(&base);
            let (db, gate, model) = queue_memtables(&image, seed);
            image.freeze_after(step);
            gate.set_open(true);
            let flushed = db.flush().and_then(|()| db.wait_for_background_work());
            let fired = image.is_frozen();
            image.unfreeze();
            drop(db);
            for mode in [CrashMode::DropUnsynced, CrashMode::TearLastWrite] {
                let crashed = image.crash(mode, step);
                let db = Db::open(DIR, options(Arc::new(crashed))).expect("reopen");
                let diff = first_difference(&contents(&db), &model);
                assert_eq!(
                    diff, None,
                    "step {step} ({mode:?}, flush {flushed:?}): an acknowledged write changed"
                );
                db.close().expect("close");
            }
            if !fired {
                break;
            }
            step += 1;
            assert!(step < 10_000, "the flush never finished");
        }
        // The flushes' creates, appends, syncs and the MANIFEST edits.
        assert!(step >= 10, "only {step} I/O steps: the flush did not run under the faults");
    });
}

/// The WAL files in the directory.
fn wal_files(fs: &MemFs) -> usize {
    let wal = |n: &&String| Path::new(n.as_str()).extension().is_some_and(|e| e == "wal");
    fs.list(Path::new(DIR)).expect("list").iter().filter(wal).count()
}

#[test]
fn memtables_sharing_a_wal_survive_power_loss_at_every_step() {
    common::run_seeded("memtables_sharing_a_wal_survive_power_loss_at_every_step", 2, |seed| {
        let base = MemFs::new();
        {
            let image = common::history::copy(&base);
            let (db, gate, model) = queue_memtables_as(Queue::SharedWal, &image, seed);
            assert_eq!(wal_files(&image), 1, "three memtables switched for room, on one WAL");
            gate.set_open(true);
            db.flush().expect("flush");
            db.wait_for_background_work().expect("settle");
            assert_eq!(first_difference(&contents(&db), &model), None);
            db.close().expect("close");
            let db = Db::open(DIR, Queue::SharedWal.options(Arc::new(image))).expect("reopen");
            assert_eq!(first_difference(&contents(&db), &model), None, "after a reopen");
        }
        let mut step = 0;
        loop {
            let image = common::history::copy(&base);
            let (db, gate, model) = queue_memtables_as(Queue::SharedWal, &image, seed);
            image.freeze_after(step);
            gate.set_open(true);
            let flushed = db.flush().and_then(|()| db.wait_for_background_work());
            let fired = image.is_frozen();
            image.unfreeze();
            drop(db);
            for mode in [CrashMode::DropUnsynced, CrashMode::TearLastWrite] {
                let crashed = image.crash(mode, step);
                let db = Db::open(DIR, Queue::SharedWal.options(Arc::new(crashed))).expect("reopen");
                let diff = first_difference(&contents(&db), &model);
                assert_eq!(
                    diff, None,
                    "step {step} ({mode:?}, flush {flushed:?}): an acknowledged write changed"
                );
                db.close().expect("close");
            }
            if !fired {
                break;
            }
            step += 1;
            assert!(step < 10_000, "the flush never finished");
        }
        assert!(step >= 10, "only {step} I/O steps: the flush did not run under the faults");
    });
}
