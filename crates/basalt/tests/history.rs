//! History windows: reads as of a past point, a key's versions and the
//! change feed, checked against an oracle that keeps every change, through
//! random writes, deletes, transactions, schema changes, flushes,
//! compactions, reopens and crashes; and what lies outside a window is
//! refused, never answered wrongly. A failure prints the seed that
//! replays it (`BASALT_SEED=…`).

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arrow_array::{Array, BooleanArray, Int64Array, RecordBatch, StringArray, UInt64Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use basalt::testing::{CrashMode, MemFs};
use basalt::{
    AsOf, Db, Error, HistoryOptions, HistoryWindow, IndexOptions, IndexPredicate, KeyValue, LookupOptions,
    ReadOptions, ScanOptions, TableOptions, WriteBatch, WriteOptions,
};
use common::{rng, run_seeded};
use rand::Rng;
use rand::rngs::StdRng;

const HOUR: Duration = Duration::from_secs(3600);

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("v", DataType::Utf8, true),
        Field::new("n", DataType::Int64, false),
    ]))
}

/// A table row as the oracle keeps it: (v, n).
type Row = (Option<String>, i64);

fn rows_batch(rows: &[(i64, Row)]) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(rows.iter().map(|r| r.1.0.clone()).collect::<StringArray>()),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1.1))),
        ],
    )
    .expect("batch")
}

fn keys_batch(ids: &[i64]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(ids.to_vec()))]).expect("keys")
}

/// Every change ever committed, with its seqno.
#[derive(Default, Clone)]
struct Oracle {
    kv: Vec<(u64, Vec<u8>, Option<Vec<u8>>)>,
    rows: Vec<(u64, i64, Option<Row>)>,
}

impl Oracle {
    fn kv_at(&self, p: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let mut m = BTreeMap::new();
        for (s, k, v) in self.kv.iter().filter(|c| c.0 <= p) {
            let _ = s;
            match v {
                Some(v) => m.insert(k.clone(), v.clone()),
                None => m.remove(k),
            };
        }
        m
    }

    fn rows_at(&self, p: u64) -> BTreeMap<i64, Row> {
        let mut m = BTreeMap::new();
        for (_, id, r) in self.rows.iter().filter(|c| c.0 <= p) {
            match r {
                Some(r) => m.insert(*id, r.clone()),
                None => m.remove(id),
            };
        }
        m
    }

    /// The versions a window from `since` shows (a duration covering the
    /// whole run): newer than `since`, and the newest at or below it.
    fn shown<T: Clone>(versions: impl DoubleEndedIterator<Item = (u64, T)>, since: u64) -> Vec<(u64, T)> {
        let mut out = Vec::new();
        for (s, v) in versions.rev() {
            out.push((s, v));
            if s <= since {
                break;
            }
        }
        out
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

struct World {
    fs: MemFs,
    db: Db,
    oracle: Oracle,
    /// The windows' start: the seqno history was turned on at.
    since: u64,
    /// Extra columns added to the table so far.
    added: usize,
}

fn options(fs: &MemFs, rng: &mut StdRng) -> basalt::Options {
    common::small_options(fs, rng)
}

fn last_seqno(db: &Db) -> u64 {
    db.snapshot().seqno()
}

fn random_id(rng: &mut StdRng) -> i64 {
    rng.random_range(0..12)
}

fn random_row(rng: &mut StdRng) -> Row {
    let v = rng.random_bool(0.8).then(|| format!("v{}", rng.random_range(0..1000)));
    (v, rng.random_range(0..4))
}

fn random_kv_key(rng: &mut StdRng) -> Vec<u8> {
    format!("k{}", rng.random_range(0..10)).into_bytes()
}

impl World {
    fn new(seed: u64, rng: &mut StdRng) -> World {
        let fs = MemFs::new();
        let db = Db::open("/db", options(&fs, rng)).expect("open");
        db.create_table("t", schema(), &["id"], TableOptions::default()).expect("create");
        db.keyspace("plain").or_else(|_| db.create_keyspace("plain")).expect("keyspace");
        let mut w = World { fs, db, oracle: Oracle::default(), since: 0, added: 0 };
        // Writes before history is on: reads as of them must be refused.
        for _ in 0..rng.random_range(0..6) {
            w.step(rng, seed, false);
        }
        let window = HistoryWindow::duration(HOUR);
        w.db.table("t").expect("t").set_history(window).expect("history");
        w.db.keyspace("default").expect("default").set_history(window).expect("history");
        w.since = last_seqno(&w.db);
        if std::env::var_os("HISTORY_TRACE").is_some() {
            eprintln!("history on at seqno {}", w.since);
        }
        w.db.table("t").expect("t").create_index("by_n", &["n"], IndexOptions::default()).expect("index");
        w
    }

    fn write(&mut self, rng: &mut StdRng) {
        let sync = WriteOptions::default().sync(true);
        match rng.random_range(0..6) {
            0 | 1 => {
                let (k, v) = (random_kv_key(rng), format!("x{}", rng.random_range(0..1000)).into_bytes());
                self.db.put_opt(&k, &v, &sync).expect("put");
                self.oracle.kv.push((last_seqno(&self.db), k, Some(v)));
            }
            2 => {
                let k = random_kv_key(rng);
                self.db.delete_opt(&k, &sync).expect("delete");
                self.oracle.kv.push((last_seqno(&self.db), k, None));
            }
            3 => {
                // A transaction of distinct keys: consecutive seqnos.
                let mut tx = self.db.transaction();
                let mut changes = Vec::new();
                for _ in 0..rng.random_range(1..4) {
                    let k = random_kv_key(rng);
                    if changes.iter().any(|(c, _)| c == &k) {
                        continue;
                    }
                    let v =
                        rng.random_bool(0.7).then(|| format!("t{}", rng.random_range(0..1000)).into_bytes());
                    match &v {
                        Some(v) => tx.put(&k, v).expect("tx put"),
                        None => tx.delete(&k).expect("tx delete"),
                    }
                    changes.push((k, v));
                }
                tx.commit_opt(&sync).expect("commit");
                let last = last_seqno(&self.db);
                let first = last + 1 - changes.len() as u64;
                for (i, (k, v)) in changes.into_iter().enumerate() {
                    self.oracle.kv.push((first + i as u64, k, v));
                }
            }
            4 => {
                let mut rows: Vec<(i64, Row)> = Vec::new();
                for _ in 0..rng.random_range(1..5) {
                    let id = random_id(rng);
                    if !rows.iter().any(|r| r.0 == id) {
                        rows.push((id, random_row(rng)));
                    }
                }
                let mut batch = rows_batch(&rows);
                if self.added > 0 {
                    batch = with_added_columns(&batch, self.added);
                }
                // Rows take the first seqnos; the index entries the
                // engine adds follow them.
                let first = last_seqno(&self.db) + 1;
                self.db.table("t").expect("t").write_opt(&batch, &sync).expect("write");
                for (i, (id, r)) in rows.into_iter().enumerate() {
                    self.oracle.rows.push((first + i as u64, id, Some(r)));
                }
            }
            _ => {
                let mut ids: Vec<i64> = (0..rng.random_range(1..3)).map(|_| random_id(rng)).collect();
                ids.dedup();
                let mut batch = WriteBatch::new();
                batch.delete_table(&self.db.table("t").expect("t"), &keys_batch(&ids)).expect("delete");
                let first = last_seqno(&self.db) + 1;
                self.db.write_opt(batch, &sync).expect("write");
                for (i, id) in ids.into_iter().enumerate() {
                    self.oracle.rows.push((first + i as u64, id, None));
                }
            }
        }
    }

    /// One random step: a write, or (with `maintenance`) a flush, a
    /// compaction, a column added, a reopen or a crash.
    fn step(&mut self, rng: &mut StdRng, seed: u64, maintenance: bool) {
        if !maintenance || rng.random_bool(0.8) {
            return self.write(rng);
        }
        let op = rng.random_range(0..6);
        if std::env::var_os("HISTORY_TRACE").is_some() {
            eprintln!("maintenance {op} at seqno {}", last_seqno(&self.db));
        }
        match op {
            0 => self.db.flush().expect("flush"),
            1 => {
                self.db.compact_range::<&[u8]>(..).expect("compact");
                self.db.table("t").expect("t").compact().expect("compact");
            }
            2 if self.added < 2 => {
                let field = Field::new(format!("extra{}", self.added), DataType::Int64, true);
                self.db.table("t").expect("t").add_column(field, None).expect("add column");
                self.added += 1;
            }
            3 => {
                self.db.close().expect("close");
                self.db = Db::open("/db", options(&self.fs, rng)).expect("reopen");
            }
            4 => {
                // Every write was synced: a power loss keeps them all.
                let crashed = self.fs.crash(CrashMode::TearLastWrite, seed);
                drop(std::mem::replace(
                    &mut self.db,
                    Db::open("/db", options(&crashed, rng)).expect("reopen"),
                ));
                self.fs = crashed;
            }
            _ => {}
        }
    }
}

/// `batch` with `added` null Int64 columns `extra0…` after its own.
fn with_added_columns(batch: &RecordBatch, added: usize) -> RecordBatch {
    let mut fields: Vec<Field> = batch.schema().fields().iter().map(|f| f.as_ref().clone()).collect();
    let mut columns = batch.columns().to_vec();
    for i in 0..added {
        fields.push(Field::new(format!("extra{i}"), DataType::Int64, true));
        columns.push(arrow_array::new_null_array(&DataType::Int64, batch.num_rows()));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("widened")
}

fn table_rows(batches: impl IntoIterator<Item = RecordBatch>) -> BTreeMap<i64, Row> {
    let mut out = BTreeMap::new();
    for b in batches {
        let ids =
            b.column_by_name("id").expect("id").as_any().downcast_ref::<Int64Array>().expect("i64").clone();
        let v =
            b.column_by_name("v").expect("v").as_any().downcast_ref::<StringArray>().expect("str").clone();
        let n = b.column_by_name("n").expect("n").as_any().downcast_ref::<Int64Array>().expect("i64").clone();
        for i in 0..b.num_rows() {
            out.insert(ids.value(i), (v.is_valid(i).then(|| v.value(i).to_string()), n.value(i)));
        }
    }
    out
}

fn assert_refused<T: std::fmt::Debug>(result: basalt::Result<T>, what: &str) {
    match result {
        Err(Error::HistoryUnavailable { .. }) => {}
        other => panic!("{what}: expected HistoryUnavailable, got {other:?}"),
    }
}

/// Checks every as-of read, history and feed answer against the oracle.
fn check(world: &World, rng: &mut StdRng) {
    check_reads(world, rng);
    check_history(world, rng);
    check_feed(world, rng);
}

/// Reads as of a point in the window, and refusals outside it.
fn check_reads(w: &World, rng: &mut StdRng) {
    let db = &w.db;
    let now = last_seqno(db);
    let table = db.table("t").expect("t");
    // A read as of a point in the window.
    let asked = rng.random_range(w.since..=now);
    let snap = db.snapshot_at(AsOf::Seqno(asked)).expect("snapshot_at");
    // The point read ends the asked commit's millisecond.
    let p = snap.seqno();
    assert!(p >= asked && p <= now, "asked {asked}, read at {p}, now {now}");
    let opts = ReadOptions::default().snapshot(Some(&snap));
    let want_kv = w.oracle.kv_at(p);
    let got_kv: BTreeMap<Vec<u8>, Vec<u8>> = db
        .iter_opt::<&[u8]>(.., basalt::Direction::Forward, &opts)
        .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<basalt::Result<_>>()
        .expect("iter as of");
    assert_eq!(got_kv, want_kv, "key-value state as of seqno {p} (now {now})");
    for _ in 0..3 {
        let k = random_kv_key(rng);
        assert_eq!(
            db.get_opt(&k, &opts).expect("get as of").map(|b| b.to_vec()),
            want_kv.get(&k).cloned(),
            "get {} as of {p}",
            text(&k)
        );
    }
    let want_rows = w.oracle.rows_at(p);
    let scan = table.scan(ScanOptions::default().snapshot(Some(&snap))).expect("scan as of");
    let got_rows = table_rows(scan.map(|b| b.expect("batch")));
    assert_eq!(got_rows, want_rows, "table as of seqno {p} (now {now})");
    let id = random_id(rng);
    let got = table.get_opt(&[KeyValue::I64(id)], &opts).expect("get as of");
    assert_eq!(
        got.map(|b| table_rows([b])).unwrap_or_default().remove(&id),
        want_rows.get(&id).cloned(),
        "row {id} as of {p}"
    );
    // The index answers as of the same point (it was built at `since`).
    let n = rng.random_range(0..4);
    let looked = table
        .lookup(
            "by_n",
            IndexPredicate::Eq(vec![Some(KeyValue::I64(n))]),
            LookupOptions::default().snapshot(Some(&snap)),
        )
        .expect("lookup as of");
    let want_n: BTreeMap<i64, Row> =
        want_rows.iter().filter(|r| r.1.1 == n).map(|(k, r)| (*k, r.clone())).collect();
    assert_eq!(table_rows([looked]), want_n, "index n={n} as of {p}");
    assert_eq!(
        table
            .count_opt("by_n", IndexPredicate::Eq(vec![Some(KeyValue::I64(n))]), Some(&snap))
            .expect("count"),
        want_n.len() as u64,
        "count n={n} as of {p}"
    );
    // As of a time: the last commit at or before now is the present.
    let present = db.snapshot_at(AsOf::Time(SystemTime::now())).expect("as of now");
    assert_eq!(present.seqno(), now);
    // Before the window, and trees keeping no history: refused.
    if w.since > 0 {
        // Asked for a point inside the commit's millisecond, it reads at
        // the millisecond's end, which may be in the window.
        let mut before = db.snapshot_at(AsOf::Seqno(w.since - 1)).expect("a committed point");
        if before.seqno() >= w.since {
            before = db.snapshot_at(AsOf::Seqno(0)).expect("before every commit");
        }
        assert_eq!(before.seqno().min(w.since), before.seqno());
        let opts = ReadOptions::default().snapshot(Some(&before));
        assert_refused(db.get_opt(b"k1", &opts), "get before the window");
        assert_refused(table.scan(ScanOptions::default().snapshot(Some(&before))), "scan before the window");
        let info = table.history_info().expect("info");
        assert_eq!(info.oldest_seqno, Some(w.since));
    }
    if p < now {
        let plain = db.keyspace("plain").expect("plain");
        assert_refused(plain.get_opt(b"k", &opts), "a keyspace keeping no history");
    }
}

/// A key's history and a row's.
fn check_history(w: &World, rng: &mut StdRng) {
    let kv = w.db.keyspace("default").expect("default");
    let table = w.db.table("t").expect("t");
    let k = random_kv_key(rng);
    let versions = w.oracle.kv.iter().filter(|c| c.1 == k).map(|c| (c.0, c.2.clone()));
    let want = Oracle::shown(versions, w.since);
    let got: Vec<(u64, Option<Vec<u8>>)> = kv
        .history(&k, HistoryOptions::default())
        .expect("history")
        .into_iter()
        .map(|v| {
            assert!(
                v.commit_time.is_some() || v.seqno <= w.since,
                "version {} has no time (window since {}, info {:?}, {:?})",
                v.seqno,
                w.since,
                kv.history_info(),
                kv.history(&k, HistoryOptions::default())
            );
            (v.seqno, v.value.map(|b| b.to_vec()))
        })
        .collect();
    assert_eq!(got, want, "history of {}", text(&k));
    let limit = rng.random_range(1..4);
    let got = kv.history(&k, HistoryOptions::default().limit(Some(limit))).expect("history");
    assert_eq!(got.len(), want.len().min(limit), "history of {} limited to {limit}", text(&k));
    let id = random_id(rng);
    let versions = w.oracle.rows.iter().filter(|c| c.1 == id).map(|c| (c.0, c.2.clone()));
    let want = Oracle::shown(versions, w.since);
    let got = table.history(&[KeyValue::I64(id)], HistoryOptions::default()).expect("row history");
    assert_eq!(history_rows(&got, id), want, "history of row {id}");
}

/// The change feed from a point in the window, whole and resumed.
fn check_feed(w: &World, rng: &mut StdRng) {
    let kv = w.db.keyspace("default").expect("default");
    let table = w.db.table("t").expect("t");
    let now = last_seqno(&w.db);
    let s = rng.random_range(w.since..=now);
    let want: Vec<(u64, Vec<u8>, Option<Vec<u8>>)> =
        w.oracle.kv.iter().filter(|c| c.0 > s).cloned().collect();
    let got: Vec<(u64, Vec<u8>, Option<Vec<u8>>)> = kv
        .changes(s, usize::MAX)
        .expect("changes")
        .into_iter()
        .map(|c| (c.seqno, c.key.to_vec(), c.value.map(|v| v.to_vec())))
        .collect();
    assert_eq!(got, want, "key-value changes after {s}");
    let want: Vec<(u64, i64, Option<Row>)> = w.oracle.rows.iter().filter(|c| c.0 > s).cloned().collect();
    let got = feed_rows(&table.changes(s, usize::MAX).expect("table changes"));
    assert_eq!(got, want, "table changes after {s}");
    // Read in pieces, resumed from the last seqno read.
    let mut resumed = Vec::new();
    let mut from = s;
    loop {
        let part = feed_rows(&table.changes(from, 2).expect("changes"));
        let Some(last) = part.last() else { break };
        from = last.0;
        resumed.extend(part);
    }
    assert_eq!(resumed, want, "table changes after {s}, two at a time");
    if w.since > 0 {
        assert_refused(kv.changes(w.since - 1, 10), "changes before the window");
    }
}

fn history_rows(batch: &RecordBatch, id: i64) -> Vec<(u64, Option<Row>)> {
    let seqnos = batch.column(0).as_any().downcast_ref::<UInt64Array>().expect("seqnos");
    let deleted = batch.column(2).as_any().downcast_ref::<BooleanArray>().expect("deleted");
    let rows = table_rows([batch.clone()]);
    let ids = batch.column_by_name("id").expect("id").as_any().downcast_ref::<Int64Array>().expect("ids");
    let v = batch.column_by_name("v").expect("v").as_any().downcast_ref::<StringArray>().expect("v");
    let n = batch.column_by_name("n").expect("n").as_any().downcast_ref::<Int64Array>().expect("n");
    let _ = rows;
    (0..batch.num_rows())
        .map(|i| {
            assert_eq!(ids.value(i), id, "every version is of row {id}");
            let row =
                (!deleted.value(i)).then(|| (v.is_valid(i).then(|| v.value(i).to_string()), n.value(i)));
            (seqnos.value(i), row)
        })
        .collect()
}

fn feed_rows(batch: &RecordBatch) -> Vec<(u64, i64, Option<Row>)> {
    let op = batch.column(0).as_any().downcast_ref::<StringArray>().expect("op");
    let seqnos = batch.column(1).as_any().downcast_ref::<UInt64Array>().expect("seqnos");
    let ids = batch.column_by_name("id").expect("id").as_any().downcast_ref::<Int64Array>().expect("ids");
    let v = batch.column_by_name("v").expect("v").as_any().downcast_ref::<StringArray>().expect("v");
    let n = batch.column_by_name("n").expect("n").as_any().downcast_ref::<Int64Array>().expect("n");
    (0..batch.num_rows())
        .map(|i| {
            let row = (op.value(i) == "upsert")
                .then(|| (v.is_valid(i).then(|| v.value(i).to_string()), n.value(i)));
            (seqnos.value(i), ids.value(i), row)
        })
        .collect()
}

#[test]
fn history_model() {
    run_seeded("history_model", 24, |seed| {
        let mut rng = rng(seed);
        let mut w = World::new(seed, &mut rng);
        for step in 0..120 {
            w.step(&mut rng, seed, true);
            if step % 4 == 0 {
                check(&w, &mut rng);
            }
        }
        check(&w, &mut rng);
    });
}

/// Commit times survive a reopen, whether their commits were flushed (the
/// MANIFEST's marks) or only in the WAL (its seals), and a time maps to
/// the last commit at or before it.
#[test]
fn commit_times_survive_reopen() {
    let fs = MemFs::new();
    let opts = || basalt::Options::default().fs(Arc::new(fs.clone()));
    let db = Db::open("/db", opts()).expect("open");
    db.keyspace("default").expect("default").set_history(HistoryWindow::duration(HOUR)).expect("history");
    db.put(b"k", b"1").expect("put");
    db.flush().expect("flush");
    std::thread::sleep(Duration::from_millis(5));
    let between = SystemTime::now();
    std::thread::sleep(Duration::from_millis(5));
    db.put(b"k", b"2").expect("put");
    let before: Vec<_> =
        db.keyspace("default").expect("ks").history(b"k", HistoryOptions::default()).expect("h");
    assert_eq!(before.len(), 2);
    assert!(before.iter().all(|v| v.commit_time.is_some()), "{before:?}");
    assert!(before[1].commit_time < Some(between) && before[0].commit_time > Some(between), "{before:?}");
    db.close().expect("close");
    let db = Db::open("/db", opts()).expect("reopen");
    let after = db.keyspace("default").expect("ks").history(b"k", HistoryOptions::default()).expect("h");
    assert_eq!(before, after, "times and versions survive the reopen");
    let then = db.snapshot_at(AsOf::Time(between)).expect("as of between");
    assert_eq!(then.get(b"k").expect("get").as_deref(), Some(&b"1"[..]));
    assert_eq!(then.seqno(), before[1].seqno);
    // Bounds by time.
    let newer = db
        .keyspace("default")
        .expect("ks")
        .history(b"k", HistoryOptions::default().since(Some(between)))
        .expect("since");
    assert_eq!(newer, after[..1].to_vec());
    let older = db
        .keyspace("default")
        .expect("ks")
        .history(b"k", HistoryOptions::default().until(Some(between)))
        .expect("until");
    assert_eq!(older, after[1..].to_vec());
}

fn wal_files(fs: &MemFs) -> usize {
    fs.file_names(std::path::Path::new("/db"))
        .iter()
        .filter(|n| std::path::Path::new(n).extension().is_some_and(|e| e == "wal"))
        .count()
}

/// Versions older than a window are collected as without history, the
/// version at its start stays, reads before it are refused naming the
/// oldest point, and the WAL files it kept go too.
#[test]
fn a_window_lets_go_of_what_falls_out_of_it() {
    const WINDOW: Duration = Duration::from_millis(400);
    let fs = MemFs::new();
    let db = Db::open("/db", basalt::Options::default().fs(Arc::new(fs.clone()))).expect("open");
    let table = db.create_table("t", schema(), &["id"], TableOptions::default()).expect("create");
    table.set_history(HistoryWindow::duration(WINDOW)).expect("history");
    let write = |v: &str| {
        table.write(&rows_batch(&[(1, (Some(v.into()), 0))])).expect("write");
        let s = last_seqno(&db);
        db.flush().expect("flush");
        // Each version its own millisecond (commits of one are one point).
        std::thread::sleep(Duration::from_millis(3));
        s
    };
    let first = write("a");
    std::thread::sleep(WINDOW + Duration::from_millis(100));
    let second = write("b");
    let third = write("c");
    table.compact().expect("compact");
    // a is the version the window starts with; b and c are in it.
    assert_eq!(table.estimate().expect("estimate").rows, 3);
    let h = table.history(&[KeyValue::I64(1)], HistoryOptions::default()).expect("history");
    assert_eq!(history_rows(&h, 1).iter().map(|v| v.0).collect::<Vec<_>>(), vec![third, second, first]);
    assert!(wal_files(&fs) > 1, "the WALs of the window stay");
    std::thread::sleep(WINDOW + Duration::from_millis(100));
    let fourth = write("d");
    table.compact().expect("compact");
    // Now c starts the window: a and b are gone.
    assert_eq!(table.estimate().expect("estimate").rows, 2);
    let h = table.history(&[KeyValue::I64(1)], HistoryOptions::default()).expect("history");
    assert_eq!(history_rows(&h, 1).iter().map(|v| v.0).collect::<Vec<_>>(), vec![fourth, third]);
    let old = db.snapshot_at(AsOf::Seqno(second)).expect("a committed point");
    match table.get_opt(&[KeyValue::I64(1)], &ReadOptions::default().snapshot(Some(&old))) {
        Err(Error::HistoryUnavailable { oldest_seqno, what }) => {
            assert_eq!(oldest_seqno, Some(third), "{what}");
            assert!(what.contains("seqno"), "{what}");
        }
        other => panic!("a read before the window: {other:?}"),
    }
    let at_c = db.snapshot_at(AsOf::Seqno(third)).expect("c");
    let row = table.get_opt(&[KeyValue::I64(1)], &ReadOptions::default().snapshot(Some(&at_c))).expect("get");
    assert_eq!(table_rows(row).remove(&1).and_then(|r| r.0).as_deref(), Some("c"));
    assert_refused(table.changes(first, 10), "changes from before the window");
    assert_eq!(feed_rows(&table.changes(third, 10).expect("changes")).len(), 1);
    // Off: compaction keeps only what snapshots need, and the WALs go.
    drop((old, at_c));
    table.set_history(HistoryWindow::default()).expect("off");
    write("e");
    table.compact().expect("compact");
    assert_eq!(table.estimate().expect("estimate").rows, 1);
    assert_eq!(wal_files(&fs), 1, "only the live WAL stays");
    assert_refused(table.history(&[KeyValue::I64(1)], HistoryOptions::default()), "history off");
}

/// A table keeping history takes no bulk load (it would bypass the WAL the
/// change feed reads); a window over a century is refused.
#[test]
fn bulk_loads_and_absurd_windows_are_refused() {
    let fs = MemFs::new();
    let db = Db::open("/db", basalt::Options::default().fs(Arc::new(fs.clone()))).expect("open");
    let table = db.create_table("t", schema(), &["id"], TableOptions::default()).expect("create");
    assert!(matches!(
        table.set_history(HistoryWindow::duration(Duration::from_secs(200 * 366 * 86_400))),
        Err(Error::InvalidArgument(_))
    ));
    table.set_history(HistoryWindow::versions(3)).expect("history");
    let batch = rows_batch(&[(1, (None, 0))]);
    assert!(matches!(table.bulk_load(std::iter::once(batch)), Err(Error::InvalidArgument(_))));
    // A count alone keeps no past point: reads as of one are refused.
    table.write(&rows_batch(&[(1, (Some("a".into()), 0))])).expect("write");
    let p = last_seqno(&db);
    // Commits of one millisecond are one point in time: the next one is
    // later.
    std::thread::sleep(Duration::from_millis(3));
    table.write(&rows_batch(&[(1, (Some("b".into()), 0))])).expect("write");
    let snap = db.snapshot_at(AsOf::Seqno(p)).expect("snap");
    assert_eq!(snap.seqno(), p);
    assert_refused(
        table.get_opt(&[KeyValue::I64(1)], &ReadOptions::default().snapshot(Some(&snap))),
        "count only",
    );
    assert_eq!(table.history(&[KeyValue::I64(1)], HistoryOptions::default()).expect("history").num_rows(), 2);
}

/// A keyspace's history reads values kept in blob files, in memtables and
/// SSTs of every level alike.
#[test]
fn history_reads_values_wherever_they_lie() {
    let fs = MemFs::new();
    let opts = basalt::Options::default().fs(Arc::new(fs.clone())).blob_value_bytes_min(64);
    let db = Db::open("/db", opts).expect("open");
    let kv = db.keyspace("default").expect("default");
    kv.set_history(HistoryWindow::versions(100)).expect("history");
    let value = |i: usize| format!("{i:03}").repeat(if i.is_multiple_of(2) { 40 } else { 1 }).into_bytes();
    for i in 0..30 {
        db.put(b"k", value(i)).expect("put");
        db.put(format!("other{i}"), b"x").expect("put");
        match i % 10 {
            3 => db.flush().expect("flush"),
            7 => db.compact_range::<&[u8]>(..).expect("compact"),
            _ => {}
        }
    }
    db.delete(b"k").expect("delete");
    let got = kv.history(b"k", HistoryOptions::default()).expect("history");
    let want: Vec<Option<Vec<u8>>> =
        std::iter::once(None).chain((0..30).rev().map(|i| Some(value(i)))).collect();
    assert_eq!(got.iter().map(|v| v.value.as_ref().map(|b| b.to_vec())).collect::<Vec<_>>(), want);
    let seqnos: Vec<u64> = got.iter().map(|v| v.seqno).collect();
    assert!(seqnos.windows(2).all(|w| w[0] > w[1]), "newest first: {seqnos:?}");
}
