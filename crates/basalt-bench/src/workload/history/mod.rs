//! Issue 59: what keeping history costs, and what reading it costs. Per
//! engine (Basalt, and SQLite with the history table a user builds today),
//! two stores of one table `t` (`id` Int64 key, `version` Int64, four
//! 100-byte binary fields, as YCSB's fields) are loaded with the same rows;
//! then history is turned on in one of them (Basalt:
//! `Table::set_history(HistoryWindow::duration(24h))`; SQLite: a
//! `t_history` table with an `(id, seq)` index, kept by `AFTER
//! INSERT/UPDATE/DELETE` triggers and seeded with the loaded rows, so
//! reads as of any point of the run find every row, as Basalt's window
//! keeps the version each key had at its start). Measured:
//!
//! 1. **The run**: a YCSB-A-like run (zipfian, 50% current-value gets,
//!    50% updates of the whole row, each its own transaction, one
//!    thread), the same operations in both stores, in chunks of
//!    [`CHUNK_OPS`] alternating between them (and which goes first), so
//!    the machine's drift taxes both alike: `ops_per_s`,
//!    `update_ops_per_s`, the updates' and gets' p50/p99; then, after
//!    compaction (Basalt: `Db::flush` and `Table::compact`; SQLite: a
//!    WAL checkpoint), `db_bytes` and `wal_bytes`. Groups `history-off`
//!    and `history-on`.
//! 2. **As-of reads** (after compaction): for points taken between chunks
//!    of the run, keys drawn as in the run, read once untimed in every
//!    way, then in two timed passes: current gets in both stores, paired
//!    (`get_settled_*`), and, in the store keeping history, current gets
//!    paired with gets as of the point (`get_current_*`, `get_asof_*`);
//!    and Basalt's `Db::snapshot_at` (`snapshot_at_*`).
//! 3. **A key's history** of [`HISTORY_VERSIONS`] versions (written
//!    interleaved with other writes): `history_memtable_*` right after
//!    the writes, `history_sst_*` after compaction (SQLite: the same
//!    query both times).
//! 4. **The change feed**: every change of the run, [`FEED_BATCH_ROWS`]
//!    at a time from the run's start: `feed_changes_per_s`.
//!
//! Group `ratios` holds each run's paired ratios (medians over runs are
//! of the ratios): on ÷ off of update throughput, of space and of get
//! latency, and as-of ÷ current get latency. Every read is checked: the
//! run's gets return the version last written; an as-of read returns the
//! version its point saw (exactly, for a sample, against the key's
//! history, itself checked against every version the harness wrote); the
//! feed returns every update of the run, in order; a key's history every
//! version.

mod basalt;
mod phases;
mod sqlite;

use std::path::Path;
use std::time::Duration;

use super::{Job, Sink, disk_bytes, rate};
use crate::datagen::{self, ValuePool};
use crate::engine::{Config, Kind, Result};
use crate::measure::Latencies;
use phases::{AsOfStats, Plan, RunStats};

/// Fields per row besides `id` and `version` (YCSB has ten; four keep a
/// million rows near 430 MB, so two stores and their history fit a small
/// disk).
pub const FIELDS: usize = 4;
/// Bytes of each field.
pub const FIELD_BYTES: usize = 100;
/// Operations per chunk of the run (the stores alternate chunks).
pub const CHUNK_OPS: u64 = 1_000;
/// Rows per transaction of the load.
pub const LOAD_BATCH_ROWS: u64 = 1_000;
/// Versions of each key whose history is read.
pub const HISTORY_VERSIONS: u64 = 100;
/// Keys written [`HISTORY_VERSIONS`] times.
pub const HISTORY_KEYS: usize = 64;
/// Timed reads of a key's history, per state (memtable, SSTs).
pub const HISTORY_CALLS: u64 = 2_000;
/// Rows per read of the change feed.
pub const FEED_BATCH_ROWS: usize = 10_000;
/// Timed as-of reads (and as many current ones in each store).
pub const ASOF_READS_MAX: u64 = 20_000;
/// Points of the run the as-of reads are spread over.
pub const ASOF_POINTS_MAX: usize = 200;
/// The history window: longer than any run, so it keeps every version.
pub const WINDOW: Duration = Duration::from_hours(24);

/// One row as written.
#[derive(Debug, Clone)]
pub struct Rec {
    pub id: i64,
    pub version: i64,
    pub fields: [Vec<u8>; FIELDS],
}

impl Rec {
    fn new() -> Rec {
        Rec { id: 0, version: 0, fields: std::array::from_fn(|_| Vec::with_capacity(FIELD_BYTES)) }
    }

    /// Makes this row item `id` at `version`: field `f` is the pool's value
    /// of `id` at `version * FIELDS + f`, so each field of each version
    /// has its own bytes and a header naming them.
    fn fill(&mut self, pool: &ValuePool, id: u64, version: u64) {
        self.id = id as i64;
        self.version = version as i64;
        for (f, out) in self.fields.iter_mut().enumerate() {
            pool.fill(id, version * FIELDS as u64 + f as u64, FIELD_BYTES, out);
        }
    }
}

/// A row as read, borrowed from the engine.
#[derive(Debug, Clone, Copy)]
pub struct RowView<'a> {
    pub version: i64,
    pub fields: [&'a [u8]; FIELDS],
}

impl RowView<'_> {
    /// Whether this is item `id` at `version`: the version column and
    /// every field's length and header.
    fn is(&self, id: u64, version: u64) -> bool {
        self.version == version as i64
            && self.fields.iter().enumerate().all(|(f, b)| {
                b.len() == FIELD_BYTES
                    && datagen::value_header(b) == Some((id, version * FIELDS as u64 + f as u64))
            })
    }
}

/// A version a history or a change feed hands back: its point (seqno,
/// `t_history.seq`), its key, and the row (`None`: a delete).
pub type Visit<'v> = dyn FnMut(u64, i64, Option<RowView<'_>>) + 'v;

/// A store of table `t`, with or without history.
pub trait HistoryStore {
    /// Inserts `rows` in one transaction (the load, before history).
    fn load(&mut self, rows: &[Rec]) -> Result<()>;
    /// Makes every write durable and waits for background work.
    fn settle(&mut self) -> Result<()>;
    /// Keeps every version from now on; returns the point the change
    /// feed of what follows starts after.
    fn keep_history(&mut self) -> Result<u64>;
    /// Replaces row `rec.id` with `rec`, in its own transaction.
    fn update(&mut self, rec: &Rec) -> Result<()>;
    /// The current row of `id`, handed to `visit`; whether there is one.
    fn get(&mut self, id: i64, visit: &mut dyn FnMut(RowView<'_>)) -> Result<bool>;
    /// The point of the latest commit (history on).
    fn point(&mut self) -> Result<u64>;
    /// Reads as of `point` from now on ([`HistoryStore::get_as_of`]);
    /// returns the point it reads at (Basalt's is the end of the
    /// commit's millisecond, never earlier).
    fn read_as_of(&mut self, point: u64) -> Result<u64>;
    /// The row of `id` as of the point [`HistoryStore::read_as_of`] set.
    fn get_as_of(&mut self, id: i64, visit: &mut dyn FnMut(RowView<'_>)) -> Result<bool>;
    /// Every version of `id` kept, newest first; returns how many.
    fn history(&mut self, id: i64, visit: &mut Visit<'_>) -> Result<usize>;
    /// Up to `limit` changes after point `since`, in commit order;
    /// returns how many.
    fn changes(&mut self, since: u64, limit: usize, visit: &mut Visit<'_>) -> Result<usize>;
    /// Compacts: afterwards the files hold what the store keeps.
    fn compact(&mut self) -> Result<()>;
}

/// Whether `kind` has a history store here.
pub fn supports(kind: Kind) -> bool {
    matches!(kind, Kind::Basalt | Kind::Sqlite)
}

/// The settings of `kind`'s store, for the report.
pub fn options(kind: Kind, cfg: &Config) -> String {
    match kind {
        Kind::Sqlite => sqlite::options(cfg),
        _ => basalt::options(cfg),
    }
}

fn open(kind: Kind, dir: &Path, cfg: &Config) -> Result<Box<dyn HistoryStore>> {
    std::fs::create_dir_all(dir)?;
    Ok(match kind {
        Kind::Basalt => Box::new(basalt::BasaltStore::open(dir, cfg)?),
        Kind::Sqlite => Box::new(sqlite::SqliteStore::open(dir, cfg)?),
        other => return Err(format!("the history workload has no store for {}", other.name()).into()),
    })
}

/// Bytes of the write-ahead log files under `dir` (Basalt's `*.wal`,
/// SQLite's `*-wal`).
fn wal_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with("wal"))
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// Runs the workload for `job`'s engine in `dir`; see the module docs.
pub fn run(job: &Job, dir: &Path, sink: &mut Sink) -> Result<()> {
    if !supports(job.engine) {
        return Err(format!("the history workload has no store for {}", job.engine.name()).into());
    }
    let cfg = job.config(true);
    sink.template.env.engine_options = options(job.engine, &cfg);
    let plan = Plan::new(job.scale, job.ops, job.seed)?;
    let pool = ValuePool::new(job.seed);
    let (off_dir, on_dir) = (dir.join("off"), dir.join("on"));
    let mut off = open(job.engine, &off_dir, &cfg)?;
    let mut on = open(job.engine, &on_dir, &cfg)?;
    phases::load(&plan, &pool, &mut [off.as_mut(), on.as_mut()])?;
    let since = on.keep_history()?;

    let (stats, points) = phases::run_ops(&plan, &pool, &mut [off.as_mut(), on.as_mut()])?;
    // (all bytes, WAL bytes) of each store once compacted.
    let mut bytes = [(0u64, 0u64); 2];
    for (i, (store, d)) in [(&mut off, &off_dir), (&mut on, &on_dir)].into_iter().enumerate() {
        store.compact()?;
        bytes[i] = (disk_bytes(d), wal_bytes(d));
    }
    let mut reads = phases::as_of_reads(&plan, job.seed, &mut [off.as_mut(), on.as_mut()], &points)?;
    let feed = phases::feed(&plan, on.as_mut(), since)?;
    let mut history = phases::key_history(&plan, &pool, job.seed, on.as_mut())?;
    drop((off, on));

    put_run(sink, stats, &bytes, &mut reads);
    put_reads(sink, job.engine, &mut reads, &mut history);
    sink.put_in("history", "history-on", 1, "feed_changes", feed.0 as f64, "rows");
    sink.put_in("history", "history-on", 1, "feed_changes_per_s", rate(feed.0, feed.1), "rows/s");
    Ok(())
}

/// The run's measurements of both stores and their ratios.
fn put_run(sink: &mut Sink, mut stats: [RunStats; 2], bytes: &[(u64, u64); 2], reads: &mut AsOfStats) {
    let mut p = [[0.0; 4]; 2];
    for (i, s) in stats.iter_mut().enumerate() {
        let label = if i == 0 { "history-off" } else { "history-on" };
        let mut put =
            |metric: &str, value: f64, unit: &str| sink.put_in("history", label, 1, metric, value, unit);
        let update_rate = rate(s.updates.len() as u64, s.update_time);
        put("ops_per_s", rate(s.ops, s.took), "ops/s");
        put("update_ops_per_s", update_rate, "ops/s");
        put("update_p50_us", s.updates.percentile_us(50.0), "us");
        put("update_p99_us", s.updates.percentile_us(99.0), "us");
        put("get_p50_us", s.gets.percentile_us(50.0), "us");
        put("get_p99_us", s.gets.percentile_us(99.0), "us");
        let settled = &mut reads.current[i];
        put("get_settled_p50_us", settled.percentile_us(50.0), "us");
        put("get_settled_p99_us", settled.percentile_us(99.0), "us");
        put("db_bytes", bytes[i].0 as f64, "bytes");
        put("wal_bytes", bytes[i].1 as f64, "bytes");
        p[i] = [update_rate, s.gets.percentile_us(50.0), s.gets.percentile_us(99.0), bytes[i].0 as f64];
    }
    let mut ratio = |metric: &str, value: f64| sink.put_in("history", "ratios", 1, metric, value, "x");
    ratio("on_off_update_throughput", p[1][0] / p[0][0]);
    ratio("on_off_space", p[1][3] / p[0][3]);
    ratio("on_off_get_p50", p[1][1] / p[0][1]);
    ratio("on_off_get_p99", p[1][2] / p[0][2]);
    let [b, a] = &mut reads.current;
    let settled =
        [a.percentile_us(50.0) / b.percentile_us(50.0), a.percentile_us(99.0) / b.percentile_us(99.0)];
    ratio("on_off_get_settled_p50", settled[0]);
    ratio("on_off_get_settled_p99", settled[1]);
}

/// The as-of reads, Basalt's snapshot opening, a key's history.
fn put_reads(sink: &mut Sink, kind: Kind, reads: &mut AsOfStats, history: &mut [Latencies; 2]) {
    let mut put =
        |metric: &str, value: f64, unit: &str| sink.put_in("history", "history-on", 1, metric, value, unit);
    put("get_current_p50_us", reads.current_beside_as_of.percentile_us(50.0), "us");
    put("get_current_p99_us", reads.current_beside_as_of.percentile_us(99.0), "us");
    put("get_asof_p50_us", reads.as_of.percentile_us(50.0), "us");
    put("get_asof_p99_us", reads.as_of.percentile_us(99.0), "us");
    if kind == Kind::Basalt {
        put("snapshot_at_p50_us", reads.open.percentile_us(50.0), "us");
        put("snapshot_at_p99_us", reads.open.percentile_us(99.0), "us");
    }
    put("history_memtable_p50_us", history[0].percentile_us(50.0), "us");
    put("history_memtable_p99_us", history[0].percentile_us(99.0), "us");
    put("history_sst_p50_us", history[1].percentile_us(50.0), "us");
    put("history_sst_p99_us", history[1].percentile_us(99.0), "us");
    let current = &mut reads.current_beside_as_of;
    let ratios = [
        reads.as_of.percentile_us(50.0) / current.percentile_us(50.0),
        reads.as_of.percentile_us(99.0) / current.percentile_us(99.0),
    ];
    sink.put_in("history", "ratios", 1, "asof_current_get_p50", ratios[0], "x");
    sink.put_in("history", "ratios", 1, "asof_current_get_p99", ratios[1], "x");
}

#[cfg(test)]
mod tests {
    use super::super::Workload;
    use super::*;

    fn job(engine: Kind) -> Job {
        let mut job = super::super::tests::job(Workload::History, 2_000, &[]);
        job.engine = engine;
        job.ops = 3_000;
        job.distribution = datagen::Distribution::Zipfian;
        job
    }

    #[test]
    fn both_stores_measure_every_phase_and_check_every_read() {
        for engine in [Kind::Basalt, Kind::Sqlite] {
            let dir = tempfile::tempdir().expect("tempdir");
            let j = job(engine);
            let mut sink = Sink::new(&j);
            run(&j, dir.path(), &mut sink).unwrap_or_else(|e| panic!("{}: {e}", engine.name()));
            let value = |dist: &str, metric: &str| {
                sink.records
                    .iter()
                    .find(|r| r.distribution == dist && r.metric == metric)
                    .unwrap_or_else(|| panic!("{}: no {dist} {metric}", engine.name()))
                    .value
            };
            let plan = Plan::new(j.scale, j.ops, j.seed).expect("plan");
            // The feed returned every update of the run (checked one by one
            // by the workload), and nothing else.
            assert_eq!(value("history-on", "feed_changes") as u64, plan.updates(), "{}", engine.name());
            for dist in ["history-off", "history-on"] {
                for metric in
                    ["ops_per_s", "update_ops_per_s", "get_p99_us", "get_settled_p50_us", "db_bytes"]
                {
                    assert!(value(dist, metric) > 0.0, "{} {dist} {metric}", engine.name());
                }
            }
            for metric in ["get_asof_p50_us", "history_memtable_p50_us", "history_sst_p99_us"] {
                assert!(value("history-on", metric) > 0.0, "{} {metric}", engine.name());
            }
            assert!(value("ratios", "on_off_space") > 1.0, "{}: history takes room", engine.name());
            assert_eq!(sink.records.iter().filter(|r| r.distribution == "ratios").count(), 8);
        }
    }

    /// A store whose reads as of a point return the current row.
    struct Stale(Box<dyn HistoryStore>);

    impl HistoryStore for Stale {
        fn load(&mut self, rows: &[Rec]) -> Result<()> {
            self.0.load(rows)
        }
        fn settle(&mut self) -> Result<()> {
            self.0.settle()
        }
        fn keep_history(&mut self) -> Result<u64> {
            self.0.keep_history()
        }
        fn update(&mut self, rec: &Rec) -> Result<()> {
            self.0.update(rec)
        }
        fn get(&mut self, id: i64, visit: &mut dyn FnMut(RowView<'_>)) -> Result<bool> {
            self.0.get(id, visit)
        }
        fn point(&mut self) -> Result<u64> {
            self.0.point()
        }
        fn read_as_of(&mut self, point: u64) -> Result<u64> {
            self.0.read_as_of(point)
        }
        fn get_as_of(&mut self, id: i64, visit: &mut dyn FnMut(RowView<'_>)) -> Result<bool> {
            self.0.get(id, visit)
        }
        fn history(&mut self, id: i64, visit: &mut Visit<'_>) -> Result<usize> {
            self.0.history(id, visit)
        }
        fn changes(&mut self, since: u64, limit: usize, visit: &mut Visit<'_>) -> Result<usize> {
            self.0.changes(since, limit, visit)
        }
        fn compact(&mut self) -> Result<()> {
            self.0.compact()
        }
    }

    #[test]
    fn an_as_of_read_of_the_current_row_fails() {
        let j = job(Kind::Basalt);
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = j.config(true);
        let plan = Plan::new(j.scale, j.ops, j.seed).expect("plan");
        let pool = ValuePool::new(j.seed);
        let mut off = open(Kind::Basalt, &dir.path().join("off"), &cfg).expect("open");
        let mut on = Stale(open(Kind::Basalt, &dir.path().join("on"), &cfg).expect("open"));
        phases::load(&plan, &pool, &mut [off.as_mut(), &mut on]).expect("load");
        on.keep_history().expect("history on");
        let (_, points) = phases::run_ops(&plan, &pool, &mut [off.as_mut(), &mut on]).expect("run");
        let err = phases::as_of_reads(&plan, j.seed, &mut [off.as_mut(), &mut on], &points)
            .expect_err("a current row read as of a past point")
            .to_string();
        assert!(err.contains("as of"), "{err}");
    }
}
