//! The workloads. A [`Job`] is one engine running one workload at one
//! scale; each job runs in its own child process (so memory is measured
//! per engine and one engine's heap or page-cache state cannot tax the
//! next), checks the adapter, then prints its measurements as JSON lines.

pub mod arrow;
pub mod marbledb;
pub mod omendb;
pub mod ycsb;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::datagen::Distribution;
use crate::engine::{self, Config, Engine, Kind, Result, Row};
use crate::measure::{self, Latencies, Machine};
use crate::result::{Env, Record};

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
}

impl Job {
    /// The engine configuration of this job.
    pub fn config(&self, int_keys: bool) -> Config {
        Config { cache_bytes: self.cache_bytes, write_buffer_budget_bytes: self.budget_bytes, int_keys }
    }

    /// The workload's name in result files.
    pub fn workload_name(&self) -> &'static str {
        match self.workload {
            Workload::Omendb => "omendb",
            Workload::Marbledb => "marbledb",
            Workload::Backpressure => "marbledb-backpressure",
            Workload::Ycsb => "ycsb",
            Workload::Arrow => "arrow",
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
            "cache {} MiB; no fsync per batch (settle syncs); seed {}; {} B values; {} ops per phase{}",
            self.cache_bytes >> 20,
            self.seed,
            self.value_bytes,
            self.ops,
            self.budget_bytes.map_or(String::new(), |b| format!("; write-buffer budget {} MiB", b >> 20))
        )
    }
}

/// Collects the measurements of one job.
#[derive(Debug)]
pub struct Sink {
    records: Vec<Record>,
    template: Record,
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
        };
        Sink { records: Vec::new(), template }
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
        r.workload = workload.to_string();
        r.distribution = distribution.to_string();
        r.threads = threads;
        r.metric = metric.to_string();
        r.value = value;
        r.unit = unit.to_string();
        self.records.push(r);
    }

    /// Records p50 and p99 of `lat` as `<prefix>_p50_us` and `<prefix>_p99_us`.
    pub fn put_latency(&mut self, prefix: &str, lat: &mut Latencies) {
        self.put(&format!("{prefix}_p50_us"), lat.percentile_us(50.0), "us");
        self.put(&format!("{prefix}_p99_us"), lat.percentile_us(99.0), "us");
    }

    /// Records the peak resident memory since the last reset.
    pub fn put_peak_memory(&mut self, metric: &str) {
        if let Some(b) = measure::proc_status_bytes("VmHWM") {
            self.put(metric, b as f64, "bytes");
        }
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
    let mut sink = Sink::new(job);
    measure::reset_peak_rss();
    let dir = base.join("db");
    match job.workload {
        Workload::Omendb => omendb::run(job, &dir, &mut sink)?,
        Workload::Marbledb => marbledb::run(job, &dir, &mut sink)?,
        Workload::Backpressure => marbledb::run_backpressure(job, &dir, &mut sink)?,
        Workload::Ycsb => ycsb::run(job, &dir, &mut sink)?,
        Workload::Arrow => arrow::run(job, &dir, &mut sink)?,
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
