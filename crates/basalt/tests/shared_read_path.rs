//! The point-read path that gets and a transaction's conflict check share
//! (`db/read/point.rs`): the check neither reads nor fills the row cache
//! (its entries are a table's decoded rows) and is not counted as a get;
//! a row-cache hit is not counted as a probe of the file's index. Found by
//! an outside reading of issue 57's restructuring, which sent the check
//! through the lookup: an empty "row" was cached, and the next
//! `Table::get` of the key failed with `Corruption`.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use basalt::testing::MemFs;
use basalt::{Db, KeyValue, Options, TableOptions};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("v", DataType::Int64, false),
    ]))
}

fn row(id: i64, v: i64) -> RecordBatch {
    let cols: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(vec![id])), Arc::new(Int64Array::from(vec![v]))];
    RecordBatch::try_new(schema(), cols).expect("batch")
}

fn open_with_row_cache() -> Db {
    let fs = MemFs::new();
    let opts = Options::default().fs(Arc::new(fs)).auto_compaction(false).row_cache_bytes(1 << 20);
    Db::open("/db", opts).expect("open")
}

fn value_of(t: &basalt::Table, id: i64) -> i64 {
    let got = t.get(&[KeyValue::I64(id)]).expect("get").expect("the row");
    got.column(1).as_primitive::<Int64Type>().value(0)
}

/// A commit that conflicts on a row whose newest version is in an SST.
#[test]
fn a_conflicting_commit_leaves_the_row_cache_alone() {
    let db = open_with_row_cache();
    let t = db.create_table("t", schema(), &["id"], TableOptions::default()).expect("create");
    t.write(&row(1, 10)).expect("write");
    db.flush().expect("flush");
    let mut tx = db.transaction();
    tx.put_table(&t, &row(1, 20)).expect("tx put");
    // Another commit after the snapshot, flushed to an SST.
    t.write(&row(1, 30)).expect("write");
    db.flush().expect("flush");
    let committed = tx.commit();
    assert!(matches!(committed, Err(basalt::Error::Conflict(_))), "{committed:?}");
    assert_eq!(value_of(&t, 1), 30);
}

/// A commit without a conflict: the key's newest version is older than
/// the snapshot but lies in a file holding something newer.
#[test]
fn a_committing_read_for_update_leaves_the_row_cache_alone() {
    let db = open_with_row_cache();
    let t = db.create_table("t", schema(), &["id"], TableOptions::default()).expect("create");
    t.write(&row(1, 10)).expect("write");
    let mut tx = db.transaction();
    tx.get_table_for_update(&t, &[KeyValue::I64(1)]).expect("read");
    t.write(&row(2, 99)).expect("write");
    db.flush().expect("flush"); // one SST: row 1 (old) and row 2 (after the snapshot)
    tx.commit().expect("commit");
    assert_eq!(value_of(&t, 1), 10);
    assert_eq!(value_of(&t, 2), 99);
}

#[test]
fn a_commit_is_not_a_get_and_a_row_cache_hit_is_not_a_probe() {
    let db = open_with_row_cache();
    db.put("a", "1").expect("put");
    db.flush().expect("flush");
    db.get("a").expect("get"); // fills the row cache
    let before = db.stats();
    db.get("a").expect("get"); // a row-cache hit
    let after = db.stats();
    assert_eq!(after.gets - before.gets, 1);
    assert_eq!(after.row_cache_hits - before.row_cache_hits, 1);
    assert_eq!(after.lookups_by_fences, before.lookups_by_fences, "a hit counted as a probe");
    assert_eq!(after.lookups_by_model, before.lookups_by_model, "a hit counted as a probe");

    let mut tx = db.transaction();
    tx.put("b", "2").expect("tx put");
    db.put("c", "3").expect("put");
    db.flush().expect("flush");
    let before = db.stats();
    tx.commit().expect("commit");
    let after = db.stats();
    assert_eq!(after.gets, before.gets, "a commit's conflict check counted as a get");
    assert_eq!(after.lookups_filtered, before.lookups_filtered, "a conflict check counted as a probe");
}
