//! SQL over a sharded store from one process (`sharded_session`): random
//! rows spread over the shards of a store answer every query as one
//! database holding them all does; a filter on the one-column key reads
//! only the shards it can meet; the version read stays while the session
//! lives, whatever commits meanwhile.

mod common;

use std::sync::Arc;

use basalt::{Db, OwnedKeyValue, ShardedStore, TableOptions};
use common::{rows, run};
use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray, UInt32Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::physical_plan::displayable;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("city", DataType::Utf8, true),
        Field::new("n", DataType::Int64, true),
    ]))
}

fn batch(ids: &[i64], rng: &mut StdRng) -> RecordBatch {
    let cities = ["Oslo", "Lima", "Pune", "Kobe"];
    let city: StringArray =
        ids.iter().map(|_| (!rng.random_bool(0.1)).then(|| cities[rng.random_range(0..4)])).collect();
    let n: Int64Array =
        ids.iter().map(|_| (!rng.random_bool(0.1)).then(|| rng.random_range(-50..50))).collect();
    RecordBatch::try_new(
        schema(),
        vec![Arc::new(Int64Array::from(ids.to_vec())), Arc::new(city), Arc::new(n)],
    )
    .expect("batch")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_store_answers_as_one_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store_dir = dir.path().join("store");
    let options = basalt::Options::default();
    let store = ShardedStore::new(&store_dir, options.clone());
    let points =
        vec![vec![OwnedKeyValue::I64(-200)], vec![OwnedKeyValue::I64(0)], vec![OwnedKeyValue::I64(300)]];
    let map = store.create("t", &schema(), &["id"], points).expect("create");
    let (_oracle_dir, oracle, single) = common::open();
    let table = oracle.create_table("t", schema(), &["id"], TableOptions::default()).expect("t");
    let mut rng = StdRng::seed_from_u64(63);
    let ids: Vec<i64> = (-600..600).filter(|_| rng.random_bool(0.6)).collect();
    let rows_batch = batch(&ids, &mut rng);
    table.write(&rows_batch).expect("oracle write");
    // Each row into its shard.
    for (i, s) in map.shards().iter().enumerate() {
        let mine: Vec<i64> = ids
            .iter()
            .copied()
            .filter(|&id| map.shard_of(&[basalt::KeyValue::I64(id)]).expect("route") == i)
            .collect();
        let db = Db::open(store_dir.join(&s.path), options.clone()).expect("shard");
        let keep: Vec<usize> =
            ids.iter().enumerate().filter(|(_, id)| mine.contains(id)).map(|(j, _)| j).collect();
        let indices = UInt32Array::from(keep.iter().map(|&j| j as u32).collect::<Vec<_>>());
        let part = datafusion::arrow::compute::take_record_batch(&rows_batch, &indices).expect("take");
        db.table("t").expect("t").write(&part).expect("shard write");
        // Flushed: a write's read-only checkpoint of a shard (below) needs
        // its WAL empty, as `ShardedDatabase.close` leaves it.
        db.flush().expect("flush");
        db.close().expect("close");
    }
    let sharded = basalt_datafusion::sharded_session(&store_dir, &options).expect("session");
    for query in [
        "SELECT * FROM t ORDER BY id",
        "SELECT count(*), sum(n), min(id), max(id) FROM t",
        "SELECT city, count(*), avg(n) FROM t GROUP BY city ORDER BY city",
        "SELECT id, n FROM t WHERE id = 17 OR id = -450 ORDER BY id",
        "SELECT id FROM t WHERE id >= -250 AND id < 10 AND n > 0 ORDER BY id",
        "SELECT id FROM t WHERE 100 < id ORDER BY id DESC LIMIT 7",
        "SELECT city FROM t WHERE id BETWEEN 290 AND 310 ORDER BY id",
        "SELECT count(*) FROM t WHERE id > 5000",
        "SELECT id FROM t WHERE city = 'Oslo' AND id < -100 ORDER BY id",
    ] {
        let got = rows(&run(&sharded, query).await);
        let want = rows(&run(&single, query).await);
        assert_eq!(got, want, "{query}");
    }
    // Pruning: an equality on the key reads one shard, a range the shards
    // it meets, a filter on another column all four.
    for (query, shards) in [
        ("SELECT * FROM t WHERE id = 17", 1),
        ("SELECT * FROM t WHERE id >= -100 AND id < 100", 2),
        ("SELECT * FROM t WHERE id >= 10 AND id < 100", 1),
        ("SELECT * FROM t WHERE id >= -300 AND id <= 305", 4),
        ("SELECT * FROM t WHERE id > 0", 2),
        ("SELECT * FROM t WHERE n = 3", 4),
        ("SELECT * FROM t WHERE id > 5 AND id < 3", 1),
    ] {
        let plan = sharded.sql(query).await.expect("plan").create_physical_plan().await.expect("physical");
        let text = displayable(plan.as_ref()).indent(true).to_string();
        let scans = text.matches("BasaltScanExec").count();
        assert_eq!(scans, shards, "{query}:\n{text}");
    }
    // The session's version stays while a write commits a new one.
    let write = store.begin_write().expect("begin");
    let next = write.next_map(None).expect("next");
    for (old, new) in map.shards().iter().zip(next.shards()) {
        let db = Db::open_read_only(store_dir.join(&old.path), options.clone()).expect("open");
        db.checkpoint(store_dir.join(&new.path)).expect("checkpoint");
        db.close().expect("close");
    }
    store.commit(write, &next).expect("commit");
    let after = rows(&run(&sharded, "SELECT count(*) FROM t").await);
    assert_eq!(after, vec![format!("{}", ids.len())]);
}
