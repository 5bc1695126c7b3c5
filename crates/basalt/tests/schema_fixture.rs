//! A database directory with table schema versions, as this version of
//! the engine writes it (`tests/fixtures/schema-v1`): the table `evolving`
//! created as `(id Int64 key, a Utf8)`, 100 rows flushed; `b Int64 NOT NULL
//! DEFAULT 7` added, 50 rows flushed; `a` renamed `name` and `c Float64`
//! added (versions 2 and 3, one edit), 30 rows flushed; `b` dropped
//! (version 4); 20 rows left in the WAL. No compaction ran, so files of
//! versions 0, 1 and 3 are live. Opening it
//! must read every row through its version, now and after any later change
//! of the format: the test fails when the MANIFEST records (tags 12 and 13)
//! or their meaning change. `BASALT_WRITE_FIXTURE=1 cargo test --test
//! schema_fixture -- --ignored` writes the directory again.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use basalt::{Db, KeyValue, Options, ScanOptions, TableOptions};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/schema-v1")
}

fn options() -> Options {
    Options::default().auto_compaction(false)
}

fn rows(t: &basalt::Table, ids: std::ops::Range<i64>) -> RecordBatch {
    let schema = t.schema();
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|f| -> ArrayRef {
            match f.name().as_str() {
                "id" => Arc::new(Int64Array::from(ids.clone().collect::<Vec<_>>())),
                "a" | "name" => {
                    Arc::new(StringArray::from(ids.clone().map(|i| format!("r{i}")).collect::<Vec<_>>()))
                }
                "b" => Arc::new(Int64Array::from(ids.clone().map(|i| i * 10).collect::<Vec<_>>())),
                "c" => Arc::new(Float64Array::from(ids.clone().map(|i| i as f64 / 4.0).collect::<Vec<_>>())),
                other => panic!("no column {other}"),
            }
        })
        .collect();
    RecordBatch::try_new(schema, columns).expect("rows")
}

#[test]
#[ignore = "writes the fixture: BASALT_WRITE_FIXTURE=1"]
fn write_the_fixture() {
    if std::env::var("BASALT_WRITE_FIXTURE").is_err() {
        return;
    }
    let dir = fixture();
    let _ = std::fs::remove_dir_all(&dir);
    let db = Db::open(&dir, options()).expect("open");
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("a", DataType::Utf8, true),
    ]));
    let t = db.create_table("evolving", schema, &["id"], TableOptions::default()).expect("create");
    t.write(&rows(&t, 0..100)).expect("write");
    db.flush().expect("flush");
    t.add_column(Field::new("b", DataType::Int64, false), Some(Arc::new(Int64Array::from(vec![7]))))
        .expect("add b");
    t.write(&rows(&t, 100..150)).expect("write");
    db.flush().expect("flush");
    t.alter(&[
        basalt::ColumnChange::Rename { from: "a".into(), to: "name".into() },
        basalt::ColumnChange::Add {
            field: Arc::new(Field::new("c", DataType::Float64, true)),
            default: None,
        },
    ])
    .expect("rename a, add c");
    t.write(&rows(&t, 150..180)).expect("write");
    db.flush().expect("flush");
    t.drop_column("b").expect("drop b");
    t.write(&rows(&t, 180..200)).expect("write");
    drop(t);
    db.close().expect("close");
    // The lock file is made again by every open.
    let _ = std::fs::remove_file(dir.join("LOCK"));
}

fn check(db: &Db) {
    let t = db.table("evolving").expect("table");
    let names: Vec<String> = t.schema().fields().iter().map(|f| f.name().clone()).collect();
    assert_eq!(names, ["id", "name", "c"]);
    let mut seen = 0;
    for batch in t.scan(ScanOptions::default()).expect("scan") {
        let batch = batch.expect("batch");
        let ids = batch.column(0).as_any().downcast_ref::<Int64Array>().expect("ids");
        let name = batch.column(1).as_any().downcast_ref::<StringArray>().expect("names");
        let c = batch.column(2).as_any().downcast_ref::<Float64Array>().expect("c");
        for r in 0..batch.num_rows() {
            let id = ids.value(r);
            assert_eq!(id, seen, "rows in key order, none missing");
            assert_eq!(name.value(r), format!("r{id}"));
            // `c` came with version 3: rows written before read null.
            if id < 150 {
                assert!(c.is_null(r), "row {id}");
            } else {
                assert_eq!(c.value(r).to_bits(), (id as f64 / 4.0).to_bits(), "row {id}");
            }
            seen += 1;
        }
    }
    assert_eq!(seen, 200);
    let row = t.get(&[KeyValue::I64(120)]).expect("get").expect("row 120");
    assert_eq!(row.num_columns(), 3);
}

#[test]
fn a_directory_with_schema_versions_opens_with_every_row() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path()).expect("dir");
    for entry in std::fs::read_dir(fixture()).expect("the fixture") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).expect("copy");
    }
    let db = Db::open(dir.path(), options()).expect("open the fixture");
    check(&db);
    // Compaction rewrites every file in the current version; the rows stay.
    db.table("evolving").expect("table").compact().expect("compact");
    check(&db);
    db.close().expect("close");
    let db = Db::open(dir.path(), options()).expect("reopen");
    check(&db);
}
