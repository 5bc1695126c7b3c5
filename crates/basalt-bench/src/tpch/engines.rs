//! DataFusion over Basalt, DataFusion over Parquet, and SQLite: loading
//! and timing the queries.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use basalt::{Db, IndexOptions, Options, TableOptions};
use datafusion::common::ScalarValue;
use datafusion::execution::context::SessionContext;
use datafusion::prelude::ParquetReadOptions;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tpchgen::generators::OrderGenerator;

use super::answers::{Answer, Cell};
use super::data::{self, Table};
use super::{Measured, TpchArgs, du, fresh, queries, timed};
use crate::engine::Result;

/// Basalt's SST block size for TPC-H's wide rows.
const BLOCK_BYTES: usize = 64 << 10;

/// A warm-up slower than this is the query's only timed run.
const SLOW_QUERY: Duration = Duration::from_secs(5);

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?)
}

/// Times every query through a DataFusion session.
fn datafusion_queries(
    args: &TpchArgs,
    rt: &tokio::runtime::Runtime,
    ctx: &SessionContext,
) -> Vec<std::result::Result<(f64, Answer), String>> {
    (1..=22)
        .map(|q| {
            let sql = queries::query(q, args.scale);
            let run = || -> Result<Answer> {
                let batches = rt.block_on(async { ctx.sql(&sql).await?.collect().await })?;
                Answer::of_batches(&batches)
            };
            let out = repeat(args.runs, run).map_err(|e| e.to_string());
            eprintln!("  q{q}: {}", out.as_ref().map_or_else(Clone::clone, |(ms, _)| format!("{ms:.1} ms")));
            out
        })
        .collect()
}

/// [`timed`], but a query whose first run is slow is not repeated.
fn repeat(runs: usize, mut f: impl FnMut() -> Result<Answer>) -> Result<(f64, Answer)> {
    let t = Instant::now();
    let answer = f()?;
    let first = t.elapsed();
    if first > SLOW_QUERY {
        return Ok((first.as_secs_f64() * 1e3, answer));
    }
    let (ms, _) = timed(runs.saturating_sub(1).max(1), &mut f)?;
    Ok((ms, answer))
}

/// Random customers: the keys of the point, range and indexed queries.
fn customer_keys(args: &TpchArgs, customers: i64) -> Vec<i64> {
    let mut rng = StdRng::seed_from_u64(42);
    (0..args.point_queries).map(|_| rng.random_range(1..=customers.max(1))).collect()
}

/// The small queries every engine runs, each with the parameter values of
/// every execution (`?` is the first, `?2` the second): a point query, a
/// 100-row key range and an indexed equality on the customers' keys, a
/// point query on lineitem (the table of 6M rows per scale unit: 3M at
/// scale 0.5), and `count(*)` of lineitem.
pub(super) fn lookups(args: &TpchArgs, tables: &[Table]) -> Vec<Lookup> {
    let keys = customer_keys(args, rows_of(tables, "customer"));
    let orders = rows_of(tables, "orders").max(1);
    let each = |f: &dyn Fn(i64) -> Vec<i64>| keys.iter().map(|&k| f(k)).collect::<Vec<_>>();
    vec![
        Lookup {
            metric: "point_query",
            sql: "SELECT c_name, c_acctbal FROM customer WHERE c_custkey = ?",
            params: each(&|k| vec![k]),
        },
        Lookup {
            metric: "range100_query",
            sql: "SELECT c_custkey, c_acctbal FROM customer WHERE c_custkey BETWEEN ? AND ?2",
            params: each(&|k| vec![k, k + 99]),
        },
        Lookup {
            metric: "indexed_query",
            sql: "SELECT o_orderkey, o_totalprice FROM orders WHERE o_custkey = ?",
            params: each(&|k| vec![k]),
        },
        Lookup {
            metric: "lineitem_point_query",
            sql: "SELECT l_quantity, l_extendedprice FROM lineitem WHERE l_orderkey = ? AND l_linenumber = 1",
            // Order keys are sparse: the generator's key of a random order.
            params: each(&|k| vec![OrderGenerator::make_order_key(k * 7919 % orders + 1)]),
        },
        Lookup { metric: "count_query", sql: "SELECT count(*) FROM lineitem", params: vec![Vec::new(); 20] },
    ]
}

/// One small query and the parameters of each of its executions.
pub(super) struct Lookup {
    /// Reported as `{metric}_us` (and `_text_us`, `_prepared_us`).
    pub metric: &'static str,
    pub sql: &'static str,
    pub params: Vec<Vec<i64>>,
}

impl Lookup {
    /// The statement with `params` written into its text.
    fn text(&self, params: &[i64]) -> String {
        let mut text = self.sql.to_string();
        if let Some(second) = params.get(1) {
            text = text.replace("?2", &second.to_string());
        }
        if let Some(first) = params.first() {
            text = text.replace('?', &first.to_string());
        }
        text
    }

    /// Microseconds per execution of `t`'s loop.
    fn per_query(&self, t: Instant) -> f64 {
        t.elapsed().as_secs_f64() * 1e6 / self.params.len().max(1) as f64
    }
}

fn rows_of(tables: &[Table], name: &str) -> i64 {
    tables.iter().find(|t| t.name == name).map_or(0, |t| t.rows() as i64)
}

pub fn basalt(args: &TpchArgs, tables: &[Table], dir: &Path) -> Result<Measured> {
    fresh(dir)?;
    // 64 KiB blocks, not the default 4 KiB: a zero-copy scan hands out one
    // block per batch and pays a few µs per block, and a 4 KiB block holds
    // 17 lineitem rows (35,498 blocks at sf 0.1: 160 ms to scan one column,
    // 23 ms with 64 KiB blocks; docs/BENCHMARKS-history.md, issue 16).
    let mut opts = Options::default().block_cache_bytes(args.cache_mib << 20).block_bytes_target(BLOCK_BYTES);
    if args.settled_zstd {
        opts = opts.settled_compression(basalt::Compression::Zstd);
    }
    let db = Arc::new(Db::open(dir, opts)?);
    let started = Instant::now();
    for t in tables {
        let table = db.create_table(t.name, t.schema.clone(), t.key, TableOptions::default())?;
        // Loaded as a user loads a data set (`basalt load` does the same):
        // one bulk load per table, the indexes made after it; the rows
        // land where they settle (compressed with `--settled-zstd`).
        table.bulk_load(t.batches.iter().cloned())?;
        for (name, column) in t.indexes {
            table.create_index(name, &[column], IndexOptions::default())?;
        }
    }
    db.flush()?;
    db.wait_for_background_work()?;
    let load_s = started.elapsed().as_secs_f64();
    // Each tree's SSTs (a table, an index), from the MANIFEST's files.
    let mut trees: Vec<(String, u64)> = Vec::new();
    for f in basalt::inspect::files(&db) {
        match trees.iter_mut().find(|(tree, _)| *tree == f.tree) {
            Some((_, bytes)) => *bytes += f.size,
            None => trees.push((f.tree, f.size)),
        }
    }
    let rt = runtime()?;
    let ctx = basalt_datafusion::session(db.clone());
    let (queries, lookups) = if args.sizes_only {
        (Measured::not_run(), Vec::new())
    } else {
        (datafusion_queries(args, &rt, &ctx), basalt_lookups(args, tables, &rt, &ctx)?)
    };
    drop(ctx);
    // Bytes on disk once closed: the SSTs by tree, and the rest (WAL,
    // MANIFEST, options) as `other`.
    db.close()?;
    let sst: u64 = trees.iter().map(|(_, b)| b).sum();
    trees.push(("other".into(), du(dir).saturating_sub(sst)));
    Ok(Measured {
        engine: "basalt".into(),
        load_s,
        queries,
        lookups,
        options: format!(
            "DataFusion 55.2 over Basalt, {} KiB blocks, block cache {} MiB, 2 partitions{}",
            BLOCK_BYTES >> 10,
            args.cache_mib,
            if args.settled_zstd { ", settled tables zstd" } else { "" }
        ),
        bytes: trees,
    })
}

/// Basalt's small queries, three ways each.
fn basalt_lookups(
    args: &TpchArgs,
    tables: &[Table],
    rt: &tokio::runtime::Runtime,
    ctx: &SessionContext,
) -> Result<Vec<(String, f64)>> {
    let mut measured = Vec::new();
    for lookup in lookups(args, tables) {
        let metric = lookup.metric;
        // Three ways: DataFusion's plan of new text each time (parse,
        // plan, optimize, execute), `basalt_datafusion::query` of new text
        // each time (prepared on the spot; the direct path where the shape
        // allows), and one prepared statement executed with parameters.
        let t = Instant::now();
        let mut rows = 0;
        for params in &lookup.params {
            rows += rt
                .block_on(async { ctx.sql(&lookup.text(params)).await?.collect().await })?
                .iter()
                .map(datafusion::arrow::array::RecordBatch::num_rows)
                .sum::<usize>();
        }
        measured.push((format!("{metric}_us"), lookup.per_query(t)));
        let t = Instant::now();
        let mut text_rows = 0;
        for params in &lookup.params {
            text_rows += rt.block_on(basalt_datafusion::query(ctx, &lookup.text(params), &[]))?.num_rows();
        }
        measured.push((format!("{metric}_text_us"), lookup.per_query(t)));
        let prepared =
            rt.block_on(basalt_datafusion::prepare(ctx, &lookup.sql.replace("?2", "$2").replace('?', "$1")))?;
        let t = Instant::now();
        let mut prepared_rows = 0;
        for params in &lookup.params {
            let params: Vec<ScalarValue> = params.iter().map(|&v| ScalarValue::Int64(Some(v))).collect();
            prepared_rows += rt.block_on(prepared.execute(&params))?.num_rows();
        }
        measured.push((format!("{metric}_prepared_us"), lookup.per_query(t)));
        if text_rows != rows || prepared_rows != rows {
            return Err(format!(
                "{metric}: {rows} rows planned, {text_rows} as text, {prepared_rows} prepared"
            )
            .into());
        }
    }
    Ok(measured)
}

pub fn parquet(args: &TpchArgs, dir: &Path, load_s: f64) -> Result<Measured> {
    let rt = runtime()?;
    let ctx = SessionContext::new();
    for name in ["region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem"] {
        let path = dir.join(format!("{name}.parquet"));
        let path = path.to_str().ok_or("parquet path is not UTF-8")?.to_string();
        rt.block_on(ctx.register_parquet(name, &path, ParquetReadOptions::default()))?;
    }
    let queries = if args.sizes_only { Measured::not_run() } else { datafusion_queries(args, &rt, &ctx) };
    let bytes = ["region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem"]
        .into_iter()
        .map(|name| (name.to_string(), du(&dir.join(format!("{name}.parquet")))))
        .collect();
    Ok(Measured {
        engine: "parquet".into(),
        load_s,
        queries,
        lookups: Vec::new(),
        options: "DataFusion 55.2 over Parquet files (uncompressed, page statistics), 2 partitions".into(),
        bytes,
    })
}

pub fn sqlite(args: &TpchArgs, tables: &[Table], path: &Path) -> Result<Measured> {
    let _ = std::fs::remove_file(path);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut conn = rusqlite::Connection::open(path)?;
    let kib = args.cache_mib << 10;
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA cache_size = -{kib}; PRAGMA mmap_size = {};",
        crate::engine::SQLITE_MMAP_BYTES
    ))?;
    let started = Instant::now();
    for t in tables {
        let columns: Vec<String> = t
            .schema
            .fields()
            .iter()
            .map(|f| format!("{} {}", f.name(), data::sqlite_type(f.data_type())))
            .collect();
        conn.execute_batch(&format!(
            "CREATE TABLE {} ({}, PRIMARY KEY ({}))",
            t.name,
            columns.join(", "),
            t.key.join(", ")
        ))?;
        let tx = conn.transaction()?;
        {
            let marks = vec!["?"; t.schema.fields().len()].join(", ");
            let mut insert = tx.prepare(&format!("INSERT INTO {} VALUES ({marks})", t.name))?;
            for b in &t.batches {
                for r in 0..b.num_rows() {
                    let values: Vec<rusqlite::types::Value> =
                        b.columns().iter().map(|c| data::sqlite_value(c.as_ref(), r)).collect();
                    insert.execute(rusqlite::params_from_iter(values))?;
                }
            }
        }
        tx.commit()?;
        for (name, column) in t.indexes {
            conn.execute_batch(&format!("CREATE INDEX {name} ON {} ({column})", t.name))?;
        }
    }
    // SQLite's query planner advice: statistics for the optimizer.
    conn.execute_batch("ANALYZE")?;
    let load_s = started.elapsed().as_secs_f64();
    let bytes = vec![("file".to_string(), du(path))];
    if args.sizes_only {
        return Ok(Measured {
            engine: "sqlite".into(),
            load_s,
            queries: Measured::not_run(),
            lookups: Vec::new(),
            options: "SQLite (bundled), journal off".into(),
            bytes,
        });
    }
    let limit = Duration::from_secs(args.sqlite_limit_s);
    let queries = (1..=22)
        .map(|q| {
            let sql = queries::for_sqlite(&queries::query(q, args.scale));
            let out = repeat(args.runs, || sqlite_answer(&conn, &sql, limit)).map_err(|e| e.to_string());
            eprintln!("  q{q}: {}", out.as_ref().map_or_else(Clone::clone, |(ms, _)| format!("{ms:.1} ms")));
            out
        })
        .collect();
    let mut lookups = Vec::new();
    for lookup in super::engines::lookups(args, tables) {
        let mut stmt = conn.prepare(&lookup.sql.replace("?2", "?"))?;
        let t = Instant::now();
        for params in &lookup.params {
            let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
            while rows.next()?.is_some() {}
        }
        lookups.push((format!("{}_us", lookup.metric), lookup.per_query(t)));
    }
    Ok(Measured {
        engine: "sqlite".into(),
        load_s,
        queries,
        lookups,
        options: format!(
            "SQLite (bundled), cache {} MiB, mmap, ANALYZE, prepared statements for lookups",
            args.cache_mib
        ),
        bytes,
    })
}

/// Runs `sql`, interrupting it after `limit` (a watchdog thread).
fn sqlite_answer(conn: &rusqlite::Connection, sql: &str, limit: Duration) -> Result<Answer> {
    let interrupt = conn.get_interrupt_handle();
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if finished.recv_timeout(limit) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
            interrupt.interrupt();
        }
    });
    let answer = sqlite_rows(conn, sql, limit);
    drop(done);
    let _ = watchdog.join();
    answer
}

fn sqlite_rows(conn: &rusqlite::Connection, sql: &str, limit: Duration) -> Result<Answer> {
    let mut stmt = conn.prepare(sql)?;
    let n = stmt.column_count();
    let mut rows = stmt.query([]).map_err(|e| not_finished(&e, limit))?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(|e| not_finished(&e, limit))? {
        let mut cells = Vec::with_capacity(n);
        for i in 0..n {
            cells.push(match row.get_ref(i)? {
                rusqlite::types::ValueRef::Null => Cell::Null,
                rusqlite::types::ValueRef::Integer(v) => Cell::Num(v as f64),
                rusqlite::types::ValueRef::Real(v) => Cell::Num(v),
                rusqlite::types::ValueRef::Text(t) | rusqlite::types::ValueRef::Blob(t) => {
                    Cell::Text(String::from_utf8_lossy(t).into_owned())
                }
            });
        }
        out.push(cells);
    }
    Ok(Answer { rows: out })
}

fn not_finished(e: &rusqlite::Error, limit: Duration) -> String {
    if e.sqlite_error_code() == Some(rusqlite::ErrorCode::OperationInterrupted) {
        format!("not finished in {} s", limit.as_secs())
    } else {
        e.to_string()
    }
}
