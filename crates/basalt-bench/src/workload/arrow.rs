//! Seed 003 (MarbleDB's Arrow claim): rows of `(id Int64 primary key, name
//! Utf8, value Float64)`. Every engine runs the row-by-row path: each row
//! stored as a key (the 8-byte id) and a value (the `f64`, then the name),
//! written in batches of 1,000 and scanned back decoding `value`. Basalt
//! also runs the columnar path: the same rows written as Arrow record
//! batches into a table and scanned as Arrow arrays (distribution
//! `columnar`), so the ratio of the two paths is measured in one run.
//! Before the timed scans an untimed one checks every row whole (key,
//! value, name); the timed scans check the sum of `value`. The bulk-loaded
//! copy is then written again row by row and scanned while every row lies
//! in two runs, and again once compacted; then its columns change
//! (`alter.rs`). With a memory
//! limit both paths' scans run again under it, each store reopened.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use basalt::{CmpOp, Db, Filter, Options, Predicate, ScanOptions, TableOptions};

use super::{Job, Opener, Sink, end_limited, load, rate, start_limited};
use crate::engine::{self, Engine, Reader, Result};
use crate::memory;

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

/// The table of the columnar path.
const TABLE: &str = "seed003";
/// The table the same rows are bulk-loaded into.
const BULK_TABLE: &str = "seed003_bulk";

/// Runs the row path for every engine, and the columnar path for Basalt.
pub fn run(job: &Job, open: &Opener<'_>, dir: &Path, sink: &mut Sink) -> Result<()> {
    let (rows_dir, columnar_dir) = (dir.join("rows"), dir.join("columnar"));
    let engine = open(&rows_dir)?;
    row_load(job, engine.as_ref(), sink)?;
    row_scans(job, engine.as_ref(), sink)?;
    drop(engine);
    let columnar = job.engine == engine::Kind::Basalt;
    if columnar {
        columnar_load(job, &columnar_dir, sink)?;
        columnar_scans(job, &columnar_dir, sink)?;
    }
    if let Some(engine) = start_limited(job, open, &rows_dir, sink)? {
        row_scans(job, engine.as_ref(), sink)?;
        drop(engine);
        if columnar {
            memory::evict(&columnar_dir)?;
            columnar_scans(job, &columnar_dir, sink)?;
        }
        end_limited(job, sink);
    }
    Ok(())
}

fn row_value(id: u64, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&value(id).to_le_bytes());
    out.extend_from_slice(name(id).as_bytes());
}

fn row_load(job: &Job, engine: &dyn Engine, sink: &mut Sink) -> Result<()> {
    let n = job.scale;
    let stats = load(engine, n, BATCH_ROWS as usize, |i, (k, v)| {
        k.clear();
        k.extend_from_slice(&i.to_be_bytes());
        row_value(i, v);
    })?;
    sink.put_in("arrow", "row", 1, "insert_rows_per_s", rate(n, stats.took), "rows/s");
    engine.settle()
}

fn row_scans(job: &Job, engine: &dyn Engine, sink: &mut Sink) -> Result<()> {
    let n = job.scale;
    let mut reader = engine.reader()?;
    let expected: f64 = (0..n).map(value).sum();
    let scan = |reader: &mut dyn Reader, sink_metric: &str, sink: &mut Sink, min: Duration| -> Result<()> {
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
    scan(reader.as_mut(), "scan_first_rows_per_s", sink, Duration::ZERO)?;
    let (mut next, mut bad, mut want) = (0u64, 0u64, Vec::new());
    reader.scan(&[], None, usize::MAX, &mut |k, v| {
        row_value(next, &mut want);
        bad += u64::from(k != next.to_be_bytes() || v != want.as_slice());
        next += 1;
    })?;
    if bad > 0 || next != n {
        return Err(format!("arrow: {bad} wrong rows of {next} scanned, {n} written").into());
    }
    scan(reader.as_mut(), "scan_rows_per_s", sink, SCAN_MIN)
}

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("value", DataType::Float64, false),
    ]))
}

/// The rows of the columnar path, `BATCH_ROWS` at a time, in key order.
fn batches(n: u64) -> impl Iterator<Item = Result<RecordBatch>> {
    (0..n).step_by(BATCH_ROWS as usize).map(move |from| {
        let ids: Vec<u64> = (from..n.min(from + BATCH_ROWS)).collect();
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(ids.iter().map(|&i| i as i64))),
            Arc::new(StringArray::from_iter_values(ids.iter().map(|&i| name(i)))),
            Arc::new(Float64Array::from_iter_values(ids.iter().map(|&i| value(i)))),
        ];
        Ok(RecordBatch::try_new(schema(), cols)?)
    })
}

fn columnar_options(job: &Job) -> Options {
    Options::default().block_cache_bytes(job.cache_bytes)
}

fn columnar_load(job: &Job, dir: &Path, sink: &mut Sink) -> Result<()> {
    let n = job.scale;
    let db = Db::open(dir, columnar_options(job))?;
    let schema = schema();
    let table = db.create_table(TABLE, schema.clone(), &["id"], TableOptions::default())?;
    let t = Instant::now();
    for batch in batches(n) {
        table.write(&batch?)?;
    }
    sink.put_in("arrow", "columnar", 1, "insert_rows_per_s", rate(n, t.elapsed()), "rows/s");
    db.flush()?;
    db.wait_for_background_work()?;
    db.sync_wal()?;
    // The same rows through `Table::bulk_load` into a table of their own
    // (straight to SSTs, durable when it returns), checked, then dropped.
    let bulk = db.create_table(BULK_TABLE, schema, &["id"], TableOptions::default())?;
    let t = Instant::now();
    let mut failed = None;
    let load = bulk.bulk_load(batches(n).map_while(|b| b.map_err(|e| failed = Some(e)).ok()))?;
    if let Some(e) = failed {
        return Err(e);
    }
    sink.put_in("arrow", "columnar", 1, "bulk_load_rows_per_s", rate(n, t.elapsed()), "rows/s");
    let loaded: usize = bulk
        .scan(ScanOptions::default().projection(Some(vec![])))?
        .map(|b| b.map_or(0, |b| b.num_rows()))
        .sum();
    if loaded as u64 != n || load.rows != n {
        return Err(format!(
            "arrow: bulk_load installed {} rows and scans {loaded}, {n} expected",
            load.rows
        )
        .into());
    }
    reloaded_scans(&db, &bulk, n, sink)?;
    super::alter::run(&bulk, n, value, sink)?;
    drop(bulk);
    db.drop_table(BULK_TABLE)?;
    db.close()?;
    Ok(())
}

/// Every row of the bulk-loaded table written again (upserts through
/// `Table::write`, as a user reloading a file does), then one-column scans
/// of it: the first, while each row lies in two runs (the older versions
/// in the bulk-loaded run under the newer), and warm ones after
/// `Table::compact` merged the runs. Each checks the sum of `value`.
fn reloaded_scans(db: &Db, table: &basalt::Table, n: u64, sink: &mut Sink) -> Result<()> {
    for batch in batches(n) {
        table.write(&batch?)?;
    }
    db.flush()?;
    let expected: f64 = (0..n).map(value).sum();
    let scan = || -> Result<Duration> {
        let t = Instant::now();
        let mut sum = 0.0;
        for batch in table.scan(ScanOptions::default().projection(Some(vec!["value".into()])))? {
            let batch = batch?;
            let col =
                batch.column(0).as_any().downcast_ref::<Float64Array>().ok_or("value is not Float64")?;
            sum += col.values().iter().sum::<f64>();
        }
        if (sum - expected).abs() > expected * 1e-9 {
            return Err(format!("arrow: scan of the reloaded table summed {sum}, expected {expected}").into());
        }
        Ok(t.elapsed())
    };
    let took = scan()?;
    sink.put_in("arrow", "columnar", 1, "scan_reloaded_rows_per_s", rate(n, took), "rows/s");
    table.compact()?;
    scan()?;
    let took = scan()?;
    sink.put_in("arrow", "columnar", 1, "scan_reloaded_compacted_rows_per_s", rate(n, took), "rows/s");
    Ok(())
}

/// Times a scan with a 1%-selective filter on `value` (which rises with
/// the key, so the zone maps rule out all but ~1% of the blocks), warm,
/// as rows of the table per second; checks the rows it returns.
fn filtered_scan(table: &basalt::Table, n: u64, sink: &mut Sink) -> Result<()> {
    let selected = (n / 100).max(1);
    let bound = value(selected);
    let literal: ArrayRef = Arc::new(Float64Array::from(vec![bound]));
    let filter = Filter::all(vec![Predicate::new("value", CmpOp::Lt, literal)]);
    let (mut table_rows, mut passes) = (0u64, 0u32);
    let t = Instant::now();
    while passes == 0 || t.elapsed() < SCAN_MIN {
        let opts = ScanOptions::default().projection(Some(vec!["value".into()])).filter(Some(filter.clone()));
        let mut got = 0u64;
        for batch in table.scan(opts)? {
            got += batch?.num_rows() as u64;
        }
        if got != selected {
            return Err(format!("arrow: the filtered scan gave {got} rows, {selected} expected").into());
        }
        table_rows += n;
        passes += 1;
    }
    sink.put_in(
        "arrow",
        "columnar",
        1,
        "scan_filtered_table_rows_per_s",
        rate(table_rows, t.elapsed()),
        "rows/s",
    );
    Ok(())
}

/// Reopens the columnar store and times its scans: the first, a check of
/// every row, then repeated warm scans.
fn columnar_scans(job: &Job, dir: &Path, sink: &mut Sink) -> Result<()> {
    let n = job.scale;
    let db = Db::open(dir, columnar_options(job))?;
    let table = db.table(TABLE)?;
    let expected: f64 = (0..n).map(value).sum();
    let timed = |metric: &str, min: Duration, sink: &mut Sink| -> Result<()> {
        let (mut rows, mut passes) = (0u64, 0u32);
        let t = Instant::now();
        while passes == 0 || t.elapsed() < min {
            let mut sum = 0.0;
            // One column, as an analytical query reads it.
            for batch in table.scan(ScanOptions::default().projection(Some(vec!["value".into()])))? {
                let batch = batch?;
                let col =
                    batch.column(0).as_any().downcast_ref::<Float64Array>().ok_or("value is not Float64")?;
                rows += col.len() as u64;
                sum += col.values().iter().sum::<f64>();
            }
            if (sum - expected).abs() > expected * 1e-9 {
                return Err(format!("arrow: columnar scan summed {sum}, expected {expected}").into());
            }
            passes += 1;
        }
        sink.put_in("arrow", "columnar", 1, metric, rate(rows, t.elapsed()), "rows/s");
        Ok(())
    };
    timed("scan_first_rows_per_s", Duration::ZERO, sink)?;
    let mut next = 0u64;
    for batch in table.scan(ScanOptions::default())? {
        let batch = batch?;
        let ids = batch.column(0).as_any().downcast_ref::<Int64Array>().ok_or("id is not Int64")?;
        let names = batch.column(1).as_any().downcast_ref::<StringArray>().ok_or("name is not Utf8")?;
        let values = batch.column(2).as_any().downcast_ref::<Float64Array>().ok_or("value is not Float64")?;
        for row in 0..batch.num_rows() {
            let id = next + row as u64;
            if ids.value(row) != id as i64
                || names.value(row) != name(id)
                || values.value(row).to_bits() != value(id).to_bits()
            {
                return Err(format!("arrow: columnar row {id} is wrong").into());
            }
        }
        next += batch.num_rows() as u64;
    }
    if next != n {
        return Err(format!("arrow: the columnar scan gave {next} rows, {n} written").into());
    }
    timed("scan_rows_per_s", SCAN_MIN, sink)?;
    filtered_scan(&table, n, sink)?;
    db.close()?;
    Ok(())
}
