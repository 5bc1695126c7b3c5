//! Tests of `ingest.rs` that need the engine's hooks: a load racing a
//! writer stalled on L0 behind a running compaction, a panicking source,
//! and the default keyspace's table face. (From an outside review's
//! reproductions; each failed before its fix.)

use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use arrow_array::{BinaryArray, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};

use crate::io::MemFs;
use crate::{Db, Options, TableOptions};

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("v", DataType::Int64, false),
    ]))
}

fn batch(ids: std::ops::Range<i64>, v: i64) -> RecordBatch {
    let n = ids.clone().count();
    RecordBatch::try_new(
        schema(),
        vec![Arc::new(Int64Array::from(ids.collect::<Vec<_>>())), Arc::new(Int64Array::from(vec![v; n]))],
    )
    .expect("batch")
}

fn ssts(fs: &MemFs) -> Vec<String> {
    let mut v: Vec<String> = fs
        .file_names(Path::new("/db"))
        .into_iter()
        .filter(|n| Path::new(n).extension().is_some_and(|e| e == "sst"))
        .collect();
    v.sort();
    v
}

/// path: neither moves.
#[test]
fn a_load_does_not_deadlock_with_a_writer_stalled_on_l0() {
    let fs = MemFs::new();
    let opts = Options {
        fs: Arc::new(fs.clone()),
        auto_compaction: true,
        l0_compaction_trigger: 2,
        l0_files_slowdown: 3,
        l0_files_stop: 4,
        ..Options::default()
    };
    let db = Arc::new(Db::open("/db", opts).expect("open"));
    let x = db.create_keyspace("x").expect("x");
    let y = db.create_keyspace("y").expect("y");
    let t = db.create_table("t", schema(), &["id"], TableOptions::default()).expect("t");
    // Hold the compaction thread inside its next merge (of x's L0).
    let (entered, entered_rx) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    crate::db::jobs::compact::before_merge::set(db.inner().id, move || {
        entered.send(()).expect("send");
        release_rx.recv().expect("recv");
    });
    for i in 0..2 {
        x.put("k", format!("v{i}")).expect("put x");
        db.flush().expect("flush");
    }
    entered_rx.recv_timeout(Duration::from_secs(10)).expect("compaction of x started");
    // y's L0 reaches l0_files_stop while the compaction runs.
    for i in 0..4 {
        y.put(format!("k{i}"), "v").expect("put y");
        db.flush().expect("flush");
    }
    let (wdone, wdone_rx) = mpsc::channel();
    let y2 = y.clone();
    std::thread::spawn(move || wdone.send(y2.put("stalled", "v")).ok());
    assert!(wdone_rx.recv_timeout(Duration::from_millis(300)).is_err(), "the writer is stalled");
    let (ldone, ldone_rx) = mpsc::channel();
    let t2 = t.clone();
    std::thread::spawn(move || ldone.send(t2.bulk_load([batch(0..100, 1)]).map(|l| l.rows)).ok());
    std::thread::sleep(Duration::from_millis(300));
    release.send(()).expect("release");
    let load = ldone_rx.recv_timeout(Duration::from_secs(15));
    let write = wdone_rx.recv_timeout(Duration::from_secs(1));
    assert!(load.is_ok() && write.is_ok(), "DEADLOCK: load {load:?}, stalled writer {write:?}");
}

/// stops every write of the database until reopen.
#[test]
fn a_panicking_source_fails_the_load_and_leaves_writes_working() {
    let fs = MemFs::new();
    let opts = Options { fs: Arc::new(fs.clone()), ..Options::default() };
    let db = Db::open("/db", opts).expect("open");
    let t = db.create_table("t", schema(), &["id"], TableOptions::default()).expect("t");
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let src = (0..3).map(|i| if i == 1 { panic!("source bug") } else { batch(i * 10..i * 10 + 10, 1) });
        t.bulk_load(src)
    }));
    assert!(r.is_err(), "the source's panic is raised again");
    assert!(ssts(&fs).is_empty(), "a failed load left files: {:?}", ssts(&fs));
    let rows: usize =
        t.scan(crate::ScanOptions::default()).expect("scan").map(|b| b.expect("b").num_rows()).sum();
    assert_eq!(rows, 0, "the rows before the panic were installed");
    let after = db.put("k", "v");
    assert!(after.is_ok(), "the database refuses writes after a source panicked: {after:?}");
}

/// blocks into a key-value tree.
#[test]
fn a_keyspace_table_face_is_refused() {
    let fs = MemFs::new();
    let opts = Options { fs: Arc::new(fs.clone()), auto_compaction: false, ..Options::default() };
    let db = Db::open("/db", opts.clone()).expect("open");
    let t = db.table("default").expect("default face");
    let b = RecordBatch::try_new(
        t.schema(),
        vec![
            Arc::new(BinaryArray::from(vec![&b"a"[..], b"b"])),
            Arc::new(BinaryArray::from(vec![&b"value-a"[..], b"value-b"])),
        ],
    )
    .expect("batch");
    let load = t.bulk_load([b]);
    assert!(matches!(load, Err(crate::Error::InvalidArgument(_))), "{load:?}");
    assert!(ssts(&fs).is_empty());
    assert_eq!(db.get("a").expect("get"), None);
}

/// Issue 63: overlapping files of several writers are merged by the
/// ingest at once (a scan would merge them row by row, and the database
/// may next be opened read-only); one run that goes to L0 beside what L0
/// holds stays until L0 reaches `l0_compaction_trigger`. The rows read the
/// same either way: the higher seqno wins a repeated key.
#[test]
fn overlapping_ingests_are_merged_at_once() {
    let fs = MemFs::new();
    let opts = Options {
        fs: Arc::new(fs.clone()),
        auto_compaction: false,
        l0_compaction_trigger: 3,
        l0_files_slowdown: 8,
        l0_files_stop: 10,
        ..Options::default()
    };
    let db = Db::open("/db", opts).expect("open");
    let t = db.create_table("t", schema(), &["id"], TableOptions::default()).expect("t");
    let l0 = || {
        let sv = db.inner().versions.load();
        sv.version.tree(t.shared.id).map_or(0, |tree| tree.levels[0].len())
    };
    let all = (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded);
    let write = |name: &str, seqno: u64, ids: std::ops::Range<i64>, v: i64| -> Vec<std::path::PathBuf> {
        let files =
            t.write_sst_files(format!("/ext/{name}"), seqno, &[], [Ok::<_, crate::Error>(batch(ids, v))]);
        files.expect("write").into_iter().map(|f| f.path).collect()
    };
    // Two writers over overlapping keys, ingested together: two runs, merged.
    let base = db.last_seqno();
    let mut paths = write("a", base + 1, 0..100, 1);
    paths.extend(write("b", base + 2, 50..150, 2));
    let load = t.ingest_files(&paths, all.clone()).expect("ingest");
    assert_eq!((load.runs, l0()), (2, 0), "overlapping runs are merged: {load:?}");
    // Rows written and flushed put files in L0; one run over them joins
    // them there until L0 reaches the trigger.
    t.write(&batch(140..160, 9)).expect("write");
    db.flush().expect("flush");
    let paths = write("c", db.last_seqno() + 1, 100..200, 3);
    let load = t.ingest_files(&paths, all.clone()).expect("ingest");
    assert_eq!((load.runs, l0()), (1, 2), "one run beside one L0 file stays: {load:?}");
    let paths = write("d", db.last_seqno() + 1, 120..130, 4);
    let _ = t.ingest_files(&paths, all.clone()).expect("ingest");
    assert_eq!(l0(), 0, "at the trigger the ingest compacts L0");
    let paths =
        [write("e", db.last_seqno() + 1, 125..140, 5), write("f", db.last_seqno() + 2, 130..135, 6)].concat();
    let load = t.ingest_files(&paths, all).expect("ingest");
    assert_eq!((load.runs, l0()), (2, 0), "{load:?}");
    let mut expect = std::collections::BTreeMap::new();
    for (ids, v) in
        [(0..100, 1), (50..150, 2), (140..160, 9), (100..200, 3), (120..130, 4), (125..140, 5), (130..135, 6)]
    {
        for id in ids {
            expect.insert(id, v);
        }
    }
    let rows = t.scan(crate::ScanOptions::default()).expect("scan");
    let mut got = std::collections::BTreeMap::new();
    for b in rows {
        let b = b.expect("batch");
        let ids = b.column(0).as_any().downcast_ref::<Int64Array>().expect("ids");
        let vs = b.column(1).as_any().downcast_ref::<Int64Array>().expect("vs");
        for i in 0..b.num_rows() {
            got.insert(ids.value(i), vs.value(i));
        }
    }
    assert_eq!(got, expect);
    db.close().expect("close");
}
