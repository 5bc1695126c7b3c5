//! Seed 003 (MarbleDB's Arrow claim): rows of `(id Int64 primary key, name
//! Utf8, value Float64)`. Every engine runs the row-by-row path: each row
//! stored as a key (the 8-byte id) and a value (the `f64`, then the name),
//! written in batches of 1,000 and scanned back decoding `value`. Basalt
//! also runs the columnar path: the same rows written as Arrow record
//! batches into a table and scanned as Arrow arrays (distribution
//! `columnar`), so the ratio of the two paths is measured in one run.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use basalt::{Db, Options, ScanOptions, TableOptions};

use super::{Job, Sink, load, rate};
use crate::engine::{self, Result};

/// Rows per written batch.
pub const BATCH_ROWS: u64 = 1000;
/// The shortest time a warm scan measurement repeats for.
const SCAN_MIN: Duration = Duration::from_millis(500);

fn name(id: u64) -> String {
    format!("name-{id:08}")
}

fn value(id: u64) -> f64 {
    id as f64 * 1.5
}

/// Runs the row path for every engine, and the columnar path for Basalt.
pub fn run(job: &Job, dir: &Path, sink: &mut Sink) -> Result<()> {
    row_path(job, &dir.join("rows"), sink)?;
    if job.engine == engine::Kind::Basalt {
        columnar_path(job, &dir.join("columnar"), sink)?;
    }
    Ok(())
}

fn row_path(job: &Job, dir: &Path, sink: &mut Sink) -> Result<()> {
    let n = job.scale;
    let engine = engine::open(job.engine, dir, &job.config(true))?;
    let stats = load(engine.as_ref(), n, BATCH_ROWS as usize, |i, (k, v)| {
        k.clear();
        k.extend_from_slice(&i.to_be_bytes());
        v.clear();
        v.extend_from_slice(&value(i).to_le_bytes());
        v.extend_from_slice(name(i).as_bytes());
    })?;
    sink.put_in("arrow", "row", 1, "insert_rows_per_s", rate(n, stats.took), "rows/s");
    engine.settle()?;
    let mut reader = engine.reader()?;
    let expected: f64 = (0..n).map(value).sum();
    let mut scan = |sink_metric: &str, sink: &mut Sink, min: Duration| -> Result<()> {
        let (mut rows, mut passes) = (0u64, 0u32);
        let t = Instant::now();
        while passes == 0 || t.elapsed() < min {
            let mut sum = 0.0;
            rows += reader.scan(&[], None, usize::MAX, &mut |_, v| {
                sum += v.get(..8).map_or(f64::NAN, |b| f64::from_le_bytes(b.try_into().unwrap_or_default()));
            })? as u64;
            if (sum - expected).abs() > expected * 1e-9 {
                return Err(format!("arrow: row scan summed {sum}, expected {expected}").into());
            }
            passes += 1;
        }
        sink.put_in("arrow", "row", 1, sink_metric, rate(rows, t.elapsed()), "rows/s");
        Ok(())
    };
    scan("scan_first_rows_per_s", sink, Duration::ZERO)?;
    scan("scan_rows_per_s", sink, SCAN_MIN)?;
    Ok(())
}

fn columnar_path(job: &Job, dir: &Path, sink: &mut Sink) -> Result<()> {
    let n = job.scale;
    let options = Options { block_cache_bytes: job.cache_bytes, ..Options::default() };
    let db = Db::open(dir, options)?;
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("value", DataType::Float64, false),
    ]));
    let table = db.create_table("seed003", schema.clone(), &["id"], TableOptions::default())?;
    let t = Instant::now();
    let mut from = 0;
    while from < n {
        let ids: Vec<u64> = (from..n.min(from + BATCH_ROWS)).collect();
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(ids.iter().map(|&i| i as i64))),
            Arc::new(StringArray::from_iter_values(ids.iter().map(|&i| name(i)))),
            Arc::new(Float64Array::from_iter_values(ids.iter().map(|&i| value(i)))),
        ];
        table.write(&RecordBatch::try_new(schema.clone(), cols)?)?;
        from += ids.len() as u64;
    }
    sink.put_in("arrow", "columnar", 1, "insert_rows_per_s", rate(n, t.elapsed()), "rows/s");
    db.flush()?;
    db.wait_for_background_work()?;
    db.sync_wal()?;
    let expected: f64 = (0..n).map(value).sum();
    for (metric, min) in [("scan_first_rows_per_s", Duration::ZERO), ("scan_rows_per_s", SCAN_MIN)] {
        let (mut rows, mut passes) = (0u64, 0u32);
        let t = Instant::now();
        while passes == 0 || t.elapsed() < min {
            let mut sum = 0.0;
            for batch in table.scan(ScanOptions::default())? {
                let batch = batch?;
                let col =
                    batch.column(2).as_any().downcast_ref::<Float64Array>().ok_or("value is not Float64")?;
                rows += col.len() as u64;
                sum += col.values().iter().sum::<f64>();
            }
            if (sum - expected).abs() > expected * 1e-9 {
                return Err(format!("arrow: columnar scan summed {sum}, expected {expected}").into());
            }
            passes += 1;
        }
        sink.put_in("arrow", "columnar", 1, metric, rate(rows, t.elapsed()), "rows/s");
    }
    db.close()?;
    Ok(())
}
