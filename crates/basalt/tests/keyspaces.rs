//! Named keyspaces: independent key spaces sharing one WAL, atomic across
//! keyspaces in one batch, durable through reopens and crashes, each kind
//! of tree in its own namespace, and refused where a handle is in use or
//! belongs to another database.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema};
use basalt::testing::{CrashMode, MemFs};
use basalt::{Db, Error, Options, TableOptions, WriteBatch, WriteOptions};

fn open(fs: &MemFs) -> Db {
    Db::open("/db", Options::default().fs(Arc::new(fs.clone()))).expect("open")
}

fn all(it: basalt::DbIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec()))).collect::<basalt::Result<_>>().expect("iterate")
}

#[test]
fn keyspaces_hold_their_own_keys_through_flushes_reopens_and_crashes() {
    let fs = MemFs::new();
    let db = open(&fs);
    let a = db.create_keyspace("a").expect("create a");
    let b = db.create_keyspace("b").expect("create b");
    for i in 0..300u32 {
        let key = format!("k{i:03}");
        db.put(&key, format!("default {i}")).expect("put");
        a.put(&key, format!("a {i}")).expect("put");
        if i % 2 == 0 {
            b.put(&key, format!("b {i}")).expect("put");
        }
        if i == 150 {
            db.flush().expect("flush");
        }
    }
    a.delete("k007").expect("delete");
    let check = |db: &Db| {
        let a = db.keyspace("a").expect("a");
        let b = db.keyspace("b").expect("b");
        assert_eq!(db.get("k007").expect("get").as_deref(), Some(&b"default 7"[..]));
        assert_eq!(a.get("k007").expect("get"), None, "deleted in a only");
        assert_eq!(a.get("k008").expect("get").as_deref(), Some(&b"a 8"[..]));
        assert_eq!(b.get("k009").expect("get"), None, "b never had odd keys");
        assert_eq!(all(a.iter_all_keys()).len(), 299);
        assert_eq!(all(b.prefix("k1")).len(), 50);
        let back: Vec<_> = all(b.iter_rev::<&[u8]>(..)).into_iter().map(|(k, _)| k).collect();
        assert_eq!(back.first().map(Vec::as_slice), Some(&b"k298"[..]));
        assert_eq!(db.keyspaces(), vec!["default".to_string(), "a".to_string(), "b".to_string()]);
    };
    check(&db);
    db.sync_wal().expect("sync");
    drop((a, b));
    db.close().expect("close");
    let db = open(&fs);
    check(&db);
    db.flush().expect("flush");
    drop(db);
    let crashed = fs.crash(CrashMode::DropUnsynced, 3);
    let db = open(&crashed);
    check(&db);
}

/// `iter_all` for a keyspace, as `Db::iter_all`.
trait IterAll {
    fn iter_all_keys(&self) -> basalt::DbIterator;
}

impl IterAll for basalt::Keyspace {
    fn iter_all_keys(&self) -> basalt::DbIterator {
        self.iter::<&[u8]>(..)
    }
}

#[test]
fn one_batch_commits_atomically_across_keyspaces_tables_and_the_default() {
    let fs = MemFs::new();
    let db = open(&fs);
    let a = db.create_keyspace("a").expect("create");
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    let t = db.create_table("t", schema.clone(), &["id"], TableOptions::default()).expect("table");
    let rows = arrow_array::RecordBatch::try_new(
        schema,
        vec![Arc::new(arrow_array::Int64Array::from(vec![1, 2, 3])) as arrow_array::ArrayRef],
    )
    .expect("rows");
    let mut batch = WriteBatch::new();
    batch.put("d", "1");
    batch.put_keyspace(&a, "x", "2").expect("put");
    batch.put_table(&t, &rows).expect("rows");
    db.write_opt(batch, &WriteOptions::default().sync(true)).expect("write");
    // An unsynced second batch may be lost by a machine crash, but only whole.
    let mut batch = WriteBatch::new();
    batch.delete("d");
    batch.put_keyspace(&a, "y", "3").expect("put");
    db.write(batch).expect("write");
    drop((a, t));
    drop(db);
    for seed in 0..8 {
        let db = open(&fs.crash(CrashMode::DropUnsynced, seed));
        let a = db.keyspace("a").expect("a");
        assert_eq!(a.get("x").expect("get").as_deref(), Some(&b"2"[..]), "seed {seed}");
        let t = db.table("t").expect("t");
        assert_eq!(
            t.scan(basalt::ScanOptions::default())
                .expect("scan")
                .map(|b| b.expect("batch").num_rows())
                .sum::<usize>(),
            3
        );
        let second = a.get("y").expect("get").is_some();
        assert_eq!(
            db.get("d").expect("get").is_none(),
            second,
            "seed {seed}: the second batch is whole or absent"
        );
    }
}

#[test]
fn each_kind_of_tree_has_its_own_namespace() {
    let db = open(&MemFs::new());
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    let _table = db.create_table("shared", schema, &["id"], TableOptions::default()).expect("table");
    let ks = db.create_keyspace("shared").expect("a keyspace may share a table's name");
    ks.put("k", "v").expect("put");
    assert!(matches!(db.create_keyspace("shared"), Err(Error::InvalidArgument(_))));
    assert!(matches!(db.create_keyspace("default"), Err(Error::InvalidArgument(_))));
    assert!(matches!(db.create_keyspace(""), Err(Error::InvalidArgument(_))));
    assert!(matches!(db.keyspace("missing"), Err(Error::InvalidArgument(_))));
    assert_eq!(db.tables(), vec!["default".to_string(), "shared".to_string()]);
    assert_eq!(db.keyspaces(), vec!["default".to_string(), "shared".to_string()]);
    assert_eq!(db.keyspace("default").expect("default").get("k").expect("get"), None);
}

#[test]
fn a_keyspace_in_use_is_not_dropped_and_a_dropped_one_is_gone() {
    let fs = MemFs::new();
    let db = open(&fs);
    let ks = db.create_keyspace("gone").expect("create");
    ks.put("k", "v").expect("put");
    db.flush().expect("flush");
    assert!(matches!(db.drop_keyspace("gone"), Err(Error::Busy(_))), "a handle is alive");
    let iter = ks.iter::<&[u8]>(..);
    drop(ks);
    assert!(matches!(db.drop_keyspace("gone"), Err(Error::Busy(_))), "an iterator is alive");
    drop(iter);
    assert!(matches!(db.drop_keyspace("default"), Err(Error::InvalidArgument(_))));
    db.drop_keyspace("gone").expect("drop");
    assert!(matches!(db.keyspace("gone"), Err(Error::InvalidArgument(_))));
    let again = db.create_keyspace("gone").expect("the name is free again");
    assert_eq!(again.get("k").expect("get"), None, "a new keyspace starts empty");
    drop(again);
    db.close().expect("close");
    let db = open(&fs);
    assert_eq!(db.keyspace("gone").expect("reopened").get("k").expect("get"), None);
}

#[test]
fn a_keyspace_of_another_database_is_refused_and_a_closed_one_errs() {
    let db1 = open(&MemFs::new());
    let db2 = open(&MemFs::new());
    let k1 = db1.create_keyspace("k").expect("create");
    let k2 = db2.create_keyspace("k").expect("create");
    let mut batch = WriteBatch::new();
    batch.put_keyspace(&k1, "a", "1").expect("put");
    assert!(matches!(batch.put_keyspace(&k2, "a", "2"), Err(Error::InvalidArgument(_))));
    assert_eq!(batch.len(), 1, "the refused write left the batch as it was");
    assert!(matches!(db2.write(batch), Err(Error::InvalidArgument(_))), "the batch belongs to db1");
    drop(db1);
    assert!(matches!(k1.get("a"), Err(Error::Closed(_))));
    assert!(matches!(k1.put("a", "1"), Err(Error::Closed(_))));
}
