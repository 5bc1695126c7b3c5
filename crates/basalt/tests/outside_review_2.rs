//! Second outside review (engine at ce35033): secondary indexes, bulk_load,
//! blob files, checkpoints and read-only opens, split points, the read
//! cursor, close. Every test here FAILS on that commit: each is a confirmed
//! bug, and its assert states the behaviour the documented contract asks
//! for (it passes once the bug is fixed). Public API only; the file-system
//! seam (`basalt::fs`) is used to hold a thread at one point.
//! Features: none of `testing`/`inspect` is used (the crate's own
//! dev-dependency turns both on anyway). Tests 2 and 3 wrap the real file
//! system in a small `basalt::fs::Fs` of their own (below): test 3 to hold
//! a compaction at one point, test 2 to make MANIFEST fsyncs take 20 ms.
//! To run: copy into crates/basalt/tests/ and
//! `cargo test -p basalt --features testing,inspect --test outside_review_2 -- --test-threads=2`.

//! (Kept as the reviewer wrote it, in the crate's tests since issue 36; only
//! the lint exceptions below were added.)
#![allow(
    clippy::unwrap_used,
    clippy::doc_markdown,
    clippy::case_sensitive_file_extension_comparisons,
    reason = "the reviewer's file, kept unchanged in what it runs and asserts"
)]

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Condvar, Mutex};
use std::time::Duration;

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use basalt::fs::{FileLock, Fs, RandomAccessFile, RealFs, WritableFile};
use basalt::{Db, IndexOptions, Options, ScanOptions, Table, TableOptions};

fn id_x_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("x", DataType::Float64, true),
    ]))
}

fn id_x_batch(rows: &[(i64, f64)]) -> RecordBatch {
    RecordBatch::try_new(
        id_x_schema(),
        vec![
            Arc::new(Int64Array::from(rows.iter().map(|r| r.0).collect::<Vec<_>>())) as ArrayRef,
            Arc::new(Float64Array::from(rows.iter().map(|r| r.1).collect::<Vec<_>>())),
        ],
    )
    .expect("batch")
}

// ---------------------------------------------------------------------------
// A file system that can hold one thread at a chosen point, or make the
// MANIFEST's fsync slow (as on a loaded disk), around the real one.
// ---------------------------------------------------------------------------

#[derive(Debug, Default)]
struct Gate {
    /// The next `create` of an `.sst` file waits here until released.
    armed: AtomicBool,
    state: Mutex<(bool, bool)>, // (entered, released)
    cv: Condvar,
    /// fsyncs of MANIFEST files take this long when set.
    slow_manifest_sync: AtomicBool,
}

#[derive(Debug, Clone)]
struct HookFs {
    real: RealFs,
    gate: Arc<Gate>,
}

impl HookFs {
    fn new() -> HookFs {
        HookFs { real: RealFs, gate: Arc::new(Gate::default()) }
    }
    fn arm_sst_gate(&self) {
        *self.gate.state.lock().unwrap() = (false, false);
        self.gate.armed.store(true, Ordering::SeqCst);
    }
    fn wait_entered(&self) {
        let mut s = self.gate.state.lock().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !s.0 {
            assert!(std::time::Instant::now() < deadline, "the gated thread never reached the gate");
            s = self.gate.cv.wait_timeout(s, Duration::from_millis(50)).unwrap().0;
        }
    }
    fn release(&self) {
        self.gate.state.lock().unwrap().1 = true;
        self.gate.cv.notify_all();
    }
}

struct SlowSyncFile {
    inner: Box<dyn WritableFile>,
    gate: Arc<Gate>,
    manifest: bool,
}

impl WritableFile for SlowSyncFile {
    fn append(&mut self, data: &[u8]) -> basalt::Result<()> {
        self.inner.append(data)
    }
    fn flush(&mut self) -> basalt::Result<()> {
        self.inner.flush()
    }
    fn sync(&mut self) -> basalt::Result<()> {
        if self.manifest && self.gate.slow_manifest_sync.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.inner.sync()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
}

impl Fs for HookFs {
    fn create(&self, path: &Path) -> basalt::Result<Box<dyn WritableFile>> {
        let is_sst = path.extension().is_some_and(|e| e == "sst");
        if is_sst && self.gate.armed.swap(false, Ordering::SeqCst) {
            let mut s = self.gate.state.lock().unwrap();
            s.0 = true;
            self.gate.cv.notify_all();
            while !s.1 {
                s = self.gate.cv.wait(s).unwrap();
            }
        }
        let manifest = path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("MANIFEST"));
        let inner = self.real.create(path)?;
        Ok(Box::new(SlowSyncFile { inner, gate: self.gate.clone(), manifest }))
    }
    fn open(&self, path: &Path) -> basalt::Result<Box<dyn RandomAccessFile>> {
        self.real.open(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> basalt::Result<()> {
        self.real.rename(from, to)
    }
    fn remove(&self, path: &Path) -> basalt::Result<()> {
        self.real.remove(path)
    }
    fn link(&self, from: &Path, to: &Path) -> basalt::Result<()> {
        self.real.link(from, to)
    }
    fn list(&self, dir: &Path) -> basalt::Result<Vec<String>> {
        self.real.list(dir)
    }
    fn exists(&self, path: &Path) -> basalt::Result<bool> {
        self.real.exists(path)
    }
    fn is_dir(&self, path: &Path) -> basalt::Result<bool> {
        self.real.is_dir(path)
    }
    fn create_dir_all(&self, path: &Path) -> basalt::Result<()> {
        self.real.create_dir_all(path)
    }
    fn sync_dir(&self, path: &Path) -> basalt::Result<()> {
        self.real.sync_dir(path)
    }
    fn lock(&self, path: &Path, dir: &Path) -> basalt::Result<Box<dyn FileLock>> {
        self.real.lock(path, dir)
    }
}

// ---------------------------------------------------------------------------
// 1. Blob files and the key-value store's table face.
// ---------------------------------------------------------------------------

/// A keyspace's table face (`db.table("default")`, also what SQL and the
/// Python/DataFusion layers scan) reads the key-value tree as a table of
/// (key, value) rows. `TableScan::step_key` (db/scan.rs:542-546) hands out
/// a key only when its newest version is `Kind::Put`; a value the flush moved to
/// a blob file is stored as `Kind::Blob`, so the scan silently leaves every
/// such row out (the zero-copy path refuses non-Put blocks, so no path
/// resolves the pointer). `Table::get` on the same face (db/read.rs:178-186)
/// resolves it and finds the row: the two disagree.
/// Consequence: wrong answer (rows missing from scans and SQL) as soon as
/// `blob_value_bytes_min` is set.
#[test]
fn table_face_scan_leaves_out_values_kept_in_blob_files() {
    let dir = tempfile::tempdir().expect("dir");
    let db = Db::open(dir.path(), Options::default().blob_value_bytes_min(64)).expect("open");
    db.put("small", "v").expect("put");
    db.put("large", vec![b'x'; 200]).expect("put");
    let face = db.table("default").expect("table face");
    let rows_of = |t: &Table| -> usize {
        t.scan(ScanOptions::default()).expect("scan").map(|b| b.expect("batch").num_rows()).sum()
    };
    assert_eq!(rows_of(&face), 2, "both rows from the memtable");
    db.flush().expect("flush");
    let got = face.get(&[basalt::KeyValue::Bytes(&b"large"[..])]).expect("get");
    assert_eq!(got.map(|b| b.num_rows()), Some(1), "the face's point read finds the blob value");
    let after = rows_of(&face);
    assert_eq!(
        after, 2,
        "a scan of the table face after the flush lost the row whose value is in a blob file"
    );
}

// ---------------------------------------------------------------------------
// 2. Concurrent drops.
// ---------------------------------------------------------------------------

/// `Table::drop_index` looks the index up in the catalog *before* it owns
/// the write path (db/index/mod.rs:97-99, then `drop_trees` ->
/// `log_drop`), and `drop_table`/`drop_keyspace` likewise (db/ddl.rs:210-214;
/// the check under the writer only looks at open handles). Two callers
/// dropping the same index (or table) at once both pass that check; the
/// second then logs a drop of a tree that no longer exists:
/// `Catalog::apply` fails ("dropping unknown tree", an `Error::Corruption`
/// returned to the caller), and `DbInner::log_and_apply` (db/mod.rs:516-523)
/// turns every failure, even one found before anything was written, into
/// the background error, which stops all writes until reopen.
/// Consequence: a benign race (two sessions running `DROP INDEX` / `DROP
/// TABLE IF EXISTS`) makes the whole database refuse writes, and the loser
/// gets `Corruption` instead of "no index". The MANIFEST's slow fsync
/// (20 ms, a loaded disk) only widens the window the race needs; the same
/// race with `Db::drop_table` was hit in round 0 without it. Timing-based:
/// 10 rounds, any hit fails the test.
#[test]
fn two_concurrent_drops_of_one_index_stop_every_write() {
    let dir = tempfile::tempdir().expect("dir");
    let fs = HookFs::new();
    let db = Db::open(dir.path(), Options::default().fs(Arc::new(fs.clone()))).expect("open");
    let t = db.create_table("t", id_x_schema(), &["id"], TableOptions::default()).expect("table");
    t.write(&id_x_batch(&(0..100).map(|i| (i, i as f64)).collect::<Vec<_>>())).expect("rows");
    fs.gate.slow_manifest_sync.store(true, Ordering::SeqCst);
    for round in 0..10 {
        t.create_index("by_x", &["x"], IndexOptions::default()).expect("create index");
        let barrier = Arc::new(Barrier::new(2));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (t, barrier) = (t.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    t.drop_index("by_x")
                })
            })
            .collect();
        let results: Vec<_> = threads.into_iter().map(|h| h.join().expect("no panic")).collect();
        println!("round {round}: drop results {results:?}");
        let ok = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(ok, 1, "exactly one drop succeeds: {results:?}");
        let write = db.put(format!("after round {round}"), "v");
        assert!(
            write.is_ok(),
            "round {round}: a second drop of the same index stopped every write: {write:?}"
        );
    }
}

// ---------------------------------------------------------------------------
// 3. Close while a compaction of the same handle is in flight.
// ---------------------------------------------------------------------------

/// `Db::close` waits only for the write path (`with_exclusive_writer`) and
/// the background threads (db/mod.rs:457-497), then releases LOCK. A
/// compaction started by `Table::compact` on another thread (also
/// `Db::compact_range`, `Keyspace::compact_range`) runs on the caller's
/// thread under `jobs.compaction` and never checks `closed`
/// (db/compact.rs:100-131 `compact_range`, 136-175 `run_compaction`, whose
/// `delete_obsolete_files` is at :169): it goes on after close
/// returned, level after level, logs its edits to the old MANIFEST and
/// runs `delete_obsolete_files` over the directory with the *closed*
/// handle's idea of what is live. A database reopened meanwhile (the lock
/// is free) has its SSTs deleted under it: the L0 files the old
/// compaction consumed, and every SST the new handle flushed.
/// Consequence: data loss (seen: the reopened database's own flushed SST
/// and an L0 input it still names were deleted; its rows stay readable only
/// through the already-open map, and the next open fails: "names SST
/// 000010.sst, which is missing"). The file-system hook only holds the compaction at its first
/// output SST so that close and reopen happen while it runs.
#[test]
fn close_returns_while_a_compaction_runs_on_and_deletes_a_reopened_databases_files() {
    let dir = tempfile::tempdir().expect("dir");
    let fs = HookFs::new();
    let opts = Options::default().fs(Arc::new(fs.clone())).auto_compaction(false);
    let rows = |ids: std::ops::Range<i64>| id_x_batch(&ids.map(|i| (i, i as f64)).collect::<Vec<_>>());
    let db = Arc::new(Db::open(dir.path(), opts.clone()).expect("open"));
    let t = db.create_table("t", id_x_schema(), &["id"], TableOptions::default()).expect("table");
    // Rows at the bottom level, newer ones in L0: `compact` has levels to walk.
    let load = t.bulk_load([rows(0..4000)]).expect("bulk load");
    println!("bulk load: {load:?}");
    t.write(&rows(0..2000)).expect("write");
    db.flush().expect("flush");
    fs.arm_sst_gate();
    let compacting = {
        let t = t.clone();
        std::thread::spawn(move || t.compact())
    };
    fs.wait_entered();
    // The compaction is writing its first output: close the database.
    drop(t);
    db.close().expect("close");
    // The directory lock is free: reopen it (another process could), and
    // write and flush rows there.
    let reopened = Db::open(dir.path(), opts.clone()).expect("reopen after close");
    let t2 = reopened.table("t").expect("table");
    t2.write(&rows(10_000..10_100)).expect("write after reopen");
    reopened.flush().expect("flush after reopen");
    let listing = |what: &str| {
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".sst"))
            .collect();
        names.sort();
        println!("SSTs {what}: {names:?}");
    };
    listing("while the closed handle's compaction waits");
    fs.release();
    let compaction = compacting.join().expect("no panic");
    listing("after it finished");
    println!("compaction of the closed handle, finished after close: {compaction:?}");
    let lost: Vec<i64> =
        (10_000..10_100).filter(|&i| !matches!(t2.get(&[basalt::KeyValue::I64(i)]), Ok(Some(_)))).collect();
    drop(t2);
    drop(reopened);
    let third = Db::open(dir.path(), opts).map(drop);
    assert!(
        lost.is_empty() && third.is_ok(),
        "after close() returned, the closed handle's compaction deleted the reopened database's files: \
         {} flushed rows unreadable, next open: {third:?}",
        lost.len()
    );
}

// ---------------------------------------------------------------------------
// 4. Index backfill and the key limit.
// ---------------------------------------------------------------------------

/// Index upkeep refuses a write whose index entry key is over
/// `key_bytes_max` (db/index/upkeep.rs:128-135), but the backfill of
/// `create_index` builds entries for existing rows with no such check
/// (db/index/build.rs:131-149 `entries_of`, 152-194 `write_step`, which
/// commits through `commit_owned` at :192, past `validate`). A row whose indexed
/// value is long is then indexed with an over-limit entry, and from then
/// on every write of that row that changes an included column is refused
/// (upkeep re-puts the entry, with its unchanged key, and checks the key).
/// Consequence: wrong error / a row that can no longer be updated (only
/// deleted) after an index creation that reported success; the contract
/// says `create_index` fails with a clear error and creates nothing when
/// existing rows cannot be indexed.
#[test]
fn create_index_indexes_rows_over_the_key_limit_which_then_cannot_be_updated() {
    use arrow_array::StringArray;
    let dir = tempfile::tempdir().expect("dir");
    let db = Db::open(dir.path(), Options::default().key_bytes_max(64)).expect("open");
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("s", DataType::Utf8, false),
        Field::new("n", DataType::Int64, false),
    ]));
    let t = db.create_table("t", schema.clone(), &["id"], TableOptions::default()).expect("table");
    let row = |id: i64, s: &str, n: i64| {
        RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![id])) as ArrayRef,
                Arc::new(StringArray::from(vec![s])),
                Arc::new(Int64Array::from(vec![n])),
            ],
        )
        .expect("batch")
    };
    // The row itself is within every limit (its key is 8 bytes).
    let long = "y".repeat(100);
    t.write(&row(1, &long, 0)).expect("row within the limits");
    let created = t.create_index("by_s", &["s"], IndexOptions::default().include(vec!["n".into()]));
    println!("create_index over a row whose entry would take 110 bytes: {created:?}");
    let update = t.write(&row(1, &long, 1));
    println!("update of the included column n of that row: {update:?}");
    assert!(
        created.is_err() || update.is_ok(),
        "create_index succeeded, and now the row it indexed cannot be updated: {update:?}"
    );
}
