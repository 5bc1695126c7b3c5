//! Issue 43: changing the columns of a loaded table (part of `arrow`'s
//! columnar path, on its bulk-loaded table once compacted). Times
//! `Table::add_column` (nullable, then NOT NULL with a default),
//! `rename_column` and `drop_column` on the whole table, and an
//! `add_column` after writes left rows in the memtables (it flushes them
//! first); then what reading through the older schema version costs until
//! compaction rewrites the files: point reads and a two-column scan before
//! any change, after the changes (every file of the older version), and
//! after `Table::compact`. Every read is checked (the added column reads
//! its default in every old row).

use std::time::{Duration, Instant};

use arrow_array::{Array, Float64Array, RecordBatch};
use arrow_schema::{DataType, Field};
use basalt::{KeyValue, ScanOptions, Table};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{Sink, rate};
use crate::engine::Result;

/// Point reads per measurement.
const GETS: u64 = 20_000;
/// The default the NOT NULL column is added with.
const SCORE: f64 = 0.5;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Runs the phases on `table`, holding `n` rows whose `value` is `value(id)`.
pub fn run(table: &Table, n: u64, value: fn(u64) -> f64, sink: &mut Sink) -> Result<()> {
    let put = |sink: &mut Sink, metric: &str, v: f64, unit: &str| {
        sink.put_in("arrow", "columnar", 1, metric, v, unit);
    };
    let took = gets(table, n, value, false)?;
    put(sink, "get_before_alter_per_s", rate(GETS, took), "ops/s");
    let took = scan(table, n, value, false)?;
    put(sink, "scan_before_alter_rows_per_s", rate(n, took), "rows/s");

    let t = Instant::now();
    table.add_column(Field::new("extra", DataType::Int64, true), None)?;
    put(sink, "add_column_ms", ms(t.elapsed()), "ms");
    let t = Instant::now();
    let default = std::sync::Arc::new(Float64Array::from(vec![SCORE]));
    table.add_column(Field::new("score", DataType::Float64, false), Some(default))?;
    put(sink, "add_column_default_ms", ms(t.elapsed()), "ms");
    let t = Instant::now();
    table.rename_column("name", "label")?;
    put(sink, "rename_column_ms", ms(t.elapsed()), "ms");
    let t = Instant::now();
    table.drop_column("extra")?;
    put(sink, "drop_column_ms", ms(t.elapsed()), "ms");

    let took = gets(table, n, value, true)?;
    put(sink, "get_altered_per_s", rate(GETS, took), "ops/s");
    let took = scan(table, n, value, true)?;
    put(sink, "scan_altered_rows_per_s", rate(n, took), "rows/s");

    // Rows in the memtables: the change flushes them first.
    let written = (n / 100).max(1);
    let schema = table.schema();
    let ids: Vec<i64> = (0..written as i64).collect();
    let columns: Vec<arrow_array::ArrayRef> = vec![
        std::sync::Arc::new(arrow_array::Int64Array::from(ids.clone())),
        std::sync::Arc::new(arrow_array::StringArray::from(
            ids.iter().map(|i| format!("name-{i:08}")).collect::<Vec<_>>(),
        )),
        std::sync::Arc::new(Float64Array::from(ids.iter().map(|&i| value(i as u64)).collect::<Vec<_>>())),
        std::sync::Arc::new(Float64Array::from(vec![SCORE; ids.len()])),
    ];
    table.write(&RecordBatch::try_new(schema, columns)?)?;
    let t = Instant::now();
    table.add_column(Field::new("late", DataType::Int32, true), None)?;
    put(sink, "add_column_after_writes_ms", ms(t.elapsed()), "ms");

    table.compact()?;
    let took = gets(table, n, value, true)?;
    put(sink, "get_altered_compacted_per_s", rate(GETS, took), "ops/s");
    let took = scan(table, n, value, true)?;
    put(sink, "scan_altered_compacted_rows_per_s", rate(n, took), "rows/s");
    Ok(())
}

/// Times `GETS` point reads of random ids, each checked (`value`, and
/// `score` once added).
fn gets(table: &Table, n: u64, value: fn(u64) -> f64, altered: bool) -> Result<Duration> {
    let mut rng = StdRng::seed_from_u64(43);
    let t = Instant::now();
    for _ in 0..GETS {
        let id = rng.random_range(0..n);
        let row = table.get(&[KeyValue::I64(id as i64)])?.ok_or_else(|| format!("alter: no row {id}"))?;
        let float = |name: &str| -> Result<f64> {
            let column = row.column_by_name(name).ok_or_else(|| format!("alter: no column {name}"))?;
            let column = column.as_any().downcast_ref::<Float64Array>().ok_or("alter: not Float64")?;
            Ok(column.value(0))
        };
        // Values stored and read back: equal to the bit.
        let same = |a: f64, b: f64| a.to_bits() == b.to_bits();
        if !same(float("value")?, value(id)) || (altered && !same(float("score")?, SCORE)) {
            return Err(format!("alter: row {id} read wrong").into());
        }
    }
    Ok(t.elapsed())
}

/// Times a warm scan of `value` (and `score` once added; the first scan,
/// which reads the blocks into the cache, untimed), checking their sums.
fn scan(table: &Table, n: u64, value: fn(u64) -> f64, altered: bool) -> Result<Duration> {
    scan_once(table, n, value, altered)?;
    scan_once(table, n, value, altered)
}

fn scan_once(table: &Table, n: u64, value: fn(u64) -> f64, altered: bool) -> Result<Duration> {
    let columns: Vec<String> =
        if altered { vec!["value".into(), "score".into()] } else { vec!["value".into()] };
    let t = Instant::now();
    let (mut sum, mut scores, mut rows) = (0.0, 0.0, 0u64);
    for batch in table.scan(ScanOptions::default().projection(Some(columns)))? {
        let batch = batch?;
        rows += batch.num_rows() as u64;
        for (i, column) in batch.columns().iter().enumerate() {
            let values = column.as_any().downcast_ref::<Float64Array>().ok_or("alter: not Float64")?;
            let s: f64 = values.values().iter().sum();
            if i == 0 { sum += s } else { scores += s }
        }
    }
    let took = t.elapsed();
    let expected: f64 = (0..n).map(value).sum();
    // A sum of halves: exact below 2^53.
    let scores_ok = !altered || scores.to_bits() == (SCORE * n as f64).to_bits();
    if rows != n || (sum - expected).abs() > expected * 1e-9 || !scores_ok {
        return Err(format!("alter: the scan read {rows} rows summing {sum} and {scores}").into());
    }
    Ok(took)
}
