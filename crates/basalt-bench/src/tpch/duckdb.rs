//! DuckDB on its own tables, through its Python package in a child
//! process: the Parquet files are loaded into DuckDB tables (`CREATE TABLE
//! … AS SELECT * FROM read_parquet(…)`), then each query runs once to warm
//! up and answer, and `runs` times timed. The child prints one JSON object.
//! Bytes on disk: the database file (and WAL) after `CHECKPOINT`, split
//! into its used blocks, its free blocks and the rest (the header); and
//! each table written by DuckDB as zstd Parquet (`parquet-zstd`).

use std::path::Path;
use std::process::Command;

use super::answers::{Answer, Cell};
use super::data::Table;
use super::{Measured, TpchArgs, fresh, median, queries};
use crate::engine::Result;

const SCRIPT: &str = r#"
import json, os, statistics, sys, tempfile, time
import duckdb

parquet_dir, db_path, runs, sizes_only = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
tables = ["region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem"]
given = json.load(sys.stdin)
queries, lookups = given["queries"], given["lookups"]
con = duckdb.connect(db_path)
# Its progress bar would print to stdout, which carries the JSON.
con.execute("SET enable_progress_bar = false")
started = time.perf_counter()
for name in tables:
    con.execute(f"CREATE TABLE {name} AS SELECT * FROM read_parquet('{parquet_dir}/{name}.parquet')")
# The keys and index the small queries use, as SQLite and Basalt have them
# (DuckDB's advice: ART indexes for highly selective lookups).
con.execute("CREATE UNIQUE INDEX customer_key ON customer (c_custkey)")
con.execute("CREATE UNIQUE INDEX lineitem_key ON lineitem (l_orderkey, l_linenumber)")
con.execute("CREATE INDEX orders_custkey ON orders (o_custkey)")
load_s = time.perf_counter() - started
con.execute("CHECKPOINT")
size = lambda p: os.path.getsize(p) if os.path.exists(p) else 0
file_bytes, wal_bytes = size(db_path), size(db_path + ".wal")
block, used, free = con.execute("SELECT block_size, used_blocks, free_blocks FROM pragma_database_size()").fetchone()
bytes_ = [["used blocks", used * block], ["free blocks", free * block],
          ["header", file_bytes - (used + free) * block], ["wal", wal_bytes]]

def cell(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return float(v)

out = {"load_s": load_s, "version": duckdb.__version__, "queries": [], "bytes": bytes_}
for sql in ([] if sizes_only else queries):
    try:
        t = time.perf_counter()
        rows = con.execute(sql).fetchall()
        first = time.perf_counter() - t
        times = []
        if first < 5:
            for _ in range(runs):
                t = time.perf_counter()
                con.execute(sql).fetchall()
                times.append(time.perf_counter() - t)
        else:
            times = [first]
        out["queries"].append({"ms": [x * 1e3 for x in times], "rows": [[cell(v) for v in r] for r in rows]})
    except Exception as e:
        out["queries"].append({"error": str(e)})
# The small queries, each a prepared statement executed with its
# parameters (the Python API prepares and caches a statement with
# parameters per connection).
out["lookups"] = []
for lookup in ([] if sizes_only else lookups):
    sql = lookup["sql"].replace("?2", "$2").replace("?", "$1")
    t = time.perf_counter()
    for params in lookup["params"]:
        con.execute(sql, params).fetchall()
    us = (time.perf_counter() - t) * 1e6 / max(1, len(lookup["params"]))
    out["lookups"].append([lookup["metric"] + "_us", us])
# The same tables as zstd Parquet, DuckDB's writer.
zstd = tempfile.mkdtemp()
out["parquet_zstd"] = []
for name in tables:
    path = f"{zstd}/{name}.parquet"
    con.execute(f"COPY {name} TO '{path}' (FORMAT parquet, COMPRESSION zstd)")
    out["parquet_zstd"].append([name, os.path.getsize(path)])
    os.remove(path)
os.rmdir(zstd)
print(json.dumps(out))
"#;

/// DuckDB's measurements, and the bytes of its zstd Parquet files
/// (`parquet-zstd`, no queries).
pub fn run(
    args: &TpchArgs,
    tables: &[Table],
    parquet_dir: &Path,
    dir: &Path,
) -> Result<(Measured, Measured)> {
    fresh(dir)?;
    let queries: Vec<String> = (1..=22).map(|q| queries::query(q, args.scale)).collect();
    let lookups: Vec<serde_json::Value> = super::engines::lookups(args, tables)
        .into_iter()
        .map(|l| serde_json::json!({"metric": l.metric, "sql": l.sql, "params": l.params}))
        .collect();
    let mut child = Command::new(&args.python)
        .arg("-c")
        .arg(SCRIPT)
        .arg(parquet_dir)
        .arg(dir.join("tpch.duckdb"))
        .arg(args.runs.max(1).to_string())
        .arg(if args.sizes_only { "1" } else { "0" })
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: {e} (DuckDB runs in Python: pip install duckdb)", args.python))?;
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().ok_or("no stdin")?;
        let given = serde_json::json!({"queries": queries, "lookups": lookups});
        stdin.write_all(serde_json::to_string(&given)?.as_bytes())?;
    }
    let output = child.wait_with_output()?;
    if !output.status.success() {
        return Err(
            format!("the DuckDB child failed ({}); is the duckdb package installed?", output.status).into()
        );
    }
    // The JSON is the last line (anything DuckDB printed comes before it).
    let stdout = String::from_utf8_lossy(&output.stdout);
    let v: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())?;
    let mut results = Vec::new();
    if args.sizes_only {
        results = Measured::not_run();
    }
    for (i, q) in v["queries"].as_array().ok_or("no queries in DuckDB's output")?.iter().enumerate() {
        let out = if let Some(e) = q["error"].as_str() {
            Err(e.to_string())
        } else {
            let mut ms: Vec<f64> = q["ms"]
                .as_array()
                .map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect())
                .unwrap_or_default();
            let rows = q["rows"]
                .as_array()
                .map(|rows| {
                    rows.iter()
                        .map(|r| {
                            r.as_array().map(|r| r.iter().map(Cell::of_json).collect()).unwrap_or_default()
                        })
                        .collect()
                })
                .unwrap_or_default();
            Ok((median(&mut ms), Answer { rows }))
        };
        eprintln!(
            "  q{}: {}",
            i + 1,
            out.as_ref().map_or_else(Clone::clone, |(ms, _)| format!("{ms:.1} ms"))
        );
        results.push(out);
    }
    let version = v["version"].as_str().unwrap_or("?");
    let zstd = Measured {
        engine: "parquet-zstd".into(),
        load_s: f64::NAN,
        queries: Measured::not_run(),
        lookups: Vec::new(),
        options: format!("the tables written by DuckDB {version} as Parquet, COMPRESSION zstd"),
        bytes: parts(&v["parquet_zstd"]),
    };
    let duckdb = Measured {
        engine: "duckdb".into(),
        load_s: v["load_s"].as_f64().unwrap_or(f64::NAN),
        queries: results,
        lookups: v["lookups"]
            .as_array()
            .map(|all| {
                all.iter().filter_map(|l| Some((l[0].as_str()?.to_string(), l[1].as_f64()?))).collect()
            })
            .unwrap_or_default(),
        options: format!(
            "DuckDB {} (Python), its own tables, ART indexes for the small queries, prepared small queries, default threads",
            v["version"].as_str().unwrap_or("?")
        ),
        bytes: parts(&v["bytes"]),
    };
    Ok((duckdb, zstd))
}

/// `[[name, bytes], …]` of the child's JSON.
fn parts(v: &serde_json::Value) -> Vec<(String, u64)> {
    v.as_array()
        .map(|all| all.iter().filter_map(|p| Some((p[0].as_str()?.to_string(), p[1].as_u64()?))).collect())
        .unwrap_or_default()
}
