//! The kill test's checks catch what they are meant to: a lost batch, a
//! half-applied batch, a batch that was never written; and a short run of
//! the real binary (writer processes killed with SIGKILL) finds nothing.

use std::sync::Arc;

use basalt::testing::MemFs;
use basalt::{Db, Options, WriteBatch};
use basalt_crashtest::workload::{self, Model, Workload};

fn mem_db() -> Db {
    let fs = MemFs::new();
    Db::open("/db", Options::default().fs(Arc::new(fs)).memtable_bytes_max(4 << 10)).expect("open")
}

/// Writes batches `0..n` of thread 0 and returns the model of them.
fn written(w: &dyn Workload, db: &Db, n: u64) -> Box<dyn Model> {
    w.prepare(db).expect("prepare");
    let mut model = w.model(0);
    for id in 0..n {
        w.write(db, 0, id, id % 2 == 0).expect("write");
        model.apply(id);
    }
    model
}

#[test]
fn checks_accept_exactly_the_acknowledged_batches_and_the_pending_one() {
    for name in workload::ALL {
        let w = workload::by_name(name, 7).expect("workload");
        let db = mem_db();
        let model = written(w.as_ref(), &db, 30);
        assert_eq!(model.check(&db, None), Ok(false), "{name}");
        assert_eq!(model.check(&db, Some(30)), Ok(false), "{name}: pending batch not written");
        // Another thread's batches do not disturb thread 0.
        w.write(&db, 1, 0, false).expect("write");
        w.write(&db, 0, 30, true).expect("write");
        assert_eq!(model.check(&db, Some(30)), Ok(true), "{name}: pending batch written");
        assert!(model.check(&db, None).is_err(), "{name}: a batch nobody acknowledged went unnoticed");
    }
}

#[test]
fn checks_catch_a_lost_or_torn_batch() {
    let w = workload::by_name("kv", 3).expect("kv");
    let db = mem_db();
    let model = written(w.as_ref(), &db, 20);
    // Lose one key of the last batches: as if a write vanished.
    let (k, _) = db.prefix("kv/00/").next().expect("a key").expect("no error");
    db.delete(&k).expect("delete");
    let err = model.check(&db, None).expect_err("a lost write went unnoticed");
    assert!(err.contains("database has nothing"), "{err}");
    // Half of a pending batch: one key written by hand.
    let db = mem_db();
    let model = written(w.as_ref(), &db, 20);
    let mut wb = WriteBatch::new();
    wb.put("kv/00/00001", "batch 20 of thread 0|torn");
    db.write(wb).expect("write");
    assert!(model.check(&db, Some(20)).is_err(), "a torn batch went unnoticed");
}

#[test]
fn checks_catch_a_lost_table_row() {
    let w = workload::by_name("tables", 5).expect("tables");
    let db = mem_db();
    let model = written(w.as_ref(), &db, 20);
    assert_eq!(model.check(&db, None), Ok(false));
    db.delete("tables/00/last").expect("delete");
    assert!(model.check(&db, None).is_err(), "a lost key of a table batch went unnoticed");
}

#[test]
fn short_kill_run_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_basalt-crashtest"))
        .args(["--cycles", "4", "--seed", "11", "--kill-ms-max", "200", "--dir"])
        .arg(dir.path().join("run"))
        .output()
        .expect("run basalt-crashtest");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(last.starts_with("crashtest summary: 4 cycles") && last.ends_with(" 0 violations"), "{last}");
}

#[test]
fn checks_catch_an_index_that_disagrees_with_its_rows() {
    let w = workload::by_name("indexed", 9).expect("indexed");
    let db = mem_db();
    let model = written(w.as_ref(), &db, 20);
    assert_eq!(model.check(&db, None), Ok(false));
    // Rows of batch 20 land, their index entries do not.
    basalt::testing::skip_index_upkeep(&db, true);
    w.write(&db, 0, 20, false).expect("write");
    let err =
        model.check(&db, Some(20)).expect_err("index entries missing their rows' change went unnoticed");
    assert!(err.contains("index by_"), "{err}");
}

/// Without kills: writers of the indexed workload run while writer 0
/// drops and rebuilds an index again and again; then every thread's rows
/// and every index must agree.
#[test]
fn indexed_workload_holds_with_rebuilds_under_concurrent_writers() {
    let w: Arc<dyn Workload> = workload::by_name("indexed", 13).expect("indexed").into();
    let db = Arc::new(mem_db());
    w.prepare(&db).expect("prepare");
    let threads: Vec<_> = (0..3u32)
        .map(|thread| {
            let (w, db) = (w.clone(), db.clone());
            std::thread::spawn(move || {
                for id in 0..400 {
                    w.write(&db, thread, id, false)
                        .unwrap_or_else(|e| panic!("thread {thread} batch {id}: {e}"));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("writer");
    }
    for thread in 0..3 {
        let mut model = w.model(thread);
        for id in 0..400 {
            model.apply(id);
        }
        assert_eq!(model.check(&db, None), Ok(false), "thread {thread}");
    }
}
