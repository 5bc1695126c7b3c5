//! DuckDB on its own tables, through its Python package in a child
//! process: the Parquet files are loaded into DuckDB tables (`CREATE TABLE
//! … AS SELECT * FROM read_parquet(…)`), then each query runs once to warm
//! up and answer, and `runs` times timed. The child prints one JSON object.

use std::path::Path;
use std::process::Command;

use super::answers::{Answer, Cell};
use super::data::Table;
use super::{Measured, TpchArgs, fresh, median, queries};
use crate::engine::Result;

const SCRIPT: &str = r#"
import json, statistics, sys, time
import duckdb

parquet_dir, db_path, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
given = json.load(sys.stdin)
queries, lookups = given["queries"], given["lookups"]
con = duckdb.connect(db_path)
# Its progress bar would print to stdout, which carries the JSON.
con.execute("SET enable_progress_bar = false")
started = time.perf_counter()
for name in ["region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem"]:
    con.execute(f"CREATE TABLE {name} AS SELECT * FROM read_parquet('{parquet_dir}/{name}.parquet')")
# The keys and index the small queries use, as SQLite and Basalt have them
# (DuckDB's advice: ART indexes for highly selective lookups).
con.execute("CREATE UNIQUE INDEX customer_key ON customer (c_custkey)")
con.execute("CREATE UNIQUE INDEX lineitem_key ON lineitem (l_orderkey, l_linenumber)")
con.execute("CREATE INDEX orders_custkey ON orders (o_custkey)")
load_s = time.perf_counter() - started

def cell(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return float(v)

out = {"load_s": load_s, "version": duckdb.__version__, "queries": []}
for sql in queries:
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
for lookup in lookups:
    sql = lookup["sql"].replace("?2", "$2").replace("?", "$1")
    t = time.perf_counter()
    for params in lookup["params"]:
        con.execute(sql, params).fetchall()
    us = (time.perf_counter() - t) * 1e6 / max(1, len(lookup["params"]))
    out["lookups"].append([lookup["metric"] + "_us", us])
print(json.dumps(out))
"#;

pub fn run(args: &TpchArgs, tables: &[Table], parquet_dir: &Path, dir: &Path) -> Result<Measured> {
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
                        .map(|r| r.as_array().map(|r| r.iter().map(cell).collect()).unwrap_or_default())
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
    Ok(Measured {
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
    })
}

fn cell(v: &serde_json::Value) -> Cell {
    match v {
        serde_json::Value::Null => Cell::Null,
        serde_json::Value::Number(n) => n.as_f64().map_or(Cell::Null, Cell::Num),
        serde_json::Value::String(s) => Cell::Text(s.clone()),
        serde_json::Value::Bool(b) => Cell::Text(b.to_string()),
        other => Cell::Text(other.to_string()),
    }
}
