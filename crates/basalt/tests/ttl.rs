//! Times to live and compaction filters (`docs/ttl.md`), with a manual
//! clock at the boundaries: a version is visible until exactly `ttl` after
//! its commit, then gone from every read (gets, iterators, snapshots,
//! table scans, index lookups and counts); compaction drops it, whole files
//! at once; it stays gone across reopens and a longer TTL. A random model
//! mixes writes, clock moves, flushes, compactions, snapshots and reopens
//! against an oracle that stamps each write with the clock.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::{Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use basalt::clock::{ManualClock, WallClock};
use basalt::testing::MemFs;
use basalt::{
    CompactionFilter, Db, Error, FilterDecision, FilterEntry, HistoryWindow, IndexPredicate, KeyValue,
    LookupOptions, Options, ScanOptions, TableOptions,
};
use rand::Rng;

const T0: u64 = 1_800_000_000_000;

fn options(fs: &MemFs, clock: &Arc<ManualClock>) -> Options {
    Options::default()
        .fs(Arc::new(fs.clone()))
        .clock(clock.clone())
        .memtable_bytes_max(64 << 10)
        .sst_bytes_target(16 << 10)
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

fn default(db: &Db) -> basalt::Keyspace {
    db.keyspace("default").expect("the default keyspace")
}

fn keys(db: &Db) -> Vec<Vec<u8>> {
    db.iter::<&[u8]>(..).map(|kv| kv.expect("iter").0.to_vec()).collect()
}

#[test]
fn a_version_is_visible_until_exactly_its_ttl_then_gone_from_every_read() {
    let fs = MemFs::new();
    let clock = Arc::new(ManualClock::new(T0));
    let db = Db::open("/db", options(&fs, &clock)).expect("open");
    let ks = db.create_keyspace("sessions").expect("keyspace");
    ks.set_ttl(Some(Duration::from_secs(1))).expect("ttl");
    assert_eq!(ks.ttl(), Some(Duration::from_secs(1)));
    ks.put(b"a", b"1").expect("put");
    clock.advance(400);
    ks.put(b"b", b"2").expect("put");
    let early = db.snapshot();
    clock.advance(599);
    // T0 + 999: a is one millisecond from expiry.
    assert_eq!(ks.get(b"a").expect("get").as_deref(), Some(&b"1"[..]));
    clock.advance(1);
    // T0 + 1000: a expired, b (written at T0 + 400) has 400 ms left.
    assert_eq!(ks.get(b"a").expect("get"), None);
    assert_eq!(ks.get(b"b").expect("get").as_deref(), Some(&b"2"[..]));
    let listed: Vec<Vec<u8>> = ks.iter::<&[u8]>(..).map(|kv| kv.expect("iter").0.to_vec()).collect();
    assert_eq!(listed, vec![b"b".to_vec()]);
    // A snapshot taken before does not bring it back: expiry is now.
    assert_eq!(ks.get_opt(b"a", &basalt::ReadOptions::default().snapshot(Some(&early))).expect("get"), None);
    // Rewritten: lives again from its new commit.
    ks.put(b"a", b"3").expect("put");
    clock.advance(400);
    assert_eq!(ks.get(b"b").expect("get"), None);
    assert_eq!(ks.get(b"a").expect("get").as_deref(), Some(&b"3"[..]));
    // A snapshot older than the expiry floor sees nothing at all.
    assert_eq!(ks.get_opt(b"b", &basalt::ReadOptions::default().snapshot(Some(&early))).expect("get"), None);
    assert!(
        ks.iter_opt::<&[u8]>(
            ..,
            basalt::Direction::Forward,
            &basalt::ReadOptions::default().snapshot(Some(&early))
        )
        .next()
        .is_none()
    );
    // The default keyspace has no TTL.
    db.put(b"x", b"forever").expect("put");
    clock.advance(10_000_000);
    assert_eq!(db.get(b"x").expect("get").as_deref(), Some(&b"forever"[..]));
}

#[test]
fn expired_files_are_dropped_whole_and_expiry_survives_reopen() {
    let fs = MemFs::new();
    let clock = Arc::new(ManualClock::new(T0));
    {
        let db = Db::open("/db", options(&fs, &clock)).expect("open");
        default(&db).set_ttl(Some(Duration::from_secs(60))).expect("ttl");
        for i in 0..3000 {
            db.put(key(i), vec![b'v'; 100]).expect("put");
        }
        db.flush().expect("flush");
        clock.advance(30_000);
        for i in 3000..3100 {
            db.put(key(i), b"later").expect("put");
        }
        db.flush().expect("flush");
        clock.advance(30_000);
        // The first 3000 expired; their files go without a compaction
        // reading them.
        db.wait_for_background_work().expect("wait");
        let stats = db.stats();
        assert!(stats.files_dropped_expired > 0, "{stats}");
        assert_eq!(keys(&db), (3000..3100).map(key).collect::<Vec<_>>());
        db.close().expect("close");
    }
    let db = Db::open("/db", options(&fs, &clock)).expect("reopen");
    assert_eq!(default(&db).ttl(), Some(Duration::from_secs(60)));
    assert_eq!(keys(&db), (3000..3100).map(key).collect::<Vec<_>>());
    clock.advance(30_000);
    assert!(keys(&db).is_empty());
    db.compact_range::<&[u8]>(..).expect("compact");
    assert_eq!(db.stats().levels.iter().map(|l| l.files).sum::<usize>(), 0);
}

#[test]
fn unflushed_writes_keep_their_commit_times_across_a_reopen() {
    let fs = MemFs::new();
    let clock = Arc::new(ManualClock::new(T0));
    {
        let db = Db::open("/db", options(&fs, &clock)).expect("open");
        default(&db).set_ttl(Some(Duration::from_secs(10))).expect("ttl");
        db.put(b"old", b"1").expect("put");
        clock.advance(5_000);
        db.put(b"new", b"2").expect("put");
        db.close().expect("close");
    }
    // Replayed from the WAL, stamped as committed.
    let db = Db::open("/db", options(&fs, &clock)).expect("reopen");
    clock.advance(5_000);
    assert_eq!(db.get(b"old").expect("get"), None);
    assert_eq!(db.get(b"new").expect("get").as_deref(), Some(&b"2"[..]));
}

#[test]
fn a_ttl_set_over_old_data_counts_it_as_written_then_and_a_longer_one_brings_nothing_back() {
    let fs = MemFs::new();
    let clock = Arc::new(ManualClock::new(T0));
    let db = Db::open("/db", options(&fs, &clock)).expect("open");
    db.put(b"before", b"1").expect("put");
    db.flush().expect("flush");
    clock.advance(3_600_000);
    default(&db).set_ttl(Some(Duration::from_secs(1))).expect("ttl");
    // Written an hour ago, but counted as written now.
    assert_eq!(db.get(b"before").expect("get").as_deref(), Some(&b"1"[..]));
    db.put(b"after", b"2").expect("put");
    clock.advance(1_000);
    assert_eq!(db.get(b"before").expect("get"), None);
    assert_eq!(db.get(b"after").expect("get"), None);
    db.put(b"third", b"3").expect("put");
    // A longer TTL: what expired stays expired, also after a reopen.
    default(&db).set_ttl(Some(Duration::from_secs(100))).expect("longer");
    assert_eq!(db.get(b"after").expect("get"), None);
    clock.advance(2_000);
    assert_eq!(db.get(b"third").expect("get").as_deref(), Some(&b"3"[..]));
    db.close().expect("close");
    let db = Db::open("/db", options(&fs, &clock)).expect("reopen");
    assert_eq!(db.get(b"after").expect("get"), None);
    assert_eq!(db.get(b"before").expect("get"), None);
    assert_eq!(db.get(b"third").expect("get").as_deref(), Some(&b"3"[..]));
    // Turned off: versions live for ever from now on, and what had
    // expired stays gone, also after a reopen and a compaction.
    default(&db).set_ttl(None).expect("off");
    assert_eq!(default(&db).ttl(), None);
    clock.advance(1_000_000);
    assert_eq!(db.get(b"third").expect("get").as_deref(), Some(&b"3"[..]));
    assert_eq!(db.get(b"after").expect("get"), None);
    db.close().expect("close");
    let db = Db::open("/db", options(&fs, &clock)).expect("reopen");
    assert_eq!(db.get(b"after").expect("get"), None);
    assert_eq!(keys(&db), vec![b"third".to_vec()]);
    db.compact_range::<&[u8]>(..).expect("compact");
    assert_eq!(keys(&db), vec![b"third".to_vec()]);
    // On again: what was written while it was off counts as written now.
    db.put(b"fourth", b"4").expect("put");
    default(&db).set_ttl(Some(Duration::from_secs(5))).expect("on");
    clock.advance(4_999);
    assert_eq!(keys(&db), vec![b"fourth".to_vec(), b"third".to_vec()]);
    clock.advance(1);
    assert!(keys(&db).is_empty());
}

#[test]
fn a_ttl_is_refused_with_history_or_a_merge_operator_and_when_zero() {
    let fs = MemFs::new();
    let clock = Arc::new(ManualClock::new(T0));
    let db = Db::open("/db", options(&fs, &clock)).expect("open");
    let counters = db.create_keyspace("counters").expect("keyspace");
    counters.set_merge_operator("add_i64").expect("merge");
    assert!(matches!(counters.set_ttl(Some(Duration::from_secs(1))), Err(Error::InvalidArgument(_))));
    let kept = db.create_keyspace("kept").expect("keyspace");
    kept.set_history(HistoryWindow::versions(3)).expect("history");
    assert!(matches!(kept.set_ttl(Some(Duration::from_secs(1))), Err(Error::InvalidArgument(_))));
    let timed = db.create_keyspace("timed").expect("keyspace");
    assert!(matches!(timed.set_ttl(Some(Duration::ZERO)), Err(Error::InvalidArgument(_))));
    timed.set_ttl(Some(Duration::from_secs(1))).expect("ttl");
    assert!(matches!(timed.set_merge_operator("add_i64"), Err(Error::InvalidArgument(_))));
    assert!(matches!(timed.set_history(HistoryWindow::versions(3)), Err(Error::InvalidArgument(_))));
    assert_eq!(timed.merge_operator(), None);
}

fn events(db: &Db) -> basalt::Table {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("city", DataType::Utf8, true),
    ]));
    db.create_table("events", schema, &["id"], TableOptions::default()).expect("table")
}

fn rows(table: &basalt::Table, ids: std::ops::Range<i64>, city: &str) -> RecordBatch {
    let cities: Vec<String> = ids.clone().map(|i| format!("{city}{}", i % 3)).collect();
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

fn looked_up(table: &basalt::Table, city: &str) -> Vec<i64> {
    let found = table
        .lookup("by_city", IndexPredicate::Eq(vec![Some(KeyValue::Str(city))]), LookupOptions::default())
        .expect("lookup");
    let col = found.column(0).as_any().downcast_ref::<Int64Array>().expect("ids");
    let mut out: Vec<i64> = col.values().to_vec();
    out.sort_unstable();
    out
}

fn covered(table: &basalt::Table, city: &str) -> usize {
    let opts = LookupOptions::default().projection(Some(vec!["city".to_string(), "id".to_string()]));
    table
        .lookup("by_city", IndexPredicate::Eq(vec![Some(KeyValue::Str(city))]), opts)
        .expect("covered lookup")
        .num_rows()
}

#[test]
fn a_tables_rows_expire_with_their_index_entries_built_or_kept() {
    let fs = MemFs::new();
    let clock = Arc::new(ManualClock::new(T0));
    let db = Db::open("/db", options(&fs, &clock)).expect("open");
    let table = events(&db);
    table.set_ttl(Some(Duration::from_secs(10))).expect("ttl");
    table.write(&rows(&table, 0..300, "a")).expect("write");
    db.flush().expect("flush");
    clock.advance(5_000);
    // Built over rows of two ages: each entry takes its row's seqno.
    table.create_index("by_city", &["city"], basalt::IndexOptions::default()).expect("index");
    table.write(&rows(&table, 300..400, "a")).expect("write");
    assert_eq!(
        table.count("by_city", IndexPredicate::Eq(vec![Some(KeyValue::Str("a0"))])).expect("count"),
        134
    );
    clock.advance(5_000);
    // The first 300 rows expired, entries and all.
    assert_eq!(ids(&table), (300..400).collect::<Vec<_>>());
    let a0: Vec<i64> = (300..400).filter(|i| i % 3 == 0).collect();
    assert_eq!(looked_up(&table, "a0"), a0);
    assert_eq!(covered(&table, "a0"), a0.len());
    assert_eq!(
        table.count("by_city", IndexPredicate::Eq(vec![Some(KeyValue::Str("a0"))])).expect("count"),
        34
    );
    assert_eq!(
        table.count_rows(&(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded), None).expect("n"),
        100
    );
    assert_eq!(table.get(&[KeyValue::I64(5)]).expect("get"), None);
    // Keys written again with other values: no stale entry names them
    // under their old values.
    table.write(&rows(&table, 0..30, "b")).expect("write");
    assert_eq!(looked_up(&table, "a0"), a0);
    assert_eq!(looked_up(&table, "b0"), (0..30).filter(|i| i % 3 == 0).collect::<Vec<_>>());
    let check = basalt::inspect::check_indexes(&table).expect("check");
    assert!(check.iter().all(|c| c.consistent && c.rows == 130), "{check:?}");
    db.flush().expect("flush");
    table.compact().expect("compact");
    clock.advance(10_000);
    assert!(ids(&table).is_empty());
    assert!(looked_up(&table, "b0").is_empty());
    table.compact().expect("compact");
    assert_eq!(db.stats().levels.iter().map(|l| l.files).sum::<usize>(), 0, "{}", db.stats());
}

#[test]
fn sql_style_reads_through_an_index_plan_skip_expired_rows() {
    let fs = MemFs::new();
    let clock = Arc::new(ManualClock::new(T0));
    let db = Db::open("/db", options(&fs, &clock)).expect("open");
    let table = events(&db);
    table.create_index("by_city", &["city"], basalt::IndexOptions::default()).expect("index");
    table.set_ttl(Some(Duration::from_secs(1))).expect("ttl");
    table.write(&rows(&table, 0..200, "a")).expect("write");
    clock.advance(500);
    table.write(&rows(&table, 200..260, "a")).expect("write");
    clock.advance(500);
    let city: arrow_array::ArrayRef = Arc::new(StringArray::from(vec!["a1"]));
    let filter = basalt::Filter::all(vec![basalt::Predicate::new("city", basalt::CmpOp::Eq, city)]);
    let mut found = Vec::new();
    for batch in table.scan(ScanOptions::default().filter(Some(filter))).expect("scan") {
        let batch = batch.expect("batch");
        let col = batch.column(0).as_any().downcast_ref::<Int64Array>().expect("ids");
        found.extend(col.values().iter().copied());
    }
    found.sort_unstable();
    assert_eq!(found, (200..260).filter(|i| i % 3 == 1).collect::<Vec<_>>());
}

/// Drops values starting with `tmp:`, rewrites `old:` ones to `new:`.
struct Tidy;

impl CompactionFilter for Tidy {
    fn name(&self) -> &'static str {
        "tidy"
    }

    fn filter(&self, entry: &FilterEntry<'_>) -> FilterDecision {
        assert_eq!(entry.keyspace, "docs");
        assert!(entry.level >= 1);
        if entry.value.starts_with(b"tmp:") {
            FilterDecision::Remove
        } else if let Some(rest) = entry.value.strip_prefix(b"old:") {
            FilterDecision::ChangeValue([b"new:".as_slice(), rest].concat())
        } else if entry.value == b"boom" {
            panic!("a filter's bug")
        } else {
            FilterDecision::Keep
        }
    }
}

#[test]
fn a_compaction_filter_removes_and_changes_what_no_snapshot_sees_past() {
    let fs = MemFs::new();
    let clock = Arc::new(ManualClock::new(T0));
    let opts = options(&fs, &clock).compaction_filters(vec![("docs".to_string(), Arc::new(Tidy) as _)]);
    let db = Db::open("/db", opts).expect("open");
    let docs = db.create_keyspace("docs").expect("keyspace");
    let other = db.create_keyspace("other").expect("keyspace");
    // e's first value is what a snapshot sees; the filter never hears of
    // a version a snapshot may read.
    docs.put(b"e", b"first").expect("put");
    docs.put(b"f", b"tmp:seen by the snapshot").expect("put");
    let snap = db.snapshot();
    docs.put(b"a", b"old:1").expect("put");
    docs.put(b"b", b"tmp:x").expect("put");
    docs.put(b"c", b"keep").expect("put");
    docs.put(b"d", b"boom").expect("put");
    other.put(b"b", b"tmp:y").expect("put");
    db.flush().expect("flush");
    docs.put(b"e", b"tmp:second").expect("put");
    // Before compaction reaches them, reads see what was written.
    assert_eq!(docs.get(b"b").expect("get").as_deref(), Some(&b"tmp:x"[..]));
    docs.compact_range::<&[u8]>(..).expect("compact");
    other.compact_range::<&[u8]>(..).expect("compact");
    assert_eq!(docs.get(b"a").expect("get").as_deref(), Some(&b"new:1"[..]));
    assert_eq!(docs.get(b"b").expect("get"), None);
    assert_eq!(docs.get(b"c").expect("get").as_deref(), Some(&b"keep"[..]));
    // A filter that panics keeps the entry.
    assert_eq!(docs.get(b"d").expect("get").as_deref(), Some(&b"boom"[..]));
    // The newest e was removed; the snapshot still reads its older value,
    // and the latest state does not fall back to it.
    assert_eq!(docs.get(b"e").expect("get"), None);
    let at = basalt::ReadOptions::default().snapshot(Some(&snap));
    assert_eq!(docs.get_opt(b"e", &at).expect("get").as_deref(), Some(&b"first"[..]));
    assert_eq!(docs.get(b"f").expect("get").as_deref(), Some(&b"tmp:seen by the snapshot"[..]));
    // Another keyspace has no filter.
    assert_eq!(other.get(b"b").expect("get").as_deref(), Some(&b"tmp:y"[..]));
    let stats = db.stats();
    assert_eq!((stats.entries_removed_by_filters, stats.entries_changed_by_filters), (2, 1), "{stats}");
    // Once the snapshot goes, the next compaction filters f too.
    drop(snap);
    docs.compact_range::<&[u8]>(..).expect("compact");
    assert_eq!(docs.get(b"e").expect("get"), None);
    assert_eq!(docs.get(b"f").expect("get"), None);
    assert_eq!(docs.get_opt(b"e", &basalt::ReadOptions::default()).expect("get"), None);
}

/// The oracle: key → (value, commit time).
type Timed = BTreeMap<Vec<u8>, (Vec<u8>, u64)>;

/// Writes, deletes, clock moves, flushes, compactions, snapshots and
/// reopens on a keyspace with a TTL, against an oracle of each key's
/// value and commit time: every read equals what the oracle holds
/// unexpired now.
#[test]
fn random_operations_with_a_ttl_equal_the_oracle() {
    common::run_seeded("ttl model", 24, |seed| {
        let mut rng = common::rng(seed);
        let fs = MemFs::new();
        let clock = Arc::new(ManualClock::new(T0));
        let opts = common::small_options(&fs, &mut rng).clock(clock.clone());
        let mut ttl_ms = rng.random_range(50..2_000u64);
        // False while the TTL is off.
        let mut on = true;
        let mut db = Db::open("/db", opts.clone()).expect("open");
        default(&db).set_ttl(Some(Duration::from_millis(ttl_ms))).expect("ttl");
        // key → (value, commit time)
        let mut oracle: Timed = BTreeMap::new();
        let mut snapshots: Vec<(basalt::Snapshot, Timed)> = Vec::new();
        let live = |m: &Timed, now: u64, ttl_ms: u64, on: bool| -> Vec<(Vec<u8>, Vec<u8>)> {
            m.iter()
                .filter(|(_, (_, t))| !on || t + ttl_ms > now)
                .map(|(k, (v, _))| (k.clone(), v.clone()))
                .collect()
        };
        for step in 0..400 {
            let now = clock.unix_ms();
            match rng.random_range(0..100) {
                0..45 => {
                    let (k, v) = (common::random_key(&mut rng), common::random_value(&mut rng));
                    db.put(&k, &v).expect("put");
                    oracle.insert(k, (v, now));
                }
                45..55 => {
                    let k = common::random_key(&mut rng);
                    db.delete(&k).expect("delete");
                    oracle.remove(&k);
                }
                55..60 => {
                    let (a, b) = (common::random_key(&mut rng), common::random_key(&mut rng));
                    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                    db.delete_range(lo.clone()..hi.clone()).expect("delete_range");
                    oracle.retain(|k, _| !(lo <= *k && *k < hi));
                }
                60..73 => clock.advance(rng.random_range(0..ttl_ms / 2 + 2)),
                73..75 => {
                    // A new TTL, or off: what expired stays gone; turned
                    // on from off, what is there counts as written now.
                    if on {
                        oracle.retain(|_, (_, t)| *t + ttl_ms > now);
                        for (_, then) in &mut snapshots {
                            then.retain(|_, (_, t)| *t + ttl_ms > now);
                        }
                    }
                    let next = rng.random_bool(0.7).then(|| rng.random_range(50..2_000u64));
                    default(&db).set_ttl(next.map(Duration::from_millis)).expect("set ttl");
                    if let Some(next) = next {
                        if !on {
                            for (_, t) in oracle.values_mut() {
                                *t = now;
                            }
                            for (_, then) in &mut snapshots {
                                for (_, t) in then.values_mut() {
                                    *t = now;
                                }
                            }
                        }
                        ttl_ms = next;
                    }
                    on = next.is_some();
                }
                75..80 => db.flush().expect("flush"),
                80..83 => db.compact_range::<&[u8]>(..).expect("compact"),
                83..88 => {
                    snapshots.push((db.snapshot(), oracle.clone()));
                    if snapshots.len() > 3 {
                        snapshots.remove(0);
                    }
                }
                88..91 => {
                    snapshots.clear();
                    db.close().expect("close");
                    db = Db::open("/db", opts.clone()).expect("reopen");
                }
                _ => {
                    let k = common::random_key(&mut rng);
                    let want =
                        oracle.get(&k).filter(|(_, t)| !on || t + ttl_ms > now).map(|(v, _)| v.clone());
                    assert_eq!(db.get(&k).expect("get").map(|v| v.to_vec()), want, "step {step}: get {k:?}");
                }
            }
            if step % 25 == 0 {
                let now = clock.unix_ms();
                assert_eq!(
                    common::collect(db.iter::<&[u8]>(..)),
                    live(&oracle, now, ttl_ms, on),
                    "step {step}: iter"
                );
                for (snap, then) in &snapshots {
                    let at = basalt::ReadOptions::default().snapshot(Some(snap));
                    let got = common::collect(db.iter_opt::<&[u8]>(.., basalt::Direction::Forward, &at));
                    assert_eq!(got, live(then, now, ttl_ms, on), "step {step}: snapshot");
                }
            }
        }
        db.wait_for_background_work().expect("wait");
        let now = clock.unix_ms();
        assert_eq!(common::collect(db.iter::<&[u8]>(..)), live(&oracle, now, ttl_ms, on), "end");
    });
}
