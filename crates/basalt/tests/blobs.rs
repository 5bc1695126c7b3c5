//! Blob files (`Options::blob_value_bytes_min`): where values go, that
//! every read path finds them, that compactions move the live values out
//! of mostly-garbage files and delete emptied ones, that damage is
//! reported naming the blob file, and that tables are not affected. The
//! crash, fault and corruption tests run blob files too (their options
//! turn them on at random; `corruption.rs` sweeps a blob fixture).

mod common;

use std::path::Path;
use std::sync::Arc;

use basalt::testing::MemFs;
use basalt::{Db, Error, Options, ScanOptions, TableOptions};
use common::{Model, contents, rng, run_seeded};
use rand::Rng;

const DB: &str = "/db";

fn options(fs: &MemFs) -> Options {
    Options::default()
        .fs(Arc::new(fs.clone()))
        .blob_value_bytes_min(100)
        .auto_compaction(false)
        .memtable_bytes_max(1 << 20)
}

fn files_with(fs: &MemFs, extension: &str) -> Vec<String> {
    fs.file_names(Path::new(DB))
        .into_iter()
        .filter(|n| Path::new(n).extension().is_some_and(|e| e == extension))
        .collect()
}

fn value(i: usize, round: usize, len: usize) -> Vec<u8> {
    let seed = format!("{round}:{i}:");
    seed.bytes().cycle().take(len).collect()
}

#[test]
fn values_from_the_threshold_on_live_in_blob_files_and_every_read_path_finds_them() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).expect("open");
    let mut model = Model::new();
    // Below, at and above the threshold, and one large value.
    for (i, len) in [(0, 99), (1, 100), (2, 101), (3, 0), (4, 70_000), (5, 5_000)] {
        let key = format!("key{i}").into_bytes();
        db.put(&key, value(i, 0, len)).expect("put");
        model.insert(key, value(i, 0, len));
    }
    db.flush().expect("flush");
    assert_eq!(files_with(&fs, "blob").len(), 1, "one blob file per flush");
    let stats = db.stats();
    assert_eq!(stats.blob_files, 1);
    assert_eq!(stats.blob_live_bytes, 100 + 101 + 70_000 + 5_000, "only values >= 100 bytes");
    let check = |db: &Db, model: &Model| {
        for (k, v) in model {
            assert_eq!(db.get(k).expect("get").as_deref(), Some(v.as_slice()), "get {k:?}");
            let len = db.get_with(k, <[u8]>::len).expect("get_with");
            assert_eq!(len, Some(v.len()), "get_with {k:?}");
        }
        assert_eq!(&contents(db), model, "forward iteration");
        let reverse: Vec<(Vec<u8>, Vec<u8>)> = db
            .iter_rev::<&[u8]>(..)
            .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<Result<_, _>>()
            .expect("reverse");
        let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().rev().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(reverse, want, "reverse iteration");
        let got: Vec<Option<usize>> =
            db.multi_get(model.keys()).into_iter().map(|r| r.expect("multi_get").map(|v| v.len())).collect();
        assert_eq!(got, model.values().map(|v| Some(v.len())).collect::<Vec<_>>(), "multi_get");
    };
    check(&db, &model);
    // A snapshot keeps reading the first versions after overwrites are
    // flushed and compacted.
    let snapshot = db.snapshot();
    let before = model.clone();
    for i in [1, 4] {
        let key = format!("key{i}").into_bytes();
        db.put(&key, value(i, 1, 300)).expect("overwrite");
        model.insert(key, value(i, 1, 300));
    }
    db.delete(b"key5").expect("delete");
    model.remove(&b"key5"[..]);
    db.compact_range::<&[u8]>(..).expect("compact");
    check(&db, &model);
    for (k, v) in &before {
        let got = snapshot.get(k).expect("snapshot get");
        assert_eq!(got.as_deref(), Some(v.as_slice()), "snapshot {k:?}");
    }
    drop(snapshot);
    db.close().expect("close");
    let db = Db::open(DB, options(&fs)).expect("reopen");
    check(&db, &model);
    // Unflushed values recovered from the WAL also go to a blob file.
    db.put(b"wal", value(9, 0, 1_000)).expect("put");
    model.insert(b"wal".to_vec(), value(9, 0, 1_000));
    let blobs_before = db.stats().blob_files;
    drop(db);
    let db = Db::open(DB, options(&fs)).expect("reopen after a WAL");
    assert_eq!(db.stats().blob_files, blobs_before + 1, "recovery wrote the WAL's value to a blob file");
    check(&db, &model);
}

/// Overwrites make a blob file mostly garbage; once a compaction has
/// dropped the shadowed versions, the next compaction over those keys
/// moves the values still live to a new file, and the old one is deleted.
#[test]
fn compactions_move_live_values_out_of_mostly_garbage_blob_files_and_delete_them() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).expect("open");
    let key = |i: usize| format!("key{i:04}").into_bytes();
    let mut model = Model::new();
    for i in 0..200 {
        db.put(key(i), value(i, 0, 1_000)).expect("put");
        model.insert(key(i), value(i, 0, 1_000));
    }
    db.flush().expect("flush");
    let first = files_with(&fs, "blob");
    assert_eq!(first.len(), 1);
    // 70% of the values overwritten: after the compaction drops the old
    // versions, 70% of the first file is garbage.
    for i in (0..200).filter(|i| i % 10 < 7) {
        db.put(key(i), value(i, 1, 1_000)).expect("overwrite");
        model.insert(key(i), value(i, 1, 1_000));
    }
    db.compact_range::<&[u8]>(..).expect("compact");
    let stats = db.stats();
    assert_eq!(stats.blob_live_bytes, 200 * 1_000, "one live version per key is pointed to");
    assert!(files_with(&fs, "blob").contains(&first[0]), "the first file still holds 30% live values");
    // One more write and compaction over the keys: the live 30% move.
    db.put(key(0), value(0, 2, 1_000)).expect("put");
    model.insert(key(0), value(0, 2, 1_000));
    db.compact_range::<&[u8]>(..).expect("compact again");
    db.wait_for_background_work().expect("settled");
    let now = files_with(&fs, "blob");
    assert!(!now.contains(&first[0]), "the mostly-garbage file was deleted: {now:?}");
    assert_eq!(&contents(&db), &model);
    let stats = db.stats();
    assert_eq!(stats.blob_files, now.len(), "every blob file on disk is live: {now:?}");
    assert!(
        stats.blob_file_bytes < 2 * stats.blob_live_bytes + 4096,
        "garbage bounded: {} bytes on disk for {} live",
        stats.blob_file_bytes,
        stats.blob_live_bytes
    );
    db.close().expect("close");
    let db = Db::open(DB, options(&fs)).expect("reopen");
    assert_eq!(&contents(&db), &model);
}

/// With `blob_gc_garbage_percent` 100 nothing moves, and a file whose every
/// value is shadowed or deleted is deleted by the compaction that drops
/// the last pointer into it.
#[test]
fn a_blob_file_without_live_values_is_deleted_without_moving_anything() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs).blob_gc_garbage_percent(100)).expect("open");
    for i in 0..50 {
        db.put(format!("k{i:03}"), value(i, 0, 500)).expect("put");
    }
    db.flush().expect("flush");
    let first = files_with(&fs, "blob");
    for i in 0..50 {
        if i % 2 == 0 {
            db.delete(format!("k{i:03}")).expect("delete");
        } else {
            db.put(format!("k{i:03}"), value(i, 1, 500)).expect("overwrite");
        }
    }
    db.compact_range::<&[u8]>(..).expect("compact");
    db.wait_for_background_work().expect("settled");
    let now = files_with(&fs, "blob");
    assert!(!now.contains(&first[0]), "the dead file was deleted: {now:?}");
    assert_eq!(now.len(), 1);
    assert_eq!(db.stats().blob_live_bytes, 25 * 500);
}

#[test]
fn a_damaged_value_is_corruption_naming_the_blob_file_and_the_record() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).expect("open");
    db.put(b"a", value(0, 0, 400)).expect("put");
    db.put(b"b", value(1, 0, 400)).expect("put");
    db.flush().expect("flush");
    db.close().expect("close");
    let name = files_with(&fs, "blob").pop().expect("a blob file");
    let path = Path::new(DB).join(&name);
    let mut bytes = fs.read_file(&path).expect("read");
    // The second record starts after the first (4-byte length, value,
    // 4-byte checksum); damage a byte of its value.
    let second = 4 + 400 + 4;
    bytes[second + 4 + 17] ^= 0x20;
    fs.write_file_synced(&path, &bytes).expect("write");
    let db = Db::open(DB, options(&fs)).expect("the damage is in a value: open succeeds");
    assert_eq!(db.get(b"a").expect("the other value reads").as_deref(), Some(&value(0, 0, 400)[..]));
    for err in [db.get(b"b").expect_err("damaged"), db.iter_all().find_map(Result::err).expect("scan error")]
    {
        match &err {
            Error::Corruption { file, offset, .. } => {
                assert_eq!(file.file_name().and_then(|n| n.to_str()), Some(name.as_str()), "{err}");
                assert_eq!(*offset, second as u64, "{err}");
            }
            other => panic!("expected corruption, got {other}"),
        }
    }
    let err = basalt::inspect::verify_blob_files(&db).expect_err("verify finds it");
    assert!(err.is_corruption(), "{err}");
    drop(db);
    // A blob file cut short is refused at open, naming it.
    fs.write_file_synced(&path, &bytes[..bytes.len() - 1]).expect("write");
    let err = Db::open(DB, options(&fs)).expect_err("refused");
    assert!(err.is_corruption() && err.to_string().contains(&name), "{err}");
}

#[test]
fn tables_keep_their_columns_in_their_ssts() {
    use basalt::arrow_array::{BinaryArray, Int64Array, RecordBatch};
    use basalt::arrow_schema::{DataType, Field, Schema};
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs).blob_value_bytes_min(1)).expect("open");
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("payload", DataType::Binary, false),
    ]));
    let t = db.create_table("t", schema.clone(), &["id"], TableOptions::default()).expect("create");
    let big = vec![7u8; 10_000];
    let batch = RecordBatch::try_new(
        schema,
        vec![Arc::new(Int64Array::from(vec![1, 2])), Arc::new(BinaryArray::from(vec![&big[..], &big[..]]))],
    )
    .expect("batch");
    t.write(&batch).expect("write");
    db.flush().expect("flush");
    assert!(files_with(&fs, "blob").is_empty(), "no blob file for a table");
    assert_eq!(db.stats().blob_files, 0);
}

#[test]
fn a_garbage_percent_outside_1_to_100_is_refused() {
    for bad in [0, 101] {
        let fs = MemFs::new();
        let err = Db::open(DB, options(&fs).blob_gc_garbage_percent(bad)).expect_err("refused");
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert!(err.to_string().contains("blob_gc_garbage_percent"), "{err}");
        assert!(fs.file_names(Path::new("/")).is_empty(), "created files");
    }
}

/// Random overwrites, deletes, flushes, compactions (automatic and
/// manual) and reopens with random thresholds and garbage percentages:
/// the contents always match the model, no blob file is left on disk
/// that the version does not hold, and every live blob file verifies.
/// (How much garbage remains depends on which SSTs compactions touch: a
/// blob file's values move only when a compaction reads an SST pointing
/// into it, as in `RocksDB`.)
#[test]
fn random_overwrites_keep_the_contents_and_bound_the_garbage() {
    run_seeded("random_overwrites_keep_the_contents_and_bound_the_garbage", 6, |seed| {
        let mut rng = rng(seed);
        let fs = MemFs::new();
        let percent = rng.random_range(1..=100);
        let opts = Options::default()
            .fs(Arc::new(fs.clone()))
            .blob_value_bytes_min(rng.random_range(1..600))
            .blob_gc_garbage_percent(percent)
            .memtable_bytes_max(rng.random_range(8_000..64_000))
            .sst_bytes_target(rng.random_range(2_000..20_000))
            .level1_bytes_target(rng.random_range(10_000..60_000))
            .auto_compaction(rng.random_bool(0.7));
        let mut db = Db::open(DB, opts.clone()).expect("open");
        let mut model = Model::new();
        for step in 0..1_500 {
            let key = format!("k{:03}", rng.random_range(0..120)).into_bytes();
            match rng.random_range(0..100) {
                0..70 => {
                    let v = value(step, seed as usize, rng.random_range(0..1_500));
                    db.put(&key, &v).expect("put");
                    model.insert(key, v);
                }
                70..85 => {
                    db.delete(&key).expect("delete");
                    model.remove(&key);
                }
                85..92 => {
                    let got = db.get(&key).expect("get");
                    assert_eq!(got.as_deref(), model.get(&key).map(Vec::as_slice), "seed {seed} step {step}");
                }
                92..96 => db.flush().expect("flush"),
                96..99 => db.compact_range::<&[u8]>(..).expect("compact"),
                _ => {
                    db.close().expect("close");
                    db = Db::open(DB, opts.clone()).expect("reopen");
                }
            }
        }
        assert_eq!(contents(&db), model, "seed {seed}");
        db.compact_range::<&[u8]>(..).expect("compact");
        db.wait_for_background_work().expect("settled");
        let stats = db.stats();
        assert_eq!(stats.blob_files, files_with(&fs, "blob").len(), "seed {seed}: a blob file left on disk");
        basalt::inspect::verify_blob_files(&db).expect("blob files verify");
        assert_eq!(contents(&db), model, "seed {seed}");
        assert_eq!(face_contents(&db, ScanOptions::default()), model, "seed {seed}: the table face");
    });
}

/// The default keyspace read through its table face (what SQL and Python
/// scan).
fn face_contents(db: &Db, opts: ScanOptions<'_>) -> Model {
    use arrow_array::cast::AsArray;
    let mut out = Model::new();
    for batch in db.table("default").expect("face").scan(opts).expect("scan") {
        let batch = batch.expect("batch");
        let (keys, values) = (batch.column(0).as_binary::<i32>(), batch.column(1).as_binary::<i32>());
        for i in 0..batch.num_rows() {
            out.insert(keys.value(i).to_vec(), values.value(i).to_vec());
        }
    }
    out
}

/// Values in blob files reach every read of the key-value table face:
/// whole scans, key ranges, filters on the value, projections, snapshots,
/// in memtables, after flushes, compactions and a reopen (the face used to
/// skip them: `outside_review_2.rs`).
#[test]
fn the_table_face_reads_blob_values_through_every_path() {
    use arrow_array::BinaryArray;
    use basalt::{CmpOp, Filter, KeyValue, Predicate};
    let fs = MemFs::new();
    let mut db = Db::open(DB, options(&fs)).expect("open");
    let mut model = Model::new();
    for i in 0..300 {
        let v = value(i, 0, if i % 3 == 0 { 20 } else { 150 + i });
        db.put(format!("k{i:03}"), &v).expect("put");
        model.insert(format!("k{i:03}").into_bytes(), v);
    }
    for state in ["memtable", "flushed", "overwritten", "compacted", "reopened"] {
        match state {
            "flushed" => db.flush().expect("flush"),
            "overwritten" => {
                for i in (0..300).step_by(7) {
                    let v = value(i, 1, 400);
                    db.put(format!("k{i:03}"), &v).expect("put");
                    model.insert(format!("k{i:03}").into_bytes(), v);
                }
                db.flush().expect("flush");
            }
            "compacted" => db.compact_range::<&[u8]>(..).expect("compact"),
            "reopened" => {
                db.close().expect("close");
                db = Db::open(DB, options(&fs)).expect("reopen");
            }
            _ => {}
        }
        if state != "memtable" {
            assert!(!files_with(&fs, "blob").is_empty(), "{state}: values live in blob files");
        }
        assert_eq!(face_contents(&db, ScanOptions::default()), model, "{state}: whole face");
        let bounds = (
            std::ops::Bound::Included(vec![KeyValue::Bytes(b"k100")]),
            std::ops::Bound::Excluded(vec![KeyValue::Bytes(b"k200")]),
        );
        let range: Model =
            model.range(b"k100".to_vec()..b"k200".to_vec()).map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(face_contents(&db, ScanOptions::default().range(bounds)), range, "{state}: key range");
        let long = model.values().find(|v| v.len() > 150).expect("a long value").clone();
        let filter = Filter::all(vec![Predicate::new(
            "value",
            CmpOp::Eq,
            Arc::new(BinaryArray::from(vec![long.as_slice()])),
        )]);
        let found = face_contents(&db, ScanOptions::default().filter(Some(filter)));
        let want: Model =
            model.iter().filter(|(_, v)| **v == long).map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(found, want, "{state}: a filter on the value");
        let values_only: usize = db
            .table("default")
            .expect("face")
            .scan(ScanOptions::default().projection(Some(vec!["value".into()])))
            .expect("scan")
            .map(|b| b.expect("batch").num_rows())
            .sum();
        assert_eq!(values_only, model.len(), "{state}: projection");
    }
}
