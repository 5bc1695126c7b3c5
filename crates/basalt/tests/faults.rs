//! Fault loops, as `SQLite`'s I/O-error loops: a fixed workload runs over
//! `MemFs` while one kind of file-system call (create, open, read, append,
//! flush, sync, rename, remove, list, stat, `create_dir_all`, `sync_dir`,
//! lock, and an out-of-space append that writes half its bytes) fails at
//! its n-th call, once or from then on, for every n up to the number of such
//! calls a healthy run makes (or a seeded sample, see below). Each trial
//! checks that:
//! - nothing panics or hangs;
//! - after a failed fsync of a file or a directory no write is acknowledged
//!   (`Error::Closed`, no retry that could call lost pages durable);
//! - the process dying after the trial (every appended byte kept) leaves a
//!   database that opens and holds a prefix of the acknowledged writes with
//!   every acknowledged one in it;
//! - a power loss after the trial leaves a database that opens and holds a
//!   prefix with every write acknowledged as durable in it: a write whose
//!   sync failed was never acknowledged;
//! - opening again with the fault still armed fails with an error or reads
//!   right, and a crash of that recovery still recovers.
//!
//! Two workloads by default. `BASALT_FAULT_POINTS` caps the points tried
//! per kind and mode in each (default 40: every point of a kind called
//! fewer times, else the first 10, the last 10 and a seeded sample); `all`
//! tries every point. `BASALT_CASES` runs more
//! workloads and `BASALT_SEED` replays one; `BASALT_FAULT=Sync:50:once`
//! (kind, n, once or forever) runs only that point, and
//! `BASALT_FAULT_TRACE=1` prints where each injected failure happened. The
//! test prints a table of outcomes per kind of call.

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::panic::AssertUnwindSafe;
use std::sync::Mutex;
use std::time::Duration;

use basalt::testing::{CrashMode, Fault, FaultError, MemFs, OpKind};
use basalt::{Db, Error, Options, WriteOptions};
use common::guard::{Watchdog, panic_message, record_background_panics, take_background_panics};
use common::history::{DB, Entry, History, Op, options_on, read_all, verify_recovery, workload};
use common::{rng, run_seeded, small_options};
use rand::Rng;
use rand::rngs::StdRng;

/// Operations per workload: enough, with tiny memtables, for several
/// flushes and compactions.
const WORKLOAD_OPS: usize = 80;

/// What a trial fails: a kind of call and the error it gets.
fn fault_classes() -> Vec<(OpKind, FaultError)> {
    let mut classes: Vec<(OpKind, FaultError)> = OpKind::ALL.iter().map(|&op| (op, FaultError::Io)).collect();
    classes.push((OpKind::Append, FaultError::NoSpace));
    classes
}

/// How one trial went.
#[derive(Default)]
struct Outcome {
    /// The fault fired during the workload.
    fired: bool,
    /// The workload (or the open) saw an error.
    surfaced: bool,
    /// What went wrong, if anything.
    violation: Option<String>,
}

/// The workload: a random one, then a flush, a full compaction and a WAL
/// sync, so every mechanism runs at least once.
fn fault_workload(rng: &mut StdRng) -> Vec<Op> {
    let mut ops = workload(rng, WORKLOAD_OPS);
    ops.extend([Op::Flush, Op::Compact(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded), Op::SyncWal]);
    ops
}

/// Checks that writes are refused with `Error::Closed` after a failed
/// fsync (once background work noticed it).
fn check_writes_refused(db: &Db, history: &mut History) -> Result<(), String> {
    // The fsync may have failed in a background thread that has not yet
    // recorded it; give it a moment.
    for _ in 0..20 {
        if db.wait_for_background_work().is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    for sync in [false, true] {
        match db.put_opt(b"after-failed-fsync", b"x", &WriteOptions::default().sync(sync)) {
            Err(Error::Closed(_)) => {}
            Ok(()) => {
                // Acknowledged all the same: recovery must keep it.
                history.acked.push(vec![Entry::Put(b"after-failed-fsync".to_vec(), b"x".to_vec())]);
                if sync {
                    history.durable = history.acked.len();
                }
                return Err(format!("write (sync={sync}) acknowledged after a failed fsync"));
            }
            Err(e) => {
                return Err(format!("write (sync={sync}) after a failed fsync: expected Closed, got {e}"));
            }
        }
    }
    Ok(())
}

/// Runs the workload on `fs` (fault armed) until the first error; returns
/// whether an error surfaced.
fn run_workload(fs: &MemFs, template: &Options, ops: &[Op], history: &mut History) -> Result<bool, String> {
    let Ok(db) = Db::open(DB, options_on(fs, template)) else { return Ok(true) };
    let mut surfaced = false;
    for op in ops {
        if fs.sync_faults_fired() > 0 {
            check_writes_refused(&db, history)?;
            break;
        }
        if history.run(&db, op).is_err() {
            surfaced = true;
            if fs.sync_faults_fired() > 0 {
                check_writes_refused(&db, history)?;
            }
            break;
        }
    }
    surfaced |= db.close().is_err();
    Ok(surfaced)
}

/// Runs `check`, turning a panic into a violation.
fn guarded(what: &str, check: impl FnOnce()) -> Result<(), String> {
    std::panic::catch_unwind(AssertUnwindSafe(check))
        .map_err(|p| format!("{what}: {}", panic_message(p.as_ref())))
}

/// Opens `fs` with the fault still armed: an error is fine; if it opens,
/// whatever reads without error must be a prefix with every acknowledged
/// write in it (the process died, nothing was lost).
fn reopen_with_fault(fs: &MemFs, template: &Options, acked: &History) -> Result<(), String> {
    let Ok(db) = Db::open(DB, options_on(fs, template)) else { return Ok(()) };
    let mut items = Vec::new();
    for item in db.iter_all() {
        match item {
            Ok((k, v)) => items.push((k.to_vec(), v.to_vec())),
            Err(_) => return Ok(()),
        }
    }
    let got = items.into_iter().collect();
    acked.matching_prefix(&got).map(|_| ()).map_err(|e| format!("open with the fault armed: {e}"))
}

fn trial(template: &Options, ops: &[Op], fault: Fault, seed: u64) -> Outcome {
    let mut rng = rng(seed);
    let fs = MemFs::new();
    fs.inject(fault);
    let mut history = History::default();
    let run = std::panic::catch_unwind(AssertUnwindSafe(|| run_workload(&fs, template, ops, &mut history)));
    let surfaced = match run {
        Ok(Ok(s)) => s,
        Ok(Err(v)) => return Outcome { fired: true, surfaced: true, violation: Some(v) },
        Err(p) => {
            let v = format!("workload panicked: {}", panic_message(p.as_ref()));
            return Outcome { fired: true, surfaced: true, violation: Some(v) };
        }
    };
    let fired = fs.faults_fired() > 0;
    // The process died: every acknowledged write must be there.
    let mut acked = history.clone();
    acked.durable = acked.acked.len();
    let died = fs.process_crash();
    let power_loss = fs.crash(CrashMode::ALL[rng.random_range(0..3)], rng.random());
    let mut checks = vec![
        guarded("process died", || {
            verify_recovery(&died, &acked, template, &mut rng.clone());
        }),
        guarded("power loss", || {
            verify_recovery(&power_loss, &history, template, &mut rng.clone());
        }),
    ];
    // Recovery with the fault still armed, then a crash of that.
    checks.push(guarded("reopen with the fault armed", || {
        if let Err(v) = reopen_with_fault(&fs, template, &acked) {
            panic!("{v}");
        }
    }));
    fs.clear_faults();
    checks.push(guarded("process died during a faulty recovery", || {
        verify_recovery(&fs.process_crash(), &acked, template, &mut rng.clone());
    }));
    let background = take_background_panics();
    if !background.is_empty() {
        checks.push(Err(format!("panic in a background thread: {background:?}")));
    }
    let violation = checks.into_iter().filter_map(Result::err).reduce(|a, b| format!("{a}; {b}"));
    Outcome { fired, surfaced, violation }
}

/// Calls of each kind a healthy run of the workload makes (background work
/// varies a little from run to run).
fn healthy_calls(template: &Options, ops: &[Op]) -> BTreeMap<OpKind, u64> {
    let fs = MemFs::new();
    let mut history = History::default();
    let surfaced = run_workload(&fs, template, ops, &mut history).expect("healthy run");
    assert!(!surfaced, "the healthy run failed");
    let calls = OpKind::ALL.iter().map(|&op| (op, fs.calls(op))).collect();
    let db = Db::open(DB, options_on(&fs, template)).expect("reopen after the healthy run");
    let got = read_all(&db, &history.keys());
    assert_eq!(got, history.model_after(history.acked.len()), "healthy run lost writes");
    drop(db);
    calls
}

/// The points to try among `0..=total` (one past the end: a fault that
/// never fires must change nothing).
fn points(total: u64, cap: Option<u64>, rng: &mut StdRng) -> Vec<u64> {
    match cap {
        Some(cap) if total + 1 > cap => {
            let mut set: std::collections::BTreeSet<u64> =
                (0..10).chain(total.saturating_sub(9)..=total).collect();
            while (set.len() as u64) < cap {
                set.insert(rng.random_range(0..=total));
            }
            set.into_iter().collect()
        }
        _ => (0..=total).collect(),
    }
}

fn points_cap() -> Option<u64> {
    match std::env::var("BASALT_FAULT_POINTS") {
        Ok(s) if s == "all" => None,
        Ok(s) => Some(s.parse().expect("BASALT_FAULT_POINTS must be a number or `all`")),
        Err(_) => Some(40),
    }
}

#[derive(Default)]
struct Row {
    /// Fault points over all workloads: each kind's calls, plus one past
    /// the end.
    points: u64,
    trials: u64,
    fired: u64,
    surfaced: u64,
    violations: u64,
}

#[test]
fn fault_loops() {
    record_background_panics();
    let cap = points_cap();
    let only = std::env::var("BASALT_FAULT").ok();
    let table: Mutex<BTreeMap<String, Row>> = Mutex::new(BTreeMap::new());
    let violations: Mutex<Vec<String>> = Mutex::new(Vec::new());
    run_seeded("fault_loops", 2, |seed| {
        let mut rng = rng(seed);
        let template = small_options(&MemFs::new(), &mut rng).block_cache_bytes(0);
        let ops = fault_workload(&mut rng);
        let calls = healthy_calls(&template, &ops);
        let watchdog = Watchdog::new(Duration::from_secs(60));
        for (op, error) in fault_classes() {
            for forever in [false, true] {
                let label = format!(
                    "{op:?}{} {}",
                    if error == FaultError::NoSpace { " ENOSPC" } else { "" },
                    if forever { "forever" } else { "once" }
                );
                table.lock().expect("table").entry(label.clone()).or_default().points += calls[&op] + 1;
                for n in points(calls[&op], cap, &mut rng) {
                    let trial_seed: u64 = rng.random();
                    let name = format!("{op:?}:{n}:{}", if forever { "forever" } else { "once" });
                    if only.as_ref().is_some_and(|o| *o != name) {
                        continue;
                    }
                    let fault = Fault { op, nth: n, forever, error };
                    watchdog.start(format!("seed {seed}: {fault:?}"));
                    let outcome = trial(&template, &ops, fault, trial_seed);
                    let mut table = table.lock().expect("table");
                    let row = table.entry(label.clone()).or_default();
                    row.trials += 1;
                    row.fired += u64::from(outcome.fired);
                    row.surfaced += u64::from(outcome.surfaced);
                    if let Some(v) = outcome.violation {
                        row.violations += 1;
                        violations
                            .lock()
                            .expect("violations")
                            .push(format!("BASALT_SEED={seed} BASALT_FAULT={name} ({fault:?}): {v}"));
                    }
                }
            }
        }
    });
    let (table, violations) =
        (table.into_inner().expect("table"), violations.into_inner().expect("violations"));
    let mut out = String::from("\nfault loops: one injected fault per trial\n");
    let total: u64 = table.values().map(|r| r.trials).sum();
    for (label, r) in &table {
        let _ = writeln!(
            out,
            "  {label:<22} {:>4} of {:>4} points tried: {:>4} fired, {:>4} errors seen, \
             {:>3} VIOLATIONS",
            r.trials, r.points, r.fired, r.surfaced, r.violations
        );
    }
    let _ = writeln!(out, "  {total} trials, {} violations", violations.len());
    let _ = std::io::stderr().write_all(out.as_bytes());
    for v in violations.iter().take(20) {
        eprintln!("violation: {}", v.chars().take(800).collect::<String>());
    }
    assert!(violations.is_empty(), "{} violations (a sample is printed above)", violations.len());
}

/// Regression, found by `fault_loops`: when the fsync of a `compact_range`
/// output failed, `compact_range` returned the error but the database went
/// on acknowledging writes, while a failed flush or background compaction
/// stopped them (the error never reached `set_bg_error`). Now it stops
/// writes like every other failed fsync.
#[test]
fn manual_compaction_failure_stops_writes() {
    let fs = MemFs::new();
    let options = (Options::default().fs(std::sync::Arc::new(fs.clone()))).auto_compaction(false);
    let db = Db::open(DB, options).expect("open");
    for round in 0..2u32 {
        for i in 0..100u32 {
            db.put(i.to_be_bytes(), round.to_be_bytes()).expect("put");
        }
        db.flush().expect("flush");
    }
    fs.inject(Fault::forever(OpKind::Sync, 0));
    assert!(db.compact_range::<&[u8]>(..).is_err(), "compact_range succeeded with failing fsyncs");
    assert_eq!(fs.sync_faults_fired(), 1);
    common::history::assert_closed(db.put(b"after", b"x"), "put after a failed compact_range");
}
