//! Times column changes of a wide table as its history grows (issue 56,
//! item 9): a table of `COLUMNS` Int64 columns takes one `Table::alter` of
//! `N` renames (each a schema version), for each `N` given, and the
//! database is reopened after each. Prints the time of each alter and
//! reopen and the MANIFEST's size. For before/after runs:
//!
//! ```text
//! cargo run --release -p basalt --example alter_history -- 1000 60 240
//! ```
use std::sync::Arc;
use std::time::Instant;

use arrow_schema::{DataType, Field, Schema};
use basalt::{ColumnChange, Db, Options, TableOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|s| s.parse().ok()).collect();
    let (columns, rounds) = match args.split_first() {
        Some((&c, rest)) if !rest.is_empty() => (c, rest.to_vec()),
        _ => (1000, vec![60, 240]),
    };
    let dir = tempfile::tempdir()?;
    let fields: Vec<Field> =
        (0..columns).map(|i| Field::new(format!("c{i}"), DataType::Int64, i != 0)).collect();
    let db = Db::open(dir.path(), Options::default())?;
    db.create_table("wide", Arc::new(Schema::new(fields)), &["c0"], TableOptions::default())?;
    drop(db);
    let mut versions = 0;
    for n in rounds {
        let db = Db::open(dir.path(), Options::default())?;
        let table = db.table("wide")?;
        // Column c1 renamed to r1 and back, n times in all.
        let changes: Vec<ColumnChange> = (0..n)
            .map(|i| {
                let (from, to) = if (versions + i) % 2 == 0 { ("c1", "r1") } else { ("r1", "c1") };
                ColumnChange::Rename { from: from.into(), to: to.into() }
            })
            .collect();
        let started = Instant::now();
        table.alter(&changes)?;
        let alter_ms = started.elapsed().as_secs_f64() * 1e3;
        versions += n;
        drop(table);
        db.close()?;
        let started = Instant::now();
        let db = Db::open(dir.path(), Options::default())?;
        let reopen_ms = started.elapsed().as_secs_f64() * 1e3;
        let manifest_bytes: u64 = std::fs::read_dir(dir.path())?
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("MANIFEST"))
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum();
        println!(
            "columns {columns} renames {n} (versions now {versions}): alter {alter_ms:.1} ms, reopen {reopen_ms:.1} ms, MANIFEST {manifest_bytes} bytes"
        );
        db.close()?;
    }
    Ok(())
}
