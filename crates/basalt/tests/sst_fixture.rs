//! A database directory whose SSTs are of format version 7, the last
//! before blocks could be zstd-compressed and table blocks could hold
//! dictionaries and packed trailers (`tests/fixtures/sst-v7`): a table of
//! every kind of column (packed and unpacked integers, low-cardinality and
//! distinct strings, binary, floats with NaN and both zeros, booleans,
//! dates, timestamps, nulls) with a secondary index, written in three
//! flushes with overwrites and deletes and a bulk load, and a keyspace of
//! fixed-width keys and variable values with deletes; some rows are left
//! in the WAL. Every later version of the engine must read it as it was
//! written, and rewrite it (a compaction into its own format) without
//! losing a value. `BASALT_WRITE_FIXTURE=1 cargo test --test sst_fixture
//! -- --ignored` writes the directory again: only with the code of the
//! format version the directory is named after.
#![allow(clippy::manual_is_multiple_of, reason = "values are picked by remainders of one mix, read alike")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Float64Array, Int32Array, Int64Array, RecordBatch,
    StringArray, TimestampMicrosecondArray,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use basalt::{
    Compression, Db, IndexOptions, IndexPredicate, KeyValue, LookupOptions, Options, ScanOptions,
    TableOptions,
};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sst-v7")
}

fn options() -> Options {
    Options::default()
        .auto_compaction(false)
        .table_block_bytes_target(8 << 10)
        .settled_block_bytes_target(8 << 10)
        .block_bytes_target(1 << 10)
        .compression(Compression::None)
        .settled_compression(Compression::None)
}

const CITIES: [&str; 5] = ["Oslo", "Lima", "", "Reykjavík", "Nairobi"];

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("small", DataType::Int32, false),
        Field::new("big", DataType::Int64, true),
        Field::new("city", DataType::Utf8, true),
        Field::new("note", DataType::Utf8, false),
        Field::new("blob", DataType::Binary, true),
        Field::new("f", DataType::Float64, true),
        Field::new("flag", DataType::Boolean, true),
        Field::new("day", DataType::Date32, false),
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
    ]))
}

fn mix(id: i64, generation: u32) -> u64 {
    (id as u64 ^ u64::from(generation) << 40).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29)
}

/// The rows `(id, generation)`: every value a function of the two.
fn batch(rows: &[(i64, u32)]) -> RecordBatch {
    let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
    let m: Vec<u64> = rows.iter().map(|&(id, g)| mix(id, g)).collect();
    let floats = [f64::NAN, -0.0, 0.0, f64::INFINITY, f64::NEG_INFINITY, -f64::NAN];
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids.clone())),
        Arc::new(Int32Array::from(
            rows.iter().map(|&(id, g)| (id % 13) as i32 + g as i32).collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(m.iter().map(|&x| (x % 11 != 0).then_some(x as i64)).collect::<Vec<_>>())),
        Arc::new(StringArray::from(
            m.iter().map(|&x| (x % 17 != 0).then_some(CITIES[(x % 5) as usize])).collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from(
            rows.iter()
                .zip(&m)
                .map(|(&(id, g), &x)| match x % 9 {
                    0 => String::new(),
                    1 => format!("nul\0{id}"),
                    2 => "long ".repeat(20 + (x % 30) as usize),
                    _ => format!("note {id} of generation {g}"),
                })
                .collect::<Vec<_>>(),
        )),
        Arc::new(BinaryArray::from(
            m.iter()
                .map(|&x| (x % 7 != 0).then(|| x.to_le_bytes()[..(x % 9) as usize].to_vec()))
                .map(|v| v.map(|b| b.leak() as &[u8]))
                .collect::<Vec<Option<&[u8]>>>(),
        )),
        Arc::new(Float64Array::from(
            m.iter()
                .zip(&ids)
                .map(|(&x, &id)| match x % 8 {
                    7 => None,
                    k if (k as usize) < floats.len() => Some(floats[k as usize]),
                    _ => Some(id as f64 / 3.0),
                })
                .collect::<Vec<_>>(),
        )),
        Arc::new(BooleanArray::from(
            m.iter().map(|&x| (x % 3 != 0).then_some(x % 2 == 0)).collect::<Vec<_>>(),
        )),
        Arc::new(Date32Array::from(ids.iter().map(|&id| 18_000 + (id % 400) as i32).collect::<Vec<_>>())),
        Arc::new(TimestampMicrosecondArray::from(
            rows.iter()
                .map(|&(id, g)| (id % 5 != 0).then_some(1_700_000_000_000_000 + id * 1_000 + i64::from(g)))
                .collect::<Vec<_>>(),
        )),
    ];
    RecordBatch::try_new(schema(), columns).expect("rows")
}

fn kv_key(i: u32) -> [u8; 8] {
    (u64::from(i) * 3).to_be_bytes()
}

fn kv_value(i: u32, generation: u32) -> Vec<u8> {
    let m = mix(i64::from(i), generation);
    let mut v = format!("value {i}.{generation}").into_bytes();
    v.resize(v.len() + (m % 50) as usize, (m % 251) as u8);
    v
}

/// What the fixture holds: table rows by id (with their generation) and
/// keyspace values by index (with theirs).
fn model() -> (BTreeMap<i64, u32>, BTreeMap<u32, u32>) {
    let mut rows = BTreeMap::new();
    let mut kv = BTreeMap::new();
    for step in steps() {
        match step {
            Step::Rows(r) | Step::Bulk(r) => rows.extend(r),
            Step::DeleteRows(ids) => rows.retain(|id, _| !ids.contains(id)),
            Step::Kv(puts) => kv.extend(puts),
            Step::DeleteKv(keys) => kv.retain(|k, _| !keys.contains(k)),
            Step::Flush | Step::Index => {}
        }
    }
    (rows, kv)
}

enum Step {
    Rows(Vec<(i64, u32)>),
    Bulk(Vec<(i64, u32)>),
    DeleteRows(Vec<i64>),
    Kv(Vec<(u32, u32)>),
    DeleteKv(Vec<u32>),
    Flush,
    /// Creates the index (a bulk load must come before).
    Index,
}

fn steps() -> Vec<Step> {
    vec![
        Step::Bulk((5000..6000).map(|id| (id, 2)).collect()),
        Step::Index,
        Step::Rows((0..1200).map(|id| (id, 0)).collect()),
        Step::Kv((0..1500).map(|i| (i, 0)).collect()),
        Step::Flush,
        Step::Rows((600..900).map(|id| (id, 1)).collect()),
        Step::DeleteRows((0..1200).step_by(7).collect()),
        Step::Kv((0..1500).step_by(3).map(|i| (i, 1)).collect()),
        Step::DeleteKv((0..1500).step_by(11).collect()),
        Step::Flush,
        Step::Rows((1190..1210).map(|id| (id, 3)).collect()),
        Step::Flush,
        // Left in the WAL.
        Step::Rows((100..120).map(|id| (id, 4)).collect()),
        Step::DeleteKv(vec![5, 6, 7]),
    ]
}

#[test]
#[ignore = "writes the fixture: BASALT_WRITE_FIXTURE=1"]
fn write_the_fixture() {
    if std::env::var("BASALT_WRITE_FIXTURE").is_err() {
        return;
    }
    let dir = fixture();
    let _ = std::fs::remove_dir_all(&dir);
    // Nothing format 8 added (the code that wrote the fixture had none of it).
    let db = Db::open(&dir, options().string_dictionaries(false)).expect("open");
    let t = db.create_table("every_type", schema(), &["id"], TableOptions::default()).expect("create");
    let kv = db.create_keyspace("kv").expect("keyspace");
    for step in steps() {
        match step {
            Step::Rows(rows) => t.write(&batch(&rows)).expect("write"),
            Step::Bulk(rows) => drop(t.bulk_load([batch(&rows)]).expect("bulk load")),
            Step::DeleteRows(ids) => {
                let keys = RecordBatch::try_new(
                    Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)])),
                    vec![Arc::new(Int64Array::from(ids))],
                )
                .expect("keys");
                t.delete(&keys).expect("delete");
            }
            Step::Kv(puts) => puts.iter().for_each(|&(i, g)| kv.put(kv_key(i), kv_value(i, g)).expect("put")),
            Step::DeleteKv(keys) => keys.iter().for_each(|&i| kv.delete(kv_key(i)).expect("delete")),
            Step::Flush => db.flush().expect("flush"),
            Step::Index => t.create_index("by_city", &["city"], IndexOptions::default()).expect("index"),
        }
    }
    drop((t, kv));
    db.close().expect("close");
    // The lock file is made again by every open.
    let _ = std::fs::remove_file(dir.join("LOCK"));
}

fn check(db: &Db) {
    let (rows, kv_model) = model();
    let t = db.table("every_type").expect("table");
    let expected = batch(&rows.iter().map(|(&id, &g)| (id, g)).collect::<Vec<_>>());
    let scanned: Vec<RecordBatch> =
        t.scan(ScanOptions::default()).expect("scan").map(|b| b.expect("batch")).collect();
    let scanned = arrow_select::concat::concat_batches(&schema(), &scanned).expect("concat");
    assert_eq!(scanned.num_rows(), expected.num_rows());
    for c in 0..expected.num_columns() {
        assert_eq!(
            scanned.column(c).to_data(),
            expected.column(c).to_data(),
            "column {}",
            schema().field(c).name()
        );
    }
    // Point reads of every 37th id, present or not.
    for id in (0..6100).step_by(37) {
        let got = t.get(&[KeyValue::I64(id)]).expect("get");
        match rows.get(&id) {
            None => assert!(got.is_none(), "row {id} was deleted or never written"),
            Some(&g) => {
                let want = batch(&[(id, g)]);
                let got = got.expect("row");
                for c in 0..want.num_columns() {
                    assert_eq!(got.column(c).to_data(), want.column(c).to_data(), "row {id} column {c}");
                }
            }
        }
    }
    // The index agrees with the rows.
    for city in CITIES {
        let found = t
            .lookup("by_city", IndexPredicate::Eq(vec![Some(KeyValue::Str(city))]), LookupOptions::default())
            .expect("lookup");
        let want = rows
            .iter()
            .filter(|&(&id, &g)| mix(id, g) % 17 != 0 && CITIES[(mix(id, g) % 5) as usize] == city)
            .count();
        assert_eq!(found.num_rows(), want, "city {city:?}");
    }
    let kv = db.keyspace("kv").expect("keyspace");
    let mut seen = 0;
    for entry in kv.iter::<&[u8]>(..) {
        let (key, value) = entry.expect("entry");
        let i = (u64::from_be_bytes(key[..].try_into().expect("8 bytes")) / 3) as u32;
        assert_eq!(&value[..], &kv_value(i, kv_model[&i])[..], "key {i}");
        seen += 1;
    }
    assert_eq!(seen, kv_model.len());
    for i in 0..1500 {
        assert_eq!(
            kv.get(kv_key(i)).expect("get").map(|v| v.to_vec()),
            kv_model.get(&i).map(|&g| kv_value(i, g))
        );
    }
}

fn copy_of_fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for entry in std::fs::read_dir(fixture()).expect("the fixture") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).expect("copy");
    }
    dir
}

#[test]
fn format_7_files_read_as_written_and_rewrite_without_loss() {
    let dir = copy_of_fixture();
    let db = Db::open(dir.path(), options()).expect("open the fixture");
    check(&db);
    db.close().expect("close");
    // Rewritten by this version's compaction, with every compression the
    // settled files may take, each from the fixture as it was written.
    let mut sizes = Vec::new();
    for settled in [Compression::Zstd, Compression::Lz4, Compression::None] {
        let dir = copy_of_fixture();
        let db = Db::open(dir.path(), options().settled_compression(settled)).expect("open");
        db.table("every_type").expect("table").compact().expect("compact");
        db.keyspace("kv").expect("keyspace").compact_range::<&[u8]>(..).expect("compact");
        check(&db);
        sizes.push(db.table("every_type").expect("table").estimate().expect("estimate").bytes);
        db.close().expect("close");
        let db = Db::open(dir.path(), options()).expect("reopen");
        check(&db);
        db.close().expect("close");
    }
    // The settled table's files are compressed as asked: zstd saves more
    // than LZ4, which saves more than nothing.
    assert!(sizes[0] < sizes[1] && sizes[1] < sizes[2], "table bytes with zstd, lz4, none: {sizes:?}");
}
