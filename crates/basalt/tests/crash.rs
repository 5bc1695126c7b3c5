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

use basalt::testing::{CrashMode, MemFs};
use basalt::{Db, Options, WriteBatch, WriteOptions};
use common::history::{
    Context, DB, Entry, History, Op, assert_closed, copy, differing_keys, open, options_on, verify_recovery,
    workload,
};
use common::{Model, rng, run_seeded, small_options};
use rand::Rng;
use rand::rngs::StdRng;

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

/// After a failed fsync: every kind of write is refused with `Closed`, also
/// once syncs work again; reads still work; a crash keeps a prefix.
fn assert_stopped(db: &Db, fs: &MemFs, history: &History, template: &Options, rng: &mut StdRng) {
    for round in 0..2 {
        assert_closed(db.put(b"after-failure-put", b"x"), "put");
        assert_closed(
            db.put_opt(b"after-failure-sync", b"x", &WriteOptions::default().sync(true)),
            "synced put",
        );
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
    let template = small_options(&fs, &mut rng).memtable_bytes_max(1 << 20);
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
    let template = small_options(&fs, &mut rng).memtable_bytes_max(1 << 20);
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
    let template = small_options(&fs, &mut rng).memtable_bytes_max(1 << 20);
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
