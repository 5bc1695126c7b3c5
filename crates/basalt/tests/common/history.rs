//! What a workload was acknowledged, and the checks of a recovered state
//! against it, shared by the crash and fault-injection tests.
//!
//! A workload records the batches the engine acknowledged, in order, and how
//! many of them were durable (a `sync` write, even of an empty batch,
//! `sync_wal`, `flush` or `compact_range` makes all earlier writes durable).
//! A recovered database must hold exactly the first `k` acknowledged batches
//! for some `k` at or above the durable count: no hole, no half batch,
//! nothing unwritten.

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;

use basalt::testing::{CrashMode, MemFs};
use basalt::{Db, Error, Options, WriteBatch, WriteOptions};
use rand::Rng;
use rand::rngs::StdRng;

use super::{Model, random_bound, random_key, random_value};

pub const DB: &str = "/db";

#[derive(Clone, Debug)]
pub enum Entry {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

impl Entry {
    pub fn key(&self) -> &[u8] {
        match self {
            Entry::Put(k, _) | Entry::Delete(k) => k,
        }
    }
}

#[derive(Clone, Debug)]
pub enum Op {
    Write {
        entries: Vec<Entry>,
        sync: bool,
    },
    Flush,
    SyncWal,
    /// `compact_range` over these bounds (it flushes first).
    Compact(Bound<Vec<u8>>, Bound<Vec<u8>>),
}

pub fn random_entry(rng: &mut StdRng) -> Entry {
    let key = random_key(rng);
    if rng.random_bool(0.75) { Entry::Put(key, random_value(rng)) } else { Entry::Delete(key) }
}

/// A random workload: single puts and deletes, batches (some empty), each
/// synced or not, and now and then a flush, an explicit WAL sync or a
/// `compact_range`.
/// The share of synced writes varies per workload, so some crash with a long
/// unsynced tail and some with almost none.
pub fn workload(rng: &mut StdRng, len: usize) -> Vec<Op> {
    let sync_share = [0.0, 0.02, 0.1, 0.3][rng.random_range(0..4)];
    (0..len)
        .map(|_| match rng.random_range(0..100) {
            0..2 => Op::Flush,
            2..4 => Op::SyncWal,
            4..6 => Op::Compact(random_bound(rng), random_bound(rng)),
            6..80 => Op::Write { entries: vec![random_entry(rng)], sync: rng.random_bool(sync_share) },
            _ => {
                let n = rng.random_range(0..12);
                Op::Write {
                    entries: (0..n).map(|_| random_entry(rng)).collect(),
                    sync: rng.random_bool(sync_share),
                }
            }
        })
        .collect()
}

pub fn apply(model: &mut Model, entries: &[Entry]) {
    for e in entries {
        match e {
            Entry::Put(k, v) => {
                model.insert(k.clone(), v.clone());
            }
            Entry::Delete(k) => {
                model.remove(k);
            }
        }
    }
}

/// Submits one write through the matching public call.
pub fn submit(db: &Db, entries: &[Entry], sync: bool) -> Result<(), Error> {
    let opts = WriteOptions::default().sync(sync);
    match entries {
        [Entry::Put(k, v)] => db.put_opt(k, v, &opts),
        [Entry::Delete(k)] => db.delete_opt(k, &opts),
        _ => {
            let mut batch = WriteBatch::new();
            for e in entries {
                match e {
                    Entry::Put(k, v) => batch.put(k, v),
                    Entry::Delete(k) => batch.delete(k),
                }
            }
            db.write_opt(batch, &opts)
        }
    }
}

/// What a workload got acknowledged, in order.
#[derive(Clone, Debug, Default)]
pub struct History {
    /// Acknowledged batches, in order.
    pub acked: Vec<Vec<Entry>>,
    /// The first `durable` acknowledged batches must survive any crash.
    pub durable: usize,
    /// A write that returned an error: it may or may not survive (its WAL
    /// append may have reached the file before the failure).
    pub maybe: Option<Vec<Entry>>,
}

impl History {
    /// Runs one operation; returns its error, after which the caller stops.
    pub fn run(&mut self, db: &Db, op: &Op) -> Result<(), Error> {
        match op {
            Op::Write { entries, sync } => match submit(db, entries, *sync) {
                Ok(()) => {
                    self.acked.push(entries.clone());
                    // Even an empty batch: a synced write promises that
                    // every earlier write is durable.
                    if *sync {
                        self.durable = self.acked.len();
                    }
                    Ok(())
                }
                Err(e) => {
                    self.maybe = Some(entries.clone());
                    Err(e)
                }
            },
            Op::Flush | Op::SyncWal | Op::Compact(..) => {
                match op {
                    Op::Flush => db.flush(),
                    Op::Compact(lo, hi) => db.compact_range((lo.clone(), hi.clone())),
                    _ => db.sync_wal(),
                }?;
                // Each makes every earlier write durable.
                self.durable = self.acked.len();
                Ok(())
            }
        }
    }

    /// The batches in order, the `maybe` one last.
    pub fn batches(&self) -> impl Iterator<Item = &Vec<Entry>> {
        self.acked.iter().chain(self.maybe.iter())
    }

    /// Every key any batch touched.
    pub fn keys(&self) -> BTreeSet<Vec<u8>> {
        self.batches().flatten().map(|e| e.key().to_vec()).collect()
    }

    /// The model after the first `k` batches.
    pub fn model_after(&self, k: usize) -> Model {
        let mut model = Model::new();
        for b in self.batches().take(k) {
            apply(&mut model, b);
        }
        model
    }

    /// Which batches wrote `value` to `key` (or deleted it, for `None`).
    pub fn describe(&self, key: &[u8], value: Option<&Vec<u8>>) -> String {
        let writers: Vec<usize> = self
            .batches()
            .enumerate()
            .filter(|(_, b)| {
                b.iter().any(|e| match (e, value) {
                    (Entry::Put(k, v), Some(want)) => k == key && v == want,
                    (Entry::Delete(k), None) => k == key,
                    _ => false,
                })
            })
            .map(|(i, _)| i)
            .collect();
        match value {
            Some(v) => format!("{}-byte value written by batches {writers:?}", v.len()),
            None => format!("absent (deleted by batches {writers:?})"),
        }
    }

    /// The `k` (at or above `durable`) such that `got` is the model after
    /// the first `k` batches; on failure, a description of the closest one.
    pub fn matching_prefix(&self, got: &Model) -> Result<usize, String> {
        let total = self.acked.len() + usize::from(self.maybe.is_some());
        let mut model = Model::new();
        let mut best: Option<(usize, usize)> = None;
        let mut matched = None;
        for (k, batch) in std::iter::once(None).chain(self.batches().map(Some)).enumerate() {
            if let Some(b) = batch {
                apply(&mut model, b);
            }
            if k < self.durable {
                continue;
            }
            if &model == got {
                matched = Some(k);
                continue;
            }
            let diff = differing_keys(&model, got).len();
            if best.is_none_or(|(_, d)| diff < d) {
                best = Some((k, diff));
            }
        }
        if let Some(k) = matched {
            return Ok(k);
        }
        let (k, _) = best.unwrap_or((total, 0));
        let closest = self.model_after(k);
        let diff: Vec<String> = differing_keys(&closest, got)
            .into_iter()
            .take(8)
            .map(|key| {
                let got_value = got.get(&key);
                format!(
                    "{key:?}: want {} got {}",
                    self.describe(&key, closest.get(&key)),
                    self.describe(&key, got_value)
                )
            })
            .collect();
        let lost: Vec<usize> = (0..self.durable).filter(|&j| &self.model_after(j) == got).collect();
        Err(format!(
            "recovered state is no prefix of the acknowledged writes: {} acked, {} durable, maybe={}; \
             prefixes below the durable count that match: {lost:?}; closest prefix k={k} differs in {diff:?}",
            self.acked.len(),
            self.durable,
            self.maybe.is_some(),
        ))
    }
}

pub fn differing_keys(a: &Model, b: &Model) -> Vec<Vec<u8>> {
    let keys: BTreeSet<&Vec<u8>> = a.keys().chain(b.keys()).collect();
    keys.into_iter().filter(|k| a.get(*k) != b.get(*k)).cloned().collect()
}

/// `template` on another file system.
pub fn options_on(fs: &MemFs, template: &Options) -> Options {
    template.clone().fs(Arc::new(fs.clone()))
}

/// An independent copy of a crashed image (whose files are all synced).
pub fn copy(image: &MemFs) -> MemFs {
    image.crash(CrashMode::DropUnsynced, 0)
}

pub fn open(fs: &MemFs, template: &Options, what: &str) -> Db {
    match Db::open(DB, options_on(fs, template)) {
        Ok(db) => db,
        Err(e) => panic!("{what}: the database must open, got {e}"),
    }
}

/// Contents read three ways (forward scan, reverse scan, point gets of every
/// key the history touched), which must agree.
pub fn read_all(db: &Db, keys: &BTreeSet<Vec<u8>>) -> Model {
    let got = super::contents(db);
    let mut rev = super::collect(db.iter_rev::<&[u8]>(..));
    rev.reverse();
    assert_eq!(rev, got.clone().into_iter().collect::<Vec<_>>(), "reverse scan differs from forward scan");
    for k in keys {
        let v = db.get(k).unwrap_or_else(|e| panic!("get {k:?}: {e}"));
        assert_eq!(v.map(|v| v.to_vec()).as_ref(), got.get(k), "get {k:?} differs from the scan");
    }
    got
}

/// Opens a crashed image, checks the prefix property, then that a reopen
/// reads the same and that new writes work and survive a clean reopen.
/// Leaves `image` untouched; returns the recovered contents.
pub fn verify_recovery(image: &MemFs, history: &History, template: &Options, rng: &mut StdRng) -> Model {
    let fs = copy(image);
    let db = open(&fs, template, "crashed image");
    let keys = history.keys();
    let got = read_all(&db, &keys);
    if let Err(msg) = history.matching_prefix(&got) {
        panic!("{msg}");
    }
    db.close().expect("close after recovery");
    let db = open(&fs, template, "reopen after recovery");
    assert_eq!(read_all(&db, &keys), got, "contents changed across a clean reopen");
    let mut model = got.clone();
    for i in 0..rng.random_range(1..30) {
        let entries: Vec<Entry> = (0..rng.random_range(1..4)).map(|_| random_entry(rng)).collect();
        submit(&db, &entries, rng.random_bool(0.3)).expect("write after recovery");
        apply(&mut model, &entries);
        if i % 10 == 9 {
            db.flush().expect("flush after recovery");
        }
    }
    assert_eq!(super::contents(&db), model, "contents after new writes");
    db.close().expect("close after new writes");
    let db = open(&fs, template, "reopen after new writes");
    assert_eq!(super::contents(&db), model, "new writes lost across a clean reopen");
    got
}

/// Prints what a failing case was doing when a panic unwinds through it.
pub struct Context(pub String);

impl Drop for Context {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("failed during: {}", self.0);
        }
    }
}

/// Asserts that `result` is `Error::Closed`.
pub fn assert_closed(result: Result<(), Error>, what: &str) {
    match result {
        Err(Error::Closed(_)) => {}
        Ok(()) => panic!("{what}: acknowledged after a failed fsync"),
        Err(e) => panic!("{what}: expected Error::Closed, got {e}"),
    }
}
