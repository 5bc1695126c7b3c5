//! The result schema: one JSON object per line, `{"workload", "engine",
//! "scale", "distribution", "threads", "metric", "value", "unit", "env"}`,
//! so any run can be compared with any other by a script.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::engine::Result;
use crate::measure::Machine;

/// The environment of a measurement: machine, build, engine and settings.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Env {
    /// The machine and build.
    #[serde(flatten)]
    pub machine: Machine,
    /// The engine's version.
    pub engine_version: String,
    /// The engine's settings.
    pub engine_options: String,
    /// The harness's settings shared by all engines.
    pub harness: String,
    /// Runs whose median this value is.
    pub runs: usize,
}

/// One measured value.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    /// Workload (`omendb`, `marbledb`, `ycsb-a`…).
    pub workload: String,
    /// Engine name.
    pub engine: String,
    /// Rows (records) in the store.
    pub scale: u64,
    /// Key order or request distribution.
    pub distribution: String,
    /// Client threads.
    pub threads: usize,
    /// Stable metric name (docs/BENCHMARKS-history.md lists them all).
    pub metric: String,
    /// The value.
    pub value: f64,
    /// Its unit.
    pub unit: String,
    /// Where and how it was measured.
    pub env: Env,
    /// Query workloads (`resilientdb`): the kind of query (`eq`, `range`,
    /// `covering`, `count`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// Rows each query returns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_rows: Option<u64>,
    /// Rows and index entries each query read, by the engine's own
    /// counters (absent where the engine keeps none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_read: Option<f64>,
}

impl Record {
    /// Everything but the value and env: what identifies a measurement.
    pub fn key(&self) -> (String, String, u64, String, usize, String, Option<String>) {
        (
            self.workload.clone(),
            self.engine.clone(),
            self.scale,
            self.distribution.clone(),
            self.threads,
            self.metric.clone(),
            self.query.clone(),
        )
    }
}

/// Whether larger is better for `metric` (throughputs and ratios), or
/// smaller (latencies, memory, stalls); `None` for neither.
pub fn higher_is_better(metric: &str) -> Option<bool> {
    if metric.ends_with("_per_s") || metric == "throughput_kept_ratio" {
        Some(true)
    } else if metric.ends_with("_ns")
        || metric.ends_with("_us")
        || metric.ends_with("_ms")
        || metric.ends_with("_bytes")
        || metric.ends_with("_per_commit")
    {
        Some(false)
    } else {
        None
    }
}

/// Writes records as JSON lines.
pub fn write_jsonl(path: &Path, records: &[Record]) -> Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for r in records {
        serde_json::to_writer(&mut out, r)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}

/// Reads a JSON-lines file back (blank lines are skipped).
pub fn read_jsonl(path: &Path) -> Result<Vec<Record>> {
    let file = std::io::BufReader::new(std::fs::File::open(path)?);
    let mut records = Vec::new();
    for line in file.lines() {
        let line = line?;
        if !line.trim().is_empty() {
            records.push(serde_json::from_str(&line)?);
        }
    }
    Ok(records)
}

/// Collapses repeated runs into one record per measurement holding the
/// median value, in the order the measurements first appeared.
pub fn medians(runs: &[Record]) -> Vec<Record> {
    let mut order = Vec::new();
    let mut groups: BTreeMap<_, Vec<&Record>> = BTreeMap::new();
    for r in runs {
        let entry = groups.entry(r.key()).or_default();
        if entry.is_empty() {
            order.push(r.key());
        }
        entry.push(r);
    }
    order
        .into_iter()
        .filter_map(|k| {
            let group = groups.get(&k)?;
            let mut values: Vec<f64> = group.iter().map(|r| r.value).collect();
            values.sort_by(f64::total_cmp);
            let mut rec = group[0].clone();
            rec.value = values[values.len() / 2];
            rec.env.runs = values.len();
            Some(rec)
        })
        .collect()
}

/// Adds, for every peer's throughput or latency, the ratio by which Basalt
/// beats it (`basalt_speedup_<metric>`, unit `x`; above 1: Basalt wins).
pub fn add_speedups(records: &mut Vec<Record>) {
    let basalt: BTreeMap<_, f64> = records
        .iter()
        .filter(|r| r.engine == "basalt")
        .map(|r| {
            ((r.workload.clone(), r.scale, r.distribution.clone(), r.threads, r.metric.clone()), r.value)
        })
        .collect();
    let mut extra = Vec::new();
    for r in records.iter().filter(|r| r.engine != "basalt" && !r.metric.contains("speedup")) {
        let Some(higher) = higher_is_better(&r.metric) else { continue };
        if r.metric.ends_with("_bytes") {
            continue;
        }
        let key = (r.workload.clone(), r.scale, r.distribution.clone(), r.threads, r.metric.clone());
        let Some(&b) = basalt.get(&key) else { continue };
        let ratio = if higher { b / r.value } else { r.value / b };
        if ratio.is_finite() {
            let mut s = r.clone();
            s.metric = format!("basalt_speedup_{}", r.metric);
            s.value = ratio;
            s.unit = "x".to_string();
            extra.push(s);
        }
    }
    records.extend(extra);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(engine: &str, metric: &str, value: f64) -> Record {
        Record {
            workload: "omendb".into(),
            engine: engine.into(),
            scale: 10,
            distribution: "random".into(),
            threads: 1,
            metric: metric.into(),
            value,
            unit: "ops/s".into(),
            env: Env::default(),
            query: None,
            result_rows: None,
            rows_read: None,
        }
    }

    #[test]
    fn records_round_trip_through_jsonl() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("r.jsonl");
        let records = vec![rec("basalt", "get_ops_per_s", 1.5), rec("sqlite", "get_p99_us", 3.0)];
        write_jsonl(&path, &records).expect("write");
        let back = read_jsonl(&path).expect("read");
        assert_eq!(back.len(), 2);
        assert_eq!(back[1].metric, "get_p99_us");
        let line = std::fs::read_to_string(&path).expect("read");
        let v: serde_json::Value = serde_json::from_str(line.lines().next().expect("line")).expect("json");
        for field in
            ["workload", "engine", "scale", "distribution", "threads", "metric", "value", "unit", "env"]
        {
            assert!(v.get(field).is_some(), "missing {field}");
        }
        assert!(v["env"].get("cpu").is_some() && v["env"].get("engine_version").is_some());
    }

    #[test]
    fn medians_and_speedups() {
        let runs = vec![
            rec("basalt", "get_ops_per_s", 3.0),
            rec("basalt", "get_ops_per_s", 1.0),
            rec("basalt", "get_ops_per_s", 2.0),
            rec("sqlite", "get_ops_per_s", 1.0),
            rec("basalt", "get_p99_us", 2.0),
            rec("sqlite", "get_p99_us", 5.0),
            rec("basalt-fences", "get_ops_per_s", 0.5),
        ];
        let mut m = medians(&runs);
        assert_eq!(m.len(), 5);
        assert!((m[0].value - 2.0).abs() < 1e-12 && m[0].env.runs == 3);
        add_speedups(&mut m);
        let s: Vec<_> = m.iter().filter(|r| r.metric.starts_with("basalt_speedup")).collect();
        assert_eq!(s.len(), 3);
        assert!((s[0].value - 2.0).abs() < 1e-12, "throughput: basalt / peer");
        assert!((s[1].value - 2.5).abs() < 1e-12, "latency: peer / basalt");
        assert!(s[2].engine == "basalt-fences" && (s[2].value - 4.0).abs() < 1e-12, "model on / off");
    }
}
