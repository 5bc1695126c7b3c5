//! Times `Table::bulk_load` alone: `N` rows of the `basalt-bench arrow`
//! schema (an `Int64` key, a 13-byte `Utf8` name, a `Float64`) in batches
//! of 1,000, made before the clock starts, loaded into a new table. For
//! before/after runs of the bulk path and for `perf record`:
//!
//! ```text
//! cargo run --release -p basalt --example bulk_load_timing -- 1000000 [new-db-dir]
//! ```
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use basalt::{Db, Options, TableOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("value", DataType::Float64, false),
    ]));
    let batches: Vec<RecordBatch> = (0..n)
        .step_by(1000)
        .map(|from| {
            let ids: Vec<u64> = (from..n.min(from + 1000)).collect();
            let cols: Vec<ArrayRef> = vec![
                Arc::new(Int64Array::from_iter_values(ids.iter().map(|&i| i as i64))),
                Arc::new(StringArray::from_iter_values(ids.iter().map(|&i| format!("name-{i:08}")))),
                Arc::new(Float64Array::from_iter_values(ids.iter().map(|&i| i as f64 * 0.5))),
            ];
            RecordBatch::try_new(schema.clone(), cols)
        })
        .collect::<Result<_, _>>()?;
    // A new database: in the directory given (which must not hold one),
    // else in a temporary directory removed at the end.
    let temp = tempfile::tempdir()?;
    let dir = std::env::args().nth(2).map_or_else(|| temp.path().join("db"), std::path::PathBuf::from);
    let db = Db::open(&dir, Options::default().error_if_exists(true))?;
    let t = db.create_table("t", schema, &["id"], TableOptions::default())?;
    let start = Instant::now();
    let load = t.bulk_load(batches)?;
    let took = start.elapsed();
    println!(
        "{} rows in {:?}: {:.2} M rows/s, {} files, {} bytes",
        load.rows,
        took,
        n as f64 / took.as_secs_f64() / 1e6,
        load.files,
        load.bytes
    );
    Ok(())
}
