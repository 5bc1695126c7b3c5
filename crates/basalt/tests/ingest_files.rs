//! `Table::write_sst_files` and `Table::ingest_files` against writes, over
//! RANDOM schemas, as a sharded store uses them: two databases ("shards")
//! hold one table split at a random key, with earlier rows spread over
//! their levels; several writers (each a separate `write_sst_files` call at
//! its own seqno, batches in random order, some keys in several writers)
//! write files, cut at the split key or not at all (then each shard keeps
//! only its part of a straddling file, rewritten); each shard ingests every
//! file with its own key range. An oracle database writes the same batches
//! writer by writer (the higher seqno wins). The shards together must read
//! as the oracle: scans, point reads, at a snapshot taken before (which
//! sees nothing of the ingest), after a compaction and after a reopen.
//! Refused ingests (a seqno the database already used, files of another
//! table, a database's own SST, two overlapping files of one seqno, a
//! damaged file, a table with an index) change nothing. I/O faults at every
//! call of an ingest leave the table as it was or with the whole ingest.
//!
//! A failure prints its seed; `BASALT_SEED=<seed>` replays it.

mod common;

use std::ops::Bound;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use basalt::testing::MemFs;
use basalt::{Db, Error, ExternalSst, IndexOptions, KeyValue, Table, TableOptions};
use common::scan_rows;
use common::schema_gen::{Cell, Shape, TableSpec, batch_of, rows_of};
use common::table_oracle::OracleKey;
use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

fn sst_files(fs: &MemFs, dir: &str) -> Vec<String> {
    let mut names: Vec<String> = fs
        .file_names(Path::new(dir))
        .into_iter()
        .filter(|n| Path::new(n).extension().is_some_and(|e| e == "sst"))
        .collect();
    names.sort();
    names
}

fn open_table(fs: &MemFs, rng: &mut StdRng, dir: &str, spec: &TableSpec) -> (Db, Table) {
    let db = Db::open(dir, common::small_options(fs, rng)).expect("open");
    let keys = spec.key_names();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let table = match db.table("t") {
        Ok(t) => t,
        Err(_) => db.create_table("t", spec.schema.clone(), &keys, TableOptions::default()).expect("create"),
    };
    (db, table)
}

fn key_values(key: &[Cell]) -> Vec<KeyValue<'_>> {
    key.iter().map(Cell::key_value).collect()
}

/// Random rows in batches of random sizes, in random order (keys repeat
/// across batches now and then: the later batch's row must win).
fn random_batches(spec: &TableSpec, rng: &mut StdRng, n: usize) -> Vec<RecordBatch> {
    let mut rows: Vec<Vec<Cell>> = (0..n).map(|_| spec.random_row(rng)).collect();
    rows.shuffle(rng);
    let mut batches = Vec::new();
    let mut at = 0;
    while at < rows.len() {
        let take = rng.random_range(1..=rows.len() - at);
        batches.push(batch_of(&spec.schema, &rows[at..at + take]));
        at += take;
    }
    batches
}

/// Writes `batches` into one table or the other by the key's side of
/// `split`, as a sharded store routes writes.
fn write_routed(spec: &TableSpec, shards: [&Table; 2], split: &[Cell], batches: &[RecordBatch]) {
    for b in batches {
        let rows = rows_of(b);
        let (low, high): (Vec<&Vec<Cell>>, Vec<&Vec<Cell>>) =
            rows.iter().partition(|r| OracleKey(spec.key_of(r)) < OracleKey(split.to_vec()));
        for (table, part) in shards.iter().zip([low, high]) {
            if !part.is_empty() {
                table.write(&batch_of(&spec.schema, &part)).expect("write");
            }
        }
    }
}

fn ok_batches(batches: &[RecordBatch]) -> impl Iterator<Item = Result<RecordBatch, Error>> + '_ {
    batches.iter().cloned().map(Ok)
}

fn paths(files: &[ExternalSst]) -> Vec<PathBuf> {
    files.iter().map(|f| f.path.clone()).collect()
}

#[test]
fn shards_that_ingest_one_writers_files_read_as_the_writes() {
    common::run_seeded("shards_that_ingest_one_writers_files_read_as_the_writes", 60, |seed| {
        let mut rng = common::rng(seed);
        let spec = TableSpec::random(&mut rng, Shape { columns: (1, 6), key_only: false });
        let fs = MemFs::new();
        let (db0, t0) = open_table(&fs, &mut rng, "/s0", &spec);
        let (db1, t1) = open_table(&fs, &mut rng, "/s1", &spec);
        let (oracle_db, oracle) = open_table(&fs, &mut rng, "/o", &spec);
        let split = spec.random_key(&mut rng);
        let ranges = [
            (Bound::Unbounded, Bound::Excluded(key_values(&split))),
            (Bound::Included(key_values(&split)), Bound::Unbounded),
        ];
        // Earlier rows, through every level of each shard.
        for _ in 0..rng.random_range(0..4) {
            let n = rng.random_range(1..60);
            let batches = random_batches(&spec, &mut rng, n);
            write_routed(&spec, [&t0, &t1], &split, &batches);
            for b in &batches {
                oracle.write(b).expect("write");
            }
            if rng.random_bool(0.5) {
                db0.flush().expect("flush");
                db1.flush().expect("flush");
            }
        }
        let snapshot = db0.snapshot();
        let before = scan_rows(&t0, None);
        // Writers, each at a seqno above every shard's.
        let base = db0.last_seqno().max(db1.last_seqno()) + 1;
        let cut = rng.random_bool(0.5);
        let cut_at: Vec<Vec<KeyValue<'_>>> = if cut { vec![key_values(&split)] } else { Vec::new() };
        let mut files = Vec::new();
        let writers = rng.random_range(1..4);
        for w in 0..writers {
            let n = rng.random_range(0..200);
            let batches = random_batches(&spec, &mut rng, n);
            // The writer's table handle may be either shard's: the files
            // carry the table, not the database.
            let writer = if rng.random_bool(0.5) { &t0 } else { &t1 };
            let seqno = base + w * 1_000;
            let written = writer
                .write_sst_files(format!("/ext/{w}"), seqno, &cut_at, ok_batches(&batches))
                .expect("write files");
            for f in &written {
                assert!(f.seqno >= seqno && f.rows > 0, "{f:?}");
                assert!(f.range <= cut_at.len(), "{f:?}");
            }
            files.extend(written);
            for b in &batches {
                oracle.write(b).expect("write");
            }
        }
        let mut loads = Vec::new();
        for (side, (table, range)) in [&t0, &t1].into_iter().zip(ranges.clone()).enumerate() {
            let mine: Vec<PathBuf> = if cut {
                // With the cut known, each shard is handed only its files.
                files.iter().filter(|f| f.range == side).map(|f| f.path.clone()).collect()
            } else {
                paths(&files)
            };
            loads.push(table.ingest_files(&mine, range).expect("ingest"));
        }
        let all = |a: &Table, b: &Table| {
            let mut rows = scan_rows(a, None);
            rows.extend(scan_rows(b, None));
            rows
        };
        let expected = scan_rows(&oracle, None);
        let got = all(&t0, &t1);
        assert!(got == expected, "after the ingest ({loads:?})\nshards {got:?}\noracle {expected:?}");
        assert_eq!(scan_rows(&t0, Some(&snapshot)), before, "the snapshot saw the ingest");
        for row in &expected {
            let key = spec.key_of(row);
            let table = if OracleKey(key.clone()) < OracleKey(split.clone()) { &t0 } else { &t1 };
            let got = table.get(&key_values(&key)).expect("get").map(|b| rows_of(&b));
            assert_eq!(got, Some(vec![row.clone()]), "get after the ingest");
        }
        // The writers' files stay where they were (linked, not moved).
        for f in &files {
            assert!(fs.file_len(&f.path).is_some(), "{} is gone", f.path.display());
        }
        drop(snapshot);
        if rng.random_bool(0.5) {
            t0.compact().expect("compact");
            t1.compact().expect("compact");
            assert!(all(&t0, &t1) == expected, "after compaction");
        }
        // Writes after the ingest win over it.
        let n = rng.random_range(0..20);
        let after = random_batches(&spec, &mut rng, n);
        write_routed(&spec, [&t0, &t1], &split, &after);
        for b in &after {
            oracle.write(b).expect("write");
        }
        let expected = scan_rows(&oracle, None);
        assert!(all(&t0, &t1) == expected, "writes after the ingest");
        // Durable without any WAL record.
        for db in [db0, db1, oracle_db] {
            db.close().expect("close");
        }
        drop((t0, t1, oracle));
        let (db0, t0) = open_table(&fs, &mut rng, "/s0", &spec);
        let (db1, t1) = open_table(&fs, &mut rng, "/s1", &spec);
        assert!(all(&t0, &t1) == expected, "after reopen");
        db0.close().expect("close");
        db1.close().expect("close");
    });
}

#[test]
fn files_that_do_not_overlap_go_to_the_bottom_level() {
    common::run_seeded("files_that_do_not_overlap_go_to_the_bottom_level", 10, |seed| {
        let mut rng = common::rng(seed);
        let spec = TableSpec::random(&mut rng, Shape { columns: (1, 4), key_only: false });
        let fs = MemFs::new();
        let (db, t) = open_table(&fs, &mut rng, "/db", &spec);
        // One batch: one sorted run, however small the memory budget.
        let n = rng.random_range(1..300);
        let rows: Vec<Vec<Cell>> = (0..n).map(|_| spec.random_row(&mut rng)).collect();
        let batches = [batch_of(&spec.schema, &rows)];
        let files = t.write_sst_files("/ext", db.last_seqno() + 1, &[], ok_batches(&batches)).expect("write");
        let load = t.ingest_files(&paths(&files), (Bound::Unbounded, Bound::Unbounded)).expect("ingest");
        if load.files > 0 {
            assert_eq!(load.runs, 1, "{load:?}");
            assert!(load.level > 0, "one sorted run into an empty table goes below L0: {load:?}");
        }
        db.close().expect("close");
    });
}

#[test]
fn refused_ingests_change_nothing() {
    common::run_seeded("refused_ingests_change_nothing", 20, |seed| {
        let mut rng = common::rng(seed);
        let spec = TableSpec::random(&mut rng, Shape { columns: (2, 5), key_only: false });
        let fs = MemFs::new();
        // No background compaction: the files listed before and after a
        // refused ingest must differ only by what the ingest did.
        let db = Db::open("/db", common::small_options(&fs, &mut rng).auto_compaction(false)).expect("open");
        let keys = spec.key_names();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let t = db.create_table("t", spec.schema.clone(), &keys, TableOptions::default()).expect("create");
        let n = rng.random_range(1..100);
        t.write(&batch_of(&spec.schema, &(0..n).map(|_| spec.random_row(&mut rng)).collect::<Vec<_>>()))
            .expect("write");
        db.flush().expect("flush");
        let all = (Bound::Unbounded, Bound::Unbounded);
        let rows = || (0..50).map(|_| spec.random_row(&mut common::rng(seed ^ 7))).collect::<Vec<_>>();
        let batch = batch_of(&spec.schema, &rows());
        let unchanged = |t: &Table, before: &[Vec<Cell>], ssts: &[String], what: &str| {
            assert!(scan_rows(t, None) == before, "{what}: rows changed");
            assert_eq!(sst_files(&fs, "/db"), ssts, "{what}: files changed");
        };
        let before = scan_rows(&t, None);
        let ssts = sst_files(&fs, "/db");

        // A seqno the database has used: it was written after the files.
        let stale = t
            .write_sst_files("/ext/stale", db.last_seqno(), &[], [Ok::<_, Error>(batch.clone())])
            .expect("write");
        let err = t.ingest_files(&paths(&stale), all.clone()).expect_err("stale seqno");
        assert!(matches!(err, Error::Conflict(_)), "{err}");
        unchanged(&t, &before, &ssts, "stale seqno");

        let fresh = db.last_seqno() + 10;
        // Two files of one seqno that overlap.
        let a = t.write_sst_files("/ext/a", fresh, &[], [Ok::<_, Error>(batch.clone())]).expect("write");
        let b = t.write_sst_files("/ext/b", fresh, &[], [Ok::<_, Error>(batch.clone())]).expect("write");
        let both: Vec<PathBuf> = paths(&a).into_iter().chain(paths(&b)).collect();
        let err = t.ingest_files(&both, all.clone()).expect_err("one seqno twice");
        assert!(matches!(err, Error::InvalidArgument(_)) && err.to_string().contains("seqno"), "{err}");
        unchanged(&t, &before, &ssts, "one seqno twice");

        // Files of another table (another tree).
        let other = db
            .create_table(
                "other",
                spec.schema.clone(),
                &spec.key_names().iter().map(String::as_str).collect::<Vec<_>>(),
                TableOptions::default(),
            )
            .expect("create");
        let foreign = other
            .write_sst_files("/ext/other", fresh + 1, &[], [Ok::<_, Error>(batch.clone())])
            .expect("write");
        let err = t.ingest_files(&paths(&foreign), all.clone()).expect_err("another table's files");
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        unchanged(&t, &before, &ssts, "another table's files");

        // The database's own SST.
        let own = PathBuf::from("/db").join(&ssts[0]);
        let err = t.ingest_files(&[own], all.clone()).expect_err("own file");
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        unchanged(&t, &before, &ssts, "own file");

        // A damaged file: Corruption naming it.
        let damaged = t
            .write_sst_files("/ext/damaged", fresh + 2, &[], [Ok::<_, Error>(batch.clone())])
            .expect("write");
        let path = damaged[0].path.clone();
        let mut bytes = fs.read_file(&path).expect("file");
        let at = bytes.len() - rng.random_range(1..60);
        bytes[at] ^= 0x55;
        fs.write_file_synced(&path, &bytes).expect("rewrite");
        let err = t.ingest_files(std::slice::from_ref(&path), all.clone()).expect_err("damaged");
        assert!(err.is_corruption() && err.to_string().contains(&path.display().to_string()), "{err}");
        unchanged(&t, &before, &ssts, "damaged file");

        // A table with an index.
        let good =
            t.write_sst_files("/ext/good", fresh + 3, &[], [Ok::<_, Error>(batch.clone())]).expect("write");
        let column =
            spec.schema.fields().iter().map(|f| f.name().clone()).find(|n| !spec.key_names().contains(n));
        if let Some(column) = column
            && t.create_index("i", &[column.as_str()], IndexOptions::default()).is_ok()
        {
            let ssts = sst_files(&fs, "/db");
            let err = t.ingest_files(&paths(&good), all.clone()).expect_err("indexed table");
            assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
            unchanged(&t, &before, &ssts, "indexed table");
            t.drop_index("i").expect("drop index");
        }
        // And then the good files go in.
        t.ingest_files(&paths(&good), all.clone()).expect("ingest");
        db.close().expect("close");
    });
}

#[test]
fn files_written_before_a_column_change_read_under_the_new_schema() {
    let fs = MemFs::new();
    let mut rng = common::rng(1);
    let spec = TableSpec::random(&mut rng, Shape { columns: (2, 4), key_only: false });
    let (db, t) = open_table(&fs, &mut rng, "/db", &spec);
    let rows: Vec<Vec<Cell>> = (0..80).map(|_| spec.random_row(&mut rng)).collect();
    let files = t
        .write_sst_files("/ext", db.last_seqno() + 1, &[], [Ok::<_, Error>(batch_of(&spec.schema, &rows))])
        .expect("write");
    let field = arrow_schema::Field::new("added_later", arrow_schema::DataType::Int64, true);
    t.add_column(field, None).expect("add column");
    let t = db.table("t").expect("table");
    t.ingest_files(&paths(&files), (Bound::Unbounded, Bound::Unbounded)).expect("ingest");
    let got = scan_rows(&t, None);
    assert!(!got.is_empty());
    for row in &got {
        assert_eq!(row.len(), spec.schema.fields().len() + 1);
        assert_eq!(row.last(), Some(&Cell::Null), "{row:?}");
    }
    db.close().expect("close");
}

#[test]
fn an_io_failure_at_any_call_of_an_ingest_leaves_it_all_or_nothing() {
    use basalt::testing::{Fault, OpKind};
    let mut rng = common::rng(11);
    let spec = TableSpec::random(&mut rng, Shape { columns: (2, 4), key_only: false });
    let early = random_batches(&spec, &mut rng, 40);
    let batches = random_batches(&spec, &mut rng, 150);
    let split = spec.random_key(&mut rng);
    let range = || (Bound::Included(key_values(&split)), Bound::Unbounded);
    let synced = basalt::WriteOptions::default().sync(true);
    // A table with flushed rows and a synced unflushed write, and files
    // written for it at a seqno above both (some straddle the split and are
    // rewritten, some are linked).
    let setup = || {
        let fs = MemFs::new();
        let db =
            Db::open("/db", basalt::Options::default().fs(std::sync::Arc::new(fs.clone()))).expect("open");
        let keys = spec.key_names();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let t = db.create_table("t", spec.schema.clone(), &keys, TableOptions::default()).expect("create");
        for b in &early[..early.len() / 2] {
            t.write_opt(b, &synced).expect("write");
        }
        db.flush().expect("flush");
        for b in &early[early.len() / 2..] {
            t.write_opt(b, &synced).expect("write");
        }
        db.wait_for_background_work().expect("settle");
        let cut_at = [key_values(&split)];
        let files =
            t.write_sst_files("/ext", db.last_seqno() + 1, &cut_at[..], ok_batches(&batches)).expect("write");
        (fs, db, t, paths(&files))
    };
    let (old, with_ingest) = {
        let (_, db, t, files) = setup();
        let old = scan_rows(&t, None);
        t.ingest_files(&files, range()).expect("ingest");
        let with_ingest = scan_rows(&t, None);
        db.close().expect("close");
        (old, with_ingest)
    };
    assert_ne!(old, with_ingest, "the ingest changes the table");
    for op in [OpKind::Create, OpKind::Append, OpKind::Sync, OpKind::SyncDir, OpKind::Rename] {
        for nth in 0.. {
            let (fs, db, t, files) = setup();
            fs.inject(Fault::once(op, nth));
            let result = t.ingest_files(&files, range());
            let fired = fs.faults_fired() > 0;
            match &result {
                Ok(_) => {
                    assert_eq!(scan_rows(&t, None), with_ingest, "{op:?} #{nth}: an ingest that succeeded");
                }
                Err(e) => match db.put(b"k", b"v") {
                    Ok(()) => {
                        assert_eq!(
                            scan_rows(&t, None),
                            old,
                            "{op:?} #{nth}: failed ({e}) but changed the rows"
                        );
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
                Db::open("/db", basalt::Options::default().fs(std::sync::Arc::new(fs.process_crash())))
                    .unwrap_or_else(|e| panic!("{op:?} #{nth}: reopen failed: {e}"));
            let rows = scan_rows(&reopened.table("t").expect("table"), None);
            if result.is_ok() {
                assert_eq!(rows, with_ingest, "{op:?} #{nth}: an acknowledged ingest was lost");
            } else {
                assert!(rows == old || rows == with_ingest, "{op:?} #{nth}: a failed ingest left a mix");
            }
            reopened.close().expect("close");
            if !fired {
                break;
            }
            assert!(nth < 10_000, "{op:?}: the ingest never finished");
        }
    }
}
