//! Schema evolution (`Table::add_column`, `drop_column`, `rename_column`)
//! against a model: random ALTERs interleaved with upserts, deletes,
//! flushes, compactions, reopens and crashes, over tables whose files span
//! many schema versions. The model keeps each row's values by column id,
//! as a user would expect them: a column added later reads its default (or
//! null) in rows written before it; a dropped column is gone, and a column
//! added again under its name starts empty. After every step the whole
//! table (scan, scan with a projection and a filter, point reads, batched
//! point reads) must equal the model, and its schema the model's columns.
//!
//! Writes are synced and a change is durable when it returns, so a crash
//! image (unsynced bytes dropped) must equal the model too. A crash in the
//! middle of a change (the file system frozen at a random mutating call)
//! leaves the table at the old schema or the new one, with every row.
//!
//! `BASALT_CASES` runs more cases, `BASALT_SEED` replays one.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use basalt::testing::{CrashMode, MemFs};
use basalt::{
    CmpOp, ColumnChange, Db, Error, Filter, KeyValue, Options, Predicate, ScanOptions, Table, TableOptions,
    WriteBatch, WriteOptions,
};
use common::schema_gen::{Cell, array_of, batch_of, random_type, random_value, row_of_view, rows_of};
use common::{rng, run_seeded, small_options};
use rand::Rng;
use rand::rngs::StdRng;

const DB: &str = "/db";
const STEPS: usize = 70;
const KEYS: i64 = 40;

/// A column as the model knows it.
#[derive(Debug, Clone)]
struct Column {
    id: u32,
    field: Field,
    /// What rows written before the column existed read.
    default: Cell,
}

/// The table as a user expects it.
#[derive(Debug, Clone)]
struct Model {
    columns: Vec<Column>,
    next_id: u32,
    /// key → values by column id (a column missing reads its default).
    rows: BTreeMap<Cell, BTreeMap<u32, Cell>>,
    raw_key: bool,
}

impl Model {
    fn schema(&self) -> SchemaRef {
        Arc::new(Schema::new(self.columns.iter().map(|c| c.field.clone()).collect::<Vec<_>>()))
    }

    fn row(&self, values: &BTreeMap<u32, Cell>) -> Vec<Cell> {
        self.columns.iter().map(|c| values.get(&c.id).cloned().unwrap_or_else(|| c.default.clone())).collect()
    }

    fn all(&self) -> Vec<Vec<Cell>> {
        self.rows.values().map(|v| self.row(v)).collect()
    }

    fn key_cell(&self, k: i64) -> Cell {
        if self.raw_key { Cell::Str(format!("k{k:03}")) } else { Cell::I64(k) }
    }
}

fn key_array(model: &Model, keys: &[i64]) -> ArrayRef {
    if model.raw_key {
        Arc::new(StringArray::from(keys.iter().map(|k| format!("k{k:03}")).collect::<Vec<_>>()))
    } else {
        Arc::new(Int64Array::from(keys.to_vec()))
    }
}

fn open(fs: &MemFs, opts: &Options) -> Db {
    Db::open(DB, opts.clone().fs(Arc::new(fs.clone()))).expect("open")
}

/// Checks every read path against the model.
fn check(table: &Table, model: &Model, rng: &mut StdRng, what: &str) {
    let schema = table.schema();
    let want_schema = model.schema();
    let names =
        |s: &Schema| s.fields().iter().map(|f| (f.name().clone(), f.data_type().clone())).collect::<Vec<_>>();
    assert_eq!(names(&schema), names(&want_schema), "{what}: schema");
    let got: Vec<Vec<Cell>> = table
        .scan(ScanOptions::default())
        .unwrap_or_else(|e| panic!("{what}: scan: {e}"))
        .flat_map(|b| rows_of(&b.unwrap_or_else(|e| panic!("{what}: scan: {e}"))))
        .collect();
    assert_eq!(got, model.all(), "{what}: scan");
    // A projection of random columns, with a filter on one of them.
    let n = model.columns.len();
    let picked: Vec<usize> = (0..n).filter(|_| rng.random_bool(0.5)).collect();
    if !picked.is_empty() {
        let names: Vec<String> = picked.iter().map(|&i| model.columns[i].field.name().clone()).collect();
        let on = picked[rng.random_range(0..picked.len())];
        let column = &model.columns[on];
        let literal_row = model.rows.values().nth(rng.random_range(0..model.rows.len().max(1)));
        let literal =
            literal_row.map(|v| v.get(&column.id).cloned().unwrap_or_else(|| column.default.clone()));
        let filterable = matches!(
            column.field.data_type(),
            DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::Utf8
                | DataType::UInt32
                | DataType::Boolean
        );
        let mut opts = ScanOptions::default().projection(Some(names.clone()));
        let mut want: Vec<Vec<Cell>> = model.all();
        if filterable && let Some(literal) = literal.filter(|l| *l != Cell::Null) {
            let array = array_of(column.field.data_type(), &[&literal]);
            opts = opts.filter(Some(Filter::all(vec![Predicate::new(
                column.field.name().clone(),
                CmpOp::Eq,
                array,
            )])));
            want.retain(|r| r[on] == literal);
        }
        let want: Vec<Vec<Cell>> =
            want.iter().map(|r| picked.iter().map(|&i| r[i].clone()).collect()).collect();
        let got: Vec<Vec<Cell>> = table
            .scan(opts)
            .unwrap_or_else(|e| panic!("{what}: scan: {e}"))
            .flat_map(|b| rows_of(&b.unwrap_or_else(|e| panic!("{what}: scan: {e}"))))
            .collect();
        assert_eq!(got, want, "{what}: scan of {names:?}");
    }
    // Point reads of random keys, present or not.
    let keys: Vec<i64> = (0..5).map(|_| rng.random_range(0..KEYS)).collect();
    for &k in &keys {
        let key = model.key_cell(k);
        let kv = match &key {
            Cell::I64(v) => KeyValue::I64(*v),
            Cell::Str(s) => KeyValue::Str(s),
            _ => unreachable!(),
        };
        let got =
            table.get(&[kv]).unwrap_or_else(|e| panic!("{what}: get: {e}")).map(|b| rows_of(&b).remove(0));
        assert_eq!(got, model.rows.get(&key).map(|v| model.row(v)), "{what}: get {key:?}");
        // As a row view: rows of files of an older schema version are
        // adapted to the current one on the way.
        let viewed = table.get_with(&[kv], row_of_view).unwrap_or_else(|e| panic!("{what}: get_with: {e}"));
        assert_eq!(viewed, model.rows.get(&key).map(|v| model.row(v)), "{what}: get_with {key:?}");
    }
    let key_field = model.columns.iter().find(|c| c.id == 0).expect("the key column").field.clone();
    let key_batch =
        RecordBatch::try_new(Arc::new(Schema::new(vec![key_field])), vec![key_array(model, &keys)])
            .expect("keys");
    let got = rows_of(&table.get_many(&key_batch).unwrap_or_else(|e| panic!("{what}: get_many: {e}")));
    let want: Vec<Vec<Cell>> =
        keys.iter().filter_map(|&k| model.rows.get(&model.key_cell(k)).map(|v| model.row(v))).collect();
    assert_eq!(got, want, "{what}: get_many");
}

fn random_rows(model: &Model, rng: &mut StdRng) -> (Vec<i64>, Vec<Vec<Cell>>) {
    let n = rng.random_range(1..12);
    let keys: Vec<i64> = (0..n).map(|_| rng.random_range(0..KEYS)).collect();
    let rows = keys
        .iter()
        .map(|&k| {
            model
                .columns
                .iter()
                .map(|c| {
                    if c.id == 0 {
                        model.key_cell(k)
                    } else if c.field.is_nullable() && rng.random_bool(0.2) {
                        Cell::Null
                    } else {
                        random_value(rng, c.field.data_type())
                    }
                })
                .collect()
        })
        .collect();
    (keys, rows)
}

/// One random change, applied to the table and (when accepted) the model;
/// some are meant to be refused, and must change nothing.
fn random_change(table: &Table, model: &mut Model, rng: &mut StdRng, names_used: &mut u32) -> String {
    let values: Vec<usize> = (0..model.columns.len()).filter(|&i| model.columns[i].id != 0).collect();
    match rng.random_range(0..10) {
        0..=3 => {
            // A fresh name, or one used before (maybe by a dropped column).
            let name = if rng.random_bool(0.3) && *names_used > 0 {
                format!("v{}", rng.random_range(0..*names_used))
            } else {
                *names_used += 1;
                format!("v{}", *names_used - 1)
            };
            let data_type = random_type(rng, false);
            let nullable = rng.random_bool(0.6);
            let default = (!nullable || rng.random_bool(0.5)).then(|| {
                loop {
                    let v = random_value(rng, &data_type);
                    if v != Cell::Null {
                        break v;
                    }
                }
            });
            let default_array = default.as_ref().map(|d| array_of(&data_type, &[d]));
            let field = Field::new(&name, data_type, nullable);
            let result = table.add_column(Arc::new(field.clone()), default_array);
            if model.columns.iter().any(|c| c.field.name() == &name) {
                assert!(matches!(result, Err(Error::InvalidArgument(_))), "adding {name} twice: {result:?}");
                return format!("add {name} (refused: exists)");
            }
            result.unwrap_or_else(|e| panic!("add {name}: {e}"));
            model.columns.push(Column { id: model.next_id, field, default: default.unwrap_or(Cell::Null) });
            model.next_id += 1;
            format!("add {name}")
        }
        4 | 5 if !values.is_empty() => {
            let i = values[rng.random_range(0..values.len())];
            let name = model.columns[i].field.name().clone();
            table.drop_column(&name).unwrap_or_else(|e| panic!("drop {name}: {e}"));
            model.columns.remove(i);
            format!("drop {name}")
        }
        6 | 7 => {
            let i = rng.random_range(0..model.columns.len());
            let from = model.columns[i].field.name().clone();
            *names_used += 1;
            let to = format!("r{}", *names_used);
            table.rename_column(&from, &to).unwrap_or_else(|e| panic!("rename {from}: {e}"));
            let field = model.columns[i].field.clone().with_name(to.clone());
            model.columns[i].field = field;
            format!("rename {from} {to}")
        }
        8 => {
            // Refused: the key, a NOT NULL column without a default, a
            // default of another type, a name taken.
            let key = model.columns.iter().find(|c| c.id == 0).expect("key").field.name().clone();
            let refusals: Vec<(ColumnChange, &str)> = vec![
                (ColumnChange::Drop { name: key.clone() }, "primary key"),
                (
                    ColumnChange::Add {
                        field: Arc::new(Field::new("nn", DataType::Int64, false)),
                        default: None,
                    },
                    "NOT NULL",
                ),
                (
                    ColumnChange::Add {
                        field: Arc::new(Field::new("typed", DataType::Int64, true)),
                        default: Some(Arc::new(StringArray::from(vec!["7"]))),
                    },
                    "type",
                ),
                (ColumnChange::Rename { from: key.clone(), to: key.clone() }, "exists"),
                (ColumnChange::Drop { name: "no such column".into() }, "no column"),
            ];
            let (change, why) = &refusals[rng.random_range(0..refusals.len())];
            let err = table.alter(std::slice::from_ref(change)).expect_err("a refused change");
            assert!(err.to_string().contains(why), "{change:?}: {err}");
            format!("refused {change:?}")
        }
        _ => "no change".into(),
    }
}

/// A crash in the middle of a change (the file system frozen at a random
/// mutating call, then the image of a power loss opened): the table is at
/// the old schema or the new one, every row there.
fn crash_in_a_change(
    fs: &mut MemFs,
    opts: &Options,
    db: &mut Db,
    table: &mut Table,
    model: &mut Model,
    rng: &mut StdRng,
    names_used: &mut u32,
) -> String {
    let before = model.clone();
    fs.freeze_after(rng.random_range(0..6));
    let mut changed = model.clone();
    let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        random_change(table, &mut changed, &mut rng.clone(), &mut names_used.clone())
    }));
    let image = fs.crash(CrashMode::DropUnsynced, rng.random());
    *fs = image;
    *db = open(fs, opts);
    *table = db.table("t").expect("table after a crash in a change");
    let names = |m: &Model| m.columns.iter().map(|c| c.field.name().clone()).collect::<Vec<_>>();
    let now: Vec<String> = table.schema().fields().iter().map(|f| f.name().clone()).collect();
    *model = if attempt.is_ok() && now == names(&changed) { changed } else { before };
    // Keep the name counter past any the attempt used.
    *names_used += 8;
    format!("crash in a change ({})", if attempt.is_ok() { "attempted" } else { "failed" })
}

fn case(seed: u64) {
    let mut rng = rng(seed);
    let mut fs = MemFs::new();
    let opts = small_options(&fs, &mut rng);
    let raw_key = rng.random_bool(0.4);
    let key_field = if raw_key {
        Field::new("k", DataType::Utf8, false)
    } else {
        Field::new("k", DataType::Int64, false)
    };
    let first = Field::new("a", DataType::Int64, true);
    let mut model = Model {
        columns: vec![
            Column { id: 0, field: key_field.clone(), default: Cell::Null },
            Column { id: 1, field: first.clone(), default: Cell::Null },
        ],
        next_id: 2,
        rows: BTreeMap::new(),
        raw_key,
    };
    let mut db = open(&fs, &opts);
    let schema = Arc::new(Schema::new(vec![key_field, first]));
    db.create_table("t", schema, &["k"], TableOptions::default()).expect("create");
    let mut table = db.table("t").expect("table");
    let mut names_used = 0;
    let mut log: Vec<String> = Vec::new();
    let sync = WriteOptions::default().sync(true);
    for step in 0..STEPS {
        let what = match rng.random_range(0..20) {
            0..=6 => {
                let (keys, rows) = random_rows(&model, &mut rng);
                table.write_opt(&batch_of(&model.schema(), &rows), &sync).expect("write");
                for (k, row) in keys.iter().zip(rows) {
                    let values = model.columns.iter().map(|c| c.id).zip(row).collect();
                    model.rows.insert(model.key_cell(*k), values);
                }
                format!("write {keys:?}")
            }
            7 => {
                let keys: Vec<i64> = (0..rng.random_range(1..5)).map(|_| rng.random_range(0..KEYS)).collect();
                let key_field = model.columns[0].field.clone();
                let batch = RecordBatch::try_new(
                    Arc::new(Schema::new(vec![key_field])),
                    vec![key_array(&model, &keys)],
                )
                .expect("keys");
                let mut wb = WriteBatch::new();
                wb.delete_table(&table, &batch).expect("delete");
                db.write_opt(wb, &sync).expect("delete");
                for k in &keys {
                    model.rows.remove(&model.key_cell(*k));
                }
                format!("delete {keys:?}")
            }
            8..=12 => random_change(&table, &mut model, &mut rng, &mut names_used),
            13 => {
                db.flush().expect("flush");
                "flush".into()
            }
            14 => {
                table.compact().expect("compact");
                "compact".into()
            }
            15 => {
                drop(table);
                db.close().expect("close");
                drop(db);
                db = open(&fs, &opts);
                table = db.table("t").expect("table after reopen");
                "reopen".into()
            }
            16 => {
                let image = fs.crash(CrashMode::DropUnsynced, rng.random());
                drop(table);
                drop(db);
                fs = image;
                db = open(&fs, &opts);
                table = db.table("t").expect("table after crash");
                "crash".into()
            }
            17 => {
                crash_in_a_change(&mut fs, &opts, &mut db, &mut table, &mut model, &mut rng, &mut names_used)
            }
            _ => "check".into(),
        };
        log.push(what.clone());
        check(&table, &model, &mut rng, &format!("step {step} ({what}); steps: {log:?}"));
    }
    drop(table);
    db.close().expect("close");
}

#[test]
fn random_alters_match_the_model_through_flushes_compactions_reopens_and_crashes() {
    run_seeded("schema_evolution", 12, case);
}

fn two_columns() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("a", DataType::Int64, true),
    ]))
}

fn ints(schema: &SchemaRef, columns: Vec<Vec<Option<i64>>>) -> RecordBatch {
    let arrays: Vec<ArrayRef> =
        columns.into_iter().map(|c| Arc::new(Int64Array::from(c)) as ArrayRef).collect();
    RecordBatch::try_new(schema.clone(), arrays).expect("batch")
}

fn memory_db() -> (MemFs, Db) {
    let fs = MemFs::new();
    let db = open(&fs, &Options::default());
    (fs, db)
}

fn column(batch: &RecordBatch, name: &str) -> Vec<Cell> {
    let i = batch.schema().index_of(name).expect("column");
    rows_of(batch).into_iter().map(|r| r[i].clone()).collect()
}

#[test]
fn a_transaction_that_wrote_rows_before_a_change_is_refused_whole() {
    let (_fs, db) = memory_db();
    let t = db.create_table("t", two_columns(), &["k"], TableOptions::default()).expect("create");
    let mut tx = db.transaction();
    tx.put_table(&t, &ints(&two_columns(), vec![vec![Some(1)], vec![Some(10)]])).expect("put");
    t.add_column(Arc::new(Field::new("b", DataType::Int64, true)), None).expect("add");
    // Its own rows no longer fit the table: reading them is refused too.
    assert!(matches!(tx.get_table(&t, &[KeyValue::I64(1)]), Err(Error::Conflict(_))));
    let err = tx.commit().expect_err("the commit");
    assert!(matches!(&err, Error::Conflict(m) if m.contains("columns of table t changed")), "{err}");
    assert!(t.get(&[KeyValue::I64(1)]).expect("get").is_none(), "nothing written");
}

#[test]
fn writers_racing_changes_either_land_whole_or_are_refused() {
    let (_fs, db) = memory_db();
    let t = db.create_table("t", two_columns(), &["k"], TableOptions::default()).expect("create");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..2i64)
        .map(|w| {
            let (t, stop) = (t.clone(), stop.clone());
            std::thread::spawn(move || {
                // key → value of `a` last acknowledged.
                let mut acked = BTreeMap::new();
                let mut i = 0i64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let schema = t.schema();
                    let k = w * 1_000_000 + i % 50;
                    let columns: Vec<Vec<Option<i64>>> = schema
                        .fields()
                        .iter()
                        .map(|f| match f.name().as_str() {
                            "k" => vec![Some(k)],
                            "a" => vec![Some(i)],
                            _ => vec![Some(-i)],
                        })
                        .collect();
                    match t.write(&ints(&schema, columns)) {
                        Ok(()) => {
                            acked.insert(k, i);
                        }
                        // The schema changed between reading it and the write.
                        Err(Error::Conflict(_) | Error::SchemaMismatch(_)) => {}
                        Err(e) => panic!("write: {e}"),
                    }
                    i += 1;
                }
                acked
            })
        })
        .collect();
    for round in 0..40 {
        let name = format!("c{round}");
        t.add_column(Arc::new(Field::new(&name, DataType::Int64, true)), None).expect("add");
        if round % 3 == 2 {
            t.drop_column(&format!("c{}", round - 1)).expect("drop");
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in writers {
        for (k, a) in w.join().expect("writer") {
            let row = t.get(&[KeyValue::I64(k)]).expect("get").expect("an acknowledged row");
            assert_eq!(column(&row, "a"), vec![Cell::I64(a)], "key {k}");
        }
    }
    // Every row decodes, whatever version wrote it.
    let rows: usize =
        t.scan(ScanOptions::default()).expect("scan").map(|b| b.expect("batch").num_rows()).sum();
    assert!(rows > 0);
}

#[test]
fn indexes_follow_their_columns_and_refuse_their_drop() {
    let (fs, db) = memory_db();
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("x", DataType::Int64, true),
        Field::new("a", DataType::Int64, true),
    ]));
    let t = db.create_table("t", schema.clone(), &["k"], TableOptions::default()).expect("create");
    t.write(&ints(&schema, vec![vec![Some(1), Some(2)], vec![Some(0), Some(0)], vec![Some(7), Some(8)]]))
        .expect("w");
    t.create_index("by_a", &["a"], basalt::IndexOptions::default()).expect("index");
    let err = t.drop_column("a").expect_err("an indexed column");
    assert!(err.to_string().contains("index by_a"), "{err}");
    // Dropping the column before it moves the index's column position.
    t.drop_column("x").expect("drop x");
    db.flush().expect("flush");
    let now = t.schema();
    t.write(&ints(&now, vec![vec![Some(3)], vec![Some(8)]])).expect("write");
    let found = t
        .lookup(
            "by_a",
            basalt::IndexPredicate::Eq(vec![Some(KeyValue::I64(8))]),
            basalt::LookupOptions::default(),
        )
        .expect("lookup");
    assert_eq!(column(&found, "k"), vec![Cell::I64(2), Cell::I64(3)]);
    // An index on a column added later sees the default in older rows.
    t.add_column(
        Arc::new(Field::new("b", DataType::Int64, false)),
        Some(Arc::new(Int64Array::from(vec![5]))),
    )
    .expect("add b");
    t.create_index("by_b", &["b"], basalt::IndexOptions::default()).expect("index b");
    let found = t
        .lookup(
            "by_b",
            basalt::IndexPredicate::Eq(vec![Some(KeyValue::I64(5))]),
            basalt::LookupOptions::default(),
        )
        .expect("lookup");
    assert_eq!(column(&found, "k"), vec![Cell::I64(1), Cell::I64(2), Cell::I64(3)]);
    t.rename_column("a", "a2").expect("rename an indexed column");
    assert_eq!(t.indexes().iter().find(|i| i.name == "by_a").expect("by_a").columns, vec!["a2".to_string()]);
    drop(t);
    db.close().expect("close");
    let db = open(&fs, &Options::default());
    let t = db.table("t").expect("t");
    let found = t
        .lookup(
            "by_a",
            basalt::IndexPredicate::Eq(vec![Some(KeyValue::I64(8))]),
            basalt::LookupOptions::default(),
        )
        .expect("lookup after reopen");
    assert_eq!(column(&found, "b"), vec![Cell::I64(5), Cell::I64(5)]);
}

#[test]
fn a_keyspace_face_refuses_changes() {
    let (_fs, db) = memory_db();
    let face = db.table("default").expect("face");
    let err = face.add_column(Arc::new(Field::new("x", DataType::Int64, true)), None).expect_err("face");
    assert!(err.to_string().contains("keyspace"), "{err}");
    assert_eq!(face.schema().fields().len(), 2);
}

#[test]
fn a_snapshot_from_before_a_change_reads_through_the_new_schema() {
    let (_fs, db) = memory_db();
    let t = db.create_table("t", two_columns(), &["k"], TableOptions::default()).expect("create");
    t.write(&ints(&two_columns(), vec![vec![Some(1)], vec![Some(10)]])).expect("write");
    let snapshot = db.snapshot();
    t.add_column(
        Arc::new(Field::new("b", DataType::Utf8, true)),
        Some(Arc::new(StringArray::from(vec!["d"]))),
    )
    .expect("add");
    t.write(&ints(&two_columns(), vec![vec![Some(2)], vec![Some(20)]])).expect_err("the old schema");
    let opts = basalt::ReadOptions::default().snapshot(Some(&snapshot));
    let row = t.get_opt(&[KeyValue::I64(1)], &opts).expect("get").expect("row");
    assert_eq!(rows_of(&row), vec![vec![Cell::I64(1), Cell::I64(10), Cell::Str("d".into())]]);
}

/// The second outside review's item 1: a delete encoded before a key
/// column's rename and committed after it reached the WAL under the old
/// column name, and recovery refused the WAL. Deletes carry their schema
/// version like puts: refused at commit, and the database reopens.
#[test]
fn a_delete_made_before_a_key_rename_is_refused_and_the_database_reopens() {
    let (fs, db) = memory_db();
    let t = db.create_table("t", two_columns(), &["k"], TableOptions::default()).expect("create");
    t.write(&ints(&two_columns(), vec![vec![Some(1), Some(2)], vec![Some(10), Some(20)]])).expect("write");
    let keys = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)])),
        vec![Arc::new(Int64Array::from(vec![1]))],
    )
    .expect("keys");
    let mut tx = db.transaction();
    tx.delete_table(&t, &keys).expect("delete in a transaction");
    let mut wb = WriteBatch::new();
    wb.delete_table(&t, &keys).expect("delete in a batch");
    t.rename_column("k", "key").expect("rename the key");
    assert!(matches!(tx.commit(), Err(Error::Conflict(_))));
    assert!(matches!(db.write_opt(wb, &WriteOptions::default().sync(true)), Err(Error::Conflict(_))));
    drop(t);
    drop(db);
    let image = fs.crash(CrashMode::DropUnsynced, 1);
    let db = open(&image, &Options::default());
    let t = db.table("t").expect("t");
    assert_eq!(t.primary_key(), vec!["key".to_string()]);
    assert_eq!(
        t.scan(ScanOptions::default()).expect("scan").map(|b| b.expect("batch").num_rows()).sum::<usize>(),
        2
    );
}
