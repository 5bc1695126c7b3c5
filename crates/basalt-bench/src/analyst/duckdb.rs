//! DuckDB on its own table, through its Python package in a child process
//! that stays up for the whole run: the harness sends one statement per
//! line and the child answers with its time (measured in the child, so
//! the pipe is not counted) and, when asked, its rows. Staying up lets
//! the harness interleave DuckDB's runs with the other engines'.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use crate::engine::Result;
use crate::tpch::answers::{Answer, Cell};

const SCRIPT: &str = r#"
import datetime, json, sys, time
import duckdb

parquet, threads = sys.argv[1], int(sys.argv[2])
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
con.execute(f"SET threads = {threads}")
started = time.perf_counter()
quoted = parquet.replace("'", "''")
con.execute(f"CREATE TABLE flights AS SELECT * FROM read_parquet('{quoted}')")
load_s = time.perf_counter() - started

EPOCH = datetime.datetime(1970, 1, 1)

def cell(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    # A timestamp as µs since the epoch, as the harness reads Arrow's
    # (their texts differ in fractional digits).
    if isinstance(v, datetime.datetime):
        return (v.replace(tzinfo=None) - EPOCH) // datetime.timedelta(microseconds=1)
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return float(v)

print(json.dumps({"load_s": load_s, "version": duckdb.__version__}), flush=True)
for line in sys.stdin:
    asked = json.loads(line)
    try:
        t = time.perf_counter()
        rows = con.execute(asked["sql"]).fetchall()
        ms = (time.perf_counter() - t) * 1e3
        out = {"ms": ms}
        if asked["answer"]:
            out["rows"] = [[cell(v) for v in r] for r in rows]
    except Exception as e:
        out = {"error": str(e)}
    print(json.dumps(out), flush=True)
"#;

/// The running child.
pub struct DuckDb {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pub load_s: f64,
    pub version: String,
}

impl DuckDb {
    /// Starts the child and loads `parquet` into its table `flights`.
    pub fn start(python: &str, parquet: &Path, threads: usize) -> Result<DuckDb> {
        let mut child = Command::new(python)
            .arg("-c")
            .arg(SCRIPT)
            .arg(parquet)
            .arg(threads.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{python}: {e} (DuckDB runs in Python: pip install duckdb)"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut duck = DuckDb { child, stdin, stdout, load_s: f64::NAN, version: String::new() };
        let ready = duck.reply()?;
        duck.load_s = ready["load_s"].as_f64().unwrap_or(f64::NAN);
        duck.version = ready["version"].as_str().unwrap_or("?").to_string();
        Ok(duck)
    }

    /// Runs `sql` once: its time in ms, and its rows when `answer`.
    pub fn run(&mut self, sql: &str, answer: bool) -> Result<(f64, Option<Answer>)> {
        let asked = serde_json::json!({"sql": sql, "answer": answer});
        writeln!(self.stdin, "{asked}")?;
        self.stdin.flush()?;
        let v = self.reply()?;
        if let Some(e) = v["error"].as_str() {
            return Err(format!("DuckDB: {e}").into());
        }
        let ms = v["ms"].as_f64().ok_or("DuckDB's reply has no time")?;
        let rows = v["rows"].as_array().map(|rows| Answer {
            rows: rows
                .iter()
                .map(|r| r.as_array().map(|r| r.iter().map(Cell::of_json).collect()).unwrap_or_default())
                .collect(),
        });
        Ok((ms, rows))
    }

    /// The child's next line, as JSON.
    fn reply(&mut self) -> Result<serde_json::Value> {
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            let status = self.child.wait()?;
            return Err(format!("the DuckDB child ended ({status}); is the duckdb package installed?").into());
        }
        Ok(serde_json::from_str(&line)?)
    }
}

impl Drop for DuckDb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
