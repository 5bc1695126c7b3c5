//! Outside review 4: range deletes (25b65bb) and merge operators (b4a0161),
//! tested adversarially through the public API. Each test is a minimal
//! reproduction; the ones that fail on the reviewed code say "DEFECT:" in
//! their doc comment, the others are regression tests of things that held.
//!
//! Two defects of SQL's `DELETE` range path (`basalt-datafusion/src/dml.rs`,
//! `key_range_of` over `pushdown::key_range`) are not engine-level, so not
//! here; reproduced with the CLI (`basalt sql`):
//! - a table whose leading key column is `LargeUtf8`/`LargeBinary`:
//!   `DELETE FROM t WHERE k < 'k0100'` deletes every row (the literal's
//!   `key_value_of` is `None`, `key_range` skips it, the range is whole);
//! - an equality and a contradicting bound on the leading key column of a
//!   composite key: `DELETE FROM t WHERE a = 0 AND a < 0` deletes every row
//!   with `a = 0` (`key_range` lets the equality win over the bounds).

// The review's reproductions are kept as it wrote them.
#![allow(
    clippy::doc_markdown,
    clippy::manual_is_multiple_of,
    clippy::similar_names,
    clippy::too_many_lines,
    clippy::type_complexity,
    clippy::uninlined_format_args
)]

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use arrow_array::{Array, ArrayRef, BinaryArray, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use basalt::testing::MemFs;
use basalt::{
    Db, Direction, Error, HistoryOptions, HistoryWindow, KeyValue, MergeError, MergeOperator, Options,
    ReadOptions, ScanOptions, TableOptions, WriteBatch,
};
use common::{rng, run_seeded};
use rand::Rng;

fn options(fs: &MemFs) -> Options {
    Options::default().fs(Arc::new(fs.clone())).memtable_bytes_max(64 << 10).sst_bytes_target(16 << 10)
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

fn word(n: i64) -> [u8; 8] {
    n.to_le_bytes()
}

fn as_i64(v: &[u8]) -> i64 {
    i64::from_le_bytes(v.try_into().expect("8 bytes"))
}

fn keys_of(it: basalt::DbIterator) -> Vec<Vec<u8>> {
    it.map(|kv| kv.expect("iter").0.to_vec()).collect()
}

/// Runs `f` on a thread of its own and waits at most `limit` for it:
/// `None` when it did not finish (it is left running).
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = tx.send(out);
    });
    match rx.recv_timeout(limit) {
        Ok(Ok(v)) => Some(v),
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => None,
    }
}

/// Files of one level (L1 and deeper) of one tree never share a user key,
/// and their key ranges are disjoint.
fn assert_levels_disjoint(db: &Db, context: &str) {
    let files = basalt::inspect::files(db);
    let mut by_level: BTreeMap<(String, usize), Vec<(Vec<u8>, Vec<u8>)>> = BTreeMap::new();
    for f in files {
        if f.level > 0 {
            by_level
                .entry((f.tree.clone(), f.level))
                .or_default()
                .push((f.key_range.0.to_vec(), f.key_range.1.to_vec()));
        }
    }
    for ((tree, level), mut ranges) in by_level {
        ranges.sort();
        for w in ranges.windows(2) {
            assert!(
                w[0].1 < w[1].0,
                "{context}: tree {tree} L{level} files overlap: {:?} and {:?}",
                w[0],
                w[1]
            );
        }
    }
}

// ---------------------------------------------------------------------------
// Range deletes and the row cache, snapshots, reopen.
// ---------------------------------------------------------------------------

/// Held: the row cache caches a file's newest version of a key; a range
/// tombstone newer than it still hides it, at once, after a flush, after
/// a compaction and after a reopen; a snapshot from before still reads it.
#[test]
fn the_row_cache_never_answers_for_a_range_deleted_key() {
    let fs = MemFs::new();
    let opts = || options(&fs).row_cache_bytes(1 << 20);
    let db = Db::open("/db", opts()).expect("open");
    for i in 0..2000 {
        db.put(key(i), format!("v{i}")).expect("put");
    }
    db.compact_range::<&[u8]>(..).expect("compact");
    for i in 0..2000 {
        assert!(db.get(key(i)).expect("warm").is_some());
    }
    assert!(db.stats().row_cache_bytes > 0, "the row cache holds rows");
    let before = db.snapshot();
    db.delete_range(key(100)..key(1900)).expect("delete_range");
    let check = |db: &Db, what: &str| {
        for i in [99, 100, 500, 1899, 1900] {
            let got = db.get(key(i)).expect("get");
            assert_eq!(got.is_some(), !(100..1900).contains(&i), "{what}: key {i}");
        }
    };
    check(&db, "in the memtable");
    assert_eq!(before.get(key(500)).expect("snapshot").as_deref(), Some(&b"v500"[..]));
    db.flush().expect("flush");
    check(&db, "flushed");
    assert_eq!(before.get(key(500)).expect("snapshot").as_deref(), Some(&b"v500"[..]));
    db.compact_range::<&[u8]>(..).expect("compact");
    check(&db, "compacted");
    assert_eq!(before.get(key(500)).expect("snapshot").as_deref(), Some(&b"v500"[..]));
    drop(before);
    db.compact_range::<&[u8]>(..).expect("compact");
    check(&db, "compacted without the snapshot");
    db.close().expect("close");
    let db = Db::open("/db", opts()).expect("reopen");
    check(&db, "reopened");
    assert_eq!(db.iter::<&[u8]>(..).count(), 200);
}

/// DEFECT: a history window by count keeps "the key's newest N versions"
/// and a range delete over the key counts as one of them (it is listed
/// as a delete, and `Retention` counts it). With N = 2 and the versions
/// put(1), range delete, put(2), the history is [put 2, delete] — until
/// a compaction: it drops put(1) (third newest) and then, no entry older
/// than the tombstone being left, collects the tombstone itself, so the
/// history shrinks to [put 2]. A point delete in its place stays listed.
/// The history a window guarantees changes with compaction.
#[test]
fn a_history_window_by_count_keeps_a_range_delete_through_compaction() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).expect("open");
    let versions = |db: &Db, k: &[u8]| -> Vec<Option<Vec<u8>>> {
        let ks = db.keyspace("events").expect("keyspace");
        ks.history(k, HistoryOptions::default())
            .expect("history")
            .into_iter()
            .map(|v| v.value.map(|b| b.to_vec()))
            .collect()
    };
    let ks = db.create_keyspace("events").expect("keyspace");
    ks.set_history(HistoryWindow::versions(2)).expect("history");
    // The same with a point delete, as the reference.
    ks.put(b"p", b"1").expect("put");
    ks.delete(b"p").expect("delete");
    ks.put(b"p", b"2").expect("put");
    ks.put(b"r", b"1").expect("put");
    ks.delete_range(&b"r"[..]..&b"s"[..]).expect("delete_range");
    ks.put(b"r", b"2").expect("put");
    let point_before = versions(&db, b"p");
    let range_before = versions(&db, b"r");
    assert_eq!(point_before, vec![Some(b"2".to_vec()), None]);
    assert_eq!(range_before, point_before, "a range delete is a delete among the versions");
    db.flush().expect("flush");
    ks.compact_range::<&[u8]>(..).expect("compact");
    assert_eq!(versions(&db, b"p"), point_before, "the point delete stays in the history");
    assert_eq!(versions(&db, b"r"), range_before, "the range delete must stay too: {}", db.stats());
}

// ---------------------------------------------------------------------------
// Merge operators: user operators, background threads.
// ---------------------------------------------------------------------------

/// A user operator written the usual way: it expects 8-byte values and
/// unwraps (panics on anything else).
#[derive(Debug)]
struct StrictAdd;

impl MergeOperator for StrictAdd {
    fn name(&self) -> &'static str {
        "strict_add"
    }

    fn full_merge(&self, base: Option<&[u8]>, operands: &[&[u8]]) -> Result<Vec<u8>, MergeError> {
        let mut acc = base.map_or(0, |b| i64::from_le_bytes(b.try_into().expect("an 8-byte base")));
        for op in operands {
            acc += i64::from_le_bytes((*op).try_into().expect("an 8-byte operand"));
        }
        Ok(acc.to_le_bytes().to_vec())
    }

    fn partial_merge(&self, operands: &[&[u8]]) -> Result<Vec<u8>, MergeError> {
        self.full_merge(None, operands)
    }
}

/// DEFECT: a user merge operator that panics (here on a base value of the
/// wrong width, the typical `try_into().unwrap()`) panics the background
/// compaction thread, which nothing catches (`compaction_loop` runs the
/// fold in `merge_folding` without `catch_unwind`, unlike the commit
/// leader and a bulk load's source). The thread is gone: no compaction
/// runs again, L0 fills, and writes stall forever at `l0_files_stop`
/// (or `wait_for_background_work` never returns). The engine should turn
/// the panic into an error (a failed job, as an I/O error is) or keep the
/// operands as it does for a fold that returns `Err`.
#[test]
fn a_panicking_merge_operator_does_not_wedge_the_database() {
    common::guard::record_background_panics();
    let fs = MemFs::new();
    let opts = options(&fs)
        .merge_operators(vec![Arc::new(StrictAdd)])
        .l0_compaction_trigger(2)
        .l0_files_slowdown(3)
        .l0_files_stop(4)
        .memtable_bytes_max(8 << 10);
    let db = Arc::new(Db::open("/db", opts).expect("open"));
    let counts = db.create_keyspace("counts").expect("keyspace");
    counts.set_merge_operator("strict_add").expect("bind");
    // A value of the wrong width, then operands over it.
    counts.put(b"k", b"abc").expect("put");
    for _ in 0..3 {
        counts.merge(b"k", word(1)).expect("merge");
        db.flush().expect("flush");
    }
    // Writes to another keyspace go on, and must not wait forever for a
    // compaction thread that died.
    let writer = db.clone();
    let done = within(Duration::from_secs(20), move || -> basalt::Result<()> {
        for round in 0..20u32 {
            for i in 0..200u32 {
                writer.put(key(round * 1000 + i), vec![b'x'; 40])?;
            }
            writer.flush()?;
        }
        writer.wait_for_background_work()
    });
    let panics = common::guard::take_background_panics();
    assert!(
        done.is_some(),
        "writes and wait_for_background_work hung after the merge operator panicked on the compaction thread \
         (panics: {panics:?})"
    );
}

/// Held: a user operator that panics in the caller's own compact_range
/// panics there (the caller's code), and the database goes on working:
/// the compaction slot is not left held.
#[test]
fn a_merge_operator_panic_in_compact_range_leaves_the_database_usable() {
    let fs = MemFs::new();
    let opts = options(&fs).merge_operators(vec![Arc::new(StrictAdd)]).auto_compaction(false);
    let db = Arc::new(Db::open("/db", opts).expect("open"));
    let counts = db.create_keyspace("counts").expect("keyspace");
    counts.set_merge_operator("strict_add").expect("bind");
    counts.put(b"k", b"abc").expect("put");
    counts.merge(b"k", word(1)).expect("merge");
    db.flush().expect("flush");
    let c = counts.clone();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.compact_range::<&[u8]>(..)));
    drop(r);
    let db2 = db.clone();
    let ok = within(Duration::from_secs(30), move || {
        db2.put(b"other", b"1").expect("put");
        db2.compact_range::<&[u8]>(..).expect("compact the default keyspace");
        db2.get(b"other").expect("get")
    });
    assert_eq!(ok.flatten().as_deref(), Some(&b"1"[..]), "the database is usable after the panic");
}

// ---------------------------------------------------------------------------
// Performance cliffs with many range deletes.
// ---------------------------------------------------------------------------

/// Mean seconds per (delete_range, get) pair over `n` pairs starting at
/// range number `from`.
fn pairs(db: &Db, from: u32, n: u32) -> f64 {
    let start = Instant::now();
    for i in from..from + n {
        db.delete_range(key(2 * i)..key(2 * i + 1)).expect("delete_range");
        assert!(db.get(key(2 * i)).expect("get").is_none());
    }
    start.elapsed().as_secs_f64() / f64::from(n)
}

/// DEFECT (performance cliff): a memtable rebuilds its whole fragmented
/// tombstone set (clone, sort, fragment: O(n log n)) on the first read
/// after each range delete (`Memtable::range_tombstones`, set to `None`
/// by `insert_range_delete`), under the memtable's mutex that every read
/// of every tree takes once the memtable holds one. A workload that
/// alternates a small range delete and a read — deleting a user's rows,
/// then reading — costs O(n log n) per pair with n tombstones in the
/// memtable, O(n² log n) in all, and range tombstones do not count toward
/// the memtable's size (below), so n grows without bound. Measured here:
/// a pair with ~4000 tombstones in the memtable against a pair with ~100.
#[test]
#[ignore = "known (issue 60, docs/range-deletes.md 'Limits'): a memtable rebuilds its fragmented tombstones on the first read after each range delete"]
fn range_deletes_interleaved_with_reads_cost_the_same_however_many_came_before() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs).memtable_bytes_max(64 << 20)).expect("open");
    for i in 0..20_000 {
        db.put(key(i), b"v").expect("put");
    }
    db.flush().expect("flush");
    pairs(&db, 0, 100);
    let early = pairs(&db, 100, 200);
    pairs(&db, 300, 3700);
    let late = pairs(&db, 4000, 200);
    eprintln!("early {:.1} us/pair, late {:.1} us/pair", early * 1e6, late * 1e6);
    assert!(
        late < early * 5.0,
        "a pair costs {:.0}x more with 4000 range deletes in the memtable",
        late / early
    );
}

/// DEFECT (performance cliff, memory): the fragments of nested tombstones
/// hold every covering seqno each (`range_del::fragment`): n tombstones
/// `[.., t_i)` with increasing `t_i` (a TTL's "delete everything older
/// than now", run now and then) make n fragments holding 1..n seqnos,
/// O(n²) time and memory per build, and the set is rebuilt on every first
/// read after a change. 4x the tombstones should cost about 4x, not 16x.
#[test]
#[ignore = "known (issue 60, docs/range-deletes.md 'Limits'): nested tombstones fragment into O(n^2) seqnos"]
fn nested_range_deletes_build_in_about_linear_time() {
    let build = |n: u32| -> f64 {
        let fs = MemFs::new();
        let db = Db::open("/db", options(&fs).memtable_bytes_max(64 << 20)).expect("open");
        db.put(key(0), b"v").expect("put");
        for i in 1..=n {
            db.delete_range(..key(i)).expect("delete_range");
        }
        // The first read builds the set.
        let mut best = f64::MAX;
        for _ in 0..3 {
            db.delete_range(..key(n + 1)).expect("delete_range");
            let start = Instant::now();
            // A key with a version: the read checks it against the set.
            assert!(db.get(key(0)).expect("get").is_none());
            best = best.min(start.elapsed().as_secs_f64());
        }
        best
    };
    let small = build(1500);
    let large = build(6000);
    eprintln!("1500 nested: {:.1} ms, 6000 nested: {:.1} ms", small * 1e3, large * 1e3);
    assert!(large < small * 9.0, "4x the nested tombstones cost {:.1}x", large / small);
}

/// DEFECT: range tombstones are not counted in a memtable's size
/// (`Memtable::approximate_bytes` is the skiplist's bytes alone), so a
/// memtable taking only range deletes is never switched or flushed: its
/// tombstones (and the WAL holding them) grow without bound, outside the
/// write-buffer budget `memtable_bytes_max` is meant to be, every one
/// replayed at the next open, and `Stats::memtable_bytes` reports 0.
#[test]
fn a_memtable_of_range_deletes_alone_is_flushed_at_its_size_limit() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs).memtable_bytes_max(16 << 10)).expect("open");
    for i in 0..100 {
        db.put(key(i), b"v").expect("put");
    }
    db.flush().expect("flush");
    let flushes = db.stats().flushes;
    // 20,000 range deletes of 30-byte bounds: 600 KB of bounds alone.
    for i in 0..20_000u32 {
        let lo = format!("{:0>30}", i);
        let hi = format!("{:0>29}x", i);
        db.delete_range(lo.as_bytes()..hi.as_bytes()).expect("delete_range");
    }
    db.wait_for_background_work().expect("background");
    let stats = db.stats();
    assert!(
        stats.flushes > flushes,
        "600 KB of range deletes in a memtable of at most 16 KB, never flushed (memtable_bytes {})",
        stats.memtable_bytes
    );
}

// ---------------------------------------------------------------------------
// Reads of merge keyspaces: reverse, prefix, table face, counts, filters.
// ---------------------------------------------------------------------------

/// Held: reverse and prefix iteration over a merge keyspace fold the
/// operands and honour range tombstones in the memtable and in the
/// version, at snapshots too.
#[test]
fn reverse_and_prefix_iteration_fold_operands_under_range_tombstones() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).expect("open");
    db.keyspace("default").expect("default").set_merge_operator("add_i64").expect("bind");
    let mut model: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
    for round in 0..4i64 {
        for i in 0..300u32 {
            let k = format!("p{}/{i:04}", i % 3).into_bytes();
            db.merge(&k, word(round + 1)).expect("merge");
            *model.entry(k).or_default() += round + 1;
        }
        if round == 1 {
            db.flush().expect("flush");
            db.delete_range(&b"p1/0100"[..]..&b"p1/0200"[..]).expect("delete_range");
            model.retain(|k, _| !(k.as_slice() >= &b"p1/0100"[..] && k.as_slice() < &b"p1/0200"[..]));
            db.flush().expect("flush");
        }
        if round == 2 {
            db.delete_range(&b"p2/0250"[..]..).expect("delete_range");
            model.retain(|k, _| k.as_slice() < &b"p2/0250"[..]);
        }
    }
    let snap = db.snapshot();
    let snap_model = model.clone();
    db.merge(b"p0/0000", word(1000)).expect("merge");
    *model.get_mut(&b"p0/0000"[..]).expect("there") += 1000;
    let fwd: Vec<(Vec<u8>, i64)> =
        db.iter::<&[u8]>(..).map(|kv| kv.expect("iter")).map(|(k, v)| (k.to_vec(), as_i64(&v))).collect();
    let want: Vec<(Vec<u8>, i64)> = model.iter().map(|(k, v)| (k.clone(), *v)).collect();
    assert_eq!(fwd, want);
    let rev: Vec<(Vec<u8>, i64)> =
        db.iter_rev::<&[u8]>(..).map(|kv| kv.expect("iter")).map(|(k, v)| (k.to_vec(), as_i64(&v))).collect();
    assert_eq!(rev, want.iter().rev().cloned().collect::<Vec<_>>());
    for p in ["p0/", "p1/", "p2/"] {
        let got: Vec<(Vec<u8>, i64)> = db
            .prefix(p.as_bytes())
            .map(|kv| kv.expect("prefix"))
            .map(|(k, v)| (k.to_vec(), as_i64(&v)))
            .collect();
        let want: Vec<(Vec<u8>, i64)> =
            model.iter().filter(|(k, _)| k.starts_with(p.as_bytes())).map(|(k, v)| (k.clone(), *v)).collect();
        assert_eq!(got, want, "prefix {p}");
    }
    let snap_rev: Vec<(Vec<u8>, i64)> = snap
        .iter::<&[u8]>(&b"p1/0050"[..]..&b"p2/0300"[..], Direction::Reverse)
        .map(|kv| kv.expect("iter"))
        .map(|(k, v)| (k.to_vec(), as_i64(&v)))
        .collect();
    let snap_want: Vec<(Vec<u8>, i64)> = snap_model
        .range(b"p1/0050".to_vec()..b"p2/0300".to_vec())
        .rev()
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    assert_eq!(snap_rev, snap_want);
    drop(snap);
    db.compact_range::<&[u8]>(..).expect("compact");
    let rev: Vec<(Vec<u8>, i64)> =
        db.iter_rev::<&[u8]>(..).map(|kv| kv.expect("iter")).map(|(k, v)| (k.to_vec(), as_i64(&v))).collect();
    assert_eq!(rev, want.iter().rev().cloned().collect::<Vec<_>>());
}

/// The table face's rows of a keyspace: (key, value).
fn face_rows(table: &basalt::Table, opts: ScanOptions<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    for batch in table.scan(opts).expect("scan") {
        let batch = batch.expect("batch");
        let k = batch.column(0).as_any().downcast_ref::<BinaryArray>().expect("key");
        let v = batch.column(1).as_any().downcast_ref::<BinaryArray>().expect("value");
        for i in 0..batch.num_rows() {
            out.push((k.value(i).to_vec(), v.value(i).to_vec()));
        }
    }
    out
}

/// Held: the table face of a merge keyspace scans, filters, gets and
/// counts folded values, with operands in the memtable over values in
/// SSTs, a range tombstone between, and a filter on the value column.
#[test]
fn the_table_face_of_a_merge_keyspace_reads_folded_values() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs).block_bytes_target(256)).expect("open");
    let ks = db.keyspace("default").expect("default");
    ks.set_merge_operator("add_i64").expect("bind");
    for i in 0..1000u32 {
        db.put(key(i), word(i64::from(i))).expect("put");
    }
    db.compact_range::<&[u8]>(..).expect("compact");
    db.delete_range(key(200)..key(300)).expect("delete_range");
    db.flush().expect("flush");
    for i in (0..1000u32).step_by(10) {
        db.merge(key(i), word(1_000_000)).expect("merge");
    }
    let expected = |i: u32| -> Option<i64> {
        let base = if (200..300).contains(&i) { None } else { Some(i64::from(i)) };
        if i % 10 == 0 { Some(base.unwrap_or(0) + 1_000_000) } else { base }
    };
    let face = db.table("default").expect("face");
    let rows = face_rows(&face, ScanOptions::default());
    let want: Vec<(Vec<u8>, Vec<u8>)> =
        (0..1000u32).filter_map(|i| expected(i).map(|v| (key(i), word(v).to_vec()))).collect();
    assert_eq!(rows.len(), want.len());
    assert_eq!(rows, want);
    let all = (Bound::Unbounded, Bound::Unbounded);
    assert_eq!(face.count_rows(&all, None).expect("count"), want.len() as u64);
    // A filter on the folded value: 1_000_000 + i for i % 10 == 0.
    let target = word(1_000_000 + 500).to_vec();
    let p = basalt::Predicate::new(
        "value",
        basalt::CmpOp::Eq,
        Arc::new(BinaryArray::from_vec(vec![target.as_slice()])) as ArrayRef,
    );
    let filtered = face_rows(&face, ScanOptions::default().filter(Some(basalt::Filter::all(vec![p]))));
    assert_eq!(filtered, vec![(key(500), target.clone())]);
    let row = face.get(&[KeyValue::Bytes(&key(250))]).expect("get").expect("row 250");
    let v = row.column(1).as_any().downcast_ref::<BinaryArray>().expect("value").value(0);
    assert_eq!(as_i64(v), 1_000_000, "operand over the range tombstone folds onto nothing");
    assert!(face.get(&[KeyValue::Bytes(&key(251))]).expect("get").is_none());
}

// ---------------------------------------------------------------------------
// Tables: range deletes and indexes.
// ---------------------------------------------------------------------------

fn users(db: &Db) -> basalt::Table {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("email", DataType::Utf8, true),
    ]));
    db.create_table("users", schema, &["id"], TableOptions::default()).expect("table")
}

fn user_rows(table: &basalt::Table, ids: &[i64], tag: &str) -> RecordBatch {
    let emails: Vec<String> = ids.iter().map(|i| format!("{tag}{i}")).collect();
    RecordBatch::try_new(
        table.schema(),
        vec![Arc::new(Int64Array::from(ids.to_vec())), Arc::new(StringArray::from(emails))],
    )
    .expect("batch")
}

/// Held: a unique value freed by a range delete earlier in the same batch
/// may be taken by a row written after it in that batch; every index
/// stays consistent with the rows, through flush, compaction and reopen.
#[test]
fn a_unique_value_freed_by_a_range_delete_is_free_later_in_the_batch() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).expect("open");
    let table = users(&db);
    table.create_index("by_email", &["email"], basalt::IndexOptions::default().unique(true)).expect("index");
    let ids: Vec<i64> = (0..200).collect();
    table.write(&user_rows(&table, &ids, "a")).expect("write");
    let mut batch = WriteBatch::new();
    batch
        .delete_table_range(
            &table,
            &(Bound::Included(vec![KeyValue::I64(50)]), Bound::Excluded(vec![KeyValue::I64(150)])),
        )
        .expect("delete range");
    // Row 1000 takes row 60's email, freed above.
    batch.put_table(&table, &user_rows(&table, &[1000], "a").slice(0, 1)).expect("rows");
    let reuse = RecordBatch::try_new(
        table.schema(),
        vec![Arc::new(Int64Array::from(vec![1001])), Arc::new(StringArray::from(vec!["a60"]))],
    )
    .expect("batch");
    batch.put_table(&table, &reuse).expect("rows");
    db.write(batch).expect("the freed value may be reused");
    // Taking a value still held (row 10's) is refused.
    let taken = RecordBatch::try_new(
        table.schema(),
        vec![Arc::new(Int64Array::from(vec![1002])), Arc::new(StringArray::from(vec!["a10"]))],
    )
    .expect("batch");
    assert!(table.write(&taken).is_err(), "a10 is still row 10's");
    let check = |table: &basalt::Table, what: &str| {
        for c in basalt::inspect::check_indexes(table).expect("check") {
            assert!(c.consistent, "{what}: {c:?}");
        }
        assert_eq!(
            table.count_rows(&(Bound::Unbounded, Bound::Unbounded), None).expect("count"),
            102,
            "{what}"
        );
    };
    check(&table, "committed");
    db.flush().expect("flush");
    table.compact().expect("compact");
    check(&table, "compacted");
    drop(table);
    db.close().expect("close");
    let db = Db::open("/db", options(&fs)).expect("reopen");
    let table = db.table("users").expect("table");
    check(&table, "reopened");
}

/// Held: concurrent table writers and range deletes (in many commit
/// groups) leave every index consistent with the rows.
#[test]
fn concurrent_table_range_deletes_keep_indexes_consistent() {
    let fs = MemFs::new();
    let db = Arc::new(Db::open("/db", options(&fs).memtable_bytes_max(32 << 10)).expect("open"));
    let table = users(&db);
    table.create_index("by_email", &["email"], basalt::IndexOptions::default()).expect("index");
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let table = table.clone();
            std::thread::spawn(move || {
                let mut rng = rng(t);
                for step in 0..300 {
                    let lo: i64 = rng.random_range(0..500);
                    if rng.random_bool(0.2) {
                        let hi = lo + rng.random_range(1..40);
                        table
                            .delete_range((
                                Bound::Included(vec![KeyValue::I64(lo)]),
                                Bound::Excluded(vec![KeyValue::I64(hi)]),
                            ))
                            .expect("delete_range");
                    } else {
                        let ids: Vec<i64> = (lo..lo + rng.random_range(1..10)).collect();
                        table.write(&user_rows(&table, &ids, &format!("t{t}s{step}-"))).expect("write");
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("writer");
    }
    for c in basalt::inspect::check_indexes(&table).expect("check") {
        assert!(c.consistent, "{c:?}");
    }
    db.flush().expect("flush");
    table.compact().expect("compact");
    for c in basalt::inspect::check_indexes(&table).expect("check") {
        assert!(c.consistent, "after compaction: {c:?}");
    }
}

/// Held: a table keeping history reads its rows as of a point before a
/// range delete (gets, scans, counts), after the tombstone was flushed
/// and everything compacted: no covered file is dropped under a window.
#[test]
fn a_history_window_reads_rows_as_of_before_a_range_delete_after_compaction() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).expect("open");
    let table = users(&db);
    table.set_history(HistoryWindow::duration(Duration::from_secs(3600))).expect("history");
    let ids: Vec<i64> = (0..3000).collect();
    table.write(&user_rows(&table, &ids, "e")).expect("write");
    db.compact_range::<&[u8]>(..).expect("compact");
    table.compact().expect("compact");
    let before = db.stats().last_seqno;
    table
        .delete_range((Bound::Included(vec![KeyValue::I64(100)]), Bound::Excluded(vec![KeyValue::I64(2900)])))
        .expect("delete_range");
    db.flush().expect("flush");
    db.wait_for_background_work().expect("background");
    table.compact().expect("compact");
    assert_eq!(db.stats().files_dropped_by_range_deletes, 0);
    let then = db.snapshot_at(basalt::AsOf::Seqno(before)).expect("as of");
    let all = (Bound::Unbounded, Bound::Unbounded);
    assert_eq!(table.count_rows(&all, Some(&then)).expect("count then"), 3000);
    assert_eq!(table.count_rows(&all, None).expect("count now"), 200);
    let row =
        table.get_opt(&[KeyValue::I64(1500)], &ReadOptions::default().snapshot(Some(&then))).expect("get");
    assert!(row.is_some_and(|r| r.num_rows() == 1));
    let mut n = 0;
    for b in table.scan(ScanOptions::default().snapshot(Some(&then))).expect("scan") {
        n += b.expect("batch").num_rows();
    }
    assert_eq!(n, 3000);
    let history = table.history(&[KeyValue::I64(1500)], HistoryOptions::default()).expect("history");
    assert_eq!(history.num_rows(), 2, "the put and the range delete");
}

/// Held: an index built while writers put rows and delete ranges of the
/// table ends consistent with the rows.
#[test]
fn an_index_built_during_range_deletes_is_consistent() {
    let fs = MemFs::new();
    let db = Arc::new(Db::open("/db", options(&fs).memtable_bytes_max(16 << 10)).expect("open"));
    let table = users(&db);
    let ids: Vec<i64> = (0..3000).collect();
    table.write(&user_rows(&table, &ids, "s")).expect("write");
    db.flush().expect("flush");
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (table, stop) = (table.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut rng = rng(7);
            let mut step = 0;
            while !stop.load(Ordering::Relaxed) || step < 200 {
                step += 1;
                let lo: i64 = rng.random_range(0..3000);
                if rng.random_bool(0.3) {
                    let hi = lo + rng.random_range(1..200);
                    table
                        .delete_range((
                            Bound::Included(vec![KeyValue::I64(lo)]),
                            Bound::Excluded(vec![KeyValue::I64(hi)]),
                        ))
                        .expect("delete_range");
                } else {
                    let ids: Vec<i64> = (lo..lo + rng.random_range(1..30)).collect();
                    table.write(&user_rows(&table, &ids, &format!("w{step}-"))).expect("write");
                }
            }
        })
    };
    table.create_index("by_email", &["email"], basalt::IndexOptions::default()).expect("index");
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("writer");
    for c in basalt::inspect::check_indexes(&table).expect("check") {
        assert!(c.consistent, "{c:?}");
    }
    db.flush().expect("flush");
    table.compact().expect("compact");
    for c in basalt::inspect::check_indexes(&table).expect("check") {
        assert!(c.consistent, "after compaction: {c:?}");
    }
}

/// Held: a bulk load into a key range a range delete just emptied (its
/// tombstone flushed, the covered files still held by a snapshot) is
/// visible, the snapshot still reads the old rows, and a checkpoint and
/// a reopen agree.
#[test]
fn a_bulk_load_over_a_range_delete_is_visible_and_snapshots_keep_the_old_rows() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).expect("open");
    let table = users(&db);
    let ids: Vec<i64> = (0..2000).collect();
    table.write(&user_rows(&table, &ids, "old")).expect("write");
    table.compact().expect("compact");
    let snap = db.snapshot();
    table.delete_range((Bound::Unbounded, Bound::Unbounded)).expect("delete_range");
    db.flush().expect("flush");
    let loaded: Vec<i64> = (500..1500).collect();
    table.bulk_load([user_rows(&table, &loaded, "new")]).expect("bulk load");
    let all = (Bound::Unbounded, Bound::Unbounded);
    let email = |t: &basalt::Table, id: i64, snap: Option<&basalt::Snapshot>| -> Option<String> {
        let row = t.get_opt(&[KeyValue::I64(id)], &ReadOptions::default().snapshot(snap)).expect("get")?;
        Some(row.column(1).as_any().downcast_ref::<StringArray>().expect("str").value(0).to_string())
    };
    assert_eq!(table.count_rows(&all, None).expect("count"), 1000);
    assert_eq!(email(&table, 700, None).as_deref(), Some("new700"));
    assert_eq!(email(&table, 100, None), None);
    assert_eq!(table.count_rows(&all, Some(&snap)).expect("count at the snapshot"), 2000);
    assert_eq!(email(&table, 700, Some(&snap)).as_deref(), Some("old700"));
    db.checkpoint("/cp").expect("checkpoint");
    drop(snap);
    table.compact().expect("compact");
    assert_eq!(table.count_rows(&all, None).expect("count"), 1000);
    drop(table);
    db.close().expect("close");
    for dir in ["/db", "/cp"] {
        let db = Db::open(dir, options(&fs)).expect("reopen");
        let table = db.table("users").expect("table");
        assert_eq!(table.count_rows(&all, None).expect("count"), 1000, "{dir}");
        assert_eq!(email(&table, 1499, None).as_deref(), Some("new1499"), "{dir}");
        assert_eq!(email(&table, 1500, None), None, "{dir}");
    }
}

// ---------------------------------------------------------------------------
// Races: background flushes and compactions against reads.
// ---------------------------------------------------------------------------

/// Held: with background flushes, compactions and whole-file drops
/// running, every read sees each batch whole: a batch of merges touches
/// all 64 keys of a group by one, a range delete clears the group; any
/// consistent view has every key of a group at one value, or none.
#[test]
fn reads_see_merge_batches_and_range_deletes_whole_under_background_work() {
    let fs = MemFs::new();
    let opts = options(&fs).memtable_bytes_max(8 << 10).l0_compaction_trigger(2).sst_bytes_target(4 << 10);
    let db = Arc::new(Db::open("/db", opts).expect("open"));
    db.keyspace("default").expect("default").set_merge_operator("add_i64").expect("bind");
    let stop = Arc::new(AtomicBool::new(false));
    let gkey = |g: u32, i: u32| format!("g{g}/{i:03}").into_bytes();
    let writers: Vec<_> = (0..2u32)
        .map(|w| {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut rng = rng(u64::from(w) + 100);
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) && n < 3000 {
                    n += 1;
                    let g = w * 4 + rng.random_range(0..4);
                    if rng.random_bool(0.1) {
                        db.delete_range(gkey(g, 0)..gkey(g, 64)).expect("delete_range");
                    } else {
                        let mut batch = WriteBatch::new();
                        for i in 0..64 {
                            batch.merge(gkey(g, i), word(1));
                        }
                        db.write(batch).expect("merge batch");
                    }
                }
            })
        })
        .collect();
    let check = |pairs: Vec<(Vec<u8>, i64)>, what: &str| {
        let mut groups: BTreeMap<Vec<u8>, Vec<i64>> = BTreeMap::new();
        for (k, v) in pairs {
            groups
                .entry(k[..k.iter().position(|&b| b == b'/').expect("slash")].to_vec())
                .or_default()
                .push(v);
        }
        for (g, values) in groups {
            assert_eq!(values.len(), 64, "{what}: group {:?} partly there", String::from_utf8_lossy(&g));
            assert!(
                values.iter().all(|&v| v == values[0]),
                "{what}: group {:?} torn: {values:?}",
                String::from_utf8_lossy(&g)
            );
        }
    };
    let start = Instant::now();
    let mut reads = 0;
    while start.elapsed() < Duration::from_secs(8) && writers.iter().any(|w| !w.is_finished()) {
        reads += 1;
        let fwd: Vec<(Vec<u8>, i64)> =
            db.iter::<&[u8]>(..).map(|kv| kv.expect("iter")).map(|(k, v)| (k.to_vec(), as_i64(&v))).collect();
        check(fwd, "forward");
        let snap = db.snapshot();
        let rev: Vec<(Vec<u8>, i64)> = snap
            .iter::<&[u8]>(.., Direction::Reverse)
            .map(|kv| kv.expect("iter"))
            .map(|(k, v)| (k.to_vec(), as_i64(&v)))
            .collect();
        let gets: Vec<(Vec<u8>, i64)> = rev
            .iter()
            .filter_map(|(k, _)| snap.get(k).expect("get").map(|v| (k.clone(), as_i64(&v))))
            .collect();
        assert_eq!(gets.len(), rev.len(), "a snapshot's gets agree with its iterator");
        check(rev, "reverse at a snapshot");
        check(gets, "gets at a snapshot");
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().expect("writer");
    }
    assert!(reads > 5);
    db.wait_for_background_work().expect("background");
    assert_levels_disjoint(&db, "after the race");
}

// ---------------------------------------------------------------------------
// Dropped trees, reopen, recovery.
// ---------------------------------------------------------------------------

/// Held: range deletes of a keyspace dropped before the flush (in the
/// memtable, in the WAL) and of one dropped after it (in the MANIFEST)
/// neither block a reopen nor leak into a keyspace created later under
/// the same name.
#[test]
fn range_deletes_of_dropped_keyspaces_vanish_with_them() {
    let fs = MemFs::new();
    {
        let db = Db::open("/db", options(&fs)).expect("open");
        let a = db.create_keyspace("a").expect("a");
        let b = db.create_keyspace("b").expect("b");
        for i in 0..500 {
            a.put(key(i), b"a").expect("put");
            b.put(key(i), b"b").expect("put");
        }
        db.flush().expect("flush");
        b.delete_range(key(0)..key(400)).expect("delete_range b");
        db.flush().expect("flush");
        a.delete_range(key(0)..key(400)).expect("delete_range a");
        drop((a, b));
        db.drop_keyspace("a").expect("drop a");
        db.drop_keyspace("b").expect("drop b");
        let a = db.create_keyspace("a").expect("a again");
        a.put(key(10), b"new").expect("put");
    }
    let db = Db::open("/db", options(&fs)).expect("reopen");
    let a = db.keyspace("a").expect("a");
    assert_eq!(a.get(key(10)).expect("get").as_deref(), Some(&b"new"[..]));
    assert_eq!(a.iter::<&[u8]>(..).count(), 1);
    db.flush().expect("flush");
    db.close().expect("close");
    let db = Db::open("/db", options(&fs)).expect("reopen");
    assert_eq!(db.keyspace("a").expect("a").iter::<&[u8]>(..).count(), 1);
    assert_eq!(db.stats().range_tombstones, 0);
}

// ---------------------------------------------------------------------------
// A model: merges, range deletes, blobs, the row cache, the table face.
// ---------------------------------------------------------------------------

/// Held (a randomized model): a merge keyspace (add_i64) and a plain
/// keyspace with blob values, written with puts, deletes, merges and
/// range deletes (also in mixed batches), under flushes, compactions,
/// held snapshots and reopens, with a row cache; checked by gets,
/// forward and reverse iteration, snapshot reads, the table face's scan
/// and count, and the level invariant.
#[test]
fn merges_range_deletes_blobs_and_the_row_cache_match_a_model() {
    type Ints = BTreeMap<Vec<u8>, i64>;
    type Bytes = BTreeMap<Vec<u8>, Vec<u8>>;
    run_seeded("merges_range_deletes_blobs_and_the_row_cache_match_a_model", 60, |seed| {
        let mut rng = rng(seed);
        let fs = MemFs::new();
        let path = Path::new("/db");
        let open = |rng: &mut rand::rngs::StdRng| {
            Db::open(
                path,
                common::small_options(&fs, rng)
                    .row_cache_bytes(rng.random_range(0..32 << 10))
                    .blob_value_bytes_min(rng.random_range(1..64)),
            )
            .expect("open")
        };
        let mut db = open(&mut rng);
        db.keyspace("default").expect("default").set_merge_operator("add_i64").expect("bind");
        db.create_keyspace("blobs").expect("blobs");
        let mut ints = Ints::new();
        let mut blobs = Bytes::new();
        let mut held: Vec<(basalt::Snapshot, Ints, Bytes)> = Vec::new();
        let k = |rng: &mut rand::rngs::StdRng| format!("k{:02}", rng.random_range(0..30)).into_bytes();
        let range = |rng: &mut rand::rngs::StdRng| -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
            let a = k(rng);
            let b = k(rng);
            let lo = if rng.random_bool(0.2) {
                Bound::Unbounded
            } else if rng.random_bool(0.5) {
                Bound::Included(a)
            } else {
                Bound::Excluded(a)
            };
            let hi = if rng.random_bool(0.2) {
                Bound::Unbounded
            } else if rng.random_bool(0.5) {
                Bound::Included(b)
            } else {
                Bound::Excluded(b)
            };
            (lo, hi)
        };
        let inside = |r: &(Bound<Vec<u8>>, Bound<Vec<u8>>), key: &[u8]| {
            (match &r.0 {
                Bound::Included(a) => key >= a.as_slice(),
                Bound::Excluded(a) => key > a.as_slice(),
                Bound::Unbounded => true,
            }) && (match &r.1 {
                Bound::Included(b) => key <= b.as_slice(),
                Bound::Excluded(b) => key < b.as_slice(),
                Bound::Unbounded => true,
            })
        };
        for step in 0..160 {
            let bks = db.keyspace("blobs").expect("blobs");
            match rng.random_range(0..100) {
                0..25 => {
                    let (key, n) = (k(&mut rng), rng.random_range(-9..10));
                    db.merge(&key, word(n)).expect("merge");
                    *ints.entry(key).or_insert(0) += n;
                }
                25..32 => {
                    let (key, n) = (k(&mut rng), rng.random_range(-9..10));
                    db.put(&key, word(n)).expect("put");
                    ints.insert(key, n);
                }
                32..36 => {
                    let key = k(&mut rng);
                    db.delete(&key).expect("delete");
                    ints.remove(&key);
                }
                36..42 => {
                    let r = range(&mut rng);
                    if rng.random_bool(0.5) {
                        db.delete_range((r.0.clone(), r.1.clone())).expect("delete_range");
                        ints.retain(|key, _| !inside(&r, key));
                    } else {
                        bks.delete_range((r.0.clone(), r.1.clone())).expect("delete_range");
                        blobs.retain(|key, _| !inside(&r, key));
                    }
                }
                42..55 => {
                    let key = k(&mut rng);
                    let len = rng.random_range(0..200);
                    let v: Vec<u8> = (0..len).map(|_| rng.random()).collect();
                    bks.put(&key, &v).expect("put");
                    blobs.insert(key, v);
                }
                55..58 => {
                    let key = k(&mut rng);
                    bks.delete(&key).expect("delete");
                    blobs.remove(&key);
                }
                58..64 => {
                    // A mixed batch, in order.
                    let mut batch = WriteBatch::new();
                    for _ in 0..rng.random_range(1..6) {
                        match rng.random_range(0..4) {
                            0 => {
                                let (key, n) = (k(&mut rng), rng.random_range(-9..10));
                                batch.merge(&key, word(n));
                                *ints.entry(key).or_insert(0) += n;
                            }
                            1 => {
                                let r = range(&mut rng);
                                batch.delete_range((r.0.clone(), r.1.clone()));
                                ints.retain(|key, _| !inside(&r, key));
                            }
                            2 => {
                                let r = range(&mut rng);
                                batch.delete_range_keyspace(&bks, (r.0.clone(), r.1.clone())).expect("range");
                                blobs.retain(|key, _| !inside(&r, key));
                            }
                            _ => {
                                let key = k(&mut rng);
                                let v = vec![rng.random::<u8>(); rng.random_range(0..120)];
                                batch.put_keyspace(&bks, &key, &v).expect("put");
                                blobs.insert(key, v);
                            }
                        }
                    }
                    db.write(batch).expect("batch");
                }
                64..72 => db.flush().expect("flush"),
                72..76 => {
                    if rng.random_bool(0.5) {
                        db.compact_range::<&[u8]>(..).expect("compact");
                    } else {
                        bks.compact_range::<&[u8]>(..).expect("compact blobs");
                    }
                    assert_levels_disjoint(&db, &format!("step {step}"));
                }
                76..80 => held.push((db.snapshot(), ints.clone(), blobs.clone())),
                80..84 if !held.is_empty() => {
                    let (snap, m, b) = &held[rng.random_range(0..held.len())];
                    let got: Ints = snap
                        .iter::<&[u8]>(.., Direction::Reverse)
                        .map(|kv| kv.expect("iter"))
                        .map(|(k, v)| (k.to_vec(), as_i64(&v)))
                        .collect();
                    assert_eq!(&got, m, "step {step}: snapshot of the merge keyspace");
                    let key = k(&mut rng);
                    assert_eq!(
                        snap.get(&key).expect("get").map(|v| as_i64(&v)),
                        m.get(&key).copied(),
                        "step {step}: snapshot get"
                    );
                    let got: Bytes = bks
                        .iter_opt::<&[u8]>(
                            ..,
                            Direction::Forward,
                            &ReadOptions::default().snapshot(Some(snap)),
                        )
                        .map(|kv| kv.expect("iter"))
                        .map(|(k, v)| (k.to_vec(), v.to_vec()))
                        .collect();
                    assert_eq!(&got, b, "step {step}: snapshot of the blob keyspace");
                }
                84..86 => held.clear(),
                86..89 => {
                    held.clear();
                    drop(bks);
                    db.close().expect("close");
                    db = open(&mut rng);
                    continue;
                }
                _ => {}
            }
            // Every step: a get of each keyspace; every fifth a full read.
            let key = k(&mut rng);
            assert_eq!(
                db.get(&key).expect("get").map(|v| as_i64(&v)),
                ints.get(&key).copied(),
                "step {step}: get"
            );
            assert_eq!(
                bks.get(&key).expect("get").map(|v| v.to_vec()),
                blobs.get(&key).cloned(),
                "step {step}: blob get"
            );
            if step % 5 == 0 {
                let got: Ints = db
                    .iter::<&[u8]>(..)
                    .map(|kv| kv.expect("iter"))
                    .map(|(k, v)| (k.to_vec(), as_i64(&v)))
                    .collect();
                assert_eq!(got, ints, "step {step}: iter");
                let rev: Vec<Vec<u8>> = keys_of(bks.iter_rev::<&[u8]>(..));
                assert_eq!(rev, blobs.keys().rev().cloned().collect::<Vec<_>>(), "step {step}: blob reverse");
                let face = db.table("default").expect("face");
                let rows = face_rows(&face, ScanOptions::default());
                let want: Vec<(Vec<u8>, Vec<u8>)> =
                    ints.iter().map(|(k, v)| (k.clone(), word(*v).to_vec())).collect();
                assert_eq!(rows, want, "step {step}: table face");
                let all = (Bound::Unbounded, Bound::Unbounded);
                assert_eq!(
                    face.count_rows(&all, None).expect("count"),
                    ints.len() as u64,
                    "step {step}: count"
                );
                assert_eq!(bks.iter::<&[u8]>(..).count(), blobs.len(), "step {step}: blob count");
            }
        }
        held.clear();
        // (Not wait_for_background_work: see the test after this one.)
        db.compact_range::<&[u8]>(..).expect("compact");
        assert_levels_disjoint(&db, "end");
        basalt::inspect::verify_blob_files(&db).expect("blob files whole");
    });
}

/// DEFECT: releasing a snapshot never wakes the compaction thread, yet
/// whether files covered by a range tombstone may be dropped depends on
/// the snapshots (`DbInner::read_between`). With a snapshot held, the
/// thread finds nothing to do and sleeps; once the snapshot is dropped,
/// `wait_for_background_work` sees covered files (`has_covered_files` is
/// in its `busy`), waits for the thread, and the thread is never woken:
/// the call hangs forever (and the files stay until some other flush or
/// compaction wakes it). `Snapshot::drop` (and a transaction's end) should
/// `jobs.wake()` when it was the last snapshot under a tombstone.
#[test]
fn wait_for_background_work_returns_after_the_snapshot_under_a_range_delete_is_dropped() {
    let fs = MemFs::new();
    let db = Arc::new(Db::open("/db", options(&fs)).expect("open"));
    for i in 0..5000 {
        db.put(key(i), vec![b'v'; 100]).expect("put");
    }
    db.compact_range::<&[u8]>(..).expect("compact");
    let snap = db.snapshot();
    db.delete_range::<&[u8]>(..).expect("delete_range");
    db.flush().expect("flush");
    db.wait_for_background_work().expect("nothing to do while the snapshot reads the files");
    assert_eq!(db.stats().files_dropped_by_range_deletes, 0);
    drop(snap);
    let waiter = db.clone();
    let returned = within(Duration::from_secs(15), move || waiter.wait_for_background_work());
    assert!(
        returned.is_some(),
        "wait_for_background_work hung: the covered files wait for a compaction thread nobody wakes"
    );
    assert!(db.stats().files_dropped_by_range_deletes > 0, "{}", db.stats());
}

/// DEFECT (unbounded growth): a merge keyspace whose value sits in a blob
/// file (written, with `blob_value_bytes_min` on, before the keyspace
/// was bound; or any value a blob-separating keyspace got) never has its
/// operands folded by compaction: `compaction::fold::fold_stripe` returns
/// the whole run with its blob base as they are, not even combining the
/// run into one operand (`partial_merge`), so every operand ever written
/// stays in the SSTs, down to the bottom, and every read folds them all.
#[test]
#[ignore = "known (issue 60, docs/merge-operators.md 'Not yet'): operands over a value kept in a blob file are folded by reads only"]
fn operands_over_a_value_in_a_blob_file_are_folded_by_compaction() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs).blob_value_bytes_min(8)).expect("open");
    let log = db.create_keyspace("log").expect("keyspace");
    log.put(b"k", b"0123456789abcdef").expect("a value kept in a blob file");
    db.flush().expect("flush");
    assert_eq!(db.stats().blob_files, 1, "the value went to a blob file");
    log.set_merge_operator("append").expect("bind");
    for round in 0..10 {
        for _ in 0..100 {
            log.merge(b"k", b"x").expect("merge");
        }
        db.flush().expect("flush");
        if round % 3 == 0 {
            log.compact_range::<&[u8]>(..).expect("compact");
        }
    }
    log.compact_range::<&[u8]>(..).expect("compact");
    let value = log.get(b"k").expect("get").expect("value");
    assert_eq!(value.len(), 16 + 1000);
    let entries: u64 =
        basalt::inspect::files(&db).iter().filter(|f| f.tree == "log").map(|f| f.entries).sum();
    assert!(entries <= 2, "one key, fully compacted, still has {entries} entries in its SSTs");
}

/// Held: a write batch mixing a merge, a range delete over the key and a
/// merge after it reads as "the second operand alone", in the memtable,
/// after a flush, after a compaction that is not the bottom (a deeper
/// value older than the tombstone), at the bottom and after a reopen
/// (WAL replay and then the MANIFEST).
#[test]
fn an_operand_after_a_range_delete_in_one_batch_folds_onto_nothing() {
    let fs = MemFs::new();
    let opts = || options(&fs).auto_compaction(false);
    let db = Db::open("/db", opts()).expect("open");
    db.keyspace("default").expect("default").set_merge_operator("add_i64").expect("bind");
    db.put(b"k", word(100)).expect("put");
    db.compact_range::<&[u8]>(..).expect("to the bottom");
    let mut batch = WriteBatch::new();
    batch.merge(b"k", word(1));
    batch.delete_range(&b"k"[..]..=&b"k"[..]);
    batch.merge(b"k", word(7));
    db.write(batch).expect("batch");
    assert_eq!(db.get(b"k").expect("get").map(|v| as_i64(&v)), Some(7));
    db.close().expect("close");
    let db = Db::open("/db", opts()).expect("reopen from the WAL");
    assert_eq!(db.get(b"k").expect("get").map(|v| as_i64(&v)), Some(7));
    db.flush().expect("flush");
    assert_eq!(db.get(b"k").expect("get").map(|v| as_i64(&v)), Some(7));
    db.compact_range::<&[u8]>(..).expect("compact");
    assert_eq!(db.get(b"k").expect("get").map(|v| as_i64(&v)), Some(7));
    assert_eq!(db.iter::<&[u8]>(..).map(|kv| as_i64(&kv.expect("iter").1)).collect::<Vec<_>>(), vec![7]);
    db.close().expect("close");
    let db = Db::open("/db", opts()).expect("reopen from the MANIFEST");
    assert_eq!(db.get(b"k").expect("get").map(|v| as_i64(&v)), Some(7));
    assert_eq!(db.stats().range_tombstones, 0, "{}", db.stats());
}

/// Held: misuse is refused cleanly, with nothing written: a range bound
/// past the key limit (alone or in a batch with a put), a table range of
/// the wrong key type, a merge operator bound to a table.
#[test]
fn misuse_of_merges_and_range_deletes_is_refused_with_nothing_written() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs).key_bytes_max(32)).expect("open");
    let table = users(&db);
    let seqno = db.stats().last_seqno;
    // A range bound longer than a key and a byte.
    let long = vec![b'a'; 40];
    assert!(matches!(db.delete_range(long.clone()..), Err(Error::InvalidArgument(_))));
    let mut batch = WriteBatch::new();
    batch.put(b"x", b"1");
    batch.delete_range(..long.clone());
    assert!(matches!(db.write(batch), Err(Error::InvalidArgument(_))));
    // A table's range with bounds of the wrong type.
    let r = table.delete_range((Bound::Included(vec![KeyValue::Str("a")]), Bound::Unbounded));
    assert!(r.is_err(), "{r:?}");
    // Binding a table is refused (only keyspaces take operands).
    assert!(
        db.keyspace("users").is_err()
            || db.keyspace("users").expect("k").set_merge_operator("add_i64").is_err()
    );
    assert_eq!(db.stats().last_seqno, seqno, "nothing was written");
    assert_eq!(db.get(b"x").expect("get"), None);
}
