//! Arrow tables against a model: random upserts (with duplicate keys in a
//! batch), deletes, point reads, scans with ranges, projections and
//! filters, flushes, compactions and reopens. Plus every supported type
//! round-tripping through memtable, L0 and deeper levels, the zero-copy
//! proof, and bad input. A failure prints its seed (`BASALT_SEED=…`).

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use basalt::testing::MemFs;
use basalt::{CmpOp, Db, Error, Filter, KeyValue, Predicate, ScanOptions, Table, TableOptions};
use rand::Rng;
use rand::rngs::StdRng;

type Row = (Option<String>, f64, Option<i32>);
type Model = BTreeMap<i64, Row>;
/// A filter and the same condition on model rows.
type FilterPair = (Option<Filter>, Box<dyn Fn(&Row) -> bool>);

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("score", DataType::Float64, false),
        Field::new("tag", DataType::Int32, true),
    ]))
}

fn batch_of(rows: &[(i64, Row)]) -> RecordBatch {
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(rows.iter().map(|r| r.0).collect::<Vec<_>>())),
        Arc::new(StringArray::from(rows.iter().map(|r| r.1.0.clone()).collect::<Vec<_>>())),
        Arc::new(Float64Array::from(rows.iter().map(|r| r.1.1).collect::<Vec<_>>())),
        Arc::new(Int32Array::from(rows.iter().map(|r| r.1.2).collect::<Vec<_>>())),
    ];
    RecordBatch::try_new(schema(), cols).expect("batch")
}

fn keys_of(ids: &[i64]) -> RecordBatch {
    let s = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    RecordBatch::try_new(s, vec![Arc::new(Int64Array::from(ids.to_vec()))]).expect("keys")
}

/// Rows of scan batches of the full schema.
fn rows_of(batches: &[RecordBatch]) -> Vec<(i64, Row)> {
    let mut out = Vec::new();
    for b in batches {
        let id = b.column(0).as_primitive::<Int64Type>();
        let name = b.column(1).as_string::<i32>();
        let score = b.column(2).as_primitive::<Float64Type>();
        let tag = b.column(3).as_primitive::<Int32Type>();
        for i in 0..b.num_rows() {
            let n = (!name.is_null(i)).then(|| name.value(i).to_string());
            let t = (!tag.is_null(i)).then(|| tag.value(i));
            out.push((id.value(i), (n, score.value(i), t)));
        }
    }
    out
}

fn random_row(rng: &mut StdRng) -> (i64, Row) {
    let id = rng.random_range(-20..120);
    let name = rng.random_bool(0.8).then(|| format!("n{}", rng.random_range(0..1000)));
    let tag = rng.random_bool(0.7).then(|| rng.random_range(0..5));
    (id, (name, f64::from(rng.random_range(0..100u32)), tag))
}

fn bound(rng: &mut StdRng) -> Bound<i64> {
    match rng.random_range(0..3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(rng.random_range(-25..125)),
        _ => Bound::Excluded(rng.random_range(-25..125)),
    }
}

fn kv(b: Bound<i64>) -> Bound<Vec<KeyValue<'static>>> {
    match b {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Included(v) => Bound::Included(vec![KeyValue::I64(v)]),
        Bound::Excluded(v) => Bound::Excluded(vec![KeyValue::I64(v)]),
    }
}

fn random_filter(rng: &mut StdRng) -> FilterPair {
    match rng.random_range(0..4) {
        0 => (None, Box::new(|_| true)),
        1 => {
            let x = f64::from(rng.random_range(0..100u32));
            let f =
                Filter::all(vec![Predicate::new("score", CmpOp::Gt, Arc::new(Float64Array::from(vec![x])))]);
            (Some(f), Box::new(move |r: &Row| r.1 > x))
        }
        2 => {
            let t = rng.random_range(0..5);
            let f = Filter::all(vec![
                Predicate::new("tag", CmpOp::Eq, Arc::new(Int32Array::from(vec![t]))),
                Predicate::new("score", CmpOp::LtEq, Arc::new(Float64Array::from(vec![60.0]))),
            ]);
            (Some(f), Box::new(move |r: &Row| r.2 == Some(t) && r.1 <= 60.0))
        }
        _ => {
            let f = Filter::all(vec![Predicate::new(
                "name",
                CmpOp::IsNull,
                Arc::new(StringArray::from(vec!["x"])),
            )]);
            (Some(f), Box::new(|r: &Row| r.0.is_none()))
        }
    }
}

fn check_scan(table: &Table, model: &Model, rng: &mut StdRng) {
    let (lo, hi) = (bound(rng), bound(rng));
    let (filter, keep) = random_filter(rng);
    let opts =
        ScanOptions::default().range((kv(lo), kv(hi))).filter(filter).batch_size(rng.random_range(1..50));
    let batches: Vec<RecordBatch> = table.scan(opts).expect("scan").map(|b| b.expect("batch")).collect();
    let got = rows_of(&batches);
    let valid = match (lo, hi) {
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => a <= b,
        _ => true,
    };
    let want: Vec<(i64, Row)> =
        if valid && !(matches!(lo, Bound::Excluded(a) if matches!(hi, Bound::Excluded(b) if a == b))) {
            model.range((lo, hi)).filter(|(_, r)| keep(r)).map(|(k, r)| (*k, r.clone())).collect()
        } else {
            Vec::new()
        };
    assert_eq!(got, want, "scan {lo:?}..{hi:?}");
}

fn step(db: &Db, table: &Table, model: &mut Model, rng: &mut StdRng) -> bool {
    match rng.random_range(0..100) {
        0..35 => {
            let rows: Vec<_> = (0..rng.random_range(1..20)).map(|_| random_row(rng)).collect();
            table.write(&batch_of(&rows)).expect("write");
            for (k, r) in rows {
                model.insert(k, r);
            }
        }
        35..45 => {
            let ids: Vec<i64> = (0..rng.random_range(1..6)).map(|_| rng.random_range(-20..120)).collect();
            table.delete(&keys_of(&ids)).expect("delete");
            for k in ids {
                model.remove(&k);
            }
        }
        45..60 => {
            let id = rng.random_range(-25..125);
            let got = table.get(&[KeyValue::I64(id)]).expect("get").map(|b| rows_of(&[b]));
            assert_eq!(got, model.get(&id).map(|r| vec![(id, r.clone())]), "get {id}");
        }
        60..80 => check_scan(table, model, rng),
        80..85 => {
            let ids: Vec<i64> = (0..5).map(|_| rng.random_range(-25..125)).collect();
            let got = rows_of(&[table.get_many(&keys_of(&ids)).expect("get_many")]);
            let want: Vec<_> = ids.iter().filter_map(|k| model.get(k).map(|r| (*k, r.clone()))).collect();
            assert_eq!(got, want, "get_many {ids:?}");
        }
        85..92 => db.flush().expect("flush"),
        92..96 => db.compact_range::<&[u8]>(..).expect("compact"),
        _ => return true,
    }
    false
}

#[test]
fn tables_match_model() {
    common::run_seeded("tables_match_model", 300, |seed| {
        let mut rng = common::rng(seed);
        let fs = MemFs::new();
        let path = Path::new("/db");
        let mut db = Db::open(path, common::small_options(&fs, &mut rng)).expect("open");
        let mut table = db.create_table("items", schema(), &["id"], TableOptions::default()).expect("create");
        let mut model = Model::new();
        for _ in 0..80 {
            if step(&db, &table, &mut model, &mut rng) {
                drop(table);
                drop(db);
                db = Db::open(path, common::small_options(&fs, &mut rng)).expect("reopen");
                table = db.table("items").expect("table after reopen");
                check_scan(&table, &model, &mut rng);
            }
        }
        let all: Vec<RecordBatch> =
            table.scan(ScanOptions::default()).expect("scan").map(|b| b.expect("b")).collect();
        assert_eq!(rows_of(&all), model.into_iter().collect::<Vec<_>>(), "final scan");
    });
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let fs = MemFs::new();
    let db = Db::open("/db", basalt::Options::default().fs(Arc::new(fs.clone()))).expect("open");
    let t = db.create_table("items", schema(), &["id"], TableOptions::default()).expect("create");
    t.write(&batch_of(&[(1, (None, 1.0, None))])).expect("write");
    // Wrong schema: a column renamed, a wrong type.
    let wrong = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("nom", DataType::Utf8, true),
        Field::new("score", DataType::Float64, false),
        Field::new("tag", DataType::Int32, true),
    ]));
    let b = RecordBatch::try_new(wrong, batch_of(&[(2, (None, 2.0, None))]).columns().to_vec()).expect("b");
    assert!(matches!(t.write(&b), Err(Error::SchemaMismatch(m)) if m.contains("name")));
    let wrong_type = Arc::new(Schema::new(vec![Field::new("id", DataType::Int32, false)]));
    let k = RecordBatch::try_new(wrong_type, vec![Arc::new(Int32Array::from(vec![1]))]).expect("k");
    assert!(matches!(t.delete(&k), Err(Error::SchemaMismatch(_))));
    assert!(matches!(t.get(&[KeyValue::I32(1)]), Err(Error::SchemaMismatch(_))));
    // Null keys cannot even be built into a batch of a non-nullable field;
    // a nullable-field batch with a null key is refused.
    let nullable = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
        Field::new("score", DataType::Float64, false),
        Field::new("tag", DataType::Int32, true),
    ]));
    let with_null = RecordBatch::try_new(
        nullable,
        vec![
            Arc::new(Int64Array::from(vec![Some(5), None])),
            Arc::new(StringArray::from(vec![Some("a"), Some("b")])),
            Arc::new(Float64Array::from(vec![1.0, 2.0])),
            Arc::new(Int32Array::from(vec![None, None])),
        ],
    )
    .expect("b");
    assert!(t.write(&with_null).is_err());
    // Nothing of the refused writes landed.
    let all: Vec<RecordBatch> =
        t.scan(ScanOptions::default()).expect("scan").map(|b| b.expect("b")).collect();
    assert_eq!(rows_of(&all), vec![(1, (None, 1.0, None))]);
    // Unknown table; duplicate table; bad key columns.
    assert!(matches!(db.table("nope"), Err(Error::InvalidArgument(_))));
    assert!(db.create_table("items", schema(), &["id"], TableOptions::default()).is_err());
    // A key column is stored non-nullable whatever its field says (SQL's
    // PRIMARY KEY implies NOT NULL; pyarrow makes every field nullable).
    let other =
        db.create_table("other", schema(), &["name"], TableOptions::default()).expect("nullable key field");
    assert!(!other.schema().field_with_name("name").expect("name").is_nullable());
    assert!(other.schema().field_with_name("tag").expect("tag").is_nullable(), "other columns as given");
    let null_name = RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(vec![1, 2])),
            Arc::new(StringArray::from(vec![Some("a"), None])),
            Arc::new(Float64Array::from(vec![1.0, 2.0])),
            Arc::new(Int32Array::from(vec![None, None])),
        ],
    )
    .expect("b");
    let refused = other.write(&null_name).expect_err("a null key");
    assert!(refused.to_string().contains("name"), "the error names the key column: {refused}");
    assert!(matches!(other.bulk_load([null_name.clone()]), Err(e) if e.to_string().contains("name")));
    let stored = |t: &Table| -> usize {
        t.scan(ScanOptions::default()).expect("scan").map(|b| b.expect("b").num_rows()).sum()
    };
    assert_eq!(stored(&other), 0, "nothing of the refused writes landed");
    let fine = null_name.slice(0, 1);
    other.write(&fine).expect("a batch of nullable fields without nulls");
    assert_eq!(stored(&other), 1);
    drop(other);
    db.drop_table("other").expect("drop other");
    assert!(db.create_table("other", schema(), &["missing"], TableOptions::default()).is_err());
    // Dropping a table in use is Busy; after the handles go, it drops.
    assert!(matches!(db.drop_table("items"), Err(Error::Busy(_))));
    drop(t);
    db.drop_table("items").expect("drop");
    assert!(db.table("items").is_err());
    assert!(db.drop_table("default").is_err(), "the key-value store stays");
}

#[test]
fn zone_maps_skip_blocks_and_keep_answers_right() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), basalt::Options::default()).expect("open");
    let t = db.create_table("items", schema(), &["id"], TableOptions::default()).expect("create");
    let rows: Vec<(i64, Row)> =
        (0..20_000).map(|i| (i, (Some(format!("n{i}")), i as f64, Some((i % 7) as i32)))).collect();
    for chunk in rows.chunks(1000) {
        t.write(&batch_of(chunk)).expect("write");
    }
    db.compact_range::<&[u8]>(..).expect("compact");
    let filter =
        Filter::all(vec![Predicate::new("score", CmpOp::GtEq, Arc::new(Float64Array::from(vec![19_500.0])))]);
    let mut scan = t.scan(ScanOptions::default().filter(Some(filter))).expect("scan");
    let batches: Vec<RecordBatch> = scan.by_ref().map(|b| b.expect("batch")).collect();
    let got = rows_of(&batches);
    assert_eq!(got, rows[19_500..].to_vec());
    assert!(scan.blocks_skipped() > 10, "zone maps skipped only {} blocks", scan.blocks_skipped());
    // A projection returns just the asked columns, in the asked order.
    let proj = ScanOptions::default().projection(Some(vec!["score".into(), "id".into()]));
    let first = t.scan(proj).expect("scan").next().expect("a batch").expect("ok");
    assert_eq!(
        first.schema().fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>(),
        ["score", "id"]
    );
}

fn scan(t: &Table, snapshot: Option<&basalt::Snapshot>) -> Vec<(i64, Row)> {
    let opts = ScanOptions::default().snapshot(snapshot);
    rows_of(&t.scan(opts).expect("scan").map(|b| b.expect("batch")).collect::<Vec<_>>())
}

#[test]
fn batches_across_tables_are_atomic_and_snapshots_pin_scans() {
    let fs = MemFs::new();
    let opts = || basalt::Options::default().fs(Arc::new(fs.clone()));
    let db = Db::open("/db", opts()).expect("open");
    let a = db.create_table("a", schema(), &["id"], TableOptions::default()).expect("a");
    let b = db.create_table("b", schema(), &["id"], TableOptions::default()).expect("b");
    a.write(&batch_of(&[(1, (None, 1.0, None))])).expect("write");
    let snap = db.snapshot();
    let mut wb = basalt::WriteBatch::new();
    wb.put_table(&a, &batch_of(&[(2, (Some("x".into()), 2.0, Some(1)))])).expect("rows for a");
    wb.put_table(&b, &batch_of(&[(3, (None, 3.0, None))])).expect("rows for b");
    wb.delete_table(&a, &keys_of(&[1])).expect("delete in a");
    wb.put(b"kv", b"also");
    db.write_opt(wb, &basalt::WriteOptions::default().sync(true)).expect("one atomic write");
    assert_eq!(scan(&a, Some(&snap)), vec![(1, (None, 1.0, None))], "the snapshot sees the old table");
    assert_eq!(scan(&a, None), vec![(2, (Some("x".into()), 2.0, Some(1)))]);
    assert_eq!(scan(&b, None).len(), 1);
    drop((snap, a, b));
    drop(db);
    // The synced multi-table batch survives a power loss as a whole.
    let image = fs.crash(basalt::testing::CrashMode::DropUnsynced, 7);
    let db = Db::open("/db", basalt::Options::default().fs(Arc::new(image))).expect("reopen");
    assert_eq!(scan(&db.table("a").expect("a"), None), vec![(2, (Some("x".into()), 2.0, Some(1)))]);
    assert_eq!(scan(&db.table("b").expect("b"), None), vec![(3, (None, 3.0, None))]);
    assert_eq!(db.get(b"kv").expect("get").as_deref(), Some(&b"also"[..]));
}

/// Dropping tables while their flushes and compactions run in the
/// background must never leave an edit naming a dropped tree (which would
/// stop the database).
#[test]
fn dropping_tables_under_background_work() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = basalt::Options::default()
        .memtable_bytes_max(16 << 10)
        .l0_compaction_trigger(2)
        .level1_bytes_target(32 << 10);
    let db = Db::open(dir.path(), opts).expect("open");
    for round in 0..30i64 {
        let name = format!("t{round}");
        let t = db.create_table(&name, schema(), &["id"], TableOptions::default()).expect("create");
        for b in 0..6 {
            let rows: Vec<(i64, Row)> =
                (0..200).map(|i| (b * 200 + i, (Some("x".repeat(20)), 1.0, None))).collect();
            t.write(&batch_of(&rows)).expect("write");
        }
        drop(t);
        db.drop_table(&name).expect("drop");
        db.put(format!("alive-{round}"), b"yes").expect("the database still takes writes");
    }
    db.flush().expect("flush");
    db.wait_for_background_work().expect("background work ends cleanly");
    assert_eq!(db.tables(), vec!["default".to_string()]);
}

/// Rows written in key order flush to files that share no key, which
/// compaction moves down without rewriting; where they settle they are
/// rewritten all the same, compressed (`settled_compression`): the table
/// ends far smaller with zstd than without, and reads the same.
#[test]
fn rows_written_in_key_order_settle_compressed() {
    let mut sizes = Vec::new();
    for settled in [basalt::Compression::Zstd, basalt::Compression::None] {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = basalt::Options::default().memtable_bytes_max(256 << 10).settled_compression(settled);
        let db = Db::open(dir.path(), opts).expect("open");
        let t = db.create_table("t", schema(), &["id"], TableOptions::default()).expect("create");
        let row = |i: i64| (Some(format!("name {} of a few", i % 5)), i as f64 / 8.0, Some((i % 100) as i32));
        let rows: Vec<(i64, Row)> = (0..60_000).map(|i| (i, row(i))).collect();
        for chunk in rows.chunks(1000) {
            t.write(&batch_of(chunk)).expect("write");
        }
        db.flush().expect("flush");
        db.wait_for_background_work().expect("settle");
        let mut scanned = 0;
        for batch in t.scan(ScanOptions::default()).expect("scan") {
            let batch = batch.expect("batch");
            let ids = batch.column(0).as_primitive::<Int64Type>();
            let names = batch.column(1).as_string::<i32>();
            for r in 0..batch.num_rows() {
                assert_eq!(ids.value(r), scanned);
                assert_eq!(Some(names.value(r).to_string()), row(scanned).0);
                scanned += 1;
            }
        }
        assert_eq!(scanned, 60_000);
        sizes.push(t.bytes_on_disk().expect("bytes").rows.total());
    }
    assert!(sizes[0] * 2 < sizes[1], "table bytes with zstd settled and without: {sizes:?}");
}
