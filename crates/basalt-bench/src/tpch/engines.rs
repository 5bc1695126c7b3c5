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

use super::answers::{Answer, Cell};
use super::data::{self, Table};
use super::{Measured, TpchArgs, fresh, queries, timed};
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

/// Keys for the point, range and indexed queries: random customers.
fn customer_keys(args: &TpchArgs, customers: i64) -> Vec<i64> {
    let mut rng = StdRng::seed_from_u64(42);
    (0..args.point_queries).map(|_| rng.random_range(1..=customers.max(1))).collect()
}

fn rows_of(tables: &[Table], name: &str) -> i64 {
    tables.iter().find(|t| t.name == name).map_or(0, |t| t.rows() as i64)
}

pub fn basalt(args: &TpchArgs, tables: &[Table], dir: &Path) -> Result<Measured> {
    fresh(dir)?;
    // 64 KiB blocks, not the default 4 KiB: a zero-copy scan hands out one
    // block per batch and pays a few µs per block, and a 4 KiB block holds
    // 17 lineitem rows (35,498 blocks at sf 0.1: 160 ms to scan one column,
    // 23 ms with 64 KiB blocks; docs/BENCHMARKS.md, issue 16).
    let opts = Options::default().block_cache_bytes(args.cache_mib << 20).block_bytes_target(BLOCK_BYTES);
    let db = Arc::new(Db::open(dir, opts)?);
    let started = Instant::now();
    for t in tables {
        let table = db.create_table(t.name, t.schema.clone(), t.key, TableOptions::default())?;
        for b in &t.batches {
            table.write(b)?;
        }
        for (name, column) in t.indexes {
            table.create_index(name, &[column], IndexOptions::default())?;
        }
    }
    db.flush()?;
    db.wait_for_background_work()?;
    let load_s = started.elapsed().as_secs_f64();
    let rt = runtime()?;
    let ctx = basalt_datafusion::session(db.clone());
    let queries = datafusion_queries(args, &rt, &ctx);
    let keys = customer_keys(args, rows_of(tables, "customer"));
    let mut lookups = Vec::new();
    let per_query = |t: Instant| t.elapsed().as_secs_f64() * 1e6 / keys.len().max(1) as f64;
    for (metric, sql) in lookup_queries() {
        let text = |k: i64| sql.replace("?2", &(k + 99).to_string()).replace('?', &k.to_string());
        // Three ways: DataFusion's plan of new text each time (parse,
        // plan, optimize, execute), `basalt_datafusion::query` of new text
        // each time (prepared on the spot; the direct path where the shape
        // allows), and one prepared statement executed with parameters.
        let t = Instant::now();
        let mut rows = 0;
        for &k in &keys {
            rows += rt
                .block_on(async { ctx.sql(&text(k)).await?.collect().await })?
                .iter()
                .map(datafusion::arrow::array::RecordBatch::num_rows)
                .sum::<usize>();
        }
        lookups.push((metric.to_string(), per_query(t)));
        let t = Instant::now();
        let mut text_rows = 0;
        for &k in &keys {
            text_rows += rt.block_on(basalt_datafusion::query(&ctx, &text(k), &[]))?.num_rows();
        }
        lookups.push((metric.replace("_us", "_text_us"), per_query(t)));
        let prepared =
            rt.block_on(basalt_datafusion::prepare(&ctx, &sql.replace("?2", "$2").replace('?', "$1")))?;
        let t = Instant::now();
        let mut prepared_rows = 0;
        for &k in &keys {
            let params = [ScalarValue::Int64(Some(k)), ScalarValue::Int64(Some(k + 99))];
            let params = &params[..prepared.parameter_count()];
            prepared_rows += rt.block_on(prepared.execute(params))?.num_rows();
        }
        lookups.push((metric.replace("_us", "_prepared_us"), per_query(t)));
        if text_rows != rows || prepared_rows != rows {
            return Err(format!(
                "{metric}: {rows} rows planned, {text_rows} as text, {prepared_rows} prepared"
            )
            .into());
        }
    }
    drop(ctx);
    Ok(Measured {
        engine: "basalt".into(),
        load_s,
        queries,
        lookups,
        options: format!(
            "DataFusion 55.2 over Basalt, {} KiB blocks, block cache {} MiB, 2 partitions",
            BLOCK_BYTES >> 10,
            args.cache_mib
        ),
    })
}

/// The point, range and indexed lookups: `?` is the key, `?2` the key + 99.
fn lookup_queries() -> [(&'static str, &'static str); 3] {
    [
        ("point_query_us", "SELECT c_name, c_acctbal FROM customer WHERE c_custkey = ?"),
        ("range100_query_us", "SELECT c_custkey, c_acctbal FROM customer WHERE c_custkey BETWEEN ? AND ?2"),
        ("indexed_query_us", "SELECT o_orderkey, o_totalprice FROM orders WHERE o_custkey = ?"),
    ]
}

pub fn parquet(args: &TpchArgs, dir: &Path, load_s: f64) -> Result<Measured> {
    let rt = runtime()?;
    let ctx = SessionContext::new();
    for name in ["region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem"] {
        let path = dir.join(format!("{name}.parquet"));
        let path = path.to_str().ok_or("parquet path is not UTF-8")?.to_string();
        rt.block_on(ctx.register_parquet(name, &path, ParquetReadOptions::default()))?;
    }
    let queries = datafusion_queries(args, &rt, &ctx);
    Ok(Measured {
        engine: "parquet".into(),
        load_s,
        queries,
        lookups: Vec::new(),
        options: "DataFusion 55.2 over Parquet files (uncompressed, page statistics), 2 partitions".into(),
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
    let limit = Duration::from_secs(args.sqlite_limit_s);
    let queries = (1..=22)
        .map(|q| {
            let sql = queries::for_sqlite(&queries::query(q, args.scale));
            let out = repeat(args.runs, || sqlite_answer(&conn, &sql, limit)).map_err(|e| e.to_string());
            eprintln!("  q{q}: {}", out.as_ref().map_or_else(Clone::clone, |(ms, _)| format!("{ms:.1} ms")));
            out
        })
        .collect();
    let keys = customer_keys(args, rows_of(tables, "customer"));
    let mut lookups = Vec::new();
    for (metric, sql) in lookup_queries() {
        let mut stmt = conn.prepare(&sql.replace("?2", "?"))?;
        let two = sql.contains("?2");
        let t = Instant::now();
        for &k in &keys {
            let mut rows = if two { stmt.query([k, k + 99])? } else { stmt.query([k])? };
            while rows.next()?.is_some() {}
        }
        lookups.push((metric.to_string(), t.elapsed().as_secs_f64() * 1e6 / keys.len().max(1) as f64));
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
