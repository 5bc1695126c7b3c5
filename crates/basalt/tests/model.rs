//! Model-based test of the whole engine: random sequences of puts, deletes,
//! range deletes, batches, gets, range and prefix iteration (both directions), snapshot
//! reads, flushes and reopens, checked step by step against a `BTreeMap`.
//! A failure prints the seed that replays it (`BASALT_SEED=…`).

mod common;

use std::path::Path;

use basalt::testing::MemFs;
use basalt::{Db, Direction, ReadOptions, Snapshot, WriteBatch};
use common::{
    Model, collect, model_range, random_bound, random_key, random_value, rng, run_seeded, small_options,
};
use rand::Rng;
use rand::rngs::StdRng;

const OPS_PER_CASE: usize = 120;

struct Held {
    snapshot: Snapshot,
    model: Model,
}

fn check_range(db: &Db, model: &Model, rng: &mut StdRng, snapshot: Option<&Snapshot>) {
    let (lo, hi) = (random_bound(rng), random_bound(rng));
    let forward = rng.random_bool(0.5);
    let direction = if forward { Direction::Forward } else { Direction::Reverse };
    let want = model_range(model, &lo, &hi, forward);
    let opts = ReadOptions::default().snapshot(snapshot);
    let iter = db.iter_opt((lo.clone(), hi.clone()), direction, &opts);
    // Owned steps, or borrowed and owned steps mixed on one iterator.
    let got = if rng.random_bool(0.5) { collect(iter) } else { collect_mixed(iter, rng) };
    if got != want {
        let got_keys: Vec<_> = got.iter().map(|kv| &kv.0).collect();
        let want_keys: Vec<_> = want.iter().map(|kv| &kv.0).collect();
        panic!("range {lo:?}..{hi:?} forward={forward}: keys {got_keys:?}, model {want_keys:?}");
    }
}

/// Every entry of `iter`, each step taken at random by
/// `DbIterator::next_borrowed` or by `Iterator::next`.
fn collect_mixed(mut iter: basalt::DbIterator, rng: &mut StdRng) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    loop {
        let entry = if rng.random_bool(0.5) {
            iter.next_borrowed().map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())))
        } else {
            iter.next().map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())))
        };
        match entry {
            Some(kv) => out.push(kv.expect("iteration failed")),
            None => return out,
        }
    }
}

/// The model after a range delete of `lo..hi`.
fn remove_range(model: &mut Model, lo: &std::ops::Bound<Vec<u8>>, hi: &std::ops::Bound<Vec<u8>>) {
    for (k, _) in model_range(model, lo, hi, true) {
        model.remove(&k);
    }
}

fn check_prefix(db: &Db, model: &Model, rng: &mut StdRng) {
    let mut p = random_key(rng);
    p.truncate(rng.random_range(0..=p.len()));
    let want: Vec<_> =
        model.iter().filter(|(k, _)| k.starts_with(&p)).map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(collect(db.prefix(&p)), want, "prefix {p:?}");
}

/// Applies one random operation; returns true when the driver must reopen.
fn step(db: &Db, model: &mut Model, held: &mut Vec<Held>, rng: &mut StdRng) -> bool {
    match rng.random_range(0..100) {
        0..30 => {
            let (k, v) = (random_key(rng), random_value(rng));
            db.put(&k, &v).expect("put");
            model.insert(k, v);
        }
        30..36 => {
            let k = random_key(rng);
            db.delete(&k).expect("delete");
            model.remove(&k);
        }
        36..40 => {
            let (lo, hi) = (random_bound(rng), random_bound(rng));
            db.delete_range((lo.clone(), hi.clone())).expect("delete_range");
            remove_range(model, &lo, &hi);
        }
        40..50 => {
            let mut batch = WriteBatch::new();
            for _ in 0..rng.random_range(0..20) {
                let k = random_key(rng);
                if rng.random_bool(0.1) {
                    let (lo, hi) = (random_bound(rng), random_bound(rng));
                    batch.delete_range((lo.clone(), hi.clone()));
                    remove_range(model, &lo, &hi);
                } else if rng.random_bool(0.7) {
                    let v = random_value(rng);
                    batch.put(&k, &v);
                    model.insert(k, v);
                } else {
                    batch.delete(&k);
                    model.remove(&k);
                }
            }
            db.write(batch).expect("batch");
        }
        50..65 => {
            let k = random_key(rng);
            assert_eq!(db.get(&k).expect("get").map(|v| v.to_vec()), model.get(&k).cloned(), "get {k:?}");
            assert_eq!(
                db.get_with(&k, <[u8]>::to_vec).expect("get_with"),
                model.get(&k).cloned(),
                "get_with {k:?}"
            );
        }
        65..75 => check_range(db, model, rng, None),
        75..78 => check_prefix(db, model, rng),
        78..83 => held.push(Held { snapshot: db.snapshot(), model: model.clone() }),
        83..90 if !held.is_empty() => {
            let h = &held[rng.random_range(0..held.len())];
            let k = random_key(rng);
            let got = h.snapshot.get(&k).expect("snapshot get").map(|v| v.to_vec());
            assert_eq!(got, h.model.get(&k).cloned(), "snapshot get {k:?}");
            let lent = h.snapshot.get_with(&k, <[u8]>::to_vec).expect("snapshot get_with");
            assert_eq!(lent, h.model.get(&k).cloned(), "snapshot get_with {k:?}");
            check_range(db, &h.model, rng, Some(&h.snapshot));
        }
        90..93 if !held.is_empty() => {
            held.swap_remove(rng.random_range(0..held.len()));
        }
        93..95 => db.flush().expect("flush"),
        95..96 => {
            let (lo, hi) = (random_bound(rng), random_bound(rng));
            db.compact_range((lo, hi)).expect("compact_range");
        }
        96..100 => return true,
        _ => {}
    }
    false
}

#[test]
fn engine_matches_model() {
    run_seeded("engine_matches_model", 3000, |seed| {
        let mut rng = rng(seed);
        let fs = MemFs::new();
        let path = Path::new("/db");
        let mut db = Db::open(path, small_options(&fs, &mut rng)).expect("open");
        let mut model = Model::new();
        let mut held = Vec::new();
        for _ in 0..OPS_PER_CASE {
            if step(&db, &mut model, &mut held, &mut rng) {
                held.clear();
                let opts = small_options(&fs, &mut rng);
                if rng.random_bool(0.5) {
                    db.close().expect("close");
                } else {
                    drop(db);
                }
                db = Db::open(path, opts).expect("reopen");
                assert!(common::contents(&db) == model, "contents after reopen differ from the model");
            }
        }
        held.clear();
        assert!(common::contents(&db) == model, "final contents differ from the model");
    });
}
