//! Every API call in every state a careless or hostile caller can reach:
//! handles used after the database was closed or dropped, a table handle of
//! another database, tables used around their drop and re-creation, DDL
//! racing writes and scans, odd table names, schemas and batches that must
//! be refused. A refused call must name its reason with a typed error and
//! change nothing: the catalog, the rows and the files stay as they were,
//! and the database still reopens to the same state. Each call that could
//! hang runs under a time limit (`common::limit`), so a hang fails the test.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray, new_null_array};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use basalt::testing::MemFs;
use basalt::{Db, Direction, Error, KeyValue, Options, ScanOptions, Table, TableOptions, WriteBatch};
use common::limit::{LIMIT, Limited, Pending, run_limited, spawn_limited, within};
use common::{Model, rng, run_seeded};
use rand::Rng;

const DB: &str = "/db";

fn options(fs: &MemFs) -> Options {
    // Small memtables: a few hundred rows fill one, so a write path that
    // waits for a flush shows within the test.
    Options::default().fs(Arc::new(fs.clone())).memtable_bytes_max(16 << 10)
}

/// Opens (or creates) the database on `fs` under the time limit.
fn open(fs: &MemFs) -> Db {
    let fs = fs.clone();
    within("Db::open", LIMIT, move || Db::open(DB, options(&fs)).expect("open"))
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("score", DataType::Float64, false),
    ]))
}

fn rows(ids: Range<i64>) -> RecordBatch {
    let ids: Vec<i64> = ids.collect();
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids.clone())),
        Arc::new(StringArray::from(ids.iter().map(|i| format!("n{i}")).collect::<Vec<_>>())),
        Arc::new(Float64Array::from(ids.iter().map(|&i| i as f64 * 0.5).collect::<Vec<_>>())),
    ];
    RecordBatch::try_new(schema(), cols).expect("rows")
}

fn keys(ids: Range<i64>) -> RecordBatch {
    let s = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    RecordBatch::try_new(s, vec![Arc::new(Int64Array::from(ids.collect::<Vec<_>>()))]).expect("keys")
}

fn create(db: &Db, name: &str) -> Table {
    db.create_table(name, schema(), &["id"], TableOptions::default()).expect("create_table")
}

/// Every row of a table, as one batch.
fn all_rows(t: &Table) -> RecordBatch {
    let batches: Vec<RecordBatch> =
        t.scan(ScanOptions::default()).expect("scan").map(|b| b.expect("scan batch")).collect();
    arrow_select::concat::concat_batches(&t.schema(), &batches).expect("concat")
}

/// What a caller can see of a database: the catalog, the key-value store
/// and every table's rows.
#[derive(Debug, PartialEq)]
struct State {
    tables: Vec<String>,
    kv: Model,
    rows: BTreeMap<String, RecordBatch>,
}

fn state(db: &Db) -> State {
    let mut tables = db.tables();
    tables.sort();
    let rows = tables
        .iter()
        .filter(|n| n.as_str() != "default")
        .map(|n| (n.clone(), all_rows(&db.table(n).expect("table of the catalog"))))
        .collect();
    State { tables, kv: common::contents(db), rows }
}

/// Reopens the database on `fs` and checks it holds `want`.
fn assert_reopens_to(fs: &MemFs, want: &State, what: &str) {
    let db = open(fs);
    assert_eq!(state(&db), *want, "{what}: the reopened database differs");
    db.close().expect("close after reopen");
}

/// A short description of a value returned where an error was due.
fn show<T: std::fmt::Debug>(v: &T) -> String {
    let s = format!("{v:?}");
    if s.chars().count() > 200 { format!("{}…", s.chars().take(200).collect::<String>()) } else { s }
}

/// Calls run concurrently, each in its own thread, each expected to fail
/// with `Error::Closed`; `finish` waits for all with one deadline, so hung
/// calls cost the limit once.
#[derive(Default)]
struct ClosedChecks {
    pending: Vec<(String, Pending<Result<String, Error>>)>,
}

impl ClosedChecks {
    fn add<T: std::fmt::Debug>(&mut self, what: &str, f: impl FnOnce() -> Result<T, Error> + Send + 'static) {
        self.pending.push((what.to_string(), spawn_limited(move || f().map(|v| show(&v)))));
    }

    /// Failures, and whether any call hung (its handles are then stuck).
    fn finish(self) -> (Vec<String>, bool) {
        let deadline = Instant::now() + LIMIT;
        let (mut failures, mut hung) = (Vec::new(), false);
        for (what, pending) in self.pending {
            match pending.wait_until(deadline) {
                Limited::Done(Err(Error::Closed(_))) => {}
                Limited::Done(Err(e)) => failures.push(format!("{what}: expected Error::Closed, got {e}")),
                Limited::Done(Ok(v)) => failures.push(format!("{what}: expected Error::Closed, got Ok({v})")),
                Limited::Panicked(m) => failures.push(format!("{what}: panicked: {m}")),
                Limited::Hung => {
                    hung = true;
                    failures.push(format!("{what}: hung (no answer within {LIMIT:?})"));
                }
            }
        }
        (failures, hung)
    }
}

#[derive(Clone, Copy, Debug)]
enum End {
    Close,
    Drop,
}

/// Every handle call after the database ended, run concurrently.
fn add_handle_calls(checks: &mut ClosedChecks, t: &Table, snapshot: &Arc<basalt::Snapshot>) {
    let tc = || t.clone();
    let t1 = tc();
    checks.add("Table::write", move || t1.write(&rows(1000..1010)));
    let t1 = tc();
    checks.add("Table::write_opt(sync)", move || {
        t1.write_opt(&rows(1010..1020), &basalt::WriteOptions::default().sync(true))
    });
    let t1 = tc();
    checks.add("Table::delete", move || t1.delete(&keys(0..5)));
    let t1 = tc();
    checks.add("Table::get", move || t1.get(&[KeyValue::I64(1)]));
    let t1 = tc();
    checks.add("Table::get_many", move || t1.get_many(&keys(0..5)));
    let t1 = tc();
    checks.add("Table::scan", move || t1.scan(ScanOptions::default()).map(|_| ()));
    let t1 = tc();
    checks.add("Table::write, again and again (a memtable's worth and more)", move || {
        for i in 0..200 {
            t1.write(&rows(2000 + i * 50..2050 + i * 50))?;
        }
        Ok(())
    });
    let s = snapshot.clone();
    checks.add("Snapshot::get", move || s.get(b"k"));
    let s = snapshot.clone();
    checks.add("Snapshot::get_with", move || s.get_with(b"k", <[u8]>::len));
    let s = snapshot.clone();
    checks.add("Snapshot::iter", move || s.iter::<&[u8]>(.., Direction::Forward).next().transpose());
}

/// Handles used after `Db::close` or after the `Db` was dropped: every call
/// fails with `Error::Closed` at once; the directory is released, so the
/// database reopens while the old handles live, and they cannot touch it.
fn handles_after_end(end: End) {
    let fs = MemFs::new();
    let db = open(&fs);
    let t = create(&db, "t");
    t.write(&rows(0..100)).expect("write");
    db.put("k", "v").expect("put");
    db.flush().expect("flush");
    t.write(&rows(100..150)).expect("write after the flush");
    db.put("k2", "v2").expect("put");
    let want = state(&db);
    let snapshot = Arc::new(db.snapshot());
    let mut iter = db.iter_all();
    let mut scan = t.scan(ScanOptions::default()).expect("scan");
    match end {
        End::Close => db.close().expect("close"),
        End::Drop => drop(db),
    }
    let mut checks = ClosedChecks::default();
    add_handle_calls(&mut checks, &t, &snapshot);
    checks.add("DbIterator::next (made before the end)", move || iter.next().transpose());
    checks.add("TableScan::next (made before the end)", move || scan.next().transpose());
    let (mut failures, hung) = checks.finish();
    if hung {
        failures.push("reopen checks skipped: handles are stuck in hung calls".into());
    } else {
        // The directory was released: the database opens beside the old
        // handles, which still cannot write.
        let fs2 = fs.clone();
        match run_limited(LIMIT, move || Db::open(DB, options(&fs2))) {
            Limited::Done(Ok(db)) => {
                let t2 = t.clone();
                match run_limited(LIMIT, move || t2.write(&rows(5000..5010))) {
                    Limited::Done(Err(Error::Closed(_))) => {}
                    other => {
                        failures.push(format!("old handle after the reopen: expected Closed, got {other:?}"));
                    }
                }
                if state(&db) != want {
                    failures
                        .push("the database reopened beside old handles differs from before the end".into());
                }
                db.close().expect("close");
            }
            other => failures.push(format!("reopen while old handles live: {}", show(&other))),
        }
    }
    drop((t, snapshot));
    if !hung {
        assert_reopens_to(&fs, &want, "after every handle was dropped");
    }
    assert!(failures.is_empty(), "after Db::{end:?}:\n  {}", failures.join("\n  "));
}

#[test]
fn handles_after_close_get_closed() {
    handles_after_end(End::Close);
}

#[test]
fn handles_after_drop_get_closed() {
    handles_after_end(End::Drop);
}

/// Found by `handles_after_close_get_closed`, minimized: `Db::close` says it
/// releases the directory, but a live `Table` handle keeps the LOCK.
#[test]
fn close_releases_the_directory_while_a_table_handle_lives() {
    let fs = MemFs::new();
    let db = open(&fs);
    let t = create(&db, "t");
    db.close().expect("close");
    let fs2 = fs.clone();
    let reopened = within("reopen", LIMIT, move || Db::open(DB, options(&fs2)).map(|db| db.close()));
    assert!(matches!(reopened, Ok(Ok(()))), "reopen after close with a live handle: {reopened:?}");
    drop(t);
}

/// Writers racing `Db::close` through table handles: each write is either
/// acknowledged or refused with `Error::Closed`, none hangs, and the
/// reopened database holds exactly the acknowledged rows.
#[test]
fn writes_racing_close_are_acknowledged_or_closed() {
    let fs = MemFs::new();
    let db = open(&fs);
    let t = create(&db, "t");
    let acked_count = Arc::new(AtomicU64::new(0));
    let writers: Vec<Pending<Result<Vec<i64>, String>>> = (0..2)
        .map(|w| {
            let (t, count) = (t.clone(), acked_count.clone());
            spawn_limited(move || {
                let mut acked = Vec::new();
                for i in 0..100_000i64 {
                    let id = w * 1_000_000 + i;
                    match t.write(&rows(id..id + 1)) {
                        Ok(()) => acked.push(id),
                        Err(Error::Closed(_)) => return Ok(acked),
                        Err(e) => return Err(format!("write {id}: expected Ok or Closed, got {e}")),
                    }
                    count.fetch_add(1, Ordering::Relaxed);
                }
                Err("100000 writes acknowledged, none refused: the close did not stop them".into())
            })
        })
        .collect();
    let start = Instant::now();
    while acked_count.load(Ordering::Relaxed) < 200 && start.elapsed() < LIMIT {
        std::thread::yield_now();
    }
    within("Db::close with writers running", LIMIT, move || db.close().expect("close"));
    let deadline = Instant::now() + LIMIT;
    let mut acked = BTreeSet::new();
    for w in writers {
        match w.wait_until(deadline) {
            Limited::Done(Ok(ids)) => acked.extend(ids),
            other => panic!("writer racing close: {other:?}"),
        }
    }
    drop(t);
    let db = open(&fs);
    let got = all_rows(&db.table("t").expect("table"));
    let ids: BTreeSet<i64> = got.column(0).as_primitive::<Int64Type>().values().iter().copied().collect();
    assert_eq!(ids, acked, "the reopened table differs from the acknowledged rows");
    db.close().expect("close");
}

/// Two databases with the same history give their first tables the same
/// tree id: a handle of one must not write into the other.
fn twin_databases() -> (MemFs, Db, Table, MemFs, Db, Table) {
    let (fs_a, fs_b) = (MemFs::new(), MemFs::new());
    let (a, b) = (open(&fs_a), open(&fs_b));
    let ta = create(&a, "t");
    let tb = create(&b, "t");
    ta.write(&rows(0..10)).expect("write a");
    tb.write(&rows(50..60)).expect("write b");
    b.put("kb", "vb").expect("put b");
    (fs_a, a, ta, fs_b, b, tb)
}

/// Adds `f`'s entries to a batch and writes it to `db`: one of the two must
/// refuse with `Error::InvalidArgument`.
fn assert_foreign_refused(db: &Db, what: &str, f: impl FnOnce(&mut WriteBatch) -> Result<(), Error>) {
    let mut wb = WriteBatch::new();
    match f(&mut wb) {
        Err(Error::InvalidArgument(_)) => return,
        Err(e) => panic!("{what}: building the batch failed with {e}, expected InvalidArgument"),
        Ok(()) => {}
    }
    match db.write(wb) {
        Err(Error::InvalidArgument(_)) => {}
        Err(e) => panic!("{what}: expected InvalidArgument, got {e}"),
        Ok(()) => panic!("{what}: a table handle of another database was written to this one"),
    }
}

#[test]
fn table_of_another_database_is_refused() {
    let (fs_a, a, ta, fs_b, b, tb) = twin_databases();
    let ids_collide = format!("{ta:?}").split("id:").nth(1) == format!("{tb:?}").split("id:").nth(1);
    eprintln!("tree ids collide: {ids_collide} ({ta:?} / {tb:?})");
    let want_b = state(&b);
    assert_foreign_refused(&b, "put_table(a's table) written to b", |wb| wb.put_table(&ta, &rows(100..105)));
    assert_foreign_refused(&b, "delete_table(a's table) written to b", |wb| {
        wb.delete_table(&ta, &keys(50..55))
    });
    assert_foreign_refused(&b, "b's rows, then a's, written to b", |wb| {
        wb.put_table(&tb, &rows(200..205))?;
        wb.put_table(&ta, &rows(205..210))
    });
    // The same handle still writes to its own database.
    let mut wb = WriteBatch::new();
    wb.put_table(&ta, &rows(300..302)).expect("put_table");
    a.write(wb).expect("a's own table");
    assert_eq!(state(&b), want_b, "b changed");
    let want_a = state(&a);
    drop((ta, tb));
    a.close().expect("close a");
    b.close().expect("close b");
    assert_reopens_to(&fs_b, &want_b, "b");
    assert_reopens_to(&fs_a, &want_a, "a");
}

/// A snapshot, a transaction's overlay or a transaction of another
/// database: seqnos and tree ids are per database, so each would read this
/// one at a moment it never had, or merge the other's rows into it. Every
/// read that takes one refuses it, and the same reads with this database's
/// own handles still work.
#[test]
fn snapshots_and_overlays_of_another_database_are_refused() {
    let (_fs_a, a, ta, _fs_b, b, tb) = twin_databases();
    ta.create_index("by_name", &["name"], basalt::IndexOptions::default()).expect("index a");
    tb.create_index("by_name", &["name"], basalt::IndexOptions::default()).expect("index b");
    let ka = a.create_keyspace("ks").expect("keyspace a");
    let kb = b.create_keyspace("ks").expect("keyspace b");
    kb.put("k", "b's").expect("put b");
    let snap_a = a.snapshot();
    let read = basalt::ReadOptions::default().snapshot(Some(&snap_a));
    let key = [KeyValue::I64(50)];
    let name = [Some(KeyValue::Str("n50"))];
    let all: basalt::KeyValueRange<'_> = (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded);
    assert_invalid(b.get_opt("kb", &read), "Db::get_opt with a's snapshot");
    assert_invalid(kb.get_opt("k", &read), "Keyspace::get_opt with a's snapshot");
    assert_invalid(tb.get_opt(&key, &read), "Table::get_opt with a's snapshot");
    assert_invalid(tb.scan(ScanOptions::default().snapshot(Some(&snap_a))).map(drop), "Table::scan");
    let lookup = basalt::LookupOptions::default().snapshot(Some(&snap_a));
    assert_invalid(tb.lookup("by_name", basalt::IndexPredicate::Eq(name.to_vec()), lookup), "Table::lookup");
    let count = tb.count_opt("by_name", basalt::IndexPredicate::Eq(name.to_vec()), Some(&snap_a));
    assert_invalid(count, "Table::count_opt");
    assert_invalid(tb.estimate_opt(Some(&snap_a)), "Table::estimate_opt");
    assert_invalid(tb.count_rows(&all, Some(&snap_a)), "Table::count_rows");
    let first = |mut it: basalt::DbIterator| it.next().transpose().map(|kv| kv.map(|(k, _)| k));
    assert_invalid(first(b.iter_opt::<&[u8]>(.., Direction::Forward, &read)), "Db::iter_opt");
    assert_invalid(first(kb.iter_opt::<&[u8]>(.., Direction::Forward, &read)), "Keyspace::iter_opt");

    // A transaction of a: its overlay of a's table, or one asked for b's
    // table, merged into a scan of b's table; b's table and keyspace in a's
    // transaction.
    let mut tx = a.transaction();
    tx.put_table(&ta, &rows(500..501)).expect("put");
    for (overlay, what) in
        [(tx.overlay(&ta), "a's overlay of a's table"), (tx.overlay(&tb), "a's overlay of b's table")]
    {
        assert_invalid(tb.scan(ScanOptions::default().overlay(Some(overlay))).map(drop), what);
    }
    assert_invalid(tx.get_table(&tb, &key), "Transaction::get_table of b's table");
    assert_invalid(tx.get_keyspace(&kb, "k"), "Transaction::get_keyspace of b's keyspace");
    assert_invalid(tx.put_table(&tb, &rows(600..601)), "Transaction::put_table of b's table");

    // The database's own handles still read.
    assert!(ka.get_opt("k", &read).expect("a's snapshot in a").is_none());
    assert_eq!(ta.get_opt(&[KeyValue::I64(5)], &read).expect("a's snapshot").map(|r| r.num_rows()), Some(1));
    let own = ta.scan(ScanOptions::default().snapshot(Some(tx.snapshot())).overlay(Some(tx.overlay(&ta))));
    let rows_seen: usize = own.expect("scan").map(|b| b.expect("batch").num_rows()).sum();
    assert_eq!(rows_seen, 11, "a's ten rows and the transaction's own");
}

/// A table of another schema with the same tree id: its rows would be
/// decoded with the wrong layout.
#[test]
fn table_of_another_database_with_another_schema_is_refused() {
    let (fs_a, fs_b) = (MemFs::new(), MemFs::new());
    let (a, b) = (open(&fs_a), open(&fs_b));
    let other = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Utf8, false),
        Field::new("x", DataType::Int32, true),
    ]));
    let ta = a.create_table("t", other.clone(), &["k"], TableOptions::default()).expect("create a");
    let tb = create(&b, "t");
    tb.write(&rows(0..20)).expect("write b");
    let want = state(&b);
    let batch = RecordBatch::try_new(
        other,
        vec![Arc::new(StringArray::from(vec!["p", "q"])), Arc::new(Int32Array::from(vec![1, 2]))],
    )
    .expect("batch");
    assert_foreign_refused(&b, "a's table (other schema) written to b", |wb| wb.put_table(&ta, &batch));
    b.flush().expect("flush b");
    assert_eq!(state(&b), want, "b changed");
    drop((ta, tb));
    b.close().expect("close b");
    assert_reopens_to(&fs_b, &want, "b");
}

fn assert_busy(result: Result<(), Error>, what: &str) {
    match result {
        Err(Error::Busy(_)) => {}
        other => panic!("drop_table with {what} alive: expected Error::Busy, got {other:?}"),
    }
}

fn assert_invalid<T: std::fmt::Debug>(result: Result<T, Error>, what: &str) {
    match result {
        Err(Error::InvalidArgument(_)) => {}
        Err(e) => panic!("{what}: expected Error::InvalidArgument, got {e}"),
        Ok(v) => panic!("{what}: expected Error::InvalidArgument, got Ok({})", show(&v)),
    }
}

/// `drop_table` refuses while a handle, a clone, a handle looked up again
/// by name, or a scan of the table lives, and changes nothing then.
#[test]
fn drop_table_refuses_while_the_table_is_in_use() {
    let fs = MemFs::new();
    let db = open(&fs);
    let t = create(&db, "t");
    t.write(&rows(0..50)).expect("write");
    db.flush().expect("flush");
    t.write(&rows(50..60)).expect("write");
    let want = state(&db);
    let clone = t.clone();
    let looked_up = db.table("t").expect("lookup by name");
    assert_busy(db.drop_table("t"), "three handles");
    drop(t);
    assert_busy(db.drop_table("t"), "a clone and a looked-up handle");
    drop(clone);
    assert_busy(db.drop_table("t"), "the looked-up handle");
    let scan = looked_up.scan(ScanOptions::default()).expect("scan");
    drop(looked_up);
    assert_busy(db.drop_table("t"), "a scan");
    assert_eq!(state(&db), want, "a refused drop changed the database");
    let scanned: Vec<RecordBatch> = scan.map(|b| b.expect("scan batch")).collect();
    let scanned = arrow_select::concat::concat_batches(&schema(), &scanned).expect("concat");
    assert_eq!(scanned, want.rows["t"], "the scan that kept the table busy");
    db.drop_table("t").expect("drop with nothing in use");
    assert_eq!(db.tables(), vec!["default".to_string()]);
    assert_invalid(db.table("t"), "lookup of a dropped table");
    assert_invalid(db.drop_table("t"), "second drop");
    let want = state(&db);
    db.close().expect("close");
    assert_reopens_to(&fs, &want, "after the drop");
}

fn other_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Utf8, false),
        Field::new("x", DataType::Int32, true),
    ]))
}

/// A write batch built for a table that was then dropped (and perhaps
/// re-created under its name, with the same or another schema) is refused,
/// and never lands in the new table, not even through WAL replay.
#[test]
fn batch_for_a_dropped_table_never_lands() {
    for same_schema in [true, false] {
        let fs = MemFs::new();
        let db = open(&fs);
        let t = create(&db, "t");
        t.write(&rows(0..10)).expect("write");
        let mut put = WriteBatch::new();
        put.put_table(&t, &rows(100..110)).expect("put_table");
        let mut del = WriteBatch::new();
        del.delete_table(&t, &keys(0..5)).expect("delete_table");
        drop(t);
        db.drop_table("t").expect("drop");
        let want = state(&db);
        assert_invalid(db.write(put.clone()), "rows for a dropped table");
        assert_invalid(db.write(del.clone()), "deletes for a dropped table");
        assert_eq!(state(&db), want, "a refused write changed the database");
        let t2 = if same_schema {
            let t2 = create(&db, "t");
            t2.write(&rows(500..505)).expect("write the new table");
            t2
        } else {
            db.create_table("t", other_schema(), &["k"], TableOptions::default()).expect("re-create")
        };
        let want = state(&db);
        assert_invalid(db.write(put), "rows for the dropped table, after its name was re-created");
        assert_invalid(db.write(del), "deletes for the dropped table, after its name was re-created");
        db.flush().expect("flush");
        assert_eq!(state(&db), want, "same schema: {same_schema}");
        drop(t2);
        db.close().expect("close");
        assert_reopens_to(&fs, &want, &format!("re-created table, same schema: {same_schema}"));
    }
}

fn tag_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("tag", DataType::Utf8, false),
    ]))
}

fn tagged(ids: &[i64], tag: &str) -> RecordBatch {
    let cols: Vec<ArrayRef> =
        vec![Arc::new(Int64Array::from(ids.to_vec())), Arc::new(StringArray::from(vec![tag; ids.len()]))];
    RecordBatch::try_new(tag_schema(), cols).expect("tagged rows")
}

fn tags_of(batch: &RecordBatch) -> Vec<(i64, String)> {
    let ids = batch.column(0).as_primitive::<Int64Type>();
    let tags = batch.column(1).as_string::<i32>();
    (0..batch.num_rows()).map(|i| (ids.value(i), tags.value(i).to_string())).collect()
}

fn tagged_rows(t: &Table) -> Result<Vec<(i64, String)>, Error> {
    let mut out = Vec::new();
    for b in t.scan(ScanOptions::default())? {
        out.extend(tags_of(&b?));
    }
    Ok(out)
}

/// Creates and drops tables `ddl0..ddl2` at random; each new table gets
/// rows 0..5 tagged with its name and round. Returns the live tables' tags.
fn ddl_loop(db: &Db, seed: u64, rounds: usize) -> Result<BTreeMap<String, String>, String> {
    let mut rng = rng(seed);
    let mut alive = BTreeMap::new();
    for round in 0..rounds {
        let name = format!("ddl{}", rng.random_range(0..3));
        if let std::collections::btree_map::Entry::Vacant(slot) = alive.entry(name.clone()) {
            let t = db
                .create_table(&name, tag_schema(), &["id"], TableOptions::default())
                .map_err(|e| format!("create_table {name}: {e}"))?;
            let tag = format!("{name}#{round}");
            t.write(&tagged(&[0, 1, 2, 3, 4], &tag)).map_err(|e| format!("write {tag}: {e}"))?;
            slot.insert(tag);
        } else {
            for tries in 0.. {
                match db.drop_table(&name) {
                    Ok(()) => {
                        alive.remove(&name);
                        break;
                    }
                    // The opener holds a handle for a moment; past that,
                    // the table stays.
                    Err(Error::Busy(_)) if tries < 1_000 => std::thread::yield_now(),
                    Err(Error::Busy(_)) => break,
                    Err(e) => return Err(format!("drop_table {name}: {e}")),
                }
            }
        }
        if round % 7 == 0 {
            db.flush().map_err(|e| format!("flush: {e}"))?;
        }
    }
    Ok(alive)
}

/// Looks tables up by name while they come and go, writes through the
/// handle and reads back: a handle only ever shows its own table's rows.
/// Returns the acknowledged writes as (tag, id).
fn opener_loop(db: &Db, stop: &AtomicBool, seed: u64) -> Result<Vec<(String, i64)>, String> {
    let mut rng = rng(seed);
    let mut acked = Vec::new();
    for n in 0.. {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let name = format!("ddl{}", rng.random_range(0..3));
        let t = match db.table(&name) {
            Ok(t) => t,
            Err(Error::InvalidArgument(_)) => continue,
            Err(e) => return Err(format!("table({name}): {e}")),
        };
        let tag = match t.get(&[KeyValue::I64(0)]) {
            Ok(Some(row)) => tags_of(&row)[0].1.clone(),
            Ok(None) | Err(Error::InvalidArgument(_)) => continue,
            Err(e) => return Err(format!("get through a handle of {name}: {e}")),
        };
        if t.name() != name || !tag.starts_with(&format!("{name}#")) {
            return Err(format!(
                "handle looked up as {name} is named {} and holds rows tagged {tag}",
                t.name()
            ));
        }
        let id = 100 + n;
        match t.write(&tagged(&[id], &tag)) {
            Ok(()) => acked.push((tag.clone(), id)),
            Err(Error::InvalidArgument(_)) => {}
            Err(e) => return Err(format!("write through a handle of {name}: {e}")),
        }
        match tagged_rows(&t) {
            Ok(got) if got.iter().all(|(_, g)| *g == tag) => {}
            Ok(got) => return Err(format!("a handle of {tag} shows rows of other tables: {got:?}")),
            Err(Error::InvalidArgument(_)) => {}
            Err(e) => return Err(format!("scan through a handle of {name}: {e}")),
        }
    }
    Ok(acked)
}

/// Writes rows `0..n` to `stable` and keys `kv0..` one at a time, reading
/// some back.
fn writer_loop(db: &Db, stable: &Table, n: i64) -> Result<(), String> {
    for i in 0..n {
        stable.write(&tagged(&[i], "stable")).map_err(|e| format!("write stable {i}: {e}"))?;
        db.put(format!("kv{i:05}"), i.to_le_bytes()).map_err(|e| format!("put kv{i}: {e}"))?;
        if i % 16 == 0 {
            let row = stable.get(&[KeyValue::I64(i)]).map_err(|e| format!("get stable {i}: {e}"))?;
            if row.as_ref().map(tags_of) != Some(vec![(i, "stable".to_string())]) {
                return Err(format!("stable row {i} read back as {row:?}"));
            }
        }
    }
    Ok(())
}

/// Scans `stable` and the key-value store until stopped: each scan sees a
/// prefix of the writer's rows, never shorter than the scan before.
fn scanner_loop(db: &Db, stable: &Table, stop: &AtomicBool) -> Result<(), String> {
    let mut last = 0;
    while !stop.load(Ordering::Relaxed) {
        let got = tagged_rows(stable).map_err(|e| format!("scan stable: {e}"))?;
        let want: Vec<(i64, String)> = (0..got.len() as i64).map(|i| (i, "stable".to_string())).collect();
        if got != want || got.len() < last {
            return Err(format!(
                "scan of stable saw {} rows, not a prefix of the writes (last {last})",
                got.len()
            ));
        }
        last = got.len();
        for (i, kv) in db.prefix("kv").enumerate() {
            let (k, _) = kv.map_err(|e| format!("iterate kv: {e}"))?;
            if k.as_ref() != format!("kv{i:05}").as_bytes() {
                return Err(format!("key-value scan: key {i} is {k:?}"));
            }
        }
    }
    Ok(())
}

fn concurrent_ddl_case(seed: u64) {
    const ROWS: i64 = 600;
    let fs = MemFs::new();
    let db = Arc::new(open(&fs));
    let stable = db.create_table("stable", tag_schema(), &["id"], TableOptions::default()).expect("create");
    let stop = Arc::new(AtomicBool::new(false));
    let (d, s1) = (db.clone(), stop.clone());
    let opener = spawn_limited(move || opener_loop(&d, &s1, seed ^ 1));
    let (d, s1, t1) = (db.clone(), stop.clone(), stable.clone());
    let scanner = spawn_limited(move || scanner_loop(&d, &t1, &s1));
    let (d, t1) = (db.clone(), stable.clone());
    let writer = spawn_limited(move || writer_loop(&d, &t1, ROWS));
    let d = db.clone();
    let ddl = spawn_limited(move || ddl_loop(&d, seed, 60));
    let deadline = Instant::now() + Duration::from_secs(30);
    let alive = match ddl.wait_until(deadline) {
        Limited::Done(Ok(alive)) => alive,
        other => panic!("DDL thread: {other:?}"),
    };
    let written = writer.wait_until(deadline);
    stop.store(true, Ordering::Relaxed);
    assert!(matches!(written, Limited::Done(Ok(()))), "writer: {written:?}");
    let scans = scanner.wait_until(deadline);
    assert!(matches!(scans, Limited::Done(Ok(()))), "scanner: {scans:?}");
    let acked = match opener.wait_until(deadline) {
        Limited::Done(Ok(acked)) => acked,
        other => panic!("opener: {other:?}"),
    };
    drop(stable);
    let db = Arc::into_inner(db).expect("every thread let go of the database");
    db.close().expect("close");
    check_after_ddl(&fs, &alive, &acked, ROWS);
}

/// The reopened database holds exactly the live tables and their
/// acknowledged rows, the stable table and the key-value store.
fn check_after_ddl(fs: &MemFs, alive: &BTreeMap<String, String>, acked: &[(String, i64)], rows: i64) {
    let db = open(fs);
    let mut want_tables: Vec<String> = ["default", "stable"].iter().map(ToString::to_string).collect();
    want_tables.extend(alive.keys().cloned());
    want_tables.sort();
    let mut got_tables = db.tables();
    got_tables.sort();
    assert_eq!(got_tables, want_tables, "tables after reopen");
    let stable = tagged_rows(&db.table("stable").expect("stable")).expect("scan stable");
    assert_eq!(stable, (0..rows).map(|i| (i, "stable".to_string())).collect::<Vec<_>>(), "stable table");
    let kv: Model = (0..rows).map(|i| (format!("kv{i:05}").into_bytes(), i.to_le_bytes().to_vec())).collect();
    assert_eq!(common::contents(&db), kv, "key-value store");
    for (name, tag) in alive {
        let mut want: Vec<(i64, String)> = (0..5).map(|i| (i, tag.clone())).collect();
        want.extend(acked.iter().filter(|(t, _)| t == tag).map(|(t, id)| (*id, t.clone())));
        want.sort();
        let got = tagged_rows(&db.table(name).expect("live table")).expect("scan");
        assert_eq!(got, want, "table {name} ({tag})");
    }
    db.close().expect("close");
}

/// DDL on one thread (create, write, drop, flush) while others look the
/// tables up and use them, write a stable table and the key-value store,
/// and scan: no panic, no hang, no row of one table seen through another,
/// and the reopened database holds exactly what was acknowledged.
#[test]
fn concurrent_ddl_with_writes_and_scans() {
    run_seeded("concurrent_ddl_with_writes_and_scans", 3, concurrent_ddl_case);
}

/// What a call must do with a name or schema.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Want {
    Refused,
    Accepted,
    /// Refused with `InvalidArgument` or accepted and kept, either way.
    Either,
}

/// `create_table` with `name`: a refusal is `InvalidArgument` and changes
/// nothing (no file touched); an acceptance gives a working table. Returns
/// whether it was accepted.
fn try_create(fs: &MemFs, db: &Db, name: &str, want: Want) -> bool {
    let before = state(db);
    let ops = fs.mutating_ops();
    let label =
        format!("create_table({:?}, {} bytes)", name.chars().take(40).collect::<String>(), name.len());
    match db.create_table(name, schema(), &["id"], TableOptions::default()) {
        Ok(t) if want != Want::Refused => {
            assert_eq!(t.name(), name, "{label}: the handle's name");
            t.write(&rows(0..2)).expect("write to the new table");
            true
        }
        Ok(_) => panic!("{label}: accepted, must be refused"),
        Err(Error::InvalidArgument(_)) if want != Want::Accepted => {
            assert_eq!(state(db), before, "{label}: refused but changed the database");
            assert_eq!(fs.mutating_ops(), ops, "{label}: refused but wrote files");
            false
        }
        Err(e) => panic!("{label}: expected {want:?}, got {e}"),
    }
}

/// Table names: empty, at and past 255 bytes (also in the middle of a
/// character), taken, "default" in every spelling, bytes that look like
/// paths, files or control characters. Accepted names survive a reopen.
#[test]
fn table_names() {
    let fs = MemFs::new();
    let db = open(&fs);
    create(&db, "base").write(&rows(0..3)).expect("write base");
    db.put("k", "v").expect("put");
    let cases: Vec<(String, Want)> = vec![
        (String::new(), Want::Refused),
        ("a".repeat(256), Want::Refused),
        ("a".repeat(255), Want::Accepted),
        (format!("{}é", "a".repeat(254)), Want::Refused),
        (format!("{}é", "a".repeat(253)), Want::Accepted),
        ("default".into(), Want::Refused),
        ("base".into(), Want::Refused),
        ("Default".into(), Want::Accepted),
        ("default ".into(), Want::Accepted),
        ("🦀".into(), Want::Accepted),
        ("\u{FFFD}".into(), Want::Accepted),
        ("CURRENT".into(), Want::Accepted),
        ("LOCK".into(), Want::Accepted),
        ("MANIFEST-000001".into(), Want::Accepted),
        ("000007.sst".into(), Want::Accepted),
        ("../x".into(), Want::Accepted),
        ("/".into(), Want::Accepted),
        (" ".into(), Want::Either),
        ("\0".into(), Want::Either),
        ("a\0b".into(), Want::Either),
        ("\n".into(), Want::Either),
        ("\u{202E}".into(), Want::Either),
    ];
    let mut accepted = Vec::new();
    for (name, want) in &cases {
        if try_create(&fs, &db, name, *want) {
            accepted.push(name.clone());
        }
    }
    let want = state(&db);
    let long = "a".repeat(256);
    for name in ["default", "", "missing", long.as_str()] {
        assert_invalid(db.drop_table(name), &format!("drop_table({} bytes)", name.len()));
    }
    for name in ["", "missing", long.as_str()] {
        assert_invalid(db.table(name), &format!("table({} bytes)", name.len()));
    }
    assert_eq!(state(&db), want, "refused drops changed the database");
    db.close().expect("close");
    assert_reopens_to(&fs, &want, "accepted names");
    let db = open(&fs);
    for name in &accepted {
        db.drop_table(name).unwrap_or_else(|e| panic!("drop_table({name:?}): {e}"));
    }
    let mut tables = db.tables();
    tables.sort();
    assert_eq!(tables, vec!["base".to_string(), "default".to_string()]);
    db.close().expect("close");
}

fn fields_schema(fields: Vec<Field>) -> SchemaRef {
    Arc::new(Schema::new(fields))
}

/// A schema with one non-null column `k` of `data_type` as its key.
fn keyed_by(data_type: DataType) -> SchemaRef {
    fields_schema(vec![Field::new("k", data_type, false), Field::new("v", DataType::Int64, true)])
}

/// A schema with an `id` key and one column `c` of `data_type`.
fn with_column(data_type: DataType) -> SchemaRef {
    fields_schema(vec![Field::new("id", DataType::Int64, false), Field::new("c", data_type, true)])
}

fn item(data_type: DataType) -> Arc<Field> {
    Arc::new(Field::new("item", data_type, true))
}

/// Types no table column may have.
fn unsupported_types() -> Vec<DataType> {
    use arrow_schema::{IntervalUnit, TimeUnit};
    vec![
        DataType::Null,
        DataType::Float16,
        DataType::FixedSizeBinary(4),
        DataType::Utf8View,
        DataType::BinaryView,
        DataType::Decimal256(40, 2),
        DataType::Duration(TimeUnit::Second),
        DataType::Time64(TimeUnit::Nanosecond),
        DataType::Interval(IntervalUnit::DayTime),
        DataType::List(item(DataType::Int32)),
        DataType::LargeList(item(DataType::Int32)),
        DataType::Struct(Fields::from(vec![Field::new("a", DataType::Int32, true)])),
        DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
    ]
}

const BIG_BYTES: usize = 17 << 20;

/// Schemas and keys `create_table` must refuse, each with its reason.
fn refused_schemas() -> Vec<(String, SchemaRef, Vec<String>)> {
    let key = |k: &[&str]| k.iter().map(ToString::to_string).collect::<Vec<_>>();
    let id = || Field::new("id", DataType::Int64, false);
    let mut cases = vec![
        ("key column not in the schema".into(), schema(), key(&["nope"])),
        ("empty key".into(), schema(), key(&[])),
        ("no columns".into(), fields_schema(vec![]), key(&[])),
        ("key column listed twice".into(), schema(), key(&["id", "id"])),
        (
            "duplicate column names".into(),
            fields_schema(vec![
                id(),
                Field::new("v", DataType::Utf8, true),
                Field::new("v", DataType::Int32, true),
            ]),
            key(&["id"]),
        ),
        (
            "a column named like the key".into(),
            fields_schema(vec![id(), Field::new("id", DataType::Utf8, true)]),
            key(&["id"]),
        ),
        ("Decimal128 key".into(), keyed_by(DataType::Decimal128(10, 2)), key(&["k"])),
    ];
    for t in unsupported_types() {
        cases.push((format!("{t} key"), keyed_by(t.clone()), key(&["k"])));
        cases.push((format!("{t} column"), with_column(t), key(&["id"])));
    }
    let mut wide = vec![id()];
    wide.extend((0..1000).map(|i| Field::new(format!("c{i}"), DataType::Int32, true)));
    cases.push(("1001 columns".into(), fields_schema(wide), key(&["id"])));
    let big = HashMap::from([("big".to_string(), "x".repeat(BIG_BYTES))]);
    cases.push((
        "17 MiB of schema metadata".into(),
        Arc::new(Schema::new(vec![id()]).with_metadata(big.clone())),
        key(&["id"]),
    ));
    cases.push((
        "17 MiB of field metadata".into(),
        fields_schema(vec![id(), Field::new("v", DataType::Int32, true).with_metadata(big)]),
        key(&["id"]),
    ));
    cases.push((
        "a 17 MiB column name".into(),
        fields_schema(vec![id(), Field::new("x".repeat(BIG_BYTES), DataType::Int32, true)]),
        key(&["id"]),
    ));
    cases
}

/// Each schema `create_table` must refuse gets `InvalidArgument`, leaves
/// the catalog, the rows and the files as they were, and the database
/// reopens to the same state.
#[test]
fn bad_schemas_are_refused_and_change_nothing() {
    let fs = MemFs::new();
    let db = open(&fs);
    create(&db, "t").write(&rows(0..20)).expect("write");
    db.put("k", "v").expect("put");
    db.flush().expect("flush");
    db.wait_for_background_work().expect("settle");
    let want = state(&db);
    let mut failures = Vec::new();
    for (what, schema, key) in refused_schemas() {
        let key: Vec<&str> = key.iter().map(String::as_str).collect();
        let ops = fs.mutating_ops();
        match db.create_table("bad", schema, &key, TableOptions::default()) {
            Err(Error::InvalidArgument(_)) => {}
            Err(e) => failures.push(format!("{what}: expected InvalidArgument, got {e}")),
            Ok(_) => {
                failures.push(format!("{what}: accepted"));
                break;
            }
        }
        if fs.mutating_ops() != ops {
            failures.push(format!("{what}: refused but wrote files"));
        }
        if state(&db) != want {
            failures.push(format!("{what}: refused but changed the database"));
        }
    }
    db.close().expect("close");
    let fs2 = fs.clone();
    match run_limited(LIMIT, move || Db::open(DB, options(&fs2)).map(|db| (state(&db), db.close()))) {
        Limited::Done(Ok((got, Ok(())))) if got == want => {}
        Limited::Done(Ok((got, closed))) => {
            failures.push(format!("after reopen: tables {:?}, close {closed:?}", got.tables));
        }
        other => failures.push(format!("reopen: {}", show(&other))),
    }
    assert!(failures.is_empty(), "bad schemas:\n  {}", failures.join("\n  "));
}

/// Found by `bad_schemas_are_refused_and_change_nothing`, minimized: a table
/// of 1001 columns is accepted, and cannot be read once flushed.
#[test]
fn a_table_of_1001_columns_is_refused() {
    let fs = MemFs::new();
    let db = open(&fs);
    let mut fields = vec![Field::new("id", DataType::Int64, false)];
    fields.extend((0..1000).map(|i| Field::new(format!("c{i}"), DataType::Int32, true)));
    let created = db.create_table("wide", fields_schema(fields), &["id"], TableOptions::default());
    assert!(matches!(created, Err(Error::InvalidArgument(_))), "1001 columns: {created:?}");
}

/// Found by `bad_schemas_are_refused_and_change_nothing`, minimized: 17 MiB
/// of schema metadata is accepted, and the database no longer reopens.
#[test]
fn seventeen_mib_of_schema_metadata_is_refused() {
    let fs = MemFs::new();
    let db = open(&fs);
    let big = HashMap::from([("big".to_string(), "x".repeat(BIG_BYTES))]);
    let s = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]).with_metadata(big));
    let created = db.create_table("big", s, &["id"], TableOptions::default()).map(|_| ());
    db.close().expect("close");
    let reopened = Db::open(DB, options(&fs)).map(|_| ());
    assert!(
        matches!(created, Err(Error::InvalidArgument(_))) && reopened.is_ok(),
        "create_table: {created:?}, reopen: {reopened:?}"
    );
}

/// A wide table well inside any limit works through flush and reopen.
#[test]
fn a_table_of_100_columns_round_trips() {
    let fs = MemFs::new();
    let db = open(&fs);
    let mut fields = vec![Field::new("id", DataType::Int64, false)];
    fields.extend((0..99).map(|i| Field::new(format!("c{i}"), DataType::Int32, true)));
    let s = fields_schema(fields);
    let t = db.create_table("wide", s.clone(), &["id"], TableOptions::default()).expect("create");
    let mut cols: Vec<ArrayRef> = vec![Arc::new(Int64Array::from((0..50).collect::<Vec<i64>>()))];
    cols.extend(
        (0..99).map(|c| Arc::new(Int32Array::from((0..50).map(|r| r * c).collect::<Vec<_>>())) as ArrayRef),
    );
    let batch = RecordBatch::try_new(s, cols).expect("batch");
    t.write(&batch).expect("write");
    db.flush().expect("flush");
    assert_eq!(all_rows(&t), batch);
    drop(t);
    let want = state(&db);
    db.close().expect("close");
    assert_reopens_to(&fs, &want, "wide table");
}

/// Batches that do not fit the table, and the expected error of each.
fn misfit_batches() -> Vec<(&'static str, RecordBatch)> {
    let ids: ArrayRef = Arc::new(Int64Array::from(vec![1, 2]));
    let names: ArrayRef = Arc::new(StringArray::from(vec!["a", "b"]));
    let scores: ArrayRef = Arc::new(Float64Array::from(vec![1.0, 2.0]));
    let batch = |fields: Vec<Field>, cols: Vec<ArrayRef>| {
        RecordBatch::try_new(fields_schema(fields), cols).expect("batch")
    };
    let f = |n: &str, t: DataType, null: bool| Field::new(n, t, null);
    vec![
        (
            "renamed column",
            batch(
                vec![
                    f("ID", DataType::Int64, false),
                    f("name", DataType::Utf8, true),
                    f("score", DataType::Float64, false),
                ],
                vec![ids.clone(), names.clone(), scores.clone()],
            ),
        ),
        (
            "missing column",
            batch(
                vec![f("id", DataType::Int64, false), f("name", DataType::Utf8, true)],
                vec![ids.clone(), names.clone()],
            ),
        ),
        (
            "extra column",
            batch(
                vec![
                    f("id", DataType::Int64, false),
                    f("name", DataType::Utf8, true),
                    f("score", DataType::Float64, false),
                    f("x", DataType::Int64, true),
                ],
                vec![ids.clone(), names.clone(), scores.clone(), ids.clone()],
            ),
        ),
        (
            "reordered columns",
            batch(
                vec![
                    f("name", DataType::Utf8, true),
                    f("id", DataType::Int64, false),
                    f("score", DataType::Float64, false),
                ],
                vec![names.clone(), ids.clone(), scores.clone()],
            ),
        ),
        (
            "key of another type",
            batch(
                vec![
                    f("id", DataType::Int32, false),
                    f("name", DataType::Utf8, true),
                    f("score", DataType::Float64, false),
                ],
                vec![Arc::new(Int32Array::from(vec![1, 2])), names.clone(), scores.clone()],
            ),
        ),
        (
            "null in a non-nullable column",
            batch(
                vec![
                    f("id", DataType::Int64, false),
                    f("name", DataType::Utf8, true),
                    f("score", DataType::Float64, true),
                ],
                vec![ids.clone(), names.clone(), Arc::new(Float64Array::from(vec![Some(1.0), None]))],
            ),
        ),
        (
            "null key",
            batch(
                vec![
                    f("id", DataType::Int64, true),
                    f("name", DataType::Utf8, true),
                    f("score", DataType::Float64, false),
                ],
                vec![Arc::new(Int64Array::from(vec![Some(1), None])), names.clone(), scores.clone()],
            ),
        ),
        (
            "all-null key",
            batch(
                vec![
                    f("id", DataType::Int64, true),
                    f("name", DataType::Utf8, true),
                    f("score", DataType::Float64, false),
                ],
                vec![new_null_array(&DataType::Int64, 2), names, scores],
            ),
        ),
    ]
}

fn assert_refused_batch(result: Result<(), Error>, what: &str) {
    match result {
        Err(Error::SchemaMismatch(_) | Error::InvalidArgument(_)) => {}
        other => panic!("{what}: expected SchemaMismatch or InvalidArgument, got {other:?}"),
    }
}

/// Batches of the wrong shape, null keys, bad key tuples, projections,
/// ranges and filters are refused with typed errors; a refused `put_table`
/// leaves its write batch as it was, and nothing reaches the database.
#[test]
fn misfit_batches_and_keys_are_refused() {
    let fs = MemFs::new();
    let db = open(&fs);
    let t = create(&db, "t");
    t.write(&rows(0..10)).expect("write");
    let want = state(&db);
    let mut wb = WriteBatch::new();
    wb.put_table(&t, &rows(20..22)).expect("put_table");
    let (len, bytes) = (wb.len(), wb.encoded_len());
    for (what, batch) in misfit_batches() {
        assert_refused_batch(wb.put_table(&t, &batch), &format!("put_table: {what}"));
        assert_eq!((wb.len(), wb.encoded_len()), (len, bytes), "put_table: {what}: the batch changed");
        assert_refused_batch(wb.delete_table(&t, &batch), &format!("delete_table: {what}"));
        assert_eq!((wb.len(), wb.encoded_len()), (len, bytes), "delete_table: {what}: the batch changed");
        assert_refused_batch(t.write(&batch), &format!("Table::write: {what}"));
        assert_refused_batch(t.delete(&batch), &format!("Table::delete: {what}"));
        assert_refused_batch(t.get_many(&batch).map(|_| ()), &format!("Table::get_many: {what}"));
    }
    let null_keys = RecordBatch::try_new(
        fields_schema(vec![Field::new("id", DataType::Int64, true)]),
        vec![Arc::new(Int64Array::from(vec![Some(1), None]))],
    )
    .expect("null keys");
    assert_refused_batch(t.delete(&null_keys), "Table::delete of a null key");
    assert_refused_batch(t.get(&[]).map(|_| ()), "get with no key value");
    assert_refused_batch(t.get(&[KeyValue::I64(1), KeyValue::I64(2)]).map(|_| ()), "get with two key values");
    assert_refused_batch(t.get(&[KeyValue::Str("1")]).map(|_| ()), "get with a string for an Int64 key");
    let projection = ScanOptions::default().projection(Some(vec!["nope".into()]));
    assert_refused_batch(t.scan(projection).map(|_| ()), "scan of an unknown column");
    let range =
        (std::ops::Bound::Included(vec![KeyValue::I64(1), KeyValue::I64(2)]), std::ops::Bound::Unbounded);
    assert_refused_batch(t.scan(ScanOptions::default().range(range)).map(|_| ()), "scan range too long");
    let filter = basalt::Filter::all(vec![basalt::Predicate::new(
        "nope",
        basalt::CmpOp::Eq,
        Arc::new(Int64Array::from(vec![1])),
    )]);
    assert_refused_batch(
        t.scan(ScanOptions::default().filter(Some(filter))).map(|_| ()),
        "filter on an unknown column",
    );
    assert_eq!(state(&db), want, "refused calls changed the database");
    // The empty batch is a no-op, and the batch's valid rows still go in.
    t.write(&rows(0..0)).expect("empty batch");
    db.write(wb).expect("the valid part of the batch");
    let mut want = want;
    want.rows.insert(
        "t".into(),
        arrow_select::concat::concat_batches(&schema(), &[rows(0..10), rows(20..22)]).expect("concat"),
    );
    assert_eq!(state(&db), want);
    drop(t);
    db.close().expect("close");
    assert_reopens_to(&fs, &want, "after refused batches");
}

/// `put_table` documents a null in a key column (never nullable) as a
/// schema mismatch, as a null in any non-nullable column, and the write
/// batch is left unchanged; `delete_table` the same.
#[test]
fn a_null_key_is_a_schema_mismatch_as_documented() {
    let fs = MemFs::new();
    let db = open(&fs);
    let t = create(&db, "t");
    let null_key = misfit_batches().into_iter().find(|(w, _)| *w == "null key").expect("null key case").1;
    let mut wb = WriteBatch::new();
    let got = wb.put_table(&t, &null_key);
    assert!(matches!(got, Err(Error::SchemaMismatch(_))), "put_table with a null key: {got:?}");
    assert!(wb.is_empty(), "a refused put_table changed the batch");
}

/// A table row is held to the same size limits as a key-value pair: its
/// key to `key_bytes_max`, its row to `value_bytes_max`.
#[test]
fn table_rows_over_the_size_limits_are_refused() {
    let fs = MemFs::new();
    let o = options(&fs).key_bytes_max(1 << 10).value_bytes_max(1 << 10);
    let db = Db::open(DB, o.clone()).expect("open");
    let s =
        fields_schema(vec![Field::new("k", DataType::Utf8, false), Field::new("v", DataType::Utf8, true)]);
    let raw = db.create_table("raw", s.clone(), &["k"], TableOptions::default()).expect("create raw");
    let s2 = fields_schema(vec![
        Field::new("k", DataType::Utf8, false),
        Field::new("n", DataType::Int64, false),
        Field::new("v", DataType::Utf8, true),
    ]);
    let composite =
        db.create_table("composite", s2.clone(), &["k", "n"], TableOptions::default()).expect("create");
    let want = state(&db);
    let (long, short) = ("x".repeat(2 << 10), "x".to_string());
    let raw_batch = |k: &str, v: &str| {
        RecordBatch::try_new(
            s.clone(),
            vec![Arc::new(StringArray::from(vec![k])), Arc::new(StringArray::from(vec![v]))],
        )
        .expect("batch")
    };
    let composite_batch = |k: &str, v: &str| {
        let cols: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![k])),
            Arc::new(Int64Array::from(vec![1])),
            Arc::new(StringArray::from(vec![v])),
        ];
        RecordBatch::try_new(s2.clone(), cols).expect("batch")
    };
    assert_invalid(raw.write(&raw_batch(&long, &short)), "a 2 KiB single-column key");
    assert_invalid(raw.write(&raw_batch(&short, &long)), "a 2 KiB row");
    assert_invalid(composite.write(&composite_batch(&long, &short)), "a 2 KiB composite key");
    assert_invalid(composite.write(&composite_batch(&short, &long)), "a 2 KiB row of a composite key");
    assert_invalid(raw.bulk_load([raw_batch(&long, &short)]), "a 2 KiB key, bulk-loaded");
    assert_invalid(raw.bulk_load([raw_batch(&short, &long)]), "a 2 KiB row, bulk-loaded");
    assert_invalid(
        composite.bulk_load([composite_batch(&short, &long)]),
        "a 2 KiB row of a composite key, bulk-loaded",
    );
    assert_eq!(state(&db), want, "refused rows changed the database");
    // Rows over the limit together but not one by one load.
    let keys: Vec<String> = (0..100).map(|i| format!("k{i:03}")).collect();
    let values = vec!["v".repeat(900); 100];
    let under = RecordBatch::try_new(
        s.clone(),
        vec![Arc::new(StringArray::from(keys)), Arc::new(StringArray::from(values))],
    )
    .expect("batch");
    raw.bulk_load([under]).expect("rows each within the limit");
    assert_eq!(
        raw.scan(basalt::ScanOptions::default())
            .expect("scan")
            .map(|b| b.expect("batch").num_rows())
            .sum::<usize>(),
        100
    );
    let want = state(&db);
    drop((raw, composite));
    db.close().expect("close");
    let db = Db::open(DB, o).expect("reopen");
    assert_eq!(state(&db), want);
}
