//! Crash tests of the whole engine on the simulated file system.
//!
//! Every test records the writes the engine acknowledged, in order, and how
//! many of them were durable (a `sync` write, even of an empty batch,
//! `sync_wal`, `flush` or `compact_range` makes all earlier writes durable). After a simulated power loss the database must
//! open, and hold exactly the first `k` acknowledged batches for some `k` at
//! or above the durable count: no hole, no half batch, nothing unwritten.
//!
//! - `crash_at_random_points`: power loss between operations of a random
//!   workload, under every crash mode.
//! - `crash_in_the_middle_of_io`: the file system freezes after the N-th
//!   mutating operation (as in `SQLite`'s TH3), then loses power; also
//!   freezes during the recovery of a crashed image and crashes again.
//! - `failed_*`: a failed fsync is never acknowledged, and writes stop after
//!   it (no retry that could report lost pages as durable).
//!
//! A failure prints the seed that replays it (`BASALT_SEED=…`);
//! `BASALT_CASES` runs more cases. Flushes and compactions run on their own
//! threads, so a replay takes the same workload and crash points but may
//! interleave the background work differently.

mod common;

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;

use basalt::io::{CrashMode, MemFs};
use basalt::{Db, Error, Options, WriteBatch, WriteOptions};
use common::{Model, random_bound, random_key, random_value, rng, run_seeded, small_options};
use rand::Rng;
use rand::rngs::StdRng;

const DB: &str = "/db";

#[derive(Clone, Debug)]
enum Entry {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

impl Entry {
    fn key(&self) -> &[u8] {
        match self {
            Entry::Put(k, _) | Entry::Delete(k) => k,
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Write {
        entries: Vec<Entry>,
        sync: bool,
    },
    Flush,
    SyncWal,
    /// `compact_range` over these bounds (it flushes first).
    Compact(Bound<Vec<u8>>, Bound<Vec<u8>>),
}

fn random_entry(rng: &mut StdRng) -> Entry {
    let key = random_key(rng);
    if rng.random_bool(0.75) { Entry::Put(key, random_value(rng)) } else { Entry::Delete(key) }
}

/// A random workload: single puts and deletes, batches (some empty), each
/// synced or not, and now and then a flush, an explicit WAL sync or a
/// `compact_range`.
/// The share of synced writes varies per workload, so some crash with a long
/// unsynced tail and some with almost none.
fn workload(rng: &mut StdRng, len: usize) -> Vec<Op> {
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

fn apply(model: &mut Model, entries: &[Entry]) {
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
fn submit(db: &Db, entries: &[Entry], sync: bool) -> Result<(), Error> {
    let opts = WriteOptions { sync };
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
struct History {
    /// Acknowledged batches, in order.
    acked: Vec<Vec<Entry>>,
    /// The first `durable` acknowledged batches must survive any crash.
    durable: usize,
    /// A write that returned an error: it may or may not survive (its WAL
    /// append may have reached the file before the failure).
    maybe: Option<Vec<Entry>>,
}

impl History {
    /// Runs one operation; returns its error, after which the caller stops.
    fn run(&mut self, db: &Db, op: &Op) -> Result<(), Error> {
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
    fn batches(&self) -> impl Iterator<Item = &Vec<Entry>> {
        self.acked.iter().chain(self.maybe.iter())
    }

    /// Every key any batch touched.
    fn keys(&self) -> BTreeSet<Vec<u8>> {
        self.batches().flatten().map(|e| e.key().to_vec()).collect()
    }

    /// The model after the first `k` batches.
    fn model_after(&self, k: usize) -> Model {
        let mut model = Model::new();
        for b in self.batches().take(k) {
            apply(&mut model, b);
        }
        model
    }

    /// Which batches wrote `value` to `key` (or deleted it, for `None`).
    fn describe(&self, key: &[u8], value: Option<&Vec<u8>>) -> String {
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
    fn matching_prefix(&self, got: &Model) -> Result<usize, String> {
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

fn differing_keys(a: &Model, b: &Model) -> Vec<Vec<u8>> {
    let keys: BTreeSet<&Vec<u8>> = a.keys().chain(b.keys()).collect();
    keys.into_iter().filter(|k| a.get(*k) != b.get(*k)).cloned().collect()
}

/// `template` on another file system.
fn options_on(fs: &MemFs, template: &Options) -> Options {
    Options { fs: Arc::new(fs.clone()), ..template.clone() }
}

/// An independent copy of a crashed image (whose files are all synced).
fn copy(image: &MemFs) -> MemFs {
    image.crash(CrashMode::DropUnsynced, 0)
}

fn open(fs: &MemFs, template: &Options, what: &str) -> Db {
    match Db::open(DB, options_on(fs, template)) {
        Ok(db) => db,
        Err(e) => panic!("{what}: the database must open, got {e}"),
    }
}

/// Contents read three ways (forward scan, reverse scan, point gets of every
/// key the history touched), which must agree.
fn read_all(db: &Db, keys: &BTreeSet<Vec<u8>>) -> Model {
    let got = common::contents(db);
    let mut rev = common::collect(db.iter_rev::<&[u8]>(..));
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
fn verify_recovery(image: &MemFs, history: &History, template: &Options, rng: &mut StdRng) -> Model {
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
    assert_eq!(common::contents(&db), model, "contents after new writes");
    db.close().expect("close after new writes");
    let db = open(&fs, template, "reopen after new writes");
    assert_eq!(common::contents(&db), model, "new writes lost across a clean reopen");
    got
}

/// Freezes the file system at `points` during the recovery of `image`,
/// crashes the half-recovered copy and opens it again: it must hold what a
/// clean recovery of `image` holds.
fn verify_crash_during_recovery(
    image: &MemFs,
    expected: &Model,
    template: &Options,
    points: &[u64],
    seed: u64,
) {
    for (i, &point) in points.iter().enumerate() {
        let fs = copy(image);
        fs.freeze_after(point);
        // Recovery fails once frozen (or finishes, for late points).
        drop(Db::open(DB, options_on(&fs, template)));
        let crash_seed = seed.wrapping_add(point).wrapping_add(i as u64);
        let mode = CrashMode::ALL[(crash_seed % 3) as usize];
        let again = fs.crash(mode, crash_seed);
        let db = match Db::open(DB, options_on(&again, template)) {
            Ok(db) => db,
            Err(e) => panic!("crash after {point} operations of recovery ({mode:?}): reopen failed: {e}"),
        };
        let got = common::contents(&db);
        assert!(
            &got == expected,
            "crash after {point} operations of recovery ({mode:?}) changed the contents; differing keys: {:?}",
            differing_keys(expected, &got)
        );
    }
}

/// Mutating operations a clean recovery of `image` takes.
fn recovery_ops(image: &MemFs, template: &Options) -> u64 {
    let fs = copy(image);
    let db = open(&fs, template, "counting recovery");
    let ops = fs.mutating_ops();
    drop(db);
    ops
}

#[test]
fn crash_at_random_points() {
    run_seeded("crash_at_random_points", 300, |seed| {
        let mut rng = rng(seed);
        let fs = MemFs::new();
        let template = small_options(&fs, &mut rng);
        let db = open(&fs, &template, "fresh database");
        let len = rng.random_range(100..300);
        let ops = workload(&mut rng, len);
        let crash_at: BTreeSet<usize> = (0..4).map(|_| rng.random_range(0..len)).collect();
        let mut history = History::default();
        for (i, op) in ops.iter().enumerate() {
            history.run(&db, op).unwrap_or_else(|e| panic!("op {i} {op:?}: {e}"));
            if crash_at.contains(&i) {
                let mode = CrashMode::ALL[rng.random_range(0..3)];
                let image = fs.crash(mode, rng.random());
                verify_recovery(&image, &history, &template, &mut rng);
            }
        }
        for mode in CrashMode::ALL {
            let image = fs.crash(mode, rng.random());
            let recovered = verify_recovery(&image, &history, &template, &mut rng);
            if mode == CrashMode::TearLastWrite {
                let points: Vec<u64> = (0..recovery_ops(&image, &template)).collect();
                verify_crash_during_recovery(&image, &recovered, &template, &points, seed);
            }
        }
        drop(db);
    });
}

/// Prints what a failing case was doing when a panic unwinds through it.
struct Context(String);

impl Drop for Context {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("failed during: {}", self.0);
        }
    }
}

/// Runs `ops` on a fresh database whose file system freezes after `freeze`
/// mutating operations (never, for `None`); returns the file system and what
/// was acknowledged before the first error.
fn run_until_frozen(template: &Options, ops: &[Op], freeze: Option<u64>) -> (MemFs, History) {
    let fs = MemFs::new();
    if let Some(n) = freeze {
        fs.freeze_after(n);
    }
    let mut history = History::default();
    let Ok(db) = Db::open(DB, options_on(&fs, template)) else {
        assert!(freeze.is_some(), "open failed on a healthy file system");
        return (fs, history);
    };
    for op in ops {
        if let Err(e) = history.run(&db, op) {
            assert!(freeze.is_some(), "{op:?} failed on a healthy file system: {e}");
            break;
        }
    }
    drop(db);
    (fs, history)
}

#[test]
fn crash_in_the_middle_of_io() {
    run_seeded("crash_in_the_middle_of_io", 50, |seed| {
        let mut rng = rng(seed);
        let template = small_options(&MemFs::new(), &mut rng);
        let len = rng.random_range(30..80);
        let ops = workload(&mut rng, len);
        let (counted, _) = run_until_frozen(&template, &ops, None);
        let total = counted.mutating_ops();
        // Every point for small workloads, else a sample (always with the
        // first and last few).
        let points: Vec<u64> = if total <= 300 {
            (0..=total).collect()
        } else {
            let mut p: BTreeSet<u64> = (0..10).chain(total - 10..=total).collect();
            while p.len() < 300 {
                p.insert(rng.random_range(0..total));
            }
            p.into_iter().collect()
        };
        for point in points {
            let (fs, history) = run_until_frozen(&template, &ops, Some(point));
            let mode = CrashMode::ALL[rng.random_range(0..3)];
            let crash_seed: u64 = rng.random();
            let image = fs.crash(mode, crash_seed);
            let context =
                Context(format!("frozen after {point} of {total} ops, crash {mode:?} seed {crash_seed}"));
            let recovered = verify_recovery(&image, &history, &template, &mut common::rng(crash_seed));
            // One crash during this image's recovery, at a random point.
            let recovery = recovery_ops(&image, &template);
            let at = rng.random_range(0..recovery.max(1));
            verify_crash_during_recovery(&image, &recovered, &template, &[at], crash_seed);
            drop(context);
        }
    });
}

/// Asserts that `result` is `Error::Closed`.
fn assert_closed(result: Result<(), Error>, what: &str) {
    match result {
        Err(Error::Closed(_)) => {}
        Ok(()) => panic!("{what}: acknowledged after a failed fsync"),
        Err(e) => panic!("{what}: expected Error::Closed, got {e}"),
    }
}

/// After a failed fsync: every kind of write is refused with `Closed`, also
/// once syncs work again; reads still work; a crash keeps a prefix.
fn assert_stopped(db: &Db, fs: &MemFs, history: &History, template: &Options, rng: &mut StdRng) {
    for round in 0..2 {
        assert_closed(db.put(b"after-failure-put", b"x"), "put");
        assert_closed(db.put_opt(b"after-failure-sync", b"x", &WriteOptions::sync()), "synced put");
        assert_closed(db.delete(b"after-failure-delete"), "delete");
        let mut batch = WriteBatch::new();
        batch.put(b"after-failure-batch", b"x");
        assert_closed(db.write(batch), "batch");
        assert!(db.get(b"after-failure-put").expect("reads keep working").is_none());
        if round == 0 {
            // No retry: pages a failed fsync dropped must not be reported
            // durable by a later fsync that succeeds.
            fs.fail_syncs(false);
        }
    }
    let image = fs.crash(CrashMode::TearLastWrite, 7);
    let got = verify_recovery(&image, history, template, rng);
    assert!(got.keys().all(|k| !k.starts_with(b"after-failure")), "a refused write survived");
}

#[test]
fn failed_sync_write_is_never_acknowledged() {
    let mut rng = rng(1);
    let fs = MemFs::new();
    let template = Options { memtable_bytes_max: 1 << 20, ..small_options(&fs, &mut rng) };
    let db = open(&fs, &template, "fresh database");
    let mut history = History::default();
    for i in 0..20u32 {
        let op = Op::Write {
            entries: vec![Entry::Put(i.to_be_bytes().to_vec(), b"v".to_vec())],
            sync: i % 5 == 0,
        };
        history.run(&db, &op).expect("healthy write");
    }
    fs.fail_syncs(true);
    let op = Op::Write { entries: vec![Entry::Put(b"doomed".to_vec(), b"v".to_vec())], sync: true };
    assert!(history.run(&db, &op).is_err(), "a synced write whose fsync failed was acknowledged");
    assert_stopped(&db, &fs, &history, &template, &mut rng);
}

#[test]
fn failed_sync_wal_stops_writes() {
    let mut rng = rng(2);
    let fs = MemFs::new();
    let template = Options { memtable_bytes_max: 1 << 20, ..small_options(&fs, &mut rng) };
    let db = open(&fs, &template, "fresh database");
    let mut history = History::default();
    for i in 0..20u32 {
        let op =
            Op::Write { entries: vec![Entry::Put(i.to_be_bytes().to_vec(), b"v".to_vec())], sync: false };
        history.run(&db, &op).expect("healthy write");
    }
    fs.fail_syncs(true);
    assert!(history.run(&db, &Op::SyncWal).is_err(), "sync_wal reported success with failing fsyncs");
    assert_stopped(&db, &fs, &history, &template, &mut rng);
}

#[test]
fn failed_flush_stops_writes() {
    let mut rng = rng(3);
    let fs = MemFs::new();
    let template = Options { memtable_bytes_max: 1 << 20, ..small_options(&fs, &mut rng) };
    let db = open(&fs, &template, "fresh database");
    let mut history = History::default();
    for i in 0..20u32 {
        let op =
            Op::Write { entries: vec![Entry::Put(i.to_be_bytes().to_vec(), b"v".to_vec())], sync: false };
        history.run(&db, &op).expect("healthy write");
    }
    fs.fail_syncs(true);
    assert!(history.run(&db, &Op::Flush).is_err(), "flush reported success with failing fsyncs");
    assert_stopped(&db, &fs, &history, &template, &mut rng);
}

/// Syncs start failing at a random point of a random workload (with tiny
/// memtables, so the failing sync may be a WAL sync, a WAL switch, a
/// background flush or a MANIFEST write): the operation that hits it fails,
/// and from then on writes are refused.
#[test]
fn failed_sync_at_random_point() {
    run_seeded("failed_sync_at_random_point", 300, |seed| {
        let mut rng = rng(seed);
        let fs = MemFs::new();
        let template = small_options(&fs, &mut rng);
        let db = open(&fs, &template, "fresh database");
        let ops = workload(&mut rng, 150);
        let fail_from = rng.random_range(0..100);
        let mut history = History::default();
        let mut failed = false;
        for (i, op) in ops.iter().enumerate() {
            if i == fail_from {
                fs.fail_syncs(true);
            }
            let result = history.run(&db, op);
            if i < fail_from {
                result.unwrap_or_else(|e| panic!("op {i} {op:?} on a healthy file system: {e}"));
            } else if result.is_err() {
                failed = true;
                break;
            } else {
                // Writes that need no fsync may still succeed; a flush may
                // too, when everything was already in synced SSTs.
                let needs_sync = matches!(op, Op::Write { sync: true, .. } | Op::SyncWal);
                assert!(!needs_sync, "op {i} {op:?} acknowledged with failing fsyncs");
            }
        }
        if !failed {
            // Nothing needed a sync yet: force one.
            fs.fail_syncs(true);
            assert!(history.run(&db, &Op::SyncWal).is_err(), "sync_wal acknowledged with failing fsyncs");
        }
        assert_stopped(&db, &fs, &history, &template, &mut rng);
    });
}
