//! What a query planner asks of a table: `Table::split_range` must cut any
//! key range (whole, prefix or partial bounds) into disjoint parts whose
//! scans, one after the other, give exactly the rows of the whole range,
//! and `Table::estimate` must count at least every live row. Random tables
//! with many SSTs across levels and rows left in memtables; a failure
//! prints its seed (`BASALT_SEED=…`).

mod common;

use std::ops::Bound;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::{Int32Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use basalt::testing::MemFs;
use basalt::{Db, KeyValue, KeyValueRange, OwnedKeyValue, ScanOptions, Table, TableOptions};
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
