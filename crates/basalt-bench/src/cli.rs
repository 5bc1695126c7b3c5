//! The command line: one subcommand per workload. The parent process plans
//! the jobs, runs each in a child process of this same binary, shows
//! progress, and writes the results (JSON lines, Markdown, SVG charts)
//! under `bench-results/`.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use crate::datagen::{self, Distribution};
use crate::engine::{Kind, Result};
use crate::measure::Machine;
use crate::memory::{self, MemoryLimit};
use crate::report;
use crate::result::{self, Record};
use crate::workload::{self, Job, Workload, ycsb};

/// Seed 002's write-buffer budget for the back-pressure run.
pub const BACKPRESSURE_BUDGET_BYTES: usize = 32 << 20;

#[derive(Debug, Parser)]
#[command(
    name = "basalt-bench",
    about = "Basalt side by side with SQLite, LMDB, redb, fjall, RocksDB and LevelDB"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Seeds 001/004: bulk insert (sequential and random 8-byte keys, or
    /// a lognormal key set), then random point lookups of present and
    /// missing keys.
    Omendb(Common),
    /// Seed 002: 512-byte records: write, lookups, scan, unindexed equality
    /// search, range queries, memory; and the 32 MiB back-pressure run.
    Marbledb(Common),
    /// YCSB workloads A–F: load, then each run phase with 1 and 2 threads.
    Ycsb(YcsbArgs),
    /// Seed 003: Arrow batch writes and columnar scans (Basalt tables)
    /// against the row-by-row path of every engine.
    Arrow(Common),
    /// Seed 000: records with string and integer fields and their
    /// secondary indexes: insert rate with 0, 1 and 3 indexes, primary-key
    /// gets, equality, range, covering and count queries (Basalt and
    /// SQLite; Basalt also by filtered scans).
    Resilientdb(Common),
    /// Issue 43: read-modify-write transactions (one account, and a
    /// transfer between two) at low and high contention, 1 and 2 threads,
    /// with each engine's own transactions (Basalt, SQLite, LMDB, redb,
    /// fjall).
    Transactions(Common),
    /// Issue 59: what a history window costs and what reading history
    /// costs: a YCSB-A-like run with history off and on (update
    /// throughput, space, get latency), gets as of past points, a key's
    /// history of 100 versions, the change feed (Basalt, and SQLite with
    /// a trigger-kept history table).
    History(Common),
    /// Issue 60: `delete_range` of the middle tenth of a table (`--scale`
    /// rows), against SQLite's `DELETE … WHERE` and Basalt's row-by-row
    /// delete (`basalt-rows`): time to acknowledge, reads of the range
    /// right after, space before, after and once compacted.
    RangeDelete(Common),
    /// Issue 60: 16 hot counters incremented by 1 and 2 threads, by
    /// merge (`add_i64`) and by read-modify-write transactions
    /// (`basalt-txn`): increments per second, aborts per commit.
    Counters(Common),
    /// Issue 60: a session store (new sessions, touches, reads of recent
    /// sessions at a steady rate) with a TTL against the same without:
    /// space over the run, get latency, expired files dropped; every read
    /// and expiry checked.
    Sessions(SessionsArgs),
    /// Issue 16: TPC-H's 22 queries through DataFusion over Basalt, over
    /// Parquet, DuckDB and SQLite (`--scale` is the scale factor); then
    /// SQL point, range and indexed queries against SQLite's.
    Tpch(crate::tpch::TpchArgs),
    /// Issue 65: an analyst's queries (filtered counts, sums, GROUP BY, a
    /// date range, top-k, key order with LIMIT) on a generated 3M-row
    /// flights log: DataFusion over Basalt, over Parquet, and DuckDB,
    /// the engines' order rotated on every run.
    Analyst(crate::analyst::AnalystArgs),
    /// Issue 60: a sustained overload. Random 512-byte writes into a key
    /// space of `--scale` keys (4M by default) for `--seconds`, faster
    /// than compaction sustains, with the engine's defaults and with a
    /// write-buffer budget: throughput kept, longest stall, peak memory.
    Overload(OverloadArgs),
    /// A small mix of the above that finishes in minutes: the main job.
    Quick(Common),
    /// Runs one job in this process (used by the parent).
    #[command(hide = true)]
    Child {
        /// The job, as JSON.
        job: String,
    },
}

#[derive(Debug, Args)]
struct Common {
    /// Rows to load, one or more (comma-separated).
    #[arg(long, value_delimiter = ',')]
    scale: Vec<u64>,
    /// Engines to run (default: every engine built in).
    #[arg(long, value_delimiter = ',')]
    engines: Vec<String>,
    /// Key orders (omendb: sequential, random, lognormal) or request
    /// distributions: sequential, random, lognormal, zipfian, latest.
    #[arg(long, alias = "distributions", value_delimiter = ',')]
    distribution: Vec<String>,
    /// Operations per timed phase (default: the workload's).
    #[arg(long)]
    ops: Option<u64>,
    /// Value size in bytes (default: the workload's).
    #[arg(long)]
    value_bytes: Option<usize>,
    /// Block/page cache of every engine, MiB.
    #[arg(long, default_value_t = 64)]
    cache_mib: usize,
    /// Repeat every job this many times and report medians; each run
    /// rotates the order of the engines.
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Equal-memory mode: run each job's read phases a second time with
    /// the engine reopened in a memory cgroup of this many MiB (heap, page
    /// cache and mapped pages), recorded as `<workload>@<N>MiB`. Needs a
    /// memory cgroup this process may create (root, cgroup v1 or v2).
    #[arg(long)]
    memory_mib: Option<u64>,
    /// Seed of every generator.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Where results go (a new subdirectory per invocation).
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
    /// Where databases are created (default: <out>/data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct YcsbArgs {
    #[command(flatten)]
    common: Common,
    /// Workloads to run.
    #[arg(long, value_delimiter = ',', default_value = "a,b,c,d,e,f")]
    workloads: Vec<char>,
    /// Client thread counts.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    threads: Vec<usize>,
}

#[derive(Debug, Args)]
struct OverloadArgs {
    #[command(flatten)]
    common: Common,
    /// How long each run writes, in seconds.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// The write-buffer budget of the bounded run, MiB.
    #[arg(long, default_value_t = BACKPRESSURE_BUDGET_BYTES >> 20)]
    budget_mib: usize,
}

#[derive(Debug, Args)]
struct SessionsArgs {
    #[command(flatten)]
    common: Common,
    /// Length of the run, seconds.
    #[arg(long, default_value_t = workload::sessions::SECONDS_DEFAULT)]
    seconds: u64,
    /// The TTL store's time to live, seconds.
    #[arg(long, default_value_t = workload::sessions::TTL_SECS_DEFAULT)]
    ttl_secs: u64,
    /// New sessions per second (each with one touch and four reads).
    #[arg(long, default_value_t = workload::sessions::NEW_PER_S_DEFAULT)]
    rate: u64,
}

/// Entry point of the binary.
pub fn main() -> std::process::ExitCode {
    match run(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("basalt-bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    let (name, common, jobs) = match cli.cmd {
        Cmd::Child { job } => return child(&job),
        Cmd::Tpch(args) => return crate::tpch::run(&args),
        Cmd::Analyst(args) => return crate::analyst::run(&args),
        Cmd::Omendb(c) => {
            let jobs = plan_omendb(&c, &c.scale_or(&[1_000_000]), None)?;
            ("omendb", c, jobs)
        }
        Cmd::Marbledb(c) => {
            let jobs = plan_marbledb(&c, &c.scale_or(&[100_000]))?;
            ("marbledb", c, jobs)
        }
        Cmd::Arrow(c) => {
            let jobs = plan_arrow(&c, &c.scale_or(&[100_000]))?;
            ("arrow", c, jobs)
        }
        Cmd::Transactions(c) => {
            let jobs = plan_transactions(&c, &c.scale_or(&[100_000]))?;
            ("transactions", c, jobs)
        }
        Cmd::History(c) => {
            let jobs = plan_history(&c, &c.scale_or(&[1_000_000]))?;
            ("history", c, jobs)
        }
        Cmd::RangeDelete(c) => {
            let jobs = plan_range_delete(&c, &c.scale_or(&[10_000_000]))?;
            ("range-delete", c, jobs)
        }
        Cmd::Counters(c) => {
            let mut job =
                c.job(Workload::Counters, Kind::Basalt, workload::counters::HOT_KEYS, Distribution::Random);
            job.ops = c.ops.unwrap_or(workload::counters::OPS_DEFAULT);
            job.threads = vec![1, 2];
            ("counters", c, vec![job])
        }
        Cmd::Sessions(a) => {
            if a.seconds == 0 || a.ttl_secs == 0 || a.rate == 0 {
                return Err("sessions: --seconds, --ttl-secs and --rate must be above 0".into());
            }
            let mut job = a.common.job(Workload::Sessions, Kind::Basalt, a.seconds, Distribution::Random);
            job.sessions = Some(workload::sessions::Params {
                run_ms: a.seconds * 1000,
                ttl_ms: a.ttl_secs * 1000,
                new_per_s: a.rate,
            });
            ("sessions", a.common, vec![job])
        }
        Cmd::Resilientdb(c) => {
            let jobs = plan_resilientdb(&c, &c.scale_or(&[1_000, 10_000, 100_000, 1_000_000]))?;
            ("resilientdb", c, jobs)
        }
        Cmd::Ycsb(y) => {
            let jobs = plan_ycsb(&y.common, &y.common.scale_or(&[100_000]), &y.workloads, &y.threads, None)?;
            ("ycsb", y.common, jobs)
        }
        Cmd::Overload(o) => {
            let jobs = plan_overload(&o, &o.common.scale_or(&[OVERLOAD_KEYS]))?;
            ("overload", o.common, jobs)
        }
        Cmd::Quick(c) => {
            let base = c.scale_or(&[100_000])[0];
            let mut jobs = plan_omendb(&c, &[base], Some(base))?;
            jobs.extend(plan_marbledb(&c, &[base / 5])?);
            jobs.extend(plan_ycsb(&c, &[base / 2], &['a', 'c', 'e'], &[1], Some(base / 2))?);
            jobs.extend(plan_arrow(&c, &[base])?);
            ("quick", c, jobs)
        }
    };
    execute(name, &common, &jobs)
}

impl Common {
    fn scale_or(&self, default: &[u64]) -> Vec<u64> {
        if self.scale.is_empty() { default.to_vec() } else { self.scale.clone() }
    }

    fn engines(&self) -> Result<Vec<Kind>> {
        if self.engines.is_empty() {
            return Ok(Kind::defaults());
        }
        self.engines
            .iter()
            .map(|name| {
                let kind = Kind::parse(name).ok_or_else(|| format!("unknown engine {name}"))?;
                if kind.is_built() {
                    Ok(kind)
                } else {
                    Err(format!("engine {name} is not built in: add `--features {name}` to cargo run").into())
                }
            })
            .collect()
    }

    fn distributions(&self, default: &[Distribution]) -> Result<Vec<Distribution>> {
        if self.distribution.is_empty() {
            return Ok(default.to_vec());
        }
        self.distribution
            .iter()
            .map(|d| Distribution::parse(d).ok_or_else(|| format!("unknown distribution {d}").into()))
            .collect()
    }

    fn job(&self, workload: Workload, engine: Kind, scale: u64, distribution: Distribution) -> Job {
        Job {
            workload,
            engine,
            scale,
            distribution,
            threads: vec![1],
            ycsb: Vec::new(),
            ops: 0,
            value_bytes: 0,
            cache_bytes: self.cache_mib << 20,
            budget_bytes: None,
            seed: self.seed,
            data_dir: self.data_dir.clone().unwrap_or_else(|| self.out.join("data")),
            machine: Machine::default(),
            memory: None,
            run: 0,
            seconds: 0,
            sessions: None,
        }
    }
}

fn plan_omendb(c: &Common, scales: &[u64], ops: Option<u64>) -> Result<Vec<Job>> {
    let mut jobs = Vec::new();
    for &scale in scales {
        for dist in c.distributions(&[Distribution::Sequential, Distribution::Random])? {
            if !datagen::KEY_ORDERS.contains(&dist) {
                return Err(format!(
                    "omendb: key order {} is not one of {}",
                    dist.name(),
                    datagen::KEY_ORDERS.map(Distribution::name).join(", ")
                )
                .into());
            }
            for engine in c.engines()? {
                let mut job = c.job(Workload::Omendb, engine, scale, dist);
                job.ops = c.ops.or(ops).unwrap_or_else(|| scale.clamp(100_000, 1_000_000));
                job.value_bytes = c.value_bytes.unwrap_or(16);
                jobs.push(job);
            }
        }
    }
    Ok(jobs)
}

fn plan_marbledb(c: &Common, scales: &[u64]) -> Result<Vec<Job>> {
    let mut jobs = Vec::new();
    for &scale in scales {
        for dist in c.distributions(&[Distribution::Random])? {
            for engine in c.engines()? {
                let mut job = c.job(Workload::Marbledb, engine, scale, dist);
                job.ops = c.ops.unwrap_or(100_000);
                job.value_bytes = c.value_bytes.unwrap_or(512);
                let mut bp = job.clone();
                bp.workload = Workload::Backpressure;
                bp.distribution = Distribution::Sequential;
                bp.budget_bytes = Some(BACKPRESSURE_BUDGET_BYTES);
                jobs.push(job);
                jobs.push(bp);
            }
        }
    }
    Ok(jobs)
}

/// The overload run's default key space: 4M keys of 512-byte records
/// (2 GiB when all are written), so compaction merges real overlap.
const OVERLOAD_KEYS: u64 = 4_000_000;

fn plan_overload(o: &OverloadArgs, scales: &[u64]) -> Result<Vec<Job>> {
    let c = &o.common;
    let engines = if c.engines.is_empty() { vec![Kind::Basalt] } else { c.engines()? };
    let mut jobs = Vec::new();
    for &scale in scales {
        for &engine in &engines {
            let mut job = c.job(Workload::Overload, engine, scale, Distribution::Random);
            job.value_bytes = c.value_bytes.unwrap_or(512);
            job.seconds = o.seconds;
            let mut bounded = job.clone();
            bounded.budget_bytes = Some(o.budget_mib << 20);
            jobs.push(job);
            jobs.push(bounded);
        }
    }
    Ok(jobs)
}

fn plan_transactions(c: &Common, scales: &[u64]) -> Result<Vec<Job>> {
    let engines = if c.engines.is_empty() {
        vec![Kind::Basalt, Kind::Sqlite, Kind::Lmdb, Kind::Redb, Kind::Fjall]
    } else {
        c.engines()?
    };
    let mut jobs = Vec::new();
    for &scale in scales {
        for &engine in &engines {
            let mut job = c.job(Workload::Transactions, engine, scale, Distribution::Random);
            job.ops = c.ops.unwrap_or(100_000);
            job.value_bytes = c.value_bytes.unwrap_or(100);
            job.threads = vec![1, 2];
            jobs.push(job);
        }
    }
    Ok(jobs)
}

fn plan_ycsb(
    c: &Common,
    scales: &[u64],
    workloads: &[char],
    threads: &[usize],
    ops: Option<u64>,
) -> Result<Vec<Job>> {
    let workloads: Vec<char> = workloads.iter().map(char::to_ascii_lowercase).collect();
    if let Some(w) = workloads.iter().find(|w| !ycsb::ORDER.contains(w)) {
        return Err(format!("unknown YCSB workload {w}").into());
    }
    let mut jobs = Vec::new();
    for &scale in scales {
        for dist in c.distributions(&[Distribution::Zipfian])? {
            for engine in c.engines()? {
                let mut job = c.job(Workload::Ycsb, engine, scale, dist);
                job.ops = c.ops.or(ops).unwrap_or(scale.max(100_000));
                job.value_bytes = c.value_bytes.unwrap_or(1000);
                job.threads = threads.to_vec();
                job.ycsb.clone_from(&workloads);
                jobs.push(job);
            }
        }
    }
    Ok(jobs)
}

fn plan_resilientdb(c: &Common, scales: &[u64]) -> Result<Vec<Job>> {
    let mut jobs = Vec::new();
    for &scale in scales {
        for engine in c.engines()?.into_iter().filter(|k| crate::indexed::supports(*k)) {
            let mut job = c.job(Workload::Resilientdb, engine, scale, Distribution::Random);
            job.ops = c.ops.unwrap_or(100_000);
            job.value_bytes = crate::indexed::PAYLOAD_BYTES;
            jobs.push(job);
        }
    }
    if jobs.is_empty() {
        return Err("the resilientdb workload runs on basalt and sqlite; none was asked for".into());
    }
    Ok(jobs)
}

fn plan_history(c: &Common, scales: &[u64]) -> Result<Vec<Job>> {
    let engines = if c.engines.is_empty() { vec![Kind::Basalt, Kind::Sqlite] } else { c.engines()? };
    let mut jobs = Vec::new();
    for &scale in scales {
        for &engine in engines.iter().filter(|k| workload::history::supports(**k)) {
            let mut job = c.job(Workload::History, engine, scale, Distribution::Zipfian);
            job.ops = c.ops.unwrap_or_else(|| scale.clamp(100_000, 1_000_000));
            job.value_bytes = workload::history::FIELDS * workload::history::FIELD_BYTES;
            jobs.push(job);
        }
    }
    if jobs.is_empty() {
        return Err("the history workload runs on basalt and sqlite; none was asked for".into());
    }
    Ok(jobs)
}

fn plan_range_delete(c: &Common, scales: &[u64]) -> Result<Vec<Job>> {
    let engines = if c.engines.is_empty() { vec![Kind::Basalt, Kind::Sqlite] } else { c.engines()? };
    let mut jobs = Vec::new();
    for &scale in scales {
        for &engine in engines.iter().filter(|k| workload::range_delete::supports(**k)) {
            let mut job = c.job(Workload::RangeDelete, engine, scale, Distribution::Sequential);
            job.ops = c.ops.unwrap_or(workload::range_delete::GETS_DEFAULT);
            job.value_bytes = workload::range_delete::PAYLOAD_BYTES;
            jobs.push(job);
        }
    }
    if jobs.is_empty() {
        return Err("the range-delete workload runs on basalt and sqlite; none was asked for".into());
    }
    Ok(jobs)
}

fn plan_arrow(c: &Common, scales: &[u64]) -> Result<Vec<Job>> {
    let mut jobs = Vec::new();
    for &scale in scales {
        for engine in c.engines()? {
            jobs.push(c.job(Workload::Arrow, engine, scale, Distribution::Sequential));
        }
    }
    Ok(jobs)
}

fn child(job_json: &str) -> Result<()> {
    let job: Job = serde_json::from_str(job_json)?;
    let records = workload::run(&job)?;
    let mut out = String::new();
    for r in &records {
        out.push_str(&serde_json::to_string(r)?);
        out.push('\n');
    }
    print!("{out}");
    Ok(())
}

fn execute(name: &str, common: &Common, jobs: &[Job]) -> Result<()> {
    let machine = Machine::detect();
    let stamp: String = machine.date.chars().filter(char::is_ascii_alphanumeric).collect();
    let dir = common.out.join(format!("{name}-{stamp}"));
    std::fs::create_dir_all(&dir)?;
    let command = std::iter::once("basalt-bench".to_string())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ");
    let total = jobs.len() * common.runs.max(1);
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:32}] {pos}/{len} {msg}")
            .map_err(|e| e.to_string())?
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    let exe = std::env::current_exe()?;
    let mut raw: Vec<Record> = Vec::new();
    let mut failures = Vec::new();
    if let Some(mib) = common.memory_mib {
        // Fail before any job runs if this machine cannot limit memory.
        let probe = memory::create(&format!("basalt-bench-{}-probe", std::process::id()), mib << 20)?;
        memory::remove(&probe);
    }
    for run in 0..common.runs.max(1) {
        for (i, job) in rotated(jobs, run).into_iter().enumerate() {
            let mut job = job.clone();
            job.machine = machine.clone();
            job.run = run;
            bar.set_message(format!("run {}: {}", run + 1, job.label()));
            let outcome = match common.memory_mib {
                Some(mib) => {
                    let name = format!("basalt-bench-{}-{run}-{i}", std::process::id());
                    memory::create(&name, mib << 20).and_then(|cgroup| {
                        job.memory = Some(MemoryLimit { bytes: mib << 20, cgroup: cgroup.clone() });
                        let out = run_child(&exe, &job);
                        memory::remove(&cgroup);
                        out
                    })
                }
                None => run_child(&exe, &job),
            };
            match outcome {
                Ok(records) => raw.extend(records),
                Err(e) => {
                    let msg = format!("{}: {e}", job.label());
                    bar.suspend(|| eprintln!("FAILED {msg}"));
                    failures.push(msg);
                }
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    result::write_jsonl(&dir.join("runs.jsonl"), &raw)?;
    let mut records = result::medians(&raw);
    add_kept_ratio(&mut records);
    add_columnar_speedups(&mut records);
    result::add_speedups(&mut records);
    result::write_jsonl(&dir.join("results.jsonl"), &records)?;
    let charts = report::charts(&records, &dir)?;
    std::fs::write(
        dir.join("report.md"),
        report::markdown(&records, &report::ranges(&raw), &command, &charts, &failures),
    )?;
    println!("{}", report::terminal_table(&records));
    println!(
        "\nresults: {}/results.jsonl, report: {}/report.md, {} charts",
        dir.display(),
        dir.display(),
        charts.len()
    );
    if failures.is_empty() { Ok(()) } else { Err(format!("{} job(s) failed", failures.len()).into()) }
}

/// The jobs of run `run` (from 0): within each consecutive group of jobs
/// of one (scale, distribution), the engines' order rotated left by
/// `run`, so no engine is always first (a transient as a phase begins, a
/// machine warming up) and each engine's neighbours change between runs.
/// A job keeps its place relative to the other jobs of its engine.
fn rotated(jobs: &[Job], run: usize) -> Vec<&Job> {
    let mut out = Vec::with_capacity(jobs.len());
    let mut start = 0;
    while start < jobs.len() {
        // A back-pressure job (key order `sequential`) belongs with the
        // marbledb job before it.
        let same = |j: &Job| {
            j.scale == jobs[start].scale
                && (j.distribution == jobs[start].distribution || j.workload == Workload::Backpressure)
        };
        let end = start + jobs[start..].iter().take_while(|j| same(j)).count();
        let group = &jobs[start..end];
        let mut engines: Vec<Kind> = Vec::new();
        for j in group {
            if !engines.contains(&j.engine) {
                engines.push(j.engine);
            }
        }
        let shift = run % engines.len().max(1);
        engines.rotate_left(shift);
        for engine in engines {
            out.extend(group.iter().filter(|j| j.engine == engine));
        }
        start = end;
    }
    out
}

fn run_child(exe: &std::path::Path, job: &Job) -> Result<Vec<Record>> {
    let out = Command::new(exe).arg("child").arg(serde_json::to_string(job)?).output()?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&out.status) {
            let hint = if job.memory.is_some() { " (over the memory limit?)" } else { "" };
            return Err(format!("killed by signal {signal}{hint}").into());
        }
        return Err(err.trim().lines().last().unwrap_or("child failed").to_string().into());
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(Into::into))
        .collect()
}

/// For the arrow workload: `columnar_speedup_<metric>`, Basalt's columnar
/// path over each engine's row path (Basalt's own included).
fn add_columnar_speedups(records: &mut Vec<Record>) {
    let mut extra = Vec::new();
    for row in records.iter().filter(|r| r.workload == "arrow" && r.distribution == "row") {
        let columnar = records.iter().find(|r| {
            r.workload == "arrow"
                && r.distribution == "columnar"
                && r.engine == "basalt"
                && r.scale == row.scale
                && r.metric == row.metric
        });
        if let Some(c) = columnar {
            let mut r = row.clone();
            r.metric = format!("columnar_speedup_{}", row.metric);
            r.value = c.value / row.value;
            r.unit = "x".to_string();
            extra.push(r);
        }
    }
    records.extend(extra);
}

/// `throughput_kept_ratio`: insert throughput under the back-pressure
/// budget over the same engine's throughput without it (the back-pressure
/// run against marbledb's write phase; the overload run against its
/// unbounded twin).
fn add_kept_ratio(records: &mut Vec<Record>) {
    const PAIRS: [(&str, &str); 2] =
        [("marbledb-backpressure", "marbledb"), ("overload", workload::overload::UNBOUNDED)];
    let mut extra = Vec::new();
    for bp in records.iter().filter(|r| r.metric == "insert_rows_per_s") {
        let Some((_, unbounded)) = PAIRS.iter().find(|(bounded, _)| bp.workload == *bounded) else {
            continue;
        };
        let free = records.iter().find(|r| {
            r.workload == *unbounded
                && r.engine == bp.engine
                && r.scale == bp.scale
                && r.metric == "insert_rows_per_s"
        });
        if let Some(free) = free {
            let mut r = bp.clone();
            r.metric = "throughput_kept_ratio".to_string();
            r.value = bp.value / free.value;
            r.unit = "ratio".to_string();
            extra.push(r);
        }
    }
    records.extend(extra);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(engine: Kind, scale: u64, distribution: Distribution) -> Job {
        let c = Cli::parse_from(["basalt-bench", "omendb"]);
        let Cmd::Omendb(common) = c.cmd else { unreachable!("parsed omendb") };
        common.job(Workload::Omendb, engine, scale, distribution)
    }

    #[test]
    fn each_run_rotates_the_engines_within_a_group() {
        let engines = [Kind::Basalt, Kind::Sqlite, Kind::Lmdb];
        let mut jobs = Vec::new();
        for dist in [Distribution::Sequential, Distribution::Random] {
            for e in engines {
                jobs.push(job(e, 10, dist));
            }
        }
        let order = |run| rotated(&jobs, run).iter().map(|j| (j.engine, j.distribution)).collect::<Vec<_>>();
        let first: Vec<Kind> = (0..3).map(|run| order(run)[0].0).collect();
        assert_eq!(first, engines, "every engine goes first once in three runs");
        for run in 0..4 {
            let o = order(run);
            assert_eq!(o.len(), jobs.len());
            assert!(o[..3].iter().all(|j| j.1 == Distribution::Sequential), "groups stay in place");
            let mut kinds: Vec<&str> = o[3..].iter().map(|j| j.0.name()).collect();
            kinds.sort_unstable();
            assert_eq!(kinds, ["basalt", "lmdb", "sqlite"]);
        }
        // Marbledb's pairs (main job, back-pressure job) stay together.
        let mut pairs = Vec::new();
        for e in engines {
            pairs.push(job(e, 10, Distribution::Random));
            let mut bp = job(e, 10, Distribution::Sequential);
            bp.workload = Workload::Backpressure;
            pairs.push(bp);
        }
        let o = rotated(&pairs, 1);
        assert_eq!((o[0].engine, o[0].workload), (Kind::Sqlite, Workload::Omendb));
        assert_eq!((o[1].engine, o[1].workload), (Kind::Sqlite, Workload::Backpressure));
    }

    #[test]
    fn the_overload_plan_pairs_each_engine_with_and_without_a_budget_and_keeps_the_ratio() {
        let c = Cli::parse_from(["basalt-bench", "overload", "--seconds", "5", "--budget-mib", "16"]);
        let Cmd::Overload(o) = c.cmd else { unreachable!("parsed overload") };
        let jobs = plan_overload(&o, &[1000]).expect("a plan");
        let budgets: Vec<Option<usize>> = jobs.iter().map(|j| j.budget_bytes).collect();
        assert_eq!(budgets, vec![None, Some(16 << 20)]);
        assert!(jobs.iter().all(|j| j.seconds == 5 && j.workload == Workload::Overload));
        let record = |job: &Job, value: f64| Record {
            workload: job.workload_name().to_string(),
            engine: "basalt".to_string(),
            scale: job.scale,
            distribution: "random".to_string(),
            threads: 1,
            metric: "insert_rows_per_s".to_string(),
            value,
            unit: "rows/s".to_string(),
            env: result::Env { runs: 1, ..result::Env::default() },
            query: None,
            result_rows: None,
            rows_read: None,
        };
        let mut records = vec![record(&jobs[0], 200.0), record(&jobs[1], 170.0)];
        add_kept_ratio(&mut records);
        let kept = records.iter().find(|r| r.metric == "throughput_kept_ratio").expect("a ratio");
        assert_eq!(kept.workload, "overload");
        assert!((kept.value - 0.85).abs() < 1e-9);
    }
}
