//! An outside review of issue 63's sharded store and ingest: each test
//! holds a finding fixed (a placement lost by a concurrent write's commit,
//! a commit that lost rows written to a shard meanwhile, a commit thrown
//! away while a collection held the store's lock, files of another
//! database's table taken by an ingest).

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use basalt::fs::Fs;
use basalt::testing::MemFs;
use basalt::{Db, Error, Options, OwnedKeyValue, ScanOptions, ShardedStore, TableOptions};

const STORE: &str = "/store";

fn options(fs: &MemFs) -> Options {
    Options::default().fs(Arc::new(fs.clone())).auto_compaction(false)
}

fn kv_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("v", DataType::Utf8, true),
    ]))
}

fn store(fs: &MemFs) -> ShardedStore {
    let s = ShardedStore::new(STORE, options(fs));
    s.create("t", &kv_schema(), &["k"], vec![vec![OwnedKeyValue::I64(100)]]).expect("create");
    s
}

/// A write that only checkpoints each shard (no files): enough to commit.
fn checkpoint_version(fs: &MemFs, write: &basalt::StoreWrite) -> basalt::ShardMap {
    let base = write.base().expect("base").clone();
    let next = write.next_map(None).expect("next");
    for (old, new) in base.shards().iter().zip(next.shards()) {
        let from = Db::open_read_only(Path::new(STORE).join(&old.path), options(fs)).expect("open");
        from.checkpoint(Path::new(STORE).join(&new.path)).expect("checkpoint");
        from.close().expect("close");
    }
    next
}

/// `place` during a write: the write's next map was made from the base it
/// read before the placement, so its commit is a conflict, and the
/// placement stays.
#[test]
fn review_place_during_a_write_is_lost_by_its_commit() {
    let fs = MemFs::new();
    let store = store(&fs);
    let write = store.begin_write().expect("begin");
    store.place(vec![Some("node-a".into()), Some("node-b".into())]).expect("place");
    let next = checkpoint_version(&fs, &write);
    let err = store.commit(write, &next).expect_err("the map changed");
    assert!(matches!(err, Error::Conflict(_)), "{err:?}");
    let map = store.map().expect("map").expect("store");
    let nodes: Vec<Option<&str>> = map.shards().iter().map(|s| s.node.as_deref()).collect();
    assert_eq!(nodes, vec![Some("node-a"), Some("node-b")], "the placement was lost by a concurrent write");
}

/// A shard written (through its own handle) while a write ran: committing
/// the write's checkpoint-based next version would lose that row, so the
/// commit is a conflict; so is one while a shard is open for writing.
#[test]
fn review_a_shard_written_during_a_write_makes_its_commit_a_conflict() {
    let fs = MemFs::new();
    let store = store(&fs);
    let base = store.map().expect("map").expect("store");
    let write = store.begin_write().expect("begin");
    let next = checkpoint_version(&fs, &write);
    let shard = Db::open(Path::new(STORE).join(&base.shards()[1].path), options(&fs)).expect("open shard");
    let row = RecordBatch::try_new(
        kv_schema(),
        vec![Arc::new(Int64Array::from(vec![500])), Arc::new(StringArray::from(vec!["late"]))],
    )
    .expect("batch");
    shard.table("t").expect("t").write(&row).expect("write");
    let err = store.commit(write, &next).expect_err("open for writing");
    assert!(matches!(err, Error::Conflict(_)), "{err:?}");
    shard.flush().expect("flush");
    shard.close().expect("close");
    let write = store.begin_write().expect("begin");
    let next = checkpoint_version(&fs, &write);
    let shard = Db::open(Path::new(STORE).join(&base.shards()[1].path), options(&fs)).expect("open shard");
    shard.table("t").expect("t").write(&row).expect("write");
    shard.flush().expect("flush");
    shard.close().expect("close");
    let err = store.commit(write, &next).expect_err("written meanwhile");
    assert!(matches!(err, Error::Conflict(_)), "{err:?}");
    assert_eq!(store.map().expect("map").expect("store"), base, "the map stayed");
}

/// A commit while something else holds `write.lock` briefly (a
/// collection, a `place`) waits for it and commits.
#[test]
fn review_busy_commit_discards_a_write_that_did_not_conflict() {
    let fs = MemFs::new();
    let store = store(&fs);
    let write = store.begin_write().expect("begin");
    let next = checkpoint_version(&fs, &write);
    let held = fs.lock(&Path::new(STORE).join("write.lock"), Path::new(STORE)).expect("a collection's lock");
    let release = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(200));
        drop(held);
    });
    store.commit(write, &next).expect("the commit waits for the lock");
    release.join().expect("join");
    let survived = next.shards().iter().all(|s| fs.is_dir(&Path::new(STORE).join(&s.path)).unwrap_or(false));
    assert!(survived);
    assert_eq!(store.map().expect("map").expect("store"), next);
}

/// Files of another database's table (same tree id, same schema version,
/// different columns) are taken: the docs say they are refused.
#[test]
fn review_files_of_another_databases_table_are_refused() {
    let fs = MemFs::new();
    let a = Db::open("/a", options(&fs)).expect("open a");
    let ta = a.create_table("a", kv_schema(), &["k"], TableOptions::default()).expect("create a");
    let b = Db::open("/b", options(&fs)).expect("open b");
    let other = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("x", DataType::Float64, true),
    ]));
    let tb = b.create_table("b", other.clone(), &["k"], TableOptions::default()).expect("create b");
    let batch = RecordBatch::try_new(
        kv_schema(),
        vec![Arc::new(Int64Array::from(vec![1, 2, 3])), Arc::new(StringArray::from(vec!["x", "yy", "zzz"]))],
    )
    .expect("batch");
    let files =
        ta.write_sst_files("/files", b.last_seqno() + 1, &[], [Ok::<_, Error>(batch)]).expect("write files");
    let paths: Vec<_> = files.iter().map(|f| f.path.clone()).collect();
    let err =
        tb.ingest_files(&paths, (Bound::Unbounded, Bound::Unbounded)).expect_err("another table's files");
    assert!(matches!(err, Error::InvalidArgument(_)) && err.to_string().contains("columns differ"), "{err}");
    // Nothing of them went in: the table still reads (empty).
    let rows: usize =
        tb.scan(ScanOptions::default()).expect("scan").map(|b| b.expect("batch").num_rows()).sum();
    assert_eq!(rows, 0);
}
