//! Range deletes through every face of the engine: reads at once and at
//! snapshots, reopen and recovery, whole files dropped and tombstones
//! collected, transactions' conflicts, secondary indexes, the change feed
//! and a key's history. The random model tests (`model.rs`,
//! `table_model.rs`, `index_model.rs`) mix them with every other write.

mod common;

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use basalt::testing::MemFs;
use basalt::{
    CHANGE_OP, Db, Direction, Error, HistoryOptions, HistoryWindow, IndexPredicate, KeyValue, LookupOptions,
    Options, ScanOptions, TableOptions, WriteBatch,
};

fn options(fs: &MemFs) -> Options {
    Options::default().fs(Arc::new(fs.clone())).memtable_bytes_max(64 << 10).sst_bytes_target(16 << 10)
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

fn sst_bytes(db: &Db) -> u64 {
    db.stats().levels.iter().map(|l| l.bytes).sum()
}

fn keys(db: &Db) -> Vec<Vec<u8>> {
    db.iter::<&[u8]>(..).map(|kv| kv.expect("iter").0.to_vec()).collect()
}

#[test]
fn a_range_delete_hides_its_keys_at_once_and_snapshots_keep_them() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).expect("open");
    for i in 0..2000 {
        db.put(key(i), vec![b'v'; 100]).expect("put");
    }
    db.flush().expect("flush");
    for i in 2000..2100 {
        db.put(key(i), b"mem").expect("put");
    }
    let before = db.snapshot();
    db.delete_range(key(100)..key(2050)).expect("delete_range");
    // Written after the tombstone: visible.
    db.put(key(500), b"again").expect("put");
    assert_eq!(db.get(key(99)).expect("get").as_deref(), Some(&[b'v'; 100][..]));
    assert_eq!(db.get(key(100)).expect("get"), None);
    assert_eq!(db.get(key(2049)).expect("get"), None);
    assert_eq!(db.get(key(2050)).expect("get").as_deref(), Some(&b"mem"[..]));
    assert_eq!(db.get(key(500)).expect("get").as_deref(), Some(&b"again"[..]));
    let want: Vec<Vec<u8>> = (0..100).chain(std::iter::once(500)).chain(2050..2100).map(key).collect();
    assert_eq!(keys(&db), want);
    let rev: Vec<Vec<u8>> = db.iter_rev::<&[u8]>(..).map(|kv| kv.expect("iter").0.to_vec()).collect();
    assert_eq!(rev, want.iter().rev().cloned().collect::<Vec<_>>());
    // The snapshot taken before sees every key.
    assert_eq!(before.get(key(1000)).expect("snapshot get").as_deref(), Some(&[b'v'; 100][..]));
    assert_eq!(before.iter::<&[u8]>(.., Direction::Forward).count(), 2100);
    // Held across a flush and a compaction, it still does.
    db.flush().expect("flush");
    db.compact_range::<&[u8]>(..).expect("compact");
    assert_eq!(before.iter::<&[u8]>(.., Direction::Forward).count(), 2100);
    assert_eq!(keys(&db), want);
    drop(before);
}

#[test]
fn compaction_drops_covered_files_whole_and_then_the_tombstone() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).expect("open");
    for i in 0..20_000 {
        db.put(key(i), vec![b'v'; 100]).expect("put");
    }
    db.compact_range::<&[u8]>(..).expect("compact");
    let full = sst_bytes(&db);
    db.delete_range(key(1000)..key(19_000)).expect("delete_range");
    assert_eq!(db.stats().range_tombstones, 1);
    db.flush().expect("flush");
    db.wait_for_background_work().expect("background");
    let stats = db.stats();
    assert!(stats.files_dropped_by_range_deletes > 0, "{stats}");
    assert!(sst_bytes(&db) < full / 2, "{} of {full} bytes left", sst_bytes(&db));
    // The files at the range's edges still hold covered keys: the
    // tombstone stays until a compaction rewrites them.
    db.compact_range::<&[u8]>(..).expect("compact");
    let stats = db.stats();
    assert_eq!(stats.range_tombstones, 0, "{stats}");
    assert!(sst_bytes(&db) < full / 8, "{} of {full} bytes left", sst_bytes(&db));
    let want: Vec<Vec<u8>> = (0..1000).chain(19_000..20_000).map(key).collect();
    assert_eq!(keys(&db), want);
    drop(db);
    let db = Db::open("/db", options(&fs)).expect("reopen");
    assert_eq!(keys(&db), want);
}

#[test]
fn a_snapshot_keeps_the_files_a_range_delete_covers() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).expect("open");
    for i in 0..5000 {
        db.put(key(i), vec![b'v'; 100]).expect("put");
    }
    db.compact_range::<&[u8]>(..).expect("compact");
    let snap = db.snapshot();
    db.delete_range::<&[u8]>(..).expect("delete_range");
    db.flush().expect("flush");
    db.wait_for_background_work().expect("background");
    db.compact_range::<&[u8]>(..).expect("compact");
    assert_eq!(db.stats().files_dropped_by_range_deletes, 0);
    assert_eq!(snap.iter::<&[u8]>(.., Direction::Forward).count(), 5000);
    assert_eq!(keys(&db), Vec::<Vec<u8>>::new());
    drop(snap);
    db.compact_range::<&[u8]>(..).expect("compact");
    let stats = db.stats();
    assert_eq!((stats.range_tombstones, keys(&db).len()), (0, 0), "{stats}");
}

#[test]
fn range_deletes_survive_reopen_from_the_wal_and_from_the_manifest() {
    let fs = MemFs::new();
    {
        let db = Db::open("/db", options(&fs)).expect("open");
        for i in 0..300 {
            db.put(key(i), b"x").expect("put");
        }
        db.flush().expect("flush");
        db.delete_range(key(10)..key(20)).expect("delete_range");
        let mut batch = WriteBatch::new();
        batch.put(key(15), b"back");
        batch.delete_range(key(200)..);
        batch.put(key(250), b"after");
        db.write(batch).expect("batch");
    }
    let want: Vec<Vec<u8>> =
        (0..10).chain(std::iter::once(15)).chain(20..200).chain(std::iter::once(250)).map(key).collect();
    // Replayed from the WAL.
    let db = Db::open("/db", options(&fs)).expect("reopen");
    assert_eq!(keys(&db), want);
    db.flush().expect("flush");
    drop(db);
    // Read from the MANIFEST.
    let db = Db::open("/db", options(&fs)).expect("reopen");
    assert_eq!(keys(&db), want);
    assert_eq!(db.get(key(15)).expect("get").as_deref(), Some(&b"back"[..]));
}

#[test]
fn empty_and_reversed_ranges_write_nothing_and_long_bounds_are_refused() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs).key_bytes_max(16)).expect("open");
    db.put(b"b", b"1").expect("put");
    let seqno = db.stats().last_seqno;
    db.delete_range(&b"c"[..]..&b"a"[..]).expect("reversed");
    db.delete_range(&b"b"[..]..&b"b"[..]).expect("empty");
    assert_eq!(db.stats().last_seqno, seqno, "nothing was written");
    assert_eq!(db.get(b"b").expect("get").as_deref(), Some(&b"1"[..]));
    // A bound may be a key at the limit and the byte after it.
    db.delete_range(&[b'z'; 16][..]..=&[b'z'; 16][..]).expect("bound at the limit");
    let refused = db.delete_range(&[b'z'; 18][..]..);
    assert!(matches!(refused, Err(Error::InvalidArgument(_))), "{refused:?}");
}

#[test]
fn a_range_delete_conflicts_with_a_transaction_that_read_a_key_it_covers() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).expect("open");
    db.put(b"m", b"1").expect("put");
    let mut txn = db.transaction();
    assert!(txn.get_for_update(b"m").expect("read").is_some());
    txn.put(b"other", b"2").expect("put");
    db.delete_range(&b"a"[..]..&b"z"[..]).expect("delete_range");
    assert!(matches!(txn.commit(), Err(Error::Conflict(_))));
    // A transaction cannot hold a range delete.
    let mut txn = db.transaction();
    let mut batch = WriteBatch::new();
    batch.delete_range(&b"a"[..]..);
    assert!(matches!(txn.write(batch), Err(Error::InvalidArgument(_))));
}

fn people(db: &Db) -> basalt::Table {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("city", DataType::Utf8, true),
    ]));
    db.create_table("people", schema, &["id"], TableOptions::default()).expect("table")
}

fn rows(table: &basalt::Table, ids: std::ops::Range<i64>) -> RecordBatch {
    let cities: Vec<String> = ids.clone().map(|i| format!("c{}", i % 7)).collect();
    RecordBatch::try_new(
        table.schema(),
        vec![Arc::new(Int64Array::from_iter_values(ids)), Arc::new(StringArray::from(cities))],
    )
    .expect("batch")
}

fn ids(table: &basalt::Table) -> Vec<i64> {
    let mut out = Vec::new();
    for batch in table.scan(ScanOptions::default()).expect("scan") {
        let batch = batch.expect("batch");
        let col = batch.column(0).as_any().downcast_ref::<Int64Array>().expect("ids");
        out.extend(col.values().iter().copied());
    }
    out
}

#[test]
fn a_table_range_delete_takes_its_rows_and_their_index_entries() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).expect("open");
    let table = people(&db);
    table.write(&rows(&table, 0..500)).expect("write");
    db.flush().expect("flush");
    table.create_index("by_city", &["city"], basalt::IndexOptions::default()).expect("index");
    table.write(&rows(&table, 500..600)).expect("write");
    let lo = [KeyValue::I64(100)];
    let hi = [KeyValue::I64(550)];
    table.delete_range((Bound::Included(lo.to_vec()), Bound::Excluded(hi.to_vec()))).expect("delete_range");
    let want: Vec<i64> = (0..100).chain(550..600).collect();
    assert_eq!(ids(&table), want);
    assert_eq!(table.count_rows(&(Bound::Unbounded, Bound::Unbounded), None).expect("count"), 150);
    let found = table
        .lookup("by_city", IndexPredicate::Eq(vec![Some(KeyValue::Str("c3"))]), LookupOptions::default())
        .expect("lookup");
    let expected = want.iter().filter(|i| *i % 7 == 3).count();
    assert_eq!(found.num_rows(), expected);
    drop(table);
    db.close().expect("close");
    let db = Db::open("/db", options(&fs)).expect("reopen");
    let table = db.table("people").expect("table");
    assert_eq!(ids(&table), want);
    db.flush().expect("flush");
    table.compact().expect("compact");
    assert_eq!(ids(&table), want);
}

#[test]
fn the_feed_and_a_keys_history_show_range_deletes() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).expect("open");
    let table = people(&db);
    table.set_history(HistoryWindow::duration(std::time::Duration::from_secs(3600))).expect("history");
    table.write(&rows(&table, 0..10)).expect("write");
    table
        .delete_range((Bound::Included(vec![KeyValue::I64(3)]), Bound::Included(vec![KeyValue::I64(5)])))
        .expect("delete_range");
    let feed = table.changes(0, 100).expect("changes");
    let ops =
        feed.column_by_name(CHANGE_OP).expect("op").as_any().downcast_ref::<StringArray>().expect("str");
    assert_eq!(ops.value(ops.len() - 1), "delete_range");
    let start = feed.column_by_name(basalt::CHANGE_RANGE_START).expect("start");
    assert!(start.is_valid(ops.len() - 1) && start.is_null(0));
    let history = table.history(&[KeyValue::I64(4)], HistoryOptions::default()).expect("history");
    assert_eq!(history.num_rows(), 2, "the put and the range delete");
    let deleted = history.column_by_name(basalt::HISTORY_DELETED).expect("deleted");
    let deleted = deleted.as_any().downcast_ref::<arrow_array::BooleanArray>().expect("bool");
    assert!(deleted.value(0) && !deleted.value(1));
    let untouched = table.history(&[KeyValue::I64(6)], HistoryOptions::default()).expect("history");
    assert_eq!(untouched.num_rows(), 1);

    let ks = db.create_keyspace("events").expect("keyspace");
    ks.set_history(HistoryWindow::duration(std::time::Duration::from_secs(3600))).expect("history");
    let from = db.stats().last_seqno;
    ks.put(b"a", b"1").expect("put");
    ks.delete_range(&b"a"[..]..&b"b"[..]).expect("delete_range");
    let changes = ks.changes(from, 10).expect("changes");
    let last = changes.last().expect("a change");
    assert_eq!((last.key.as_ref(), last.value.is_none()), (&b"a"[..], true));
    assert_eq!(last.range_end, Some(Bound::Excluded(basalt::Bytes::from_static(b"b"))));
    let versions = ks.history(b"a", HistoryOptions::default()).expect("history");
    assert_eq!(versions.iter().map(|v| v.value.is_some()).collect::<Vec<_>>(), vec![false, true]);
}

#[test]
fn a_synced_range_delete_survives_a_crash() {
    // A range delete is one WAL record: a crash keeps it whole or not at
    // all, and a synced one always.
    let fs = MemFs::new();
    let path = Path::new("/db");
    let db = Db::open(path, options(&fs)).expect("open");
    for i in 0..100 {
        db.put(key(i), b"x").expect("put");
    }
    db.delete_range_opt(key(10)..key(90), &basalt::WriteOptions::default().sync(true)).expect("delete");
    let crashed = fs.crash(basalt::testing::CrashMode::DropUnsynced, 7);
    drop(db);
    let db = Db::open(path, options(&crashed)).expect("reopen");
    let want: Vec<Vec<u8>> = (0..10).chain(90..100).map(key).collect();
    assert_eq!(keys(&db), want);
}
