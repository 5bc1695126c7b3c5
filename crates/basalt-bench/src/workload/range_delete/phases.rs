//! The plan (which rows are loaded, which ranges deleted, which keys read)
//! and the phases every store runs, in the module docs' order.

use std::path::Path;
use std::time::{Duration, Instant};

use rand::Rng;

use super::{LOAD_BATCH_ROWS, RANGES_MAX, RangeStore, Rec, TombstoneStats};
use crate::datagen::{self, ValuePool};
use crate::engine::Result;
use crate::measure::Latencies;
use crate::workload::{disk_bytes, rate};

/// The random stream of the keys the gets read.
const GETS_STREAM: u64 = 60;
/// Tables smaller than this have no tenth to delete with rows on both
/// sides of it.
const ROWS_MIN: u64 = 100;

/// What one store runs: rows `0..n`, the ranges deleted, the keys read.
#[derive(Debug, Clone)]
pub struct Plan {
    pub n: u64,
    /// `[lo, hi)` of each delete: the middle tenth first, then the tenths
    /// around it, nearest first, alternating below and above.
    pub ranges: Vec<(i64, i64)>,
    /// The scan across the middle range: from half a range below it to
    /// half a range above.
    pub across: (i64, i64),
    /// Keys inside the middle range that the gets read.
    pub gets: Vec<i64>,
}

impl Plan {
    pub fn new(n: u64, gets: u64, seed: u64) -> Result<Plan> {
        if n < ROWS_MIN {
            return Err(format!("range-delete: the table needs at least {ROWS_MIN} rows, not {n}").into());
        }
        let width = (n / 10) as i64;
        let lo = (n / 2) as i64 - width / 2;
        let hi = lo + width;
        let mut ranges = vec![(lo, hi)];
        for k in 1..RANGES_MAX as i64 {
            let below = lo - k * width;
            let above = hi + (k - 1) * width;
            if below >= 0 {
                ranges.push((below, below + width));
            }
            if above + width <= n as i64 {
                ranges.push((above, above + width));
            }
        }
        ranges.truncate(RANGES_MAX);
        let mut rng = datagen::rng(seed, GETS_STREAM);
        let gets = (0..gets.max(1)).map(|_| rng.random_range(lo..hi)).collect();
        Ok(Plan { n, ranges, across: (lo - width / 2, hi + width / 2), gets })
    }

    /// The middle range, the one every read is measured over.
    pub fn middle(&self) -> (i64, i64) {
        self.ranges[0]
    }

    /// Rows in each deleted range.
    pub fn width(&self) -> u64 {
        let (lo, hi) = self.middle();
        (hi - lo) as u64
    }
}

/// One measured value.
#[derive(Debug, Clone)]
pub struct Measure {
    pub metric: String,
    pub value: f64,
    pub unit: &'static str,
}

/// The measurements of one store, in the order they were taken.
#[derive(Debug, Default)]
struct Measures(Vec<Measure>);

impl Measures {
    fn put(&mut self, metric: &str, value: f64, unit: &'static str) {
        self.0.push(Measure { metric: metric.to_string(), value, unit });
    }

    fn ms(&mut self, metric: &str, took: Duration) {
        self.put(metric, took.as_secs_f64() * 1e3, "ms");
    }

    fn us(&mut self, metric: &str, took: Duration) {
        self.put(metric, took.as_secs_f64() * 1e6, "us");
    }

    fn latency(&mut self, prefix: &str, lat: &mut Latencies) {
        self.put(&format!("{prefix}_p50_us"), lat.percentile_us(50.0), "us");
        self.put(&format!("{prefix}_p99_us"), lat.percentile_us(99.0), "us");
    }

    /// Bytes under `dir`, and Basalt's statistics, as `<state>_…`.
    fn space(&mut self, state: &str, dir: &Path, engine: Option<TombstoneStats>) {
        self.put(&format!("disk_{state}_bytes"), disk_bytes(dir) as f64, "bytes");
        if let Some(s) = engine {
            self.put(&format!("sst_files_{state}"), sst_files(dir) as f64, "files");
            self.put(&format!("files_dropped_{state}"), s.files_dropped as f64, "files");
            self.put(&format!("range_tombstones_{state}"), s.range_tombstones as f64, "tombstones");
        }
    }
}

/// Basalt's SSTs under `dir`.
fn sst_files(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries.flatten().filter(|e| e.file_name().to_string_lossy().ends_with(".sst")).count()
}

/// Loads the plan's rows into `store`, then runs every phase; returns
/// what was measured.
pub fn run_store(
    plan: &Plan,
    pool: &ValuePool,
    store: &mut dyn RangeStore,
    dir: &Path,
) -> Result<Vec<Measure>> {
    let mut m = Measures::default();
    let took = load(plan, pool, store)?;
    m.put("load_rows_per_s", rate(plan.n, took), "rows/s");
    m.space("before", dir, store.tombstones());
    reads(plan, store, "live", &mut m)?;

    let (lo, hi) = plan.middle();
    let mut acks = Latencies::new(1);
    let t = Instant::now();
    store.delete(lo, hi)?;
    let took = t.elapsed();
    acks.record(took);
    m.ms("delete_ms", took);
    reads(plan, store, "deleted", &mut m)?;
    m.space("deleted", dir, store.tombstones());

    let t = Instant::now();
    store.settle()?;
    m.ms("settle_ms", t.elapsed());
    m.space("settled", dir, store.tombstones());
    reads(plan, store, "settled", &mut m)?;
    let t = Instant::now();
    store.compact()?;
    m.ms("compact_ms", t.elapsed());
    m.space("compacted", dir, store.tombstones());
    reads(plan, store, "compacted", &mut m)?;

    for &(lo, hi) in &plan.ranges[1..] {
        let t = Instant::now();
        store.delete(lo, hi)?;
        acks.record(t.elapsed());
        check_count(store, lo, hi, 0, "after its delete")?;
    }
    m.put("delete_p50_ms", acks.percentile_us(50.0) / 1e3, "ms");
    m.put("delete_p99_ms", acks.percentile_us(99.0) / 1e3, "ms");
    m.put("delete_ranges", acks.len() as f64, "ranges");
    m.put("delete_rows_per_s", plan.width() as f64 / (acks.percentile_us(50.0) / 1e6).max(1e-9), "rows/s");
    Ok(m.0)
}

/// Loads rows `0..n` batch by batch and settles them; returns the time.
fn load(plan: &Plan, pool: &ValuePool, store: &mut dyn RangeStore) -> Result<Duration> {
    let mut batch: Vec<Rec> = Vec::with_capacity(LOAD_BATCH_ROWS as usize);
    let t = Instant::now();
    let mut id = 0;
    while id < plan.n {
        let end = (id + LOAD_BATCH_ROWS).min(plan.n);
        batch.resize_with((end - id) as usize, Rec::new);
        for (rec, i) in batch.iter_mut().zip(id..end) {
            rec.fill(pool, i);
        }
        store.load(&batch)?;
        id = end;
    }
    store.settle()?;
    Ok(t.elapsed())
}

fn check_count(store: &mut dyn RangeStore, lo: i64, hi: i64, want: u64, when: &str) -> Result<Duration> {
    let t = Instant::now();
    let n = store.count(lo, hi)?;
    let took = t.elapsed();
    if n == want {
        Ok(took)
    } else {
        Err(format!("range-delete: [{lo}, {hi}) counts {n} rows {when}, expected {want}").into())
    }
}

/// The reads of the middle range in `state` (`live`: before the delete):
/// its count, gets of the plan's keys, a scan of it and one across it.
fn reads(plan: &Plan, store: &mut dyn RangeStore, state: &str, m: &mut Measures) -> Result<()> {
    let live = state == "live";
    let (lo, hi) = plan.middle();
    let took = check_count(store, lo, hi, if live { plan.width() } else { 0 }, state)?;
    m.us(&format!("count_{state}_us"), took);

    let mut lat = Latencies::new(1);
    for &id in &plan.gets {
        let mut right = false;
        let t = Instant::now();
        let found = store.get(id, &mut |row| right = row.is(id))?;
        lat.record(t.elapsed());
        if found != live || (found && !right) {
            return Err(format!("range-delete: a get of {id} ({state}) found {found}, right {right}").into());
        }
    }
    m.latency(&format!("get_{state}"), &mut lat);

    let deleted = (!live).then_some((lo, hi));
    let expected = if live { plan.width() } else { 0 };
    let took = checked_scan(store, (lo, hi), deleted, expected, state)?;
    m.ms(&format!("scan_range_{state}_ms"), took);
    let (from, to) = plan.across;
    let expected = (to - from) as u64 - if live { 0 } else { plan.width() };
    let took = checked_scan(store, plan.across, deleted, expected, state)?;
    m.ms(&format!("scan_across_{state}_ms"), took);
    m.put(&format!("scan_across_{state}_rows"), expected as f64, "rows");
    Ok(())
}

/// Scans `[lo, hi)`, checks each row (in key order, as loaded, not in
/// `deleted`) and that there are `expected`; returns the scan's time.
fn checked_scan(
    store: &mut dyn RangeStore,
    (lo, hi): (i64, i64),
    deleted: Option<(i64, i64)>,
    expected: u64,
    state: &str,
) -> Result<Duration> {
    let (mut wrong, mut last) = (0u64, lo - 1);
    let gone = |id: i64| deleted.is_some_and(|(a, b)| (a..b).contains(&id));
    let t = Instant::now();
    let rows = store.scan(lo, hi, &mut |row| {
        wrong += u64::from(!row.is(row.id) || row.id <= last || row.id >= hi || gone(row.id));
        last = row.id;
    })?;
    let took = t.elapsed();
    if rows == expected && wrong == 0 {
        Ok(took)
    } else {
        Err(format!(
            "range-delete: a scan of [{lo}, {hi}) ({state}) gave {rows} rows, {wrong} wrong, expected {expected}"
        )
        .into())
    }
}
