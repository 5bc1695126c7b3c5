//! Issue 60: deleting a contiguous key range. One table `t` (`id` Int64
//! key, `qty` Int64, `price` Float64, a [`PAYLOAD_BYTES`]-byte binary
//! `payload`) loaded with rows `0..n`; then the middle tenth of the rows,
//! `[0.45 n, 0.55 n)`, is deleted, by three stores in turn, each in a
//! fresh directory with the same rows:
//!
//! - `basalt`: one `Table::delete_range` (one WAL entry, one range
//!   tombstone);
//! - `basalt-rows`: `Table::delete` of the range's keys, [`DELETE_BATCH_ROWS`]
//!   keys a call, as a user without range deletes would;
//! - `sqlite`: `DELETE FROM t WHERE id >= ?1 AND id < ?2` (autocommit).
//!
//! Measured, in this order ([`phases::run_store`]):
//!
//! 1. **Before**: bytes on disk once the load is settled, a count of the
//!    range, gets of keys in it, a scan across it (from half a range before
//!    it to half a range after).
//! 2. **The delete**: the time until the call returns (`delete_ms`).
//! 3. **At once**: a count of the range (must be 0), gets of the same keys
//!    (none found), a scan of the range (no row) and across it (only the
//!    rows around it); bytes on disk.
//! 4. **Settled** (Basalt: `Db::flush` and the background work, whose
//!    compaction thread drops the files a tombstone covers; SQLite: a WAL
//!    checkpoint): bytes on disk, Basalt's `Stats::files_dropped_by_range_deletes`
//!    and `Stats::range_tombstones`, and the reads of step 3 again.
//! 5. **Compacted** (Basalt: `Table::compact`; SQLite: `VACUUM`): its time,
//!    bytes on disk, the same statistics, and the reads of step 3 again.
//! 6. **Repeated**: each other tenth of the table around the middle one
//!    (up to [`RANGES_MAX`] ranges in all, nearest first) deleted the same
//!    way, each acknowledged time recorded and its count checked (0):
//!    `delete_p50_ms`, `delete_p99_ms` over every range (the p99 of nine
//!    is their slowest).
//!
//! Every read is checked: counts, the ids and columns of every row a get
//! or a scan returns. Basalt's two stores run one after the other in one
//! job (the first closed and removed before the second opens), so neither
//! pays for the other's background work, in an order that alternates with
//! the parent's run; the parent rotates the jobs of Basalt and SQLite.

mod basalt;
mod phases;
mod sqlite;

use std::path::Path;

use super::{Job, Sink};
use crate::datagen::{self, ValuePool};
use crate::engine::{Kind, Result};

/// Bytes of each row's `payload`.
pub const PAYLOAD_BYTES: usize = 32;
/// Rows per transaction of the load.
pub const LOAD_BATCH_ROWS: u64 = 10_000;
/// Keys per `Table::delete` call of the row-by-row store.
pub const DELETE_BATCH_ROWS: u64 = 10_000;
/// Ranges deleted in all: the middle tenth and the tenths around it.
pub const RANGES_MAX: usize = 9;
/// Timed gets per state when the job names no count.
pub const GETS_DEFAULT: u64 = 10_000;

/// The engine name of Basalt's row-by-row store.
pub const ROWS_ENGINE: &str = "basalt-rows";

/// One row as written.
#[derive(Debug, Clone)]
pub struct Rec {
    pub id: i64,
    pub qty: i64,
    pub price: f64,
    pub payload: Vec<u8>,
}

impl Rec {
    fn new() -> Rec {
        Rec { id: 0, qty: 0, price: 0.0, payload: Vec::with_capacity(PAYLOAD_BYTES) }
    }

    /// Makes this row `id`.
    fn fill(&mut self, pool: &ValuePool, id: u64) {
        self.id = id as i64;
        self.qty = qty_of(id);
        self.price = price_of(id);
        pool.fill(id, 0, PAYLOAD_BYTES, &mut self.payload);
    }
}

fn qty_of(id: u64) -> i64 {
    (datagen::mix64(id) >> 33) as i64
}

fn price_of(id: u64) -> f64 {
    id as f64 * 0.25
}

/// A row as read, borrowed from the engine.
#[derive(Debug, Clone, Copy)]
pub struct RowView<'a> {
    pub id: i64,
    pub qty: i64,
    pub price: f64,
    pub payload: &'a [u8],
}

impl RowView<'_> {
    /// Whether this is row `id` as loaded (the payload's length and header).
    fn is(&self, id: i64) -> bool {
        let n = id as u64;
        self.id == id
            && self.qty == qty_of(n)
            && self.price.to_bits() == price_of(n).to_bits()
            && self.payload.len() == PAYLOAD_BYTES
            && datagen::value_header(self.payload) == Some((n, 0))
    }
}

/// What Basalt reports of its files and tombstones.
#[derive(Debug, Clone, Copy, Default)]
pub struct TombstoneStats {
    /// `Stats::files_dropped_by_range_deletes`.
    pub files_dropped: u64,
    /// `Stats::range_tombstones`.
    pub range_tombstones: usize,
}

/// A store of table `t` that deletes a key range its own way.
pub trait RangeStore {
    /// Inserts `rows` in one transaction.
    fn load(&mut self, rows: &[Rec]) -> Result<()>;
    /// Makes every write durable and waits for background work.
    fn settle(&mut self) -> Result<()>;
    /// Deletes every row with `lo <= id < hi`; returns once the delete is
    /// acknowledged (committed, without fsync, as every write here).
    fn delete(&mut self, lo: i64, hi: i64) -> Result<()>;
    /// Rows with `lo <= id < hi`.
    fn count(&mut self, lo: i64, hi: i64) -> Result<u64>;
    /// The row of `id`, handed to `visit`; whether there is one.
    fn get(&mut self, id: i64, visit: &mut dyn FnMut(RowView<'_>)) -> Result<bool>;
    /// Every row with `lo <= id < hi`, in key order, every column read;
    /// returns how many.
    fn scan(&mut self, lo: i64, hi: i64, visit: &mut dyn FnMut(RowView<'_>)) -> Result<u64>;
    /// Compacts: afterwards the files hold only the rows left.
    fn compact(&mut self) -> Result<()>;
    /// Basalt's statistics (`None` for SQLite).
    fn tombstones(&self) -> Option<TombstoneStats>;
}

/// Whether `kind` has a store here.
pub fn supports(kind: Kind) -> bool {
    matches!(kind, Kind::Basalt | Kind::Sqlite)
}

/// Runs the workload for `job`'s engine in `dir`; see the module docs.
pub fn run(job: &Job, dir: &Path, sink: &mut Sink) -> Result<()> {
    let cfg = job.config(true);
    let plan = phases::Plan::new(job.scale, job.ops, job.seed)?;
    let pool = ValuePool::new(job.seed);
    match job.engine {
        Kind::Basalt => {
            // The two stores' order alternates with the parent's run.
            for rows in [!job.run.is_multiple_of(2), job.run.is_multiple_of(2)] {
                let mut own = Sink::new(job);
                if rows {
                    ROWS_ENGINE.clone_into(&mut own.template.engine);
                }
                own.template.env.engine_options = basalt::options(&cfg, rows);
                run_in(&dir.join(if rows { "rows" } else { "range" }), &mut own, |d| {
                    let mut store = basalt::BasaltStore::open(d, &cfg, rows)?;
                    phases::run_store(&plan, &pool, &mut store, d)
                })?;
                sink.records.extend(own.records);
            }
        }
        Kind::Sqlite => {
            sink.template.env.engine_options = sqlite::options(&cfg);
            run_in(&dir.join("sqlite"), sink, |d| {
                let mut store = sqlite::SqliteStore::open(d, &cfg)?;
                phases::run_store(&plan, &pool, &mut store, d)
            })?;
        }
        other => return Err(format!("the range-delete workload has no store for {}", other.name()).into()),
    }
    Ok(())
}

/// Runs `measure` in a new directory `dir` (the store is closed when it
/// returns), records what it measured into `sink`, and removes `dir`.
fn run_in(
    dir: &Path,
    sink: &mut Sink,
    measure: impl FnOnce(&Path) -> Result<Vec<phases::Measure>>,
) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let measured = measure(dir);
    std::fs::remove_dir_all(dir)?;
    for m in measured? {
        sink.put(&m.metric, m.value, m.unit);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
