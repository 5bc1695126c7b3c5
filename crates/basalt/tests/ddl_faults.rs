//! Fault loops over DDL: a workload of `create_table`, `drop_table`,
//! column changes (`Table::alter`), table upserts and deletes, key-value
//! writes, flushes and WAL syncs runs over
//! `MemFs` while one kind of file-system call fails once at its n-th call,
//! for every n up to the number of such calls a healthy run makes (the
//! fault is armed after the open, so every point lands in the workload).
//! Each trial checks that:
//! - nothing panics or hangs;
//! - once a call returned an error, every later write is refused with
//!   `Error::Closed` (key-value and table writes, synced or not, and
//!   `create_table`): a failed MANIFEST or WAL write leaves its durable
//!   state unknown, so nothing may be acknowledged after it;
//! - the image of the process dying (every written byte kept) and of a
//!   power loss (unsynced bytes dropped or torn) both open, and hold: every
//!   table whose `create_table` returned `Ok` and not dropped since, with
//!   its acknowledged rows; no table whose `drop_table` returned `Ok`; the
//!   key-value store and every table as of one prefix of the acknowledged
//!   writes that holds every durable one (all of them for the process
//!   image). A `create_table` or `drop_table` that failed may have taken
//!   effect or not, but only if nothing was acknowledged after it.
//!
//! DDL is durable when it returns: it fsyncs the MANIFEST. Data writes are
//! durable after a synced write, `sync_wal` or `flush`.
//!
//! Four workloads by default; `BASALT_CASES` runs more, `BASALT_SEED`
//! replays one, `BASALT_FAULT=Sync:12` (kind and n) runs one point.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use basalt::testing::{CrashMode, Fault, FaultError, MemFs, OpKind};
use basalt::{ColumnChange, Db, Error, Options, ScanOptions, Table, TableOptions, WriteBatch, WriteOptions};
use common::history::{Entry, apply, options_on, random_entry, submit};
use common::limit::{LIMIT, Limited, run_limited};
use common::{Model, rng, run_seeded, small_options};
use rand::Rng;
use rand::rngs::StdRng;

const DB: &str = "/db";
/// Table names the workload uses: `t0`, `t1`, `t2`.
const SLOTS: usize = 3;
/// The slot of the table the refusal check tries to create.
const LATE_SLOT: usize = SLOTS;
/// Operations per workload.
const WORKLOAD_OPS: usize = 60;
/// Hanging trials waited for before a workload's remaining points are
/// skipped: each costs the whole time limit.
const HANGS_MAX: usize = 3;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("v", DataType::Int64, false),
    ]))
}

fn name(slot: usize) -> String {
    format!("t{slot}")
}

fn row_batch(rows: &[(i64, i64)]) -> RecordBatch {
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(rows.iter().map(|r| r.0).collect::<Vec<_>>())),
        Arc::new(Int64Array::from(rows.iter().map(|r| r.1).collect::<Vec<_>>())),
    ];
    RecordBatch::try_new(schema(), cols).expect("rows")
}

fn key_batch(ids: &[i64]) -> RecordBatch {
    let s = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    RecordBatch::try_new(s, vec![Arc::new(Int64Array::from(ids.to_vec()))]).expect("keys")
}

#[derive(Clone, Debug)]
enum Op {
    Create(usize),
    Drop(usize),
    Rows {
        slot: usize,
        rows: Vec<(i64, i64)>,
        sync: bool,
    },
    Delete {
        slot: usize,
        ids: Vec<i64>,
        sync: bool,
    },
    Kv {
        entries: Vec<Entry>,
        sync: bool,
    },
    /// A change of a table's columns that leaves its schema as it was
    /// (a column added and dropped, or renamed and renamed back): new
    /// schema versions, a flush when the memtables hold its rows.
    Alter {
        slot: usize,
        rename: bool,
    },
    Flush,
    SyncWal,
}

/// A random workload that keeps its own catalog consistent: rows go only
/// to tables it created and has not dropped.
fn workload(rng: &mut StdRng) -> Vec<Op> {
    let sync_share = [0.05, 0.2, 0.5][rng.random_range(0..3)];
    let mut live = [false; SLOTS];
    let mut ops = vec![Op::Create(0)];
    live[0] = true;
    while ops.len() < WORKLOAD_OPS {
        let live_slots: Vec<usize> = (0..SLOTS).filter(|&s| live[s]).collect();
        let free_slots: Vec<usize> = (0..SLOTS).filter(|&s| !live[s]).collect();
        let sync = rng.random_bool(sync_share);
        let op = match rng.random_range(0..100) {
            0..10 if !free_slots.is_empty() => Op::Create(free_slots[rng.random_range(0..free_slots.len())]),
            10..18 if !live_slots.is_empty() => Op::Drop(live_slots[rng.random_range(0..live_slots.len())]),
            18..50 if !live_slots.is_empty() => {
                let rows =
                    (0..rng.random_range(1..20)).map(|_| (rng.random_range(0..40), rng.random())).collect();
                Op::Rows { slot: live_slots[rng.random_range(0..live_slots.len())], rows, sync }
            }
            50..56 if !live_slots.is_empty() => {
                let ids = (0..rng.random_range(1..5)).map(|_| rng.random_range(0..40)).collect();
                Op::Delete { slot: live_slots[rng.random_range(0..live_slots.len())], ids, sync }
            }
            56..84 => {
                Op::Kv { entries: (0..rng.random_range(1..4)).map(|_| random_entry(rng)).collect(), sync }
            }
            84..90 if !live_slots.is_empty() => Op::Alter {
                slot: live_slots[rng.random_range(0..live_slots.len())],
                rename: rng.random_bool(0.5),
            },
            88..95 => Op::Flush,
            95..100 => Op::SyncWal,
            _ => continue,
        };
        match &op {
            Op::Create(s) => live[*s] = true,
            Op::Drop(s) => live[*s] = false,
            _ => {}
        }
        ops.push(op);
    }
    ops
}

/// An acknowledged data write. Tables are told apart by instance: the
/// number of the `create_table` that made them, so rows of a dropped table
/// never count for one re-created under its name.
#[derive(Clone, Debug)]
enum Write {
    Kv(Vec<Entry>),
    Rows(usize, Vec<(i64, i64)>),
    Delete(usize, Vec<i64>),
}

/// A DDL call that returned an error: it may or may not have taken effect.
#[derive(Clone, Copy, Debug)]
enum FailedDdl {
    Create { slot: usize, instance: usize },
    Drop { slot: usize },
}

/// What the workload was told, in order.
#[derive(Default, Debug)]
struct History {
    writes: Vec<Write>,
    /// The first `durable` writes must survive a power loss.
    durable: usize,
    /// A data write that returned an error.
    maybe_write: Option<Write>,
    /// Live tables as acknowledged: slot → instance.
    catalog: BTreeMap<usize, usize>,
    instances: usize,
    failed_ddl: Option<FailedDdl>,
    /// Writes (and DDL) acknowledged after the first error.
    acked_after_error: usize,
}

impl History {
    fn ack(&mut self, w: Write, sync: bool, after_error: bool) {
        self.writes.push(w);
        if sync {
            self.durable = self.writes.len();
        }
        self.acked_after_error += usize::from(after_error);
    }

    fn created(&mut self, slot: usize) {
        self.catalog.insert(slot, self.instances);
        self.instances += 1;
    }

    /// The catalogs a crash image may hold: the acknowledged one, and the
    /// one where the failed DDL call took effect, if nothing was
    /// acknowledged after it.
    fn catalogs(&self) -> Vec<BTreeMap<usize, usize>> {
        let mut out = vec![self.catalog.clone()];
        if self.acked_after_error == 0 {
            let mut alt = self.catalog.clone();
            match self.failed_ddl {
                Some(FailedDdl::Create { slot, instance }) => {
                    alt.insert(slot, instance);
                }
                Some(FailedDdl::Drop { slot }) => {
                    alt.remove(&slot);
                }
                None => return out,
            }
            out.push(alt);
        }
        out
    }

    /// The state after the first `k` writes (the failed one last), with
    /// the tables of `catalog`.
    fn state_after(&self, k: usize, catalog: &BTreeMap<usize, usize>) -> DbState {
        let mut kv = Model::new();
        let mut rows: HashMap<usize, BTreeMap<i64, i64>> = HashMap::new();
        for w in self.writes.iter().chain(self.maybe_write.iter()).take(k) {
            match w {
                Write::Kv(entries) => apply(&mut kv, entries),
                Write::Rows(i, r) => rows.entry(*i).or_default().extend(r.iter().copied()),
                Write::Delete(i, ids) => {
                    let t = rows.entry(*i).or_default();
                    for id in ids {
                        t.remove(id);
                    }
                }
            }
        }
        let tables = catalog.iter().map(|(s, i)| (name(*s), rows.remove(i).unwrap_or_default())).collect();
        DbState { kv, tables }
    }

    /// Checks a recovered state: one catalog and one prefix of at least
    /// `durable` writes must give it.
    fn check(&self, got: &DbState, durable: usize) -> Result<(), String> {
        let total = self.writes.len() + usize::from(self.maybe_write.is_some());
        let catalogs = self.catalogs();
        for catalog in &catalogs {
            if (durable..=total).any(|k| self.state_after(k, catalog) == *got) {
                return Ok(());
            }
        }
        let names: Vec<&String> = got.tables.keys().collect();
        let want: Vec<Vec<String>> = catalogs.iter().map(|c| c.keys().map(|s| name(*s)).collect()).collect();
        let closest = self.state_after(total, &catalogs[0]);
        let mut diff = String::new();
        for (t, rows) in &closest.tables {
            if got.tables.get(t) != Some(rows) {
                let _ = write!(
                    diff,
                    " table {t}: want {} rows, got {:?};",
                    rows.len(),
                    got.tables.get(t).map(BTreeMap::len)
                );
            }
        }
        if closest.kv != got.kv {
            let _ = write!(diff, " key-value store: want {} keys, got {};", closest.kv.len(), got.kv.len());
        }
        Err(format!(
            "recovered state matches no acknowledged one: tables {names:?}, acknowledged catalogs {want:?}; \
             {} writes acknowledged, {durable} durable, {} after the first error; failed DDL {:?}; \
             against all writes:{diff}",
            self.writes.len(),
            self.acked_after_error,
            self.failed_ddl,
        ))
    }
}

/// What a reader sees: the key-value store and each table's rows by name.
#[derive(Debug, PartialEq)]
struct DbState {
    kv: Model,
    tables: BTreeMap<String, BTreeMap<i64, i64>>,
}

fn table_rows(t: &Table) -> Result<BTreeMap<i64, i64>, Error> {
    let mut out = BTreeMap::new();
    for b in t.scan(ScanOptions::default())? {
        let b = b?;
        let (ids, vs) = (b.column(0).as_primitive::<Int64Type>(), b.column(1).as_primitive::<Int64Type>());
        out.extend((0..b.num_rows()).map(|i| (ids.value(i), vs.value(i))));
    }
    Ok(out)
}

fn read_state(db: &Db) -> Result<DbState, Error> {
    let mut kv = Model::new();
    for item in db.iter_all() {
        let (k, v) = item?;
        kv.insert(k.to_vec(), v.to_vec());
    }
    let mut tables = BTreeMap::new();
    for n in db.tables().into_iter().filter(|n| n != "default") {
        let rows = table_rows(&db.table(&n)?)?;
        tables.insert(n, rows);
    }
    Ok(DbState { kv, tables })
}

/// One run of a workload against one database.
struct Run {
    history: History,
    handles: BTreeMap<usize, Table>,
}

impl Run {
    fn instance(&self, slot: usize) -> usize {
        self.history.catalog[&slot]
    }

    /// Runs one operation, recording what was acknowledged.
    fn apply(&mut self, db: &Db, op: &Op) -> Result<(), Error> {
        let h = &mut self.history;
        match op {
            Op::Create(slot) => {
                match db.create_table(&name(*slot), schema(), &["id"], TableOptions::default()) {
                    Ok(t) => {
                        self.handles.insert(*slot, t);
                        h.created(*slot);
                    }
                    Err(e) => {
                        h.failed_ddl = Some(FailedDdl::Create { slot: *slot, instance: h.instances });
                        return Err(e);
                    }
                }
            }
            Op::Drop(slot) => {
                self.handles.remove(slot);
                if let Err(e) = db.drop_table(&name(*slot)) {
                    h.failed_ddl = Some(FailedDdl::Drop { slot: *slot });
                    return Err(e);
                }
                h.catalog.remove(slot);
            }
            Op::Rows { slot, rows, sync } => {
                let w = Write::Rows(self.instance(*slot), rows.clone());
                let result =
                    self.handles[slot].write_opt(&row_batch(rows), &WriteOptions::default().sync(*sync));
                self.record(w, *sync, result)?;
            }
            Op::Delete { slot, ids, sync } => {
                let w = Write::Delete(self.instance(*slot), ids.clone());
                let mut wb = WriteBatch::new();
                wb.delete_table(&self.handles[slot], &key_batch(ids)).expect("delete_table");
                self.record(w, *sync, db.write_opt(wb, &WriteOptions::default().sync(*sync)))?;
            }
            Op::Kv { entries, sync } => {
                self.record(Write::Kv(entries.clone()), *sync, submit(db, entries, *sync))?;
            }
            Op::Alter { slot, rename } => self.handles[slot].alter(&round_trip_change(*rename))?,
            Op::Flush | Op::SyncWal => {
                if matches!(op, Op::Flush) { db.flush() } else { db.sync_wal() }?;
                h.durable = h.writes.len();
            }
        }
        Ok(())
    }

    fn record(&mut self, w: Write, sync: bool, result: Result<(), Error>) -> Result<(), Error> {
        match result {
            Ok(()) => {
                self.history.ack(w, sync, false);
                Ok(())
            }
            Err(e) => {
                self.history.maybe_write = Some(w);
                Err(e)
            }
        }
    }

    /// After an error: every data write must be refused with
    /// `Error::Closed`. One that is acknowledged all the same is recorded,
    /// so the crash checks also show what it costs.
    fn check_writes_refused(&mut self, db: &Db, after: &str, violations: &mut Vec<String>) {
        let mut refused = |what: &str, result: Result<(), Error>| refused(what, after, result, violations);
        for sync in [false, true] {
            let entries = vec![Entry::Put(format!("late-{sync}").into_bytes(), b"x".to_vec())];
            if refused(&format!("key-value write (sync={sync})"), submit(db, &entries, sync)) {
                self.history.ack(Write::Kv(entries), sync, true);
            }
        }
        // Every table the database still has, by its view (a table whose
        // drop failed is still there).
        let slots: Vec<usize> = self.history.catalog.keys().copied().collect();
        for slot in slots {
            let Ok(t) = db.table(&name(slot)) else { continue };
            let rows = vec![(1_000, 1)];
            if refused(
                &format!("synced write to {}", name(slot)),
                t.write_opt(&row_batch(&rows), &WriteOptions::default().sync(true)),
            ) {
                self.history.ack(Write::Rows(self.history.catalog[&slot], rows), true, true);
            }
        }
    }

    /// After an error, `create_table` must be refused too. Checked after
    /// the crash images are taken: a new MANIFEST written for it would
    /// hide what the failed call left in the old one.
    fn check_ddl_refused(&mut self, db: &Db, after: &str, violations: &mut Vec<String>) {
        for (slot, t) in &self.handles {
            let altered = t.alter(&round_trip_change(false));
            refused(&format!("alter of {}", name(*slot)), after, altered, violations);
        }
        let created = db.create_table(&name(LATE_SLOT), schema(), &["id"], TableOptions::default());
        if refused("create_table", after, created.map(drop), violations) {
            self.history.created(LATE_SLOT);
            self.history.acked_after_error += 1;
        }
    }
}

/// Column changes that leave the schema `(id, v)` as it was.
fn round_trip_change(rename: bool) -> Vec<ColumnChange> {
    if rename {
        vec![
            ColumnChange::Rename { from: "v".into(), to: "w".into() },
            ColumnChange::Rename { from: "w".into(), to: "v".into() },
        ]
    } else {
        vec![
            ColumnChange::Add { field: Arc::new(Field::new("x", DataType::Utf8, true)), default: None },
            ColumnChange::Drop { name: "x".into() },
        ]
    }
}

/// Whether a call after an error was acknowledged (a violation, recorded);
/// `Error::Closed` is the one right answer.
fn refused(what: &str, after: &str, result: Result<(), Error>, violations: &mut Vec<String>) -> bool {
    match result {
        Err(Error::Closed(_)) => false,
        Ok(()) => {
            violations.push(format!("{what} acknowledged after {after}"));
            true
        }
        Err(e) => {
            violations.push(format!("{what} after {after}: expected Error::Closed, got {e}"));
            false
        }
    }
}

/// Opens a crash image; its state must be one the history allows; then it
/// must take new writes that survive a clean reopen.
fn check_image(image: &MemFs, history: &History, durable: usize, template: &Options) -> Result<(), String> {
    let db = Db::open(DB, options_on(image, template)).map_err(|e| format!("open: {e}"))?;
    let got = read_state(&db).map_err(|e| format!("read: {e}"))?;
    history.check(&got, durable)?;
    db.put(b"after-recovery", b"x").map_err(|e| format!("write after recovery: {e}"))?;
    for n in got.tables.keys() {
        let t = db.table(n).map_err(|e| format!("table {n}: {e}"))?;
        t.write(&row_batch(&[(-1, -1)])).map_err(|e| format!("write {n} after recovery: {e}"))?;
    }
    db.close().map_err(|e| format!("close after recovery: {e}"))?;
    let db = Db::open(DB, options_on(image, template)).map_err(|e| format!("reopen: {e}"))?;
    let again = read_state(&db).map_err(|e| format!("read after reopen: {e}"))?;
    let mut want = got;
    want.kv.insert(b"after-recovery".to_vec(), b"x".to_vec());
    for rows in want.tables.values_mut() {
        rows.insert(-1, -1);
    }
    if again != want {
        return Err("writes after recovery did not survive a clean reopen".into());
    }
    db.close().map_err(|e| format!("close after reopen: {e}"))
}

/// Runs the workload with `fault` armed after the open; returns the
/// violations, and whether the fault fired.
fn trial(template: &Options, ops: &[Op], fault: Option<Fault>, crash_seed: u64) -> (Vec<String>, bool) {
    let fs = MemFs::new();
    let db = match Db::open(DB, options_on(&fs, template)) {
        Ok(db) => db,
        Err(e) => return (vec![format!("open before any fault: {e}")], false),
    };
    if let Some(f) = fault {
        fs.inject(f);
    }
    let mut run = Run { history: History::default(), handles: BTreeMap::new() };
    let mut violations = Vec::new();
    let mut failure = None;
    for op in ops {
        if let Err(e) = run.apply(&db, op) {
            let after = format!("{} failed with {e}", describe(op));
            run.check_writes_refused(&db, &after, &mut violations);
            failure = Some(after);
            break;
        }
    }
    let died = fs.process_crash();
    let mut rng = rng(crash_seed);
    let power_loss = fs.crash(CrashMode::ALL[rng.random_range(0..3)], rng.random());
    let mut checks = Vec::new();
    for (what, image, durable) in
        [("process died", died, run.history.writes.len()), ("power loss", power_loss, run.history.durable)]
    {
        checks.push(check_image(&image, &run.history, durable, template).map_err(|e| format!("{what}: {e}")));
    }
    if let Some(after) = &failure {
        run.check_ddl_refused(&db, after, &mut violations);
    }
    run.handles.clear();
    let closed = db.close();
    let h = &run.history;
    let durable = if closed.is_ok() { h.writes.len() } else { h.durable };
    checks.push(
        check_image(&fs.process_crash(), h, durable, template).map_err(|e| format!("after close: {e}")),
    );
    violations.extend(checks.into_iter().filter_map(Result::err));
    (violations, fs.faults_fired() > 0)
}

fn describe(op: &Op) -> String {
    match op {
        Op::Create(s) => format!("create_table({})", name(*s)),
        Op::Drop(s) => format!("drop_table({})", name(*s)),
        Op::Rows { slot, sync, .. } => format!("write to {} (sync={sync})", name(*slot)),
        Op::Delete { slot, sync, .. } => format!("delete from {} (sync={sync})", name(*slot)),
        Op::Kv { sync, .. } => format!("key-value write (sync={sync})"),
        Op::Alter { slot, rename } => format!("alter of {} (rename={rename})", name(*slot)),
        Op::Flush => "flush".into(),
        Op::SyncWal => "sync_wal".into(),
    }
}

/// A trial under the time limit.
fn limited_trial(
    template: &Options,
    ops: &[Op],
    fault: Option<Fault>,
    crash_seed: u64,
) -> (Vec<String>, bool) {
    let (template, ops) = (template.clone(), ops.to_vec());
    match run_limited(LIMIT, move || trial(&template, &ops, fault, crash_seed)) {
        Limited::Done(outcome) => outcome,
        Limited::Panicked(m) => (vec![format!("panicked: {m}")], true),
        Limited::Hung => (vec![format!("hung: no answer within {LIMIT:?}")], true),
    }
}

/// Calls of each kind a healthy run makes after the open (background work
/// varies a little between runs). The healthy run itself must pass.
fn healthy_calls(template: &Options, ops: &[Op]) -> BTreeMap<OpKind, u64> {
    let fs = MemFs::new();
    let db = Db::open(DB, options_on(&fs, template)).expect("open");
    let before: BTreeMap<OpKind, u64> = OpKind::ALL.iter().map(|&op| (op, fs.calls(op))).collect();
    let mut run = Run { history: History::default(), handles: BTreeMap::new() };
    for op in ops {
        run.apply(&db, op).unwrap_or_else(|e| panic!("healthy run: {} failed: {e}", describe(op)));
    }
    run.handles.clear();
    db.close().expect("healthy close");
    let calls = OpKind::ALL.iter().map(|&op| (op, fs.calls(op) - before[&op])).collect();
    let (violations, _) = limited_trial(template, ops, None, 0);
    assert!(violations.is_empty(), "healthy run: {violations:?}");
    calls
}

fn fault_classes() -> Vec<(OpKind, FaultError)> {
    let mut classes: Vec<(OpKind, FaultError)> = OpKind::ALL.iter().map(|&op| (op, FaultError::Io)).collect();
    classes.push((OpKind::Append, FaultError::NoSpace));
    classes
}

#[test]
fn ddl_fault_loops() {
    let only = std::env::var("BASALT_FAULT").ok();
    let violations = std::sync::Mutex::new(Vec::new());
    let trials = std::sync::Mutex::new((0u64, 0u64));
    run_seeded("ddl_fault_loops", 4, |seed| {
        let mut rng = rng(seed);
        let template = small_options(&MemFs::new(), &mut rng).block_cache_bytes(0);
        let ops = workload(&mut rng);
        let calls = healthy_calls(&template, &ops);
        let mut hangs = 0;
        for (op, error) in fault_classes() {
            for n in 0..=calls[&op] {
                let label =
                    format!("{op:?}{}:{n}", if error == FaultError::NoSpace { "-ENOSPC" } else { "" });
                if only.as_ref().is_some_and(|o| *o != label) {
                    continue;
                }
                let fault = Fault::once(op, n).with_error(error);
                let (found, fired) = limited_trial(&template, &ops, Some(fault), rng.random());
                let mut t = trials.lock().expect("trials");
                t.0 += 1;
                t.1 += u64::from(fired);
                hangs += found.iter().filter(|v| v.starts_with("hung")).count();
                for v in found {
                    violations
                        .lock()
                        .expect("violations")
                        .push(format!("BASALT_SEED={seed} BASALT_FAULT={label}: {v}"));
                }
                if hangs >= HANGS_MAX {
                    eprintln!("seed {seed}: {hangs} trials hung; its remaining points are skipped");
                    return;
                }
            }
        }
    });
    let violations = violations.into_inner().expect("violations");
    let (trials, fired) = trials.into_inner().expect("trials");
    eprintln!("ddl fault loops: {trials} trials, {fired} faults fired, {} violations", violations.len());
    for v in violations.iter().take(30) {
        eprintln!("violation: {}", v.chars().take(600).collect::<String>());
    }
    assert!(violations.is_empty(), "{} violations (a sample is printed above)", violations.len());
}

/// Found by `ddl_fault_loops`, minimized: the MANIFEST edit of a
/// `drop_table` is durable, then the removal of the table's files fails (a
/// failed `list` or `remove`). The call must then either succeed (the
/// files are only garbage, which the next open sweeps) or fail and stop
/// writes; it returned the error and went on acknowledging writes, while
/// the table was gone, in memory and after recovery.
#[test]
fn drop_table_whose_file_cleanup_fails() {
    for op in [OpKind::List, OpKind::Remove] {
        let fs = MemFs::new();
        // Without background compactions: the compaction thread, woken by
        // the flush, holds the current version while it chooses, and a
        // collection running meanwhile keeps the table's file (CI saw the
        // fault not fire under load).
        let opts = Options::default().fs(Arc::new(fs.clone())).auto_compaction(false);
        let db = Db::open(DB, opts).expect("open");
        let t = db.create_table("t", schema(), &["id"], TableOptions::default()).expect("create");
        t.write(&row_batch(&[(1, 1)])).expect("write");
        db.flush().expect("flush");
        db.wait_for_background_work().expect("settle");
        drop(t);
        fs.inject(Fault::once(op, 0));
        match db.drop_table("t") {
            Ok(()) => assert!(!db.tables().contains(&"t".to_string()), "{op:?}: dropped, yet listed"),
            Err(e) => {
                let put = db.put(b"k", b"v");
                assert!(
                    matches!(put, Err(Error::Closed(_))),
                    "{op:?}: drop_table failed ({e}), then put: {put:?}"
                );
            }
        }
        assert_eq!(fs.faults_fired(), 1, "{op:?}: the fault hit the drop's cleanup");
    }
}
