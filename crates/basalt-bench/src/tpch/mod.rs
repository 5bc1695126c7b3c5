//! TPC-H (issue 16): the eight tables generated in-process (`tpchgen`, the
//! specification's generator rewritten in Rust) at a scale factor, loaded
//! into each engine, and the 22 queries timed on each: DataFusion over
//! Basalt tables, DataFusion over Parquet files of the same data, DuckDB on
//! its own tables (its Python package, in a child process), and SQLite for
//! the queries it finishes within its time limit. Every engine's answers
//! are compared with DuckDB's (or, without DuckDB, with Basalt's). Then
//! point, 100-row primary-key range and indexed equality queries through
//! SQL against SQLite's prepared statements; Basalt's three ways (issue
//! 38): new text through DataFusion's plan, new text through
//! `basalt_datafusion::query` (prepared on the spot, direct where it can),
//! and one prepared statement executed with parameters.
//!
//! Result lines: workload `tpch`, metric `query_ms` with `query` `q1`…
//! `q22` and `all` (the total over the queries every engine finished and
//! answered right); `load_s`; and `point_query_us`, `range100_query_us`,
//! `indexed_query_us` (Basalt also `…_text_us` and `…_prepared_us`).
//! `scale` is the number of `lineitem` rows and `distribution` the scale
//! factor (`sf0.1`).
//!
//! Bytes on disk (issue 61): metric `bytes` per engine — Basalt's
//! directory after the load, background work and close; DuckDB's database
//! file after `CHECKPOINT`; SQLite's file after `ANALYZE`; the Parquet
//! files DataFusion reads (uncompressed) — and `parquet-zstd`, the same
//! tables written by DuckDB as zstd Parquet. `--sizes-only` loads each
//! engine and reports its bytes without running the queries:
//!
//! ```sh
//! basalt-bench tpch --sizes-only --engines basalt,parquet,duckdb --python .venv/bin/python
//! ```

pub(crate) mod answers;
pub(crate) mod data;
mod duckdb;
mod engines;
pub mod queries;

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;

use crate::engine::Result;
use crate::measure::Machine;
use crate::report;
use crate::result::{Env, Record};
use answers::Answer;

/// `basalt-bench tpch`'s options.
#[derive(Debug, Args)]
pub struct TpchArgs {
    /// TPC-H scale factor (1 is 6 million lineitem rows; 0.1 the CI-sized run).
    #[arg(long, default_value_t = 0.1)]
    pub scale: f64,
    /// Engines: basalt, parquet, duckdb, sqlite.
    #[arg(long, value_delimiter = ',', default_value = "basalt,parquet,duckdb,sqlite")]
    pub engines: Vec<String>,
    /// Timed runs of every query (the median is reported); one untimed
    /// warm-up run comes first.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// A query of SQLite's still running after this many seconds is
    /// stopped and reported as not finished.
    #[arg(long, default_value_t = 60)]
    pub sqlite_limit_s: u64,
    /// Block/page cache of Basalt and SQLite, MiB.
    #[arg(long, default_value_t = 1024)]
    pub cache_mib: usize,
    /// The Python with the `duckdb` package.
    #[arg(long, default_value = "python3")]
    pub python: String,
    /// Where results go (a new subdirectory per invocation).
    #[arg(long, default_value = "bench-results")]
    pub out: PathBuf,
    /// Point, range and indexed queries timed per engine.
    #[arg(long, default_value_t = 2_000)]
    pub point_queries: usize,
    /// Load each engine and report its bytes on disk (metric `bytes`)
    /// without running the queries.
    #[arg(long)]
    pub sizes_only: bool,
    /// Basalt's tables settle zstd-compressed (`Options::settled_compression`,
    /// off by default).
    #[arg(long)]
    pub settled_zstd: bool,
    /// Keep the generated data (`data/parquet/TABLE.parquet` under the
    /// run's directory) for other tools: scripts/bench-cli.py loads it.
    #[arg(long)]
    pub keep_data: bool,
}

/// One engine's measurements.
struct Measured {
    engine: String,
    load_s: f64,
    /// Per query: the median time in ms and the answer, or why it has none.
    queries: Vec<std::result::Result<(f64, Answer), String>>,
    /// (metric, µs per query) for the point, range and indexed queries.
    lookups: Vec<(String, f64)>,
    options: String,
    /// Bytes on disk, by part (a tree, a file); empty when not measured.
    bytes: Vec<(String, u64)>,
}

impl Measured {
    /// Every part's bytes.
    fn total_bytes(&self) -> u64 {
        self.bytes.iter().map(|(_, b)| b).sum()
    }

    /// The queries, none of them run (`--sizes-only`).
    fn not_run() -> Vec<std::result::Result<(f64, Answer), String>> {
        vec![Err("not run (--sizes-only)".to_string()); 22]
    }
}

/// Runs the benchmark.
pub fn run(args: &TpchArgs) -> Result<()> {
    if !(args.scale > 0.0 && args.scale <= 100.0) {
        return Err(format!("--scale {} is not a scale factor in (0, 100]", args.scale).into());
    }
    let machine = Machine::detect();
    let dir = args.out.join(format!("{}-tpch", machine.date.replace([':', ' '], "-")));
    std::fs::create_dir_all(&dir)?;
    let started = Instant::now();
    let tables = data::generate(args.scale)?;
    let lineitem_rows = tables.iter().find(|t| t.name == "lineitem").map_or(0, data::Table::rows);
    eprintln!(
        "generated sf {} ({lineitem_rows} lineitem rows) in {:.1} s",
        args.scale,
        started.elapsed().as_secs_f64()
    );
    let parquet_dir = dir.join("data/parquet");
    let writing = Instant::now();
    data::write_parquet(&tables, &parquet_dir)?;
    let parquet_s = writing.elapsed().as_secs_f64();
    let mut measured = Vec::new();
    // Bytes of data no engine queries (zstd Parquet files).
    let mut sized = Vec::new();
    for engine in &args.engines {
        eprintln!("{engine}: loading");
        let m = match engine.as_str() {
            "basalt" => engines::basalt(args, &tables, &dir.join("data/basalt"))?,
            "parquet" => engines::parquet(args, &parquet_dir, parquet_s)?,
            "sqlite" => engines::sqlite(args, &tables, &dir.join("data/sqlite.db"))?,
            "duckdb" => {
                let (m, zstd) = duckdb::run(args, &tables, &parquet_dir, &dir.join("data/duckdb"))?;
                sized.push(zstd);
                m
            }
            other => {
                return Err(format!("unknown tpch engine {other} (basalt, parquet, duckdb, sqlite)").into());
            }
        };
        measured.push(m);
    }
    // The sizes of what ran no queries come after the engines'.
    let sized_records: Vec<Record> =
        records(args, &machine, lineitem_rows, &sized).into_iter().filter(|r| r.metric == "bytes").collect();
    let mut records = records(args, &machine, lineitem_rows, &measured);
    records.extend(sized_records);
    let mut table = if args.sizes_only { String::new() } else { summary(&measured) + "\n" };
    table.push_str(&sizes(measured.iter().chain(&sized)));
    report::write_run(&dir, &records, &format!("TPC-H sf {}", args.scale), &table)?;
    if args.keep_data {
        // The engines' databases are large and of no use to anyone else.
        for entry in std::fs::read_dir(dir.join("data"))? {
            let path = entry?.path();
            if path.file_name().is_some_and(|name| name != "parquet") {
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    } else {
        let _ = std::fs::remove_dir_all(dir.join("data"));
    }
    Ok(())
}

/// The reference answers: DuckDB's, or the first engine's without it.
fn reference(measured: &[Measured]) -> Option<&Measured> {
    measured.iter().find(|m| m.engine == "duckdb").or_else(|| measured.first())
}

/// Whether query `q` of `m` finished with the reference's answer.
fn answered(m: &Measured, reference: Option<&Measured>, q: usize) -> std::result::Result<f64, String> {
    let (ms, answer) = m.queries[q].as_ref().map_err(Clone::clone)?;
    match reference.map(|r| &r.queries[q]) {
        Some(Ok((_, want))) => answers::compare(answer, want).map(|()| *ms),
        Some(Err(_)) | None => Ok(*ms),
    }
}

fn records(args: &TpchArgs, machine: &Machine, lineitem_rows: u64, measured: &[Measured]) -> Vec<Record> {
    let reference = reference(measured);
    let record = |m: &Measured, metric: &str, value: f64, unit: &str, query: Option<String>| Record {
        workload: "tpch".to_string(),
        engine: m.engine.clone(),
        scale: lineitem_rows,
        distribution: format!("sf{}", args.scale),
        threads: 2,
        metric: metric.to_string(),
        value,
        unit: unit.to_string(),
        env: Env {
            machine: machine.clone(),
            engine_version: String::new(),
            engine_options: m.options.clone(),
            harness: format!(
                "tpch sf {} runs {} (median), cache {} MiB",
                args.scale, args.runs, args.cache_mib
            ),
            runs: args.runs,
        },
        query,
        result_rows: None,
        rows_read: None,
    };
    // The total covers the queries every engine finished with the right answer.
    let everyone: Vec<usize> =
        (0..22).filter(|&q| measured.iter().all(|m| answered(m, reference, q).is_ok())).collect();
    let mut out = Vec::new();
    for m in measured {
        if !m.bytes.is_empty() {
            out.push(record(m, "bytes", m.total_bytes() as f64, "bytes", None));
        }
        out.push(record(m, "load_s", m.load_s, "s", None));
        if args.sizes_only {
            continue;
        }
        for q in 0..22 {
            if let Ok(ms) = answered(m, reference, q) {
                let mut r = record(m, "query_ms", ms, "ms", Some(format!("q{}", q + 1)));
                r.result_rows = m.queries[q].as_ref().ok().map(|(_, a)| a.rows.len() as u64);
                out.push(r);
            }
        }
        let total: f64 = everyone.iter().filter_map(|&q| answered(m, reference, q).ok()).sum();
        let mut all = record(m, "query_ms", total, "ms", Some("all".to_string()));
        all.result_rows = Some(everyone.len() as u64);
        out.push(all);
        for (metric, us) in &m.lookups {
            out.push(record(m, metric, *us, "us", None));
        }
    }
    out
}

/// A Markdown table: one row per query, one column per engine, and each
/// engine's time over Basalt's.
fn summary(measured: &[Measured]) -> String {
    use std::fmt::Write;
    let reference = reference(measured);
    let basalt = measured.iter().find(|m| m.engine == "basalt");
    let mut out = String::from("| query |");
    for m in measured {
        let _ = write!(out, " {} ms |", m.engine);
    }
    out.push_str("\n| --- |");
    out.push_str(&" ---: |".repeat(measured.len()));
    out.push('\n');
    let everyone: Vec<usize> =
        (0..22).filter(|&q| measured.iter().all(|m| answered(m, reference, q).is_ok())).collect();
    let cell = |m: &Measured, ms: Option<f64>, base: Option<f64>| match (ms, base) {
        (Some(ms), Some(b)) if m.engine != "basalt" => {
            format!(" {} ({:.2}x) |", report::human(ms, "ms"), ms / b)
        }
        (Some(ms), _) => format!(" {} |", report::human(ms, "ms")),
        (None, _) => String::new(),
    };
    for q in 0..22 {
        let _ = write!(out, "| q{} |", q + 1);
        let base = basalt.and_then(|b| answered(b, reference, q).ok());
        for m in measured {
            match answered(m, reference, q) {
                Ok(ms) => out.push_str(&cell(m, Some(ms), base)),
                Err(why) => {
                    let _ =
                        write!(out, " — ({}) |", why.chars().take(60).collect::<String>().replace('|', "/"));
                }
            }
        }
        out.push('\n');
    }
    let _ = write!(out, "| all ({} queries) |", everyone.len());
    let total = |m: &Measured| everyone.iter().filter_map(|&q| answered(m, reference, q).ok()).sum::<f64>();
    let base = basalt.map(total);
    for m in measured {
        out.push_str(&cell(m, Some(total(m)), base));
    }
    out.push_str("\n| load |");
    for m in measured {
        let _ = write!(out, " {:.1} s |", m.load_s);
    }
    let metrics = ["point_query", "range100_query", "indexed_query", "lineitem_point_query", "count_query"]
        .into_iter()
        .flat_map(|m| ["_us", "_text_us", "_prepared_us"].map(|way| format!("{m}{way}")));
    for metric in metrics {
        let _ = write!(out, "\n| {metric} |");
        for m in measured {
            match m.lookups.iter().find(|(name, _)| *name == metric) {
                Some((_, us)) => {
                    let _ = write!(out, " {us:.1} µs |");
                }
                None => out.push_str(" — |"),
            }
        }
    }
    out.push('\n');
    out
}

/// Bytes on disk per engine, Basalt's over each, and each engine's parts.
fn sizes<'a>(measured: impl Iterator<Item = &'a Measured> + Clone) -> String {
    use std::fmt::Write;
    let basalt = measured.clone().find(|m| m.engine == "basalt").map(Measured::total_bytes);
    let mut out = String::from("| engine | bytes | Basalt ÷ engine | parts |\n| --- | ---: | ---: | --- |\n");
    for m in measured.filter(|m| !m.bytes.is_empty()) {
        let total = m.total_bytes();
        let ratio = basalt.map_or_else(|| "—".to_string(), |b| format!("{:.2}", b as f64 / total as f64));
        let parts: Vec<String> = m.bytes.iter().map(|(name, b)| format!("{name} {}", mib(*b))).collect();
        let _ = writeln!(
            out,
            "| {} | {total} ({}) | {ratio} | {} |",
            m.engine,
            report::human(total as f64, "bytes"),
            parts.join(", ")
        );
    }
    out
}

/// `bytes` in MiB, two decimals.
fn mib(bytes: u64) -> String {
    format!("{:.2} MiB", bytes as f64 / f64::from(1u32 << 20))
}

/// Bytes of every file under `path` (a file or a directory).
fn du(path: &Path) -> u64 {
    let Ok(meta) = std::fs::metadata(path) else { return 0 };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path).map_or(0, |entries| entries.flatten().map(|e| du(&e.path())).sum())
}

/// The median of `values` (they are sorted in place).
pub(crate) fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Times `f` `runs` times after one warm-up; the median in ms and the
/// warm-up's answer.
fn timed<T>(runs: usize, mut f: impl FnMut() -> Result<T>) -> Result<(f64, T)> {
    let answer = f()?;
    let mut ms = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        f()?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok((median(&mut ms), answer))
}

/// A directory for an engine's files, empty.
fn fresh(dir: &Path) -> Result<()> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    Ok(())
}
