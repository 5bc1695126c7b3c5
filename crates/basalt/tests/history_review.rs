//! The outside review of history windows (issue 59): each test reproduced
//! a defect it found (the comments say what went wrong then) and holds
//! its fix; two controls and a stress test of as-of reads racing a moving
//! floor and compaction (a refusal is fine, a wrong answer is not).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arrow_array::{Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use basalt::testing::{CrashMode, MemFs};
use basalt::{
    AsOf, Db, Error, HistoryOptions, HistoryWindow, KeyValue, ReadOptions, TableOptions, WriteOptions,
};

const HOUR: Duration = Duration::from_secs(3600);

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("v", DataType::Utf8, true),
        Field::new("n", DataType::Int64, true),
    ]))
}

fn row(id: i64, v: &str, n: i64) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(vec![id])),
            Arc::new(StringArray::from(vec![v])),
            Arc::new(Int64Array::from(vec![n])),
        ],
    )
    .expect("batch")
}

fn keys(name: &str, ids: &[i64]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![Field::new(name, DataType::Int64, false)]));
    RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(ids.to_vec()))]).expect("keys")
}

fn mem_db() -> (MemFs, Db) {
    let fs = MemFs::new();
    let db = Db::open("/db", basalt::Options::default().fs(Arc::new(fs.clone()))).expect("open");
    (fs, db)
}

fn last_seqno(db: &Db) -> u64 {
    db.snapshot().seqno()
}

/// Column `name` of `batch` as optional i64s.
fn i64s(batch: &RecordBatch, name: &str) -> Vec<Option<i64>> {
    let c = batch.column_by_name(name).expect("column").as_any().downcast_ref::<Int64Array>().expect("i64");
    (0..c.len()).map(|i| c.is_valid(i).then(|| c.value(i))).collect()
}

/// A column dropped and then added again under the same name and type is a
/// new column: rows written before hold no value in it (a get says null).
/// The change feed must agree with the table; it matches schema versions
/// by column names and types only (`changes.rs` `current_columns`), so the
/// v0 rows are taken as rows of the current version and the dropped
/// column's old values come back.
#[test]
fn feed_reads_a_readded_column_as_the_new_one() {
    let (_fs, db) = mem_db();
    let t = db.create_table("t", schema(), &["id"], TableOptions::default()).expect("create");
    t.set_history(HistoryWindow::duration(HOUR)).expect("history");
    let since = last_seqno(&db);
    t.write(&row(1, "a", 5)).expect("write");
    t.drop_column("n").expect("drop");
    t.add_column(Field::new("n", DataType::Int64, true), None).expect("add again");
    let now = t.get(&[KeyValue::I64(1)]).expect("get").expect("row");
    assert_eq!(i64s(&now, "n"), vec![None], "the re-added column holds nothing for the old row");
    let feed = t.changes(since, 100).expect("changes");
    assert_eq!(feed.num_rows(), 1);
    assert_eq!(
        i64s(&feed, "n"),
        vec![None],
        "the feed shows the dropped column's old value as the new column's"
    );
}

/// The same through `history()`: rows read through the file's schema version
/// (this one is expected to pass: it is the control).
#[test]
fn history_after_drop_and_readd_is_null_control() {
    let (_fs, db) = mem_db();
    let t = db.create_table("t", schema(), &["id"], TableOptions::default()).expect("create");
    t.set_history(HistoryWindow::duration(HOUR)).expect("history");
    t.write(&row(1, "a", 5)).expect("write");
    t.drop_column("n").expect("drop");
    t.add_column(Field::new("n", DataType::Int64, true), None).expect("add again");
    let h = t.history(&[KeyValue::I64(1)], HistoryOptions::default()).expect("history");
    assert_eq!(i64s(&h, "n"), vec![None]);
}

/// Key columns may be renamed. A delete's WAL rows hold the key columns by
/// their name at the time; the feed looks them up by the current name,
/// finds none, puts nulls in the non-nullable key column and fails the
/// whole feed with a corruption error.
#[test]
fn feed_reads_deletes_written_before_a_key_column_rename() {
    let (_fs, db) = mem_db();
    let t = db.create_table("t", schema(), &["id"], TableOptions::default()).expect("create");
    t.set_history(HistoryWindow::duration(HOUR)).expect("history");
    let since = last_seqno(&db);
    t.write(&row(1, "a", 5)).expect("write");
    t.delete(&keys("id", &[1])).expect("delete");
    t.rename_column("id", "pk").expect("rename the key column");
    let feed = t.changes(since, 100);
    match feed {
        Ok(b) => {
            assert_eq!(b.num_rows(), 2);
            assert_eq!(i64s(&b, "pk"), vec![Some(1), Some(1)]);
        }
        Err(e) => panic!("the feed of a table whose key column was renamed: {e:?}"),
    }
}

/// The MANIFEST keeps the commit-time marks of an earlier history period
/// after history is turned off (nothing forgets them while no tree keeps
/// history). Turned on again, and reopened before a flush, the clock
/// starts from those stale marks: every commit after them, up to the
/// first one after the reopen, is timed by that later commit.
#[test]
fn marks_of_an_earlier_history_period_time_nothing_after_a_reopen() {
    let fs = MemFs::new();
    let opts = || basalt::Options::default().fs(Arc::new(fs.clone()));
    let db = Db::open("/db", opts()).expect("open");
    let ks = db.keyspace("default").expect("default");
    ks.set_history(HistoryWindow::duration(HOUR)).expect("history on");
    db.put(b"k", b"1").expect("put");
    db.flush().expect("flush"); // logs marks
    ks.set_history(HistoryWindow::default()).expect("history off");
    db.put(b"k", b"2").expect("put");
    db.flush().expect("flush"); // logs nothing; the old marks stay in the MANIFEST
    std::thread::sleep(Duration::from_millis(20));
    ks.set_history(HistoryWindow::duration(HOUR)).expect("history on again");
    let before = ks.history(b"k", HistoryOptions::default()).expect("history");
    assert_eq!(before.len(), 1, "{before:?}");
    drop(ks);
    db.close().expect("close");
    let db = Db::open("/db", opts()).expect("reopen");
    std::thread::sleep(Duration::from_millis(50));
    let written = SystemTime::now();
    db.put(b"k", b"3").expect("put");
    let after =
        db.keyspace("default").expect("ks").history(b"k", HistoryOptions::default()).expect("history");
    assert_eq!(after.len(), 2, "{after:?}");
    assert_eq!(after[1].seqno, before[0].seqno);
    // A time between the commit of seqno 2 and the reopen maps to a stale
    // mark below it: `until` then leaves out a version committed before it.
    let until = written - Duration::from_millis(30);
    // The commit of version 2 has no time on record (history was off):
    // bounded by a time before every mark, the history is refused, never
    // answered without it.
    let upto =
        db.keyspace("default").expect("ks").history(b"k", HistoryOptions::default().until(Some(until)));
    let until_ok = match &upto {
        Ok(versions) => versions.iter().map(|v| v.seqno).collect::<Vec<_>>() == vec![before[0].seqno],
        Err(Error::HistoryUnavailable { .. }) => true,
        Err(_) => false,
    };
    // The version at seqno 2 was committed more than 50 ms before `written`.
    assert!(
        after[1].commit_time.is_none_or(|t| Some(t) == before[0].commit_time),
        "version {} committed before the reopen is timed {:?}, after a write made at {:?} (before the reopen: {:?})",
        after[1].seqno,
        after[1].commit_time,
        written,
        before[0].commit_time
    );
    assert!(
        until_ok,
        "history until 30 ms before the last write misses version {}: {upto:?}",
        before[0].seqno
    );
}

/// A WAL whose first record's header survived a power loss but whose
/// payload reads back as zeros (`CrashMode::TearWithZeros`) has first
/// seqno 0 by `wal_first_seqno`, which only checks the header; `first - 1`
/// then underflows (cleanup's `wals_kept_for_history`, the feed's
/// `feed_start`).
#[test]
fn a_wal_whose_first_record_is_torn_to_zeros() {
    let fs = MemFs::new();
    let opts = |fs: &MemFs| basalt::Options::default().fs(Arc::new(fs.clone()));
    let db = Db::open("/db", opts(&fs)).expect("open");
    let ks = db.keyspace("default").expect("default");
    ks.set_history(HistoryWindow::duration(HOUR)).expect("history");
    db.put_opt(b"a", b"1", &WriteOptions::default().sync(true)).expect("put");
    db.flush().expect("flush"); // the next write is the first record of a new WAL
    db.put(b"b", b"2").expect("put, unsynced");
    let wals: Vec<String> = fs
        .file_names(std::path::Path::new("/db"))
        .into_iter()
        .filter(|n| std::path::Path::new(n).extension().is_some_and(|e| e == "wal"))
        .collect();
    let newest = wals.iter().max().expect("a wal").clone();
    let path = std::path::Path::new("/db").join(&newest);
    let bytes = fs.read_file(&path).expect("wal bytes");
    assert!(bytes.len() > 24, "the write is in the newest WAL");
    drop(ks);
    let crashed = fs.crash(CrashMode::DropUnsynced, 1);
    // What TearWithZeros leaves when the tear falls just after the header.
    let mut torn = bytes[..12].to_vec();
    torn.resize(bytes.len(), 0);
    crashed.write_file_synced(&path, &torn).expect("write the torn wal");
    drop(db);
    // (Before the fix, the open panicked: `first - 1` of a first seqno 0.)
    let db = Db::open("/db", opts(&crashed)).expect("reopen after a WAL torn to zeros past its first header");
    let ks = db.keyspace("default").expect("default");
    db.put(b"c", b"3").expect("put");
    let changes = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ks.changes(0, 100)));
    let changes = changes.unwrap_or_else(|_| panic!("the change feed panicked"));
    match changes {
        Ok(c) => assert!(c.iter().any(|c| &c.key[..] == b"c"), "{c:?}"),
        Err(Error::HistoryUnavailable { oldest_seqno, .. }) => {
            assert!(oldest_seqno.is_some_and(|s| s < last_seqno(&db)), "refused from {oldest_seqno:?}");
        }
        Err(e) => panic!("{e:?}"),
    }
}

/// The default keyspace's table face (`db.table("default")`, what SQL's
/// `changes('default', 0)` reads) is a table whose tree also holds plain
/// key-value entries (`db.put`). `row_changes` treats a key-value entry in
/// a table's tree as corruption.
#[test]
fn the_table_face_feed_holds_plain_puts() {
    let (_fs, db) = mem_db();
    db.keyspace("default").expect("ks").set_history(HistoryWindow::duration(HOUR)).expect("history");
    let since = last_seqno(&db);
    db.put(b"k", b"v1").expect("put");
    db.delete(b"k").expect("delete");
    let face = db.table("default").expect("table face");
    match face.changes(since, 100) {
        Ok(b) => assert_eq!(b.num_rows(), 2),
        Err(e) => panic!("the table face's feed: {e:?}"),
    }
}

/// The keyspace feed reads rows written through the table face, deletes
/// included (control: expected to pass).
#[test]
fn keyspace_feed_of_table_face_rows_control() {
    use arrow_array::BinaryArray;
    let (_fs, db) = mem_db();
    let ks = db.keyspace("default").expect("ks");
    ks.set_history(HistoryWindow::duration(HOUR)).expect("history");
    let since = last_seqno(&db);
    let face = db.table("default").expect("table face");
    let rows = RecordBatch::try_new(
        face.schema(),
        vec![
            Arc::new(BinaryArray::from(vec![&b"a"[..], &b"b"[..]])),
            Arc::new(BinaryArray::from(vec![&b"1"[..], &b"2"[..]])),
        ],
    )
    .expect("rows");
    face.write(&rows).expect("write");
    let key_schema = Arc::new(Schema::new(vec![Field::new("key", DataType::Binary, false)]));
    let keys =
        RecordBatch::try_new(key_schema, vec![Arc::new(BinaryArray::from(vec![&b"a"[..]]))]).expect("keys");
    face.delete(&keys).expect("delete");
    db.put(b"c", b"3").expect("put");
    let got: Vec<(u64, Vec<u8>, Option<Vec<u8>>)> = ks
        .changes(since, 100)
        .expect("changes")
        .into_iter()
        .map(|c| (c.seqno, c.key.to_vec(), c.value.map(|v| v.to_vec())))
        .collect();
    assert_eq!(
        got,
        vec![
            (since + 1, b"a".to_vec(), Some(b"1".to_vec())),
            (since + 2, b"b".to_vec(), Some(b"2".to_vec())),
            (since + 3, b"a".to_vec(), None),
            (since + 4, b"c".to_vec(), Some(b"3".to_vec())),
        ]
    );
    // Resumed inside the two-row entry.
    assert_eq!(ks.changes(since + 1, 1).expect("changes")[0].seqno, since + 2);
}

/// Since 459a412 `row_history` takes the layout from
/// `catalog.table_layout(tree)`, which has none for the default keyspace's
/// table face, so `db.table("default").history(..)` (SQL
/// `history('default', …)`) fails with "default was dropped". Before that
/// commit the layout came from the handle and this passed.
#[test]
fn default_keyspace_history_on_a_fresh_database() {
    let (_fs, db) = mem_db();
    let ks = db.keyspace("default").expect("ks");
    ks.set_history(HistoryWindow::duration(HOUR)).expect("history");
    db.put(b"a", b"1").expect("put");
    let via_ks = ks.history(b"a", HistoryOptions::default());
    let face = db.table("default").expect("face");
    let via_face = face.history(&[KeyValue::Bytes(b"a")], HistoryOptions::default());
    assert!(via_ks.is_ok(), "keyspace: {via_ks:?}");
    assert!(via_face.is_ok(), "face: {:?}", via_face.map(|b| b.num_rows()));
}

/// `set_history` shares one `since` between the duration and the count:
/// adding a count to a duration window (or raising it) moves `since` to
/// now, so every past point the unchanged duration still holds becomes
/// unreadable, though nothing about the duration changed and compaction
/// kept those versions.
#[test]
fn adding_a_version_count_keeps_the_readable_past_of_the_duration() {
    let (_fs, db) = mem_db();
    let t = db.create_table("t", schema(), &["id"], TableOptions::default()).expect("create");
    t.set_history(HistoryWindow::duration(HOUR)).expect("history");
    t.write(&row(1, "a", 1)).expect("write");
    let p = last_seqno(&db);
    std::thread::sleep(Duration::from_millis(3));
    t.write(&row(1, "b", 2)).expect("write");
    let before = t.history_info().expect("info");
    t.set_history(HistoryWindow::duration(HOUR).keep_versions(Some(10))).expect("add a count");
    let after = t.history_info().expect("info");
    let snap = db.snapshot_at(AsOf::Seqno(p)).expect("snapshot");
    let got = t.get_opt(&[KeyValue::I64(1)], &ReadOptions::default().snapshot(Some(&snap)));
    assert!(
        got.is_ok(),
        "as of seqno {p}, inside the unchanged hour: {:?} (oldest before {:?}, after {:?})",
        got.map(|_| ()),
        before.oldest_seqno,
        after.oldest_seqno
    );
}

/// Stress: a short window whose floor moves while a writer overwrites a few
/// keys, flushes and compacts; readers take snapshots as of recent times
/// and seqnos, and every answer given must match an oracle of every write
/// (a refusal is fine; a wrong answer is not).
#[test]
#[expect(clippy::too_many_lines, reason = "one stress scenario: writer, readers and their checks")]
fn as_of_reads_racing_a_moving_floor_and_compaction() {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};
    let fs = MemFs::new();
    let opts = basalt::Options::default().fs(Arc::new(fs.clone())).memtable_bytes_max(4_000);
    let db = Arc::new(Db::open("/db", opts).expect("open"));
    db.keyspace("default")
        .expect("ks")
        .set_history(HistoryWindow::duration(Duration::from_millis(15)))
        .expect("h");
    // seqno -> (key, value)
    let oracle: Arc<Mutex<BTreeMap<u64, (u8, u64)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, oracle, stop) = (db.clone(), oracle.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let k = (i % 4) as u8;
                db.put([k], i.to_le_bytes()).expect("put");
                let s = db.snapshot().seqno();
                oracle.lock().expect("oracle").insert(s, (k, i));
                i += 1;
                if i.is_multiple_of(50) {
                    db.flush().expect("flush");
                }
                if i.is_multiple_of(120) {
                    db.compact_range::<&[u8]>(..).expect("compact");
                }
            }
        })
    };
    let mut answered = 0u64;
    let mut refused = 0u64;
    let mut wrong = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(6);
    let mut n = 0u64;
    while std::time::Instant::now() < deadline && wrong.is_empty() {
        n += 1;
        let back = Duration::from_micros((n * 7919) % 20_000);
        let point = if n.is_multiple_of(2) {
            AsOf::Time(SystemTime::now() - back)
        } else {
            let last = db.snapshot().seqno();
            AsOf::Seqno(last.saturating_sub((n * 31) % 200))
        };
        if n.is_multiple_of(5) {
            // A key's history must have no holes: every write of the key
            // between its oldest and newest version shown.
            let k = (n % 4) as u8;
            let h =
                db.keyspace("default").expect("ks").history([k], HistoryOptions::default()).expect("history");
            if let (Some(newest), Some(oldest)) = (h.first(), h.last()) {
                let shown: Vec<u64> = h.iter().map(|v| v.seqno).collect();
                loop {
                    let o = oracle.lock().expect("oracle");
                    if o.keys().next_back().is_some_and(|&s| s >= newest.seqno) {
                        let want: Vec<u64> = o
                            .range(oldest.seqno..=newest.seqno)
                            .rev()
                            .filter(|(_, (kk, _))| *kk == k)
                            .map(|(s, _)| *s)
                            .collect();
                        if want != shown {
                            wrong.push(format!("history of {k}: shown {shown:?}, oracle {want:?}"));
                        }
                        break;
                    }
                    drop(o);
                    std::thread::yield_now();
                }
            }
        }
        let Ok(snap) = db.snapshot_at(point) else { continue };
        let at = snap.seqno();
        // Give compaction a chance to run between taking and reading.
        if n.is_multiple_of(3) {
            std::thread::sleep(Duration::from_millis(3));
        }
        let mut got = Vec::new();
        let mut refused_here = false;
        for k in 0..4u8 {
            match snap.get([k]) {
                Ok(v) => got.push((k, v.map(|b| u64::from_le_bytes(b[..8].try_into().expect("8 bytes"))))),
                Err(Error::HistoryUnavailable { .. }) => {
                    refused_here = true;
                    break;
                }
                Err(e) => panic!("{e:?}"),
            }
        }
        if refused_here {
            refused += 1;
            continue;
        }
        // Wait for the oracle to hold every write up to `at`.
        loop {
            let o = oracle.lock().expect("oracle");
            if o.keys().next_back().is_some_and(|&s| s >= at) || at == 0 {
                let mut want: BTreeMap<u8, u64> = BTreeMap::new();
                for (_, &(k, v)) in o.range(..=at) {
                    want.insert(k, v);
                }
                for (k, v) in &got {
                    if want.get(k).copied() != *v {
                        wrong.push(format!(
                            "as of {point:?} (seqno {at}): key {k} read {v:?}, oracle {:?}",
                            want.get(k)
                        ));
                    }
                }
                break;
            }
            drop(o);
            std::thread::yield_now();
        }
        answered += 1;
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("writer");
    eprintln!("answered {answered}, refused {refused}");
    assert!(wrong.is_empty(), "{wrong:?}");
}
