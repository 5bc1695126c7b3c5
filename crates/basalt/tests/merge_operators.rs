//! Merge operators: counters and other folds written without a read,
//! checked against a model through every read (gets, iterators, the table
//! face, snapshots, transactions), flushes, compactions, range deletes and
//! reopens; concurrent writers equal the sequential fold; a missing
//! operator or a bad operand is a clear error that loses nothing.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use basalt::testing::MemFs;
use basalt::{Db, Direction, Error, MergeError, MergeOperator, Options, ReadOptions, WriteBatch};
use common::{rng, run_seeded, small_options};
use rand::Rng;

fn word(n: i64) -> [u8; 8] {
    n.to_le_bytes()
}

fn as_i64(v: &[u8]) -> i64 {
    i64::from_le_bytes(v.try_into().expect("8 bytes"))
}

fn options(fs: &MemFs) -> Options {
    Options::default().fs(Arc::new(fs.clone())).memtable_bytes_max(32 << 10)
}

#[test]
fn counters_fold_through_every_read_and_survive_flush_compaction_and_reopen() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).expect("open");
    db.keyspace("default").expect("default").set_merge_operator("add_i64").expect("bind");
    db.put(b"base", word(100)).expect("put");
    for i in 0..500 {
        db.merge(format!("c{}", i % 7), word(1)).expect("merge");
        db.merge(b"base", word(2)).expect("merge");
        if i == 250 {
            db.flush().expect("flush");
        }
    }
    let snap = db.snapshot();
    db.merge(b"base", word(5)).expect("merge");
    assert_eq!(as_i64(&db.get(b"base").expect("get").expect("value")), 1105);
    assert_eq!(as_i64(&snap.get(b"base").expect("get").expect("value")), 1100);
    let counts: Vec<(Vec<u8>, i64)> =
        db.iter::<&[u8]>(..).map(|kv| kv.expect("iter")).map(|(k, v)| (k.to_vec(), as_i64(&v))).collect();
    assert_eq!(counts.len(), 8);
    assert_eq!(counts.iter().filter(|(k, _)| k.starts_with(b"c")).map(|(_, n)| n).sum::<i64>(), 500);
    // Reverse iteration folds too.
    let rev = db.iter_opt::<&[u8]>(.., Direction::Reverse, &ReadOptions::default()).count();
    assert_eq!(rev, 8);
    db.flush().expect("flush");
    db.compact_range::<&[u8]>(..).expect("compact");
    assert_eq!(as_i64(&snap.get(b"base").expect("get").expect("value")), 1100);
    drop(snap);
    db.compact_range::<&[u8]>(..).expect("compact");
    assert_eq!(as_i64(&db.get(b"base").expect("get").expect("value")), 1105);
    // The table face reads folded values too.
    let face = db.table("default").expect("table face");
    let key = [basalt::KeyValue::Bytes(b"base")];
    let row = face.get(&key).expect("get").expect("row");
    let value = row.column(1).as_any().downcast_ref::<arrow_array::BinaryArray>().expect("binary").value(0);
    assert_eq!(as_i64(value), 1105);
    drop(face);
    db.close().expect("close");
    let db = Db::open("/db", options(&fs)).expect("reopen");
    assert_eq!(as_i64(&db.get(b"base").expect("get").expect("value")), 1105);
    db.merge(b"base", word(-5)).expect("merge after reopen");
    assert_eq!(as_i64(&db.get(b"base").expect("get").expect("value")), 1100);
}

#[test]
fn merges_need_an_operator_and_operands_it_can_fold() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).expect("open");
    assert!(matches!(db.merge(b"k", word(1)), Err(Error::InvalidArgument(_))));
    let ks = db.create_keyspace("counts").expect("keyspace");
    assert!(matches!(ks.set_merge_operator("no_such_op"), Err(Error::InvalidArgument(_))));
    ks.set_merge_operator("add_u64").expect("bind");
    ks.set_merge_operator("add_u64").expect("again: nothing changes");
    assert!(matches!(ks.set_merge_operator("append"), Err(Error::InvalidArgument(_))));
    assert!(matches!(ks.merge(b"k", b"seven"), Err(Error::InvalidArgument(_))));
    assert_eq!(ks.get(b"k").expect("get"), None, "a refused merge wrote nothing");
    // A value of another kind below operands: the read says so, and the
    // value and operands stay (a later put fixes the key).
    ks.put(b"k", b"text").expect("put");
    ks.merge(b"k", 1u64.to_le_bytes()).expect("merge");
    assert!(matches!(ks.get(b"k"), Err(Error::InvalidArgument(_))));
    db.flush().expect("flush");
    db.compact_range::<&[u8]>(..).expect("a compaction keeps what it cannot fold");
    assert!(matches!(ks.get(b"k"), Err(Error::InvalidArgument(_))));
    ks.put(b"k", 5u64.to_le_bytes()).expect("put");
    ks.merge(b"k", 1u64.to_le_bytes()).expect("merge");
    assert_eq!(ks.get(b"k").expect("get").as_deref(), Some(&6u64.to_le_bytes()[..]));
    // A transaction holds no operand; a history window and an operator
    // do not go together.
    let mut txn = db.transaction();
    let mut batch = WriteBatch::new();
    batch.merge_keyspace(&ks, b"k", 1u64.to_le_bytes()).expect("batch");
    assert!(matches!(txn.write(batch), Err(Error::InvalidArgument(_))));
    let window = basalt::HistoryWindow::duration(std::time::Duration::from_secs(60));
    assert!(matches!(ks.set_history(window), Err(Error::InvalidArgument(_))));
    assert_eq!(txn.get_keyspace(&ks, b"k").expect("txn read").as_deref(), Some(&6u64.to_le_bytes()[..]));
}

/// Keeps the largest string seen (a user-defined operator).
#[derive(Debug)]
struct Longest;

impl MergeOperator for Longest {
    fn name(&self) -> &'static str {
        "longest"
    }
    fn full_merge(&self, base: Option<&[u8]>, operands: &[&[u8]]) -> Result<Vec<u8>, MergeError> {
        let mut best = base.unwrap_or_default();
        for op in operands {
            if op.len() > best.len() {
                best = op;
            }
        }
        Ok(best.to_vec())
    }
    fn partial_merge(&self, operands: &[&[u8]]) -> Result<Vec<u8>, MergeError> {
        self.full_merge(None, operands)
    }
}

#[test]
fn a_user_defined_operator_must_be_registered_to_reopen() {
    let fs = MemFs::new();
    let with = || options(&fs).merge_operators(vec![Arc::new(Longest)]);
    {
        let db = Db::open("/db", with()).expect("open");
        let ks = db.create_keyspace("names").expect("keyspace");
        ks.set_merge_operator("longest").expect("bind");
        for name in ["ada", "grace", "al"] {
            ks.merge(b"n", name).expect("merge");
        }
        db.close().expect("close");
    }
    let refused = Db::open("/db", options(&fs));
    assert!(matches!(&refused, Err(Error::InvalidArgument(m)) if m.contains("longest")), "{refused:?}");
    drop(refused);
    let db = Db::open("/db", with()).expect("reopen with the operator");
    let ks = db.keyspace("names").expect("keyspace");
    assert_eq!(ks.get(b"n").expect("get").as_deref(), Some(&b"grace"[..]));
    assert_eq!(ks.merge_operator().as_deref(), Some("longest"));
}

#[test]
fn concurrent_counters_equal_the_sequential_fold() {
    let fs = MemFs::new();
    let db = Arc::new(Db::open("/db", options(&fs)).expect("open"));
    db.keyspace("default").expect("default").set_merge_operator("add_i64").expect("bind");
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                for i in 0..2000 {
                    db.merge(format!("hot{}", i % 16), word(t + 1)).expect("merge");
                    if i % 500 == 0 {
                        db.flush().expect("flush");
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("writer");
    }
    db.compact_range::<&[u8]>(..).expect("compact");
    let total: i64 = db.iter::<&[u8]>(..).map(|kv| as_i64(&kv.expect("iter").1)).sum();
    assert_eq!(total, (1 + 2 + 3 + 4) * 2000);
}

/// A get of `k` and (every tenth step) a scan, against the model.
fn check_reads(db: &Db, model: &BTreeMap<Vec<u8>, i64>, k: &[u8], step: usize) {
    let got = db.get(k).expect("get").map(|v| as_i64(&v));
    assert_eq!(got, model.get(k).copied(), "step {step}: get {k:?}");
    if step.is_multiple_of(10) {
        let got: BTreeMap<Vec<u8>, i64> =
            db.iter::<&[u8]>(..).map(|kv| kv.expect("iter")).map(|(k, v)| (k.to_vec(), as_i64(&v))).collect();
        assert_eq!(&got, model, "step {step}: scan");
    }
}

/// Random puts, deletes, merges, range deletes, flushes, compactions,
/// snapshots and reopens against a map of integers.
#[test]
fn merges_match_a_model() {
    type Model = BTreeMap<Vec<u8>, i64>;
    run_seeded("merges_match_a_model", 300, |seed| {
        let mut rng = rng(seed);
        let fs = MemFs::new();
        let path = Path::new("/db");
        let mut db = Db::open(path, small_options(&fs, &mut rng)).expect("open");
        db.keyspace("default").expect("default").set_merge_operator("add_i64").expect("bind");
        let mut model = Model::new();
        let mut held: Vec<(basalt::Snapshot, Model)> = Vec::new();
        let key = |rng: &mut rand::rngs::StdRng| format!("k{:02}", rng.random_range(0..24)).into_bytes();
        for step in 0..150 {
            match rng.random_range(0..100) {
                0..40 => {
                    let (k, n) = (key(&mut rng), rng.random_range(-50..50));
                    db.merge(&k, word(n)).expect("merge");
                    *model.entry(k).or_insert(0) += n;
                }
                40..50 => {
                    let (k, n) = (key(&mut rng), rng.random_range(-50..50));
                    db.put(&k, word(n)).expect("put");
                    model.insert(k, n);
                }
                50..56 => {
                    let k = key(&mut rng);
                    db.delete(&k).expect("delete");
                    model.remove(&k);
                }
                56..59 => {
                    let (a, b) = (key(&mut rng), key(&mut rng));
                    db.delete_range(a.clone()..b.clone()).expect("delete_range");
                    model.retain(|k, _| *k < a || *k >= b);
                }
                59..64 => {
                    let mut batch = WriteBatch::new();
                    for _ in 0..rng.random_range(1..6) {
                        let (k, n) = (key(&mut rng), rng.random_range(-50..50));
                        batch.merge(&k, word(n));
                        *model.entry(k).or_insert(0) += n;
                    }
                    db.write(batch).expect("batch");
                }
                64..72 => db.flush().expect("flush"),
                72..76 => db.compact_range::<&[u8]>(..).expect("compact"),
                76..80 => held.push((db.snapshot(), model.clone())),
                80..84 if !held.is_empty() => {
                    let (snap, m) = &held[rng.random_range(0..held.len())];
                    let got: Model = snap
                        .iter::<&[u8]>(.., Direction::Forward)
                        .map(|kv| kv.expect("iter"))
                        .map(|(k, v)| (k.to_vec(), as_i64(&v)))
                        .collect();
                    assert_eq!(&got, m, "step {step}: snapshot");
                }
                84..86 => held.clear(),
                86..88 => {
                    held.clear();
                    db.close().expect("close");
                    db = Db::open(path, small_options(&fs, &mut rng)).expect("reopen");
                }
                _ => {}
            }
            check_reads(&db, &model, &key(&mut rng), step);
        }
    });
}
