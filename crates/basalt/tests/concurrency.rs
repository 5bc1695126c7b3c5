//! Many writers and readers at once, over the real file system: group commit
//! must keep every batch atomic and every acknowledged write readable, and
//! readers must see consistent snapshots while flushes run.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use basalt::{Db, Options, WriteBatch, WriteOptions};
use rand::Rng;

const WRITERS: usize = 4;
const BATCHES_PER_WRITER: usize = 300;
/// Each batch writes the same value to all of these keys, so a reader that
/// sees two different values among them saw half a batch.
const KEYS_PER_GROUP: usize = 8;

fn group_key(group: usize, i: usize) -> Vec<u8> {
    format!("g{group:02}/{i}").into_bytes()
}

#[test]
fn concurrent_writers_and_readers_see_atomic_batches() {
    common::run_seeded("concurrent_writers_and_readers_see_atomic_batches", 2, |seed| {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = Options { memtable_bytes_max: 64 << 10, block_bytes_target: 512, ..Options::default() };
        let db = Arc::new(Db::open(dir.path(), opts).expect("open"));
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|r| {
                let (db, stop) = (db.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut rng = common::rng(seed ^ (r as u64 + 100));
                    let mut checks = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let group = rng.random_range(0..WRITERS);
                        let snap = db.snapshot();
                        let values: Vec<_> = (0..KEYS_PER_GROUP)
                            .map(|i| snap.get(group_key(group, i)).expect("get").map(|v| v.to_vec()))
                            .collect();
                        assert!(values.windows(2).all(|w| w[0] == w[1]), "torn batch seen: {values:?}");
                        let scanned: Vec<_> = common::collect(db.prefix(format!("g{group:02}/")));
                        assert!(
                            scanned.is_empty() || scanned.len() == KEYS_PER_GROUP,
                            "partial group in scan"
                        );
                        assert!(scanned.windows(2).all(|w| w[0].1 == w[1].1), "torn batch in a scan");
                        checks += 1;
                    }
                    checks
                })
            })
            .collect();
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let db = db.clone();
                std::thread::spawn(move || {
                    let mut rng = common::rng(seed ^ w as u64);
                    for n in 0..BATCHES_PER_WRITER {
                        let mut batch = WriteBatch::new();
                        let value = format!("writer {w} batch {n} {}", "x".repeat(rng.random_range(0..200)));
                        for i in 0..KEYS_PER_GROUP {
                            batch.put(group_key(w, i), &value);
                        }
                        batch.put(format!("log/{w}/{n:05}"), &value);
                        let sync = rng.random_bool(0.2);
                        db.write_opt(batch, &WriteOptions { sync }).expect("write");
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().expect("writer panicked");
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            assert!(r.join().expect("reader panicked") > 0);
        }
        for w in 0..WRITERS {
            let last = db.get(group_key(w, 0)).expect("get").expect("present");
            assert!(last.starts_with(format!("writer {w} batch {} ", BATCHES_PER_WRITER - 1).as_bytes()));
            assert_eq!(common::collect(db.prefix(format!("log/{w}/"))).len(), BATCHES_PER_WRITER);
        }
        let stats = db.stats();
        assert_eq!(stats.batches_written, (WRITERS * BATCHES_PER_WRITER) as u64);
        assert!(stats.flushes > 0, "the test should flush: {stats}");
        drop(db);
        let db = Db::open(dir.path(), Options::default()).expect("reopen");
        for w in 0..WRITERS {
            assert_eq!(common::collect(db.prefix(format!("log/{w}/"))).len(), BATCHES_PER_WRITER);
        }
    });
}

#[test]
fn group_commit_shares_fsyncs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Arc::new(Db::open(dir.path(), Options::default()).expect("open"));
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                for n in 0..50 {
                    db.put_opt(format!("{t}/{n}"), b"v", &WriteOptions::sync()).expect("put");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("writer panicked");
    }
    let stats = db.stats();
    assert_eq!(stats.batches_written, 400);
    // Every sync write is durable, yet waiting writers share fsyncs.
    assert!(stats.wal_syncs <= stats.write_groups);
    assert!(stats.write_groups < 400, "8 concurrent sync writers never shared a group: {stats}");
}
