//! `ShardedStore`'s life cycle over RANDOM schemas, as Ray's sink drives
//! it: a store is created; writes begin against a version, write files at
//! the write's seqno cut at the split points, make each shard's next
//! version (a checkpoint of the current one, then an ingest of its files)
//! and commit. The store must read as an oracle database that took every
//! committed write; a write whose base moved is refused (`Conflict`) and
//! changes nothing; an aborted or crashed write leaves nothing after a
//! collection, and a collection never takes what a live write is making.
//!
//! A failure prints its seed; `BASALT_SEED=<seed>` replays it.

mod common;

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use basalt::testing::MemFs;
use basalt::{
    Db, Error, KeyValue, Options, ShardMap, ShardedStore, StoreWrite, TableOptions, split_points_from_sample,
};
use common::schema_gen::{Cell, Shape, TableSpec, batch_of};
use common::table_oracle::OracleKey;
use rand::Rng;
use rand::rngs::StdRng;

const STORE: &str = "/store";

fn options(fs: &MemFs) -> Options {
    Options::default().fs(Arc::new(fs.clone())).auto_compaction(false)
}

/// Every row of the store, shard after shard.
fn store_rows(fs: &MemFs, map: &ShardMap) -> Vec<Vec<Cell>> {
    let mut rows = Vec::new();
    for s in map.shards() {
        let db = Db::open_read_only(Path::new(STORE).join(&s.path), options(fs)).expect("open shard");
        rows.extend(common::scan_rows(&db.table(map.table()).expect("table"), None));
        db.close().expect("close");
    }
    rows
}

fn shard_dirs(fs: &MemFs) -> Vec<String> {
    use basalt::fs::Fs;
    let mut names: Vec<String> =
        fs.list(Path::new(STORE)).expect("list").into_iter().filter(|n| n.starts_with("shard-")).collect();
    names.sort();
    names
}

/// Makes `write`'s next version from `batches`: files written at the
/// write's seqno and cut at the split points, each shard's current
/// version checkpointed and its files ingested.
fn make_version(fs: &MemFs, write: &StoreWrite, batches: &[RecordBatch]) -> ShardMap {
    let base = write.base().expect("an existing store").clone();
    let next = write.next_map(None).expect("next map");
    let template =
        Db::open_read_only(Path::new(STORE).join(&base.shards()[0].path), options(fs)).expect("open");
    let splits: Vec<Vec<KeyValue<'_>>> = base
        .shards()
        .iter()
        .skip(1)
        .map(|s| s.lower.as_ref().expect("bound").iter().map(basalt::OwnedKeyValue::as_value).collect())
        .collect();
    let files = template
        .table(base.table())
        .expect("table")
        .write_sst_files(
            write.staging_dir().join("files"),
            write.seqno(),
            &splits,
            batches.iter().cloned().map(Ok::<_, Error>),
        )
        .expect("write files");
    template.close().expect("close");
    for (i, (old, new)) in base.shards().iter().zip(next.shards()).enumerate() {
        let from = Db::open_read_only(Path::new(STORE).join(&old.path), options(fs)).expect("open");
        from.checkpoint(Path::new(STORE).join(&new.path)).expect("checkpoint");
        from.close().expect("close");
        let db = Db::open(Path::new(STORE).join(&new.path), options(fs)).expect("open new");
        let mine: Vec<PathBuf> = files.iter().filter(|f| f.range == i).map(|f| f.path.clone()).collect();
        let range = (
            splits
                .get(i.wrapping_sub(1))
                .filter(|_| i > 0)
                .map_or(Bound::Unbounded, |k| Bound::Included(k.clone())),
            splits.get(i).map_or(Bound::Unbounded, |k| Bound::Excluded(k.clone())),
        );
        db.table(base.table()).expect("table").ingest_files(&mine, range).expect("ingest");
        db.close().expect("close");
    }
    next
}

fn random_batches(spec: &TableSpec, rng: &mut StdRng) -> Vec<RecordBatch> {
    (0..rng.random_range(1..4))
        .map(|_| {
            let n = rng.random_range(1..80);
            let rows: Vec<Vec<Cell>> = (0..n).map(|_| spec.random_row(rng)).collect();
            batch_of(&spec.schema, &rows)
        })
        .collect()
}

#[test]
fn committed_writes_read_as_an_oracle_and_refused_ones_change_nothing() {
    common::run_seeded("committed_writes_read_as_an_oracle_and_refused_ones_change_nothing", 25, |seed| {
        let mut rng = common::rng(seed);
        let spec = TableSpec::random(&mut rng, Shape { columns: (1, 5), key_only: false });
        let fs = MemFs::new();
        let store = ShardedStore::new(STORE, options(&fs));
        let key_fields: Vec<arrow_schema::Field> =
            spec.key.iter().map(|&k| spec.schema.field(k).clone()).collect();
        let sample: Vec<Vec<basalt::OwnedKeyValue>> = (0..rng.random_range(0..50))
            .map(|_| spec.random_key(&mut rng).iter().map(|c| c.key_value().to_owned_value()).collect())
            .collect();
        let parts = rng.random_range(1..5);
        let points = split_points_from_sample(&key_fields, &sample, parts).expect("split points");
        assert!(points.len() < parts.max(1), "{points:?}");
        let keys = spec.key_names();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let map = store.create("t", &spec.schema, &keys, points).expect("create");
        assert!(store.create("t", &spec.schema, &keys, Vec::new()).is_err(), "created twice");
        let oracle_db = Db::open("/oracle", options(&fs)).expect("oracle");
        let oracle =
            oracle_db.create_table("t", spec.schema.clone(), &keys, TableOptions::default()).expect("t");
        assert_eq!(store.map().expect("map"), Some(map));
        for round in 0..rng.random_range(1..4) {
            let batches = random_batches(&spec, &mut rng);
            let write = store.begin_write().expect("begin");
            // Another write begun at the same version commits first half the time.
            let rival = rng.random_bool(0.3).then(|| store.begin_write().expect("begin rival"));
            let next = make_version(&fs, &write, &batches);
            if let Some(rival) = rival {
                let rival_batches = random_batches(&spec, &mut rng);
                let rival_next = make_version(&fs, &rival, &rival_batches);
                store.commit(rival, &rival_next).expect("rival commits");
                for b in &rival_batches {
                    oracle.write(b).expect("oracle");
                }
                let before = store.map().expect("map");
                let dirs = shard_dirs(&fs);
                let err = store.commit(write, &next).expect_err("base moved");
                assert!(matches!(err, Error::Conflict(_)), "round {round}: {err}");
                assert_eq!(store.map().expect("map"), before, "a refused commit changed the map");
                // The loser's own directories went with it; the current
                // version's stayed.
                let loser: Vec<&String> = next.shards().iter().map(|s| &s.path).collect();
                let kept: Vec<String> = dirs.into_iter().filter(|d| !loser.contains(&d)).collect();
                assert_eq!(
                    shard_dirs(&fs),
                    kept,
                    "a refused commit removed the current version's directories"
                );
                assert_eq!(store.collect().expect("collect"), 0, "nothing left to collect");
            } else {
                store.commit(write, &next).expect("commit");
                for b in &batches {
                    oracle.write(b).expect("oracle");
                }
            }
            let map = store.map().expect("map").expect("a store");
            let mut expected = common::scan_rows(&oracle, None);
            expected.sort_by_key(|r| OracleKey(spec.key_of(r)));
            let got = store_rows(&fs, &map);
            assert!(got == expected, "round {round}: the store differs from the oracle");
            // Only the current version's directories are left.
            let mut named: Vec<String> = map.shards().iter().map(|s| s.path.clone()).collect();
            named.sort();
            assert_eq!(shard_dirs(&fs), named, "round {round}");
        }
        oracle_db.close().expect("close");
    });
}

#[test]
fn collections_take_crashed_writes_and_spare_live_ones() {
    let fs = MemFs::new();
    let mut rng = common::rng(3);
    let spec = TableSpec::random(&mut rng, Shape { columns: (1, 3), key_only: false });
    let keys = spec.key_names();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let store = ShardedStore::new(STORE, options(&fs));
    let split = spec.random_key(&mut rng);
    let point: Vec<basalt::OwnedKeyValue> = split.iter().map(|c| c.key_value().to_owned_value()).collect();
    let map = store.create("t", &spec.schema, &keys, vec![point]).expect("create");
    // A write that crashed after making its next version's directories.
    let crashed = store.begin_write().expect("begin");
    let crashed_next = make_version(&fs, &crashed, &random_batches(&spec, &mut rng));
    let crashed_dirs: Vec<String> = crashed_next.shards().iter().map(|s| s.path.clone()).collect();
    drop(crashed);
    // A live one that made its directories too.
    let live = store.begin_write().expect("begin");
    let live_next = make_version(&fs, &live, &random_batches(&spec, &mut rng));
    let removed = store.collect().expect("collect");
    assert_eq!(removed, 1 + crashed_dirs.len(), "the crashed write's staging and shards");
    let dirs = shard_dirs(&fs);
    assert!(crashed_dirs.iter().all(|d| !dirs.contains(d)), "{dirs:?}");
    assert!(live_next.shards().iter().all(|s| dirs.contains(&s.path)), "the live write's shards stay");
    // An aborted write leaves nothing of its own.
    let aborted = store.begin_write().expect("begin");
    let aborted_next = make_version(&fs, &aborted, &random_batches(&spec, &mut rng));
    store.abort(aborted, Some(&aborted_next)).expect("abort");
    assert!(aborted_next.shards().iter().all(|s| !shard_dirs(&fs).contains(&s.path)));
    store.commit(live, &live_next).expect("the live write commits");
    let mut named: Vec<String> = live_next.shards().iter().map(|s| s.path.clone()).collect();
    named.sort();
    assert_eq!(shard_dirs(&fs), named);
    assert_ne!(map, live_next);
    assert_eq!(store.collect().expect("collect"), 0);
}

#[test]
fn split_points_from_a_sample_follow_the_engines_order() {
    let key = [arrow_schema::Field::new("x", arrow_schema::DataType::Float64, false)];
    // Negative values and NaN: Python's order and the bytes' differ.
    let sample: Vec<Vec<basalt::OwnedKeyValue>> = [3.0, -1.0, f64::NAN, -7.5, 0.0, 2.0, -0.0, 9.0]
        .iter()
        .map(|&v| vec![basalt::OwnedKeyValue::F64(v)])
        .collect();
    let points = split_points_from_sample(&key, &sample, 4).expect("points");
    let values: Vec<f64> = points
        .iter()
        .map(|p| match p[0] {
            basalt::OwnedKeyValue::F64(v) => v,
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(values.len(), 3, "{values:?}");
    assert!(values.windows(2).all(|w| w[0] < w[1]), "ascending: {values:?}");
    let map = ShardMap::new("t", &key, points).expect("a valid map");
    assert_eq!(map.shards().len(), 4);
    let wrong = vec![vec![basalt::OwnedKeyValue::I64(1)]];
    assert!(split_points_from_sample(&key, &wrong, 2).is_err(), "a key of another type");
}

#[test]
fn a_pinned_version_outlives_commits_until_its_read_ends() {
    let fs = MemFs::new();
    let mut rng = common::rng(5);
    let spec = TableSpec::random(&mut rng, Shape { columns: (1, 3), key_only: false });
    let keys = spec.key_names();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let store = ShardedStore::new(STORE, options(&fs));
    store.create("t", &spec.schema, &keys, Vec::new()).expect("create");
    let first = store.begin_write().expect("begin");
    let v2 = make_version(&fs, &first, &random_batches(&spec, &mut rng));
    store.commit(first, &v2).expect("commit");
    let pin = store.pin().expect("pin");
    assert_eq!(pin.map(), &v2);
    let pinned_rows = store_rows(&fs, pin.map());
    // Two commits while the read runs: version 2's directories stay.
    for _ in 0..2 {
        let write = store.begin_write().expect("begin");
        let next = make_version(&fs, &write, &random_batches(&spec, &mut rng));
        store.commit(write, &next).expect("commit");
        store.collect().expect("collect");
        assert_eq!(store_rows(&fs, pin.map()), pinned_rows, "the pinned version changed under its read");
    }
    let v4 = store.map().expect("map").expect("store");
    assert_eq!(v4.version(), 4);
    let dirs = shard_dirs(&fs);
    assert!(pin.map().shards().iter().all(|s| dirs.contains(&s.path)), "{dirs:?}");
    // Version 3 was pinned by nobody: gone at its replacement.
    assert_eq!(dirs.len(), pin.map().shards().len() + v4.shards().len(), "{dirs:?}");
    drop(pin);
    store.collect().expect("collect");
    let mut named: Vec<String> = v4.shards().iter().map(|s| s.path.clone()).collect();
    named.sort();
    assert_eq!(shard_dirs(&fs), named, "the read ended: its version is collected");
}

#[test]
fn placement_names_a_node_per_shard_and_survives_writes() {
    let fs = MemFs::new();
    let mut rng = common::rng(9);
    let spec = TableSpec::random(&mut rng, Shape { columns: (1, 3), key_only: false });
    let keys = spec.key_names();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let store = ShardedStore::new(STORE, options(&fs));
    let point: Vec<basalt::OwnedKeyValue> =
        spec.random_key(&mut rng).iter().map(|c| c.key_value().to_owned_value()).collect();
    store.create("t", &spec.schema, &keys, vec![point]).expect("create");
    let placed = store.place(vec![Some("node-a".into()), Some("node-b".into())]).expect("place");
    assert_eq!(placed.version(), 1);
    assert!(store.place(vec![None]).is_err(), "a node per shard");
    let write = store.begin_write().expect("begin");
    let next = make_version(&fs, &write, &random_batches(&spec, &mut rng));
    store.commit(write, &next).expect("commit");
    let map = store.map().expect("map").expect("store");
    let nodes: Vec<Option<&str>> = map.shards().iter().map(|s| s.node.as_deref()).collect();
    assert_eq!(nodes, vec![Some("node-a"), Some("node-b")], "the next version keeps the placement");
}
