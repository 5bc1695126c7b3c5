//! Scans of a table whose rows sit in several runs at once: after a
//! reload (every row written again) the newer run shadows the older one
//! key for key, and a scan hands out the newer run's blocks without a
//! merge step per row (`TableScan`'s overlap stretch). Each case compares
//! every row with a `BTreeMap` oracle: an overwrite dropped, a tombstone
//! skipped or a shadowed row handed out fails it; randomized cases print
//! their seed (`BASALT_OVERLAP_SEED` replays one).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use basalt::testing::MemFs;
use basalt::{CmpOp, Db, Filter, KeyValue, Options, Predicate, ScanOptions, Snapshot, Table, TableOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Oracle = BTreeMap<i64, (i64, String)>;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("v", DataType::Int64, false),
        Field::new("s", DataType::Utf8, true),
    ]))
}

/// Small blocks and files, no background compaction: the runs stay as
/// the test makes them, with many block boundaries in each.
fn open() -> (Db, Table, MemFs) {
    let fs = MemFs::new();
    let opts = Options::default()
        .fs(Arc::new(fs.clone()))
        .table_block_bytes_target(1 << 10)
        .settled_block_bytes_target(1 << 10)
        .sst_bytes_target(16 << 10)
        .memtable_bytes_max(256 << 10)
        .auto_compaction(false);
    let db = Db::open("/db", opts).expect("open");
    let t = db.create_table("t", schema(), &["id"], TableOptions::default()).expect("create");
    (db, t, fs)
}

/// Live SSTs (obsolete ones collected first).
fn ssts(db: &Db, fs: &MemFs) -> usize {
    db.wait_for_background_work().expect("collect");
    fs.file_names(std::path::Path::new("/db"))
        .iter()
        .filter(|n| std::path::Path::new(n).extension().is_some_and(|e| e == "sst"))
        .count()
}

fn put(t: &Table, oracle: &mut Oracle, ids: &[i64], round: i64) {
    for chunk in ids.chunks(500) {
        let v: Vec<i64> = chunk.iter().map(|i| i * 1000 + round).collect();
        let s: Vec<String> = chunk.iter().map(|i| format!("r{round}-{i}")).collect();
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(chunk.to_vec())),
            Arc::new(Int64Array::from(v.clone())),
            Arc::new(StringArray::from(s.clone())),
        ];
        t.write(&RecordBatch::try_new(schema(), cols).expect("batch")).expect("write");
        for ((&i, v), s) in chunk.iter().zip(v).zip(s) {
            oracle.insert(i, (v, s));
        }
    }
}

fn delete(t: &Table, oracle: &mut Oracle, ids: &[i64]) {
    let keys = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    let batch =
        RecordBatch::try_new(keys, vec![Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef]).expect("keys");
    t.delete(&batch).expect("delete");
    for i in ids {
        oracle.remove(i);
    }
}

/// Every row a scan returns, as the oracle holds them, and the rows it
/// handed out zero-copy.
fn scan_rows(t: &Table, opts: ScanOptions<'_>) -> (Vec<(i64, i64, String)>, u64) {
    let mut scan = t.scan(opts).expect("scan");
    let mut out = Vec::new();
    for batch in scan.by_ref() {
        let batch = batch.expect("batch");
        let id = batch.column_by_name("id").expect("id").as_primitive::<Int64Type>();
        let v = batch.column_by_name("v").expect("v").as_primitive::<Int64Type>();
        let s = batch.column_by_name("s").expect("s").as_string::<i32>();
        for r in 0..batch.num_rows() {
            assert!(!s.is_null(r), "no null was written");
            out.push((id.value(r), v.value(r), s.value(r).to_string()));
        }
    }
    (out, scan.rows_by_path().0)
}

fn want(oracle: &Oracle, lo: Bound<i64>, hi: Bound<i64>, min_v: Option<i64>) -> Vec<(i64, i64, String)> {
    oracle
        .range((lo, hi))
        .filter(|(_, (v, _))| min_v.is_none_or(|m| *v >= m))
        .map(|(&i, (v, s))| (i, *v, s.clone()))
        .collect()
}

/// Scans the whole table, a random range and a filtered range, each
/// checked against the oracle; returns the whole scan's zero-copy rows.
fn check(ctx: &str, t: &Table, oracle: &Oracle, snapshot: Option<&Snapshot>, rng: &mut StdRng) -> u64 {
    let (got, zero_copy) = scan_rows(t, ScanOptions::default().snapshot(snapshot));
    assert_eq!(got, want(oracle, Bound::Unbounded, Bound::Unbounded, None), "{ctx}: whole table");
    let max = oracle.keys().next_back().copied().unwrap_or(0) + 2;
    let (a, b) = (rng.random_range(-1..max), rng.random_range(-1..max));
    let (lo, hi) = (a.min(b), a.max(b));
    let bounds = (Bound::Included(vec![KeyValue::I64(lo)]), Bound::Excluded(vec![KeyValue::I64(hi)]));
    let (got, _) =
        scan_rows(t, ScanOptions::default().range(bounds.clone()).snapshot(snapshot).batch_size(7));
    assert_eq!(got, want(oracle, Bound::Included(lo), Bound::Excluded(hi), None), "{ctx}: [{lo}, {hi})");
    let count = t.count_rows(&bounds, snapshot).expect("count");
    assert_eq!(count, got.len() as u64, "{ctx}: count_rows [{lo}, {hi})");
    let all = t.count_rows(&(Bound::Unbounded, Bound::Unbounded), snapshot).expect("count");
    assert_eq!(all, oracle.len() as u64, "{ctx}: count_rows of the table");
    if let Some(exact) = t.estimate_opt(snapshot).expect("estimate").exact_rows {
        assert_eq!(exact, oracle.len() as u64, "{ctx}: exact_rows");
    }
    let min_v = rng.random_range(0..max * 1000);
    let filter = Filter::all(vec![Predicate::new(
        "v",
        CmpOp::GtEq,
        Arc::new(Int64Array::from(vec![min_v])) as ArrayRef,
    )]);
    let bounds = (Bound::Excluded(vec![KeyValue::I64(lo)]), Bound::Included(vec![KeyValue::I64(hi)]));
    let (got, _) = scan_rows(t, ScanOptions::default().range(bounds).filter(Some(filter)).snapshot(snapshot));
    assert_eq!(
        got,
        want(oracle, Bound::Excluded(lo), Bound::Included(hi), Some(min_v)),
        "{ctx}: ({lo}, {hi}] with v >= {min_v}"
    );
    zero_copy
}

const N: i64 = 5000;

#[test]
fn a_reloaded_table_scans_its_newer_run_without_merging_row_by_row() {
    let mut rng = StdRng::seed_from_u64(1);
    let (db, t, fs) = open();
    let mut oracle = Oracle::new();
    let ids: Vec<i64> = (0..N).collect();
    put(&t, &mut oracle, &ids, 1);
    t.compact().expect("compact");
    let one_run = ssts(&db, &fs);
    let before_reload = db.snapshot();
    let old = oracle.clone();
    put(&t, &mut oracle, &ids, 2);
    db.flush().expect("flush");
    let two_runs = ssts(&db, &fs);
    assert!(one_run > 2 && two_runs > one_run, "two runs of several files: {one_run}, then {two_runs}");
    let zero_copy = check("reloaded", &t, &oracle, None, &mut rng);
    assert!(zero_copy >= (N as u64) * 9 / 10, "{zero_copy} of {N} rows handed out zero-copy");
    // The snapshot from before the reload sees the old run's rows: the
    // newer run's blocks are not visible to it.
    check("snapshot before the reload", &t, &old, Some(&before_reload), &mut rng);
    // After compaction (no snapshot keeping the old versions) the same
    // rows, all zero-copy.
    drop(before_reload);
    t.compact().expect("compact");
    let zero_copy = check("compacted", &t, &oracle, None, &mut rng);
    assert_eq!(zero_copy, N as u64);
}

/// Blocks read through the block cache so far (`MemFs` reads every
/// block through it).
fn blocks_read(db: &Db) -> u64 {
    let stats = db.stats();
    stats.block_cache_hits + stats.block_cache_misses
}

#[test]
fn counts_of_files_no_other_source_overlaps_read_no_block() {
    let mut rng = StdRng::seed_from_u64(3);
    let (db, t, fs) = open();
    let mut oracle = Oracle::new();
    put(&t, &mut oracle, &(0..N).collect::<Vec<_>>(), 1);
    t.compact().expect("compact");
    assert!(ssts(&db, &fs) > 2, "several files");
    let all = (Bound::Unbounded, Bound::Unbounded);
    let before = blocks_read(&db);
    assert_eq!(t.count_rows(&all, None).expect("count"), N as u64);
    assert_eq!(t.estimate().expect("estimate").exact_rows, Some(N as u64));
    assert_eq!(blocks_read(&db), before, "a count of files alone reads no block");
    // A range cuts the first and last files: only their blocks are read.
    let range = (Bound::Included(vec![KeyValue::I64(100)]), Bound::Excluded(vec![KeyValue::I64(N - 100)]));
    assert_eq!(t.count_rows(&range, None).expect("count"), N as u64 - 200);
    // Overwrites in the memtable: counted exactly, the estimate not exact.
    put(&t, &mut oracle, &(0..N).filter(|i| i % 7 == 0).collect::<Vec<_>>(), 2);
    assert_eq!(t.estimate().expect("estimate").exact_rows, None);
    check("memtable over one run", &t, &oracle, None, &mut rng);
    // Deletes flushed into a file of their own: it overlaps the run.
    delete(&t, &mut oracle, &(0..N).filter(|i| i % 11 == 0).collect::<Vec<_>>());
    db.flush().expect("flush");
    assert_eq!(t.estimate().expect("estimate").exact_rows, None);
    check("deletes over one run", &t, &oracle, None, &mut rng);
    // Compacted again (tombstones dropped at the last level): exact from
    // metadata once more.
    t.compact().expect("compact");
    assert_eq!(t.estimate().expect("estimate").exact_rows, Some(oracle.len() as u64));
    let before = blocks_read(&db);
    assert_eq!(t.count_rows(&all, None).expect("count"), oracle.len() as u64);
    assert_eq!(blocks_read(&db), before, "a count of files alone reads no block");
}

#[test]
fn newer_deletes_writes_and_partial_reloads_break_the_stretch_where_they_are() {
    let mut rng = StdRng::seed_from_u64(2);
    let (db, t, _fs) = open();
    let mut oracle = Oracle::new();
    put(&t, &mut oracle, &(0..N).collect::<Vec<_>>(), 1);
    t.compact().expect("compact");
    // A newer run holding every other stretch of keys: the older run's
    // rows between them are still the newest.
    let partial: Vec<i64> = (0..N).filter(|i| (i / 37) % 2 == 0).collect();
    put(&t, &mut oracle, &partial, 2);
    db.flush().expect("flush");
    check("partial reload", &t, &oracle, None, &mut rng);
    // Deletes in a newer run still: tombstones the stretch must not pass.
    let deleted: Vec<i64> = (0..N).filter(|i| i % 101 == 3 || i % 977 == 0).collect();
    delete(&t, &mut oracle, &deleted);
    db.flush().expect("flush");
    check("deletes over a reload", &t, &oracle, None, &mut rng);
    // Newer versions in the memtable, and a full reload under them.
    let snapshot = db.snapshot();
    let at_snapshot = oracle.clone();
    put(&t, &mut oracle, &(0..N).collect::<Vec<_>>(), 3);
    db.flush().expect("flush");
    put(&t, &mut oracle, &(0..N).filter(|i| i % 13 == 0).collect::<Vec<_>>(), 4);
    check("memtable over three runs", &t, &oracle, None, &mut rng);
    check("snapshot under a reload", &t, &at_snapshot, Some(&snapshot), &mut rng);
}

#[test]
fn random_reloads_flushes_and_deletes_match_the_oracle() {
    let seed = std::env::var("BASALT_OVERLAP_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random::<u64>());
    eprintln!("random_reloads_flushes_and_deletes_match_the_oracle: BASALT_OVERLAP_SEED={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let (db, t, _fs) = open();
    let mut oracle = Oracle::new();
    let mut snapshots: Vec<(Snapshot, Oracle)> = Vec::new();
    for step in 0..40 {
        let ctx = format!("seed {seed}, step {step}");
        match rng.random_range(0..10) {
            0..=4 => {
                // A reload of a random stretch, with gaps now and then.
                let lo = rng.random_range(0..N);
                let hi = (lo + rng.random_range(1..N)).min(N);
                let gap = rng.random_range(1..50);
                let ids: Vec<i64> = (lo..hi).filter(|i| gap == 1 || i % gap != 0).collect();
                put(&t, &mut oracle, &ids, step);
            }
            5 => {
                let ids: Vec<i64> = (0..rng.random_range(1..200)).map(|_| rng.random_range(0..N)).collect();
                delete(&t, &mut oracle, &ids);
            }
            6 | 7 => db.flush().expect("flush"),
            8 => {
                if snapshots.len() == 2 {
                    snapshots.remove(0);
                }
                snapshots.push((db.snapshot(), oracle.clone()));
            }
            _ => {
                if rng.random_bool(0.3) {
                    t.compact().expect("compact");
                }
            }
        }
        check(&ctx, &t, &oracle, None, &mut rng);
        for (snapshot, old) in &snapshots {
            check(&format!("{ctx}, at a snapshot"), &t, old, Some(snapshot), &mut rng);
        }
    }
}
