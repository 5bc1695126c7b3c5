//! The workloads. A [`Job`] is one engine running one workload at one
//! scale; each job runs in its own child process (so memory is measured
//! per engine and one engine's heap or page-cache state cannot tax the
//! next), checks the adapter, then prints its measurements as JSON lines.
//! With a memory limit, a job's read phases run a second time under it
//! (see [`crate::memory`]), recorded as workload `<name>@<N>MiB`.

pub mod alter;
pub mod arrow;
pub mod counters;
pub mod history;
pub mod marbledb;
pub mod omendb;
pub mod overload;
pub mod range_delete;
pub mod resilientdb;
pub mod sessions;
pub mod transactions;
pub mod ycsb;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::datagen::Distribution;
use crate::engine::{self, Config, Engine, Kind, Result, Row};
use crate::measure::{self, Latencies, Machine};
use crate::memory::{self, MemoryLimit};
use crate::result::{Env, Record};

/// Opens the job's engine in a directory (new, or written by an earlier
/// open): workloads take it as a parameter so that a test can run one
/// against an engine that misbehaves.
pub type Opener<'a> = dyn Fn(&std::path::Path) -> Result<Box<dyn Engine>> + 'a;

/// Which workload a job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Seeds 001/004: bulk insert then random point lookups.
    Omendb,
    /// Seed 002: 512-byte records, lookups, scans, unindexed search.
    Marbledb,
    /// Seed 002's back-pressure run: the write phase under a budget.
    Backpressure,
    /// YCSB A–F.
    Ycsb,
    /// Seed 003: Arrow batches and columnar scans against the row path.
    Arrow,
    /// Seed 000: secondary-index queries, index upkeep.
    Resilientdb,
    /// Issue 43: read-modify-write transactions.
    Transactions,
    /// Issue 59: history windows, as-of reads, the change feed.
    History,
    /// Issue 60: deleting a contiguous key range.
    #[serde(rename = "range-delete")]
    RangeDelete,
    /// Issue 60: counters incremented by merge and by transactions.
    Counters,
    /// Issue 60: random writes faster than compaction sustains, for a
    /// while, with and without the write-buffer budget.
    Overload,
    /// Issue 60: a session store with a time to live against one without.
    Sessions,
}

/// Everything a child process needs to run one job.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    /// The workload.
    pub workload: Workload,
    /// The engine.
    pub engine: Kind,
    /// Rows loaded.
    pub scale: u64,
    /// Key order (omendb) or request distribution.
    pub distribution: Distribution,
    /// Client thread counts (YCSB).
    pub threads: Vec<usize>,
    /// YCSB workloads to run (`a`…`f`).
    pub ycsb: Vec<char>,
    /// Operations per timed phase (lookups, YCSB operations).
    pub ops: u64,
    /// Value size in bytes.
    pub value_bytes: usize,
    /// Cache budget for every engine.
    pub cache_bytes: usize,
    /// Write-buffer budget (back-pressure run).
    pub budget_bytes: Option<usize>,
    /// Seed of every generator.
    pub seed: u64,
    /// Where the databases are created (each job in a fresh subdirectory,
    /// removed at the end).
    pub data_dir: PathBuf,
    /// The machine, detected once by the parent.
    pub machine: Machine,
    /// The equal-memory pass's limit and cgroup, if one runs.
    #[serde(default)]
    pub memory: Option<MemoryLimit>,
    /// Which of the parent's runs this is (from 0): a job that measures two
    /// variants itself alternates which goes first.
    #[serde(default)]
    pub run: usize,
    /// How long a timed run writes (the overload run), in seconds.
    #[serde(default)]
    pub seconds: u64,
    /// The sessions workload's run length, TTL and rate.
    #[serde(default)]
    pub sessions: Option<sessions::Params>,
}

impl Job {
    /// The engine configuration of this job.
    pub fn config(&self, int_keys: bool) -> Config {
        Config {
            cache_bytes: self.cache_bytes,
            write_buffer_budget_bytes: self.budget_bytes,
            int_keys,
            value_bytes: self.value_bytes,
        }
    }

    /// The workload's name in result files.
    pub fn workload_name(&self) -> &'static str {
        match self.workload {
            Workload::Omendb => "omendb",
            Workload::Marbledb => "marbledb",
            Workload::Backpressure => "marbledb-backpressure",
            Workload::Ycsb => "ycsb",
            Workload::Arrow => "arrow",
            Workload::Resilientdb => "resilientdb",
            Workload::Transactions => "transactions",
            Workload::History => "history",
            Workload::RangeDelete => "range-delete",
            Workload::Counters => "counters",
            Workload::Overload if self.budget_bytes.is_none() => overload::UNBOUNDED,
            Workload::Overload => "overload",
            Workload::Sessions => "sessions",
        }
    }

    /// A one-line description for the progress bar.
    pub fn label(&self) -> String {
        format!(
            "{} {} {} @ {}",
            self.workload_name(),
            self.engine.name(),
            self.distribution.name(),
            self.scale
        )
    }

    fn int_keys(&self) -> bool {
        !matches!(self.workload, Workload::Ycsb)
    }

    fn harness(&self) -> String {
        format!(
            "cache {} MiB; no fsync per batch (settle syncs); seed {}; {} B values; {}{}{}",
            self.cache_bytes >> 20,
            self.seed,
            self.value_bytes,
            if self.seconds > 0 {
                format!("writes for {} s", self.seconds)
            } else {
                format!("{} ops per phase", self.ops)
            },
            self.budget_bytes.map_or(String::new(), |b| format!("; write-buffer budget {} MiB", b >> 20)),
            self.memory.as_ref().map_or(String::new(), |m| format!(
                "; workloads named `<workload>{}` read with heap, page cache and maps held to {} MiB (memory cgroup, \
                 engine reopened on an evicted page cache)",
                m.suffix(),
                m.bytes >> 20
            ))
        )
    }

    /// The engine opener of this job: the job's engine and configuration.
    pub fn opener(&self) -> impl Fn(&std::path::Path) -> Result<Box<dyn Engine>> + '_ {
        move |dir| engine::open(self.engine, dir, &self.config(self.int_keys()))
    }
}

/// Collects the measurements of one job.
#[derive(Debug)]
pub struct Sink {
    records: Vec<Record>,
    template: Record,
    /// Appended to every workload name (the equal-memory pass's `@<N>MiB`).
    suffix: String,
}

impl Sink {
    fn new(job: &Job) -> Sink {
        let cfg = job.config(job.int_keys());
        let template = Record {
            workload: job.workload_name().to_string(),
            engine: job.engine.name().to_string(),
            scale: job.scale,
            distribution: job.distribution.name().to_string(),
            threads: 1,
            metric: String::new(),
            value: 0.0,
            unit: String::new(),
            env: Env {
                machine: job.machine.clone(),
                engine_version: job.engine.version(),
                engine_options: job.engine.options(&cfg),
                harness: job.harness(),
                runs: 1,
            },
            query: None,
            result_rows: None,
            rows_read: None,
        };
        Sink { records: Vec::new(), template, suffix: String::new() }
    }

    /// Records `metric` for the job's own workload, distribution and one
    /// thread.
    pub fn put(&mut self, metric: &str, value: f64, unit: &str) {
        let (w, d) = (self.template.workload.clone(), self.template.distribution.clone());
        self.put_in(&w, &d, 1, metric, value, unit);
    }

    /// Records `metric` under another workload name, distribution or thread
    /// count (YCSB's phases).
    pub fn put_in(
        &mut self,
        workload: &str,
        distribution: &str,
        threads: usize,
        metric: &str,
        value: f64,
        unit: &str,
    ) {
        let mut r = self.template.clone();
        r.workload = format!("{workload}{}", self.suffix);
        r.distribution = distribution.to_string();
        r.threads = threads;
        r.metric = metric.to_string();
        r.value = value;
        r.unit = unit.to_string();
        self.records.push(r);
    }

    /// Records a query's `metric`: distribution `<query>-<result_rows>`,
    /// the engine's name replaced by `engine` where given (a variant run
    /// in the same job, such as Basalt's scan baseline).
    #[expect(clippy::too_many_arguments, reason = "the fields of a query's result line")]
    pub fn put_query(
        &mut self,
        engine: Option<&str>,
        query: &str,
        result_rows: u64,
        rows_read: Option<f64>,
        metric: &str,
        value: f64,
        unit: &str,
    ) {
        let w = self.template.workload.clone();
        self.put_in(&w, &format!("{query}-{result_rows}"), 1, metric, value, unit);
        if let Some(r) = self.records.last_mut() {
            if let Some(e) = engine {
                r.engine = e.to_string();
            }
            r.query = Some(query.to_string());
            r.result_rows = Some(result_rows);
            r.rows_read = rows_read;
        }
    }

    /// Records p50 and p99 of `lat` as `<prefix>_p50_us` and `<prefix>_p99_us`.
    pub fn put_latency(&mut self, prefix: &str, lat: &mut Latencies) {
        self.put(&format!("{prefix}_p50_us"), lat.percentile_us(50.0), "us");
        self.put(&format!("{prefix}_p99_us"), lat.percentile_us(99.0), "us");
    }

    /// Records the peak resident memory since the last reset, and the
    /// memory the engine reports holding itself now (where it reports it)
    /// as `engine_memory_bytes`, so the two can be read side by side.
    pub fn put_peak_memory(&mut self, metric: &str, engine: &dyn Engine) {
        if let Some(b) = measure::proc_status_bytes("VmHWM") {
            self.put(metric, b as f64, "bytes");
        }
        if let Some(b) = engine.engine_memory_bytes() {
            self.put(&metric.replace("peak_memory", "engine_memory"), b as f64, "bytes");
        }
    }
}

/// The equal-memory pass: with a limit in `job`, evicts the database's
/// pages (the caller has closed the engine: mapped pages are not evicted),
/// moves this process into the job's cgroup, reopens the engine and names
/// what is recorded from then on `<workload>@<N>MiB`. Returns the reopened
/// engine, or `None` without a limit. Call [`end_limited`] after its
/// phases.
pub fn start_limited(
    job: &Job,
    open: &Opener<'_>,
    dir: &std::path::Path,
    sink: &mut Sink,
) -> Result<Option<Box<dyn Engine>>> {
    let Some(limit) = &job.memory else { return Ok(None) };
    memory::evict(dir)?;
    memory::join(&limit.cgroup)?;
    sink.suffix = limit.suffix();
    Ok(Some(open(dir)?))
}

/// Records the limited pass's peak memory (`cgroup_peak_bytes`: heap,
/// page cache and mapped pages charged to the cgroup).
pub fn end_limited(job: &Job, sink: &mut Sink) {
    if let Some(peak) = job.memory.as_ref().and_then(|m| memory::peak_bytes(&m.cgroup)) {
        sink.put("cgroup_peak_bytes", peak as f64, "bytes");
    }
}

/// Runs `job` in this process and returns its records.
pub fn run(job: &Job) -> Result<Vec<Record>> {
    let base = job.data_dir.join(format!("{}-{}-{}", job.engine.name(), std::process::id(), job.seed));
    let _cleanup = RemoveOnDrop(base.clone());
    // Every adapter passes the same correctness check before it is timed.
    {
        let engine = engine::open(job.engine, &base.join("check"), &job.config(job.int_keys()))?;
        engine::check(engine.as_ref(), 2_000)?;
    }
    std::fs::remove_dir_all(base.join("check"))?;
    let dir = base.join("db");
    run_on(job, &job.opener(), &dir)
}

/// Runs `job` with engines from `open` in `dir` (no adapter check) and
/// returns its records.
pub fn run_on(job: &Job, open: &Opener<'_>, dir: &std::path::Path) -> Result<Vec<Record>> {
    let mut sink = Sink::new(job);
    measure::reset_peak_rss();
    match job.workload {
        Workload::Omendb => omendb::run(job, open, dir, &mut sink)?,
        Workload::Marbledb => marbledb::run(job, open, dir, &mut sink)?,
        Workload::Backpressure => marbledb::run_backpressure(job, open, dir, &mut sink)?,
        Workload::Ycsb => ycsb::run(job, open, dir, &mut sink)?,
        Workload::Arrow => arrow::run(job, open, dir, &mut sink)?,
        Workload::Resilientdb => resilientdb::run(job, dir, &mut sink)?,
        Workload::Transactions => transactions::run(job, open, dir, &mut sink)?,
        Workload::History => history::run(job, dir, &mut sink)?,
        Workload::RangeDelete => range_delete::run(job, dir, &mut sink)?,
        Workload::Counters => counters::run(job, dir, &mut sink)?,
        Workload::Overload => overload::run(job, open, dir, &mut sink)?,
        Workload::Sessions => sessions::run(job, dir, &mut sink)?,
    }
    Ok(sink.records)
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Statistics of a load.
#[derive(Debug)]
pub struct LoadStats {
    /// Wall time of all writes.
    pub took: Duration,
    /// The longest single batch write: the harness's view of a write stall,
    /// the same measure for every engine.
    pub batch_max: Duration,
}

/// Writes `n` rows made by `row(i, &mut row)` in batches of `batch` rows,
/// timing every batch.
pub fn load(
    engine: &dyn Engine,
    n: u64,
    batch: usize,
    mut row: impl FnMut(u64, &mut Row),
) -> Result<LoadStats> {
    let mut rows: Vec<Row> = Vec::with_capacity(batch);
    let mut batch_max = Duration::ZERO;
    let start = Instant::now();
    let mut i = 0;
    while i < n {
        let len = (n - i).min(batch as u64) as usize;
        rows.resize_with(len, Default::default);
        for (j, r) in rows.iter_mut().enumerate() {
            row(i + j as u64, r);
        }
        let t = Instant::now();
        engine.write(&rows)?;
        batch_max = batch_max.max(t.elapsed());
        i += len as u64;
    }
    Ok(LoadStats { took: start.elapsed(), batch_max })
}

/// Total size of the files under `dir`, in bytes.
pub fn disk_bytes(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => disk_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// Operations per second.
pub fn rate(ops: u64, took: Duration) -> f64 {
    ops as f64 / took.as_secs_f64().max(1e-9)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::Mutex;

    use super::*;
    use crate::engine::{Reader, Row};

    /// How a broken engine breaks.
    #[derive(Clone, Copy, PartialEq)]
    enum Fault {
        /// Writes of a key already written are dropped: reads stay stale.
        DropsUpdates,
        /// Reads hand back values with their last byte flipped.
        FlipsLastByte,
    }

    /// A real engine (Basalt) with one fault.
    struct Broken {
        inner: Box<dyn Engine>,
        fault: Fault,
        written: Mutex<HashSet<Vec<u8>>>,
    }

    impl Engine for Broken {
        fn write(&self, rows: &[Row]) -> Result<()> {
            let mut written = self.written.lock().expect("lock");
            let rows: Vec<Row> = rows
                .iter()
                .filter(|(k, _)| self.fault != Fault::DropsUpdates || written.insert(k.clone()))
                .cloned()
                .collect();
            self.inner.write(&rows)
        }

        fn reader(&self) -> Result<Box<dyn Reader + '_>> {
            Ok(Box::new(BrokenReader { inner: self.inner.reader()?, fault: self.fault }))
        }

        fn settle(&self) -> Result<()> {
            self.inner.settle()
        }
    }

    struct BrokenReader<'a> {
        inner: Box<dyn Reader + 'a>,
        fault: Fault,
    }

    impl Reader for BrokenReader<'_> {
        fn get(&mut self, key: &[u8], check: &mut dyn FnMut(&[u8])) -> Result<bool> {
            let fault = self.fault;
            self.inner.get(key, &mut |v| {
                let mut v = v.to_vec();
                if fault == Fault::FlipsLastByte
                    && let Some(last) = v.last_mut()
                {
                    *last ^= 1;
                }
                check(&v);
            })
        }

        fn scan(
            &mut self,
            start: &[u8],
            end: Option<&[u8]>,
            limit: usize,
            visit: &mut dyn FnMut(&[u8], &[u8]),
        ) -> Result<usize> {
            self.inner.scan(start, end, limit, visit)
        }
    }

    pub(super) fn job(workload: Workload, scale: u64, ycsb: &[char]) -> Job {
        Job {
            workload,
            engine: Kind::Basalt,
            scale,
            distribution: if workload == Workload::Ycsb {
                Distribution::Zipfian
            } else {
                Distribution::Random
            },
            threads: vec![1],
            ycsb: ycsb.to_vec(),
            ops: 3_000,
            value_bytes: if workload == Workload::Ycsb { 100 } else { 16 },
            cache_bytes: 8 << 20,
            budget_bytes: None,
            seed: 7,
            data_dir: PathBuf::new(),
            machine: Machine::default(),
            memory: None,
            run: 0,
            seconds: 0,
            sessions: None,
        }
    }

    /// The value of `metric` recorded for `engine`; panics if there is none.
    pub(super) fn metric_of(records: &[Record], engine: &str, metric: &str) -> f64 {
        records
            .iter()
            .find(|r| r.engine == engine && r.metric == metric)
            .unwrap_or_else(|| panic!("{engine}: no {metric}"))
            .value
    }

    fn run_broken(job: &Job, fault: Option<Fault>) -> Result<Vec<Record>> {
        let dir = tempfile::tempdir().expect("tempdir");
        let open = |d: &std::path::Path| -> Result<Box<dyn Engine>> {
            let inner = job.opener()(d)?;
            Ok(match fault {
                Some(fault) => Box::new(Broken { inner, fault, written: Mutex::new(HashSet::new()) }),
                None => inner,
            })
        };
        run_on(job, &open, &dir.path().join("db"))
    }

    #[test]
    fn a_stale_value_after_an_update_fails_ycsb() {
        let mut a = job(Workload::Ycsb, 500, &['a']);
        // Two clients updating the same hot items at once: the real engine
        // must pass (versions of one item commit in issue order).
        a.threads = vec![1, 2];
        a.ops = 20_000;
        if let Err(e) = run_broken(&a, None) {
            panic!("the real engine passes: {e}");
        }
        let err = run_broken(&a, Some(Fault::DropsUpdates)).expect_err("stale reads fail").to_string();
        assert!(err.contains("stale version"), "{err}");
    }

    #[test]
    fn the_overload_run_reports_its_rate_stalls_and_memory_within_the_budget() {
        let mut j = job(Workload::Overload, 10_000, &[]);
        j.seconds = 1;
        j.value_bytes = 512;
        j.budget_bytes = Some(1 << 20);
        let records = run_broken(&j, None).expect("the real engine runs it");
        let get = |m: &str| records.iter().find(|r| r.metric == m).map(|r| r.value);
        assert!(records.iter().all(|r| r.workload == "overload"), "named for its budget");
        assert!(get("insert_rows_per_s").is_some_and(|v| v > 0.0));
        assert!(get("stall_max_ms").is_some() && get("stalls_over_50ms").is_some());
        let peak = get("memtable_peak_bytes").expect("basalt reports its memtables");
        assert!(peak > 0.0 && peak <= f64::from(1 << 20), "memtables within the budget: {peak}");
        j.budget_bytes = None;
        assert_eq!(j.workload_name(), overload::UNBOUNDED);
    }

    #[test]
    fn a_wrong_byte_anywhere_in_a_value_fails_each_workload() {
        for (workload, ycsb) in
            [(Workload::Omendb, &[][..]), (Workload::Marbledb, &[]), (Workload::Ycsb, &['c'])]
        {
            let j = job(workload, 500, ycsb);
            assert!(run_broken(&j, None).is_ok(), "{workload:?}: the real engine passes");
            let err =
                run_broken(&j, Some(Fault::FlipsLastByte)).expect_err("a flipped byte fails").to_string();
            assert!(err.contains("wrong"), "{workload:?}: {err}");
        }
    }
}
