//! `Table::bulk_load` against `Table::write` of the same batches, over
//! RANDOM schemas: two tables of one database get the same earlier rows
//! (spread over memtable, L0 and deeper levels by small memtables and
//! random flushes), then one bulk-loads a set of batches in key order (rows
//! shuffled inside each batch, some keys twice: the later row wins) and
//! the other writes them. Both must read the same through scans and point
//! reads, now, at a snapshot taken before (which must not see the load),
//! after a compaction and after a reopen; a third of the loads come out of
//! key order (overlapping sorted runs, a batch repeated with new values). A
//! batch of another schema, a table with an index and a load on a closed
//! database must fail and change nothing (no rows, no files left behind). I/O
//! faults at every step of a load must leave the old contents or the new,
//! never a mix, after recovery.
//!
//! A failure prints its seed; `BASALT_SEED=<seed>` replays it.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use arrow_array::RecordBatch;
use basalt::testing::MemFs;
use basalt::{Db, Error, IndexOptions, ScanOptions, Snapshot, Table, TableOptions};
use common::scan_rows;
use common::schema_gen::{Cell, Shape, TableSpec, batch_of, rows_of};
use common::table_oracle::OracleKey;
use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

const DIR: &str = "/db";

/// Random rows of `spec`, their keys distinct from one another except for
/// the duplicates asked for.
fn random_rows(spec: &TableSpec, rng: &mut StdRng, n: usize) -> Vec<Vec<Cell>> {
    (0..n).map(|_| spec.random_row(rng)).collect()
}

/// `rows` cut into batches in primary-key order: rows grouped by key,
/// groups sorted, cut into runs of whole groups, each run shuffled.
fn batches_in_key_order(spec: &TableSpec, rng: &mut StdRng, rows: Vec<Vec<Cell>>) -> Vec<RecordBatch> {
    let mut groups: BTreeMap<OracleKey, Vec<Vec<Cell>>> = BTreeMap::new();
    for row in rows {
        groups.entry(OracleKey(spec.key_of(&row))).or_default().push(row);
    }
    let groups: Vec<Vec<Vec<Cell>>> = groups.into_values().collect();
    let mut batches = Vec::new();
    let mut at = 0;
    while at < groups.len() {
        let take = rng.random_range(1..=groups.len() - at);
        // Shuffle the groups' order inside the batch, keeping each key's
        // rows in their order (the later row must win).
        let mut run: Vec<&Vec<Vec<Cell>>> = groups[at..at + take].iter().collect();
        run.shuffle(rng);
        let rows: Vec<Vec<Cell>> = run.into_iter().flatten().cloned().collect();
        batches.push(batch_of(&spec.schema, &rows));
        at += take;
    }
    batches
}

/// `n` random rows in batches in key order.
fn random_batches(spec: &TableSpec, rng: &mut StdRng, n: usize) -> Vec<RecordBatch> {
    let rows = random_rows(spec, rng, n);
    batches_in_key_order(spec, rng, rows)
}

fn write_all(table: &Table, batches: &[RecordBatch]) {
    for b in batches {
        table.write(b).expect("write");
    }
}

fn sst_files(fs: &MemFs) -> Vec<String> {
    let mut names: Vec<String> = fs
        .file_names(Path::new(DIR))
        .into_iter()
        .filter(|n| Path::new(n).extension().is_some_and(|e| e == "sst"))
        .collect();
    names.sort();
    names
}

/// Two tables of one spec in one database.
fn open_pair(fs: &MemFs, rng: &mut StdRng, spec: &TableSpec) -> (Db, Table, Table) {
    let opts = common::small_options(fs, rng);
    let db = Db::open(DIR, opts).expect("open");
    let keys = spec.key_names();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let loaded =
        db.create_table("loaded", spec.schema.clone(), &keys, TableOptions::default()).expect("create");
    let written =
        db.create_table("written", spec.schema.clone(), &keys, TableOptions::default()).expect("create");
    (db, loaded, written)
}

fn assert_same(loaded: &Table, written: &Table, snapshot: Option<&Snapshot>, what: &str) {
    let (a, b) = (scan_rows(loaded, snapshot), scan_rows(written, snapshot));
    assert_eq!(a.len(), b.len(), "{what}: row counts differ");
    assert!(a == b, "{what}: rows differ\nloaded  {a:?}\nwritten {b:?}");
}

#[test]
fn bulk_load_reads_as_the_same_writes() {
    common::run_seeded("bulk_load_reads_as_the_same_writes", 60, |seed| {
        let mut rng = common::rng(seed);
        let spec = TableSpec::random(&mut rng, Shape { columns: (1, 8), key_only: false });
        let fs = MemFs::new();
        let (db, mut loaded, mut written) = open_pair(&fs, &mut rng, &spec);
        // Earlier rows, through every level.
        for _ in 0..rng.random_range(0..4) {
            let before = {
                let n = rng.random_range(1..60);
                random_rows(&spec, &mut rng, n)
            };
            let batch = batch_of(&spec.schema, &before);
            loaded.write(&batch).expect("write");
            written.write(&batch).expect("write");
            if rng.random_bool(0.5) {
                db.flush().expect("flush");
            }
        }
        let snapshot = db.snapshot();
        let old = scan_rows(&loaded, None);
        let rows = {
            let n = rng.random_range(0..300);
            random_rows(&spec, &mut rng, n)
        };
        let mut batches = batches_in_key_order(&spec, &mut rng, rows);
        // A third of the loads out of key order (several sorted runs that
        // overlap; where two share a key, the later batch's row wins), some
        // with a batch repeated with other values.
        let runs = rng.random_bool(1.0 / 3.0);
        if runs {
            batches.shuffle(&mut rng);
            for _ in 0..rng.random_range(1..4) {
                let Some(b) = batches.get(rng.random_range(0..batches.len().max(1))) else { break };
                let again: Vec<Vec<Cell>> = rows_of(b)
                    .iter()
                    .map(|r| {
                        let mut other = spec.random_row(&mut rng);
                        for &k in &spec.key {
                            other[k] = r[k].clone();
                        }
                        other
                    })
                    .collect();
                batches.push(batch_of(&spec.schema, &again));
            }
        }
        let load = loaded.bulk_load(batches.clone()).expect("bulk load");
        write_all(&written, &batches);
        assert!(load.rows <= batches.iter().map(|b| b.num_rows() as u64).sum(), "{load:?}");
        if !runs && load.files > 0 {
            assert_eq!(load.runs, 1, "batches in key order make one run: {load:?}");
        }

        assert_same(&loaded, &written, None, "after the load");
        assert_eq!(scan_rows(&loaded, Some(&snapshot)), old, "the snapshot saw the load");
        assert_same(&loaded, &written, Some(&snapshot), "at the snapshot");
        // Point reads of every row, and writes after the load win over it.
        for row in scan_rows(&written, None) {
            let cells = spec.key_of(&row);
            let key: Vec<_> = cells.iter().map(Cell::key_value).collect();
            let got = loaded.get(&key).expect("get").map(|b| rows_of(&b));
            assert_eq!(got, Some(vec![row.clone()]), "get after the load");
        }
        let after = {
            let n = rng.random_range(0..20);
            random_rows(&spec, &mut rng, n)
        };
        let after = batch_of(&spec.schema, &after);
        loaded.write(&after).expect("write after");
        written.write(&after).expect("write after");
        assert_same(&loaded, &written, None, "writes after the load");
        drop(snapshot);
        if rng.random_bool(0.5) {
            loaded.compact().expect("compact");
            written.compact().expect("compact");
            assert_same(&loaded, &written, None, "after compaction");
        }
        // Reopen: the load is durable without the WAL.
        db.close().expect("close");
        drop((loaded, written));
        let db = Db::open(DIR, common::small_options(&fs, &mut rng)).expect("reopen");
        (loaded, written) = (db.table("loaded").expect("table"), db.table("written").expect("table"));
        assert_same(&loaded, &written, None, "after reopen");
        db.close().expect("close");
    });
}

#[test]
fn a_load_into_an_empty_table_goes_to_the_bottom_level_and_stays() {
    common::run_seeded("a_load_into_an_empty_table_goes_to_the_bottom_level", 10, |seed| {
        let mut rng = common::rng(seed);
        let spec = TableSpec::random(&mut rng, Shape { columns: (2, 5), key_only: false });
        let fs = MemFs::new();
        let (db, loaded, written) = open_pair(&fs, &mut rng, &spec);
        let rows = random_rows(&spec, &mut rng, 400);
        let batches = batches_in_key_order(&spec, &mut rng, rows);
        let load = loaded.bulk_load(batches.clone()).expect("bulk load");
        write_all(&written, &batches);
        assert!(load.files >= 1 && load.bytes > 0, "{load:?}");
        let bottom = db.stats().levels.len() - 1;
        assert_eq!(load.level, bottom, "an empty table's load goes to the bottom: {load:?}");
        db.wait_for_background_work().expect("settle");
        assert_same(&loaded, &written, None, "settled");
        db.close().expect("close");
    });
}

#[test]
fn bad_loads_change_nothing() {
    common::run_seeded("bad_loads_change_nothing", 20, |seed| {
        let mut rng = common::rng(seed);
        let spec = TableSpec::random(&mut rng, Shape { columns: (1, 6), key_only: false });
        let fs = MemFs::new();
        let (db, loaded, _) = open_pair(&fs, &mut rng, &spec);
        let before = batch_of(&spec.schema, &random_rows(&spec, &mut rng, 50));
        loaded.write(&before).expect("write");
        db.flush().expect("flush");
        db.wait_for_background_work().expect("settle");
        let (rows, files) = (scan_rows(&loaded, None), sst_files(&fs));
        // A source that fails after good batches were written to files.
        let good = random_batches(&spec, &mut rng, 100);
        let failing = good.into_iter().map(Ok).chain([Err(arrow_schema::ArrowError::IoError(
            "the source broke".into(),
            std::io::Error::other("broken"),
        ))]);
        let err = loaded.bulk_load_from(failing).expect_err("a failing source");
        assert!(matches!(&err, Error::InvalidArgument(m) if m.contains("the source broke")), "{err:?}");
        assert_eq!(scan_rows(&loaded, None), rows, "a failed source's load changed the rows");
        assert_eq!(sst_files(&fs), files, "a failed source's load left files behind");
        // Another schema, after good batches were written to files.
        let other = RecordBatch::try_new(
            std::sync::Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
                "nope",
                arrow_schema::DataType::Int64,
                false,
            )])),
            vec![std::sync::Arc::new(arrow_array::Int64Array::from(vec![1i64]))],
        )
        .expect("batch");
        let good = random_batches(&spec, &mut rng, 100);
        let err = loaded.bulk_load(good.into_iter().chain([other])).expect_err("another schema");
        assert!(matches!(err, Error::SchemaMismatch(_) | Error::InvalidArgument(_)), "{err:?}");
        assert_eq!(scan_rows(&loaded, None), rows, "a failed load changed the rows");
        assert_eq!(sst_files(&fs), files, "a failed load left files behind");
        // An empty load does nothing.
        assert_eq!(loaded.bulk_load(Vec::new()).expect("empty load").rows, 0);
        assert_eq!(scan_rows(&loaded, None), rows);
        // A table with an index.
        if let Some(column) = spec.schema.fields().iter().enumerate().find(|(i, _)| !spec.key.contains(i)) {
            // Some column types take no index; then there is nothing to check.
            if loaded.create_index("by_col", &[column.1.name().as_str()], IndexOptions::default()).is_ok() {
                let err = loaded.bulk_load(random_batches(&spec, &mut rng, 5));
                assert!(matches!(err, Err(Error::InvalidArgument(_))), "{err:?}");
            }
        }
        db.close().expect("close");
        let err = loaded.bulk_load(random_batches(&spec, &mut rng, 5));
        assert!(matches!(err, Err(Error::Closed(_))), "{err:?}");
    });
}

/// Faults at every mutating I/O operation of a load (the SST writes and
/// syncs, the directory sync, the MANIFEST record): the load fails or
/// succeeds, and after a crash and reopen the table holds the old rows or
/// the old rows with the load — nothing in between.
#[test]
fn a_crash_at_any_point_of_a_load_leaves_it_all_or_nothing() {
    common::run_seeded("a_crash_at_any_point_of_a_load", 6, |seed| {
        let mut rng = common::rng(seed);
        let spec = TableSpec::random(&mut rng, Shape { columns: (1, 5), key_only: false });
        let fs = MemFs::new();
        let (db, loaded, written) = open_pair(&fs, &mut rng, &spec);
        let before = batch_of(&spec.schema, &random_rows(&spec, &mut rng, 40));
        loaded.write_opt(&before, &basalt::WriteOptions::default().sync(true)).expect("write");
        let old = scan_rows(&loaded, None);
        let batches = random_batches(&spec, &mut rng, 150);
        write_all(&written, &batches);
        written.write(&before).expect("write");
        // What the table holds with the load: `before`'s rows, then the
        // load over them.
        let template = common::small_options(&fs, &mut rng);
        // The images below are power-loss copies: close first, so they all
        // start from the same whole database.
        db.close().expect("close");
        drop((loaded, written));
        // Rows of the other table written (synced) just before each load,
        // so the memtable holds acknowledged writes of another tree when
        // the load raises the MANIFEST's seqno.
        let other_rows = batch_of(&spec.schema, &random_rows(&spec, &mut rng, 10));
        let synced = basalt::WriteOptions::default().sync(true);
        let (with_load, other_after) = {
            let image = common::history::copy(&fs);
            let db2 = Db::open(DIR, template.clone().fs(std::sync::Arc::new(image))).expect("open copy");
            let w = db2.table("written").expect("table");
            w.write_opt(&other_rows, &synced).expect("write other");
            let t = db2.table("loaded").expect("table");
            t.bulk_load(batches.clone()).expect("load on the copy");
            let rows = (scan_rows(&t, None), scan_rows(&w, None));
            db2.close().expect("close copy");
            rows
        };
        let mut step = 0;
        loop {
            let image = common::history::copy(&fs);
            let db2 = Db::open(DIR, template.clone().fs(std::sync::Arc::new(image.clone()))).expect("open");
            db2.table("written").expect("table").write_opt(&other_rows, &synced).expect("write other");
            let t = db2.table("loaded").expect("table");
            image.freeze_after(step);
            let result = t.bulk_load(batches.clone());
            let fired = image.is_frozen();
            image.unfreeze();
            drop(db2);
            drop(t);
            // Power loss: only what was synced survives.
            let crashed = image.crash(basalt::testing::CrashMode::DropUnsynced, step);
            let db3 = Db::open(DIR, template.clone().fs(std::sync::Arc::new(crashed))).expect("reopen");
            let rows = scan_rows(&db3.table("loaded").expect("table"), None);
            let other = scan_rows(&db3.table("written").expect("table"), None);
            assert_eq!(other, other_after, "step {step}: a synced write of another table was lost");
            if result.is_ok() {
                assert_eq!(rows, with_load, "step {step}: an acknowledged load was lost");
            } else {
                assert!(rows == old || rows == with_load, "step {step}: a failed load left a mix");
            }
            db3.close().expect("close");
            if !fired {
                break;
            }
            step += 1;
            assert!(step < 10_000, "the load never finished");
        }
    });
}

/// One injected I/O failure at every call of each mutating kind a load
/// makes (creating, appending, syncing files and the directory, the
/// MANIFEST's record): the load succeeds, or fails and either leaves the
/// table as it was with writes going on, or stops writes (a failed
/// MANIFEST write). After the process dies and the database reopens, the
/// table holds the rows before the load or those with it, never a mix, and
/// another table's synced write is there.
#[test]
fn an_io_failure_at_any_call_of_a_load_leaves_it_all_or_nothing() {
    use basalt::testing::{Fault, OpKind};
    let mut rng = common::rng(7);
    let spec = TableSpec::random(&mut rng, Shape { columns: (2, 4), key_only: false });
    let before = batch_of(&spec.schema, &random_rows(&spec, &mut rng, 30));
    let other = batch_of(&spec.schema, &random_rows(&spec, &mut rng, 5));
    let batches = random_batches(&spec, &mut rng, 120);
    let synced = basalt::WriteOptions::default().sync(true);
    let setup = || {
        let fs = MemFs::new();
        let db = Db::open(DIR, basalt::Options::default().fs(std::sync::Arc::new(fs.clone()))).expect("open");
        let keys = spec.key_names();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let t =
            db.create_table("loaded", spec.schema.clone(), &keys, TableOptions::default()).expect("create");
        let w =
            db.create_table("written", spec.schema.clone(), &keys, TableOptions::default()).expect("create");
        t.write_opt(&before, &synced).expect("write");
        w.write_opt(&other, &synced).expect("write other");
        // Flushed now, so the files a failed load leaves can be told
        // from those of the flush it starts with.
        db.flush().expect("flush");
        db.wait_for_background_work().expect("settle");
        (fs, db, t)
    };
    let (old, with_load, other_rows) = {
        let (_, db, t) = setup();
        let old = scan_rows(&t, None);
        let other_rows = scan_rows(&db.table("written").expect("table"), None);
        t.bulk_load(batches.clone()).expect("load");
        let with_load = scan_rows(&t, None);
        db.close().expect("close");
        (old, with_load, other_rows)
    };
    for op in [OpKind::Create, OpKind::Append, OpKind::Flush, OpKind::Sync, OpKind::SyncDir, OpKind::Rename] {
        for nth in 0.. {
            let (fs, db, t) = setup();
            let files = sst_files(&fs);
            fs.inject(Fault::once(op, nth));
            let result = t.bulk_load(batches.clone());
            let fired = fs.faults_fired() > 0;
            match &result {
                Ok(_) => assert_eq!(scan_rows(&t, None), with_load, "{op:?} #{nth}: a load that succeeded"),
                Err(e) => match db.put(b"k", b"v") {
                    Ok(()) => {
                        assert_eq!(
                            scan_rows(&t, None),
                            old,
                            "{op:?} #{nth}: failed ({e}) but changed the rows"
                        );
                        assert_eq!(sst_files(&fs), files, "{op:?} #{nth}: failed ({e}) and left files");
                    }
                    Err(put) => {
                        assert!(matches!(put, Error::Closed(_)), "{op:?} #{nth}: {e}, then put: {put:?}");
                    }
                },
            }
            drop(t);
            drop(db);
            fs.clear_faults();
            let reopened =
                Db::open(DIR, basalt::Options::default().fs(std::sync::Arc::new(fs.process_crash())))
                    .unwrap_or_else(|e| panic!("{op:?} #{nth}: reopen failed: {e}"));
            let rows = scan_rows(&reopened.table("loaded").expect("table"), None);
            if result.is_ok() {
                assert_eq!(rows, with_load, "{op:?} #{nth}: an acknowledged load was lost");
            } else {
                assert!(rows == old || rows == with_load, "{op:?} #{nth}: a failed load left a mix");
            }
            let other_now = scan_rows(&reopened.table("written").expect("table"), None);
            assert_eq!(other_now, other_rows, "{op:?} #{nth}: the other table's synced write");
            reopened.close().expect("close");
            if !fired {
                break;
            }
            assert!(nth < 10_000, "{op:?}: the load never finished");
        }
    }
}

/// Batches out of key order that differ only where a write accepts both
/// (a field declared non-nullable in one and nullable with nulls in the
/// next, a timestamp zone of "" and none) load, as writes of them would:
/// the held batches are gathered under the table's own schema.
#[test]
fn held_batches_that_differ_where_writes_accept_both_load() {
    use std::sync::Arc;

    use arrow_array::{Int64Array, StringArray, TimestampSecondArray};
    use arrow_schema::{DataType, Field, Schema, TimeUnit};
    let schema = |v_nullable: bool, zone: Option<&str>| {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("v", DataType::Utf8, v_nullable),
            Field::new("at", DataType::Timestamp(TimeUnit::Second, zone.map(Into::into)), true),
        ]))
    };
    let batch = |ids: std::ops::Range<i64>, v_nullable: bool, zone: Option<&str>| {
        let v: Vec<Option<String>> =
            ids.clone().map(|i| (!v_nullable || i % 2 == 0).then(|| i.to_string())).collect();
        let at = TimestampSecondArray::from(ids.clone().collect::<Vec<_>>()).with_timezone_opt(zone);
        RecordBatch::try_new(
            schema(v_nullable, zone),
            vec![
                Arc::new(Int64Array::from(ids.collect::<Vec<_>>())),
                Arc::new(StringArray::from(v)),
                Arc::new(at),
            ],
        )
        .expect("batch")
    };
    let fs = MemFs::new();
    let db = Db::open("/db", basalt::Options::default().fs(Arc::new(fs))).expect("open");
    let table = db.create_table("t", schema(true, None), &["id"], TableOptions::default()).expect("create");
    // The first is written as it comes; the two after it break the key
    // order, so they are held and sorted together.
    let batches = [batch(200..300, true, None), batch(100..200, false, Some("")), batch(0..100, true, None)];
    table.bulk_load(batches).expect("bulk load");
    let rows: usize =
        table.scan(ScanOptions::default()).expect("scan").map(|b| b.expect("batch").num_rows()).sum();
    assert_eq!(rows, 300);
}
