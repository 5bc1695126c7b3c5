//! Seed 003's scenario, measured honestly: Arrow batches of `(id, name,
//! value)` written into a table, then full scans (from the memtable, after
//! flush and compaction, after a reopen), a range scan after the flush, and
//! the same rows read one `get` at a time, so the ratio is real.
//!
//! ```text
//! cargo run --release --example arrow_tables -- [--rows N] [--batch B]
//! ```

use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use basalt::{Db, KeyValue, Options, ScanOptions, Table, TableOptions};
use clap::Parser;

#[derive(Parser)]
#[command(about = "Arrow batch writes and columnar scans against row-by-row reads")]
struct Args {
    /// Rows in total.
    #[arg(long, default_value_t = 100_000)]
    rows: i64,
    /// Rows per written batch.
    #[arg(long, default_value_t = 1000)]
    batch: i64,
}

fn batch(schema: &Arc<Schema>, from: i64, n: i64) -> RecordBatch {
    let ids: Vec<i64> = (from..from + n).collect();
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids.clone())),
        Arc::new(StringArray::from(ids.iter().map(|i| format!("name-{i:08}")).collect::<Vec<_>>())),
        Arc::new(Float64Array::from(ids.iter().map(|&i| i as f64 * 1.5).collect::<Vec<_>>())),
    ];
    RecordBatch::try_new(schema.clone(), cols).expect("a valid batch")
}

/// Rows scanned, seconds, and (zero-copy, merged) rows.
fn scan(t: &Table, opts: ScanOptions<'_>) -> basalt::Result<(usize, f64, (u64, u64))> {
    let start = Instant::now();
    let mut s = t.scan(opts)?;
    let mut rows = 0;
    let mut checksum = 0.0;
    for b in s.by_ref() {
        let b = b?;
        rows += b.num_rows();
        let v = b.column(2).as_any().downcast_ref::<Float64Array>().expect("value column");
        checksum += v.values().iter().sum::<f64>();
    }
    std::hint::black_box(checksum);
    Ok((rows, start.elapsed().as_secs_f64(), s.rows_by_path()))
}

fn line(what: &str, rows: usize, secs: f64, bytes_per_row: f64, paths: Option<(u64, u64)>) {
    let extra = paths.map_or(String::new(), |(z, m)| format!("  (zero-copy {z}, merged {m})"));
    println!(
        "{what:<34} {rows:>10} rows {secs:>8.3} s {:>14.0} rows/s {:>9.1} MB/s{extra}",
        rows as f64 / secs,
        rows as f64 * bytes_per_row / secs / 1e6
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("db");
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("value", DataType::Float64, false),
    ]));
    // id 8 B + name 13 B + value 8 B of payload per row.
    let row_bytes = 29.0;
    println!("basalt arrow tables: {} rows in batches of {}", args.rows, args.batch);

    let db = Db::open(&path, Options::default())?;
    let t = db.create_table("seed003", schema.clone(), &["id"], TableOptions::default())?;
    let start = Instant::now();
    let mut at = 0;
    while at < args.rows {
        let n = args.batch.min(args.rows - at);
        t.write(&batch(&schema, at, n))?;
        at += n;
    }
    line("write Arrow batches", args.rows as usize, start.elapsed().as_secs_f64(), row_bytes, None);

    let (rows, secs, p) = scan(&t, ScanOptions::default())?;
    line("full scan (memtable)", rows, secs, row_bytes, Some(p));

    let start = Instant::now();
    db.flush()?;
    db.compact_range::<&[u8]>(..)?;
    line("flush + compact", args.rows as usize, start.elapsed().as_secs_f64(), row_bytes, None);

    let (rows, secs, p) = scan(&t, ScanOptions::default())?;
    line("full scan, SSTs (cold cache)", rows, secs, row_bytes, Some(p));
    let (rows, secs, p) = scan(&t, ScanOptions::default())?;
    line("full scan, SSTs (warm cache)", rows, secs, row_bytes, Some(p));
    let scan_rate = rows as f64 / secs;

    let (lo, hi) = (args.rows / 4, args.rows / 4 * 3);
    let range = ScanOptions::default().range((
        std::ops::Bound::Included(vec![KeyValue::I64(lo)]),
        std::ops::Bound::Excluded(vec![KeyValue::I64(hi)]),
    ));
    let (rows, secs, p) = scan(&t, range)?;
    line("range scan (half the rows)", rows, secs, row_bytes, Some(p));

    let gets = args.rows.min(200_000);
    let start = Instant::now();
    for i in 0..gets {
        let id = (i * 7919) % args.rows;
        let row = t.get(&[KeyValue::I64(id)])?.ok_or("a written row is missing")?;
        std::hint::black_box(row.num_rows());
    }
    let secs = start.elapsed().as_secs_f64();
    line("row-by-row get (random ids)", gets as usize, secs, row_bytes, None);
    let get_rate = gets as f64 / secs;
    println!("scan / get throughput ratio: {:.0}x", scan_rate / get_rate);

    drop(t);
    db.close()?;
    let db = Db::open(&path, Options::default())?;
    let t = db.table("seed003")?;
    let (rows, secs, p) = scan(&t, ScanOptions::default())?;
    line("full scan after reopen", rows, secs, row_bytes, Some(p));
    Ok(())
}
