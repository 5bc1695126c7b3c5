//! An analyst's queries (issue 65): issue 65's generated flights log
//! (`--rows`, 3M by default; [`data`]) in three engines on one machine —
//! DataFusion over Basalt (bulk-loaded, four secondary indexes, default
//! options), DataFusion over a Parquet file of the same rows, and DuckDB
//! on its own table (its Python package, a child process that stays up) —
//! each with 2 threads, warm. Every query runs once per engine to warm up
//! and to answer (each answer is compared with DuckDB's, or with the first
//! engine's), then `--runs` times, the engines' order rotated on every
//! run; the median is reported.
//!
//! Result lines: workload `analyst`, metric `query_ms` with `query` one of
//! [`QUERIES`]' names, and `geomean-6` (the geometric mean of the six
//! everyday queries' medians: its ratio between two engines is the
//! geometric mean of their per-query ratios, issue 65's goal); `load_s`.
//!
//! ```sh
//! basalt-bench analyst --rows 3000000 --runs 7 --python .venv/bin/python
//! ```

pub mod data;
mod duckdb;

use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow_array::RecordBatch;
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use basalt::{Db, IndexOptions, Options, TableOptions};
use clap::Args;
use datafusion::arrow::compute::cast;
use datafusion::execution::context::SessionContext;
use datafusion::prelude::ParquetReadOptions;

use crate::engine::Result;
use crate::measure::Machine;
use crate::report;
use crate::result::{Env, Record};
use crate::tpch::answers::{self, Answer};
use crate::tpch::data::Table;
use crate::tpch::median;

/// (name, SQL, one of the six everyday queries of the goal's geomean).
pub const QUERIES: &[(&str, &str, bool)] = &[
    ("filtered-count", "SELECT count(*) AS n FROM flights WHERE delay BETWEEN -30 AND -10", true),
    ("two-filters", "SELECT count(*) AS n FROM flights WHERE delay = 0 AND distance > 1000", true),
    ("sum", "SELECT sum(delay) AS d, sum(distance) AS m FROM flights", true),
    (
        "group-by",
        "SELECT origin, count(*) AS n, avg(delay) AS d, max(distance) AS m FROM flights GROUP BY origin ORDER BY origin",
        true,
    ),
    (
        "date-range",
        "SELECT count(*) AS n, avg(delay) AS d FROM flights \
         WHERE date >= TIMESTAMP '2024-03-01 00:00:00' AND date < TIMESTAMP '2024-03-08 00:00:00'",
        true,
    ),
    ("top-10", "SELECT id, delay FROM flights ORDER BY delay DESC, id LIMIT 10", true),
    ("key-desc-limit-5", "SELECT * FROM flights ORDER BY id DESC LIMIT 5", false),
    ("key-asc-limit-5", "SELECT * FROM flights ORDER BY id LIMIT 5", false),
    ("is-null", "SELECT count(*) AS n FROM flights WHERE delay IS NULL", false),
    ("min-max", "SELECT min(delay) AS lo, max(delay) AS hi, min(date) AS first FROM flights", false),
];

/// The name of the geometric mean's result line.
const GEOMEAN: &str = "geomean-6";

/// `basalt-bench analyst`'s options.
#[derive(Debug, Args)]
pub struct AnalystArgs {
    /// Rows of the generated table.
    #[arg(long, default_value_t = 3_000_000)]
    pub rows: usize,
    /// Engines: basalt, parquet, duckdb.
    #[arg(long, value_delimiter = ',', default_value = "basalt,parquet,duckdb")]
    pub engines: Vec<String>,
    /// Timed runs of every query per engine (the median is reported),
    /// after one untimed run that answers.
    #[arg(long, default_value_t = 7)]
    pub runs: usize,
    /// Basalt's block cache, MiB (0: its default for the machine).
    #[arg(long, default_value_t = 0)]
    pub cache_mib: usize,
    /// Basalt's `settled_block_bytes_target`, KiB (0: its default): the
    /// blocks of the bulk-loaded table.
    #[arg(long, default_value_t = 0)]
    pub settled_block_kib: usize,
    /// Threads of every engine.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// The Python with the `duckdb` package.
    #[arg(long, default_value = "python3")]
    pub python: String,
    /// Basalt's table without its four secondary indexes (what they cost
    /// a scan that does not use them).
    #[arg(long)]
    pub without_indexes: bool,
    /// Only the queries whose name contains this.
    #[arg(long, default_value = "")]
    pub only: String,
    /// Where results go (a new subdirectory per invocation).
    #[arg(long, default_value = "bench-results")]
    pub out: PathBuf,
}

/// An engine ready to answer.
enum Engine {
    /// DataFusion over Basalt's table or over the Parquet file.
    DataFusion {
        rt: tokio::runtime::Runtime,
        ctx: SessionContext,
        db: Option<Arc<Db>>,
    },
    DuckDb(duckdb::DuckDb),
}

impl Engine {
    /// Runs `sql` once: its time in ms, and its rows when `answer`.
    fn run(&mut self, sql: &str, answer: bool) -> Result<(f64, Option<Answer>)> {
        match self {
            Engine::DataFusion { rt, ctx, .. } => {
                let t = Instant::now();
                let batches = rt.block_on(async { ctx.sql(sql).await?.collect().await })?;
                let ms = t.elapsed().as_secs_f64() * 1e3;
                Ok((
                    ms,
                    if answer { Some(Answer::of_batches(&timestamps_as_micros(&batches)?)?) } else { None },
                ))
            }
            Engine::DuckDb(duck) => duck.run(sql, answer),
        }
    }
}

/// One engine's results.
struct Measured {
    engine: String,
    options: String,
    load_s: f64,
    /// Per query: the median ms, or why there is none.
    queries: Vec<std::result::Result<f64, String>>,
}

/// Runs the benchmark.
pub fn run(args: &AnalystArgs) -> Result<()> {
    if args.rows == 0 || args.runs == 0 || args.threads == 0 {
        return Err("--rows, --runs and --threads must be at least 1".into());
    }
    let machine = Machine::detect();
    let dir = args.out.join(format!("{}-analyst", machine.date.replace([':', ' '], "-")));
    std::fs::create_dir_all(&dir)?;
    let started = Instant::now();
    let table = data::flights(args.rows)?;
    eprintln!("generated {} rows in {:.1} s", args.rows, started.elapsed().as_secs_f64());
    let parquet_dir = dir.join("data/parquet");
    let writing = Instant::now();
    crate::tpch::data::write_parquet(std::slice::from_ref(&table), &parquet_dir)?;
    let parquet_s = writing.elapsed().as_secs_f64();
    let parquet = parquet_dir.join("flights.parquet");
    let mut engines: Vec<(Engine, Measured)> = Vec::new();
    for name in &args.engines {
        eprintln!("{name}: loading");
        let (engine, options, load_s) = load(args, name, &table, &dir, &parquet, parquet_s)?;
        let measured = Measured { engine: name.clone(), options, load_s, queries: Vec::new() };
        engines.push((engine, measured));
    }
    let reference = engines.iter().position(|(_, m)| m.engine == "duckdb").unwrap_or(0);
    let queries: Vec<&(&str, &str, bool)> =
        QUERIES.iter().filter(|(name, _, _)| name.contains(args.only.as_str())).collect();
    for (name, sql, _) in &queries {
        // One untimed run answers; each engine's answer against the reference.
        let mut answers = Vec::new();
        for (engine, _) in &mut engines {
            answers.push(engine.run(sql, true).map(|(_, a)| a.unwrap_or_default()));
        }
        let mut verdicts: Vec<std::result::Result<(), String>> = Vec::new();
        for answer in &answers {
            verdicts.push(match (answer, &answers[reference]) {
                (Ok(got), Ok(want)) => answers::compare(got, want).map_err(|e| format!("wrong answer: {e}")),
                (Err(e), _) => Err(e.to_string()),
                // Nothing to check against: not timed, not reported.
                (Ok(_), Err(e)) => Err(format!("unchecked, the reference failed: {e}")),
            });
        }
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); engines.len()];
        for run in 0..args.runs {
            for k in 0..engines.len() {
                let e = (k + run) % engines.len();
                if verdicts[e].is_ok() {
                    times[e].push(engines[e].0.run(sql, false)?.0);
                }
            }
        }
        let mut line = format!("{name:18}");
        for (e, (_, m)) in engines.iter_mut().enumerate() {
            let out = verdicts[e].clone().map(|()| median(&mut times[e]));
            let _ = match &out {
                Ok(ms) => write!(line, "  {} {ms:8.2} ms", m.engine),
                Err(why) => write!(line, "  {} —: {why}", m.engine),
            };
            m.queries.push(out);
        }
        eprintln!("{line}");
    }
    let measured: Vec<Measured> = engines
        .into_iter()
        .map(|(engine, m)| {
            if let Engine::DataFusion { db: Some(db), ctx, rt } = engine {
                drop(ctx);
                drop(rt);
                let _ = db.close();
            }
            m
        })
        .collect();
    let names: Vec<&str> = queries.iter().map(|(name, _, _)| *name).collect();
    let everyday: Vec<usize> = queries.iter().enumerate().filter(|(_, q)| q.2).map(|(i, _)| i).collect();
    let records = records(args, &machine, &measured, &names, &everyday);
    let table = summary(&measured, &names, &everyday);
    report::write_run(&dir, &records, &format!("An analyst's queries, {} rows", args.rows), &table)?;
    let _ = std::fs::remove_dir_all(dir.join("data"));
    Ok(())
}

/// Loads `table` into engine `name`: the engine, its options as written
/// in the results, its load time in seconds.
fn load(
    args: &AnalystArgs,
    name: &str,
    table: &Table,
    dir: &Path,
    parquet: &Path,
    parquet_s: f64,
) -> Result<(Engine, String, f64)> {
    let runtime =
        || tokio::runtime::Builder::new_multi_thread().worker_threads(args.threads).enable_all().build();
    Ok(match name {
        "basalt" => {
            let path = dir.join("data/basalt");
            let _ = std::fs::remove_dir_all(&path);
            let mut opts = Options::default();
            if args.cache_mib > 0 {
                opts = opts.block_cache_bytes(args.cache_mib << 20);
            }
            if args.settled_block_kib > 0 {
                opts.settled_block_bytes_target = args.settled_block_kib << 10;
            }
            let cache = opts.block_cache_bytes;
            let settled_block = opts.settled_block_bytes_target;
            let db = Arc::new(Db::open(&path, opts)?);
            let t = Instant::now();
            let flights =
                db.create_table(table.name, table.schema.clone(), table.key, TableOptions::default())?;
            flights.bulk_load(table.batches.iter().cloned())?;
            if !args.without_indexes {
                for (index, column) in table.indexes {
                    flights.create_index(index, &[column], IndexOptions::default())?;
                }
            }
            db.flush()?;
            db.wait_for_background_work()?;
            let load_s = t.elapsed().as_secs_f64();
            let config = datafusion::prelude::SessionConfig::new().with_target_partitions(args.threads);
            let ctx = basalt_datafusion::session_with_config(db.clone(), config);
            let options = format!(
                "DataFusion 55.2 over Basalt, block cache {} MiB, settled blocks {} KiB, {}",
                cache >> 20,
                settled_block >> 10,
                if args.without_indexes { "no indexes" } else { "four indexes" }
            );
            (Engine::DataFusion { rt: runtime()?, ctx, db: Some(db) }, options, load_s)
        }
        "parquet" => {
            let config = datafusion::prelude::SessionConfig::new().with_target_partitions(args.threads);
            let ctx = SessionContext::new_with_config(config);
            let rt = runtime()?;
            let path = parquet.to_str().ok_or("parquet path is not UTF-8")?.to_string();
            rt.block_on(ctx.register_parquet("flights", &path, ParquetReadOptions::default()))?;
            let options = "DataFusion 55.2 over a Parquet file (uncompressed, page statistics)".to_string();
            (Engine::DataFusion { rt, ctx, db: None }, options, parquet_s)
        }
        "duckdb" => {
            let duck = duckdb::DuckDb::start(&args.python, parquet, args.threads)?;
            let options = format!("DuckDB {} (Python), its own table", duck.version);
            let load_s = duck.load_s;
            (Engine::DuckDb(duck), options, load_s)
        }
        other => return Err(format!("unknown analyst engine {other} (basalt, parquet, duckdb)").into()),
    })
}

/// `batches` with their timestamps as µs since the epoch (integers), as
/// the DuckDB child gives them: Arrow's text of a timestamp and Python's
/// differ in their fractional digits.
fn timestamps_as_micros(batches: &[RecordBatch]) -> Result<Vec<RecordBatch>> {
    batches
        .iter()
        .map(|b| {
            let columns = b
                .columns()
                .iter()
                .map(|c| match c.data_type() {
                    DataType::Timestamp(TimeUnit::Microsecond, _) => cast(c, &DataType::Int64),
                    _ => Ok(c.clone()),
                })
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let fields: Vec<Field> = b
                .schema()
                .fields()
                .iter()
                .zip(&columns)
                .map(|(f, c)| Field::new(f.name(), c.data_type().clone(), true))
                .collect();
            Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?)
        })
        .collect()
}

/// The geometric mean of an engine's everyday queries, when it answered
/// them all.
fn geomean(m: &Measured, everyday: &[usize]) -> Option<f64> {
    let ms: Option<Vec<f64>> = everyday.iter().map(|&q| m.queries[q].as_ref().ok().copied()).collect();
    let ms = ms?;
    (ms.len() == 6).then(|| (ms.iter().map(|v| v.ln()).sum::<f64>() / ms.len() as f64).exp())
}

fn records(
    args: &AnalystArgs,
    machine: &Machine,
    measured: &[Measured],
    names: &[&str],
    everyday: &[usize],
) -> Vec<Record> {
    let record = |m: &Measured, metric: &str, value: f64, unit: &str, query: Option<String>| Record {
        workload: "analyst".to_string(),
        engine: m.engine.clone(),
        scale: args.rows as u64,
        distribution: "flights".to_string(),
        threads: args.threads,
        metric: metric.to_string(),
        value,
        unit: unit.to_string(),
        env: Env {
            machine: machine.clone(),
            engine_version: String::new(),
            engine_options: m.options.clone(),
            harness: format!("analyst runs {} (median, engines rotated), warm", args.runs),
            runs: args.runs,
        },
        query,
        result_rows: None,
        rows_read: None,
    };
    let mut out = Vec::new();
    for m in measured {
        out.push(record(m, "load_s", m.load_s, "s", None));
        for (q, name) in names.iter().enumerate() {
            if let Ok(ms) = m.queries[q] {
                out.push(record(m, "query_ms", ms, "ms", Some((*name).to_string())));
            }
        }
        if let Some(g) = geomean(m, everyday) {
            out.push(record(m, "query_ms", g, "ms", Some(GEOMEAN.to_string())));
        }
    }
    out
}

/// A Markdown table: one row per query, one column per engine, Basalt's
/// time over each peer's.
fn summary(measured: &[Measured], names: &[&str], everyday: &[usize]) -> String {
    let basalt = measured.iter().position(|m| m.engine == "basalt");
    let mut out = String::from("| query |");
    for m in measured {
        let _ = write!(out, " {} ms |", m.engine);
    }
    for m in measured.iter().filter(|m| m.engine != "basalt") {
        let _ = write!(out, " Basalt ÷ {} |", m.engine);
    }
    out.push_str("\n| --- |");
    out.push_str(&" ---: |".repeat(measured.len() * 2 - usize::from(basalt.is_some())));
    out.push('\n');
    let mut rows: Vec<(String, Vec<Option<f64>>)> = names
        .iter()
        .enumerate()
        .map(|(q, name)| {
            ((*name).to_string(), measured.iter().map(|m| m.queries[q].as_ref().ok().copied()).collect())
        })
        .collect();
    rows.push((
        format!("{GEOMEAN} (issue 65's goal ≤ 1.5× DuckDB)"),
        measured.iter().map(|m| geomean(m, everyday)).collect(),
    ));
    for (name, values) in rows {
        let _ = write!(out, "| {name} |");
        for v in &values {
            match v {
                Some(ms) => {
                    let _ = write!(out, " {} |", report::human(*ms, "ms"));
                }
                None => out.push_str(" — |"),
            }
        }
        for (e, m) in measured.iter().enumerate() {
            if m.engine == "basalt" {
                continue;
            }
            match (basalt.and_then(|b| values[b]), values[e]) {
                (Some(b), Some(p)) => {
                    let _ = write!(out, " {:.2}× |", b / p);
                }
                _ => out.push_str(" — |"),
            }
        }
        out.push('\n');
    }
    out.push_str("\n| engine | load | options |\n| --- | ---: | --- |\n");
    for m in measured {
        let _ = writeln!(out, "| {} | {:.1} s | {} |", m.engine, m.load_s, m.options);
    }
    out
}
