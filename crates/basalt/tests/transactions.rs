//! Optimistic transactions: own writes and snapshot reads, first committer
//! wins on written and read-for-update keys (also once the winner moved to
//! SSTs), tables with their indexes, the size limit, and two concurrent
//! workloads checked from their recorded histories alone: random
//! read-append transactions against snapshot isolation's rules, and bank
//! transfers whose total never changes.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arrow_array::{Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use basalt::testing::MemFs;
use basalt::{Db, Error, IndexOptions, KeyValue, Options, TableOptions, WriteOptions};
use rand::Rng;

fn open(dir: &std::path::Path) -> Db {
    Db::open(dir, Options::default()).expect("open")
}

fn text(v: Option<basalt::Bytes>) -> Option<String> {
    v.map(|b| String::from_utf8(b.to_vec()).expect("utf-8"))
}

#[test]
fn reads_see_the_snapshot_and_the_transactions_own_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path());
    db.put(b"a", b"1").expect("put");
    db.put(b"b", b"2").expect("put");
    let mut tx = db.transaction();
    db.put(b"a", b"changed outside").expect("put");
    assert_eq!(text(tx.get(b"a").expect("get")).as_deref(), Some("1"), "the snapshot's value");
    tx.put(b"b", b"20").expect("put");
    tx.delete(b"a").expect("delete");
    tx.put(b"c", b"3").expect("put");
    assert_eq!(tx.get(b"a").expect("get"), None, "its own delete");
    assert_eq!(text(tx.get(b"b").expect("get")).as_deref(), Some("20"), "its own write");
    assert_eq!(tx.len(), 3);
    // Nothing is visible outside before the commit.
    assert_eq!(db.get(b"c").expect("get"), None);
    // `a` was written outside since the snapshot, and this transaction
    // wrote it: it loses, and nothing of it is written.
    assert!(matches!(tx.commit(), Err(Error::Conflict(_))));
    assert_eq!(text(db.get(b"a").expect("get")).as_deref(), Some("changed outside"));
    assert_eq!(text(db.get(b"b").expect("get")).as_deref(), Some("2"));
    assert_eq!(db.get(b"c").expect("get"), None);

    // Without the outside write it commits, all at once.
    let mut tx = db.transaction();
    tx.put(b"b", b"20").expect("put");
    tx.put(b"c", b"3").expect("put");
    tx.commit_opt(&WriteOptions::default().sync(true)).expect("commit");
    assert_eq!(text(db.get(b"b").expect("get")).as_deref(), Some("20"));
    assert_eq!(text(db.get(b"c").expect("get")).as_deref(), Some("3"));

    // Dropped or rolled back: nothing written.
    let mut tx = db.transaction();
    tx.put(b"d", b"4").expect("put");
    drop(tx);
    let mut tx = db.transaction();
    tx.put(b"d", b"4").expect("put");
    tx.rollback();
    assert_eq!(db.get(b"d").expect("get"), None);
    // A transaction that wrote nothing: its reads for update are still
    // checked; plain reads are not.
    let mut tx = db.transaction();
    tx.get_for_update(b"b").expect("get");
    db.put(b"b", b"x").expect("put");
    assert!(matches!(tx.commit(), Err(Error::Conflict(_))), "a key read for update changed");
    let tx = db.transaction();
    tx.get(b"b").expect("get");
    db.put(b"b", b"y").expect("put");
    tx.commit().expect("plain reads are not checked");
}

#[test]
fn first_committer_wins_on_written_and_read_for_update_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path());
    db.put(b"x", b"0").expect("put");
    db.put(b"y", b"0").expect("put");

    // Two transactions write one key: the second to commit loses.
    let mut first = db.transaction();
    let mut second = db.transaction();
    first.put(b"x", b"first").expect("put");
    second.put(b"x", b"second").expect("put");
    second.put(b"z", b"second's other key").expect("put");
    first.commit().expect("first commits");
    let err = second.commit().expect_err("second conflicts");
    assert!(err.to_string().contains("keyspace default") && err.to_string().contains('x'), "{err}");
    assert_eq!(text(db.get(b"x").expect("get")).as_deref(), Some("first"));
    assert_eq!(db.get(b"z").expect("get"), None, "nothing of the loser is written");

    // Write skew: each reads both and writes the other's key. Plain reads
    // are not checked, so both commit (snapshot isolation allows it)...
    let mut t1 = db.transaction();
    let mut t2 = db.transaction();
    let _ = (t1.get(b"x").expect("get"), t1.get(b"y").expect("get"));
    let _ = (t2.get(b"x").expect("get"), t2.get(b"y").expect("get"));
    t1.put(b"x", b"t1").expect("put");
    t2.put(b"y", b"t2").expect("put");
    t1.commit().expect("commit");
    t2.commit().expect("write skew commits with plain reads");
    // ...and with get_for_update the second one conflicts.
    let mut t1 = db.transaction();
    let mut t2 = db.transaction();
    let _ = (t1.get_for_update(b"x").expect("get"), t1.get_for_update(b"y").expect("get"));
    let _ = (t2.get_for_update(b"x").expect("get"), t2.get_for_update(b"y").expect("get"));
    t1.put(b"x", b"t1 again").expect("put");
    t2.put(b"y", b"t2 again").expect("put");
    t1.commit().expect("commit");
    assert!(matches!(t2.commit(), Err(Error::Conflict(_))));
    assert_eq!(text(db.get(b"y").expect("get")).as_deref(), Some("t2"));

    // A plain write batch counts as a commit too.
    let mut tx = db.transaction();
    tx.get_for_update(b"x").expect("get");
    tx.put(b"w", b"1").expect("put");
    let mut batch = basalt::WriteBatch::new();
    batch.put(b"x", b"batch");
    db.write(batch).expect("write");
    assert!(matches!(tx.commit(), Err(Error::Conflict(_))));
}

#[test]
fn conflicts_are_found_where_the_winner_moved_and_only_then() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default().memtable_bytes_max(64 << 10)).expect("open");
    let ks = db.create_keyspace("ks").expect("keyspace");
    for i in 0..2_000u32 {
        db.put(format!("k{i:05}"), b"old").expect("put");
        ks.put(format!("k{i:05}"), b"old").expect("put");
    }
    db.flush().expect("flush");
    // Written before the snapshot, then flushed and compacted: no conflict.
    let mut tx = db.transaction();
    db.compact_range::<&[u8]>(..).expect("compact");
    tx.get_for_update(b"k00007").expect("get");
    tx.put_keyspace(&ks, b"k00008", b"tx").expect("put");
    tx.commit().expect("nothing was written since the snapshot");
    // Written after the snapshot, then flushed into L0, or compacted down.
    for compact in [false, true] {
        let key = format!("k{:05}", 100 + u32::from(compact));
        let mut tx = db.transaction();
        assert_eq!(text(tx.get_keyspace_for_update(&ks, &key).expect("get")).as_deref(), Some("old"));
        tx.put(b"unrelated", b"1").expect("put");
        ks.put(&key, format!("winner {compact}")).expect("put");
        db.flush().expect("flush");
        if compact {
            ks.compact_range::<&[u8]>(..).expect("compact");
        }
        let err = tx.commit().expect_err("the winner is in an SST now");
        assert!(matches!(err, Error::Conflict(_)) && err.to_string().contains("keyspace ks"), "{err}");
    }
    // A delete since the snapshot is a write too.
    let mut tx = db.transaction();
    tx.put(b"k00200", b"tx").expect("put");
    db.delete(b"k00200").expect("delete");
    db.flush().expect("flush");
    assert!(matches!(tx.commit(), Err(Error::Conflict(_))));
}

fn accounts_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("owner", DataType::Utf8, true),
        Field::new("balance", DataType::Int64, false),
    ]))
}

fn account_rows(ids: &[i64], owners: &[Option<&str>], balances: &[i64]) -> RecordBatch {
    RecordBatch::try_new(
        accounts_schema(),
        vec![
            Arc::new(Int64Array::from(ids.to_vec())),
            Arc::new(StringArray::from(owners.to_vec())),
            Arc::new(Int64Array::from(balances.to_vec())),
        ],
    )
    .expect("rows")
}

fn balance_of(row: &RecordBatch) -> i64 {
    row.column(2).as_any().downcast_ref::<Int64Array>().expect("balance").value(0)
}

#[test]
fn table_rows_and_unique_indexes_in_a_transaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path());
    let accounts =
        db.create_table("accounts", accounts_schema(), &["id"], TableOptions::default()).expect("table");
    accounts.create_index("by_owner", &["owner"], IndexOptions::default().unique(true)).expect("index");
    accounts.write(&account_rows(&[1, 2], &[Some("ann"), Some("bob")], &[100, 50])).expect("write");

    let mut tx = db.transaction();
    let one = tx.get_table_for_update(&accounts, &[KeyValue::I64(1)]).expect("get").expect("row 1");
    assert_eq!(balance_of(&one), 100);
    tx.put_table(&accounts, &account_rows(&[1, 3], &[Some("ann"), Some("cid")], &[60, 40])).expect("put");
    tx.delete_table(
        &accounts,
        &RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)])),
            vec![Arc::new(Int64Array::from(vec![2]))],
        )
        .expect("keys"),
    )
    .expect("delete");
    // Its own writes, row by row; the table outside is unchanged.
    assert_eq!(balance_of(&tx.get_table(&accounts, &[KeyValue::I64(1)]).expect("get").expect("own")), 60);
    assert!(tx.get_table(&accounts, &[KeyValue::I64(2)]).expect("get").is_none(), "own delete");
    assert_eq!(balance_of(&tx.get_table(&accounts, &[KeyValue::I64(3)]).expect("get").expect("own")), 40);
    assert!(accounts.get(&[KeyValue::I64(3)]).expect("get").is_none());
    tx.commit().expect("commit");
    assert_eq!(balance_of(&accounts.get(&[KeyValue::I64(1)]).expect("get").expect("row")), 60);
    assert!(accounts.get(&[KeyValue::I64(2)]).expect("get").is_none());
    // The index was kept: cid is found, bob is gone.
    let by = |owner: &'static str| {
        accounts
            .lookup(
                "by_owner",
                basalt::IndexPredicate::Eq(vec![Some(KeyValue::Str(owner))]),
                basalt::LookupOptions::default(),
            )
            .expect("lookup")
            .num_rows()
    };
    assert_eq!((by("cid"), by("bob"), by("ann")), (1, 0, 1));

    // A unique value taken by a commit since the snapshot: refused at
    // commit, though the transaction's snapshot did not hold it.
    let mut tx = db.transaction();
    tx.put_table(&accounts, &account_rows(&[7], &[Some("dee")], &[1])).expect("put");
    accounts.write(&account_rows(&[8], &[Some("dee")], &[1])).expect("write");
    assert!(matches!(tx.commit(), Err(Error::UniqueViolation { .. })));
    assert!(accounts.get(&[KeyValue::I64(7)]).expect("get").is_none());

    // A row written since the snapshot conflicts, naming the table and key.
    let mut tx = db.transaction();
    tx.get_table_for_update(&accounts, &[KeyValue::I64(3)]).expect("get");
    tx.put(b"audit", b"moved").expect("put");
    accounts.write(&account_rows(&[3], &[Some("cid")], &[41])).expect("write");
    let err = tx.commit().expect_err("conflict");
    assert!(err.to_string().contains("table accounts, key (I64(3))"), "{err}");
    assert_eq!(db.get(b"audit").expect("get"), None);

    // A table of another database is refused, and the transaction unchanged.
    let other_dir = tempfile::tempdir().expect("tempdir");
    let other = open(other_dir.path());
    let elsewhere =
        other.create_table("accounts", accounts_schema(), &["id"], TableOptions::default()).expect("t");
    let mut tx = db.transaction();
    assert!(matches!(
        tx.put_table(&elsewhere, &account_rows(&[1], &[None], &[0])),
        Err(Error::InvalidArgument(_))
    ));
    assert!(tx.get_table(&elsewhere, &[KeyValue::I64(1)]).is_err());
    assert!(tx.is_empty());
}

#[test]
fn a_transaction_past_the_size_limit_refuses_the_write_and_keeps_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default().batch_bytes_max(4_096)).expect("open");
    let mut tx = db.transaction();
    for i in 0..10 {
        tx.put(format!("k{i}"), vec![b'v'; 200]).expect("fits");
    }
    let held = tx.len();
    let err = tx.put(b"big", vec![b'v'; 3_000]).expect_err("over the limit");
    assert!(matches!(err, Error::InvalidArgument(ref m) if m.contains("batch_bytes_max")), "{err}");
    assert_eq!(tx.len(), held);
    assert_eq!(tx.get(b"big").expect("get"), None);
    tx.commit().expect("commit");
    assert!(db.get(b"k9").expect("get").is_some());
    assert_eq!(db.get(b"big").expect("get"), None);

    // A key or value over its own limit is refused when written, not at
    // commit, and the transaction keeps its other writes.
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default().key_bytes_max(16).value_bytes_max(64)).expect("open");
    let mut tx = db.transaction();
    tx.put(b"kept", b"1").expect("put");
    assert!(
        matches!(tx.put(b"k", vec![b'v'; 65]), Err(Error::InvalidArgument(ref m)) if m.contains("value_bytes_max"))
    );
    assert!(
        matches!(tx.put(vec![b'k'; 17], b"v"), Err(Error::InvalidArgument(ref m)) if m.contains("key_bytes_max"))
    );
    assert_eq!(tx.len(), 1);
    tx.commit().expect("the rest commits");
    assert!(db.get(b"kept").expect("get").is_some());
}

#[test]
fn a_closed_or_read_only_database_refuses_transaction_work() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path());
    db.put(b"a", b"1").expect("put");
    let mut tx = db.transaction();
    tx.put(b"b", b"2").expect("put");
    db.close().expect("close");
    assert!(matches!(tx.get(b"b"), Err(Error::Closed(_))), "an own write read after close");
    assert!(matches!(tx.get(b"a"), Err(Error::Closed(_))));
    assert!(matches!(tx.put(b"c", b"3"), Err(Error::Closed(_))));
    assert!(matches!(tx.commit(), Err(Error::Closed(_))));
    drop(db);
    let ro = Db::open_read_only(dir.path(), Options::default()).expect("read-only");
    let mut tx = ro.transaction();
    assert_eq!(text(tx.get(b"a").expect("get")).as_deref(), Some("1"));
    assert!(matches!(tx.put(b"c", b"3"), Err(Error::ReadOnly(_))));
    assert!(tx.is_empty());
}

#[test]
fn a_bulk_load_since_the_snapshot_conflicts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path());
    let accounts =
        db.create_table("accounts", accounts_schema(), &["id"], TableOptions::default()).expect("t");
    accounts.write(&account_rows(&[1, 2], &[None, None], &[10, 20])).expect("write");
    let mut tx = db.transaction();
    tx.get_table_for_update(&accounts, &[KeyValue::I64(2)]).expect("get");
    tx.put(b"note", b"read account 2").expect("put");
    accounts.bulk_load([account_rows(&[2, 3], &[None, None], &[21, 30])]).expect("bulk load");
    assert!(matches!(tx.commit(), Err(Error::Conflict(_))), "the loaded row is newer than the snapshot");
    // One that began after the load commits.
    let mut tx = db.transaction();
    tx.get_table_for_update(&accounts, &[KeyValue::I64(2)]).expect("get");
    tx.put(b"note", b"read account 2").expect("put");
    tx.commit().expect("commit");
}

/// One transaction of the concurrent workload, as recorded.
#[derive(Debug, Clone)]
struct Recorded {
    id: u64,
    /// Clock ticks: before the transaction began, after its snapshot was
    /// taken, before its commit was called, after it returned.
    start: u64,
    snapshot_taken: u64,
    commit_called: u64,
    commit_returned: u64,
    /// Each key read (once) and the list of appenders it held.
    reads: BTreeMap<usize, Vec<u64>>,
    /// The keys of `reads` read with `get_for_update`.
    for_update: BTreeSet<usize>,
    /// Keys it appended its id to (each read first); emptied unless it
    /// committed.
    appended: BTreeSet<usize>,
    /// Keys it wrote, whatever became of it.
    wrote: BTreeSet<usize>,
    committed: bool,
    /// Its commit was refused for a conflict.
    refused: bool,
    /// Tick after its commit returned (committed or refused).
    commit_ended: u64,
}

fn parse_list(v: Option<basalt::Bytes>) -> Vec<u64> {
    match v {
        None => Vec::new(),
        Some(b) if b.is_empty() => Vec::new(),
        Some(b) => {
            std::str::from_utf8(&b).expect("utf-8").split(',').map(|n| n.parse().expect("id")).collect()
        }
    }
}

fn list_key(k: usize) -> String {
    format!("list/{k}")
}

/// Checks a history of read-append transactions against snapshot
/// isolation, from the recorded reads and the final lists alone (each
/// committed append adds its transaction's id to a key's list, so a list
/// is the order of the key's committed writes, and a read says which
/// prefix of it the reader saw).
fn check_snapshot_isolation(history: &[Recorded], finals: &BTreeMap<usize, Vec<u64>>) -> Result<(), String> {
    let by_id: BTreeMap<u64, &Recorded> = history.iter().map(|t| (t.id, t)).collect();
    // Atomic commits, nothing else: each committed append is in its list
    // exactly once, and every id in a list is a committed append.
    for (&k, list) in finals {
        let mut seen = BTreeSet::new();
        for id in list {
            let t = by_id.get(id).ok_or(format!("key {k}: unknown id {id}"))?;
            if !t.committed || !t.appended.contains(&k) {
                return Err(format!("key {k}: {id} is there but did not commit an append to it: {t:?}"));
            }
            if !seen.insert(*id) {
                return Err(format!("key {k}: {id} twice"));
            }
        }
    }
    for t in history.iter().filter(|t| t.committed) {
        for k in &t.appended {
            if !finals[k].contains(&t.id) {
                return Err(format!("committed {} lost its append to key {k}", t.id));
            }
        }
    }
    for t in history {
        // Each read is a prefix of the key's committed writes.
        for (k, read) in &t.reads {
            if !finals[k].starts_with(read) {
                return Err(format!("{} read {read:?} of key {k}, not a prefix of {:?}", t.id, finals[k]));
            }
        }
        // One snapshot: a commit seen on one key read is seen on every key
        // read that it wrote (no fractured reads); every commit that ended
        // before the transaction began is seen; none that began committing
        // after its snapshot was taken is.
        let seen: BTreeSet<u64> = t.reads.values().flatten().copied().collect();
        for (k, read) in &t.reads {
            for w in finals[k].iter().map(|id| by_id[id]) {
                let visible = read.contains(&w.id);
                if seen.contains(&w.id) && !visible {
                    return Err(format!("{} saw {} on one key but not on key {k}", t.id, w.id));
                }
                if w.commit_called > t.snapshot_taken && visible {
                    return Err(format!("{} saw {}, which committed after its snapshot", t.id, w.id));
                }
            }
        }
        for w in history.iter().filter(|w| w.committed) {
            // `start` is ticked before the snapshot; a commit that returned
            // before it is in the snapshot.
            if w.id == t.id || w.commit_returned > t.start {
                continue;
            }
            for k in w.appended.intersection(&t.reads.keys().copied().collect()) {
                if !t.reads[k].contains(&w.id) {
                    return Err(format!("{} missed {} on key {k}, committed before it began", t.id, w.id));
                }
            }
        }
        // A read for update is checked at commit: no other commit of the
        // key may land between the snapshot and the commit.
        if t.committed {
            for k in &t.for_update {
                if let Some(w) = history.iter().find(|w| {
                    w.id != t.id
                        && w.committed
                        && w.appended.contains(k)
                        && w.commit_called > t.snapshot_taken
                        && w.commit_returned < t.commit_called
                }) {
                    return Err(format!(
                        "{} committed although {} wrote key {k}, read for update, meanwhile",
                        t.id, w.id
                    ));
                }
            }
        }
        // No false conflicts: a refused commit lost to a commit of a key it
        // tracked that landed after its snapshot and before its check.
        if t.refused {
            let tracked: BTreeSet<usize> = t.for_update.union(&t.wrote).copied().collect();
            let winner = history.iter().any(|w| {
                w.id != t.id
                    && w.committed
                    && w.appended.iter().any(|k| tracked.contains(k))
                    && w.commit_returned > t.start
                    && w.commit_called < t.commit_ended
            });
            if !winner {
                return Err(format!("{} was refused, but no commit wrote its keys meanwhile: {t:?}", t.id));
            }
        }
        // First committer wins: a committed append follows exactly what
        // its transaction read (no other commit of the key in between).
        if t.committed {
            for k in &t.appended {
                let at = finals[k].iter().position(|&id| id == t.id).expect("checked above");
                if at != t.reads[k].len() {
                    return Err(format!(
                        "{} appended to key {k} after reading {:?}, but the list is {:?}: a lost update",
                        t.id, t.reads[k], finals[k]
                    ));
                }
            }
        }
    }
    Ok(())
}

/// One transaction of the concurrent workload: reads one to three keys
/// (half of them for update), appends its id to some of them, then
/// commits, or rolls back one time in ten; what it saw and did, recorded
/// with the clock's ticks.
fn read_append_transaction(
    db: &Db,
    clock: &AtomicU64,
    id: u64,
    keys: usize,
    rng: &mut rand::rngs::StdRng,
) -> Recorded {
    let start = clock.fetch_add(1, Ordering::SeqCst);
    let mut tx = db.transaction();
    let snapshot_taken = clock.fetch_add(1, Ordering::SeqCst);
    let mut t = Recorded {
        id,
        start,
        snapshot_taken,
        commit_called: 0,
        commit_returned: u64::MAX,
        reads: BTreeMap::new(),
        for_update: BTreeSet::new(),
        appended: BTreeSet::new(),
        wrote: BTreeSet::new(),
        committed: false,
        refused: false,
        commit_ended: u64::MAX,
    };
    for _ in 0..rng.random_range(1..4) {
        let k = rng.random_range(0..keys);
        if t.reads.contains_key(&k) {
            continue;
        }
        let for_update = rng.random_bool(0.5);
        let value = if for_update {
            tx.get_for_update(list_key(k)).expect("get")
        } else {
            tx.get(list_key(k)).expect("get")
        };
        t.reads.insert(k, parse_list(value));
        if for_update {
            t.for_update.insert(k);
        }
    }
    let readable: Vec<usize> = t.reads.keys().copied().collect();
    for &k in &readable {
        if rng.random_bool(0.6) {
            let mut list = t.reads[&k].clone();
            list.push(id);
            let joined: Vec<String> = list.iter().map(u64::to_string).collect();
            tx.put(list_key(k), joined.join(",")).expect("put");
            t.appended.insert(k);
            t.wrote.insert(k);
        }
    }
    // Let others run between the reads and the commit.
    if rng.random_bool(0.3) {
        std::thread::sleep(std::time::Duration::from_micros(rng.random_range(0..300)));
    } else {
        std::thread::yield_now();
    }
    if rng.random_bool(0.1) {
        tx.rollback();
        t.appended.clear();
    } else {
        t.commit_called = clock.fetch_add(1, Ordering::SeqCst);
        let sync = rng.random_bool(0.1);
        match tx.commit_opt(&WriteOptions::default().sync(sync)) {
            Ok(()) => {
                t.committed = true;
                t.commit_returned = clock.fetch_add(1, Ordering::SeqCst);
            }
            Err(Error::Conflict(_)) => t.refused = true,
            Err(e) => panic!("commit of {id}: {e}"),
        }
        t.commit_ended = clock.fetch_add(1, Ordering::SeqCst);
    }
    if !t.committed {
        t.appended.clear();
        t.commit_called = u64::MAX;
    }
    t
}

#[test]
fn concurrent_transactions_keep_snapshot_isolation() {
    common::run_seeded("concurrent_transactions_keep_snapshot_isolation", 3, |seed| {
        const KEYS: usize = 6;
        const THREADS: u64 = 4;
        const PER_THREAD: usize = 120;
        let fs = MemFs::new();
        let mut rng = common::rng(seed);
        let opts = common::small_options(&fs, &mut rng);
        let db = Arc::new(Db::open("/db", opts).expect("open"));
        let clock = Arc::new(AtomicU64::new(1));
        let next_id = Arc::new(AtomicU64::new(1));
        let history = Arc::new(Mutex::new(Vec::new()));
        let threads: Vec<_> = (0..THREADS)
            .map(|n| {
                let (db, clock, next_id, history) =
                    (db.clone(), clock.clone(), next_id.clone(), history.clone());
                std::thread::spawn(move || {
                    let mut rng = common::rng(seed ^ (n + 1));
                    for _ in 0..PER_THREAD {
                        let id = next_id.fetch_add(1, Ordering::SeqCst);
                        let t = read_append_transaction(&db, &clock, id, KEYS, &mut rng);
                        history.lock().expect("history").push(t);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        let history = history.lock().expect("history").clone();
        let finals: BTreeMap<usize, Vec<u64>> =
            (0..KEYS).map(|k| (k, parse_list(db.get(list_key(k)).expect("get")))).collect();
        if let Err(e) = check_snapshot_isolation(&history, &finals) {
            panic!("snapshot isolation broken: {e}");
        }
        let committed = history.iter().filter(|t| t.committed && !t.appended.is_empty()).count();
        let conflicts = history.iter().filter(|t| !t.committed && t.commit_called == u64::MAX).count();
        assert!(committed > 50, "only {committed} committed appends");
        assert!(conflicts > 0, "no transaction conflicted or rolled back");
        // The lists survive a reopen whole.
        drop(db);
        let db = Db::open("/db", Options::default().fs(Arc::new(fs.clone()))).expect("reopen");
        for (k, list) in &finals {
            assert_eq!(&parse_list(db.get(list_key(*k)).expect("get")), list, "key {k} after reopen");
        }
    });
}

#[test]
fn bank_transfers_keep_the_total_under_contention() {
    common::run_seeded("bank_transfers_keep_the_total_under_contention", 2, |seed| {
        const ACCOUNTS: i64 = 12;
        const TOTAL: i64 = ACCOUNTS * 100;
        let fs = MemFs::new();
        let mut rng = common::rng(seed);
        let db = Arc::new(Db::open("/db", common::small_options(&fs, &mut rng)).expect("open"));
        let table =
            db.create_table("accounts", accounts_schema(), &["id"], TableOptions::default()).expect("t");
        let ids: Vec<i64> = (0..ACCOUNTS).collect();
        let owners: Vec<Option<&str>> = ids.iter().map(|_| None).collect();
        table.write(&account_rows(&ids, &owners, &vec![100; ACCOUNTS as usize])).expect("write");
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let audits = {
            let (db, table, done) = (db.clone(), table.clone(), done.clone());
            std::thread::spawn(move || {
                let mut audits = 0;
                while !done.load(Ordering::Relaxed) {
                    let tx = db.transaction();
                    let total: i64 = (0..ACCOUNTS)
                        .map(|i| {
                            balance_of(&tx.get_table(&table, &[KeyValue::I64(i)]).expect("get").expect("row"))
                        })
                        .sum();
                    assert_eq!(total, TOTAL, "a snapshot saw half a transfer");
                    audits += 1;
                }
                audits
            })
        };
        let committed = Arc::new(AtomicU64::new(0));
        let conflicts = Arc::new(AtomicU64::new(0));
        let movers: Vec<_> = (0..3u64)
            .map(|n| {
                let (db, table, committed, conflicts) =
                    (db.clone(), table.clone(), committed.clone(), conflicts.clone());
                std::thread::spawn(move || {
                    let mut rng = common::rng(seed ^ (n + 7));
                    for _ in 0..150 {
                        let from = rng.random_range(0..ACCOUNTS);
                        let to = (from + rng.random_range(1..ACCOUNTS)) % ACCOUNTS;
                        let mut tx = db.transaction();
                        let a = balance_of(
                            &tx.get_table_for_update(&table, &[KeyValue::I64(from)])
                                .expect("get")
                                .expect("row"),
                        );
                        let b = balance_of(
                            &tx.get_table_for_update(&table, &[KeyValue::I64(to)])
                                .expect("get")
                                .expect("row"),
                        );
                        let amount = rng.random_range(0..=a.min(30));
                        tx.put_table(
                            &table,
                            &account_rows(&[from, to], &[None, None], &[a - amount, b + amount]),
                        )
                        .expect("put");
                        if rng.random_bool(0.1) {
                            continue; // dropped: rolled back
                        }
                        std::thread::yield_now();
                        match tx.commit() {
                            Ok(()) => committed.fetch_add(1, Ordering::Relaxed),
                            Err(Error::Conflict(_)) => conflicts.fetch_add(1, Ordering::Relaxed),
                            Err(e) => panic!("transfer: {e}"),
                        };
                    }
                })
            })
            .collect();
        for m in movers {
            m.join().expect("mover");
        }
        done.store(true, Ordering::Relaxed);
        assert!(audits.join().expect("auditor") > 0);
        let total: i64 = (0..ACCOUNTS)
            .map(|i| balance_of(&table.get(&[KeyValue::I64(i)]).expect("get").expect("row")))
            .sum();
        assert_eq!(total, TOTAL);
        assert!(
            committed.load(Ordering::Relaxed) > 100,
            "{} transfers committed",
            committed.load(Ordering::Relaxed)
        );
        eprintln!(
            "seed {seed}: {} transfers committed, {} conflicted",
            committed.load(Ordering::Relaxed),
            conflicts.load(Ordering::Relaxed)
        );
    });
}

/// Scans inside a transaction (`ScanOptions::overlay`) against a model:
/// the snapshot's rows (some in SSTs, some in the memtable, others written
/// after the snapshot by another writer) with the transaction's own upserts
/// and deletes on top, over random ranges, projections and filters, with
/// and without an index the filter could use.
#[test]
fn scans_with_the_overlay_see_the_transactions_own_writes() {
    common::run_seeded("overlay scans", 40, |seed| {
        let mut rng = common::rng(seed);
        let fs = MemFs::new();
        let db = Db::open("/db", common::small_options(&fs, &mut rng)).expect("open");
        let schema: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("v", DataType::Int64, true),
        ]));
        let t = db.create_table("t", schema.clone(), &["k"], TableOptions::default()).expect("create");
        if rng.random_bool(0.5) {
            t.create_index("by_v", &["v"], IndexOptions::default()).expect("index");
        }
        let rows = |pairs: &[(i64, Option<i64>)]| {
            let k = Int64Array::from(pairs.iter().map(|p| p.0).collect::<Vec<_>>());
            let v = Int64Array::from(pairs.iter().map(|p| p.1).collect::<Vec<_>>());
            RecordBatch::try_new(schema.clone(), vec![Arc::new(k), Arc::new(v)]).expect("rows")
        };
        let mut model: BTreeMap<i64, Option<i64>> = BTreeMap::new();
        for round in 0..3 {
            let pairs: Vec<(i64, Option<i64>)> = (0..rng.random_range(5..40))
                .map(|_| (rng.random_range(0..60), rng.random_bool(0.9).then(|| rng.random_range(0..8))))
                .collect();
            t.write(&rows(&pairs)).expect("write");
            model.extend(pairs);
            if round < 2 && rng.random_bool(0.6) {
                db.flush().expect("flush");
            }
        }
        let mut tx = db.transaction();
        // Another writer after the snapshot: the scan must not see it.
        t.write(&rows(&[(1, Some(100)), (61, Some(100))])).expect("later write");
        let mut own: BTreeMap<i64, Option<Option<i64>>> = BTreeMap::new();
        for _ in 0..rng.random_range(0..4) {
            let pairs: Vec<(i64, Option<i64>)> = (0..rng.random_range(1..10))
                .map(|_| (rng.random_range(0..70), rng.random_bool(0.9).then(|| rng.random_range(0..8))))
                .collect();
            tx.put_table(&t, &rows(&pairs)).expect("put");
            own.extend(pairs.into_iter().map(|(k, v)| (k, Some(v))));
            let deletes: Vec<i64> = (0..rng.random_range(0..4)).map(|_| rng.random_range(0..70)).collect();
            let keys = RecordBatch::try_new(
                Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)])),
                vec![Arc::new(Int64Array::from(deletes.clone()))],
            )
            .expect("keys");
            tx.delete_table(&t, &keys).expect("delete");
            own.extend(deletes.into_iter().map(|k| (k, None)));
        }
        let mut seen = model.clone();
        for (k, change) in &own {
            match change {
                Some(v) => seen.insert(*k, *v),
                None => seen.remove(k),
            };
        }
        check_overlay_scans(&t, &tx, &seen, &mut rng, seed);
        // An overlay of another table is refused.
        let other = db.create_table("u", schema.clone(), &["k"], TableOptions::default()).expect("u");
        let wrong = basalt::ScanOptions::default().overlay(Some(tx.overlay(&t)));
        assert!(matches!(other.scan(wrong), Err(Error::InvalidArgument(_))));
        drop(tx);
    });
}

/// Random scans of `t` through `tx`'s snapshot and overlay, checked
/// against `visible` (what the transaction sees: key → v).
fn check_overlay_scans(
    t: &basalt::Table,
    tx: &basalt::Transaction,
    visible: &BTreeMap<i64, Option<i64>>,
    rng: &mut rand::rngs::StdRng,
    seed: u64,
) {
    for _ in 0..6 {
        let lo = rng.random_range(0..70i64);
        let hi = rng.random_range(lo..75);
        let want_v = rng.random_range(0..8i64);
        let filtered = rng.random_bool(0.5);
        let mut opts = basalt::ScanOptions::default()
            .snapshot(Some(tx.snapshot()))
            .overlay(Some(tx.overlay(t)))
            .range((
                std::ops::Bound::Included(vec![KeyValue::I64(lo)]),
                std::ops::Bound::Excluded(vec![KeyValue::I64(hi)]),
            ))
            .batch_size(rng.random_range(1..20));
        if filtered {
            let literal = Arc::new(Int64Array::from(vec![want_v]));
            opts = opts.filter(Some(basalt::Filter::all(vec![basalt::Predicate::new(
                "v",
                basalt::CmpOp::Eq,
                literal,
            )])));
        }
        let project_v_only = rng.random_bool(0.3);
        if project_v_only {
            opts = opts.projection(Some(vec!["v".into()]));
        }
        let mut got: Vec<Option<i64>> = Vec::new();
        let mut got_keys: Vec<i64> = Vec::new();
        for batch in t.scan(opts).expect("scan") {
            let batch = batch.expect("batch");
            let v = batch.column_by_name("v").expect("v").as_any().downcast_ref::<Int64Array>().expect("i64");
            got.extend((0..v.len()).map(|i| v.is_valid(i).then(|| v.value(i))));
            if let Some(k) = batch.column_by_name("k") {
                let k = k.as_any().downcast_ref::<Int64Array>().expect("i64");
                got_keys.extend(k.values().iter());
            }
        }
        let want: Vec<(i64, Option<i64>)> = visible
            .range(lo..hi)
            .filter(|(_, v)| !filtered || **v == Some(want_v))
            .map(|(k, v)| (*k, *v))
            .collect();
        assert_eq!(
            got,
            want.iter().map(|p| p.1).collect::<Vec<_>>(),
            "seed {seed}: [{lo}, {hi}) filtered {filtered}"
        );
        if !project_v_only {
            assert_eq!(got_keys, want.iter().map(|p| p.0).collect::<Vec<_>>(), "seed {seed}: keys");
        }
    }
}

/// A key written several times in one transaction through both faces of
/// the default keyspace (key-value entries and its table face's rows), in
/// every interleaving: before the commit the transaction reads each key as
/// the commit then writes it (the last write in batch order), whichever
/// face wrote it and whether the writes came one call at a time or in one
/// `Transaction::write` batch. A model keeps the last write of each key.
#[test]
fn own_writes_read_as_the_commit_applies_them_whatever_face_wrote_them() {
    use basalt::WriteBatch;
    use basalt::arrow_array::{ArrayRef, BinaryArray};
    common::run_seeded("own_writes_in_batch_order", 40, |seed| {
        let mut rng = common::rng(seed);
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open(dir.path());
        let face = db.table("default").expect("face");
        let face_keys = |keys: &[Vec<u8>]| {
            let schema = Arc::new(Schema::new(vec![Field::new("key", DataType::Binary, false)]));
            let column: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            RecordBatch::try_new(schema, vec![Arc::new(BinaryArray::from(column)) as ArrayRef]).expect("keys")
        };
        let face_row = |key: &[u8], value: &[u8]| {
            let columns: Vec<ArrayRef> =
                vec![Arc::new(BinaryArray::from(vec![key])), Arc::new(BinaryArray::from(vec![value]))];
            RecordBatch::try_new(face.schema(), columns).expect("row")
        };
        let keys: Vec<Vec<u8>> = (0..3).map(|k| format!("k{k}").into_bytes()).collect();
        for k in &keys {
            if rng.random_bool(0.5) {
                db.put(k, b"before").expect("put");
            }
        }
        let mut model: BTreeMap<Vec<u8>, Option<Vec<u8>>> =
            keys.iter().map(|k| (k.clone(), db.get(k).expect("get").map(|v| v.to_vec()))).collect();
        let mut tx = db.transaction();
        let mut batch = WriteBatch::new();
        for step in 0..rng.random_range(1..12) {
            let key = keys[rng.random_range(0..keys.len())].clone();
            let value = format!("v{step}").into_bytes();
            let (face_write, delete) = (rng.random_bool(0.5), rng.random_bool(0.3));
            match (face_write, delete) {
                (false, false) => batch.put(&key, &value),
                (false, true) => batch.delete(&key),
                (true, false) => batch.put_table(&face, &face_row(&key, &value)).expect("put_table"),
                (true, true) => {
                    batch.delete_table(&face, &face_keys(std::slice::from_ref(&key))).expect("delete_table");
                }
            }
            model.insert(key, (!delete).then_some(value));
            // Sometimes hand the batch over so far: a transaction's writes
            // arrive in several calls too.
            if rng.random_bool(0.3) {
                tx.write(std::mem::take(&mut batch)).expect("write");
            }
        }
        tx.write(batch).expect("write");
        for (k, want) in &model {
            let got = tx.get(k).expect("get").map(|v| v.to_vec());
            assert_eq!(&got, want, "seed {seed}: Transaction::get of {k:?}");
            let row = tx.get_table(&face, &[KeyValue::Bytes(k)]).expect("get_table");
            let got = row
                .map(|r| r.column(1).as_any().downcast_ref::<BinaryArray>().expect("bin").value(0).to_vec());
            assert_eq!(&got, want, "seed {seed}: Transaction::get_table of {k:?}");
        }
        tx.commit().expect("commit");
        for (k, want) in &model {
            assert_eq!(&db.get(k).expect("get").map(|v| v.to_vec()), want, "seed {seed}: committed {k:?}");
        }
    });
}

/// After a column change, a transaction's own delete of a row of that
/// table is refused on read as its overlay and commit refuse it, not read
/// as "no row".
#[test]
fn an_own_delete_read_after_a_column_change_is_refused_like_the_commit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path());
    let t = db.create_table("accounts", accounts_schema(), &["id"], TableOptions::default()).expect("create");
    t.write(&account_rows(&[1, 2], &[Some("a"), Some("b")], &[10, 20])).expect("write");
    let mut tx = db.transaction();
    let key_schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    let keys = RecordBatch::try_new(key_schema, vec![Arc::new(Int64Array::from(vec![1]))]).expect("keys");
    tx.delete_table(&t, &keys).expect("delete");
    assert_eq!(tx.get_table(&t, &[KeyValue::I64(1)]).expect("before the change").map(|r| r.num_rows()), None);
    t.add_column(Arc::new(Field::new("note", DataType::Utf8, true)), None).expect("add_column");
    assert!(
        matches!(tx.get_table(&t, &[KeyValue::I64(1)]), Err(Error::Conflict(_))),
        "an own delete read after the change"
    );
    assert!(matches!(tx.commit(), Err(Error::Conflict(_))), "the commit");
    assert_eq!(t.get(&[KeyValue::I64(1)]).expect("get").map(|r| r.num_rows()), Some(1));
}

/// A transaction that only read for update, committed with `sync`,
/// promises as a synced write does that every write before it is durable:
/// an unsynced write it read survives a power loss right after the commit.
#[test]
fn a_synced_commit_of_reads_for_update_makes_earlier_writes_durable() {
    let fs = MemFs::new();
    let db = Db::open("/db", Options::default().fs(Arc::new(fs.clone()))).expect("open");
    db.put(b"seen", b"unsynced").expect("put");
    let mut tx = db.transaction();
    assert_eq!(text(tx.get_for_update(b"seen").expect("read")).as_deref(), Some("unsynced"));
    tx.commit_opt(&WriteOptions::default().sync(true)).expect("commit");
    let after = fs.crash(basalt::testing::CrashMode::DropUnsynced, 7);
    drop(db);
    let db = Db::open("/db", Options::default().fs(Arc::new(after))).expect("reopen");
    assert_eq!(
        text(db.get(b"seen").expect("get")).as_deref(),
        Some("unsynced"),
        "the synced commit's promise"
    );
}
