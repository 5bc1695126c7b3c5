//! The one read path per tree, seen from outside: a short scan opens only
//! the files its range meets (one per level, not every file after its
//! start), the SST reader cache keeps at most `max_open_files` readers while
//! every read still answers right, and `Table::get` goes through the point
//! lookup of key-value reads (its counters and its row cache).

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use basalt::testing::MemFs;
use basalt::{Db, KeyValue, Options, ScanOptions, Table, TableOptions};

const DB: &str = "/db";
const ROWS: i64 = 20_000;
/// The reader cache's bound in the test of it.
const CAP: usize = 3;

/// Small memtables and SSTs, so that the data spreads over many files.
fn small_files(fs: &MemFs) -> Options {
    Options::default()
        .fs(Arc::new(fs.clone()))
        .memtable_bytes_max(64 << 10)
        .sst_bytes_target(32 << 10)
        .auto_compaction(false)
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("v", DataType::Int64, false),
    ]))
}

fn rows(ids: std::ops::Range<i64>) -> RecordBatch {
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids.clone().collect::<Vec<_>>())),
        Arc::new(Int64Array::from(ids.map(|i| i * 7).collect::<Vec<_>>())),
    ];
    RecordBatch::try_new(schema(), cols).expect("batch")
}

fn kv_key(i: i64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

/// Fills a table and the key-value store, compacted into many files of
/// the deeper levels, and returns how many SSTs there are.
fn fill(db: &Db, t: &Table) -> usize {
    for start in (0..ROWS).step_by(1000) {
        t.write(&rows(start..start + 1000)).expect("write");
        let mut wb = basalt::WriteBatch::new();
        for i in start..start + 1000 {
            wb.put(kv_key(i), i.to_le_bytes());
        }
        db.write(wb).expect("put");
    }
    db.flush().expect("flush");
    t.compact().expect("compact table");
    db.compact_range::<&[u8]>(..).expect("compact");
    db.stats().levels.iter().map(|l| l.files).sum()
}

/// A store filled by [`fill`], closed, and its number of SSTs.
fn filled_store() -> (MemFs, usize) {
    let fs = MemFs::new();
    let db = Db::open(DB, small_files(&fs)).expect("open");
    let t = db.create_table("t", schema(), &["id"], TableOptions::default()).expect("create");
    let files = fill(&db, &t);
    (fs, files)
}

#[test]
fn a_short_scan_opens_only_the_files_its_range_meets() {
    let (fs, files) = filled_store();
    assert!(files >= 12, "the test needs many files; it made {files}");
    // Reopened, no reader is open yet: what a read opens is what it read.
    let db = Db::open(DB, small_files(&fs)).expect("reopen");
    let t = db.table("t").expect("table");
    let opened = |db: &Db| db.stats().open_sst_readers;
    assert_eq!(opened(&db), 0);
    let from = [KeyValue::I64(100)];
    let range = (std::ops::Bound::Included(from.to_vec()), std::ops::Bound::Unbounded);
    let mut scan = t.scan(ScanOptions::default().range(range).batch_size(10)).expect("scan");
    let first = scan.next().expect("a batch").expect("read");
    assert_eq!(first.column(0).as_primitive::<Int64Type>().value(0), 100);
    drop(scan);
    assert!(opened(&db) <= 2, "a short table scan opened {} of {files} files", opened(&db));

    let mut it = db.iter(kv_key(100)..);
    let (k, _) = it.next().expect("an entry").expect("read");
    assert_eq!(k.as_ref(), kv_key(100).as_slice());
    drop(it);
    assert!(opened(&db) <= 4, "a short scan of each tree opened {} of {files} files", opened(&db));

    // Walking the whole range opens every file, in order, and misses no row.
    let all: usize = t.scan(ScanOptions::default()).expect("scan").map(|b| b.expect("read").num_rows()).sum();
    assert_eq!(all, ROWS as usize);
    let keys: Vec<_> = db.iter_rev::<&[u8]>(..).map(|kv| kv.expect("read").0).collect();
    assert_eq!(keys.len(), ROWS as usize);
    assert!(keys.windows(2).all(|w| w[0] > w[1]), "reverse order across files");
}

#[test]
fn the_reader_cache_keeps_at_most_max_open_files_readers() {
    let (fs, files) = filled_store();
    assert!(files > 4 * CAP, "the test needs more files than the cache holds; it made {files}");
    let db = Db::open(DB, small_files(&fs).max_open_files(CAP)).expect("reopen");
    let t = db.table("t").expect("table");
    for i in (0..ROWS).step_by(97) {
        let v = db.get(kv_key(i)).expect("get").expect("present");
        assert_eq!(v.as_ref(), i.to_le_bytes(), "key {i}");
        let row = t.get(&[KeyValue::I64(i)]).expect("get").expect("present");
        assert_eq!(row.column(1).as_primitive::<Int64Type>().value(0), i * 7, "row {i}");
        assert!(db.stats().open_sst_readers <= CAP, "{} readers open", db.stats().open_sst_readers);
    }
    assert!(db.get(kv_key(ROWS)).expect("get").is_none());
    // Iterators hold the readers they read; when done, the cache is within
    // its bound again, and a whole scan saw every row through closed and
    // reopened files.
    let all: usize = t.scan(ScanOptions::default()).expect("scan").map(|b| b.expect("read").num_rows()).sum();
    assert_eq!(all, ROWS as usize);
    assert_eq!(db.iter_all().count(), ROWS as usize);
    assert!(db.stats().open_sst_readers <= CAP);
}

#[test]
fn table_gets_take_the_point_lookup_path_with_its_row_cache() {
    let fs = MemFs::new();
    let db = Db::open(DB, small_files(&fs).row_cache_bytes(1 << 20)).expect("open");
    let t = db.create_table("t", schema(), &["id"], TableOptions::default()).expect("create");
    fill(&db, &t);
    let before = db.stats();
    for _ in 0..3 {
        for i in [0, 1, 4_999, ROWS - 1] {
            let row = t.get(&[KeyValue::I64(i)]).expect("get").expect("present");
            assert_eq!(row.column(1).as_primitive::<Int64Type>().value(0), i * 7);
            assert_eq!(row.schema(), schema());
        }
    }
    assert!(t.get(&[KeyValue::I64(ROWS)]).expect("get").is_none());
    let after = db.stats();
    assert_eq!(after.gets - before.gets, 13, "table gets are counted as gets");
    assert!(after.row_cache_hits - before.row_cache_hits >= 8, "repeated table gets hit the row cache");
    // A row replaced after it was cached reads back new: the memtable
    // answers first, and the cache keys rows by file.
    t.write(
        &RecordBatch::try_new(
            schema(),
            vec![Arc::new(Int64Array::from(vec![1])) as ArrayRef, Arc::new(Int64Array::from(vec![-1]))],
        )
        .expect("batch"),
    )
    .expect("write");
    let row = t.get(&[KeyValue::I64(1)]).expect("get").expect("present");
    assert_eq!(row.column(1).as_primitive::<Int64Type>().value(0), -1);
    db.flush().expect("flush");
    let row = t.get(&[KeyValue::I64(1)]).expect("get").expect("present");
    assert_eq!(row.column(1).as_primitive::<Int64Type>().value(0), -1);
}

/// A lone SST whose blocks hold a few rows each, with two versions of
/// every third key (a snapshot keeps the older): iterators at the snapshot
/// and now, over every range start, see each key once with the version
/// their read sees, wherever the versions fall across block boundaries —
/// what the scan's lone-block path (no merge) must get right.
#[test]
fn iterators_over_a_lone_sst_see_one_version_per_key() {
    use basalt::{Direction, ReadOptions};
    for block_bytes in [40, 64, 100, 200, 4096] {
        let fs = MemFs::new();
        let opts = Options::default()
            .fs(Arc::new(fs.clone()))
            .block_bytes_target(block_bytes)
            .auto_compaction(false);
        let db = Db::open(DB, opts).expect("open");
        let key = |i: u32| format!("k{i:04}").into_bytes();
        for i in 0..300 {
            db.put(key(i), b"old").expect("put");
        }
        let snapshot = db.snapshot();
        for i in (0..300).step_by(3) {
            db.put(key(i), b"new").expect("put");
        }
        db.flush().expect("flush");
        db.compact_range::<&[u8]>(..).expect("compact");
        let read = |snap: Option<&basalt::Snapshot>, from: u32| -> Vec<(Vec<u8>, Vec<u8>)> {
            let opts = ReadOptions::default().snapshot(snap);
            db.iter_opt(key(from).., Direction::Forward, &opts)
                .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())))
                .collect::<basalt::Result<_>>()
                .expect("iterate")
        };
        for from in [0, 1, 2, 3, 150, 298, 299] {
            let then: Vec<_> = (from..300).map(|i| (key(i), b"old".to_vec())).collect();
            let now: Vec<_> = (from..300)
                .map(|i| (key(i), if i % 3 == 0 { b"new".to_vec() } else { b"old".to_vec() }))
                .collect();
            assert_eq!(
                read(Some(&snapshot), from),
                then,
                "at the snapshot from {from}, blocks of {block_bytes} B"
            );
            assert_eq!(read(None, from), now, "now from {from}, blocks of {block_bytes} B");
        }
    }
}

/// Issue 65: `Table::nth_last_key` (what `ORDER BY key DESC` reads with)
/// against an oracle, over random writes, deletes, range deletes, flushes
/// and compactions, in random ranges, now and at a snapshot taken midway.
#[test]
fn nth_last_key_counts_back_from_the_end_of_a_range() {
    use std::collections::BTreeSet;
    use std::ops::Bound;

    use basalt::OwnedKeyValue;
    use rand::{Rng, SeedableRng};

    let seed: u64 =
        std::env::var("BASALT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    eprintln!("nth_last_key seed {seed} (BASALT_SEED replays it)");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let fs = MemFs::new();
    let db = Db::open(DB, small_files(&fs).auto_compaction(true)).expect("open");
    let t = db.create_table("t", schema(), &["id"], TableOptions::default()).expect("create");
    let mut live = BTreeSet::new();
    let mut at_snapshot = None;
    for step in 0..60 {
        let lo = rng.random_range(-50..2_000i64);
        let hi = lo + rng.random_range(1..400);
        match rng.random_range(0..10) {
            0..=5 => {
                t.write(&rows(lo..hi)).expect("write");
                live.extend(lo..hi);
            }
            6 | 7 => {
                let keys = Int64Array::from((lo..hi).step_by(3).collect::<Vec<_>>());
                let batch = RecordBatch::try_new(
                    Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)])),
                    vec![Arc::new(keys)],
                )
                .expect("keys");
                t.delete(&batch).expect("delete");
                for k in (lo..hi).step_by(3) {
                    live.remove(&k);
                }
            }
            8 => {
                let (a, b) = (vec![KeyValue::I64(lo)], vec![KeyValue::I64(hi)]);
                t.delete_range((Bound::Included(a), Bound::Excluded(b))).expect("delete_range");
                live.retain(|k| !(lo..hi).contains(k));
            }
            _ => db.flush().expect("flush"),
        }
        if step == 30 {
            at_snapshot = Some((db.snapshot(), live.clone()));
        }
        for (snapshot, oracle) in [
            (None, &live),
            (at_snapshot.as_ref().map(|s| &s.0), &at_snapshot.as_ref().map_or(&live, |s| &s.1).clone()),
        ] {
            let lo = rng.random_range(-100..2_500i64);
            let hi = lo + rng.random_range(0..800);
            let (a, b) = (vec![KeyValue::I64(lo)], vec![KeyValue::I64(hi)]);
            let (lower, upper) = match rng.random_range(0..3) {
                0 => (Bound::Unbounded, Bound::Unbounded),
                1 => (Bound::Included(a), Bound::Excluded(b)),
                _ => (Bound::Excluded(a), Bound::Included(b)),
            };
            let inside: Vec<i64> = oracle
                .iter()
                .copied()
                .filter(|k| match (&lower, &upper) {
                    (Bound::Unbounded, _) => true,
                    (Bound::Included(_), _) => *k >= lo && *k < hi,
                    _ => *k > lo && *k <= hi,
                })
                .collect();
            let n = rng.random_range(0..inside.len() as u64 + 3);
            let got = t.nth_last_key(&(lower, upper), n, snapshot).expect("nth_last_key");
            let want = (n >= 1)
                .then(|| inside.len().checked_sub(n as usize).map(|i| vec![OwnedKeyValue::I64(inside[i])]))
                .flatten();
            assert_eq!(got, want, "seed {seed}, step {step}: n {n} in {lo}..{hi}");
        }
    }
    db.close().expect("close");
}
