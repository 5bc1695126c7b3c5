//! What a query planner asks of a table: `Table::split_range` must cut any
//! key range (whole, prefix or partial bounds) into disjoint parts whose
//! scans, one after the other, give exactly the rows of the whole range,
//! and `Table::estimate` must count at least every live row. Random tables
//! with many SSTs across levels and rows left in memtables; a failure
//! prints its seed (`BASALT_SEED=…`).

mod common;

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::{Int32Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use basalt::testing::MemFs;
use basalt::{Db, KeyValue, KeyValueRange, OwnedKeyValue, ScanOptions, Table, TableOptions};
use common::schema_gen::{Cell, Shape, TableSpec, batch_of, rows_of};
use rand::Rng;
use rand::rngs::StdRng;

/// Rows of a scan of `range` as (group, name) keys.
fn keys_in(table: &Table, range: KeyValueRange<'_>) -> Vec<(i32, String)> {
    let mut out = Vec::new();
    for batch in table.scan(ScanOptions::default().range(range)).expect("scan") {
        let batch = batch.expect("batch");
        let groups = batch.column(0).as_primitive::<Int32Type>();
        let names = batch.column(1).as_string::<i32>();
        out.extend((0..batch.num_rows()).map(|i| (groups.value(i), names.value(i).to_string())));
    }
    out
}

fn random_bound<'a>(rng: &mut StdRng, names: &'a [String]) -> Bound<Vec<KeyValue<'a>>> {
    let group = KeyValue::I32(rng.random_range(-2..42));
    let name = KeyValue::Str(&names[rng.random_range(0..names.len())]);
    match rng.random_range(0..5) {
        0 => Bound::Unbounded,
        1 => Bound::Included(vec![group]),
        2 => Bound::Excluded(vec![group]),
        3 => Bound::Included(vec![group, name]),
        _ => Bound::Excluded(vec![group, name]),
    }
}

fn owned_to_borrowed(bound: &Bound<Vec<OwnedKeyValue>>) -> Bound<Vec<KeyValue<'_>>> {
    match bound {
        Bound::Included(t) => Bound::Included(t.iter().map(OwnedKeyValue::as_value).collect()),
        Bound::Excluded(t) => Bound::Excluded(t.iter().map(OwnedKeyValue::as_value).collect()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

#[test]
fn split_ranges_cover_their_range_exactly() {
    common::run_seeded("split_ranges_cover_their_range_exactly", 8, |seed| {
        let mut rng = common::rng(seed);
        let fs = MemFs::new();
        let db = Db::open("/db", common::small_options(&fs, &mut rng)).expect("open");
        let schema = Arc::new(Schema::new(vec![
            Field::new("group", DataType::Int32, false),
            Field::new("name", DataType::Utf8, false),
            Field::new("v", DataType::Int32, true),
        ]));
        let table = db
            .create_table("t", schema.clone(), &["group", "name"], TableOptions::default())
            .expect("create");
        let names: Vec<String> = (0..60).map(|i| format!("n{:03}", i * 7 % 60)).collect();
        let mut live = std::collections::BTreeSet::new();
        for _ in 0..rng.random_range(5..40) {
            let rows = rng.random_range(1..200);
            let groups: Vec<i32> = (0..rows).map(|_| rng.random_range(0..40)).collect();
            let picked: Vec<&str> =
                (0..rows).map(|_| names[rng.random_range(0..names.len())].as_str()).collect();
            for (g, n) in groups.iter().zip(&picked) {
                live.insert((*g, (*n).to_string()));
            }
            let batch = RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Int32Array::from(groups.clone())),
                    Arc::new(StringArray::from(picked)),
                    Arc::new(Int32Array::from(groups)),
                ],
            )
            .expect("batch");
            table.write(&batch).expect("write");
        }
        let estimate = table.estimate().expect("estimate");
        assert!(estimate.rows >= live.len() as u64, "seed {seed}: {estimate:?} < {} rows", live.len());
        assert!(estimate.bytes > 0);
        for _ in 0..40 {
            let range = (random_bound(&mut rng, &names), random_bound(&mut rng, &names));
            let parts = rng.random_range(1..7);
            let whole = keys_in(&table, range.clone());
            let split = table.split_range(&range, parts).expect("split");
            assert!(
                !split.is_empty() && split.len() <= parts,
                "seed {seed}: {} parts of {parts}",
                split.len()
            );
            let mut joined = Vec::new();
            for part in &split {
                let keys = keys_in(&table, (owned_to_borrowed(&part.0), owned_to_borrowed(&part.1)));
                if let (Some(last), Some(first)) = (joined.last(), keys.first()) {
                    assert!(last < first, "seed {seed}: parts overlap or are out of order");
                }
                joined.extend(keys);
            }
            assert_eq!(joined, whole, "seed {seed}: parts of {range:?}");
        }
        db.flush().expect("flush");
        let split = table.split_range(&(Bound::Unbounded, Bound::Unbounded), 4).expect("split");
        let files: usize = db.stats().levels.iter().map(|l| l.files).sum();
        assert!(split.len() <= 4);
        // Tiny SSTs: many files, so a whole-table split has several parts.
        assert!(files < 4 || split.len() > 1, "seed {seed}: {files} files, {} parts", split.len());
    });
}

#[test]
fn split_range_refuses_bounds_of_the_wrong_type() {
    let fs = MemFs::new();
    let db = Db::open("/db", basalt::Options::default().fs(Arc::new(fs))).expect("open");
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int32, false)]));
    let table = db.create_table("t", schema, &["id"], TableOptions::default()).expect("create");
    let err = table
        .split_range(&(Bound::Included(vec![KeyValue::I64(1)]), Bound::Unbounded), 2)
        .expect_err("an i64 bound of an i32 key");
    assert!(matches!(err, basalt::Error::SchemaMismatch(_)), "{err}");
    db.drop_table("t").expect_err("a handle is open");
    drop(table);
    db.drop_table("t").expect("drop");
}

/// Zone order of two non-null cells of one column: floats by IEEE 754
/// totalOrder (as Arrow compares them), strings and bytes bytewise, the
/// rest by value.
fn zone_cmp(a: &Cell, b: &Cell) -> Ordering {
    match (a, b) {
        (Cell::F64(x), Cell::F64(y)) => f64::from_bits(*x).total_cmp(&f64::from_bits(*y)),
        (Cell::F32(x), Cell::F32(y)) => f32::from_bits(*x).total_cmp(&f32::from_bits(*y)),
        _ => a.cmp(b),
    }
}

fn cell_of(value: &OwnedKeyValue) -> Cell {
    match value {
        OwnedKeyValue::Bool(v) => Cell::Bool(*v),
        OwnedKeyValue::I8(v) => Cell::I8(*v),
        OwnedKeyValue::I16(v) => Cell::I16(*v),
        OwnedKeyValue::I32(v) => Cell::I32(*v),
        OwnedKeyValue::I64(v) => Cell::I64(*v),
        OwnedKeyValue::U8(v) => Cell::U8(*v),
        OwnedKeyValue::U16(v) => Cell::U16(*v),
        OwnedKeyValue::U32(v) => Cell::U32(*v),
        OwnedKeyValue::U64(v) => Cell::U64(*v),
        OwnedKeyValue::F32(v) => Cell::F32(v.to_bits()),
        OwnedKeyValue::F64(v) => Cell::F64(v.to_bits()),
        OwnedKeyValue::Bytes(v) => Cell::Bin(v.clone()),
        OwnedKeyValue::Str(v) => Cell::Str(v.clone()),
    }
}

fn is_nan(cell: &Cell) -> bool {
    match cell {
        Cell::F32(bits) => f32::from_bits(*bits).is_nan(),
        Cell::F64(bits) => f64::from_bits(*bits).is_nan(),
        _ => false,
    }
}

/// Checks `Table::column_estimates` against the live rows: bounds contain
/// every live value and null counts are at least the live nulls; once
/// the SSTs hold nothing but the live rows (`exact`), they are
/// the live rows' own, and a bound may be unknown only where the
/// documentation says so.
fn check_column_estimates(spec: &TableSpec, table: &Table, live: &[Vec<Cell>], exact: bool, seed: u64) {
    let estimates = table.column_estimates().expect("column estimates");
    for (index, field) in spec.schema.fields().iter().enumerate() {
        let what = format!("seed {seed}, column {} ({}), exact {exact}", field.name(), field.data_type());
        let estimate = &estimates[index];
        let values: Vec<&Cell> = live.iter().map(|row| &row[index]).filter(|c| **c != Cell::Null).collect();
        let nulls = (live.len() - values.len()) as u64;
        let null_count = estimate.null_count.unwrap_or_else(|| panic!("{what}: null count unknown"));
        if exact {
            assert_eq!(null_count, nulls, "{what}");
        } else {
            assert!(null_count >= nulls, "{what}: {null_count} < {nulls} nulls");
        }
        let true_min = values.iter().copied().min_by(|a, b| zone_cmp(a, b));
        let true_max = values.iter().copied().max_by(|a, b| zone_cmp(a, b));
        for (bound, truth, below) in [(&estimate.min, true_min, true), (&estimate.max, true_max, false)] {
            let (Some(bound), Some(truth)) = (bound, truth) else { continue };
            let bound = cell_of(bound);
            let order = zone_cmp(&bound, truth);
            if exact {
                assert_eq!(order, Ordering::Equal, "{what}: bound {bound:?}, live {truth:?}");
            } else if below {
                assert_ne!(order, Ordering::Greater, "{what}: min {bound:?} above live {truth:?}");
            } else {
                assert_ne!(order, Ordering::Less, "{what}: max {bound:?} below live {truth:?}");
            }
        }
        let may_be_unknown = values.is_empty()
            || nulls > 0
            || matches!(field.data_type(), DataType::Decimal128(_, _))
            || values.iter().any(|c| c.var_len() > 64 || is_nan(c));
        if exact && !may_be_unknown {
            assert!(estimate.min.is_some() && estimate.max.is_some(), "{what}: {estimate:?}");
        }
    }
}

fn live_rows(table: &Table) -> Vec<Vec<Cell>> {
    let mut rows = Vec::new();
    for batch in table.scan(ScanOptions::default()).expect("scan") {
        rows.extend(rows_of(&batch.expect("batch")));
    }
    rows
}

#[test]
fn column_estimates_bound_the_live_values() {
    common::run_seeded("column_estimates_bound_the_live_values", 16, |seed| {
        let mut rng = common::rng(seed);
        let spec = TableSpec::random(&mut rng, Shape { columns: (1, 8), key_only: false });
        let fs = MemFs::new();
        let db = Db::open("/db", common::small_options(&fs, &mut rng)).expect("open");
        let keys = spec.key_names();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let table =
            db.create_table("t", spec.schema.clone(), &keys, TableOptions::default()).expect("create");
        for _ in 0..rng.random_range(1..12) {
            let rows: Vec<Vec<Cell>> =
                (0..rng.random_range(1..80)).map(|_| spec.random_row(&mut rng)).collect();
            table.write(&batch_of(&spec.schema, &rows)).expect("write");
            if rng.random_bool(0.3) {
                let doomed: Vec<Vec<Cell>> =
                    (0..rng.random_range(1..10)).map(|_| spec.random_key(&mut rng)).collect();
                table.delete(&batch_of(&spec.key_schema(), &doomed)).expect("delete");
            }
            if rng.random_bool(0.5) {
                db.flush().expect("flush");
            }
        }
        // Rows in a memtable: nothing is known of any column.
        table.write(&batch_of(&spec.schema, &[spec.random_row(&mut rng)])).expect("write");
        let unknown = table.column_estimates().expect("column estimates");
        assert!(
            unknown.iter().all(|c| c.null_count.is_none() && c.min.is_none() && c.max.is_none()),
            "seed {seed}: {unknown:?}"
        );
        db.flush().expect("flush");
        let live = live_rows(&table);
        check_column_estimates(&spec, &table, &live, false, seed);
        table.compact().expect("compact");
        // Exact once the SSTs hold the live rows alone (a compaction may
        // keep a tombstone: then bounds only).
        let stored = table.estimate().expect("estimate").rows;
        check_column_estimates(&spec, &table, &live, stored == live.len() as u64, seed);
    });
}
