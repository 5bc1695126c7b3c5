//! The skiplist against a `BTreeMap` over random operations (ascending
//! runs, descending runs, random keys, repeated keys, every seek), and
//! readers walking it while a writer inserts.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};

use proptest::prelude::*;

use super::*;

/// The oracle's key: the skiplist's order, as a tuple.
type OracleKey = (TreeId, Vec<u8>, std::cmp::Reverse<u64>);

fn oracle_key(tree: TreeId, key: &[u8], trailer: u64) -> OracleKey {
    (tree, key.to_vec(), std::cmp::Reverse(trailer))
}

fn owned(e: EntryRef<'_>) -> (OracleKey, Vec<u8>) {
    (oracle_key(e.tree, e.user_key, e.trailer), e.value.to_vec())
}

#[derive(Debug, Clone)]
enum Op {
    /// Inserts `n` keys counting up from `start` (8-byte big-endian, the
    /// append path) in tree `tree`.
    Ascending { tree: TreeId, start: u64, n: u16 },
    /// Counting down: every insert lands before the last.
    Descending { tree: TreeId, start: u64, n: u16 },
    /// One key of any length (short keys share prefixes), any trailer.
    One { tree: TreeId, key: Vec<u8>, trailer: u64, value: Vec<u8> },
}

fn op() -> impl Strategy<Value = Op> {
    let tree = 0u32..3;
    prop_oneof![
        (tree.clone(), 0u64..2000, 1u16..300).prop_map(|(tree, start, n)| Op::Ascending { tree, start, n }),
        (tree.clone(), 0u64..2000, 1u16..100).prop_map(|(tree, start, n)| Op::Descending { tree, start, n }),
        (
            tree,
            prop::collection::vec(prop_oneof![Just(0u8), Just(1), Just(0xff), any::<u8>()], 0..12),
            prop_oneof![Just(0u64), Just(u64::MAX), 0u64..8, any::<u64>()],
            prop::collection::vec(any::<u8>(), 0..40),
        )
            .prop_map(|(tree, key, trailer, value)| Op::One { tree, key, trailer, value }),
    ]
}

/// Inserts into both; a key already present in the oracle is skipped in
/// both (the memtable never sees one key and seqno twice).
fn apply(list: &SkipList, oracle: &mut BTreeMap<OracleKey, Vec<u8>>, op: &Op, seq: &mut u64) {
    let mut put = |tree: TreeId, key: &[u8], trailer: u64, value: &[u8]| {
        let k = oracle_key(tree, key, trailer);
        if oracle.contains_key(&k) {
            return;
        }
        let bytes = list.inserter().insert(tree, key, trailer, value).expect("insert");
        assert_eq!(bytes, node_bytes_for(list, key.len(), value.len(), bytes));
        oracle.insert(k, value.to_vec());
    };
    match op {
        Op::Ascending { tree, start, n } => {
            for i in 0..u64::from(*n) {
                *seq += 1;
                put(*tree, &(start + i).to_be_bytes(), *seq << 8, &seq.to_le_bytes());
            }
        }
        Op::Descending { tree, start, n } => {
            for i in 0..u64::from(*n) {
                *seq += 1;
                put(*tree, &(start + 5000 - i).to_be_bytes(), *seq << 8, b"d");
            }
        }
        Op::One { tree, key, trailer, value } => put(*tree, key, *trailer, value),
    }
}

/// A node's size is its header, a tower of some height and the bytes,
/// rounded to 8: checks `bytes` is one such size and returns it.
fn node_bytes_for(_list: &SkipList, key: usize, value: usize, bytes: usize) -> usize {
    let height = (1..=MAX_HEIGHT).find(|&h| node_bytes(h, key, value) == bytes);
    assert!(height.is_some(), "{bytes} bytes is no node of a {key}-byte key and {value}-byte value");
    bytes
}

fn probe_keys(oracle: &BTreeMap<OracleKey, Vec<u8>>, extra: &[Vec<u8>]) -> Vec<OracleKey> {
    let mut probes: Vec<OracleKey> = oracle.keys().step_by(7).cloned().collect();
    for tree in 0..4 {
        for k in extra {
            for trailer in [0, 1 << 8, u64::MAX] {
                probes.push(oracle_key(tree, k, trailer));
            }
        }
    }
    probes
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn skiplist_matches_a_btreemap(ops in prop::collection::vec(op(), 1..20)) {
        let list = SkipList::new();
        let mut oracle = BTreeMap::new();
        let mut seq = 0;
        for op in &ops {
            apply(&list, &mut oracle, op, &mut seq);
        }
        let all: Vec<_> = list.iter_from(None, true).map(owned).collect();
        let expected: Vec<_> = oracle.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        prop_assert_eq!(&all, &expected);
        prop_assert_eq!(list.len(), oracle.len());
        let nodes: usize = all.iter().map(|(k, v)| node_bytes(1, k.1.len(), v.len())).sum();
        prop_assert!(list.node_bytes() >= nodes);

        let extra = [vec![], vec![0], vec![0xff; 9], 1000u64.to_be_bytes().to_vec()];
        for probe in probe_keys(&oracle, &extra) {
            let parts = KeyParts::new(probe.0, &probe.1, probe.2.0);
            let at_or_after = oracle.range(probe.clone()..).next().map(|(k, v)| (k.clone(), v.clone()));
            prop_assert_eq!(list.seek(&parts, true).map(owned), at_or_after);
            let after = oracle
                .range((std::ops::Bound::Excluded(probe.clone()), std::ops::Bound::Unbounded))
                .next()
                .map(|(k, v)| (k.clone(), v.clone()));
            prop_assert_eq!(list.seek(&parts, false).map(owned), after);
            let at_or_before = oracle.range(..=probe.clone()).next_back().map(|(k, v)| (k.clone(), v.clone()));
            prop_assert_eq!(list.seek_back(&parts, true).map(owned), at_or_before);
            let before = oracle.range(..probe.clone()).next_back().map(|(k, v)| (k.clone(), v.clone()));
            prop_assert_eq!(list.seek_back(&parts, false).map(owned), before);
            let from: Vec<_> = list.iter_from(Some(&parts), true).take(5).map(owned).collect();
            let want: Vec<_> = oracle.range(probe.clone()..).take(5).map(|(k, v)| (k.clone(), v.clone())).collect();
            prop_assert_eq!(from, want);
        }
    }
}

#[test]
fn equal_keys_are_all_kept() {
    let list = SkipList::new();
    for value in [&b"first"[..], b"second"] {
        list.inserter().insert(1, b"k", 7 << 8, value).expect("insert");
    }
    assert_eq!(list.len(), 2);
    let values: Vec<_> = list.iter_from(None, true).map(|e| e.value.to_vec()).collect();
    assert_eq!(values, vec![b"second".to_vec(), b"first".to_vec()]);
}

#[test]
fn entries_larger_than_a_chunk_get_their_own() {
    let list = SkipList::new();
    let big = vec![7u8; CHUNK_BYTES_MAX + 3];
    let mut ins = list.inserter();
    ins.insert(0, b"a", 1 << 8, b"small").expect("insert");
    ins.insert(0, b"b", 2 << 8, &big).expect("insert");
    ins.insert(0, b"c", 3 << 8, b"after").expect("insert");
    drop(ins);
    let got: Vec<_> = list.iter_from(None, true).map(|e| (e.user_key.to_vec(), e.value.len())).collect();
    assert_eq!(got, vec![(b"a".to_vec(), 5), (b"b".to_vec(), big.len()), (b"c".to_vec(), 5)]);
}

/// Readers walk and seek while one writer inserts ascending and random
/// keys: every walk is in order, every entry whole (its value encodes its
/// key), and a key seen once is seen by every later seek.
#[test]
fn readers_see_whole_entries_in_order_while_a_writer_inserts() {
    let list = Arc::new(SkipList::new());
    let done = Arc::new(AtomicBool::new(false));
    let n: u64 = if cfg!(miri) { 300 } else { 60_000 };
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (list, done) = (list.clone(), done.clone());
            std::thread::spawn(move || {
                let mut walks = 0u64;
                loop {
                    let finished = done.load(AtomicOrdering::Acquire);
                    let mut previous: Option<Vec<u8>> = None;
                    let mut count = 0usize;
                    for e in list.iter_from(None, true) {
                        assert_eq!(e.value, e.user_key, "a torn entry");
                        if let Some(prev) = &previous {
                            assert!(prev.as_slice() <= e.user_key, "out of order");
                        }
                        previous = Some(e.user_key.to_vec());
                        count += 1;
                    }
                    if let Some(k) = previous {
                        // Once seen, always found.
                        let found = list.seek(&KeyParts::new(0, &k, u64::MAX), true).expect("seen key");
                        assert_eq!(found.user_key, k.as_slice());
                    }
                    walks += 1;
                    if finished {
                        assert_eq!(count as u64, n, "reader {r}: every entry after the writer finished");
                        return walks;
                    }
                }
            })
        })
        .collect();
    let mut ins = list.inserter();
    for i in 0..n {
        // Alternate an ascending run with scattered keys.
        let k = if i % 4 == 3 { (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1) << 1 } else { i << 33 };
        let key = k.to_be_bytes();
        ins.insert(0, &key, 1 << 8, &key).expect("insert");
    }
    drop(ins);
    done.store(true, AtomicOrdering::Release);
    for r in readers {
        assert!(r.join().expect("reader") > 0);
    }
}

/// A newer version of a key sorts before the older ones, so a writer
/// adding versions puts each new node right before the node a reader's
/// seek for an older snapshot stops at. The seek must answer the node its
/// walk ended on: loading the predecessor's pointer again handed out the
/// new node, newer than the snapshot (a torn batch in `tests/concurrency.rs`).
#[test]
fn seeks_never_answer_an_entry_before_the_probe_while_versions_are_added() {
    let list = Arc::new(SkipList::new());
    let done = Arc::new(AtomicBool::new(false));
    let n: u64 = if cfg!(miri) { 200 } else { 200_000 };
    let readers: Vec<_> = (0..2u64)
        .map(|r| {
            let (list, done) = (list.clone(), done.clone());
            std::thread::spawn(move || {
                let mut seeks = 0u64;
                while !done.load(AtomicOrdering::Acquire) {
                    // The newest version's snapshot: the next insert lands
                    // right before the node this seek stops at.
                    let newest = list.len() as u64 + r;
                    let key = 7u64.to_be_bytes();
                    let probe = KeyParts::new(0, &key, newest << 8 | 0xff);
                    for e in
                        list.seek(&probe, true).into_iter().chain(list.iter_from(Some(&probe), true).take(1))
                    {
                        let got = KeyParts::new(e.tree, e.user_key, e.trailer);
                        assert_ne!(
                            got.cmp(&probe),
                            Ordering::Less,
                            "a seek answered an entry before its probe"
                        );
                    }
                    if let Some(e) = list.seek_back(&probe, true) {
                        let got = KeyParts::new(e.tree, e.user_key, e.trailer);
                        assert_ne!(
                            got.cmp(&probe),
                            Ordering::Greater,
                            "a backward seek answered an entry after its probe"
                        );
                    }
                    seeks += 1;
                }
                seeks
            })
        })
        .collect();
    let mut ins = list.inserter();
    for i in 0..n {
        ins.insert(0, &7u64.to_be_bytes(), (i + 1) << 8, b"v").expect("insert");
    }
    drop(ins);
    done.store(true, AtomicOrdering::Release);
    for r in readers {
        assert!(r.join().expect("reader") > 0);
    }
}
