//! Every supported Arrow type, with nulls, round-trips through a table —
//! from the memtable, from L0 after a flush, and from deeper levels after a
//! compaction and a reopen — and the key-value store reads as the table
//! `default`.

#![expect(
    clippy::from_iter_instead_of_collect,
    reason = "typed Arrow arrays read best built by from_iter here"
)]

use std::sync::Arc;

use arrow_array::types::{
    Date32Type, Date64Type, Decimal128Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
    UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, LargeBinaryArray, LargeStringArray, PrimitiveArray, RecordBatch,
    StringArray,
};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use basalt::{Db, KeyValue, Options, ScanOptions, TableOptions};

const N: usize = 300;

fn opt<T>(i: usize, v: T) -> Option<T> {
    (i % 5 != 3).then_some(v)
}

fn prim<T: arrow_array::ArrowPrimitiveType>(f: impl Fn(usize) -> T::Native) -> ArrayRef {
    Arc::new(PrimitiveArray::<T>::from_iter((0..N).map(|i| opt(i, f(i)))))
}

fn all_types() -> RecordBatch {
    let tz: Arc<str> = Arc::from("+02:00");
    let fields = vec![
        Field::new("id", DataType::Int64, false),
        Field::new("b", DataType::Boolean, true),
        Field::new("i8", DataType::Int8, true),
        Field::new("i16", DataType::Int16, true),
        Field::new("i32", DataType::Int32, true),
        Field::new("u8", DataType::UInt8, true),
        Field::new("u16", DataType::UInt16, true),
        Field::new("u32", DataType::UInt32, true),
        Field::new("u64", DataType::UInt64, true),
        Field::new("f32", DataType::Float32, true),
        Field::new("f64", DataType::Float64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("ls", DataType::LargeUtf8, true),
        Field::new("bin", DataType::Binary, true),
        Field::new("lbin", DataType::LargeBinary, true),
        Field::new("d32", DataType::Date32, true),
        Field::new("d64", DataType::Date64, true),
        Field::new("ts_s", DataType::Timestamp(TimeUnit::Second, None), true),
        Field::new("ts_ms", DataType::Timestamp(TimeUnit::Millisecond, Some(tz.clone())), true),
        Field::new("ts_us", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        Field::new("ts_ns", DataType::Timestamp(TimeUnit::Nanosecond, Some(tz.clone())), true),
        Field::new("dec", DataType::Decimal128(20, 3), true),
    ];
    let i = |i: usize| i as i64;
    let cols: Vec<ArrayRef> = vec![
        Arc::new(arrow_array::Int64Array::from_iter_values((0..N).map(|i| i as i64 * 7 - 500))),
        Arc::new(BooleanArray::from_iter((0..N).map(|i| opt(i, i % 2 == 0)))),
        prim::<Int8Type>(|i| (i % 250) as i8),
        prim::<Int16Type>(|i| i as i16 - 100),
        prim::<Int32Type>(|i| i as i32 * -3),
        prim::<UInt8Type>(|i| (i % 256) as u8),
        prim::<UInt16Type>(|i| i as u16),
        prim::<UInt32Type>(|i| i as u32 * 1000),
        prim::<UInt64Type>(|i| u64::MAX - i as u64),
        prim::<Float32Type>(|i| i as f32 * 0.25),
        prim::<Float64Type>(|i| -(i as f64) / 3.0),
        Arc::new(StringArray::from_iter((0..N).map(|i| opt(i, format!("s{i}"))))),
        Arc::new(LargeStringArray::from_iter((0..N).map(|i| opt(i, "é".repeat(i % 4))))),
        Arc::new(BinaryArray::from_iter((0..N).map(|i| opt(i, vec![0u8, i as u8, 255])))),
        Arc::new(LargeBinaryArray::from_iter((0..N).map(|i| opt(i, vec![i as u8; i % 3])))),
        prim::<Date32Type>(|i| i as i32 + 19_000),
        prim::<Date64Type>(|i| i as i64 * 86_400_000),
        prim::<TimestampSecondType>(|x| i(x) * 60),
        Arc::new(
            PrimitiveArray::<TimestampMillisecondType>::from_iter((0..N).map(|x| opt(x, i(x) * 1000)))
                .with_timezone(tz.clone()),
        ),
        prim::<TimestampMicrosecondType>(|x| i(x) * -1_000_000),
        Arc::new(
            PrimitiveArray::<TimestampNanosecondType>::from_iter(
                (0..N).map(|x| opt(x, i(x) * 1_000_000_007)),
            )
            .with_timezone(tz),
        ),
        Arc::new(
            PrimitiveArray::<Decimal128Type>::from_iter(
                (0..N).map(|x| opt(x, i128::from(i(x)) * 1_000_001 - 7)),
            )
            .with_precision_and_scale(20, 3)
            .expect("decimal"),
        ),
    ];
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).expect("batch")
}

fn scan_all(t: &basalt::Table) -> RecordBatch {
    let batches: Vec<RecordBatch> =
        t.scan(ScanOptions::default()).expect("scan").map(|b| b.expect("batch")).collect();
    arrow_select::concat::concat_batches(&t.schema(), &batches).expect("concat")
}

#[test]
fn every_type_round_trips_through_every_level() {
    let dir = tempfile::tempdir().expect("tempdir");
    let batch = all_types();
    let db = Db::open(dir.path(), Options::default()).expect("open");
    let t = db.create_table("all", batch.schema(), &["id"], TableOptions::default()).expect("create");
    t.write(&batch).expect("write");
    // Sorted by key, ids ascend already.
    assert_eq!(scan_all(&t), batch, "from the memtable");
    let row = t.get(&[KeyValue::I64(11)]).expect("get").expect("present");
    assert_eq!(row, batch.slice(73, 1), "get from the memtable");
    db.flush().expect("flush");
    assert_eq!(scan_all(&t), batch, "from L0");
    assert_eq!(
        t.get(&[KeyValue::I64(11)]).expect("get").expect("present"),
        batch.slice(73, 1),
        "get from L0"
    );
    db.compact_range::<&[u8]>(..).expect("compact");
    drop(t);
    db.close().expect("close");
    let db = Db::open(dir.path(), Options::default()).expect("reopen");
    let t = db.table("all").expect("table");
    assert_eq!(t.schema(), batch.schema(), "the schema survives a reopen, time zones included");
    assert_eq!(scan_all(&t), batch, "from a deeper level after reopen");
    assert_eq!(
        t.get(&[KeyValue::I64(11)]).expect("get").expect("present"),
        batch.slice(73, 1),
        "get, deeper"
    );
}

#[test]
fn composite_and_string_keys_order_rows_by_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    let schema = Arc::new(Schema::new(vec![
        Field::new("region", DataType::Utf8, false),
        Field::new("day", DataType::Date32, false),
        Field::new("n", DataType::Int32, true),
    ]));
    let t = db
        .create_table("events", schema.clone(), &["region", "day"], TableOptions::default())
        .expect("create");
    let b = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(vec!["eu", "us", "eu", "eu\0x", "ap"])),
            Arc::new(PrimitiveArray::<Date32Type>::from(vec![3, 1, -2, 0, 5])),
            Arc::new(arrow_array::Int32Array::from(vec![Some(1), None, Some(3), Some(4), Some(5)])),
        ],
    )
    .expect("batch");
    t.write(&b).expect("write");
    db.flush().expect("flush");
    let all = scan_all(&t);
    let regions = all.column(0).as_any().downcast_ref::<StringArray>().expect("utf8");
    let got: Vec<&str> = (0..all.num_rows()).map(|i| regions.value(i)).collect();
    assert_eq!(got, ["ap", "eu", "eu", "eu\0x", "us"], "tuple order, with the escaped NUL in place");
    // A prefix of the key as a range bound: every eu row.
    let opts = ScanOptions::default().range((
        std::ops::Bound::Included(vec![KeyValue::Str("eu")]),
        std::ops::Bound::Included(vec![KeyValue::Str("eu")]),
    ));
    let eu: usize = t.scan(opts).expect("scan").map(|b| b.expect("batch").num_rows()).sum();
    assert_eq!(eu, 2);
}

#[test]
fn the_key_value_store_is_the_default_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    db.put(b"alpha", b"1").expect("put");
    let kv = db.table("default").expect("default table");
    assert_eq!(kv.primary_key(), ["key"]);
    let b = RecordBatch::try_new(
        kv.schema(),
        vec![
            Arc::new(BinaryArray::from(vec![&b"beta"[..], &b"gamma"[..]])),
            Arc::new(BinaryArray::from(vec![&b"2"[..], &b"3"[..]])),
        ],
    )
    .expect("batch");
    kv.write(&b).expect("write rows through the table face");
    assert_eq!(db.get(b"gamma").expect("get").as_deref(), Some(&b"3"[..]), "rows are key-value entries");
    db.flush().expect("flush");
    let all = scan_all(&kv);
    assert_eq!(all.num_rows(), 3);
    let row = kv.get(&[KeyValue::Bytes(b"alpha")]).expect("get").expect("present");
    let v = row.column(1).as_any().downcast_ref::<BinaryArray>().expect("binary");
    assert_eq!(v.value(0), b"1", "a put reads back as a row");
    assert!(db.tables().contains(&"default".to_string()));
}

#[test]
fn rows_written_through_the_key_value_table_face_survive_recovery() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = Db::open(dir.path(), Options::default()).expect("open");
        let kv = db.table("default").expect("default table");
        let b = RecordBatch::try_new(
            kv.schema(),
            vec![
                Arc::new(BinaryArray::from(vec![&b"beta"[..]])),
                Arc::new(BinaryArray::from(vec![&b"2"[..]])),
            ],
        )
        .expect("batch");
        kv.write(&b).expect("write");
        // Dropped without a flush: the row is only in the WAL.
    }
    let db = Db::open(dir.path(), Options::default()).expect("reopen");
    assert_eq!(db.get(b"beta").expect("get").as_deref(), Some(&b"2"[..]), "an acknowledged row was lost");
}

/// Bytes of the SSTs under `dir`.
fn sst_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry"))
        .filter(|e| e.path().extension().is_some_and(|x| x == "sst"))
        .map(|e| e.metadata().expect("metadata").len())
        .sum()
}

/// Integer, date and timestamp columns stored packed (`pack_integers`, the
/// default) read back as stored plain: every row by key, whole scans,
/// projections and filtered scans (zone maps are of the values, not of
/// their packing), after a flush and after a compaction and a reopen; and
/// the files are smaller.
#[test]
fn packed_integer_columns_read_as_plain_ones() {
    let batch = all_types();
    let dirs = [tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir")];
    let open = |dir: &std::path::Path, pack: bool| {
        Db::open(dir, Options::default().pack_integers(pack)).expect("open")
    };
    let mut sizes = Vec::new();
    for (dir, pack) in dirs.iter().zip([true, false]) {
        let db = open(dir.path(), pack);
        let t = db.create_table("all", batch.schema(), &["id"], TableOptions::default()).expect("create");
        t.write(&batch).expect("write");
        db.flush().expect("flush");
        db.compact_range::<&[u8]>(..).expect("compact");
        drop(t);
        db.close().expect("close");
        sizes.push(sst_bytes(dir.path()));
    }
    assert!(sizes[0] < sizes[1], "packed files take {} bytes, plain ones {}", sizes[0], sizes[1]);
    for reopened_with in [true, false] {
        let packed = open(dirs[0].path(), reopened_with);
        let plain = open(dirs[1].path(), reopened_with);
        let (tp, tq) = (packed.table("all").expect("table"), plain.table("all").expect("table"));
        assert_eq!(scan_all(&tp), batch, "packed, scanned");
        for row in 0..N {
            let key = [KeyValue::I64(row as i64 * 7 - 500)];
            let got = tp.get(&key).expect("get").expect("present");
            assert_eq!(got, batch.slice(row, 1), "packed, row {row} by key");
        }
        for (column, op, literal) in [
            ("i16", basalt::CmpOp::Gt, Arc::new(arrow_array::Int16Array::from(vec![50])) as ArrayRef),
            ("u64", basalt::CmpOp::LtEq, Arc::new(arrow_array::UInt64Array::from(vec![u64::MAX - 100]))),
            ("i32", basalt::CmpOp::Lt, Arc::new(arrow_array::Int32Array::from(vec![-600]))),
        ] {
            let filter = basalt::Filter::all(vec![basalt::Predicate::new(column, op, literal)]);
            let scan = |t: &basalt::Table| -> Vec<RecordBatch> {
                let opts = ScanOptions::default()
                    .filter(Some(filter.clone()))
                    .projection(Some(["id", "i16", "i32", "u64"].map(String::from).to_vec()));
                t.scan(opts).expect("scan").map(|b| b.expect("batch")).collect()
            };
            let (a, b) = (scan(&tp), scan(&tq));
            let rows = |v: &[RecordBatch]| v.iter().map(RecordBatch::num_rows).sum::<usize>();
            assert!(rows(&a) > 0, "{column} {op:?}: the filter selects rows");
            assert_eq!(
                arrow_select::concat::concat_batches(&a[0].schema(), &a).expect("concat"),
                arrow_select::concat::concat_batches(&b[0].schema(), &b).expect("concat"),
                "{column} {op:?}: packed and plain select the same rows"
            );
        }
    }
}
