//! `Db::close` against every public operation in flight, and DDL against
//! DDL of the same names (issue 36; the second outside review's bugs: a
//! compaction outliving close, two drops of one index).
//!
//! The contract: an operation running when `close` is called either
//! completes before `close` returns or fails with `Error::Closed`; nothing
//! in the directory changes after `close` returned (a listing taken then
//! equals one taken after the operation ended); and the directory reopens
//! with every acknowledged write. A DDL race gives the loser a typed error
//! and never stops writes.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use basalt::{Db, Error, IndexOptions, KeyValue, Options, ScanOptions, TableOptions};
use common::limit::within;
use common::{rng, run_seeded};
use rand::Rng;

const LIMIT: Duration = Duration::from_secs(60);

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("x", DataType::Int64, true),
    ]))
}

fn rows(ids: std::ops::Range<i64>, tag: i64) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(ids.clone())) as ArrayRef,
            Arc::new(Int64Array::from_iter_values(ids.map(|i| i * 7 + tag))),
        ],
    )
    .expect("batch")
}

/// Names and sizes of the directory's files.
fn listing(dir: &Path) -> BTreeMap<String, u64> {
    std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry"))
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.metadata().map_or(0, |m| m.len())))
        .collect()
}

#[derive(Debug, Clone, Copy)]
enum Op {
    TableCompact,
    DbCompactRange,
    KeyspaceCompactRange,
    CreateIndex,
    DropIndex,
    BulkLoad,
    Checkpoint,
    Flush,
    WaitForBackgroundWork,
    CreateTable,
    DropTable,
    CreateKeyspace,
    DropKeyspace,
    TableScan,
    KeyValueIterator,
    TableWrites,
    KeyValueWrites,
}

const OPS: [Op; 17] = [
    Op::TableCompact,
    Op::DbCompactRange,
    Op::KeyspaceCompactRange,
    Op::CreateIndex,
    Op::DropIndex,
    Op::BulkLoad,
    Op::Checkpoint,
    Op::Flush,
    Op::WaitForBackgroundWork,
    Op::CreateTable,
    Op::DropTable,
    Op::CreateKeyspace,
    Op::DropKeyspace,
    Op::TableScan,
    Op::KeyValueIterator,
    Op::TableWrites,
    Op::KeyValueWrites,
];

/// Runs `op` once (the write and read ones in a loop, until closed).
fn run(op: Op, db: &Db, scratch: &Path) -> Result<(), Error> {
    let t = db.table("t")?;
    match op {
        Op::TableCompact => t.compact(),
        Op::DbCompactRange => db.compact_range::<&[u8]>(..),
        Op::KeyspaceCompactRange => db.keyspace("ks")?.compact_range::<&[u8]>(..),
        Op::CreateIndex => t.create_index("by_x", &["x"], IndexOptions::default()),
        Op::DropIndex => t.drop_index("old"),
        Op::BulkLoad => {
            drop(t);
            db.table("loaded")?.bulk_load((0..20).map(|i| rows(i * 500..(i + 1) * 500, 3))).map(drop)
        }
        Op::Checkpoint => db.checkpoint(scratch.join("checkpoint")),
        Op::Flush => db.flush(),
        Op::WaitForBackgroundWork => db.wait_for_background_work(),
        Op::CreateTable => db.create_table("new", schema(), &["id"], TableOptions::default()).map(drop),
        Op::DropTable => {
            drop(t);
            db.drop_table("doomed")
        }
        Op::CreateKeyspace => db.create_keyspace("new_ks").map(drop),
        Op::DropKeyspace => db.drop_keyspace("doomed_ks"),
        Op::TableScan => loop {
            for batch in t.scan(ScanOptions::default())? {
                batch?;
            }
        },
        Op::KeyValueIterator => loop {
            for kv in db.iter_all() {
                kv?;
            }
        },
        Op::TableWrites => (0..).try_for_each(|i: i64| t.write(&rows(i * 10..i * 10 + 10, 1))),
        Op::KeyValueWrites => (0..).try_for_each(|i: u64| db.put(format!("w{i:08}"), "v")),
    }
}

/// A database with work for every operation: table rows in L0 files and
/// the memtable, a keyspace with SSTs, an index and a table and keyspace
/// to drop, an empty table to bulk-load into.
fn populate(dir: &Path, opts: &Options) -> Db {
    let db = Db::open(dir, opts.clone()).expect("open");
    let t = db.create_table("t", schema(), &["id"], TableOptions::default()).expect("table");
    for round in 0..4 {
        t.write(&rows(0..3000, round)).expect("rows");
        db.flush().expect("flush");
    }
    t.write(&rows(0..500, 9)).expect("memtable rows");
    t.create_index("old", &["x"], IndexOptions::default()).expect("index");
    db.create_table("doomed", schema(), &["id"], TableOptions::default()).expect("doomed");
    db.create_table("loaded", schema(), &["id"], TableOptions::default()).expect("loaded");
    let ks = db.create_keyspace("ks").expect("keyspace");
    for round in 0..3 {
        for i in 0..2000 {
            ks.put(format!("k{i:06}"), format!("v{round}")).expect("put");
        }
        db.flush().expect("flush");
    }
    db.create_keyspace("doomed_ks").expect("doomed keyspace");
    db.put("kv", "v").expect("put");
    db
}

#[test]
fn every_operation_in_flight_at_close_finishes_or_is_closed_and_leaves_the_directory_alone() {
    run_seeded("close against every operation", 2, |seed| {
        let mut rng = rng(seed);
        for op in OPS {
            let dir = tempfile::tempdir().expect("dir");
            let scratch = tempfile::tempdir().expect("scratch");
            let opts = Options::default().auto_compaction(rng.random_bool(0.5)).memtable_bytes_max(64 << 10);
            let db = Arc::new(populate(dir.path(), &opts));
            let start = Arc::new(Barrier::new(2));
            let worker = {
                let (db, start, scratch) = (db.clone(), start.clone(), scratch.path().to_path_buf());
                std::thread::spawn(move || {
                    start.wait();
                    run(op, &db, &scratch)
                })
            };
            start.wait();
            std::thread::sleep(Duration::from_micros(rng.random_range(0..4000)));
            let closer = db.clone();
            within(&format!("close during {op:?}"), LIMIT, move || closer.close()).expect("close");
            let at_close = listing(dir.path());
            let result =
                within(&format!("{op:?} after close"), LIMIT, move || worker.join().expect("no panic"));
            assert!(
                matches!(result, Ok(()) | Err(Error::Closed(_))),
                "seed {seed}: {op:?} in flight at close ended with {result:?}, neither done nor Closed"
            );
            assert_eq!(
                listing(dir.path()),
                at_close,
                "seed {seed}: {op:?} changed the directory after close"
            );
            drop(db);
            // Every acknowledged write is there, and what the operation did
            // is there whole or not at all.
            let reopened = Db::open(dir.path(), opts).expect("reopen");
            let t = reopened.table("t").expect("table");
            for id in [0, 499, 500, 2999] {
                let row = t.get(&[KeyValue::I64(id)]).expect("get").expect("acknowledged row");
                assert_eq!(row.num_rows(), 1);
            }
            let indexes: Vec<String> = t.indexes().into_iter().map(|i| i.name).collect();
            let created = matches!(op, Op::CreateIndex) && result.is_ok();
            assert_eq!(indexes.contains(&"by_x".to_string()), created, "seed {seed}: {op:?}: {indexes:?}");
            for check in basalt::inspect::check_indexes(&t).expect("index check") {
                assert!(check.consistent, "seed {seed}: {op:?}: {check:?}");
            }
            if matches!(op, Op::BulkLoad) && result.is_ok() {
                let loaded = reopened.table("loaded").expect("loaded");
                assert!(
                    loaded.get(&[KeyValue::I64(9999)]).expect("get").is_some(),
                    "seed {seed}: the load is whole"
                );
            }
            reopened.close().expect("close");
        }
    });
}

/// A DDL call of a race.
type DdlCall = dyn Fn(&Db) -> Result<(), Error> + Send + Sync;

/// Two threads run `a` and `b` at once, `rounds` times; `setup` runs
/// before each round. Each result must be success or a typed refusal,
/// and a write after the round must succeed.
fn race(
    db: &Arc<Db>,
    rounds: usize,
    setup: impl Fn(&Db),
    a: impl Fn(&Db) -> Result<(), Error> + Send + Sync + 'static,
    b: impl Fn(&Db) -> Result<(), Error> + Send + Sync + 'static,
    check: impl Fn(&[Result<(), Error>]),
) {
    let (a, b) = (Arc::new(a), Arc::new(b));
    for round in 0..rounds {
        setup(db);
        let barrier = Arc::new(Barrier::new(2));
        let spawn = |f: Arc<DdlCall>| {
            let (db, barrier) = (db.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                f(&db)
            })
        };
        let ha = spawn(a.clone());
        let hb = spawn(b.clone());
        let results = [ha.join().expect("no panic"), hb.join().expect("no panic")];
        for r in &results {
            assert!(
                matches!(r, Ok(()) | Err(Error::InvalidArgument(_) | Error::Busy(_))),
                "round {round}: a DDL race gave an untyped or fatal error: {results:?}"
            );
        }
        check(&results);
        db.put(format!("after {round}"), "v")
            .unwrap_or_else(|e| panic!("round {round}: writes stopped: {e}"));
    }
}

fn ok_count(results: &[Result<(), Error>]) -> usize {
    results.iter().filter(|r| r.is_ok()).count()
}

#[test]
fn ddl_races_on_one_name_give_the_loser_a_typed_error_and_keep_writes_going() {
    let dir = tempfile::tempdir().expect("dir");
    let db = Arc::new(Db::open(dir.path(), Options::default()).expect("open"));
    let t = db.create_table("t", schema(), &["id"], TableOptions::default()).expect("table");
    t.write(&rows(0..2000, 0)).expect("rows");
    drop(t);
    let index = |db: &Db| db.table("t")?.create_index("by_x", &["x"], IndexOptions::default());
    let drop_index = |db: &Db| db.table("t")?.drop_index("by_x");
    let exactly_one = |r: &[Result<(), Error>]| assert_eq!(ok_count(r), 1, "{r:?}");
    // drop / drop of one index, table and keyspace
    race(&db, 8, |db| drop(index(db)), drop_index, drop_index, exactly_one);
    let make_table = |db: &Db| db.create_table("u", schema(), &["id"], TableOptions::default()).map(drop);
    race(&db, 8, |db| drop(make_table(db)), |db| db.drop_table("u"), |db| db.drop_table("u"), exactly_one);
    let make_ks = |db: &Db| db.create_keyspace("k").map(drop);
    race(&db, 8, |db| drop(make_ks(db)), |db| db.drop_keyspace("k"), |db| db.drop_keyspace("k"), exactly_one);
    // create / create of one name
    race(&db, 8, |db| drop(drop_index(db)), index, index, exactly_one);
    race(&db, 8, |db| drop(db.drop_table("u")), make_table, make_table, exactly_one);
    race(&db, 8, |db| drop(db.drop_keyspace("k")), make_ks, make_ks, exactly_one);
    // drop / create of one name: either order is fine, both may succeed
    race(&db, 8, |_| {}, |db| db.drop_table("u"), make_table, |_| {});
    race(&db, 8, |_| {}, drop_index, index, |_| {});
    // DDL against a bulk load and an index build of the same table
    let load = |db: &Db| {
        let u = db.table("loaded")?;
        u.bulk_load((0..8).map(|i| rows(i * 1000..(i + 1) * 1000, 1))).map(drop)
    };
    let ensure_loaded = |db: &Db| {
        if db.table("loaded").is_err() {
            db.create_table("loaded", schema(), &["id"], TableOptions::default()).expect("table");
        }
    };
    race(&db, 6, ensure_loaded, load, |db| db.drop_table("loaded"), |_| {});
    race(
        &db,
        6,
        |db| {
            let _ = drop_index(db);
        },
        index,
        |db| db.drop_table("t"),
        |_| {},
    );
    db.close().expect("close");
    Db::open(dir.path(), Options::default()).expect("reopen").close().expect("close");
}
